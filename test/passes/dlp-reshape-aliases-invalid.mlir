// RUN: dlpc-opt %s -p dlp-reshape-aliases --split-input-file --verify-diagnostics | filecheck %s

// A reshape kernel copies every element: one that does not is malformed IR.
// CHECK: reshape kernel 'reshape_0' reads 32 elements but writes 16
func.func @main(%x: memref<4x8xf32>, %out0: memref<16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %r = memref.alloc() : memref<16xf32>
  loop.kernel "reshape_0" attributes {origin = "graph.reshape"} {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      %c8 = arith.constant 8 : index
      %j0 = arith.divui %i0, %c8 : index
      %j1 = arith.remui %i0, %c8 : index
      %v = memref.load %x[%j0, %j1] : memref<4x8xf32>
      memref.store %v, %r[%i0] : memref<16xf32>
    }
  }
  loop.kernel "copy_1" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      %v = memref.load %r[%i0] : memref<16xf32>
      memref.store %v, %out0[%i0] : memref<16xf32>
    }
  }
  memref.dealloc %r : memref<16xf32>
  func.return
}
