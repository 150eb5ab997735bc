"""Tests written against surviving mutants of the schedule primitives and the default
schedules' rules (issue 35, bench/mutation.py --area schedule, fourth round), and from a
read of passes/schedule/*.py for decisions no test pinned before the seed-44 draw. Each
checks a small hand-written case: numbers against numpy, or the emitted loops with the
reason they are the right ones."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.backends.runtime.evaluate import run_loop_c
from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule.cache import cache_read

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
