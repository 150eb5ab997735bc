// RUN: dlpc-opt %s --split-input-file -p te-to-loop | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p te-to-loop | dlpc-opt --split-input-file | filecheck %s

// A relu feeding a matmul-like reduction with a fused bias epilogue; the relu is an
// intermediate (alloc'd, dealloc'd after its last reader), one output is returned twice
// and one is an input (both copied).

// CHECK:       "memref.global"() <{sym_name = "__constant_0", type = memref<4xf32>, initial_value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>, sym_visibility = "private", constant}>
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[X:.*]]: memref<4x8xf32> {dlpc.name = "input.x"}, %[[W:.*]]: memref<8xf32> {dlpc.name = "fc.w"},
// CHECK-SAME:    %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<4xf32>, %[[O2:.*]]: memref<4x8xf32>)
// CHECK-SAME:    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["fc.w"], dlpc.num_outputs = 3 : i64}
// CHECK-NEXT:    %[[C:.*]] = memref.get_global @__constant_0 : memref<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    loop.kernel "relu_0" attributes {origin = "graph.relu"} {
// CHECK-NEXT:      loop.for %[[I0:.*]] = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK-NEXT:        loop.for %[[I1:.*]] = 0 to 8 step 1 {name = "i1", vectorize} {
// CHECK-NEXT:          %[[V:.*]] = memref.load %[[X]][%[[I0]], %[[I1]]] : memref<4x8xf32>
// CHECK:               %[[R:.*]] = arith.maximumf %[[V]], %{{.*}} : f32
// CHECK-NEXT:          memref.store %[[R]], %[[Y]][%[[I0]], %[[I1]]] : memref<4x8xf32>
// CHECK:         loop.kernel "matmul_1" attributes {origin = "graph.matmul"} {
// CHECK-NEXT:      loop.for %[[J:.*]] = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK-NEXT:        %[[ACC:.*]] = memref.alloca() : memref<f32>
// CHECK-NEXT:        %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        memref.store %[[ZERO]], %[[ACC]][] : memref<f32>
// CHECK-NEXT:        loop.for %[[R0:.*]] = 0 to 8 step 1 {name = "r0", reduction} {
// CHECK-NEXT:          %[[A:.*]] = memref.load %[[Y]][%[[J]], %[[R0]]] : memref<4x8xf32>
// CHECK-NEXT:          %[[B:.*]] = memref.load %[[W]][%[[R0]]] : memref<8xf32>
// CHECK-NEXT:          %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:          %[[OLD:.*]] = memref.load %[[ACC]][] : memref<f32>
// CHECK-NEXT:          %[[NEW:.*]] = arith.addf %[[OLD]], %[[P]] : f32
// CHECK-NEXT:          memref.store %[[NEW]], %[[ACC]][] : memref<f32>
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[SUM:.*]] = memref.load %[[ACC]][] : memref<f32>
// CHECK-NEXT:        %[[CC:.*]] = memref.load %[[C]][%[[J]]] : memref<4xf32>
// CHECK-NEXT:        %[[T:.*]] = arith.addf %[[SUM]], %[[CC]] : f32
// CHECK-NEXT:        memref.store %[[T]], %[[O0]][%[[J]]] : memref<4xf32>
// CHECK:         memref.dealloc %[[Y]] : memref<4x8xf32>
// CHECK-NEXT:    loop.kernel "copy_out1" attributes {origin = "func.return"} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 4 step 1 {name = "i0", parallel, vectorize} {
// CHECK-NEXT:        %[[L:.*]] = memref.load %[[O0]][%{{.*}}] : memref<4xf32>
// CHECK-NEXT:        memref.store %[[L]], %[[O1]][%{{.*}}] : memref<4xf32>
// CHECK:         loop.kernel "copy_out2" attributes {origin = "func.return"} {
// CHECK:             memref.load %[[X]]
// CHECK:             memref.store %{{.*}}, %[[O2]]
// CHECK:         func.return
// CHECK-NEXT:  }
func.func @main(%x: tensor<4x8xf32> {dlpc.name = "input.x"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %w = graph.param "fc.w" : tensor<8xf32>
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %y = te.compute "relu_0" (%i0, %i1) : tensor<4x8xf32> {
    %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
    %z = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %z : f32
    te.yield %r : f32
  }
  %s = te.reduce "matmul_1" (%i0) reduce (%r0) over [8] combiner "add" init 0.000000e+00 : tensor<4xf32> {
    %a = te.read %y[%i0, %r0] : tensor<4x8xf32>
    %b = te.read %w[%r0] : tensor<8xf32>
    %p = arith.mulf %a, %b : f32
    te.yield %p : f32
  } epilogue (%acc : f32, %j0 : index) {
    %cc = te.read %c[%j0] : tensor<4xf32>
    %t = arith.addf %acc, %cc : f32
    te.yield %t : f32
  }
  func.return %s, %s, %x : tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>
}

// -----
// A rank-0 max-reduction over two axes with an outer dim of extent 1 (not parallel:
// the next spatial loop is), and a guarded read in scf.if.

// CHECK-LABEL: func.func @main(%{{.*}}: memref<1x3x5xf32>, %{{.*}}: memref<1x3xf32>)
// CHECK:         loop.kernel "reduce_max_0"
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 1 step 1 {name = "i0"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 3 step 1 {name = "i1", parallel} {
// CHECK:               arith.constant 0xff800000 : f32
// CHECK:               loop.for %{{.*}} = 0 to 5 step 1 {name = "r0", reduction} {
// CHECK:                 scf.if
// CHECK:                   memref.load
// CHECK:                 arith.maximumf
func.func @main(%x: tensor<1x3x5xf32>) -> tensor<1x3xf32> {
  %m = te.reduce "reduce_max_0" (%i0, %i1) reduce (%r0) over [5] combiner "max" init -inf : tensor<1x3xf32> {
    %c2 = arith.constant 2 : index
    %ok = arith.cmpi ult, %r0, %c2 : index
    %v = scf.if %ok -> (f32) {
      %e = te.read %x[%i0, %i1, %r0] : tensor<1x3x5xf32>
      scf.yield %e : f32
    } else {
      %z = arith.constant 0.000000e+00 : f32
      scf.yield %z : f32
    }
    te.yield %v : f32
  }
  func.return %m : tensor<1x3xf32>
}

// -----
// A function-level scalar constant used in a body is copied into the kernel.

// CHECK-LABEL: func.func @main(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>)
// CHECK-NEXT:    loop.kernel "scale_0" {
// CHECK-NEXT:      %[[S:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      loop.for %[[I:.*]] = 0 to 4 step 1 {name = "i0", parallel, vectorize} {
// CHECK-NEXT:        %[[V:.*]] = memref.load %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK-NEXT:        %{{.*}} = arith.mulf %[[V]], %[[S]] : f32
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = arith.constant 2.000000e+00 : f32
  %y = te.compute "scale_0" (%i0) : tensor<4xf32> {
    %v = te.read %x[%i0] : tensor<4xf32>
    %m = arith.mulf %v, %s : f32
    te.yield %m : f32
  }
  func.return %y : tensor<4xf32>
}

// -----
// With vectorize_reductions the innermost reduction loop is vectorised too.

// RUN: dlpc-opt %s --split-input-file -p 'te-to-loop{vectorize_reductions=true}' | filecheck %s --check-prefix=VEC
// VEC-LABEL: loop.kernel "sum_0"
// VEC:         loop.for %{{.*}} = 0 to 3 step 1 {name = "r0", reduction} {
// VEC-NEXT:      loop.for %{{.*}} = 0 to 5 step 1 {name = "r1", vectorize, reduction} {
// CHECK-LABEL: loop.kernel "sum_0"
// CHECK:         loop.for %{{.*}} = 0 to 5 step 1 {name = "r1", reduction} {
func.func @main(%x: tensor<2x3x5xf32>) -> tensor<2xf32> {
  %s = te.reduce "sum_0" (%i0) reduce (%r0, %r1) over [3, 5] combiner "add" init 0.000000e+00 : tensor<2xf32> {
    %v = te.read %x[%i0, %r0, %r1] : tensor<2x3x5xf32>
    te.yield %v : f32
  }
  func.return %s : tensor<2xf32>
}

// -----
// Result attributes move to the output arguments.

// CHECK-LABEL: func.func @main(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32> {dlpc.name = "logits"})
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32> {dlpc.name = "logits"}) {
  %y = te.compute "neg_0" (%i0) : tensor<4xf32> {
    %v = te.read %x[%i0] : tensor<4xf32>
    %n = arith.negf %v : f32
    te.yield %n : f32
  }
  func.return %y : tensor<4xf32>
}

// -----
// Two graph.param ops with one name are one parameter argument.

// CHECK-LABEL: func.func @main(%x: memref<4xf32>, %w: memref<4xf32> {dlpc.name = "w"}, %out0: memref<4xf32>)
// CHECK-SAME:    dlpc.params = ["w"]
// CHECK:         memref.load %w[
// CHECK:         memref.load %w[
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w1 = graph.param "w" : tensor<4xf32>
  %w2 = graph.param "w" : tensor<4xf32>
  %y = te.compute "add_0" (%i0) : tensor<4xf32> {
    %a = te.read %w1[%i0] : tensor<4xf32>
    %b = te.read %w2[%i0] : tensor<4xf32>
    %s = arith.addf %a, %b : f32
    te.yield %s : f32
  }
  func.return %y : tensor<4xf32>
}


// -----

// A row group (softmax over the last axis: max, exp, sum, scale) is ONE kernel: rows in
// blocks (8 here), per block each member one row after another; the reductions' results
// and the exps live in block-local buffers, exp is computed once.
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "softmax_0" attributes {origin = "graph.softmax"} {
// CHECK-NEXT:      loop.for %[[I0:.*]] = 0 to 1 step 1 {name = "i0"} {
// CHECK:             %[[START:.*]] = arith.muli %[[I0]], %{{.*}} : index
// CHECK-NEXT:        %[[MAX:.*]] = memref.alloca() : memref<8xf32>
// CHECK-NEXT:        loop.for %[[B:.*]] = 0 to 8 step 1 {name = "b"} {
// CHECK-NEXT:          %[[ROW:.*]] = arith.addi %[[START]], %[[B]] : index
// CHECK:               loop.for %[[R:.*]] = 0 to 16 step 1 {name = "r0", vectorize, reduction} {
// CHECK-NEXT:            memref.load %x[%[[ROW]], %[[R]]] : memref<8x16xf32>
// CHECK:               memref.store %{{.*}}, %[[MAX]][%[[B]]] : memref<8xf32>
// CHECK:             %[[EXP:.*]] = memref.alloca() : memref<8x16xf32>
// CHECK-NEXT:        loop.for %[[B1:.*]] = 0 to 8 step 1 {name = "b_1"} {
// CHECK:               loop.for %[[J:.*]] = 0 to 16 step 1 {name = "j0_1", vectorize} {
// CHECK:                 memref.load %[[MAX]][%[[B1]]] : memref<8xf32>
// CHECK:                 math.exp
// CHECK-NEXT:            memref.store %{{.*}}, %[[EXP]][%[[B1]], %[[J]]] : memref<8x16xf32>
// CHECK:             %[[SUM:.*]] = memref.alloca() : memref<8xf32>
// CHECK-NEXT:        loop.for %[[B2:.*]] = 0 to 8 step 1 {name = "b_2"} {
// CHECK:               loop.for %[[R2:.*]] = 0 to 16 step 1 {name = "r0_2", vectorize, reduction} {
// CHECK-NEXT:            memref.load %[[EXP]][%[[B2]], %[[R2]]] : memref<8x16xf32>
// CHECK:               memref.store %{{.*}}, %[[SUM]][%[[B2]]] : memref<8xf32>
// CHECK:             loop.for %[[B3:.*]] = 0 to 8 step 1 {name = "b_3"} {
// CHECK-NEXT:          %[[ROW3:.*]] = arith.addi %[[START]], %[[B3]] : index
// CHECK-NEXT:          loop.for %[[J3:.*]] = 0 to 16 step 1 {name = "j0_3", vectorize} {
// CHECK-NEXT:            memref.load %[[EXP]][%[[B3]], %[[J3]]] : memref<8x16xf32>
// CHECK-NEXT:            memref.load %[[SUM]][%[[B3]]] : memref<8xf32>
// CHECK-NOT:             math.exp
// CHECK:                 memref.store %{{.*}}, %out0[%[[ROW3]], %[[J3]]] : memref<8x16xf32>
// CHECK-NOT:     loop.kernel
// CHECK:         func.return
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %softmax_0_max = te.reduce "softmax_0_max" (%i0) reduce (%r0) over [16] combiner "max" init -inf : tensor<8xf32> {
    %0 = te.read %x[%i0, %r0] : tensor<8x16xf32>
    te.yield %0 : f32
  } attributes {origin = "graph.softmax"}
  %softmax_0_exp = te.compute "softmax_0_exp" (%i0_1, %i1) : tensor<8x16xf32> {
    %1 = te.read %x[%i0_1, %i1] : tensor<8x16xf32>
    %2 = te.read %softmax_0_max[%i0_1] : tensor<8xf32>
    %3 = arith.subf %1, %2 : f32
    %4 = math.exp %3 : f32
    te.yield %4 : f32
  } attributes {origin = "graph.softmax"}
  %softmax_0_sum = te.reduce "softmax_0_sum" (%i0_2) reduce (%r0_1) over [16] combiner "add" init 0.000000e+00 : tensor<8xf32> {
    %5 = te.read %softmax_0_exp[%i0_2, %r0_1] : tensor<8x16xf32>
    te.yield %5 : f32
  } attributes {origin = "graph.softmax"}
  %y = te.compute "softmax_0" (%i0_3, %i1_1) : tensor<8x16xf32> {
    %6 = te.read %softmax_0_exp[%i0_3, %i1_1] : tensor<8x16xf32>
    %7 = te.read %softmax_0_sum[%i0_3] : tensor<8xf32>
    %8 = arith.constant 1.000000e+00 : f32
    %9 = arith.divf %8, %7 : f32
    %10 = arith.mulf %6, %9 : f32
    te.yield %10 : f32
  } attributes {origin = "graph.softmax"}
  func.return %y : tensor<8x16xf32>
}


// -----

// Layer norm's row group: the reductions' epilogues (mean = sum / n, rstd = 1 /
// sqrt(var + eps)) run vectorized across the block of 16 rows (loops `e`), not once per row.
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "layer_norm_0" attributes {origin = "graph.layer_norm"} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 2 step 1 {name = "i0", parallel} {
// CHECK:             %[[MEAN:.*]] = memref.alloca() : memref<16xf32>
// CHECK-NEXT:        %[[MACC:.*]] = memref.alloca() : memref<16xf32>
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 16 step 1 {name = "b"} {
// CHECK:               loop.for %{{.*}} = 0 to 8 step 1 {name = "r0", vectorize, reduction} {
// CHECK:             loop.for %[[E:.*]] = 0 to 16 step 1 {name = "e", vectorize} {
// CHECK:               memref.load %[[MACC]][%[[E]]] : memref<16xf32>
// CHECK:               arith.divf
// CHECK:               memref.store %{{.*}}, %[[MEAN]][%[[E]]] : memref<16xf32>
// CHECK:             loop.for %[[E1:.*]] = 0 to 16 step 1 {name = "e_1", vectorize} {
// CHECK:               math.sqrt
// CHECK:             loop.for %{{.*}} = 0 to 16 step 1 {name = "b_2"} {
// CHECK-NEXT:          %[[ROW:.*]] = arith.addi
// CHECK-NEXT:          loop.for %[[J:.*]] = 0 to 8 step 1 {name = "j0_2", vectorize} {
// CHECK:                 memref.store %{{.*}}, %out0[%[[ROW]], %[[J]]] : memref<32x8xf32>
// CHECK-NOT:     loop.kernel
// CHECK:         func.return
func.func @main(%x: tensor<32x8xf32>, %s: tensor<8xf32>) -> tensor<32x8xf32> {
  %layer_norm_0_mean = te.reduce "layer_norm_0_mean" (%i0) reduce (%r0) over [8] combiner "add" init 0.000000e+00 : tensor<32xf32> {
    %0 = te.read %x[%i0, %r0] : tensor<32x8xf32>
    te.yield %0 : f32
  } epilogue (%acc: f32, %j0: index) {
    %1 = arith.constant 8.000000e+00 : f32
    %2 = arith.divf %acc, %1 : f32
    te.yield %2 : f32
  } attributes {origin = "graph.layer_norm"}
  %layer_norm_0_rstd = te.reduce "layer_norm_0_rstd" (%i0_1) reduce (%r0_1) over [8] combiner "add" init 0.000000e+00 : tensor<32xf32> {
    %3 = te.read %x[%i0_1, %r0_1] : tensor<32x8xf32>
    %4 = te.read %layer_norm_0_mean[%i0_1] : tensor<32xf32>
    %5 = arith.subf %3, %4 : f32
    %6 = arith.mulf %5, %5 : f32
    te.yield %6 : f32
  } epilogue (%acc_1: f32, %j0_1: index) {
    %7 = arith.constant 8.000000e+00 : f32
    %8 = arith.divf %acc_1, %7 : f32
    %9 = arith.constant 1.000000e-05 : f32
    %10 = arith.addf %8, %9 : f32
    %11 = math.sqrt %10 : f32
    %12 = arith.constant 1.000000e+00 : f32
    %13 = arith.divf %12, %11 : f32
    te.yield %13 : f32
  } attributes {origin = "graph.layer_norm"}
  %y = te.compute "layer_norm_0" (%i0_2, %i1) : tensor<32x8xf32> {
    %14 = te.read %x[%i0_2, %i1] : tensor<32x8xf32>
    %15 = te.read %layer_norm_0_mean[%i0_2] : tensor<32xf32>
    %16 = arith.subf %14, %15 : f32
    %17 = te.read %layer_norm_0_rstd[%i0_2] : tensor<32xf32>
    %18 = arith.mulf %16, %17 : f32
    %19 = te.read %s[%i1] : tensor<8xf32>
    %20 = arith.mulf %18, %19 : f32
    te.yield %20 : f32
  } attributes {origin = "graph.layer_norm"}
  func.return %y : tensor<32x8xf32>
}
