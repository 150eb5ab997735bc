// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' | filecheck %s

// A kernel whose compute stays scalar loops says why on its dlp.kernel (`dlpc.scalar`,
// which `dlpc --stats` lists): the intrinsics are f32, this kernel is f64; an f32 kernel
// on intrinsics has no such attribute.

// CHECK-LABEL: func.func @f64_add
// CHECK: dlp.kernel "add_0" attributes {{{.*}}dlpc.scalar = "a buffer is not f32"
// CHECK-LABEL: func.func @f32_add
// CHECK: dlp.kernel "add_0" attributes {tasks = 2 : i64, dma_align = 64 : i64, vector_align = 64 : i64, double_buffered} {
// CHECK: dlp.add

func.func @f64_add(%x: memref<64xf64>, %y: memref<64xf64>, %out: memref<64xf64>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "add_0" {
    loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      %a = memref.load %x[%i] : memref<64xf64>
      %b = memref.load %y[%i] : memref<64xf64>
      %s = arith.addf %a, %b : f64
      memref.store %s, %out[%i] : memref<64xf64>
    }
  }
  func.return
}

func.func @f32_add(%x: memref<64xf32>, %y: memref<64xf32>, %out: memref<64xf32>) attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "add_0" {
    loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      %a = memref.load %x[%i] : memref<64xf32>
      %b = memref.load %y[%i] : memref<64xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %out[%i] : memref<64xf32>
    }
  }
  func.return
}
