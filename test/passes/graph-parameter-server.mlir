// RUN: dlpc-opt %s -p 'graph-parameter-server{ranks=2 batch=8}' | filecheck %s

// A synchronous parameter server on rank 0: each param read through a broadcast from the
// server (the pull), each gradient reduced to it as the ranks' mean (the push, right after
// the gradient is made), the loss averaged and the metric summed over both ranks.
// CHECK-LABEL: func.func @main
// CHECK:       %w1 = graph.param "fc1.weight"
// CHECK-NEXT:  %[[P1:.*]] = comm.broadcast %w1 root 0 group <world 2> : tensor<5x3xf32>
// CHECK-NEXT:  %w2 = graph.param "fc2.weight"
// CHECK-NEXT:  %[[P2:.*]] = comm.broadcast %w2 root 0 group <world 2> : tensor<2x5xf32>
// CHECK-NEXT:  %h = graph.linear %x, %[[P1]]
// CHECK:       %y = graph.linear %r, %[[P2]]
// CHECK:       %grad.fc2.weight = graph.matmul
// CHECK-NEXT:  %[[G2:.*]] = comm.reduce avg %grad.fc2.weight root 0 group <world 2> : tensor<2x5xf32>
// CHECK:       %grad.fc1.weight = graph.matmul
// CHECK-NEXT:  %[[G1:.*]] = comm.reduce avg %grad.fc1.weight root 0 group <world 2> : tensor<5x3xf32>
// CHECK-NEXT:  %[[L:.*]] = comm.all_reduce avg %l
// CHECK-NEXT:  %[[C:.*]] = comm.all_reduce sum %c
// CHECK-NEXT:  func.return %[[L]], %[[G1]], %[[G2]], %[[C]]
func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32> {dlpc.name = "loss"}, tensor<5x3xf32> {dlpc.name = "grad.fc1.weight"}, tensor<2x5xf32> {dlpc.name = "grad.fc2.weight"}, tensor<f32> {dlpc.name = "result1"}) {
  %w1 = graph.param "fc1.weight" : tensor<5x3xf32>
  %w2 = graph.param "fc2.weight" : tensor<2x5xf32>
  %h = graph.linear %x, %w1 : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %r = graph.relu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %y = graph.linear %r, %w2 : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x2xf32>
  %l = graph.reduce_mean %y : (tensor<4x2xf32>) -> tensor<f32>
  %c = graph.reduce_sum %x : (tensor<4x3xf32>) -> tensor<f32>
  %d_l = graph.constant dense<1.000000e+00> : tensor<f32>
  %0 = graph.constant dense<1.250000e-01> : tensor<f32>
  %1 = graph.mul %d_l, %0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %2 = graph.reshape %1 {shape = array<i64: 1, 1>} : (tensor<f32>) -> tensor<1x1xf32>
  %d_y = graph.broadcast %2 {shape = array<i64: 4, 2>} : (tensor<1x1xf32>) -> tensor<4x2xf32>
  %d_r = graph.matmul %d_y, %w2 : (tensor<4x2xf32>, tensor<2x5xf32>) -> tensor<4x5xf32>
  %grad.fc2.weight = graph.matmul %d_y, %r {transpose_a = true} : (tensor<4x2xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  %3 = graph.constant dense<0.000000e+00> : tensor<f32>
  %4 = graph.compare %r, %3 {predicate = "gt"} : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xi1>
  %5 = graph.constant dense<0.000000e+00> : tensor<f32>
  %d_h = graph.where %4, %d_r, %5 : (tensor<4x5xi1>, tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %grad.fc1.weight = graph.matmul %d_h, %x {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  func.return %l, %grad.fc1.weight, %grad.fc2.weight, %c : tensor<f32>, tensor<5x3xf32>, tensor<2x5xf32>, tensor<f32>
}
