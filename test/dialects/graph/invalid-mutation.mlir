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
