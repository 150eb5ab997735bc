// RUN: dlpc-opt %s -p 'loop-compute-at{producer=relu kernel=add loop=i0}' | filecheck %s

// The producer's input s was freed right after the producer (its last user then); now
// the consumer reads it, so its dealloc moves after the consumer (no use after free).
// CHECK-NOT:  memref.dealloc %s
// CHECK:      loop.kernel "add" {
// CHECK:        memref.load %s[
// CHECK-NOT:    memref.dealloc %s
// CHECK:        memref.store %{{.*}}, %y[
// CHECK:      memref.dealloc %s : memref<4x8xf32>
// CHECK-NEXT: memref.dealloc %t : memref<4x8xf32>
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %s = memref.alloc() : memref<4x8xf32>
  loop.kernel "neg" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %n = arith.negf %v : f32
        memref.store %n, %s[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  %t = memref.alloc() : memref<4x8xf32>
  loop.kernel "relu" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %s[%i0, %i1] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %t[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %s : memref<4x8xf32>
  loop.kernel "add" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %a = memref.load %t[%i0, %i1] : memref<4x8xf32>
        %b = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %c = arith.addf %a, %b : f32
        memref.store %c, %y[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %t : memref<4x8xf32>
  func.return
}
