// RUN: not dlpc-opt %s -p 'graph-substitute{rules=cast-cast,fold-bn}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: graph-substitute has no rule 'fold-bn' (rules: add-constants, conv-input-scale, concat-constants, matmul-transpose, cast-cast, reshape-reshape, factor-common, regroup-scalars, fold-batch-norm)
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
