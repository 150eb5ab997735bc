// RUN: dlpc-opt %s -p loop-memory-plan | filecheck %s
// RUN: dlpc-opt %s -p loop-views,loop-memory-plan -t c | filecheck %s --check-prefix=C

// Intermediates become views of one arena: 528 bytes of intermediates in 256. relu and
// div write over the input that dies in them (same index values: in place); the sum,
// live across div, gets its own slot, which the reshape's output (not elementwise: not
// in place) takes once the sum is dead. Deallocs are gone.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    dlpc.arena_bytes = 256 : i64, dlpc.intermediate_bytes = 528 : i64
// CHECK-NEXT:    %arena = memref.alloc() {dlpc.arena} : memref<256xi8>
// CHECK-NEXT:    %[[O0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %a = memref.view %arena[%[[O0]]][] : memref<256xi8> to memref<4x8xf32>
// CHECK:         %[[O1:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %b = memref.view %arena[%[[O1]]][] : memref<256xi8> to memref<4x8xf32>
// CHECK:         %[[O2:.*]] = arith.constant 128 : index
// CHECK-NEXT:    %s = memref.view %arena[%[[O2]]][] : memref<256xi8> to memref<4xf32>
// CHECK:         %[[O3:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %c = memref.view %arena[%[[O3]]][] : memref<256xi8> to memref<4x8xf32>
// CHECK:         %[[O4:.*]] = arith.constant 128 : index
// CHECK-NEXT:    %r{{.*}} = memref.view %arena[%[[O4]]][] : memref<256xi8> to memref<2x16xf32>
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return

// With loop-views first the reshape is an alias of %c (no kernel, no slot). The C keeps
// the arena resident and takes it for the call; kernels whose buffers share
// bytes (in place) lose `restrict` on them.
// C:       static void kernel_relu_1(const float *v_a, float *v_b)
// C:       static void kernel_div_3(const float *v_b, const float *restrict v_s, float *v_c)
// C:       /* the memory plan's arena: 192 bytes for every intermediate of dlpc_main */
// C:       static unsigned char *dlpc_arena_acquire(void)
// C:       unsigned char *v_arena = dlpc_arena_acquire();
// C-NEXT:  if (!v_arena) return 1;
// C-NEXT:  float *v_a = (float *)(v_arena + 0);
// C:       float *v_r = (float *)v_c + 0;
// A kernel whose heap scratch buffer cannot be allocated returns 1: @main gives the
// arena back before it returns 1 too.
// C:       if (kernel_scratch_6()) { dlpc_arena_release(v_arena); return 1; }
// C:       dlpc_arena_release(v_arena);
// C-NEXT:  return 0;

func.func @main(%x: memref<4x8xf32>, %out0: memref<2x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %a = memref.alloc() : memref<4x8xf32>
  loop.kernel "exp_0" attributes {origin = "graph.exp"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %e = math.exp %v : f32
        memref.store %e, %a[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  %b = memref.alloc() : memref<4x8xf32>
  loop.kernel "relu_1" attributes {origin = "graph.relu"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %a[%i0, %i1] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %b[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %a : memref<4x8xf32>
  %s = memref.alloc() : memref<4xf32>
  loop.kernel "sum_2" attributes {origin = "graph.reduce_sum"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %acc[] : memref<f32>
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %b[%i0, %r0] : memref<4x8xf32>
        %p = memref.load %acc[] : memref<f32>
        %q = arith.addf %p, %v : f32
        memref.store %q, %acc[] : memref<f32>
      }
      %t = memref.load %acc[] : memref<f32>
      memref.store %t, %s[%i0] : memref<4xf32>
    }
  }
  %c = memref.alloc() : memref<4x8xf32>
  loop.kernel "div_3" attributes {origin = "graph.div"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %b[%i0, %i1] : memref<4x8xf32>
        %d = memref.load %s[%i0] : memref<4xf32>
        %q = arith.divf %v, %d : f32
        memref.store %q, %c[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %b : memref<4x8xf32>
  memref.dealloc %s : memref<4xf32>
  %r = memref.alloc() : memref<2x16xf32>
  loop.kernel "reshape_4" attributes {origin = "graph.reshape"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %c16 = arith.constant 16 : index
        %c8 = arith.constant 8 : index
        %f = arith.muli %i0, %c16 : index
        %g = arith.addi %f, %i1 : index
        %j0 = arith.divui %g, %c8 : index
        %j1 = arith.remui %g, %c8 : index
        %v = memref.load %c[%j0, %j1] : memref<4x8xf32>
        memref.store %v, %r[%i0, %i1] : memref<2x16xf32>
      }
    }
  }
  memref.dealloc %c : memref<4x8xf32>
  loop.kernel "neg_5" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %v = memref.load %r[%i0, %i1] : memref<2x16xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<2x16xf32>
      }
    }
  }
  memref.dealloc %r : memref<2x16xf32>
  loop.kernel "scratch_6" attributes {origin = "graph.neg"} {
    %big = memref.alloca() : memref<20000xf32>
    loop.for %i0 = 0 to 32 step 1 {name = "i0"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %big[%i0] : memref<20000xf32>
    }
  }
  func.return
}
