// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=mm loop=i0 intrinsic=gemm}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=lin loop=i0 intrinsic=dot}' | filecheck %s --check-prefix=DOT
// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=mm19 loop=i0 intrinsic=gemm8}' | filecheck %s --check-prefix=ROWS
// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=mm19c loop=i0 intrinsic=gemm8x16}' | filecheck %s --check-prefix=TILES
// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=mmp loop=i0 intrinsic=gemm_pipe}' | filecheck %s --check-prefix=PIPE

// CHECK:      %C_acc = memref.alloca() : memref<16x32xf32>
// CHECK:      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK-NEXT:   loop.for %i0 = 0 to 16 step 1 {name = "i0", unroll = 16} {
// CHECK-NEXT:     loop.for %i1 = 0 to 32 step 1 {name = "i1", vectorize} {
// CHECK:            memref.load %C_acc[%i0, %i1]
// CHECK:            memref.store %{{.*}}, %C_acc[%i0, %i1]
// CHECK:      name = "C_acc_out0"

// dot: a 2x3 block of dot products along k = 20: 16 in vectors of partial sums (one per
// output, unrolled over the tile), folded into the staged tile, then the 4-term k tail
// DOT-LABEL:  loop.kernel "lin"
// DOT:        %Y_acc = memref.alloca() : memref<2x3xf32>
// DOT:        %Y_acc_part = memref.alloca() : memref<2x3x16xf32>
// DOT:        memref.store %{{.*}}, %Y_acc_part[%{{.*}}, %{{.*}}, %{{.*}}]
// DOT:        loop.for %[[KO:.*]] = 0 to 16 step 16 {name = "r0", reduction} {
// DOT-NEXT:     loop.for %[[I:.*]] = 0 to 2 step 1 {name = "i0", unroll = 2} {
// DOT-NEXT:       loop.for %[[J:.*]] = 0 to 3 step 1 {name = "i1", unroll = 3} {
// DOT-NEXT:         loop.for %[[KV:.*]] = 0 to 16 step 1 {name = "r0_v", vectorize} {
// DOT-NEXT:           %[[K:.*]] = arith.addi %[[KO]], %[[KV]] : index
// DOT-NEXT:           memref.load %X[%[[I]], %[[K]]]
// DOT-NEXT:           memref.load %W[%[[J]], %[[K]]]
// DOT-NEXT:           %[[OLD:.*]] = memref.load %Y_acc_part[%[[I]], %[[J]], %[[KV]]]
// DOT:                memref.store %{{.*}}, %Y_acc_part[%[[I]], %[[J]], %[[KV]]]
// DOT:        loop.for %[[F2:.*]] = 0 to 16 step 1 {name = "Y_acc_f2", reduction} {
// DOT-NEXT:     %[[P:.*]] = memref.load %Y_acc_part[%{{.*}}, %{{.*}}, %[[F2]]]
// DOT-NEXT:     %[[A:.*]] = memref.load %Y_acc[%{{.*}}, %{{.*}}]
// DOT-NEXT:     %[[S:.*]] = arith.addf %[[A]], %[[P]] : f32
// DOT-NEXT:     memref.store %[[S]], %Y_acc[
// DOT:        name = "Y_acc_out0"
// DOT:        loop.for %{{.*}} = 16 to 20 step 1 {name = "r0_tail", reduction} {
// DOT:          memref.load %Y[
// DOT:          memref.store %{{.*}}, %Y[
// gemm8 over 19 rows: two 8-row tiles (the rows loop split by 8), then a copy of the
// nest over the last 3 rows tensorized as a 3-row tile
// ROWS-LABEL: loop.kernel "mm19"
// ROWS:       loop.for %{{.*}} = 0 to 16 step 8 {name = "i0r"} {
// ROWS-NEXT:    %E_acc = memref.alloca() : memref<8x32xf32>
// ROWS:         loop.for %{{.*}} = 0 to 8 step 1 {name = "r0", reduction} {
// ROWS-NEXT:      loop.for %{{.*}} = 0 to 8 step 1 {name = "i0i", unroll = 8} {
// ROWS-NEXT:        loop.for %{{.*}} = 0 to 32 step 1 {name = "i1", vectorize} {
// ROWS:       %E_acc_1 = memref.alloca() : memref<3x32xf32>
// ROWS:       loop.for %{{.*}} = 0 to 8 step 1 {name = "r0_tail", reduction} {
// ROWS-NEXT:    loop.for %{{.*}} = 16 to 19 step 1 {name = "i0_tail", unroll = 3} {
// ROWS-NEXT:      loop.for %{{.*}} = 0 to 32 step 1 {name = "i1_tail", vectorize} {
// ROWS:             memref.store %{{.*}}, %E_acc_1[
// gemm8x16 over 19 rows x 37 columns: columns in tiles of 16 (loop i1r) around rows in
// tiles of 8 and a 3-row remainder, then the 5 remainder columns likewise
// TILES-LABEL: loop.kernel "mm19c"
// TILES:       loop.for %{{.*}} = 0 to 32 step 16 {name = "i1r"} {
// TILES-NEXT:    loop.for %{{.*}} = 0 to 16 step 8 {name = "i0r"} {
// TILES-NEXT:      %G_acc = memref.alloca() : memref<8x16xf32>
// TILES:         %G_acc_1 = memref.alloca() : memref<3x16xf32>
// TILES:         loop.for %{{.*}} = 16 to 19 step 1 {name = "i0_tail.1", unroll = 3} {
// TILES:       loop.for %{{.*}} = 0 to 16 step 8 {name = "i0_tailr"} {
// TILES-NEXT:    %G_acc_2 = memref.alloca() : memref<8x5xf32>
// TILES:         loop.for %{{.*}} = 32 to 37 step 1 {name = "i1_tail", vectorize} {
// TILES:       %G_acc_3 = memref.alloca() : memref<3x5xf32>
// TILES:       loop.for %{{.*}} = 16 to 19 step 1 {name = "i0_tail_tail", unroll = 3} {
// TILES-NEXT:    loop.for %{{.*}} = 32 to 37 step 1 {name = "i1_tail_tail", vectorize} {
// gemm_pipe over a 4 x 32 tile, k = 8: B's first row loaded before the loop; the loop
// runs k = 0..6, rows 0..2 reading the row, the last row reading it and then loading
// row k + 1 in its place; k = 7 after the loop, all 4 rows reading the row
// PIPE-LABEL:  loop.kernel "mmp"
// PIPE:        %Q_acc = memref.alloca() : memref<4x32xf32>
// PIPE:        %B_row = memref.alloca() : memref<32xf32>
// PIPE-NEXT:   loop.for %[[F:.*]] = 0 to 32 step 1 {name = "B_row_in", vectorize} {
// PIPE-NEXT:     %[[Z:.*]] = arith.constant 0 : index
// PIPE-NEXT:     %[[B0:.*]] = memref.load %B[%[[Z]], %[[F]]]
// PIPE-NEXT:     memref.store %[[B0]], %B_row[%[[F]]]
// PIPE:        loop.for %[[K:.*]] = 0 to 7 step 1 {name = "r0", reduction} {
// PIPE-NEXT:     loop.for %[[I:.*]] = 0 to 3 step 1 {name = "i0", unroll = 3} {
// PIPE-NEXT:       loop.for %[[J:.*]] = 0 to 32 step 1 {name = "i1", vectorize} {
// PIPE-NEXT:         memref.load %P[%[[I]], %[[K]]]
// PIPE-NEXT:         memref.load %B_row[%[[J]]]
// PIPE-NOT:          memref.load %B[
// PIPE:              memref.store %{{.*}}, %Q_acc[%[[I]], %[[J]]]
// PIPE:          %[[R:.*]] = arith.constant 3 : index
// PIPE-NEXT:     loop.for %[[JL:.*]] = 0 to 32 step 1 {name = "i1_rlast", vectorize} {
// PIPE-NEXT:       %[[ONE:.*]] = arith.constant 1 : index
// PIPE-NEXT:       %[[NEXT:.*]] = arith.addi %[[K]], %[[ONE]] : index
// PIPE-NEXT:       memref.load %P[%[[R]], %[[K]]]
// PIPE-NEXT:       memref.load %B_row[%[[JL]]]
// PIPE:            memref.store %{{.*}}, %Q_acc[%[[R]], %[[JL]]]
// PIPE-NEXT:       %[[BN:.*]] = memref.load %B[%[[NEXT]], %[[JL]]]
// PIPE-NEXT:       memref.store %[[BN]], %B_row[%[[JL]]]
// PIPE:        %[[KL:.*]] = arith.constant 7 : index
// PIPE-NEXT:   loop.for %[[IT:.*]] = 0 to 4 step 1 {name = "i0_klast", unroll = 4} {
// PIPE-NEXT:     loop.for %[[JT:.*]] = 0 to 32 step 1 {name = "i1_klast", vectorize} {
// PIPE-NEXT:       memref.load %P[%[[IT]], %[[KL]]]
// PIPE-NEXT:       memref.load %B_row[%[[JT]]]
// PIPE:        name = "Q_acc_out0"
// PIPE-LABEL:  loop.kernel "lin"
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>,
                %X: memref<2x20xf32>, %W: memref<3x20xf32>, %Y: memref<2x3xf32>,
                %D: memref<19x8xf32>, %E: memref<19x32xf32>,
                %F: memref<8x37xf32>, %G: memref<19x37xf32>,
                %P: memref<4x8xf32>, %Q: memref<4x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<16x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<16x32xf32>
        }
      }
    }
  }
  loop.kernel "mm19" {
    loop.for %i0 = 0 to 19 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %D[%i0, %r0] : memref<19x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %E[%i0, %i1] : memref<19x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %E[%i0, %i1] : memref<19x32xf32>
        }
      }
    }
  }
  loop.kernel "mm19c" {
    loop.for %i0 = 0 to 19 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 37 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %D[%i0, %r0] : memref<19x8xf32>
          %b = memref.load %F[%r0, %i1] : memref<8x37xf32>
          %c = memref.load %G[%i0, %i1] : memref<19x37xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %G[%i0, %i1] : memref<19x37xf32>
        }
      }
    }
  }
  loop.kernel "mmp" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %P[%i0, %r0] : memref<4x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %Q[%i0, %i1] : memref<4x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Q[%i0, %i1] : memref<4x32xf32>
        }
      }
    }
  }
  loop.kernel "lin" {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 3 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 20 step 1 {name = "r0", reduction} {
          %a = memref.load %X[%i0, %r0] : memref<2x20xf32>
          %b = memref.load %W[%i1, %r0] : memref<3x20xf32>
          %c = memref.load %Y[%i0, %i1] : memref<2x3xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Y[%i0, %i1] : memref<2x3xf32>
        }
      }
    }
  }
  func.return
}
