// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=APART

// Softmax as te-to-loop emits it for the dlp target: four kernels (max, exp, sum, scale)
// over the same rows, each reading at row i what the one before wrote at row i. They
// become ONE dlp.kernel named after the last member: per tile the input rows are loaded
// once, the max and the sum reduced straight into their NRAM tiles (read by the next
// member, never stored), and only the function's output goes back to GDRAM. Each kernel
// alone would pay its own loads and stores (three DMA latencies more a task for the
// intermediates, twice).

// CHECK-LABEL: func.func @main
// CHECK-NOT: dlp.kernel "softmax_0_max"
// CHECK: dlp.kernel "softmax_0" attributes {{{.*}}dlpc.fused = "softmax_0_max,softmax_0_exp,softmax_0_sum,softmax_0"}
// CHECK: %[[X:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[MAX:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[EXP:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[SUM:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: scf.for
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}], %x[%[[BASE:.*]]], %{{.*}}
// CHECK-NOT: dlp.memcpy
// CHECK: dlp.reduce_max %[[MAX]][%{{.*}}], %[[X]][%{{.*}}]
// CHECK-NOT: dlp.memcpy
// CHECK: dlp.exp %[[EXP]]
// CHECK-NOT: dlp.memcpy
// CHECK: dlp.reduce_sum %[[SUM]][%{{.*}}], %[[EXP]][%{{.*}}]
// CHECK-NOT: dlp.memcpy
// CHECK: dlp.mul_scalar %[[OUT]]
// CHECK: dlp.memcpy_async NRAM2GDRAM %out0[%[[BASE]]], %[[OUT]][%{{.*}}]
// CHECK-NOT: dlp.memcpy
// CHECK: memref.dealloc %softmax_0_max
// CHECK: func.return

// APART: dlp.kernel "softmax_0_max"
// APART: dlp.memcpy_async NRAM2GDRAM %softmax_0_max
// APART: dlp.kernel "softmax_0_exp"
// APART: dlp.kernel "softmax_0_sum"
// APART: dlp.kernel "softmax_0"

builtin.module {
  func.func @main(%x: memref<8x16xf32> {dlpc.name = "x"}, %out0: memref<8x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %softmax_0_max = memref.alloc() : memref<8xf32>
    loop.kernel "softmax_0_max" attributes {origin = "graph.softmax"} {
      loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
        %acc = memref.alloca() : memref<f32>
        %0 = arith.constant 0xff800000 : f32
        memref.store %0, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %1 = memref.load %x[%i0, %r0] : memref<8x16xf32>
          %2 = memref.load %acc[] : memref<f32>
          %3 = arith.maximumf %2, %1 : f32
          memref.store %3, %acc[] : memref<f32>
        }
        %max = memref.load %acc[] : memref<f32>
        memref.store %max, %softmax_0_max[%i0] : memref<8xf32>
      }
    }
    %softmax_0_exp = memref.alloc() : memref<8x16xf32>
    loop.kernel "softmax_0_exp" attributes {origin = "graph.softmax"} {
      loop.for %i0_1 = 0 to 8 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", vectorize} {
          %4 = memref.load %x[%i0_1, %i1] : memref<8x16xf32>
          %5 = memref.load %softmax_0_max[%i0_1] : memref<8xf32>
          %6 = arith.subf %4, %5 : f32
          %7 = math.exp %6 : f32
          memref.store %7, %softmax_0_exp[%i0_1, %i1] : memref<8x16xf32>
        }
      }
    }
    memref.dealloc %softmax_0_max : memref<8xf32>
    %softmax_0_sum = memref.alloc() : memref<8xf32>
    loop.kernel "softmax_0_sum" attributes {origin = "graph.softmax"} {
      loop.for %i0_2 = 0 to 8 step 1 {name = "i0", parallel} {
        %acc_1 = memref.alloca() : memref<f32>
        %8 = arith.constant 0.000000e+00 : f32
        memref.store %8, %acc_1[] : memref<f32>
        loop.for %r0_1 = 0 to 16 step 1 {name = "r0", reduction} {
          %9 = memref.load %softmax_0_exp[%i0_2, %r0_1] : memref<8x16xf32>
          %10 = memref.load %acc_1[] : memref<f32>
          %11 = arith.addf %10, %9 : f32
          memref.store %11, %acc_1[] : memref<f32>
        }
        %sum = memref.load %acc_1[] : memref<f32>
        memref.store %sum, %softmax_0_sum[%i0_2] : memref<8xf32>
      }
    }
    loop.kernel "softmax_0" attributes {origin = "graph.softmax"} {
      loop.for %i0_3 = 0 to 8 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 16 step 1 {name = "i1", vectorize} {
          %12 = memref.load %softmax_0_exp[%i0_3, %i1_1] : memref<8x16xf32>
          %13 = memref.load %softmax_0_sum[%i0_3] : memref<8xf32>
          %14 = arith.constant 1.000000e+00 : f32
          %15 = arith.divf %14, %13 : f32
          %16 = arith.mulf %12, %15 : f32
          memref.store %16, %out0[%i0_3, %i1_1] : memref<8x16xf32>
        }
      }
    }
    memref.dealloc %softmax_0_exp : memref<8x16xf32>
    memref.dealloc %softmax_0_sum : memref<8xf32>
    func.return
  }
}
