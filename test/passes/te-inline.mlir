// RUN: dlpc-opt %s -p te-inline | filecheck %s
// RUN: dlpc-opt %s -p "te-inline{names=exp_0}" | filecheck %s --check-prefix=NAMED

// An elementwise producer is substituted into its consumer's reads (index arguments
// bound to the read's indices); producers returned from the function stay.

// CHECK-LABEL: func.func @chain
// CHECK-NOT:   te.compute "exp_0"
// CHECK-NOT:   te.compute "neg_1"
// CHECK:       te.reduce "sum_2" (%[[I:.*]]) reduce (%[[R:.*]]) over [8] combiner "add"
// CHECK-NEXT:    %[[V:.*]] = te.read %x[%[[R]], %[[I]]] : tensor<8x4xf32>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:    %[[N:.*]] = arith.negf %[[E]] : f32
// CHECK-NEXT:    te.yield %[[N]] : f32
// CHECK:       te.compute "keep_3"
// CHECK:       func.return

// NAMED-LABEL: func.func @chain
// NAMED-NOT:   te.compute "exp_0"
// NAMED:       te.compute "neg_1" (%[[I0:.*]], %[[I1:.*]]) : tensor<4x8xf32> {
// NAMED-NEXT:    %[[V:.*]] = te.read %x[%[[I1]], %[[I0]]] : tensor<8x4xf32>
// NAMED-NEXT:    %[[E:.*]] = math.exp %[[V]] : f32
// NAMED-NEXT:    arith.negf %[[E]] : f32
// NAMED:       te.reduce "sum_2"
// NAMED-NEXT:    te.read %{{.*}}[%{{.*}}, %{{.*}}] : tensor<4x8xf32>
func.func @chain(%x: tensor<8x4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = te.compute "exp_0" (%i0, %i1) : tensor<8x4xf32> {
    %v = te.read %x[%i0, %i1] : tensor<8x4xf32>
    %r = math.exp %v : f32
    te.yield %r : f32
  }
  %n = te.compute "neg_1" (%i0, %i1) : tensor<4x8xf32> {
    %v = te.read %e[%i1, %i0] : tensor<8x4xf32>
    %r = arith.negf %v : f32
    te.yield %r : f32
  }
  %s = te.reduce "sum_2" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %n[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  %k = te.compute "keep_3" (%i0, %i1) : tensor<4x8xf32> {
    %v = te.read %x[%i1, %i0] : tensor<8x4xf32>
    te.yield %v : f32
  }
  func.return %s, %k : tensor<4xf32>, tensor<4x8xf32>
}

// A guarded read inlines inside its scf.if branch, so it stays guarded.
// CHECK-LABEL: func.func @guarded
// CHECK:       te.compute "shift_1"
// CHECK:         scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:      %[[V:.*]] = te.read %x[%{{.*}}] : tensor<8xf32>
// CHECK-NEXT:      %[[A:.*]] = math.absf %[[V]] : f32
// CHECK-NEXT:      scf.yield %[[A]] : f32
func.func @guarded(%x: tensor<8xf32>) -> tensor<10xf32> {
  %a = te.compute "abs_0" (%i0) : tensor<8xf32> {
    %v = te.read %x[%i0] : tensor<8xf32>
    %r = math.absf %v : f32
    te.yield %r : f32
  }
  %s = te.compute "shift_1" (%i0) : tensor<10xf32> {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %j = arith.subi %i0, %c1 : index
    %lo = arith.cmpi sge, %j, %c1 : index
    %v = scf.if %lo -> (f32) {
      %r = te.read %a[%j] : tensor<8xf32>
      scf.yield %r : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    te.yield %v : f32
  }
  func.return %s : tensor<10xf32>
}
