// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=APART

// A padded 3x3 convolution of a one-channel 8x8 image into 2 channels, its bias and
// ReLU, then a 2x2 max pool: as te-to-loop emits it for the dlp target. Two channels
// would leave 14 of 16 cores idle, so the chain (_dlp_fuse) is also split into bands of
// output rows: 2 channels x 4 bands = 8 tasks, task = channel * 4 + band. Each band loads
// only the image rows its windows read (rows 2 band - 1 .. 2 band + 2, clamped to the
// image), and its conv is padded where the band meets the image's edge: the top band
// above (pad_top 1, 3 rows), the bottom one below (pad_bottom 1, 3 rows), the two middle
// ones not at all (4 rows). The conv writes the band's 2 x 8 outputs, the pool 1 x 4
// of them, stored at plane (channel * 4 + band) of the output seen as 8 planes of 1 x 4
// (the same memory). The bias and ReLU commute with the max pool (_dlp_commute: every
// op of them non-decreasing): they run on the pooled outputs, the conv writes its
// total straight into its NRAM tile.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "max_pool2d_2" attributes {tasks = 8 : i64, {{.*}}dlpc.fused = "conv2d_relu_0,max_pool2d_2"}
// CHECK: %[[TASK:.*]] = dlp.task_id
// CHECK: %[[BAND:.*]] = arith.remsi %[[TASK]], %[[C4:.*]] : index
// CHECK: %[[CH:.*]] = arith.divsi %[[TASK]], %[[C4]] : index
// CHECK: %[[X:x_nram]] = memref.alloc() : memref<64xf32, #dlp.space<nram>>
// CHECK: %[[Y:conv2d_relu_nram]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[OUT:out0_nram]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}], %x[%[[XBASE:.*]]], %[[XCOUNT:.*]] :
// CHECK: scf.for %[[T0:.*]] = %{{.*}} to
// CHECK: %[[SCALED:.*]] = arith.muli %[[T0]], %[[C4]] : index
// CHECK: %[[PLANE:.*]] = arith.addi %[[SCALED]], %[[BAND]] : index
// CHECK: dlp.memcpy_async GDRAM2WRAM %{{.*}}, %w[%{{.*}}]
// CHECK: %[[OBASE:.*]] = arith.muli %[[PLANE]], %{{.*}} : index
// CHECK: dlp.wait_dma
// CHECK-NOT: dlp.add_scalar
// CHECK: scf.if
// CHECK-NEXT: dlp.conv2d %[[Y]][%{{.*}}], %[[X]][%{{.*}}], {{.*}} {channels_in = 1 : i64, height = 3 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 1 : i64, pad_left = 1 : i64, pad_bottom = 0 : i64, pad_right = 1 : i64}
// CHECK: scf.if
// CHECK-NEXT: dlp.conv2d %[[Y]][%{{.*}}], %[[X]][%{{.*}}], {{.*}} {channels_in = 1 : i64, height = 3 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 1 : i64, pad_bottom = 1 : i64, pad_right = 1 : i64}
// CHECK-NEXT: } else {
// CHECK-NEXT: dlp.conv2d %[[Y]][%{{.*}}], %[[X]][%{{.*}}], {{.*}} {channels_in = 1 : i64, height = 4 : i64, width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 1 : i64, pad_bottom = 0 : i64, pad_right = 1 : i64}
// CHECK: dlp.pool "max" %[[ACC:.*]][%{{.*}}], %[[Y]][%{{.*}}], %{{.*}} {height = 2 : i64, width = 8 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 1 : i64, out_w = 4 : i64}
// CHECK: dlp.add_scalar %[[TMP:.*]][%{{.*}}], %[[ACC]][%{{.*}}]
// CHECK: dlp.relu %[[OUT]][%{{.*}}], %[[TMP]][%{{.*}}]
// CHECK: dlp.memcpy_async NRAM2GDRAM %out0[%[[OBASE]]], %[[OUT]][%{{.*}}]

// Without fuse: two kernels on a channel each, the bias and ReLU where the graph put them.
// APART: dlp.kernel "conv2d_relu_0" attributes {tasks = 2 : i64
// APART-NOT: arith.remsi
// APART: dlp.conv2d {{.*}}height = 8 : i64, {{.*}}pad_top = 1 : i64, {{.*}}pad_bottom = 1 : i64
// APART: dlp.add_scalar
// APART: dlp.relu
// APART: dlp.kernel "max_pool2d_2" attributes {tasks = 2 : i64
// APART: dlp.pool "max"
// APART-NOT: dlp.add_scalar

builtin.module {
  func.func @main(%x: memref<1x1x8x8xf32> {dlpc.name = "x"}, %w: memref<2x1x3x3xf32> {dlpc.name = "w"}, %b: memref<2xf32> {dlpc.name = "b"}, %out0: memref<1x2x4x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
    %conv2d_relu = memref.alloc() : memref<1x2x8x8xf32>
    loop.kernel "conv2d_relu_0" attributes {origin = "graph.fused(graph.conv2d, graph.relu)"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 8 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 8 step 1 {name = "i3"} {
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
                    %9 = arith.constant 8 : index
                    %10 = arith.cmpi slt, %3, %9 : index
                    %11 = arith.andi %8, %10 : i1
                    %12 = arith.constant 0 : index
                    %13 = arith.cmpi sge, %6, %12 : index
                    %14 = arith.constant 8 : index
                    %15 = arith.cmpi slt, %6, %14 : index
                    %16 = arith.andi %13, %15 : i1
                    %17 = arith.andi %11, %16 : i1
                    %18 = scf.if %17 -> (f32) {
                      %19 = memref.load %x[%i0, %r0, %3, %6] : memref<1x1x8x8xf32>
                      scf.yield %19 : f32
                    } else {
                      %20 = arith.constant 0.000000e+00 : f32
                      scf.yield %20 : f32
                    }
                    %21 = memref.load %w[%i1, %r0, %r1, %r2] : memref<2x1x3x3xf32>
                    %22 = arith.mulf %18, %21 : f32
                    %23 = memref.load %acc[] : memref<f32>
                    %24 = arith.addf %23, %22 : f32
                    memref.store %24, %acc[] : memref<f32>
                  }
                }
              }
              %sum = memref.load %acc[] : memref<f32>
              %25 = memref.load %b[%i1] : memref<2xf32>
              %26 = arith.addf %sum, %25 : f32
              %27 = arith.constant 0.000000e+00 : f32
              %28 = arith.maximumf %26, %27 : f32
              memref.store %28, %conv2d_relu[%i0, %i1, %i2, %i3] : memref<1x2x8x8xf32>
            }
          }
        }
      }
    }
    loop.kernel "max_pool2d_2" attributes {origin = "graph.max_pool2d"} {
      loop.for %i0_1 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_1 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_1 = 0 to 4 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 4 step 1 {name = "i3"} {
              %acc_1 = memref.alloca() : memref<f32>
              %29 = arith.constant 0xff800000 : f32
              memref.store %29, %acc_1[] : memref<f32>
              loop.for %r0_1 = 0 to 2 step 1 {name = "r0", reduction} {
                loop.for %r1_1 = 0 to 2 step 1 {name = "r1", reduction} {
                  %30 = arith.constant 2 : index
                  %31 = arith.muli %i2_1, %30 : index
                  %32 = arith.addi %31, %r0_1 : index
                  %33 = arith.constant 2 : index
                  %34 = arith.muli %i3_1, %33 : index
                  %35 = arith.addi %34, %r1_1 : index
                  %36 = memref.load %conv2d_relu[%i0_1, %i1_1, %32, %35] : memref<1x2x8x8xf32>
                  %37 = memref.load %acc_1[] : memref<f32>
                  %38 = arith.maximumf %37, %36 : f32
                  memref.store %38, %acc_1[] : memref<f32>
                }
              }
              %max = memref.load %acc_1[] : memref<f32>
              memref.store %max, %out0[%i0_1, %i1_1, %i2_1, %i3_1] : memref<1x2x4x4xf32>
            }
          }
        }
      }
    }
    memref.dealloc %conv2d_relu : memref<1x2x8x8xf32>
    func.return
  }
}