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
// An int8 activation times an int8 weight without a zero point: (a + 128) in [0, 255]
// times w, summed nsw (dlpc.nsw_sum), less (za + 128) * the weight's column sums (a kernel
// of their own for a weight that is no constant): GCC's u8 x s8 dot product (VNNI)
// CHECK-LABEL: te.reduce "matmul_integer_1_colsum" (%{{.*}}) reduce (%{{.*}}) over [8]
// CHECK:         te.read %b[
// CHECK:       } attributes {dlpc.nsw_sum,
// CHECK-LABEL: te.reduce "matmul_integer_1"
// CHECK:         %[[AW:.*]] = arith.extsi %{{.*}} : i8 to i32
// CHECK-NEXT:    %[[C:.*]] = arith.constant 128 : i32
// CHECK-NEXT:    %[[U:.*]] = arith.addi %[[AW]], %[[C]] overflow<nsw> : i32
// CHECK:         %[[B:.*]] = arith.muli %[[U]], %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    te.yield %[[B]] : i32
// CHECK:       } epilogue (%[[ACC:.*]]: i32,
// CHECK:         %[[ZU:.*]] = arith.addi %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    %[[CS:.*]] = te.read %matmul_integer_1_colsum[
// CHECK-NEXT:    %[[F:.*]] = arith.muli %[[ZU]], %[[CS]] overflow<nsw> : i32
// CHECK-NEXT:    %[[R:.*]] = arith.subi %[[ACC]], %[[F]] overflow<nsw> : i32
// CHECK-NEXT:    te.yield %[[R]] : i32
// CHECK-NEXT:  } attributes {dlpc.nsw_sum,
// a constant weight's column sums are a constant ([1+2, 3-4] = [3, -1]); a uint8
// activation is in range as it is (no 128)
// CHECK:       graph.constant dense<[3, -1]> : tensor<2xi32>
// CHECK-LABEL: te.reduce "matmul_integer_2"
// CHECK-NOT:     arith.constant 128
// CHECK:       } epilogue
// CHECK:       } attributes {dlpc.nsw_sum,
// with a weight zero point: the zero points subtracted inside the sum, which wraps
// CHECK-LABEL: te.reduce "matmul_integer_3"
// CHECK:         %[[A:.*]] = arith.subi %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK:         %[[B:.*]] = arith.muli %[[A]], %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    te.yield %[[B]] : i32
// CHECK-NEXT:  } attributes {origin
// the quantize after them keeps ONNX's arithmetic (no flags)
// CHECK-LABEL: te.compute "quantize_4"
// CHECK-NOT:     overflow<nsw>
// CHECK:         te.yield
// K = 65794: K * 255 * 128 >= 2**31 could overflow the i32 sum, so no u8 form (the
// zero point subtracted inside the wrapping sum)
// CHECK-LABEL: te.reduce "matmul_integer_5"
// CHECK-NOT:     dlpc.nsw_sum
// CHECK:         arith.subi %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK-NOT:     dlpc.nsw_sum
// CHECK:       } attributes {origin
func.func @main(%x: tensor<1x2x4x4xi8>, %w: tensor<3x2x3x3xi8>, %a: tensor<2x8xi8>, %b: tensor<4x8xi8>, %f: tensor<2x4xf32>, %u: tensor<2x2xui8>, %la: tensor<1x65794xi8>, %lb: tensor<2x65794xi8>) -> (tensor<1x3x4x4xi32>, tensor<2x4xi32>, tensor<2x4xi8>, tensor<2x2xi32>, tensor<2x4xi32>, tensor<1x2xi32>) {
  %zx = graph.constant dense<5> : tensor<i8>
  %zw = graph.constant dense<0> : tensor<3xi8>
  %y = graph.conv_integer %x, %w, %zx, %zw {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x4xi8>, tensor<3x2x3x3xi8>, tensor<i8>, tensor<3xi8>) -> tensor<1x3x4x4xi32>
  %za = graph.constant dense<-3> : tensor<i8>
  %zb = graph.constant dense<0> : tensor<i8>
  %m = graph.matmul_integer %a, %b, %za, %zb {transpose_b = true} : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<i8>, tensor<i8>) -> tensor<2x4xi32>
  %uw = graph.constant dense<[[1, 3], [2, -4]]> : tensor<2x2xi8>
  %zu = graph.constant dense<7> : tensor<ui8>
  %m2 = graph.matmul_integer %u, %uw, %zu, %zb : (tensor<2x2xui8>, tensor<2x2xi8>, tensor<ui8>, tensor<i8>) -> tensor<2x2xi32>
  %zb1 = graph.constant dense<1> : tensor<i8>
  %m3 = graph.matmul_integer %a, %b, %za, %zb1 {transpose_b = true} : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<i8>, tensor<i8>) -> tensor<2x4xi32>
  %s = graph.constant dense<0.5> : tensor<f32>
  %q = graph.quantize %f, %s, %za : (tensor<2x4xf32>, tensor<f32>, tensor<i8>) -> tensor<2x4xi8>
  %ml = graph.matmul_integer %la, %lb, %za, %zb {transpose_b = true} : (tensor<1x65794xi8>, tensor<2x65794xi8>, tensor<i8>, tensor<i8>) -> tensor<1x2xi32>
  func.return %y, %m, %q, %m2, %m3, %ml : tensor<1x3x4x4xi32>, tensor<2x4xi32>, tensor<2x4xi8>, tensor<2x2xi32>, tensor<2x4xi32>, tensor<1x2xi32>
}
