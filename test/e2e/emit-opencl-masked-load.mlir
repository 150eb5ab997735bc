// RUN: dlpc-opt %s -t opencl | filecheck %s

// Masked guarded loads (backends/opencl.py `KernelWriter.masked_load`): in a border
// tile's tap that holds for some of the 8 column lanes only, a padding-guarded load
// (`scf.if (g) { load } else { 0.0 }`) is one vector: when the flat indices of the first
// and last lane lie in the buffer, all lanes are loaded and the lanes whose guard fails
// take the pad (`(int8)(-(int)(g0), ...) ? (float8)(loads) : (float8)(0.0f)`), else each
// lane is loaded under its guard. conv2d_0 (1 input channel, a depthwise conv's shape):
// masked. conv2d_1 (4 input channels: a loop the guard does not vary with repeats each
// lane's branch the same way, where the per-lane loads measured faster): not masked.

// CHECK-LABEL: kernel "conv2d_0"
// CHECK:       } else {
// CHECK:         for (long v_r0_3 = 0; v_r0_3 < 1; v_r0_3++) {
// CHECK-NOT:       if (
// CHECK:           const float8 [[M:v_[0-9]+]] = ((v_i0 * 96 + v_r0_3 * 96 + [[R:v_[0-9]+]] * 16 + [[C0:v_[0-9]+]]) >= 0 && (v_i0 * 96 + v_r0_3 * 96 + [[R]] * 16 + [[C7:v_[0-9]+]]) < 192) ? ((int8)(-(int)(v_{{[0-9]+}}), {{.*}}) ? (float8)(v_x[v_i0 * 96 + v_r0_3 * 96 + [[R]] * 16 + [[C0]]], {{.*}}, v_x[v_i0 * 96 + v_r0_3 * 96 + [[R]] * 16 + [[C7]]]) : (float8)(0.0f)) : (float8)((v_{{[0-9]+}}) ? v_x[v_i0 * 96 + v_r0_3 * 96 + [[R]] * 16 + [[C0]]] : 0.0f, {{.*}});
// CHECK-NOT:       if (
// CHECK:           const float8 {{v_[0-9]+}} = v_{{[0-9]+}} + ([[M]] * (float8)(v_{{[0-9]+}}));
// CHECK-LABEL: kernel "conv2d_1"
// CHECK-NOT:   (int8)(
// CHECK:       } else {
// CHECK:         for (long v_r0_3 = 0; v_r0_3 < 4; v_r0_3++) {
// CHECK:           if (v_{{[0-9]+}}) {
// CHECK-NEXT:        const float {{v_[0-9]+}} = v_y[
// CHECK-NOT:   (int8)(

builtin.module {
  func.func @main(%x: memref<2x1x6x16xf32> {dlpc.name = "x"}, %y: memref<2x4x6x16xf32> {dlpc.name = "y"}, %w: memref<8x1x3x3xf32> {dlpc.name = "w"}, %v: memref<8x4x3x3xf32> {dlpc.name = "v"}, %out0: memref<2x8x6x16xf32>, %out1: memref<2x8x6x16xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = ["w", "v"], dlpc.num_outputs = 2 : i64} {
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
    loop.kernel "conv2d_1" attributes {origin = "graph.conv2d"} {
      loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 6 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %0 = arith.constant 0.000000e+00 : f32
              memref.store %0, %acc[] : memref<f32>
              loop.for %r0 = 0 to 4 step 1 {name = "r0", reduction} {
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
                      %19 = memref.load %y[%i0, %r0, %3, %6] : memref<2x4x6x16xf32>
                      scf.yield %19 : f32
                    } else {
                      %20 = arith.constant 0.000000e+00 : f32
                      scf.yield %20 : f32
                    }
                    %21 = memref.load %v[%i1, %r0, %r1, %r2] : memref<8x4x3x3xf32>
                    %22 = arith.mulf %18, %21 : f32
                    %23 = memref.load %acc[] : memref<f32>
                    %24 = arith.addf %23, %22 : f32
                    memref.store %24, %acc[] : memref<f32>
                  }
                }
              }
              %sum = memref.load %acc[] : memref<f32>
              memref.store %sum, %out1[%i0, %i1, %i2, %i3] : memref<2x8x6x16xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
