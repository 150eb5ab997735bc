// RUN: dlpc-opt %s -p 'loop-compute-at{producer=relu kernel=add loop=i0 local=true}' | filecheck %s

// `local`: the intermediate t shrinks to the footprint box of one iteration (one row),
// a stack array at the start of the loop's body, indexed from the box's origin; t's
// alloc and dealloc are gone.

// CHECK-NOT:  memref.alloc()
// CHECK-NOT:  loop.kernel "relu"
// CHECK:      loop.kernel "add" {
// CHECK-NEXT:   loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
// CHECK-NEXT:     %[[T:.*]] = memref.alloca() : memref<1x8xf32>
// CHECK-NEXT:     loop.for %[[C0:.*]] = 0 to 1 step 1 {name = "relu_i0"} {
// CHECK-NEXT:       loop.for %[[C1:.*]] = 0 to 8 step 1 {name = "relu_i1"} {
// CHECK:              arith.maximumf
// CHECK:              memref.store %{{.*}}, %[[T]][%[[C0]], %[[C1]]] : memref<1x8xf32>
// CHECK:          loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
// CHECK-NEXT:       %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:       memref.load %[[T]][%[[Z]], %i1] : memref<1x8xf32>
// CHECK-NOT:  memref.dealloc
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  loop.kernel "relu" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %t[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "add" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %a = memref.load %t[%i0, %i1] : memref<4x8xf32>
        %b = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %s = arith.addf %a, %b : f32
        memref.store %s, %y[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %t : memref<4x8xf32>
  func.return
}
