// RUN: not dlpc-opt %s -p 'graph-simplify{assume-finite=maybe}' 2>&1 | filecheck %s

// graph-simplify has no user errors of its own: its one option must be a bool.
// CHECK: dlpc-opt: error: Incompatible types: given ('maybe',), expected <class 'bool'>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
