// RUN: not dlpc-opt %s -p 'loop-split{kernel=relu loop=i1 factor=48}' 2>&1 | filecheck %s --check-prefix=FACTOR
// RUN: not dlpc-opt %s -p 'loop-split{kernel=relu loop=i7 factor=4}' 2>&1 | filecheck %s --check-prefix=LOOP
// RUN: not dlpc-opt %s -p 'loop-split{kernel=nope loop=i1 factor=4}' 2>&1 | filecheck %s --check-prefix=KERNEL
// RUN: not dlpc-opt %s -p 'loop-split{kernel=relu loop=i1 factor=4 outer=i0}' 2>&1 | filecheck %s --check-prefix=NAME

// FACTOR: dlpc-opt: error: expected split factor 48 to divide the trip count 64 of loop relu/i1
// LOOP: dlpc-opt: error: kernel 'relu' has no loop named 'i7' (loops: i0, i1)
// KERNEL: dlpc-opt: error: no kernel named 'nope' (kernels: relu)
// NAME: dlpc-opt: error: loop name 'i0' is already used in kernel 'relu'
func.func @main(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<8x64xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %y[%i0, %i1] : memref<8x64xf32>
      }
    }
  }
  func.return
}
