// RUN: dlpc-opt %s -p graph-fold-constants | filecheck %s
// RUN: dlpc-opt %s -p 'graph-fold-constants{max-elements=2}' | filecheck %s --check-prefix=LIMIT

// 16 * [1, 2, 3, 4], reshaped, transposed and flattened: one constant.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<[1.600000e+01, 4.800000e+01, 3.200000e+01, 6.400000e+01]> : tensor<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.mul %x, %[[C]]
// CHECK-NEXT:    func.return %[[Y]]
// LIMIT-LABEL: func.func @chain
// LIMIT:         graph.transpose
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.constant dense<16.0> : tensor<f32>
  %b = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %c = graph.mul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %d = graph.reshape %c {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
  %e = graph.transpose %d : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %f = graph.reshape %e {shape = array<i64: 4>} : (tensor<2x2xf32>) -> tensor<4xf32>
  %y = graph.mul %x, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// A splat result stays one compact literal whatever its size; params are not folded.
// CHECK-LABEL: func.func @splat_and_param
// CHECK-NEXT:    %[[B:.*]] = graph.constant dense<3.584000e+03> : tensor<64x64xf32>
// CHECK-NEXT:    graph.mul %x, %[[B]]
// CHECK-NEXT:    %[[W:.*]] = graph.param "w"
// CHECK-NEXT:    %[[S:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    graph.add %[[W]], %[[S]]
// LIMIT-LABEL: func.func @splat_and_param
// LIMIT-NEXT:    graph.constant dense<3.584000e+03> : tensor<64x64xf32>
func.func @splat_and_param(%x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<4xf32>) {
  %a = graph.constant dense<16.0> : tensor<f32>
  %b = graph.constant dense<224.0> : tensor<f32>
  %c = graph.mul %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %d = graph.broadcast %c {shape = array<i64: 64, 64>} : (tensor<f32>) -> tensor<64x64xf32>
  %y = graph.mul %x, %d : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %w = graph.param "w" : tensor<4xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %two = graph.add %one, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v = graph.add %w, %two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %y, %v : tensor<64x64xf32>, tensor<4xf32>
}
