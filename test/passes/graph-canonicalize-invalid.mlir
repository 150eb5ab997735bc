// RUN: not dlpc-opt %s -p 'graph-canonicalize{gelu=false}' 2>&1 | filecheck %s

// graph-canonicalize has no user errors of its own (a rule that does not match leaves
// the IR as it is) and no options: an option is refused, naming it.
// CHECK: dlpc-opt: error: Provided arguments ["gelu"] not found in expected arguments []
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
