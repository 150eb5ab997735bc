// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=dw loop=r1 intrinsic=slide}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-tensorize{kernel=dw loop=r1 intrinsic=slide},loop-slide-rows' | filecheck %s --check-prefix=ROWS

// `tensorize dw/r1 slide` checks the nest and only marks its head (`dlpc.slide`); the C
// target's loop-slide-rows rewrites it (test/passes/loop-slide-rows.mlir)
// CHECK:      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3, dlpc.slide} {
// CHECK-NEXT:   loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
// CHECK-NEXT:     loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
// CHECK-NEXT:       loop.for %w = 0 to 16 step 1 {name = "w", vectorize} {
// ROWS:       {name = "ho.1", dlpc.cpp_if = "!defined(__AVX512F__)"}
// ROWS:       {name = "ho_v16", dlpc.cpp_if = "defined(__AVX512F__)"}
// ROWS-COUNT-36: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// ROWS-NOT:   arith.mulf
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>) {
  loop.kernel "dw" {
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
