// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=two}' 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=relu}' 2>&1 | filecheck %s --check-prefix=NORED
// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=narrow}' 2>&1 | filecheck %s --check-prefix=NARROW
// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=two loop=nosuch}' 2>&1 | filecheck %s --check-prefix=NOLOOP
// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=strided}' 2>&1 | filecheck %s --check-prefix=STRIDED

// SHAPE: dlpc-opt: error: kernel 'two' must hold exactly one loop nest to decompose its reduction
// NORED: dlpc-opt: error: loop relu/i0 must hold exactly one reduction loop nest, found 0 loops
// an f32 sum stored as f16 cannot accumulate in its f16 output element
// NARROW: dlpc-opt: error: the accumulator of loop narrow/i0 has type f32, its output element f16: it cannot accumulate in the output
// NOLOOP: dlpc-opt: error: kernel 'two' has no loop named 'nosuch' (loops: i0, i1)
// i32 sums stored as i8 go to a local buffer indexed by the spatial loops, which must
// run from 0 by 1
// STRIDED: dlpc-opt: error: the accumulator of loop strided/i0 has type i32, its output element i8: it cannot accumulate in the output
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %m: memref<4x8xf32>, %h: memref<4xf16>, %mi: memref<4x8xi32>, %q: memref<4xi8>) {
  loop.kernel "strided" {
    loop.for %i0 = 0 to 4 step 2 {name = "i0"} {
      %acc = memref.alloca() : memref<i32>
      %zero = arith.constant 0 : i32
      memref.store %zero, %acc[] : memref<i32>
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %mi[%i0, %r0] : memref<4x8xi32>
        %a = memref.load %acc[] : memref<i32>
        %s = arith.addi %a, %v : i32
        memref.store %s, %acc[] : memref<i32>
      }
      %sum = memref.load %acc[] : memref<i32>
      %t = arith.trunci %sum : i32 to i8
      memref.store %t, %q[%i0] : memref<4xi8>
    }
  }
  loop.kernel "two" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
    }
    loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
    }
  }
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i0] : memref<8xf32>
      memref.store %v, %y[%i0] : memref<8xf32>
    }
  }
  loop.kernel "narrow" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.0 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %m[%i0, %r0] : memref<4x8xf32>
        %a = memref.load %acc[] : memref<f32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %acc[] : memref<f32>
      }
      %sum = memref.load %acc[] : memref<f32>
      %t = arith.truncf %sum : f32 to f16
      memref.store %t, %h[%i0] : memref<4xf16>
    }
  }
  func.return
}
