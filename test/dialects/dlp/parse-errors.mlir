// RUN: not dlpc-opt %s 2>&1 | filecheck %s
// A pool mode is a typed property: a mode other than "max" or "sum" is a located parse error.

func.func @pool_bad_mode() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
  dlp.pool "avg" %a[%c0], %a[%c0], %c1 {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
  func.return
}
// CHECK: parse-errors.mlir:8:12: error: dlp.pool has mode "avg", expected "max" or "sum"
// CHECK-NOT: Traceback
