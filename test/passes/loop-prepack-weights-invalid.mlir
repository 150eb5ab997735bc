// RUN: dlpc-opt %s -p loop-prepack-weights --split-input-file --verify-diagnostics | filecheck %s
// RUN: dlpc-opt %s -p 'loop-prepack-weights{max_ratio=0}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=RATIO

// The memory plan runs first: a plan made afterwards would put the packed block in the
// arena, which is scratch.
// CHECK: loop-prepack-weights runs after loop-memory-plan (a later plan would put the packed weights in the arena): @main allocates %t
func.func @main(%x: memref<4x8xf32>, %w: memref<8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 0 : i64} {
  %t = memref.alloc() : memref<4x8xf32>
  func.return
}

// -----

// The size bound is at least the weight's own bytes.
// RATIO: loop-prepack-weights: expected max_ratio >= 1, got 0
func.func @main(%x: memref<4x8xf32>) {
  func.return
}
