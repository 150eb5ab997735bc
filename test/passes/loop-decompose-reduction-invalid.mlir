// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=two}' 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not dlpc-opt %s -p 'loop-decompose-reduction{kernel=relu}' 2>&1 | filecheck %s --check-prefix=NORED

// SHAPE: dlpc-opt: error: kernel 'two' must hold exactly one loop nest to decompose its reduction
// NORED: dlpc-opt: error: loop relu/i0 must hold exactly one reduction loop nest, found 0 loops
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
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
  func.return
}
