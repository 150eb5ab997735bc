// RUN: dlpc-opt %s --split-input-file --verify-diagnostics -p te-to-loop | filecheck %s

// a graph op left in a region (graph-to-te not run) is named with the region's op
func.func @main(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
// CHECK: te-to-loop: unexpected op graph.relu in a graph.if region
