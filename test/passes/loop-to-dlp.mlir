// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny double-buffer=false}' | filecheck %s

// Elementwise: rows of the work loop split over the 2 cores of `tiny`, tiled to fit its
// 4 KiB NRAM, DMA in/out around vector intrinsics. Every copy is asynchronous: the
// broadcast bias (128 bytes: each task copies it from GDRAM, no SRAM staging and its
// second latency) is issued before the tile loop and waited for with the first tile's
// load; a tile's store stays in flight until the next tile's wait or the kernel's last.

// CHECK-LABEL: func.func @bias_relu
func.func @bias_relu(%x: memref<64x32xf32>, %b: memref<32xf32>, %out: memref<64x32xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
  // CHECK: dlp.kernel "bias_relu_0" attributes {tasks = 2 : i64, dma_align = 64 : i64, vector_align = 64 : i64, origin = "graph.relu"} {
  // CHECK-NEXT: %[[T:.*]] = dlp.task_id
  // CHECK: %[[X:.*]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<nram>>
  // CHECK: %[[B:.*]] = memref.alloc() : memref<32xf32, #dlp.space<nram>>
  // CHECK: %[[O:.*]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<nram>>
  // CHECK-NOT: sram
  // CHECK: dlp.memcpy_async GDRAM2NRAM %[[B]][%{{.*}}], %b[%{{.*}}]
  // CHECK-NOT: dlp.wait_dma
  // CHECK: %[[LO:.*]] = arith.minsi
  // CHECK: %[[HI:.*]] = arith.minsi
  // CHECK: scf.for %[[T0:.*]] = %[[LO]] to %[[HI]] step
  // CHECK: dlp.memcpy_async GDRAM2NRAM %[[X]][%{{.*}}], %{{.*}}[%{{.*}}], %[[N:.*]] :
  // CHECK-NEXT: dlp.wait_dma
  // CHECK-NOT: memref.load
  // CHECK: dlp.cycle_add %[[TMP:.*]][%{{.*}}], %[[X]][%{{.*}}], %[[B]][%{{.*}}], %[[N]], %{{.*}} :
  // CHECK-NEXT: dlp.relu %[[O]][%{{.*}}], %[[TMP]][%{{.*}}], %[[N]] :
  // CHECK-NEXT: dlp.memcpy_async NRAM2GDRAM %{{.*}}[%{{.*}}], %[[O]][%{{.*}}], %[[N]] :
  // CHECK-NEXT: }
  // CHECK-NEXT: dlp.wait_dma
  // CHECK-NEXT: }
  loop.kernel "bias_relu_0" attributes {origin = "graph.relu"} {
    loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i0, %i1] : memref<64x32xf32>
        %c = memref.load %b[%i1] : memref<32xf32>
        %s = arith.addf %v, %c : f32
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %s, %z : f32
        memref.store %r, %out[%i0, %i1] : memref<64x32xf32>
      }
    }
  }
  func.return
}

// Linear layer (m fixed at 1): the work loop runs over output columns, the weight rows
// of a tile go to WRAM, the product is one dlp.matmul, the bias is a vector add.

// CHECK-LABEL: func.func @linear
func.func @linear(%x: memref<1x16xf32>, %w: memref<8x16xf32>, %bias: memref<8xf32>, %out: memref<1x8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "bias"], dlpc.num_outputs = 1 : i64} {
  // CHECK: dlp.kernel "linear_0"
  // CHECK: %[[W:.*]] = memref.alloc() : memref<{{[0-9]+}}xf32, #dlp.space<wram>>
  // CHECK: dlp.memcpy_async GDRAM2WRAM %[[W]]
  // CHECK: dlp.matmul %[[ACC:.*]][%{{.*}}], %{{.*}}[%{{.*}}], %[[W]][%{{.*}}], %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs}
  // CHECK-NEXT: dlp.add %{{.*}}, %[[ACC]][%{{.*}}], %{{.*}}
  // CHECK: dlp.memcpy_async NRAM2GDRAM
  loop.kernel "linear_0" attributes {origin = "graph.linear"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1", parallel} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<1x16xf32>
          %b = memref.load %w[%i1, %r0] : memref<8x16xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %sum = memref.load %acc[] : memref<f32>
        %bb = memref.load %bias[%i1] : memref<8xf32>
        %y = arith.addf %sum, %bb : f32
        memref.store %y, %out[%i0, %i1] : memref<1x8xf32>
      }
    }
  }
  func.return
}

// No intrinsic matches a transpose: scalar loops over the NRAM copies; the source is
// not tiled along the work loop, so it is loaded whole (512 bytes: each task copies it
// from GDRAM, staging it in SRAM would save one copy for a second DMA).

// CHECK-LABEL: func.func @transpose
func.func @transpose(%x: memref<8x16xf32>, %out: memref<16x8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  // CHECK: dlp.kernel "transpose_0"
  // CHECK: %[[XN:.*]] = memref.alloc() : memref<128xf32, #dlp.space<nram>>
  // CHECK: dlp.memcpy_async GDRAM2NRAM %[[XN]]
  // CHECK: scf.for
  // CHECK: scf.for
  // CHECK: memref.load %[[XN]][%{{.*}}] : memref<128xf32, #dlp.space<nram>>
  // CHECK: memref.store
  // CHECK: dlp.memcpy_async NRAM2GDRAM
  loop.kernel "transpose_0" attributes {origin = "graph.transpose"} {
    loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %v = memref.load %x[%i1, %i0] : memref<8x16xf32>
        memref.store %v, %out[%i0, %i1] : memref<16x8xf32>
      }
    }
  }
  func.return
}

// A row reduction with an elementwise prologue (softmax's denominator): the prologue
// becomes vector intrinsics over the whole tile (the per-row max is a row broadcast),
// the reduction one dlp.reduce_sum over its rows, straight into the output tile (its
// value is stored as it is: no accumulator copied NRAM2NRAM).

// CHECK-LABEL: func.func @exp_sum
// CHECK: dlp.kernel "exp_sum_0"
// CHECK: scf.for
// CHECK: dlp.add_scalar
// CHECK: dlp.exp %[[ROWS:[a-z_0-9]+]][%{{.*}}], %{{.*}}
// CHECK: dlp.reduce_sum %[[OUT:[a-z_0-9]+]][%{{.*}}], %[[ROWS]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK-NOT: NRAM2NRAM
// CHECK: dlp.memcpy_async NRAM2GDRAM %{{.*}}, %[[OUT]]
func.func @exp_sum(%x: memref<32x16xf32>, %m: memref<32xf32>, %out: memref<32xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "exp_sum_0" attributes {origin = "graph.softmax"} {
    loop.for %i0 = 0 to 32 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i0, %r0] : memref<32x16xf32>
        %mx = memref.load %m[%i0] : memref<32xf32>
        %d = arith.subf %v, %mx : f32
        %e = math.exp %d : f32
        %o = memref.load %acc[] : memref<f32>
        %q = arith.addf %o, %e : f32
        memref.store %q, %acc[] : memref<f32>
      }
      %s = memref.load %acc[] : memref<f32>
      memref.store %s, %out[%i0] : memref<32xf32>
    }
  }
  func.return
}
