// RUN: not dlpc-opt %s -p loop-slide-rows 2>&1 | filecheck %s

// a nest marked by `tensorize ... slide` that a later step changed (here its innermost
// loop is no longer vectorized) is refused, naming the loop
// CHECK: dlpc-opt: error: loop novec/r1 must head a perfect nest whose innermost loop is vectorized over a multiple of 16 from 0 by 1, the loops above it at most 96 iterations in all, for 'slide'
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>) {
  loop.kernel "novec" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3, dlpc.slide} {
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
  func.return
}
