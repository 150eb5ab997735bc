// RUN: dlpc-opt %s -p 'graph-autodiff{wrt-inputs=true}' --split-input-file | filecheck %s
// RUN: dlpc-opt %s -p 'graph-autodiff{recompute=true}' --split-input-file | filecheck %s --check-prefix=RECOMPUTE

// CHECK-LABEL: func.func @main(%x1: tensor<f32>, %x2: tensor<f32>)
// CHECK-SAME:    -> (tensor<f32> {dlpc.name = "loss"}, tensor<f32> {dlpc.name = "grad.x1"}, tensor<f32> {dlpc.name = "grad.x2"})
// CHECK:         %[[X6:.*]] = graph.mul %x5, %x4
// CHECK-NEXT:    %[[D6:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[D5:.*]] = graph.mul %[[D6]], %x4
// CHECK-NEXT:    %[[D4:.*]] = graph.mul %[[D6]], %x5
// CHECK-NEXT:    %[[G1:.*]] = graph.mul %[[D5]], %x3
// CHECK-NEXT:    %[[G2:.*]] = graph.add %[[D4]], %[[D5]]
// CHECK-NEXT:    func.return %[[X6]], %[[G1]], %[[G2]]

// The textbook's example: f(x1, x2) = (e^x1 + x2)(x2 + 1); x2 feeds two ops, so its
// adjoint is the sum of both contributions.
func.func @main(%x1: tensor<f32>, %x2: tensor<f32>) -> tensor<f32> {
  %x3 = graph.exp %x1 : (tensor<f32>) -> tensor<f32>
  %x5 = graph.add %x3, %x2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %x4 = graph.add %x2, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %x6 = graph.mul %x5, %x4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %x6 : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @main(%fx: tensor<2x3xf32>)
// CHECK-SAME:    {dlpc.name = "grad.w"}, tensor<4xf32> {dlpc.name = "grad.unused"}, tensor<2x3xf32> {dlpc.name = "grad.fx"})
// CHECK:         %[[DS:.*]] = graph.broadcast %{{.*}} {shape = array<i64: 2, 3>}
// CHECK:         %[[TT:.*]] = graph.mul %t, %t
// CHECK:         %[[DT:.*]] = graph.mul %[[DS]], %{{.*}}
// CHECK-NEXT:    %[[DA:.*]] = graph.add %[[DS]], %[[DT]]
// CHECK:         %[[P:.*]] = graph.mul %[[DA]], %fx
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[P]] {axes = array<i64: 0>, keepdims = true} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[GW:.*]] = graph.reshape %[[S]] {shape = array<i64: 3>}
// CHECK:         %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[GU:.*]] = graph.broadcast %[[Z]] {shape = array<i64: 4>}
// CHECK:         func.return %l, %[[GW]], %[[GU]], %{{.*}}

// With recompute, a and tanh(a) are recomputed beside the backward (nothing kept)
// RECOMPUTE-LABEL: func.func @main(%fx: tensor<2x3xf32>)
// RECOMPUTE:         %l = graph.reduce_sum %s
// RECOMPUTE:         %[[A:.*]] = graph.mul %fx, %w
// RECOMPUTE-NEXT:    %[[T:.*]] = graph.tanh %[[A]]
// RECOMPUTE-NEXT:    graph.mul %[[T]], %[[T]]

// Fan-out of a tensor (tanh(a) + a), a broadcast operand (w), a param with no path to
// the loss (a zero gradient, not dropped).
func.func @main(%fx: tensor<2x3xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<3xf32>
  %unused = graph.param "unused" : tensor<4xf32>
  %a = graph.mul %fx, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %t = graph.tanh %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = graph.add %t, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_sum %s : (tensor<2x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @main(%lx: tensor<4x8xf32>)
// CHECK:         %[[M:.*]] = graph.compare %r, %{{.*}} {predicate = "gt"}
// CHECK-NEXT:    %[[F:.*]] = graph.cast %[[M]] {to = f32} : (tensor<4x3xi1>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[DY:.*]] = graph.mul %{{.*}}, %[[F]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[GX:.*]] = graph.matmul %[[DY]], %w : (tensor<4x3xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[GW:.*]] = graph.matmul %[[DY]], %lx {transpose_a = true} : (tensor<4x3xf32>, tensor<4x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    %[[GB:.*]] = graph.reduce_sum %[[DY]] {axes = array<i64: 0>}
// CHECK-NEXT:    func.return %l, %[[GW]], %[[GB]], %[[GX]]

// linear + relu + mean
func.func @main(%lx: tensor<4x8xf32>) -> tensor<f32> {
  %w = graph.param "fc.weight" : tensor<3x8xf32>
  %b = graph.param "fc.bias" : tensor<3xf32>
  %y = graph.linear %lx, %w, %b : (tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %r = graph.relu %y : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = graph.reduce_mean %r : (tensor<4x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @main(%ma: tensor<2x3x4xf32>)
// CHECK:         %[[GA:.*]] = graph.matmul %[[DY:.*]], %w {transpose_b = true} : (tensor<2x3x5xf32>, tensor<4x5xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.matmul %ma, %[[DY]] {transpose_a = true} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[P]] {axes = array<i64: 0>, keepdims = true}
// CHECK-NEXT:    %[[GW:.*]] = graph.reshape %[[S]] {shape = array<i64: 4, 5>}
// CHECK-NEXT:    func.return %l, %[[GW]], %[[GA]]

// batched matmul with a broadcast rhs: its adjoint is summed over the batch
func.func @main(%ma: tensor<2x3x4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4x5xf32>
  %y = graph.matmul %ma, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %l = graph.reduce_sum %y : (tensor<2x3x5xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// max_pool2d: the windows as columns (im2col: one gather with a constant table), the first
// offset whose cell equals the maximum takes the adjoint (reduce_min over offsets), col2im
// (a gather of the cells' readers and a sum) puts the columns back; conv2d: the input
// adjoint is one conv2d of the zero-inserted dy with the flipped, transposed weight, the
// weight adjoint a matmul per sample of dy with im2col(x), summed over samples
// CHECK-LABEL: func.func @main(%cx: tensor<2x3x8x8xf32>)
// CHECK:         %[[T:.*]] = graph.constant dense<{{\[\[}}0, 2, 8, 10], [1, 3, 9, 11], [4, 6, 12, 14], [5, 7, 13, 15]]> : tensor<4x4xi64>
// CHECK-NEXT:    %[[YF:.*]] = graph.reshape %y {shape = array<i64: 2, 4, 16>}
// CHECK-NEXT:    %[[COLS:.*]] = graph.gather %[[YF]], %[[T]] {axis = 2 : i64} : (tensor<2x4x16xf32>, tensor<4x4xi64>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT:    %[[PR:.*]] = graph.reshape %p {shape = array<i64: 2, 4, 1, 4>}
// CHECK-NEXT:    %[[HIT:.*]] = graph.compare %[[COLS]], %[[PR]] {predicate = "eq"}
// CHECK:         %[[FIRST:.*]] = graph.reduce_min %{{.*}} {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x4xf32>
// CHECK:         graph.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x4x17xf32>, tensor<16x1xi64>) -> tensor<2x4x16x1xf32>
// CHECK:         %[[DY:d_y]] = graph.reshape %{{.*}} {shape = array<i64: 2, 4, 4, 4>}
// CHECK-NEXT:    %[[DY6:.*]] = graph.reshape %[[DY]] {shape = array<i64: 2, 4, 4, 1, 4, 1>}
// CHECK-NEXT:    %[[ZI:.*]] = graph.pad %[[DY6]] {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1>} : (tensor<2x4x4x1x4x1xf32>) -> tensor<2x4x4x2x4x2xf32>
// CHECK-NEXT:    %[[DYZ:.*]] = graph.reshape %[[ZI]] {shape = array<i64: 2, 4, 8, 8>}
// CHECK-NEXT:    %[[W5:.*]] = graph.reshape %w {shape = array<i64: 1, 4, 3, 3, 3>}
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[W5]] {perm = array<i64: 0, 2, 1, 3, 4>}
// CHECK-NEXT:    %[[WF:.*]] = graph.slice %[[WT]] {starts = array<i64: -1, -1>, ends = array<i64: -4, -4>, axes = array<i64: 3, 4>, steps = array<i64: -1, -1>}
// CHECK-NEXT:    %[[WFT:.*]] = graph.reshape %[[WF]] {shape = array<i64: 3, 4, 3, 3>}
// CHECK-NEXT:    %[[GX:.*]] = graph.conv2d %[[DYZ]], %[[WFT]] {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<3x4x3x3xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    %[[PX:.*]] = graph.pad %cx {pads = array<i64: 0, 0, 1, 1, 0, 0, 0, 0>
// CHECK:         %[[IC:.*]] = graph.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x3x81xf32>, tensor<9x16xi64>) -> tensor<2x3x9x16xf32>
// CHECK-NEXT:    %[[IC4:.*]] = graph.reshape %[[IC]] {shape = array<i64: 2, 1, 27, 16>}
// CHECK-NEXT:    %[[G4:.*]] = graph.reshape %[[DY]] {shape = array<i64: 2, 1, 4, 16>}
// CHECK-NEXT:    %[[DWN:.*]] = graph.matmul %[[G4]], %[[IC4]] {transpose_b = true} : (tensor<2x1x4x16xf32>, tensor<2x1x27x16xf32>) -> tensor<2x1x4x27xf32>
// CHECK-NEXT:    %[[DW:.*]] = graph.reduce_sum %[[DWN]] {axes = array<i64: 0>} : (tensor<2x1x4x27xf32>) -> tensor<1x4x27xf32>
// CHECK-NEXT:    %[[GW:.*]] = graph.reshape %[[DW]] {shape = array<i64: 4, 3, 3, 3>}
// CHECK-NEXT:    %[[GB:.*]] = graph.reduce_sum %[[DY]] {axes = array<i64: 0, 2, 3>}
// CHECK-NEXT:    func.return %l, %[[GW]], %[[GB]], %[[GX]]

// conv2d (stride 2, pad 1) + max_pool2d
func.func @main(%cx: tensor<2x3x8x8xf32>) -> tensor<f32> {
  %w = graph.param "conv.weight" : tensor<4x3x3x3xf32>
  %b = graph.param "conv.bias" : tensor<4xf32>
  %y = graph.conv2d %cx, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %p = graph.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  %l = graph.reduce_sum %p : (tensor<2x4x2x2xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// reduce_max: the maxima share the adjoint; log_softmax: g - exp(y) sum(g);
// softmax: y (g - sum(g y)); layer_norm: statistics recomputed from x
// CHECK-LABEL: func.func @main(%nx: tensor<4x6xf32>)
// CHECK:         %[[HIT:.*]] = graph.compare %p, %{{.*}} {predicate = "eq"}
// CHECK:         %[[DP:.*]] = graph.mul
// CHECK-NEXT:    %[[E:.*]] = graph.exp %p
// CHECK-NEXT:    %[[SG:.*]] = graph.reduce_sum %[[DP]] {axes = array<i64: 1>, keepdims = true}
// CHECK-NEXT:    %[[ES:.*]] = graph.mul %[[E]], %[[SG]]
// CHECK-NEXT:    %[[DS:.*]] = graph.sub %[[DP]], %[[ES]]
// CHECK-NEXT:    %[[GY:.*]] = graph.mul %[[DS]], %s
// CHECK-NEXT:    %[[SGY:.*]] = graph.reduce_sum %[[GY]] {axes = array<i64: 1>, keepdims = true}
// CHECK-NEXT:    %[[D:.*]] = graph.sub %[[DS]], %[[SGY]]
// CHECK-NEXT:    %[[DH:.*]] = graph.mul %s, %[[D]]
// CHECK:         graph.rsqrt
// CHECK:         %[[GN:.*]] = graph.mul %[[DH]], %g
// CHECK:         func.return %l, %{{.*}}, %{{.*}}

// log_softmax, softmax, layer_norm
func.func @main(%nx: tensor<4x6xf32>) -> tensor<f32> {
  %g = graph.param "ln.scale" : tensor<6xf32>
  %h = graph.layer_norm %nx, %g : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %s = graph.softmax %h {axis = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = graph.log_softmax %s {axis = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %l = graph.reduce_max %p : (tensor<4x6xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// transpose -> inverse transpose, slice -> zero-insertion and pad, concat -> slices,
// gather -> matmul with the one-hot of the indices (int indices get no gradient)
// CHECK-LABEL: func.func @main(%idx: tensor<3xi64>)
// CHECK-SAME:    -> (tensor<f32> {dlpc.name = "loss"}, tensor<5x4xf32> {dlpc.name = "grad.emb"})
// CHECK:         %[[DS:d_s]] = graph.transpose %d_t {perm = array<i64: 1, 0>}
// CHECK-NEXT:    graph.reshape %[[DS]] {shape = array<i64: 3, 1, 4>}
// CHECK-NEXT:    graph.pad %{{.*}} {pads = array<i64: 0, 0, 0, 0, 1, 0>
// CHECK-NEXT:    graph.reshape %{{.*}} {shape = array<i64: 6, 4>}
// CHECK-NEXT:    %[[DC:.*]] = graph.pad %{{.*}} {pads = array<i64: 1, 0, 1, 0>
// CHECK-NEXT:    %[[DV:.*]] = graph.slice %[[DC]] {starts = array<i64: 0>, ends = array<i64: 3>
// CHECK-NEXT:    %[[DE:.*]] = graph.slice %[[DC]] {starts = array<i64: 3>, ends = array<i64: 8>
// CHECK:         %[[OH:.*]] = graph.cast %{{.*}} {to = f32} : (tensor<3x5xi1>) -> tensor<3x5xf32>
// CHECK:         %[[MM:.*]] = graph.matmul %[[OH]], %{{.*}} {transpose_a = true} : (tensor<3x5xf32>, tensor<1x3x4xf32>) -> tensor<1x5x4xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[MM]] {shape = array<i64: 5, 4>}
// CHECK-NEXT:    %[[G:.*]] = graph.add %[[DE]], %[[R]]
// CHECK-NEXT:    func.return %l, %[[G]]

// data movement: gather (one-hot matmul), concat (slices), slice (pad), transpose
func.func @main(%idx: tensor<3xi64>) -> tensor<f32> {
  %e = graph.param "emb" : tensor<5x4xf32>
  %v = graph.gather %e, %idx {axis = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %c = graph.concat %v, %e {axis = 0 : i64} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<8x4xf32>
  %s = graph.slice %c {starts = array<i64: 1>, ends = array<i64: 7>, axes = array<i64: 0>, steps = array<i64: 2>} : (tensor<8x4xf32>) -> tensor<3x4xf32>
  %t = graph.transpose %s {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %l = graph.reduce_sum %t : (tensor<4x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}

// -----

// graph.fused is inlined, then differentiated; the other result is dropped
// CHECK-LABEL: func.func @main(%ux: tensor<4xf32>)
// CHECK-SAME:    -> (tensor<f32> {dlpc.name = "loss"}, tensor<4xf32> {dlpc.name = "grad.w"}, tensor<4xf32> {dlpc.name = "grad.ux"})
// CHECK-NOT:     graph.fused
// CHECK:         %[[M:.*]] = graph.mul %ux, %w
// CHECK-NEXT:    %[[S:.*]] = graph.sigmoid %[[M]]
// CHECK:         %[[DY:d_y]] = graph.broadcast
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant dense<1.000000e+00>
// CHECK-NEXT:    %[[C:.*]] = graph.sub %[[ONE]], %[[S]]
// CHECK-NEXT:    %[[D:.*]] = graph.mul %[[S]], %[[C]]
// CHECK-NEXT:    %[[DM:.*]] = graph.mul %[[DY]], %[[D]]
// CHECK-NEXT:    %[[GU:.*]] = graph.mul %[[DM]], %w
// CHECK-NEXT:    %[[GW:.*]] = graph.mul %[[DM]], %ux
// CHECK-NEXT:    func.return %{{.*}}, %[[GW]], %[[GU]]

// graph.fused: the body is differentiated (inlined first)
func.func @main(%ux: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %w = graph.param "w" : tensor<4xf32>
  %y = graph.fused "mul_sigmoid" %ux, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %0 = graph.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = graph.sigmoid %0 : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  %l = graph.reduce_sum %y : (tensor<4xf32>) -> tensor<f32>
  func.return %l, %y : tensor<f32>, tensor<4xf32>
}
