// RUN: dlpc-opt --disable-verify %s -p 'graph-bind-dims{dims="batch=2,seq=5"}' | filecheck %s

// Symbolic argument dims take their values; symbolic ints properties (`?` entries named by
// sym_<name>) are written as ints and their attribute dropped; every type is re-inferred.
// CHECK-LABEL: func.func @main(%x: tensor<2x5x64xf32>) -> tensor<1x5xf32>
// CHECK:         graph.reshape %x {shape = array<i64: 0, 5, 4, 16>} : (tensor<2x5x64xf32>) -> tensor<2x5x4x16xf32>
// CHECK:         graph.slice %p {starts = array<i64: 0>, ends = array<i64: 5>, axes = array<i64: 1>} : (tensor<1x512xf32>) -> tensor<1x5xf32>
// CHECK:         graph.concat {{.*}} -> tensor<2x10x64xf32>
// CHECK-NOT:     sym_
func.func @main(%x: tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<1x?xf32, ["seq"]> {
  %r = graph.reshape %x {sym_shape = ["seq"], shape = array<i64: 0, -9223372036854775808, 4, 16>} : (tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<?x?x4x16xf32, ["batch", "seq"]>
  %p = graph.param "pos" : tensor<1x512xf32>
  %s = graph.slice %p {sym_ends = ["seq"], starts = array<i64: 0>, ends = array<i64: -9223372036854775808>, axes = array<i64: 1>} : (tensor<1x512xf32>) -> tensor<1x?xf32, ["seq"]>
  %c = graph.concat %x, %x {axis = 1 : i64} : (tensor<?x?x64xf32, ["batch", "seq"]>, tensor<?x?x64xf32, ["batch", "seq"]>) -> tensor<?x?x64xf32, ["batch", "2*seq"]>
  func.return %s : tensor<1x?xf32, ["seq"]>
}
