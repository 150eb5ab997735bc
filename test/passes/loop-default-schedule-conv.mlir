// RUN: dlpc-opt %s -p loop-default-schedule | filecheck %s
// Convolution schedules beyond loop-default-schedule.mlir's: NHWC, NCHW input staged per
// thread (a block of rows each), ragged NCHW rows, small pooling windows.

// An NHWC convolution (output channels innermost; graph-conv-layout picks NHWC for convs
// whose channels fill vectors and whose row does not): a tile of 8 output columns x 32
// channels accumulates in a local buffer with the channels contiguous, around all
// reduction loops; the columns unrolled, the channels vectorized. The weight is packed
// once for the batch (`wp[kh][kw][ci][co]`, contiguous along the vectorized channels);
// the 32 images split over the 2 threads (3.5M multiply-adds: worth a fork/join), one
// block of 16 per thread, which stages its block's padded copy inside the parallel loop
// and runs its (image, row) pairs as one loop.
// CHECK-LABEL: loop.kernel "conv"
// CHECK:       {name = "i3_init", vectorize}
// CHECK:       loop.for %{{.*}} = 0 to 32 step 32 {name = "i0b"} {
// CHECK-NEXT:    %conv_wp = memref.alloca() : memref<1728xf32>
// CHECK:         {name = "conv_wp_i3", vectorize}
// CHECK:         loop.for %{{.*}} = 0 to 32 step 16 {name = "i0t", parallel} {
// CHECK-NEXT:      %conv_xp = memref.alloca() : memref<16x10x10x6xf32>
// CHECK:           loop.for %{{.*}} = 0 to 128 step 1 {name = "i0i1"} {
// CHECK:             %conv_acc = memref.alloca() : memref<1x1x8x32xf32>
// CHECK:           {name = "r0", reduction}
// CHECK-NEXT:        {name = "r1", reduction}
// CHECK-NEXT:          {name = "r2", reduction}
// CHECK-NEXT:            {name = "i2", unroll = 8}
// CHECK-NEXT:              {name = "i3", vectorize}
// CHECK-NOT:   scf.if
// CHECK:       memref.load %conv_xp
// CHECK:       memref.load %conv_wp
// CHECK:       {name = "conv_acc_out3", vectorize}
func.func @nhwc(%x: memref<32x8x8x6xf32>, %w: memref<3x3x6x32xf32>, %out0: memref<32x8x8x32xf32>) {
  loop.kernel "conv" attributes {origin = "graph.conv2d"} {
    loop.for %i0_2 = 0 to 32 step 1 {name = "i0", parallel} {
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
                    %21 = memref.load %x[%i0_2, %5, %8, %r2] : memref<32x8x8x6xf32>
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
            memref.store %sum, %out0[%i0_2, %i1_2, %i2_2, %i3_2] : memref<32x8x8x32xf32>
          }
        }
      }
    }
  }
  func.return
}

// One image of it (20 rows, 276K multiply-adds): the rows split over the 2 threads, one
// block of 10 per thread, which stages the rows its block reads (12 with the halo) as a
// padded copy inside the parallel loop: a guard per row (the block's first and last
// rows may be padding), the interior unguarded.
// CHECK-LABEL: loop.kernel "conv_one"
// CHECK:       %conv_one_wp = memref.alloca() : memref<1728xf32>
// CHECK:       loop.for %{{.*}} = 0 to 20 step 10 {name = "i1t", parallel} {
// CHECK-NEXT:    %conv_one_xp = memref.alloca() : memref<1x12x10x6xf32>
// CHECK:         scf.if
// CHECK:         loop.for %{{.*}} = 0 to 10 step 1 {name = "i1r"} {
// CHECK:           %conv_one_acc = memref.alloca() : memref<1x1x8x32xf32>
// CHECK-NOT:   scf.if
// CHECK:       memref.load %conv_one_xp
// CHECK:       {name = "conv_one_acc_out3", vectorize}
func.func @nhwc_one_image(%x: memref<1x20x8x6xf32>, %w: memref<3x3x6x32xf32>, %out0: memref<1x20x8x32xf32>) {
  loop.kernel "conv_one" attributes {origin = "graph.conv2d"} {
    loop.for %i0_2 = 0 to 1 step 1 {name = "i0", parallel} {
      loop.for %i1_2 = 0 to 20 step 1 {name = "i1"} {
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
                  %11 = arith.constant 20 : index
                  %12 = arith.cmpi slt, %5, %11 : index
                  %13 = arith.andi %10, %12 : i1
                  %14 = arith.constant 0 : index
                  %15 = arith.cmpi sge, %8, %14 : index
                  %16 = arith.constant 8 : index
                  %17 = arith.cmpi slt, %8, %16 : index
                  %18 = arith.andi %15, %17 : i1
                  %19 = arith.andi %13, %18 : i1
                  %20 = scf.if %19 -> (f32) {
                    %21 = memref.load %x[%i0_2, %5, %8, %r2] : memref<1x20x8x6xf32>
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
            memref.store %sum, %out0[%i0_2, %i1_2, %i2_2, %i3_2] : memref<1x20x8x32xf32>
          }
        }
      }
    }
  }
  func.return
}

// A padded 3x3 NCHW conv on one image with enough work for 2 threads (0.9M
// multiply-adds; 16 input channels): the 20 output rows split into one block of 10 per
// thread, and each thread stages the rows its block reads (12 with the halo) as a padded
// copy inside the parallel loop, a guard per row (a block's first or last row may be
// padding); the tile (8 channels x the row) inside, reading the copy unguarded.
// CHECK-LABEL: loop.kernel "pconv_rows"
// CHECK:       loop.for %{{.*}} = 0 to 20 step 10 {name = "i2t", parallel} {
// CHECK-NEXT:    %pconv_rows_xp = memref.alloca() : memref<1x16x12x22xf32>
// CHECK:         scf.if
// CHECK:         loop.for %{{.*}} = 0 to 10 step 1 {name = "i2r"} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 16 step 8 {name = "i1o"} {
// CHECK-NEXT:        %pconv_rows_acc = memref.alloca() : memref<1x8x1x20xf32>
// CHECK-NOT:   scf.if
// CHECK:       memref.load %pconv_rows_xp
// CHECK:       {name = "pconv_rows_acc_out3", vectorize}
func.func @pconv_rows(%x: memref<1x16x20x20xf32>, %w: memref<16x16x3x3xf32>, %y: memref<1x16x20x20xf32>) {
  loop.kernel "pconv_rows" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
        loop.for %i2 = 0 to 20 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 20 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                  %one = arith.constant 1 : index
                  %zi = arith.constant 0 : index
                  %n = arith.constant 20 : index
                  %h0 = arith.addi %i2, %r1 : index
                  %h = arith.subi %h0, %one : index
                  %v0 = arith.addi %i3, %r2 : index
                  %v = arith.subi %v0, %one : index
                  %c0 = arith.cmpi sge, %h, %zi : index
                  %c1 = arith.cmpi slt, %h, %n : index
                  %c2 = arith.cmpi sge, %v, %zi : index
                  %c3 = arith.cmpi slt, %v, %n : index
                  %c01 = arith.andi %c0, %c1 : i1
                  %c23 = arith.andi %c2, %c3 : i1
                  %in = arith.andi %c01, %c23 : i1
                  %a = scf.if %in -> (f32) {
                    %l = memref.load %x[%i0, %r0, %h, %v] : memref<1x16x20x20xf32>
                    scf.yield %l : f32
                  } else {
                    %zz = arith.constant 0.000000e+00 : f32
                    scf.yield %zz : f32
                  }
                  %b = memref.load %w[%i1, %r0, %r1, %r2] : memref<16x16x3x3xf32>
                  %p = arith.mulf %a, %b : f32
                  %c = memref.load %acc[] : memref<f32>
                  %s = arith.addf %c, %p : f32
                  memref.store %s, %acc[] : memref<f32>
                }
              }
            }
            %o = memref.load %acc[] : memref<f32>
            memref.store %o, %y[%i0, %i1, %i2, %i3] : memref<1x16x20x20xf32>
          }
        }
      }
    }
  }
  func.return
}

// An NCHW conv whose row GCC splits into three vector pieces (28 = 16 + 8 + 4; LeNet's
// first conv): the tile takes 7 rows x 1 channel (21 pieces), each broadcast weight
// feeding 7 rows instead of 1; (image, 7-row block) pairs are one loop, serial: 0.2M
// multiply-adds are less work than an OpenMP fork/join costs.
// CHECK-LABEL: loop.kernel "rag"
// CHECK:       %rag_xp = memref.alloca() : memref<2x1x32x32xf32>
// CHECK-NOT:   parallel
// CHECK:       loop.for %{{.*}} = 0 to 8 step 1 {name = "i0i2"} {
// CHECK:         %rag_acc = memref.alloca() : memref<1x1x7x28xf32>
// CHECK:         {name = "r2", reduction}
// CHECK-NEXT:      {name = "i2i", unroll = 7}
// CHECK-NEXT:        {name = "i1i", unroll = 1}
// CHECK-NEXT:          {name = "i3", vectorize}
func.func @rag(%x: memref<2x1x28x28xf32>, %w: memref<6x1x5x5xf32>, %out0: memref<2x6x28x28xf32>) {
  loop.kernel "rag" attributes {origin = "graph.conv2d"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 6 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 28 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 28 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0.000000e+00 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 5 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 5 step 1 {name = "r2", reduction} {
                  %1 = arith.addi %i2, %r1 : index
                  %2 = arith.constant 2 : index
                  %3 = arith.subi %1, %2 : index
                  %4 = arith.addi %i3, %r2 : index
                  %5 = arith.constant 2 : index
                  %6 = arith.subi %4, %5 : index
                  %7 = arith.constant 0 : index
                  %8 = arith.cmpi sge, %3, %7 : index
                  %9 = arith.constant 28 : index
                  %10 = arith.cmpi slt, %3, %9 : index
                  %11 = arith.andi %8, %10 : i1
                  %12 = arith.constant 0 : index
                  %13 = arith.cmpi sge, %6, %12 : index
                  %14 = arith.constant 28 : index
                  %15 = arith.cmpi slt, %6, %14 : index
                  %16 = arith.andi %13, %15 : i1
                  %17 = arith.andi %11, %16 : i1
                  %18 = scf.if %17 -> (f32) {
                    %19 = memref.load %x[%i0, %r0, %3, %6] : memref<2x1x28x28xf32>
                    scf.yield %19 : f32
                  } else {
                    %20 = arith.constant 0.000000e+00 : f32
                    scf.yield %20 : f32
                  }
                  %21 = memref.load %w[%i1, %r0, %r1, %r2] : memref<6x1x5x5xf32>
                  %22 = arith.mulf %18, %21 : f32
                  %23 = memref.load %acc[] : memref<f32>
                  %24 = arith.addf %23, %22 : f32
                  memref.store %24, %acc[] : memref<f32>
                }
              }
            }
            %sum = memref.load %acc[] : memref<f32>
            memref.store %sum, %out0[%i0, %i1, %i2, %i3] : memref<2x6x28x28xf32>
          }
        }
      }
    }
  }
  func.return
}

// A 2x2 max pool: te-to-loop's nest with the window loops unrolled (no im2col rows, no
// decomposition); too small a kernel to stay parallel.
// CHECK-LABEL: loop.kernel "pool"
// CHECK-NOT:   alloca() : memref<{{[0-9]}}
// CHECK:       {name = "i3"}
// CHECK:       {name = "r0", reduction, unroll = 2}
// CHECK-NEXT:    {name = "r1", reduction, unroll = 2}
func.func @pool(%x: memref<2x6x28x28xf32>, %out0: memref<2x6x14x14xf32>) {
  loop.kernel "pool" attributes {origin = "graph.max_pool2d"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 6 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 14 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 14 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0xff800000 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 2 step 1 {name = "r1", reduction} {
                %1 = arith.constant 2 : index
                %2 = arith.muli %i2, %1 : index
                %3 = arith.addi %2, %r0 : index
                %4 = arith.constant 2 : index
                %5 = arith.muli %i3, %4 : index
                %6 = arith.addi %5, %r1 : index
                %7 = memref.load %x[%i0, %i1, %3, %6] : memref<2x6x28x28xf32>
                %8 = memref.load %acc[] : memref<f32>
                %9 = arith.maximumf %8, %7 : f32
                memref.store %9, %acc[] : memref<f32>
              }
            }
            %max = memref.load %acc[] : memref<f32>
            memref.store %max, %out0[%i0, %i1, %i2, %i3] : memref<2x6x14x14xf32>
          }
        }
      }
    }
  }
  func.return
}
