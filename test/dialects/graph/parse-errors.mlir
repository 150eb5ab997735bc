// RUN: not dlpc-opt %s 2>&1 | filecheck %s
// A misspelt op is a one-line located error, not a traceback.

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.rleu %a : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: parse-errors.mlir:5:19: error: Operation graph.rleu is not registered
// CHECK-NOT: Traceback
