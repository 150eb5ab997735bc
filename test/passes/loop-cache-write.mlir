// RUN: dlpc-opt %s -p 'loop-cache-write{kernel=mm loop=i0 buffer=C local=acc}' | filecheck %s

// CHECK:      loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
// CHECK-NEXT:   %acc = memref.alloca() : memref<1x32xf32>
// CHECK-NEXT:   loop.for %{{.*}} = 0 to 1 step 1 {name = "acc_in0"} {
// CHECK:          memref.load %C[
// CHECK:          memref.store %{{.*}}, %acc[
// CHECK:        loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
// CHECK:          memref.load %acc[
// CHECK:          memref.store %{{.*}}, %acc[
// CHECK:        loop.for %{{.*}} = 0 to 1 step 1 {name = "acc_out0"} {
// CHECK:          memref.load %acc[
// CHECK:          memref.store %{{.*}}, %C[
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
