// RUN: not dlpc-opt %s -p 'graph-tensor-parallel{ranks=3}' 2>&1 | filecheck %s

// 2 heads do not divide by 3 ranks: one line naming the projection's param and the value
// CHECK: dlpc-opt: error: graph-tensor-parallel: the attention projection wq has 2 heads, which do not divide by ranks 3
// CHECK-NOT: Traceback
func.func @main(%x: tensor<1x3x4xf32>) -> tensor<f32> {
  %wq = graph.param "wq" : tensor<4x4xf32>
  %wk = graph.param "wk" : tensor<4x4xf32>
  %wv = graph.param "wv" : tensor<4x4xf32>
  %wo = graph.param "wo" : tensor<4x4xf32>
  %lq = graph.linear %x, %wq : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %rq = graph.reshape %lq {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %q = graph.transpose %rq {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %lk = graph.linear %x, %wk : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %rk = graph.reshape %lk {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %k = graph.transpose %rk {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %lv = graph.linear %x, %wv : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %rv = graph.reshape %lv {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %v = graph.transpose %rv {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %qk = graph.matmul %q, %k {transpose_b = true} : (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x3xf32>
  %p = graph.softmax %qk : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %a = graph.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32>
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x2xf32>) -> tensor<1x3x2x2xf32>
  %m = graph.reshape %t {shape = array<i64: 1, 3, 4>} : (tensor<1x3x2x2xf32>) -> tensor<1x3x4xf32>
  %o = graph.linear %m, %wo : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %l = graph.reduce_mean %o : (tensor<1x3x4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
