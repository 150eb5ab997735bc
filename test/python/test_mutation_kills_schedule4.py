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
