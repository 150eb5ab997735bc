// RUN: not dlpc-opt %s -p 'loop-fold-init-epilogue{kernel=nope}' 2>&1 | filecheck %s

// CHECK: dlpc-opt: error: no kernel named 'nope' (kernels: k)
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i0] : memref<8xf32>
      memref.store %v, %y[%i0] : memref<8xf32>
    }
  }
  func.return
}
