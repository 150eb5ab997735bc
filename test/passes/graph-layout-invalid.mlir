// RUN: not dlpc-opt %s -p 'graph-layout{to=nchw4c}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-layout to must be nhwc or nchw, got 'nchw4c'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
