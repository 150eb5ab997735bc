// RUN: not dlpc-opt %s -p graph-autodiff 2>&1 | filecheck %s

// all_reduce max has no gradient rule (only sum and avg of one operand): one line naming
// the op, from graph-autodiff alone.
// CHECK: dlpc-opt: error: graph-autodiff has no gradient rule for comm.all_reduce max of 1 operands (sum or avg of one)
// CHECK-NOT: Traceback
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4xf32>
  %a = graph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = comm.all_reduce max %a group <world 2> : tensor<4xf32>
  %l = graph.reduce_sum %m : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
