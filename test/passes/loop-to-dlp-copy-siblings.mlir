// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=APART

// Attention's three slices of one projection (q, k, v: columns 0..63, 64..127, 128..191
// of a [16, 192] buffer) are independent direct copies: one kernel whose tasks issue
// every slice's pieces back to back (one DMA latency, not one a kernel), named after the
// last, `dlpc.fused` naming all three, one wait at its end. The fourth copy reads q,
// which the first writes: a kernel of its own after them.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "slice_2" attributes {tasks = 16 : i64, dlpc.fused = "slice_0,slice_1,slice_2"
// CHECK-NOT: dlp.wait_dma
// CHECK-DAG: dlp.memcpy_async GDRAM2GDRAM %q[%{{.*}}], %qkv[%{{.*}}]
// CHECK-DAG: dlp.memcpy_async GDRAM2GDRAM %k[%{{.*}}], %qkv[%{{.*}}]
// CHECK-DAG: dlp.memcpy_async GDRAM2GDRAM %v[%{{.*}}], %qkv[%{{.*}}]
// CHECK: dlp.wait_dma
// CHECK-NEXT: }
// CHECK-NEXT: dlp.kernel "copy_3"
// CHECK: dlp.memcpy_async GDRAM2GDRAM %out0[%{{.*}}], %q[%{{.*}}]
// CHECK-NOT: dlp.kernel

// APART: dlp.kernel "slice_0"
// APART: dlp.kernel "slice_1"
// APART: dlp.kernel "slice_2"
// APART: dlp.kernel "copy_3"

builtin.module {
  func.func @main(%qkv: memref<16x192xf32> {dlpc.name = "x"}, %k: memref<16x64xf32>, %v: memref<16x64xf32>, %out0: memref<16x64xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 3 : i64} {
    %q = memref.alloc() : memref<16x64xf32>
    loop.kernel "slice_0" attributes {origin = "graph.slice"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %0 = memref.load %qkv[%i0, %i1] : memref<16x192xf32>
          memref.store %0, %q[%i0, %i1] : memref<16x64xf32>
        }
      }
    }
    loop.kernel "slice_1" attributes {origin = "graph.slice"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %c64 = arith.constant 64 : index
          %1 = arith.addi %i1, %c64 : index
          %2 = memref.load %qkv[%i0, %1] : memref<16x192xf32>
          memref.store %2, %k[%i0, %i1] : memref<16x64xf32>
        }
      }
    }
    loop.kernel "slice_2" attributes {origin = "graph.slice"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %c128 = arith.constant 128 : index
          %3 = arith.addi %i1, %c128 : index
          %4 = memref.load %qkv[%i0, %3] : memref<16x192xf32>
          memref.store %4, %v[%i0, %i1] : memref<16x64xf32>
        }
      }
    }
    loop.kernel "copy_3" attributes {origin = "graph.copy"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %5 = memref.load %q[%i0, %i1] : memref<16x64xf32>
          memref.store %5, %out0[%i0, %i1] : memref<16x64xf32>
        }
      }
    }
    memref.dealloc %q : memref<16x64xf32>
    func.return
  }
}
