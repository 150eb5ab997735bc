// dlpc --emit=graph prints graph IR that dlpc-opt reads back; -o writes the same text.
// RUN: dlpc %s --emit=graph -O0 | filecheck %s
// RUN: dlpc %s --emit=graph -O0 -o %t.mlir && dlpc-opt %t.mlir | filecheck %s
// RUN: dlpc %s --emit=graph -O0 --stats 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// CHECK:      func.func @main(%[[X:.*]]: tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:   %[[W:.*]] = graph.param "fc.weight" : tensor<4x8xf32>
// CHECK-NEXT:   %[[Y:.*]] = graph.linear %[[X]], %[[W]] : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:   %[[R:.*]] = graph.relu %[[Y]]
// CHECK-NEXT:   func.return %[[R]] : tensor<2x4xf32>

// STATS:      {{ *}}input  graph
// STATS-NEXT: kernels      2      2
// STATS-NEXT: ops          4      4
// STATS-NEXT: func.return  1      1
// STATS-NEXT: graph.linear 1      1
// STATS-NEXT: graph.param  1      1
// STATS-NEXT: graph.relu   1      1

func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "fc.weight" : tensor<4x8xf32>
  %y = graph.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %r = graph.relu %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}
