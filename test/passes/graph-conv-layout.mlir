// RUN: dlpc-opt %s -p graph-conv-layout | filecheck %s
// RUN: dlpc-opt %s -p 'graph-conv-layout{lanes=4}' | filecheck %s --check-prefix=LANES4

// LeNet's second conv: 16 output channels (two whole 8-lane vectors) but a 10-wide row:
// NHWC. The bias add and relu follow through the sunk transpose, the max pool reading
// the result follows into NHWC, and one transpose back is left before the flatten.
// CHECK-LABEL: func.func @lenet_tail
// CHECK:         %[[T:.*]] = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x6x14x14xf32>) -> tensor<2x14x14x6xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.conv2d %[[T]], %w {layout = "nhwc"} : (tensor<2x14x14x6xf32>, tensor<16x6x5x5xf32>) -> tensor<2x10x10x16xf32>
// CHECK:         %[[A:.*]] = graph.add %[[C]], %{{.*}} : (tensor<2x10x10x16xf32>, tensor<1x1x1x16xf32>) -> tensor<2x10x10x16xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[A]] : (tensor<2x10x10x16xf32>) -> tensor<2x10x10x16xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.max_pool2d %[[R]] {layout = "nhwc", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x10x10x16xf32>) -> tensor<2x5x5x16xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.transpose %[[M]] {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x5x5x16xf32>) -> tensor<2x16x5x5xf32>
// CHECK-NEXT:    graph.reshape %[[B]] {shape = array<i64: 2, 400>}
func.func @lenet_tail(%x: tensor<2x6x14x14xf32>, %w: tensor<16x6x5x5xf32>) -> tensor<2x400xf32> {
  %b = graph.param "b" : tensor<16x1x1xf32>
  %c = graph.conv2d %x, %w : (tensor<2x6x14x14xf32>, tensor<16x6x5x5xf32>) -> tensor<2x16x10x10xf32>
  %a = graph.add %c, %b : (tensor<2x16x10x10xf32>, tensor<16x1x1xf32>) -> tensor<2x16x10x10xf32>
  %r = graph.relu %a : (tensor<2x16x10x10xf32>) -> tensor<2x16x10x10xf32>
  %m = graph.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x16x10x10xf32>) -> tensor<2x16x5x5xf32>
  %f = graph.reshape %m {shape = array<i64: 2, 400>} : (tensor<2x16x5x5xf32>) -> tensor<2x400xf32>
  func.return %f : tensor<2x400xf32>
}

// Left in NCHW: 6 output channels (no whole vector), a 32-wide row (whole vectors
// already), a depthwise conv (grouped: no channel reuse to vectorize over).
// With 4 lanes, the 28-wide row is whole vectors too: still NCHW.
// CHECK-LABEL: func.func @stays
// CHECK-NOT:     graph.transpose
// CHECK-NOT:     layout
// CHECK:         func.return
// LANES4-LABEL: func.func @stays
// LANES4-NOT:     layout
// LANES4:         func.return
func.func @stays(%x: tensor<1x1x28x28xf32>, %w: tensor<6x1x5x5xf32>, %w2: tensor<16x16x3x3xf32>, %wd: tensor<16x1x3x3xf32>, %y: tensor<1x16x32x32xf32>) -> (tensor<1x6x28x28xf32>, tensor<1x16x32x32xf32>, tensor<1x16x30x30xf32>) {
  %c = graph.conv2d %x, %w {pads = array<i64: 2, 2, 2, 2>} : (tensor<1x1x28x28xf32>, tensor<6x1x5x5xf32>) -> tensor<1x6x28x28xf32>
  %d = graph.conv2d %y, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x32x32xf32>
  %e = graph.conv2d %y, %wd {groups = 16} : (tensor<1x16x32x32xf32>, tensor<16x1x3x3xf32>) -> tensor<1x16x30x30xf32>
  func.return %c, %d, %e : tensor<1x6x28x28xf32>, tensor<1x16x32x32xf32>, tensor<1x16x30x30xf32>
}

// With 4 lanes, a 30-wide row of 8 channels is NHWC (the row is not whole vectors); with
// 8 lanes it is too: 8 channels fill one vector.
// CHECK-LABEL: func.func @ragged
// CHECK:         graph.conv2d {{.*}} {layout = "nhwc"}
// LANES4-LABEL: func.func @ragged
// LANES4:         graph.conv2d {{.*}} {layout = "nhwc"}
func.func @ragged(%y: tensor<1x3x32x32xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x30x30xf32> {
  %c = graph.conv2d %y, %w : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x30x30xf32>
  func.return %c : tensor<1x8x30x30xf32>
}
