// RUN: dlpc-opt %s -t opencl | filecheck %s

// Padding guards (backends/opencl.py `padding_guards`, `KernelWriter.split_interior`):
// the conv's input loads are guarded by `scf.if`s testing affine inequalities of the
// window loops (r1, r2) and the lanes. The reduction nest is written twice: the tests at
// the corners of the window (r1, r2 in {0, 2}) and the first and last of the 8 column
// lanes, 2 x 2 x 2 = 8 terms, choose the interior copy, whose loads have no test; the
// border copy has the window loops outside the channel loop (`border_nest`), one test
// per tap for all the lanes, then the channel loop without its tests or with them.

// CHECK-LABEL: kernel "conv2d_0"
// CHECK:       for (long v_i3 = 0; v_i3 < 16; v_i3 += 8) {
// CHECK:       if ([[T:v_[0-9]+ && v_[0-9]+ && v_[0-9]+ && v_[0-9]+ && v_[0-9]+ && v_[0-9]+ && v_[0-9]+ && v_[0-9]+]]) {
// CHECK-NEXT:    for (long v_r0 = 0; v_r0 < 1; v_r0++) {
// CHECK-NEXT:      for (long v_r1 = 0; v_r1 < 3; v_r1++) {
// CHECK-NEXT:        for (long v_r2 = 0; v_r2 < 3; v_r2++) {
// CHECK-NOT:           if (
// CHECK:               const float {{v_[0-9]+}} = v_x[
// CHECK-NOT:           if (
// CHECK:             v_acc_8 =
// CHECK:       } else {
// CHECK-NEXT:    for (long v_r1_2 = 0; v_r1_2 < 3; v_r1_2++) {
// CHECK-NEXT:      for (long v_r2_2 = 0; v_r2_2 < 3; v_r2_2++) {
// CHECK:             if (v_{{[0-9]+}} && v_{{[0-9]+}}) {
// CHECK-NEXT:          for (long v_r0_2 = 0; v_r0_2 < 1; v_r0_2++) {
// CHECK-NOT:             if (
// CHECK:               } else {
// CHECK-NEXT:          for (long v_r0_3 = 0; v_r0_3 < 1; v_r0_3++) {
// (the guarded loads of a tap that holds for some lanes: one masked vector each,
// `masked_load`, test/e2e/emit-opencl-masked-load.mlir)
// CHECK:                 const float8 {{v_[0-9]+}} = (({{.*}}) >= 0 && ({{.*}}) < 192) ? ((int8)(

builtin.module {
  func.func @main(%x: memref<2x1x6x16xf32> {dlpc.name = "x"}, %w: memref<8x1x3x3xf32> {dlpc.name = "w"}, %out0: memref<2x8x6x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "conv2d_0" attributes {origin = "graph.conv2d"} {
      loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 6 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %0 = arith.constant 0.000000e+00 : f32
              memref.store %0, %acc[] : memref<f32>
              loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
                loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                  loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                    %1 = arith.addi %i2, %r1 : index
                    %2 = arith.constant 1 : index
                    %3 = arith.subi %1, %2 : index
                    %4 = arith.addi %i3, %r2 : index
                    %5 = arith.constant 1 : index
                    %6 = arith.subi %4, %5 : index
                    %7 = arith.constant 0 : index
                    %8 = arith.cmpi sge, %3, %7 : index
                    %9 = arith.constant 6 : index
                    %10 = arith.cmpi slt, %3, %9 : index
                    %11 = arith.andi %8, %10 : i1
                    %12 = arith.constant 0 : index
                    %13 = arith.cmpi sge, %6, %12 : index
                    %14 = arith.constant 16 : index
                    %15 = arith.cmpi slt, %6, %14 : index
                    %16 = arith.andi %13, %15 : i1
                    %17 = arith.andi %11, %16 : i1
                    %18 = scf.if %17 -> (f32) {
                      %19 = memref.load %x[%i0, %r0, %3, %6] : memref<2x1x6x16xf32>
                      scf.yield %19 : f32
                    } else {
                      %20 = arith.constant 0.000000e+00 : f32
                      scf.yield %20 : f32
                    }
                    %21 = memref.load %w[%i1, %r0, %r1, %r2] : memref<8x1x3x3xf32>
                    %22 = arith.mulf %18, %21 : f32
                    %23 = memref.load %acc[] : memref<f32>
                    %24 = arith.addf %23, %22 : f32
                    memref.store %24, %acc[] : memref<f32>
                  }
                }
              }
              %sum = memref.load %acc[] : memref<f32>
              memref.store %sum, %out0[%i0, %i1, %i2, %i3] : memref<2x8x6x16xf32>
            }
          }
        }
      }
    }
    func.return
  }
}