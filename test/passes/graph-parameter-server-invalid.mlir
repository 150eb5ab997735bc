// RUN: not dlpc-opt %s -p 'graph-parameter-server{ranks=3 batch=8}' 2>&1 | filecheck %s --check-prefix=BATCH
// RUN: not dlpc-opt %s -p 'graph-parameter-server{ranks=2 server=2}' 2>&1 | filecheck %s --check-prefix=SERVER
// RUN: not dlpc-opt %s -p 'graph-parameter-server{ranks=0}' 2>&1 | filecheck %s --check-prefix=RANKS

// A rank count that does not divide the batch; a server that is no rank; no ranks
// BATCH: dlpc-opt: error: graph-parameter-server: the batch 8 does not divide by ranks 3
// SERVER: dlpc-opt: error: graph-parameter-server: server 2 is not a rank of 2
// RANKS: dlpc-opt: error: graph-parameter-server: ranks must be >= 1, got 0
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
