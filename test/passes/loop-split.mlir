// RUN: dlpc-opt %s -p 'loop-split{kernel=relu loop=i1 factor=16 outer=i1o inner=i1i}' | filecheck %s

// CHECK:      loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
// CHECK-NEXT:   loop.for %[[O:.*]] = 0 to 64 step 16 {name = "i1o"} {
// CHECK-NEXT:     loop.for %[[I:.*]] = 0 to 16 step 1 {name = "i1i"} {
// CHECK-NEXT:       %[[IV:.*]] = arith.addi %[[O]], %[[I]] : index
// CHECK-NEXT:       memref.load %x[%i0, %[[IV]]]
// CHECK:            memref.store %{{.*}}, %y[%i0, %[[IV]]]
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
