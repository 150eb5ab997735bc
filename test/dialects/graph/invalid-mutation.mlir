// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Verifier cases written against surviving mutants (issue 35, bench/mutation.py --area dialects).

// a window that fits the width but not the height is refused (not only when neither fits)
func.func @f(%x: tensor<1x4x1x8xf32>) {
  %0 = graph.winograd_input_transform %x : (tensor<1x4x1x8xf32>) -> tensor<16x1x4x1x3xf32>
  func.return
}
// CHECK: graph.winograd_input_transform: a 3x3 window does not fit input 1x8 with the given padding

// -----

func.func @f(%x: tensor<1x4x8x1xf32>) {
  %0 = graph.winograd_input_transform %x : (tensor<1x4x8x1xf32>) -> tensor<16x1x4x3x1xf32>
  func.return
}
// CHECK: graph.winograd_input_transform: a 3x3 window does not fit input 8x1 with the given padding

// -----

// element kinds: a math function of integers, a mean of booleans
func.func @f(%x: tensor<2x3xi64>) {
  %0 = graph.exp %x : (tensor<2x3xi64>) -> tensor<2x3xi64>
  func.return
}
// CHECK: graph.exp needs a floating-point operand, got i64

// -----

func.func @f(%x: tensor<2x3xi1>) {
  %0 = graph.reduce_mean %x {axes = array<i64: 1>} : (tensor<2x3xi1>) -> tensor<2xi1>
  func.return
}
// CHECK: graph.reduce_mean needs a numeric operand, got i1

// -----

// a pool without `pads` pads nothing: 4x4, 2x2 window, stride 1 -> 3x3
// CHECK-LABEL: func.func @pool_default_pads
// CHECK: graph.max_pool2d %{{.*}} {kernel = array<i64: 2, 2>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
func.func @pool_default_pads(%x: tensor<1x1x4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return
}
