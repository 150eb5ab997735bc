// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny fuse=false}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny intrinsics=false}' | filecheck %s --check-prefix=SCALAR

// Pooling as te-to-loop emits it (graph: max_pool2d 3x3 stride 2, pads 1, ceil_mode, then
// avg_pool2d 2x2 stride 2): channels are the work loop, each tile of channels is one
// dlp.pool over its NRAM copy. The padded max pool reads through a guard (`scf.if`, -inf
// outside the image), which dlp.pool's implicit padding replaces; the average pool is a
// "sum" pool and its division by the constant window size a dlp.mul_scalar. (fuse=false:
// each pool its own kernel; loop-to-dlp-fuse.mlir chains kernels like these two.)

// The max pool's result is its output: pooled straight into the output tile's slot (no
// accumulator, no NRAM2NRAM copy: one DMA latency less a tile).

// CHECK-LABEL: dlp.kernel "max_pool2d_0"
// CHECK: %[[X:.*]] = memref.alloc() : memref<128xf32, #dlp.space<nram>>
// CHECK: %[[O:.*]] = memref.alloc() : memref<64xf32, #dlp.space<nram>>
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]]
// CHECK-NOT: NRAM2NRAM
// CHECK: dlp.pool "max" %[[O]][%[[SLOT:.*]]], %[[X]][%{{.*}}], %n {height = 8 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 1 : i64, pad_left = 1 : i64, out_h = 5 : i64, out_w = 5 : i64}
// CHECK-NOT: scf.if %{{.*}} -> (f32)
// CHECK-NOT: NRAM2NRAM
// CHECK: dlp.memcpy_async NRAM2GDRAM %max_pool2d[%{{.*}}], %[[O]][%[[SLOT]]]
// CHECK-LABEL: dlp.kernel "avg_pool2d_1"
// CHECK: dlp.pool "sum" %[[ACC:.*]][%{{.*}}], %{{.*}}, %{{.*}} {height = 5 : i64, width = 5 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64}
// CHECK: dlp.mul_scalar %{{.*}}, %[[ACC]][%{{.*}}], %{{.*}}, %{{.*}}
// CHECK-NOT: memref.load

// Without intrinsics the windows stay scalar loops over the NRAM copies.
// SCALAR-LABEL: dlp.kernel "max_pool2d_0"
// SCALAR-NOT: dlp.pool
// SCALAR: arith.maximumf

builtin.module {
  func.func @main(%x: memref<1x4x8x8xf32> {dlpc.name = "x"}, %out0: memref<1x4x2x2xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %max_pool2d = memref.alloc() : memref<1x4x5x5xf32>
    loop.kernel "max_pool2d_0" attributes {origin = "graph.max_pool2d"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 4 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 5 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 5 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %0 = arith.constant 0xff800000 : f32
              memref.store %0, %acc[] : memref<f32>
              loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction} {
                loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                  %1 = arith.constant 2 : index
                  %2 = arith.muli %i2, %1 : index
                  %3 = arith.addi %2, %r0 : index
                  %4 = arith.constant 1 : index
                  %5 = arith.subi %3, %4 : index
                  %6 = arith.constant 2 : index
                  %7 = arith.muli %i3, %6 : index
                  %8 = arith.addi %7, %r1 : index
                  %9 = arith.constant 1 : index
                  %10 = arith.subi %8, %9 : index
                  %11 = arith.constant 0 : index
                  %12 = arith.cmpi sge, %5, %11 : index
                  %13 = arith.constant 8 : index
                  %14 = arith.cmpi slt, %5, %13 : index
                  %15 = arith.andi %12, %14 : i1
                  %16 = arith.constant 0 : index
                  %17 = arith.cmpi sge, %10, %16 : index
                  %18 = arith.constant 8 : index
                  %19 = arith.cmpi slt, %10, %18 : index
                  %20 = arith.andi %17, %19 : i1
                  %21 = arith.andi %15, %20 : i1
                  %22 = scf.if %21 -> (f32) {
                    %23 = memref.load %x[%i0, %i1, %5, %10] : memref<1x4x8x8xf32>
                    scf.yield %23 : f32
                  } else {
                    %24 = arith.constant 0xff800000 : f32
                    scf.yield %24 : f32
                  }
                  %25 = memref.load %acc[] : memref<f32>
                  %26 = arith.maximumf %25, %22 : f32
                  memref.store %26, %acc[] : memref<f32>
                }
              }
              %max = memref.load %acc[] : memref<f32>
              memref.store %max, %max_pool2d[%i0, %i1, %i2, %i3] : memref<1x4x5x5xf32>
            }
          }
        }
      }
    }
    loop.kernel "avg_pool2d_1" attributes {origin = "graph.avg_pool2d"} {
      loop.for %i0_1 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_1 = 0 to 4 step 1 {name = "i1", parallel} {
          loop.for %i2_1 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 2 step 1 {name = "i3"} {
              %acc_1 = memref.alloca() : memref<f32>
              %27 = arith.constant 0.000000e+00 : f32
              memref.store %27, %acc_1[] : memref<f32>
              loop.for %r0_1 = 0 to 2 step 1 {name = "r0", reduction} {
                loop.for %r1_1 = 0 to 2 step 1 {name = "r1", reduction} {
                  %28 = arith.constant 2 : index
                  %29 = arith.muli %i2_1, %28 : index
                  %30 = arith.addi %29, %r0_1 : index
                  %31 = arith.constant 2 : index
                  %32 = arith.muli %i3_1, %31 : index
                  %33 = arith.addi %32, %r1_1 : index
                  %34 = memref.load %max_pool2d[%i0_1, %i1_1, %30, %33] : memref<1x4x5x5xf32>
                  %35 = memref.load %acc_1[] : memref<f32>
                  %36 = arith.addf %35, %34 : f32
                  memref.store %36, %acc_1[] : memref<f32>
                }
              }
              %sum = memref.load %acc_1[] : memref<f32>
              %37 = arith.constant 4.000000e+00 : f32
              %38 = arith.divf %sum, %37 : f32
              memref.store %38, %out0[%i0_1, %i1_1, %i2_1, %i3_1] : memref<1x4x2x2xf32>
            }
          }
        }
      }
    }
    memref.dealloc %max_pool2d : memref<1x4x5x5xf32>
    func.return
  }
}
