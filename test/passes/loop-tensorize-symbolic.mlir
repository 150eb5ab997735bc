// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=lin loop=i0i intrinsic=dot}' | filecheck %s

// Symbolic dims: a dot tile over rows of a symbolic extent (i0i, marked, index
// i0o + i0i): the staged tile's copies and the partials' zeroing and folding loops
// along the rows take the tile's marks, so loop-runtime-extents stops them at the call's
// rows (at seq 1 one row zeroed and folded, not eight); the other dims stay static.
// CHECK-LABEL: loop.kernel "lin"
// CHECK:         loop.for %{{.*}} = 0 to 8 step 1 {name = "Y_acc_in0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "Y_acc_in1", vectorize} {
// CHECK:         loop.for %{{.*}} = 0 to 8 step 1 {name = "Y_acc_z0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "Y_acc_z1"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 16 step 1 {name = "Y_acc_z2", vectorize} {
// CHECK:         loop.for %{{.*}} = 0 to 8 step 1 {name = "Y_acc_f0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "Y_acc_f1"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 16 step 1 {name = "Y_acc_f2", reduction} {
// CHECK:         loop.for %{{.*}} = 0 to 8 step 1 {name = "Y_acc_out0", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "Y_acc_out1", vectorize} {
func.func @main(%X: memref<16x32xf32>, %W: memref<3x32xf32>, %Y: memref<16x3xf32>) {
  loop.kernel "lin" {
    loop.for %i0o = 0 to 16 step 8 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %i0i = 0 to 8 step 1 {name = "i0i", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        loop.for %i1 = 0 to 3 step 1 {name = "i1"} {
          loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
            %i0 = arith.addi %i0o, %i0i : index
            %a = memref.load %X[%i0, %r0] : memref<16x32xf32>
            %b = memref.load %W[%i1, %r0] : memref<3x32xf32>
            %c = memref.load %Y[%i0, %i1] : memref<16x3xf32>
            %p = arith.mulf %a, %b : f32
            %s = arith.addf %c, %p : f32
            memref.store %s, %Y[%i0, %i1] : memref<16x3xf32>
          }
        }
      }
    }
  }
  func.return
}
