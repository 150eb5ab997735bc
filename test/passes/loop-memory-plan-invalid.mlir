// RUN: dlpc-opt %s -p loop-memory-plan --split-input-file --verify-diagnostics | filecheck %s

// The plan places static buffers only.
// CHECK: loop-memory-plan needs static shapes; %t is memref<?x8xf32>
func.func @main(%x: memref<4x8xf32>, %n: index) {
  %t = memref.alloc(%n) : memref<?x8xf32>
  func.return
}

// -----

// ... with row-major identity layouts.
// CHECK: loop-memory-plan needs identity layouts; %t is memref<4x8xf32, strided<[1, 4]>>
func.func @main(%x: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4x8xf32, strided<[1, 4]>>
  func.return
}
