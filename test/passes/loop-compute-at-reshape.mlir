// RUN: dlpc-opt %s -p 'loop-compute-at{producer=relu kernel=use loop=jo}' | filecheck %s

// A consumer reading the producer's buffer through a reshape's mixed-radix index
// (t[j / 8, j % 8] with j = 8 jo + ji, ji in [0, 8)): `j / 8` is jo and `j % 8` is ji
// over the loop ranges, so one iteration of jo reads row jo of t, and only that row is
// recomputed there. The recomputed loads' own divisions (the producer reading x through
// a reshape index, x[k / 8, k % 8] with k = 8 i0 + i1) become plain affine indices.

// CHECK-NOT:  loop.kernel "relu"
// CHECK:      loop.kernel "use" {
// CHECK-NEXT:   loop.for %jo = 0 to 4 step 1 {name = "jo"} {
// CHECK-NEXT:     loop.for %[[C0:.*]] = 0 to 1 step 1 {name = "relu_i0"} {
// CHECK-NEXT:       loop.for %[[C1:.*]] = 0 to 8 step 1 {name = "relu_i1"} {
// CHECK:              %[[R:.*]] = arith.addi %jo, %[[C0]] : index
// CHECK-NOT:          arith.divsi
// CHECK-NOT:          arith.remsi
// CHECK:              memref.load %x[%{{.*}}, %[[C1]]]
// CHECK:              arith.maximumf
// CHECK:              memref.store %{{.*}}, %t[%[[R]], %[[C1]]]
// CHECK:          loop.for %ji = 0 to 8 step 1 {name = "ji"} {
// CHECK:            arith.divsi
// CHECK:            arith.remsi
// CHECK:            memref.load %t[
func.func @main(%x: memref<4x8xf32>, %y: memref<32xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  loop.kernel "relu" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %c8 = arith.constant 8 : index
        %a = arith.muli %i0, %c8 : index
        %k = arith.addi %a, %i1 : index
        %row = arith.divsi %k, %c8 : index
        %col = arith.remsi %k, %c8 : index
        %v = memref.load %x[%row, %col] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %t[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "use" {
    loop.for %jo = 0 to 4 step 1 {name = "jo"} {
      loop.for %ji = 0 to 8 step 1 {name = "ji"} {
        %c8 = arith.constant 8 : index
        %a = arith.muli %jo, %c8 : index
        %j = arith.addi %a, %ji : index
        %row = arith.divsi %j, %c8 : index
        %col = arith.remsi %j, %c8 : index
        %v = memref.load %t[%row, %col] : memref<4x8xf32>
        memref.store %v, %y[%j] : memref<32xf32>
      }
    }
  }
  memref.dealloc %t : memref<4x8xf32>
  func.return
}
