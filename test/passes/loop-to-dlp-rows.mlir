// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s

// softmax's last kernel: x * (1 / sum[row]). The reciprocal is a scalar op of a per-row
// value, so still a per-row value: one scalar divide per row, then one mul_scalar over
// the row's 16 elements (no scalar loops over the elements).

// CHECK-LABEL: func.func @softmax_div
// CHECK: dlp.kernel "softmax_12"
// CHECK-NOT: dlpc.scalar
// CHECK: scf.for
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<{{[0-9]+}}xf32, #dlp.space<nram>>
// CHECK-NEXT: %[[R:.*]] = arith.divf %{{.*}}, %[[S]] : f32
// CHECK: dlp.mul_scalar %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %[[R]], %{{.*}}

func.func @softmax_div(%softmax_12_exp: memref<1x4x16x16xf32>, %softmax_12_sum: memref<1x4x16xf32>, %softmax: memref<1x4x16x16xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "softmax_12" attributes {origin = "graph.softmax"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %i2 = 0 to 16 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 16 step 1 {name = "i3", vectorize} {
            %0 = memref.load %softmax_12_exp[%i0, %i1, %i2, %i3] : memref<1x4x16x16xf32>
            %1 = memref.load %softmax_12_sum[%i0, %i1, %i2] : memref<1x4x16xf32>
            %2 = arith.constant 1.000000e+00 : f32
            %3 = arith.divf %2, %1 : f32
            %4 = arith.mulf %0, %3 : f32
            memref.store %4, %softmax[%i0, %i1, %i2, %i3] : memref<1x4x16x16xf32>
          }
        }
      }
    }
  }
  func.return
}
