// RUN: dlpc-opt %s -p graph-fuse | filecheck %s

// Comm ops are fusion barriers. A pipeline stage's running gradient sum: each add stays
// with the matmul of its own micro-batch, between the same two recvs; without the
// barrier the chain matmul, add, add would run as one kernel at the end, keeping every
// micro-batch's gradient alive until then.
// CHECK-LABEL: func.func @running_sum
// CHECK-NEXT:    %g0 = graph.matmul %x, %x
// CHECK-NEXT:    %r1 = comm.recv from 1 tag 0
// CHECK-NEXT:    %a1 = graph.fused "matmul_add_0" %r1, %x, %g0
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      graph.matmul
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %r2 = comm.recv from 1 tag 1
// CHECK-NEXT:    %a2 = graph.fused "matmul_add_1" %r2, %x, %a1
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      graph.matmul
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %a2
func.func @running_sum(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %g0 = graph.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r1 = comm.recv from 1 tag 0 group <world 2> : tensor<4x4xf32>
  %g1 = graph.matmul %r1, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a1 = graph.add %g0, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r2 = comm.recv from 1 tag 1 group <world 2> : tensor<4x4xf32>
  %g2 = graph.matmul %r2, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a2 = graph.add %a1, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %a2 : tensor<4x4xf32>
}

// An elementwise chain across an all_reduce: the neg before it and the exp after it
// stay two ops (one kernel would move the neg after the collective).
// CHECK-LABEL: func.func @elementwise_across
// CHECK-NEXT:    %n = graph.neg %x
// CHECK-NEXT:    %s = comm.all_reduce sum %x
// CHECK-NEXT:    %e = graph.exp %n
// CHECK-NEXT:    func.return %e, %s
func.func @elementwise_across(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %n = graph.neg %x : (tensor<8xf32>) -> tensor<8xf32>
  %s = comm.all_reduce sum %x group <world 2> : tensor<8xf32>
  %e = graph.exp %n : (tensor<8xf32>) -> tensor<8xf32>
  func.return %e, %s : tensor<8xf32>, tensor<8xf32>
}

// Two linears of one input on either side of a barrier are not one horizontal group
// (that would move the second before the barrier).
// CHECK-LABEL: func.func @horizontal_across
// CHECK-NOT:     graph.concat
// CHECK:         %q = graph.linear %x, %wq
// CHECK-NEXT:    comm.barrier
// CHECK-NEXT:    %k = graph.linear %x, %wk
func.func @horizontal_across(%x: tensor<2x4xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %wq = graph.param "wq" : tensor<3x4xf32>
  %wk = graph.param "wk" : tensor<3x4xf32>
  %q = graph.linear %x, %wq : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  comm.barrier group <world 2>
  %k = graph.linear %x, %wk : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  func.return %q, %k : tensor<2x3xf32>, tensor<2x3xf32>
}
