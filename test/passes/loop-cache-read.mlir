// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=mm loop=i0 buffer=B local=Bl}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=mm loop=i0 buffer=B local=Bp pack=true}' | filecheck %s --check-prefix=PACK

// CHECK:      loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
// CHECK-NEXT:   %Bl = memref.alloca() : memref<8x32xf32>
// CHECK-NEXT:   loop.for %[[C0:.*]] = 0 to 8 step 1 {name = "Bl_in0"} {
// CHECK-NEXT:     loop.for %[[C1:.*]] = 0 to 32 step 1 {name = "Bl_in1", vectorize} {
// CHECK-NEXT:       %[[V:.*]] = memref.load %B[%[[C0]], %[[C1]]] : memref<8x32xf32>
// CHECK-NEXT:       memref.store %[[V]], %Bl[%[[C0]], %[[C1]]] : memref<8x32xf32>
// CHECK:        memref.load %Bl[%r0, %i1] : memref<8x32xf32>

// The layout is Bp[i1][r0] (nesting order); the copy runs along i1 innermost, reading
// B's rows contiguously (r0 innermost would read B 32 elements apart).
// PACK:      %Bp = memref.alloca() : memref<256xf32>
// PACK:      loop.for %[[R:.*]] = 0 to 8 step 1 {name = "Bp_r0"} {
// PACK-NEXT:   loop.for %[[I:.*]] = 0 to 32 step 1 {name = "Bp_i1", vectorize} {
// PACK-NEXT:     %[[K:.*]] = arith.constant 8 : index
// PACK-NEXT:     %[[M:.*]] = arith.muli %[[I]], %[[K]] : index
// PACK-NEXT:     %[[L:.*]] = arith.addi %[[M]], %[[R]] : index
// PACK-NEXT:     %[[V:.*]] = memref.load %B[%[[R]], %[[I]]] : memref<8x32xf32>
// PACK-NEXT:     memref.store %[[V]], %Bp[%[[L]]] : memref<256xf32>
// PACK:      memref.load %Bp[
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
