// RUN: dlpc-opt %s -p graph-to-te | filecheck %s --check-prefix=TE
// RUN: dlpc-opt %s -p graph-to-te,te-to-loop | filecheck %s
// RUN: dlpc-opt %s -p graph-to-te,te-to-loop | dlpc-opt | filecheck %s

// graph-to-te lowers the regions' ops in place and keeps graph.if / graph.loop; te-to-loop
// makes them host control flow in @main (passes/lower/control_to_loop.py): scf.if over the
// condition buffer, scf.while over (cond, i < trip_count), kernels inside, the yields
// copied into the result (here: the output) buffers after the body's last kernel; the
// body's buffers allocated once before the loop and freed after it.

func.func @main(%c: tensor<i1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  } else {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  %t = graph.constant dense<true> : tensor<i1>
  %l = graph.loop %t, %r {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
    %y = graph.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %k = graph.constant dense<true> : tensor<i1>
    graph.yield %k, %y : tensor<i1>, tensor<4xf32>
  }
  func.return %l : tensor<4xf32>
}

// TE-LABEL: func.func @main
// TE: graph.if
// TE: te.compute "relu_0"
// TE: graph.yield
// TE: } else {
// TE: graph.loop
// TE: te.compute "add_1"
// TE: graph.yield

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: memref<i1>, %{{.*}}: memref<4xf32>, %[[OUT:[a-z0-9_]*]]: memref<4xf32>)
// CHECK: %[[R:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[C:.*]] = memref.load %{{.*}}[] : memref<i1>
// CHECK: scf.if %[[C]] {
// CHECK: loop.kernel "relu_0"
// CHECK: loop.kernel "if0_then_yield0"
// CHECK: memref.store %{{.*}}, %[[R]]
// CHECK: } else {
// CHECK: loop.kernel "if0_else_yield0"
// CHECK: memref.store %{{.*}}, %[[R]]
// CHECK: %[[FLAG:.*]] = memref.alloc() : memref<i1>
// CHECK: %[[I:.*]] = memref.alloc() : memref<i64>
// CHECK: loop.kernel "loop1_cond_init"
// CHECK: loop.kernel "loop1_init0"
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: memref.store %{{.*}}, %[[I]][] : memref<i64>
// the body's buffer: allocated once before the loop, reused by every iteration
// CHECK: %[[ADD:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: scf.while
// CHECK: memref.load %[[FLAG]][] : memref<i1>
// CHECK: memref.load %[[I]][] : memref<i64>
// CHECK: arith.cmpi slt
// CHECK: arith.andi
// CHECK: scf.condition
// CHECK: } do {
// CHECK: loop.kernel "add_1"
// CHECK: memref.load %[[OUT]]
// CHECK: loop.kernel "loop1_body_yield0"
// CHECK: loop.kernel "loop1_body_yield1"
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: arith.addi
// CHECK: memref.store %{{.*}}, %[[I]][] : memref<i64>
// CHECK: scf.yield
// CHECK-NOT: memref.alloc
// CHECK: memref.dealloc %[[ADD]] : memref<4xf32>
// CHECK-NEXT: memref.dealloc %[[FLAG]] : memref<i1>
// CHECK: func.return
