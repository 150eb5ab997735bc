// RUN: dlpc-opt %s -p 'loop-rfactor{kernel=dot loop=r0 factor=8}' | filecheck %s
// RUN: dlpc-opt %s -p 'loop-rfactor{kernel=pool loop=r1 factor=16}' | filecheck %s --check-prefix=POOL

// CHECK:      %r0_part = memref.alloca() : memref<8xf32>
// CHECK-NEXT: loop.for %[[Q:.*]] = 0 to 8 step 1 {name = "r0_init", unroll = 8} {
// CHECK-NEXT:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   memref.store %[[Z]], %r0_part[%[[Q]]]
// CHECK:      loop.for %[[RO:.*]] = 0 to 64 step 8 {name = "r0", reduction} {
// CHECK-NEXT:   loop.for %[[RI:.*]] = 0 to 8 step 1 {name = "r0_rf", vectorize} {
// CHECK-NEXT:     %[[R:.*]] = arith.addi %[[RO]], %[[RI]] : index
// CHECK:          memref.load %r0_part[%[[RI]]]
// CHECK:          memref.store %{{.*}}, %r0_part[%[[RI]]]
// CHECK:      loop.for %[[F:.*]] = 0 to 8 step 1 {name = "r0_fold", reduction} {
// CHECK-NEXT:   %[[P:.*]] = memref.load %r0_part[%[[F]]]
// CHECK-NEXT:   %[[O:.*]] = memref.load %y[%i0]
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[O]], %[[P]] : f32
// CHECK-NEXT:   memref.store %[[S]], %y[%i0]
func.func @main(%x: memref<64xf32>, %w: memref<4x64xf32>, %y: memref<4xf32>,
                %img: memref<4x8x16xf32>, %avg: memref<4xf32>) {
  loop.kernel "dot" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
        %a = memref.load %x[%r0] : memref<64xf32>
        %b = memref.load %w[%i0, %r0] : memref<4x64xf32>
        %p = arith.mulf %a, %b : f32
        %c = memref.load %y[%i0] : memref<4xf32>
        %s = arith.addf %c, %p : f32
        memref.store %s, %y[%i0] : memref<4xf32>
      }
    }
  }
  // an inner loop of a chain of reduction loops: the partials go around the chain
  // (r0 too), folded once per output element
  loop.kernel "pool" {
    loop.for %c = 0 to 4 step 1 {name = "c"} {
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
        loop.for %r1 = 0 to 16 step 1 {name = "r1", reduction} {
          %v = memref.load %img[%c, %r0, %r1] : memref<4x8x16xf32>
          %o = memref.load %avg[%c] : memref<4xf32>
          %t = arith.addf %o, %v : f32
          memref.store %t, %avg[%c] : memref<4xf32>
        }
      }
    }
  }
  func.return
}

// POOL:      loop.kernel "pool"
// POOL-NEXT:   loop.for %[[C:.*]] = 0 to 4 step 1 {name = "c"} {
// POOL-NEXT:     %r1_part = memref.alloca() : memref<16xf32>
// POOL-NEXT:     loop.for %{{.*}} = 0 to 16 step 1 {name = "r1_init", unroll = 16} {
// POOL:          loop.for %[[R0:.*]] = 0 to 8 step 1 {name = "r0", reduction} {
// POOL-NEXT:       loop.for %[[RO:.*]] = 0 to 16 step 16 {name = "r1", reduction} {
// POOL-NEXT:         loop.for %[[RI:.*]] = 0 to 16 step 1 {name = "r1_rf", vectorize} {
// POOL:                memref.load %r1_part[%[[RI]]]
// POOL:                memref.store %{{.*}}, %r1_part[%[[RI]]]
// POOL-NEXT:         }
// POOL-NEXT:       }
// POOL-NEXT:     }
// POOL-NEXT:     loop.for %[[F:.*]] = 0 to 16 step 1 {name = "r1_fold", reduction} {
// POOL-NEXT:       %[[P:.*]] = memref.load %r1_part[%[[F]]]
// POOL-NEXT:       %[[O:.*]] = memref.load %avg[%[[C]]]
