// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Verifier cases written against surviving mutants (issue 35, bench/mutation.py --area dialects).

// a strided conv's output is (size + pads - kernel) / stride + 1 rows and columns: an
// 8x8 input, 3x3 kernel, strides 2 and 1 give 3x6 (18 elements), strides 1 and 2 give 6x3
// CHECK-LABEL: func.func @conv_strided
// CHECK-COUNT-2: dlp.conv2d
func.func @conv_strided() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = memref.alloc() : memref<18xf32, #dlp.space<nram>>
  %s = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  %w = memref.alloc() : memref<9xf32, #dlp.space<wram>>
  dlp.conv2d %d[%c0], %s[%c0], %w[%c0], %c1 {channels_in = 1 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 2 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<18xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<9xf32, #dlp.space<wram>>
  dlp.conv2d %d[%c0], %s[%c0], %w[%c0], %c1 {channels_in = 1 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<18xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<9xf32, #dlp.space<wram>>
  func.return
}

// -----

// one element short of the strided output is refused
func.func @conv_strided_short() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = memref.alloc() : memref<17xf32, #dlp.space<nram>>
  %s = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  %w = memref.alloc() : memref<9xf32, #dlp.space<wram>>
  dlp.conv2d %d[%c0], %s[%c0], %w[%c0], %c1 {channels_in = 1 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 2 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<17xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<9xf32, #dlp.space<wram>>
  func.return
}
// CHECK: dlp.conv2d operand 'dst' holds 17 elements, needs 18
