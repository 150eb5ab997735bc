// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// The verifiers of graph.winograd_{filter,input,output}_transform (graph-winograd's ops).

func.func @f(%w: tensor<8x4x5x5xf32>) {
  %0 = graph.winograd_filter_transform %w : (tensor<8x4x5x5xf32>) -> tensor<16x8x4xf32>
  func.return
}
// CHECK: graph.winograd_filter_transform expects an OIHW 3x3 weight, got 8x4x5x5

// -----

func.func @f(%w: tensor<8x4x3x3xf32>) {
  %0 = graph.winograd_filter_transform %w : (tensor<8x4x3x3xf32>) -> tensor<16x4x8xf32>
  func.return
}
// CHECK: graph.winograd_filter_transform: inferred result shape 16x8x4 but result type has shape 16x4x8

// -----

func.func @f(%x: tensor<1x4x2x2xf32>) {
  %0 = graph.winograd_input_transform %x : (tensor<1x4x2x2xf32>) -> tensor<16x1x4x1x1xf32>
  func.return
}
// CHECK: graph.winograd_input_transform: a 3x3 window does not fit input 2x2 with the given padding

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %0 = graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>) -> tensor<16x1x4x3x3xf32>
  func.return
}
// CHECK: graph.winograd_input_transform: inferred result shape 16x1x4x4x4 but result type has shape 16x1x4x3x3

// -----

func.func @f(%m: tensor<16x1x8x4x4xf32>) {
  %0 = graph.winograd_output_transform %m {output = array<i64: 9, 8>} : (tensor<16x1x8x4x4xf32>) -> tensor<1x8x9x8xf32>
  func.return
}
// CHECK: graph.winograd_output_transform output 9x8 needs 5x4 tiles, got 4x4

// -----

func.func @f(%m: tensor<16x1x8x4x4xf32>, %b: tensor<4xf32>) {
  %0 = graph.winograd_output_transform %m, %b {output = array<i64: 8, 8>} : (tensor<16x1x8x4x4xf32>, tensor<4xf32>) -> tensor<1x8x8x8xf32>
  func.return
}
// CHECK: graph.winograd_output_transform bias 4 does not match 8 output channels

// -----

func.func @f(%m: tensor<9x1x8x4x4xf32>) {
  %0 = graph.winograd_output_transform %m {output = array<i64: 8, 8>} : (tensor<9x1x8x4x4xf32>) -> tensor<1x8x8x8xf32>
  func.return
}
// CHECK: graph.winograd_output_transform expects [16, N, O, tiles_h, tiles_w], got 9x1x8x4x4
