// RUN: dlpc-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = te.compute "c" (%i0) : tensor<4x8xf32> {
    %z = arith.constant 0.0 : f32
    te.yield %z : f32
  }
  func.return %y : tensor<4x8xf32>
}
// CHECK: te.compute "c" has 1 index arguments but its result has rank 2

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "te.compute"() <{name = "c"}> ({
  ^bb0(%i0: i64):
    %z = arith.constant 0.0 : f32
    te.yield %z : f32
  }) : () -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: te.compute "c" block argument #0 must be index, got i64

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = te.compute "c" (%i0) : tensor<4xf32> {
    %z = arith.constant 0.0 : f64
    te.yield %z : f64
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.compute "c" body yields f64 but the result element type is f32

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.compute "c" (%i0) : tensor<4xf32> {
    %v = te.read %x[%i0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.read of tensor<4x8xf32> has 1 indices but the tensor has rank 2

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0, %r1) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" has 3 block arguments but expects 1 output dims + 1 reduction dims

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [0] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" reduction extents [0] must be >= 1

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  } epilogue (%acc : f32) {
    te.yield %acc : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" epilogue has 1 arguments but expects the accumulator and 1 output dims

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  } epilogue (%acc : f64, %j0 : index) {
    %t = arith.truncf %acc : f64 to f32
    te.yield %t : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" epilogue accumulator has type f64 but the body yields f32

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  } epilogue (%acc : f32, %j0 : f32) {
    te.yield %acc : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" block argument #1 must be index, got f32

// -----

func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = te.reduce "s" (%i0) reduce (%r0) over [8] combiner "add" init 0.0 : tensor<4xf32> {
    %v = te.read %x[%i0, %r0] : tensor<4x8xf32>
    te.yield %v : f32
  } epilogue (%acc : f32, %j0 : index) {
    %c = arith.cmpf ogt, %acc, %acc : f32
    te.yield %c : i1
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.reduce "s" epilogue yields i1 but the result element type is f32

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = te.compute "c" (%i0) : tensor<4xf32> {
  }
  func.return %y : tensor<4xf32>
}
// CHECK: Operation te.compute contains empty block in single-block region that expects at least a terminator

// -----

func.func @f(%x: tensor<4xf32>) -> f32 {
  %z = arith.constant 0.0 : f32
  te.yield %z : f32
}
// CHECK: 'te.yield' expects parent op to be one of 'te.compute', 'te.reduce'

// -----

func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = te.compute "c" (%i0) : tensor<?xf32> {
    %z = arith.constant 0.0 : f32
    te.yield %z : f32
  }
  func.return %y : tensor<?xf32>
}
// CHECK: te.compute "c" result tensor<?xf32> must have a static shape

// -----

// (issue 18: one case per verifier message that had none)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = te.compute "c" (%i0) : tensor<4xf32> {
    %v = "te.read"(%x, %i0) : (tensor<4xf32>, index) -> f16
    %e = arith.extf %v : f16 to f32
    te.yield %e : f32
  }
  func.return %y : tensor<4xf32>
}
// CHECK: te.read result type f16 differs from the element type f32

// -----

// A compute that reads its own result (te-inline crashed erasing it; issue #9)
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = te.compute "exp_0" (%i0) : tensor<4xf32> {
    %v = te.read %e[%i0] : tensor<4xf32>
    %r = math.exp %v : f32
    te.yield %r : f32
  }
  func.return %e : tensor<4xf32>
}
// CHECK: te.read inside "exp_0" reads that compute's own result
