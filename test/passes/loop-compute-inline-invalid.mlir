// RUN: not dlpc-opt %s -p 'loop-compute-inline{producer=copy}' 2>&1 | filecheck %s --check-prefix=USERS
// RUN: not dlpc-opt %s -p 'loop-compute-inline{producer=tr}' 2>&1 | filecheck %s --check-prefix=PRODUCER

// USERS: dlpc-opt: error: buffer 't' of kernel 'copy' must be an intermediate (memref.alloc) read by exactly one other kernel to inline it
// PRODUCER: dlpc-opt: error: producer kernel 'tr' must be a perfect nest from 0 step 1 whose innermost body (no loops, no scf) stores once to 'u' at its loop variables, to inline it
func.func @main(%x: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %t = memref.alloc() : memref<4x4xf32>
  %u = memref.alloc() : memref<4x4xf32>
  loop.kernel "copy" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x4xf32>
        memref.store %v, %t[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "a" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %v = memref.load %t[%i0, %i0] : memref<4x4xf32>
      memref.store %v, %y[%i0, %i0] : memref<4x4xf32>
    }
  }
  loop.kernel "b" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %v = memref.load %t[%i0, %i0] : memref<4x4xf32>
      memref.store %v, %y[%i0, %i0] : memref<4x4xf32>
    }
  }
  loop.kernel "tr" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x4xf32>
        memref.store %v, %u[%i1, %i0] : memref<4x4xf32>
      }
    }
  }
  loop.kernel "use" {
    loop.for %j0 = 0 to 4 step 1 {name = "j0"} {
      %w = memref.load %u[%j0, %j0] : memref<4x4xf32>
      memref.store %w, %y[%j0, %j0] : memref<4x4xf32>
    }
  }
  memref.dealloc %t : memref<4x4xf32>
  memref.dealloc %u : memref<4x4xf32>
  func.return
}
