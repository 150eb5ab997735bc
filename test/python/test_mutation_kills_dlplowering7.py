"""dlp-lowering seed 53's last untested survivor (issue 35, ninth round): the elementwise
matcher (dlp_select/elementwise.py `check_expr`) combines a per-row value ("row": one
value per row, broadcast over its columns) only with a whole vector, by add, sub, mul or
div; two per-row values combined (`r[i] + q[i]`) are refused, and the kernel runs as
scalar loops with the right answer (the simulator against numpy)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline

# out[i, k, j] = x[i, k, j] OP2 (r[i, k] OP1 q[i, k]): r and q one value per row (i, k),
# the tasks' tiles along i
ROWS = """builtin.module {{
  func.func @main(%x: memref<4x4x16xf32> {{dlpc.name = "x"}}, %r: memref<4x4xf32> {{dlpc.name = "r"}}, %q: memref<4x4xf32> {{dlpc.name = "q"}}, %out0: memref<4x4x16xf32>) attributes {{dlpc.num_inputs = 3 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
    loop.kernel "ew" attributes {{origin = "graph.add"}} {{
      loop.for %i = 0 to 4 step 1 {{name = "i", parallel}} {{
      loop.for %k = 0 to 4 step 1 {{name = "k"}} {{
        loop.for %j = 0 to 16 step 1 {{name = "j", vectorize}} {{
          %xv = memref.load %x[%i, %k, %j] : memref<4x4x16xf32>
          %rv = memref.load %r[%i, %k] : memref<4x4xf32>
          %qv = memref.load %q[%i, %k] : memref<4x4xf32>
{body}
          memref.store %v, %out0[%i, %k, %j] : memref<4x4x16xf32>
        }}
      }}
      }}
    }}
    func.return
  }}
}}
"""
_RNG = np.random.default_rng(7)
X = _RNG.standard_normal((4, 4, 16)).astype(np.float32)
R = _RNG.standard_normal((4, 4)).astype(np.float32)
Q = _RNG.standard_normal((4, 4)).astype(np.float32) + 3.0  # (away from 0: divided by)


def _lowered(body: str):
    text = ROWS.format(body=body)
    out = lower_to_dlp(pipeline.parse_module(text))
    (kernel,) = [op for op in out.walk() if op.name == "dlp.kernel"]
    reason = kernel.attributes.get("dlpc.scalar")
    ops = Counter(op.name for op in out.walk() if op.name.startswith("dlp."))
    (got,) = compile_dlp(pipeline.parse_module(text), name="m")(X, R, Q)
    return ops, reason, got


def test_a_row_times_a_vector_takes_an_intrinsic():
    """The matcher's accepted form, for contrast: x[i, k, j] * r[i, k] takes an intrinsic
    (no scalar loops)."""
    ops, reason, got = _lowered("          %v = arith.mulf %xv, %rv : f32")
    assert reason is None and ops["dlp.kernel"] == 1
    np.testing.assert_allclose(got, X * R[..., None], rtol=1e-6, atol=1e-6)


def test_two_rows_combined_are_refused_and_run_as_scalar_loops():
    """elementwise.py:295 (seed 53: `pair != {"vec", "row"}` -> `>` accepted {"row"}, a row
    combined with a row, as a vector op): x * (r + q) and x * (r / q) run as scalar loops
    (`dlpc.scalar` names why), with numpy's answer."""
    for op, combine in (("addf", R + Q), ("divf", R / Q)):
        body = (
            f"          %rq = arith.{op} %rv, %qv : f32\n          %v = arith.mulf %xv, %rq : f32"
        )
        ops, reason, got = _lowered(body)
        assert reason is not None, op
        np.testing.assert_allclose(got, X * combine[..., None], rtol=1e-6, atol=1e-6)
