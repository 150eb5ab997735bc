// RUN: dlpc-opt %s -p loop-default-schedule | filecheck %s

// An NHWC convolution (output channels innermost; graph-conv-layout picks NHWC for convs
// whose channels fill vectors and whose row does not): a tile of 8 output columns x 32
// channels accumulates in a local buffer with the channels contiguous, around all
// reduction loops; the columns unrolled, the channels vectorized. The weight is packed
// once (`wp[kh][kw][ci][co]`, contiguous along the vectorized channels), the padded input
// staged once for the whole batch as a padded copy, and the (image, row) pairs are one
// parallel loop.
// CHECK-LABEL: loop.kernel "conv"
// CHECK:       {name = "i3_init", vectorize}
// CHECK:       loop.for %{{.*}} = 0 to 2 step 2 {name = "i0b"} {
// CHECK-NEXT:    %conv_xp = memref.alloca() : memref<2x10x10x6xf32>
// CHECK:         %conv_wp = memref.alloca() : memref<1728xf32>
// CHECK:         {name = "conv_wp_i3", vectorize}
// CHECK:         loop.for %{{.*}} = 0 to 16 step 1 {name = "i0i1", parallel} {
// CHECK:           %conv_acc = memref.alloca() : memref<1x1x8x32xf32>
// CHECK:           {name = "r0", reduction}
// CHECK-NEXT:        {name = "r1", reduction}
// CHECK-NEXT:          {name = "r2", reduction}
// CHECK-NEXT:            {name = "i2", unroll = 8}
// CHECK-NEXT:              {name = "i3", vectorize}
// CHECK-NOT:   scf.if
// CHECK:       memref.load %conv_xp
// CHECK:       memref.load %conv_wp
// CHECK:       {name = "conv_acc_out3", vectorize}
func.func @nhwc(%x: memref<2x8x8x6xf32>, %w: memref<3x3x6x32xf32>, %out0: memref<2x8x8x32xf32>) {
  loop.kernel "conv" attributes {origin = "graph.conv2d"} {
    loop.for %i0_2 = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %i1_2 = 0 to 8 step 1 {name = "i1"} {
        loop.for %i2_2 = 0 to 8 step 1 {name = "i2"} {
          loop.for %i3_2 = 0 to 32 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %2 = arith.constant 0.000000e+00 : f32
            memref.store %2, %acc[] : memref<f32>
            loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 6 step 1 {name = "r2", reduction} {
                  %3 = arith.addi %i1_2, %r0 : index
                  %4 = arith.constant 1 : index
                  %5 = arith.subi %3, %4 : index
                  %6 = arith.addi %i2_2, %r1 : index
                  %7 = arith.constant 1 : index
                  %8 = arith.subi %6, %7 : index
                  %9 = arith.constant 0 : index
                  %10 = arith.cmpi sge, %5, %9 : index
                  %11 = arith.constant 8 : index
                  %12 = arith.cmpi slt, %5, %11 : index
                  %13 = arith.andi %10, %12 : i1
                  %14 = arith.constant 0 : index
                  %15 = arith.cmpi sge, %8, %14 : index
                  %16 = arith.constant 8 : index
                  %17 = arith.cmpi slt, %8, %16 : index
                  %18 = arith.andi %15, %17 : i1
                  %19 = arith.andi %13, %18 : i1
                  %20 = scf.if %19 -> (f32) {
                    %21 = memref.load %x[%i0_2, %5, %8, %r2] : memref<2x8x8x6xf32>
                    scf.yield %21 : f32
                  } else {
                    %22 = arith.constant 0.000000e+00 : f32
                    scf.yield %22 : f32
                  }
                  %23 = memref.load %w[%r0, %r1, %r2, %i3_2] : memref<3x3x6x32xf32>
                  %24 = arith.mulf %20, %23 : f32
                  %25 = memref.load %acc[] : memref<f32>
                  %26 = arith.addf %25, %24 : f32
                  memref.store %26, %acc[] : memref<f32>
                }
              }
            }
            %sum = memref.load %acc[] : memref<f32>
            memref.store %sum, %out0[%i0_2, %i1_2, %i2_2, %i3_2] : memref<2x8x8x32xf32>
          }
        }
      }
    }
  }
  func.return
}
