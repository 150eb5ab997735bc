// RUN: dlpc-opt %s -p 'loop-parallel{kernel=relu loop=i0}' | filecheck %s

// CHECK: loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
// CHECK: loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
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
