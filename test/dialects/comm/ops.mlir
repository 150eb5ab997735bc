// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | dlpc-opt | filecheck %s

// CHECK-LABEL: func.func @collectives
// CHECK: %{{.*}}, %{{.*}} = comm.all_reduce sum %{{.*}}, %{{.*}} group <world 2> : tensor<4x3xf32>, tensor<3xf32>
// CHECK: comm.all_reduce avg %{{.*}} group <world 4, ranks [0, 2]> : tensor<4x3xf32>
// CHECK: comm.all_gather %{{.*}} dim 0 group <world 4, mesh [2, 2, 1], axis "dp"> : tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK: comm.reduce_scatter max %{{.*}} dim 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: comm.broadcast %{{.*}} root 1 group <world 2> : tensor<4x3xf32>
// CHECK: comm.reduce prod %{{.*}} root 0 group <world 2> : tensor<4x3xf32>
// CHECK: comm.scatter %{{.*}} dim 0 root 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: comm.gather %{{.*}} dim 1 root 0 group <world 2> : tensor<4x3xf32> -> tensor<4x6xf32>
// CHECK: comm.all_to_all %{{.*}} split 0 concat 1 group <world 2> : tensor<4x3xf32> -> tensor<2x6xf32>
// CHECK: comm.all_reduce min
// CHECK: comm.barrier group <world 2>
func.func @collectives(%x: tensor<4x3xf32>, %v: tensor<3xf32>) -> tensor<2x6xf32> {
  %a, %b = comm.all_reduce sum %x, %v group <world 2> : tensor<4x3xf32>, tensor<3xf32>
  %c = comm.all_reduce avg %x group <world 4, ranks [0, 2]> : tensor<4x3xf32>
  %d = comm.all_gather %x dim 0 group <world 4, mesh [2, 2, 1], axis "dp"> : tensor<4x3xf32> -> tensor<8x3xf32>
  %e = comm.reduce_scatter max %x dim 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
  %f = comm.broadcast %x root 1 group <world 2> : tensor<4x3xf32>
  %g = comm.reduce prod %x root 0 group <world 2> : tensor<4x3xf32>
  %h = comm.scatter %x dim 0 root 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
  %i = comm.gather %x dim 1 root 0 group <world 2> : tensor<4x3xf32> -> tensor<4x6xf32>
  %j = comm.all_to_all %x split 0 concat 1 group <world 2> : tensor<4x3xf32> -> tensor<2x6xf32>
  %l = comm.all_reduce min %x group <world 3> : tensor<4x3xf32>
  comm.barrier group <world 2>
  func.return %j : tensor<2x6xf32>
}

// CHECK-LABEL: func.func @point_to_point
// CHECK: comm.send %{{.*}} to 1 tag 7 group <world 2> : tensor<4x3xf32>
// CHECK: %{{.*}} = comm.recv from 1 tag 7 group <world 2> : tensor<4x3xf32>
func.func @point_to_point(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  comm.send %x to 1 tag 7 group <world 2> : tensor<4x3xf32>
  %k = comm.recv from 1 tag 7 group <world 2> : tensor<4x3xf32>
  func.return %k : tensor<4x3xf32>
}
