// RUN: not dlpc-opt %s -p 'test-swap-operands{level=2}' 2>&1 | filecheck %s
// RUN: dlpc-opt %s -p test-swap-operands --split-input-file --verify-diagnostics | filecheck %s --check-prefix=VERIFY

// The test pass takes no options.
// CHECK: dlpc-opt: error: Provided arguments ["level"] not found in expected arguments []

// Swapping the operands of a sub whose operands have different shapes keeps the
// broadcast result shape, so the IR still verifies.
// VERIFY: graph.sub %x, %v
func.func @main(%x: tensor<4xf32>, %v: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a = graph.sub %v, %x : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %a : tensor<2x4xf32>
}
