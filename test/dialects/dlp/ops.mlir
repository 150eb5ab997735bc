// RUN: dlpc-opt %s | filecheck %s
// RUN: dlpc-opt %s | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | dlpc-opt | filecheck %s
// RUN: dlpc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @ops
func.func @ops(%x: memref<64x64xf32>, %out: memref<64x64xf32>) {
  // CHECK: dlp.kernel "all_ops" attributes {origin = "graph.relu", tasks = 16 : i64, dma_align = 64 : i64, vector_align = 64 : i64} {
  dlp.kernel "all_ops" attributes {origin = "graph.relu", tasks = 16 : i64, dma_align = 64 : i64, vector_align = 64 : i64} {
    // CHECK-NEXT: %{{.*}} = dlp.task_id
    // CHECK-NEXT: %{{.*}} = dlp.cluster_id
    // CHECK-NEXT: %{{.*}} = dlp.core_id
    %t = dlp.task_id
    %cl = dlp.cluster_id
    %co = dlp.core_id
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %s = arith.constant 2.0 : f32
    %a = memref.alloc() : memref<128xf32, #dlp.space<nram>>
    %b = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    %w = memref.alloc() : memref<4096xf32, #dlp.space<wram>>
    %sh = memref.alloc() : memref<4096xf32, #dlp.space<sram>>
    // CHECK: dlp.memcpy GDRAM2SRAM %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<4096xf32, #dlp.space<sram>>, memref<64x64xf32>
    // GENERIC: "dlp.memcpy"(%sh, %c0, %x, %c0, %c64) <{direction = #dlp<dir GDRAM2SRAM>}> :
    dlp.memcpy GDRAM2SRAM %sh[%c0], %x[%c0], %c64 : memref<4096xf32, #dlp.space<sram>>, memref<64x64xf32>
    // CHECK-NEXT: dlp.sync_cluster
    dlp.sync_cluster
    // CHECK-NEXT: dlp.memcpy SRAM2NRAM
    dlp.memcpy SRAM2NRAM %a[%c0], %sh[%c0], %c64 : memref<128xf32, #dlp.space<nram>>, memref<4096xf32, #dlp.space<sram>>
    // CHECK-NEXT: dlp.memcpy_async GDRAM2NRAM
    dlp.memcpy_async GDRAM2NRAM %a[%c64], %x[%c64], %c64 : memref<128xf32, #dlp.space<nram>>, memref<64x64xf32>
    // CHECK-NEXT: dlp.memcpy GDRAM2WRAM
    dlp.memcpy GDRAM2WRAM %w[%c0], %x[%c0], %c64 : memref<4096xf32, #dlp.space<wram>>, memref<64x64xf32>
    // CHECK-NEXT: dlp.memcpy_strided_async GDRAM2SRAM %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} x %{{.*}}, %{{.*}}, %{{.*}} : memref<4096xf32, #dlp.space<sram>>, memref<64x64xf32>
    // GENERIC: "dlp.memcpy_strided_async"(%sh, %c0, %x, %c0, %c16, %c2, %c16, %c64) <{direction = #dlp<dir GDRAM2SRAM>}> :
    dlp.memcpy_strided_async GDRAM2SRAM %sh[%c0], %x[%c0], %c16 x %c2, %c16, %c64 : memref<4096xf32, #dlp.space<sram>>, memref<64x64xf32>
    // CHECK-NEXT: dlp.wait_dma
    dlp.wait_dma
    // CHECK-NEXT: dlp.add %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // GENERIC: "dlp.add"(%b, %c0, %a, %c0, %a, %c64, %c64) :
    dlp.add %b[%c0], %a[%c0], %a[%c64], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.sub
    dlp.sub %b[%c0], %a[%c0], %a[%c64], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.mul
    dlp.mul %b[%c0], %a[%c0], %a[%c64], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.max
    dlp.max %b[%c0], %a[%c0], %a[%c64], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.mul_scalar %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, f32
    // GENERIC: "dlp.mul_scalar"(%b, %c0, %a, %c0, %s, %c64) :
    dlp.mul_scalar %b[%c0], %a[%c0], %s, %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, f32
    // CHECK-NEXT: dlp.add_scalar
    dlp.add_scalar %b[%c0], %a[%c0], %s, %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, f32
    // CHECK-NEXT: dlp.cycle_add {{.*}}, %{{.*}}, %{{.*}} : memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    // GENERIC: "dlp.cycle_add"(%a, %c0, %a, %c0, %b, %c0, %c64, %c16) :
    dlp.cycle_add %a[%c0], %a[%c0], %b[%c0], %c64, %c16 : memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.cycle_mul
    dlp.cycle_mul %a[%c0], %a[%c0], %b[%c0], %c64, %c16 : memref<128xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.relu
    // GENERIC: "dlp.relu"(%b, %c0, %a, %c0, %c64) :
    dlp.relu %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.sigmoid
    dlp.sigmoid %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.tanh
    dlp.tanh %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.exp
    dlp.exp %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.reduce_sum %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // GENERIC: "dlp.reduce_sum"(%b, %c0, %a, %c0, %c16, %c16) :
    dlp.reduce_sum %b[%c0], %a[%c0], %c16, %c16 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.reduce_max
    dlp.reduce_max %b[%c0], %a[%c0], %c16, %c16 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.transpose
    dlp.transpose %b[%c0], %a[%c0], %c16, %c16 : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.matmul {{.*}} {transpose_rhs} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<4096xf32, #dlp.space<wram>>
    // GENERIC: "dlp.matmul"(%b, %c0, %a, %c0, %w, %c0, %c16, %c16, %c16) {transpose_rhs} :
    dlp.matmul %b[%c0], %a[%c0], %w[%c0], %c16, %c16, %c16 {transpose_rhs} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<4096xf32, #dlp.space<wram>>
    // CHECK-NEXT: dlp.conv2d %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} {channels_in = 2 : i64, {{.*}}pad_top = 0 : i64
    // GENERIC: "dlp.conv2d"(%b, %c0, %a, %c0, %w, %c0, %c16) {channels_in = 2 : i64,
    dlp.conv2d %b[%c0], %a[%c0], %w[%c0], %c16 {channels_in = 2 : i64, height = 4 : i64, width = 4 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, pad_right = 0 : i64} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>, memref<4096xf32, #dlp.space<wram>>
    // CHECK-NEXT: dlp.pool "max" %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} {height = 4 : i64, width = 4 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 1 : i64, pad_left = 1 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // GENERIC: "dlp.pool"(%b, %c0, %a, %c0, %c2) <{mode = #dlp<pool_mode "max">}> {height = 4 : i64,
    dlp.pool "max" %b[%c0], %a[%c0], %c2 {height = 4 : i64, width = 4 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 1 : i64, pad_left = 1 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.pool "sum"
    dlp.pool "sum" %b[%c0], %a[%c0], %c2 {height = 4 : i64, width = 4 : i64, kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64} : memref<64xf32, #dlp.space<nram>>, memref<128xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.memcpy NRAM2GDRAM
    dlp.memcpy NRAM2GDRAM %out[%c0], %b[%c0], %c64 : memref<64x64xf32>, memref<64xf32, #dlp.space<nram>>
    // CHECK-NEXT: dlp.memcpy GDRAM2GDRAM %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %{{.*}} : memref<64x64xf32>, memref<64x64xf32>
    dlp.memcpy GDRAM2GDRAM %out[%c0], %out[%c64], %c64 : memref<64x64xf32>, memref<64x64xf32>
    // CHECK-NEXT: dlp.sync_all
    dlp.sync_all
    // a kernel that issued dlp.memcpy_async ends with dlp.wait_dma
    // CHECK-NEXT: dlp.wait_dma
    dlp.wait_dma
  }
  func.return
}
