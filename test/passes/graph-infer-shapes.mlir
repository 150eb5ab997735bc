// RUN: dlpc-opt --disable-verify %s -p graph-infer-shapes | filecheck %s

// The result types below are stale (as after editing an input type by hand); the pass
// recomputes them and the signature follows.

// CHECK-LABEL: func.func @stale(%x: tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK:         %[[Y:.*]] = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[Y]] : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<2x4xf32>
func.func @stale(%x: tensor<2x8xf32>) -> tensor<1x1xf32> {
  %w = graph.param "w" : tensor<8x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<1x1xf32>
  %r = graph.relu %y : (tensor<1x1xf32>) -> tensor<1x1xf32>
  func.return %r : tensor<1x1xf32>
}

// A fused region's arguments follow its operands; its result follows the yield.
// CHECK-LABEL: func.func @fused(%x: tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK:         graph.fused "relu_tanh_0" %x : (tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    ^bb0(%{{.*}}: tensor<3x5xf32>):
// CHECK-NEXT:      graph.relu %{{.*}} : (tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:      graph.tanh %{{.*}} : (tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:      graph.yield %{{.*}} : tensor<3x5xf32>
func.func @fused(%x: tensor<3x5xf32>) -> tensor<4xf32> {
  %y = graph.fused "relu_tanh_0" %x : (tensor<3x5xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>
    %1 = graph.tanh %0 : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}
