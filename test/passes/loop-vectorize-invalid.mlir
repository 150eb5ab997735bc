// RUN: not dlpc-opt %s -p 'loop-vectorize{kernel=mm loop=i1}' 2>&1 | filecheck %s --check-prefix=INNER
// RUN: not dlpc-opt %s -p 'loop-vectorize{kernel=mm loop=r0}' 2>&1 | filecheck %s --check-prefix=RED

// INNER: dlpc-opt: error: loop mm/i1 is not innermost: it contains loop mm/r0
// RED: dlpc-opt: error: loop mm/r0 is a reduction loop (its iterations write the same element) and cannot be vectorized
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
