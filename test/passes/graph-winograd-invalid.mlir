// RUN: not dlpc-opt %s -p 'graph-winograd{where=some}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-winograd where must be pays, all or none, got 'some'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
