// RUN: not dlpc-opt %s -p 'loop-schedule{script="splitt mm/i1 by 4"}' 2>&1 | filecheck %s --check-prefix=PRIM
// RUN: not dlpc-opt %s -p 'loop-schedule{script="split mm/i1 into 4"}' 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: not dlpc-opt %s -p 'loop-schedule{script="split mm/i1 by 4; split mm/i1 by 4"}' 2>&1 | filecheck %s --check-prefix=STEP
// RUN: not dlpc-opt %s -p 'loop-schedule{script="nothere.sched"}' 2>&1 | filecheck %s --check-prefix=FILE

// PRIM: dlpc-opt: error: schedule line 1: unknown primitive 'splitt' (known: split, reorder, tile, fuse, unroll, vectorize, parallel, serial, decompose, cache_read, cache_write, compute_at, compute_inline, tensorize, rfactor)
// SYNTAX: dlpc-opt: error: schedule line 1: expected 'split K/L by N [-> O, I]', got 'split mm/i1 into 4'
// STEP: dlpc-opt: error: schedule line 1 (split mm/i1 by 4): kernel 'mm' has no loop named 'i1'
// FILE: dlpc-opt: error: cannot read schedule script 'nothere.sched': No such file or directory
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %C[%i0, %i1] : memref<16x32xf32>
      }
    }
  }
  func.return
}
