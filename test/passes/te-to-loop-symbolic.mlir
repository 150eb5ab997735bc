// RUN: dlpc-opt %s --split-input-file -p te-to-loop | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p te-to-loop | dlpc-opt --split-input-file | filecheck %s

// Symbolic dims (passes/lower/_symbolic.py): buffers at the maxima (dlpc.max_dims); the
// reduction over seq is guarded by the call's seq (read from dlpc_dims) at once; the
// spatial loop over seq of a kernel whose indices do not read the dims is only marked
// dlpc.extent (loop-runtime-extents guards it after the schedules).

// CHECK-LABEL: func.func @main(%x: memref<16x8xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<16x8xf32>)
// CHECK:         loop.kernel "max_0"
// CHECK:           loop.for %[[R:.*]] = 0 to 16 step 1 {name = "r0", reduction} {
// CHECK-NEXT:        %[[K:.*]] = arith.constant 0 : index
// CHECK-NEXT:        %[[SEQ:.*]] = memref.load %dlpc_dims[%[[K]]] : memref<1xi64>
// CHECK-NEXT:        %[[N:.*]] = arith.index_cast %[[SEQ]] : i64 to index
// CHECK-NEXT:        %[[C:.*]] = arith.cmpi slt, %[[R]], %[[N]] : index
// CHECK-NEXT:        scf.if %[[C]] {
// CHECK-NEXT:          memref.load %x[%[[R]], %{{.*}}] : memref<16x8xf32>
// CHECK:         loop.kernel "sub_1"
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 16 step 1 {name = "i0", parallel, dlpc.extent = "seq"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 8 step 1 {name = "i1", vectorize} {
// CHECK-NOT:           scf.if
func.func @main(%x: tensor<?x8xf32, ["seq"]>, %dlpc_dims: tensor<1xi64>) -> tensor<?x8xf32, ["seq"]> attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 16 : i64}} {
  %m = te.reduce "max_0" (%i0) reduce (%r0) over [-1] combiner "max" init -inf : tensor<8xf32> {
    %0 = te.read %x[%r0, %i0] : tensor<?x8xf32, ["seq"]>
    te.yield %0 : f32
  } attributes {dlpc.over = ["seq"]}
  %y = te.compute "sub_1" (%i1, %i2) : tensor<?x8xf32, ["seq"]> {
    %1 = te.read %x[%i1, %i2] : tensor<?x8xf32, ["seq"]>
    %2 = te.read %m[%i2] : tensor<8xf32>
    %3 = arith.subf %1, %2 : f32
    te.yield %3 : f32
  }
  func.return %y : tensor<?x8xf32, ["seq"]>
}
