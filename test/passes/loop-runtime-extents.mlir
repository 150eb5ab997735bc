// RUN: dlpc-opt %s --split-input-file -p loop-runtime-extents | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p loop-runtime-extents -p loop-runtime-extents | filecheck %s

// A loop over a symbolic extent (dlpc.extent), split by a schedule into i0o (step 4,
// dlpc.extent_id 1) and i0i (its index is i0o + i0i: dlpc.extent_base names id 1):
// each loop's body runs only below its limit, computed from the call's seq (read from
// dlpc_dims) just before the loop (seq - i0o for i0i); the body is then the compare and
// the scf.if alone (the C printer stops the loop at the limit); the marks are gone, so a
// second run changes nothing.

// CHECK-LABEL: func.func @main
// CHECK:         %[[K:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[SEQ:.*]] = memref.load %dlpc_dims[%[[K]]] : memref<1xi64>
// CHECK-NEXT:    %[[N:.*]] = arith.index_cast %[[SEQ]] : i64 to index
// CHECK-NEXT:    loop.for %[[O:.*]] = 0 to 16 step 4 {name = "i0o", parallel} {
// CHECK-NEXT:      %[[C:.*]] = arith.cmpi slt, %[[O]], %[[N]] : index
// CHECK-NEXT:      scf.if %[[C]] {
// CHECK-NEXT:        %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:        %[[SEQ2:.*]] = memref.load %dlpc_dims
// CHECK-NEXT:        %[[N2:.*]] = arith.index_cast %[[SEQ2]] : i64 to index
// CHECK-NEXT:        %[[L:.*]] = arith.subi %[[N2]], %[[O]] : index
// CHECK-NEXT:        loop.for %[[I:.*]] = 0 to 4 step 1 {name = "i0i"} {
// CHECK-NEXT:          %[[C2:.*]] = arith.cmpi slt, %[[I]], %[[L]] : index
// CHECK-NEXT:          scf.if %[[C2]] {
// CHECK-NEXT:            arith.addi %[[O]], %[[I]] : index
// CHECK-NOT:     dlpc.extent
func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0o = 0 to 16 step 4 {name = "i0o", parallel, dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %i0i = 0 to 4 step 1 {name = "i0i", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i0 = arith.addi %i0o, %i0i : index
        loop.for %i1 = 0 to 8 step 1 {name = "i1", vectorize} {
          %v = memref.load %x[%i0, %i1] : memref<16x8xf32>
          %n = arith.negf %v : f32
          memref.store %n, %out0[%i0, %i1] : memref<16x8xf32>
        }
      }
    }
  }
  func.return
}

// -----

// An unrolled marked loop runs to its static bound (past seq it computes padding).
// CHECK-LABEL: func.func @main
// CHECK:         loop.for %{{.*}} = 0 to 4 step 1 {name = "i0", unroll = 4} {
// CHECK-NEXT:      memref.load
func.func @main(%x: memref<4xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<4xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", unroll = 4 : i64, dlpc.extent = "seq"} {
      %v = memref.load %x[%i0] : memref<4xf32>
      memref.store %v, %out0[%i0] : memref<4xf32>
    }
  }
  func.return
}

// -----

// A kernel reducing over seq (dlpc.exact names r0): its marked reduction loop must stop
// exactly; a vector loop is stopped at seq (the C printer clamps its bound, so it stays
// one vector loop).
// CHECK-LABEL: func.func @main
// CHECK:         %[[SEQ:.*]] = memref.load %dlpc_dims
// CHECK-NEXT:    %[[N:.*]] = arith.index_cast %[[SEQ]] : i64 to index
// CHECK-NEXT:    loop.for %[[R:.*]] = 0 to 16 step 1 {name = "r0", vectorize} {
// CHECK-NEXT:      %[[C:.*]] = arith.cmpi slt, %[[R]], %[[N]] : index
// CHECK-NEXT:      scf.if %[[C]] {
// CHECK-NEXT:        memref.load %x
func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "sum_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %r0 = 0 to 16 step 1 {name = "r0", vectorize, dlpc.extent = "seq"} {
      %v = memref.load %x[%r0] : memref<16xf32>
      %a = memref.load %out0[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %out0[] : memref<f32>
    }
  }
  func.return
}

// -----

// An exact register tile (unrolled) runs in two versions: the whole tile unguarded when
// it fits below seq (r0_whole), else with a guard per iteration.
// CHECK-LABEL: func.func @main
// CHECK:         %[[END:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[FITS:.*]] = arith.cmpi sle, %[[END]], %{{.*}} : index
// CHECK-NEXT:    scf.if %[[FITS]] {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 4 step 1 {name = "r0_whole", unroll = 4} {
// CHECK-NEXT:        memref.load %x
// CHECK:         } else {
// CHECK:           loop.for %[[R:.*]] = 0 to 4 step 1 {name = "r0", unroll = 4} {
// CHECK-NEXT:        arith.cmpi slt, %[[R]], %{{.*}} : index
// CHECK-NEXT:        scf.if
func.func @main(%x: memref<4xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "sum_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %r0 = 0 to 4 step 1 {name = "r0", unroll = 4 : i64, dlpc.extent = "seq"} {
      %v = memref.load %x[%r0] : memref<4xf32>
      %a = memref.load %out0[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %out0[] : memref<f32>
    }
  }
  func.return
}

// -----

// A register tile over seq (i1i: unrolled, index i1r + i1i; j: a vector loop inside it)
// under its split loop i1r runs in two versions chosen once per i1r iteration: when the
// tile's 4 rows lie below seq (i1r + 4 <= seq), a copy of i1r's body whose tile loops
// have static bounds (i1i_tile, j_tile: no guard, the accumulators stay in registers),
// else the body as it was with the rows stopped at seq (a call of 1 row computes 1 row).
// CHECK-LABEL: func.func @main
// CHECK:         loop.for %[[R:.*]] = 0 to 16 step 4 {name = "i1r"} {
// CHECK-NEXT:      arith.cmpi slt, %[[R]]
// CHECK-NEXT:      scf.if
// CHECK-NEXT:        %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:        %[[SEQ:.*]] = memref.load %dlpc_dims
// CHECK-NEXT:        %[[N:.*]] = arith.index_cast %[[SEQ]] : i64 to index
// CHECK-NEXT:        %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:        %[[END:.*]] = arith.addi %[[R]], %[[FOUR]] : index
// CHECK-NEXT:        %[[FITS:.*]] = arith.cmpi sle, %[[END]], %[[N]] : index
// CHECK-NEXT:        scf.if %[[FITS]] {
// CHECK:               loop.for %{{.*}} = 1 to 8 step 1 {name = "r0_tile", reduction} {
// CHECK-NEXT:            loop.for %[[TI:.*]] = 0 to 4 step 1 {name = "i1i_tile", unroll = 4} {
// CHECK-NEXT:              loop.for %{{.*}} = 0 to 8 step 1 {name = "j_tile", vectorize} {
// CHECK-NEXT:                arith.addi %[[R]], %[[TI]]
// CHECK:             } else {
// CHECK:               loop.for %{{.*}} = 1 to 8 step 1 {name = "r0", reduction} {
// CHECK:                 %[[L:.*]] = arith.subi %{{.*}}, %[[R]] : index
// CHECK-NEXT:            loop.for %[[I:.*]] = 0 to 4 step 1 {name = "i1i", unroll = 4} {
// CHECK-NEXT:              arith.cmpi slt, %[[I]], %[[L]] : index
// CHECK-NEXT:              scf.if
// CHECK-NEXT:                loop.for %{{.*}} = 0 to 8 step 1 {name = "j", vectorize} {
// CHECK-NOT:     dlpc.extent
func.func @main(%a: memref<16x8xf32>, %w: memref<8x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "linear_0" {
    loop.for %i1r = 0 to 16 step 4 {name = "i1r", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      %acc = memref.alloca() : memref<4x8xf32>
      loop.for %r0f = 0 to 1 step 1 {name = "r0_first"} {
        loop.for %i1f = 0 to 4 step 1 {name = "i1i_first", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          loop.for %jf = 0 to 8 step 1 {name = "j_first", vectorize} {
            %row = arith.addi %i1r, %i1f : index
            %x = memref.load %a[%row, %r0f] : memref<16x8xf32>
            %y = memref.load %w[%r0f, %jf] : memref<8x8xf32>
            %p = arith.mulf %x, %y : f32
            memref.store %p, %acc[%i1f, %jf] : memref<4x8xf32>
          }
        }
      }
      loop.for %r0 = 1 to 8 step 1 {name = "r0", reduction} {
        loop.for %i1i = 0 to 4 step 1 {name = "i1i", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          loop.for %j = 0 to 8 step 1 {name = "j", vectorize} {
            %row = arith.addi %i1r, %i1i : index
            %x = memref.load %a[%row, %r0] : memref<16x8xf32>
            %y = memref.load %w[%r0, %j] : memref<8x8xf32>
            %p = arith.mulf %x, %y : f32
            %s = memref.load %acc[%i1i, %j] : memref<4x8xf32>
            %t = arith.addf %s, %p : f32
            memref.store %t, %acc[%i1i, %j] : memref<4x8xf32>
          }
        }
      }
      loop.for %o1 = 0 to 4 step 1 {name = "acc_out1"} {
        loop.for %o2 = 0 to 8 step 1 {name = "acc_out2", vectorize} {
          %row = arith.addi %i1r, %o1 : index
          %v = memref.load %acc[%o1, %o2] : memref<4x8xf32>
          memref.store %v, %out0[%row, %o2] : memref<16x8xf32>
        }
      }
    }
  }
  func.return
}

// -----

// The columns of a register tile (a vector loop over seq inside an unrolled loop) run to
// their static bound, not stopped at seq: with a runtime trip count the tile's
// accumulators would leave the registers; past seq they compute padding nobody reads.
// CHECK-LABEL: func.func @main
// CHECK:         loop.for %{{.*}} = 0 to 4 step 1 {name = "i", unroll = 4} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 16 step 1 {name = "j", vectorize} {
// CHECK-NEXT:        memref.load %x
func.func @main(%x: memref<4x16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<4x16xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i = 0 to 4 step 1 {name = "i", unroll = 4 : i64} {
      loop.for %j = 0 to 16 step 1 {name = "j", vectorize, dlpc.extent = "seq"} {
        %v = memref.load %x[%i, %j] : memref<4x16xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i, %j] : memref<4x16xf32>
      }
    }
  }
  func.return
}

// -----

// A loop a fuse made of a marked outer loop and a static inner one of 8 iterations
// (dlpc.extent_scale = 8) stops at 8 times the outer limit: 8 * (seq - i0o).
// CHECK-LABEL: func.func @main
// CHECK:         loop.for %[[O:.*]] = 0 to 16 step 4 {name = "i0o"} {
// CHECK:           %[[L:.*]] = arith.subi %{{.*}}, %[[O]] : index
// CHECK-NEXT:      %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:      %[[S:.*]] = arith.muli %[[L]], %[[EIGHT]] : index
// CHECK-NEXT:      loop.for %[[F:.*]] = 0 to 32 step 1 {name = "f"} {
// CHECK-NEXT:        arith.cmpi slt, %[[F]], %[[S]] : index
// CHECK-NOT:     dlpc.extent
func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "neg_0" {
    loop.for %i0o = 0 to 16 step 4 {name = "i0o", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %f = 0 to 32 step 1 {name = "f", dlpc.extent = "seq", dlpc.extent_base = [1 : i64], dlpc.extent_scale = 8 : i64} {
        %c8 = arith.constant 8 : index
        %i0i = arith.divui %f, %c8 : index
        %i1 = arith.remui %f, %c8 : index
        %i0 = arith.addi %i0o, %i0i : index
        %v = memref.load %x[%i0, %i1] : memref<16x8xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<16x8xf32>
      }
    }
  }
  func.return
}

// -----

// The tile's write-back marked by cache_write (acc_out1: the tile's rows from the same
// base) is static in the version where the tile fits, and stopped at seq in the other:
// at seq 1 one row is written back, not four.
// CHECK-LABEL: func.func @main
// CHECK:         scf.if %{{.*}} {
// CHECK:           loop.for %{{.*}} = 0 to 4 step 1 {name = "acc_out1_tile"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 8 step 1 {name = "acc_out2_tile", vectorize} {
// CHECK:         } else {
// CHECK:           loop.for %[[O:.*]] = 0 to 4 step 1 {name = "acc_out1"} {
// CHECK-NEXT:        arith.cmpi slt, %[[O]], %{{.*}} : index
// CHECK-NEXT:        scf.if
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 8 step 1 {name = "acc_out2", vectorize} {
// CHECK-NOT:     dlpc.extent
func.func @main(%a: memref<16x8xf32>, %w: memref<8x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>) attributes {dlpc.dims = ["seq"], dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "linear_0" {
    loop.for %i1r = 0 to 16 step 4 {name = "i1r", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      %acc = memref.alloca() : memref<4x8xf32>
      loop.for %r0f = 0 to 1 step 1 {name = "r0_first"} {
        loop.for %i1f = 0 to 4 step 1 {name = "i1i_first", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          loop.for %jf = 0 to 8 step 1 {name = "j_first", vectorize} {
            %row = arith.addi %i1r, %i1f : index
            %x = memref.load %a[%row, %r0f] : memref<16x8xf32>
            %y = memref.load %w[%r0f, %jf] : memref<8x8xf32>
            %p = arith.mulf %x, %y : f32
            memref.store %p, %acc[%i1f, %jf] : memref<4x8xf32>
          }
        }
      }
      loop.for %r0 = 1 to 8 step 1 {name = "r0", reduction} {
        loop.for %i1i = 0 to 4 step 1 {name = "i1i", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          loop.for %j = 0 to 8 step 1 {name = "j", vectorize} {
            %row = arith.addi %i1r, %i1i : index
            %x = memref.load %a[%row, %r0] : memref<16x8xf32>
            %y = memref.load %w[%r0, %j] : memref<8x8xf32>
            %p = arith.mulf %x, %y : f32
            %s = memref.load %acc[%i1i, %j] : memref<4x8xf32>
            %t = arith.addf %s, %p : f32
            memref.store %t, %acc[%i1i, %j] : memref<4x8xf32>
          }
        }
      }
      loop.for %o1 = 0 to 4 step 1 {name = "acc_out1", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        loop.for %o2 = 0 to 8 step 1 {name = "acc_out2", vectorize} {
          %row = arith.addi %i1r, %o1 : index
          %v = memref.load %acc[%o1, %o2] : memref<4x8xf32>
          memref.store %v, %out0[%row, %o2] : memref<16x8xf32>
        }
      }
    }
  }
  func.return
}
