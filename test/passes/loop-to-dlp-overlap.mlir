// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' --check-each-pass | filecheck %s

// Iteration i0 writes rows i0 and i0 + 1 of %s: consecutive iterations write one row in
// common, so the written buffer cannot be split into tiles over i0 (tasks would race on
// the shared row; the simulator runs tasks in order and would not show it). It stays
// whole, in one task.
// CHECK:      dlp.kernel "smear" attributes {tasks = 1 : i64
// CHECK-NOT:  double_buffered
// CHECK:      dlp.wait_dma
// CHECK:      dlp.memcpy_async NRAM2GDRAM %s[%{{.*}}], %s_nram
// CHECK:      dlp.wait_dma
func.func @main(%u: memref<6x32xf32>, %s: memref<7x32xf32>) {
  loop.kernel "smear" {
    loop.for %i0 = 0 to 6 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %n = arith.addi %i0, %c1 : index
        %a = memref.load %u[%i0, %i1] : memref<6x32xf32>
        %one = arith.constant 1.000000e+00 : f32
        %b = arith.addf %a, %one : f32
        memref.store %a, %s[%i0, %i1] : memref<7x32xf32>
        memref.store %b, %s[%n, %i1] : memref<7x32xf32>
      }
    }
  }
  func.return
}
