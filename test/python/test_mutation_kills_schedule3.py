"""Tests written against surviving mutants of the schedule primitives and the default
schedules' rules (issue 35, bench/mutation.py --area schedule, third round: an
exploration sample drawn before the scoring one). Each pins a decision on a small
hand-written case with the reason it is right: an index's affine form, the fused
Winograd schedule's limits (the gemm micro-kernel's register tile), the init/epilogue
fold's coverage rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from xdsl.dialects import arith

import dlpc
from dlpc.dialects.loop import kernels
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule import winograd
from dlpc.passes.schedule._common import Affine, affine, emit_affine
from dlpc.passes.schedule.nest import Nest, analyse
from dlpc.passes.schedule.tensorize import MAX_MR, MAX_NR, MAX_TILE

# ------------------------------------------------------------- affine delinearization

DIV = """
func.func @main(%x: memref<64xf32>, %out: memref<4x2xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i"} {
      loop.for %j = 0 to J step 1 {name = "j"} {
        %c = arith.constant C : index
        %k = arith.constant K : index
        %m = arith.muli %i, %c : index
        %s = arith.addi %m, %j : index
        %o = arith.constant OFF : index
        %x0 = arith.addi %s, %o : index
        %q = arith.OP %x0, %k : index
        %v = memref.load %x[%q] : memref<64xf32>
        memref.store %v, %out[%i, %j] : memref<4x2xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "c, j, off, k, op, expect",
    [
        # (8 i + j + 17) / 8 = i + 2 and % 8 = j + 1: j + 1 stays below 8
        (8, 2, 17, 8, "divsi", (2, {"i": 1})),
        (8, 2, 17, 8, "remsi", (1, {"j": 1})),
        # (16 i + j) / 16 = i, % 16 = j (a reshape's mixed radix)
        (16, 2, 0, 16, "divsi", (0, {"i": 1})),
        (16, 2, 0, 16, "remsi", (0, {"j": 1})),
        # (8 i + j + 7) % 8: j + 7 reaches 8 (spills into the quotient): not affine
        (8, 2, 7, 8, "divsi", None),
        # a negative value at i = 0 (truncating division): not affine
        (8, 2, -1, 8, "divsi", None),
        # (8 i + j + 6) % 8 = j + 6 reaches 7 = K - 1 at most: still exact
        (8, 2, 6, 8, "divsi", (0, {"i": 1})),
        (8, 2, 6, 8, "remsi", (6, {"j": 1})),
        # a division by 0 (or less) is no delinearization
        (8, 2, 0, 0, "divsi", None),
    ],
)
def test_delinearized_division_is_exact_or_refused(c, j, off, k, op, expect):
    """_common.py:314 (`x.const // K` -> `& K`): a quotient's constant is the constant's
    quotient: (8 i + j + 17) / 8 is i + 2 for j < 2 (17 & 8 would be 0)."""
    text = (
        (DIV.replace("C :", f"{c} :").replace("J step", f"{j} step").replace("OFF", str(off)))
        .replace("K :", f"{k} :")
        .replace("arith.OP", f"arith.{op}")
    )
    module = parse_module(text)
    (div,) = [o for o in module.walk() if isinstance(o, arith.DivSIOp | arith.RemSIOp)]
    got = affine(div.results[0], True)
    if expect is None:
        assert got is None
        return
    names = {lp.induction_var: lp.loop_name for k in kernels(module) for lp in k.loops()}
    assert got is not None and isinstance(got, Affine)
    assert (got.const, {names[v]: a for v, a in got.terms.items()}) == expect
    assert affine(div.results[0]) is None  # (only with delinearize)


# ------------------------------------------------------------------- fused Winograd


def _output_transform(tmp_path, h: int, w: int):
    (tmp_path / "w.dlpc").write_text(
        f"model wconv(x: f32[B, 3, {h}, {w}]) {{\n"
        "  param k: f32[4, 3, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k, padding=1)\n}\n"
    )
    model = dlpc.load(tmp_path / "w.dlpc", batch=1)
    opts = pipeline.PipelineOptions(opt_level=3, extra={"graph-winograd": {"where": "all"}})
    weights = dict(dlpc.api.check_weights(model))
    module = pipeline.lower(model.module.clone(), "loop", opts, weights=weights)
    (out,) = [k for k in kernels(module) if k.sym.startswith("winograd_output_transform")]
    (inp,) = [k for k in kernels(module) if k.sym.startswith("winograd_input_transform")]
    return module, out, inp


@pytest.mark.parametrize("h, w, fused", [(12, 12, True), (12, 11, False), (11, 12, False)])
def test_fused_winograd_needs_whole_tiles_both_ways(tmp_path, h, w, fused):
    """winograd.py:209 (`trips[w] % 2` -> `% 1`): the fused schedule walks (tile,
    in-tile) loops of two rows and two columns, so an odd output width (11) or height
    keeps the three kernels: the input transform is fused into no output transform."""
    module, out, inp = _output_transform(tmp_path, h, w)
    nest = analyse(out)
    assert nest is not None and winograd.fusable(out, nest) is fused
    assert (winograd.fused_into(module, inp.sym) == out.sym) is fused


def _nest(co: int, w: int, h: int = 8) -> Nest:
    return Nest(["n", "o", "h", "w"], [], {"n": 1, "o": co, "h": h, "w": w})


@pytest.mark.parametrize(
    "co, w, fused",
    [
        (24, 8, True),  # MAX_MR channels: one 24-row register tile
        (25, 8, False),  # above MAX_MR, no multiple of CO_BLOCK (16)
        (32, 8, True),  # a multiple of 16: blocks of 16 rows
        (24, 42, True),  # 24 x 21 tiles = 504 <= MAX_TILE
        (24, 44, False),  # 24 x 22 = 528 > MAX_TILE
        (16, 64, True),  # 16 x 32 = 512: at MAX_TILE
        (2, 256, True),  # 128 tiles (MAX_NR)
        (2, 258, False),  # 129 tiles > MAX_NR
    ],
)
def test_fused_winograd_register_tile_is_the_gemm_kernels(co, w, fused):
    """The fused matmul is `tensorize gemm` with mr = the channels (or 16 of them) and
    nr = the tiles of a row (w / 2): fusable exactly when that tile is within the gemm
    micro-kernel's limits (mr <= MAX_MR, nr <= MAX_NR, mr * nr <= MAX_TILE)."""
    nest = _nest(co, w)
    assert winograd.fusable(None, nest) is fused  # type: ignore[arg-type]
    mr, nr = (co if co <= MAX_MR else winograd.CO_BLOCK), w // 2
    gemm_ok = mr <= MAX_MR and nr <= MAX_NR and mr * nr <= MAX_TILE
    assert fused == (gemm_ok and (co <= MAX_MR or co % winograd.CO_BLOCK == 0))


@pytest.mark.parametrize(
    "co, w, h, rows, two",
    [
        (32, 16, 16, 2, True),  # resnet's 32 -> 32 on 16x16: 8 tiles a row, 8 tile rows
        (32, 16, 10, 2, False),  # 5 tile rows: no pairs
        (32, 16, 15, 1, False),  # an odd height keeps its row loop (rows = [h])
        (32, 32, 16, 2, False),  # 16 tiles a row: whole vectors already
        (32, 12, 16, 2, False),  # 6 tiles a row: two rows are no whole vector either
        (24, 16, 16, 2, True),  # 24 x 16 = 384 <= MAX_TILE
    ],
)
def test_fused_winograd_blocks_two_rows_of_half_vectors(co, w, h, rows, two):
    """winograd.py `_two_rows`: the fused block is two rows of tiles exactly when a row is
    half a vector (8 tiles), the tile rows pair up and the register tile stays in bounds."""
    names = ["ht", "hr"][:rows]
    assert winograd._two_rows(_nest(co, w, h), names) is two


STEPPED = """
func.func @main(%x: memref<64xf32>, %out: memref<2x16xf32>) {
  loop.kernel "k" {
    loop.for %b = 0 to 2 step 1 {name = "b"} {
      loop.for %o = 0 to 16 step STEP {name = "o"} {
        loop.for %i = 0 to STEP step 1 {name = "i"} {
          %t = arith.addi %o, %i : index
          %c16 = arith.constant 16 : index
          %m = arith.muli %b, %c16 : index
          %x0 = arith.addi %m, %t : index
          %k = arith.constant 8 : index
          %q = arith.OP %x0, %k : index
          %v = memref.load %x[%q] : memref<64xf32>
          memref.store %v, %out[%b, %t] : memref<2x16xf32>
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "step, op, expect",
    [
        # (16 b + o + i) / 8 with o in {0, 8}: 2 b + o / 8 (o goes whole to the quotient)
        (8, "divsi", (0, {"b": 2, "o": Fraction(1, 8)})),
        (8, "remsi", (0, {"i": 1})),
        # o in {0, 4, 8, 12}: o is no multiple of 8, i + o reaches 15: not affine
        (4, "divsi", None),
        (4, "remsi", None),
    ],
)
def test_delinearized_takes_a_split_outer_loop_whole(step, op, expect):
    """_common.py `_delinearized`: a term whose every loop value is a multiple of K (a split
    outer loop stepping by K) goes whole into the quotient as a Fraction coefficient, which
    `emit_affine` prints as an exact division (the fused Winograd's two-row blocks)."""
    text = STEPPED.replace("STEP", str(step)).replace("arith.OP", f"arith.{op}")
    module = parse_module(text)
    (div,) = [o for o in module.walk() if isinstance(o, arith.DivSIOp | arith.RemSIOp)]
    got = affine(div.results[0], True)
    if expect is None:
        assert got is None
        return
    names = {lp.induction_var: lp.loop_name for k in kernels(module) for lp in k.loops()}
    assert got is not None
    assert (got.const, {names[v]: a for v, a in got.terms.items()}) == expect
    (k,) = kernels(module)
    (inner,) = [lp for lp in k.loops() if lp.loop_name == "i"]
    emit_affine(got, inner.block, before=div)
    divs = [o for o in inner.block.ops if isinstance(o, arith.DivSIOp) and o is not div]
    if op == "divsi":  # o / 8 emitted as an exact division of o by 8
        (d,) = divs
        assert d.lhs.name_hint == "o" and affine(d.rhs) == Affine(8, {})
    else:
        assert not divs


# ------------------------------------------------------------- init/epilogue fold

PEEL = """
func.func @tile(%x: memref<8x4xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 8 step 4 {name = "t", parallel} {
      %acc = memref.alloca() : memref<1x4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %c0 = arith.constant 0 : index
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%c0, %a] : memref<1x4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %b = 0 to 1 step 1 {name = "b"} {
          loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
            %i = arith.addi %t, %a : index
            %xv = memref.load %x[%i, %r] : memref<8x4xf32>
            %av = memref.load %acc[%b, %a] : memref<1x4xf32>
            %s = arith.addf %av, %xv : f32
            memref.store %s, %acc[%b, %a] : memref<1x4xf32>
          }
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %c0 = arith.constant 0 : index
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%c0, %a] : memref<1x4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
  }
  func.return
}"""


def test_fold_peels_a_tile_whose_unit_dim_has_its_own_loop():
    """fold_init_epilogue.py:360 (`and dim == 1` -> `or dim == 1`): a tile dim of one
    element indexed by its own loop (0 to 1) is covered by that loop like any other, so
    the tile still writes each element once per reduction step and the zero fill is
    peeled into the first step (`r0_first`, the reduction from 1)."""
    module = parse_module(PEEL)
    pipeline.run("loop-fold-init-epilogue", module, pipeline.PipelineOptions())
    names = [lp.loop_name for k in kernels(module) for lp in k.loops()]
    assert "r0_first" in names and "b_first" in names and "acc_in0" not in names
    (red,) = [lp for k in kernels(module) for lp in k.loops() if lp.loop_name == "r0"]
    assert red.lower == 1


# ---------------------------------------------------------------- gemm's k blocks


@pytest.mark.parametrize("m, kc", [(64, 1024), (80, 512)])
def test_a_weight_gemm_reads_a_in_place_only_while_it_fits_a_quarter_of_l2(m, kc):
    """default.py:588 (`rows * k * 4` -> `rows * k % 4`): A of 64 x 1024 floats is
    256 KiB (A_IN_PLACE_BYTES): one k block of all 1024, read in place; 80 rows (320 KiB)
    would not stay in L2 for the whole call: the default blocks of 512 and a packed A."""
    from test_mutation_kills_schedule2 import _linear

    from dlpc.passes.schedule import default

    text = _linear(1, m, 32, 1024, b_transposed=False).replace(
        "dlpc.num_inputs = 2 : i64, dlpc.params = []",
        'dlpc.num_inputs = 1 : i64, dlpc.params = ["w"]',
    )
    (kernel,) = kernels(parse_module(text))
    nest = analyse(kernel)
    assert nest is not None
    (plan,) = default.gemm_plans(kernel, nest)
    assert isinstance(plan, default.GemmParams)
    assert m * 1024 * 4 <= default.A_IN_PLACE_BYTES or kc < 1024
    assert (plan.kc, plan.pack_a) == (kc, kc < 1024)


# ------------------------------------------------------------ deinterleaved planes


def test_a_whole_fill_covers_every_column_of_each_phase_plane():
    """deinterleave.py:206 (`-(-extent // s)` -> `+(-extent // s)`): phase planes above
    EDGE_FILL_BYTES are filled whole before the copies, a nest over (phase, column) with
    ceil(extent / s) columns a phase: the box 2i + r - 1 (8193 outputs, r < 2) spans 16386
    columns, 2 planes of 8193, so the fill's column loop runs 0 to 8193, vectorized."""
    from test_mutation_kills_schedule2 import _padded_loops

    loops = _padded_loops(16384, 8193, 2, 1)
    phase, column = loops["x_q_fill0"], loops["x_q_fill1"]
    assert (phase.lower, phase.upper) == (0, 2)
    assert (column.lower, column.upper) == (0, 8193)
    assert column.vectorize is not None


# ------------------------------------------------------------ gemm tiles and blocks


@pytest.mark.parametrize(
    "m, n, tile",
    [
        ((64), 64, (8, 32)),  # GotoBLAS's 8 x 32: 16 accumulators, each B vector 8 FMAs
        (4, 128, (4, 64)),  # one row block of 4 rows: 16 accumulators, not 8
        (6, 64, (6, 64)),  # ... of 6: 24
        (4, 32, (4, 32)),  # 32 columns: no 64-wide tile
        (12, 48, (6, 16)),  # the first of 8, 6, 4 rows and of 32, 16 columns dividing
        (17, 16, (17, 16)),  # M = 17: one 17 x 16 tile, not 1 x 16 strips
        (8, 10, (8, 10)),  # N = 10: one masked vector a row, not 2-wide ones
        (37, 64, (1, 64)),  # M prime above 24 (MAX_MR): no row tile (gemm8 then)
    ],
)
def test_gemm_register_tile(m, n, tile):
    """default._gemm_tile: the tile divides the shape and holds at most ACC_VECTORS
    accumulator vectors; the cases of its docstring."""
    from dlpc.passes.schedule import default
    from dlpc.passes.schedule.tensorize import LANES

    mr, nr = default._gemm_tile(m, n)
    assert (mr, nr) == tile
    assert m % mr == 0 and n % nr == 0 and mr * -(-nr // LANES) <= default.ACC_VECTORS


@pytest.mark.parametrize(
    "m, n, tile",
    [(8, 64, (8, 2)), (3, 64, (3, 8)), (1, 1000, (1, 8)), (5, 12, (5, 4)), (16, 16, (8, 2))],
)
def test_dot_tile(m, n, tile):
    """default.dot_tile: all rows up to DOT_ROWS (else its largest divisor), then the
    widest column block dividing n with mr * nr <= MAX_DOT and nr <= DOT_COLS."""
    from dlpc.passes.schedule import default
    from dlpc.passes.schedule.tensorize import MAX_DOT

    mr, nr = default.dot_tile(m, n)
    assert (mr, nr) == tile
    assert mr <= default.DOT_ROWS and nr <= default.DOT_COLS and mr * nr <= MAX_DOT
    wider = [c for c in range(nr + 1, n + 1) if n % c == 0]
    assert all(c > default.DOT_COLS or mr * c > MAX_DOT for c in wider)


@pytest.mark.parametrize(
    "m, n, k, mc, kc",
    [
        (256, 64, 256, 256, 256),  # A block 256 x 256 floats = 256 KiB (A_BLOCK_BYTES)
        (256, 64, 512, 128, 512),  # 256 x 512 would be 512 KiB: 128 rows
        (256, 256, 1024, 128, 512),  # k in blocks of 512
        (64, 64, 33344, 64, 64),  # 64 x 521: its largest divisor <= 512 is 64: blocks of 64
        (64, 64, 1031, 64, 1031),  # k prime: one block, not 1031 blocks of 1
        (2, 32, 2048, 2, 2048),  # one row block (m <= mr) up to 2048: one k block
        (2, 32, 4096, 2, 512),  # beyond: blocks of 512
    ],
)
def test_gemm_blocks(m, n, k, mc, kc):
    """default.gemm_default_params' blocks (docs/design/schedules.md#gemm-blocks)."""
    from dlpc.passes.schedule import default

    p = default.gemm_default_params(m, n, k)
    assert (p.mc, p.kc) == (mc, kc)
    assert k % p.kc == 0 and m % p.mc == 0
    assert p.mc <= 128 or p.mc * p.kc * 4 <= default.A_BLOCK_BYTES


# ------------------------------------------------------------- direct conv template

# (batch, channels in, out, height, width, kernel, stride, padding): the script's lines
# that carry each decision of conv_tile_script (default.py's first choice for an NCHW
# conv), every other line as in the case before
CONV_CASES = {
    # 147 456 MACs < CONV_PARALLEL_MACS: serial; 8 channels x 1 vector within the 24
    # accumulators: no channel split; padded: a padded copy staged per image
    "small": (
        (1, 8, 8, 16, 16, 3, 1, 1),
        [
            "reorder K: i0, i2, r0, r1, r2, i1, i3",
            "cache_read K/i0 @0 -> K_xp",
            "cache_write K/i2 @2 -> K_acc",
            "unroll K/i1",
            "vectorize K/i3",
            "serial K",
        ],
    ),
    # a 28-wide row is 3 pieces (16 + 8 + 4): 7 rows a tile (the largest divisor of 28
    # within CONV_RAGGED_ROWS and 24 // 3), 21 vectors, so one channel a tile; one image,
    # 4 row blocks over 2 threads: blocks of 2, each thread staging its own rows
    "ragged": (
        (1, 8, 8, 28, 28, 3, 1, 1),
        [
            "split K/i1 by 1 -> i1o, i1i",
            "split K/i2 by 7 -> i2o, i2i",
            "split K/i2o by 2 -> i2t, i2r",
            "reorder K: i0, i2t, i2r, i1o, r0, r1, r2, i2i, i1i, i3",
            "cache_read K/i2t @0 -> K_xp",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i2i",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
            "parallel K/i2t",
        ],
    ),
    # a 128-wide row (8 vectors > 4): tiles of 64 (4 vectors), 24 // 4 = 6: 4 channels
    "wide": (
        (1, 16, 16, 32, 128, 3, 1, 1),
        [
            "split K/i1 by 4 -> i1o, i1i",
            "split K/i3 by 64 -> i3o, i3i",
            "split K/i2 by 16 -> i2t, i2r",
            "reorder K: i0, i2t, i2r, i1o, i3o, r0, r1, r2, i1i, i3i",
            "cache_read K/i2t @0 -> K_xp",
            "cache_write K/i3o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3i",
            "serial K",
            "parallel K/i2t",
        ],
    ),
    # 2 images over 2 threads, each image's padded copy 64 KiB >= CONV_STAGE_SPLIT_BYTES:
    # the images parallel, each staged by its thread
    "per-image": (
        (2, 16, 16, 32, 32, 3, 1, 1),
        [
            "split K/i1 by 8 -> i1o, i1i",
            "reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3",
            "cache_read K/i0 @0 -> K_xp",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
            "parallel K/i0",
        ],
    ),
    # 3 images do not split over 2 threads: all staged at once, (image, row) one
    # parallel loop
    "batched": (
        (3, 16, 16, 32, 32, 3, 1, 1),
        [
            "split K/i1 by 8 -> i1o, i1i",
            "split K/i0 by 3 -> i0b, i0n",
            "reorder K: i0b, i0n, i2, i1o, r0, r1, r2, i1i, i3",
            "cache_read K/i0b @0 -> K_xp",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
            "fuse K/i0n, i2 -> i0i2",
            "parallel K/i0i2",
        ],
    ),
    # 4 small images (3 KiB copies) but 221 184 MACs: batched, serial
    "batched-serial": (
        (4, 3, 8, 16, 16, 3, 1, 1),
        [
            "split K/i0 by 4 -> i0b, i0n",
            "reorder K: i0b, i0n, i2, r0, r1, r2, i1, i3",
            "cache_read K/i0b @0 -> K_xp",
            "cache_write K/i2 @2 -> K_acc",
            "unroll K/i1",
            "vectorize K/i3",
            "serial K",
            "fuse K/i0n, i2 -> i0i2",
        ],
    ),
    # 3x3 stride 2: stride-1 phase planes, 16 rows in blocks of 8 per thread
    "strided": (
        (1, 16, 16, 32, 32, 3, 2, 1),
        [
            "split K/i2 by 8 -> i2t, i2r",
            "reorder K: i0, i2t, i2r, r0, r1, r2, i1, i3",
            "cache_read K/i2t @0 -> K_xq deinterleave",
            "cache_write K/i2r @2 -> K_acc",
            "unroll K/i1",
            "vectorize K/i3",
            "serial K",
            "parallel K/i2t",
        ],
    ),
    # 1x1 stride 2: im2col rows (the strided subsample)
    "strided-1x1": (
        (1, 8, 8, 16, 16, 1, 2, 0),
        [
            "reorder K: i0, i2, r0, r1, r2, i1, i3",
            "cache_read K/i0 @0 -> K_xp pack",
            "cache_write K/i2 @2 -> K_acc",
            "unroll K/i1",
            "vectorize K/i3",
            "serial K",
        ],
    ),
    # 1x1 stride 1 unpadded, one channel block of two-vector rows: the input read where
    # it is
    "direct": (
        (1, 8, 8, 16, 32, 1, 1, 0),
        [
            "reorder K: i0, i2, r0, r1, r2, i1, i3",
            "cache_write K/i2 @2 -> K_acc",
            "unroll K/i1",
            "vectorize K/i3",
            "serial K",
        ],
    ),
    # ... 8 blocks of 8 channels (CONV_ROW_STAGE_BLOCKS or more): each output row's input
    # rows copied together first, at the row loop
    "direct-row-stage": (
        (1, 8, 64, 16, 32, 1, 1, 0),
        [
            "split K/i1 by 8 -> i1o, i1i",
            "reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3",
            "cache_read K/i2 @0 -> K_xr",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
            "parallel K/i2",
        ],
    ),
    # ... one-vector rows whose 8-row tile reads 4 KB (<= CONV_ROWS_PANEL_BYTES): 8 rows x
    # 2 channels a tile (24 // 8 = 3, the largest divisor of 8 within), 4 blocks: staged
    "direct-short-rows": (
        (1, 8, 8, 16, 16, 1, 1, 0),
        [
            "split K/i1 by 2 -> i1o, i1i",
            "split K/i2 by 8 -> i2o, i2i",
            "reorder K: i0, i2o, i1o, r0, r1, r2, i2i, i1i, i3",
            "cache_read K/i2o @0 -> K_xr",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i2i",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
        ],
    ),
    # a 56-wide row is 4 vectors (not above 4): not tiled (56 has no multiple of 16 to
    # tile by), a ragged row of 4 pieces: 4 rows a tile (of 8, within 24 // 4)
    "four-vectors": (
        (1, 4, 4, 8, 56, 3, 1, 1),
        [
            "split K/i1 by 1 -> i1o, i1i",
            "split K/i2 by 4 -> i2o, i2i",
            "reorder K: i0, i2o, i1o, r0, r1, r2, i2i, i1i, i3",
            "cache_read K/i0 @0 -> K_xp",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i2i",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
        ],
    ),
    # each image's copy exactly CONV_STAGE_SPLIT_BYTES (8 x 32 x 32 floats): per image
    "per-image-32k": (
        (2, 8, 16, 32, 32, 3, 1, 1),
        [
            "split K/i1 by 8 -> i1o, i1i",
            "reorder K: i0, i2, i1o, r0, r1, r2, i1i, i3",
            "cache_read K/i0 @0 -> K_xp",
            "cache_write K/i1o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3",
            "serial K",
            "parallel K/i0",
        ],
    ),
    # read directly (nothing staged per thread), 2 rows for 2 threads: the rows parallel
    "direct-rows": (
        (1, 64, 64, 2, 1024, 1, 1, 0),
        [
            "split K/i1 by 4 -> i1o, i1i",
            "split K/i3 by 64 -> i3o, i3i",
            "reorder K: i0, i2, i1o, i3o, r0, r1, r2, i1i, i3i",
            "cache_write K/i3o @2 -> K_acc",
            "unroll K/i1i",
            "vectorize K/i3i",
            "serial K",
            "parallel K/i2",
        ],
    ),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_direct_conv_template_decisions(tmp_path, case):
    """conv.py conv_tile_script on NCHW convs (2 threads): the row tile, the channel
    block, ragged rows, the staging (padded copy, phase planes, im2col, none) and where
    it happens, and which loop runs parallel, each case's reason in CONV_CASES."""
    from dlpc.passes.schedule.conv import conv_tile_script

    (n, c, o, h, w, k, s, p), lines = CONV_CASES[case]
    (tmp_path / "c.dlpc").write_text(
        f"model c(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{o}, {c}, {k}, {k}] = kaiming(seed=5)\n"
        f"  return conv2d(x, k, strides={s}, padding={p})\n}}\n"
    )
    model = dlpc.load(tmp_path / "c.dlpc", batch=n)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (nest := analyse(k)) is not None and nest.reduce]
    nest = analyse(kernel)
    assert nest is not None
    script = conv_tile_script(kernel, nest, threads=2)
    assert script.splitlines() == [f"decompose {kernel.sym}"] + [
        ln.replace("K", kernel.sym) for ln in lines
    ]


# ------------------------------------------------------------------ gemm template

# (batch, m, n, k, b transposed, b a weight): the first default script of the linear
# out[b, i, j] = sum_r a[b, i, r] * w[r, j], and why
GEMM_CASES = {
    # a weight B: packed (loop-prepack-weights hoists the pack); one k block (A of 16 KiB
    # in place, no A pack); the 8 x 32 tile; the parallel loop the first of >= 4 trips
    # (none: the largest, the 2 column panels i2r), B's pack loop inside it parallel too
    "weight": (
        (1, 64, 64, 64, False, True),
        "split lin/i2 by 64 -> i2c, i21\nsplit lin/i1 by 64 -> i1c, i11\n"
        "split lin/i21 by 32 -> i2r, i2j\nsplit lin/i11 by 8 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, i1i, i2j, r0\ntensorize lin/i1i gemm\n"
        "cache_read lin/i2c @1 -> lin_Bp pack\nserial lin\nparallel lin/i2r\n"
        "parallel lin/lin_Bp_i2r",
    ),
    # 2 rows of whole vectors: B's row carried in registers (gemm_pipe, the reduction
    # outside the tile); an activation B of one block is read in place
    "pipe": (
        (1, 2, 64, 64, False, False),
        "split lin/i2 by 64 -> i2c, i21\nsplit lin/i1 by 2 -> i1c, i11\n"
        "split lin/i21 by 64 -> i2r, i2j\nsplit lin/i11 by 2 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, r0, i1i, i2j\ntensorize lin/r0 gemm_pipe\n"
        "serial lin\nparallel lin/i0",
    ),
    # B shared by a batch of 4: the batch inside B's panel loop; parallel over the batch
    "batch": (
        (4, 16, 64, 32, False, False),
        "split lin/i2 by 64 -> i2c, i21\nsplit lin/i1 by 16 -> i1c, i11\n"
        "split lin/i21 by 32 -> i2r, i2j\nsplit lin/i11 by 8 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, i1i, i2j, r0\ntensorize lin/i1i gemm\n"
        "serial lin\nparallel lin/i0",
    ),
    # M = 37 and N = 131 primes: tiles of 8 x 16 plus remainder tiles both ways
    "tails": (
        (1, 37, 131, 64, False, True),
        "split lin/r0 by 64 -> r0c, r01\nreorder lin: r0c, i0, i1, r01, i2\n"
        "cache_read lin/r0c @1 -> lin_Bp pack\ntensorize lin/i1 gemm8x16\nserial lin\n"
        "parallel lin/i2r",
    ),
    # 256 x 512 x 1024 with a weight: k in blocks of 512 (A of 1 MiB not in place, A
    # packed too), A blocks of 128 rows; both packs run inside the parallel panel loop
    "blocked": (
        (1, 256, 512, 1024, False, True),
        "split lin/i2 by 512 -> i2c, i21\nsplit lin/r0 by 512 -> r0c, r01\n"
        "split lin/i1 by 128 -> i1c, i11\nsplit lin/i21 by 32 -> i2r, i2j\n"
        "split lin/i11 by 8 -> i1r, i1i\n"
        "reorder lin: i2c, r0c, i0, i1c, i2r, i1r, i1i, i2j, r01\ntensorize lin/i1i gemm\n"
        "cache_read lin/r0c @1 -> lin_Bp pack\ncache_read lin/i1c @0 -> lin_Ap pack\n"
        "serial lin\nparallel lin/i2r\nparallel lin/lin_Bp_i2r\nparallel lin/lin_Ap_i1r",
    ),
    # 2 rows against a B contiguous along k (not a weight): the dot kernel, 8 dot
    # products a block (of 64 columns: 8 blocks, parallel)
    "dot": (
        (1, 2, 64, 64, True, False),
        "split lin/i2 by 8 -> i2o, i2i\nreorder lin: i0, i2o, i1, i2i, r0\n"
        "tensorize lin/i1 dot\nserial lin\nparallel lin/i2o",
    ),
    # 4 panels of 512 columns: the panel loop itself parallel, each thread packing its
    # own panels (the pack is inside it: no parallel pack loop)
    "panels": (
        (1, 64, 2048, 64, False, True),
        "split lin/i2 by 512 -> i2c, i21\nsplit lin/i1 by 64 -> i1c, i11\n"
        "split lin/i21 by 32 -> i2r, i2j\nsplit lin/i11 by 8 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, i1i, i2j, r0\ntensorize lin/i1i gemm\n"
        "cache_read lin/i2c @1 -> lin_Bp pack\nserial lin\nparallel lin/i2c",
    ),
    # a weight read along k by 2 rows: the packed gemm (from 2 rows a weight's packed
    # panels win; one row would stay the dot kernel)
    "weight-rows-2": (
        (1, 2, 64, 64, True, True),
        "split lin/i2 by 64 -> i2c, i21\nsplit lin/i1 by 2 -> i1c, i11\n"
        "split lin/i21 by 64 -> i2r, i2j\nsplit lin/i11 by 2 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, r0, i1i, i2j\n"
        "cache_read lin/i2c @1 -> lin_Bp pack\ntensorize lin/r0 gemm_pipe\nserial lin\n"
        "parallel lin/i0\nparallel lin/lin_Bp_i2r",
    ),
    # 2 rows x 48 columns (3 whole vectors): gemm_pipe too (48 % 16 == 0)
    "pipe-48": (
        (1, 2, 48, 64, False, False),
        "split lin/i2 by 48 -> i2c, i21\nsplit lin/i1 by 2 -> i1c, i11\n"
        "split lin/i21 by 48 -> i2r, i2j\nsplit lin/i11 by 2 -> i1r, i1i\n"
        "reorder lin: i2c, i0, i1c, i2r, i1r, r0, i1i, i2j\ntensorize lin/r0 gemm_pipe\n"
        "serial lin\nparallel lin/i0",
    ),
}


@pytest.mark.parametrize("case", GEMM_CASES)
def test_gemm_template_decisions(case):
    """default.default_scripts' first script for linear layers (gemm_plans, gemm_script,
    _gemm_tail_script, dot_script), each case's reason in GEMM_CASES."""
    from test_mutation_kills_schedule2 import _linear

    from dlpc.passes.schedule import default

    (batch, m, n, k, transposed, weight), script = GEMM_CASES[case]
    text = _linear(batch, m, n, k, b_transposed=transposed)
    if weight:
        text = text.replace(
            "dlpc.num_inputs = 2 : i64, dlpc.params = []",
            'dlpc.num_inputs = 1 : i64, dlpc.params = ["w"]',
        )
    got = default.default_scripts(parse_module(text), "lin")[0]
    assert got == "decompose lin\n" + script


@pytest.mark.parametrize("w, flat", [(4, True), (3, False)])
def test_a_flat_reduction_needs_an_innermost_loop_of_4(tmp_path, w, flat):
    """default.py:193 (`< 4` -> `< 5`): global average pooling over 4 x W planes is a
    flat reduction (rfactor of its innermost loop into partial sums) from W = 4 on;
    over 4 x 3 its innermost loop is too short to vectorize, so it keeps the other
    templates."""
    from dlpc.passes.schedule import default

    (tmp_path / "g.dlpc").write_text(
        f"model g(x: f32[B, 8, 4, {w}]) {{\n  return global_avg_pool(x)\n}}\n"
    )
    model = dlpc.load(tmp_path / "g.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (n := analyse(k)) is not None and n.reduce]
    nest = analyse(kernel)
    assert nest is not None and len(nest.reduce) == 2
    assert default.flat_reduction(kernel, nest) is flat
    script = default.default_scripts(module, kernel.sym)
    assert (script == [default.flat_reduction_script(kernel, nest)]) is flat


@pytest.mark.parametrize("n, contiguous", [(8, True), (7, False)])
def test_a_row_reduction_takes_rfactor_from_8_columns(tmp_path, n, contiguous):
    """default.contiguous_reduction: a sum over the last axis reads along each row; from
    8 columns on it is rfactored into a vector of partial sums (gemv_script), below that
    the row is too short for one."""
    from dlpc.passes.schedule import default

    (tmp_path / "r.dlpc").write_text(
        f"model r(x: f32[B, 16, {n}]) {{\n  return reduce_sum(x, axes=[2])\n}}\n"
    )
    model = dlpc.load(tmp_path / "r.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    assert default.contiguous_reduction(kernel, nest) is contiguous
    script = default.default_scripts(module, kernel.sym)
    assert (script == [default.gemv_script(kernel, nest)]) is contiguous


# a 2 x 2 max window whose outer window loop also scales (a mulf between the window
# loops, none in the innermost): still a pooling window, not a convolution
POOL_SCALED = """
func.func @main(%x: memref<1x1x8x8xf32>, %out: memref<1x1x4x4xf32>) {
  loop.kernel "pool" {
    loop.for %n = 0 to 1 step 1 {name = "i0"} {
      loop.for %c = 0 to 1 step 1 {name = "i1"} {
        loop.for %h = 0 to 4 step 1 {name = "i2"} {
          loop.for %w = 0 to 4 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %m = arith.constant 0xff800000 : f32
            memref.store %m, %acc[] : memref<f32>
            loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
              %s = memref.load %acc[] : memref<f32>
              %one = arith.constant 1.000000e+00 : f32
              %t = arith.mulf %s, %one : f32
              memref.store %t, %acc[] : memref<f32>
              loop.for %r1 = 0 to 2 step 1 {name = "r1", reduction} {
                %c2 = arith.constant 2 : index
                %hh = arith.muli %h, %c2 : index
                %y = arith.addi %hh, %r0 : index
                %ww = arith.muli %w, %c2 : index
                %z = arith.addi %ww, %r1 : index
                %v = memref.load %x[%n, %c, %y, %z] : memref<1x1x8x8xf32>
                %o = memref.load %acc[] : memref<f32>
                %mx = arith.maximumf %o, %v : f32
                memref.store %mx, %acc[] : memref<f32>
              }
            }
            %r = memref.load %acc[] : memref<f32>
            memref.store %r, %out[%n, %c, %h, %w] : memref<1x1x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def test_a_pooling_is_told_from_a_conv_by_its_innermost_window_loop():
    """conv.py:347 (`reduce[-1]` -> `reduce[-0]`): pool_script refuses a convolution by
    a multiply in the innermost window loop (where a conv's product is); a multiply
    only in the outer window loop's body keeps a 2 x 2 pooling: the window unrolled."""
    from dlpc.passes.schedule.conv import pool_script

    (kernel,) = kernels(parse_module(POOL_SCALED))
    nest = analyse(kernel)
    assert nest is not None and nest.reduce == ["r0", "r1"]
    assert pool_script(kernel, nest) == "unroll pool/r0\nunroll pool/r1"


# out = 0 over a nest whose store sits under an scf.if: no plain init nest
FOLD_GUARDED_INIT = """
func.func @k(%x: memref<8x4xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %t = arith.constant true
      scf.if %t {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<8x4xf32>
        %o = memref.load %out[%i] : memref<8xf32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
  }
  func.return
}"""


def test_fold_leaves_an_init_nest_without_a_plain_store():
    """fold_init_epilogue.py:105 (`len(stores) != 1` -> `> 1`): an init nest whose store
    is under an scf.if (none directly in its body) is no init nest: the kernel is left
    as it is (no error)."""
    module = parse_module(FOLD_GUARDED_INIT)
    before = str(module)
    pipeline.run("loop-fold-init-epilogue", module, pipeline.PipelineOptions())
    assert str(module) == before


# loop-fold-init-epilogue.mlir's @tile (init, tile with copy-in / reduction / copy-out,
# epilogue bias + relu), to be changed one condition at a time
FOLD_TILE = """
func.func @tile(%x: memref<8x4xf32>, %bias: memref<8xf32>, %out: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<8xf32>
    }
    loop.for %t = 0 to 8 step 4 {name = "t", parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 step 1 {name = "acc_in0"} {
        %i = arith.addi %t, %a : index
        %v = memref.load %out[%i] : memref<8xf32>
        memref.store %v, %acc[%a] : memref<4xf32>
      }
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %a = 0 to 4 step 1 {name = "a", vectorize} {
          %i = arith.addi %t, %a : index
          %xv = memref.load %x[%i, %r] : memref<8x4xf32>
          %av = memref.load %acc[%a] : memref<4xf32>
          %s = arith.addf %av, %xv : f32
          memref.store %s, %acc[%a] : memref<4xf32>
        }
      }
      loop.for %a = 0 to 4 step 1 {name = "acc_out0", vectorize} {
        %i = arith.addi %t, %a : index
        %s = memref.load %acc[%a] : memref<4xf32>
        memref.store %s, %out[%i] : memref<8xf32>
      }
    }
    loop.for %i = 0 to 8 step 1 {name = "i_post"} {
      %s = memref.load %out[%i] : memref<8xf32>
      %b = memref.load %bias[%i] : memref<8xf32>
      %y = arith.addf %s, %b : f32
      %z = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %y, %z : f32
      memref.store %r, %out[%i] : memref<8xf32>
    }
  }
  func.return
}"""

FOLD_CHANGES = {
    "folds": [],
    # the init nest over part of out, or not from 0 / step 1: not every element
    "init-partial": [
        (
            'loop.for %i = 0 to 8 step 1 {name = "i_init"}',
            'loop.for %i = 0 to 7 step 1 {name = "i_init"}',
        )
    ],
    "init-from-1": [
        (
            'loop.for %i = 0 to 8 step 1 {name = "i_init"}',
            'loop.for %i = 1 to 8 step 1 {name = "i_init"}',
        )
    ],
    "init-step-2": [
        (
            'loop.for %i = 0 to 8 step 1 {name = "i_init"}',
            'loop.for %i = 0 to 8 step 2 {name = "i_init"}',
        )
    ],
    # the init stores a loaded value, not a constant
    "init-loaded": [
        (
            "      %z = arith.constant 0.000000e+00 : f32\n      memref.store %z, %out[%i]",
            "      %z = memref.load %bias[%i] : memref<8xf32>\n      memref.store %z, %out[%i]",
        )
    ],
    # the epilogue's store is not its last op, or reads out twice
    "post-store-not-last": [
        (
            "      memref.store %r, %out[%i] : memref<8xf32>\n    }\n  }",
            "      memref.store %r, %out[%i] : memref<8xf32>\n      %q = arith.addf %r, %r : f32\n    }\n  }",
        )
    ],
    "post-two-loads": [
        (
            "      %b = memref.load %bias[%i] : memref<8xf32>",
            "      %b = memref.load %out[%i] : memref<8xf32>",
        )
    ],
    # the epilogue calls what is not arith/math (a store to another buffer)
    "post-impure": [
        (
            "      %b = memref.load %bias[%i] : memref<8xf32>",
            "      %b = memref.load %bias[%i] : memref<8xf32>\n      memref.store %b, %bias[%i] : memref<8xf32>",
        )
    ],
    # a second epilogue nest
    "two-posts": [
        (
            'loop.for %i = 0 to 8 step 1 {name = "i_post"}',
            'loop.for %j = 0 to 8 step 1 {name = "j_post"} {\n'
            "      %e = memref.load %out[%j] : memref<8xf32>\n"
            "      %f = arith.addf %e, %e : f32\n"
            "      memref.store %f, %out[%j] : memref<8xf32>\n"
            "    }\n"
            '    loop.for %i = 0 to 8 step 1 {name = "i_post"}',
        )
    ],
}


@pytest.mark.parametrize("case", FOLD_CHANGES)
def test_fold_init_epilogue_conditions(case):
    """loop-fold-init-epilogue folds @tile (the init and epilogue nests gone), and leaves
    it as it is when one of its conditions fails (module docstring)."""
    text = FOLD_TILE
    for old, new in FOLD_CHANGES[case]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    module = parse_module(text)
    before = str(module)
    pipeline.run("loop-fold-init-epilogue", module, pipeline.PipelineOptions())
    names = {lp.loop_name for k in kernels(module) for lp in k.loops()}
    if case == "folds":
        assert "i_init" not in names and "i_post" not in names
    else:
        assert str(module) == before


# Q = P[:, K0:K1] @ B[K0:K1, :] with the reduction loop from K0 (a 4 x 32 gemm_pipe tile)
PIPE_FROM = """
func.func @main(%P: memref<4x8xf32>, %B: memref<8x32xf32>, %Q: memref<4x32xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "zero" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %Q[%i0, %i1] : memref<4x32xf32>
      }
    }
  }
  loop.kernel "mmp" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        loop.for %r0 = K0 to K1 step 1 {name = "r0", reduction} {
          %a = memref.load %P[%i0, %r0] : memref<4x8xf32>
          %b = memref.load %B[%r0, %i1] : memref<8x32xf32>
          %c = memref.load %Q[%i0, %i1] : memref<4x32xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %Q[%i0, %i1] : memref<4x32xf32>
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("k0, k1", [(0, 8), (3, 6)])
def test_gemm_pipe_over_a_reduction_not_from_zero(k0, k1):
    """tensorize.py:303 (`first_k + (trips - 1) * step` -> `first_k ^ ...`): gemm_pipe
    carries B's row k + 1 into registers while row k is used; the last row it reads is
    that of the loop's last iteration, K0 + (trips - 1): over k = 3..5 that is 5."""
    from dlpc.backends.runtime.cbuild import CFunction

    text = PIPE_FROM.replace("K0", str(k0)).replace("K1", str(k1))
    module = parse_module(text)
    pipeline.run(
        "loop-tensorize",
        module,
        pipeline.PipelineOptions(),
        kernel="mmp",
        loop="i0",
        intrinsic="gemm_pipe",
    )
    assert "B_row" in str(module)
    rng = np.random.default_rng(11)
    p = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((8, 32)).astype(np.float32)
    (q,) = CFunction(module, name=f"pipe{k0}")(p, b)
    np.testing.assert_allclose(q, p[:, k0:k1] @ b[k0:k1], rtol=1e-5, atol=1e-5)


def test_warnings_name_the_first_three_kernels():
    """default._first_three: the tuning-log warnings name up to three kernels, then
    `...` when there are more."""
    from dlpc.passes.schedule.default import _first_three

    assert _first_three(["a"]) == "a"
    assert _first_three(["a", "b", "c"]) == "a, b, c"
    assert _first_three(["a", "b", "c", "d"]) == "a, b, c, ..."


# an init nest (out = 0) over OUT elements, then the reduction into out
INIT_POST = """
func.func @main(%x: memref<OUTx4xf32>, %out: memref<OUTxf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to OUT step 1 {name = "i0_init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %out[%i] : memref<OUTxf32>
    }
    loop.for %i = 0 to OUT step 1 {name = "i0"} {
      loop.for %r = 0 to 4 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<OUTx4xf32>
        %o = memref.load %out[%i] : memref<OUTxf32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %out[%i] : memref<OUTxf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("n, vectorized", [(8, True), (1, False)])
def test_finish_vectorizes_an_init_nest_of_more_than_one_element(n, vectorized):
    """default.finish_kernel: an init (or epilogue) nest's innermost loop is vectorized
    when it has more than one iteration (and no loop inside); the reduction's loops are
    left as they are."""
    from dlpc.passes.schedule.default import finish_kernel

    (kernel,) = kernels(parse_module(INIT_POST.replace("OUT", str(n))))
    finish_kernel(kernel)
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    assert (loops["i0_init"].vectorize is not None) is vectorized
    assert loops["i0"].vectorize is None and loops["r0"].vectorize is None


def _mm(m: int, n: int, k: int, b_transposed: bool = False) -> str:
    bshape, bidx = (f"{n}x{k}", "%j, %r") if b_transposed else (f"{k}x{n}", "%r, %j")
    return f"""
func.func @main(%A: memref<{m}x{k}xf32>, %B: memref<{bshape}xf32>, %C: memref<{m}x{n}xf32>) {{
  loop.kernel "mm" {{
    loop.for %i = 0 to {m} step 1 {{name = "i0"}} {{
      loop.for %j = 0 to {n} step 1 {{name = "i1"}} {{
        loop.for %r = 0 to {k} step 1 {{name = "r0", reduction}} {{
          %a = memref.load %A[%i, %r] : memref<{m}x{k}xf32>
          %b = memref.load %B[{bidx}] : memref<{bshape}xf32>
          %c = memref.load %C[%i, %j] : memref<{m}x{n}xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i, %j] : memref<{m}x{n}xf32>
        }}
      }}
    }}
  }}
  func.return
}}"""


@pytest.mark.parametrize(
    "intrinsic, m, n, k, fits",
    [
        ("gemm", 24, 16, 4, True),  # MAX_MR rows
        ("gemm", 25, 16, 4, False),
        ("gemm", 2, 128, 4, True),  # MAX_NR columns
        ("gemm", 2, 129, 4, False),
        ("gemm", 16, 32, 4, True),  # 512 = MAX_TILE accumulators
        ("gemm", 17, 32, 4, False),
        ("dot", 4, 6, 16, True),  # 24 = MAX_DOT partial-sum vectors, k = LANES
        ("dot", 5, 5, 16, False),
        ("dot", 2, 2, 15, False),  # a reduction shorter than one vector
    ],
)
def test_tensorize_tiles_within_the_register_file(intrinsic, m, n, k, fits):
    """tensorize's extent limits, at and just past each bound: a gemm tile of at most
    MAX_MR rows, MAX_NR columns and MAX_TILE accumulators; a dot block of at most
    MAX_DOT partial sums over a reduction of at least LANES iterations."""
    module = parse_module(_mm(m, n, k, b_transposed=intrinsic == "dot"))
    options = dict(kernel="mm", loop="i0", intrinsic=intrinsic)
    if fits:
        pipeline.run("loop-tensorize", module, pipeline.PipelineOptions(), **options)
    else:
        with pytest.raises(Exception, match="exceeds the register file|at least 16"):
            pipeline.run("loop-tensorize", module, pipeline.PipelineOptions(), **options)


@pytest.mark.parametrize(
    "step, ok",
    [
        ("split k/i0 by 1 -> a, b", True),  # a factor of 1 divides any loop
        ("split k/i0 by 8 -> a, b", True),  # the whole loop
        ("split k/i0 by 0 -> a, b", False),
        ("split k/i0 by 3 -> a, b", False),  # 3 does not divide 8
        ("unroll k/i0 by 1", True),
        ("unroll k/i0 by 8", True),  # the trip count: a full unroll
        ("unroll k/i0 by 9", False),
        ("unroll k/i0 by 0", False),
    ],
)
def test_split_and_unroll_factors_at_their_bounds(step, ok):
    """split's factor divides the loop (1 and the trip count included), unroll's is
    between 1 and the trip count (both included); others are refused."""
    from dlpc.passes.schedule.script import apply_script

    module = parse_module(ADD8)
    if ok:
        apply_script(module, step)
    else:
        with pytest.raises(Exception, match="factor"):
            apply_script(module, step)


ADD8 = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<8xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%i] : memref<8xf32>
    }
  }
  func.return
}"""


# depthwise 3x3 convs (batch, channels, height, width): the script after "decompose K"
DEPTHWISE_CASES = {
    # a 64-wide row is 4 vectors: whole, one row a tile; whole vectors at stride 1, so the
    # window slides in registers (`tensorize K/r0 slide`); 36 864 MACs: serial
    "row-64": (
        (1, 4, 16, 64),
        "reorder K: i0, i1, i2, r0, r1, r2, i3\ncache_read K/i1 @0 -> K_xp\n"
        "cache_write K/i2 @2 -> K_acc\nunroll K/r0\nunroll K/r1\nunroll K/r2\n"
        "vectorize K/i3\ntensorize K/r0 slide\nserial K",
    ),
    # 63 columns are not whole vectors (48 + 8 + 4 + 2 + 1): one row a tile, no slide
    "row-63": (
        (1, 4, 16, 63),
        "reorder K: i0, i1, i2, r0, r1, r2, i3\ncache_read K/i1 @0 -> K_xp\n"
        "cache_write K/i2 @2 -> K_acc\nunroll K/r0\nunroll K/r1\nunroll K/r2\n"
        "vectorize K/i3\nserial K",
    ),
    # 80 columns are more than 4 vectors: tiles of 16 columns, 4 rows each (a split row:
    # no slide)
    "row-80": (
        (1, 4, 16, 80),
        "split K/i2 by 4 -> i2o, i2i\nsplit K/i3 by 16 -> i3o, i3i\n"
        "reorder K: i0, i1, i2o, i3o, r0, r1, r2, i2i, i3i\ncache_read K/i1 @0 -> K_xp\n"
        "cache_write K/i3o @2 -> K_acc\nunroll K/r0\nunroll K/r1\nunroll K/r2\n"
        "unroll K/i2i\nvectorize K/i3i\nserial K",
    ),
    # a batch of 2 and 73 728 MACs (>= DEPTHWISE_PARALLEL_MACS): (image, channel) planes
    # one parallel loop
    "batch": (
        (2, 4, 16, 64),
        "reorder K: i0, i1, i2, r0, r1, r2, i3\ncache_read K/i1 @0 -> K_xp\n"
        "cache_write K/i2 @2 -> K_acc\nunroll K/r0\nunroll K/r1\nunroll K/r2\n"
        "vectorize K/i3\ntensorize K/r0 slide\nserial K\nfuse K/i0, i1 -> i0i1\n"
        "parallel K/i0i1",
    ),
    # one vector a row (14 columns): 2 of the 14 rows a tile, no slide (14 is not a
    # whole vector); 16 columns: 4 of 16, sliding
    "row-14": (
        (1, 4, 14, 14),
        "split K/i2 by 2 -> i2o, i2i\nreorder K: i0, i1, i2o, r0, r1, r2, i2i, i3\n"
        "cache_read K/i1 @0 -> K_xp\ncache_write K/i2o @2 -> K_acc\nunroll K/r0\n"
        "unroll K/r1\nunroll K/r2\nunroll K/i2i\nvectorize K/i3\nserial K",
    ),
    # 2x2 taps over 64 x 64 outputs of 4 channels: 65 536 MACs, exactly
    # DEPTHWISE_PARALLEL_MACS: parallel over the channels (unpadded: no staged copy; the
    # window slides over the input's own rows of 65)
    "macs-2-16": (
        (1, 4, 65, 65, 2, 0),
        "reorder K: i0, i1, i2, r0, r1, r2, i3\ncache_write K/i2 @2 -> K_acc\n"
        "unroll K/r0\nunroll K/r1\nunroll K/r2\nvectorize K/i3\ntensorize K/r0 slide\n"
        "serial K\nparallel K/i1",
    ),
    "row-16": (
        (1, 16, 16, 16),
        "split K/i2 by 4 -> i2o, i2i\nreorder K: i0, i1, i2o, r0, r1, r2, i2i, i3\n"
        "cache_read K/i1 @0 -> K_xp\ncache_write K/i2o @2 -> K_acc\nunroll K/r0\n"
        "unroll K/r1\nunroll K/r2\nunroll K/i2i\nvectorize K/i3\ntensorize K/r0 slide\n"
        "serial K",
    ),
    # the MobileNetV2-style net's 32 x 32 depthwise (2 vectors a row: 2 rows a tile),
    # sliding; 73 728 MACs at 8 channels: parallel over the channels
    "slide-32": (
        (1, 8, 32, 32),
        "split K/i2 by 2 -> i2o, i2i\nreorder K: i0, i1, i2o, r0, r1, r2, i2i, i3\n"
        "cache_read K/i1 @0 -> K_xp\ncache_write K/i2o @2 -> K_acc\nunroll K/r0\n"
        "unroll K/r1\nunroll K/r2\nunroll K/i2i\nvectorize K/i3\ntensorize K/r0 slide\n"
        "serial K\nparallel K/i1",
    ),
}


@pytest.mark.parametrize("case", DEPTHWISE_CASES)
def test_depthwise_template_decisions(tmp_path, case):
    """depthwise.depthwise_tile_script (through conv_tile_script): NCHW planes staged
    per (image, channel), rows x the row in registers, each case's reason above."""
    from dlpc.passes.schedule.conv import conv_tile_script

    shape, script = DEPTHWISE_CASES[case]
    n, c, h, w, taps, pad = (*shape, 3, 1)[:6] if len(shape) == 4 else shape
    (tmp_path / "d.dlpc").write_text(
        f"model d(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{c}, 1, {taps}, {taps}] = kaiming(seed=5)\n"
        f"  return conv2d(x, k, padding={pad}, groups={c})\n}}\n"
    )
    model = dlpc.load(tmp_path / "d.dlpc", batch=n)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    got = conv_tile_script(kernel, nest, threads=2)
    assert got == f"decompose {kernel.sym}\n" + script.replace("K", kernel.sym)


def test_a_nest_without_one_reduction_is_not_gemm_shaped():
    """default.py:133 (`len(nest.reduce) != 1` -> `> 1`): gemm_operands is None for a
    nest with no reduction loop (an elementwise add) as for one with two (a conv's
    window), and gemm_script refuses either with a ScheduleError, not an IndexError."""
    from dlpc.passes.schedule import default
    from dlpc.passes.schedule._common import ScheduleError

    (mm,) = kernels(parse_module(_mm(8, 8, 8)))
    for nest in (
        Nest(["i0", "i1"], [], {"i0": 8, "i1": 8}),
        Nest(["i0"], ["i1", "r0"], {"i0": 8, "i1": 8, "r0": 8}),
    ):
        assert default.gemm_operands(mm, nest) is None
        with pytest.raises(ScheduleError, match="not gemm-shaped"):
            default.gemm_script(mm, nest, default.GemmParams(8, 8, 8, 8, 8))


def test_divisor_helpers_at_their_bounds():
    """nest.largest_divisor: the largest divisor of n within the limit (the limit and n
    themselves included), a multiple of `multiple_of` when asked (that multiple itself
    when none is within the limit, 1 when it does not divide n); first_divisor: the first
    choice dividing n, else 1."""
    from dlpc.passes.schedule.nest import first_divisor, largest_divisor

    assert largest_divisor(12, 12) == 12 and largest_divisor(12, 100) == 12
    assert largest_divisor(12, 6) == 6 and largest_divisor(12, 5) == 4
    assert largest_divisor(1, 1) == 1
    assert largest_divisor(64, 64, multiple_of=16) == 64
    assert largest_divisor(32, 8, multiple_of=16) == 16
    assert largest_divisor(24, 64, multiple_of=16) == 1
    assert first_divisor(48, (32, 16)) == 16 and first_divisor(64, (32, 16)) == 32


def test_kernel_work_counts_every_nests_iterations():
    """nest.kernel_work: the iterations of each top-level nest summed, a loop's count its
    trip count times its body's (at least 1): INIT_POST over 8 outputs is 8 (init) +
    8 x 4 (reduction) = 40."""
    from dlpc.passes.schedule.nest import kernel_work

    (kernel,) = kernels(parse_module(INIT_POST.replace("OUT", "8")))
    assert kernel_work(kernel) == 8 + 8 * 4


# graph-winograd's chain for conv2d(x[1, C, H, W], k[O, C, 3, 3], padding=1), (C, O, H, W): each
# kernel's winograd_scripts, best first ([] : computed inside its output transform; None:
# not a Winograd transform kernel). 12 x 12: the fused block schedule; 11 rows: tiles by
# two columns only, the transforms alone; 32 output channels: register tiles of 16
# (CO_BLOCK), 24 one tile of 24 (MAX_MR); 32 columns: rows of 16 tiles, whole vectors;
# 11 columns: an odd width keeps the output transform's plain nest
WINOGRAD_SCRIPTS = {
    (3, 24, 8, 8): [
        ("winograd_input_transform_0", []),
        ("reshape_1", []),
        ("matmul_2", []),
        ("reshape_3", []),
        (
            "winograd_output_transform_4",
            [
                "reorder winograd_output_transform_4: i0, i2t, i1, i3t"
                "\n"
                "compute_inline reshape_3"
                "\n"
                "compute_at matmul_2 -> winograd_output_transform_4/i2t local"
                "\n"
                "compute_inline reshape_1"
                "\n"
                "compute_at winograd_input_transform_0 -> winograd_output_transform_4/i2t local"
                "\n"
                "decompose winograd_output_transform_4/matmul_2_i0"
                "\n"
                "tensorize winograd_output_transform_4/matmul_2_i2 gemm"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_in2"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_out2"
                "\n"
                "cache_read winograd_output_transform_4/matmul_2_i0 folded.0 -> winograd_output_transform_4_up pack"
                "\n"
                "reorder winograd_output_transform_4: winograd_input_transform_0_i1, winograd_input_transform_0_i2, winograd_input_transform_0_i0, winograd_input_transform_0_i3, winograd_input_transform_0_i4"
                "\n"
                "cache_read winograd_output_transform_4/winograd_input_transform_0_i1 0 -> winograd_output_transform_4_xq deinterleave"
                "\n"
                "unroll winograd_output_transform_4/winograd_input_transform_0_i0"
                "\n"
                "vectorize winograd_output_transform_4/winograd_input_transform_0_i4"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i2t",
                "reorder winograd_output_transform_4: i2t, i3t"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i1",
            ],
        ),
    ],
    (3, 4, 8, 32): [
        ("winograd_input_transform_0", []),
        ("reshape_1", []),
        ("matmul_2", []),
        ("reshape_3", []),
        (
            "winograd_output_transform_4",
            [
                "reorder winograd_output_transform_4: i0, i2t, i1, i3t"
                "\n"
                "compute_inline reshape_3"
                "\n"
                "compute_at matmul_2 -> winograd_output_transform_4/i2t local"
                "\n"
                "compute_inline reshape_1"
                "\n"
                "compute_at winograd_input_transform_0 -> winograd_output_transform_4/i2t local"
                "\n"
                "decompose winograd_output_transform_4/matmul_2_i0"
                "\n"
                "tensorize winograd_output_transform_4/matmul_2_i2 gemm"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_in2"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_out2"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_out3"
                "\n"
                "cache_read winograd_output_transform_4/matmul_2_i0 __constant -> winograd_output_transform_4_up pack"
                "\n"
                "reorder winograd_output_transform_4: winograd_input_transform_0_i1, winograd_input_transform_0_i2, winograd_input_transform_0_i0, winograd_input_transform_0_i3, winograd_input_transform_0_i4"
                "\n"
                "cache_read winograd_output_transform_4/winograd_input_transform_0_i1 0 -> winograd_output_transform_4_xq deinterleave"
                "\n"
                "unroll winograd_output_transform_4/winograd_input_transform_0_i0"
                "\n"
                "vectorize winograd_output_transform_4/winograd_input_transform_0_i4"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i2t",
                "reorder winograd_output_transform_4: i2t, i3t"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i1",
            ],
        ),
    ],
    (3, 4, 12, 12): [
        ("winograd_input_transform_0", []),
        ("reshape_1", []),
        ("matmul_2", []),
        ("reshape_3", []),
        (
            "winograd_output_transform_4",
            [
                "reorder winograd_output_transform_4: i0, i2t, i1, i3t"
                "\n"
                "compute_inline reshape_3"
                "\n"
                "compute_at matmul_2 -> winograd_output_transform_4/i2t local"
                "\n"
                "compute_inline reshape_1"
                "\n"
                "compute_at winograd_input_transform_0 -> winograd_output_transform_4/i2t local"
                "\n"
                "decompose winograd_output_transform_4/matmul_2_i0"
                "\n"
                "tensorize winograd_output_transform_4/matmul_2_i2 gemm"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_in2"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_out2"
                "\n"
                "cache_read winograd_output_transform_4/matmul_2_i0 __constant -> winograd_output_transform_4_up pack"
                "\n"
                "reorder winograd_output_transform_4: winograd_input_transform_0_i1, winograd_input_transform_0_i2, winograd_input_transform_0_i0, winograd_input_transform_0_i3, winograd_input_transform_0_i4"
                "\n"
                "cache_read winograd_output_transform_4/winograd_input_transform_0_i1 0 -> winograd_output_transform_4_xq deinterleave"
                "\n"
                "unroll winograd_output_transform_4/winograd_input_transform_0_i0"
                "\n"
                "vectorize winograd_output_transform_4/winograd_input_transform_0_i4"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i2t",
                "reorder winograd_output_transform_4: i2t, i3t"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i1",
            ],
        ),
    ],
    (3, 4, 11, 12): [
        (
            "winograd_input_transform_0",
            [
                "reorder winograd_input_transform_0: i1, i2, i0, i3, i4"
                "\n"
                "cache_read winograd_input_transform_0/i2 @0 -> winograd_input_transform_0_xq deinterleave"
                "\n"
                "unroll winograd_input_transform_0/i0"
                "\n"
                "vectorize winograd_input_transform_0/i4"
                "\n"
                "serial winograd_input_transform_0"
                "\n"
                "parallel winograd_input_transform_0/i2",
            ],
        ),
        ("reshape_1", None),
        ("matmul_2", None),
        ("reshape_3", None),
        (
            "winograd_output_transform_4",
            [
                "reorder winograd_output_transform_4: i2, i3r, i3t"
                "\n"
                "unroll winograd_output_transform_4/i3r"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i1",
            ],
        ),
    ],
    (3, 32, 8, 8): [
        ("winograd_input_transform_0", []),
        ("reshape_1", []),
        ("matmul_2", []),
        ("reshape_3", []),
        (
            "winograd_output_transform_4",
            [
                "reorder winograd_output_transform_4: i0, i2t, i1, i3t"
                "\n"
                "compute_inline reshape_3"
                "\n"
                "compute_at matmul_2 -> winograd_output_transform_4/i2t local"
                "\n"
                "compute_inline reshape_1"
                "\n"
                "compute_at winograd_input_transform_0 -> winograd_output_transform_4/i2t local"
                "\n"
                "decompose winograd_output_transform_4/matmul_2_i0"
                "\n"
                "split winograd_output_transform_4/matmul_2_i2 by 16 -> matmul_2_co, matmul_2_ci"
                "\n"
                "reorder winograd_output_transform_4: matmul_2_i0, matmul_2_i1, matmul_2_co, matmul_2_ci, matmul_2_i3, matmul_2_r0"
                "\n"
                "tensorize winograd_output_transform_4/matmul_2_ci gemm"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_in2"
                "\n"
                "unroll winograd_output_transform_4/matmul_b_acc_out2"
                "\n"
                "cache_read winograd_output_transform_4/matmul_2_i0 folded.0 -> winograd_output_transform_4_up pack"
                "\n"
                "reorder winograd_output_transform_4: winograd_input_transform_0_i1, winograd_input_transform_0_i2, winograd_input_transform_0_i0, winograd_input_transform_0_i3, winograd_input_transform_0_i4"
                "\n"
                "cache_read winograd_output_transform_4/winograd_input_transform_0_i1 0 -> winograd_output_transform_4_xq deinterleave"
                "\n"
                "unroll winograd_output_transform_4/winograd_input_transform_0_i0"
                "\n"
                "vectorize winograd_output_transform_4/winograd_input_transform_0_i4"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i2t",
                "reorder winograd_output_transform_4: i2t, i3t"
                "\n"
                "vectorize winograd_output_transform_4/i3t"
                "\n"
                "serial winograd_output_transform_4"
                "\n"
                "parallel winograd_output_transform_4/i1",
            ],
        ),
    ],
    (3, 4, 12, 11): [
        (
            "winograd_input_transform_0",
            [
                "reorder winograd_input_transform_0: i1, i2, i0, i3, i4"
                "\n"
                "cache_read winograd_input_transform_0/i2 @0 -> winograd_input_transform_0_xq deinterleave"
                "\n"
                "unroll winograd_input_transform_0/i0"
                "\n"
                "vectorize winograd_input_transform_0/i4"
                "\n"
                "serial winograd_input_transform_0"
                "\n"
                "parallel winograd_input_transform_0/i2",
            ],
        ),
        ("reshape_1", None),
        ("matmul_2", None),
        ("reshape_3", None),
        ("winograd_output_transform_4", []),
    ],
}


@pytest.mark.parametrize("shape", WINOGRAD_SCRIPTS)
def test_winograd_schedules_of_a_conv(tmp_path, shape):
    """winograd.winograd_scripts for every kernel of graph-winograd's chain (see
    WINOGRAD_SCRIPTS): fusable and whole tiles decide the fused schedule, the channel
    blocks its register tile, an odd output dimension the transforms' own templates."""
    c, o, h, w = shape
    (tmp_path / "w.dlpc").write_text(
        f"model wconv(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k, padding=1)\n}\n"
    )
    model = dlpc.load(tmp_path / "w.dlpc", batch=1)
    opts = pipeline.PipelineOptions(opt_level=3, extra={"graph-winograd": {"where": "all"}})
    weights = dict(dlpc.api.check_weights(model))
    module = pipeline.lower(model.module.clone(), "loop", opts, weights=weights)
    got = [(k.sym, winograd.winograd_scripts(module, k.sym)) for k in kernels(module)]
    assert got == WINOGRAD_SCRIPTS[shape]


@pytest.mark.parametrize(
    "factor, ok", [(1, True), (2, True), (4, True), (0, False), (3, False), (8, False)]
)
def test_rfactor_factor_divides_the_reduction(factor, ok):
    """rfactor's factor is at least 1 and divides the reduction loop (4 iterations):
    1, 2 and 4 partial sums are accepted, 0, 3 and 8 refused."""
    from dlpc.passes.schedule.script import apply_script

    module = parse_module(INIT_POST.replace("OUT", "8"))
    step = f"rfactor k/r0 by {factor}"
    if ok:
        apply_script(module, step)
    else:
        with pytest.raises(Exception, match="factor|divide"):
            apply_script(module, step)


def test_dot_tile_loops_count_from_zero():
    """tensorize.py:502 (`lp.lower != 0` -> `< 0`): the dot kernel's tile loops must
    count from 0 by 1 (its partial-sum block is indexed from 0): rows 2..5 of a matmul
    are refused with a one-line error."""
    text = _mm(6, 4, 16, b_transposed=True).replace(
        'loop.for %i = 0 to 6 step 1 {name = "i0"}', 'loop.for %i = 2 to 6 step 1 {name = "i0"}'
    )
    module = parse_module(text)
    with pytest.raises(Exception, match="must count from 0 by 1"):
        pipeline.run(
            "loop-tensorize",
            module,
            pipeline.PipelineOptions(),
            kernel="mm",
            loop="i0",
            intrinsic="dot",
        )


@pytest.mark.parametrize("channels, split", [(8, True), (6, False), (4, False)])
def test_im2col_rows_block_output_channels_by_4(tmp_path, channels, split):
    """conv.py:57 (`trips[c] % cb == 0` -> `* cb`): the im2col fallback (conv_script)
    blocks the output channels by 4, unrolled, when 4 divides them and there are more
    than 4 (8: blocks of 4; 6: no block of 4 divides; 4: one block, nothing to split)."""
    from dlpc.passes.schedule.conv import conv_script

    (tmp_path / "c.dlpc").write_text(
        f"model c(x: f32[B, 3, 8, 8]) {{\n  param k: f32[{channels}, 3, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k, padding=1)\n}\n"
    )
    model = dlpc.load(tmp_path / "c.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    lines = conv_script(kernel, nest).splitlines()
    K = kernel.sym
    assert (f"split {K}/i1 by 4 -> i1o, i1i" in lines) is split
    assert (f"unroll {K}/i1i" in lines) is split


# conv2d(x[1, 3, H, W], k[8, 3, 3, 3], padding=1) through conv_script (im2col rows):
# (H, W, register_tile) -> the script after "decompose K"
IM2COL_CASES = {
    # a row over 64 wide: tiles of its largest divisor up to 64 (128: 64, 72: 36); the
    # input rows an output row needs packed at the row loop, parallel over 8 rows
    "row-128": (
        (8, 128, False),
        "split K/i1 by 4 -> i1o, i1i\nsplit K/i3 by 64 -> i3o, i3i\n"
        "reorder K: i0, i2, i1o, i3o, r0, r1, r2, i1i, i3i\ncache_read K/i2 @0 -> K_xp pack\n"
        "unroll K/i1i\nvectorize K/i3i\nserial K\nparallel K/i2",
    ),
    "row-72": (
        (8, 72, False),
        "split K/i1 by 4 -> i1o, i1i\nsplit K/i3 by 36 -> i3o, i3i\n"
        "reorder K: i0, i2, i1o, i3o, r0, r1, r2, i1i, i3i\ncache_read K/i2 @0 -> K_xp pack\n"
        "unroll K/i1i\nvectorize K/i3i\nserial K\nparallel K/i2",
    ),
    # a row of exactly 64: whole (tiled only above 64)
    "row-64": (
        (8, 64, False),
        "split K/i1 by 4 -> i1o, i1i\nreorder K: i0, i2, i1o, r0, r1, r2, i1i, i3\n"
        "cache_read K/i2 @0 -> K_xp pack\nunroll K/i1i\nvectorize K/i3\nserial K\nparallel K/i2",
    ),
    # two output rows for two threads: parallel
    "two-rows": (
        (2, 8, False),
        "split K/i1 by 4 -> i1o, i1i\nreorder K: i0, i2, i1o, r0, r1, r2, i1i, i3\n"
        "cache_read K/i2 @0 -> K_xp pack\nunroll K/i1i\nvectorize K/i3\nserial K\nparallel K/i2",
    ),
    # one output row: fewer rows than threads, serial
    "one-row": (
        (1, 8, False),
        "split K/i1 by 4 -> i1o, i1i\nreorder K: i0, i2, i1o, r0, r1, r2, i1i, i3\n"
        "cache_read K/i2 @0 -> K_xp pack\nunroll K/i1i\nvectorize K/i3\nserial K",
    ),
    # register tile: 4 channels x 16 columns (64 <= 256) accumulate in acc, unrolled
    "register-16": (
        (8, 16, True),
        "split K/i1 by 4 -> i1o, i1i\nreorder K: i0, i2, i1o, r0, r1, r2, i1i, i3\n"
        "cache_read K/i2 @0 -> K_xp pack\ncache_write K/i1o @2 -> K_acc\nunroll K/i1i\n"
        "unroll K/i3\nserial K\nparallel K/i2",
    ),
    # 4 x 64 = 256 accumulators: still a register tile, at the column tile loop
    "register-128": (
        (8, 128, True),
        "split K/i1 by 4 -> i1o, i1i\nsplit K/i3 by 64 -> i3o, i3i\n"
        "reorder K: i0, i2, i1o, i3o, r0, r1, r2, i1i, i3i\ncache_read K/i2 @0 -> K_xp pack\n"
        "cache_write K/i3o @2 -> K_acc\nunroll K/i1i\nunroll K/i3i\nserial K\nparallel K/i2",
    ),
}


@pytest.mark.parametrize("case", IM2COL_CASES)
def test_im2col_template_decisions(tmp_path, case):
    """conv.conv_script (im2col rows, the fallback of convs and pooling): the column tile,
    the register tile's bound (cb x width <= 256), the parallel rows; reasons above."""
    from dlpc.passes.schedule.conv import conv_script

    (h, w, register), script = IM2COL_CASES[case]
    (tmp_path / "c.dlpc").write_text(
        f"model c(x: f32[B, 3, {h}, {w}]) {{\n  param k: f32[8, 3, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k, padding=1)\n}\n"
    )
    model = dlpc.load(tmp_path / "c.dlpc", batch=1)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    got = conv_script(kernel, nest, register_tile=register)
    assert got == f"decompose {kernel.sym}\n" + script.replace("K", kernel.sym)


def test_fold_peels_only_a_zero_init():
    """fold_init_epilogue.py:294 (`len(stores) != 1 or not zero` -> `and`): the first
    reduction step replaces the tile's init only when that init is 0 (0 + p is p); a
    sum starting from 1.0 keeps its copy-in of 1.0 and the whole reduction loop."""
    text = PEEL.replace(
        "%z = arith.constant 0.000000e+00 : f32", "%z = arith.constant 1.000000e+00 : f32"
    )
    module = parse_module(text)
    pipeline.run("loop-fold-init-epilogue", module, pipeline.PipelineOptions())
    names = [lp.loop_name for k in kernels(module) for lp in k.loops()]
    assert "i_init" not in names and "acc_in0" in names and "r0_first" not in names
    (red,) = [lp for k in kernels(module) for lp in k.loops() if lp.loop_name == "r0"]
    assert red.lower == 0


PEEL_CHANGES = {
    # the tile's update is a product, not a sum: 0 * p is no p
    "mulf": [("%s = arith.addf %av, %xv : f32", "%s = arith.mulf %av, %xv : f32")],
    # the accumulator read twice in the step
    "read-twice": [
        (
            "%s = arith.addf %av, %xv : f32",
            "%tt = arith.mulf %av, %xv : f32\n            %s = arith.addf %av, %xv : f32",
        )
    ],
    # a reduction loop inside the reduction (a direct conv's nested sums)
    "nested-reduction": [('{name = "b"}', '{name = "b", reduction}')],
}


@pytest.mark.parametrize("case", PEEL_CHANGES)
def test_fold_peels_only_a_gemm_shaped_update(case):
    """_peel_first: the zero fill is peeled into the first reduction step only for one
    `acc = acc + p` per element of the tile, read once, under loops that are no
    reductions; otherwise the copy-in of zeros and the whole reduction loop stay."""
    text = PEEL
    for old, new in PEEL_CHANGES[case]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    module = parse_module(text)
    pipeline.run("loop-fold-init-epilogue", module, pipeline.PipelineOptions())
    names = [lp.loop_name for k in kernels(module) for lp in k.loops()]
    assert "r0_first" not in names and "acc_in0" in names
