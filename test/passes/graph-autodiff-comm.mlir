// RUN: dlpc-opt %s -p graph-autodiff | filecheck %s

// The comm ops' gradient rules (passes/train/_comm_grad.py, part of graph-autodiff's own
// table: no partition pass needed first): each adjoint is the transposed communication.
// test/python/test_comm_mpi.py checks these gradients against central differences on 2
// ranks.
// CHECK:      %d_e = comm.all_reduce avg %d_f group <world 2> : tensor<2x4xf32>
// CHECK-NEXT: %d_d = comm.all_to_all %d_e split 1 concat 0 group <world 2> : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %d_c = comm.scatter %d_d dim 1 root 0 group <world 2> : tensor<4x2xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %d_r = comm.gather %d_c dim 0 root 0 group <world 2> : tensor<4x1xf32> -> tensor<8x1xf32>
// CHECK-NEXT: %d_b = comm.broadcast %d_r root 1 group <world 2> : tensor<8x1xf32>
// CHECK-NEXT: %d_s = comm.reduce sum %d_b root 0 group <world 2> : tensor<8x1xf32>
// CHECK-NEXT: %d_g = comm.all_gather %d_s dim 1 group <world 2> : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %d_a = comm.reduce_scatter sum %d_g dim 0 group <world 2> : tensor<8x2xf32> -> tensor<4x2xf32>
func.func @main(%x: tensor<4x2xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4x2xf32>
  %a = graph.mul %x, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %g = comm.all_gather %a dim 0 group <world 2> : tensor<4x2xf32> -> tensor<8x2xf32>
  %s = comm.reduce_scatter sum %g dim 1 group <world 2> : tensor<8x2xf32> -> tensor<8x1xf32>
  %b = comm.broadcast %s root 0 group <world 2> : tensor<8x1xf32>
  %r = comm.reduce sum %b root 1 group <world 2> : tensor<8x1xf32>
  %c = comm.scatter %r dim 0 root 0 group <world 2> : tensor<8x1xf32> -> tensor<4x1xf32>
  %d = comm.gather %c dim 1 root 0 group <world 2> : tensor<4x1xf32> -> tensor<4x2xf32>
  %e = comm.all_to_all %d split 0 concat 1 group <world 2> : tensor<4x2xf32> -> tensor<2x4xf32>
  %f = comm.all_reduce avg %e group <world 2> : tensor<2x4xf32>
  %l = graph.reduce_sum %f : (tensor<2x4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
