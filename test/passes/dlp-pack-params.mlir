// RUN: dlpc-opt %s -p 'dlp-pack-params{max-elements=64}' | filecheck %s
// RUN: dlpc-opt %s -p 'dlp-pack-params{max-elements=64},loop-to-dlp' | filecheck %s --check-prefix=CHAIN
// RUN: dlpc-opt %s -p 'dlp-pack-params{max-elements=64},loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=ALONE
// RUN: dlpc-opt %s -p 'dlp-pack-params{max-elements=8}' | filecheck %s --check-prefix=NONE

// x * s + b, then + c + w: the three 16-float params become views of one packed param in
// the order the kernels first read them (s, b, then c), each at a 64-byte offset; w (128
// floats, over max-elements) stays as it is, and so does every param's argument.

// CHECK-LABEL: func.func @main
// CHECK-SAME: %packed: memref<48xf32> {dlpc.name = "packed.0", dlpc.pack = {{\[}}["s", 0 : i64], ["b", 16 : i64], ["c", 32 : i64]]}, %out0
// CHECK-SAME: dlpc.params = ["s", "w", "b", "c", "packed.0"]
// CHECK-NEXT: %s_1 = memref.reinterpret_cast %packed to offset: [0], sizes: [16], strides: [1] : memref<48xf32> to memref<16xf32>
// CHECK-NEXT: %b_1 = memref.reinterpret_cast %packed to offset: [16], sizes: [16], strides: [1]
// CHECK-NEXT: %c_1 = memref.reinterpret_cast %packed to offset: [32], sizes: [16], strides: [1]
// CHECK: memref.load %s_1[%i1]
// CHECK: memref.load %b_1[%i1]
// CHECK: memref.load %c_1[%i1_1]
// CHECK: memref.load %w[%i0_1, %i1_1]

// One chain: its three views are one copy of the pack into NRAM, each a view of that copy.
// CHAIN: %packed_1 = memref.reinterpret_cast %packed to offset: [0], sizes: [48], strides: [1]
// CHAIN: dlp.kernel "add_1"
// CHAIN: %packed_nram = memref.alloc() : memref<48xf32, #dlp.space<nram>>
// CHAIN-NEXT: %s_nram = memref.reinterpret_cast %packed_nram to offset: [0], sizes: [16]
// CHAIN-NEXT: %b_nram = memref.reinterpret_cast %packed_nram to offset: [16], sizes: [16]
// CHAIN-NEXT: %c_nram = memref.reinterpret_cast %packed_nram to offset: [32], sizes: [16]
// CHAIN: dlp.memcpy_async GDRAM2NRAM %packed_nram[%{{.*}}], %packed_1[
// CHAIN-NOT: GDRAM2NRAM %{{[sbc]}}_nram

// Unfused: scale_0 copies s and b together, add_1 its c view alone.
// ALONE: %packed_1 = memref.reinterpret_cast %packed to offset: [0], sizes: [32], strides: [1]
// ALONE: dlp.kernel "scale_0"
// ALONE: dlp.memcpy_async GDRAM2NRAM %packed_nram[%{{.*}}], %packed_1[
// ALONE-NOT: GDRAM2NRAM %s_nram
// ALONE: dlp.kernel "add_1"
// ALONE: dlp.memcpy_async GDRAM2NRAM %c_nram[%{{.*}}], %c_1[

// Fewer than two small params: nothing to pack.
// NONE-NOT: packed
// NONE: memref.load %s[%i1]

builtin.module {
  func.func @main(%x: memref<8x16xf32> {dlpc.name = "x"}, %s: memref<16xf32> {dlpc.name = "s"}, %w: memref<8x16xf32> {dlpc.name = "w"}, %b: memref<16xf32> {dlpc.name = "b"}, %c: memref<16xf32> {dlpc.name = "c"}, %out0: memref<8x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["s", "w", "b", "c"], dlpc.num_outputs = 1 : i64} {
    %t = memref.alloc() : memref<8x16xf32>
    loop.kernel "scale_0" attributes {origin = "graph.mul"} {
      loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", vectorize} {
          %0 = memref.load %x[%i0, %i1] : memref<8x16xf32>
          %1 = memref.load %s[%i1] : memref<16xf32>
          %2 = arith.mulf %0, %1 : f32
          %3 = memref.load %b[%i1] : memref<16xf32>
          %4 = arith.addf %2, %3 : f32
          memref.store %4, %t[%i0, %i1] : memref<8x16xf32>
        }
      }
    }
    loop.kernel "add_1" attributes {origin = "graph.add"} {
      loop.for %i0_1 = 0 to 8 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 16 step 1 {name = "i1", vectorize} {
          %5 = memref.load %t[%i0_1, %i1_1] : memref<8x16xf32>
          %6 = memref.load %c[%i1_1] : memref<16xf32>
          %7 = arith.addf %5, %6 : f32
          %8 = memref.load %w[%i0_1, %i1_1] : memref<8x16xf32>
          %9 = arith.addf %7, %8 : f32
          memref.store %9, %out0[%i0_1, %i1_1] : memref<8x16xf32>
        }
      }
    }
    memref.dealloc %t : memref<8x16xf32>
    func.return
  }
}
