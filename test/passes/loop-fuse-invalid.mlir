// RUN: not dlpc-opt %s -p 'loop-fuse{kernel=mm outer=i0 inner=r0}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: loop mm/r0 is not the only op in the body of loop mm/i0
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
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
  func.return
}
