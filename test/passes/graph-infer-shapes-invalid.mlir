// RUN: not dlpc-opt --disable-verify %s -p graph-infer-shapes 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: cannot infer the type of graph.matmul (%y): graph.matmul contraction mismatch: lhs 2x6 has K=6 but rhs 8x4 has K=8
func.func @main(%x: tensor<2x6xf32>) -> tensor<2x4xf32> {
  %w = graph.param "w" : tensor<8x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x6xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
