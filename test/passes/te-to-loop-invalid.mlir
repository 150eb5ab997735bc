// RUN: dlpc-opt %s --split-input-file --verify-diagnostics -p te-to-loop | filecheck %s

// CHECK: te-to-loop needs static shapes: the result of te.compute "exp_0" has type tensor<?x8xf32>; run graph-infer-shapes first
func.func @main(%x: tensor<4x8xf32>) -> tensor<?x8xf32> {
  %y = te.compute "exp_0" (%i0, %i1) : tensor<?x8xf32> {
    %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
    %e = math.exp %v : f32
    te.yield %e : f32
  }
  func.return %y : tensor<?x8xf32>
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
