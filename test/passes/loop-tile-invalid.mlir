// RUN: not dlpc-opt %s -p 'loop-tile{kernel=relu loops=i0,i1 factors=4}' 2>&1 | filecheck %s --check-prefix=ARITY
// RUN: not dlpc-opt %s -p 'loop-tile{kernel=relu loops=i0,i1 factors=3,16}' 2>&1 | filecheck %s --check-prefix=FACTOR

// ARITY: dlpc-opt: error: tile of relu/i0,i1 needs one factor per loop, got 1
// FACTOR: dlpc-opt: error: expected split factor 3 to divide the trip count 8 of loop relu/i0
func.func @main(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<8x64xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %y[%i0, %i1] : memref<8x64xf32>
      }
    }
  }
  func.return
}
