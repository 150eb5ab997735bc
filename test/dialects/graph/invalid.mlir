// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.add: shapes 2x3, 4 cannot be broadcast together

// -----

func.func @f(%a: tensor<2x3xf32>) {
  %0 = graph.relu %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return
}
// CHECK: graph.relu: inferred result shape 2x3 but result type has shape 3x2

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xi64>) {
  %0 = graph.mul %a, %b : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.mul operands have element types f32 and i64

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  %0 = graph.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return
}
// CHECK: graph.matmul contraction mismatch: lhs 2x3 has K=3 but rhs 4x5 has K=4

// -----

func.func @f(%x: tensor<1x784xf32>, %w: tensor<256x700xf32>) {
  %0 = graph.linear %x, %w : (tensor<1x784xf32>, tensor<256x700xf32>) -> tensor<1x256xf32>
  func.return
}
// CHECK: graph.linear input 1x784 has 784 features but weight 256x700 expects 700

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK: graph.conv2d input has 3 channels but weight 4x2x3x3 with groups=1 expects 2

// -----

func.func @f(%x: tensor<1x6x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  %0 = graph.conv2d %x, %w {groups = 4 : i64} : (tensor<1x6x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK: graph.conv2d groups=4 must divide input channels 6 and output channels 4

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  %0 = graph.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK: graph.conv2d bias 3 does not match 4 output channels

// -----

func.func @f(%x: tensor<1x3x2x2xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 3, 3>} : (tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32>
  func.return
}
// CHECK: graph.max_pool2d window 3x3 does not fit input 2x2 with the given padding

// -----

func.func @f(%x: tensor<1x3x8x8xf32>) {
  %0 = graph.avg_pool2d %x : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return
}
// CHECK: property 'kernel' expected in operation 'graph.avg_pool2d'

// -----

func.func @f(%x: tensor<1x4x2x2xf32>, %s: tensor<3xf32>) {
  %0 = graph.batch_norm %x, %s, %s, %s, %s : (tensor<1x4x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x4x2x2xf32>
  func.return
}
// CHECK: graph.batch_norm scale has shape 3 but input has 4 channels

// -----

func.func @f(%x: tensor<16x64xf32>, %g: tensor<32xf32>) {
  %0 = graph.layer_norm %x, %g : (tensor<16x64xf32>, tensor<32xf32>) -> tensor<16x64xf32>
  func.return
}
// CHECK: graph.layer_norm: shapes 32, 64 cannot be broadcast together

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.softmax %x {axis = 2 : i64} : (tensor<16x64xf32>) -> tensor<16x64xf32>
  func.return
}
// CHECK: graph.softmax: axis 2 is out of range for rank 2

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.reduce_sum %x {axes = array<i64: 1, -1>} : (tensor<16x64xf32>) -> tensor<16xf32>
  func.return
}
// CHECK: graph.reduce_sum axes [1, -1] contain duplicates

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.reshape %x {shape = array<i64: 10, -1>} : (tensor<16x64xf32>) -> tensor<10x100xf32>
  func.return
}
// CHECK: graph.reshape cannot reshape 16x64 into [10, -1]

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.transpose %x {perm = array<i64: 0, 0>} : (tensor<16x64xf32>) -> tensor<16x16xf32>
  func.return
}
// CHECK: graph.transpose perm [0, 0] is not a permutation of 2 dims

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  %0 = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  func.return
}
// CHECK: graph.concat operands 2x3 and 3x3 differ outside axis 1

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.slice %x {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 0>} : (tensor<16x64xf32>) -> tensor<4x64xf32>
  func.return
}
// CHECK: graph.slice step must not be 0

// -----

func.func @f(%x: tensor<16x64xf32>) {
  %0 = graph.pad %x {pads = array<i64: 1, 1>} : (tensor<16x64xf32>) -> tensor<17x65xf32>
  func.return
}
// CHECK: graph.pad needs 4 pads for rank 2, got 2

// -----

func.func @f(%x: tensor<3x4xf32>) {
  %0 = graph.broadcast %x {shape = array<i64: 2, 4>} : (tensor<3x4xf32>) -> tensor<2x4xf32>
  func.return
}
// CHECK: graph.broadcast: shapes 3x4, 2x4 cannot be broadcast together

// -----

func.func @f(%x: tensor<10x4xf32>, %i: tensor<3xf32>) {
  %0 = graph.gather %x, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return
}
// CHECK: graph.gather indices must be integers

// -----

func.func @f(%a: tensor<4xf32>) {
  %0 = graph.compare %a, %a {predicate = "bigger"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return
}
// CHECK: graph.compare predicate 'bigger' is not one of eq, ne, lt, le, gt, ge

// -----

func.func @f(%a: tensor<4xf32>) {
  %0 = graph.relu %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.relu expects 1 operands, got 2

// -----

func.func @f(%a: tensor<4xf32>) {
  %1 = graph.fused "k" %a : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %2 = graph.reshape %x {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
    graph.yield %2 : tensor<2x2xf32>
  }
  func.return
}
// CHECK: graph.fused "k" yields tensor<2x2xf32> but the result type is tensor<4xf32>

// -----

func.func @f(%a: tensor<4xf32>) {
  %0 = graph.where %a, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.where condition must be i1, got f32

// -----

// sizes: a tensor over 2^40 bytes (docs/security.md); the product is never formed in C
func.func @f(%a: tensor<1xf32>) {
  %0 = graph.broadcast %a {shape = array<i64: 4611686018427387904>} : (tensor<1xf32>) -> tensor<4611686018427387904xf32>
  func.return
}
// CHECK: graph.broadcast: tensor<4611686018427387904xf32> has 18446744073709551616 bytes, over dlpc's limit of 2^40 bytes (1 TiB) for one tensor

// -----

func.func @f(%a: tensor<1048576x1048577xi8>) {
  %0 = graph.reduce_max %a : (tensor<1048576x1048577xi8>) -> tensor<i8>
  func.return
}
// CHECK: graph.reduce_max: operand tensor<1048576x1048577xi8> has 1099512676352 bytes, over dlpc's limit of 2^40 bytes (1 TiB) for one tensor

// -----

func.func @f() {
  %0 = graph.param "w" : tensor<1099511627776xf16>
  func.return
}
// CHECK: graph.param: tensor<1099511627776xf16> has 2199023255552 bytes, over dlpc's limit of 2^40 bytes (1 TiB) for one tensor

// -----

// (issue 18: one case per verifier message that had none)
func.func @f(%a: tensor<2x3xf32>) {
  %0 = graph.leaky_relu %a {alpha = "x"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.leaky_relu: "x" should be of base attribute float

// -----

func.func @f(%a: tensor<2x3xf32>) {
  %0 = graph.relu %a : (tensor<2x3xf32>) -> tensor<2x3xf16>
  func.return
}
// CHECK: graph.relu: inferred element type f32 but result type has f16

// -----

func.func @f() {
  %0 = graph.concat {axis = 0 : i64} : () -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.concat expects at least one operand

// -----

func.func @f(%a: tensor<2x3xf32>, %s: tensor<2x1x3xf32>) {
  %0 = graph.prelu %a, %s : (tensor<2x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.prelu slope of shape 2x1x3 must broadcast to

// -----

func.func @f(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  %0 = graph.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.where branches have element types f32 and f16

// -----

func.func @f(%a: tensor<f32>, %b: tensor<3xf32>) {
  %0 = graph.matmul %a, %b : (tensor<f32>, tensor<3xf32>) -> tensor<f32>
  func.return
}
// CHECK: graph.matmul operands must have rank >= 1

// -----

func.func @f(%a: tensor<2x3xf32>, %w: tensor<4x5xf32>) {
  %0 = graph.linear %a, %w : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x4xf32>
  func.return
}
// CHECK: graph.linear input 2x3 has 3 features but weight 4x5 expects 5

// -----

func.func @f(%x: tensor<1x1x4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2, 2>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return
}
// CHECK: graph.max_pool2d: kernel must have 1 or 2 values, got 3

// -----

func.func @f(%x: tensor<1x1x4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>, pads = array<i64: 1, 1, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return
}
// CHECK: graph.max_pool2d: pads must have 1, 2 or 4 values, got 3

// -----

func.func @f(%x: tensor<1x1x4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>, layout = "nchw4c"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return
}
// CHECK: graph.max_pool2d layout must be "nchw" or "nhwc", got "nchw4c"

// -----

func.func @f(%x: tensor<1x1x4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 0, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return
}
// CHECK: graph.max_pool2d strides/dilations must be >= 1 and pads >= 0, got strides [0, 1], dilations [1, 1], pads [0, 0, 0, 0]

// -----

func.func @f(%x: tensor<1x4x4xf32>, %w: tensor<2x1x3x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32>
  func.return
}
// CHECK: graph.conv2d expects NCHW input and OIHW weight, got 1x4x4 and 2x1x3x3

// -----

func.func @f(%x: tensor<4x4xf32>) {
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<4x4xf32>) -> tensor<3x3xf32>
  func.return
}
// CHECK: graph.max_pool2d expects NCHW input, got 4x4

// -----

func.func @f(%x: tensor<4xf32>) {
  %0 = graph.global_avg_pool %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.global_avg_pool expects N, C and spatial dims, got 4

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<4xf32>) {
  %0 = graph.batch_norm %x, %s, %s, %s, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.batch_norm expects rank >= 2, got 4

// -----

func.func @f(%x: tensor<2x3xf32>) {
  %0 = graph.reshape %x {shape = array<i64: 0, 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  func.return
}
// CHECK: graph.reshape 0 refers to a missing input dim: shape [0, 0, 0] for input 2x3

// -----

func.func @f(%x: tensor<2x3xf32>) {
  %0 = graph.reshape %x {shape = array<i64: -1, -1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}
// CHECK: graph.reshape shape may contain at most one -1, got [-1, -1]

// -----

func.func @f(%x: tensor<8xf32>) {
  %0 = graph.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 4>, axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.slice starts, ends, axes and steps differ in length: [0, 1], [4], [0], [1]

// -----

func.func @f(%x: tensor<4xf32>) {
  %0 = graph.pad %x {pads = array<i64: -3, -2>} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.pad pads [-3, -2] give a negative size

// -----

func.func @f(%x: tensor<2x1xf32>) {
  %0 = graph.broadcast %x {shape = array<i64: 4>} : (tensor<2x1xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.broadcast cannot broadcast 2x1 to 4

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = graph.fused "k" %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<3xf32>):
    %0 = graph.relu %a : (tensor<3xf32>) -> tensor<3xf32>
    graph.yield %0 : tensor<3xf32>
  }
  func.return
}
// CHECK: graph.fused "k" body arguments (tensor<3xf32>) do not match operand types (tensor<4xf32>)

// -----

func.func @f(%x: tensor<4xf32>) {
  %y = graph.fused "k" %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %0, %0 : tensor<4xf32>, tensor<4xf32>
  }
  func.return
}
// CHECK: graph.fused "k" body must end in graph.yield of one value

// -----

func.func @f(%x: tensor<4x8xf32>, %step: tensor<f32>) {
  %0 = graph.dropout %x, %step {p = 1.0 : f64, seed = 1 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.dropout p = 1.0 is out of range [0, 1)

// -----

func.func @f(%x: tensor<4x8xf32>, %step: tensor<2xf32>) {
  %0 = graph.dropout %x, %step {p = 0.5 : f64} : (tensor<4x8xf32>, tensor<2xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.dropout step must be a rank-0 float tensor, got tensor<2xf32>
