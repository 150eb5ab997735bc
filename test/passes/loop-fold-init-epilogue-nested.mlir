// RUN: dlpc-opt %s -p loop-fold-init-epilogue | filecheck %s

// The decomposed reduction inside a loop of its consumer (as `compute_at ... local` and
// `decompose K/L` leave a matmul in a fused Winograd kernel): the init nest in the
// block loop's body is folded into the tile's copy-in; the consumer's later read of the
// finished element (no epilogue nest) is unchanged.
// CHECK-LABEL: func.func @nested
// CHECK:         loop.for %[[B:.*]] = 0 to 2 step 1 {name = "blk", parallel} {
// CHECK-NEXT:      %[[M:.*]] = memref.alloca() : memref<8xf32>
// CHECK-NOT:       m_init
// (the zeros it would store peeled into the reduction's first iteration)
// CHECK-NOT:       acc_in0
// CHECK:           loop.for %[[R:.*]] = 0 to 1 step 1 {name = "r0_first"} {
// CHECK-NEXT:        loop.for %[[A:.*]] = 0 to 8 step 1 {name = "a_first", vectorize} {
// CHECK-NEXT:          %[[X0:.*]] = memref.load %x[%{{.*}}, %[[A]], %[[R]]] : memref<2x8x4xf32>
// CHECK-NEXT:          memref.store %[[X0]], %acc[%[[A]]] : memref<8xf32>
// CHECK:           loop.for %{{.*}} = 1 to 4 step 1 {name = "r0", reduction} {
// CHECK:           loop.for %{{.*}} = 0 to 8 step 1 {name = "acc_out0"} {
// CHECK:             memref.store %{{.*}}, %[[M]][
// CHECK:           loop.for %{{.*}} = 0 to 8 step 1 {name = "j"} {
// CHECK:             memref.load %[[M]][
func.func @nested(%x: memref<2x8x4xf32>, %y: memref<2x8xf32>) {
  loop.kernel "k" {
    loop.for %b = 0 to 2 step 1 {name = "blk", parallel} {
      %m = memref.alloca() : memref<8xf32>
      loop.for %i = 0 to 8 step 1 {name = "m_init"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %m[%i] : memref<8xf32>
      }
      loop.for %c = 0 to 1 step 1 {name = "m"} {
        %acc = memref.alloca() : memref<8xf32>
        loop.for %a = 0 to 8 step 1 {name = "acc_in0"} {
          %e = arith.addi %c, %a : index
          %v = memref.load %m[%e] : memref<8xf32>
          memref.store %v, %acc[%a] : memref<8xf32>
        }
        loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
          loop.for %a = 0 to 8 step 1 {name = "a", vectorize} {
            %xv = memref.load %x[%b, %a, %r] : memref<2x8x4xf32>
            %av = memref.load %acc[%a] : memref<8xf32>
            %s = arith.addf %av, %xv : f32
            memref.store %s, %acc[%a] : memref<8xf32>
          }
        }
        loop.for %a = 0 to 8 step 1 {name = "acc_out0"} {
          %e = arith.addi %c, %a : index
          %s = memref.load %acc[%a] : memref<8xf32>
          memref.store %s, %m[%e] : memref<8xf32>
        }
      }
      loop.for %j = 0 to 8 step 1 {name = "j"} {
        %v = memref.load %m[%j] : memref<8xf32>
        %two = arith.addf %v, %v : f32
        memref.store %two, %y[%b, %j] : memref<2x8xf32>
      }
    }
  }
  func.return
}

// A tile whose reduction nests another reduction loop (a direct conv's ci, then kw): the
// first iteration of the outer one updates each element several times, so the copy-in
// of zeros stays and nothing is peeled.
// CHECK-LABEL: func.func @nested_reduction
// CHECK:           loop.for %[[A:.*]] = 0 to 8 step 1 {name = "acc_in0"} {
// CHECK:             %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        memref.store %[[Z]], %acc[%[[A]]] : memref<8xf32>
// CHECK-NOT:       _first
// CHECK:           loop.for %{{.*}} = 0 to 4 step 1 {name = "r0", reduction} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 3 step 1 {name = "r1", reduction} {
func.func @nested_reduction(%x: memref<2x8x4x3xf32>, %y: memref<2x8xf32>) {
  loop.kernel "kr" {
    loop.for %b = 0 to 2 step 1 {name = "blk", parallel} {
      %m = memref.alloca() : memref<8xf32>
      loop.for %i = 0 to 8 step 1 {name = "m_init"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %m[%i] : memref<8xf32>
      }
      loop.for %c = 0 to 1 step 1 {name = "m"} {
        %acc = memref.alloca() : memref<8xf32>
        loop.for %a = 0 to 8 step 1 {name = "acc_in0"} {
          %e = arith.addi %c, %a : index
          %v = memref.load %m[%e] : memref<8xf32>
          memref.store %v, %acc[%a] : memref<8xf32>
        }
        loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
          loop.for %q = 0 to 3 step 1 {name = "r1", reduction} {
            loop.for %a = 0 to 8 step 1 {name = "a", vectorize} {
              %xv = memref.load %x[%b, %a, %r, %q] : memref<2x8x4x3xf32>
              %av = memref.load %acc[%a] : memref<8xf32>
              %s = arith.addf %av, %xv : f32
              memref.store %s, %acc[%a] : memref<8xf32>
            }
          }
        }
        loop.for %a = 0 to 8 step 1 {name = "acc_out0"} {
          %e = arith.addi %c, %a : index
          %s = memref.load %acc[%a] : memref<8xf32>
          memref.store %s, %m[%e] : memref<8xf32>
        }
      }
      loop.for %j = 0 to 8 step 1 {name = "j"} {
        %v = memref.load %m[%j] : memref<8xf32>
        memref.store %v, %y[%b, %j] : memref<2x8xf32>
      }
    }
  }
  func.return
}
