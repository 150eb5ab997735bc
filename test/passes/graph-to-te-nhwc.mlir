// RUN: dlpc-opt %s -p graph-to-te | filecheck %s

// graph-to-te on `layout = "nhwc"` ops (written by graph-layout): activations are
// indexed [n, h, w, c] directly, the channel is the innermost output dim and the
// innermost reduction dim; no activation transpose is introduced. The OIHW conv
// weight is read through a te.compute laying it out as (kh, kw, c/groups, o), so the
// output-channel dim reads it contiguously (also inside graph.fused).

// CHECK-LABEL: func.func @conv_grouped
// The reduction runs over (kh, kw, c/groups); the bias is read at the channel (last) dim.
// CHECK:       %[[WT:.*]] = te.compute "conv2d_0_weight_hwio" (%[[A:.*]], %[[B:.*]], %[[C:.*]], %[[D:.*]]) : tensor<3x3x2x6xf32> {
// CHECK-NEXT:    te.read %w[%[[D]], %[[C]], %[[A]], %[[B]]] : tensor<6x2x3x3xf32>
// CHECK:       te.reduce "conv2d_0" (%[[N:.*]], %[[OH:.*]], %[[OW:.*]], %[[OC:.*]]) reduce (%[[I:.*]], %[[J:.*]], %[[C:.*]]) over [3, 3, 2] combiner "add"
// CHECK:         %[[G:.*]] = arith.divsi %[[OC]], %{{.*}} : index
// CHECK:         %[[IC:.*]] = arith.addi %{{.*}}, %[[C]] : index
// CHECK:         scf.if
// CHECK-NEXT:      te.read %x[%[[N]], %[[IH:.*]], %[[IW:.*]], %[[IC]]] : tensor<1x8x8x4xf32>
// CHECK:         te.read %[[WT]][%[[I]], %[[J]], %[[C]], %[[OC]]] : tensor<3x3x2x6xf32>
// CHECK:       } epilogue (%[[ACC:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[E3:.*]]: index) {
// CHECK-NEXT:    te.read %b[%[[E3]]] : tensor<6xf32>
// CHECK-NOT:   graph.transpose
func.func @conv_grouped(%x: tensor<1x8x8x4xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) -> tensor<1x4x4x6xf32> {
  %y = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, groups = 2 : i64, layout = "nhwc"} : (tensor<1x8x8x4xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x4x4x6xf32>
  func.return %y : tensor<1x4x4x6xf32>
}

// CHECK-LABEL: func.func @depthwise
// Depthwise (groups = channels): the input channel is the output channel.
// CHECK:       %[[WT:.*]] = te.compute "conv2d_1_weight_hwio"
// CHECK:       te.reduce "conv2d_1" (%[[N:.*]], %[[OH:.*]], %[[OW:.*]], %[[OC:.*]]) reduce (%[[I:.*]], %[[J:.*]], %[[C:.*]]) over [3, 3, 1]
// CHECK:         te.read %x[%[[N]], %{{.*}}, %{{.*}}, %[[OC]]] : tensor<1x6x6x4xf32>
// CHECK:         te.read %[[WT]][%[[I]], %[[J]], %[[C]], %[[OC]]] : tensor<3x3x1x4xf32>
func.func @depthwise(%x: tensor<1x6x6x4xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.conv2d %x, %w {groups = 4 : i64, layout = "nhwc"} : (tensor<1x6x6x4xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @depthwise_1x1
// A weight with one element per output channel is contiguous already: no re-layout.
// CHECK-NOT:   te.compute
// CHECK:       te.reduce "conv2d_2" (%{{.*}}, %{{.*}}, %{{.*}}, %[[OC:.*]]) reduce (%{{.*}}, %{{.*}}, %{{.*}}) over [1, 1, 1]
// CHECK:         te.read %w[%[[OC]], %{{.*}}, %{{.*}}, %{{.*}}] : tensor<4x1x1x1xf32>
func.func @depthwise_1x1(%x: tensor<1x3x3x4xf32>, %w: tensor<4x1x1x1xf32>) -> tensor<1x3x3x4xf32> {
  %y = graph.conv2d %x, %w {groups = 4 : i64, layout = "nhwc"} : (tensor<1x3x3x4xf32>, tensor<4x1x1x1xf32>) -> tensor<1x3x3x4xf32>
  func.return %y : tensor<1x3x3x4xf32>
}

// CHECK-LABEL: func.func @max_pool
// CHECK:       te.reduce "max_pool2d_3" (%[[N:.*]], %[[OH:.*]], %[[OW:.*]], %[[C:.*]]) reduce (%{{.*}}, %{{.*}}) over [2, 2] combiner "max"
// CHECK:         te.read %x[%[[N]], %{{.*}}, %{{.*}}, %[[C]]] : tensor<2x6x6x3xf32>
func.func @max_pool(%x: tensor<2x6x6x3xf32>) -> tensor<2x3x3x3xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, layout = "nhwc"} : (tensor<2x6x6x3xf32>) -> tensor<2x3x3x3xf32>
  func.return %y : tensor<2x3x3x3xf32>
}

// CHECK-LABEL: func.func @avg_pool_padded
// The divisor counts the cells inside the input: computed from the H and W dims (1, 2).
// CHECK:       te.reduce "avg_pool2d_4" (%{{.*}}, %{{.*}}, %{{.*}}, %[[C:.*]]) reduce (%{{.*}}, %{{.*}}) over [3, 3] combiner "add"
// CHECK:         te.read %x[%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]] : tensor<1x5x5x2xf32>
// CHECK:       } epilogue (%{{.*}}: f32, %{{.*}}: index, %[[EH:.*]]: index, %[[EW:.*]]: index, %{{.*}}: index) {
// CHECK:         arith.muli %[[EH]]
// CHECK:         arith.muli %[[EW]]
func.func @avg_pool_padded(%x: tensor<1x5x5x2xf32>) -> tensor<1x3x3x2xf32> {
  %y = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, layout = "nhwc"} : (tensor<1x5x5x2xf32>) -> tensor<1x3x3x2xf32>
  func.return %y : tensor<1x3x3x2xf32>
}

// CHECK-LABEL: func.func @global_avg_pool
// CHECK:       te.reduce "global_avg_pool_5" (%[[N:.*]], %{{.*}}, %{{.*}}, %[[C:.*]]) reduce (%[[H:.*]], %[[W:.*]]) over [4, 5] combiner "add"
// CHECK-NEXT:    te.read %x[%[[N]], %[[H]], %[[W]], %[[C]]] : tensor<2x4x5x3xf32>
func.func @global_avg_pool(%x: tensor<2x4x5x3xf32>) -> tensor<2x1x1x3xf32> {
  %y = graph.global_avg_pool %x {layout = "nhwc"} : (tensor<2x4x5x3xf32>) -> tensor<2x1x1x3xf32>
  func.return %y : tensor<2x1x1x3xf32>
}

// CHECK-LABEL: func.func @batch_norm
// The statistics are read at the last (channel) dim.
// CHECK:       te.compute "batch_norm_6" (%{{.*}}, %{{.*}}, %{{.*}}, %[[C:.*]]) : tensor<1x4x4x3xf32> {
// CHECK:         te.read %s[%[[C]]] : tensor<3xf32>
// CHECK:         te.read %v[%[[C]]] : tensor<3xf32>
func.func @batch_norm(%x: tensor<1x4x4x3xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<1x4x4x3xf32> {
  %y = graph.batch_norm %x, %s, %b, %m, %v {layout = "nhwc"} : (tensor<1x4x4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x4x4x3xf32>
  func.return %y : tensor<1x4x4x3xf32>
}

// CHECK-LABEL: func.func @fused_conv_bias_relu
// A fused NHWC conv + bias + relu is one te.reduce whose epilogue reads the NHWC bias
// at the channel dim, after the weight re-layout (a te.compute of its own).
// CHECK:       %[[WT:.*]] = te.compute "conv2d_7_weight_hwio"
// CHECK-NEXT:    te.read %w[{{.*}}] : tensor<4x3x3x3xf32>
// CHECK:       te.reduce "conv_bias_relu" (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) reduce (%{{.*}}, %{{.*}}, %{{.*}}) over [3, 3, 3]
// CHECK:       } epilogue (%[[ACC:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[E3:.*]]: index) {
// CHECK:         te.read %c[%{{.*}}, %{{.*}}, %{{.*}}, %[[E3]]] : tensor<1x1x1x4xf32>
// CHECK:         arith.maximumf
// CHECK-NOT:   te.compute
func.func @fused_conv_bias_relu(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>, %c: tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32> {
  %y = graph.fused "conv_bias_relu" %x, %w, %c : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32> {
  ^bb0(%a: tensor<1x8x8x3xf32>, %k: tensor<4x3x3x3xf32>, %cc: tensor<1x1x1x4xf32>):
    %0 = graph.conv2d %a, %k {layout = "nhwc"} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
    %1 = graph.add %0, %cc : (tensor<1x6x6x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x6x6x4xf32>
    %2 = graph.relu %1 : (tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
    graph.yield %2 : tensor<1x6x6x4xf32>
  }
  func.return %y : tensor<1x6x6x4xf32>
}
