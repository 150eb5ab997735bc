// RUN: not dlpc-opt %s -p 'loop-parallel{kernel=mm loop=i1}' 2>&1 | filecheck %s --check-prefix=NESTED
// RUN: not dlpc-opt %s -p 'loop-parallel{kernel=mm loop=r0}' 2>&1 | filecheck %s --check-prefix=RED

// NESTED: dlpc-opt: error: loop mm/i1 is nested with loop mm/i0, which is already parallel
// RED: dlpc-opt: error: loop mm/r0 is a reduction loop (its iterations write the same element) and cannot be parallel
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %C[%i0, %i1] : memref<16x32xf32>
      }
    }
  }
  func.return
}
