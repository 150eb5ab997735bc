// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s

// The number of clusters a kernel uses (default description: 4 clusters x 4 cores). 32
// rows of a linear layer over all 16 cores would stage its 512 KiB weight in every
// cluster's SRAM, four times its bytes over GDRAM; the time estimate keeps it to one
// cluster (4 tasks, 8 rows each), the weight crossing GDRAM once.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "linear_relu_0" attributes {{{.*}}tasks = 4 : i64
// CHECK: dlp.memcpy_async GDRAM2SRAM %{{.*}}, %w[%{{.*}}], %{{.*}} : memref<131072xf32, #dlp.space<sram>>, memref<512x256xf32>
// CHECK: dlp.matmul

func.func @main(%x: memref<32x256xf32> {dlpc.name = "x"}, %w: memref<512x256xf32> {dlpc.name = "w"}, %out0: memref<32x512xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "linear_relu_0" attributes {origin = "graph.fused(graph.linear, graph.relu)"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 512 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %0 = arith.constant 0.000000e+00 : f32
        memref.store %0, %acc[] : memref<f32>
        loop.for %r0 = 0 to 256 step 1 {name = "r0", reduction} {
          %1 = memref.load %x[%i0, %r0] : memref<32x256xf32>
          %2 = memref.load %w[%i1, %r0] : memref<512x256xf32>
          %3 = arith.mulf %1, %2 : f32
          %4 = memref.load %acc[] : memref<f32>
          %5 = arith.addf %4, %3 : f32
          memref.store %5, %acc[] : memref<f32>
        }
        %sum = memref.load %acc[] : memref<f32>
        %6 = arith.constant 0.000000e+00 : f32
        %7 = arith.maximumf %sum, %6 : f32
        memref.store %7, %out0[%i0, %i1] : memref<32x512xf32>
      }
    }
  }
  func.return
}
