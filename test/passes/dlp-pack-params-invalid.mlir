// RUN: dlpc-opt %s -p dlp-pack-params --split-input-file --verify-diagnostics | filecheck %s
// RUN: dlpc-opt %s -p 'dlp-pack-params{max-elements=0}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=SIZE

// The params named by dlpc.params must be arguments of @main (after its inputs, before
// its outputs): here two params and an output after one input, but three arguments.
// CHECK: dlp-pack-params: @main lists 2 params and 1 outputs after 1 inputs but has 3 arguments
func.func @main(%x: memref<16xf32>, %s: memref<16xf32>, %out0: memref<16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["s", "b"], dlpc.num_outputs = 1 : i64} {
  func.return
}

// -----

// A member has at least one element.
// SIZE: dlp-pack-params: expected max-elements >= 1, got 0
func.func @main(%x: memref<16xf32>) {
  func.return
}
