// RUN: dlpc-opt %s -p 'dlp-reshape-aliases,loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'dlp-reshape-aliases,loop-to-dlp{fuse=false}' | filecheck %s --check-prefix=ALONE

// Two heads of attention over 16 rows (q k^T / 4, softmax, @ v, heads merged), then
// layer_norm(x + linear(a, wo, bo)) (the loop IR of a small model, batch 1): the row chain
// (linear_add_1 .. layer_norm_18) computes its rows' attention itself (_dlp_attn.py): K
// and V whole in WRAM, the scale a whole buffer, q one strided copy a tile (its 2 rows of
// both heads), scores, softmax and the products into the merged rows it would have
// loaded; the attention chain and the merge copy are gone (named in dlpc.fused).

// CHECK: dlp.kernel "transpose_9"
// CHECK-NOT: dlp.kernel "matmul_13"
// CHECK: dlp.kernel "layer_norm_18" attributes {{.*}}dlpc.fused = "linear_add_1,layer_norm_18_mean,layer_norm_18_rstd,layer_norm_18,matmul_mul_0,softmax_12_max,softmax_12_exp,softmax_12_sum,softmax_12,matmul_13,transpose_14"
// CHECK: dlp.memcpy_async GDRAM2WRAM %transpose_wram[%{{.*}}], %transpose_1[
// CHECK: dlp.memcpy_async GDRAM2WRAM %transpose_wram_1[%{{.*}}], %transpose_2[
// CHECK: dlp.memcpy_async GDRAM2NRAM %__constant_nram[%{{.*}}], %__constant[
// CHECK: scf.for %t0
// CHECK-NOT: GDRAM2NRAM %reshape_nram
// CHECK: dlp.memcpy_strided_async GDRAM2NRAM %attn_q_nram[%{{.*}}], %transpose[
// CHECK-NEXT: dlp.wait_dma
// CHECK: dlp.matmul %attn_scores_nram[%{{.*}}], %attn_q_nram[%{{.*}}], %transpose_wram[%{{.*}}], {{.*}} {transpose_rhs}
// CHECK: dlp.mul_scalar %attn_scaled_nram
// CHECK: dlp.reduce_max %attn_max_nram
// CHECK: dlp.add_scalar %attn_shifted_nram
// CHECK: dlp.exp %attn_exp_nram
// CHECK: dlp.reduce_sum %attn_sum_nram
// CHECK: dlp.mul_scalar %attn_probs_nram
// CHECK: dlp.matmul %reshape_nram[%{{.*}}], %attn_probs_nram[%{{.*}}], %transpose_wram_1[
// CHECK: dlp.matmul %reshape_nram[%{{.*}}], %attn_probs_nram[%{{.*}}], %transpose_wram_1[
// CHECK: dlp.matmul %acc_nram[%{{.*}}], %reshape_nram[
// q, k and v are freed after the chain that now reads them
// CHECK: memref.dealloc %transpose_2
// CHECK: memref.dealloc %transpose_1
// CHECK: memref.dealloc %transpose :

// Without chains the attention is kernels of its own.
// ALONE: dlp.kernel "matmul_mul_0"
// ALONE: dlp.kernel "matmul_13"
// ALONE: dlp.kernel "linear_add_1"
// ALONE-NOT: attn_q_nram

builtin.module {
  "memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<2.500000e-01> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
  func.func @main(%x: memref<1x16x32xf32> {dlpc.name = "x"}, %wo: memref<32x32xf32> {dlpc.name = "wo"}, %bo: memref<32xf32> {dlpc.name = "bo"}, %g: memref<32xf32> {dlpc.name = "g"}, %beta: memref<32xf32> {dlpc.name = "beta"}, %folded.0: memref<96x32xf32> {dlpc.name = "folded.0"}, %out0: memref<1x16x32xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["wo", "bo", "g", "beta", "folded.0"], dlpc.num_outputs = 1 : i64} {
    %linear = memref.alloc() : memref<1x16x96xf32>
    loop.kernel "linear_0" attributes {origin = "graph.linear"} {
      loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2 = 0 to 96 step 1 {name = "i2"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0.000000e+00 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
              %1 = memref.load %x[%i0, %i1, %r0] : memref<1x16x32xf32>
              %2 = memref.load %folded.0[%i2, %r0] : memref<96x32xf32>
              %3 = arith.mulf %1, %2 : f32
              %4 = memref.load %acc[] : memref<f32>
              %5 = arith.addf %4, %3 : f32
              memref.store %5, %acc[] : memref<f32>
            }
            %sum = memref.load %acc[] : memref<f32>
            memref.store %sum, %linear[%i0, %i1, %i2] : memref<1x16x96xf32>
          }
        }
      }
    }
    %slice = memref.alloc() : memref<1x16x32xf32>
    loop.kernel "slice_1" attributes {origin = "graph.slice"} {
      loop.for %i0_1 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_1 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_1 = 0 to 32 step 1 {name = "i2", vectorize} {
            %6 = memref.load %linear[%i0_1, %i1_1, %i2_1] : memref<1x16x96xf32>
            memref.store %6, %slice[%i0_1, %i1_1, %i2_1] : memref<1x16x32xf32>
          }
        }
      }
    }
    %slice_1 = memref.alloc() : memref<1x16x32xf32>
    loop.kernel "slice_2" attributes {origin = "graph.slice"} {
      loop.for %i0_2 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_2 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_2 = 0 to 32 step 1 {name = "i2", vectorize} {
            %7 = arith.constant 32 : index
            %8 = arith.addi %i2_2, %7 : index
            %9 = memref.load %linear[%i0_2, %i1_2, %8] : memref<1x16x96xf32>
            memref.store %9, %slice_1[%i0_2, %i1_2, %i2_2] : memref<1x16x32xf32>
          }
        }
      }
    }
    %slice_2 = memref.alloc() : memref<1x16x32xf32>
    loop.kernel "slice_3" attributes {origin = "graph.slice"} {
      loop.for %i0_3 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_3 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_3 = 0 to 32 step 1 {name = "i2", vectorize} {
            %10 = arith.constant 64 : index
            %11 = arith.addi %i2_3, %10 : index
            %12 = memref.load %linear[%i0_3, %i1_3, %11] : memref<1x16x96xf32>
            memref.store %12, %slice_2[%i0_3, %i1_3, %i2_3] : memref<1x16x32xf32>
          }
        }
      }
    }
    memref.dealloc %linear : memref<1x16x96xf32>
    %reshape = memref.alloc() : memref<1x16x2x16xf32>
    loop.kernel "reshape_4" attributes {origin = "graph.reshape"} {
      loop.for %i0_4 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_4 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_4 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 16 step 1 {name = "i3", vectorize} {
              %13 = arith.constant 2 : index
              %14 = arith.muli %i1_4, %13 : index
              %15 = arith.addi %14, %i2_4 : index
              %16 = arith.constant 16 : index
              %17 = arith.muli %15, %16 : index
              %18 = arith.addi %17, %i3 : index
              %19 = arith.constant 32 : index
              %20 = arith.divsi %18, %19 : index
              %21 = arith.constant 32 : index
              %22 = arith.remsi %18, %21 : index
              %23 = arith.constant 0 : index
              %24 = memref.load %slice[%23, %20, %22] : memref<1x16x32xf32>
              memref.store %24, %reshape[%i0_4, %i1_4, %i2_4, %i3] : memref<1x16x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %slice : memref<1x16x32xf32>
    %transpose = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "transpose_5" attributes {origin = "graph.transpose"} {
      loop.for %i0_5 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_5 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_5 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 16 step 1 {name = "i3", vectorize} {
              %25 = memref.load %reshape[%i0_5, %i2_5, %i1_5, %i3_1] : memref<1x16x2x16xf32>
              memref.store %25, %transpose[%i0_5, %i1_5, %i2_5, %i3_1] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape : memref<1x16x2x16xf32>
    %reshape_1 = memref.alloc() : memref<1x16x2x16xf32>
    loop.kernel "reshape_6" attributes {origin = "graph.reshape"} {
      loop.for %i0_6 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_6 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_6 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_2 = 0 to 16 step 1 {name = "i3", vectorize} {
              %26 = arith.constant 2 : index
              %27 = arith.muli %i1_6, %26 : index
              %28 = arith.addi %27, %i2_6 : index
              %29 = arith.constant 16 : index
              %30 = arith.muli %28, %29 : index
              %31 = arith.addi %30, %i3_2 : index
              %32 = arith.constant 32 : index
              %33 = arith.divsi %31, %32 : index
              %34 = arith.constant 32 : index
              %35 = arith.remsi %31, %34 : index
              %36 = arith.constant 0 : index
              %37 = memref.load %slice_1[%36, %33, %35] : memref<1x16x32xf32>
              memref.store %37, %reshape_1[%i0_6, %i1_6, %i2_6, %i3_2] : memref<1x16x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %slice_1 : memref<1x16x32xf32>
    %transpose_1 = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "transpose_7" attributes {origin = "graph.transpose"} {
      loop.for %i0_7 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_7 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_7 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_3 = 0 to 16 step 1 {name = "i3", vectorize} {
              %38 = memref.load %reshape_1[%i0_7, %i2_7, %i1_7, %i3_3] : memref<1x16x2x16xf32>
              memref.store %38, %transpose_1[%i0_7, %i1_7, %i2_7, %i3_3] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape_1 : memref<1x16x2x16xf32>
    %reshape_2 = memref.alloc() : memref<1x16x2x16xf32>
    loop.kernel "reshape_8" attributes {origin = "graph.reshape"} {
      loop.for %i0_8 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_8 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_8 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_4 = 0 to 16 step 1 {name = "i3", vectorize} {
              %39 = arith.constant 2 : index
              %40 = arith.muli %i1_8, %39 : index
              %41 = arith.addi %40, %i2_8 : index
              %42 = arith.constant 16 : index
              %43 = arith.muli %41, %42 : index
              %44 = arith.addi %43, %i3_4 : index
              %45 = arith.constant 32 : index
              %46 = arith.divsi %44, %45 : index
              %47 = arith.constant 32 : index
              %48 = arith.remsi %44, %47 : index
              %49 = arith.constant 0 : index
              %50 = memref.load %slice_2[%49, %46, %48] : memref<1x16x32xf32>
              memref.store %50, %reshape_2[%i0_8, %i1_8, %i2_8, %i3_4] : memref<1x16x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %slice_2 : memref<1x16x32xf32>
    %transpose_2 = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "transpose_9" attributes {origin = "graph.transpose"} {
      loop.for %i0_9 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_9 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_9 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_5 = 0 to 16 step 1 {name = "i3", vectorize} {
              %51 = memref.load %reshape_2[%i0_9, %i2_9, %i1_9, %i3_5] : memref<1x16x2x16xf32>
              memref.store %51, %transpose_2[%i0_9, %i1_9, %i2_9, %i3_5] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape_2 : memref<1x16x2x16xf32>
    %__constant = memref.get_global @__constant_0 : memref<f32>
    %matmul_mul = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "matmul_mul_0" attributes {origin = "graph.fused(graph.matmul, graph.mul)"} {
      loop.for %i0_10 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_10 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_10 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_6 = 0 to 16 step 1 {name = "i3"} {
              %acc_1 = memref.alloca() : memref<f32>
              %52 = arith.constant 0.000000e+00 : f32
              memref.store %52, %acc_1[] : memref<f32>
              loop.for %r0_1 = 0 to 16 step 1 {name = "r0", reduction} {
                %53 = memref.load %transpose[%i0_10, %i1_10, %i2_10, %r0_1] : memref<1x2x16x16xf32>
                %54 = memref.load %transpose_1[%i0_10, %i1_10, %i3_6, %r0_1] : memref<1x2x16x16xf32>
                %55 = arith.mulf %53, %54 : f32
                %56 = memref.load %acc_1[] : memref<f32>
                %57 = arith.addf %56, %55 : f32
                memref.store %57, %acc_1[] : memref<f32>
              }
              %sum_1 = memref.load %acc_1[] : memref<f32>
              %58 = memref.load %__constant[] : memref<f32>
              %59 = arith.mulf %sum_1, %58 : f32
              memref.store %59, %matmul_mul[%i0_10, %i1_10, %i2_10, %i3_6] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %transpose : memref<1x2x16x16xf32>
    memref.dealloc %transpose_1 : memref<1x2x16x16xf32>
    %softmax_12_max = memref.alloc() : memref<1x2x16xf32>
    loop.kernel "softmax_12_max" attributes {origin = "graph.softmax"} {
      loop.for %i0_11 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_11 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_11 = 0 to 16 step 1 {name = "i2"} {
            %acc_2 = memref.alloca() : memref<f32>
            %60 = arith.constant 0xff800000 : f32
            memref.store %60, %acc_2[] : memref<f32>
            loop.for %r0_2 = 0 to 16 step 1 {name = "r0", reduction} {
              %61 = memref.load %matmul_mul[%i0_11, %i1_11, %i2_11, %r0_2] : memref<1x2x16x16xf32>
              %62 = memref.load %acc_2[] : memref<f32>
              %63 = arith.maximumf %62, %61 : f32
              memref.store %63, %acc_2[] : memref<f32>
            }
            %max = memref.load %acc_2[] : memref<f32>
            memref.store %max, %softmax_12_max[%i0_11, %i1_11, %i2_11] : memref<1x2x16xf32>
          }
        }
      }
    }
    %softmax_12_exp = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "softmax_12_exp" attributes {origin = "graph.softmax"} {
      loop.for %i0_12 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_12 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_12 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_7 = 0 to 16 step 1 {name = "i3", vectorize} {
              %64 = memref.load %matmul_mul[%i0_12, %i1_12, %i2_12, %i3_7] : memref<1x2x16x16xf32>
              %65 = memref.load %softmax_12_max[%i0_12, %i1_12, %i2_12] : memref<1x2x16xf32>
              %66 = arith.subf %64, %65 : f32
              %67 = math.exp %66 : f32
              memref.store %67, %softmax_12_exp[%i0_12, %i1_12, %i2_12, %i3_7] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %matmul_mul : memref<1x2x16x16xf32>
    memref.dealloc %softmax_12_max : memref<1x2x16xf32>
    %softmax_12_sum = memref.alloc() : memref<1x2x16xf32>
    loop.kernel "softmax_12_sum" attributes {origin = "graph.softmax"} {
      loop.for %i0_13 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_13 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_13 = 0 to 16 step 1 {name = "i2"} {
            %acc_3 = memref.alloca() : memref<f32>
            %68 = arith.constant 0.000000e+00 : f32
            memref.store %68, %acc_3[] : memref<f32>
            loop.for %r0_3 = 0 to 16 step 1 {name = "r0", reduction} {
              %69 = memref.load %softmax_12_exp[%i0_13, %i1_13, %i2_13, %r0_3] : memref<1x2x16x16xf32>
              %70 = memref.load %acc_3[] : memref<f32>
              %71 = arith.addf %70, %69 : f32
              memref.store %71, %acc_3[] : memref<f32>
            }
            %sum_2 = memref.load %acc_3[] : memref<f32>
            memref.store %sum_2, %softmax_12_sum[%i0_13, %i1_13, %i2_13] : memref<1x2x16xf32>
          }
        }
      }
    }
    %softmax = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "softmax_12" attributes {origin = "graph.softmax"} {
      loop.for %i0_14 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_14 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_14 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_8 = 0 to 16 step 1 {name = "i3", vectorize} {
              %72 = memref.load %softmax_12_exp[%i0_14, %i1_14, %i2_14, %i3_8] : memref<1x2x16x16xf32>
              %73 = memref.load %softmax_12_sum[%i0_14, %i1_14, %i2_14] : memref<1x2x16xf32>
              %74 = arith.constant 1.000000e+00 : f32
              %75 = arith.divf %74, %73 : f32
              %76 = arith.mulf %72, %75 : f32
              memref.store %76, %softmax[%i0_14, %i1_14, %i2_14, %i3_8] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %softmax_12_exp : memref<1x2x16x16xf32>
    memref.dealloc %softmax_12_sum : memref<1x2x16xf32>
    %matmul = memref.alloc() : memref<1x2x16x16xf32>
    loop.kernel "matmul_13" attributes {origin = "graph.matmul"} {
      loop.for %i0_15 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_15 = 0 to 2 step 1 {name = "i1", parallel} {
          loop.for %i2_15 = 0 to 16 step 1 {name = "i2"} {
            loop.for %i3_9 = 0 to 16 step 1 {name = "i3"} {
              %acc_4 = memref.alloca() : memref<f32>
              %77 = arith.constant 0.000000e+00 : f32
              memref.store %77, %acc_4[] : memref<f32>
              loop.for %r0_4 = 0 to 16 step 1 {name = "r0", reduction} {
                %78 = memref.load %softmax[%i0_15, %i1_15, %i2_15, %r0_4] : memref<1x2x16x16xf32>
                %79 = memref.load %transpose_2[%i0_15, %i1_15, %r0_4, %i3_9] : memref<1x2x16x16xf32>
                %80 = arith.mulf %78, %79 : f32
                %81 = memref.load %acc_4[] : memref<f32>
                %82 = arith.addf %81, %80 : f32
                memref.store %82, %acc_4[] : memref<f32>
              }
              %sum_3 = memref.load %acc_4[] : memref<f32>
              memref.store %sum_3, %matmul[%i0_15, %i1_15, %i2_15, %i3_9] : memref<1x2x16x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %transpose_2 : memref<1x2x16x16xf32>
    memref.dealloc %softmax : memref<1x2x16x16xf32>
    %transpose_3 = memref.alloc() : memref<1x16x2x16xf32>
    loop.kernel "transpose_14" attributes {origin = "graph.transpose"} {
      loop.for %i0_16 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_16 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_16 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_10 = 0 to 16 step 1 {name = "i3", vectorize} {
              %83 = memref.load %matmul[%i0_16, %i2_16, %i1_16, %i3_10] : memref<1x2x16x16xf32>
              memref.store %83, %transpose_3[%i0_16, %i1_16, %i2_16, %i3_10] : memref<1x16x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %matmul : memref<1x2x16x16xf32>
    %reshape_3 = memref.alloc() : memref<1x16x32xf32>
    loop.kernel "reshape_15" attributes {origin = "graph.reshape"} {
      loop.for %i0_17 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_17 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_17 = 0 to 32 step 1 {name = "i2", vectorize} {
            %84 = arith.constant 32 : index
            %85 = arith.muli %i1_17, %84 : index
            %86 = arith.addi %85, %i2_17 : index
            %87 = arith.constant 32 : index
            %88 = arith.divsi %86, %87 : index
            %89 = arith.constant 16 : index
            %90 = arith.divsi %86, %89 : index
            %91 = arith.constant 2 : index
            %92 = arith.remsi %90, %91 : index
            %93 = arith.constant 16 : index
            %94 = arith.remsi %86, %93 : index
            %95 = arith.constant 0 : index
            %96 = memref.load %transpose_3[%95, %88, %92, %94] : memref<1x16x2x16xf32>
            memref.store %96, %reshape_3[%i0_17, %i1_17, %i2_17] : memref<1x16x32xf32>
          }
        }
      }
    }
    memref.dealloc %transpose_3 : memref<1x16x2x16xf32>
    %linear_add = memref.alloc() : memref<1x16x32xf32>
    loop.kernel "linear_add_1" attributes {origin = "graph.fused(graph.linear, graph.add)"} {
      loop.for %i0_18 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_18 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_18 = 0 to 32 step 1 {name = "i2"} {
            %acc_5 = memref.alloca() : memref<f32>
            %97 = arith.constant 0.000000e+00 : f32
            memref.store %97, %acc_5[] : memref<f32>
            loop.for %r0_5 = 0 to 32 step 1 {name = "r0", reduction} {
              %98 = memref.load %reshape_3[%i0_18, %i1_18, %r0_5] : memref<1x16x32xf32>
              %99 = memref.load %wo[%i2_18, %r0_5] : memref<32x32xf32>
              %100 = arith.mulf %98, %99 : f32
              %101 = memref.load %acc_5[] : memref<f32>
              %102 = arith.addf %101, %100 : f32
              memref.store %102, %acc_5[] : memref<f32>
            }
            %sum_4 = memref.load %acc_5[] : memref<f32>
            %103 = memref.load %bo[%i2_18] : memref<32xf32>
            %104 = arith.addf %sum_4, %103 : f32
            %105 = memref.load %x[%i0_18, %i1_18, %i2_18] : memref<1x16x32xf32>
            %106 = arith.addf %105, %104 : f32
            memref.store %106, %linear_add[%i0_18, %i1_18, %i2_18] : memref<1x16x32xf32>
          }
        }
      }
    }
    memref.dealloc %reshape_3 : memref<1x16x32xf32>
    %layer_norm_18_mean = memref.alloc() : memref<1x16xf32>
    loop.kernel "layer_norm_18_mean" attributes {origin = "graph.layer_norm"} {
      loop.for %i0_19 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_19 = 0 to 16 step 1 {name = "i1", parallel} {
          %acc_6 = memref.alloca() : memref<f32>
          %107 = arith.constant 0.000000e+00 : f32
          memref.store %107, %acc_6[] : memref<f32>
          loop.for %r0_6 = 0 to 32 step 1 {name = "r0", reduction} {
            %108 = memref.load %linear_add[%i0_19, %i1_19, %r0_6] : memref<1x16x32xf32>
            %109 = memref.load %acc_6[] : memref<f32>
            %110 = arith.addf %109, %108 : f32
            memref.store %110, %acc_6[] : memref<f32>
          }
          %sum_5 = memref.load %acc_6[] : memref<f32>
          %111 = arith.constant 3.200000e+01 : f32
          %112 = arith.divf %sum_5, %111 : f32
          memref.store %112, %layer_norm_18_mean[%i0_19, %i1_19] : memref<1x16xf32>
        }
      }
    }
    %layer_norm_18_rstd = memref.alloc() : memref<1x16xf32>
    loop.kernel "layer_norm_18_rstd" attributes {origin = "graph.layer_norm"} {
      loop.for %i0_20 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_20 = 0 to 16 step 1 {name = "i1", parallel} {
          %acc_7 = memref.alloca() : memref<f32>
          %113 = arith.constant 0.000000e+00 : f32
          memref.store %113, %acc_7[] : memref<f32>
          loop.for %r0_7 = 0 to 32 step 1 {name = "r0", reduction} {
            %114 = memref.load %linear_add[%i0_20, %i1_20, %r0_7] : memref<1x16x32xf32>
            %115 = memref.load %layer_norm_18_mean[%i0_20, %i1_20] : memref<1x16xf32>
            %116 = arith.subf %114, %115 : f32
            %117 = arith.mulf %116, %116 : f32
            %118 = memref.load %acc_7[] : memref<f32>
            %119 = arith.addf %118, %117 : f32
            memref.store %119, %acc_7[] : memref<f32>
          }
          %sum_6 = memref.load %acc_7[] : memref<f32>
          %120 = arith.constant 3.200000e+01 : f32
          %121 = arith.divf %sum_6, %120 : f32
          %122 = arith.constant 1.000000e-05 : f32
          %123 = arith.addf %121, %122 : f32
          %124 = math.sqrt %123 : f32
          %125 = arith.constant 1.000000e+00 : f32
          %126 = arith.divf %125, %124 : f32
          memref.store %126, %layer_norm_18_rstd[%i0_20, %i1_20] : memref<1x16xf32>
        }
      }
    }
    loop.kernel "layer_norm_18" attributes {origin = "graph.layer_norm"} {
      loop.for %i0_21 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_21 = 0 to 16 step 1 {name = "i1", parallel} {
          loop.for %i2_19 = 0 to 32 step 1 {name = "i2", vectorize} {
            %127 = memref.load %linear_add[%i0_21, %i1_21, %i2_19] : memref<1x16x32xf32>
            %128 = memref.load %layer_norm_18_mean[%i0_21, %i1_21] : memref<1x16xf32>
            %129 = arith.subf %127, %128 : f32
            %130 = memref.load %layer_norm_18_rstd[%i0_21, %i1_21] : memref<1x16xf32>
            %131 = arith.mulf %129, %130 : f32
            %132 = memref.load %g[%i2_19] : memref<32xf32>
            %133 = arith.mulf %131, %132 : f32
            %134 = memref.load %beta[%i2_19] : memref<32xf32>
            %135 = arith.addf %133, %134 : f32
            memref.store %135, %out0[%i0_21, %i1_21, %i2_19] : memref<1x16x32xf32>
          }
        }
      }
    }
    memref.dealloc %linear_add : memref<1x16x32xf32>
    memref.dealloc %layer_norm_18_mean : memref<1x16xf32>
    memref.dealloc %layer_norm_18_rstd : memref<1x16xf32>
    func.return
  }
}
