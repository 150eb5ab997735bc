// RUN: not dlpc-opt %s -p 'graph-fuse{max-chain=1}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-fuse max-chain must be >= 2, got 1
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
