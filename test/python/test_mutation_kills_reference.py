"""Tests written against surviving mutants of the numpy reference and the te evaluator
(issue 35, bench/mutation.py --area reference)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference

PARAM = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %w = graph.param "w" : tensor<3xi64>
  %y = graph.add %x, %w : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  func.return %y : tensor<3xi64>
}"""


def test_a_weight_of_another_kind_is_refused():
    """Float weights for an i64 param are an error naming it; i32 ones are cast."""
    x = np.arange(3, dtype=np.int64)
    with pytest.raises(
        DlpcError, match="weight 'w' has dtype float32 but graph.param declares int64"
    ):
        run_reference(parse_module(PARAM), [x], {"w": np.ones(3, np.float32)})
    (y,) = run_reference(parse_module(PARAM), [x], {"w": np.ones(3, np.int32)})
    np.testing.assert_array_equal(y, x + 1)


def test_te_integer_comparisons():
    """The te evaluator's arith.cmpi on ints (signed predicates) for every graph.compare
    predicate, through graph-to-te against the graph reference (test_graph_to_te compares
    floats only)."""
    from test_graph_to_te import ints, lower_and_check, module_of

    from dlpc.dialects import graph as g

    a, b = ints(3, 4), ints(4)
    a[0, :] = b  # some equal elements
    for pred in g.CompareOp.PREDICATES:
        build = lambda x, y: g.CompareOp.make(x, y, predicate=pred)  # noqa: B023, E731
        lower_and_check(module_of([a, b], build), [a, b])


def test_pad_crops_with_negative_ends():
    """Negative pads at the end crop: 2 of 5 columns (not only the one the numpy backend's
    test crops at the start), 1 of 4 rows."""
    from test_numpy_backend import rand, run_op

    from dlpc.dialects import graph as g

    x = rand(4, 5)
    out = run_op(g.PadOp, [x], pads=(1, 0, -1, -2), value=3.0)
    np.testing.assert_array_equal(out, np.pad(x[:3, :3], ((1, 0), (0, 0)), constant_values=3))
