// RUN: dlpc-opt %s -p loop-prepack-weights | filecheck %s
// RUN: dlpc-opt %s -p loop-prepack-weights -t c | filecheck %s --check-prefix=C

// A kernel over weights only (%bs = 2 * %b: with --no-fold-weights, batch-norm folding,
// weight concats, layout transposes) writes the packed block instead of the arena and
// becomes a `dlpc.prepare` kernel itself.
// The B panels of the weight %w, packed per jc block inside the gemm, become one
// resident view of the packed block holding every block (2 x 64 floats), filled by a
// `dlpc.prepare` kernel placed before the gemm; the gemm reads the view at its jc
// block, (jc - 0) / 8. The pack of the input %x (not a weight) stays in the call.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    dlpc.packed_bytes = 640 : i64
// CHECK-NEXT:    %packed = memref.alloc() {dlpc.packed} : memref<640xi8>
// CHECK-NEXT:    %arena = memref.alloc() {dlpc.arena} : memref<64xi8>
// CHECK-NEXT:    %[[OFFS:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %bs = memref.view %packed[%[[OFFS]]][] : memref<640xi8> to memref<16xf32>
// CHECK-NEXT:    loop.kernel "bscale" attributes {dlpc.prepare} {
// CHECK:         %[[OFF:.*]] = arith.constant 64 : index
// CHECK-NEXT:    %Bp = memref.view %packed[%[[OFF]]][] : memref<640xi8> to memref<2x64xf32>
// CHECK-NEXT:    loop.kernel "Bp_prepack" attributes {origin = "loop-prepack-weights: pack of mm", dlpc.prepare} {
// CHECK-NEXT:      loop.for %[[JC:.*]] = 0 to 16 step 8 {name = "jc"} {
// CHECK-NEXT:        %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:        %[[T:.*]] = arith.divsi %[[JC]], %[[EIGHT]] : index
// CHECK-NEXT:        loop.for %[[K:.*]] = 0 to 8 step 1 {name = "Bp_k"} {
// CHECK-NEXT:          loop.for %[[J:.*]] = 0 to 8 step 1 {name = "Bp_j", vectorize} {
// CHECK:                 %[[V:.*]] = memref.load %w[%{{.*}}, %{{.*}}] : memref<8x16xf32>
// CHECK:                 memref.store %[[V]], %Bp[%[[T]], %{{.*}}] : memref<2x64xf32>
// CHECK:         loop.kernel "mm" {
// CHECK-NEXT:      loop.for %[[JC2:.*]] = 0 to 16 step 8 {name = "jc"} {
// CHECK-NEXT:        %Ap = memref.alloca() : memref<16xf32>
// CHECK:             %[[T2:.*]] = arith.divsi %[[JC2]], %{{.*}} : index
// CHECK-NOT:         memref.alloca
// CHECK-NOT:         Bp_k
// CHECK:             memref.load %Bp[%[[T2]], %{{.*}}] : memref<2x64xf32>
// A pack of a constant global that no loop around it changes (D is empty) is packed
// once, not once per row.
// CHECK:         %[[OFF2:.*]] = arith.constant 576 : index
// CHECK-NEXT:    %Cp = memref.view %packed[%[[OFF2]]][] : memref<640xi8> to memref<4xf32>
// CHECK-NEXT:    loop.kernel "Cp_prepack" attributes {origin = "loop-prepack-weights: pack of scale", dlpc.prepare} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 4 step 1 {name = "Cp_j"} {
// CHECK-NEXT:        %[[G:.*]] = memref.get_global @cw : memref<4xf32>
// CHECK:         loop.kernel "scale" {
// CHECK-NEXT:      loop.for %[[I:.*]] = 0 to 2 step 1 {name = "si"} {
// CHECK-NEXT:        loop.for %[[J:.*]] = 0 to 4 step 1 {name = "sj"} {
// CHECK:               memref.load %Cp[%[[J]]] : memref<4xf32>
// CHECK:         func.return

// In C dlpc_main takes the block after its 4 arguments and does not pack; the packing
// kernels and bscale run in dlpc_prepare.
// C:       static void kernel_mm(const float *restrict v_x, const float *restrict v_bs, float *restrict v_out0, const float *restrict v_Bp)
// C:       static void kernel_Bp_prepack(const float *restrict v_w, float *restrict v_Bp)
// C:       int dlpc_main(void **args)
// C:         unsigned char *v_packed = (unsigned char *)args[4];
// C-NOT:     kernel_Bp_prepack(
// C-NOT:     kernel_bscale(
// C:         kernel_mm(v_x, v_bs, v_out0, v_Bp);
// C:       const size_t dlpc_packed_bytes = 640;
// C:       int dlpc_prepare(void **args)
// C:         kernel_bscale(v_b, v_bs);
// C:         float *v_Bp = (float *)(v_packed + 64);
// C-NEXT:    kernel_Bp_prepack(v_w, v_Bp);
// C-NOT:     kernel_mm(
// C:         return 0;
"memref.global"() <{sym_name = "cw", type = memref<4xf32>, initial_value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @main(%x: memref<2x8xf32>, %w: memref<8x16xf32>, %b: memref<16xf32>, %y: memref<2x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
  %arena = memref.alloc() {dlpc.arena} : memref<64xi8>
  %c0 = arith.constant 0 : index
  %bs = memref.view %arena[%c0][] : memref<64xi8> to memref<16xf32>
  loop.kernel "bscale" {
    loop.for %sj0 = 0 to 16 step 1 {name = "j"} {
      %bv0 = memref.load %b[%sj0] : memref<16xf32>
      %two = arith.constant 2.0 : f32
      %bv2 = arith.mulf %bv0, %two : f32
      memref.store %bv2, %bs[%sj0] : memref<16xf32>
    }
  }
  loop.kernel "mm" {
    loop.for %jc = 0 to 16 step 8 {name = "jc"} {
      %Ap = memref.alloca() : memref<16xf32>
      loop.for %ai = 0 to 2 step 1 {name = "Ap_i"} {
        loop.for %ak = 0 to 8 step 1 {name = "Ap_k", vectorize} {
          %a = memref.load %x[%ai, %ak] : memref<2x8xf32>
          %c8 = arith.constant 8 : index
          %ai8 = arith.muli %ai, %c8 : index
          %aidx = arith.addi %ai8, %ak : index
          memref.store %a, %Ap[%aidx] : memref<16xf32>
        }
      }
      %Bp = memref.alloca() : memref<64xf32>
      loop.for %bk = 0 to 8 step 1 {name = "Bp_k"} {
        loop.for %bj = 0 to 8 step 1 {name = "Bp_j", vectorize} {
          %col = arith.addi %jc, %bj : index
          %v = memref.load %w[%bk, %col] : memref<8x16xf32>
          %c8b = arith.constant 8 : index
          %bk8 = arith.muli %bk, %c8b : index
          %bidx = arith.addi %bk8, %bj : index
          memref.store %v, %Bp[%bidx] : memref<64xf32>
        }
      }
      loop.for %i = 0 to 2 step 1 {name = "i"} {
        loop.for %j = 0 to 8 step 1 {name = "j", vectorize} {
          %cj = arith.addi %jc, %j : index
          %bias = memref.load %bs[%cj] : memref<16xf32>
          memref.store %bias, %y[%i, %cj] : memref<2x16xf32>
          loop.for %k = 0 to 8 step 1 {name = "k", reduction} {
            %c8c = arith.constant 8 : index
            %i8 = arith.muli %i, %c8c : index
            %ia = arith.addi %i8, %k : index
            %av = memref.load %Ap[%ia] : memref<16xf32>
            %k8 = arith.muli %k, %c8c : index
            %ib = arith.addi %k8, %j : index
            %bv = memref.load %Bp[%ib] : memref<64xf32>
            %acc = memref.load %y[%i, %cj] : memref<2x16xf32>
            %p = arith.mulf %av, %bv : f32
            %s = arith.addf %acc, %p : f32
            memref.store %s, %y[%i, %cj] : memref<2x16xf32>
          }
        }
      }
    }
  }
  loop.kernel "scale" {
    loop.for %si = 0 to 2 step 1 {name = "si"} {
      %Cp = memref.alloca() : memref<4xf32>
      loop.for %cj = 0 to 4 step 1 {name = "Cp_j"} {
        %g = memref.get_global @cw : memref<4xf32>
        %gv = memref.load %g[%cj] : memref<4xf32>
        memref.store %gv, %Cp[%cj] : memref<4xf32>
      }
      loop.for %sj = 0 to 4 step 1 {name = "sj"} {
        %yv = memref.load %y[%si, %sj] : memref<2x16xf32>
        %cv = memref.load %Cp[%sj] : memref<4xf32>
        %sv = arith.mulf %yv, %cv : f32
        memref.store %sv, %y[%si, %sj] : memref<2x16xf32>
      }
    }
  }
  func.return
}
