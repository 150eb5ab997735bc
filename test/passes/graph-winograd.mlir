// RUN: dlpc-opt %s -p graph-winograd | filecheck %s
// RUN: dlpc-opt %s -p 'graph-winograd{where=all}' | filecheck %s --check-prefix=ALL
// RUN: dlpc-opt %s -p 'graph-winograd{where=none}' | filecheck %s --check-prefix=NONE
// RUN: dlpc-opt %s -p 'graph-winograd{target=opencl}' | filecheck %s --check-prefix=OCL
// RUN: dlpc-opt %s -p 'graph-winograd{target=opencl-gpu}' | filecheck %s --check-prefix=GPU
// RUN: dlpc-opt %s -p 'graph-winograd{target=opencl-gpu where=all}' | filecheck %s --check-prefix=GPUALL

// Under OpenCL's GPU launch plans no conv pays (the plans have no Winograd kernel: the
// direct conv gets a work-item per output), not even the ones the CPU plans' rule takes
// (@opencl_rule's first two); `where=all` still rewrites every eligible conv.
// GPU-NOT:     winograd
// GPUALL:      func.func @pays
// GPUALL:        graph.winograd_output_transform

// A 64 -> 64 stride-1 3x3 conv on 32x32 with a static weight and a bias: the cost
// rule's (64 channels or more, 256 tiles or more): filter transform (its per-image reshape is folded with it when the
// weights are bound), input transform (the padding as an attribute, read by bounds),
// the 16 x N batched matmuls between two reshapes (views), and the output transform
// taking the bias; the relu after it is untouched (graph-fuse fuses it).
// CHECK-LABEL: func.func @pays
// CHECK:         %[[U:.*]] = graph.winograd_filter_transform %w : (tensor<64x64x3x3xf32>) -> tensor<16x64x64xf32>
// CHECK-NEXT:    %[[U1:.*]] = graph.reshape %[[U]] {shape = array<i64: 16, 1, 64, 64>} : (tensor<16x64x64xf32>) -> tensor<16x1x64x64xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x32x32xf32>) -> tensor<16x1x64x16x16xf32>
// CHECK-NEXT:    %[[V2:.*]] = graph.reshape %[[V]] {shape = array<i64: 16, 1, 64, 256>} : (tensor<16x1x64x16x16xf32>) -> tensor<16x1x64x256xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %[[U1]], %[[V2]] : (tensor<16x1x64x64xf32>, tensor<16x1x64x256xf32>) -> tensor<16x1x64x256xf32>
// CHECK-NEXT:    %[[M2:.*]] = graph.reshape %[[M]] {shape = array<i64: 16, 1, 64, 16, 16>} : (tensor<16x1x64x256xf32>) -> tensor<16x1x64x16x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.winograd_output_transform %[[M2]], %b {output = array<i64: 32, 32>} : (tensor<16x1x64x16x16xf32>, tensor<64xf32>) -> tensor<1x64x32x32xf32>
// CHECK-NEXT:    graph.relu %[[Y]]
// CHECK-NOT:     graph.conv2d
// NONE-LABEL: func.func @pays
// OCL-LABEL:  func.func @pays
// OCL-NOT:      winograd
// OCL:          graph.conv2d
// NONE-NOT:     winograd
// NONE:         graph.conv2d
func.func @pays(%x: tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32> {
  %w = graph.param "w" : tensor<64x64x3x3xf32>
  %b = graph.param "b" : tensor<64xf32>
  %c = graph.conv2d %x, %w, %b {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x32x32xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>) -> tensor<1x64x32x32xf32>
  %r = graph.relu %c : (tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
  func.return %r : tensor<1x64x32x32xf32>
}

// resnet's 16 -> 16 conv (a weight rescaled by batch-norm folding: static, not a
// param): eligible, but below the cost rule (an odd output: not the fused kernel's, and
// 16 channels are too few for three kernels); where=all rewrites it. Odd output (7x5
// from 8x6, padding top and left only): tiles ceil(7/2) x ceil(5/2) = 4 x 3, the output
// transform crops them.
// CHECK-LABEL: func.func @below_rule
// CHECK-NOT:     winograd
// CHECK:         graph.conv2d
// ALL-LABEL: func.func @below_rule
// ALL:         graph.winograd_filter_transform %{{.*}} : (tensor<16x16x3x3xf32>) -> tensor<16x16x16xf32>
// ALL:         graph.winograd_input_transform %x {pads = array<i64: 1, 1, 0, 0>} : (tensor<2x16x8x6xf32>) -> tensor<16x2x16x4x3xf32>
// ALL:         graph.matmul %{{.*}}, %{{.*}} : (tensor<16x1x16x16xf32>, tensor<16x2x16x12xf32>) -> tensor<16x2x16x12xf32>
// ALL:         graph.winograd_output_transform %{{.*}} {output = array<i64: 7, 5>} : (tensor<16x2x16x4x3xf32>) -> tensor<2x16x7x5xf32>
// ALL-NOT:     graph.conv2d
func.func @below_rule(%x: tensor<2x16x8x6xf32>) -> tensor<2x16x7x5xf32> {
  %w0 = graph.param "w" : tensor<16x16x3x3xf32>
  %s = graph.constant dense<0.5> : tensor<16x1x1x1xf32>
  %w = graph.mul %w0, %s : (tensor<16x16x3x3xf32>, tensor<16x1x1x1xf32>) -> tensor<16x16x3x3xf32>
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 0, 0>} : (tensor<2x16x8x6xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x7x5xf32>
  func.return %c : tensor<2x16x7x5xf32>
}

// Below the rule: 16 -> 32 on 32x32 (channels not equal), 64 -> 64 on 16x16 (64 tiles),
// 32 -> 32 with an odd output (15x15: not the fused kernel's).
// CHECK-LABEL: func.func @small
// CHECK-NOT:     winograd
// CHECK-COUNT-3: graph.conv2d
// CHECK-NOT:     winograd
func.func @small(%x: tensor<1x16x32x32xf32>, %y: tensor<1x64x16x16xf32>, %z: tensor<1x32x15x15xf32>) -> (tensor<1x32x32x32xf32>, tensor<1x64x16x16xf32>, tensor<1x32x15x15xf32>) {
  %w = graph.param "w" : tensor<32x16x3x3xf32>
  %v = graph.param "v" : tensor<64x64x3x3xf32>
  %u = graph.param "u" : tensor<32x32x3x3xf32>
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>, tensor<32x16x3x3xf32>) -> tensor<1x32x32x32xf32>
  %d = graph.conv2d %y, %v {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x16x16xf32>
  %e = graph.conv2d %z, %u {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x15x15xf32>, tensor<32x32x3x3xf32>) -> tensor<1x32x15x15xf32>
  func.return %c, %d, %e : tensor<1x32x32x32xf32>, tensor<1x64x16x16xf32>, tensor<1x32x15x15xf32>
}

// The fused rule: 32 -> 32 with an even output (resnet's 32 -> 32 on 16x16), which the
// default schedule computes as one fused kernel per row of tiles.
// CHECK-LABEL: func.func @fused_rule
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x16x16xf32>) -> tensor<16x1x32x8x8xf32>
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_output_transform
// CHECK-NEXT:    func.return
func.func @fused_rule(%x: tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32> {
  %w = graph.param "w" : tensor<32x32x3x3xf32>
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x16x16xf32>, tensor<32x32x3x3xf32>) -> tensor<1x32x16x16xf32>
  func.return %c : tensor<1x32x16x16xf32>
}

// 16 -> 16 with an even output: fused at any batch (resnet's 16 -> 16 on 32x32), here
// batch 2; @fused_rule_small is the same conv at batch 1.
// CHECK-LABEL: func.func @fused_rule_batch
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x32x32xf32>) -> tensor<16x2x16x16x16xf32>
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_output_transform
// CHECK-NEXT:    func.return
func.func @fused_rule_batch(%x: tensor<2x16x32x32xf32>) -> tensor<2x16x32x32xf32> {
  %w = graph.param "w" : tensor<16x16x3x3xf32>
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x32x32xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x32x32xf32>
  func.return %c : tensor<2x16x32x32xf32>
}

// CHECK-LABEL: func.func @fused_rule_small
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>) -> tensor<16x1x16x16x16xf32>
// CHECK-NOT:     graph.conv2d
// CHECK:         graph.winograd_output_transform
// CHECK-NEXT:    func.return
func.func @fused_rule_small(%x: tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32> {
  %w = graph.param "w" : tensor<16x16x3x3xf32>
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x32x32xf32>
  func.return %c : tensor<1x16x32x32xf32>
}

// The OpenCL target's rule (`pays_opencl`): the convs its backend writes as one fused
// kernel. Taken: the stem-like 3 -> 16 and 16 -> 16 (a residual add, then relu) on 32x32;
// kept direct: a 32 -> 32 whose result is returned (no relu after it), a 64 -> 64 on 32x32
// (V and M of a row of tiles pass the work-item's private memory). The C rule (CHECK)
// takes the 16 -> 16 only. (@pays, @fused_rule and @fused_rule_small stay direct on OpenCL:
// no relu after them.)
// CHECK-LABEL: func.func @opencl_rule
// CHECK:         graph.conv2d %x
// CHECK:         graph.winograd_input_transform
// CHECK-COUNT-2: graph.conv2d
// OCL-LABEL:   func.func @opencl_rule
// OCL-NOT:       graph.conv2d
// OCL:           graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>) -> tensor<16x1x3x16x16xf32>
// OCL:           %[[R0:.*]] = graph.relu
// OCL-NOT:       graph.conv2d
// OCL:           graph.winograd_input_transform %[[R0]] {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>) -> tensor<16x1x16x16x16xf32>
// OCL:           %[[Y:.*]] = graph.winograd_output_transform
// OCL-NEXT:      graph.add %[[Y]], %[[R0]]
// OCL-NEXT:      graph.relu
// OCL-NEXT:      graph.param "w2"
// OCL-NEXT:      graph.conv2d %y
// OCL-NEXT:      graph.param "w3"
// OCL-NEXT:      graph.conv2d %z
// OCL-NOT:       winograd
// OCL:           func.return
func.func @opencl_rule(%x: tensor<1x3x32x32xf32>, %y: tensor<1x32x16x16xf32>, %z: tensor<1x64x32x32xf32>) -> (tensor<1x16x32x32xf32>, tensor<1x32x16x16xf32>, tensor<1x64x32x32xf32>) {
  %w0 = graph.param "w0" : tensor<16x3x3x3xf32>
  %c0 = graph.conv2d %x, %w0 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x32x32xf32>
  %r0 = graph.relu %c0 : (tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
  %w1 = graph.param "w1" : tensor<16x16x3x3xf32>
  %c1 = graph.conv2d %r0, %w1 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x32x32xf32>
  %a1 = graph.add %c1, %r0 : (tensor<1x16x32x32xf32>, tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
  %r1 = graph.relu %a1 : (tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
  %w2 = graph.param "w2" : tensor<32x32x3x3xf32>
  %c2 = graph.conv2d %y, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x16x16xf32>, tensor<32x32x3x3xf32>) -> tensor<1x32x16x16xf32>
  %w3 = graph.param "w3" : tensor<64x64x3x3xf32>
  %c3 = graph.conv2d %z, %w3 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x32x32xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x32x32xf32>
  %r3 = graph.relu %c3 : (tensor<1x64x32x32xf32>) -> tensor<1x64x32x32xf32>
  func.return %r1, %c2, %r3 : tensor<1x16x32x32xf32>, tensor<1x32x16x16xf32>, tensor<1x64x32x32xf32>
}

// Never rewritten, even with where=all: stride 2, 1x1, depthwise (groups), 5x5,
// dilation 2, a weight that is a function argument (a training step's: not static),
// an NHWC conv.
// ALL-LABEL: func.func @ineligible
// ALL-NOT:     winograd
// ALL-COUNT-7: graph.conv2d
// ALL-NOT:     winograd
func.func @ineligible(%x: tensor<1x64x16x16xf32>, %dyn: tensor<64x64x3x3xf32>) -> (tensor<1x64x8x8xf32>, tensor<1x64x16x16xf32>, tensor<1x64x16x16xf32>, tensor<1x64x12x12xf32>, tensor<1x64x12x12xf32>, tensor<1x64x16x16xf32>, tensor<1x16x16x64xf32>) {
  %w3 = graph.param "w3" : tensor<64x64x3x3xf32>
  %w1 = graph.param "w1" : tensor<64x64x1x1xf32>
  %wd = graph.param "wd" : tensor<64x1x3x3xf32>
  %w5 = graph.param "w5" : tensor<64x64x5x5xf32>
  %s2 = graph.conv2d %x, %w3 {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x8x8xf32>
  %k1 = graph.conv2d %x, %w1 : (tensor<1x64x16x16xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x16x16xf32>
  %dw = graph.conv2d %x, %wd {groups = 64 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x16x16xf32>, tensor<64x1x3x3xf32>) -> tensor<1x64x16x16xf32>
  %k5 = graph.conv2d %x, %w5 : (tensor<1x64x16x16xf32>, tensor<64x64x5x5xf32>) -> tensor<1x64x12x12xf32>
  %dl = graph.conv2d %x, %w3 {dilations = array<i64: 2, 2>} : (tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x12x12xf32>
  %dy = graph.conv2d %x, %dyn {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x16x16xf32>
  %xt = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x64x16x16xf32>) -> tensor<1x16x16x64xf32>
  %nh = graph.conv2d %xt, %w3 {pads = array<i64: 1, 1, 1, 1>, layout = "nhwc"} : (tensor<1x16x16x64xf32>, tensor<64x64x3x3xf32>) -> tensor<1x16x16x64xf32>
  func.return %s2, %k1, %dw, %k5, %dl, %dy, %nh : tensor<1x64x8x8xf32>, tensor<1x64x16x16xf32>, tensor<1x64x16x16xf32>, tensor<1x64x12x12xf32>, tensor<1x64x12x12xf32>, tensor<1x64x16x16xf32>, tensor<1x16x16x64xf32>
}
