// dlpc-opt reports invalid IR as one line on stderr, exit code 1, no traceback.
// RUN: not dlpc-opt %s 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not dlpc-opt %s.missing 2>&1 | filecheck %s --check-prefix=FILE
// RUN: not dlpc-opt %s -p 'graph-fuse{' 2>&1 | filecheck %s --check-prefix=SPEC
// RUN: not dlpc-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG

// CHECK: dlpc-opt: error: graph.relu: inferred result shape 2x3 but result type has shape 3x3
// CHECK-NOT: {{.}}

// PASS: dlpc-opt: error: Unrecognized passes: ['no-such-pass']
// PASS-NOT: {{.}}

// FILE: dlpc-opt: error: no such file: {{.*}}tool-dlpc-opt-invalid.mlir.missing
// FILE-NOT: {{.}}

// SPEC: dlpc-opt: error: bad pass pipeline 'graph-fuse{' at column 12: Expected argument name here
// SPEC-NOT: {{.}}

// FLAG: dlpc-opt: error: unrecognized arguments: --no-such-flag
// FLAG-NOT: {{.}}

func.func @main(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  %y = graph.relu %x : (tensor<2x3xf32>) -> tensor<3x3xf32>
  func.return %y : tensor<3x3xf32>
}
