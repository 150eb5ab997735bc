// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%c: tensor<2xi1>, %a: tensor<4xf32>) {
  %r = graph.if %c, %a : (tensor<2xi1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  func.return
}
// CHECK: graph.if condition must be tensor<i1>, got tensor<2xi1>

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<2xf32>):
    %y = graph.constant dense<0.0> : tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  func.return
}
// CHECK: graph.if else region arguments (tensor<2xf32>) do not match (tensor<4xf32>)

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.constant dense<0> : tensor<4xi64>
    graph.yield %y : tensor<4xi64>
  } else {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  func.return
}
// CHECK: graph.if then region yields (tensor<4xi64>) but the results are (tensor<4xf32>)

// -----

func.func @f(%c: tensor<i1>) {
  %r = graph.if %c : (tensor<i1>) -> (tensor<4xf32>) {
    %w = graph.param "w" : tensor<4xf32>
    graph.yield %w : tensor<4xf32>
  } else {
    %w = graph.constant dense<0.0> : tensor<4xf32>
    graph.yield %w : tensor<4xf32>
  }
  func.return
}
// CHECK: graph.if then region holds graph.param "w"; pass it in as an operand

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %t = graph.constant dense<true> : tensor<i1>
    graph.yield %t, %x : tensor<i1>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.loop body region arguments (tensor<4xf32>) do not match (tensor<i64>, tensor<4xf32>)

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    graph.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.loop body's first yielded value (the condition) must be tensor<i1>, got tensor<4xf32>

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %t = graph.constant dense<true> : tensor<i1>
    %y = graph.constant dense<0.0> : tensor<2xf32>
    graph.yield %t, %y : tensor<i1>, tensor<2xf32>
  }
  func.return
}
// CHECK: graph.loop body yields (tensor<2xf32>) after the condition but the carried values are (tensor<4xf32>)

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<2xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %t = graph.constant dense<true> : tensor<i1>
    graph.yield %t, %x : tensor<i1>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.loop results (tensor<2xf32>) differ from its carried operands (tensor<4xf32>)

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a {trip_count = -3 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %t = graph.constant dense<true> : tensor<i1>
    graph.yield %t, %x : tensor<i1>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.loop trip_count -3 must be -1 or at least 0

// -----

func.func @f(%c: tensor<i1>, %a: tensor<4xf32>) {
  %r = graph.loop %c, %a {trip_count = 2.0 : f64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %t = graph.constant dense<true> : tensor<i1>
    graph.yield %t, %x : tensor<i1>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.loop: 2.000000e+00 : f64 should be of base attribute integer
