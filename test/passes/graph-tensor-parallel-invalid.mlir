// RUN: not dlpc-opt %s -p 'graph-tensor-parallel{ranks=4}' 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p 'graph-tensor-parallel{ranks=0}' 2>&1 | filecheck %s --check-prefix=RANKS

// 6 hidden features do not divide by 4 ranks: one line naming the param
// CHECK: dlpc-opt: error: graph-tensor-parallel: fc1.weight has 6 entries along dim 0, which do not divide by ranks 4
// RANKS: dlpc-opt: error: graph-tensor-parallel: ranks must be >= 1, got 0
func.func @main(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w1 = graph.param "fc1.weight" : tensor<6x4xf32>
  %b1 = graph.param "fc1.bias" : tensor<6xf32>
  %w2 = graph.param "fc2.weight" : tensor<3x6xf32>
  %b2 = graph.param "fc2.bias" : tensor<3xf32>
  %h = graph.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  %r = graph.relu %h : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = graph.linear %r, %w2, %b2 : (tensor<2x6xf32>, tensor<3x6xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_mean %y : (tensor<2x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
