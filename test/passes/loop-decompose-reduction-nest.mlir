// RUN: dlpc-opt %s -p 'loop-decompose-reduction{kernel=k loop=mm_i0}' | filecheck %s

// The nest that loop mm_i0 heads (one of two in kernel k, as `compute_at` leaves a
// producer cloned into its consumer) is decomposed; the other nest is untouched.

// CHECK:      loop.kernel "k" {
// CHECK-NEXT:   loop.for %{{.*}} = 0 to 4 step 1 {name = "o"} {
// CHECK:          loop.for %{{.*}} = 0 to 16 step 1 {name = "mm_i0_init"} {
// CHECK-NEXT:       loop.for %{{.*}} = 0 to 8 step 1 {name = "mm_i1_init"} {
// CHECK:              memref.store %{{.*}}, %t[
// CHECK:          loop.for %{{.*}} = 0 to 16 step 1 {name = "mm_i0"} {
// CHECK-NEXT:       loop.for %{{.*}} = 0 to 8 step 1 {name = "mm_i1"} {
// CHECK-NEXT:         loop.for %{{.*}} = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK:                memref.load %t[
// CHECK:                memref.store %{{.*}}, %t[
// CHECK-NOT:      memref.alloca
// CHECK:          loop.for %{{.*}} = 0 to 16 step 1 {name = "i"} {
// CHECK-NEXT:       loop.for %{{.*}} = 0 to 8 step 1 {name = "j"} {
// CHECK:              memref.load %t[
func.func @main(%A: memref<16x8xf32>, %B: memref<8x8xf32>, %C: memref<4x16x8xf32>) {
  %t = memref.alloc() : memref<16x8xf32>
  loop.kernel "k" {
    loop.for %o = 0 to 4 step 1 {name = "o"} {
      loop.for %i0 = 0 to 16 step 1 {name = "mm_i0"} {
        loop.for %i1 = 0 to 8 step 1 {name = "mm_i1"} {
          %acc = memref.alloca() : memref<f32>
          %z = arith.constant 0.000000e+00 : f32
          memref.store %z, %acc[] : memref<f32>
          loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
            %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
            %b = memref.load %B[%r0, %i1] : memref<8x8xf32>
            %p = arith.mulf %a, %b : f32
            %c = memref.load %acc[] : memref<f32>
            %s = arith.addf %c, %p : f32
            memref.store %s, %acc[] : memref<f32>
          }
          %v = memref.load %acc[] : memref<f32>
          memref.store %v, %t[%i0, %i1] : memref<16x8xf32>
        }
      }
      loop.for %i = 0 to 16 step 1 {name = "i"} {
        loop.for %j = 0 to 8 step 1 {name = "j"} {
          %x = memref.load %t[%i, %j] : memref<16x8xf32>
          memref.store %x, %C[%o, %i, %j] : memref<4x16x8xf32>
        }
      }
    }
  }
  memref.dealloc %t : memref<16x8xf32>
  func.return
}
