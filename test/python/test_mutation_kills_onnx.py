"""Tests written against surviving mutants of the ONNX importer (issue 35, bench/mutation.py
--area onnx): small hand-built models against onnxruntime (or onnx's reference)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[onnx]')")

from onnx import helper  # noqa: E402
from test_onnx_import import check_numerics, make, vi  # noqa: E402


def test_softplus():
    proto = make([helper.make_node("Softplus", ["x"], ["y"])], [vi("x", [7])], [vi("y", [7])])
    check_numerics(proto, np.array([-20, -3, -0.5, 0, 0.5, 3, 20], np.float32))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_with_explicit_unit_dilations(op):
    """ceil_mode adds a partial last window (5 wide, kernel 2, stride 2: 3 windows), and
    `dilations = [1, 1]` written out is the default, not an unsupported dilation."""
    extra = {"dilations": [1, 1]} if op == "MaxPool" else {}
    node = helper.make_node(
        op, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, **extra
    )
    proto = make([node], [vi("x", [1, 2, 5, 7])], [vi("y", [1, 2, 3, 4])])
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    check_numerics(proto, x)


def test_dilated_pool_with_ceil_mode_pads_its_last_window():
    """Dilation 2 goes by strided slices: with ceil_mode the last window (starting at 6
    of 8, spanning 3) needs one extra padded cell."""
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
        ceil_mode=1,
    )  # fmt: skip
    proto = make([node], [vi("x", [1, 2, 8, 8])], [vi("y", [1, 2, 4, 4])])
    x = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    check_numerics(proto, x)


def test_unit_dilations_keep_the_pool_op():
    """`dilations = [1, 1]` is an ordinary 2-D pool: one graph.max_pool2d, not slices."""
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1, 1])
    proto = make([node], [vi("x", [1, 2, 5, 7])], [vi("y", [1, 2, 4, 6])])
    names = [op.name for op in load_model(proto).module.walk()]
    assert names.count("graph.max_pool2d") == 1 and "graph.slice" not in names
