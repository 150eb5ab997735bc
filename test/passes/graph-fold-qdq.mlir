// RUN: dlpc-opt %s -p graph-fold-qdq | filecheck %s

// a dequantized activation times a per-column dequantized weight: the i8 product in i32,
// rescaled once by sx * sw; the dequantizes are gone; the static [K, N] weight is read
// transposed ([N, K]: contiguous along the reduction; the transpose folds)
// CHECK-LABEL: func.func @matmul
// CHECK:         %[[T:.*]] = graph.transpose %wq {perm = array<i64: 1, 0>} : (tensor<8x4xi8>) -> tensor<4x8xi8>
// CHECK-NEXT:    %[[A:.*]] = graph.matmul_integer %xq, %[[T]], %zx, %zw {transpose_b = true} : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<i8>, tensor<4xi8>) -> tensor<2x4xi32>
// CHECK-NEXT:    %[[F:.*]] = graph.cast %[[A]] {to = f32} : (tensor<2x4xi32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.mul %sx, %sw : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.mul %[[F]], %[[S]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[Y]]
// CHECK-NOT:     graph.dequantize
func.func @matmul(%xq: tensor<2x8xi8>) -> tensor<2x4xf32> {
  %sx = graph.constant dense<0.5> : tensor<f32>
  %zx = graph.constant dense<3> : tensor<i8>
  %wq = graph.constant dense<2> : tensor<8x4xi8>
  %sw = graph.constant dense<[0.25, 0.5, 1.0, 2.0]> : tensor<4xf32>
  %zw = graph.constant dense<0> : tensor<4xi8>
  %x = graph.dequantize %xq, %sx, %zx : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  %w = graph.dequantize %wq, %sw, %zw : (tensor<8x4xi8>, tensor<4xf32>, tensor<4xi8>) -> tensor<8x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// a linear's [O, K] weight is read as it is (transpose_b); its float bias is added after
// the rescale, and a uint8 activation keeps its type
// CHECK-LABEL: func.func @linear
// CHECK:         %[[A:.*]] = graph.matmul_integer %xq, %wq, %zx, %zw {transpose_b = true} : (tensor<2x8xui8>, tensor<4x8xi8>, tensor<ui8>, tensor<i8>) -> tensor<2x4xi32>
// CHECK-NEXT:    %[[F:.*]] = graph.cast %[[A]] {to = f32}
// CHECK-NEXT:    %[[S:.*]] = graph.mul %sx, %sw : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[F]], %[[S]]
// CHECK-NEXT:    %[[Y:.*]] = graph.add %[[M]], %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @linear(%xq: tensor<2x8xui8>) -> tensor<2x4xf32> {
  %sx = graph.constant dense<0.5> : tensor<f32>
  %zx = graph.constant dense<128> : tensor<ui8>
  %wq = graph.constant dense<2> : tensor<4x8xi8>
  %sw = graph.constant dense<0.125> : tensor<f32>
  %zw = graph.constant dense<0> : tensor<i8>
  %b = graph.param "b" : tensor<4xf32>
  %x = graph.dequantize %xq, %sx, %zx : (tensor<2x8xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x8xf32>
  %w = graph.dequantize %wq, %sw, %zw : (tensor<4x8xi8>, tensor<f32>, tensor<i8>) -> tensor<4x8xf32>
  %y = graph.linear %x, %w, %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// a conv2d with a per-output-channel weight scale and a bias: the scale and the bias are
// reshaped to [O, 1, 1]; the window attributes carry over
// CHECK-LABEL: func.func @conv
// CHECK:         %[[A:.*]] = graph.conv_integer %xq, %wq, %zx, %zw {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xi8>, tensor<2x3x3x3xi8>, tensor<i8>, tensor<2xi8>) -> tensor<1x2x4x4xi32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %sw {shape = array<i64: 2, 1, 1>}
// CHECK-NEXT:    %[[F:.*]] = graph.cast %[[A]] {to = f32}
// CHECK-NEXT:    %[[S:.*]] = graph.mul %sx, %[[R]] : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[F]], %[[S]]
// CHECK-NEXT:    %[[B:.*]] = graph.reshape %b {shape = array<i64: 2, 1, 1>}
// CHECK-NEXT:    %[[Y:.*]] = graph.add %[[M]], %[[B]] : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
func.func @conv(%xq: tensor<1x3x8x8xi8>) -> tensor<1x2x4x4xf32> {
  %sx = graph.constant dense<0.5> : tensor<f32>
  %zx = graph.constant dense<-1> : tensor<i8>
  %wq = graph.constant dense<3> : tensor<2x3x3x3xi8>
  %sw = graph.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %zw = graph.constant dense<0> : tensor<2xi8>
  %b = graph.param "b" : tensor<2xf32>
  %x = graph.dequantize %xq, %sx, %zx : (tensor<1x3x8x8xi8>, tensor<f32>, tensor<i8>) -> tensor<1x3x8x8xf32>
  %w = graph.dequantize %wq, %sw, %zw {axis = 0 : i64} : (tensor<2x3x3x3xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x3x3x3xf32>
  %y = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<2x3x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// left alone: a per-row activation scale, a weight scale along K (not the output
// channel), and a float weight
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     matmul_integer
// CHECK-COUNT-3: graph.matmul
// CHECK:         func.return
func.func @kept(%xq: tensor<2x8xi8>, %wf: tensor<8x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %sx = graph.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %zx = graph.constant dense<0> : tensor<2xi8>
  %s = graph.constant dense<0.5> : tensor<f32>
  %z = graph.constant dense<0> : tensor<i8>
  %wq = graph.constant dense<2> : tensor<8x4xi8>
  %sk = graph.constant dense<0.5> : tensor<8xf32>
  %zk = graph.constant dense<0> : tensor<8xi8>
  %xa = graph.dequantize %xq, %sx, %zx {axis = 0 : i64} : (tensor<2x8xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x8xf32>
  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>
  %wk = graph.dequantize %wq, %sk, %zk {axis = 0 : i64} : (tensor<8x4xi8>, tensor<8xf32>, tensor<8xi8>) -> tensor<8x4xf32>
  %a = graph.matmul %xa, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %b = graph.matmul %x, %wk : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %c = graph.matmul %x, %wf : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %a, %b, %c : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// a weight computed at run time is not transposed (that would be a kernel per call)
// CHECK-LABEL: func.func @runtime_weight
// CHECK-NOT:     graph.transpose
// CHECK:         graph.matmul_integer %xq, %wq, %z, %z : (tensor<2x8xi8>, tensor<8x4xi8>, tensor<i8>, tensor<i8>) -> tensor<2x4xi32>
func.func @runtime_weight(%xq: tensor<2x8xi8>, %wq: tensor<8x4xi8>) -> tensor<2x4xf32> {
  %s = graph.constant dense<0.5> : tensor<f32>
  %z = graph.constant dense<0> : tensor<i8>
  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// QDQ around a max pool and a reshape (what quantize_static writes around them): the
// pool and the reshape move onto the int8 values (dequantize with a positive scale is
// increasing), and a quantize with the dequantize's own scale and zero point cancels it
// CHECK-LABEL: func.func @pool_reshape
// CHECK:         %[[P:.*]] = graph.max_pool2d %q {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xi8>) -> tensor<1x2x2x2xi8>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[P]] {shape = array<i64: 1, 8>} : (tensor<1x2x2x2xi8>) -> tensor<1x8xi8>
// CHECK-NEXT:    func.return %[[R]] : tensor<1x8xi8>
func.func @pool_reshape(%q: tensor<1x2x4x4xi8>) -> tensor<1x8xi8> {
  %s = graph.constant dense<0.5> : tensor<f32>
  %z = graph.constant dense<-3> : tensor<i8>
  %s2 = graph.constant dense<0.5> : tensor<f32>
  %x = graph.dequantize %q, %s, %z : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %r = graph.reshape %p {shape = array<i64: 1, 8>} : (tensor<1x2x2x2xf32>) -> tensor<1x8xf32>
  %y = graph.quantize %r, %s2, %z : (tensor<1x8xf32>, tensor<f32>, tensor<i8>) -> tensor<1x8xi8>
  func.return %y : tensor<1x8xi8>
}

// kept: a negative scale (the max of the dequantized values is the dequantized min) and
// a requantization to another scale
// CHECK-LABEL: func.func @pool_kept
// CHECK:         graph.dequantize
// CHECK-NEXT:    graph.max_pool2d %{{.*}} : (tensor<1x2x4x4xf32>)
// CHECK-NEXT:    graph.quantize
// CHECK-NEXT:    func.return
func.func @pool_kept(%q: tensor<1x2x4x4xi8>) -> tensor<1x2x2x2xi8> {
  %s = graph.constant dense<-0.5> : tensor<f32>
  %z = graph.constant dense<0> : tensor<i8>
  %s2 = graph.constant dense<0.25> : tensor<f32>
  %x = graph.dequantize %q, %s, %z : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>
  %p = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %y = graph.quantize %p, %s2, %z : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<i8>) -> tensor<1x2x2x2xi8>
  func.return %y : tensor<1x2x2x2xi8>
}
