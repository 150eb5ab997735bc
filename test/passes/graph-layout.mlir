// RUN: dlpc-opt %s -p 'graph-layout{to=nhwc}' | filecheck %s
// RUN: dlpc-opt %s -p 'graph-layout{to=nhwc},graph-layout{to=nchw}' | filecheck %s --check-prefix=BACK
// RUN: dlpc-opt %s -p 'graph-layout{to=nhwc where=pays}' | filecheck %s --check-prefix=PAYS

// conv -> batch norm -> relu -> residual add -> pool: one NHWC region, transposes only
// at its borders; the signature is unchanged
// CHECK-LABEL: func.func @block(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %w2: tensor<4x4x3x3xf32>, %p: tensor<4xf32>) -> tensor<1x4x3x3xf32>
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x8x8x3xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.conv2d %[[T]], %w {layout = "nhwc", pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.batch_norm %[[C]], %p, %p, %p, %p {layout = "nhwc"} : (tensor<1x8x8x4xf32>, {{.*}}) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[B]] : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:    %[[C2:.*]] = graph.conv2d %[[R]], %w2 {layout = "nhwc", pads = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT:    %[[S:.*]] = graph.add %[[C2]], %[[R]] : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.max_pool2d %[[S]] {layout = "nhwc", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x8x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT:    %[[A:.*]] = graph.avg_pool2d %[[M]] {layout = "nhwc", kernel = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x3x3x4xf32>
// CHECK-NEXT:    %[[O:.*]] = graph.transpose %[[A]] {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x3x3x4xf32>) -> tensor<1x4x3x3xf32>
// CHECK-NEXT:    func.return %[[O]] : tensor<1x4x3x3xf32>
// BACK-LABEL: func.func @block
// BACK-NOT:     graph.transpose
// BACK-NOT:     layout
// BACK:         func.return
func.func @block(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %w2: tensor<4x4x3x3xf32>, %p: tensor<4xf32>) -> tensor<1x4x3x3xf32> {
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %b = graph.batch_norm %c, %p, %p, %p, %p : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %r = graph.relu %b : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %c2 = graph.conv2d %r, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %s = graph.add %c2, %r : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %m = graph.max_pool2d %s {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  %a = graph.avg_pool2d %m {kernel = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x3x3xf32>
  func.return %a : tensor<1x4x3x3xf32>
}

// a static per-channel bias [4, 1, 1] crosses into the region as its NHWC form [1, 1, 1, 4]
// CHECK-LABEL: func.func @static_bias
// (its transpose only moves unit dims, so it is a reshape)
// CHECK:         %[[T:.*]] = graph.reshape %bias {shape = array<i64: 1, 1, 1, 4>} : (tensor<4x1x1xf32>) -> tensor<1x1x1x4xf32>
// CHECK-NEXT:    graph.add %{{.*}}, %[[T]] : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
func.func @static_bias(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32> {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %bias = graph.param "bias" : tensor<4x1x1xf32>
  %c = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %y = graph.add %c, %bias : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
  %z = graph.max_pool2d %y {kernel = array<i64: 1, 1>} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  func.return %z : tensor<1x4x6x6xf32>
}

// where=pays (what -O3 runs): only the convs whose NHWC form graph-conv-layout's model
// says is faster (16 output channels, whole 8-lane vectors, over a 10-wide row) and the
// pool reading it; @block's convs (4 channels: no whole vector) stay NCHW.
// PAYS-LABEL: func.func @block
// PAYS-NOT:     layout
// PAYS:         func.return
// PAYS-LABEL: func.func @pays
// PAYS:         %[[T:.*]] = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>}
// PAYS-NEXT:    %[[C:.*]] = graph.conv2d %[[T]], %w {layout = "nhwc"}
// PAYS-NEXT:    %[[M:.*]] = graph.max_pool2d %[[C]] {layout = "nhwc", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
// PAYS-NEXT:    graph.transpose %[[M]] {perm = array<i64: 0, 3, 1, 2>}
// PAYS-NOT:     layout
// PAYS:         func.return
func.func @pays(%x: tensor<1x6x14x14xf32>, %w: tensor<16x6x5x5xf32>, %w1: tensor<6x6x3x3xf32>) -> (tensor<1x16x5x5xf32>, tensor<1x6x12x12xf32>) {
  %c = graph.conv2d %x, %w : (tensor<1x6x14x14xf32>, tensor<16x6x5x5xf32>) -> tensor<1x16x10x10xf32>
  %m = graph.max_pool2d %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x16x10x10xf32>) -> tensor<1x16x5x5xf32>
  %d = graph.conv2d %x, %w1 : (tensor<1x6x14x14xf32>, tensor<6x6x3x3xf32>) -> tensor<1x6x12x12xf32>
  func.return %m, %d : tensor<1x16x5x5xf32>, tensor<1x6x12x12xf32>
}
