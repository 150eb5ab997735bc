// RUN: not dlpc-opt %s -p 'graph-conv-layout{lanes=0}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-conv-layout lanes must be positive, got 0
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
