// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2}' | filecheck %s
// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2},graph-autodiff' | filecheck %s --check-prefix=BACKWARD
// RUN: not dlpc-opt %s -p 'graph-tensor-parallel{ranks=3}' 2>&1 | filecheck %s --check-prefix=RANKS

// Convs split by output channels: rank r keeps channels r of its weight and bias, the
// relu runs on its channels, then an all_gather on dim 1 gives the next conv all of them.
// A depthwise conv (groups > 1) stays whole.
// CHECK-LABEL: func.func @main
// CHECK-DAG:   %[[W1:.*]] = graph.param "c1.weight" {dlpc.shard_dim = 0 : i64} : tensor<2x1x3x3xf32>
// CHECK-DAG:   %[[B1:.*]] = graph.param "c1.bias" {dlpc.shard_dim = 0 : i64} : tensor<2xf32>
// CHECK-DAG:   %[[W2:.*]] = graph.param "c2.weight" {dlpc.shard_dim = 0 : i64} : tensor<1x4x3x3xf32>
// CHECK-DAG:   %[[DW:.*]] = graph.param "dw.weight" : tensor<2x1x3x3xf32>
// CHECK:       %[[C1:.*]] = graph.conv2d %x, %[[W1]], %[[B1]] {{.*}} -> tensor<1x2x6x6xf32>
// CHECK-NEXT:  %[[R1:.*]] = graph.relu %[[C1]] : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT:  %r = comm.all_gather %[[R1]] dim 1 group <world 2> : tensor<1x2x6x6xf32> -> tensor<1x4x6x6xf32>
// CHECK-NEXT:  %[[C2:.*]] = graph.conv2d %r, %[[W2]] {{.*}} -> tensor<1x1x4x4xf32>
// CHECK-NEXT:  %c = comm.all_gather %[[C2]] dim 1 group <world 2> : tensor<1x1x4x4xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT:  %d = graph.conv2d %c, %[[DW]] {groups = 2 : i64{{.*}}} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32>

// The backward: each all_gather's adjoint is a reduce_scatter sum on dim 1
// BACKWARD: comm.reduce_scatter sum %{{.*}} dim 1 group <world 2> : tensor<1x2x4x4xf32> -> tensor<1x1x4x4xf32>
// BACKWARD: comm.reduce_scatter sum %{{.*}} dim 1 group <world 2> : tensor<1x4x6x6xf32> -> tensor<1x2x6x6xf32>

// 4 output channels do not divide by 3 ranks: one line naming the param
// RANKS: dlpc-opt: error: graph-tensor-parallel: c1.weight has 4 entries along dim 0, which do not divide by ranks 3
func.func @main(%x: tensor<1x1x6x6xf32>) -> tensor<f32> {
  %w1 = graph.param "c1.weight" : tensor<4x1x3x3xf32>
  %b1 = graph.param "c1.bias" : tensor<4xf32>
  %w2 = graph.param "c2.weight" : tensor<2x4x3x3xf32>
  %dw = graph.param "dw.weight" : tensor<2x1x3x3xf32>
  %h = graph.conv2d %x, %w1, %b1 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x1x6x6xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %r = graph.relu %h : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %c = graph.conv2d %r, %w2 : (tensor<1x4x6x6xf32>, tensor<2x4x3x3xf32>) -> tensor<1x2x4x4xf32>
  %d = graph.conv2d %c, %dw {groups = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32>
  %l = graph.reduce_mean %d : (tensor<1x2x2x2xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
