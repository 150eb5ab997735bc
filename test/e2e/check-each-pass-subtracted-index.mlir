// Index analysis of a subtracted loop variable (`i - k`), checked by running the C of the
// loop nest (and the DLP simulator) before and after each pass: a footprint or tile
// interval computed as if `i - k` were `i + k` reads the wrong elements.
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=conv loop=i0 buffer=t local=xl},loop-cache-read{kernel=rev loop=i0 buffer=x local=rl}' --check-each-pass | filecheck %s --check-prefix=CACHE
// RUN: dlpc-opt %s -p 'loop-cache-read{kernel=conv loop=i0 buffer=t local=xp pack=true}' --check-each-pass | filecheck %s --check-prefix=PACK
// RUN: dlpc-opt %s -p 'loop-compute-at{producer=scale kernel=conv loop=i0}' --check-each-pass | filecheck %s --check-prefix=AT
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny}' --check-each-pass | filecheck %s --check-prefix=DLP
// RUN: dlpc-opt %s -p 'loop-to-dlp{target-desc=tiny multicore=false double-buffer=false}' --check-each-pass | filecheck %s --check-prefix=DLP

// CACHE: %xl = memref.alloca()
// CACHE: %rl = memref.alloca()
// PACK:  %xp = memref.alloca()
// AT:    loop.kernel "conv"
// AT-NOT: loop.kernel "scale"
// DLP:   dlp.kernel "conv"
// DLP:   dlp.kernel "rows"
// DLP:   dlp.kernel "diff"

// conv: y[i0, i1] = sum_r0 t[i0, i1 - r0 + 2] * w[r0], t = 2 x (a 1-D convolution whose
// input index subtracts the reduction variable); rev: z[i0, i1] = x[15 - i0, 31 - i1]
// (every tile reads rows 15 - i0: a subtracted work variable); rows: o[i0, i1] =
// sum_r0 u[i0 - r0 + 2, i1] * w[r0] (a tile of rows reads two rows more, below a
// subtracted reduction variable); diff: d[i0] = u[i0 + 1] - u[i0] (tiles overlap by
// exactly one row)
func.func @main(%x: memref<16x34xf32>, %w: memref<3xf32>, %u: memref<18x32xf32>, %y: memref<16x32xf32>, %z: memref<16x34xf32>, %o: memref<16x32xf32>, %d: memref<17x32xf32>) {
  %t = memref.alloc() : memref<16x34xf32>
  loop.kernel "scale" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 34 step 1 {name = "i1"} {
        %v = memref.load %x[%i0, %i1] : memref<16x34xf32>
        %two = arith.constant 2.000000e+00 : f32
        %r = arith.mulf %v, %two : f32
        memref.store %r, %t[%i0, %i1] : memref<16x34xf32>
      }
    }
  }
  loop.kernel "conv" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %y[%i0, %i1] : memref<16x32xf32>
        loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction} {
          %c2 = arith.constant 2 : index
          %a = arith.subi %i1, %r0 : index
          %j = arith.addi %a, %c2 : index
          %xv = memref.load %t[%i0, %j] : memref<16x34xf32>
          %wv = memref.load %w[%r0] : memref<3xf32>
          %acc = memref.load %y[%i0, %i1] : memref<16x32xf32>
          %p = arith.mulf %xv, %wv : f32
          %s = arith.addf %acc, %p : f32
          memref.store %s, %y[%i0, %i1] : memref<16x32xf32>
        }
      }
    }
  }
  loop.kernel "rev" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 34 step 1 {name = "i1"} {
        %c15 = arith.constant 15 : index
        %c33 = arith.constant 33 : index
        %a = arith.subi %c15, %i0 : index
        %b = arith.subi %c33, %i1 : index
        %v = memref.load %x[%a, %b] : memref<16x34xf32>
        memref.store %v, %z[%i0, %i1] : memref<16x34xf32>
      }
    }
  }
  loop.kernel "rows" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %o[%i0, %i1] : memref<16x32xf32>
        loop.for %r0 = 0 to 3 step 1 {name = "r0", reduction} {
          %c2 = arith.constant 2 : index
          %a = arith.subi %i0, %r0 : index
          %j = arith.addi %a, %c2 : index
          %uv = memref.load %u[%j, %i1] : memref<18x32xf32>
          %wv = memref.load %w[%r0] : memref<3xf32>
          %acc = memref.load %o[%i0, %i1] : memref<16x32xf32>
          %p = arith.mulf %uv, %wv : f32
          %s = arith.addf %acc, %p : f32
          memref.store %s, %o[%i0, %i1] : memref<16x32xf32>
        }
      }
    }
  }
  loop.kernel "diff" {
    loop.for %i0 = 0 to 17 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %n = arith.addi %i0, %c1 : index
        %a = memref.load %u[%n, %i1] : memref<18x32xf32>
        %b = memref.load %u[%i0, %i1] : memref<18x32xf32>
        %r = arith.subf %a, %b : f32
        memref.store %r, %d[%i0, %i1] : memref<17x32xf32>
      }
    }
  }
  memref.dealloc %t : memref<16x34xf32>
  func.return
}
