// RUN: dlpc-opt %s --split-input-file -p loop-short-extents --verify-diagnostics 2>&1 | filecheck %s --check-prefix=CHECK

// A binding names a dim the function does not have.
// CHECK: loop-short-extents: dlpc.short_extents names 'len', which is not one of @main's dims (seq)
func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}, dlpc.short_extents = [{len = 2 : i64}], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  func.return
}

// -----

// A value above the dim's maximum.
// CHECK: loop-short-extents: dlpc.short_extents gives 'seq' = 20, outside 1..16 (its maximum)
func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}, dlpc.short_extents = [{seq = 20 : i64}], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  func.return
}

// -----

// Not an array of dicts.
// CHECK: loop-short-extents: dlpc.short_extents must be an array of dicts from dims to integers
func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}, dlpc.short_extents = {seq = 2 : i64}, dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  func.return
}
