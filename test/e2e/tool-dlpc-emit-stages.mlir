// dlpc stops after any stage: te and loop IR, C source; -O2 fuses linear + relu into one kernel.
// RUN: dlpc %s --emit=te -O0 | filecheck %s --check-prefix=TE
// RUN: dlpc %s --emit=loop -O0 | filecheck %s --check-prefix=LOOP
// RUN: dlpc %s --emit=c -O0 | filecheck %s --check-prefix=C
// RUN: dlpc %s --emit=loop -O2 --stats 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// TE:      te.reduce "linear_0"
// TE:      te.compute "relu_1"
// TE:      func.return

// LOOP:     func.func @main(%{{.*}}: memref<2x8xf32>, %{{.*}}: memref<4x8xf32> {dlpc.name = "fc.weight"}, %{{.*}}: memref<2x4xf32>)
// LOOP:     loop.kernel "linear_0"
// LOOP:     loop.kernel "relu_1"

// C:        static void kernel_linear_0(
// C:        static void kernel_relu_1(
// C:        int dlpc_main(void **args)

// STATS:      {{ *}}input  graph  te  loop
// STATS-NEXT: kernels      2      1   1     1

func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "fc.weight" : tensor<4x8xf32>
  %y = graph.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %r = graph.relu %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}
