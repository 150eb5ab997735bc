// RUN: not dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' 2>&1 | filecheck %s
// RUN: not dlpc-opt %s -p 'loop-to-dlp{target-desc="%S/Inputs/bad-target.toml"}' 2>&1 | filecheck %s --check-prefix=DESC
// RUN: not dlpc-opt %s -p 'loop-to-dlp{target-desc="%S/Inputs/missing.toml"}' 2>&1 | filecheck %s --check-prefix=MISSING

// DESC: bad-target.toml: error: unknown target field 'clusterz'
// MISSING: dlpc-opt: error: no such target description: {{.*}}missing.toml

// A transpose needs its whole 32x64 source (8 KiB) in NRAM at once: more than the
// 4 KiB NRAM of `tiny`, whatever the tile size.

// CHECK: dlpc-opt: error: kernel 'transpose_0' needs {{[0-9]+}} bytes of nram but the target 'tiny' has 4096
func.func @too_big(%x: memref<32x64xf32>, %out: memref<64x32xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "transpose_0" {
    loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %v = memref.load %x[%i1, %i0] : memref<32x64xf32>
        memref.store %v, %out[%i0, %i1] : memref<64x32xf32>
      }
    }
  }
  func.return
}
