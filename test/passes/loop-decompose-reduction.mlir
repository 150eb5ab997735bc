// RUN: dlpc-opt %s -p 'loop-decompose-reduction{kernel=mm}' | filecheck %s

// CHECK:      loop.for %{{.*}} = 0 to 16 step 1 {name = "i0_init", parallel} {
// CHECK-NEXT:   loop.for %{{.*}} = 0 to 32 step 1 {name = "i1_init"} {
// CHECK-NEXT:     %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     memref.store %[[Z]], %C[
// CHECK:      loop.for %[[I0:.*]] = 0 to 16 step 1 {name = "i0", parallel} {
// CHECK-NEXT:   loop.for %[[I1:.*]] = 0 to 32 step 1 {name = "i1"} {
// CHECK-NEXT:     loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK:            memref.load %C[%[[I0]], %[[I1]]]
// CHECK:            memref.store %{{.*}}, %C[%[[I0]], %[[I1]]]
// CHECK-NOT:  i0_post
// CHECK-NOT:  memref.alloca
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
