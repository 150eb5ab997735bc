// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=APART

// Softmax over the last axis of a [2, 8, 16] tensor, as te-to-loop emits it for the dlp
// target: four kernels (max, exp, sum, scale) whose work loop has 2 iterations. As one
// chain (_dlp_fuse) on 2 tasks it would leave 14 cores idle; its members are row-wise
// (each loop below the work loop runs over the 8 rows), so the chain is also split into
// bands of rows (`Bands`, `row_bands_of`): 2 items x 8 bands = 16 tasks, task = item * 8
// + band, each one row: the buffers indexed by the row loop are planned as 16 items of
// one row (the same memory), tiled by item * 8 + band.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "softmax_0" attributes {tasks = 16 : i64, {{.*}}dlpc.fused = "softmax_0_max,softmax_0_exp,softmax_0_sum,softmax_0"}
// CHECK: %[[TASK:.*]] = dlp.task_id
// CHECK: %[[BAND:.*]] = arith.remsi %[[TASK]], %[[C8:.*]] : index
// CHECK: %[[ITEM:.*]] = arith.divsi %[[TASK]], %[[C8]] : index
// CHECK: %[[X:x_nram]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[OUT:out0_nram]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[LO:.*]] = arith.minsi %[[ITEM]], %{{.*}} : index
// CHECK: scf.for %[[T0:.*]] = %[[LO]] to
// CHECK: %[[SCALED:.*]] = arith.muli %[[T0]], %[[C8]] : index
// CHECK: %[[ROW:.*]] = arith.addi %[[SCALED]], %[[BAND]] : index
// CHECK: %[[BASE:.*]] = arith.muli %[[ROW]], %[[C16:.*]] : index
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}], %x[%[[BASE]]]
// CHECK: dlp.wait_dma
// CHECK: dlp.reduce_max %{{.*}}, %[[X]][%{{.*}}], %{{.*}}, %[[C16]]
// CHECK: dlp.exp
// CHECK: dlp.reduce_sum
// CHECK: dlp.mul_scalar %[[OUT]]
// CHECK: dlp.memcpy_async NRAM2GDRAM %out0[%[[BASE]]], %[[OUT]][%{{.*}}]

// APART: dlp.kernel "softmax_0_max" attributes {tasks = 2 : i64
// APART-NOT: arith.remsi

builtin.module {
  func.func @main(%x: memref<2x8x16xf32> {dlpc.name = "x"}, %out0: memref<2x8x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %softmax_0_max = memref.alloc() : memref<2x8xf32>
    loop.kernel "softmax_0_max" attributes {origin = "graph.softmax"} {
      loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
          %acc = memref.alloca() : memref<f32>
          %0 = arith.constant 0xff800000 : f32
          memref.store %0, %acc[] : memref<f32>
          loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
            %1 = memref.load %x[%i0, %i1, %r0] : memref<2x8x16xf32>
            %2 = memref.load %acc[] : memref<f32>
            %3 = arith.maximumf %2, %1 : f32
            memref.store %3, %acc[] : memref<f32>
          }
          %max = memref.load %acc[] : memref<f32>
          memref.store %max, %softmax_0_max[%i0, %i1] : memref<2x8xf32>
        }
      }
    }
    %softmax_0_exp = memref.alloc() : memref<2x8x16xf32>
    loop.kernel "softmax_0_exp" attributes {origin = "graph.softmax"} {
      loop.for %i0_1 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 8 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 16 step 1 {name = "i2", vectorize} {
            %4 = memref.load %x[%i0_1, %i1_1, %i2] : memref<2x8x16xf32>
            %5 = memref.load %softmax_0_max[%i0_1, %i1_1] : memref<2x8xf32>
            %6 = arith.subf %4, %5 : f32
            %7 = math.exp %6 : f32
            memref.store %7, %softmax_0_exp[%i0_1, %i1_1, %i2] : memref<2x8x16xf32>
          }
        }
      }
    }
    memref.dealloc %softmax_0_max : memref<2x8xf32>
    %softmax_0_sum = memref.alloc() : memref<2x8xf32>
    loop.kernel "softmax_0_sum" attributes {origin = "graph.softmax"} {
      loop.for %i0_2 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_2 = 0 to 8 step 1 {name = "i1"} {
          %acc_1 = memref.alloca() : memref<f32>
          %8 = arith.constant 0.000000e+00 : f32
          memref.store %8, %acc_1[] : memref<f32>
          loop.for %r0_1 = 0 to 16 step 1 {name = "r0", reduction} {
            %9 = memref.load %softmax_0_exp[%i0_2, %i1_2, %r0_1] : memref<2x8x16xf32>
            %10 = memref.load %acc_1[] : memref<f32>
            %11 = arith.addf %10, %9 : f32
            memref.store %11, %acc_1[] : memref<f32>
          }
          %sum = memref.load %acc_1[] : memref<f32>
          memref.store %sum, %softmax_0_sum[%i0_2, %i1_2] : memref<2x8xf32>
        }
      }
    }
    loop.kernel "softmax_0" attributes {origin = "graph.softmax"} {
      loop.for %i0_3 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_3 = 0 to 8 step 1 {name = "i1"} {
          loop.for %i2_1 = 0 to 16 step 1 {name = "i2", vectorize} {
            %12 = memref.load %softmax_0_exp[%i0_3, %i1_3, %i2_1] : memref<2x8x16xf32>
            %13 = memref.load %softmax_0_sum[%i0_3, %i1_3] : memref<2x8xf32>
            %14 = arith.constant 1.000000e+00 : f32
            %15 = arith.divf %14, %13 : f32
            %16 = arith.mulf %12, %15 : f32
            memref.store %16, %out0[%i0_3, %i1_3, %i2_1] : memref<2x8x16xf32>
          }
        }
      }
    }
    memref.dealloc %softmax_0_exp : memref<2x8x16xf32>
    memref.dealloc %softmax_0_sum : memref<2x8xf32>
    func.return
  }
}