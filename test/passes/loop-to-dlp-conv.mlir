// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' | filecheck %s

// A padded 3x3 convolution (NCHW, the form te-to-loop emits) with a per-channel bias and
// relu: output channels are the work loop, weight tiles go to WRAM, the image stays
// whole in NRAM, the nest becomes one dlp.conv2d; the bias is a per-row add_scalar.

// CHECK-LABEL: func.func @conv
// CHECK: dlp.kernel "conv2d_relu_0"
// CHECK: %[[X:.*]] = memref.alloc() : memref<128xf32, #dlp.space<nram>>
// CHECK: %[[W:.*]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<wram>>
// CHECK: dlp.memcpy{{.*}}2WRAM %[[W]]
// CHECK: dlp.conv2d %[[ACC:.*]][%{{.*}}], %[[X]][%{{.*}}], %[[W]][%{{.*}}], %{{.*}} {channels_in = 2 : i64, height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 1 : i64, pad_left = 1 : i64, pad_bottom = 1 : i64, pad_right = 1 : i64}
// CHECK: scf.for
// CHECK: dlp.add_scalar %{{.*}}, %[[ACC]][%{{.*}}], %{{.*}}, %{{.*}}
// CHECK: dlp.relu
// CHECK-NOT: scf.if

func.func @conv(%x: memref<1x2x8x8xf32>, %w: memref<4x2x3x3xf32>, %b: memref<4xf32>, %out: memref<1x4x8x8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "conv2d_relu_0" {
    loop.for %n = 0 to 1 step 1 {name = "i0"} {
      loop.for %co = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %oh = 0 to 8 step 1 {name = "i2"} {
          loop.for %ow = 0 to 8 step 1 {name = "i3"} {
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
                  %c8 = arith.constant 8 : index
                  %g1 = arith.cmpi sge, %h, %c0 : index
                  %g2 = arith.cmpi slt, %h, %c8 : index
                  %g3 = arith.cmpi sge, %ww, %c0 : index
                  %g4 = arith.cmpi slt, %ww, %c8 : index
                  %g12 = arith.andi %g1, %g2 : i1
                  %g34 = arith.andi %g3, %g4 : i1
                  %g = arith.andi %g12, %g34 : i1
                  %v = scf.if %g -> (f32) {
                    %l = memref.load %x[%n, %ci, %h, %ww] : memref<1x2x8x8xf32>
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
            memref.store %r, %out[%n, %co, %oh, %ow] : memref<1x4x8x8xf32>
          }
        }
      }
    }
  }
  func.return
}

// Depthwise (one input channel per output channel): the image is tiled along channels
// with the output; each channel's 3x3 filter is copied into its own aligned WRAM slot and
// convolved with one dlp.conv2d.

// CHECK-LABEL: func.func @depthwise
// CHECK: dlp.kernel "dw_0"
// CHECK: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// CHECK: dlp.memcpy_async GDRAM2WRAM %[[F:.*]][%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<{{[0-9]+}}xf32, #dlp.space<wram>>, memref<4x1x3x3xf32>
// CHECK: dlp.conv2d %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %[[F]][%{{.*}}], %{{.*}} {channels_in = 1 : i64, height = 4 : i64, width = 4 : i64

func.func @depthwise(%x: memref<1x4x4x4xf32>, %w: memref<4x1x3x3xf32>, %out: memref<1x4x4x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "dw_0" attributes {origin = "graph.conv2d"} {
    loop.for %n = 0 to 1 step 1 {name = "i0"} {
      loop.for %c = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %oh = 0 to 4 step 1 {name = "i2"} {
          loop.for %ow = 0 to 4 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %zero = arith.constant 0.000000e+00 : f32
            memref.store %zero, %acc[] : memref<f32>
            loop.for %ci = 0 to 1 step 1 {name = "r0", reduction} {
              loop.for %kh = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %kw = 0 to 3 step 1 {name = "r2", reduction} {
                  %c1 = arith.constant 1 : index
                  %h0 = arith.addi %oh, %kh : index
                  %h = arith.subi %h0, %c1 : index
                  %w0 = arith.addi %ow, %kw : index
                  %ww = arith.subi %w0, %c1 : index
                  %ch = arith.addi %c, %ci : index
                  %c0 = arith.constant 0 : index
                  %c4 = arith.constant 4 : index
                  %g1 = arith.cmpi sge, %h, %c0 : index
                  %g2 = arith.cmpi slt, %h, %c4 : index
                  %g3 = arith.cmpi sge, %ww, %c0 : index
                  %g4 = arith.cmpi slt, %ww, %c4 : index
                  %g12 = arith.andi %g1, %g2 : i1
                  %g34 = arith.andi %g3, %g4 : i1
                  %g = arith.andi %g12, %g34 : i1
                  %v = scf.if %g -> (f32) {
                    %l = memref.load %x[%n, %ch, %h, %ww] : memref<1x4x4x4xf32>
                    scf.yield %l : f32
                  } else {
                    %z = arith.constant 0.000000e+00 : f32
                    scf.yield %z : f32
                  }
                  %k = memref.load %w[%c, %ci, %kh, %kw] : memref<4x1x3x3xf32>
                  %p = arith.mulf %v, %k : f32
                  %o = memref.load %acc[] : memref<f32>
                  %q = arith.addf %o, %p : f32
                  memref.store %q, %acc[] : memref<f32>
                }
              }
            }
            %s = memref.load %acc[] : memref<f32>
            memref.store %s, %out[%n, %c, %oh, %ow] : memref<1x4x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}
