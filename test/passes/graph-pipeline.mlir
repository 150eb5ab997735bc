// RUN: dlpc-opt %s -p 'graph-pipeline{stages=2 microbatches=2 schedule=gpipe}' | filecheck %s --check-prefix=GPIPE
// RUN: dlpc-opt %s -p 'graph-pipeline{stages=2 microbatches=2 schedule=1f1b}' | filecheck %s --check-prefix=ONEF
// RUN: dlpc-opt %s -p 'graph-pipeline{stages=2 microbatches=2 schedule=2bw}' | filecheck %s --check-prefix=TWOBW

// Two stages (fc1 + relu | fc2 + loss) over two micro-batches (rows 0-1, 2-3). GPipe:
// both forwards, then both backwards; each activation sent on (tags 0, 2), each input
// gradient sent back (tags 1, 3); the gradients summed as each backward ends, then their
// mean over the micro-batches.
// GPIPE-LABEL: func.func @stage0(%x: tensor<4x4xf32>, %t: tensor<4x3xf32>) -> (tensor<f32> {dlpc.name = "loss"}, tensor<6x4xf32> {dlpc.name = "grad.fc1.weight"})
// GPIPE:       graph.slice %x {starts = array<i64: 0>, ends = array<i64: 2>
// GPIPE:       %[[R0:.*]] = graph.relu
// GPIPE-NEXT:  comm.send %[[R0]] to 1 tag 0 group <world 2> : tensor<2x6xf32>
// GPIPE:       %[[R1:.*]] = graph.relu
// GPIPE-NEXT:  comm.send %[[R1]] to 1 tag 2 group <world 2> : tensor<2x6xf32>
// GPIPE-NEXT:  %[[G0:.*]] = comm.recv from 1 tag 1 group <world 2> : tensor<2x6xf32>
// GPIPE:       %[[G1:.*]] = comm.recv from 1 tag 3 group <world 2> : tensor<2x6xf32>
// GPIPE:       %[[S:.*]] = graph.add %grad.fc1.weight, %grad.fc1.weight_1
// GPIPE:       %[[L:.*]] = comm.broadcast %{{.*}} root 1 group <world 2> : tensor<f32>
// GPIPE:       %[[M:.*]] = graph.mul %[[S]], %{{.*}} : (tensor<6x4xf32>, tensor<f32>) -> tensor<6x4xf32>
// GPIPE-NEXT:  func.return %[[L]], %[[M]]
// GPIPE-LABEL: func.func @stage1
// GPIPE:       comm.recv from 0 tag 0
// GPIPE:       comm.recv from 0 tag 2
// GPIPE:       comm.send %grad.pipeline.in to 0 tag 1
// GPIPE:       comm.send %grad.pipeline.in_1 to 0 tag 3
// GPIPE:       %[[L1:.*]] = graph.add %l, %l_1
// GPIPE:       comm.broadcast

// 1F1B: the last stage takes micro-batch 1's activation before it sends micro-batch 0's
// gradient back (stage 0 sends the activation first: with blocking sends, both orders
// the other way round would wait on each other)
// ONEF-LABEL: func.func @stage0
// ONEF:       comm.send %{{.*}} to 1 tag 0
// ONEF:       comm.send %{{.*}} to 1 tag 2
// ONEF:       comm.recv from 1 tag 1
// ONEF:       comm.recv from 1 tag 3
// ONEF-LABEL: func.func @stage1
// ONEF:       comm.recv from 0 tag 0
// ONEF:       comm.recv from 0 tag 2
// ONEF-NEXT:  comm.send %grad.pipeline.in to 0 tag 1
// ONEF:       comm.send %grad.pipeline.in_1 to 0 tag 3

// 2BW: 1F1B's order on two weight versions; every micro-batch's forward and backward
// read the stashed version (pipeline.stash.<p>, W(t-1)); the gradients' mean is the
// step's grad.<p> (for the newest version), and the newest W(t) goes out as the next
// step's stash
// TWOBW-LABEL: func.func @stage0({{.*}}) -> (tensor<f32> {dlpc.name = "loss"}, tensor<6x4xf32> {dlpc.name = "grad.fc1.weight"}, tensor<6x4xf32> {dlpc.name = "pipeline.stash.fc1.weight"})
// TWOBW-NEXT:  %[[NEW:.*]] = graph.param "fc1.weight" : tensor<6x4xf32>
// TWOBW-NEXT:  %[[OLD:.*]] = graph.param "pipeline.stash.fc1.weight" : tensor<6x4xf32>
// TWOBW:       graph.linear %{{.*}}, %[[OLD]]
// TWOBW:       comm.send %{{.*}} to 1 tag 0
// TWOBW:       graph.linear %{{.*}}, %[[OLD]]
// TWOBW:       comm.send %{{.*}} to 1 tag 2
// TWOBW-NOT:   graph.linear %{{.*}}, %[[NEW]]
// TWOBW:       %[[M:.*]] = graph.mul %{{.*}}, %{{.*}} : (tensor<6x4xf32>, tensor<f32>) -> tensor<6x4xf32>
// TWOBW-NEXT:  func.return %{{.*}}, %[[M]], %[[NEW]]
// TWOBW-LABEL: func.func @stage1
// TWOBW:       %[[OLD1:.*]] = graph.param "pipeline.stash.fc2.weight"
// TWOBW:       comm.recv from 0 tag 0
// TWOBW-NEXT:  graph.linear %{{.*}}, %[[OLD1]]
// TWOBW:       comm.recv from 0 tag 2
// TWOBW:       comm.send %grad.pipeline.in to 0 tag 1
func.func @main(%x: tensor<2x4xf32>, %t: tensor<2x3xf32>) -> tensor<f32> {
  %w1 = graph.param "fc1.weight" : tensor<6x4xf32>
  %w2 = graph.param "fc2.weight" : tensor<3x6xf32>
  %h = graph.linear %x, %w1 : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %r = graph.relu %h : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = graph.linear %r, %w2 : (tensor<2x6xf32>, tensor<3x6xf32>) -> tensor<2x3xf32>
  %d = graph.sub %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = graph.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_mean %e : (tensor<2x3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
