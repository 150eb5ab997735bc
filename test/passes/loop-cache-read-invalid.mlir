// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=mm loop=i0 buffer=C}' 2>&1 | filecheck %s --check-prefix=WRITTEN
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=mm loop=i0 buffer=D}' 2>&1 | filecheck %s --check-prefix=BUF
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=g loop=j buffer=x}' 2>&1 | filecheck %s --check-prefix=GUARD
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=g loop=j buffer=w}' 2>&1 | filecheck %s --check-prefix=AFFINE
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=g loop=j2 buffer=x}' 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=g loop=j3 buffer=x pack=true}' 2>&1 | filecheck %s --check-prefix=PACK

// WRITTEN: dlpc-opt: error: buffer 'C' is written in loop mm/i0; use cache_write
// BUF: dlpc-opt: error: kernel 'mm' accesses no buffer 'D' (buffers: 0:A, 1:B, 2:C)
// GUARD: dlpc-opt: error: an access to buffer 'x' in loop g/j is guarded by scf.if
// AFFINE: dlpc-opt: error: an index of buffer 'w' in loop g/j is not affine in the loop variables
// NONE: dlpc-opt: error: buffer 'x' is not accessed in loop g/j2
// PACK: dlpc-opt: error: accesses to buffer 'x' in loop g/j3 differ; pack needs one access pattern
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>, %x: memref<8xf32>, %w: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<16x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<16x32xf32>
        }
      }
    }
  }
  loop.kernel "g" {
    loop.for %j = 0 to 8 step 1 {name = "j"} {
      %t = arith.constant true
      %v = scf.if %t -> (f32) {
        %l = memref.load %x[%j] : memref<8xf32>
        scf.yield %l : f32
      } else {
        %z = arith.constant 0.000000e+00 : f32
        scf.yield %z : f32
      }
      %k = arith.divui %j, %j : index
      %u = memref.load %w[%k] : memref<8xf32>
      memref.store %v, %y[%j] : memref<8xf32>
    }
    loop.for %j2 = 0 to 8 step 1 {name = "j2"} {
      %v2 = memref.load %w[%j2] : memref<8xf32>
      memref.store %v2, %y[%j2] : memref<8xf32>
    }
    loop.for %j3 = 0 to 4 step 1 {name = "j3"} {
      %v3 = memref.load %x[%j3] : memref<8xf32>
      %c4 = arith.constant 4 : index
      %j4 = arith.addi %j3, %c4 : index
      %v4 = memref.load %x[%j4] : memref<8xf32>
      memref.store %v3, %y[%j3] : memref<8xf32>
    }
  }
  func.return
}
