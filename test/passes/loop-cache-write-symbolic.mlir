// RUN: dlpc-opt %s -p 'loop-cache-write{kernel=mm loop=i0o buffer=C local=acc}' | filecheck %s

// Symbolic dims: the copy-in and copy-back loops of the rows (spanned by the marked
// tile loop i0i, whose base i0o encloses the copies) take its extent marks, so
// loop-runtime-extents stops them at the call's rows; the columns (static) stay as
// they were.
// CHECK:      loop.for %i0o = 0 to 16 step 4 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1} {
// CHECK-NEXT:   %acc = memref.alloca() : memref<4x32xf32>
// CHECK-NEXT:   loop.for %{{.*}} = 0 to 4 step 1 {name = "acc_in0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:     loop.for %{{.*}} = 0 to 32 step 1 {name = "acc_in1", vectorize} {
// CHECK:        loop.for %{{.*}} = 0 to 4 step 1 {name = "acc_out0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:     loop.for %{{.*}} = 0 to 32 step 1 {name = "acc_out1", vectorize} {
// CHECK-NOT:  dlpc.extent
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0o = 0 to 16 step 4 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %i0i = 0 to 4 step 1 {name = "i0i", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i0 = arith.addi %i0o, %i0i : index
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
  }
  func.return
}
