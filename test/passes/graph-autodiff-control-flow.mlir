// RUN: dlpc-opt %s --split-input-file -p 'graph-autodiff{wrt-inputs=true}' | filecheck %s

// The adjoint of graph.if is an if of the branches' adjoints (each recomputes its
// forward from the operands); the reverse of graph.loop replays its iterations backwards
// from the stack the rebuilt forward loop saved (passes/train/_control_grad.py).

func.func @main(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<f32> {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.neg %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  %l = graph.reduce_sum %r : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// CHECK-LABEL: func.func @main
// CHECK: graph.if %[[C:[a-z0-9_]+]], %[[A:[a-z0-9_]+]] : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>)
// CHECK: %[[D:.*]] = graph.broadcast
// CHECK: %{{.*}} = graph.if %[[C]], %[[A]], %[[D]] : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>) {
// CHECK: graph.exp
// CHECK: graph.mul
// CHECK: graph.yield
// CHECK: } else {
// CHECK: graph.neg
// CHECK: graph.yield
// CHECK: func.return

// -----

func.func @main(%a: tensor<4xf32>) -> tensor<f32> {
  %t = graph.constant dense<true> : tensor<i1>
  %r = graph.loop %t, %a {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %y = graph.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    %k = graph.constant dense<true> : tensor<i1>
    graph.yield %k, %y : tensor<i1>, tensor<4xf32>
  }
  %l = graph.reduce_sum %r : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// CHECK-LABEL: func.func @main
// the forward loop also carries its count and a stack of the values each iteration started from
// CHECK: %{{.*}}, %[[N:[0-9]+]], %[[S:[0-9]+]] = graph.loop %{{.*}} {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf32>, tensor<i64>, tensor<3x4xf32>)
// CHECK: graph.compare %{{.*}} {predicate = "eq"}
// CHECK: graph.where
// CHECK: graph.add
// CHECK: graph.yield
// the reverse runs when the count is positive, reading row n - 1 - j
// CHECK: %[[GO:.*]] = graph.compare %[[N]], %{{.*}} {predicate = "gt"}
// CHECK: graph.loop %[[GO]], %{{.*}}, %[[N]], %[[S]] {trip_count = 3 : i64}
// CHECK: graph.sub
// CHECK: graph.sub
// CHECK: graph.gather
// CHECK: graph.compare %{{.*}} {predicate = "lt"}
// CHECK: graph.tanh
// CHECK: graph.yield
// CHECK: func.return
