// RUN: dlpc-opt %s | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | dlpc-opt | filecheck %s

// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %bias: tensor<16xf32>, %idx: tensor<3xi64>) -> tensor<4x16xf32> {
  // CHECK:      %[[Y:.*]] = te.compute "relu_0" (%[[I0:.*]], %[[I1:.*]]) : tensor<4x8xf32> {
  // CHECK-NEXT:   %[[V:.*]] = te.read %x[%[[I0]], %[[I1]]] : tensor<4x8xf32>
  // CHECK-NEXT:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
  // CHECK-NEXT:   %[[R:.*]] = arith.maximumf %[[V]], %[[Z]] : f32
  // CHECK-NEXT:   te.yield %[[R]] : f32
  // CHECK-NEXT: }
  %y = te.compute "relu_0" (%i0, %i1) : tensor<4x8xf32> {
    %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
    %z = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %z : f32
    te.yield %r : f32
  }
  // CHECK:      te.reduce "matmul_0" (%{{.*}}, %{{.*}}) reduce (%[[R0:.*]]) over [8] combiner "add" init 0.000000e+00 : tensor<4x16xf32> {
  // CHECK:        te.yield %{{.*}} : f32
  // CHECK-NEXT: } epilogue (%[[ACC:.*]]: f32, %{{.*}}: index, %[[J1:.*]]: index) {
  // CHECK-NEXT:   %[[C:.*]] = te.read %bias[%[[J1]]] : tensor<16xf32>
  // CHECK-NEXT:   %{{.*}} = arith.addf %[[ACC]], %[[C]] : f32
  %m = te.reduce "matmul_0" (%i0, %i1) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4x16xf32> {
    %a = te.read %y[%i0, %r0] : tensor<4x8xf32>
    %b = te.read %w[%i1, %r0] : tensor<16x8xf32>
    %p = arith.mulf %a, %b : f32
    te.yield %p : f32
  } epilogue (%acc : f32, %j0 : index, %j1 : index) {
    %c = te.read %bias[%j1] : tensor<16xf32>
    %s = arith.addf %acc, %c : f32
    te.yield %s : f32
  }
  // CHECK: te.reduce "max_0" () reduce (%{{.*}}, %{{.*}}) over [4, 16] combiner "max" init -inf : tensor<f32> {
  // CHECK: } attributes {foo = 1 : i64}
  %mx = te.reduce "max_0" () reduce (%r0, %r1) over [4, 16] combiner "max" init -inf : tensor<f32> {
    %a = te.read %m[%r0, %r1] : tensor<4x16xf32>
    te.yield %a : f32
  } attributes {foo = 1 : i64}
  // CHECK: te.reduce "prod_0" (%{{.*}}) reduce (%{{.*}}) over [16] combiner "mul" init 1.000000e+00 : tensor<4xf32>
  %pr = te.reduce "prod_0" (%i0) reduce (%r0) over [16] combiner "mul" init 1.0 : tensor<4xf32> {
    %a = te.read %m[%i0, %r0] : tensor<4x16xf32>
    te.yield %a : f32
  }
  // A guarded read (padding) and an integer index read (gather), with i1 results.
  // CHECK:      te.compute "pad_0" (%[[P0:.*]]) : tensor<10xf32> {
  // CHECK:        %{{.*}} = scf.if %{{.*}} -> (f32) {
  // CHECK:          te.read %bias[%{{.*}}] : tensor<16xf32>
  %pad = te.compute "pad_0" (%i0) : tensor<10xf32> {
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %s = arith.subi %i0, %c2 : index
    %lt = arith.cmpi slt, %s, %c16 : index
    %v = scf.if %lt -> (f32) {
      %r = te.read %bias[%s] : tensor<16xf32>
      scf.yield %r : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    te.yield %v : f32
  }
  // CHECK: te.compute "gather_0" (%{{.*}}) : tensor<3xi1> {
  %g = te.compute "gather_0" (%i0) : tensor<3xi1> {
    %k = te.read %idx[%i0] : tensor<3xi64>
    %ki = arith.index_cast %k : i64 to index
    %v = te.read %bias[%ki] : tensor<16xf32>
    %z = arith.constant 0.0 : f32
    %b = arith.cmpf ogt, %v, %z : f32
    te.yield %b : i1
  }
  func.return %m : tensor<4x16xf32>
}
