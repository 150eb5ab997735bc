// RUN: not dlpc-opt %s -p 'graph-data-parallel{ranks=3 batch=8}' 2>&1 | filecheck %s --check-prefix=BATCH
// RUN: not dlpc-opt %s -p 'graph-data-parallel{ranks=2 batch=6}' 2>&1 | filecheck %s --check-prefix=SHARE
// RUN: not dlpc-opt %s -p 'graph-data-parallel{ranks=0}' 2>&1 | filecheck %s --check-prefix=RANKS
// RUN: not dlpc-opt %s -p 'graph-data-parallel{ranks=2 bucket-mb=0.0}' 2>&1 | filecheck %s --check-prefix=BUCKET
// RUN: not dlpc-opt %s -p 'graph-data-parallel' 2>&1 | filecheck %s --check-prefix=NOGRAD

// A rank count that does not divide the batch, an input that is not the rank's share,
// bad options, a module graph-autodiff{aux=true} has not differentiated: one line each.
// BATCH: dlpc-opt: error: graph-data-parallel: the batch 8 does not divide by ranks 3
// SHARE: dlpc-opt: error: graph-data-parallel: input of shape 4x3 is not a share of 3 of the batch 6 over 2 ranks
// RANKS: dlpc-opt: error: graph-data-parallel: ranks must be >= 1, got 0
// BUCKET: dlpc-opt: error: graph-data-parallel: bucket-mb must be > 0, got 0.0
// NOGRAD: dlpc-opt: error: graph-data-parallel: @main returns no grad.<param> results; run graph-autodiff{aux=true} first
func.func @main(%x: tensor<4x3xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<3xf32>
  %y = graph.mul %x, %w : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = graph.reduce_mean %y : (tensor<4x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
