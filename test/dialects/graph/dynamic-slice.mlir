// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s

// graph.dynamic_slice: sizes static, starts an operand read at run time
// CHECK-LABEL: func.func @row
// CHECK: graph.dynamic_slice %{{.*}}, %{{.*}} {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
func.func @row(%x: tensor<5x3xf32>, %s: tensor<1xi64>) -> tensor<1x3xf32> {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
  func.return %y : tensor<1x3xf32>
}

// two axes, a negative axis normalised by the verifier
// CHECK-LABEL: func.func @window
// CHECK: graph.dynamic_slice %{{.*}}, %{{.*}} {axes = array<i64: 0, -1>, sizes = array<i64: 2, 2>} : (tensor<4x6xf32>, tensor<2xi32>) -> tensor<2x2xf32>
func.func @window(%x: tensor<4x6xf32>, %s: tensor<2xi32>) -> tensor<2x2xf32> {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 0, -1>, sizes = array<i64: 2, 2>} : (tensor<4x6xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
