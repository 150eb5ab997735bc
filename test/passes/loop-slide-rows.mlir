// RUN: dlpc-opt %s -p loop-slide-rows | filecheck %s
// RUN: dlpc-opt %s -p loop-slide-rows | dlpc-opt -p loop-slide-rows | filecheck %s

// A depthwise 3x3 tile (2 rows x 16, input rows of 18) marked by `tensorize dw/r1 slide`.
// Its tile loop (ho: 2 tiles of 2 accumulator vectors) is kept as it was under
// `#if !defined(__AVX512F__)` (loops renamed); under `#if defined(__AVX512F__)` a tile
// loop stepping by 4 runs both tiles' nests as one straight-line vector code: each weight
// loaded and broadcast once; each of the 6 input rows the two tiles read loaded once, as
// [0, 16) and [2, 18) (the second clamped to end at the row's end), its taps at +1 and +2
// shuffles of the two; each C vector loaded before its first multiply-add and stored
// once after its last. Rows go in order: C row ho receives its terms in the nest's
// order (r1, then r2).
// CHECK-LABEL: loop.kernel "dw"
// CHECK:       loop.for %[[S:.*]] = 0 to 4 step 2 {name = "ho.1", dlpc.cpp_if = "!defined(__AVX512F__)"} {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 3 step 1 {name = "r1.1", reduction, unroll = 3} {
// CHECK:                 memref.store %{{.*}}, %C[%{{.*}}, %{{.*}}] : memref<4x16xf32>
// CHECK:       loop.for %[[HO:.*]] = 0 to 4 step 4 {name = "ho_v16", dlpc.cpp_if = "defined(__AVX512F__)"} {
// CHECK:         loop.for %{{.*}} = 0 to 1 step 1 {name = "r1_v16"} {
// CHECK-NOT:       loop.for
// CHECK:           %[[K00:.*]] = memref.load %K[%[[Z:.*]], %[[Z]]] : memref<3x3xf32>
// CHECK-NEXT:      %[[B00:.*]] = vector.broadcast %[[K00]] : f32 to vector<16xf32>
// CHECK-NEXT:      %[[A0:.*]] = vector.load %X[%[[HO]], %[[Z]]] : memref<6x18xf32>, vector<16xf32>
// CHECK-NEXT:      %[[C0:.*]] = vector.load %C[%[[HO]], %[[Z]]] : memref<4x16xf32>, vector<16xf32>
// CHECK-NEXT:      %[[M0:.*]] = arith.mulf %[[A0]], %[[B00]] : vector<16xf32>
// CHECK-NEXT:      %[[S0:.*]] = arith.addf %[[C0]], %[[M0]] : vector<16xf32>
// CHECK:           %[[A1:.*]] = vector.load %X[%[[HO]], %{{.*}}] : memref<6x18xf32>, vector<16xf32>
// CHECK-NEXT:      vector.shuffle %[[A0]], %[[A1]] [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30]
// CHECK:           vector.shuffle %[[A0]], %[[A1]] [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30, 31]
// CHECK-COUNT-10:  vector.load %X[
// CHECK-NOT:       vector.load %X[
// CHECK-COUNT-4:   vector.store %{{.*}}, %C[%{{.*}}, %[[Z]]] : memref<4x16xf32>, vector<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NOT:   dlpc.slide

// One tile (ho 0 to 2): nothing to merge; the nest itself becomes the vector code, the
// nest as it was beside it
// CHECK-LABEL: loop.kernel "one"
// CHECK:       loop.for %{{.*}} = 0 to 2 step 2 {name = "ho"} {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 1 step 1 {name = "r1_v16", dlpc.cpp_if = "defined(__AVX512F__)"} {
// CHECK-COUNT-8:   vector.load %X[
// CHECK-NOT:       vector.load %X[
// CHECK-COUNT-2:   vector.store %{{.*}}, %C[
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 1 step 1 {name = "r1_scalar", dlpc.cpp_if = "!defined(__AVX512F__)"} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 3 step 1 {name = "r1.1", reduction, unroll = 3} {

// An unmarked nest is left alone.
// CHECK-LABEL: loop.kernel "plain"
// CHECK:       loop.for %{{.*}} = 0 to 16 step 1 {name = "w", vectorize}
// X a padded copy of S (the zero border, then S's rows at [1, 9) x [1, 65)), read by the
// nest alone: the vector code reads S in place and the copy moves under
// `#if !defined(__AVX512F__)` (a trip-1 loop), where the nest as scheduled still reads
// it. Merged tiles of 4 rows (ho_v16 steps 0, 4): row ho + 0 lies in the border when
// ho = 0 (its index tested: row 1 read instead, then zero), row ho + 5 when ho = 4;
// the first and last columns are zero lanes shuffled in (S's rows are whole vectors).
// CHECK-LABEL: loop.kernel "padded"
// CHECK:       %[[XP:.*]] = memref.alloca() : memref<10x66xf32>
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 1 step 1 {name = "z0_scalar", dlpc.cpp_if = "!defined(__AVX512F__)"} {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 10 step 1 {name = "z0"} {
// CHECK:         loop.for %{{.*}} = 1 to 9 step 1 {name = "c0"} {
// CHECK:       loop.for %{{.*}} = 0 to 8 step 2 {name = "ho.1", dlpc.cpp_if = "!defined(__AVX512F__)"} {
// CHECK:         memref.load %[[XP]][
// CHECK:       loop.for %[[HO:.*]] = 0 to 8 step 4 {name = "ho_v16", dlpc.cpp_if = "defined(__AVX512F__)"} {
// CHECK-NOT:     %[[XP]]
// CHECK:         %[[T:.*]] = arith.cmpi sge, %[[HO]], %{{.*}} : index
// CHECK:         %[[R:.*]] = arith.select %[[T]], %[[HO]], %{{.*}} : index
// CHECK:         %[[V:.*]] = vector.load %S[%{{.*}}, %{{.*}}] : memref<8x64xf32>, vector<16xf32>
// CHECK:         %[[Z:.*]] = arith.select %[[T]], %[[V]], %{{.*}} : vector<16xf32>
// CHECK-NOT:     %[[XP]]
// CHECK:         arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK-NOT:     %[[XP]]

// A zero written into the box after the fill: X is no padded copy of S, the vector code
// reads X and the copy stays where it was.
// CHECK-LABEL: loop.kernel "rezeroed"
// CHECK-NOT:   _scalar
// CHECK:       %[[XQ:.*]] = memref.alloca() : memref<10x66xf32>
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 10 step 1 {name = "z0"} {
// CHECK:       {name = "ho_v16", dlpc.cpp_if = "defined(__AVX512F__)"}
// CHECK:         vector.load %[[XQ]][
func.func @main(%X: memref<6x18xf32>, %K: memref<3x3xf32>, %C: memref<4x16xf32>, %S: memref<8x64xf32>, %D: memref<8x64xf32>) {
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
  loop.kernel "one" {
    loop.for %ho = 0 to 2 step 2 {name = "ho"} {
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
  loop.kernel "padded" {
    %xp = memref.alloca() : memref<10x66xf32>
    loop.for %z0 = 0 to 10 step 1 {name = "z0"} {
      loop.for %z1 = 0 to 66 step 1 {name = "z1"} {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %xp[%z0, %z1] : memref<10x66xf32>
      }
    }
    loop.for %c0 = 1 to 9 step 1 {name = "c0"} {
      loop.for %c1 = 1 to 65 step 1 {name = "c1"} {
        %m1 = arith.constant -1 : index
        %s0 = arith.addi %c0, %m1 : index
        %s1 = arith.addi %c1, %m1 : index
        %v = memref.load %S[%s0, %s1] : memref<8x64xf32>
        memref.store %v, %xp[%c0, %c1] : memref<10x66xf32>
      }
    }
    loop.for %ho = 0 to 8 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3, dlpc.slide} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 64 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %xp[%row, %col] : memref<10x66xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %D[%h, %w] : memref<8x64xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %D[%h, %w] : memref<8x64xf32>
            }
          }
        }
      }
    }
  }
  loop.kernel "rezeroed" {
    %xp = memref.alloca() : memref<10x66xf32>
    loop.for %z0 = 0 to 10 step 1 {name = "z0"} {
      loop.for %z1 = 0 to 66 step 1 {name = "z1"} {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %xp[%z0, %z1] : memref<10x66xf32>
      }
    }
    loop.for %c0 = 1 to 9 step 1 {name = "c0"} {
      loop.for %c1 = 1 to 65 step 1 {name = "c1"} {
        %m1 = arith.constant -1 : index
        %s0 = arith.addi %c0, %m1 : index
        %s1 = arith.addi %c1, %m1 : index
        %v = memref.load %S[%s0, %s1] : memref<8x64xf32>
        memref.store %v, %xp[%c0, %c1] : memref<10x66xf32>
      }
    }
    loop.for %y1 = 1 to 65 step 1 {name = "y1"} {
      %zero2 = arith.constant 0.000000e+00 : f32
      %one = arith.constant 4 : index
      memref.store %zero2, %xp[%one, %y1] : memref<10x66xf32>
    }
    loop.for %ho = 0 to 8 step 2 {name = "ho"} {
      loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction, unroll = 3, dlpc.slide} {
        loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction, unroll = 3} {
          loop.for %hi = 0 to 2 step 1 {name = "hi", unroll = 2} {
            loop.for %w = 0 to 64 step 1 {name = "w", vectorize} {
              %h = arith.addi %ho, %hi : index
              %row = arith.addi %h, %r1 : index
              %col = arith.addi %w, %r2 : index
              %x = memref.load %xp[%row, %col] : memref<10x66xf32>
              %k = memref.load %K[%r1, %r2] : memref<3x3xf32>
              %c = memref.load %D[%h, %w] : memref<8x64xf32>
              %p = arith.mulf %x, %k : f32
              %s = arith.addf %c, %p : f32
              memref.store %s, %D[%h, %w] : memref<8x64xf32>
            }
          }
        }
      }
    }
  }
  func.return
}
