"""Tests written against surviving mutants of the schedule primitives and the default
schedules' rules (issue 35, bench/mutation.py --area schedule, fourth round), and from a
read of passes/schedule/*.py for decisions no test pinned before the seed-44 draw. Each
checks a small hand-written case: numbers against numpy, or the emitted loops with the
reason they are the right ones."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.backends.runtime.evaluate import run_loop_c
from dlpc.dialects.loop import kernels
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule._common import ScheduleError
from dlpc.passes.schedule.cache import cache_read
from dlpc.passes.schedule.conv import nhwc_conv_tile_script
from dlpc.passes.schedule.depthwise import nhwc_depthwise_tile_script
from dlpc.passes.schedule.nest import analyse

# ------------------------------------------------------------- the padded copy's spans

# y[i, j] = x[i - OFF, j] where 0 <= i - OFF < 4, else 7: a padded read whose box (3 rows
# from -OFF) has a constant origin, staged at i0 (one iteration around everything)
PADDED_ROWS = """
func.func @main(%x: memref<4x6xf32>, %y: memref<3x6xf32>) {
  loop.kernel "k" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i = 0 to 3 step 1 {name = "i"} {
        loop.for %j = 0 to 6 step 1 {name = "j"} {
          %off = arith.constant OFF : index
          %zi = arith.constant 0 : index
          %nh = arith.constant 4 : index
          %nw = arith.constant 6 : index
          %h = arith.subi %i, %off : index
          %c0 = arith.cmpi sge, %h, %zi : index
          %c1 = arith.cmpi slt, %h, %nh : index
          %c2 = arith.cmpi sge, %j, %zi : index
          %c3 = arith.cmpi slt, %j, %nw : index
          %c01 = arith.andi %c0, %c1 : i1
          %c23 = arith.andi %c2, %c3 : i1
          %in = arith.andi %c01, %c23 : i1
          %a = scf.if %in -> (f32) {
            %l = memref.load %x[%h, %j] : memref<4x6xf32>
            scf.yield %l : f32
          } else {
            %zz = arith.constant 7.000000e+00 : f32
            scf.yield %zz : f32
          }
          memref.store %a, %y[%i, %j] : memref<3x6xf32>
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "off, loops",
    [
        # rows -5..-3 and 4..6: every row of the box is padding, only a fill nest (no
        # interior nest over an empty row range)
        (5, ["xl_padlo0", "xl_padlo1"]),
        (-4, ["xl_padhi0", "xl_padhi1"]),
        # rows -1..1 and 2..4: one border row filled, the other two copied
        (1, ["xl_padlo0", "xl_padlo1", "xl_in0", "xl_in1"]),
        (-2, ["xl_padhi0", "xl_padhi1", "xl_in0", "xl_in1"]),
    ],
)
def test_a_padded_box_wholly_outside_its_input_is_only_filled(off, loops):
    """cache.py:403 (`any(lo >= hi ...)`, schedule seed 43's survivor `lo is hi`): a box
    whose rows all lie in the padding has an empty in-bounds span (lo == hi, both the
    box's extent or 0) and stores the fill value alone; the values are numpy's either
    way. (`lo is hi` is equivalent: `inside` makes hi with max(lo, ...), which returns
    lo itself when they are equal.)"""
    module = parse_module(PADDED_ROWS.replace("OFF", str(off)))
    cache_read(module, "k", "i0", "x", "xl")
    names = [lp.loop_name for k in kernels(module) for lp in k.loops()]
    assert names == ["i0", *loops, "i", "j"]
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    y = np.zeros((3, 6), np.float32)
    run_loop_c(module, [x, y])
    rows = np.arange(3) - off
    expect = np.where(((rows >= 0) & (rows < 4))[:, None], x[np.clip(rows, 0, 3)], 7.0)
    np.testing.assert_array_equal(y, expect)


# ------------------------------------------------ the NHWC conv and depthwise templates

# what graph-layout makes at -O3 with where=all: (batch, channels, rows, columns[, pad])
# for depthwise 3x3, (batch, in channels, out channels, rows, columns[, pad[, lanes,
# threads]]) for a 3x3 conv; the script (K the kernel), "!message" for a refusal; with
# 4-float vectors (lanes=4) so that small channel counts make several vectors
NHWC_DEPTHWISE = {
    # 8 channels are 2 vectors of 4: 8 // 2 = 4 columns a tile; 4 608 MACs: serial
    (1, 8, 8, 8): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
    """,
    # 32 channels > 4 vectors: blocks of 16 (4 vectors), 8 // 4 = 2 columns a tile
    (1, 32, 8, 8): """
        decompose K
        split K/i2 by 2 -> i2o, i2i
        split K/i3 by 16 -> i3o, i3i
        reorder K: i0, i1, i2o, i3o, r0, r1, r2, i2i, i3i
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i3o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3i
        serial K
    """,
    # 18 channels: no block of whole vectors divides them
    (1, 18, 8, 8): "!kernel 'K': 18 channels do not block by 4",
    # 6 channels are a vector and a pair (2 pieces): 4 columns; a batch: (image, row) fused, 6 912 MACs serial
    (2, 6, 8, 8): """
        decompose K
        split K/i0 by 2 -> i0b, i0n
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0b, i0n, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0b @1 -> K_wp pack
        cache_read K/i0b @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
        fuse K/i0n, i1 -> i0i1
    """,
    # unpadded: no staged copy; 6 columns, tiles of 3 (the largest divisor <= 4)
    (1, 8, 8, 8, 0): """
        decompose K
        split K/i2 by 3 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
    """,
    # 3 channels are a pair and a single (bin(3) has two ones): 2 pieces, 4 columns
    (1, 3, 8, 8): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
    """,
    # 147 456 MACs >= 1 << 16: the rows parallel; one vector a column: 8 columns a tile
    (1, 4, 66, 66, 0): """
        decompose K
        split K/i2 by 8 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1
    """,
    # 65 664 MACs over one output row: nothing to run in parallel
    (1, 4, 3, 1826, 0): """
        decompose K
        split K/i2 by 8 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
    """,
    # a batch past 1 << 16 MACs: the fused (image, row) loop parallel
    (2, 4, 66, 66, 0): """
        decompose K
        split K/i0 by 2 -> i0b, i0n
        split K/i2 by 8 -> i2o, i2i
        reorder K: i0b, i0n, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0b @1 -> K_wp pack
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
        fuse K/i0n, i1 -> i0i1
        parallel K/i0i1
    """,
    # a padded input of exactly 8 MiB (CONV_PACK_BYTES) is staged
    (1, 8, 512, 512): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/r0
        unroll K/r1
        unroll K/r2
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1
    """,
    # one more: too large to stage
    (1, 8, 512, 514): "!kernel 'K': padded input of 8421376 bytes is too large",
}
NHWC_CONV = {
    # 8 output channels: 2 vectors (cbv 2), 24 // 2 = 12 >= 8 columns: the whole row a tile; 18 432 MACs serial
    (1, 4, 8, 8, 8): """
        decompose K
        reorder K: i0, i1, r0, r1, r2, i2, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i1 @2 -> K_acc
        unroll K/i2
        vectorize K/i3
        serial K
    """,
    # 6 output channels are no whole vectors of 4
    (1, 4, 6, 8, 8): "!kernel 'K': 6 output channels are not whole vectors",
    # 64 channels are 16 vectors: blocks of 4 vectors (16), 24 // 4 = 6 -> 4 columns
    (1, 4, 64, 8, 8): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        split K/i3 by 16 -> i3o, i3i
        reorder K: i0, i1, i2o, i3o, r0, r1, r2, i2i, i3i
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i3o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3i
        serial K
    """,
    # 2 images over 2 threads (padded, 294 912 MACs >= 1 << 18): a block of images a thread, each staging its own copy
    (2, 4, 16, 16, 16): """
        decompose K
        split K/i0 by 2 -> i0b, i0n
        split K/i0n by 1 -> i0t, i0u
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0b, i0t, i0u, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0b @1 -> K_wp pack
        cache_read K/i0t @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        fuse K/i0u, i1 -> i0i1
        parallel K/i0t
    """,
    # 3 images do not split over 2 threads: the copy staged once, the (image, row) loop parallel
    (3, 4, 16, 16, 16): """
        decompose K
        split K/i0 by 3 -> i0b, i0n
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0b, i0n, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0b @1 -> K_wp pack
        cache_read K/i0b @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        fuse K/i0n, i1 -> i0i1
        parallel K/i0i1
    """,
    # one image, 16 rows over 2 threads: a block of 8 rows a thread (with its halo)
    (1, 8, 16, 16, 16): """
        decompose K
        split K/i1 by 8 -> i1t, i1r
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1t, i1r, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i1t @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1t
    """,
    # one thread: no blocks, the rows parallel (the runtime's pool)
    (1, 8, 16, 16, 16, 1, 4, 1): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1
    """,
    # unpadded: nothing staged per thread, the rows parallel
    (1, 8, 16, 18, 18, 0): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1
    """,
    # 4 rows = 2 x 2 threads: row blocks of 2
    (1, 8, 16, 4, 128, 1): """
        decompose K
        split K/i1 by 2 -> i1t, i1r
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1t, i1r, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i1t @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1t
    """,
    # 2 rows < 2 x 2 threads: no row blocks
    (1, 8, 16, 2, 256, 1): """
        decompose K
        split K/i2 by 4 -> i2o, i2i
        reorder K: i0, i1, i2o, r0, r1, r2, i2i, i3
        cache_read K/i0 @1 -> K_wp pack
        cache_read K/i0 @0 -> K_xp
        cache_write K/i2o @2 -> K_acc
        unroll K/i2i
        vectorize K/i3
        serial K
        parallel K/i1
    """,
    # 7 columns, 4 vectors a tile: at most 6 columns, and only 1 divides 7
    (1, 4, 16, 7, 7, 1): "!kernel 'K': row of 7 does not tile",
}


def _nhwc_kernel(tmp_path, source: str, batch: int):
    model = dlpc.load(_write(tmp_path, source), batch=batch)
    opts = pipeline.PipelineOptions(opt_level=3, extra={"graph-layout": {"where": "all"}})
    module = pipeline.lower(model.module.clone(), "loop", opts)
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    return kernel, nest


def _write(tmp_path, source: str):
    path = tmp_path / "m.dlpc"
    path.write_text(source)
    return path


def _check_script(make, kernel, expect: str) -> None:
    if expect.startswith("!"):
        with pytest.raises(ScheduleError) as e:
            make()
        assert str(e.value).replace(kernel.sym, "K") == expect[1:]
        return
    got = make().replace(kernel.sym, "K")
    assert got.split("\n") == [ln.strip() for ln in expect.strip().split("\n")]


@pytest.mark.parametrize("case", NHWC_DEPTHWISE)
def test_nhwc_depthwise_template_decisions(tmp_path, case):
    """depthwise.nhwc_depthwise_tile_script: the channel block (whole vectors up to 4, its
    pieces a vector each plus the remainder's power-of-two pieces), the columns a tile
    (8 vectors in registers), the batch split and (image, row) fusion, the staging bound
    and the parallel threshold (DEPTHWISE_PARALLEL_MACS); each case's reason above."""
    n, c, h, w, pad = (*case, 1)[:5]
    kernel, nest = _nhwc_kernel(
        tmp_path,
        f"model d(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"  param k: f32[{c}, 1, 3, 3] = kaiming(seed=5)\n"
        f"  return conv2d(x, k, padding={pad}, groups={c})\n}}\n",
        n,
    )
    _check_script(lambda: nhwc_depthwise_tile_script(kernel, nest, 4), kernel, NHWC_DEPTHWISE[case])


@pytest.mark.parametrize("case", NHWC_CONV)
def test_nhwc_conv_template_decisions(tmp_path, case):
    """conv.nhwc_conv_tile_script: whole output-channel vectors (blocks of up to 4), the
    columns a tile (24 vectors in registers), the padded copy staged per thread's block of
    images or rows where they split evenly (else once), the parallel loop (CONV_PARALLEL_MACS);
    each case's reason above."""
    n, ci, co, h, w, pad, lanes, threads = (*case, *(1, 4, 2)[len(case) - 5 :])
    kernel, nest = _nhwc_kernel(
        tmp_path,
        f"model d(x: f32[B, {ci}, {h}, {w}]) {{\n"
        f"  param k: f32[{co}, {ci}, 3, 3] = kaiming(seed=5)\n"
        f"  return conv2d(x, k, padding={pad})\n}}\n",
        n,
    )
    _check_script(
        lambda: nhwc_conv_tile_script(kernel, nest, threads=threads, lanes=lanes),
        kernel,
        NHWC_CONV[case],
    )


# ------------------------------------------------------------ default.py's predicates

# out[i] = sum over r0 < 2, r1 < 4, r2 < 8 of LOAD (every loop a reduction loop)
FLAT = """
func.func @main(%x: memref<XT>, %out: memref<2xf32>) {
  loop.kernel "s" {
    loop.for %i = 0 to 2 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %acc[] : memref<f32>
      loop.for %r0 = LO to 2 step 1 {name = "r0", reduction} {
        loop.for %r1 = 0 to 4 step 1 {name = "r1", reduction} {
          loop.for %r2 = 0 to R2 step 1 {name = "r2", reduction} {
            %q = arith.addi %r0, %i : index
            %v = LOAD
            %o = memref.load %acc[] : memref<f32>
            %s = arith.addf %o, %v : f32
            memref.store %s, %acc[] : memref<f32>
          }
        }
      }
      %r = memref.load %acc[] : memref<f32>
      memref.store %r, %out[%i] : memref<2xf32>
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "xt, lo, r2, index, flat",
    [
        # x[i, r0, r1, r2]: one block over all three reduction loops
        ("2x2x4x8", 0, 8, "%i, %r0, %r1, %r2", True),
        # x[r0, i, r1, r2]: a block over r1, r2 per (r0, i), r0 alone in a leading index
        ("2x2x4x8", 0, 8, "%r0, %i, %r1, %r2", True),
        # the same with r0 from 1: a reduction loop not from 0 is no flat reduction
        ("2x2x4x8", 1, 8, "%r0, %i, %r1, %r2", False),
        # r0 + i in a leading index: r0 is not alone there
        ("3x4x8", 0, 8, "%q, %r1, %r2", False),
        # rows of 9 read 8 at a time: not whole dims, no contiguous block
        ("2x2x4x9", 0, 8, "%i, %r0, %r1, %r2", False),
        # x[.., r2, r1]: the trailing indices are not the loops in order
        ("2x2x8x4", 0, 8, "%i, %r0, %r2, %r1", False),
        # the same over 4 x 4 (the shape matches, the order does not)
        ("2x2x4x4", 0, 4, "%i, %r0, %r2, %r1", False),
        # x[i, r1, r1, r2]: a leading index moves with the block's r1
        ("2x4x4x8", 0, 8, "%i, %r1, %r1, %r2", False),
        # an innermost loop of 3: too short to vectorize
        ("2x2x4x3", 0, 3, "%i, %r0, %r1, %r2", False),
        # no load varies along the reduction (a count): nothing to read as a block
        (None, 0, 8, None, False),
    ],
)
def test_flat_reduction_reads_one_block_over_whole_dims(xt, lo, r2, index, flat):
    """default.flat_reduction: a sum over several reduction loops is rfactored as one flat
    loop only when every varying load reads a contiguous block: its trailing indices the
    innermost reduction loops in order over whole dims, each loop from 0 by 1, any
    other reduction variable alone in a leading index."""
    from dlpc.passes.schedule import default

    load = (
        f"memref.load %x[{index}] : memref<{xt}xf32>"
        if index
        else "arith.constant 1.000000e+00 : f32"
    )
    text = (
        FLAT.replace("XT", f"{xt or '2x2x4x8'}xf32")
        .replace("LO to", f"{lo} to")
        .replace("R2 step", f"{r2} step")
        .replace("LOAD", load)
    )
    (kernel,) = kernels(parse_module(text))
    nest = analyse(kernel)
    assert nest is not None and nest.reduce == ["r0", "r1", "r2"]
    assert default.flat_reduction(kernel, nest) is flat


@pytest.mark.parametrize("swap", [False, True])
def test_gemm_operands_whichever_order_the_product_takes(swap):
    """default.gemm_operands: C[i, j] += A[i, k] * B[k, j] is a gemm with A the operand
    read along i and B the one read along j, whichever side of the mulf each is on;
    A * A (one buffer twice) is none."""
    from dlpc.passes.schedule import default

    text = _mm(4, 8, 4)
    if swap:
        text = text.replace("arith.mulf %a, %b", "arith.mulf %b, %a")
    module = parse_module(text)
    (kernel,) = kernels(module)
    nest = analyse(kernel)
    assert nest is not None
    operands = default.gemm_operands(kernel, nest)
    assert operands is not None
    assert [v.name_hint for v in operands] == ["A", "B"]
    # A[i, k] * A[k, j] (A @ A): one buffer on both sides is no gemm (the template packs
    # A and B as two buffers)
    square = _mm(4, 4, 4).replace("memref.load %B[%r, %j]", "memref.load %A[%r, %j]")
    (kernel,) = kernels(parse_module(square))
    nest = analyse(kernel)
    assert nest is not None and default.gemm_operands(kernel, nest) is None


def _mm(m: int, n: int, k: int) -> str:
    return f"""
func.func @main(%A: memref<{m}x{k}xf32>, %B: memref<{k}x{n}xf32>, %C: memref<{m}x{n}xf32>) {{
  loop.kernel "mm" {{
    loop.for %i = 0 to {m} step 1 {{name = "i0"}} {{
      loop.for %j = 0 to {n} step 1 {{name = "i1"}} {{
        loop.for %r = 0 to {k} step 1 {{name = "r0", reduction}} {{
          %a = memref.load %A[%i, %r] : memref<{m}x{k}xf32>
          %b = memref.load %B[%r, %j] : memref<{k}x{n}xf32>
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


# ------------------------------------------- schedule seed 44's survivors (after the draw)

# C[i] += A[i, k] * B[k, l]: two loops (k and l) do not index C
TWO_REDUCTIONS = """
func.func @main(%A: memref<4x4xf32>, %B: memref<4x4xf32>, %C: memref<4xf32>) {
  loop.kernel "mm" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      loop.for %k = 0 to 4 step 1 {name = "r0", reduction} {
        loop.for %l = 0 to 4 step 1 {name = "r1", reduction} {
          %a = memref.load %A[%i, %k] : memref<4x4xf32>
          %b = memref.load %B[%k, %l] : memref<4x4xf32>
          %c = memref.load %C[%i] : memref<4xf32>
          %p = arith.mulf %a, %b : f32
          %s = arith.addf %c, %p : f32
          memref.store %s, %C[%i] : memref<4xf32>
        }
      }
    }
  }
  func.return
}"""


def test_tensorize_refuses_a_nest_with_two_loops_outside_cs_index():
    """tensorize.py:129 (`in_c.count(False) != 1` -> `< 1`, seed 44): a gemm tile has
    exactly one reduction loop (k); a nest with two loops that do not index C is no
    gemm and is refused with the rule's message."""
    from dlpc.passes.schedule.tensorize import TensorizeMismatchError, tensorize

    module = parse_module(TWO_REDUCTIONS)
    with pytest.raises(TensorizeMismatchError) as e:
        tensorize(module, "mm", "i0", "gemm")
    assert str(e.value) == (
        "exactly one loop of the nest at loop mm/i0 must be a reduction over C's index"
    )


@pytest.mark.parametrize(
    "w, split", [(96, "split K/i3 by 48 -> i3o, i3i"), (80, "split K/i3 by 16 -> i3o, i3i")]
)
def test_a_wide_nchw_depthwise_row_tiles_by_up_to_4_vectors(tmp_path, w, split):
    """depthwise.py:68 (`4 * lanes` -> `4 ^ lanes`, seed 44): a row wider than 4 vectors
    (64 floats) is tiled by the largest multiple of 16 up to 64 dividing it: 48 of 96
    (3 vectors a tile; 4 ^ 16 = 20 would give 16), 16 of 80."""
    from dlpc.passes.schedule.conv import conv_tile_script

    model = dlpc.load(
        _write(
            tmp_path,
            f"model d(x: f32[B, 4, 4, {w}]) {{\n"
            "  param k: f32[4, 1, 3, 3] = kaiming(seed=5)\n"
            "  return conv2d(x, k, padding=1, groups=4)\n}\n",
        ),
        batch=1,
    )
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (m := analyse(k)) is not None and m.reduce]
    nest = analyse(kernel)
    assert nest is not None
    script = conv_tile_script(kernel, nest, threads=2).replace(kernel.sym, "K").split("\n")
    assert split in script


def _mm_t(m: int, n: int, k: int) -> str:
    """C = A B^T with B stored [n, k] (contiguous along k), B an input (not a weight)."""
    return (
        _mm(m, n, k)
        .replace(f"memref<{k}x{n}xf32>", f"memref<{n}x{k}xf32>")
        .replace("%B[%r, %j]", "%B[%j, %r]")
    )


@pytest.mark.parametrize("m, dot", [(16, True), (17, False)])
def test_a_long_k_product_takes_the_dot_kernel_up_to_16_rows(m, dot):
    """default.py:592 (`2 * DOT_ROWS` -> `2 + DOT_ROWS`, seed 44): a product with k >= 256
    (DOT_LONG_K) and a B that is no weight (not packed once) takes the dot kernel up to
    2 * DOT_ROWS = 16 rows; from 17 the blocked gemm comes first."""
    from dlpc.passes.schedule import default

    (kernel,) = kernels(parse_module(_mm_t(m, 16, 256)))
    nest = analyse(kernel)
    assert nest is not None
    plans = default.gemm_plans(kernel, nest)
    assert isinstance(plans[0], default.DotParams) is dot


# ------------------------------------------------------------ decompose's diagnostics

DECOMPOSE = """
func.func @main(%x: memref<4x8xf32>, %y: memref<4xf32>, %z: memref<4xf32>, %ix: memref<4xindex>) {
  loop.kernel "k" {
    OUTER
      %acc = memref.alloca() : memref<f32>
      ACC2
      %zero = arith.constant 0.0 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<4x8xf32>
        %o = memref.load %acc[] : memref<f32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %acc[] : memref<f32>
      }
      %t = memref.load %acc[] : memref<f32>
      STORE
    }
  }
  func.return
}"""
SPATIAL = 'loop.for %i = 0 to 4 step 1 {name = "i0"} {'
STORE_Y = "memref.store %t, %y[%i] : memref<4xf32>"


@pytest.mark.parametrize(
    "outer, acc2, store, message",
    [
        # the kernel's nest starts with its reduction loop
        (
            'loop.for %i = 0 to 4 step 1 {name = "i0", reduction} {',
            "",
            STORE_Y,
            "kernel 'k' has no spatial loop around its reduction",
        ),
        # two 0-d accumulators: which one is the output element's?
        (
            SPATIAL,
            "%acc2 = memref.alloca() : memref<f32>",
            STORE_Y,
            "loop k/i0 has several accumulators",
        ),
        # the sum stored to two outputs: no one element to accumulate in
        (
            SPATIAL,
            "",
            STORE_Y + "\n      memref.store %t, %z[%i] : memref<4xf32>",
            "the accumulator of loop k/i0 must be stored to exactly one output element, "
            "found 2 stores",
        ),
        # y[ix[i]]: an output element chosen by data, not by the spatial loops
        (
            SPATIAL,
            "",
            "%j = memref.load %ix[%i] : memref<4xindex>\n"
            "      memref.store %t, %y[%j] : memref<4xf32>",
            "the output element of loop k/i0 is not indexed by the spatial loops",
        ),
    ],
)
def test_decompose_reduction_refuses_with_the_rules_message(outer, acc2, store, message):
    """decompose.decompose_reduction accumulates in the output element itself, so it
    needs a spatial loop around the reduction, one accumulator, stored to one element
    indexed by the spatial loops; each refusal names the rule."""
    from dlpc.passes.schedule.decompose import decompose_reduction

    text = DECOMPOSE.replace("OUTER", outer).replace("ACC2", acc2).replace("STORE", store)
    module = parse_module(text)
    with pytest.raises(ScheduleError) as e:
        decompose_reduction(module, "k")
    assert str(e.value) == message
