// RUN: dlpc-opt %s -p comm-check-schedule | filecheck %s

// Two ranks' programs (function i is rank i's) that complete with blocking sends: rank 0
// sends then receives, rank 1 receives then sends. The check changes nothing.
// CHECK-LABEL: func.func @rank0
// CHECK:       comm.send %x to 1 tag 0
// CHECK-LABEL: func.func @rank1
func.func @rank0(%x: tensor<2xf32>) -> tensor<2xf32> {
  comm.send %x to 1 tag 0 group <world 2> : tensor<2xf32>
  %y = comm.recv from 1 tag 1 group <world 2> : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
func.func @rank1(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = comm.recv from 0 tag 0 group <world 2> : tensor<2xf32>
  comm.send %y to 0 tag 1 group <world 2> : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
