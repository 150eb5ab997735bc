// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=unit loop=i buffer=x deinterleave=true}' 2>&1 | filecheck %s --check-prefix=UNIT
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=steps loop=i buffer=x deinterleave=true}' 2>&1 | filecheck %s --check-prefix=STEPS
// RUN: not dlpc-opt %s -p 'loop-cache-read{kernel=fixed loop=i buffer=x deinterleave=true}' 2>&1 | filecheck %s --check-prefix=FIXED

// UNIT: dlpc-opt: error: buffer 'x' is read with step 1 along loop unit/j in loop unit/i; deinterleave needs a step > 1
// STEPS: dlpc-opt: error: the accesses to buffer 'x' in loop steps/i step the last index by [2, 3]; deinterleave needs one step
// FIXED: dlpc-opt: error: buffer 'x' is read at a fixed last index in loop fixed/i; nothing to deinterleave
func.func @main(%x: memref<4x32xf32>, %y: memref<4x8xf32>) {
  // a stride-1 read: nothing to deinterleave
  loop.kernel "unit" {
    loop.for %i = 0 to 4 step 1 {name = "i"} {
      loop.for %j = 0 to 8 step 1 {name = "j"} {
        %v = memref.load %x[%i, %j] : memref<4x32xf32>
        memref.store %v, %y[%i, %j] : memref<4x8xf32>
      }
    }
  }
  // two reads of x stepping by 2 and by 3 along j
  loop.kernel "steps" {
    loop.for %i = 0 to 4 step 1 {name = "i"} {
      loop.for %j = 0 to 8 step 1 {name = "j"} {
        %two = arith.constant 2 : index
        %three = arith.constant 3 : index
        %j2 = arith.muli %j, %two : index
        %j3 = arith.muli %j, %three : index
        %a = memref.load %x[%i, %j2] : memref<4x32xf32>
        %b = memref.load %x[%i, %j3] : memref<4x32xf32>
        %s = arith.addf %a, %b : f32
        memref.store %s, %y[%i, %j] : memref<4x8xf32>
      }
    }
  }
  // the last index does not move inside the loop
  loop.kernel "fixed" {
    loop.for %i = 0 to 4 step 1 {name = "i"} {
      %c = arith.constant 5 : index
      %v = memref.load %x[%i, %c] : memref<4x32xf32>
      %z = arith.constant 0 : index
      memref.store %v, %y[%i, %z] : memref<4x8xf32>
    }
  }
  func.return
}
