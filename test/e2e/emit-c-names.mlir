// RUN: dlpc-opt %s -t c | filecheck %s

// Names from the model become identifiers through backends/names.py (`v_`/`kernel_`
// prefixes: never a keyword, libc name or predefined macro); comments are escaped so
// model text can neither close a comment nor start a new line of code.

// CHECK:       /* kernel "evil*\/ int pwn; /\*\n" (from graph.relu) */
// CHECK-NEXT:  static void kernel_evil_int_pwn(const float *restrict v_fc1_weight, const float *restrict v_int, float *restrict v_out0)
// CHECK:       /* kernel "a.b" */
// CHECK-NEXT:  static void kernel_a_b(float *restrict v_out0)
// CHECK:       /* kernel "a_b" */
// CHECK-NEXT:  static void kernel_a_b_2(float *restrict v_out0)
// CHECK:       /* int dlpc_main(void **args): 3 arguments, 0 on success */
// CHECK-NEXT:  /*   args[0] input  int: float[4] */
// CHECK-NEXT:  /*   args[1] param  fc1.weight: float[4] */
// CHECK-NEXT:  /*   args[2] output out0: float[4] */
// CHECK:         float *v_int = (float *)args[0];
// CHECK-NEXT:    float *v_fc1_weight = (float *)args[1];
// CHECK-NOT:   pwn;
// CHECK-NOT:   */ int

func.func @main(%x: memref<4xf32> {dlpc.name = "int"}, %w: memref<4xf32>, %out: memref<4xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["fc1.weight"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "evil*/ int pwn; /*\n" attributes {origin = "graph.relu"} {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %a = memref.load %w[%i0] : memref<4xf32>
      %b = memref.load %x[%i0] : memref<4xf32>
      %c = arith.addf %a, %b : f32
      memref.store %c, %out[%i0] : memref<4xf32>
    }
  }
  loop.kernel "a.b" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %z = arith.constant 0.0 : f32
      memref.store %z, %out[%i0] : memref<4xf32>
    }
  }
  loop.kernel "a_b" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      %z = arith.constant 1.0 : f32
      memref.store %z, %out[%i0] : memref<4xf32>
    }
  }
  func.return
}
