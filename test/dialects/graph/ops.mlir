// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | dlpc-opt | filecheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.neg %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = graph.neg %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.abs
  %1 = graph.abs %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.exp
  %2 = graph.exp %1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.log
  %3 = graph.log %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sqrt
  %4 = graph.sqrt %3 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.rsqrt
  %5 = graph.rsqrt %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.tanh
  %6 = graph.tanh %5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sigmoid
  %7 = graph.sigmoid %6 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.erf
  %8 = graph.erf %7 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.relu
  %9 = graph.relu %8 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.gelu %{{.*}} {approximate = "tanh"}
  %10 = graph.gelu %9 {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.leaky_relu %{{.*}} {alpha = 2.000000e-01 : f64}
  %11 = graph.leaky_relu %10 {alpha = 0.2 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.clip %{{.*}} {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64}
  %12 = graph.clip %11 {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %13 = graph.add %12, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sub
  %14 = graph.sub %13, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.mul
  %15 = graph.mul %14, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.div
  %16 = graph.div %15, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.max
  %17 = graph.max %16, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.min
  %18 = graph.min %17, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.pow
  %19 = graph.pow %18, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.prelu
  %20 = graph.prelu %19, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.compare %{{.*}}, %{{.*}} {predicate = "gt"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %21 = graph.compare %20, %b {predicate = "gt"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.where
  %22 = graph.where %21, %20, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.cast %{{.*}} {to = i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  %23 = graph.cast %22 {to = i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
  func.return %22 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @linalg
func.func @linalg(%x: tensor<1x784xf32>, %a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) -> tensor<1x256xf32> {
  // CHECK: %[[W:.*]] = graph.param "fc1.weight" : tensor<256x784xf32>
  %w = graph.param "fc1.weight" : tensor<256x784xf32>
  // CHECK: graph.constant dense<1.000000e-01> : tensor<256xf32>
  %bias = graph.constant dense<0.1> : tensor<256xf32>
  // CHECK: graph.linear %{{.*}}, %[[W]], %{{.*}} : (tensor<1x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<1x256xf32>
  %y = graph.linear %x, %w, %bias : (tensor<1x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<1x256xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %m = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %m2 = graph.matmul %t, %b {transpose_a = true} : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  func.return %y : tensor<1x256xf32>
}

// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<1x8x16x16xf32>, %w: tensor<16x8x3x3xf32>, %dw: tensor<8x1x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x16x1x1xf32> {
  // CHECK: graph.conv2d %{{.*}}, %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x16x16xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
  %0 = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x16x16xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
  // CHECK: graph.conv2d %{{.*}}, %{{.*}} {groups = 8 : i64, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>}
  %1 = graph.conv2d %x, %dw {groups = 8 : i64, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>} : (tensor<1x8x16x16xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x16x16xf32>
  // CHECK: graph.max_pool2d %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x16x16xf32>) -> tensor<1x8x8x8xf32>
  %2 = graph.max_pool2d %1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x16x16xf32>) -> tensor<1x8x8x8xf32>
  // CHECK: graph.avg_pool2d %{{.*}} {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = true}
  %3 = graph.avg_pool2d %2 {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  // CHECK: graph.global_avg_pool %{{.*}} : (tensor<1x16x8x8xf32>) -> tensor<1x16x1x1xf32>
  %4 = graph.global_avg_pool %0 : (tensor<1x16x8x8xf32>) -> tensor<1x16x1x1xf32>
  // CHECK: graph.batch_norm {{.*}} {epsilon = 1.000000e-03 : f64}
  %5 = graph.batch_norm %4, %b, %b, %b, %b {epsilon = 1.0e-3 : f64} : (tensor<1x16x1x1xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16x1x1xf32>
  func.return %5 : tensor<1x16x1x1xf32>
}

// CHECK-LABEL: func.func @norm_reduce
func.func @norm_reduce(%x: tensor<16x64xf32>, %g: tensor<64xf32>) -> tensor<16xf32> {
  // a property at its default value is left out
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x64xf32>
  %0 = graph.layer_norm %x, %g, %g {axis = -1 : i64, epsilon = 1.0e-5 : f64} : (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
  // CHECK: graph.softmax %{{.*}} {axis = 1 : i64}
  %1 = graph.softmax %0 {axis = 1 : i64} : (tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: graph.log_softmax
  %2 = graph.log_softmax %1 : (tensor<16x64xf32>) -> tensor<16x64xf32>
  // CHECK: graph.reduce_sum %{{.*}} {axes = array<i64: 1>} : (tensor<16x64xf32>) -> tensor<16xf32>
  %3 = graph.reduce_sum %2 {axes = array<i64: 1>} : (tensor<16x64xf32>) -> tensor<16xf32>
  // CHECK: graph.reduce_mean %{{.*}} {axes = array<i64: 0>, keepdims = true} : (tensor<16x64xf32>) -> tensor<1x64xf32>
  %4 = graph.reduce_mean %2 {axes = array<i64: 0>, keepdims = true} : (tensor<16x64xf32>) -> tensor<1x64xf32>
  // CHECK: graph.reduce_max %{{.*}} : (tensor<16x64xf32>) -> tensor<f32>
  %5 = graph.reduce_max %2 : (tensor<16x64xf32>) -> tensor<f32>
  // CHECK: graph.reduce_min
  %6 = graph.reduce_min %2 {axes = array<i64: -1>} : (tensor<16x64xf32>) -> tensor<16xf32>
  // CHECK: graph.reduce_prod
  %7 = graph.reduce_prod %2 {axes = array<i64: 1>} : (tensor<16x64xf32>) -> tensor<16xf32>
  func.return %3 : tensor<16xf32>
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<4x8xf32>, %step: tensor<f32>) -> tensor<4x8xf32> {
  // CHECK: graph.dropout %{{.*}}, %{{.*}} {p = 2.500000e-01 : f64, seed = 42 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %0 = graph.dropout %x, %step {p = 0.25 : f64, seed = 42 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK: graph.dropout %{{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = graph.dropout %0 {p = 0.5 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @movement
func.func @movement(%x: tensor<16x192xf32>, %i: tensor<3xi64>) -> tensor<16x4x16xf32> {
  // CHECK: graph.slice %{{.*}} {starts = array<i64: 0>, ends = array<i64: 64>, axes = array<i64: 1>} : (tensor<16x192xf32>) -> tensor<16x64xf32>
  %0 = graph.slice %x {starts = array<i64: 0>, ends = array<i64: 64>, axes = array<i64: 1>} : (tensor<16x192xf32>) -> tensor<16x64xf32>
  // CHECK: graph.reshape %{{.*}} {shape = array<i64: 16, 4, -1>} : (tensor<16x64xf32>) -> tensor<16x4x16xf32>
  %1 = graph.reshape %0 {shape = array<i64: 16, 4, -1>} : (tensor<16x64xf32>) -> tensor<16x4x16xf32>
  // CHECK: graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : (tensor<16x4x16xf32>) -> tensor<4x16x16xf32>
  %2 = graph.transpose %1 {perm = array<i64: 1, 0, 2>} : (tensor<16x4x16xf32>) -> tensor<4x16x16xf32>
  // CHECK: graph.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<16x64xf32>, tensor<16x192xf32>) -> tensor<16x256xf32>
  %3 = graph.concat %0, %x {axis = 1 : i64} : (tensor<16x64xf32>, tensor<16x192xf32>) -> tensor<16x256xf32>
  // CHECK: graph.pad %{{.*}} {pads = array<i64: 1, 0, 1, 2>} : (tensor<16x64xf32>) -> tensor<18x66xf32>
  %4 = graph.pad %0 {pads = array<i64: 1, 0, 1, 2>} : (tensor<16x64xf32>) -> tensor<18x66xf32>
  // CHECK: graph.broadcast %{{.*}} {shape = array<i64: 2, 16, 64>} : (tensor<16x64xf32>) -> tensor<2x16x64xf32>
  %5 = graph.broadcast %0 {shape = array<i64: 2, 16, 64>} : (tensor<16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK: graph.gather %{{.*}}, %{{.*}} : (tensor<16x192xf32>, tensor<3xi64>) -> tensor<3x192xf32>
  %6 = graph.gather %x, %i {axis = 0 : i64} : (tensor<16x192xf32>, tensor<3xi64>) -> tensor<3x192xf32>
  // CHECK: graph.slice %{{.*}} {starts = array<i64: -1>, ends = array<i64: -17>, steps = array<i64: -2>}
  %7 = graph.slice %x {starts = array<i64: -1>, ends = array<i64: -17>, steps = array<i64: -2>} : (tensor<16x192xf32>) -> tensor<8x192xf32>
  func.return %1 : tensor<16x4x16xf32>
}

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: graph.fused "conv_relu" %{{.*}}, %{{.*}} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK:   graph.conv2d
  // CHECK:   graph.relu
  // CHECK:   graph.yield %{{.*}} : tensor<1x4x6x6xf32>
  %y = graph.fused "conv_relu" %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>):
    %0 = graph.conv2d %a, %k : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
    %1 = graph.relu %0 : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    graph.yield %1 : tensor<1x4x6x6xf32>
  }
  func.return %y : tensor<1x4x6x6xf32>
}
