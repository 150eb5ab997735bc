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

// a zero pad of H and W in front of a conv becomes the conv's pads (added to its own);
// the pad is erased. Not folded: a pad value other than 0, a padded channel dim, a
// negative (cropping) pad
// CHECK-LABEL: func.func @pad_into_conv
// CHECK-NEXT:    %[[Y:.*]] = graph.conv2d %x, %w {pads = array<i64: 2, 3, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x9x10xf32>
// CHECK-NEXT:    %[[P1:.*]] = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 5.000000e-01 : f64}
// CHECK-NEXT:    %[[Y1:.*]] = graph.conv2d %[[P1]], %w
// CHECK-NEXT:    %[[P2:.*]] = graph.pad %x {pads = array<i64: 0, 1, 1, 1, 0, 0, 1, 1>}
// CHECK-NEXT:    %[[P3:.*]] = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, -1, 1>}
// CHECK-NEXT:    %[[Y3:.*]] = graph.conv2d %[[P3]], %w
// CHECK-NEXT:    func.return %[[Y]], %[[Y1]], %[[P2]], %[[Y3]]
func.func @pad_into_conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<1x4x9x10xf32>, tensor<1x4x8x8xf32>, tensor<1x4x10x10xf32>, tensor<1x4x6x8xf32>) {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 2, 0, 0, 1, 0>, value = 0.0 : f64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x10x10xf32>
  %y = graph.conv2d %p, %w {pads = array<i64: 1, 1, 0, 1>} : (tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x9x10xf32>
  %p1 = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.5 : f64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x10x10xf32>
  %y1 = graph.conv2d %p1, %w : (tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %p2 = graph.pad %x {pads = array<i64: 0, 1, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x3x8x8xf32>) -> tensor<1x4x10x10xf32>
  %p3 = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, -1, 1>, value = 0.0 : f64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x10xf32>
  %y3 = graph.conv2d %p3, %w : (tensor<1x3x8x10xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x8xf32>
  func.return %y, %y1, %p2, %y3 : tensor<1x4x9x10xf32>, tensor<1x4x8x8xf32>, tensor<1x4x10x10xf32>, tensor<1x4x6x8xf32>
}

// pools: max_pool2d takes a -inf pad, avg_pool2d a zero pad when it counts the pads;
// not: a max pool behind a zero pad, an average pool not counting the pads, ceil_mode
// CHECK-LABEL: func.func @pad_into_pools
// CHECK-NEXT:    %[[N:.*]] = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0xfff0000000000000 : f64}
// CHECK-NEXT:    %[[M:.*]] = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %[[Z:.*]] = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>}
// CHECK-NEXT:    %[[A:.*]] = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, count_include_pad = true, pads = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT:    %[[M2:.*]] = graph.max_pool2d %[[Z]]
// CHECK-NEXT:    %[[A2:.*]] = graph.avg_pool2d %[[Z]]
// CHECK-NEXT:    %[[M3:.*]] = graph.max_pool2d %[[N]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true}
// CHECK-NEXT:    func.return %[[M]], %[[A]], %[[M2]], %[[A2]], %[[M3]]
func.func @pad_into_pools(%x: tensor<1x2x8x8xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x5x5xf32>) {
  %n = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0xFFF0000000000000 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x10x10xf32>
  %m = graph.max_pool2d %n {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x2x10x10xf32>) -> tensor<1x2x4x4xf32>
  %z = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x10x10xf32>
  %a = graph.avg_pool2d %z {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, count_include_pad = true} : (tensor<1x2x10x10xf32>) -> tensor<1x2x4x4xf32>
  %m2 = graph.max_pool2d %z {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x2x10x10xf32>) -> tensor<1x2x4x4xf32>
  %a2 = graph.avg_pool2d %z {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x2x10x10xf32>) -> tensor<1x2x4x4xf32>
  %m3 = graph.max_pool2d %n {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true} : (tensor<1x2x10x10xf32>) -> tensor<1x2x5x5xf32>
  func.return %m, %a, %m2, %a2, %m3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x5x5xf32>
}

// attention's K^T written as one transpose [0, 2, 3, 1]: the head split stays a
// transpose, the swap of the last two dims moves into transpose_b. Not: a transpose with
// the last two dims in order, one with another user
// CHECK-LABEL: func.func @matmul_transpose_swap
// CHECK-NEXT:    %[[K:.*]] = graph.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.matmul %q, %[[K]] {transpose_b = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    %[[O:.*]] = graph.matmul %[[S]], %[[V]] : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT:    %[[T2:.*]] = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT:    %[[S2:.*]] = graph.matmul %q, %[[T2]] : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    func.return %[[O]], %[[S2]], %[[T2]]
func.func @matmul_transpose_swap(%q: tensor<2x4x8x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>, tensor<2x4x16x8xf32>) {
  %t = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %s = graph.matmul %q, %t : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %vt = graph.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %o = graph.matmul %s, %vt : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %t2 = graph.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %s2 = graph.matmul %q, %t2 : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  func.return %o, %s2, %t2 : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>, tensor<2x4x16x8xf32>
}

// a mean over all spatial dims keeping them is the global average pool; not: a mean
// over H only, one dropping the dims
// CHECK-LABEL: func.func @mean_to_global_avg_pool
// CHECK-NEXT:    %[[G:.*]] = graph.global_avg_pool %x : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
// CHECK-NEXT:    %[[H:.*]] = graph.reduce_mean %x {axes = array<i64: 2>, keepdims = true}
// CHECK-NEXT:    %[[D:.*]] = graph.reduce_mean %x {axes = array<i64: 2, 3>}
// CHECK-NEXT:    func.return %[[G]], %[[H]], %[[D]]
func.func @mean_to_global_avg_pool(%x: tensor<2x3x4x5xf32>) -> (tensor<2x3x1x1xf32>, tensor<2x3x1x5xf32>, tensor<2x3xf32>) {
  %g = graph.reduce_mean %x {axes = array<i64: -2, -1>, keepdims = true} : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
  %h = graph.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x5xf32>
  %d = graph.reduce_mean %x {axes = array<i64: 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<2x3xf32>
  func.return %g, %h, %d : tensor<2x3x1x1xf32>, tensor<2x3x1x5xf32>, tensor<2x3xf32>
}
