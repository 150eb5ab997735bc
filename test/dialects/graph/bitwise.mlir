// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s

// bit operations of integers (ONNX BitwiseAnd / Or / Xor / Not, BitShift), broadcasting
// CHECK-LABEL: func.func @bits
// CHECK: graph.bit_and %{{.*}}, %{{.*}} : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
// CHECK: graph.bit_or %{{.*}}, %{{.*}} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
// CHECK: graph.bit_xor %{{.*}}, %{{.*}} : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
// CHECK: graph.bit_not %{{.*}} : (tensor<2x4xui8>) -> tensor<2x4xui8>
// CHECK: graph.shift_left %{{.*}}, %{{.*}} : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
// CHECK: graph.shift_right %{{.*}}, %{{.*}} : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
func.func @bits(%x: tensor<2x4xui8>, %y: tensor<4xui8>) -> tensor<2x4xui8> {
  %0 = graph.bit_and %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
  %1 = graph.bit_or %0, %x : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
  %2 = graph.bit_xor %1, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
  %3 = graph.bit_not %2 : (tensor<2x4xui8>) -> tensor<2x4xui8>
  %4 = graph.shift_left %3, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
  %5 = graph.shift_right %4, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
  func.return %5 : tensor<2x4xui8>
}

// signed types too
// CHECK-LABEL: func.func @signed
// CHECK: graph.shift_right %{{.*}}, %{{.*}} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
// CHECK: graph.bit_not %{{.*}} : (tensor<3xi16>) -> tensor<3xi16>
func.func @signed(%x: tensor<3xi32>, %h: tensor<3xi16>) -> (tensor<3xi32>, tensor<3xi16>) {
  %y = graph.shift_right %x, %x : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %z = graph.bit_not %h : (tensor<3xi16>) -> tensor<3xi16>
  func.return %y, %z : tensor<3xi32>, tensor<3xi16>
}

// bitcast: the same bits read as another type of the same width
// CHECK-LABEL: func.func @bitcast
// CHECK: graph.bitcast %{{.*}} {to = i32} : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: graph.bitcast %{{.*}} {to = ui8} : (tensor<4xi8>) -> tensor<4xui8>
func.func @bitcast(%x: tensor<4xf32>, %b: tensor<4xi8>) -> (tensor<4xi32>, tensor<4xui8>) {
  %y = graph.bitcast %x {to = i32} : (tensor<4xf32>) -> tensor<4xi32>
  %z = graph.bitcast %b {to = ui8} : (tensor<4xi8>) -> tensor<4xui8>
  func.return %y, %z : tensor<4xi32>, tensor<4xui8>
}
