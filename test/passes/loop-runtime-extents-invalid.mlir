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

// -----

// CHECK: loop-runtime-extents: kernel 'sum_0': loop 'r0o' has no dlpc.extent mark but reads the kernel's inputs at its index, in a kernel that reduces over a symbolic extent; lower with dlpc.guard_reductions on @main
func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "sum_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %r0o = 0 to 16 step 1 {name = "r0o"} {
      %v = memref.load %x[%r0o] : memref<16xf32>
      %a = memref.load %out0[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %out0[] : memref<f32>
    }
  }
  func.return
}
