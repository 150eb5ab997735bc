// RUN: not dlpc-opt %s -p 'graph-mask-padding{dims="seq"}' 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p 'graph-mask-padding{dims="len"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN

// A normalisation over the padded dim mixes positions in a way a mask does not undo.
// CHECK: dlpc-opt: error: graph-mask-padding: graph.layer_norm mixes positions along the padded dim 'seq': it cannot be masked
// UNKNOWN: dlpc-opt: error: graph-mask-padding: 'len' is not a symbolic dim of @main's arguments
func.func @main(%x: tensor<?x?xf32, ["b", "seq"]>) -> tensor<?x?xf32, ["b", "seq"]> {
  %g = graph.param "g" : tensor<1xf32>
  %y = graph.layer_norm %x, %g {axis = 1 : i64} : (tensor<?x?xf32, ["b", "seq"]>, tensor<1xf32>) -> tensor<?x?xf32, ["b", "seq"]>
  func.return %y : tensor<?x?xf32, ["b", "seq"]>
}
