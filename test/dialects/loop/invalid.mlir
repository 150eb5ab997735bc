// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

loop.kernel "k" {
  loop.for %i = 0 to 4 step 0 {name = "i0"} {
  }
}
// CHECK: loop 'i0' has step 0, expected a positive step

// -----

loop.kernel "k" {
  loop.for %i = 8 to 4 step 1 {name = "i0"} {
  }
}
// CHECK: loop 'i0' has lower bound 8 above upper bound 4

// -----

loop.kernel "k" {
  loop.for %i = 0 to 4 step 1 {name = "i0", unroll = 0} {
  }
}
// CHECK: loop 'i0' has unroll factor 0, expected >= 1

// -----

loop.kernel "k" {
  loop.for %i = 0 to 4 step 1 {name = "i0", pipelined} {
  }
}
// CHECK: loop 'i0' has unknown annotation 'pipelined' (known: name, parallel, vectorize, unroll, reduction)

// -----

loop.kernel "k" {
  loop.for %i = 0 to 4 step 1 {name = "r0", reduction, parallel} {
  }
}
// CHECK: loop 'r0' is a reduction loop and cannot be parallel

// -----

loop.kernel "k" {
  loop.for %i = 0 to 4 step 1 {name = "i0"} {
    loop.for %j = 0 to 4 step 1 {name = "i0"} {
    }
  }
}
// CHECK: loop name 'i0' is used twice in kernel 'k'

// -----

loop.kernel "k" {
}
loop.kernel "k" {
}
// CHECK: kernel name 'k' is used twice

// -----

func.func @f() {
  loop.for %i = 0 to 4 step 1 {name = "i0"} {
  }
  func.return
}
// CHECK: 'loop.for' expects ancestor op 'loop.kernel'

// -----

// (issue 18: one case per verifier message that had none)
loop.kernel "k" {
  "loop.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64}> ({
  ^bb0(%i: i64):
  }) {name = "i0"} : () -> ()
}
// CHECK: loop 'i0' body must have one index block argument
