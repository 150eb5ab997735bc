// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s

// A batch of row slices: 256 kept rows of 16 elements, 16 per task (more than
// MAX_PIECES_PER_TASK, but long enough pieces): direct GDRAM2GDRAM copies, no NRAM. A
// task's 16 rows step by 16 floats in the destination and 32 in the source: one strided
// DMA of 16 segments each.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "slice_0" attributes {tasks = 16 : i64
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK-COUNT-16: dlp.memcpy_strided_async GDRAM2GDRAM %out0[%{{.*}}], %x[%{{.*}}], %[[C16]] x %[[C16]], %[[C16]], %[[C32]] : memref<32x8x16xf32>, memref<32x8x32xf32>
// CHECK-NOT: nram

func.func @main(%x: memref<32x8x32xf32> {dlpc.name = "x"}, %out0: memref<32x8x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "slice_0" attributes {origin = "graph.slice"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 16 step 1 {name = "i2", vectorize} {
          %0 = arith.constant 16 : index
          %1 = arith.addi %i2, %0 : index
          %2 = memref.load %x[%i0, %i1, %1] : memref<32x8x32xf32>
          memref.store %2, %out0[%i0, %i1, %i2] : memref<32x8x16xf32>
        }
      }
    }
  }
  func.return
}
