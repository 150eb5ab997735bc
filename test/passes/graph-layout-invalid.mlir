// RUN: not dlpc-opt %s -p 'graph-layout{to=nchw4c}' 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p 'graph-layout{to=nhwc where=some}' 2>&1 | filecheck %s --check-prefix=WHERE
// RUN: not dlpc-opt %s -p 'graph-layout{to=nchw where=pays}' 2>&1 | filecheck %s --check-prefix=PAYS

// CHECK: dlpc-opt: error: graph-layout to must be nhwc or nchw, got 'nchw4c'
// WHERE: dlpc-opt: error: graph-layout where must be all or pays, got 'some'
// PAYS: dlpc-opt: error: graph-layout where=pays converts to nhwc only
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
