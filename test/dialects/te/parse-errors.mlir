// RUN: not dlpc-opt %s 2>&1 | filecheck %s
// A reduction's combiner is a typed property: one that is not add, mul, max or min is a
// located parse error.

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [8] combiner "sum" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: parse-errors.mlir:6:59: error: te.reduce "s" combiner 'sum' is not one of add, mul, max, min
// CHECK-NOT: Traceback
