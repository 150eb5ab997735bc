// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s
func.func @f(%x: tensor<4xf32>) {
  %r = graph.bit_and %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.bit_and needs an integer operand, got f32

// -----

func.func @f(%x: tensor<4xi1>) {
  %r = graph.bit_not %x : (tensor<4xi1>) -> tensor<4xi1>
  func.return
}
// CHECK: graph.bit_not needs an integer operand, got i1

// -----

func.func @f(%x: tensor<4xui8>) {
  %r = graph.shift_left %x, %x : (tensor<4xui8>, tensor<4xui8>) -> tensor<5xui8>
  func.return
}
// CHECK: graph.shift_left: inferred result shape 4 but result type has shape 5

// -----

func.func @f(%x: tensor<4xui8>, %y: tensor<4xi8>) {
  %r = graph.bit_xor %x, %y : (tensor<4xui8>, tensor<4xi8>) -> tensor<4xui8>
  func.return
}
// CHECK: graph.bit_xor operands have element types ui8 and i8

// -----

func.func @f(%x: tensor<4xi32>) {
  %r = graph.shift_right %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi64>
  func.return
}
// CHECK: graph.shift_right: inferred element type i32 but result type has i64

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = graph.bitcast %x {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
  func.return
}
// CHECK: graph.bitcast needs element types of one width (not i1), got f32 and i64
