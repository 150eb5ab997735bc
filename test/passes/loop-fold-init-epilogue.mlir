// RUN: dlpc-opt %s -p loop-fold-init-epilogue | filecheck %s

// A decomposed reduction whose accumulator tile (cache_write at %t) holds every
// reduction loop: the copy-in stores the init value, the copy-out stores the epilogue
// (bias, relu) of the accumulated value at the element's own index; the init and
// epilogue nests are gone.
// CHECK-LABEL: func.func @tile
// CHECK-NOT:     i_init
// CHECK:         loop.for %[[T:.*]] = 0 to 8 step 4 {name = "t", parallel} {
// The copy-in of zeros is then peeled into the first iteration of the reduction: the
// tile starts as the first product, the reduction loop runs from 1.
// CHECK-NOT:       acc_in0
// CHECK:           loop.for %[[R:.*]] = 0 to 1 step 1 {name = "r0_first"} {
// CHECK-NEXT:        loop.for %[[A:.*]] = 0 to 4 step 1 {name = "a_first", vectorize} {
// CHECK-NEXT:          %[[I0:.*]] = arith.addi %[[T]], %[[A]] : index
// CHECK-NEXT:          %[[X0:.*]] = memref.load %x[%[[I0]], %[[R]]] : memref<8x4xf32>
// CHECK-NEXT:          memref.store %[[X0]], %acc[%[[A]]] : memref<4xf32>
// CHECK:           loop.for %{{.*}} = 1 to 4 step 1 {name = "r0", reduction} {
// CHECK:             arith.addf
// CHECK:           loop.for %[[O:.*]] = 0 to 4 step 1 {name = "acc_out0", vectorize} {
// CHECK-NEXT:        %[[I:.*]] = arith.addi %[[T]], %[[O]] : index
// CHECK-NEXT:        %[[S:.*]] = memref.load %acc[%[[O]]] : memref<4xf32>
// CHECK-NEXT:        %[[B:.*]] = memref.load %bias[%[[I]]] : memref<8xf32>
// CHECK-NEXT:        %[[Y:.*]] = arith.addf %[[S]], %[[B]] : f32
// CHECK-NEXT:        %[[Z2:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %[[R:.*]] = arith.maximumf %[[Y]], %[[Z2]] : f32
// CHECK-NEXT:        memref.store %[[R]], %out[%[[I]]] : memref<8xf32>
// CHECK-NOT:     i_post
// CHECK:         func.return
func.func @tile(%x: memref<8x4xf32>, %bias: memref<8xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 8 step 4 {name = "t", parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 8 step 1 {name = "i_post"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %b = memref.load %bias[%i] : memref<8xf32>
      %y = arith.addf %s, %b : f32
      %z = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %y, %z : f32
      memref.store %r, %out[%i] : memref<8xf32>
    }
  }
  func.return
}

// A gemm-like tile whose reduction is blocked outside it (the tile is copied in and out
// once per k block): the copy-in must keep reading the partial sums, so nothing folds.
// CHECK-LABEL: func.func @blocked
// CHECK:         {name = "i_init"}
// CHECK:         memref.load %out
// CHECK:         {name = "i_post"}
func.func @blocked(%x: memref<8x4xf32>, %out: memref<8xf32>) {
  loop.kernel "kb" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %ro = 0 to 4 step 2 {name = "r0o", reduction} {
      loop.for %t = 0 to 8 step 4 {name = "t"} {
        %acc = memref.alloca() : memref<4xf32>
        loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
          %i = arith.addi %t, %a : index
          %v = memref.load %out[%i] : memref<8xf32>
          memref.store %v, %acc[%a] : memref<4xf32>
        }
        loop.for %ri = 0 to 2 step 1 {name = "r0i", reduction} {
          loop.for %a = 0 to 4 step 1 {name = "a"} {
            %i = arith.addi %t, %a : index
            %r = arith.addi %ro, %ri : index
            %xv = memref.load %x[%i, %r] : memref<8x4xf32>
            %av = memref.load %acc[%a] : memref<4xf32>
            %s = arith.addf %av, %xv : f32
            memref.store %s, %acc[%a] : memref<4xf32>
          }
        }
        loop.for %a = 0 to 4 step 1 {name = "acc_out0"} {
          %i = arith.addi %t, %a : index
          %s = memref.load %acc[%a] : memref<4xf32>
          memref.store %s, %out[%i] : memref<8xf32>
        }
      }
    }
    loop.for %i = 0 to 8 step 1 {name = "i_post"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %y = arith.addf %s, %s : f32
      memref.store %y, %out[%i] : memref<8xf32>
    }
  }
  func.return
}

// An epilogue that reads the output at another element (a reversal): not elementwise
// over the tile, so nothing folds.
// CHECK-LABEL: func.func @shifted
// CHECK:         {name = "i_init"}
// CHECK:         {name = "i_post"}
func.func @shifted(%x: memref<8x4xf32>, %out: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "ks" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 8 step 4 {name = "t"} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a"} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0"} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 8 step 1 {name = "i_post"} {
      %c7 = arith.constant 7 : index
      %j = arith.subi %c7, %i : index
      %s = memref.load %out[%j] : memref<8xf32>
      memref.store %s, %out[%i] : memref<8xf32>
    }
  }
  func.return
}

// A short version's kernel (loop-short-extents): its init and epilogue nests run over
// a symbolic extent (dlpc.extent) to 4 of the output's 8 rows; past them lies padding
// that no result reads, so they fold all the same.
// CHECK-LABEL: func.func @short
// CHECK-NOT:     i_init
// CHECK:         loop.for %{{.*}} = 0 to 4 step 4 {name = "t", parallel, dlpc.extent = "seq"} {
// CHECK-NOT:       acc_in0
// CHECK:           loop.for %{{.*}} = 0 to 1 step 1 {name = "r0_first"} {
// CHECK:           loop.for %[[O:.*]] = 0 to 4 step 1 {name = "acc_out0", vectorize} {
// CHECK:             memref.load %bias
// CHECK-NOT:     i_post
// CHECK:         func.return
func.func @short(%x: memref<8x4xf32>, %bias: memref<8xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i_init", dlpc.extent = "seq"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 4 step 4 {name = "t", parallel, dlpc.extent = "seq"} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 4 step 1 {name = "i_post", dlpc.extent = "seq"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %b = memref.load %bias[%i] : memref<8xf32>
      %y = arith.addf %s, %b : f32
      memref.store %y, %out[%i] : memref<8xf32>
    }
  }
  func.return
}

// A short binding's static kernel (dlpc.short, loop-short-extents): its loops lost their
// marks but stop short of the buffer all the same: they fold.
// CHECK-LABEL: func.func @static_short
// CHECK-NOT:     i_init
// CHECK:         loop.for %{{.*}} = 0 to 4 step 4 {name = "t", parallel} {
// CHECK:           loop.for %{{.*}} = 0 to 1 step 1 {name = "r0_first"} {
// CHECK-NOT:     i_post
// CHECK:         func.return
func.func @static_short(%x: memref<8x4xf32>, %bias: memref<8xf32>, %out: memref<8xf32>) {
  loop.kernel "k" attributes {dlpc.short} {
    loop.for %i = 0 to 4 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 4 step 4 {name = "t", parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 4 step 1 {name = "i_post"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %b = memref.load %bias[%i] : memref<8xf32>
      %y = arith.addf %s, %b : f32
      memref.store %y, %out[%i] : memref<8xf32>
    }
  }
  func.return
}

// The same nests without the mark cover part of the output: left as they are.
// CHECK-LABEL: func.func @part
// CHECK:         i_init
// CHECK:         i_post
func.func @part(%x: memref<8x4xf32>, %bias: memref<8xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 4 step 4 {name = "t", parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 4 step 1 {name = "i_post"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %b = memref.load %bias[%i] : memref<8xf32>
      %y = arith.addf %s, %b : f32
      memref.store %y, %out[%i] : memref<8xf32>
    }
  }
  func.return
}
