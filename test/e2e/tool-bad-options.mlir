// Every bad input to dlpc / dlpc-run is one line on stderr and exit code 1.
// RUN: not dlpc %s --emit=spirv 2>&1 | filecheck %s --check-prefix=EMIT
// RUN: not dlpc %s --emit=graph -O7 2>&1 | filecheck %s --check-prefix=OPT
// RUN: not dlpc %s.missing --emit=graph 2>&1 | filecheck %s --check-prefix=FILE
// RUN: not dlpc %s --emit=graph --weights %s.missing.npz 2>&1 | filecheck %s --check-prefix=WEIGHTS
// RUN: not dlpc-run %s --target tpu 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not dlpc-run %s --target numpy -O0 2>&1 | filecheck %s --check-prefix=PARAM
// RUN: python -c "import numpy as np; np.save('%t.x.npy', np.zeros((3, 2), np.float32)); np.savez('%t.w.npz', w=np.ones((4, 8), np.float32))"
// RUN: not dlpc-run %s --target numpy -O0 --weights %t.w.npz --input %t.x.npy 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not dlpc-run %s --target numpy -O0 --weights %t.w.npz --input %t.x.npy --input %t.x.npy 2>&1 | filecheck %s --check-prefix=COUNT
// RUN: not dlpc-run %s --target numpy --repeat 0 2>&1 | filecheck %s --check-prefix=REPEAT
// RUN: not dlpc-run %s --target numpy --rtol tight 2>&1 | filecheck %s --check-prefix=RTOL
// RUN: not dlpc %s --emit=c --fold-weights -o %t.nodir/out.c 2>&1 | filecheck %s --check-prefix=OUTDIR

// EMIT: dlpc: error: argument --emit: invalid choice: 'spirv' (choose from {{.*}}graph{{.*}})
// EMIT-NOT: {{.}}
// OPT: dlpc: error: argument -O: invalid choice: 7 (choose from {{.*}})
// OPT-NOT: {{.}}
// FILE: dlpc: error: no such file: {{.*}}tool-bad-options.mlir.missing
// FILE-NOT: {{.}}
// WEIGHTS: dlpc: error: no such weights file: {{.*}}.missing.npz
// WEIGHTS-NOT: {{.}}
// TARGET: dlpc-run: error: unsupported target 'tpu' (expected numpy, c, opencl, dlp)
// TARGET-NOT: {{.}}
// OUTDIR: dlpc: error: cannot write {{.*}}.nodir/out.c: no such directory {{.*}}.nodir
// OUTDIR-NOT: {{.}}
// PARAM: dlpc-run: error: no value for weight 'w' (graph.param in tool-bad-options); pass weights= or --weights
// PARAM-NOT: {{.}}
// SHAPE: dlpc-run: error: input 'x' has shape 3x2 but the model expects 2x8
// SHAPE-NOT: {{.}}
// COUNT: dlpc-run: error: the model takes 1 inputs (x) but 2 were given
// COUNT-NOT: {{.}}
// REPEAT: dlpc-run: error: --repeat must be >= 1, got 0
// REPEAT-NOT: {{.}}
// RTOL: dlpc-run: error: argument --rtol: invalid float value: 'tight'
// RTOL-NOT: {{.}}

func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "w" : tensor<4x8xf32>
  %y = graph.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
