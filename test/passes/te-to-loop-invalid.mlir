// RUN: dlpc-opt %s --split-input-file --verify-diagnostics -p te-to-loop | filecheck %s

// CHECK: te-to-loop needs static shapes: graph.param "w" has type tensor<?xf32>; run graph-infer-shapes first
func.func @main(%x: tensor<4xf32>) -> tensor<?xf32> {
  %w = graph.param "w" : tensor<?xf32>
  func.return %w : tensor<?xf32>
}

// -----

// CHECK: te-to-loop needs static shapes: argument #0 of @main has type tensor<?x8xf32>; run graph-infer-shapes first
func.func @main(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  func.return %x : tensor<?x8xf32>
}

// -----

// CHECK: te-to-loop: unexpected op graph.relu in @main; run graph-to-te first
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}


// -----

// CHECK: te-to-loop: argument #0 of @main has symbolic dim 'seq' but @main declares no maximum of 'seq' (dlpc.max_dims = {seq = N})
func.func @main(%x: tensor<?x8xf32, ["seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<?x8xf32, ["seq"]> attributes {dlpc.dims = ["seq"]} {
  func.return %x : tensor<?x8xf32, ["seq"]>
}

// -----

// dlpc.nsw_sum (te.NSW_SUM: the producer bounds the sums) only marks an integer add
// CHECK: te-to-loop: te.reduce "s" has dlpc.nsw_sum but is no integer add (combiner "add" of f32)
func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %s = te.reduce "s" (%i) reduce (%r) over [8] combiner "add" init 0.000000e+00 : tensor<4xf32> {
    %v = te.read %x[%i, %r] : tensor<4x8xf32>
    te.yield %v : f32
  } attributes {dlpc.nsw_sum}
  func.return %s : tensor<4xf32>
}
