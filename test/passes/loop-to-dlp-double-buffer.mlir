// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny double-buffer=false}' | filecheck %s --check-prefix=SINGLE
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny multicore=false}' | filecheck %s --check-prefix=ONECORE

// Ping-pong buffers: two slots per tiled buffer; tile k+1 is fetched asynchronously
// into the other slot while tile k is computed, stores are asynchronous too.

// CHECK-LABEL: func.func @scale
// CHECK: dlp.kernel "scale_0" attributes {tasks = 2 : i64, dma_align = 64 : i64, vector_align = 64 : i64, double_buffered} {
// CHECK: %[[X:.*]] = memref.alloc() : memref<[[SIZE:[0-9]+]]xf32, #dlp.space<nram>>
// CHECK: %[[NT:.*]] = arith.ceildivsi
// prologue: tile 0 into slot 0
// CHECK: scf.if
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}}
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %[[NT]] step
// CHECK-NEXT: dlp.wait_dma
// prefetch of tile k+1 into slot (k+1) % 2
// CHECK: scf.if
// CHECK: arith.remsi
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}]
// compute tile k from slot k % 2, store asynchronously
// CHECK: %[[SLOT:.*]] = arith.remsi %[[K]]
// CHECK: dlp.mul_scalar
// CHECK: dlp.memcpy_async NRAM2GDRAM
// CHECK: }
// CHECK-NEXT: dlp.wait_dma

// Single-buffered: one slot; a tile's load is waited for at once (with the last tile's
// store, still in flight), the store left in flight, one wait before the kernel ends.
// SINGLE: dlp.kernel "scale_0" attributes {tasks = 2 : i64, dma_align = 64 : i64, vector_align = 64 : i64} {
// SINGLE-NOT: arith.remsi
// SINGLE: scf.for
// SINGLE: dlp.memcpy_async GDRAM2NRAM
// SINGLE-NEXT: dlp.wait_dma
// SINGLE: dlp.mul_scalar
// SINGLE-NEXT: dlp.memcpy_async NRAM2GDRAM
// SINGLE-NEXT: }
// SINGLE-NEXT: dlp.wait_dma
// SINGLE-NEXT: }

// ONECORE: dlp.kernel "scale_0" attributes {tasks = 1 : i64,

func.func @scale(%x: memref<256x16xf32>, %out: memref<256x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "scale_0" {
    loop.for %i0 = 0 to 256 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<256x16xf32>
        %c = arith.constant 3.000000e+00 : f32
        %r = arith.mulf %v, %c : f32
        memref.store %r, %out[%i0, %i1] : memref<256x16xf32>
      }
    }
  }
  func.return
}
