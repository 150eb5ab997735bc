// RUN: dlpc-opt %s -t c | filecheck %s

// A vectorised reduction loop: its scalar accumulator update (load, combine, store)
// becomes an OpenMP simd reduction clause; when the accumulator is used otherwise the
// loop falls back to `GCC ivdep`.

// CHECK-LABEL: static void kernel_dot(
// CHECK:         float v_acc;
// CHECK-NEXT:    v_acc = 0.0f;
// CHECK-NEXT:    float v_m;
// CHECK-NEXT:    v_m = (-INFINITY);
// CHECK-NEXT:    #pragma omp simd reduction(+:v_acc) reduction(max:v_m)
// CHECK-NEXT:    for (int64_t v_r0 = 0; v_r0 < 1000; v_r0++) {
// CHECK-LABEL: static void kernel_prefix(
// CHECK:         #pragma GCC ivdep
// CHECK-NEXT:    for (int64_t v_r0 = 0; v_r0 < 1000; v_r0++) {

func.func @main(%x: memref<1000xf32>, %y: memref<1000xf32>, %d: memref<2xf32>, %p: memref<1000xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "dot" {
    %acc = memref.alloca() : memref<f32>
    %zero = arith.constant 0.000000e+00 : f32
    memref.store %zero, %acc[] : memref<f32>
    %m = memref.alloca() : memref<f32>
    %ninf = arith.constant 0xff800000 : f32
    memref.store %ninf, %m[] : memref<f32>
    loop.for %r = 0 to 1000 step 1 {name = "r0", reduction, vectorize} {
      %a = memref.load %x[%r] : memref<1000xf32>
      %b = memref.load %y[%r] : memref<1000xf32>
      %ab = arith.mulf %a, %b : f32
      %s = memref.load %acc[] : memref<f32>
      %n = arith.addf %s, %ab : f32
      memref.store %n, %acc[] : memref<f32>
      %mo = memref.load %m[] : memref<f32>
      %mn = arith.maximumf %mo, %a : f32
      memref.store %mn, %m[] : memref<f32>
    }
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %fa = memref.load %acc[] : memref<f32>
    memref.store %fa, %d[%c0] : memref<2xf32>
    %fm = memref.load %m[] : memref<f32>
    memref.store %fm, %d[%c1] : memref<2xf32>
  }
  loop.kernel "prefix" {
    %acc = memref.alloca() : memref<f32>
    %zero = arith.constant 0.000000e+00 : f32
    memref.store %zero, %acc[] : memref<f32>
    loop.for %r = 0 to 1000 step 1 {name = "r0", reduction, vectorize} {
      %a = memref.load %x[%r] : memref<1000xf32>
      %s = memref.load %acc[] : memref<f32>
      %n = arith.addf %s, %a : f32
      memref.store %n, %acc[] : memref<f32>
      memref.store %n, %p[%r] : memref<1000xf32>
    }
  }
  func.return
}
