// RUN: dlpc-opt %s -p 'loop-unroll{kernel=relu loop=i0},loop-unroll{kernel=relu loop=i1 factor=4}' | filecheck %s

// CHECK: loop.for %i0 = 0 to 8 step 1 {name = "i0", unroll = 8} {
// CHECK: loop.for %i1 = 0 to 64 step 1 {name = "i1", unroll = 4} {
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
