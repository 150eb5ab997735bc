"""Tests written against surviving mutants of the schedule primitives (issue 35,
bench/mutation.py --area schedule): hand-written loop IR, scheduled, compiled to C and
compared with the unscheduled nest."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.backends.runtime.cbuild import CFunction
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule._common import ScheduleError
from dlpc.passes.schedule.fuse import fuse
from dlpc.passes.schedule.parallel import parallel

# out[i, j] = x[i, j] * 2 + i - j over rows 1..6 and every other column from 2 (the
# rest of out is not written): loops that neither start at 0 nor step by 1
OFFSET = """
func.func @main(%x: memref<7x12xf32>, %out: memref<7x12xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 1 to 7 step 1 {name = "i0"} {
      loop.for %j = 2 to 12 step 2 {name = "i1"} {
        %a = memref.load %x[%i, %j] : memref<7x12xf32>
        %two = arith.constant 2.0 : f32
        %m = arith.mulf %a, %two : f32
        %d = arith.subi %i, %j : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %s = arith.addf %m, %df : f32
        memref.store %s, %out[%i, %j] : memref<7x12xf32>
      }
    }
  }
  func.return
}"""


WRITTEN = np.ix_(range(1, 7), range(2, 12, 2))


def _expected(x: np.ndarray) -> np.ndarray:
    i, j = np.meshgrid(range(1, 7), range(2, 12, 2), indexing="ij")
    return x[WRITTEN] * 2 + (i - j)


def test_fused_loops_that_do_not_start_at_zero():
    """fuse recovers i = lb + (f / n_in) * step and j likewise, for lb != 0, step != 1."""
    module = parse_module(OFFSET)
    fused = fuse(module, "k", "i0", "i1", "f")
    assert fused.lower == 0 and fused.upper == 6 * 5 and fused.stride == 1
    x = np.random.default_rng(0).standard_normal((7, 12)).astype(np.float32)
    (out,) = CFunction(module, name="fuse_offset")(x)
    np.testing.assert_allclose(out[WRITTEN], _expected(x), rtol=1e-6)


def test_parallel_refuses_a_loop_around_a_parallel_one():
    """One level of parallelism per nest, looking inward as well as outward."""
    module = parse_module(OFFSET)
    parallel(module, "k", "i1")
    with pytest.raises(ScheduleError, match="k/i0 is nested with loop k/i1, which is already"):
        parallel(module, "k", "i0")


def test_script_compute_at_local_is_the_local_primitive():
    """`compute_at P -> K/L local` in a script is compute_at(..., local=True): the
    intermediate shrinks to one iteration's box, unlike the plain form."""
    from pathlib import Path

    from dlpc.passes.schedule.compute_at import compute_at
    from dlpc.passes.schedule.script import apply_script

    path = Path(__file__).parent.parent / "passes" / "loop-compute-at-local.mlir"
    text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("//"))
    scripted, direct, plain = (parse_module(text) for _ in range(3))
    apply_script(scripted, "compute_at relu -> add/i0 local")
    compute_at(direct, "relu", "add", "i0", True)
    compute_at(plain, "relu", "add", "i0", False)
    assert str(scripted) == str(direct) != str(plain)


@pytest.mark.parametrize(
    "line",
    [
        "split mm/i0 by 4 -> io, ii",
        "fuse mm/i0, i1 -> f",
        "fuse mm/i0, i1",
        "unroll mm/i1 by 4",
        "rfactor mm/r0 by 4",
        "compute_at relu -> add/i0 local",
        "serial mm/i0",
    ],
)
def test_script_steps_print_as_written(line):
    """A parsed step renders back to its line (tuning logs and error messages show it)."""
    from dlpc.passes.schedule.script import parse_script

    (step,) = parse_script(line)
    assert str(step) == line
