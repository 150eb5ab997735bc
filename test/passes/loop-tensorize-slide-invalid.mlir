// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=novec loop=r1 intrinsic=slide}' 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=many loop=r1 intrinsic=slide}' 2>&1 | filecheck %s --check-prefix=MANY
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=maxk loop=r1 intrinsic=slide}' 2>&1 | filecheck %s --check-prefix=SUM
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=past loop=r1 intrinsic=slide}' 2>&1 | filecheck %s --check-prefix=ROW
// RUN: not dlpc-opt %s -p 'loop-tensorize{kernel=outer loop=r1 intrinsic=slide}' 2>&1 | filecheck %s --check-prefix=ROW

// the innermost loop not vectorized; 108 iterations above it (> 96); a max, not a sum;
// the window past X's row (columns up to 19 of 18); a column that moves with a loop
// outside the nest (where the row ends would not be known)
// SHAPE: dlpc-opt: error: loop novec/r1 must head a perfect nest whose innermost loop is vectorized over a multiple of 16 from 0 by 1, the loops above it at most 96 iterations in all, for 'slide'
// MANY: dlpc-opt: error: loop many/r1 must head a perfect nest whose innermost loop is vectorized over a multiple of 16 from 0 by 1, the loops above it at most 96 iterations in all, for 'slide'
// SUM: dlpc-opt: error: the nest at loop maxk/r1 does not store a sum C + X * K
// ROW: dlpc-opt: error: the nest at loop {{past|outer}}/r1 must read X's row along its vectorized loop (by 1, inside the nest and the row, rows of at least 16) and write a distinct C's row by 1
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>) {
  loop.kernel "novec" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w"} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>
            }
          }
        }
      }
    }
  }
  loop.kernel "many" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 12 step 1 {name = "hi", unroll = 12} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h0 = arith.addi %ho, %hi : index
              %h = arith.subi %h0, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>
            }
          }
        }
      }
    }
  }
  loop.kernel "maxk" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.maximumf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>
            }
          }
        }
      }
    }
  }
  loop.kernel "past" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %two = arith.constant 2 : index
              %col0 = arith.addi %w, %r2 : index
              %col = arith.addi %col0, %two : index
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>
            }
          }
        }
      }
    }
  }
  loop.kernel "outer" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %ho : index
              %x = memref.load %X[%row, %col] : memref<6x18xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %C[%h, %w] : memref<4x16xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %C[%h, %w] : memref<4x16xf32>
            }
          }
        }
      }
    }
  }
  func.return
}
