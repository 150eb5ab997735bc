// RUN: dlpc-opt %s -p graph-simplify | filecheck %s
// RUN: dlpc-opt %s -p 'graph-simplify{assume-finite=false}' | filecheck %s --check-prefix=STRICT

// x + 0, 1 * x -> x
// CHECK-LABEL: func.func @units(%x: tensor<2x3xf32>)
// CHECK-NEXT:    func.return %x
func.func @units(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %z = graph.constant dense<0.0> : tensor<2x3xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %x, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = graph.mul %one, %a : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %b : tensor<2x3xf32>
}

// v + 0 where the 0 broadcasts v: the result shape is kept with a broadcast
// CHECK-LABEL: func.func @unit_broadcasts
// CHECK-NEXT:    %[[B:.*]] = graph.broadcast %v {shape = array<i64: 2, 3>} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[B]]
func.func @unit_broadcasts(%v: tensor<3xf32>) -> tensor<2x3xf32> {
  %z = graph.constant dense<0.0> : tensor<2x3xf32>
  %a = graph.add %v, %z : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %a : tensor<2x3xf32>
}

// x * 0 and x - x are 0 for finite x; not with assume-finite=false
// CHECK-LABEL: func.func @zeros
// CHECK-NEXT:    %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT:    %[[Z2:.*]] = graph.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[Z]], %[[Z2]]
// STRICT-LABEL: func.func @zeros
// STRICT:         graph.mul
// STRICT:         graph.sub
func.func @zeros(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %z = graph.constant dense<0.0> : tensor<f32>
  %a = graph.mul %x, %z : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %b = graph.sub %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %a, %b : tensor<2x3xf32>, tensor<2x3xf32>
}

// neg(neg(x)) -> x; transpose(transpose(x)) composes (here to identity, then to one)
// CHECK-LABEL: func.func @involutions
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %x {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT:    func.return %x, %[[T]]
func.func @involutions(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %n = graph.neg %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %nn = graph.neg %n : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %tt = graph.transpose %t {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  %u = graph.transpose %tt {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %v = graph.transpose %u {perm = array<i64: 1, 0, 2>} : (tensor<2x4x3xf32>) -> tensor<4x2x3xf32>
  func.return %nn, %v : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// reshape(reshape(x)) -> reshape(x); identity slice / pad / reshape removed
// CHECK-LABEL: func.func @movement
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %x {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:    func.return %[[R]], %x
func.func @movement(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<2x3xf32>) {
  %r1 = graph.reshape %x {shape = array<i64: 3, 2>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r2 = graph.reshape %r1 {shape = array<i64: 6>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %s = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %p = graph.pad %s {pads = array<i64: 0, 0, 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %r3 = graph.reshape %p {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %r2, %r3 : tensor<6xf32>, tensor<2x3xf32>
}

// a transpose that only moves a size-1 dim among size-2 dims is a reshape
// CHECK-LABEL: func.func @transpose_unit_dim
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %x {shape = array<i64: 1, 2, 2>} : (tensor<2x1x2xf32>) -> tensor<1x2x2xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @transpose_unit_dim(%x: tensor<2x1x2xf32>) -> tensor<1x2x2xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x1x2xf32>) -> tensor<1x2x2xf32>
  func.return %t : tensor<1x2x2xf32>
}

// exp(log(c)) -> c for a constant c >= 0, fractions included (issue 18: a mutant that
// took only c >= 1 as nonnegative survived)
// CHECK-LABEL: func.func @exp_log_constant
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<[0.000000e+00, 2.500000e-01, 3.000000e+00]>
// CHECK-NEXT:    func.return %[[C]]
func.func @exp_log_constant() -> tensor<3xf32> {
  %c = graph.constant dense<[0.0, 0.25, 3.0]> : tensor<3xf32>
  %l = graph.log %c : (tensor<3xf32>) -> tensor<3xf32>
  %e = graph.exp %l : (tensor<3xf32>) -> tensor<3xf32>
  func.return %e : tensor<3xf32>
}

// exp(log(x)) -> x only where x >= 0; x / c -> x * (1 / c)
// CHECK-LABEL: func.func @exp_log_div
// CHECK-NEXT:    %[[R:.*]] = graph.relu %x
// CHECK-NEXT:    %[[L:.*]] = graph.log %x
// CHECK-NEXT:    %[[E:.*]] = graph.exp %[[L]]
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<[1.000000e+00, 5.000000e-01, 2.500000e-01]> : tensor<3xf32>
// CHECK-NEXT:    %[[D:.*]] = graph.mul %[[R]], %[[C]]
// CHECK-NEXT:    func.return %[[D]], %[[E]]
func.func @exp_log_div(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %r = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.log %r : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = graph.exp %l : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l2 = graph.log %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e2 = graph.exp %l2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = graph.constant dense<[1.0, 2.0, 4.0]> : tensor<3xf32>
  %d = graph.div %e, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %d, %e2 : tensor<2x3xf32>, tensor<2x3xf32>
}
