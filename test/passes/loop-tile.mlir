// RUN: dlpc-opt %s -p 'loop-tile{kernel=relu loops=i0,i1 factors=4,16}' | filecheck %s

// CHECK:      loop.for %[[A:.*]] = 0 to 8 step 4 {name = "i0o"} {
// CHECK-NEXT:   loop.for %[[B:.*]] = 0 to 64 step 16 {name = "i1o"} {
// CHECK-NEXT:     loop.for %[[C:.*]] = 0 to 4 step 1 {name = "i0i"} {
// CHECK-NEXT:       loop.for %[[D:.*]] = 0 to 16 step 1 {name = "i1i"} {
// CHECK-DAG:          arith.addi %[[A]], %[[C]] : index
// CHECK-DAG:          arith.addi %[[B]], %[[D]] : index
func.func @main(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<8x64xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %y[%i0, %i1] : memref<8x64xf32>
      }
    }
  }
  func.return
}
