// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=mm loop=i0 intrinsic=conv}' 2>&1 | filecheck %s --check-prefix=INTRIN
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=mm loop=i1 intrinsic=gemm}' 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=big loop=i0 intrinsic=gemm}' 2>&1 | filecheck %s --check-prefix=EXTENT
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=max loop=i0 intrinsic=gemm}' 2>&1 | filecheck %s --check-prefix=MISMATCH
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=wide loop=i0 intrinsic=dot}' 2>&1 | filecheck %s --check-prefix=DOTEXTENT
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=short loop=i0 intrinsic=dot}' 2>&1 | filecheck %s --check-prefix=DOTSHORT
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=cols loop=i0 intrinsic=dot}' 2>&1 | filecheck %s --check-prefix=DOTREAD
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=stepped loop=i0 intrinsic=gemm4}' 2>&1 | filecheck %s --check-prefix=ROWSTEP
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=once loop=i0 intrinsic=gemm_pipe}' 2>&1 | filecheck %s --check-prefix=PIPEONCE
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=stepped loop=i0 intrinsic=gemm_pipe}' 2>&1 | filecheck %s --check-prefix=PIPESTEP
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=rowdep loop=i0 intrinsic=gemm_pipe}' 2>&1 | filecheck %s --check-prefix=PIPEROW
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=elsewhere loop=i0 intrinsic=gemm}' 2>&1 | filecheck %s --check-prefix=ELSEWHERE

// INTRIN: dlpc-opt: error: unknown intrinsic 'conv' for loop mm/i0 (known: gemm, gemmN, gemmNxM, gemm_pipe, dot, slide)
// SHAPE: dlpc-opt: error: loop mm/i1 must head a perfect nest of exactly three loops for 'gemm'
// EXTENT: dlpc-opt: error: gemm tile 64x32 at loop big/i0 exceeds the register file (mr <= 24, nr <= 128, mr * nr <= 512)
// MISMATCH: dlpc-opt: error: the nest at loop max/i0 does not store a sum C + A * B
// DOTEXTENT: dlpc-opt: error: dot tile 5x5 at loop wide/i0 exceeds the register file (mr * nr <= 24)
// DOTSHORT: dlpc-opt: error: dot at loop short/i0 needs a unit-step reduction of at least 16 iterations
// DOTREAD: dlpc-opt: error: the factors in the nest at loop cols/i0 are not both read along the reduction
// ROWSTEP: dlpc-opt: error: the rows loop of the gemm at loop stepped/i0 must step by 1
// PIPEONCE: dlpc-opt: error: gemm_pipe at loop once/i0 needs a reduction of at least 2 iterations
// PIPESTEP: dlpc-opt: error: the rows and columns loops of the gemm_pipe at loop stepped/i0 must step by 1
// PIPEROW: dlpc-opt: error: the factor read along the columns of the gemm_pipe at loop rowdep/i0 must not depend on its rows and must have affine indices
// ELSEWHERE: dlpc-opt: error: the nest at loop elsewhere/i0 does not accumulate into the element it stores
func.func @main(%A: memref<64x8xf32>, %B: memref<8x32xf32>, %C: memref<64x32xf32>,
                %X: memref<5x32xf32>, %W: memref<5x32xf32>, %Y: memref<5x5xf32>, %V: memref<32x5xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "elsewhere" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %r0] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "big" {
    loop.for %i0 = 0 to 64 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "max" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %c = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %s = arith.maximumf %c, %a : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "wide" {
    loop.for %i0 = 0 to 5 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 5 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
          %a = memref.load %X[%i0, %r0] : memref<5x32xf32>
          %b = memref.load %W[%i1, %r0] : memref<5x32xf32>
          %c = memref.load %Y[%i0, %i1] : memref<5x5xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Y[%i0, %i1] : memref<5x5xf32>
        }
      }
    }
  }
  loop.kernel "short" {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %X[%i0, %r0] : memref<5x32xf32>
          %b = memref.load %W[%i1, %r0] : memref<5x32xf32>
          %c = memref.load %Y[%i0, %i1] : memref<5x5xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Y[%i0, %i1] : memref<5x5xf32>
        }
      }
    }
  }
  loop.kernel "stepped" {
    loop.for %i0 = 0 to 64 step 2 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "once" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i0, %i1] : memref<64x32xf32>
        }
      }
    }
  }
  loop.kernel "rowdep" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<64x8xf32>
          %b = memref.load %C[%i0, %i1] : memref<64x32xf32>
          %c = memref.load %Y[%i0, %i1] : memref<5x5xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Y[%i0, %i1] : memref<5x5xf32>
        }
      }
    }
  }
  loop.kernel "cols" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 5 step 1 {name = "i1"} {
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
          %a = memref.load %X[%i0, %r0] : memref<5x32xf32>
          %b = memref.load %V[%r0, %i1] : memref<32x5xf32>
          %c = memref.load %Y[%i0, %i1] : memref<5x5xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Y[%i0, %i1] : memref<5x5xf32>
        }
      }
    }
  }
  func.return
}
