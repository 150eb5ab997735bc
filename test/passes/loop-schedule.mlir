// RUN: dlpc-opt %s -p 'loop-schedule{script="decompose mm; split mm/i1 by 16 -> jo, ji; reorder mm: i0, jo, r0, ji; vectorize mm/ji"}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-schedule{script="%S/Inputs/mm.sched"}' | filecheck %s

// CHECK:      {name = "i0_init", parallel}
// CHECK:      loop.for %[[I0:.*]] = 0 to 16 step 1 {name = "i0", parallel} {
// CHECK-NEXT:   loop.for %[[JO:.*]] = 0 to 32 step 16 {name = "jo"} {
// CHECK-NEXT:     loop.for %{{.*}} = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK-NEXT:       loop.for %[[JI:.*]] = 0 to 16 step 1 {name = "ji", vectorize} {
// CHECK-NEXT:         %[[J:.*]] = arith.addi %[[JO]], %[[JI]] : index
// CHECK:              memref.store %{{.*}}, %C[%[[I0]], %[[J]]]
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
