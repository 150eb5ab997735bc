// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s

// A 5 x 5 convolution's bias over 10 x 10 output planes: a plane is 400 bytes, so its
// rows do not start vector-aligned and one add_scalar per plane cannot run. The
// accumulator tile (n planes of 100) is transposed into 100 rows of n, the tile's n bias
// values added to every row by one dlp.cycle_add, and the result transposed back: no
// scalar loops over the planes.

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "conv2d_relu_0"
// CHECK-NOT: dlpc.scalar
// CHECK: dlp.memcpy_async GDRAM2NRAM %[[B:b_nram]][%{{.*}}], %b[%t0], %n
// CHECK: dlp.conv2d %[[ACC:acc_nram]][%{{.*}}]
// CHECK: %[[T:rows_t_nram]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<nram>>
// CHECK: %[[R:.*]] = arith.divsi %[[COUNT:.*]], %[[PLANE:.*]] : index
// CHECK-NEXT: dlp.transpose %[[T]][%{{.*}}], %[[ACC]][%{{.*}}], %[[R]], %[[PLANE]] :
// CHECK-NEXT: dlp.cycle_add %[[T]][%{{.*}}], %[[T]][%{{.*}}], %[[B]][%{{.*}}], %[[COUNT]], %[[R]] :
// CHECK-NEXT: dlp.transpose %[[TMP:.*]][%{{.*}}], %[[T]][%{{.*}}], %[[PLANE]], %[[R]] :
// CHECK-NEXT: dlp.relu %out0_nram[%{{.*}}], %[[TMP]][%{{.*}}], %[[COUNT]] :
// CHECK-NOT: memref.load

builtin.module {
  func.func @main(%x: memref<1x6x14x14xf32> {dlpc.name = "x"}, %w: memref<16x6x5x5xf32> {dlpc.name = "w"}, %b: memref<16xf32> {dlpc.name = "b"}, %out0: memref<1x16x10x10xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "b"], dlpc.num_outputs = 1 : i64} {
    loop.kernel "conv2d_relu_0" attributes {origin = "graph.fused(graph.conv2d, graph.relu)"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 10 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 10 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %0 = arith.constant 0.000000e+00 : f32
              memref.store %0, %acc[] : memref<f32>
              loop.for %r0 = 0 to 6 step 1 {name = "r0", reduction} {
                loop.for %r1 = 0 to 5 step 1 {name = "r1", reduction} {
                  loop.for %r2 = 0 to 5 step 1 {name = "r2", reduction} {
                    %1 = arith.addi %i2, %r1 : index
                    %2 = arith.addi %i3, %r2 : index
                    %3 = memref.load %x[%i0, %r0, %1, %2] : memref<1x6x14x14xf32>
                    %4 = memref.load %w[%i1, %r0, %r1, %r2] : memref<16x6x5x5xf32>
                    %5 = arith.mulf %3, %4 : f32
                    %6 = memref.load %acc[] : memref<f32>
                    %7 = arith.addf %6, %5 : f32
                    memref.store %7, %acc[] : memref<f32>
                  }
                }
              }
              %sum = memref.load %acc[] : memref<f32>
              %8 = memref.load %b[%i1] : memref<16xf32>
              %9 = arith.addf %sum, %8 : f32
              %10 = arith.constant 0.000000e+00 : f32
              %11 = arith.maximumf %9, %10 : f32
              memref.store %11, %out0[%i0, %i1, %i2, %i3] : memref<1x16x10x10xf32>
            }
          }
        }
      }
    }
    func.return
  }
}
