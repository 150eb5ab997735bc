// RUN: not dlpc-opt --disable-verify %s -p 'graph-bind-dims{dims="batch=2"}' 2>&1 | filecheck %s
// RUN: not dlpc-opt --disable-verify %s -p 'graph-bind-dims{dims="batch=2,seq=600"}' 2>&1 | filecheck %s --check-prefix=SLICE
// RUN: not dlpc-opt --disable-verify %s -p 'graph-bind-dims{dims="batch"}' 2>&1 | filecheck %s --check-prefix=OPTION

// A symbol with no value names the argument and the dim.
// CHECK: dlpc-opt: error: graph-bind-dims: @main argument 0 has symbolic dim 'seq' with no value (given: batch=2)
// A value the model cannot hold (a slice of 512 positions cut at 600) is named at that op.
// SLICE: dlpc-opt: error: graph-bind-dims: graph.slice end 600 is past its input's 512 along axis 1 (a bound dim larger than the model allows)
// OPTION: dlpc-opt: error: graph-bind-dims: dims entry 'batch' is not name=int
func.func @main(%x: tensor<?x?xf32, ["batch", "seq"]>) -> tensor<?x?xf32, ["batch", "seq"]> {
  %p = graph.param "pos" : tensor<1x512xf32>
  %s = graph.slice %p {sym_ends = ["seq"], starts = array<i64: 0>, ends = array<i64: -9223372036854775808>, axes = array<i64: 1>} : (tensor<1x512xf32>) -> tensor<1x?xf32, ["seq"]>
  %a = graph.add %s, %x : (tensor<1x?xf32, ["seq"]>, tensor<?x?xf32, ["batch", "seq"]>) -> tensor<?x?xf32, ["batch", "seq"]>
  func.return %a : tensor<?x?xf32, ["batch", "seq"]>
}
