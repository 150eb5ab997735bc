// RUN: dlpc-opt %s -p 'loop-rfactor{kernel=dot loop=r0 factor=8}' | filecheck %s

// CHECK:      %r0_part = memref.alloca() : memref<8xf32>
// CHECK-NEXT: loop.for %[[Q:.*]] = 0 to 8 step 1 {name = "r0_init", unroll = 8} {
// CHECK-NEXT:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   memref.store %[[Z]], %r0_part[%[[Q]]]
// CHECK:      loop.for %[[RO:.*]] = 0 to 64 step 8 {name = "r0", reduction} {
// CHECK-NEXT:   loop.for %[[RI:.*]] = 0 to 8 step 1 {name = "r0_rf", vectorize} {
// CHECK-NEXT:     %[[R:.*]] = arith.addi %[[RO]], %[[RI]] : index
// CHECK:          memref.load %r0_part[%[[RI]]]
// CHECK:          memref.store %{{.*}}, %r0_part[%[[RI]]]
// CHECK:      loop.for %[[F:.*]] = 0 to 8 step 1 {name = "r0_fold", reduction} {
// CHECK-NEXT:   %[[P:.*]] = memref.load %r0_part[%[[F]]]
// CHECK-NEXT:   %[[O:.*]] = memref.load %y[%i0]
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[O]], %[[P]] : f32
// CHECK-NEXT:   memref.store %[[S]], %y[%i0]
func.func @main(%x: memref<64xf32>, %w: memref<4x64xf32>, %y: memref<4xf32>) {
  loop.kernel "dot" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
        %a = memref.load %x[%r0] : memref<64xf32>
        %b = memref.load %w[%i0, %r0] : memref<4x64xf32>
        %p = arith.mulf %a, %b : f32
        %c = memref.load %y[%i0] : memref<4xf32>
        %s = arith.addf %c, %p : f32
        memref.store %s, %y[%i0] : memref<4xf32>
      }
    }
  }
  func.return
}
