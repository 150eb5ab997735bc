// RUN: not dlpc-opt %s -p 'loop-rfactor{kernel=dot loop=i0 factor=2}' 2>&1 | filecheck %s --check-prefix=INNER
// RUN: not dlpc-opt %s -p 'loop-rfactor{kernel=dot loop=r0 factor=7}' 2>&1 | filecheck %s --check-prefix=FACTOR
// RUN: not dlpc-opt %s -p 'loop-rfactor{kernel=sub loop=r0 factor=4}' 2>&1 | filecheck %s --check-prefix=COMB

// INNER: dlpc-opt: error: loop dot/i0 is not innermost
// FACTOR: dlpc-opt: error: expected rfactor factor 7 to divide the trip count 64 of loop dot/r0
// COMB: dlpc-opt: error: loop sub/r0 does not accumulate with add, mul, max or min
func.func @main(%x: memref<64xf32>, %w: memref<4x64xf32>, %y: memref<4xf32>) {
  loop.kernel "dot" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
        %a = memref.load %x[%r0] : memref<64xf32>
        %c = memref.load %y[%i0] : memref<4xf32>
        %s = arith.addf %c, %a : f32
        memref.store %s, %y[%i0] : memref<4xf32>
      }
    }
  }
  loop.kernel "sub" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
        %a = memref.load %x[%r0] : memref<64xf32>
        %c = memref.load %y[%i0] : memref<4xf32>
        %s = arith.subf %c, %a : f32
        memref.store %s, %y[%i0] : memref<4xf32>
      }
    }
  }
  func.return
}
