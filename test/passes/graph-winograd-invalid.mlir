// RUN: not dlpc-opt %s -p 'graph-winograd{where=some}' 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p 'graph-winograd{target=dlp}' 2>&1 | filecheck %s --check-prefix=TARGET

// CHECK: dlpc-opt: error: graph-winograd where must be pays, all or none, got 'some'
// TARGET: dlpc-opt: error: graph-winograd target must be c, opencl or opencl-gpu, got 'dlp'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
