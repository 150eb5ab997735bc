// RUN: dlpc-opt %s --split-input-file -p loop-short-extents | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p loop-short-extents -p loop-short-extents | filecheck %s

// A row sum over a symbolic batch and seq (maxima 4 and 16): with the bindings
// {batch = 1, seq = 2} and {batch = 1, seq = 3}, the kernel becomes a chain of
// `scf.if dims == binding` over copies of it; each copy is static (every marked loop's
// extent is a value of the binding: it runs to exactly that value and loses its mark,
// the kernel its dlpc.exact), the kernel itself is the last `else`; a copy is named after
// its binding and marked dlpc.short (its loops stop short of the buffers: past them lies
// padding). The attribute goes, so a second run changes nothing.

// CHECK-LABEL: func.func @main
// CHECK-NOT:     dlpc.short_extents
// CHECK:         %[[B:.*]] = memref.load %dlpc_dims[%{{.*}}] : memref<2xi64>
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-NEXT:    %[[CB:.*]] = arith.cmpi eq, %[[B]], %[[ONE]] : i64
// CHECK:         %[[S:.*]] = memref.load %dlpc_dims[%{{.*}}] : memref<2xi64>
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-NEXT:    %[[CS:.*]] = arith.cmpi eq, %[[S]], %[[TWO]] : i64
// CHECK-NEXT:    %[[C:.*]] = arith.andi %[[CB]], %[[CS]] : i1
// CHECK-NEXT:    scf.if %[[C]] {
// CHECK-NEXT:      loop.kernel "sum_0_batch1_seq2" attributes {dlpc.short} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 1 step 1 {name = "i0", parallel} {
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 2 step 1 {name = "r0", reduction} {
// CHECK:         } else {
// CHECK:           scf.if %{{.*}} {
// CHECK-NEXT:        loop.kernel "sum_0_batch1_seq3" attributes {dlpc.short} {
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 1 step 1 {name = "i0", parallel} {
// CHECK-NEXT:            loop.for %{{.*}} = 0 to 3 step 1 {name = "r0", reduction} {
// CHECK:           } else {
// CHECK-NEXT:        loop.kernel "sum_0" attributes {dlpc.exact = ["r0"]} {
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 4 step 1 {name = "i0", parallel, dlpc.extent = "batch"} {
// CHECK-NEXT:            loop.for %{{.*}} = 0 to 16 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
func.func @main(%x: memref<4x16xf32>, %dlpc_dims: memref<2xi64>, %out0: memref<4xf32>) attributes {dlpc.dims = ["batch", "seq"], dlpc.max_dims = {batch = 4 : i64, seq = 16 : i64}, dlpc.short_extents = [{batch = 1 : i64, seq = 2 : i64}, {batch = 1 : i64, seq = 3 : i64}], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "sum_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel, dlpc.extent = "batch"} {
      loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
        %v = memref.load %x[%i0, %r0] : memref<4x16xf32>
        %a = memref.load %out0[%i0] : memref<4xf32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %out0[%i0] : memref<4xf32>
      }
    }
  }
  func.return
}

// -----

// With the binding {seq = 2} alone, the batch loop keeps its maximum: the copy is not
// static, so every loop keeps its mark (a call stops at its own extents) and the loops
// over seq run to 2; the guard tests seq only. A copy kernel (no reduction loop) is left
// as it is.
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "neg_0" {
// CHECK:         arith.cmpi eq
// CHECK-NEXT:    scf.if
// CHECK-NEXT:      loop.kernel "sum_1_seq2" attributes {dlpc.exact = ["r0"]} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 4 step 1 {name = "i0", parallel, dlpc.extent = "batch"} {
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 2 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
func.func @main(%x: memref<4x16xf32>, %dlpc_dims: memref<2xi64>, %out0: memref<4xf32>) attributes {dlpc.dims = ["batch", "seq"], dlpc.max_dims = {batch = 4 : i64, seq = 16 : i64}, dlpc.short_extents = [{seq = 2 : i64}], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %y = memref.alloc() : memref<4x16xf32>
  loop.kernel "neg_0" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel, dlpc.extent = "batch"} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1", dlpc.extent = "seq"} {
        %v = memref.load %x[%i0, %i1] : memref<4x16xf32>
        %n = arith.negf %v : f32
        memref.store %n, %y[%i0, %i1] : memref<4x16xf32>
      }
    }
  }
  loop.kernel "sum_1" attributes {dlpc.exact = ["r0"]} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel, dlpc.extent = "batch"} {
      loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
        %v = memref.load %y[%i0, %r0] : memref<4x16xf32>
        %a = memref.load %out0[%i0] : memref<4xf32>
        %s = arith.addf %a, %v : f32
        memref.store %s, %out0[%i0] : memref<4xf32>
      }
    }
  }
  memref.dealloc %y : memref<4x16xf32>
  func.return
}

// -----

// A row group (te-to-loop's block of 16 rows, i1 with dlpc.extent_id 1, and its per-row
// loop b, whose index adds i1's): at seq = 3 the block loop runs once from 0, so b runs
// to exactly 3 and the copy is static (the marks and the split ids go).
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "rows_0_seq3" attributes {dlpc.short} {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 16 step 16 {name = "i1"} {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 3 step 1 {name = "b"} {
// CHECK-NEXT:          arith.addi
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 3 step 1 {name = "r0", reduction} {
func.func @main(%x: memref<32x32xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<32xf32>) attributes {dlpc.dims = ["seq"], dlpc.max_dims = {seq = 32 : i64}, dlpc.short_extents = [{seq = 3 : i64}], dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "rows_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %i1 = 0 to 32 step 16 {name = "i1", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %b = 0 to 16 step 1 {name = "b", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %i1, %b : index
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
          %v = memref.load %x[%i, %r0] : memref<32x32xf32>
          %a = memref.load %out0[%i] : memref<32xf32>
          %s = arith.addf %a, %v : f32
          memref.store %s, %out0[%i] : memref<32xf32>
        }
      }
    }
  }
  func.return
}
