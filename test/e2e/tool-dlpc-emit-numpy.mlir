// dlpc --emit=numpy prints a runnable Python module; model names become `v_` identifiers
// (backends/names.py) and strings ASCII literals.
// RUN: dlpc %s --emit=numpy -O0 | filecheck %s

// CHECK:       import numpy as np
// CHECK:       INPUTS = ('x',)
// CHECK-NEXT:  PARAMS = ('layer-1.weight', 'def')
// CHECK:       def linear(x, w, b=None):
// CHECK:       def main(*inputs, params):
// CHECK-NEXT:      (v_x,) = inputs
// CHECK-NEXT:      [[W:v_[a-z_0-9]+]] = params['layer-1.weight']
// CHECK-NEXT:      [[B:v_[a-z_0-9]+]] = params['def']
// CHECK-NEXT:      [[Y:v_[a-z_0-9]+]] = linear(v_x, [[W]], [[B]])
// CHECK-NEXT:      [[R:v_[a-z_0-9]+]] = leaky_relu([[Y]], alpha=0.25)
// CHECK-NEXT:      return ([[R]],)

func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "layer-1.weight" : tensor<4x8xf32>
  %b = graph.param "def" : tensor<4xf32>
  %y = graph.linear %x, %w, %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = graph.leaky_relu %y {alpha = 0.25 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}
