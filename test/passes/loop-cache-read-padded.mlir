// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=dw loop=i0 buffer=x local=xl}' | filecheck %s

// A padded read (scf.if over bounds checks of the load's own indices, else 0): the local
// buffer is the padded box (5x6 plane -> 7x8), the copy nest stores the fill value
// outside the bounds, and the body reads the copy unguarded.
// CHECK:      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
// CHECK-NEXT:   %xl = memref.alloca() : memref<1x2x7x8xf32>
// CHECK:        loop.for %{{.*}} = 0 to 8 step 1 {name = "xl_in3", vectorize} {
// CHECK:          arith.cmpi sge
// CHECK:          %[[V:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:       memref.load %x[
// CHECK:          } else {
// CHECK-NEXT:       %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       scf.yield %[[Z]] : f32
// CHECK:          memref.store %[[V]], %xl[
// CHECK:        loop.for %{{.*}} = 0 to 3 step 1 {name = "r2", reduction} {
// CHECK-NOT:      scf.if
// CHECK:          %[[A:.*]] = memref.load %xl[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x2x7x8xf32>
// CHECK-NEXT:     %{{.*}} = memref.load %w
// CHECK-NEXT:     arith.mulf %[[A]]
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
