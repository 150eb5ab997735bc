// RUN: dlpc-opt %s -p 'graph-mask-padding{dims="seq"}' | filecheck %s

// @main gains mask_seq (1 at valid positions, 0 at the padding). A softmax along seq
// reads a bias of (mask - 1) * 80 along its axis; a mean over seq reads the masked input
// scaled by padded/valid counts; a matmul contracting over seq reads a masked lhs.
// CHECK-LABEL: func.func @main(%x: tensor<?x?x8xf32, ["b", "seq"]>, %0: tensor<?xf32, ["seq"]> {dlpc.name = "mask_seq"})
// CHECK:         %[[MUL:.*]] = graph.reshape %0 {sym_shape = ["seq"], shape = array<i64: 1, -9223372036854775808, 1>}
// CHECK:         %[[SUB:.*]] = graph.sub %0, %{{.*}}
// CHECK:         %[[BIG:.*]] = graph.mul %[[SUB]], %{{.*}}
// CHECK:         %[[BIAS:.*]] = graph.reshape %[[BIG]] {sym_shape = ["seq"], shape = array<i64: 1, 1, -9223372036854775808>}
// CHECK:         %s = graph.matmul %x, %x {transpose_b = true}
// CHECK-NEXT:    %[[B:.*]] = graph.add %s, %[[BIAS]]
// CHECK-NEXT:    %p = graph.softmax %[[B]]
// CHECK-NEXT:    %[[M:.*]] = graph.mul %x, %[[MUL]]
// CHECK:         %m = graph.reduce_mean %{{.*}} {axes = array<i64: 1>}
// CHECK:         %[[A:.*]] = graph.mul %p, %{{.*}} : (tensor<?x?x?xf32, ["b", "seq", "seq"]>, tensor<1x1x?xf32, ["seq"]>)
// CHECK-NEXT:    %o = graph.matmul %[[A]], %x
// A dim no op mixes needs no mask: with dims="b" nothing changes and no argument is added.
// RUN: dlpc-opt %s -p 'graph-mask-padding{dims="b"}' | filecheck %s --check-prefix=NONE
// NONE: func.func @main(%x: tensor<?x?x8xf32, ["b", "seq"]>) ->
// NONE-NOT: mask_b
func.func @main(%x: tensor<?x?x8xf32, ["b", "seq"]>) -> (tensor<?x?x8xf32, ["b", "seq"]>, tensor<?x8xf32, ["b"]>) {
  %s = graph.matmul %x, %x {transpose_b = true} : (tensor<?x?x8xf32, ["b", "seq"]>, tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x?x?xf32, ["b", "seq", "seq"]>
  %p = graph.softmax %s : (tensor<?x?x?xf32, ["b", "seq", "seq"]>) -> tensor<?x?x?xf32, ["b", "seq", "seq"]>
  %m = graph.reduce_mean %x {axes = array<i64: 1>} : (tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x8xf32, ["b"]>
  %o = graph.matmul %p, %x : (tensor<?x?x?xf32, ["b", "seq", "seq"]>, tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x?x8xf32, ["b", "seq"]>
  func.return %o, %m : tensor<?x?x8xf32, ["b", "seq"]>, tensor<?x8xf32, ["b"]>
}
