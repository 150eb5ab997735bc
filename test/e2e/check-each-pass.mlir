// A correct pipeline passes the per-pass check and prints its IR as usual:
// RUN: dlpc-opt %s -p graph-simplify,graph-fold-constants,graph-to-te,te-to-loop,loop-default-schedule --check-each-pass | filecheck %s
// A deliberately wrong pass (1 - x becomes x - 1) is named, with the kernel and the worst element:
// RUN: not dlpc-opt %s -p graph-to-te,te-to-loop,test-swap-operands --check-each-pass 2>&1 | filecheck %s --check-prefix=BUG
// ... at any level:
// RUN: not dlpc-opt %s -p graph-simplify,test-swap-operands,graph-to-te --check-each-pass 2>&1 | filecheck %s --check-prefix=GRAPH
// Without the option the wrong pass goes unnoticed:
// RUN: dlpc-opt %s -p test-swap-operands | filecheck %s --check-prefix=SILENT

// CHECK:     loop.kernel "sub_0"
// CHECK:       arith.subf %{{.*}}, %{{.*}} : f32

// BUG:       dlpc-opt: error: --check-each-pass: pass 'test-swap-operands' changed result 0 of @main (loop.kernel "sub_0"): worst element [{{[0-9]+}}, {{[0-9]+}}]: {{.*}} before, {{.*}} after
// BUG-NOT:   func.func

// GRAPH:     dlpc-opt: error: --check-each-pass: pass 'test-swap-operands' changed result 0 of @main (graph.sub): worst element

// SILENT:    graph.sub %x, %one
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %y = graph.sub %one, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
