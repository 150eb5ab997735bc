// RUN: dlpc-opt %s -p 'loop-to-dlp' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc="%S/Inputs/dlp-queue1.toml"}' | filecheck %s --check-prefix=DEPTH1

// A whole buffer staged in a cluster's SRAM (the bias, read by all 16 tasks) is copied
// from GDRAM by every core of the cluster, a DMA-aligned share each (4 cores: 64 of its
// 256 floats from core * 64), waited for before the cluster's barrier; then each core copies it
// whole to its NRAM. (Core 0 alone staging it would move all its bytes on one task's
// critical path.)

// CHECK-LABEL: func.func @bias_relu
// CHECK: %[[CORE:.*]] = dlp.core_id
// CHECK: %[[S:.*]] = memref.alloc() : memref<256xf32, #dlp.space<sram>>
// CHECK: %[[P:.*]] = arith.constant 64 : index
// CHECK: %[[OFF:.*]] = arith.muli %[[CORE]], %[[P]] : index
// CHECK: %[[START:.*]] = arith.minsi %[[OFF]], %{{.*}} : index
// CHECK: %[[COUNT:.*]] = arith.minsi %[[P]], %{{.*}} : index
// CHECK: %[[ANY:.*]] = arith.cmpi sgt, %[[COUNT]], %{{.*}} : index
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK-NEXT: dlp.memcpy_async GDRAM2SRAM %[[S]][%[[START]]], %b[%[[START]]], %[[COUNT]] :
// CHECK-NEXT: }
// CHECK-NEXT: dlp.wait_dma
// CHECK-NEXT: dlp.sync_cluster
// CHECK-NEXT: dlp.memcpy_async SRAM2NRAM %{{.*}}[%{{.*}}], %[[S]][%{{.*}}], %{{.*}} :

func.func @bias_relu(%x: memref<64x256xf32>, %b: memref<256xf32>, %out: memref<64x256xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "bias_relu_0" attributes {origin = "graph.relu"} {
    loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 256 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i0, %i1] : memref<64x256xf32>
        %c = memref.load %b[%i1] : memref<256xf32>
        %s = arith.addf %v, %c : f32
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %s, %z : f32
        memref.store %r, %out[%i0, %i1] : memref<64x256xf32>
      }
    }
  }
  func.return
}

// A small whole buffer (a 16-float input row read by 16 tasks, 64 bytes each) is copied
// by every task straight from GDRAM: staging it would cost each task a second DMA
// latency (GDRAM2SRAM, then SRAM2NRAM) to save 15 copies of 64 bytes. loop-to-dlp weighs
// both by its time estimate. With no epilogue the product goes straight into the output
// tile (no accumulator copied NRAM2NRAM).

// CHECK-LABEL: func.func @small_linear
// CHECK-NOT: #dlp.space<sram>
// CHECK-NOT: dlp.sync_cluster
// CHECK: %x_nram = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: %[[O:.*]] = memref.alloc() : memref<16xf32, #dlp.space<nram>>
// CHECK: dlp.memcpy_async GDRAM2NRAM %{{.*}}[%{{.*}}], %x[%{{.*}}], %{{.*}} : memref<16xf32, #dlp.space<nram>>, memref<1x16xf32>
// CHECK-NOT: #dlp.space<sram>
// CHECK: dlp.matmul %[[O]][%{{.*}}], %{{.*}}
// CHECK-NOT: NRAM2NRAM
// CHECK: dlp.memcpy_async NRAM2GDRAM %out[%{{.*}}], %[[O]][%{{.*}}]
// CHECK: func.return

func.func @small_linear(%x: memref<1x16xf32>, %w: memref<64x16xf32>, %out: memref<1x64xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "linear_0" attributes {origin = "graph.linear"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1", parallel} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<1x16xf32>
          %b = memref.load %w[%i1, %r0] : memref<64x16xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %sum = memref.load %acc[] : memref<f32>
        memref.store %sum, %out[%i0, %i1] : memref<1x64xf32>
      }
    }
  }
  func.return
}

// Staging is chosen per whole buffer: the 4096-float scale (16 KiB, read by 16 tasks) is
// staged in each cluster's SRAM (waited for, then the barrier); the one-float shift is
// copied by each task from GDRAM (staging it would cost two DMAs to save 12 copies of 4
// bytes), issued with the staging copy before its wait (`early_loads`: the queue holds
// both, so the wait after the barrier has one copy fewer).

// CHECK-LABEL: func.func @scale_shift
// CHECK: %[[S:.*]] = memref.alloc() : memref<4096xf32, #dlp.space<sram>>
// CHECK-NOT: #dlp.space<sram>
// CHECK: dlp.memcpy_async GDRAM2SRAM %[[S]][%{{.*}}], %s[%{{.*}}]
// CHECK-NOT: GDRAM2SRAM
// CHECK: dlp.memcpy_async GDRAM2NRAM %{{.*}}[%{{.*}}], %c[%{{.*}}], %{{.*}} : memref<16xf32, #dlp.space<nram>>, memref<1xf32>
// CHECK-NEXT: dlp.wait_dma
// CHECK-NEXT: dlp.sync_cluster
// CHECK-NEXT: dlp.memcpy_async SRAM2NRAM %{{.*}}[%{{.*}}], %[[S]][%{{.*}}]
// CHECK-NOT: %c[
// CHECK: dlp.memcpy_async GDRAM2NRAM %{{.*}}, %x[

// A queue of one copy holds only the staging copy: the shift waits after the barrier.
// DEPTH1-LABEL: func.func @scale_shift
// DEPTH1: dlp.memcpy_async GDRAM2SRAM
// DEPTH1-NOT: %c[
// DEPTH1: dlp.wait_dma
// DEPTH1-NEXT: dlp.sync_cluster
// DEPTH1-NEXT: dlp.memcpy_async SRAM2NRAM
// DEPTH1: dlp.memcpy_async GDRAM2NRAM %{{.*}}[%{{.*}}], %c[%{{.*}}], %{{.*}} : memref<16xf32, #dlp.space<nram>>, memref<1xf32>
// CHECK: scf.for
// CHECK-NEXT: dlp.wait_dma

func.func @scale_shift(%x: memref<64x4096xf32>, %s: memref<4096xf32>, %c: memref<1xf32>, %out: memref<64x4096xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["s", "c"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "scale_shift_0" attributes {origin = "graph.mul"} {
    loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 4096 step 1 {name = "i1", vectorize} {
        %c0 = arith.constant 0 : index
        %v = memref.load %x[%i0, %i1] : memref<64x4096xf32>
        %m = memref.load %s[%i1] : memref<4096xf32>
        %k = memref.load %c[%c0] : memref<1xf32>
        %p = arith.mulf %v, %m : f32
        %r = arith.addf %p, %k : f32
        memref.store %r, %out[%i0, %i1] : memref<64x4096xf32>
      }
    }
  }
  func.return
}
