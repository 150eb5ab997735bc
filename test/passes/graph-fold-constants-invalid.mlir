// RUN: not dlpc-opt %s -p 'graph-fold-constants{max-elements=-1}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-fold-constants max-elements must be >= 0, got -1
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
