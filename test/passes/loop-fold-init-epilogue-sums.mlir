// RUN: dlpc-opt %s -p loop-fold-init-epilogue | filecheck %s

// An integer sum requantized into i8 (decompose's kernel-local `sums` buffer, the
// accumulator tile a cache_write of it): the copy-in stores the init value, the copy-out
// stores the epilogue's requantized value straight into the output %Y, and the init
// nest, the epilogue nest and the `sums` buffer go.
// CHECK:      loop.kernel "requant" {
// CHECK-NEXT:   loop.for %[[I:.*]] = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK-NEXT:     %acc = memref.alloca() : memref<1x8xi32>
// CHECK:            %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT:       memref.store %[[Z]], %acc[
// CHECK:          loop.for %{{.*}} = 0 to 8 step 1 {name = "acc_out1", vectorize} {
// CHECK-NEXT:       %[[R:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK-NEXT:       %[[V:.*]] = memref.load %acc[
// CHECK-NEXT:       %[[F:.*]] = arith.sitofp %[[V]] : i32 to f32
// CHECK:            %[[Q:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK-NEXT:       memref.store %[[Q]], %Y[%[[R]], %{{.*}}] : memref<4x8xi8>
// CHECK-NOT:  sums
// CHECK-NOT:  _init
// CHECK-NOT:  _post
builtin.module {
  func.func @main(%A: memref<4x16xi8>, %W: memref<8x16xi8>, %Y: memref<4x8xi8>) {
    loop.kernel "requant" {
      %sums = memref.alloca() : memref<4x8xi32>
      loop.for %i0 = 0 to 4 step 1 {name = "i0_init", parallel} {
        loop.for %i1 = 0 to 8 step 1 {name = "i1_init"} {
          %z = arith.constant 0 : i32
          memref.store %z, %sums[%i0, %i1] : memref<4x8xi32>
        }
      }
      loop.for %i0_1 = 0 to 4 step 1 {name = "i0", parallel} {
        %acc = memref.alloca() : memref<1x8xi32>
        loop.for %acc_in0 = 0 to 1 step 1 {name = "acc_in0"} {
          loop.for %acc_in1 = 0 to 8 step 1 {name = "acc_in1", vectorize} {
            %0 = arith.addi %i0_1, %acc_in0 : index
            %1 = memref.load %sums[%0, %acc_in1] : memref<4x8xi32>
            memref.store %1, %acc[%acc_in0, %acc_in1] : memref<1x8xi32>
          }
        }
        loop.for %i1_1 = 0 to 8 step 1 {name = "i1"} {
          loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
            %a = memref.load %A[%i0_1, %r0] : memref<4x16xi8>
            %a32 = arith.extsi %a : i8 to i32
            %w = memref.load %W[%i1_1, %r0] : memref<8x16xi8>
            %w32 = arith.extsi %w : i8 to i32
            %p = arith.muli %a32, %w32 : i32
            %2 = arith.constant 0 : index
            %c = memref.load %acc[%2, %i1_1] : memref<1x8xi32>
            %s = arith.addi %c, %p : i32
            %3 = arith.constant 0 : index
            memref.store %s, %acc[%3, %i1_1] : memref<1x8xi32>
          }
        }
        loop.for %acc_out0 = 0 to 1 step 1 {name = "acc_out0"} {
          loop.for %acc_out1 = 0 to 8 step 1 {name = "acc_out1", vectorize} {
            %4 = arith.addi %i0_1, %acc_out0 : index
            %5 = memref.load %acc[%acc_out0, %acc_out1] : memref<1x8xi32>
            memref.store %5, %sums[%4, %acc_out1] : memref<4x8xi32>
          }
        }
      }
      loop.for %i0_2 = 0 to 4 step 1 {name = "i0_post", parallel} {
        loop.for %i1_2 = 0 to 8 step 1 {name = "i1_post"} {
          %v = memref.load %sums[%i0_2, %i1_2] : memref<4x8xi32>
          %f = arith.sitofp %v : i32 to f32
          %scale = arith.constant 1.250000e-01 : f32
          %y = arith.mulf %f, %scale : f32
          %r = math.roundeven %y : f32
          %q32 = arith.fptosi %r : f32 to i32
          %q = arith.trunci %q32 : i32 to i8
          memref.store %q, %Y[%i0_2, %i1_2] : memref<4x8xi8>
        }
      }
    }
    func.return
  }
}