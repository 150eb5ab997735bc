// RUN: dlpc-opt %s -p 'loop-compute-inline{producer=flat}' | filecheck %s

// A reshape copy (t[j] = x[j / 8, j % 8]) substituted into its consumer's reads: the
// consumer reads x itself, at the exact affine form of the divided index (j = 8 o + i,
// i in [0, 8): x[o, i]); t and the copy kernel are gone.

// CHECK-NOT:  memref.alloc()
// CHECK-NOT:  loop.kernel "flat"
// CHECK:      loop.kernel "use" {
// CHECK-NEXT:   loop.for %o = 0 to 4 step 1 {name = "o"} {
// CHECK-NEXT:     loop.for %i = 0 to 8 step 1 {name = "i"} {
// CHECK-NOT:        memref.load %t
// CHECK:            %[[V:.*]] = memref.load %x[%o, %i] : memref<4x8xf32>
// CHECK-NEXT:       %[[S:.*]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK-NEXT:       memref.store %[[S]], %y[%o, %i] : memref<4x8xf32>
// CHECK-NOT:  memref.dealloc
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %t = memref.alloc() : memref<32xf32>
  loop.kernel "flat" {
    loop.for %j = 0 to 32 step 1 {name = "j"} {
      %c8 = arith.constant 8 : index
      %r = arith.divsi %j, %c8 : index
      %c = arith.remsi %j, %c8 : index
      %v = memref.load %x[%r, %c] : memref<4x8xf32>
      memref.store %v, %t[%j] : memref<32xf32>
    }
  }
  loop.kernel "use" {
    loop.for %o = 0 to 4 step 1 {name = "o"} {
      loop.for %i = 0 to 8 step 1 {name = "i"} {
        %c8 = arith.constant 8 : index
        %a = arith.muli %o, %c8 : index
        %j = arith.addi %a, %i : index
        %v = memref.load %t[%j] : memref<32xf32>
        %s = arith.mulf %v, %v : f32
        memref.store %s, %y[%o, %i] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %t : memref<32xf32>
  func.return
}
