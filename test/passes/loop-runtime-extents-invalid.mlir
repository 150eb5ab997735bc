// RUN: dlpc-opt %s --split-input-file --verify-diagnostics -p loop-runtime-extents | filecheck %s

// CHECK: loop-runtime-extents: loops are marked dlpc.extent but @main has no dlpc.dims (the symbols of its dlpc_dims input) or dlpc.num_inputs
func.func @main(%x: memref<4xf32>, %out0: memref<4xf32>) {
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", dlpc.extent = "seq"} {
      %v = memref.load %x[%i0] : memref<4xf32>
      memref.store %v, %out0[%i0] : memref<4xf32>
    }
  }
  func.return
}

// -----

// CHECK: loop-runtime-extents: loop 'i0' runs over '2*len' but 'len' is not one of @main's dims (seq)
func.func @main(%x: memref<4xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<4xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", dlpc.extent = "2*len"} {
      %v = memref.load %x[%i0] : memref<4xf32>
      memref.store %v, %out0[%i0] : memref<4xf32>
    }
  }
  func.return
}

// -----

// CHECK: loop-runtime-extents: loop 'i0': cannot read symbolic dim 'seq +'
func.func @main(%x: memref<4xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<4xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", dlpc.extent = "seq +"} {
      %v = memref.load %x[%i0] : memref<4xf32>
      memref.store %v, %out0[%i0] : memref<4xf32>
    }
  }
  func.return
}
