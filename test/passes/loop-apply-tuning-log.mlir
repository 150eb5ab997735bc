// RUN: env DLPC_TUNING_MACHINE="lit test machine" dlpc-opt %s -p 'loop-apply-tuning-log{log="%S/Inputs/mm-tuning.jsonl"}' 2>&1 | filecheck %s
// RUN: env DLPC_TUNING_MACHINE="lit test machine" dlpc-opt %s -p 'loop-apply-tuning-log{log="%S/Inputs/mm-tuning-stale.jsonl"}' 2>&1 | filecheck %s --check-prefix=STALE
// RUN: env DLPC_TUNING_MACHINE="another machine" dlpc-opt %s -p 'loop-apply-tuning-log{log="%S/Inputs/mm-tuning.jsonl"}' 2>&1 | filecheck %s --check-prefix=FOREIGN

// The records were measured on "lit test machine" (their "machine" field; the tests
// say this machine is that one through DLPC_TUNING_MACHINE).

// The log holds records for this kernel's signature (tuned as "matmul_7"): of those tuned
// against today's default schedule ("default": its digest), the faster one is applied,
// re-targeted to "mm"; the failed record is ignored, and so is the still faster record
// tuned against another default schedule (stale: "default" differs), without a warning
// since the kernel has current records.
// CHECK-NOT:   warning
// CHECK-LABEL: loop.kernel "mm"
// CHECK:       {name = "i1o"}
// CHECK:       {name = "i1i", vectorize}
// CHECK-NOT:   i1x
// CHECK-NOT:   i1p

// A log with only the stale record: the kernel takes today's default schedule (the
// tensorized gemm tile) and one warning line says so.
// STALE:       dlpc: warning: tuning log {{.*}}mm-tuning-stale.jsonl: 1 kernel(s) (mm) have only records tuned against an older default schedule; they use today's default (re-tune with dlpc-tune to refresh them)
// STALE-LABEL: loop.kernel "mm"
// STALE-NOT:   i1p
// STALE:       {name = "i1c"
// STALE-NOT:   i1p

// On another machine no record applies: today's default schedule, one warning line.
// FOREIGN:       dlpc: warning: tuning log {{.*}}mm-tuning.jsonl: 1 kernel(s) (mm) have only records measured on other machines; they use today's default (re-tune with dlpc-tune on this machine, 'another machine')
// FOREIGN-LABEL: loop.kernel "mm"
// FOREIGN-NOT:   i1o
// FOREIGN:       {name = "i1c"
// FOREIGN-NOT:   i1o
func.func @main(%A: memref<16x8xf32>, %B: memref<8x32xf32>, %C: memref<16x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<16x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %C[%i0, %i1] : memref<16x32xf32>
      }
    }
  }
  func.return
}
