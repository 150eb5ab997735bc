// RUN: dlpc-opt %s -p te-to-loop | filecheck %s

// A te.reduce marked dlpc.nsw_sum (quant_to_te's u8 x s8 sums, bounded by K * 255 * 128):
// its combining add carries overflow<nsw>, which C prints in signed arithmetic (GCC's
// dot-product pattern, VNNI); an unmarked integer sum keeps the wrapping add.
// CHECK-LABEL: loop.kernel "dot"
// CHECK:         %{{.*}} = arith.muli %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK:         %[[S:.*]] = arith.addi %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK-NEXT:    memref.store %[[S]], %acc[] : memref<i32>
// CHECK-LABEL: loop.kernel "plain"
// CHECK:         %[[P:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    memref.store %[[P]], %acc{{.*}}[] : memref<i32>
func.func @main(%a: tensor<2x8xi8>, %b: tensor<4x8xi8>) -> (tensor<2x4xi32>, tensor<2xi32>) {
  %d = te.reduce "dot" (%i, %j) reduce (%r) over [8] combiner "add" init 0.000000e+00 : tensor<2x4xi32> {
    %x = te.read %a[%i, %r] : tensor<2x8xi8>
    %xw = arith.extsi %x : i8 to i32
    %w = te.read %b[%j, %r] : tensor<4x8xi8>
    %ww = arith.extsi %w : i8 to i32
    %p = arith.muli %xw, %ww overflow<nsw> : i32
    te.yield %p : i32
  } attributes {dlpc.nsw_sum}
  %s = te.reduce "plain" (%k) reduce (%q) over [8] combiner "add" init 0.000000e+00 : tensor<2xi32> {
    %y = te.read %a[%k, %q] : tensor<2x8xi8>
    %yw = arith.extsi %y : i8 to i32
    te.yield %yw : i32
  }
  func.return %d, %s : tensor<2x4xi32>, tensor<2xi32>
}
