// RUN: dlpc-opt %s --allow-unregistered-dialect | filecheck %s
// RUN: dlpc-opt %s --allow-unregistered-dialect | dlpc-opt --allow-unregistered-dialect | filecheck %s
// RUN: dlpc-opt %s --allow-unregistered-dialect --print-op-generic | dlpc-opt --allow-unregistered-dialect | filecheck %s

// CHECK-LABEL: func.func @main
// CHECK:       loop.kernel "relu_0" attributes {origin = "graph.relu"} {
// CHECK-NEXT:    loop.for %[[I0:.*]] = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK-NEXT:      loop.for %[[I1:.*]] = 0 to 8 step 2 {name = "i1", vectorize, unroll = 4} {
// CHECK-NEXT:        %{{.*}} = memref.load %{{.*}}[%[[I0]], %[[I1]]] : memref<4x8xf32>
// CHECK:             memref.store
// CHECK:       loop.kernel "sum_1" {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK:           loop.for %{{.*}} = 0 to 8 step 1 {name = "r0", reduction, dlpc.note = "free-form"} {
// CHECK:       loop.kernel "empty" {
// CHECK-NEXT:  }
// CHECK:       loop.kernel "unnamed" {
// CHECK-NEXT:    loop.for %{{.*}} = 3 to 3 step 5 {
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 2 step 1 {
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 2 step 1 {name = "j"} {
// CHECK-NEXT:        "test.op"() : () -> ()
func.func @main(%x: memref<4x8xf32>, %out: memref<4x8xf32>, %s: memref<4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "relu_0" attributes {origin = "graph.relu"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 2 {name = "i1", vectorize, unroll = 4} {
        %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %out[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  loop.kernel "sum_1" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %acc[] : memref<f32>
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction, dlpc.note = "free-form"} {
        %v = memref.load %x[%i0, %r0] : memref<4x8xf32>
        %a = memref.load %acc[] : memref<f32>
        %n = arith.addf %a, %v : f32
        memref.store %n, %acc[] : memref<f32>
      }
      %f = memref.load %acc[] : memref<f32>
      memref.store %f, %s[%i0] : memref<4xf32>
    }
  }
  loop.kernel "empty" {
  }
  loop.kernel "unnamed" {
    loop.for %i = 3 to 3 step 5 {
    }
    loop.for %i = 0 to 2 step 1 {} {
      loop.for %j = 0 to 2 step 1 {"name" = "j"} {
        "test.op"() : () -> ()
      }
    }
  }
  func.return
}
