// RUN: dlpc-opt %s --split-input-file -p graph-to-te | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p graph-to-te | dlpc-opt --split-input-file | filecheck %s

// Symbolic dims (passes/lower/_symbolic.py): @main gains the input dlpc_dims (the
// symbols' values, in the order of dlpc.dims), te types stay symbolic, a reduction over
// a symbolic extent has -1 in `over` and its expression in dlpc.over; a reshape keeps the
// leading dims it does not change as they are (no division by a dim of the call).

// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:[a-z_0-9]*]]: tensor<?x?x8xf32, ["batch", "seq"]> {dlpc.name = "x"}, %[[D:[a-z_0-9]*]]: tensor<2xi64> {dlpc.name = "dlpc_dims"})
// CHECK-SAME:    attributes {dlpc.dims = ["batch", "seq"]}
// CHECK:         te.reduce "softmax_0_max" (%{{.*}}, %{{.*}}) reduce (%{{.*}}) over [-1] combiner "max" init -inf : tensor<?x8xf32, ["batch"]>
// CHECK:         } attributes {dlpc.over = ["seq"], origin = "graph.softmax"}
// CHECK:         te.reduce "softmax_0_sum" {{.*}} over [-1] combiner "add"
// CHECK:         } attributes {dlpc.over = ["seq"], origin = "graph.softmax"}
// CHECK:         %[[S:.*]] = te.compute "softmax_0" {{.*}} : tensor<?x?x8xf32, ["batch", "seq"]>
// CHECK:         te.compute "reshape_1" (%[[I0:.*]], %[[I1:.*]], %[[I2:.*]], %[[I3:.*]]) : tensor<?x?x2x4xf32, ["batch", "seq"]>
// CHECK-NOT:       te.read %[[D]]
// CHECK:           te.read %[[S]][%[[I0]], %[[I1]], %{{.*}}]
func.func @main(%x: tensor<?x?x8xf32, ["batch", "seq"]> {dlpc.name = "x"}) -> tensor<?x?x2x4xf32, ["batch", "seq"]> {
  %s = graph.softmax %x {axis = 1 : i64} : (tensor<?x?x8xf32, ["batch", "seq"]>) -> tensor<?x?x8xf32, ["batch", "seq"]>
  %r = graph.reshape %s {shape = array<i64: -9223372036854775808, -9223372036854775808, 2, 4>, sym_shape = ["batch", "seq"]} : (tensor<?x?x8xf32, ["batch", "seq"]>) -> tensor<?x?x2x4xf32, ["batch", "seq"]>
  func.return %r : tensor<?x?x2x4xf32, ["batch", "seq"]>
}

// -----

// A dim of the call inside a body (merging batch and seq): read from dlpc_dims.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[D:[a-z_0-9]*]]: tensor<2xi64> {dlpc.name = "dlpc_dims"})
// CHECK:         te.compute "reshape_0"
// CHECK:           %[[K:.*]] = arith.constant 1 : index
// CHECK-NEXT:      %[[V:.*]] = te.read %[[D]][%[[K]]] : tensor<2xi64>
// CHECK-NEXT:      %{{.*}} = arith.index_cast %[[V]] : i64 to index
func.func @main(%x: tensor<?x?x8xf32, ["batch", "seq"]> {dlpc.name = "x"}) -> tensor<?x8xf32, ["batch*seq"]> {
  %r = graph.reshape %x {shape = array<i64: -9223372036854775808, 8>, sym_shape = ["batch*seq"]} : (tensor<?x?x8xf32, ["batch", "seq"]>) -> tensor<?x8xf32, ["batch*seq"]>
  func.return %r : tensor<?x8xf32, ["batch*seq"]>
}
