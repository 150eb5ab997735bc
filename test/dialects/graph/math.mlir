// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s

// the float math functions (ONNX Sin ... Atanh, Floor, Ceil, Round): one operand, its type
// CHECK-LABEL: func.func @math
// CHECK: graph.sin %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.cos %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.tan %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.asin %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.acos %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.atan %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.sinh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.cosh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.asinh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.acosh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.atanh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.floor %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.ceil %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: graph.round %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @math(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.sin %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.cos %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = graph.tan %1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = graph.asin %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = graph.acos %3 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = graph.atan %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = graph.sinh %5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = graph.cosh %6 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = graph.asinh %7 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = graph.acosh %8 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %10 = graph.atanh %9 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %11 = graph.floor %10 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %12 = graph.ceil %11 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %13 = graph.round %12 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %13 : tensor<2x3xf32>
}

// f64 and f16 too
// CHECK-LABEL: func.func @wide
// CHECK: graph.round %{{.*}} : (tensor<4xf64>) -> tensor<4xf64>
// CHECK: graph.acosh %{{.*}} : (tensor<4xf16>) -> tensor<4xf16>
func.func @wide(%x: tensor<4xf64>, %h: tensor<4xf16>) -> (tensor<4xf64>, tensor<4xf16>) {
  %y = graph.round %x : (tensor<4xf64>) -> tensor<4xf64>
  %z = graph.acosh %h : (tensor<4xf16>) -> tensor<4xf16>
  func.return %y, %z : tensor<4xf64>, tensor<4xf16>
}
