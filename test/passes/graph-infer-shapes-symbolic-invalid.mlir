// RUN: not dlpc-opt --disable-verify %s -p graph-infer-shapes 2>&1 | filecheck %s
// RUN: sed -n '/^func.func @contraction/,$p' %s | not dlpc-opt --disable-verify -p graph-infer-shapes 2>&1 | filecheck %s --check-prefix=MATMUL

// Two symbols nothing relates cannot be proven equal: the op is named, with both shapes.
// CHECK: dlpc-opt: error: cannot infer the type of graph.add (%a): shapes {batch}x{seq}x64, {batch}x{len}x64 cannot be broadcast together
// MATMUL: dlpc-opt: error: cannot infer the type of graph.matmul (%m): graph.matmul contraction mismatch: lhs {batch}x{seq} has K=seq but rhs 64x8 has K=64
func.func @symbols(%x: tensor<?x?x64xf32, ["batch", "seq"]>, %y: tensor<?x?x64xf32, ["batch", "len"]>) -> tensor<1xf32> {
  %a = graph.add %x, %y : (tensor<?x?x64xf32, ["batch", "seq"]>, tensor<?x?x64xf32, ["batch", "len"]>) -> tensor<1xf32>
  func.return %a : tensor<1xf32>
}

func.func @contraction(%x: tensor<?x?xf32, ["batch", "seq"]>) -> tensor<1xf32> {
  %w = graph.param "w" : tensor<64x8xf32>
  %m = graph.matmul %x, %w : (tensor<?x?xf32, ["batch", "seq"]>, tensor<64x8xf32>) -> tensor<1xf32>
  func.return %m : tensor<1xf32>
}
