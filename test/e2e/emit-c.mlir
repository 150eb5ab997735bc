// RUN: dlpc-opt %s -t c | filecheck %s

// The C emitter on hand-written loop IR: one static function per kernel with
// restrict-qualified buffers (const when only read), pragmas from annotations, the
// accumulator as a scalar, globals, heap intermediates and the dlpc_main entry.

// CHECK:       #include <math.h>
// CHECK:       static const float g_constant_0[3] = {0.5f, (-1.0f), 2.5f};

// CHECK:       /* kernel "scale_0" (from graph.mul) */
// CHECK-NEXT:  __attribute__((noinline)) static void kernel_scale_0(const float *restrict v_x, const float *restrict g_constant_0, float *restrict v_tmp)
// CHECK-NEXT:  {
// CHECK-NEXT:    /* parallel: left serial, 12 iterations are too few */
// CHECK-NEXT:    for (int64_t v_i0 = 0; v_i0 < 4; v_i0++) {
// CHECK-NEXT:      #pragma omp simd
// CHECK-NEXT:      for (int64_t v_i1 = 0; v_i1 < 3; v_i1++) {
// CHECK-NEXT:        const float v_v = v_x[v_i0 * 3 + v_i1];
// CHECK-NEXT:        const float v_c = g_constant_0[v_i1];
// CHECK-NEXT:        const float v_m = v_v * v_c;
// CHECK-NEXT:        const bool v_pos = v_m > 0.0f;
// CHECK-NEXT:        float v_s;
// CHECK-NEXT:        if (v_pos) {
// CHECK-NEXT:          const float v_e = expf(v_m);
// CHECK-NEXT:          v_s = v_e;
// CHECK-NEXT:        } else {
// CHECK-NEXT:          const float v_t = tanhf(v_m);
// CHECK-NEXT:          v_s = v_t;
// CHECK-NEXT:        }
// CHECK-NEXT:        v_tmp[v_i0 * 3 + v_i1] = v_s;

// CHECK:       /* kernel "sum_1" */
// CHECK-NEXT:  static void kernel_sum_1(const float *restrict v_tmp, double *restrict v_out0)
// CHECK:           double v_acc;
// CHECK-NEXT:      v_acc = 0.0;
// CHECK-NEXT:      #pragma GCC ivdep
// CHECK-NEXT:      #pragma GCC unroll 4
// CHECK-NEXT:      for (int64_t v_r0 = 0; v_r0 < 3; v_r0++) {
// CHECK-NEXT:        const float v_v = v_tmp[v_i0 * 3 + v_r0];
// CHECK-NEXT:        const double v_w = (double)v_v;
// CHECK-NEXT:        const double v_a = v_acc;
// CHECK-NEXT:        const double v_n = v_a + v_w;
// CHECK-NEXT:        v_acc = v_n;
// CHECK-NEXT:      }

// CHECK:       /* kernel "index_2" */
// CHECK-NEXT:  static void kernel_index_2(int32_t *restrict v_out1)
// CHECK:         for (int64_t v_i0 = 0; v_i0 < 8; v_i0 += 2) {
// CHECK-NEXT:      const int32_t v_k = (int32_t)v_i0;
// CHECK-NEXT:      const int32_t v_q = DLPC_FLOORDIV(v_k, 3);
// CHECK-NEXT:      const int32_t v_u = (int32_t)((uint32_t)v_k % (uint32_t)3);
// CHECK-NEXT:      const int32_t v_s = (int32_t)((uint32_t)v_q + (uint32_t)v_u);
// CHECK-NEXT:      v_out1[v_i0] = v_s;

// CHECK:       /* kernel "big_3" */
// CHECK-NEXT:  static void kernel_big_3(float *restrict v_big)
// CHECK-NEXT:  {
// CHECK-NEXT:    if (dlpc_parallel()) {
// CHECK-NEXT:      #pragma omp parallel for
// CHECK-NEXT:      for (int64_t v_i0 = 0; v_i0 < 512; v_i0++) {
// CHECK-NEXT:        #pragma omp simd
// CHECK-NEXT:        for (int64_t v_i1 = 0; v_i1 < 256; v_i1++) {
// CHECK-NEXT:          const int64_t v_k = (int64_t)v_i1;
// CHECK-NEXT:          const float v_f = (float)v_k;
// CHECK-NEXT:          v_big[v_i0 * 256 + v_i1] = v_f;
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    } else {
// CHECK-NEXT:      for (int64_t v_i0 = 0; v_i0 < 512; v_i0++) {
// CHECK-NEXT:        #pragma omp simd
// CHECK-NEXT:        for (int64_t v_i1 = 0; v_i1 < 256; v_i1++) {
// CHECK-NEXT:          const int64_t v_k = (int64_t)v_i1;
// CHECK-NEXT:          const float v_f = (float)v_k;
// CHECK-NEXT:          v_big[v_i0 * 256 + v_i1] = v_f;
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK:       /* kernel "big_4" */
// CHECK-NEXT:  static void kernel_big_4(float *restrict v_big)
// CHECK-NEXT:  {
// CHECK-NEXT:    if (dlpc_parallel()) {
// CHECK-NEXT:      #pragma omp parallel for simd
// CHECK-NEXT:      for (int64_t v_i0 = 0; v_i0 < 131072; v_i0++) {
// CHECK:         } else {
// CHECK-NEXT:      #pragma omp simd
// CHECK-NEXT:      for (int64_t v_i0 = 0; v_i0 < 131072; v_i0++) {

// CHECK:       #ifdef DLPC_PROFILE
// CHECK-NEXT:  int dlpc_num_kernels = 5;
// CHECK-NEXT:  const char *dlpc_kernel_names[5] = {"scale_0", "sum_1", "index_2", "big_3", "big_4"};
// CHECK-NEXT:  double dlpc_kernel_seconds[5];
// CHECK-NEXT:  static double dlpc_kernel_start[5];
// CHECK-NEXT:  #endif
// CHECK:       /* int dlpc_main(void **args): 3 arguments, 0 on success */
// CHECK-NEXT:  /*   args[0] input  x: float[4x3] */
// CHECK-NEXT:  /*   args[1] output out0: double[4] */
// CHECK-NEXT:  /*   args[2] output out1: int32_t[8] */
// CHECK-NEXT:  int dlpc_main(void **args)
// CHECK-NEXT:  {
// CHECK-NEXT:    float *v_x = (float *)args[0];
// CHECK-NEXT:    double *v_out0 = (double *)args[1];
// CHECK-NEXT:    int32_t *v_out1 = (int32_t *)args[2];
// CHECK-NEXT:    float *v_tmp = (float *)dlpc_alloc(12, sizeof(float), "kernel 'scale_0'");
// CHECK-NEXT:    if (!v_tmp) return 1;
// CHECK-NEXT:    DLPC_PROF_BEGIN(0);
// CHECK-NEXT:    kernel_scale_0(v_x, g_constant_0, v_tmp);
// CHECK-NEXT:    DLPC_PROF_END(0);
// CHECK-NEXT:    DLPC_PROF_BEGIN(1);
// CHECK-NEXT:    kernel_sum_1(v_tmp, v_out0);
// CHECK-NEXT:    DLPC_PROF_END(1);
// CHECK-NEXT:    free(v_tmp);
// CHECK-NEXT:    DLPC_PROF_BEGIN(2);
// CHECK-NEXT:    kernel_index_2(v_out1);
// CHECK-NEXT:    DLPC_PROF_END(2);
// CHECK-NEXT:    float *v_big = (float *)dlpc_alloc(131072, sizeof(float), "kernel 'big_3'");
// CHECK-NEXT:    if (!v_big) return 1;
// CHECK-NEXT:    DLPC_PROF_BEGIN(3);
// CHECK-NEXT:    kernel_big_3(v_big);
// CHECK-NEXT:    DLPC_PROF_END(3);
// CHECK-NEXT:    DLPC_PROF_BEGIN(4);
// CHECK-NEXT:    kernel_big_4(v_big);
// CHECK-NEXT:    DLPC_PROF_END(4);
// CHECK-NEXT:    free(v_big);
// CHECK-NEXT:    return 0;
// CHECK-NEXT:  }

"memref.global"() <{sym_name = "__constant_0", type = memref<3xf32>, initial_value = dense<[0.5, -1.0, 2.5]> : tensor<3xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @main(%x: memref<4x3xf32>, %out0: memref<4xf64>, %out1: memref<8xi32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %g = memref.get_global @__constant_0 : memref<3xf32>
  %tmp = memref.alloc() : memref<4x3xf32>
  loop.kernel "scale_0" attributes {origin = "graph.mul"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 3 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i0, %i1] : memref<4x3xf32>
        %c = memref.load %g[%i1] : memref<3xf32>
        %m = arith.mulf %v, %c : f32
        %zero = arith.constant 0.000000e+00 : f32
        %pos = arith.cmpf ogt, %m, %zero : f32
        %s = scf.if %pos -> (f32) {
          %e = math.exp %m : f32
          scf.yield %e : f32
        } else {
          %t = math.tanh %m : f32
          scf.yield %t : f32
        }
        memref.store %s, %tmp[%i0, %i1] : memref<4x3xf32>
      }
    }
  }
  loop.kernel "sum_1" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f64>
      %z = arith.constant 0.000000e+00 : f64
      memref.store %z, %acc[] : memref<f64>
      loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction, vectorize, unroll = 4} {
        %v = memref.load %tmp[%i0, %r0] : memref<4x3xf32>
        %w = arith.extf %v : f32 to f64
        %a = memref.load %acc[] : memref<f64>
        %n = arith.addf %a, %w : f64
        memref.store %n, %acc[] : memref<f64>
      }
      %f = memref.load %acc[] : memref<f64>
      memref.store %f, %out0[%i0] : memref<4xf64>
    }
  }
  memref.dealloc %tmp : memref<4x3xf32>
  loop.kernel "index_2" {
    loop.for %i0 = 0 to 8 step 2 {name = "i0"} {
      %k = arith.index_cast %i0 : index to i32
      %three = arith.constant 3 : i32
      %q = arith.floordivsi %k, %three : i32
      %u = arith.remui %k, %three : i32
      %s = arith.addi %q, %u : i32
      memref.store %s, %out1[%i0] : memref<8xi32>
    }
  }
  %big = memref.alloc() : memref<512x256xf32>
  loop.kernel "big_3" {
    loop.for %i0 = 0 to 512 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 256 step 1 {name = "i1", vectorize} {
        %k = arith.index_cast %i1 : index to i64
        %f = arith.sitofp %k : i64 to f32
        memref.store %f, %big[%i0, %i1] : memref<512x256xf32>
      }
    }
  }
  loop.kernel "big_4" {
    loop.for %i0 = 0 to 131072 step 1 {name = "i0", parallel, vectorize} {
      %c = arith.constant 256 : index
      %r = arith.divui %i0, %c : index
      %q = arith.remui %i0, %c : index
      %v = memref.load %big[%r, %q] : memref<512x256xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %big[%r, %q] : memref<512x256xf32>
    }
  }
  memref.dealloc %big : memref<512x256xf32>
  func.return
}
