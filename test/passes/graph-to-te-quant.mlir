// RUN: dlpc-opt %s -p graph-to-te | filecheck %s

// The integer products of 8-bit operands: the zero point subtracted and the product
// taken in i32 with no signed wrap (|(x - zx) * (w - zw)| <= 255 * 255), which the C
// printer prints in plain signed arithmetic; a padded conv input reads its zero point
// (a constant) outside the image, so (x - zx) is 0 there.
// CHECK-LABEL: te.reduce "conv_integer_0"
// CHECK:         %[[P:.*]] = scf.if %{{.*}} -> (i8) {
// CHECK-NEXT:      %[[X:.*]] = te.read %x[
// CHECK-NEXT:      scf.yield %[[X]] : i8
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 5 : i8
// CHECK-NEXT:      scf.yield %[[Z]] : i8
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[XW:.*]] = arith.extsi %[[P]] : i8 to i32
// CHECK:         %[[D:.*]] = arith.subi %[[XW]], %{{.*}} overflow<nsw> : i32
// CHECK:         %[[M:.*]] = arith.muli %[[D]], %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    te.yield %[[M]] : i32
// CHECK-LABEL: te.reduce "matmul_integer_1"
// CHECK:         %[[A:.*]] = arith.subi %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK:         %[[B:.*]] = arith.muli %[[A]], %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    te.yield %[[B]] : i32
// the quantize after them keeps ONNX's arithmetic (no flags)
// CHECK-LABEL: te.compute "quantize_2"
// CHECK-NOT:     overflow<nsw>
// CHECK:         te.yield
func.func @main(%x: tensor<1x2x4x4xi8>, %w: tensor<3x2x3x3xi8>, %a: tensor<2x8xi8>, %b: tensor<4x8xi8>, %f: tensor<2x4xf32>) -> (tensor<1x3x4x4xi32>, tensor<2x4xi32>, tensor<2x4xi8>) {
  %zx = graph.constant dense<5> : tensor<i8>
  %zw = graph.constant dense<0> : tensor<3xi8>
  %y = graph.conv_integer %x, %w, %zx, %zw {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x4xi8>, tensor<3x2x3x3xi8>, tensor<i8>, tensor<3xi8>) -> tensor<1x3x4x4xi32>
  %za = graph.constant dense<-3> : tensor<i8>
  %zb = graph.constant dense<0> : tensor<i8>
  %m = graph.matmul_integer %a, %b, %za, %zb {transpose_b = true} : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<i8>, tensor<i8>) -> tensor<2x4xi32>
  %s = graph.constant dense<0.5> : tensor<f32>
  %q = graph.quantize %f, %s, %za : (tensor<2x4xf32>, tensor<f32>, tensor<i8>) -> tensor<2x4xi8>
  func.return %y, %m, %q : tensor<1x3x4x4xi32>, tensor<2x4xi32>, tensor<2x4xi8>
}
