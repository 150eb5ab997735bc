// RUN: not dlpc-opt %s -p 'loop-apply-tuning-log{log="%S/Inputs/bad-tuning.jsonl"}' 2>&1 | filecheck %s

// The default schedule never fails (a kernel it cannot schedule is left alone); its
// tuning-log variant rejects a log whose records are not JSON objects of a tuning run.
// CHECK: dlpc-opt: error: tuning log {{.*}}bad-tuning.jsonl line 1: not a tuning record
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "copy" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i0] : memref<8xf32>
      memref.store %v, %y[%i0] : memref<8xf32>
    }
  }
  func.return
}
