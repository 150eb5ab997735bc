// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s
func.func @f(%x: tensor<4xi32>) {
  %y = graph.sin %x : (tensor<4xi32>) -> tensor<4xi32>
  func.return
}
// CHECK: graph.sin needs a floating-point operand, got i32

// -----

func.func @f(%x: tensor<4xi1>) {
  %y = graph.floor %x : (tensor<4xi1>) -> tensor<4xi1>
  func.return
}
// CHECK: graph.floor needs a floating-point operand, got i1

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = graph.cos %x : (tensor<4xf32>) -> tensor<5xf32>
  func.return
}
// CHECK: graph.cos: inferred result shape 4 but result type has shape 5

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = graph.round %x : (tensor<4xf32>) -> tensor<4xf64>
  func.return
}
// CHECK: graph.round: inferred element type f32 but result type has f64

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = graph.atanh %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.atanh expects 1 operands, got 2
