// RUN: dlpc-opt %s -p 'graph-data-parallel{ranks=2 batch=8}' | filecheck %s
// RUN: dlpc-opt %s -p 'graph-data-parallel{ranks=2 bucket-mb=0.00005}' | filecheck %s --check-prefix=SMALL

// A step as graph-autodiff{aux=true} leaves it at the per-rank batch (4 of 8): the loss,
// the gradients of both params, a metric. Each gradient is averaged over the ranks in
// the order the backward makes them (fc2's first); one bucket holds both (25 MiB), or
// each its own (52 bytes: fc1's 60-byte gradient does not fit with fc2's 40).

// CHECK-LABEL: func.func @main
// CHECK:         %[[G2:.*]] = graph.matmul %d_y, %r {transpose_a = true}
// CHECK:         %[[G1:.*]] = graph.matmul %d_h, %x {transpose_a = true}
// CHECK-NEXT:    %[[A2:.*]], %[[A1:.*]] = comm.all_reduce avg %[[G2]], %[[G1]] group <world 2> : tensor<2x5xf32>, tensor<5x3xf32>
// CHECK-NEXT:    %[[L:.*]] = comm.all_reduce avg %l group <world 2> : tensor<f32>
// CHECK-NEXT:    %[[C:.*]] = comm.all_reduce sum %c group <world 2> : tensor<f32>
// CHECK-NEXT:    func.return %[[L]], %[[A1]], %[[A2]], %[[C]]

// SMALL-LABEL: func.func @main
// SMALL:         %[[G2:.*]] = graph.matmul %d_y, %r {transpose_a = true}
// SMALL-NEXT:    %[[A2:.*]] = comm.all_reduce avg %[[G2]] group <world 2> : tensor<2x5xf32>
// SMALL:         %[[G1:.*]] = graph.matmul %d_h, %x {transpose_a = true}
// SMALL-NEXT:    %[[A1:.*]] = comm.all_reduce avg %[[G1]] group <world 2> : tensor<5x3xf32>
// SMALL-NEXT:    %[[L:.*]] = comm.all_reduce avg %l
// SMALL-NEXT:    %[[C:.*]] = comm.all_reduce sum %c
// SMALL-NEXT:    func.return %[[L]], %[[A1]], %[[A2]], %[[C]]
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
