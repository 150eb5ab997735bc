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

// Symbolic dims (`?`, named in the encoding) flow through inference as expressions: a
// strided conv's output is floor((n + 2p - k) / s) + 1, a reshape's -1 is the quotient
// of the element counts, a concat of two `seq` dims is 2*seq.
// CHECK-LABEL: func.func @symbolic(%x: tensor<?x3x?x?xf32, ["batch", "h", "w"]>)
// CHECK:         graph.conv2d {{.*}} -> tensor<?x8x?x?xf32, ["batch", "floor((h + 1) / 2)", "floor((w + 1) / 2)"]>
// CHECK:         graph.reshape {{.*}} -> tensor<?x?xf32, ["batch", "8*floor((h + 1) / 2)*floor((w + 1) / 2)"]>
func.func @symbolic(%x: tensor<?x3x?x?xf32, ["batch", "h", "w"]>) -> tensor<1xf32> {
  %w = graph.param "w" : tensor<8x3x3x3xf32>
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<?x3x?x?xf32, ["batch", "h", "w"]>, tensor<8x3x3x3xf32>) -> tensor<1xf32>
  %f = graph.reshape %y {shape = array<i64: 0, -1>} : (tensor<1xf32>) -> tensor<1xf32>
  func.return %f : tensor<1xf32>
}

// CHECK-LABEL: func.func @symbolic_seq(%x: tensor<?x?x64xf32, ["batch", "seq"]>)
// CHECK-SAME:    -> tensor<?x?x?xf32, ["batch", "seq", "seq"]>
// CHECK:         graph.matmul {{.*}} -> tensor<?x?x?xf32, ["batch", "seq", "seq"]>
// CHECK:         graph.reshape {{.*}} -> tensor<?x?x4x16xf32, ["batch", "seq"]>
// CHECK:         graph.concat {{.*}} -> tensor<?x?x64xf32, ["batch", "2*seq"]>
func.func @symbolic_seq(%x: tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<1xf32> {
  %s = graph.matmul %x, %x {transpose_b = true} : (tensor<?x?x64xf32, ["batch", "seq"]>, tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<1xf32>
  %r = graph.reshape %x {shape = array<i64: 0, -1, 4, 16>} : (tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<1xf32>
  %c = graph.concat %x, %x {axis = 1 : i64} : (tensor<?x?x64xf32, ["batch", "seq"]>, tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<1xf32>
  func.return %s : tensor<1xf32>
}
