// RUN: dlpc-opt %s --split-input-file -p loop-view-copies | filecheck %s

// A transpose copy whose reader can load through the index map is gone: the reader loads
// the source at the permuted index. A plain reshape copy stays a kernel (the OpenCL
// runtime aliases it; `loop-views`, the C target's, makes it a reinterpret_cast).
// CHECK-LABEL: func.func @main
// CHECK-NOT:     loop.kernel "transpose_1"
// CHECK:         loop.kernel "neg_2"
// CHECK:           %{{.*}} = memref.load %x[%[[J:.*]], %[[I:.*]]] : memref<8x4xf32>
// CHECK:           memref.store %{{.*}}, %out0[%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK:         loop.kernel "reshape_3"
// CHECK-NOT:     memref.reinterpret_cast
func.func @main(%x: memref<8x4xf32>, %out0: memref<4x8xf32>, %out1: memref<32xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %t = memref.alloc() : memref<4x8xf32>
  loop.kernel "transpose_1" attributes {origin = "graph.transpose"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i1, %i0] : memref<8x4xf32>
        memref.store %v, %t[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "neg_2" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %t[%i0, %i1] : memref<4x8xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %t : memref<4x8xf32>
  %r = memref.alloc() : memref<32xf32>
  loop.kernel "reshape_3" attributes {origin = "graph.reshape"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0"} {
      %c4 = arith.constant 4 : index
      %j0 = arith.divui %i0, %c4 : index
      %j1 = arith.remui %i0, %c4 : index
      %v = memref.load %x[%j0, %j1] : memref<8x4xf32>
      memref.store %v, %r[%i0] : memref<32xf32>
    }
  }
  loop.kernel "exp_4" attributes {origin = "graph.exp"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0"} {
      %v = memref.load %r[%i0] : memref<32xf32>
      %e = math.exp %v : f32
      memref.store %e, %out1[%i0] : memref<32xf32>
    }
  }
  memref.dealloc %r : memref<32xf32>
  func.return
}
