// RUN: not dlpc-opt %s 2>&1 | filecheck %s

// A symbolic dim an op cannot take (a slice of step 2 to a symbolic end) is one line
// naming the op, from the op's verifier.
// CHECK: dlpc-opt: error: graph.slice: a slice with symbolic bounds needs step 1, got 2
// CHECK-NOT: Traceback
func.func @main(%x: tensor<?x?xf32, ["batch", "seq"]>) -> tensor<1x?xf32, ["seq"]> {
  %p = graph.param "pos" : tensor<1x512xf32>
  %s = graph.slice %p {sym_ends = ["seq"], starts = array<i64: 0>, ends = array<i64: -9223372036854775808>, axes = array<i64: 1>, steps = array<i64: 2>} : (tensor<1x512xf32>) -> tensor<1x?xf32, ["seq"]>
  func.return %s : tensor<1x?xf32, ["seq"]>
}
