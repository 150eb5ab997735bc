// RUN: dlpc-opt %s -p loop-slide-rows | filecheck %s
// RUN: dlpc-opt %s -p loop-slide-rows | dlpc-opt -p loop-slide-rows | filecheck %s

// A depthwise 3x3 tile (2 rows x 16, input rows of 18) marked by `tensorize dw/r1 slide`:
// in a trip-1 loop the C printer wraps in `#if defined(__AVX512F__)`, the nest becomes
// straight-line vector code. Each weight is loaded and broadcast once; input row ho is
// loaded once as [0, 16) and [2, 18) (the second clamped to end at the row's end), its
// taps at +1 and +2 shuffles of the two; each C vector is loaded before its first
// multiply-add and stored once after its last. Rows go in order (ho, ho + 1, ...): C row
// ho receives its terms in the nest's order (r1, then r2). The nest as it was (renamed)
// follows under `#if !defined(__AVX512F__)`.
// CHECK-LABEL: loop.kernel "dw"
// CHECK:       loop.for %ho = 0 to 4 step 2 {name = "ho"} {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 1 step 1 {name = "r1_v16", dlpc.cpp_if = "defined(__AVX512F__)"} {
// CHECK-NOT:       loop.for
// CHECK:           %[[K00:.*]] = memref.load %K[%[[Z:.*]], %[[Z]]] : memref<3x3xf32>
// CHECK-NEXT:      %[[B00:.*]] = vector.broadcast %[[K00]] : f32 to vector<16xf32>
// CHECK-NEXT:      %[[A0:.*]] = vector.load %X[%ho, %[[Z]]] : memref<6x18xf32>, vector<16xf32>
// CHECK-NEXT:      %[[C0:.*]] = vector.load %C[%ho, %[[Z]]] : memref<4x16xf32>, vector<16xf32>
// CHECK-NEXT:      %[[M0:.*]] = arith.mulf %[[A0]], %[[B00]] : vector<16xf32>
// CHECK-NEXT:      %[[S0:.*]] = arith.addf %[[C0]], %[[M0]] : vector<16xf32>
// CHECK:           %[[A1:.*]] = vector.load %X[%ho, %{{.*}}] : memref<6x18xf32>, vector<16xf32>
// CHECK-NEXT:      vector.shuffle %[[A0]], %[[A1]] [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30]
// CHECK:           vector.shuffle %[[A0]], %[[A1]] [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30, 31]
// CHECK-NOT:       vector.load %X[%ho,
// CHECK-COUNT-2:   vector.store %{{.*}}, %C[%{{.*}}, %[[Z]]] : memref<4x16xf32>, vector<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 1 step 1 {name = "r1_scalar", dlpc.cpp_if = "!defined(__AVX512F__)"} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "r1.1", reduction, unroll = 3} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 3 step 1 {name = "r2.1", reduction, unroll = 3} {
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 2 step 1 {name = "hi.1", unroll = 2} {
// CHECK-NEXT:            loop.for %{{.*}} = 0 to 16 step 1 {name = "w.1", vectorize} {
// CHECK:                   memref.store %{{.*}}, %C[%{{.*}}, %{{.*}}] : memref<4x16xf32>
// CHECK-NOT:   dlpc.slide

// An unmarked nest is left alone.
// CHECK-LABEL: loop.kernel "plain"
// CHECK:       loop.for %{{.*}} = 0 to 16 step 1 {name = "w", vectorize}
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>) {
  loop.kernel "dw" {
    loop.for %ho = 0 to 4 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3, dlpc.slide} {
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
  loop.kernel "plain" {
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
