// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s

// attention's head split [B, S, H, D] -> [B, H, S, D] over whole items (the batch as work
// loop): per item one dlp.transpose of its S rows of H*D into a scratch [H*D, S], then
// one per head of the scratch's [D, S] block into the item's [S, D] block; no scalar
// loops, and not 128 GDRAM2GDRAM copies of 16 floats (two DMAs a tile instead).

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "transpose_0"
// CHECK-NOT: dlpc.scalar
// CHECK: dlp.memcpy GDRAM2NRAM %x_nram[%{{.*}}], %x[%x_base]
// CHECK: %perm_nram = memref.alloc() : memref<1024xf32, #dlp.space<nram>>
// CHECK: dlp.transpose %perm_nram[%{{.*}}], %x_nram[%{{.*}}], %[[S:.*]], %[[HD:.*]] :
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step
// CHECK: dlp.transpose %out0_nram[%{{.*}}], %perm_nram[%{{.*}}], %[[S]], %[[S]] :
// CHECK: dlp.memcpy NRAM2GDRAM %out0[%x_base], %out0_nram
// CHECK-NOT: memref.load
// CHECK-NOT: dlp.memcpy GDRAM2GDRAM

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
// the direct copy would be 4 GDRAM2GDRAM pieces of 16 floats a task (4 DMA latencies);
// the one item on one task is two DMAs and its transposes.

// CHECK-LABEL: func.func @one_item
// CHECK: dlp.kernel "transpose_1" attributes {tasks = 1 : i64
// CHECK: dlp.memcpy GDRAM2NRAM %x_nram[%{{.*}}], %x[%{{.*}}]
// CHECK: dlp.transpose %perm_nram[%{{.*}}], %x_nram[%{{.*}}]
// CHECK: dlp.transpose %out0_nram[%{{.*}}], %perm_nram[%{{.*}}]
// CHECK: dlp.memcpy NRAM2GDRAM %out0[%{{.*}}], %out0_nram
// CHECK-NOT: GDRAM2GDRAM
// CHECK: func.return

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
