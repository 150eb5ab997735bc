// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=cs loop=i0 buffer=x local=xq deinterleave=true}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=cs loop=i2 buffer=x local=xq deinterleave=true}' | filecheck %s --check-prefix=ROWS
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=cs2 loop=i3o buffer=x local=xq deinterleave=true}' | filecheck %s --check-prefix=GUARDED

// A 3x3 stride-2 padded read x[r0][2*i2 + r1 - 1][2*i3 + r2 - 1], i3 innermost: the local
// buffer is the padded box (rows -1..5 -> 7, columns -1..7 -> 9) with the columns split
// into 2 phase planes of ceil(9 / 2) = 5 (column q of the box at [q % 2][q / 2]). The
// box's origin is constant, so each phase copies its in-bounds range unguarded: rows 1..5
// (input rows 0..4), phase 0 j = 1..3 (input columns 2j - 1 = 1, 3, 5), phase 1 j = 0..3
// (columns 0, 2, 4, 6). The fill value goes only where the copies do not write (before
// them, one guard per row): in a row within the input, phase 0 j = 0 and 4, phase 1 j = 4;
// a padding row (0 and 6) whole. The body reads [r0][row][r2 % 2][i3 + r2 / 2], unit
// stride in i3, unguarded.
// CHECK:      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
// CHECK-NEXT:   %xq = memref.alloca() : memref<1x2x7x2x5xf32>
// CHECK:        loop.for %[[FR:.*]] = 0 to 7 step 1 {name = "xq_fill2"} {
// CHECK:          %[[IN:.*]] = arith.andi
// CHECK-NEXT:     scf.if %[[IN]] {
// CHECK-NEXT:       loop.for %[[E0:.*]] = 0 to 1 step 1 {name = "xq_fill3p0.1"} {
// CHECK-NEXT:         %[[K0:.*]] = arith.constant 0 : index
// CHECK-NEXT:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:         memref.store %[[Z]], %xq[%{{.*}}, %{{.*}}, %[[FR]], %[[K0]], %[[E0]]]
// CHECK:            loop.for %{{.*}} = 4 to 5 step 1 {name = "xq_fill3p0.2"} {
// CHECK:            loop.for %{{.*}} = 4 to 5 step 1 {name = "xq_fill3p1.1"} {
// CHECK:          } else {
// CHECK-NEXT:       loop.for %{{.*}} = 0 to 5 step 1 {name = "xq_fill3p0", vectorize} {
// CHECK:            loop.for %{{.*}} = 0 to 5 step 1 {name = "xq_fill3p1", vectorize} {
// CHECK-NOT:    loop.for {{.*}}fill
// CHECK:        loop.for %[[R:.*]] = 1 to 6 step 1 {name = "xq_in2"} {
// CHECK-NEXT:     loop.for %[[J0:.*]] = 1 to 4 step 1 {name = "xq_in3p0", vectorize} {
// CHECK-NOT:        scf.if
// CHECK:            %[[P0:.*]] = arith.constant 0 : index
// CHECK-NEXT:       %[[V0:.*]] = memref.load %x[
// CHECK-NEXT:       memref.store %[[V0]], %xq[%{{.*}}, %{{.*}}, %[[R]], %[[P0]], %[[J0]]]
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.for %[[J1:.*]] = 0 to 4 step 1 {name = "xq_in3p1", vectorize} {
// CHECK:            %[[P1:.*]] = arith.constant 1 : index
// CHECK-NEXT:       %[[V1:.*]] = memref.load %x[
// CHECK-NEXT:       memref.store %[[V1]], %xq[%{{.*}}, %{{.*}}, %[[R]], %[[P1]], %[[J1]]]
// CHECK:        loop.for %i3 = 0 to 4 step 1 {name = "i3"} {
// CHECK-NOT:      scf.if
// CHECK:          %[[PH:.*]] = arith.remui %r2, %[[TWO:.*]] : index
// CHECK-NEXT:     %[[QU:.*]] = arith.divui %r2, %[[TWO]] : index
// CHECK-NEXT:     %[[COL:.*]] = arith.addi %i3, %[[QU]] : index
// CHECK-NEXT:     %a = memref.load %xq[%{{.*}}, %r0, %{{.*}}, %[[PH]], %[[COL]]] : memref<1x2x7x2x5xf32>
// CHECK-NEXT:     %b = memref.load %w
// CHECK-NEXT:     arith.mulf %a, %b

// Staged per output row (loop i2), the box's row origin 2*i2 - 1 moves: the rows are
// checked at run time, one scf.if per row around the unguarded phase loops (whose column
// ranges stay static).
// ROWS:      %xq = memref.alloca() : memref<1x2x3x2x5xf32>
// ROWS:      {name = "xq_fill2"}
// ROWS:        scf.if
// ROWS:        } else {
// ROWS-NEXT:     loop.for %{{.*}} = 0 to 5 step 1 {name = "xq_fill3p0", vectorize} {
// ROWS:      loop.for %[[R:.*]] = 0 to 3 step 1 {name = "xq_in2"} {
// ROWS:        %[[IN:.*]] = arith.andi
// ROWS-NEXT:   scf.if %[[IN]] {
// ROWS-NEXT:     loop.for %{{.*}} = 1 to 4 step 1 {name = "xq_in3p0", vectorize} {
// ROWS-NOT:        scf.if
// ROWS:            memref.store
// ROWS:          loop.for %{{.*}} = 0 to 4 step 1 {name = "xq_in3p1", vectorize} {

// The output columns split (i3 -> i3o x i3i) and staged per column block: the box's column
// origin 4*i3o - 1 moves, so one nest over the whole buffer, the fill value where a read is
// out of the input (or past the box: 2*j + p < 5), guarded per element.
// GUARDED:      %xq = memref.alloca() : memref<1x2x3x2x3xf32>
// GUARDED:      loop.for %[[P:.*]] = 0 to 2 step 1 {name = "xq_in3"} {
// GUARDED-NEXT:   loop.for %[[J:.*]] = 0 to 3 step 1 {name = "xq_in4", vectorize} {
// GUARDED:          %[[J2:.*]] = arith.muli %[[J]], %{{.*}} : index
// GUARDED-NEXT:     %[[Q:.*]] = arith.addi %[[J2]], %[[P]] : index
// GUARDED:          arith.cmpi slt, %[[Q]], %{{.*}} : index
// GUARDED:          %[[V:.*]] = scf.if %{{.*}} -> (f32) {
// GUARDED-NEXT:       memref.load %x[
// GUARDED:          } else {
// GUARDED-NEXT:       %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// GUARDED-NEXT:       scf.yield %[[Z]] : f32
// GUARDED:          memref.store %[[V]], %xq[%{{.*}}, %{{.*}}, %{{.*}}, %[[P]], %[[J]]] : memref<1x2x3x2x3xf32>
func.func @main(%x: memref<1x2x5x7xf32>, %w: memref<2x2x3x3xf32>, %y: memref<1x2x3x4xf32>) {
  loop.kernel "cs" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 3 step 1 {name = "i2"} {
          loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
            loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
              loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                loop.for %i3 = 0 to 4 step 1 {name = "i3"} {
                  %one = arith.constant 1 : index
                  %two = arith.constant 2 : index
                  %zi = arith.constant 0 : index
                  %nh = arith.constant 5 : index
                  %nw = arith.constant 7 : index
                  %h2 = arith.muli %i2, %two : index
                  %h0 = arith.addi %h2, %r1 : index
                  %h = arith.subi %h0, %one : index
                  %w2 = arith.muli %i3, %two : index
                  %v0 = arith.addi %w2, %r2 : index
                  %v = arith.subi %v0, %one : index
                  %c0 = arith.cmpi sge, %h, %zi : index
                  %c1 = arith.cmpi slt, %h, %nh : index
                  %c2 = arith.cmpi sge, %v, %zi : index
                  %c3 = arith.cmpi slt, %v, %nw : index
                  %c01 = arith.andi %c0, %c1 : i1
                  %c23 = arith.andi %c2, %c3 : i1
                  %in = arith.andi %c01, %c23 : i1
                  %a = scf.if %in -> (f32) {
                    %l = memref.load %x[%i0, %r0, %h, %v] : memref<1x2x5x7xf32>
                    scf.yield %l : f32
                  } else {
                    %zz = arith.constant 0.000000e+00 : f32
                    scf.yield %zz : f32
                  }
                  %b = memref.load %w[%i1, %r0, %r1, %r2] : memref<2x2x3x3xf32>
                  %p = arith.mulf %a, %b : f32
                  %c = memref.load %y[%i0, %i1, %i2, %i3] : memref<1x2x3x4xf32>
                  %s = arith.addf %c, %p : f32
                  memref.store %s, %y[%i0, %i1, %i2, %i3] : memref<1x2x3x4xf32>
                }
              }
            }
          }
        }
      }
    }
  }
  func.return
}

func.func @split(%x: memref<1x2x5x7xf32>, %w: memref<2x2x3x3xf32>, %y: memref<1x2x3x4xf32>) {
  loop.kernel "cs2" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 3 step 1 {name = "i2"} {
          loop.for %i3o = 0 to 2 step 1 {name = "i3o"} {
            loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                  loop.for %i3i = 0 to 2 step 1 {name = "i3i"} {
                    %one = arith.constant 1 : index
                    %two = arith.constant 2 : index
                    %zi = arith.constant 0 : index
                    %nh = arith.constant 5 : index
                    %nw = arith.constant 7 : index
                    %i3a = arith.muli %i3o, %two : index
                    %i3 = arith.addi %i3a, %i3i : index
                    %h2 = arith.muli %i2, %two : index
                    %h0 = arith.addi %h2, %r1 : index
                    %h = arith.subi %h0, %one : index
                    %w2 = arith.muli %i3, %two : index
                    %v0 = arith.addi %w2, %r2 : index
                    %v = arith.subi %v0, %one : index
                    %c0 = arith.cmpi sge, %h, %zi : index
                    %c1 = arith.cmpi slt, %h, %nh : index
                    %c2 = arith.cmpi sge, %v, %zi : index
                    %c3 = arith.cmpi slt, %v, %nw : index
                    %c01 = arith.andi %c0, %c1 : i1
                    %c23 = arith.andi %c2, %c3 : i1
                    %in = arith.andi %c01, %c23 : i1
                    %a = scf.if %in -> (f32) {
                      %l = memref.load %x[%i0, %r0, %h, %v] : memref<1x2x5x7xf32>
                      scf.yield %l : f32
                    } else {
                      %zz = arith.constant 0.000000e+00 : f32
                      scf.yield %zz : f32
                    }
                    %b = memref.load %w[%i1, %r0, %r1, %r2] : memref<2x2x3x3xf32>
                    %p = arith.mulf %a, %b : f32
                    %c = memref.load %y[%i0, %i1, %i2, %i3] : memref<1x2x3x4xf32>
                    %s = arith.addf %c, %p : f32
                    memref.store %s, %y[%i0, %i1, %i2, %i3] : memref<1x2x3x4xf32>
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  func.return
}
