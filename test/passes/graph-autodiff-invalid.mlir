// RUN: dlpc-opt %s -p graph-autodiff --split-input-file --verify-diagnostics --allow-unregistered-dialect | filecheck %s
// RUN: not dlpc-opt %s -p graph-autodiff --split-input-file --allow-unregistered-dialect 2>&1 | filecheck %s --check-prefix=TOOL

// An op on the path from a param to the loss without a gradient rule: named, with its place
// CHECK: graph-autodiff has no gradient rule for graph.frobnicate (%y, op 1 of @main)
// TOOL: dlpc-opt: error: graph-autodiff has no gradient rule for graph.frobnicate (%y, op 1 of @main)
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4xf32>
  %y = "graph.frobnicate"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %z = graph.mul %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = graph.reduce_sum %z : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// The loss must be a scalar
// CHECK: graph-autodiff needs a scalar float loss, but result 0 of @main has type tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = graph.param "w" : tensor<4xf32>
  %y = graph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// ... and a float
// CHECK: graph-autodiff needs a scalar float loss, but result 0 of @main has type tensor<i64>
func.func @main(%x: tensor<i64>) -> tensor<i64> {
  func.return %x : tensor<i64>
}

// -----

// NHWC ops (graph-layout's) are not differentiated: autodiff runs before graph-layout
// CHECK: graph-autodiff differentiates NCHW graph.global_avg_pool only; run it before graph-layout
func.func @main(%x: tensor<1x4x4x3xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<1x4x4x3xf32>
  %y = graph.mul %x, %w : (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %p = graph.global_avg_pool %y {layout = "nhwc"} : (tensor<1x4x4x3xf32>) -> tensor<1x1x1x3xf32>
  %l = graph.reduce_sum %p : (tensor<1x1x1x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// `result` names a result that does not exist
// RUN: not dlpc-opt %s -p 'graph-autodiff{result=2}' --split-input-file --allow-unregistered-dialect 2>&1 | filecheck %s --check-prefix=RESULT
// RESULT: dlpc-opt: error: graph-autodiff: result 2 does not exist (@main returns 1)
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %l = graph.reduce_sum %x : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
