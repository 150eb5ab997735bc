// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%x: tensor<4x3xf32>) -> tensor<6x3xf32> {
  %y = comm.all_gather %x dim 0 group <world 2> : tensor<4x3xf32> -> tensor<6x3xf32>
  func.return %y : tensor<6x3xf32>
}
// CHECK: comm.all_gather: output shape 6x3 must be the input's 4x3 with dim 0 times 2 (8x3)

// -----

func.func @f(%x: tensor<5x3xf32>) -> tensor<2x3xf32> {
  %y = comm.reduce_scatter sum %x dim 0 group <world 2> : tensor<5x3xf32> -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK: comm.reduce_scatter: input dim 0 of size 5 does not divide by the group size 2

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = comm.all_reduce sum %x group <world 2, ranks [0, 2]> : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: comm.group: rank 2 is out of range for world 2

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = comm.broadcast %x root 3 group <world 2> : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: comm.broadcast: root 3 is out of range for a group of 2

// -----

func.func @f(%x: tensor<4xf32>) {
  comm.send %x to 2 tag 0 group <world 4, ranks [0, 1]> : tensor<4xf32>
  func.return
}
// CHECK: comm.send: peer 2 is out of range for a group of 2

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = comm.all_reduce avg %x group <world 4, mesh [2, 1, 1], axis "dp"> : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: comm.group: mesh [2, 1, 1] is not dp x tp x pp of world 4

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = comm.all_reduce avg %x group <world 4, mesh [2, 2, 1], axis "ep"> : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: comm.group: mesh axis 'ep' is not one of dp, tp, pp

// -----

func.func @f(%x: tensor<4x3xf32>) -> tensor<2x5xf32> {
  %y = comm.all_to_all %x split 0 concat 1 group <world 2> : tensor<4x3xf32> -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}
// CHECK: comm.all_to_all: output shape 2x5 must be 2x6 (dim 0 divided by 2, dim 1 times 2)

// -----

func.func @f(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %y = comm.all_gather %x dim 2 group <world 2> : tensor<4x3xf32> -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}
// CHECK: comm.all_gather: dim 2 is out of range for rank 2
