// RUN: dlpc-opt %s -p loop-view-copies --split-input-file --verify-diagnostics | filecheck %s

// The views are made in @main (or the module's only function).
// CHECK: loop-view-copies needs a func.func @main; the module has 2 functions, none named main
func.func @first(%x: memref<8xf32>) {
  func.return
}
func.func @second(%x: memref<8xf32>) {
  func.return
}
