// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{multicore=false}' | filecheck %s --check-prefix=ONE

// A linear layer over 16 rows (x [1, 16, 64], w [192, 64], b [192]), as te-to-loop emits it
// for the dlp target. Split by rows, every cluster that runs rows needs the whole 48 KiB
// weight (it would cross the GDRAM port once per cluster); split by output columns
// (_dlp_columns), each of 12 tasks owns 16 columns: its 16 weight rows (4 KiB, one
// contiguous range) go straight to WRAM, so the weight crosses the port once. The input
// is staged once per cluster (each core a quarter into SRAM, the barrier, every core all
// of it SRAM2NRAM); one
// dlp.matmul of the 16 rows by the block's rows transposed, the bias as a dlp.cycle_add
// of period 16, and the block's 16 rows of 16 floats stored as one strided DMA (stride:
// a row of the output, 192).

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "linear_0" attributes {tasks = 12 : i64
// CHECK: %[[TASK:.*]] = dlp.task_id
// CHECK: %[[CORE:.*]] = dlp.core_id
// CHECK: %[[XS:x_sram]] = memref.alloc() : memref<1024xf32, #dlp.space<sram>>
// CHECK: %[[XN:x_nram]] = memref.alloc() : memref<1024xf32, #dlp.space<nram>>
// CHECK: %[[W:w_wram]] = memref.alloc() : memref<1024xf32, #dlp.space<wram>>
// CHECK: %[[ACC:acc_nram]] = memref.alloc() : memref<256xf32, #dlp.space<nram>>
// CHECK: %[[COL:.*]] = arith.muli %[[TASK]], %[[C16:.*]] : index
// CHECK: %[[START:.*]] = arith.minsi %{{.*}}, %[[C1024:.*]] : index
// CHECK: scf.if
// CHECK: dlp.memcpy_async GDRAM2SRAM %[[XS]][%[[START]]], %x[%[[START]]]
// CHECK: dlp.memcpy_async GDRAM2WRAM %[[W]][%{{.*}}], %w[%{{.*}}], %[[C1024]] :
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[B:.*]][%{{.*}}], %b[%[[COL]]], %[[C16]]
// CHECK: dlp.wait_dma
// CHECK-NEXT: dlp.sync_cluster
// CHECK-NEXT: dlp.memcpy_async SRAM2NRAM %[[XN]][%{{.*}}], %[[XS]][%{{.*}}], %[[C1024]]
// CHECK-NEXT: dlp.wait_dma
// CHECK-NEXT: dlp.matmul %[[ACC]][%{{.*}}], %[[XN]][%{{.*}}], %[[W]][%{{.*}}], %[[C16]], %{{.*}}, %[[C16]] {transpose_rhs}
// CHECK: dlp.cycle_add %[[OUT:.*]][%{{.*}}], %[[ACC]][%{{.*}}], %[[B]][%{{.*}}], %{{.*}}, %[[C16]]
// CHECK: dlp.memcpy_strided_async NRAM2GDRAM %out0[%[[COL]]], %[[OUT]][%{{.*}}], %[[C16]] x %[[C16]], %[[C192:.*]], %[[C16]]
// CHECK-NEXT: dlp.wait_dma

// One task: the row plan (no column split without the multi-core split).
// ONE: dlp.kernel "linear_0" attributes {tasks = 1 : i64
// ONE-NOT: dlp.memcpy_strided_async

builtin.module {
  func.func @main(%x: memref<1x16x64xf32> {dlpc.name = "x"}, %w: memref<192x64xf32> {dlpc.name = "w"}, %b: memref<192xf32> {dlpc.name = "b"}, %out0: memref<1x16x192xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "linear_0" attributes {origin = "graph.linear"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 192 step 1 {name = "i2"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0.000000e+00 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
              %1 = memref.load %x[%i0, %i1, %r0] : memref<1x16x64xf32>
              %2 = memref.load %w[%i2, %r0] : memref<192x64xf32>
              %3 = arith.mulf %1, %2 : f32
              %4 = memref.load %acc[] : memref<f32>
              %5 = arith.addf %4, %3 : f32
              memref.store %5, %acc[] : memref<f32>
            }
            %sum = memref.load %acc[] : memref<f32>
            %6 = memref.load %b[%i2] : memref<192xf32>
            %7 = arith.addf %sum, %6 : f32
            memref.store %7, %out0[%i0, %i1, %i2] : memref<1x16x192xf32>
          }
        }
      }
    }
    func.return
  }
}