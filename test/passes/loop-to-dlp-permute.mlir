// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc="%S/Inputs/dlp-queue1.toml"}' | filecheck %s --check-prefix=SERIAL

// attention's head split [B, S, H, D] -> [B, H, S, D] over whole items (the batch as work
// loop): per item one dlp.transpose of its S rows of H*D into a scratch [H*D, S], then
// one per head of the scratch's [D, S] block into the item's [S, D] block; no scalar
// loops, and not 128 GDRAM2GDRAM copies of 16 floats (two DMAs a tile instead).

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "transpose_0"
// CHECK-NOT: dlpc.scalar
// CHECK: dlp.memcpy_async GDRAM2NRAM %x_nram[%{{.*}}], %x[%x_base]
// CHECK: %perm_nram = memref.alloc() : memref<1024xf32, #dlp.space<nram>>
// CHECK: dlp.transpose %perm_nram[%{{.*}}], %x_nram[%{{.*}}], %[[S:.*]], %[[HD:.*]] :
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step
// CHECK: dlp.transpose %out0_nram[%{{.*}}], %perm_nram[%{{.*}}], %[[S]], %[[S]] :
// CHECK: dlp.memcpy_async NRAM2GDRAM %out0[%x_base], %out0_nram
// CHECK-NOT: memref.load
// CHECK-NOT: dlp.memcpy_async GDRAM2GDRAM

builtin.module {
  func.func @main(%x: memref<2x16x4x16xf32> {dlpc.name = "x"}, %out0: memref<2x4x16x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    loop.kernel "transpose_0" attributes {origin = "graph.transpose"} {
      loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3", vectorize} {
              %0 = memref.load %x[%i0, %i2, %i1, %i3] : memref<2x16x4x16xf32>
              memref.store %0, %out0[%i0, %i1, %i2, %i3] : memref<2x4x16x16xf32>
            }
          }
        }
      }
    }
    func.return
  }
}

// At batch 1 there is one item (the outer loop has one iteration): split over 16 tasks
// the direct copy is 4 GDRAM2GDRAM pieces of 16 floats a task. Issued back to back they
// share one DMA latency (queue depth 8), so the direct copy wins; where each copy pays
// its own latency (queue depth 1: 4 latencies a task, the choice counts one DMA a piece)
// the one item on one task is cheaper: two DMAs and its transposes. The direct copy
// chosen issues a task's 4 pieces (rows of one head: 16 floats apart in the output, 64
// in the input) as one strided DMA.

// CHECK-LABEL: func.func @one_item
// CHECK: dlp.kernel "transpose_1" attributes {tasks = 16 : i64
// CHECK: scf.if
// CHECK-NEXT: dlp.memcpy_strided_async GDRAM2GDRAM %out0[%{{.*}}], %x[%{{.*}}], %[[D:.*]] x %{{.*}}, %[[D]], %{{.*}} :
// CHECK-NEXT: }
// CHECK: dlp.wait_dma
// CHECK-NEXT: }
// CHECK-NEXT: func.return

// SERIAL-LABEL: func.func @one_item
// SERIAL: dlp.kernel "transpose_1" attributes {tasks = 1 : i64
// SERIAL: dlp.memcpy_async GDRAM2NRAM %x_nram[%{{.*}}], %x[%{{.*}}]
// SERIAL: dlp.transpose %perm_nram[%{{.*}}], %x_nram[%{{.*}}]
// SERIAL: dlp.transpose %out0_nram[%{{.*}}], %perm_nram[%{{.*}}]
// SERIAL: dlp.memcpy_async NRAM2GDRAM %out0[%{{.*}}], %out0_nram
// SERIAL-NOT: GDRAM2GDRAM
// SERIAL: func.return

builtin.module {
  func.func @one_item(%x: memref<1x16x4x16xf32> {dlpc.name = "x"}, %out0: memref<1x4x16x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    loop.kernel "transpose_1" attributes {origin = "graph.transpose"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 4 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3", vectorize} {
              %0 = memref.load %x[%i0, %i2, %i1, %i3] : memref<1x16x4x16xf32>
              memref.store %0, %out0[%i0, %i1, %i2, %i3] : memref<1x4x16x16xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
