// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2}' | filecheck %s

// An attention whose heads are not independent stays whole: here a constant mask with
// one value per head (a head dim of 2) feeds the scores, so splitting the heads would
// need the mask split too; no param is sharded and no comm op is added.
// CHECK-LABEL: func.func @main
// CHECK-NOT:   dlpc.shard_dim
// CHECK-NOT:   comm.
// CHECK:       graph.linear %m, %wo : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
// CHECK-NOT:   comm.
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
  %mask = graph.constant dense<[[[[0.0, -1.0, -1.0], [0.0, 0.0, -1.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]]> : tensor<1x2x3x3xf32>
  %sm = graph.add %qk, %mask : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = graph.softmax %sm : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %a = graph.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32>
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x2xf32>) -> tensor<1x3x2x2xf32>
  %m = graph.reshape %t {shape = array<i64: 1, 3, 4>} : (tensor<1x3x2x2xf32>) -> tensor<1x3x4xf32>
  %o = graph.linear %m, %wo : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %l = graph.reduce_mean %o : (tensor<1x3x4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
