"""Tests written against surviving mutants of the dialects (issue 35, bench/mutation.py
--area dialects): each one failed on its mutant and passes on the code."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import ints, lower_and_check, module_of, rand
from xdsl.dialects.builtin import Float16Type, f64, i1, i32, i64

from dlpc.dialects import graph as g


@pytest.mark.parametrize("to", [i1, i32, i64], ids=str)
def test_integer_casts_lower_through_the_te_builder(to):
    """te.Builder.cast between integer types: to i1 is `!= 0`, wider is a sign extension,
    narrower a truncation (mutant: every int->int cast taken as a test against 0)."""
    x = ints(3, 4) * 1000
    lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=to)), [x])
    b = x.astype(np.int32)
    lower_and_check(module_of([b], lambda a: g.CastOp.make(a, to=to)), [b])


@pytest.mark.parametrize("to", [f64, Float16Type()], ids=str)
def test_float_casts_of_every_width(to):
    """f32 -> f64 / f16 through graph-to-te and both references: numpy_dtype maps each
    float type (mutant: the f64 key of ELT_TO_NUMPY misspelt)."""
    x = rand(3, 4)
    lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=to)), [x], tol=1e-3)
