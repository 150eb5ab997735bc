// RUN: dlpc-opt %s -p 'loop-decompose-reduction{kernel=requant}' | filecheck %s

// An i32 sum requantized to i8 (graph-fold-qdq's fused integer kernels) cannot accumulate
// in its i8 output: the sums go to a kernel-local i32 buffer over the spatial loops, the
// epilogue nest reads them and requantizes into the output.
// CHECK:      loop.kernel "requant" {
// CHECK-NEXT:   %sums = memref.alloca() : memref<4x8xi32>
// CHECK-NEXT:   loop.for %[[A0:.*]] = 0 to 4 step 1 {name = "i0_init", parallel} {
// CHECK-NEXT:     loop.for %[[A1:.*]] = 0 to 8 step 1 {name = "i1_init"} {
// CHECK-NEXT:       %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT:       memref.store %[[Z]], %sums[%[[A0]], %[[A1]]] : memref<4x8xi32>
// CHECK:        loop.for %[[I0:.*]] = 0 to 4 step 1 {name = "i0", parallel} {
// CHECK-NEXT:     loop.for %[[I1:.*]] = 0 to 8 step 1 {name = "i1"} {
// CHECK-NEXT:       loop.for %{{.*}} = 0 to 16 step 1 {name = "r0", reduction} {
// CHECK:              %[[C:.*]] = memref.load %sums[%[[I0]], %[[I1]]] : memref<4x8xi32>
// CHECK-NEXT:         %[[S:.*]] = arith.addi %[[C]], %{{.*}} : i32
// CHECK-NEXT:         memref.store %[[S]], %sums[%[[I0]], %[[I1]]] : memref<4x8xi32>
// CHECK:        loop.for %[[P0:.*]] = 0 to 4 step 1 {name = "i0_post", parallel} {
// CHECK-NEXT:     loop.for %[[P1:.*]] = 0 to 8 step 1 {name = "i1_post"} {
// CHECK-NEXT:       %[[V:.*]] = memref.load %sums[%[[P0]], %[[P1]]] : memref<4x8xi32>
// CHECK-NEXT:       %[[F:.*]] = arith.sitofp %[[V]] : i32 to f32
// CHECK:            %[[Q:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK-NEXT:       memref.store %[[Q]], %Y[%[[P0]], %[[P1]]] : memref<4x8xi8>
// CHECK-NOT:    memref.alloca() : memref<i32>
func.func @main(%A: memref<4x16xi8>, %W: memref<8x16xi8>, %Y: memref<4x8xi8>) {
  loop.kernel "requant" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<i32>
        %z = arith.constant 0 : i32
        memref.store %z, %acc[] : memref<i32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<4x16xi8>
          %a32 = arith.extsi %a : i8 to i32
          %w = memref.load %W[%i1, %r0] : memref<8x16xi8>
          %w32 = arith.extsi %w : i8 to i32
          %p = arith.muli %a32, %w32 : i32
          %c = memref.load %acc[] : memref<i32>
          %s = arith.addi %c, %p : i32
          memref.store %s, %acc[] : memref<i32>
        }
        %v = memref.load %acc[] : memref<i32>
        %f = arith.sitofp %v : i32 to f32
        %scale = arith.constant 0.125 : f32
        %y = arith.mulf %f, %scale : f32
        %r = math.roundeven %y : f32
        %q32 = arith.fptosi %r : f32 to i32
        %q = arith.trunci %q32 : i32 to i8
        memref.store %q, %Y[%i0, %i1] : memref<4x8xi8>
      }
    }
  }
  func.return
}
