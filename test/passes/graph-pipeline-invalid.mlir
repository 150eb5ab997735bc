// RUN: not dlpc-opt %s -p 'graph-pipeline{stages=7}' 2>&1 | filecheck %s --check-prefix=STAGES
// RUN: not dlpc-opt %s -p 'graph-pipeline{schedule=zb}' 2>&1 | filecheck %s --check-prefix=SCHEDULE
// RUN: not dlpc-opt %s -p 'graph-pipeline{microbatches=0}' 2>&1 | filecheck %s --check-prefix=MICRO

// More stages than places where one activation crosses; a schedule not known; no
// micro-batches: one line each
// STAGES: dlpc-opt: error: graph-pipeline: 7 stages need 6 cuts, but @main has 5 places where a single activation crosses
// SCHEDULE: dlpc-opt: error: graph-pipeline: unknown schedule 'zb' (expected gpipe, 1f1b or 2bw)
// MICRO: dlpc-opt: error: graph-pipeline: stages and microbatches must be >= 1, got 2 and 0
func.func @main(%x: tensor<2x4xf32>, %t: tensor<2x3xf32>) -> tensor<f32> {
  %w1 = graph.param "fc1.weight" : tensor<6x4xf32>
  %w2 = graph.param "fc2.weight" : tensor<3x6xf32>
  %h = graph.linear %x, %w1 : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %r = graph.relu %h : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = graph.linear %r, %w2 : (tensor<2x6xf32>, tensor<3x6xf32>) -> tensor<2x3xf32>
  %d = graph.sub %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = graph.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_mean %e : (tensor<2x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
