// RUN: dlpc-opt %s -p "te-inline{names=sum_0}" --verify-diagnostics | filecheck %s
// RUN: dlpc-opt %s -p "te-inline{names=nope}" --verify-diagnostics | filecheck %s --check-prefix=MISSING
// RUN: dlpc-opt %s -p "te-inline{names=neg_1}" --verify-diagnostics | filecheck %s --check-prefix=USED

// CHECK: te-inline cannot inline te.reduce "sum_0": only te.compute (elementwise/injective) can be inlined
// MISSING: te-inline: no te.compute named "nope"
// USED: te-inline cannot inline te.compute "neg_1": its result is used by an op other than te.read
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = te.reduce "sum_0" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  %n = te.compute "neg_1" (%i0) : tensor<4xf32> {
    %v = te.read %s[%i0] : tensor<4xf32>
    %r = arith.negf %v : f32
    te.yield %r : f32
  }
  func.return %s, %n : tensor<4xf32>, tensor<4xf32>
}
