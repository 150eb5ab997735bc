// RUN: dlpc-opt %s -p graph-fuse | filecheck %s
// RUN: dlpc-opt %s -p 'graph-fuse{max-chain=2}' | filecheck %s --check-prefix=SHORT

// conv + bias + residual add + relu: one kernel with the conv as anchor
// CHECK-LABEL: func.func @conv_epilogue
// CHECK-NEXT:    %w = graph.param "w"
// CHECK-NEXT:    %b = graph.param "b"
// CHECK-NEXT:    %y = graph.fused "conv2d_add_add_relu_0" %x, %w, %b, %r : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<1x3x8x8xf32>, %[[W:.*]]: tensor<4x3x3x3xf32>, %[[B:.*]]: tensor<4x1x1xf32>, %[[R:.*]]: tensor<1x4x6x6xf32>):
// CHECK-NEXT:      %[[C:.*]] = graph.conv2d %[[X]], %[[W]]
// CHECK-NEXT:      %[[A:.*]] = graph.add %[[C]], %[[B]]
// CHECK-NEXT:      %[[S:.*]] = graph.add %[[A]], %[[R]]
// CHECK-NEXT:      %[[Y:.*]] = graph.relu %[[S]]
// CHECK-NEXT:      graph.yield %[[Y]] : tensor<1x4x6x6xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %y
// SHORT-LABEL: func.func @conv_epilogue
// SHORT:         graph.fused "conv2d_add_0"
// SHORT:         graph.fused "add_relu_1"
func.func @conv_epilogue(%x: tensor<1x3x8x8xf32>, %r: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %b = graph.param "b" : tensor<4x1x1xf32>
  %c = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
  %s = graph.add %a, %r : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %y = graph.relu %s : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// Q, K, V projections of one input: one linear over concatenated weights, then slices
// CHECK-LABEL: func.func @qkv
// CHECK:         %[[W:.*]] = graph.concat %wq, %wk, %wv : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<48x16xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.concat %bq, %bk, %bv :
// CHECK-NEXT:    %[[QKV:.*]] = graph.linear %t, %[[W]], %[[B]] : (tensor<2x4x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
// CHECK-NEXT:    %q = graph.slice %[[QKV]] {starts = array<i64: 0>, ends = array<i64: 16>, axes = array<i64: -1>}
// CHECK-NEXT:    %k = graph.slice %[[QKV]] {starts = array<i64: 16>, ends = array<i64: 32>, axes = array<i64: -1>}
// CHECK-NEXT:    %v = graph.slice %[[QKV]] {starts = array<i64: 32>, ends = array<i64: 48>, axes = array<i64: -1>}
// CHECK-NOT:     graph.linear
func.func @qkv(%t: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %wq = graph.param "wq" : tensor<16x16xf32>
  %bq = graph.param "bq" : tensor<16xf32>
  %q = graph.linear %t, %wq, %bq : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wk = graph.param "wk" : tensor<16x16xf32>
  %bk = graph.param "bk" : tensor<16xf32>
  %k = graph.linear %t, %wk, %bk : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wv = graph.param "wv" : tensor<16x16xf32>
  %bv = graph.param "bv" : tensor<16xf32>
  %v = graph.linear %t, %wv, %bv : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  func.return %q, %k, %v : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// x * sigmoid(x) after a matmul: both users of the matmul are inside the chain
// CHECK-LABEL: func.func @silu
// CHECK:         graph.fused "matmul_sigmoid_mul_{{[0-9]+}}" %x, %w
func.func @silu(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = graph.sigmoid %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.mul %m, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// an intermediate used outside (%m is returned) ends the chain before it; an op that
// broadcasts the chain to a bigger shape is not an epilogue
// CHECK-LABEL: func.func @not_fused
// CHECK-NEXT:    %m = graph.matmul %x, %w
// CHECK-NEXT:    %t = graph.fused "relu_tanh_{{[0-9]+}}" %m
// CHECK:         graph.add %t, %big
func.func @not_fused(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %big: tensor<2x4x8xf32>) -> (tensor<4x8xf32>, tensor<2x4x8xf32>) {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = graph.relu %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = graph.tanh %r : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.add %t, %big : (tensor<4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %m, %y : tensor<4x8xf32>, tensor<2x4x8xf32>
}

// ONNX's projections: MatMul, then Add of a static bias. The adds come along into the
// horizontal fusion (one add of the concatenated biases), so the vertical fusion folds
// the bias into the one matmul kernel; the slices stand for the adds
// CHECK-LABEL: func.func @qk_matmul_bias
// CHECK:         %[[W:.*]] = graph.concat %wq, %wk {axis = 1 : i64} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.concat %bq, %bk : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
// CHECK-NEXT:    %[[QK:.*]] = graph.fused "matmul_add_{{[0-9]+}}" %t, %[[W]], %[[B]]
// CHECK:           graph.matmul
// CHECK-NEXT:      graph.add
// CHECK:         %q = graph.slice %[[QK]] {starts = array<i64: 0>, ends = array<i64: 16>, axes = array<i64: -1>}
// CHECK-NEXT:    %k = graph.slice %[[QK]] {starts = array<i64: 16>, ends = array<i64: 32>, axes = array<i64: -1>}
// CHECK-NEXT:    func.return %q, %k
func.func @qk_matmul_bias(%t: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %wq = graph.param "wq" : tensor<16x16xf32>
  %bq = graph.param "bq" : tensor<16xf32>
  %mq = graph.matmul %t, %wq : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q = graph.add %bq, %mq : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %wk = graph.param "wk" : tensor<16x16xf32>
  %bk = graph.param "bk" : tensor<16xf32>
  %mk = graph.matmul %t, %wk : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = graph.add %mk, %bk : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  func.return %q, %k : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// one of the matmuls has no bias add: the adds stay where they are
// CHECK-LABEL: func.func @qk_one_bias
// CHECK:         %[[QK:.*]] = graph.matmul %t, %{{.*}} {{.*}} -> tensor<2x4x32xf32>
// CHECK-NEXT:    %[[MQ:.*]] = graph.slice %[[QK]]
// CHECK-NEXT:    %[[MK:.*]] = graph.slice %[[QK]]
// CHECK:         graph.add %bq, %[[MQ]]
func.func @qk_one_bias(%t: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %wq = graph.param "wq" : tensor<16x16xf32>
  %bq = graph.param "bq" : tensor<16xf32>
  %mq = graph.matmul %t, %wq : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q = graph.add %bq, %mq : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %wk = graph.param "wk" : tensor<16x16xf32>
  %mk = graph.matmul %t, %wk : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  func.return %q, %mk : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}
