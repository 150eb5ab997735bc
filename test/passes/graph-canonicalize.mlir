// RUN: dlpc-opt %s -p graph-canonicalize | filecheck %s

// torch.onnx's GELU at opset < 20 (dynamo: x * (0.5 * (1 + erf(x / sqrt 2)))) -> gelu
// CHECK-LABEL: func.func @gelu_div(%x: tensor<2x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.gelu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @gelu_div(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %d = graph.div %x, %c : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h = graph.mul %half, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %x, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// the TorchScript order ((x * (erf(x * 0.7071) + 1)) * 0.5), the 1 first in the add
// CHECK-LABEL: func.func @gelu_mul(%x: tensor<2x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.gelu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @gelu_mul(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c = graph.constant dense<0.707106769> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %d = graph.mul %c, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %one, %e : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = graph.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// not GELU: another factor than 0.5; the erf read elsewhere too
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT:     graph.gelu
// CHECK:         func.return
func.func @not_gelu(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %c = graph.constant dense<0.707106769> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %q = graph.constant dense<0.25> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %d = graph.mul %x, %c : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = graph.erf %d : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h = graph.mul %q, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = graph.mul %x, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e2 = graph.erf %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a2 = graph.add %e2, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h2 = graph.mul %half, %a2 : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = graph.mul %x, %h2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// nn.Linear on a rank-3 input as torch.onnx writes it: MatMul by the [K, N] weight, Add
// of the bias (either side) -> linear by the transposed weight (fold-params folds it)
// CHECK-LABEL: func.func @linear_bias(%x: tensor<1x16x64xf32>)
// CHECK-NEXT:    %w = graph.param "w" : tensor<64x192xf32>
// CHECK-NEXT:    %b = graph.param "b" : tensor<192xf32>
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %w {perm = array<i64: 1, 0>} : (tensor<64x192xf32>) -> tensor<192x64xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %x, %[[T]], %b : (tensor<1x16x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<1x16x192xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @linear_bias(%x: tensor<1x16x64xf32>) -> tensor<1x16x192xf32> {
  %w = graph.param "w" : tensor<64x192xf32>
  %b = graph.param "b" : tensor<192xf32>
  %m = graph.matmul %x, %w : (tensor<1x16x64xf32>, tensor<64x192xf32>) -> tensor<1x16x192xf32>
  %y = graph.add %b, %m : (tensor<192xf32>, tensor<1x16x192xf32>) -> tensor<1x16x192xf32>
  func.return %y : tensor<1x16x192xf32>
}

// transpose_b reads the weight as [N, K] already; no bias add
// CHECK-LABEL: func.func @linear_nk(%x: tensor<4x8xf32>)
// CHECK-NEXT:    %w = graph.param "w" : tensor<3x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %x, %w : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @linear_nk(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %w = graph.param "w" : tensor<3x8xf32>
  %m = graph.matmul %x, %w {transpose_b = true} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
  func.return %m : tensor<4x3xf32>
}

// a bias add of another shape stays an add after the linear
// CHECK-LABEL: func.func @linear_wide_bias
// CHECK:         %[[L:.*]] = graph.linear %x, %{{.*}} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.add %[[L]], %b
func.func @linear_wide_bias(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %w = graph.param "w" : tensor<8x3xf32>
  %b = graph.param "b" : tensor<4x3xf32>
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %y = graph.add %m, %b : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}

// not a linear: the right operand is not a weight; a transposed left operand
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT:     graph.linear
// CHECK:         func.return
func.func @not_linear(%x: tensor<4x8xf32>, %v: tensor<4x3xf32>) -> (tensor<8x3xf32>, tensor<3x3xf32>) {
  %m = graph.matmul %x, %v {transpose_a = true} : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %w = graph.param "w" : tensor<4x3xf32>
  %t = graph.matmul %v, %w {transpose_a = true} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  func.return %m, %t : tensor<8x3xf32>, tensor<3x3xf32>
}

// softmax axes are counted from the end (the last is the default, -1)
// CHECK-LABEL: func.func @axes
// CHECK-NEXT:    %[[A:.*]] = graph.softmax %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.log_softmax %x {axis = -3 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.softmax %x {axis = -2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]]
func.func @axes(%x: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %a = graph.softmax %x {axis = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %b = graph.log_softmax %x {axis = 0 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %c = graph.softmax %x {axis = -2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %a, %b, %c : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
