// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=mm loop=i0 intrinsic=gemm}' | filecheck %s

// CHECK:      %C_acc = memref.alloca() : memref<16x32xf32>
// CHECK:      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK-NEXT:   loop.for %i0 = 0 to 16 step 1 {name = "i0", unroll = 16} {
// CHECK-NEXT:     loop.for %i1 = 0 to 32 step 1 {name = "i1", vectorize} {
// CHECK:            memref.load %C_acc[%i0, %i1]
// CHECK:            memref.store %{{.*}}, %C_acc[%i0, %i1]
// CHECK:      name = "C_acc_out0"
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
