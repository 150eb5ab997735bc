// RUN: dlpc-opt %s --split-input-file --verify-diagnostics -p 'graph-autodiff{wrt-inputs=true}' | filecheck %s

// a while loop (no trip_count): the stack of its iterations' values has no bound
func.func @main(%a: tensor<4xf32>) -> tensor<f32> {
  %t = graph.constant dense<true> : tensor<i1>
  %r = graph.loop %t, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %y = graph.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    %s = graph.reduce_sum %y : (tensor<4xf32>) -> tensor<f32>
    %z = graph.constant dense<0.0> : tensor<f32>
    %k = graph.compare %s, %z {predicate = "gt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %k, %y : tensor<i1>, tensor<4xf32>
  }
  %l = graph.reduce_sum %r : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
// CHECK: graph-autodiff: the reverse of a graph.loop needs a trip_count bound

// -----

// a while loop exported with M = 2**63 - 1: the stack would be too large
func.func @main(%a: tensor<4xf32>) -> tensor<f32> {
  %t = graph.constant dense<true> : tensor<i1>
  %r = graph.loop %t, %a {trip_count = 9223372036854775807 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %y = graph.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    %k = graph.constant dense<true> : tensor<i1>
    graph.yield %k, %y : tensor<i1>, tensor<4xf32>
  }
  %l = graph.reduce_sum %r : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
// CHECK: graph-autodiff: the stack of graph.loop's iterations (trip_count 9223372036854775807) is too large
