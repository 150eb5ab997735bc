// RUN: dlpc-opt %s -t opencl | filecheck %s

// Partial sums on an OpenCL vector (backends/opencl.py `partial_vector`): a kernel whose
// only laned reduction loop sums f32 products into a 0-d accumulator, with no vector loop
// of its own (a linear at batch 1: rows as lanes of the mapped loop, the dot product in
// 8 partials), keeps each accumulator's 8 partials in one float8 that starts as the
// accumulator and -0.0; the loop's loads are gathered into vectors and its product and
// sum are one vector expression (an fma). After the loop the partials are combined lane
// by lane in the order scalar partials are. A max reduction keeps scalar partials.

// CHECK-LABEL: /* kernel "dot_0": global (2), local (-) */
// CHECK: const long v_i0 = 2 * (long)get_global_id(0);
// CHECK: float8 v_acc_3 = (float8)(v_acc, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f);
// CHECK-NEXT: float8 v_acc_4 = (float8)(v_acc_2, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f);
// CHECK-NEXT: for (long v_r0 = 0; v_r0 < 32; v_r0 += 8) {
// CHECK: const float v_a_8 = v_x[(v_r0 + 7)];
// CHECK: const float8 v_o = v_acc_3;
// CHECK: const float8 v_q = v_o + ((float8)(v_a, v_a_2, v_a_3, v_a_4, v_a_5, v_a_6, v_a_7, v_a_8) * (float8)(v_b, v_b_2, v_b_3, v_b_4, v_b_5, v_b_6, v_b_7, v_b_8));
// CHECK: v_acc_3 = v_q;
// CHECK: }
// CHECK-NEXT: v_acc = v_acc_3.s0;
// CHECK-NEXT: v_acc = v_acc + v_acc_3.s1;
// CHECK: v_acc = v_acc + v_acc_3.s7;
// CHECK-NEXT: v_acc_2 = v_acc_4.s0;
// CHECK: v_acc_2 = v_acc_2 + v_acc_4.s7;
// CHECK: v_y[v_i0] = v_t;

// CHECK-LABEL: /* kernel "rowmax_1": global (7), local (-) */
// CHECK-NOT: float8
// CHECK: v_acc = DLPC_MAXIMUMF(v_acc, v_acc_2);

func.func @main(%x: memref<32xf32>, %w: memref<4x32xf32>, %v: memref<7x16xf32>, %y: memref<4xf32>, %z: memref<7xf32>) attributes {dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "dot_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
        %a = memref.load %x[%r0] : memref<32xf32>
        %b = memref.load %w[%i0, %r0] : memref<4x32xf32>
        %p = arith.mulf %a, %b : f32
        %o = memref.load %acc[] : memref<f32>
        %q = arith.addf %o, %p : f32
        memref.store %q, %acc[] : memref<f32>
      }
      %t = memref.load %acc[] : memref<f32>
      memref.store %t, %y[%i0] : memref<4xf32>
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
  func.return
}
