// RUN: not dlpc-opt %s -p 'loop-compute-at{producer=add kernel=relu loop=i0}' 2>&1 | filecheck %s --check-prefix=ORDER
// RUN: not dlpc-opt %s -p 'loop-compute-at{producer=copy kernel=add loop=i0}' 2>&1 | filecheck %s --check-prefix=ESCAPE
// RUN: not dlpc-opt %s -p 'loop-compute-at{producer=relu kernel=add loop=i0}' 2>&1 | filecheck %s --check-prefix=SHARED
// RUN: not dlpc-opt %s -p 'loop-compute-at{producer=tr kernel=use loop=j0}' 2>&1 | filecheck %s --check-prefix=PRODUCER
// RUN: not dlpc-opt %s -p 'loop-compute-at{producer=sq kernel=flat loop=jo}' 2>&1 | filecheck %s --check-prefix=AFFINE

// ORDER: dlpc-opt: error: producer kernel 'add' does not come before kernel 'relu' in one block
// ESCAPE: dlpc-opt: error: buffer 'y' written by kernel 'copy' is not an intermediate (memref.alloc), so it cannot be computed inside loop add/i0
// SHARED: dlpc-opt: error: buffer 't' of kernel 'relu' is also used by kernel 'copy'
// PRODUCER: dlpc-opt: error: the outer loops of producer kernel 'tr' must be a perfect nest from 0 step 1 that indexes its stores to 'u' directly
// (j / 4 with j = 8 jo + ji, ji in [0, 8): 2 jo + ji / 4, and ji / 4 is no loop variable)
// AFFINE: dlpc-opt: error: an index of buffer 'q' in loop flat/jo is not affine in the loop variables
func.func @main(%x: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %t = memref.alloc() : memref<4x4xf32>
  %u = memref.alloc() : memref<4x4xf32>
  %q = memref.alloc() : memref<4x4xf32>
  loop.kernel "sq" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x4xf32>
        %s = arith.mulf %v, %v : f32
        memref.store %s, %q[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "flat" {
    loop.for %jo = 0 to 2 step 1 {name = "jo"} {
      loop.for %ji = 0 to 8 step 1 {name = "ji"} {
        %c4 = arith.constant 4 : index
        %c8 = arith.constant 8 : index
        %a = arith.muli %jo, %c8 : index
        %j = arith.addi %a, %ji : index
        %row = arith.divsi %j, %c4 : index
        %col = arith.remsi %j, %c4 : index
        %v = memref.load %q[%row, %col] : memref<4x4xf32>
        memref.store %v, %y[%jo, %jo] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "relu" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x4xf32>
        memref.store %v, %t[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "copy" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %t[%i0, %i1] : memref<4x4xf32>
        memref.store %v, %y[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "add" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %a = memref.load %t[%i0, %i1] : memref<4x4xf32>
        %b = memref.load %y[%i0, %i1] : memref<4x4xf32>
        %s = arith.addf %a, %b : f32
        memref.store %s, %y[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "tr" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x4xf32>
        memref.store %v, %u[%i1, %i0] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "use" {
    loop.for %j0 = 0 to 4 step 1 {name = "j0"} {
      %w = memref.load %u[%j0, %j0] : memref<4x4xf32>
      memref.store %w, %y[%j0, %j0] : memref<4x4xf32>
    }
  }
  memref.dealloc %t : memref<4x4xf32>
  memref.dealloc %u : memref<4x4xf32>
  memref.dealloc %q : memref<4x4xf32>
  func.return
}
