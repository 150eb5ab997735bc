// RUN: dlpc-opt %s -p dlp-reshape-aliases | filecheck %s
// RUN: dlpc-opt %s -p 'dlp-reshape-aliases,loop-to-dlp' | filecheck %s --check-prefix=DLP

// relu -> reshape [2,4,4] to [2,16] -> relu: the reshape kernel (a GDRAM2GDRAM copy on the
// DLP) is gone; its fresh intermediate is an alias of relu's buffer, freed with it.

// CHECK-LABEL: func.func @main
// CHECK: %relu = memref.alloc() : memref<2x4x4xf32>
// CHECK: loop.kernel "relu_0"
// CHECK-NOT: loop.kernel "reshape_1"
// CHECK: %reshape = memref.reinterpret_cast %relu to offset: [0], sizes: [2, 16], strides: [16, 1] : memref<2x4x4xf32> to memref<2x16xf32>
// CHECK-NEXT: loop.kernel "relu_2"
// CHECK: memref.load %reshape[
// CHECK: memref.dealloc %relu
// CHECK-NOT: memref.dealloc

// DLP: dlp.kernel "relu_0"
// DLP-NOT: dlp.kernel "reshape_1"
// DLP: memref.reinterpret_cast %relu
// DLP: dlp.kernel "relu_2"
// DLP: dlp.memcpy_async GDRAM2NRAM %{{.*}}[%{{.*}}], %reshape[

builtin.module {
  func.func @main(%x: memref<2x4x4xf32> {dlpc.name = "x"}, %out0: memref<2x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
    %relu = memref.alloc() : memref<2x4x4xf32>
    loop.kernel "relu_0" attributes {origin = "graph.relu"} {
      loop.for %i0 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 4 step 1 {name = "i2", vectorize} {
            %0 = memref.load %x[%i0, %i1, %i2] : memref<2x4x4xf32>
            %1 = arith.constant 0.000000e+00 : f32
            %2 = arith.maximumf %0, %1 : f32
            memref.store %2, %relu[%i0, %i1, %i2] : memref<2x4x4xf32>
          }
        }
      }
    }
    %reshape = memref.alloc() : memref<2x16xf32>
    loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
      loop.for %i0_1 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 16 step 1 {name = "i1", vectorize} {
          %3 = arith.constant 16 : index
          %4 = arith.muli %i0_1, %3 : index
          %5 = arith.addi %4, %i1_1 : index
          %6 = arith.constant 16 : index
          %7 = arith.divsi %5, %6 : index
          %8 = arith.constant 4 : index
          %9 = arith.divsi %5, %8 : index
          %10 = arith.constant 4 : index
          %11 = arith.remsi %9, %10 : index
          %12 = arith.constant 4 : index
          %13 = arith.remsi %5, %12 : index
          %14 = memref.load %relu[%7, %11, %13] : memref<2x4x4xf32>
          memref.store %14, %reshape[%i0_1, %i1_1] : memref<2x16xf32>
        }
      }
    }
    memref.dealloc %relu : memref<2x4x4xf32>
    loop.kernel "relu_2" attributes {origin = "graph.relu"} {
      loop.for %i0_2 = 0 to 2 step 1 {name = "i0", parallel} {
        loop.for %i1_2 = 0 to 16 step 1 {name = "i1", vectorize} {
          %15 = memref.load %reshape[%i0_2, %i1_2] : memref<2x16xf32>
          %16 = arith.constant 0.000000e+00 : f32
          %17 = arith.maximumf %15, %16 : f32
          memref.store %17, %out0[%i0_2, %i1_2] : memref<2x16xf32>
        }
      }
    }
    memref.dealloc %reshape : memref<2x16xf32>
    func.return
  }
}
