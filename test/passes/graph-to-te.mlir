// RUN: dlpc-opt %s -p graph-to-te | filecheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK:       %[[W:.*]] = graph.param "scale" : tensor<8xf32>
// CHECK:       %[[R:.*]] = te.compute "relu_0" (%[[I0:.*]], %[[I1:.*]]) : tensor<4x8xf32> {
// CHECK-NEXT:    %[[V:.*]] = te.read %x[%[[I0]], %[[I1]]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[M:.*]] = arith.maximumf %[[V]], %[[Z]] : f32
// CHECK-NEXT:    te.yield %[[M]] : f32
// CHECK:       %[[A:.*]] = te.compute "add_1" (%[[J0:.*]], %[[J1:.*]]) : tensor<4x8xf32> {
// CHECK-NEXT:    te.read %[[R]][%[[J0]], %[[J1]]] : tensor<4x8xf32>
// CHECK-NEXT:    te.read %b[%[[J1]]] : tensor<8xf32>
// CHECK:       te.compute "mul_2"
// CHECK:         te.read %[[W]][%{{.*}}] : tensor<8xf32>
// CHECK:       } attributes {origin = "graph.mul"}
// CHECK-NOT:   = graph.
func.func @elementwise(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %w = graph.param "scale" : tensor<8xf32>
  %r = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = graph.add %r, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %m = graph.mul %a, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %m : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @matmul
// CHECK:       te.reduce "matmul_3" (%[[B:.*]], %[[M:.*]], %[[N:.*]]) reduce (%[[K:.*]]) over [5] combiner "add" init 0.000000e+00 : tensor<2x3x4xf32> {
// CHECK-NEXT:    %[[X:.*]] = te.read %a[%[[B]], %[[M]], %[[K]]] : tensor<2x3x5xf32>
// CHECK-NEXT:    %[[Y:.*]] = te.read %b[%[[K]], %[[N]]] : tensor<5x4xf32>
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// CHECK-NEXT:    te.yield %[[P]] : f32
func.func @matmul(%a: tensor<2x3x5xf32>, %b: tensor<5x4xf32>) -> tensor<2x3x4xf32> {
  %c = graph.matmul %a, %b : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  func.return %c : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @conv
// Padding: the input read is guarded by a bounds check and never runs out of bounds.
// CHECK:       te.reduce "conv2d_4" (%[[N:.*]], %[[O:.*]], %{{.*}}, %{{.*}}) reduce (%[[C:.*]], %[[KH:.*]], %[[KW:.*]]) over [3, 3, 3] combiner "add"
// CHECK:         arith.cmpi sge
// CHECK:         arith.cmpi slt
// CHECK:         %[[V:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:      %[[X:.*]] = te.read %x[%[[N]], %[[C]], %{{.*}}, %{{.*}}] : tensor<1x3x8x8xf32>
// CHECK-NEXT:      scf.yield %[[X]] : f32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      scf.yield %[[Z]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    te.read %w[%[[O]], %[[C]], %[[KH]], %[[KW]]] : tensor<4x3x3x3xf32>
// The bias is added once per output element, in the epilogue.
// CHECK:       } epilogue (%[[ACC:.*]]: f32, %{{.*}}: index, %[[J1:.*]]: index, %{{.*}}: index, %{{.*}}: index) {
// CHECK-NEXT:    %[[BV:.*]] = te.read %b[%[[J1]]] : tensor<4xf32>
// CHECK-NEXT:    arith.addf %[[ACC]], %[[BV]] : f32
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @pool
// CHECK:       te.reduce "max_pool2d_5" (%{{.*}}) reduce (%{{.*}}, %{{.*}}) over [2, 2] combiner "max" init -inf : tensor<1x2x3x3xf32>
// CHECK-NOT:     scf.if
// CHECK:         te.yield
func.func @pool(%x: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// Softmax over the last axis: exp once, stored, summed, then scaled by 1 / sum.
// CHECK-LABEL: func.func @softmax
// CHECK:       %[[MAX:.*]] = te.reduce "softmax_6_max" (%{{.*}}) reduce (%{{.*}}) over [16] combiner "max" init -inf : tensor<4xf32>
// CHECK:       %[[EXP:.*]] = te.compute "softmax_6_exp" (%{{.*}}, %{{.*}}) : tensor<4x16xf32>
// CHECK:         te.read %[[MAX]]
// CHECK:         math.exp
// CHECK:       %[[SUM:.*]] = te.reduce "softmax_6_sum" (%{{.*}}) reduce (%{{.*}}) over [16] combiner "add" init 0.000000e+00 : tensor<4xf32>
// CHECK:         te.read %[[EXP]]
// CHECK-NOT:     math.exp
// CHECK:       te.compute "softmax_6" (%{{.*}}, %{{.*}}) : tensor<4x16xf32>
// CHECK-NEXT:    te.read %[[EXP]]
// CHECK-NEXT:    te.read %[[SUM]]
// CHECK-NEXT:    arith.constant 1.0
// CHECK-NEXT:    arith.divf
// CHECK-NEXT:    arith.mulf
func.func @softmax(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = graph.softmax %x {axis = -1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @movement
// CHECK:       te.compute "transpose_7" (%[[A:.*]], %[[B:.*]], %[[C:.*]]) : tensor<3x2x4xf32> {
// CHECK-NEXT:    te.read %x[%[[B]], %[[A]], %[[C]]] : tensor<2x3x4xf32>
// Reshape: linearise the output index, delinearise into the input's.
// CHECK:       te.compute "reshape_8" (%[[R0:.*]], %[[R1:.*]]) : tensor<6x4xf32>
// CHECK:         %[[F:.*]] = arith.addi %{{.*}}, %[[R1]] : index
// CHECK:         arith.divsi %[[F]], %{{.*}} : index
// CHECK:         arith.remsi
// Concat: an scf.if chain picks the operand.
// CHECK:       te.compute "concat_9"
// CHECK:         scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:      te.read %x
// CHECK:         } else {
// CHECK:           te.read %z
// Gather: the index comes from a te.read, wraps when negative and is clamped.
// CHECK:       te.compute "gather_10"
// CHECK:         %[[K:.*]] = te.read %i[%{{.*}}] : tensor<3xi64>
// CHECK:         arith.select
// CHECK:         arith.index_cast
// CHECK:         arith.maxsi
// CHECK:         arith.minsi
// CHECK:       te.compute "transpose_11"
func.func @movement(%x: tensor<2x3x4xf32>, %z: tensor<2x2x4xf32>, %i: tensor<3xi64>) -> tensor<3x6xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %r = graph.reshape %t {shape = array<i64: 6, 4>} : (tensor<3x2x4xf32>) -> tensor<6x4xf32>
  %c = graph.concat %x, %z {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x5x4xf32>
  %g = graph.gather %r, %i {axis = 1 : i64} : (tensor<6x4xf32>, tensor<3xi64>) -> tensor<6x3xf32>
  %q = graph.transpose %g : (tensor<6x3xf32>) -> tensor<3x6xf32>
  func.return %q : tensor<3x6xf32>
}

// CHECK-LABEL: func.func @fused
// One te op: the conv's reduction with bias + relu as its epilogue.
// CHECK-NOT:   te.compute
// CHECK:       te.reduce "conv_bias_relu" (%{{.*}}) reduce (%{{.*}}, %{{.*}}, %{{.*}}) over [3, 3, 3] combiner "add"
// CHECK:       } epilogue (%[[ACC:.*]]: f32, %{{.*}}: index, %[[C:.*]]: index, %{{.*}}: index, %{{.*}}: index) {
// CHECK:         %[[B:.*]] = te.read %b[%[[C]], %{{.*}}, %{{.*}}] : tensor<4x1x1xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    arith.maximumf %[[S]], %[[Z]] : f32
// CHECK-NOT:   te.compute
// CHECK:       func.return
func.func @fused(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32> {
  %y = graph.fused "conv_bias_relu" %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %c: tensor<4x1x1xf32>):
    %0 = graph.conv2d %a, %k : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
    %1 = graph.add %0, %c : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
    %2 = graph.relu %1 : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    graph.yield %2 : tensor<1x4x6x6xf32>
  }
  func.return %y : tensor<1x4x6x6xf32>
}

// pow by a constant small integer is strength-reduced to products; any other exponent
// stays a math.powf call.
// CHECK-LABEL: func.func @pow_by_small_integer
// CHECK:       te.compute "pow_{{[0-9]+}}"
// CHECK-NEXT:    %[[V:.*]] = te.read %x[%{{.*}}] : tensor<16xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK-NEXT:    %[[C:.*]] = arith.mulf %[[S]], %[[V]] : f32
// CHECK-NEXT:    te.yield %[[C]] : f32
// CHECK:       te.compute "pow_{{[0-9]+}}"
// CHECK:         math.powf
func.func @pow_by_small_integer(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %three = graph.constant dense<3.000000e+00> : tensor<1xf32>
  %half = graph.constant dense<5.000000e-01> : tensor<1xf32>
  %c = graph.pow %x, %three : (tensor<16xf32>, tensor<1xf32>) -> tensor<16xf32>
  %h = graph.pow %x, %half : (tensor<16xf32>, tensor<1xf32>) -> tensor<16xf32>
  func.return %c, %h : tensor<16xf32>, tensor<16xf32>
}

// dropout: the flat index and the step counter hashed with 64-bit integer ops (the PCG hash
// on 32-bit values, masked: no product overflows), pcg(seed = 42) = 1223963391 folded, kept
// where (h >> 8) >= ceil(0.25 * 2^24) = 4194304, scaled by 1 / (1 - p); without a step
// (inference) a copy.
// CHECK-LABEL: func.func @dropout
// CHECK:       te.compute "dropout_{{[0-9]+}}" (%[[I0:.*]], %[[I1:.*]]) : tensor<4x8xf32> {
// CHECK-NEXT:    %[[X:.*]] = te.read %x[%[[I0]], %[[I1]]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[R:.*]] = arith.muli %[[I0]], %[[C8]] : index
// CHECK-NEXT:    %[[F:.*]] = arith.addi %[[R]], %[[I1]] : index
// CHECK-NEXT:    %[[FI:.*]] = arith.index_cast %[[F]] : index to i64
// CHECK-NEXT:    %[[S:.*]] = te.read %step[] : tensor<f32>
// CHECK-NEXT:    %[[SI:.*]] = arith.fptosi %[[S]] : f32 to i64
// CHECK:         %[[KEY:.*]] = arith.constant 1223963391 : i64
// CHECK-NEXT:    arith.xori %[[KEY]], %{{.*}} : i64
// CHECK-NEXT:    %[[M:.*]] = arith.constant 747796405 : i64
// CHECK-NEXT:    arith.muli %{{.*}}, %[[M]] : i64
// CHECK:         arith.constant 28 : i64
// CHECK:         arith.shrsi
// CHECK:         arith.constant 277803737 : i64
// CHECK:         arith.xori %{{.*}}, %[[FI]] : i64
// CHECK:         %[[T:.*]] = arith.constant 4194304 : i64
// CHECK-NEXT:    %[[K:.*]] = arith.cmpi sge, %{{.*}}, %[[T]] : i64
// CHECK-NEXT:    %[[SC:.*]] = arith.constant 1.33333337 : f32
// CHECK-NEXT:    %[[Y:.*]] = arith.mulf %[[X]], %[[SC]] : f32
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[O:.*]] = arith.select %[[K]], %[[Y]], %[[Z]] : f32
// CHECK-NEXT:    te.yield %[[O]] : f32
// CHECK:       te.compute "dropout_{{[0-9]+}}" (%[[J0:.*]], %[[J1:.*]]) : tensor<4x8xf32> {
// CHECK-NEXT:    %[[V:.*]] = te.read %x[%[[J0]], %[[J1]]] : tensor<4x8xf32>
// CHECK-NEXT:    te.yield %[[V]] : f32
func.func @dropout(%x: tensor<4x8xf32>, %step: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = graph.dropout %x, %step {p = 0.25 : f64, seed = 42 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = graph.dropout %x {p = 0.25 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// Softmax over another axis: max, sum of exp, exp / sum (no row kernel to keep exp in).
// CHECK-LABEL: func.func @softmax_axis0
// CHECK:       %[[MAX:.*]] = te.reduce "softmax_{{[0-9]+}}_max" (%{{.*}}) reduce (%{{.*}}) over [4] combiner "max" init -inf : tensor<16xf32>
// CHECK:       %[[SUM:.*]] = te.reduce "softmax_{{[0-9]+}}_sum" (%{{.*}}) reduce (%{{.*}}) over [4] combiner "add" init 0.000000e+00 : tensor<16xf32>
// CHECK:         math.exp
// CHECK:       te.compute "softmax_{{[0-9]+}}" (%{{.*}}, %{{.*}}) : tensor<4x16xf32>
// CHECK:         te.read %[[MAX]]
// CHECK:         math.exp
// CHECK:         te.read %[[SUM]]
// CHECK:         arith.divf
func.func @softmax_axis0(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = graph.softmax %x {axis = 0 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}
