// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=APART

// Attention over 2 heads of 16 rows, then the head merge (a transpose swapping the head
// and row dimensions), as te-to-loop emits them for the dlp target. The attention chain
// (scores, softmax, product) runs as one kernel in row bands (2 heads x 8 bands of 2
// rows); the merge is a copy right after it, the only reader of the chain's output, so
// the chain stores each tile (one head, its band's rows) into the merged buffer itself:
// one strided DMA of a segment a row (16 floats), at row * 32 + head * 16 (_dlp_fuse.Swap),
// and the merge kernel is gone (listed last in `dlpc.fused`).

// CHECK-LABEL: func.func @main
// CHECK: dlp.kernel "matmul_3" attributes {tasks = 16 : i64, {{.*}}dlpc.fused = "matmul_mul_0,softmax_2_max,softmax_2_exp,softmax_2_sum,softmax_2,matmul_3,transpose_4"}
// CHECK: %[[OUT:matmul_nram]] = memref.alloc()
// CHECK: dlp.matmul %[[OUT]]
// CHECK-NOT: dlp.memcpy_async NRAM2GDRAM %matmul
// CHECK: dlp.memcpy_strided_async NRAM2GDRAM %out0[%{{.*}}], %[[OUT]][%{{.*}}], %[[C16:.*]] x %{{.*}}, %[[C32:.*]], %[[C16]] : memref<1x16x2x16xf32>, memref<32xf32, #dlp.space<nram>>
// CHECK-NOT: dlp.kernel

// APART: dlp.kernel "matmul_3" attributes {tasks = 2 : i64
// APART: dlp.memcpy_async NRAM2GDRAM %matmul
// APART: dlp.kernel "transpose_4"

builtin.module {
  "memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<2.500000e-01> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
  func.func @main(%q: memref<1x2x16x16xf32> {dlpc.name = "q"}, %k: memref<1x2x16x16xf32> {dlpc.name = "k"}, %v: memref<1x2x16x16xf32> {dlpc.name = "v"}, %out0: memref<1x16x2x16xf32>) attributes {dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %__constant = memref.get_global @__constant_0 : memref<f32>
    %matmul_mul = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "matmul_mul_0" attributes {origin = "graph.fused(graph.matmul, graph.mul)"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %0 = arith.constant 0.000000e+00 : f32
              memref.store %0, %acc[] : memref<f32>
              loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
                %1 = memref.load %q[%i0, %i1, %i2, %r0] : memref<1x2x16x16xf32>
                %2 = memref.load %k[%i0, %i1, %i3, %r0] : memref<1x2x16x16xf32>
                %3 = arith.mulf %1, %2 : f32
                %4 = memref.load %acc[] : memref<f32>
                %5 = arith.addf %4, %3 : f32
                memref.store %5, %acc[] : memref<f32>
              }
              %sum = memref.load %acc[] : memref<f32>
              %6 = memref.load %__constant[] : memref<f32>
              %7 = arith.mulf %sum, %6 : f32
              memref.store %7, %matmul_mul[%i0, %i1, %i2, %i3] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    %softmax_2_max = memref.alloc() : memref<1x2x16xf32>
    loop.kernel "softmax_2_max" attributes {origin = "graph.softmax"} {
      loop.for %i0_1 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_1 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_1 = 0 to 16 step 1 {name = "i2"} {
            %acc_1 = memref.alloca() : memref<f32>
            %8 = arith.constant 0xff800000 : f32
            memref.store %8, %acc_1[] : memref<f32>
            loop.for %r0_1 = 0 to 16 step 1 {name = "r0", reduction} {
              %9 = memref.load %matmul_mul[%i0_1, %i1_1, %i2_1, %r0_1] : memref<1x2x16x16xf32>
              %10 = memref.load %acc_1[] : memref<f32>
              %11 = arith.maximumf %10, %9 : f32
              memref.store %11, %acc_1[] : memref<f32>
            }
            %max = memref.load %acc_1[] : memref<f32>
            memref.store %max, %softmax_2_max[%i0_1, %i1_1, %i2_1] : memref<1x2x16xf32>
          }
        }
      }
    }
    %softmax_2_exp = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "softmax_2_exp" attributes {origin = "graph.softmax"} {
      loop.for %i0_2 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_2 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_2 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 16 step 1 {name = "i3", vectorize} {
              %12 = memref.load %matmul_mul[%i0_2, %i1_2, %i2_2, %i3_1] : memref<1x2x16x16xf32>
              %13 = memref.load %softmax_2_max[%i0_2, %i1_2, %i2_2] : memref<1x2x16xf32>
              %14 = arith.subf %12, %13 : f32
              %15 = math.exp %14 : f32
              memref.store %15, %softmax_2_exp[%i0_2, %i1_2, %i2_2, %i3_1] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %matmul_mul : memref<1x2x16x16xf32>
    memref.dealloc %softmax_2_max : memref<1x2x16xf32>
    %softmax_2_sum = memref.alloc() : memref<1x2x16xf32>
    loop.kernel "softmax_2_sum" attributes {origin = "graph.softmax"} {
      loop.for %i0_3 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_3 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_3 = 0 to 16 step 1 {name = "i2"} {
            %acc_2 = memref.alloca() : memref<f32>
            %16 = arith.constant 0.000000e+00 : f32
            memref.store %16, %acc_2[] : memref<f32>
            loop.for %r0_2 = 0 to 16 step 1 {name = "r0", reduction} {
              %17 = memref.load %softmax_2_exp[%i0_3, %i1_3, %i2_3, %r0_2] : memref<1x2x16x16xf32>
              %18 = memref.load %acc_2[] : memref<f32>
              %19 = arith.addf %18, %17 : f32
              memref.store %19, %acc_2[] : memref<f32>
            }
            %sum_1 = memref.load %acc_2[] : memref<f32>
            memref.store %sum_1, %softmax_2_sum[%i0_3, %i1_3, %i2_3] : memref<1x2x16xf32>
          }
        }
      }
    }
    %softmax = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "softmax_2" attributes {origin = "graph.softmax"} {
      loop.for %i0_4 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_4 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_4 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_2 = 0 to 16 step 1 {name = "i3", vectorize} {
              %20 = memref.load %softmax_2_exp[%i0_4, %i1_4, %i2_4, %i3_2] : memref<1x2x16x16xf32>
              %21 = memref.load %softmax_2_sum[%i0_4, %i1_4, %i2_4] : memref<1x2x16xf32>
              %22 = arith.constant 1.000000e+00 : f32
              %23 = arith.divf %22, %21 : f32
              %24 = arith.mulf %20, %23 : f32
              memref.store %24, %softmax[%i0_4, %i1_4, %i2_4, %i3_2] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %softmax_2_exp : memref<1x2x16x16xf32>
    memref.dealloc %softmax_2_sum : memref<1x2x16xf32>
    %matmul = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "matmul_3" attributes {origin = "graph.matmul"} {
      loop.for %i0_5 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_5 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_5 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_3 = 0 to 16 step 1 {name = "i3"} {
              %acc_3 = memref.alloca() : memref<f32>
              %25 = arith.constant 0.000000e+00 : f32
              memref.store %25, %acc_3[] : memref<f32>
              loop.for %r0_3 = 0 to 16 step 1 {name = "r0", reduction} {
                %26 = memref.load %softmax[%i0_5, %i1_5, %i2_5, %r0_3] : memref<1x2x16x16xf32>
                %27 = memref.load %v[%i0_5, %i1_5, %r0_3, %i3_3] : memref<1x2x16x16xf32>
                %28 = arith.mulf %26, %27 : f32
                %29 = memref.load %acc_3[] : memref<f32>
                %30 = arith.addf %29, %28 : f32
                memref.store %30, %acc_3[] : memref<f32>
              }
              %sum_2 = memref.load %acc_3[] : memref<f32>
              memref.store %sum_2, %matmul[%i0_5, %i1_5, %i2_5, %i3_3] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %softmax : memref<1x2x16x16xf32>
    loop.kernel "transpose_4" attributes {origin = "graph.transpose"} {
      loop.for %i0_6 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_6 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_6 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_4 = 0 to 16 step 1 {name = "i3", vectorize} {
              %31 = memref.load %matmul[%i0_6, %i2_6, %i1_6, %i3_4] : memref<1x2x16x16xf32>
              memref.store %31, %out0[%i0_6, %i1_6, %i2_6, %i3_4] : memref<1x16x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %matmul : memref<1x2x16x16xf32>
    func.return
  }
}