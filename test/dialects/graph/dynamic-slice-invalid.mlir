// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%x: tensor<5x3xf32>, %s: tensor<1xf32>) {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5x3xf32>, tensor<1xf32>) -> tensor<1x3xf32>
  func.return
}
// CHECK: graph.dynamic_slice starts must be integers

// -----

func.func @f(%x: tensor<5x3xf32>, %s: tensor<2xi64>) {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<1x3xf32>
  func.return
}
// CHECK: graph.dynamic_slice needs distinct axes, one size and one start each: axes [0], sizes [1], starts 2

// -----

func.func @f(%x: tensor<5x3xf32>, %s: tensor<1xi64>) {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 1>, sizes = array<i64: 4>} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<5x4xf32>
  func.return
}
// CHECK: graph.dynamic_slice size 4 does not fit axis 1 of 5x3

// -----

func.func @f(%x: tensor<5x3xf32>, %s: tensor<1xi64>) {
  %y = graph.dynamic_slice %x, %s {axes = array<i64: 0>, sizes = array<i64: 2>} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
  func.return
}
// CHECK: graph.dynamic_slice: inferred result shape 2x3 but result type has shape 1x3
