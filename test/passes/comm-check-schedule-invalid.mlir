// RUN: not dlpc-opt %s -p comm-check-schedule 2>&1 | filecheck %s

// Both ranks send first (a schedule graph-pipeline would never emit): with blocking sends each waits for the other's recv
// CHECK: dlpc-opt: error: comm-check-schedule: deadlock: rank 0's comm.send to 1 tag 0 (its comm op 0) waits for rank 1, whose next is rank 1's comm.send to 0 tag 1 (its comm op 0)
func.func @rank0(%x: tensor<2xf32>) -> tensor<2xf32> {
  comm.send %x to 1 tag 0 group <world 2> : tensor<2xf32>
  %y = comm.recv from 1 tag 1 group <world 2> : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
func.func @rank1(%x: tensor<2xf32>) -> tensor<2xf32> {
  comm.send %x to 0 tag 1 group <world 2> : tensor<2xf32>
  %y = comm.recv from 0 tag 0 group <world 2> : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
// RUN: not dlpc-opt %S/Inputs/comm-check-schedule-unmatched.mlir -p comm-check-schedule 2>&1 | filecheck %s --check-prefix=UNMATCHED
// A send whose recv never comes (rank 1 has finished)
// UNMATCHED: dlpc-opt: error: comm-check-schedule: rank 0's comm.send to 1 tag 0 (its comm op 0) has no matching op: rank 1 has finished
