// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny multicore=false}' | filecheck %s --check-prefix=SINGLE

// Pure data movement as te-to-loop emits it (graph: concat -> slice rows 1..2 -> reshape ->
// transpose). The index arithmetic is evaluated at compile time; runs contiguous in source
// and destination become GDRAM2GDRAM copies split evenly over the tasks (no NRAM at all):
// the concatenation is one piece per input, the slice one, the reshape one. The
// transpose moves single elements, so it stays staged through NRAM.

// CHECK-LABEL: dlp.kernel "concat_0" attributes {tasks = 2 : i64
// CHECK-NOT: memref.alloc
// CHECK: %[[T:.*]] = dlp.task_id
// CHECK: arith.cmpi eq, %[[T]]
// CHECK-NEXT: scf.if
// CHECK-NEXT: dlp.memcpy_async GDRAM2GDRAM %concat[%{{.*}}], %x[%{{.*}}], %{{.*}} : memref<3x64xf32>, memref<2x64xf32>
// CHECK: scf.if
// CHECK-NEXT: dlp.memcpy_async GDRAM2GDRAM %concat[%{{.*}}], %x[%{{.*}}], %{{.*}} : memref<3x64xf32>, memref<2x64xf32>
// CHECK-NEXT: dlp.memcpy_async GDRAM2GDRAM %concat[%{{.*}}], %y[%{{.*}}], %{{.*}} : memref<3x64xf32>, memref<1x64xf32>
// CHECK-LABEL: dlp.kernel "slice_1"
// CHECK-NOT: memref.alloc
// CHECK: dlp.memcpy_async GDRAM2GDRAM %slice[%{{.*}}], %concat[%{{.*}}]
// CHECK-LABEL: dlp.kernel "reshape_2"
// CHECK-NOT: memref.alloc
// CHECK: dlp.memcpy_async GDRAM2GDRAM %reshape[%{{.*}}], %slice[%{{.*}}]
// CHECK-LABEL: dlp.kernel "transpose_3"
// CHECK-NOT: GDRAM2GDRAM
// CHECK: memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<nram>>
// CHECK-NOT: GDRAM2GDRAM

// One task copies every piece of the concatenation.
// SINGLE-LABEL: dlp.kernel "concat_0" attributes {tasks = 1 : i64
// SINGLE: scf.if
// SINGLE-NEXT: dlp.memcpy_async GDRAM2GDRAM %concat[%{{.*}}], %x[%{{.*}}], %{{.*}}
// SINGLE-NEXT: dlp.memcpy_async GDRAM2GDRAM %concat[%{{.*}}], %y[%{{.*}}], %{{.*}}
// SINGLE-NEXT: }

builtin.module {
  func.func @main(%x: memref<2x64xf32> {dlpc.name = "x"}, %y: memref<1x64xf32> {dlpc.name = "y"}, %out0: memref<16x8xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %concat = memref.alloc() : memref<3x64xf32>
    loop.kernel "concat_0" attributes {origin = "graph.concat"} {
      loop.for %i0 = 0 to 3 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %0 = arith.constant 2 : index
          %1 = arith.cmpi slt, %i0, %0 : index
          %2 = scf.if %1 -> (f32) {
            %3 = memref.load %x[%i0, %i1] : memref<2x64xf32>
            scf.yield %3 : f32
          } else {
            %4 = arith.constant 2 : index
            %5 = arith.subi %i0, %4 : index
            %6 = memref.load %y[%5, %i1] : memref<1x64xf32>
            scf.yield %6 : f32
          }
          memref.store %2, %concat[%i0, %i1] : memref<3x64xf32>
        }
      }
    }
    %slice = memref.alloc() : memref<2x64xf32>
    loop.kernel "slice_1" attributes {origin = "graph.slice"} {
      loop.for %i0_1 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 64 step 1 {name = "i1", vectorize} {
          %7 = arith.constant 1 : index
          %8 = arith.addi %i0_1, %7 : index
          %9 = memref.load %concat[%8, %i1_1] : memref<3x64xf32>
          memref.store %9, %slice[%i0_1, %i1_1] : memref<2x64xf32>
        }
      }
    }
    memref.dealloc %concat : memref<3x64xf32>
    %reshape = memref.alloc() : memref<8x16xf32>
    loop.kernel "reshape_2" attributes {origin = "graph.reshape"} {
      loop.for %i0_2 = 0 to 8 step 1 {name = "i0", parallel} {
        loop.for %i1_2 = 0 to 16 step 1 {name = "i1", vectorize} {
          %10 = arith.constant 16 : index
          %11 = arith.muli %i0_2, %10 : index
          %12 = arith.addi %11, %i1_2 : index
          %13 = arith.constant 64 : index
          %14 = arith.divsi %12, %13 : index
          %15 = arith.constant 64 : index
          %16 = arith.remsi %12, %15 : index
          %17 = memref.load %slice[%14, %16] : memref<2x64xf32>
          memref.store %17, %reshape[%i0_2, %i1_2] : memref<8x16xf32>
        }
      }
    }
    memref.dealloc %slice : memref<2x64xf32>
    loop.kernel "transpose_3" attributes {origin = "graph.transpose"} {
      loop.for %i0_3 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_3 = 0 to 8 step 1 {name = "i1", vectorize} {
          %18 = memref.load %reshape[%i1_3, %i0_3] : memref<8x16xf32>
          memref.store %18, %out0[%i0_3, %i1_3] : memref<16x8xf32>
        }
      }
    }
    memref.dealloc %reshape : memref<8x16xf32>
    func.return
  }
}
