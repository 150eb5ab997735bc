// RUN: dlpc-opt %s -p test-swap-operands | filecheck %s

// The first sub or div gets its operands swapped (a planted bug for --check-each-pass),
// the rest stay as they are.
// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant
// CHECK-NEXT:    %[[A:.*]] = graph.div %x, %[[ONE]]
// CHECK-NEXT:    %[[B:.*]] = graph.sub %[[ONE]], %[[A]]
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.div %one, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %b = graph.sub %one, %a : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %b : tensor<4xf32>
}
