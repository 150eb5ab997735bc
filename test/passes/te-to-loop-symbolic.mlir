// RUN: dlpc-opt %s --split-input-file -p te-to-loop | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p te-to-loop | dlpc-opt --split-input-file | filecheck %s

// Symbolic dims (passes/lower/_symbolic.py): buffers at the maxima (dlpc.max_dims); the
// loops over seq are only marked dlpc.extent (loop-runtime-extents guards them after
// the schedules); the kernel reducing over seq lists its reduction loop in dlpc.exact
// (it must stop exactly). A kernel whose indices read the dims is guarded at once
// (second case), and dlpc.guard_reductions guards reductions at once (third case).

// CHECK-LABEL: func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>)
// CHECK:         loop.kernel "max_0" attributes {origin = "graph.max", dlpc.exact = ["r0"]} {
// CHECK:           loop.for %{{.*}} = 0 to 16 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
// CHECK-NOT:         scf.if
// CHECK:         loop.kernel "sub_1"
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 16 step 1 {name = "i0", parallel, dlpc.extent = "seq"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 8 step 1 {name = "i1", vectorize} {
// CHECK-NOT:           scf.if
func.func @main(%x: tensor<?x8xf32, ["seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<?x8xf32, ["seq"]> attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}} {
  %m = te.reduce "max_0" (%i0) reduce (%r0) over [-1] combiner "max" init -inf : tensor<8xf32> {
    %0 = te.read %x[%r0, %i0] : tensor<?x8xf32, ["seq"]>
    te.yield %0 : f32
  } attributes {dlpc.over = ["seq"]}
  %y = te.compute "sub_1" (%i1, %i2) : tensor<?x8xf32, ["seq"]> {
    %1 = te.read %x[%i1, %i2] : tensor<?x8xf32, ["seq"]>
    %2 = te.read %m[%i2] : tensor<8xf32>
    %3 = arith.subf %1, %2 : f32
    te.yield %3 : f32
  }
  func.return %y : tensor<?x8xf32, ["seq"]>
}

// -----

// CHECK-LABEL: func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<128xf32>)
// CHECK:         loop.kernel "reshape_0"
// CHECK-NEXT:      %[[K:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[SEQ:.*]] = memref.load %dlpc_dims[%[[K]]] : memref<1xi64>
// CHECK-NEXT:      %[[N:.*]] = arith.index_cast %[[SEQ]] : i64 to index
// CHECK-NEXT:      %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:      %[[L:.*]] = arith.muli %[[N]], %[[EIGHT]] : index
// CHECK-NEXT:      loop.for %[[I:.*]] = 0 to 128 step 1 {name = "i0", parallel, vectorize} {
// CHECK-NEXT:        %[[C:.*]] = arith.cmpi slt, %[[I]], %[[L]] : index
// CHECK-NEXT:        scf.if %[[C]] {
func.func @main(%x: tensor<?x8xf32, ["seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<?xf32, ["8*seq"]> attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}} {
  %y = te.compute "reshape_0" (%i0) : tensor<?xf32, ["8*seq"]> {
    %c8 = arith.constant 8 : index
    %r = arith.divsi %i0, %c8 : index
    %c = arith.remsi %i0, %c8 : index
    %c0 = arith.constant 0 : index
    %n = te.read %dlpc_dims[%c0] : tensor<1xi64>
    %v = te.read %x[%r, %c] : tensor<?x8xf32, ["seq"]>
    te.yield %v : f32
  }
  func.return %y : tensor<?xf32, ["8*seq"]>
}

// -----

// CHECK-LABEL: func.func @main(%x: memref<16xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<f32>)
// CHECK:         loop.for %[[R:.*]] = 0 to 16 step 1 {name = "r0", reduction} {
// CHECK:           arith.cmpi slt, %[[R]], %{{.*}} : index
// CHECK-NEXT:      scf.if
func.func @main(%x: tensor<?xf32, ["seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<f32> attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}, dlpc.guard_reductions} {
  %s = te.reduce "sum_0" () reduce (%r0) over [-1] combiner "add" init 0.0 : tensor<f32> {
    %v = te.read %x[%r0] : tensor<?xf32, ["seq"]>
    te.yield %v : f32
  } attributes {dlpc.over = ["seq"]}
  func.return %s : tensor<f32>
}

// -----

// A row group (softmax's max and subtract) over symbolic rows and a symbolic row length
// is one kernel: the block loop over the rows steps by the block (16) and carries a
// split id, each per-row loop (b, b_1) is marked as its split (extent seq, base the
// block loop), and the row's reduction is exact.
// CHECK-LABEL: func.func @main(%x: memref<32x32xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<32x32xf32>)
// CHECK:         loop.kernel "softmax_0" attributes {origin = "graph.softmax", dlpc.exact = ["r0"]} {
// CHECK-NEXT:      loop.for %[[I:.*]] = 0 to 32 step 16 {name = "i0", parallel, dlpc.extent_id = 1, dlpc.extent = "seq"} {
// CHECK-NEXT:        memref.alloca() : memref<16xf32>
// CHECK-NEXT:        loop.for %[[B:.*]] = 0 to 16 step 1 {name = "b", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK-NEXT:          arith.addi %[[I]], %[[B]] : index
// CHECK:               loop.for %{{.*}} = 0 to 32 step 1 {name = "r0", vectorize, reduction, dlpc.extent = "seq"} {
// CHECK:             loop.for %{{.*}} = 0 to 16 step 1 {name = "b_1", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
// CHECK:               loop.for %{{.*}} = 0 to 32 step 1 {name = "j0_1", vectorize, dlpc.extent = "seq"} {
// CHECK-NOT:     loop.kernel
func.func @main(%x: tensor<?x?xf32, ["seq", "seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<?x?xf32, ["seq", "seq"]> attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 32 : i64}} {
  %m = te.reduce "softmax_0_max" (%i0) reduce (%r0) over [-1] combiner "max" init -inf : tensor<?xf32, ["seq"]> {
    %0 = te.read %x[%i0, %r0] : tensor<?x?xf32, ["seq", "seq"]>
    te.yield %0 : f32
  } attributes {dlpc.over = ["seq"]}
  %y = te.compute "softmax_0" (%i1, %i2) : tensor<?x?xf32, ["seq", "seq"]> {
    %1 = te.read %x[%i1, %i2] : tensor<?x?xf32, ["seq", "seq"]>
    %2 = te.read %m[%i1] : tensor<?xf32, ["seq"]>
    %3 = arith.subf %1, %2 : f32
    te.yield %3 : f32
  }
  func.return %y : tensor<?x?xf32, ["seq", "seq"]>
}
