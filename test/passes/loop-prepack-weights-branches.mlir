// RUN: dlpc-opt %s -p loop-prepack-weights | filecheck %s
// RUN: dlpc-opt %s -p loop-prepack-weights -t c | filecheck %s --check-prefix=C

// A kernel in a branch of an scf.if of @main (loop-short-extents' copy of a kernel for
// seq = 1, the kernel itself in the `else`) packs the weight %w too: each pack becomes a
// resident view and a `dlpc.prepare` kernel placed before the scf.if, in @main's body,
// and both kernels read their view.
// CHECK-LABEL: func.func @main
// CHECK-SAME:    dlpc.packed_bytes = 128 : i64
// CHECK:         %Bp = memref.view %packed
// CHECK-NEXT:    loop.kernel "Bp_prepack" attributes {origin = "loop-prepack-weights: pack of mm_seq1", dlpc.prepare} {
// CHECK:         %Bp_1 = memref.view %packed
// CHECK-NEXT:    loop.kernel "Bp_prepack_1" attributes {origin = "loop-prepack-weights: pack of mm", dlpc.prepare} {
// CHECK:         scf.if
// CHECK-NEXT:      loop.kernel "mm_seq1" {
// CHECK-NOT:         Bp_k
// CHECK:             memref.load %Bp[
// CHECK:         } else {
// CHECK-NEXT:      loop.kernel "mm" {
// CHECK-NOT:         Bp_k
// CHECK:             memref.load %Bp_1[

// C: int dlpc_main(void **args)
// C-NOT: kernel_Bp_prepack
// C: int dlpc_prepare(void **args)
// C: kernel_Bp_prepack(v_w, v_Bp);
func.func @main(%x: memref<2x4xf32>, %dlpc_dims: memref<1xi64>, %w: memref<4x2xf32>, %y: memref<2x2xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  %arena = memref.alloc() {dlpc.arena} : memref<64xi8>
  %c0 = arith.constant 0 : index
  %seq = memref.load %dlpc_dims[%c0] : memref<1xi64>
  %one = arith.constant 1 : i64
  %short = arith.cmpi eq, %seq, %one : i64
  scf.if %short {
    loop.kernel "mm_seq1" {
      %Bp = memref.alloca() : memref<8xf32>
      loop.for %bk = 0 to 4 step 1 {name = "Bp_k"} {
        loop.for %bj = 0 to 2 step 1 {name = "Bp_j"} {
          %v = memref.load %w[%bk, %bj] : memref<4x2xf32>
          %c2 = arith.constant 2 : index
          %bk2 = arith.muli %bk, %c2 : index
          %bidx = arith.addi %bk2, %bj : index
          memref.store %v, %Bp[%bidx] : memref<8xf32>
        }
      }
      loop.for %j = 0 to 2 step 1 {name = "j"} {
        loop.for %k = 0 to 4 step 1 {name = "k", reduction} {
          %c2 = arith.constant 2 : index
          %k2 = arith.muli %k, %c2 : index
          %ib = arith.addi %k2, %j : index
          %bv = memref.load %Bp[%ib] : memref<8xf32>
          %av = memref.load %x[%c0, %k] : memref<2x4xf32>
          %acc = memref.load %y[%c0, %j] : memref<2x2xf32>
          %p = arith.mulf %av, %bv : f32
          %s = arith.addf %acc, %p : f32
          memref.store %s, %y[%c0, %j] : memref<2x2xf32>
        }
      }
    }
  } else {
    loop.kernel "mm" {
      %Bp = memref.alloca() : memref<8xf32>
      loop.for %bk = 0 to 4 step 1 {name = "Bp_k"} {
        loop.for %bj = 0 to 2 step 1 {name = "Bp_j"} {
          %v = memref.load %w[%bk, %bj] : memref<4x2xf32>
          %c2 = arith.constant 2 : index
          %bk2 = arith.muli %bk, %c2 : index
          %bidx = arith.addi %bk2, %bj : index
          memref.store %v, %Bp[%bidx] : memref<8xf32>
        }
      }
      loop.for %i = 0 to 2 step 1 {name = "i"} {
        loop.for %j = 0 to 2 step 1 {name = "j"} {
          loop.for %k = 0 to 4 step 1 {name = "k", reduction} {
            %c2 = arith.constant 2 : index
            %k2 = arith.muli %k, %c2 : index
            %ib = arith.addi %k2, %j : index
            %bv = memref.load %Bp[%ib] : memref<8xf32>
            %av = memref.load %x[%i, %k] : memref<2x4xf32>
            %acc = memref.load %y[%i, %j] : memref<2x2xf32>
            %p = arith.mulf %av, %bv : f32
            %s = arith.addf %acc, %p : f32
            memref.store %s, %y[%i, %j] : memref<2x2xf32>
          }
        }
      }
    }
  }
  func.return
}
