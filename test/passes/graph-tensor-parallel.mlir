// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2}' | filecheck %s
// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2},graph-autodiff' | filecheck %s --check-prefix=BACKWARD

// A linear pair split Megatron-style: fc1 column-parallel (its rows and bias split,
// annotated), fc2 row-parallel (its columns split), the partial products all-reduced,
// then fc2's bias added once.
// CHECK-LABEL: func.func @main
// CHECK-DAG:   %[[W1:.*]] = graph.param "fc1.weight" {dlpc.shard_dim = 0 : i64} : tensor<3x4xf32>
// CHECK-DAG:   %[[B1:.*]] = graph.param "fc1.bias" {dlpc.shard_dim = 0 : i64} : tensor<3xf32>
// CHECK-DAG:   %[[W2:.*]] = graph.param "fc2.weight" {dlpc.shard_dim = 1 : i64} : tensor<3x3xf32>
// CHECK-DAG:   %[[B2:.*]] = graph.param "fc2.bias" : tensor<3xf32>
// CHECK:       %[[H:.*]] = graph.linear %x, %[[W1]], %[[B1]] : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  %[[R:.*]] = graph.relu %[[H]]
// CHECK-NEXT:  %[[P:.*]] = graph.linear %[[R]], %[[W2]] : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:  %[[S:.*]] = comm.all_reduce sum %[[P]] group <world 2> : tensor<2x3xf32>
// CHECK-NEXT:  %y = graph.add %[[S]], %[[B2]]
// CHECK-NEXT:  %l = graph.reduce_mean %y

// The backward: the all-reduce's adjoint is an all-reduce of the loss's adjoint
// BACKWARD:      comm.all_reduce sum %{{.*}} group <world 2> : tensor<2x3xf32>
// BACKWARD:      %[[DY:.*]] = graph.broadcast
// BACKWARD:      comm.all_reduce sum %[[DY]] group <world 2> : tensor<2x3xf32>
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
