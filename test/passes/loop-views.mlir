// RUN: dlpc-opt %s --split-input-file -p loop-views | filecheck %s

// A reshape into a fresh intermediate is an alias of its source: no copy kernel; the
// source is freed at the later of its dealloc and the alias's (here its own: %a is read
// after %r dies). A reshape into an output of @main stays a copy.
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "exp_0"
// CHECK-NOT:     loop.kernel "reshape_1"
// CHECK:         %[[R:.*]] = memref.reinterpret_cast %a to offset: [0], sizes: [2, 16], strides: [16, 1] : memref<4x8xf32> to memref<2x16xf32>
// CHECK-NEXT:    loop.kernel "neg_2"
// CHECK:           memref.load %[[R]][%{{.*}}, %{{.*}}] : memref<2x16xf32>
// CHECK-NOT:     memref.dealloc
// CHECK:         loop.kernel "reshape_3"
// CHECK:         memref.dealloc %a : memref<4x8xf32>
// CHECK-NEXT:    func.return
func.func @main(%x: memref<4x8xf32>, %out0: memref<2x16xf32>, %out1: memref<32xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %a = memref.alloc() : memref<4x8xf32>
  loop.kernel "exp_0" attributes {origin = "graph.exp"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %e = math.exp %v : f32
        memref.store %e, %a[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  %r = memref.alloc() : memref<2x16xf32>
  loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %c16 = arith.constant 16 : index
        %c8 = arith.constant 8 : index
        %f = arith.muli %i0, %c16 : index
        %g = arith.addi %f, %i1 : index
        %j0 = arith.divui %g, %c8 : index
        %j1 = arith.remui %g, %c8 : index
        %v = memref.load %a[%j0, %j1] : memref<4x8xf32>
        memref.store %v, %r[%i0, %i1] : memref<2x16xf32>
      }
    }
  }
  loop.kernel "neg_2" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %v = memref.load %r[%i0, %i1] : memref<2x16xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<2x16xf32>
      }
    }
  }
  memref.dealloc %r : memref<2x16xf32>
  loop.kernel "reshape_3" attributes {origin = "graph.flatten"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0"} {
      %c8 = arith.constant 8 : index
      %j0 = arith.divui %i0, %c8 : index
      %j1 = arith.remui %i0, %c8 : index
      %v = memref.load %a[%j0, %j1] : memref<4x8xf32>
      memref.store %v, %out1[%i0] : memref<32xf32>
    }
  }
  memref.dealloc %a : memref<4x8xf32>
  func.return
}

// -----

// A slice (here with step -2) into a fresh intermediate is a strided view: no copy kernel;
// its reader loads the source at 5 - 2 * i0; the intermediate and its dealloc are gone.
// CHECK-LABEL: func.func @main
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     loop.kernel "slice_0"
// CHECK:         loop.kernel "neg_1"
// CHECK:           %[[STEP:.*]] = arith.constant -2 : index
// CHECK-NEXT:      %[[M:.*]] = arith.muli %i0, %[[STEP]] : index
// CHECK-NEXT:      %[[C5:.*]] = arith.constant 5 : index
// CHECK-NEXT:      %[[J:.*]] = arith.addi %[[M]], %[[C5]] : index
// CHECK-NEXT:      memref.load %x[%[[J]], %i1] : memref<6x8xf32>
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return
func.func @main(%x: memref<6x8xf32>, %out0: memref<3x8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %s = memref.alloc() : memref<3x8xf32>
  loop.kernel "slice_0" attributes {origin = "graph.slice"} {
    loop.for %i0 = 0 to 3 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %step = arith.constant -2 : index
        %c5 = arith.constant 5 : index
        %m = arith.muli %i0, %step : index
        %j = arith.addi %m, %c5 : index
        %v = memref.load %x[%j, %i1] : memref<6x8xf32>
        memref.store %v, %s[%i0, %i1] : memref<3x8xf32>
      }
    }
  }
  loop.kernel "neg_1" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 3 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %s[%i0, %i1] : memref<3x8xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out0[%i0, %i1] : memref<3x8xf32>
      }
    }
  }
  memref.dealloc %s : memref<3x8xf32>
  func.return
}

// -----

// A transpose into an output of @main: its producer (exp_0, the only kernel touching
// %a) stores at the permuted index straight into the output; a transpose of an input
// into an output has neither a producer to write through nor readers: it stays a copy.
// CHECK-LABEL: func.func @main
// CHECK-NOT:     memref.alloc
// CHECK:         loop.kernel "exp_0"
// CHECK:           memref.store %{{.*}}, %out0[%i1, %i0] : memref<8x4xf32>
// CHECK-NOT:     loop.kernel "transpose_1"
// CHECK:         loop.kernel "transpose_2"
// CHECK:           memref.load %x[%{{.*}}, %{{.*}}] : memref<4x8xf32>
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return

func.func @main(%x: memref<4x8xf32>, %out0: memref<8x4xf32>, %out1: memref<8x4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %a = memref.alloc() : memref<4x8xf32>
  loop.kernel "exp_0" attributes {origin = "graph.exp"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %e = math.exp %v : f32
        memref.store %e, %a[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "transpose_1" attributes {origin = "graph.transpose"} {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %a[%i1, %i0] : memref<4x8xf32>
        memref.store %v, %out0[%i0, %i1] : memref<8x4xf32>
      }
    }
  }
  memref.dealloc %a : memref<4x8xf32>
  loop.kernel "transpose_2" attributes {origin = "graph.transpose"} {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%i1, %i0] : memref<4x8xf32>
        memref.store %v, %out1[%i0, %i1] : memref<8x4xf32>
      }
    }
  }
  func.return
}

// -----

// A slice at offset 0 that keeps the rank (rows 0..1 of 3) maps each index to itself but
// is no transpose: the source keeps its own 3x2 buffer and the slice is read through
// (with the other row read first, as a reversed LSTM reads its steps, exp_0 once stored
// its 3x2 values into the 1x2 slice).
// CHECK-LABEL: func.func @main
// CHECK:         %a = memref.alloc() : memref<3x2xf32>
// CHECK:         loop.kernel "exp_0"
// CHECK:           memref.store %{{.*}}, %a[%{{.*}}, %{{.*}}] : memref<3x2xf32>
// CHECK-NOT:     loop.kernel "slice_2"
// CHECK:         loop.kernel "neg_3"
// CHECK:           memref.load %a[%{{.*}}, %{{.*}}] : memref<3x2xf32>
func.func @main(%x: memref<3x2xf32>, %out0: memref<2xf32>, %out1: memref<1x2xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  %a = memref.alloc() : memref<3x2xf32>
  loop.kernel "exp_0" attributes {origin = "graph.exp"} {
    loop.for %i0 = 0 to 3 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<3x2xf32>
        %e = math.exp %v : f32
        memref.store %e, %a[%i0, %i1] : memref<3x2xf32>
      }
    }
  }
  loop.kernel "neg_1" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 2 step 1 {name = "i0"} {
      %c2 = arith.constant 2 : index
      %v = memref.load %a[%c2, %i0] : memref<3x2xf32>
      %n = arith.negf %v : f32
      memref.store %n, %out0[%i0] : memref<2xf32>
    }
  }
  %s = memref.alloc() : memref<1x2xf32>
  loop.kernel "slice_2" attributes {origin = "graph.slice"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        %v = memref.load %a[%i0, %i1] : memref<3x2xf32>
        memref.store %v, %s[%i0, %i1] : memref<1x2xf32>
      }
    }
  }
  loop.kernel "neg_3" attributes {origin = "graph.neg"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1"} {
        %v = memref.load %s[%i0, %i1] : memref<1x2xf32>
        %n = arith.negf %v : f32
        memref.store %n, %out1[%i0, %i1] : memref<1x2xf32>
      }
    }
  }
  memref.dealloc %s : memref<1x2xf32>
  memref.dealloc %a : memref<3x2xf32>
  func.return
}
