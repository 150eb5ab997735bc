// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | dlpc-opt | filecheck %s

// CHECK-LABEL: func.func @branch
func.func @branch(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %{{.*}} = graph.if %{{.*}}, %{{.*}} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  // CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<4xf32>):
  // CHECK-NEXT: graph.relu
  // CHECK-NEXT: graph.yield %{{.*}} : tensor<4xf32>
  // CHECK-NEXT: } else {
  // CHECK: graph.neg
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.neg %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @no_operands
func.func @no_operands(%c: tensor<i1>) -> (tensor<2xf32>, tensor<i64>) {
  // CHECK: graph.if %{{.*}} : (tensor<i1>) -> (tensor<2xf32>, tensor<i64>)
  %r:2 = graph.if %c : (tensor<i1>) -> (tensor<2xf32>, tensor<i64>) {
    %a = graph.constant dense<1.0> : tensor<2xf32>
    %b = graph.constant dense<1> : tensor<i64>
    graph.yield %a, %b : tensor<2xf32>, tensor<i64>
  } else {
    %a = graph.constant dense<2.0> : tensor<2xf32>
    %b = graph.constant dense<2> : tensor<i64>
    graph.yield %a, %b : tensor<2xf32>, tensor<i64>
  }
  func.return %r#0, %r#1 : tensor<2xf32>, tensor<i64>
}

// CHECK-LABEL: func.func @repeat
func.func @repeat(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: graph.loop %{{.*}}, %{{.*}} {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  // CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<i64>, %{{.*}}: tensor<4xf32>):
  // CHECK: graph.yield %{{.*}}, %{{.*}} : tensor<i1>, tensor<4xf32>
  %r = graph.loop %c, %a {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %y = graph.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %t = graph.constant dense<true> : tensor<i1>
    graph.yield %t, %y : tensor<i1>, tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @while
func.func @while(%c: tensor<i1>, %a: tensor<f32>) -> tensor<f32> {
  // a while loop: no trip bound (the default -1 is left out)
  // CHECK: graph.loop %{{.*}}, %{{.*}} : (tensor<i1>, tensor<f32>) -> (tensor<f32>) {
  %r = graph.loop %c, %a : (tensor<i1>, tensor<f32>) -> (tensor<f32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<f32>):
    %h = graph.constant dense<0.5> : tensor<f32>
    %y = graph.mul %x, %h : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %one = graph.constant dense<1.0> : tensor<f32>
    %k = graph.compare %y, %one {predicate = "gt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %k, %y : tensor<i1>, tensor<f32>
  }
  func.return %r : tensor<f32>
}
