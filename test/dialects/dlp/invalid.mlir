// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @direction_mismatch(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy GDRAM2WRAM %a[%c0], %x[%c0], %c0 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  func.return
}
// CHECK: dlp.memcpy direction GDRAM2WRAM does not match source in gdram and destination in nram (expected GDRAM2NRAM)

// -----

func.func @matmul_weight_not_in_wram(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.matmul %a[%c0], %a[%c0], %a[%c0], %c4, %c4, %c4 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.matmul operand 'rhs' must be in wram, got nram (memref<64xf32, #dlp.space<nram>>)

// -----

func.func @vector_operand_in_gdram(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.relu %a[%c0], %x[%c0], %c0 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  func.return
}
// CHECK: dlp.relu operand 'src' must be in nram, got gdram (memref<64xf32>)

// -----

func.func @misaligned_intrinsic(%x: memref<64xf32>) {
  dlp.kernel "k" attributes {tasks = 1 : i64, vector_align = 64 : i64} {
    %c0 = arith.constant 0 : index
    %c3 = arith.constant 3 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    dlp.exp %a[%c0], %a[%c3], %c3 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  }
  func.return
}
// CHECK: dlp.exp operand 'src' offset 3 (12 bytes) is not aligned to 64 bytes (vector_align)

// -----

func.func @misaligned_dma(%x: memref<64xf32>) {
  dlp.kernel "k" attributes {tasks = 1 : i64, dma_align = 64 : i64} {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    dlp.memcpy GDRAM2NRAM %a[%c8], %x[%c0], %c8 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  }
  func.return
}
// CHECK: dlp.memcpy operand 'dst' offset 8 (32 bytes) is not aligned to 64 bytes (dma_align)

// -----

func.func @element_types(%x: memref<64xf64>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy GDRAM2NRAM %a[%c0], %x[%c0], %c0 : memref<64xf32, #dlp.space<nram>>, memref<64xf64>
  func.return
}
// CHECK: dlp.memcpy copies f64 into f32

// -----

func.func @cycle_count(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c10 = arith.constant 10 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.cycle_add %a[%c0], %a[%c0], %a[%c0], %c10, %c4 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.cycle_add count 10 is not a multiple of segment length 4

// -----

func.func @bad_tasks() {
  dlp.kernel "k" attributes {tasks = 0 : i64} {
  }
  func.return
}
// CHECK: kernel 'k' launches 0 tasks, expected >= 1

// -----

func.func @conv_too_small(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  %w = memref.alloc() : memref<64xf32, #dlp.space<wram>>
  %c4 = arith.constant 4 : index
  dlp.conv2d %a[%c0], %a[%c0], %w[%c0], %c4 {channels_in = 1 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<wram>>
  func.return
}
// CHECK: dlp.conv2d operand 'dst' holds 64 elements, needs 144

// -----

func.func @pool_src_too_small() {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.pool "max" %a[%c0], %a[%c0], %c8 {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.pool operand 'src' holds 64 elements, needs 128

// -----

func.func @pool_window_past_image() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.pool "max" %a[%c0], %a[%c0], %c1 {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 3 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.pool last window of rows starts past the image (out_h = 3)

// -----

// (issue 18: one case per verifier message that had none)
func.func @conv_kernel_too_big() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  %w = memref.alloc() : memref<64xf32, #dlp.space<wram>>
  dlp.conv2d %a[%c0], %a[%c0], %w[%c0], %c1 {channels_in = 1 : i64, height = 2 : i64, width = 2 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<wram>>
  func.return
}
// CHECK: dlp.conv2d kernel is larger than the padded input

// -----

func.func @pool_pad_not_smaller() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.pool "max" %a[%c0], %a[%c0], %c1 {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 2 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.pool padding must be smaller than the window

// -----

func.func @foreign_memory_space() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<64xf32, 3>
  %b = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy GDRAM2NRAM %b[%c0], %a[%c0], %c1 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, 3>
  func.return
}
// CHECK: memref memref<64xf32, 3 : i64> has memory space 3 : i64, expected #dlp.space<...>

// -----

func.func @mixed_element_types() {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  %h = memref.alloc() : memref<64xf16, #dlp.space<nram>>
  dlp.add %a[%c0], %a[%c0], %h[%c0], %c4 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>, memref<64xf16, #dlp.space<nram>>
  func.return
}
// CHECK: dlp.add mixes element types f32 and f16

// -----

func.func @async_copy_not_waited(%x: memref<64xf32>) {
  dlp.kernel "k" attributes {tasks = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    dlp.memcpy_async GDRAM2NRAM %a[%c0], %x[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.wait_dma
    dlp.memcpy_async NRAM2GDRAM %x[%c0], %a[%c0], %c64 : memref<64xf32>, memref<64xf32, #dlp.space<nram>>
  }
  func.return
}
// CHECK: kernel 'k' issues dlp.memcpy_async but does not end with dlp.wait_dma

// -----

func.func @strided_copy_without_segments(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy_strided_async GDRAM2NRAM %a[%c0], %x[%c0], %c16 x %c0, %c16, %c16 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  func.return
}
// CHECK: dlp.memcpy_strided_async has 0 segments, expected >= 1

// -----

func.func @strided_copy_overlapping_segments(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy_strided_async GDRAM2NRAM %a[%c0], %x[%c0], %c16 x %c2, %c8, %c16 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  func.return
}
// CHECK: dlp.memcpy_strided_async destination stride 8 is less than the segment's 16 elements: segments would overlap

// -----

func.func @strided_copy_direction(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.memcpy_strided_async GDRAM2WRAM %a[%c0], %x[%c0], %c16 x %c2, %c16, %c16 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
  func.return
}
// CHECK: dlp.memcpy_strided_async direction GDRAM2WRAM does not match source in gdram and destination in nram (expected GDRAM2NRAM)
