// RUN: not dlpc-opt %s -p 'loop-reorder{kernel=mm order=r0,i1}' 2>&1 | filecheck %s --check-prefix=IMPERFECT
// RUN: not dlpc-opt %s -p 'loop-reorder{kernel=mm order=i1,i1}' 2>&1 | filecheck %s --check-prefix=DUP
// RUN: not dlpc-opt %s -p 'loop-reorder{kernel=mm order=r0,i0_1}' 2>&1 | filecheck %s --check-prefix=NEST

// IMPERFECT: dlpc-opt: error: loop mm/i1 holds more than the next loop of the chain (the nest is not perfect)
// DUP: dlpc-opt: error: loop mm/i1 is named twice in reorder
// NEST: dlpc-opt: error: loops mm/i0_1 and mm/r0 are not nested in one another
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %C[%i0, %i1] : memref<16x32xf32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          memref.store %a, %C[%i0, %i1] : memref<16x32xf32>
        }
      }
    }
    loop.for %j = 0 to 4 step 1 {name = "i0_1"} {
    }
  }
  func.return
}
