// RUN: not dlpc-opt %s -p 'loop-cache-write{kernel=k loop=i buffer=y}' 2>&1 | filecheck %s --check-prefix=ORIGIN
// RUN: not dlpc-opt %s -p 'loop-cache-write{kernel=k loop=i buffer=x}' 2>&1 | filecheck %s --check-prefix=NONE

// ORIGIN: dlpc-opt: error: accesses to buffer 'y' in loop k/i do not share one tile origin in dim 0
// NONE: dlpc-opt: error: buffer 'x' is not accessed in loop k/i
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %j = 0 to 4 step 1 {name = "j"} {
      loop.for %i = 0 to 4 step 1 {name = "i"} {
        %v = memref.load %y[%i] : memref<8xf32>
        memref.store %v, %y[%j] : memref<8xf32>
      }
    }
    loop.for %j2 = 0 to 4 step 1 {name = "j2"} {
      %w = memref.load %x[%j2] : memref<8xf32>
      memref.store %w, %y[%j2] : memref<8xf32>
    }
  }
  func.return
}
