"""The dynamic area's decisions, fifth round (issue 35, bench/mutation.py --area dynamic),
on the lines added since seed 43: loop-runtime-extents on hand-written loop IR (register
tiles in nested versions, a version's write-backs inside or past its tiles, tiles of two
extents and sizes under one split, an exact loop in a tile's body, fused loops with and
without their base, an exact vector loop in an unrolled one, extents that are
expressions), each diagnostic exactly; graph-to-te's and te-to-loop's refusals of a
symbolic function; the one-compile program's `short=` option (its checks, the bindings it
gives, which calls it serves and counts) and the fast path's shape check."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.utils.exceptions import VerifyException

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.dialects import symdims
from dlpc.frontends import onnx_symbolic
from dlpc.frontends.text import parse_model
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.passes.lower.runtime_extents import LoopRuntimeExtents
from dlpc.passes.pipeline import PipelineOptions, context, parse_module
from dlpc.reference import graph as ref
from dlpc.runtime import dynamic
from dlpc.runtime.dynamic import DynamicFunction, Generic

# ------------------------------------------------------------ loop-runtime-extents


def fn(body: str, dims: str = '["b", "seq"]', extra: str = "") -> str:
    return (
        "func.func @main(%x: memref<16x16xf32>, %dlpc_dims: memref<2xi64>, %out0: memref<16x16xf32>) "
        f"attributes {{dlpc.dims = {dims}, dlpc.num_inputs = 2 : i64, dlpc.params = [], "
        f"dlpc.num_outputs = 1 : i64{extra}}} {{\n{body}\n  func.return\n}}\n"
    )


def copy(i: str = "%i", j: str = "%j") -> str:
    return (
        f"            %v = memref.load %x[{i}, {j}] : memref<16x16xf32>\n"
        f"            memref.store %v, %out0[{i}, {j}] : memref<16x16xf32>\n"
    )


# two split loops (rows over seq, columns over b), a 4x4 register tile under both
NESTED = fn(
    """  loop.kernel "k_0" {
    loop.for %b1 = 0 to 16 step 4 {name = "ir", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %b2 = 0 to 16 step 4 {name = "jr", dlpc.extent = "b", dlpc.extent_id = 2 : i64} {
        loop.for %t1 = 0 to 4 step 1 {name = "ii", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          loop.for %t2 = 0 to 4 step 1 {name = "ji", unroll = 4 : i64, dlpc.extent = "b", dlpc.extent_base = [2 : i64]} {
            %i = arith.addi %b1, %t1 : index
            %j = arith.addi %b2, %t2 : index
"""
    + copy()
    + """          }
        }
      }
    }
  }"""
)

# one split loop, tiles of two extents and two sizes under it, an exact loop in its body
# and write-backs from the tile's base: within (3 <= 4), past (5), from 1, another base
MIXED = fn("""  loop.kernel "k_0" attributes {dlpc.exact = ["r"]} {
    loop.for %b1 = 0 to 16 step 4 {name = "ir", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %t0 = 0 to 2 step 1 {name = "ia", unroll = 2 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %t0 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %t1 = 0 to 4 step 1 {name = "ib", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %t1 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %t2 = 0 to 4 step 1 {name = "jb", unroll = 4 : i64, dlpc.extent = "b", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %t2 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %r = 0 to 16 step 1 {name = "r", dlpc.extent = "seq"} {
        %v = memref.load %x[%b1, %r] : memref<16x16xf32>
        memref.store %v, %out0[%b1, %r] : memref<16x16xf32>
      }
      loop.for %w0 = 0 to 3 step 1 {name = "wa", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %w0 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %w1 = 0 to 5 step 1 {name = "wb", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %w1 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %w2 = 1 to 4 step 1 {name = "wc", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %w2 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
      loop.for %w3 = 0 to 4 step 1 {name = "wd", dlpc.extent = "seq"} {
        %i = arith.addi %b1, %w3 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
    }
  }""")

# a fused loop (scale 8) whose base loop is not around it: left to run to its bound;
# an unrolled fused loop: not a tile (runs to its bound); an exact vector loop inside an
# unrolled one with a base: stopped (clamped) at seq - base; an exact unrolled tile with a
# base: two versions (guard_tile); an integer extent and a prepare kernel: static
ODD = fn("""  loop.kernel "k_0" attributes {dlpc.exact = ["r", "rb"]} {
    loop.for %f = 0 to 32 step 1 {name = "f", dlpc.extent = "seq", dlpc.extent_base = [7 : i64], dlpc.extent_scale = 8 : i64} {
      %v = memref.load %x[%f, %f] : memref<16x16xf32>
      memref.store %v, %out0[%f, %f] : memref<16x16xf32>
    }
    loop.for %b1 = 0 to 16 step 4 {name = "ir", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %g = 0 to 8 step 1 {name = "g", unroll = 8 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64], dlpc.extent_scale = 2 : i64} {
        %v = memref.load %x[%g, %b1] : memref<16x16xf32>
        memref.store %v, %out0[%g, %b1] : memref<16x16xf32>
      }
      loop.for %u = 0 to 2 step 1 {name = "u", unroll = 2 : i64} {
        loop.for %r = 0 to 4 step 1 {name = "r", vectorize, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
          %i = arith.addi %b1, %r : index
          %v = memref.load %x[%u, %i] : memref<16x16xf32>
          memref.store %v, %out0[%u, %i] : memref<16x16xf32>
        }
      }
      loop.for %r2 = 0 to 4 step 1 {name = "rb", unroll = 4 : i64, dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %b1, %r2 : index
        %v = memref.load %x[%i, %i] : memref<16x16xf32>
        memref.store %v, %out0[%i, %i] : memref<16x16xf32>
      }
    }
    loop.for %c = 0 to 4 step 1 {name = "c", dlpc.extent = "4", dlpc.extent_base = [1 : i64]} {
      %v = memref.load %x[%c, %c] : memref<16x16xf32>
      memref.store %v, %out0[%c, %c] : memref<16x16xf32>
    }
  }
  loop.kernel "pack_0" attributes {dlpc.prepare} {
    loop.for %p = 0 to 16 step 1 {name = "p", dlpc.extent = "seq"} {
      %v = memref.load %x[%p, %p] : memref<16x16xf32>
      memref.store %v, %out0[%p, %p] : memref<16x16xf32>
    }
  }""")

# extents that are expressions: 2*b*seq + 1 (a product and a constant term),
# floor((seq + 1) / 2) (a floor division), b*seq (a product alone)
EXPRS = fn("""  loop.kernel "k_0" {
    loop.for %i = 0 to 16 step 1 {name = "i", dlpc.extent = "2*b*seq + 1"} {
      %v = memref.load %x[%i, %i] : memref<16x16xf32>
      memref.store %v, %out0[%i, %i] : memref<16x16xf32>
    }
    loop.for %j = 0 to 16 step 1 {name = "j", dlpc.extent = "floor((seq + 1) / 2)"} {
      %v = memref.load %x[%j, %j] : memref<16x16xf32>
      memref.store %v, %out0[%j, %j] : memref<16x16xf32>
    }
    loop.for %k = 0 to 16 step 1 {name = "k", dlpc.extent = "b*seq"} {
      %v = memref.load %x[%k, %k] : memref<16x16xf32>
      memref.store %v, %out0[%k, %k] : memref<16x16xf32>
    }
  }""")


NESTED_OUT = """\
loop.kernel "k_0" {
  %0 = arith.constant 1 : index
  %seq = memref.load %dlpc_dims[%0] : memref<2xi64>
  %1 = arith.index_cast %seq : i64 to index
  loop.for %b1 = 0 to 16 step 4 {name = "ir"} {
    %2 = arith.cmpi slt, %b1, %1 : index
    scf.if %2 {
      %3 = arith.constant 1 : index
      %seq_1 = memref.load %dlpc_dims[%3] : memref<2xi64>
      %4 = arith.index_cast %seq_1 : i64 to index
      %5 = arith.constant 4 : index
      %6 = arith.addi %b1, %5 : index
      %7 = arith.cmpi sle, %6, %4 : index
      scf.if %7 {
        %8 = arith.constant 0 : index
        %b = memref.load %dlpc_dims[%8] : memref<2xi64>
        %9 = arith.index_cast %b : i64 to index
        loop.for %b2 = 0 to 16 step 4 {name = "jr_tile"} {
          %10 = arith.cmpi slt, %b2, %9 : index
          scf.if %10 {
            %11 = arith.constant 0 : index
            %b_1 = memref.load %dlpc_dims[%11] : memref<2xi64>
            %12 = arith.index_cast %b_1 : i64 to index
            %13 = arith.constant 4 : index
            %14 = arith.addi %b2, %13 : index
            %15 = arith.cmpi sle, %14, %12 : index
            scf.if %15 {
              loop.for %t1 = 0 to 4 step 1 {name = "ii_tile_tile", unroll = 4} {
                loop.for %t2 = 0 to 4 step 1 {name = "ji_tile_tile", unroll = 4} {
                  %i = arith.addi %b1, %t1 : index
                  %j = arith.addi %b2, %t2 : index
            } else {
              loop.for %t1_1 = 0 to 4 step 1 {name = "ii_tile", unroll = 4} {
                %16 = arith.constant 0 : index
                %b_2 = memref.load %dlpc_dims[%16] : memref<2xi64>
                %17 = arith.index_cast %b_2 : i64 to index
                %18 = arith.subi %17, %b2 : index
                loop.for %t2_1 = 0 to 4 step 1 {name = "ji_tile", unroll = 4} {
                  %19 = arith.cmpi slt, %t2_1, %18 : index
                  scf.if %19 {
                    %i_1 = arith.addi %b1, %t1_1 : index
                    %j_1 = arith.addi %b2, %t2_1 : index
      } else {
        %20 = arith.constant 0 : index
        %b_3 = memref.load %dlpc_dims[%20] : memref<2xi64>
        %21 = arith.index_cast %b_3 : i64 to index
        loop.for %b2_1 = 0 to 16 step 4 {name = "jr"} {
          %22 = arith.cmpi slt, %b2_1, %21 : index
          scf.if %22 {
            %23 = arith.constant 0 : index
            %b_4 = memref.load %dlpc_dims[%23] : memref<2xi64>
            %24 = arith.index_cast %b_4 : i64 to index
            %25 = arith.constant 4 : index
            %26 = arith.addi %b2_1, %25 : index
            %27 = arith.cmpi sle, %26, %24 : index
            scf.if %27 {
              %28 = arith.constant 1 : index
              %seq_2 = memref.load %dlpc_dims[%28] : memref<2xi64>
              %29 = arith.index_cast %seq_2 : i64 to index
              %30 = arith.subi %29, %b1 : index
              loop.for %t1_2 = 0 to 4 step 1 {name = "ii_tile.1", unroll = 4} {
                %31 = arith.cmpi slt, %t1_2, %30 : index
                scf.if %31 {
                  loop.for %t2_2 = 0 to 4 step 1 {name = "ji_tile.1", unroll = 4} {
                    %i_2 = arith.addi %b1, %t1_2 : index
                    %j_2 = arith.addi %b2_1, %t2_2 : index
            } else {
              %32 = arith.constant 1 : index
              %seq_3 = memref.load %dlpc_dims[%32] : memref<2xi64>
              %33 = arith.index_cast %seq_3 : i64 to index
              %34 = arith.subi %33, %b1 : index
              loop.for %t1_3 = 0 to 4 step 1 {name = "ii", unroll = 4} {
                %35 = arith.cmpi slt, %t1_3, %34 : index
                scf.if %35 {
                  %36 = arith.constant 0 : index
                  %b_5 = memref.load %dlpc_dims[%36] : memref<2xi64>
                  %37 = arith.index_cast %b_5 : i64 to index
                  %38 = arith.subi %37, %b2_1 : index
                  loop.for %t2_3 = 0 to 4 step 1 {name = "ji", unroll = 4} {
                    %39 = arith.cmpi slt, %t2_3, %38 : index
                    scf.if %39 {
                      %i_3 = arith.addi %b1, %t1_3 : index
                      %j_3 = arith.addi %b2_1, %t2_3 : index
"""

MIXED_OUT = """\
loop.kernel "k_0" {
  %0 = arith.constant 1 : index
  %seq = memref.load %dlpc_dims[%0] : memref<2xi64>
  %1 = arith.index_cast %seq : i64 to index
  loop.for %b1 = 0 to 16 step 4 {name = "ir"} {
    %2 = arith.cmpi slt, %b1, %1 : index
    scf.if %2 {
      %3 = arith.constant 1 : index
      %seq_1 = memref.load %dlpc_dims[%3] : memref<2xi64>
      %4 = arith.index_cast %seq_1 : i64 to index
      %5 = arith.constant 4 : index
      %6 = arith.addi %b1, %5 : index
      %7 = arith.cmpi sle, %6, %4 : index
      %8 = arith.constant 0 : index
      %b = memref.load %dlpc_dims[%8] : memref<2xi64>
      %9 = arith.index_cast %b : i64 to index
      %10 = arith.constant 4 : index
      %11 = arith.addi %b1, %10 : index
      %12 = arith.cmpi sle, %11, %9 : index
      %13 = arith.andi %7, %12 : i1
      scf.if %13 {
        loop.for %t0 = 0 to 2 step 1 {name = "ia_tile", unroll = 2} {
          %i = arith.addi %b1, %t0 : index
        loop.for %t1 = 0 to 4 step 1 {name = "ib_tile", unroll = 4} {
          %i_1 = arith.addi %b1, %t1 : index
        loop.for %t2 = 0 to 4 step 1 {name = "jb_tile", unroll = 4} {
          %i_2 = arith.addi %b1, %t2 : index
        %14 = arith.constant 1 : index
        %seq_2 = memref.load %dlpc_dims[%14] : memref<2xi64>
        %15 = arith.index_cast %seq_2 : i64 to index
        loop.for %r = 0 to 16 step 1 {name = "r_tile"} {
          %16 = arith.cmpi slt, %r, %15 : index
          scf.if %16 {
        loop.for %w0 = 0 to 3 step 1 {name = "wa_tile"} {
          %i_3 = arith.addi %b1, %w0 : index
        %17 = arith.constant 1 : index
        %seq_3 = memref.load %dlpc_dims[%17] : memref<2xi64>
        %18 = arith.index_cast %seq_3 : i64 to index
        %19 = arith.subi %18, %b1 : index
        loop.for %w1 = 0 to 5 step 1 {name = "wb_tile"} {
          %20 = arith.cmpi slt, %w1, %19 : index
          scf.if %20 {
            %i_4 = arith.addi %b1, %w1 : index
        %21 = arith.constant 1 : index
        %seq_4 = memref.load %dlpc_dims[%21] : memref<2xi64>
        %22 = arith.index_cast %seq_4 : i64 to index
        %23 = arith.subi %22, %b1 : index
        loop.for %w2 = 1 to 4 step 1 {name = "wc_tile"} {
          %24 = arith.cmpi slt, %w2, %23 : index
          scf.if %24 {
            %i_5 = arith.addi %b1, %w2 : index
        %25 = arith.constant 1 : index
        %seq_5 = memref.load %dlpc_dims[%25] : memref<2xi64>
        %26 = arith.index_cast %seq_5 : i64 to index
        loop.for %w3 = 0 to 4 step 1 {name = "wd_tile"} {
          %27 = arith.cmpi slt, %w3, %26 : index
          scf.if %27 {
            %i_6 = arith.addi %b1, %w3 : index
      } else {
        %28 = arith.constant 1 : index
        %seq_6 = memref.load %dlpc_dims[%28] : memref<2xi64>
        %29 = arith.index_cast %seq_6 : i64 to index
        %30 = arith.subi %29, %b1 : index
        loop.for %t0_1 = 0 to 2 step 1 {name = "ia", unroll = 2} {
          %31 = arith.cmpi slt, %t0_1, %30 : index
          scf.if %31 {
            %i_7 = arith.addi %b1, %t0_1 : index
        %32 = arith.constant 1 : index
        %seq_7 = memref.load %dlpc_dims[%32] : memref<2xi64>
        %33 = arith.index_cast %seq_7 : i64 to index
        %34 = arith.subi %33, %b1 : index
        loop.for %t1_1 = 0 to 4 step 1 {name = "ib", unroll = 4} {
          %35 = arith.cmpi slt, %t1_1, %34 : index
          scf.if %35 {
            %i_8 = arith.addi %b1, %t1_1 : index
        %36 = arith.constant 0 : index
        %b_1 = memref.load %dlpc_dims[%36] : memref<2xi64>
        %37 = arith.index_cast %b_1 : i64 to index
        %38 = arith.subi %37, %b1 : index
        loop.for %t2_1 = 0 to 4 step 1 {name = "jb", unroll = 4} {
          %39 = arith.cmpi slt, %t2_1, %38 : index
          scf.if %39 {
            %i_9 = arith.addi %b1, %t2_1 : index
        %40 = arith.constant 1 : index
        %seq_8 = memref.load %dlpc_dims[%40] : memref<2xi64>
        %41 = arith.index_cast %seq_8 : i64 to index
        loop.for %r_1 = 0 to 16 step 1 {name = "r"} {
          %42 = arith.cmpi slt, %r_1, %41 : index
          scf.if %42 {
        %43 = arith.constant 1 : index
        %seq_9 = memref.load %dlpc_dims[%43] : memref<2xi64>
        %44 = arith.index_cast %seq_9 : i64 to index
        %45 = arith.subi %44, %b1 : index
        loop.for %w0_1 = 0 to 3 step 1 {name = "wa"} {
          %46 = arith.cmpi slt, %w0_1, %45 : index
          scf.if %46 {
            %i_10 = arith.addi %b1, %w0_1 : index
        %47 = arith.constant 1 : index
        %seq_10 = memref.load %dlpc_dims[%47] : memref<2xi64>
        %48 = arith.index_cast %seq_10 : i64 to index
        %49 = arith.subi %48, %b1 : index
        loop.for %w1_1 = 0 to 5 step 1 {name = "wb"} {
          %50 = arith.cmpi slt, %w1_1, %49 : index
          scf.if %50 {
            %i_11 = arith.addi %b1, %w1_1 : index
        %51 = arith.constant 1 : index
        %seq_11 = memref.load %dlpc_dims[%51] : memref<2xi64>
        %52 = arith.index_cast %seq_11 : i64 to index
        %53 = arith.subi %52, %b1 : index
        loop.for %w2_1 = 1 to 4 step 1 {name = "wc"} {
          %54 = arith.cmpi slt, %w2_1, %53 : index
          scf.if %54 {
            %i_12 = arith.addi %b1, %w2_1 : index
        %55 = arith.constant 1 : index
        %seq_12 = memref.load %dlpc_dims[%55] : memref<2xi64>
        %56 = arith.index_cast %seq_12 : i64 to index
        loop.for %w3_1 = 0 to 4 step 1 {name = "wd"} {
          %57 = arith.cmpi slt, %w3_1, %56 : index
          scf.if %57 {
            %i_13 = arith.addi %b1, %w3_1 : index
"""

ODD_OUT = """\
loop.kernel "k_0" {
  loop.for %f = 0 to 32 step 1 {name = "f"} {
  %0 = arith.constant 1 : index
  %seq = memref.load %dlpc_dims[%0] : memref<2xi64>
  %1 = arith.index_cast %seq : i64 to index
  loop.for %b1 = 0 to 16 step 4 {name = "ir"} {
    %2 = arith.cmpi slt, %b1, %1 : index
    scf.if %2 {
      loop.for %g = 0 to 8 step 1 {name = "g", unroll = 8} {
      loop.for %u = 0 to 2 step 1 {name = "u", unroll = 2} {
        %3 = arith.constant 1 : index
        %seq_1 = memref.load %dlpc_dims[%3] : memref<2xi64>
        %4 = arith.index_cast %seq_1 : i64 to index
        %5 = arith.subi %4, %b1 : index
        loop.for %r = 0 to 4 step 1 {name = "r", vectorize} {
          %6 = arith.cmpi slt, %r, %5 : index
          scf.if %6 {
            %i = arith.addi %b1, %r : index
      %7 = arith.constant 1 : index
      %seq_2 = memref.load %dlpc_dims[%7] : memref<2xi64>
      %8 = arith.index_cast %seq_2 : i64 to index
      %9 = arith.constant 4 : index
      %10 = arith.addi %b1, %9 : index
      %11 = arith.cmpi sle, %10, %8 : index
      scf.if %11 {
        loop.for %r2 = 0 to 4 step 1 {name = "rb_whole", unroll = 4} {
          %i_1 = arith.addi %b1, %r2 : index
      } else {
        %12 = arith.constant 1 : index
        %seq_3 = memref.load %dlpc_dims[%12] : memref<2xi64>
        %13 = arith.index_cast %seq_3 : i64 to index
        %14 = arith.subi %13, %b1 : index
        loop.for %r2_1 = 0 to 4 step 1 {name = "rb", unroll = 4} {
          %15 = arith.cmpi slt, %r2_1, %14 : index
          scf.if %15 {
            %i_2 = arith.addi %b1, %r2_1 : index
  loop.for %c = 0 to 4 step 1 {name = "c"} {
loop.kernel "pack_0" attributes {dlpc.prepare} {
  loop.for %p = 0 to 16 step 1 {name = "p"} {
"""

EXPRS_OUT = """\
loop.kernel "k_0" {
  %0 = arith.constant 0 : index
  %b = memref.load %dlpc_dims[%0] : memref<2xi64>
  %1 = arith.index_cast %b : i64 to index
  %2 = arith.constant 1 : index
  %seq = memref.load %dlpc_dims[%2] : memref<2xi64>
  %3 = arith.index_cast %seq : i64 to index
  %4 = arith.constant 2 : index
  %5 = arith.muli %1, %3 : index
  %6 = arith.muli %5, %4 : index
  %7 = arith.constant 1 : index
  %8 = arith.addi %6, %7 : index
  loop.for %i = 0 to 16 step 1 {name = "i"} {
    %9 = arith.cmpi slt, %i, %8 : index
    scf.if %9 {
  %10 = arith.constant 1 : index
  %seq_1 = memref.load %dlpc_dims[%10] : memref<2xi64>
  %11 = arith.index_cast %seq_1 : i64 to index
  %12 = arith.constant 1 : index
  %13 = arith.addi %11, %12 : index
  %14 = arith.constant 2 : index
  %15 = arith.floordivsi %13, %14 : index
  loop.for %j = 0 to 16 step 1 {name = "j"} {
    %16 = arith.cmpi slt, %j, %15 : index
    scf.if %16 {
  %17 = arith.constant 0 : index
  %b_1 = memref.load %dlpc_dims[%17] : memref<2xi64>
  %18 = arith.index_cast %b_1 : i64 to index
  %19 = arith.constant 1 : index
  %seq_2 = memref.load %dlpc_dims[%19] : memref<2xi64>
  %20 = arith.index_cast %seq_2 : i64 to index
  %21 = arith.muli %18, %20 : index
  loop.for %k = 0 to 16 step 1 {name = "k"} {
    %22 = arith.cmpi slt, %k, %21 : index
    scf.if %22 {
"""


def extents(text: str) -> str:
    """The pass's output without the data (loads of %x, stores, closing braces): the
    loops, their guards and limits, the versions' conditions."""
    module = parse_module(text)
    LoopRuntimeExtents().apply(context(), module)
    module.verify()
    out = []
    for line in str(module).splitlines()[2:-3]:
        s = line.strip()
        if s != "}" and "memref.load %x" not in s and "memref.store" not in s:
            out.append(line[4:])
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", ["NESTED", "MIXED", "ODD", "EXPRS"])
def test_runtime_extents_output(name):
    """NESTED: the rows' tile versioned once per row block, then the columns' in each
    version; in the rows' remainder the rows stay stopped at seq even where the columns
    fit (`ii_tile.1`). MIXED: one condition for the tiles of each extent (their largest
    trip count, 4), anded; the write-back from the same base within 4 rows static where
    the tiles fit, the others (5 rows, from 1, no base) stopped; the exact loop guarded in
    both versions. ODD: see its input. EXPRS: each limit built from the dims."""
    assert extents(globals()[name]) == globals()[name + "_OUT"]


def test_a_second_run_changes_nothing():
    for text in (NESTED, MIXED, ODD, EXPRS):
        module = parse_module(text)
        LoopRuntimeExtents().apply(context(), module)
        once = str(module)
        LoopRuntimeExtents().apply(context(), module)
        assert str(module) == once and "dlpc.extent" not in once


def test_a_module_with_no_marks_is_left_as_it_is():
    """No marked loop: nothing to guard, no @main needed, the split ids stay."""
    text = (
        "func.func @f(%x: memref<4xf32>) {\n"
        '  loop.kernel "k_0" {\n'
        '    loop.for %i = 0 to 4 step 1 {name = "i", dlpc.extent_id = 1 : i64} {\n'
        "      %v = memref.load %x[%i] : memref<4xf32>\n    }\n  }\n  func.return\n}\n"
    )
    module = parse_module(text)
    before = str(module)
    LoopRuntimeExtents().apply(context(), module)
    assert str(module) == before


def refused(text: str) -> str:
    with pytest.raises(VerifyException) as e:
        LoopRuntimeExtents().apply(context(), parse_module(text))
    return str(e.value)


REDUCES = (
    "in a kernel that reduces over a symbolic extent; lower with dlpc.guard_reductions on @main"
)


def test_runtime_extents_diagnostics():
    assert (
        refused(
            fn(
                '  loop.kernel "k_0" {\n    loop.for %i = 0 to 16 step 1 {name = "i", dlpc.extent = 3 : i64} {\n    }\n  }'
            )
        )
        == "loop-runtime-extents: loop 'i': dlpc.extent must be a string"
    )
    assert refused(
        fn(
            '  loop.kernel "k_0" attributes {dlpc.exact = ["r"]} {\n'
            '    loop.for %r = 0 to 16 step 1 {name = "r", dlpc.extent = "seq", dlpc.extent_base = [5 : i64]} {\n'
            "      %v = memref.load %x[%r, %r] : memref<16x16xf32>\n    }\n  }"
        )
    ) == (
        "loop-runtime-extents: loop 'r' reduces over 'seq' but a loop its index adds to is no "
        "longer around it; lower with dlpc.guard_reductions on @main"
    )


def exact_kernel(loops: str) -> str:
    return fn(
        '  loop.kernel "k_0" attributes {dlpc.exact = ["r0"]} {\n'
        "    %acc = memref.alloca() : memref<16xf32>\n"
        f"{loops}"
        '    loop.for %r = 0 to 16 step 1 {name = "r0", dlpc.extent = "seq"} {\n    }\n  }'
    )


def test_unmarked_loops_of_a_reduction_kernel():
    """Allowed: a peeled first iteration (0 to 1) reading at its index, a loop reading a
    local buffer, a loop whose name only starts with the root's and a digit (r01: not
    derived from r0), a derived loop reading at an index that does not depend on it. The
    marked r0 is guarded; dlpc.exact is dropped."""
    out = extents(
        exact_kernel(
            '    loop.for %a = 0 to 1 step 1 {name = "r0_first"} {\n'
            "      %v = memref.load %x[%a, %a] : memref<16x16xf32>\n    }\n"
            '    loop.for %b = 0 to 16 step 1 {name = "r0_fold"} {\n'
            "      %v = memref.load %acc[%b] : memref<16xf32>\n    }\n"
            '    loop.for %c = 0 to 16 step 1 {name = "r01"} {\n'
            "      %v = memref.load %x[%c, %c] : memref<16x16xf32>\n    }\n"
            '    loop.for %d = 0 to 16 step 1 {name = "r0o"} {\n'
            "      %z = arith.constant 0 : index\n"
            "      %v = memref.load %x[%z, %z] : memref<16x16xf32>\n    }\n"
        )
    )
    assert "dlpc.exact" not in out
    assert out.count("scf.if") == 1 and 'loop.for %r = 0 to 16 step 1 {name = "r0"}' in out
    assert "memref.load %acc[%b]" in out


@pytest.mark.parametrize("bounds", ["1 to 2", "0 to 2"])
def test_a_derived_loop_reading_at_an_index_built_from_it_is_refused(bounds):
    """Not a peeled first iteration (from 1, or two iterations); the index is the iv
    through an addi and a muli with a constant."""
    assert refused(
        exact_kernel(
            f'    loop.for %a = {bounds} step 1 {{name = "r0_first"}} {{\n'
            "      %o = arith.constant 1 : index\n      %s = arith.addi %a, %o : index\n"
            "      %t = arith.muli %s, %o : index\n"
            "      %v = memref.load %x[%o, %t] : memref<16x16xf32>\n    }\n"
        )
    ) == (
        "loop-runtime-extents: kernel 'k_0': loop 'r0_first' has no dlpc.extent mark but reads "
        f"the kernel's inputs at its index, {REDUCES}"
    )


# ------------------------------------------- graph-to-te / te-to-loop over symbolic dims


def tanh(sym: str, attrs: str = "") -> str:
    ty = f'tensor<?x4xf32, ["{sym}"]>'
    return (
        f"func.func @main(%x: {ty}) -> {ty}{attrs} {{\n"
        f"  %y = graph.tanh %x : ({ty}) -> {ty}\n  func.return %y : {ty}\n}}\n"
    )


def lowered(text: str) -> str:
    module = parse_module(text)
    pipeline.run("graph-to-te", module, PipelineOptions())
    pipeline.run("te-to-loop", module, PipelineOptions())
    return str(module)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            tanh("?"),
            "graph-to-te: @main has an anonymous symbolic dim '?': name it (an ONNX "
            "dim_param, a .dlpc named dim) or bind it",
        ),
        (
            tanh("s", ' attributes {dlpc.dims = ["s"]}'),
            "graph-to-te: @main already has dlpc.dims: lowered twice?",
        ),
        (
            tanh("s"),
            "te-to-loop: the result of te.compute \"tanh_0\" has symbolic dim 's' but @main "
            "declares no maximum of 's' (dlpc.max_dims = {s = N})",
        ),
        (
            tanh("s", " attributes {dlpc.max_dims = {s = 0 : i64}}"),
            "te-to-loop: the result of te.compute \"tanh_0\": dim 's' is 0 at the maxima, not "
            "its largest value",
        ),
    ],
)
def test_symbolic_lowering_refusals(text, message):
    with pytest.raises(DlpcError) as e:
        lowered(text)
    assert str(e.value) == f"error: {message}"


def test_a_maximum_of_one_is_served_and_other_entries_are_ignored():
    """s at most 1: buffers of one row; a non-integer entry of dlpc.max_dims is no
    maximum (t names no dim of the function)."""
    out = lowered(tanh("s", ' attributes {dlpc.max_dims = {s = 1 : i64, t = "x"}}'))
    assert "memref<1x4xf32>" in out and "memref<2x4xf32>" not in out
    with pytest.raises(DlpcError, match="declares no maximum of 's'"):
        lowered(tanh("s", ' attributes {dlpc.max_dims = {s = "1"}}'))


# ------------------------------------------------------------ short= and the fast path

HEAD = """
model t(x: f32[B, S, 4], m: f32[B, T]) {
  return tanh(x), m * 2.0
}
"""


def function(**options) -> DynamicFunction:
    model = parse_model(HEAD, dims="symbolic")
    return DynamicFunction(model, lambda m: m, **options)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    "short, shown",
    [
        ([{"U": 1}], "{'U': 1}"),
        ([{"S": 0}], "{'S': 0}"),
        ([{}], "{}"),
        ([{"S": 1}, {"T": -2}], "{'T': -2}"),
    ],
)
def test_a_bad_short_binding_is_one_line(short, shown):
    with pytest.raises(DlpcError) as e:
        function(short=short)
    assert str(e.value) == (
        f"error: short= binding {shown} must give symbolic dims of the model's inputs "
        "(B, S, T) values >= 1"
    )


def test_short_k_must_not_be_negative():
    with pytest.raises(DlpcError) as e:
        function(short=-1)
    assert str(e.value) == "error: short= must be >= 0 (the largest short value), got -1"
    assert function(short=0).generic is not None


def test_versions_of_short_k_and_of_a_list():
    """B leads an input (at 1 in each binding), S and T lead none: each at 1..K within
    its maximum (T at most 1); a list is kept where each value is within 1..max."""
    fn = function(short=2, maxima={"S": 2, "T": 1})
    generic = fn.generic
    assert isinstance(generic, Generic)
    assert generic.versions() == [{"B": 1, "S": 1}, {"B": 1, "S": 2}, {"B": 1, "T": 1}]
    fn = function(short=[{"S": 2}, {"S": 3}, {"B": 1, "T": 1}, {"T": 2}], maxima={"S": 2, "T": 1})
    assert fn.generic is not None
    assert fn.generic.versions() == [{"S": 2}, {"B": 1, "T": 1}]
    fn = function(short=1, target="numpy")  # (copies are the C pipeline's)
    assert fn.generic is not None and fn.generic.versions() == []


def test_a_dim_leading_any_input_gets_no_short_values():
    model = parse_model(
        "model t(x: f32[B, S], y: f32[S, 4]) {\n  return x * 2.0, y\n}\n", dims="symbolic"
    )
    fn = DynamicFunction(model, lambda m: m, short=3)  # pyright: ignore[reportArgumentType]
    assert fn.generic is not None and fn.generic.versions() == []


def test_serves_only_the_bindings_with_copies():
    fn = function(short=[{"S": 2}, {"B": 1, "T": 1}])
    generic = fn.generic
    assert generic is not None
    generic.short = generic.versions()
    assert generic.serves({"B": 3, "S": 2, "T": 5})
    assert generic.serves({"B": 1, "S": 7, "T": 1})
    assert not generic.serves({"B": 2, "S": 3, "T": 1})
    assert not generic.serves({"B": 1, "S": 3, "T": 2})
    generic.short = []
    assert not generic.serves({"B": 3, "S": 2, "T": 5})


def test_checked_calls_only_for_the_same_shapes_and_dtypes():
    shapes = (((2, 3), np.dtype(np.float32)), ((4,), np.dtype(np.int64)))
    call = dynamic.checked(shapes, lambda *xs: [len(xs)])
    a, b = np.zeros((2, 3), np.float32), np.zeros(4, np.int64)
    assert call(a, b) == [2]
    assert call(a) is None and call(a, b, b) is None
    assert call(a.astype(np.float64), b) is None
    assert call(a, b.astype(np.int32)) is None
    assert call(a[:1], b) is None and call(a, np.zeros(5, np.int64)) is None
    assert call(a.tolist(), b) is None


def _x(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_short_calls_are_counted_on_the_fast_path_too():
    """A short binding's first call (the generic path) and its repeats (the fast path)
    each count once in stats['short']; another binding's calls do not."""
    model = Model(
        pipeline.parse_module(
            'func.func @main(%x: tensor<?x4xf32, ["s"]>) -> tensor<?x4xf32, ["s"]> {\n'
            '  %y = graph.tanh %x : (tensor<?x4xf32, ["s"]>) -> tensor<?x4xf32, ["s"]>\n'
            '  func.return %y : tensor<?x4xf32, ["s"]>\n}\n'
        )
    )
    c = dlpc.compile(model, max_dims={"s": 8}, short=[{"s": 2}])
    for n, short in [(2, 1), (2, 2), (2, 3), (3, 3), (3, 3), (2, 4), (1, 4)]:
        x = _x(n, 4, seed=n)
        np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
        assert c.function.stats["short"] == short
    assert c.function.stats["calls"] == 7 and c.function.stats["compiles"] == 1


TANH = (
    'func.func @main(%x: tensor<?x4xf32, ["s"]>) -> tensor<?x4xf32, ["s"]> {\n'
    '  %y = graph.tanh %x : (tensor<?x4xf32, ["s"]>) -> tensor<?x4xf32, ["s"]>\n'
    '  func.return %y : tensor<?x4xf32, ["s"]>\n}\n'
)


def test_a_lost_reduction_mark_compiles_again_with_reductions_guarded():
    """The first compile of the one program fails naming dlpc.guard_reductions: it is
    compiled again with the attribute on @main (two compiles), once only."""
    c = dlpc.compile(Model(pipeline.parse_module(TANH)), target="numpy")
    fn = c.function
    real, seen = fn.compile_static, []

    def compile_static(model):
        seen.append("dlpc.guard_reductions" in ref.main_func(model.module).attributes)
        if len(seen) == 1:
            raise DlpcError("error: te-to-loop: lower with dlpc.guard_reductions on @main")
        return real(model)

    fn.compile_static = compile_static
    x = _x(3, 4)
    np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    assert seen == [False, True] and fn.stats["compiles"] == 2
    assert fn.generic is not None and fn.generic.guard_reductions


@pytest.mark.parametrize("message", ["error: no", "error: still dlpc.guard_reductions"])
def test_a_one_program_that_does_not_compile_falls_back_to_a_program_per_binding(message):
    """Any other failure (or a second one naming the attribute) leaves the one program:
    `symbolic_error` says why and each binding gets its own static program."""
    c = dlpc.compile(Model(pipeline.parse_module(TANH)), target="numpy")
    fn = c.function
    real = fn.compile_static

    def compile_static(model):
        if "dlpc.max_dims" in ref.main_func(model.module).attributes:
            raise DlpcError(message)
        return real(model)

    fn.compile_static = compile_static
    for n in (3, 5, 3):
        x = _x(n, 4, seed=n)
        np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    assert fn.symbolic_error == message and fn.generic is None
    failed = 2 if "guard" in message else 1
    assert fn.stats["compiles"] == failed + 2 and len(fn.cache) == 2


def test_a_program_the_c_call_cannot_bind_takes_the_python_path():
    """The C runtime's bind refusing the program (ValueError): the fast path checks the
    shapes and runs the plan in Python instead; the calls stay exact and counted."""
    c = dlpc.compile(Model(pipeline.parse_module(TANH)), max_dims={"s": 8})
    fn = c.function
    x = _x(3, 4)
    np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    generic = fn.generic
    assert generic is not None and getattr(generic.fn, "_fast", None) is not None

    class Refusing:
        def bind(self, ins, outs):
            raise ValueError("chunked")

    class Wrapped:
        _fast = Refusing()

        def __init__(self, inner):
            self.inner = inner

        def __call__(self, *args):
            return self.inner(*args)

    generic.fn = Wrapped(generic.fn)
    fn._fast = None
    for n in (2, 2, 5):
        y = _x(n, 4, seed=n)
        np.testing.assert_allclose(c(y)[0], np.tanh(y), rtol=1e-6)
    assert fn._fast is not None and fn._fast(_x(5, 4)) is not None and fn._fast(x) is None
    assert fn.stats["calls"] == 4 and fn.stats["compiles"] == 1


def test_leading_independent_names_control_flow_and_a_static_output():
    b4 = 'tensor<?x4xf32, ["b"]>'
    text = (
        f"func.func @main(%c: tensor<i1>, %x: {b4}) -> {b4} {{\n"
        f"  %y = graph.if %c, %x : (tensor<i1>, {b4}) -> ({b4}) {{\n"
        f"  ^bb0(%a: {b4}):\n    graph.yield %a : {b4}\n  }} else {{\n"
        f"  ^bb0(%a: {b4}):\n    graph.yield %a : {b4}\n  }}\n  func.return %y : {b4}\n}}\n"
    )
    assert dynamic.leading_independent(parse_module(text), "b") == "graph.if has regions"
    text = (
        f"func.func @main(%x: {b4}, %w: tensor<4xf32>) -> ({b4}, tensor<4xf32>) {{\n"
        f"  %y = graph.relu %x : ({b4}) -> {b4}\n"
        f"  func.return %y, %w : {b4}, tensor<4xf32>\n}}\n"
    )
    assert (
        dynamic.leading_independent(parse_module(text), "b")
        == "an output of @main does not lead with it"
    )


def test_a_vector_loop_outside_any_unrolled_loop_is_stopped_at_its_limit():
    """Not the columns of a register tile: a marked vector loop under a plain loop is
    stopped at seq (one vector loop with a clamped bound), exact or not."""
    for exact in ("", ' attributes {dlpc.exact = ["j"]}'):
        out = extents(
            fn(
                f'  loop.kernel "k_0"{exact} {{\n'
                '    loop.for %i = 0 to 4 step 1 {name = "i"} {\n'
                '      loop.for %j = 0 to 16 step 1 {name = "j", vectorize, dlpc.extent = "seq"} {\n'
                "        %v = memref.load %x[%i, %j] : memref<16x16xf32>\n"
                "        memref.store %v, %out0[%i, %j] : memref<16x16xf32>\n      }\n    }\n  }"
            )
        )
        assert out == (
            'loop.kernel "k_0" {\n  loop.for %i = 0 to 4 step 1 {name = "i"} {\n'
            "    %0 = arith.constant 1 : index\n"
            "    %seq = memref.load %dlpc_dims[%0] : memref<2xi64>\n"
            "    %1 = arith.index_cast %seq : i64 to index\n"
            '    loop.for %j = 0 to 16 step 1 {name = "j", vectorize} {\n'
            "      %2 = arith.cmpi slt, %j, %1 : index\n      scf.if %2 {\n"
        )


# ------------------------------------------------- seed 49's survivors (written after it)


def test_a_quotient_by_a_many_term_divisor_whose_first_coefficient_is_not_1():
    """(6s + 4) / (3s + 2) = 2 and (6s^2 + 4s) / (3s + 2) = 2s: the factor is the term's
    coefficient over the divisor's first one (6 // 3), not a power of them."""
    s = symdims.parse("s")
    assert symdims.num_div_poly(6 * s + 4, 3 * s + 2) == 2
    assert symdims.exact_quotient(6 * s + 4, 3 * s + 2) == 2
    assert (6 * s * s + 4 * s) // (3 * s + 2) == 2 * s
    assert symdims.num_div_poly(6 * s + 5, 3 * s + 2) is None


def test_a_slice_of_shape_arithmetic_over_two_axes():
    """ONNX Slice with two starts and ends (a 2-D shape buffer): both axes cut."""
    s = symdims.parse("s")
    data = np.array([[s, 2, 3], [4, 2 * s, 6]], dtype=object)
    (out,) = onnx_symbolic.fold("Slice", {}, [data, np.array([1, 0]), np.array([2, 2]), None, None])
    assert out.tolist() == [[4, 2 * s]]
    (out,) = onnx_symbolic.fold(
        "Slice", {}, [data, np.array([[0], [1]]), np.array([[2], [3]]), None, None]
    )
    assert out.tolist() == [[2, 3], [2 * s, 6]]


def _two_sums(named: bool, dims: str = '["t"]'):
    a, b = (' {dlpc.name = "x"}', ' {dlpc.name = "y"}') if named else ("", "")
    return parse_module(
        f'func.func @main(%x: tensor<?x?xf32, ["b", "seq"]>{a}, %y: tensor<?x4xf32, {dims}>{b})'
        ' -> (tensor<?xf32, ["b"]>, tensor<4xf32>) {\n'
        '  %s = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<?x?xf32, ["b", "seq"]>)'
        ' -> tensor<?xf32, ["b"]>\n'
        f"  %t = graph.reduce_sum %y {{axes = array<i64: 0>}} : (tensor<?x4xf32, {dims}>)"
        " -> tensor<4xf32>\n"
        '  func.return %s, %t : tensor<?xf32, ["b"]>, tensor<4xf32>\n}'
    )


@pytest.mark.parametrize("named", [False, True])
def test_mask_arguments_are_named_after_the_inputs_attributes(named):
    """Two masks (seq, t; b needs none), after arguments with or without names: one
    attribute per argument, the masks' names last; with one mask too."""
    from dlpc.passes.graph.mask_padding import mask_padding

    module = _two_sums(named)
    assert mask_padding(module, ["seq", "t", "b"]) == ["seq", "t"]
    main = ref.main_func(module)
    first = ['{dlpc.name = "x"}', '{dlpc.name = "y"}'] if named else ["{}", "{}"]
    assert main.arg_attrs is not None
    assert [str(a) for a in main.arg_attrs.data] == [
        *first,
        '{dlpc.name = "mask_seq"}',
        '{dlpc.name = "mask_t"}',
    ]
    assert ref.input_names(main) == ["x", "y", "mask_seq", "mask_t"]
    module = _two_sums(named)
    assert mask_padding(module, ["seq"]) == ["seq"]
    main = ref.main_func(module)
    assert main.arg_attrs is not None
    assert [str(a) for a in main.arg_attrs.data] == [*first, '{dlpc.name = "mask_seq"}']


def test_a_call_above_the_largest_of_three_buckets_names_it():
    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    fn = DynamicFunction(
        Model(parse_module(TANH)), on_reference, buckets={"s": [8, 2, 4]}, symbolic=False
    )
    x = _x(3, 4)
    np.testing.assert_allclose(fn(x)[0], np.tanh(x), rtol=1e-6)
    with pytest.raises(DlpcError) as e:
        fn(_x(9, 4))
    assert str(e.value) == "error: input 'x' dim 0 ('s') is 9, above the largest bucket 8"


# ------------------------------------------------- seed 50's survivors (written after it)


def test_serves_compares_values_not_objects():
    """A binding of 300 (an int no cache shares) is served by a copy for 300."""
    fn = function(short=[{"S": 300}], maxima={"S": 512})
    generic = fn.generic
    assert generic is not None
    generic.short = generic.versions()
    assert generic.short == [{"S": 300}]
    assert generic.serves({"B": 1, "S": int("300"), "T": 1})
    assert not generic.serves({"B": 1, "S": int("301"), "T": 1})


def _positions_model(start: int, steps: str = "") -> str:
    arange = ", ".join(str(i) for i in range(64))
    return (
        'func.func @main(%x: tensor<?x4xf32, ["S"]>, %t: tensor<32x4xf32>) -> '
        'tensor<?x4xf32, ["S"]> {\n'
        f"  %a = graph.constant dense<[{arange}]> : tensor<64xi64>\n"
        f'  %p = graph.slice %a {{sym_ends = ["S + {start}"], starts = array<i64: {start}>, '
        f"ends = array<i64: -9223372036854775808>, axes = array<i64: 0>{steps}}} : "
        '(tensor<64xi64>) -> tensor<?xi64, ["S"]>\n'
        '  %g = graph.gather %t, %p {axis = 0 : i64} : (tensor<32x4xf32>, tensor<?xi64, ["S"]>)'
        ' -> tensor<?x4xf32, ["S"]>\n'
        '  %y = graph.add %x, %g : (tensor<?x4xf32, ["S"]>, tensor<?x4xf32, ["S"]>) -> '
        'tensor<?x4xf32, ["S"]>\n  func.return %y : tensor<?x4xf32, ["S"]>\n}\n'
    )


def test_positions_are_a_slice_from_0_only():
    """Positions 0..S-1 of an arange index a 32-row table: S is capped at 32; a slice
    from 1 is no such positions (capped only by the slice: 64)."""
    assert dynamic.slice_caps(parse_module(_positions_model(0))) == {"S": 32}
    assert dynamic.slice_caps(parse_module(_positions_model(1))) == {"S": 64}
    # (seed 51's survivor: steps written out as 1 are steps of 1)
    steps = ", steps = array<i64: 1>"
    assert dynamic.slice_caps(parse_module(_positions_model(0, steps))) == {"S": 32}


MAXMIN = """
func.func @main(%x: tensor<?x?xf32, ["b", "seq"]>) -> (tensor<?xf32, ["b"]>, tensor<?xf32, ["b"]>) {
  %mx = graph.reduce_max %x {axes = array<i64: 1>} : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?xf32, ["b"]>
  %n = graph.neg %x : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?x?xf32, ["b", "seq"]>
  %mn = graph.reduce_min %n {axes = array<i64: 1>} : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?xf32, ["b"]>
  func.return %mx, %mn : tensor<?xf32, ["b"]>, tensor<?xf32, ["b"]>
}
"""


def test_a_max_or_min_over_padding_is_biased_far_beyond_any_value():
    """Valid values near -250 (a max) and 250 (a min): the padding's zeros must be pushed
    past them (by 1e30), not by softmax's 80 (a softmax there is BIG's documented limit:
    padded scores 60 above the valid ones)."""

    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    model = Model(parse_module(MAXMIN))
    exact = DynamicFunction(model, on_reference, symbolic=False)
    padded = DynamicFunction(model, on_reference, buckets={"seq": [8]}, symbolic=False)
    x = np.random.default_rng(3).uniform(-300, -200, (2, 3)).astype(np.float32)
    for got, want in zip(padded(x), exact(x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    mx, mn = padded(x)
    np.testing.assert_allclose(mx, x.max(1), rtol=1e-6)
    np.testing.assert_allclose(mn, (-x).min(1), rtol=1e-6)


# ------------------------------------------------- seed 51's survivors (written after it)


@pytest.mark.parametrize("other", ["helper", "tail"])  # (tail: seed 53's, after main)
def test_mask_padding_masks_main_when_another_function_comes_first(other):
    from dlpc.passes.graph.mask_padding import mask_padding

    helper = (
        f"func.func @{other}(%a: tensor<4xf32>) -> tensor<4xf32> {{\n"
        "  %r = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %r : tensor<4xf32>\n}\n"
    )
    module = parse_module(
        helper + str(_two_sums(False)).split("builtin.module {", 1)[1].rsplit("}", 1)[0]
    )
    assert mask_padding(module, ["seq"]) == ["seq"]
    main = ref.main_func(module)
    assert ref.input_names(main)[-1] == "mask_seq" and len(main.body.block.args) == 3
    first = next(iter(module.ops))
    assert isinstance(first, func.FuncOp) and len(first.body.block.args) == 1


def test_a_reduce_over_a_symbolic_and_a_static_extent():
    """over [-1, 4] with dlpc.over ["seq", ""]: the symbolic extent read from its text,
    the static one kept (its text is empty); te-to-loop lowers it."""
    from dlpc.dialects import te
    from dlpc.passes.lower._symbolic import reduce_extents

    b_seq = 'tensor<?x?x4xf32, ["b", "seq"]>'
    module = parse_module(
        f'func.func @main(%x: {b_seq}) -> tensor<?xf32, ["b"]> '
        "attributes {dlpc.max_dims = {b = 2 : i64, seq = 8 : i64}} {\n"
        f"  %s = graph.reduce_sum %x {{axes = array<i64: 1, 2>}} : ({b_seq}) -> "
        'tensor<?xf32, ["b"]>\n  func.return %s : tensor<?xf32, ["b"]>\n}'
    )
    pipeline.run("graph-to-te", module, PipelineOptions())
    (op,) = [o for o in module.walk() if isinstance(o, te.ReduceOp)]
    assert reduce_extents(op) == (symdims.sym("seq"), 4)
    pipeline.run("te-to-loop", module, PipelineOptions())
    assert 'dlpc.extent = "seq"' in str(module)


# --------------------------------------------- the one program's buffers (before seed 52's
# result was read: a review of runtime/dynamic.Generic.run's branches)


def test_a_call_while_the_buffers_are_held_fills_buffers_of_its_own():
    """Another call holding the max-shaped buffers (the lock): this one copies into fresh
    zeros, gets the right answer and leaves the held buffer as it was; at the maximum an
    input is passed as it is (the buffer is not written)."""
    c = dlpc.compile(Model(parse_module(TANH)), max_dims={"s": 8})
    fn = c.function
    x = _x(3, 4)
    np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    generic = fn.generic
    assert generic is not None
    held = generic.padded[0].copy()
    y = _x(5, 4, seed=5)
    with generic.lock:
        (out,) = generic({"s": 5}, [y])
    np.testing.assert_allclose(out, np.tanh(y), rtol=1e-6)
    np.testing.assert_array_equal(generic.padded[0], held)
    (out,) = generic({"s": 5}, [y])  # (the lock free: the shared buffer takes y)
    np.testing.assert_allclose(out, np.tanh(y), rtol=1e-6)
    np.testing.assert_array_equal(generic.padded[0][:5], y)
    z = _x(8, 4, seed=8)
    generic.padded[0][...] = 0
    (out,) = generic({"s": 8}, [z])
    np.testing.assert_allclose(out, np.tanh(z), rtol=1e-6)
    assert not generic.padded[0].any() and generic.plan({"s": 8}).ins == [None]


# ------------------------------------- graph-bind-dims' slices and declarations (a review of
# bind_dims.py's branches during seed 52's run)


def _sliced(axes: str | None, shape: str, out: str) -> str:
    ax = f", axes = array<i64: {axes}>" if axes is not None else ""
    return (
        "func.func private @ext(%a: tensor<4xf32>) -> tensor<4xf32>\n"
        f'func.func @main(%x: tensor<?x4xf32, ["seq"]>, %p: tensor<{shape}xf32>) -> '
        f'tensor<{out}xf32, ["seq"]> {{\n'
        f'  %s = graph.slice %p {{sym_ends = ["seq"], starts = array<i64: 0>, '
        f"ends = array<i64: -9223372036854775808>{ax}}} : (tensor<{shape}xf32>) -> "
        f'tensor<{out}xf32, ["seq"]>\n  func.return %s : tensor<{out}xf32, ["seq"]>\n}}\n'
    )


@pytest.mark.parametrize(
    "axes, shape, out, axis",
    [("1", "1x48", "1x?", "1"), (None, "48", "?", "0"), ("-1", "1x48", "1x?", "-1")],
)
def test_a_bound_slice_end_at_its_input_passes_and_past_it_is_refused(axes, shape, out, axis):
    """A declaration (no body) is skipped; the end may equal the input's size along the
    axis (given, negative, or 0..n when none is given), not exceed it."""
    from dlpc.passes.graph.bind_dims import bind_module

    module = parse_module(_sliced(axes, shape, out))
    bind_module(module, {"seq": 48})
    assert "ends = array<i64: 48>" in str(module) and "sym_ends" not in str(module)
    assert f"-> tensor<{out.replace('?', '48')}xf32>" in str(module)
    with pytest.raises(VerifyException) as e:
        bind_module(parse_module(_sliced(axes, shape, out)), {"seq": 49})
    assert str(e.value) == (
        f"graph-bind-dims: graph.slice end 49 is past its input's 48 along axis {axis} "
        "(a bound dim larger than the model allows)"
    )


# ------------------------------------------------- seed 52's survivors (written after it)


def test_a_model_built_per_input_value_with_static_shapes_is_not_dynamic():
    """No graph, a specialiser whose inputs are static (an input decides a shape, as an
    ONNX Reshape's): not dynamic; with a symbolic input it is."""
    from dlpc.model import InputSpec, Specialiser

    def build(values):
        raise AssertionError("not called")

    static = (InputSpec("x", (2, 3), np.dtype(np.float32)),)
    model = Model(None, {}, "m", None, Specialiser(static, ["x"], build))  # pyright: ignore[reportArgumentType]
    assert model.ir is None and dynamic.is_dynamic(model) is False
    seq = (InputSpec("x", (symdims.sym("s"), 3), np.dtype(np.float32)),)  # pyright: ignore[reportArgumentType]
    assert dynamic.is_dynamic(Model(None, {}, "m", None, Specialiser(seq, [], build))) is True  # pyright: ignore[reportArgumentType]


def test_a_call_past_the_largest_of_many_buckets_is_one_line():
    """300 buckets (an index no int cache shares): a call above them is the one-line
    error, not an IndexError."""

    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    buckets = {"s": list(range(1, 301))}
    fn = DynamicFunction(Model(parse_module(TANH)), on_reference, buckets=buckets, symbolic=False)
    with pytest.raises(DlpcError) as e:
        fn(_x(301, 4))
    assert str(e.value) == "error: input 'x' dim 0 ('s') is 301, above the largest bucket 300"


def test_squeeze_of_shape_arithmetic_at_a_negative_and_a_last_axis():
    s = symdims.sym("s")
    col = np.array([[s], [3]], dtype=object)
    for axes in ([-1], [1]):
        (out,) = onnx_symbolic.fold("Squeeze", {}, [col, np.array(axes)])
        assert out.tolist() == [s, 3]


# ------------------------------------------------- seed 53's survivors (written after it)


def test_floor_division_by_a_negative_int_and_by_zero():
    s = symdims.sym("s")
    assert (2 * s) // -2 == -s and (4 * s + 2) // -2 == -2 * s - 1
    with pytest.raises(ZeroDivisionError, match="^symbolic dim divided by 0$"):
        s // 0


def test_a_slice_end_of_int64_max_is_the_size():
    """ONNX's "to the end" is INT64_MAX (2^63 - 1): at or past 2^62 an end is the size."""
    s = symdims.sym("s")
    assert symdims.slice_indices(0, 2**63 - 1, 1, s) == (0, s, 1)
    assert symdims.slice_indices(0, 2**63 - 1, 1, 7) == (0, 7, 1)


def test_a_tile_of_one_runs_one_row_at_a_time():
    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    b4 = 'tensor<?x4xf32, ["b"]>'
    model = Model(
        parse_module(
            f"func.func @main(%x: {b4}) -> {b4} {{\n  %y = graph.tanh %x : ({b4}) -> {b4}\n"
            f"  func.return %y : {b4}\n}}"
        )
    )
    fn = DynamicFunction(model, on_reference, tiles={"b": 1}, symbolic=False)
    x = _x(3, 4)
    np.testing.assert_allclose(fn(x)[0], np.tanh(x), rtol=1e-6)
    assert list(fn.cache) == [(("b", 1),)]


def test_a_rank_4_matmul_contracting_a_padded_dim_through_transpose_a_is_masked():
    """x^T x over seq for x of (b, 2, seq, 3): seq is axis 2 (rank - 2), the padding's
    rows multiplied by 0; the bucketed call equals the unpadded one."""

    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    t = 'tensor<?x2x?x3xf32, ["b", "seq"]>'
    o = 'tensor<?x2x3x3xf32, ["b"]>'
    text = (
        f"func.func @main(%x: {t}) -> {o} {{\n  %e = graph.exp %x : ({t}) -> {t}\n"
        f"  %m = graph.matmul %e, %e {{transpose_a = true}} : ({t}, {t}) -> {o}\n"
        f"  func.return %m : {o}\n}}"
    )
    exact = DynamicFunction(Model(parse_module(text)), on_reference, symbolic=False)
    padded = DynamicFunction(
        Model(parse_module(text)), on_reference, buckets={"seq": [8]}, symbolic=False
    )
    assert padded.mask_inputs == ["seq"]
    x = _x(2, 2, 3, 3)
    np.testing.assert_allclose(padded(x)[0], exact(x)[0], rtol=1e-5)


def test_unsqueeze_of_shape_arithmetic_at_a_negative_axis():
    """One axis added to a 1-D buffer: rank 2, so axis -1 is axis 1."""
    s = symdims.sym("s")
    (out,) = onnx_symbolic.fold("Unsqueeze", {}, [np.array([s, 3], dtype=object), np.array([-1])])
    assert out.shape == (2, 1) and out[:, 0].tolist() == [s, 3]
    (out,) = onnx_symbolic.fold("Unsqueeze", {}, [np.array([[s, 3]], dtype=object), np.array([-1])])
    assert out.shape == (1, 2, 1)


# ------------------------------------------------- seed 54's survivors (written after it)


def test_an_extent_with_a_negative_coefficient_keeps_its_sign():
    out = extents(
        fn(
            '  loop.kernel "k_0" {\n'
            '    loop.for %i = 0 to 16 step 1 {name = "i", dlpc.extent = "2*seq + -1*b"} {\n'
            "      %v = memref.load %x[%i, %i] : memref<16x16xf32>\n"
            "      memref.store %v, %out0[%i, %i] : memref<16x16xf32>\n    }\n  }"
        )
    )
    assert "%6 = arith.constant -1 : index\n  %7 = arith.muli %5, %6 : index\n" in out
    assert "%8 = arith.addi %3, %7 : index\n" in out


def test_a_tiled_call_passes_a_scalar_input_whole():
    def on_reference(static):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    b4 = 'tensor<?x4xf32, ["b"]>'
    model = Model(
        parse_module(
            f"func.func @main(%x: {b4}, %c: tensor<f32>) -> {b4} {{\n"
            f"  %y = graph.mul %x, %c : ({b4}, tensor<f32>) -> {b4}\n  func.return %y : {b4}\n}}"
        )
    )
    fn_ = DynamicFunction(model, on_reference, tiles={"b": 2}, symbolic=False)
    x, c = _x(5, 4), np.array(3.0, np.float32)
    np.testing.assert_allclose(fn_(x, c)[0], x * 3.0, rtol=1e-6)
