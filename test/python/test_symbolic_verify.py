"""Symbolic shapes an op cannot take are verifier errors naming the op (issue 29), not a
SymbolicError escaping from shape inference as a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.symdims import SymbolicError
from dlpc.passes.pipeline import parse_module

TEXT = (Path(__file__).parents[1] / "dialects" / "graph" / "symbolic-invalid.mlir").read_text()


def test_parse_module_names_the_op_of_a_symbolic_slice_with_step_2():
    with pytest.raises(VerifyException) as info:
        parse_module(TEXT)
    assert not isinstance(info.value, SymbolicError)
    first = str(info.value).splitlines()[0]
    assert first == "graph.slice: a slice with symbolic bounds needs step 1, got 2"
