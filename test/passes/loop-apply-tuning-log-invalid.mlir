// A tuning log that does not exist, or a line that is not a tuning record, is a
// one-line error (never a silent fall-back to the default schedules).
// RUN: not dlpc-opt %s -p 'loop-apply-tuning-log{log="%t.missing.jsonl"}' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: printf '{"sig": 1\n{"sig": "x"}\n' > %t.bad.jsonl
// RUN: not dlpc-opt %s -p 'loop-apply-tuning-log{log="%t.bad.jsonl"}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not dlpc-run %S/../../examples/mlp.dlpc --tuning-log %t.missing.jsonl 2>&1 | filecheck %s --check-prefix=RUN-MISSING

// MISSING: dlpc-opt: error: no such tuning log: {{.*}}.missing.jsonl
// MISSING-NOT: Traceback
// BAD: dlpc-opt: error: tuning log {{.*}}.bad.jsonl line 1: not a tuning record
// RUN-MISSING: dlpc-run: error: no such tuning log: {{.*}}.missing.jsonl

func.func @main(%A: memref<4x4xf32>, %C: memref<4x4xf32>) {
  loop.kernel "copy" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1"} {
        %a = memref.load %A[%i0, %i1] : memref<4x4xf32>
        memref.store %a, %C[%i0, %i1] : memref<4x4xf32>
      }
    }
  }
  func.return
}
