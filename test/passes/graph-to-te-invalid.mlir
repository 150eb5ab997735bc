// RUN: dlpc-opt %s -p graph-to-te --split-input-file --verify-diagnostics --allow-unregistered-dialect | filecheck %s
// RUN: not dlpc-opt %s -p graph-to-te --split-input-file 2>&1 | filecheck %s --check-prefix=TOOL

// CHECK: graph-to-te needs static shapes; graph.relu has type tensor<?x4xf32> (run graph-infer-shapes first)
// TOOL: dlpc-opt: error: graph-to-te needs static shapes; graph.relu has type tensor<?x4xf32>
func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = graph.relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  func.return %y : tensor<?x4xf32>
}

// -----

// CHECK: graph-to-te cannot lower graph.frobnicate: no lowering
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "graph.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
