// RUN: dlpc-opt %s -t opencl | filecheck %s

// Register blocking (backends/opencl.py `plan_lanes`): a work-item computes 8, 4 or 2
// iterations of the last NDRange loop, leaving at least 2 work-items (4 of mix_0's 8) and the innermost independent loop below it is
// written as lanes (8, or 4 where 8 would leave it 3 steps; 16, a float16, where at
// most 5 mapped lanes and no middle lanes would take the rest: `WIDE_LANES`, mix_0's
// 4 x 16), unrolled and jammed into the reduction: a load that does not vary
// with a laned loop is written once for its lanes, every lane has its own accumulator.
// f32 arithmetic and 0-d accumulators varying with the innermost independent laned loop
// are OpenCL vectors of its lanes (`plan_vector`: mix_0's float16 accumulators), lane k
// read as `.sk`; loads and stores of global buffers stay per lane, but for 16 lanes of
// consecutive elements (`contiguous_access`: one unaligned `dlpc_float16u` access, as
// mix_0's x and y). A product used only
// by a sum is written inside it (`contracted`): OpenCL's FP_CONTRACT makes them one fma.
// An innermost reduction updating a 0-d accumulator sums in partials (one per lane),
// combined after the loop. No lanes: extents no lane count divides (7), loops whose
// iterations are not independent (i1 of prefix_2 reads and writes s[i0]).

// CHECK-LABEL: /* kernel "mix_0": global (2), local (-) */
// CHECK: const long v_i0 = 4 * (long)get_global_id(0);
// CHECK-NEXT: const long v_i1 = 0;
// CHECK: float16 v_acc_4;
// CHECK: v_acc_4 = (float16)(0.0f);
// CHECK: for (long v_r0 = 0; v_r0 < 2; v_r0++) {
// CHECK-NEXT: const float16 v_a = *(__global const dlpc_float16u *)&v_x[v_r0 * 16 + v_i1];
// CHECK-NEXT: const float v_b = v_w[v_i0 * 2 + v_r0];
// CHECK-NEXT: const float v_b_2 = v_w[(v_i0 + 1) * 2 + v_r0];
// CHECK-NOT: v_x[
// CHECK-NOT: v_p
// CHECK: const float16 v_o_4 = v_acc_4;
// CHECK: const float16 v_q_4 = v_o_4 + (v_a * (float16)(v_b_4));
// CHECK: v_acc_4 = v_q_4;
// CHECK-NEXT: }
// CHECK: *(__global dlpc_float16u *)&v_y[v_i0 * 16 + v_i1] = v_t;
// CHECK: *(__global dlpc_float16u *)&v_y[(v_i0 + 3) * 16 + v_i1] = v_t_4;

// CHECK-LABEL: /* kernel "rowmax_1": global (7), local (-) */
// CHECK: const long v_i0 = (long)get_global_id(0);
// CHECK-NEXT: float v_acc;
// CHECK-NEXT: v_acc = (-INFINITY);
// CHECK-NEXT: float v_acc_2 = (-INFINITY);
// CHECK: float v_acc_8 = (-INFINITY);
// CHECK-NEXT: for (long v_r0 = 0; v_r0 < 16; v_r0 += 8) {
// CHECK: const float v_a_8 = v_v[v_i0 * 16 + (v_r0 + 7)];
// CHECK: const float v_q_8 = DLPC_MAXIMUMF(v_o_8, v_a_8);
// CHECK: }
// CHECK-NEXT: v_acc = DLPC_MAXIMUMF(v_acc, v_acc_2);
// CHECK: v_acc = DLPC_MAXIMUMF(v_acc, v_acc_8);
// CHECK-NEXT: const float v_t = v_acc;
// CHECK-NEXT: v_z[v_i0] = v_t;

// CHECK-LABEL: /* kernel "prefix_2": global (2), local (-) */
// CHECK: const long v_i0 = 8 * (long)get_global_id(0);
// CHECK-NEXT: for (long v_i1 = 0; v_i1 < 4; v_i1++) {
// CHECK: v_s[(v_i0 + 7)] = v_c_8;

// Float math on the lanes of the innermost laned loop is one call on an OpenCL vector
// (erf: dlpc's own, `backends.opencl.ERF`).
// CHECK-LABEL: /* kernel "erf_exp_3": global (7), local (-) */
// CHECK: for (long v_i1 = 0; v_i1 < 16; v_i1 += 8) {
// CHECK: const float8 v_b = exp((float8)(v_a, v_a_2, v_a_3, v_a_4, v_a_5, v_a_6, v_a_7, v_a_8));
// CHECK-NEXT: const float8 v_c = dlpc_erf(v_b);
// CHECK: v_e[v_i0 * 16 + (v_i1 + 7)] = v_c.s7;

func.func @main(%x: memref<2x16xf32>, %w: memref<8x2xf32>, %v: memref<7x16xf32>, %y: memref<8x16xf32>, %z: memref<7xf32>, %s: memref<16xf32>, %e: memref<7x16xf32>) attributes {dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 4 : i64} {
  loop.kernel "mix_0" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%r0, %i1] : memref<2x16xf32>
          %b = memref.load %w[%i0, %r0] : memref<8x2xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %t = memref.load %acc[] : memref<f32>
        memref.store %t, %y[%i0, %i1] : memref<8x16xf32>
      }
    }
  }
  loop.kernel "rowmax_1" {
    loop.for %i0 = 0 to 7 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %low = arith.constant 0xFF800000 : f32
      memref.store %low, %acc[] : memref<f32>
      loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
        %a = memref.load %v[%i0, %r0] : memref<7x16xf32>
        %o = memref.load %acc[] : memref<f32>
        %q = arith.maximumf %o, %a : f32
        memref.store %q, %acc[] : memref<f32>
      }
      %t = memref.load %acc[] : memref<f32>
      memref.store %t, %z[%i0] : memref<7xf32>
    }
  }
  loop.kernel "prefix_2" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %c0 = arith.constant 0 : index
        %a = memref.load %x[%c0, %i0] : memref<2x16xf32>
        %b = memref.load %s[%i0] : memref<16xf32>
        %c = arith.addf %a, %b : f32
        memref.store %c, %s[%i0] : memref<16xf32>
      }
    }
  }
  loop.kernel "erf_exp_3" {
    loop.for %i0 = 0 to 7 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %a = memref.load %v[%i0, %i1] : memref<7x16xf32>
        %b = math.exp %a : f32
        %c = math.erf %b : f32
        memref.store %c, %e[%i0, %i1] : memref<7x16xf32>
      }
    }
  }
  func.return
}
