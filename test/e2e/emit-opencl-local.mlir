// RUN: dlpc-opt %s -t opencl | filecheck %s

// A cache stage (`cache_read` of the row of A) inside a parallel loop whose body holds
// another parallel loop: work-groups over rows, work-items over columns, the stage in
// __local memory filled cooperatively, with barriers around it.

// CHECK: /* kernel "mm_0" (from graph.matmul): global (64), local (16) */
// CHECK-NEXT: __kernel void kernel_mm_0(__global const float *restrict v_a, __global const float *restrict v_b, __global float *restrict v_out0)
// CHECK-NEXT: {
// CHECK-NEXT: __local float v_al[8];
// CHECK-NEXT: const long v_i0 = (long)get_group_id(0);
// CHECK: barrier(CLK_LOCAL_MEM_FENCE);
// CHECK-NEXT: for (long v_al_0 = (long)get_local_id(0); v_al_0 < 8; v_al_0 += 16) {
// CHECK: v_al[v_al_0] = {{.*}};
// CHECK: barrier(CLK_LOCAL_MEM_FENCE);
// CHECK-NEXT: const long v_i1 = (long)get_local_id(0);
// CHECK: v_al[v_r0]

func.func @main(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %out0: memref<4x16xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "mm_0" attributes {origin = "graph.matmul"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      %al = memref.alloca() : memref<8xf32>
      loop.for %c0 = 0 to 8 step 1 {name = "al_0"} {
        %v = memref.load %a[%i0, %c0] : memref<4x8xf32>
        memref.store %v, %al[%c0] : memref<8xf32>
      }
      loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %x = memref.load %al[%r0] : memref<8xf32>
          %y = memref.load %b[%r0, %i1] : memref<8x16xf32>
          %p = arith.mulf %x, %y : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %s = memref.load %acc[] : memref<f32>
        memref.store %s, %out0[%i0, %i1] : memref<4x16xf32>
      }
    }
  }
  func.return
}
