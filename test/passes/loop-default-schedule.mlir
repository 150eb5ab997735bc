// RUN: dlpc-opt %s -p loop-default-schedule | filecheck %s
// RUN: dlpc-opt %s -p 'loop-default-schedule{budget=0.0}' 2>&1 | filecheck %s --check-prefix=BUDGET

// With its time budget spent, the search stops: every kernel keeps te-to-loop's nest, and
// one note says so.
// BUDGET: dlpc: note: loop-default-schedule: schedule search stopped after its budget of 0 s; 17 of 17 kernels keep the identity schedule
// BUDGET-NOT: unroll
// BUDGET: loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction}

// The gemm template: packed panels of B (read across its rows, as a linear layer's
// weight is) and A, the register-tile micro-kernel, init nest vectorized; the kernel is
// too small for OpenMP, so nothing stays parallel. K is one k block: the reduction loop
// is not split (no loop of one trip around the tile).
// CHECK-LABEL: loop.kernel "mm"
// CHECK:       {name = "i1_init", vectorize}
// CHECK-NOT:   {name = "r0c"
// CHECK:       %mm_Bp = memref.alloca() : memref<256xf32>
// CHECK:       %mm_Ap = memref.alloca() : memref<128xf32>
// CHECK:       %C_acc = memref.alloca() : memref<8x32xf32>
// CHECK:       loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK-NEXT:    loop.for %i0i = 0 to 8 step 1 {name = "i0i", unroll = 8} {
// CHECK-NEXT:      loop.for %i1j = 0 to 32 step 1 {name = "i1j", vectorize} {
// CHECK-NOT:   parallel

// A direct convolution, unpadded and stride 1: no packing; the output tile (all 8
// channels x the row) accumulates in a local buffer around the reduction loops, the
// channels unrolled and the row vectorized (the register-tiled micro-kernel).
// CHECK-LABEL: loop.kernel "conv"
// CHECK-NOT:   pack
// CHECK:       {name = "i2"}
// CHECK-NEXT:  %conv_acc = memref.alloca() : memref<1x8x1x8xf32>
// CHECK:       {name = "r0", reduction}
// CHECK-NEXT:  {name = "r1", reduction}
// CHECK:       {name = "i1", unroll = 8}
// CHECK-NEXT:  {name = "i3", vectorize}
// CHECK:       {name = "conv_acc_out0"}
func.func @main(%A: memref<16x8xf32>, %B: memref<32x8xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%i1, %r0] : memref<32x8xf32>
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

func.func @conv(%x: memref<1x4x10xf32>, %w: memref<8x4x3xf32>, %y: memref<1x8x8x8xf32>) {
  loop.kernel "conv" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 8 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 8 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r0 = 0 to 4 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                %h = arith.addi %i3, %r1 : index
                %a = memref.load %x[%i0, %r0, %h] : memref<1x4x10xf32>
                %b = memref.load %w[%i1, %r0, %r1] : memref<8x4x3xf32>
                %p = arith.mulf %a, %b : f32
                %c = memref.load %acc[] : memref<f32>
                %s = arith.addf %c, %p : f32
                memref.store %s, %acc[] : memref<f32>
              }
            }
            %v = memref.load %acc[] : memref<f32>
            memref.store %v, %y[%i0, %i1, %i2, %i3] : memref<1x8x8x8xf32>
          }
        }
      }
    }
  }
  func.return
}


// A row reduction (softmax's max over the contiguous last axis): rfactor keeps the
// rows outer and reads each row with unit stride through 16 vectorized partials.
// CHECK-LABEL: loop.kernel "rowmax_0"
// CHECK:         loop.for %{{.*}} = 0 to 8 step 1 {name = "i0"}
// CHECK:           memref.alloca() : memref<16xf32>
// CHECK:           loop.for %{{.*}} = 0 to 256 step 16 {name = "r0", reduction}
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 16 step 1 {name = "r0_rf", vectorize}
// CHECK:               arith.maximumf
func.func @rowmax(%x: memref<8x256xf32>, %out: memref<8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "rowmax_0" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %init = arith.constant 0xff800000 : f32
      memref.store %init, %acc[] : memref<f32>
      loop.for %r0 = 0 to 256 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i0, %r0] : memref<8x256xf32>
        %m = memref.load %acc[] : memref<f32>
        %n = arith.maximumf %m, %v : f32
        memref.store %n, %acc[] : memref<f32>
      }
      %max = memref.load %acc[] : memref<f32>
      memref.store %max, %out[%i0] : memref<8xf32>
    }
  }
  func.return
}

// A padded 3x3 convolution (the padding is an scf.if around the input load): the
// input is copied once per image with a zero border (4x22x22), outside the parallel
// loop, and read unguarded; the 16 output channels are blocked by 8 (the largest divisor of 16
// whose tile, at two vectors per 20-wide row, fits 24 vector registers); the rows stay
// serial (0.2M multiply-adds: less work than an OpenMP fork/join costs).
// CHECK-LABEL: loop.kernel "pconv"
// CHECK:       {name = "i0"}
// CHECK-NEXT:  %pconv_xp = memref.alloca() : memref<1x4x22x22xf32>
// CHECK:       {name = "i2"}
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 16 step 8 {name = "i1o"}
// CHECK-NEXT:  %pconv_acc = memref.alloca() : memref<1x8x1x20xf32>
// CHECK:       {name = "r0", reduction}
// CHECK-NEXT:  {name = "r1", reduction}
// CHECK-NEXT:  {name = "r2", reduction}
// CHECK-NEXT:  {name = "i1i", unroll = 8}
// CHECK-NEXT:  {name = "i3", vectorize}
// CHECK:       memref.load %pconv_xp
// CHECK-NOT:   scf.if
// CHECK:       {name = "pconv_acc_out0"}
func.func @pconv(%x: memref<1x4x20x20xf32>, %w: memref<16x4x3x3xf32>, %y: memref<1x16x20x20xf32>) {
  loop.kernel "pconv" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
        loop.for %i2 = 0 to 20 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 20 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r0 = 0 to 4 step 1 {name = "r0", reduction} {
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
                    %l = memref.load %x[%i0, %r0, %h, %v] : memref<1x4x20x20xf32>
                    scf.yield %l : f32
                  } else {
                    %zz = arith.constant 0.000000e+00 : f32
                    scf.yield %zz : f32
                  }
                  %b = memref.load %w[%i1, %r0, %r1, %r2] : memref<16x4x3x3xf32>
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

// Depthwise (the input channel is the output channel): no input reuse across channels,
// so no im2col (and this one is unpadded: no copy at all); per channel, a tile of rows
// x the row (10 = 8 + 2: two vector pieces per row, so 2 rows) accumulates around the
// unrolled window.
// CHECK-LABEL: loop.kernel "dw"
// CHECK-NOT:   pack
// CHECK:       {name = "i1"}
// CHECK-NEXT:  {name = "i2o"}
// CHECK-NEXT:  %dw_acc = memref.alloca() : memref<1x1x2x10xf32>
// CHECK:       {name = "r1", reduction, unroll = 3}
// CHECK-NEXT:  {name = "r2", reduction, unroll = 3}
// CHECK-NEXT:  {name = "i2i", unroll = 2}
// CHECK-NEXT:  {name = "i3", vectorize}
func.func @dw(%x: memref<1x8x12x12xf32>, %w: memref<8x1x3x3xf32>, %y: memref<1x8x10x10xf32>) {
  loop.kernel "dw" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 10 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 10 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                  %h = arith.addi %i2, %r1 : index
                  %v = arith.addi %i3, %r2 : index
                  %a = memref.load %x[%i0, %i1, %h, %v] : memref<1x8x12x12xf32>
                  %b = memref.load %w[%i1, %r0, %r1, %r2] : memref<8x1x3x3xf32>
                  %p = arith.mulf %a, %b : f32
                  %c = memref.load %acc[] : memref<f32>
                  %s = arith.addf %c, %p : f32
                  memref.store %s, %acc[] : memref<f32>
                }
              }
            }
            %o = memref.load %acc[] : memref<f32>
            memref.store %o, %y[%i0, %i1, %i2, %i3] : memref<1x8x10x10xf32>
          }
        }
      }
    }
  }
  func.return
}

// A linear layer over a batch ([4, 8, 16] x W[32, 16]^T, W shared): the batch loop goes
// inside the B panel loops, so the panel of B is packed once per call, not per image
// (K is one k block: no kc loop, the panel is packed at the column block).
// CHECK-LABEL: loop.kernel "lin"
// CHECK:       {name = "i2c"}
// CHECK-NEXT:  %lin_Bp = memref.alloca() : memref<512xf32>
// CHECK:       {name = "i0"
// CHECK:       %lin_Ap = memref.alloca()
func.func @lin(%A: memref<4x8x16xf32>, %B: memref<32x16xf32>, %C: memref<4x8x32xf32>) {
  loop.kernel "lin" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 32 step 1 {name = "i2"} {
          %acc = memref.alloca() : memref<f32>
          %z = arith.constant 0.000000e+00 : f32
          memref.store %z, %acc[] : memref<f32>
          loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
            %a = memref.load %A[%i0, %i1, %r0] : memref<4x8x16xf32>
            %b = memref.load %B[%i2, %r0] : memref<32x16xf32>
            %p = arith.mulf %a, %b : f32
            %c = memref.load %acc[] : memref<f32>
            %s = arith.addf %c, %p : f32
            memref.store %s, %acc[] : memref<f32>
          }
          %v = memref.load %acc[] : memref<f32>
          memref.store %v, %C[%i0, %i1, %i2] : memref<4x8x32xf32>
        }
      }
    }
  }
  func.return
}

// B already contiguous along the columns and a single block of A (attention's P x V per
// head): the micro-kernel reads A and B in place, no packing.
// CHECK-LABEL: loop.kernel "mmc"
// CHECK-NOT:   _Bp
// CHECK-NOT:   _Ap
// CHECK:       %C_acc = memref.alloca() : memref<8x32xf32>
// CHECK:       {name = "i0i", unroll = 8}
func.func @mmc(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mmc" {
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

// A linear layer at batch 4 (W read along k): the dot kernel, no packing: 4 rows x 4
// columns of dot products, each a vector of partial sums along k, unrolled over the tile.
// CHECK-LABEL: loop.kernel "lin4"
// CHECK-NOT:   pack
// CHECK:       %y_acc_part = memref.alloca() : memref<4x4x16xf32>
// CHECK:       loop.for %{{.*}} = 0 to 32 step 16 {name = "r0", reduction} {
// CHECK-NEXT:    {name = "i0", unroll = 4}
// CHECK-NEXT:    {name = "i1i", unroll = 4}
// CHECK-NEXT:    {name = "r0_v", vectorize}
func.func @lin4(%x: memref<4x32xf32>, %w: memref<8x32xf32>, %y: memref<4x8xf32>) {
  loop.kernel "lin4" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<4x32xf32>
          %b = memref.load %w[%i1, %r0] : memref<8x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %y[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  func.return
}

// A matmul with 17 rows (prime): one 17 x 16 register tile, not 1 x 32 strips.
// CHECK-LABEL: loop.kernel "mm17"
// CHECK:       %c_acc = memref.alloca() : memref<17x16xf32>
// CHECK:       {name = "i0i", unroll = 17}
// CHECK-NEXT:  {name = "i1j", vectorize}
func.func @mm17(%a: memref<17x8xf32>, %b: memref<8x32xf32>, %c: memref<17x32xf32>) {
  loop.kernel "mm17" {
    loop.for %i0 = 0 to 17 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i0, %r0] : memref<17x8xf32>
          %y = memref.load %b[%r0, %i1] : memref<8x32xf32>
          %p = arith.mulf %x, %y : f32
          %s0 = memref.load %acc[] : memref<f32>
          %s = arith.addf %s0, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %c[%i0, %i1] : memref<17x32xf32>
      }
    }
  }
  func.return
}

// The same layer with W a param of @main: its panels are packed (a pack that
// loop-prepack-weights moves to load time), so the packed gemm, not the dot kernel; A,
// a single row block, is read in place.
// CHECK-LABEL: loop.kernel "lin4w"
// CHECK-NOT:   _part
// CHECK:       %lin4w_Bp = memref.alloca() : memref<256xf32>
// CHECK-NOT:   _Ap
// CHECK:       %y_acc = memref.alloca() : memref<4x16xf32>
// CHECK:       {name = "i0i", unroll = 4}
// CHECK-NEXT:  {name = "i1j", vectorize}
func.func @lin4w(%x: memref<4x16xf32>, %w: memref<16x16xf32>, %y: memref<4x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "lin4w" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<4x16xf32>
          %b = memref.load %w[%i1, %r0] : memref<16x16xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %y[%i0, %i1] : memref<4x16xf32>
      }
    }
  }
  func.return
}

// 37 rows (prime, above 24): tiles of 8 rows and a remainder tile of 5 (`gemm8`), B
// (read across its rows) packed in panels before the remainder's copy is made, so both
// read the one panel.
// CHECK-LABEL: loop.kernel "mm37"
// CHECK:       %mm37_Bp = memref.alloca() : memref<1024xf32>
// CHECK:       {name = "i0r"}
// CHECK:       %c_acc = memref.alloca() : memref<8x32xf32>
// CHECK:       {name = "i0i", unroll = 8}
// CHECK:       %c_acc_1 = memref.alloca() : memref<5x32xf32>
// CHECK:       {name = "i0_tail", unroll = 5}
// CHECK:       memref.load %mm37_Bp[
func.func @mm37(%a: memref<37x32xf32>, %b: memref<32x32xf32>, %c: memref<37x32xf32>) {
  loop.kernel "mm37" {
    loop.for %i0 = 0 to 37 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i0, %r0] : memref<37x32xf32>
          %y = memref.load %b[%i1, %r0] : memref<32x32xf32>
          %p = arith.mulf %x, %y : f32
          %s0 = memref.load %acc[] : memref<f32>
          %s = arith.addf %s0, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %c[%i0, %i1] : memref<37x32xf32>
      }
    }
  }
  func.return
}

// A 256 x 256 x 256 gemm: the parallel loop (the B panel columns, inside the k and the
// row blocks) runs after the A and B panels are packed, so their packing is parallel too;
// all 256 rows are one A block (256 KB).
// CHECK-LABEL: loop.kernel "mmbig"
// CHECK:       %mmbig_Bp = memref.alloca() : memref<65536xf32>
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 256 step 32 {name = "mmbig_Bp_i1r", parallel} {
// CHECK:       %mmbig_Ap = memref.alloca() : memref<65536xf32>
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 256 step 8 {name = "mmbig_Ap_i0r", parallel} {
// CHECK:       {name = "i1r", parallel}
func.func @mmbig(%a: memref<256x256xf32>, %b: memref<256x256xf32>, %c: memref<256x256xf32>) {
  loop.kernel "mmbig" {
    loop.for %i0 = 0 to 256 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 256 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 256 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i0, %r0] : memref<256x256xf32>
          %y = memref.load %b[%i1, %r0] : memref<256x256xf32>
          %p = arith.mulf %x, %y : f32
          %s0 = memref.load %acc[] : memref<f32>
          %s = arith.addf %s0, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %c[%i0, %i1] : memref<256x256xf32>
      }
    }
  }
  func.return
}

// 131 columns (prime, above 128): tiles of 8 x 16 with remainder tiles in both
// directions (`gemm8x16`): the columns loop of the tiles (parallel: 16 x 131 x 128 is
// above SERIAL_WORK), then a 3-column remainder.
// CHECK-LABEL: loop.kernel "mm131"
// CHECK:       %mm131_Bp = memref.alloca() : memref<16768xf32>
// CHECK:       {name = "i1r", parallel}
// CHECK:       %c_acc = memref.alloca() : memref<8x16xf32>
// CHECK:       {name = "i0i", unroll = 8}
// CHECK:       %c_acc_1 = memref.alloca() : memref<8x3xf32>
func.func @mm131(%a: memref<16x128xf32>, %b: memref<131x128xf32>, %c: memref<16x131xf32>) {
  loop.kernel "mm131" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 131 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 128 step 1 {name = "r0", reduction} {
          %x = memref.load %a[%i0, %r0] : memref<16x128xf32>
          %y = memref.load %b[%i1, %r0] : memref<131x128xf32>
          %p = arith.mulf %x, %y : f32
          %s0 = memref.load %acc[] : memref<f32>
          %s = arith.addf %s0, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %c[%i0, %i1] : memref<16x131xf32>
      }
    }
  }
  func.return
}

// A padded depthwise conv over a batch: each (image, channel) pair stages its channel's
// padded plane (5x6 -> 7x8) inside the pair loop, and the window reads it unguarded.
// CHECK-LABEL: loop.kernel "dwpad"
// CHECK:       loop.for %{{.*}} = 0 to 4 step 1 {name = "i0i1"} {
// CHECK:         %dwpad_xp = memref.alloca() : memref<1x1x7x8xf32>
// CHECK:         {name = "i2"}
// CHECK:           %dwpad_acc = memref.alloca() : memref<1x1x1x6xf32>
// CHECK:           {name = "r1", reduction, unroll = 3}
// CHECK-NEXT:      {name = "r2", reduction, unroll = 3}
// CHECK-NEXT:      {name = "i3", vectorize}
// CHECK-NOT:       scf.if
// CHECK:           memref.load %dwpad_xp
func.func @dwpad(%x: memref<2x2x5x6xf32>, %w: memref<2x1x3x3xf32>, %y: memref<2x2x5x6xf32>) {
  loop.kernel "dwpad" {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 5 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 6 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
              loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                %one = arith.constant 1 : index
                %zi = arith.constant 0 : index
                %nh = arith.constant 5 : index
                %nw = arith.constant 6 : index
                %h0 = arith.addi %i2, %r1 : index
                %h = arith.subi %h0, %one : index
                %v0 = arith.addi %i3, %r2 : index
                %v = arith.subi %v0, %one : index
                %c0 = arith.cmpi sge, %h, %zi : index
                %c1 = arith.cmpi slt, %h, %nh : index
                %c2 = arith.cmpi sge, %v, %zi : index
                %c3 = arith.cmpi slt, %v, %nw : index
                %c01 = arith.andi %c0, %c1 : i1
                %c23 = arith.andi %c2, %c3 : i1
                %in = arith.andi %c01, %c23 : i1
                %a = scf.if %in -> (f32) {
                  %l = memref.load %x[%i0, %i1, %h, %v] : memref<2x2x5x6xf32>
                  scf.yield %l : f32
                } else {
                  %zz = arith.constant 0.000000e+00 : f32
                  scf.yield %zz : f32
                }
                %b = memref.load %w[%i1, %zi, %r1, %r2] : memref<2x1x3x3xf32>
                %p = arith.mulf %a, %b : f32
                %c = memref.load %acc[] : memref<f32>
                %s = arith.addf %c, %p : f32
                memref.store %s, %acc[] : memref<f32>
              }
            }
            %o = memref.load %acc[] : memref<f32>
            memref.store %o, %y[%i0, %i1, %i2, %i3] : memref<2x2x5x6xf32>
          }
        }
      }
    }
  }
  func.return
}

// An NHWC depthwise conv (graph-layout at -O3: the channel innermost) is vectorized over
// the channels: the HWIO weight packed along them, a padded copy of the input, the 6
// columns x 16 channels in registers, the columns unrolled.
// CHECK-LABEL: loop.kernel "dwnhwc"
// CHECK:       %dwnhwc_xp = memref.alloca() : memref<1x7x8x16xf32>
// CHECK:       %dwnhwc_wp = memref.alloca() : memref<144xf32>
// CHECK:       {name = "i1"}
// CHECK:         %dwnhwc_acc = memref.alloca() : memref<1x1x6x16xf32>
// CHECK:         {name = "i2", unroll = 6}
// CHECK-NEXT:    {name = "i3", vectorize}
// CHECK:           memref.load %dwnhwc_xp
// CHECK:           memref.load %dwnhwc_wp
func.func @dwnhwc(%x: memref<1x5x6x16xf32>, %w: memref<3x3x1x16xf32>, %y: memref<1x5x6x16xf32>) {
  loop.kernel "dwnhwc" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 5 step 1 {name = "i1"} {
        loop.for %i2 = 0 to 6 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 16 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %z = arith.constant 0.000000e+00 : f32
            memref.store %z, %acc[] : memref<f32>
            loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 1 step 1 {name = "r2", reduction} {
                  %one = arith.constant 1 : index
                  %zi = arith.constant 0 : index
                  %nh = arith.constant 5 : index
                  %nw = arith.constant 6 : index
                  %h0 = arith.addi %i1, %r0 : index
                  %h = arith.subi %h0, %one : index
                  %v0 = arith.addi %i2, %r1 : index
                  %v = arith.subi %v0, %one : index
                  %c0 = arith.cmpi sge, %h, %zi : index
                  %c1 = arith.cmpi slt, %h, %nh : index
                  %c2 = arith.cmpi sge, %v, %zi : index
                  %c3 = arith.cmpi slt, %v, %nw : index
                  %c01 = arith.andi %c0, %c1 : i1
                  %c23 = arith.andi %c2, %c3 : i1
                  %in = arith.andi %c01, %c23 : i1
                  %a = scf.if %in -> (f32) {
                    %l = memref.load %x[%i0, %h, %v, %i3] : memref<1x5x6x16xf32>
                    scf.yield %l : f32
                  } else {
                    %zz = arith.constant 0.000000e+00 : f32
                    scf.yield %zz : f32
                  }
                  %b = memref.load %w[%r0, %r1, %r2, %i3] : memref<3x3x1x16xf32>
                  %p = arith.mulf %a, %b : f32
                  %c = memref.load %acc[] : memref<f32>
                  %s = arith.addf %c, %p : f32
                  memref.store %s, %acc[] : memref<f32>
                }
              }
            }
            %o = memref.load %acc[] : memref<f32>
            memref.store %o, %y[%i0, %i1, %i2, %i3] : memref<1x5x6x16xf32>
          }
        }
      }
    }
  }
  func.return
}

// lin4w in a branch of an scf.if of @main (loop-short-extents' copy of a kernel): W is
// still a param of @main, so the packed gemm, as above.
// CHECK-LABEL: loop.kernel "lin4wb"
// CHECK-NOT:   _part
// CHECK:       %lin4wb_Bp = memref.alloca() : memref<256xf32>
// CHECK:       {name = "i0i", unroll = 4}
func.func @lin4wb(%x: memref<4x16xf32>, %dlpc_dims: memref<1xi64>, %w: memref<16x16xf32>, %y: memref<4x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %n = memref.load %dlpc_dims[%c0] : memref<1xi64>
  %four = arith.constant 4 : i64
  %short = arith.cmpi eq, %n, %four : i64
  scf.if %short {
    loop.kernel "lin4wb" {
      loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
          %acc = memref.alloca() : memref<f32>
          %z = arith.constant 0.000000e+00 : f32
          memref.store %z, %acc[] : memref<f32>
          loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
            %a = memref.load %x[%i0, %r0] : memref<4x16xf32>
            %b = memref.load %w[%i1, %r0] : memref<16x16xf32>
            %p = arith.mulf %a, %b : f32
            %c = memref.load %acc[] : memref<f32>
            %s = arith.addf %c, %p : f32
            memref.store %s, %acc[] : memref<f32>
          }
          %v = memref.load %acc[] : memref<f32>
          memref.store %v, %y[%i0, %i1] : memref<4x16xf32>
        }
      }
    }
  }
  func.return
}

// A kernel between TEAM_WORK (2^16) and SERIAL_WORK iterations that does not stream (a
// 32 x 32 x 64 gemm reads 4K elements for 64K multiply-adds): its parallel loop loses
// `parallel` and keeps the `dlpc.team` mark (the C backend shares it only inside @main's
// team region); a smaller one (the "mm" gemm above, 4K) keeps no mark.
// CHECK-LABEL: loop.kernel "mmteam"
// CHECK:       {name = "i1c", dlpc.team}
// CHECK-NOT:   parallel
// CHECK-NOT:   dlpc.team
// CHECK:       func.return
func.func @mmteam(%A: memref<32x64xf32>, %B: memref<32x64xf32>, %C: memref<32x32xf32>) {
  loop.kernel "mmteam" {
    loop.for %i0 = 0 to 32 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %z = arith.constant 0.0 : f32
        memref.store %z, %C[%i0, %i1] : memref<32x32xf32>
        loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<32x64xf32>
          %b = memref.load %B[%i1, %r0] : memref<32x64xf32>
          %c = memref.load %C[%i0, %i1] : memref<32x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<32x32xf32>
        }
      }
    }
  }
  func.return
}
