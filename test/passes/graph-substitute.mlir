// RUN: dlpc-opt %s -p graph-substitute | filecheck %s
// RUN: dlpc-opt %s -p 'graph-substitute{rules=cast-cast}' | filecheck %s --check-prefix=ONLY

// add-constants: add(c1, add(x, c2)) -> add(x, c1 + c2)
// CHECK-LABEL: func.func @add_constants
// CHECK-NEXT:    %[[C1:.*]] = graph.constant dense<2.000000e+00>
// CHECK-NEXT:    %[[C2:.*]] = graph.constant dense<3.000000e+00>
// CHECK-NEXT:    %[[S:.*]] = graph.add %[[C1]], %[[C2]] : (tensor<f32>, tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.add %m, %[[S]] : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    func.return %[[Y]]
// ONLY-LABEL: func.func @add_constants
// ONLY:         graph.add %m, %c2
func.func @add_constants(%m: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %c1 = graph.constant dense<2.0> : tensor<f32>
  %c2 = graph.constant dense<3.0> : tensor<5xf32>
  %a1 = graph.add %m, %c2 : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %a2 = graph.add %c1, %a1 : (tensor<f32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %a2 : tensor<4x5xf32>
}

// conv-input-scale: conv2d(c1 * x, w) -> conv2d(x, w * c1), c1 per input channel
// CHECK-LABEL: func.func @conv_input_scale
// CHECK:         %[[S4:.*]] = graph.reshape %s {shape = array<i64: 1, 3, 1, 1>}
// CHECK-NEXT:    %[[W:.*]] = graph.mul %w, %[[S4]] : (tensor<4x3x3x3xf32>, tensor<1x3x1x1xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NEXT:    graph.conv2d %x, %[[W]] {pads = array<i64: 1, 1, 1, 1>}
func.func @conv_input_scale(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %s = graph.param "s" : tensor<3x1x1xf32>
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %xs = graph.mul %s, %x : (tensor<3x1x1xf32>, tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  %y = graph.conv2d %xs, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// concat-constants: concat([x, c1, c2, y]) -> concat([x, concat([c1, c2]), y])
// CHECK-LABEL: func.func @concat_constants
// CHECK:         %[[CC:.*]] = graph.concat %k1, %k2 {axis = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    graph.concat %m, %[[CC]], %m {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x4xf32>, tensor<4x5xf32>) -> tensor<4x14xf32>
func.func @concat_constants(%m: tensor<4x5xf32>) -> tensor<4x14xf32> {
  %k1 = graph.constant dense<1.0> : tensor<4x2xf32>
  %k2 = graph.param "k2" : tensor<4x2xf32>
  %c = graph.concat %m, %k1, %k2, %m {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x5xf32>) -> tensor<4x14xf32>
  func.return %c : tensor<4x14xf32>
}

// matmul-transpose: matmul(transpose(x), y) -> matmul(x, y, transpose_a = true)
// CHECK-LABEL: func.func @matmul_transpose
// CHECK-NEXT:    graph.matmul %a, %b {transpose_a = true} : (tensor<2x4x5xf32>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
func.func @matmul_transpose(%a: tensor<2x4x5xf32>, %b: tensor<4x3xf32>) -> tensor<2x5x3xf32> {
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
  %y = graph.matmul %t, %b : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  func.return %y : tensor<2x5x3xf32>
}

// cast-cast: i8 -> i32 is lossless, so the i32 step goes; f32 -> f16 is not, so it stays
// CHECK-LABEL: func.func @cast_cast
// CHECK-NEXT:    %[[A:.*]] = graph.cast %i {to = f32} : (tensor<4xi8>) -> tensor<4xf32>
// CHECK-NEXT:    %[[H:.*]] = graph.cast %f {to = f16}
// CHECK-NEXT:    %[[B:.*]] = graph.cast %[[H]] {to = f32}
// ONLY-LABEL: func.func @cast_cast
// ONLY-NEXT:    graph.cast %i {to = f32} : (tensor<4xi8>) -> tensor<4xf32>
func.func @cast_cast(%i: tensor<4xi8>, %f: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %ci = graph.cast %i {to = i32} : (tensor<4xi8>) -> tensor<4xi32>
  %cf = graph.cast %ci {to = f32} : (tensor<4xi32>) -> tensor<4xf32>
  %h = graph.cast %f {to = f16} : (tensor<4xf32>) -> tensor<4xf16>
  %g = graph.cast %h {to = f32} : (tensor<4xf16>) -> tensor<4xf32>
  func.return %cf, %g : tensor<4xf32>, tensor<4xf32>
}

// factor-common: x*a + b*x + c*x -> x * (a + b + c)
// CHECK-LABEL: func.func @factor_common
// CHECK-NEXT:    %[[AB:.*]] = graph.add %a, %b
// CHECK-NEXT:    %[[ABC:.*]] = graph.add %[[AB]], %c
// CHECK-NEXT:    %[[Y:.*]] = graph.mul %x, %[[ABC]]
// CHECK-NEXT:    func.return %[[Y]]
func.func @factor_common(%x: tensor<4x5xf32>, %a: tensor<5xf32>, %b: tensor<4x5xf32>, %c: tensor<f32>) -> tensor<4x5xf32> {
  %t1 = graph.mul %x, %a : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %t2 = graph.mul %b, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t3 = graph.mul %c, %x : (tensor<f32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %s1 = graph.add %t1, %t2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %s2 = graph.add %s1, %t3 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %s2 : tensor<4x5xf32>
}

// factor-common also when the sum has several users (the root add is not consumed)
// CHECK-LABEL: func.func @factor_common_shared
// CHECK-NEXT:    %[[AB:.*]] = graph.add %a, %b
// CHECK-NEXT:    %[[Y:.*]] = graph.mul %x, %[[AB]]
// CHECK-NEXT:    %[[Z:.*]] = graph.relu %[[Y]]
// CHECK-NEXT:    func.return %[[Y]], %[[Z]]
func.func @factor_common_shared(%x: tensor<4x5xf32>, %a: tensor<5xf32>, %b: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %t1 = graph.mul %x, %a : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %t2 = graph.mul %b, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %s = graph.add %t1, %t2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = graph.relu %s : (tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %s, %r : tensor<4x5xf32>, tensor<4x5xf32>
}

// regroup-scalars: (m1 + s1) + (m2 + s2) -> (m1 + m2) + (s1 + s2)
// CHECK-LABEL: func.func @regroup_scalars
// CHECK-NEXT:    %[[MM:.*]] = graph.add %m1, %m2 : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    %[[SS:.*]] = graph.add %s1, %s2 : (tensor<f32>, tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:    graph.add %[[MM]], %[[SS]]
func.func @regroup_scalars(%m1: tensor<4x5xf32>, %s1: tensor<f32>, %m2: tensor<4x5xf32>, %s2: tensor<1xf32>) -> tensor<4x5xf32> {
  %a = graph.add %m1, %s1 : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %b = graph.add %s2, %m2 : (tensor<1xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %y = graph.add %a, %b : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}

// fold-batch-norm: batch_norm(conv2d(x, w, b)) -> conv2d(x, w * s, (b - mean) * s + beta)
// CHECK-LABEL: func.func @fold_batch_norm
// CHECK:         %[[EPS:.*]] = graph.constant dense<1.000000e-03> : tensor<f32>
// CHECK-NEXT:    %[[VE:.*]] = graph.add %var, %[[EPS]]
// CHECK-NEXT:    %[[R:.*]] = graph.rsqrt %[[VE]]
// CHECK-NEXT:    %[[S:.*]] = graph.mul %gamma, %[[R]]
// CHECK-NEXT:    %[[S4:.*]] = graph.reshape %[[S]] {shape = array<i64: 4, 1, 1, 1>}
// CHECK-NEXT:    %[[W:.*]] = graph.mul %w, %[[S4]]
// CHECK-NEXT:    %[[BM:.*]] = graph.sub %b, %mean
// CHECK-NEXT:    %[[BS:.*]] = graph.mul %[[BM]], %[[S]]
// CHECK-NEXT:    %[[B:.*]] = graph.add %[[BS]], %beta
// CHECK-NEXT:    %[[Y:.*]] = graph.conv2d %x, %[[W]], %[[B]] {strides = array<i64: 2, 2>}
// CHECK-NEXT:    func.return %[[Y]]
func.func @fold_batch_norm(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x3x3xf32> {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %b = graph.param "b" : tensor<4xf32>
  %gamma = graph.param "gamma" : tensor<4xf32>
  %beta = graph.param "beta" : tensor<4xf32>
  %mean = graph.param "mean" : tensor<4xf32>
  %var = graph.param "var" : tensor<4xf32>
  %c = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
  %y = graph.batch_norm %c, %gamma, %beta, %mean, %var {epsilon = 1.0e-03 : f64} : (tensor<1x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
  func.return %y : tensor<1x4x3x3xf32>
}

// a batch norm whose conv result is also used elsewhere is not folded
// An NCHW conv whose output a layout = "nhwc" batch norm normalises over its last axis
// (here also 4 long): the conv's output channels are not the norm's, no folding
// CHECK-LABEL: func.func @layouts_differ_keeps_batch_norm
// CHECK:         graph.conv2d %x, %w :
// CHECK-NEXT:    graph.batch_norm
func.func @layouts_differ_keeps_batch_norm(%x: tensor<1x3x6x6xf32>) -> tensor<1x4x4x4xf32> {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %p = graph.param "p" : tensor<4xf32>
  %c = graph.conv2d %x, %w : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  %y = graph.batch_norm %c, %p, %p, %p, %p {layout = "nhwc"} : (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @shared_conv_keeps_batch_norm
// CHECK:         graph.batch_norm
func.func @shared_conv_keeps_batch_norm(%x: tensor<1x3x8x8xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %p = graph.param "p" : tensor<4xf32>
  %c = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %y = graph.batch_norm %c, %p, %p, %p, %p : (tensor<1x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  func.return %y, %c : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
}
