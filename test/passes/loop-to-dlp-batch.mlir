// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' | filecheck %s

// Batched convolution and pooling (the work loop is the batch, n > 1): a tile is whole
// images; every filter goes to WRAM once (a whole buffer), each image of the tile is one
// dlp.conv2d over all output channels; the per-channel bias repeats per image (a per-row
// add_scalar reading b[row % channels]). Pooling is one dlp.pool over the tile's planes
// (images x channels, contiguous).

// CHECK-LABEL: func.func @batch_conv
// CHECK: dlp.kernel "conv2d_relu_0"
// CHECK: %[[W:.*]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<wram>>
// CHECK: dlp.memcpy_async {{.*}}2WRAM %[[W]][%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<{{[0-9]+}}xf32, #dlp.space<wram>>, memref<{{.*}}>
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: dlp.conv2d %[[ACC:.*]][%{{.*}}], %{{.*}}[%{{.*}}], %[[W]][%{{.*}}], %{{.*}} {channels_in = 2 : i64, height = 4 : i64, width = 4 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 1 : i64, pad_left = 1 : i64, pad_bottom = 1 : i64, pad_right = 1 : i64}
// CHECK: scf.for
// CHECK: arith.remsi %{{.*}}, %{{.*}} : index
// CHECK: dlp.add_scalar %{{.*}}, %[[ACC]][%{{.*}}], %{{.*}}, %{{.*}}
// CHECK: dlp.relu

func.func @batch_conv(%x: memref<2x2x4x4xf32>, %w: memref<4x2x3x3xf32>, %b: memref<4xf32>, %out: memref<2x4x4x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "conv2d_relu_0" {
    loop.for %n = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %co = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %oh = 0 to 4 step 1 {name = "i2"} {
          loop.for %ow = 0 to 4 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %zero = arith.constant 0.000000e+00 : f32
            memref.store %zero, %acc[] : memref<f32>
            loop.for %ci = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %kh = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %kw = 0 to 3 step 1 {name = "r2", reduction} {
                  %h0 = arith.addi %oh, %kh : index
                  %c1 = arith.constant 1 : index
                  %h = arith.subi %h0, %c1 : index
                  %w0 = arith.addi %ow, %kw : index
                  %ww = arith.subi %w0, %c1 : index
                  %c0 = arith.constant 0 : index
                  %c8 = arith.constant 4 : index
                  %g1 = arith.cmpi sge, %h, %c0 : index
                  %g2 = arith.cmpi slt, %h, %c8 : index
                  %g3 = arith.cmpi sge, %ww, %c0 : index
                  %g4 = arith.cmpi slt, %ww, %c8 : index
                  %g12 = arith.andi %g1, %g2 : i1
                  %g34 = arith.andi %g3, %g4 : i1
                  %g = arith.andi %g12, %g34 : i1
                  %v = scf.if %g -> (f32) {
                    %l = memref.load %x[%n, %ci, %h, %ww] : memref<2x2x4x4xf32>
                    scf.yield %l : f32
                  } else {
                    %z = arith.constant 0.000000e+00 : f32
                    scf.yield %z : f32
                  }
                  %k = memref.load %w[%co, %ci, %kh, %kw] : memref<4x2x3x3xf32>
                  %p = arith.mulf %v, %k : f32
                  %o = memref.load %acc[] : memref<f32>
                  %q = arith.addf %o, %p : f32
                  memref.store %q, %acc[] : memref<f32>
                }
              }
            }
            %s = memref.load %acc[] : memref<f32>
            %bb = memref.load %b[%co] : memref<4xf32>
            %t = arith.addf %s, %bb : f32
            %z2 = arith.constant 0.000000e+00 : f32
            %r = arith.maximumf %t, %z2 : f32
            memref.store %r, %out[%n, %co, %oh, %ow] : memref<2x4x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}

// CHECK-LABEL: func.func @batch_pool
// CHECK: dlp.kernel "max_pool2d_0"
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X:.*]][%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<64xf32, #dlp.space<nram>>, memref<2x4x4x4xf32>
// CHECK: %[[P:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK-NEXT: dlp.pool "max" %{{.*}}[%{{.*}}], %[[X]][%{{.*}}], %[[P]] {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64}

func.func @batch_pool(%x: memref<2x4x4x4xf32>, %out: memref<2x4x2x2xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "max_pool2d_0" {
    loop.for %n = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %c = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %oh = 0 to 2 step 1 {name = "i2"} {
          loop.for %ow = 0 to 2 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %init = arith.constant 0xFF800000 : f32
            memref.store %init, %acc[] : memref<f32>
            loop.for %kh = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %kw = 0 to 2 step 1 {name = "r1", reduction} {
                %c2 = arith.constant 2 : index
                %h0 = arith.muli %oh, %c2 : index
                %h = arith.addi %h0, %kh : index
                %w0 = arith.muli %ow, %c2 : index
                %w = arith.addi %w0, %kw : index
                %v = memref.load %x[%n, %c, %h, %w] : memref<2x4x4x4xf32>
                %o = memref.load %acc[] : memref<f32>
                %m = arith.maximumf %o, %v : f32
                memref.store %m, %acc[] : memref<f32>
              }
            }
            %s = memref.load %acc[] : memref<f32>
            memref.store %s, %out[%n, %c, %oh, %ow] : memref<2x4x2x2xf32>
          }
        }
      }
    }
  }
  func.return
}

// A batched depthwise conv (no conv of all channels per image): the batch is a loop
// around the work loop (channels), run by every task in turn; x and the output are
// offset by one image (64 elements) per iteration, each channel one dlp.conv2d.

// CHECK-LABEL: func.func @batch_depthwise
// CHECK: dlp.kernel "conv2d_0"
// CHECK: scf.for %[[IMG:image]] = %{{.*}} to %{{.*}} step
// CHECK: %[[OFF:.*]] = arith.muli %[[IMG]], %{{.*}} : index
// CHECK: dlp.memcpy_async GDRAM2NRAM %{{.*}}, %x[%{{.*}}], %{{.*}} : memref<{{[0-9]+}}xf32, #dlp.space<nram>>, memref<2x4x4x4xf32>
// CHECK: dlp.conv2d
// CHECK: dlp.memcpy_async NRAM2GDRAM %out0[%{{.*}}]

func.func @batch_depthwise(%x: memref<2x4x4x4xf32> {dlpc.name = "x"}, %w: memref<4x1x3x3xf32> {dlpc.name = "w"}, %out0: memref<2x4x4x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "conv2d_0" attributes {origin = "graph.conv2d"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 4 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 4 step 1 {name = "i3"} {
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
                  %9 = arith.constant 4 : index
                  %10 = arith.cmpi slt, %3, %9 : index
                  %11 = arith.andi %8, %10 : i1
                  %12 = arith.constant 0 : index
                  %13 = arith.cmpi sge, %6, %12 : index
                  %14 = arith.constant 4 : index
                  %15 = arith.cmpi slt, %6, %14 : index
                  %16 = arith.andi %13, %15 : i1
                  %17 = arith.andi %11, %16 : i1
                  %18 = scf.if %17 -> (f32) {
                    %19 = memref.load %x[%i0, %i1, %3, %6] : memref<2x4x4x4xf32>
                    scf.yield %19 : f32
                  } else {
                    %20 = arith.constant 0.000000e+00 : f32
                    scf.yield %20 : f32
                  }
                  %21 = memref.load %w[%i1, %r0, %r1, %r2] : memref<4x1x3x3xf32>
                  %22 = arith.mulf %18, %21 : f32
                  %23 = memref.load %acc[] : memref<f32>
                  %24 = arith.addf %23, %22 : f32
                  memref.store %24, %acc[] : memref<f32>
                }
              }
            }
            %sum = memref.load %acc[] : memref<f32>
            memref.store %sum, %out0[%i0, %i1, %i2, %i3] : memref<2x4x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}
