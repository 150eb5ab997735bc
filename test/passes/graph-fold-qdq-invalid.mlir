// RUN: dlpc-opt %s -p graph-fold-qdq --split-input-file --verify-diagnostics | filecheck %s

// The pass reads the quantization ops' operands as their verifiers define them; a zero
// point of another type than the integers it belongs to is malformed IR.
// CHECK: graph.dequantize needs an input of i8, ui8, i16, ui16 or i32 and a zero point of its type, got i8 and ui8
func.func @main(%xq: tensor<2x8xi8>) -> tensor<2x8xf32> {
  %s = graph.constant dense<0.5> : tensor<f32>
  %z = graph.constant dense<0> : tensor<ui8>
  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<ui8>) -> tensor<2x8xf32>
  func.return %x : tensor<2x8xf32>
}

// -----

// A per-column weight zero point of matmul_integer has one value per column of rhs.
// CHECK: graph.matmul_integer zero points scalar, 3 must be one value or one per row of lhs (2) / column of rhs (4)
func.func @main(%a: tensor<2x8xi8>, %b: tensor<8x4xi8>) -> tensor<2x4xi32> {
  %za = graph.constant dense<0> : tensor<i8>
  %zb = graph.constant dense<0> : tensor<3xi8>
  %c = graph.matmul_integer %a, %b, %za, %zb : (tensor<2x8xi8>, tensor<8x4xi8>, tensor<i8>, tensor<3xi8>) -> tensor<2x4xi32>
  func.return %c : tensor<2x4xi32>
}

// -----

// The scale of a per-axis quantize has one value per entry of that axis.
// CHECK: graph.quantize scale 3 is neither one value nor one per entry of axis 1 of 2x8
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xi8> {
  %s = graph.constant dense<0.5> : tensor<3xf32>
  %z = graph.constant dense<0> : tensor<3xi8>
  %q = graph.quantize %x, %s, %z : (tensor<2x8xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x8xi8>
  func.return %q : tensor<2x8xi8>
}
