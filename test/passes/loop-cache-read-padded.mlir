// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=dw loop=i0 buffer=x local=xl}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=dw loop=i2 buffer=x local=xl}' | filecheck %s --check-prefix=ROWS
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=dw loop=i3 buffer=x local=xl}' | filecheck %s --check-prefix=COLS

// A padded read (scf.if over bounds checks of the load's own indices, else 0): the local
// buffer is the padded box (5x6 plane -> 7x8), and the body reads the copy unguarded.
// The box's origin is constant: the border rows are stored with the fill value (a nest
// per side, vectorized along the row), then per interior row its border columns are
// filled and its in-bounds columns copied by a vectorized loop with unguarded loads.
// CHECK:      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
// CHECK-NEXT:   %xl = memref.alloca() : memref<1x2x7x8xf32>
// CHECK-NOT:    scf.if
// CHECK:        loop.for %xl_padlo2 = 0 to 1 step 1 {name = "xl_padlo2"} {
// CHECK-NEXT:     loop.for %xl_padlo3 = 0 to 8 step 1 {name = "xl_padlo3", vectorize} {
// CHECK-NEXT:       %[[Z0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       memref.store %[[Z0]], %xl[%xl_padlo0, %xl_padlo1, %xl_padlo2, %xl_padlo3]
// CHECK:        loop.for %xl_padhi2 = 6 to 7 step 1 {name = "xl_padhi2"} {
// CHECK-NEXT:     loop.for %xl_padhi3 = 0 to 8 step 1 {name = "xl_padhi3", vectorize} {
// CHECK-NEXT:       %[[Z1:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       memref.store %[[Z1]], %xl[
// CHECK:        loop.for %xl_in2 = 1 to 6 step 1 {name = "xl_in2"} {
// CHECK-NEXT:     loop.for %xl_padl3 = 0 to 1 step 1 {name = "xl_padl3"} {
// CHECK-NEXT:       %[[Z2:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       memref.store %[[Z2]], %xl[%xl_in0, %xl_in1, %xl_in2, %xl_padl3]
// CHECK:          loop.for %xl_in3 = 1 to 7 step 1 {name = "xl_in3", vectorize} {
// CHECK-NOT:        scf.if
// CHECK:            %[[V:.*]] = memref.load %x[
// CHECK-NEXT:       memref.store %[[V]], %xl[%xl_in0, %xl_in1, %xl_in2, %xl_in3]
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.for %xl_padr3 = 7 to 8 step 1 {name = "xl_padr3"} {
// CHECK-NEXT:       %[[Z3:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       memref.store %[[Z3]], %xl[%xl_in0, %xl_in1, %xl_in2, %xl_padr3]
// CHECK:        loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
// CHECK:        loop.for %{{.*}} = 0 to 3 step 1 {name = "r2", reduction} {
// CHECK-NOT:      scf.if
// CHECK:          %[[A:.*]] = memref.load %xl[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x2x7x8xf32>
// CHECK-NEXT:     %{{.*}} = memref.load %w
// CHECK-NEXT:     arith.mulf %[[A]]

// Staged per output row (at i2): the box's rows move with i2, so each row is checked once
// (`scf.if` around the row: its columns as above, else the whole row filled), never an
// element.
// ROWS:      loop.for %i2 = 0 to 5 step 1 {name = "i2"} {
// ROWS-NEXT:   %xl = memref.alloca() : memref<1x1x3x8xf32>
// ROWS:        loop.for %xl_in2 = 0 to 3 step 1 {name = "xl_in2"} {
// ROWS:          arith.cmpi sge
// ROWS:          arith.cmpi slt
// ROWS:          scf.if %{{.*}} {
// ROWS-NEXT:       loop.for %xl_padl3 = 0 to 1 step 1 {name = "xl_padl3"} {
// ROWS:            loop.for %xl_in3 = 1 to 7 step 1 {name = "xl_in3", vectorize} {
// ROWS-NOT:          scf.if
// ROWS:              memref.load %x[
// ROWS:            loop.for %xl_padr3 = 7 to 8 step 1 {name = "xl_padr3"} {
// ROWS:          } else {
// ROWS-NEXT:       loop.for %xl_padrow3 = 0 to 8 step 1 {name = "xl_padrow3", vectorize} {
// ROWS-NEXT:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// ROWS-NEXT:         memref.store %[[Z]], %xl[%xl_in0, %xl_in1, %xl_in2, %xl_padrow3]

// Staged per output element (at i3): the box's columns move too, so the copy keeps one
// guarded nest (the fill value where a checked index is out of bounds).
// COLS:      %xl = memref.alloca() : memref<1x1x3x3xf32>
// COLS:      loop.for %{{.*}} = 0 to 3 step 1 {name = "xl_in3", vectorize} {
// COLS:        arith.cmpi sge
// COLS:        %[[V:.*]] = scf.if %{{.*}} -> (f32) {
// COLS-NEXT:     memref.load %x[
// COLS:        } else {
// COLS-NEXT:     %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// COLS-NEXT:     scf.yield %[[Z]] : f32
// COLS:        memref.store %[[V]], %xl[
func.func @main(%x: memref<1x2x5x6xf32>, %w: memref<2x1x3x3xf32>, %y: memref<1x2x5x6xf32>) {
  loop.kernel "dw" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 5 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 6 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
              loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                %one = arith.constant 1 : index
                %zi = arith.constant 0 : index
                %nh = arith.constant 5 : index
                %nw = arith.constant 6 : index
                %h0 = arith.addi %i2, %r1 : index
                %h = arith.subi %h0, %one : index
                %v0 = arith.addi %i3, %r2 : index
                %v = arith.subi %v0, %one : index
                %c0 = arith.cmpi sge, %h, %zi : index
                %c1 = arith.cmpi slt, %h, %nh : index
                %c2 = arith.cmpi sge, %v, %zi : index
                %c3 = arith.cmpi slt, %v, %nw : index
                %c01 = arith.andi %c0, %c1 : i1
                %c23 = arith.andi %c2, %c3 : i1
                %in = arith.andi %c01, %c23 : i1
                %a = scf.if %in -> (f32) {
                  %l = memref.load %x[%i0, %i1, %h, %v] : memref<1x2x5x6xf32>
                  scf.yield %l : f32
                } else {
                  %zz = arith.constant 0.000000e+00 : f32
                  scf.yield %zz : f32
                }
                %b = memref.load %w[%i1, %i0, %r1, %r2] : memref<2x1x3x3xf32>
                %p = arith.mulf %a, %b : f32
                %c = memref.load %acc[] : memref<f32>
                %s = arith.addf %c, %p : f32
                memref.store %s, %acc[] : memref<f32>
              }
            }
            %o = memref.load %acc[] : memref<f32>
            memref.store %o, %y[%i0, %i1, %i2, %i3] : memref<1x2x5x6xf32>
          }
        }
      }
    }
  }
  func.return
}
