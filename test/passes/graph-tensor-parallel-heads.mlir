// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2}' | filecheck %s
// RUN: dlpc-opt %s -p 'graph-tensor-parallel{ranks=2},graph-autodiff' | filecheck %s --check-prefix=BACKWARD

// Attention split by heads (2 heads of 2, d_model 4): Q/K/V projections column-parallel
// (rank r: head r, its rows and bias), the heads' ops on 1 head, the merge to [.., 2],
// the output projection row-parallel (its columns) with its all_reduce, then its bias.
// CHECK-LABEL: func.func @main
// CHECK-DAG:   %[[WQ:.*]] = graph.param "wq" {dlpc.shard_dim = 0 : i64} : tensor<2x4xf32>
// CHECK-DAG:   %[[BQ:.*]] = graph.param "bq" {dlpc.shard_dim = 0 : i64} : tensor<2xf32>
// CHECK-DAG:   %[[WK:.*]] = graph.param "wk" {dlpc.shard_dim = 0 : i64} : tensor<2x4xf32>
// CHECK-DAG:   %[[WV:.*]] = graph.param "wv" {dlpc.shard_dim = 0 : i64} : tensor<2x4xf32>
// CHECK-DAG:   %[[WO:.*]] = graph.param "wo" {dlpc.shard_dim = 1 : i64} : tensor<4x2xf32>
// CHECK-DAG:   %[[BO:.*]] = graph.param "bo" : tensor<4xf32>
// CHECK:       graph.linear %x, %[[WQ]], %[[BQ]] : (tensor<1x3x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<1x3x2xf32>
// CHECK-NEXT:  graph.reshape %{{.*}} {shape = array<i64: 1, 3, 1, 2>} : (tensor<1x3x2xf32>) -> tensor<1x3x1x2xf32>
// CHECK-NEXT:  %q = graph.transpose {{.*}} -> tensor<1x1x3x2xf32>
// CHECK:       graph.linear %x, %[[WK]] : (tensor<1x3x4xf32>, tensor<2x4xf32>) -> tensor<1x3x2xf32>
// CHECK:       graph.linear %x, %[[WV]] : (tensor<1x3x4xf32>, tensor<2x4xf32>) -> tensor<1x3x2xf32>
// CHECK:       graph.matmul %q, %k {transpose_b = true} : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> tensor<1x1x3x3xf32>
// CHECK:       %s = graph.mul %{{.*}}, %{{.*}} : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
// CHECK-NEXT:  %p = graph.softmax %s : (tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
// CHECK-NEXT:  %a = graph.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x2xf32>) -> tensor<1x1x3x2xf32>
// CHECK-NEXT:  %t = graph.transpose %a {{.*}} -> tensor<1x3x1x2xf32>
// CHECK-NEXT:  %m = graph.reshape %t {shape = array<i64: 1, 3, 2>} : (tensor<1x3x1x2xf32>) -> tensor<1x3x2xf32>
// CHECK-NEXT:  %[[P:.*]] = graph.linear %m, %[[WO]] : (tensor<1x3x2xf32>, tensor<4x2xf32>) -> tensor<1x3x4xf32>
// CHECK-NEXT:  %[[S:.*]] = comm.all_reduce sum %[[P]] group <world 2> : tensor<1x3x4xf32>
// CHECK-NEXT:  %o = graph.add %[[S]], %[[BO]]
// CHECK-NOT:   comm.

// The backward: the all_reduce's adjoint is an all_reduce of the output's adjoint, so the
// heads' gradients (and x's) come from the summed adjoint.
// BACKWARD:      comm.all_reduce sum %{{.*}} group <world 2> : tensor<1x3x4xf32>
// BACKWARD:      comm.all_reduce sum %{{.*}} group <world 2> : tensor<1x3x4xf32>
// BACKWARD:      func.return
func.func @main(%x: tensor<1x3x4xf32>) -> tensor<f32> {
  %wq = graph.param "wq" : tensor<4x4xf32>
  %bq = graph.param "bq" : tensor<4xf32>
  %wk = graph.param "wk" : tensor<4x4xf32>
  %wv = graph.param "wv" : tensor<4x4xf32>
  %wo = graph.param "wo" : tensor<4x4xf32>
  %bo = graph.param "bo" : tensor<4xf32>
  %lq = graph.linear %x, %wq, %bq : (tensor<1x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x3x4xf32>
  %rq = graph.reshape %lq {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %q = graph.transpose %rq {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %lk = graph.linear %x, %wk : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %rk = graph.reshape %lk {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %k = graph.transpose %rk {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %lv = graph.linear %x, %wv : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %rv = graph.reshape %lv {shape = array<i64: 1, 3, 2, 2>} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32>
  %v = graph.transpose %rv {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  %qk = graph.matmul %q, %k {transpose_b = true} : (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x3xf32>
  %c = graph.constant dense<0.5> : tensor<f32>
  %s = graph.mul %qk, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %p = graph.softmax %s : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %a = graph.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32>
  %t = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x2xf32>) -> tensor<1x3x2x2xf32>
  %m = graph.reshape %t {shape = array<i64: 1, 3, 4>} : (tensor<1x3x2x2xf32>) -> tensor<1x3x4xf32>
  %o = graph.linear %m, %wo, %bo : (tensor<1x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x3x4xf32>
  %l = graph.reduce_mean %o : (tensor<1x3x4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
