"""The size limits of constant folding (issue 18: mutants of each survived): the default
`max-elements` of graph-fold-constants (65536), fold_params' constant/param threshold
(1024), and EVAL_LIMIT, above which nothing is evaluated."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.dialects import graph as g
from dlpc.passes import pipeline
from dlpc.passes.graph import fold_constants


def _broadcast_module(rows: int) -> str:
    return (
        f"func.func @main() -> tensor<{rows}x4xf32> {{\n"
        "  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n"
        f"  %b = graph.broadcast %c {{shape = array<i64: {rows}, 4>}} : (tensor<4xf32>) -> tensor<{rows}x4xf32>\n"
        f"  func.return %b : tensor<{rows}x4xf32>\n}}\n"
    )


def _ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("graph.")]


@pytest.mark.parametrize("rows, folded", [(16, True), (16384, True), (16385, False)])
def test_fold_constants_default_limit(rows, folded):
    """Up to 65536 elements (16384 x 4) by default; a non-splat result above stays an op."""
    module = pipeline.parse_module(_broadcast_module(rows))
    pipeline.run("graph-fold-constants", module, pipeline.PipelineOptions())
    assert ("graph.broadcast" not in _ops(module)) == folded


def _param_module(n: int) -> str:
    return (
        f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
        f'  %w = graph.param "w" : tensor<{n}xf32>\n'
        "  %two = graph.constant dense<2.0> : tensor<f32>\n"
        f"  %s = graph.mul %w, %two : (tensor<{n}xf32>, tensor<f32>) -> tensor<{n}xf32>\n"
        f"  %y = graph.add %x, %s : (tensor<{n}xf32>, tensor<{n}xf32>) -> tensor<{n}xf32>\n"
        f"  func.return %y : tensor<{n}xf32>\n}}\n"
    )


@pytest.mark.parametrize("n, kind", [(3, "constant"), (1024, "constant"), (1500, "param")])
def test_fold_params_default_threshold(n, kind):
    """A folded result of at most 1024 elements becomes a graph.constant, a bigger one a
    new weight `folded.N`; either way with the value w * 2."""
    module = pipeline.parse_module(_param_module(n))
    w = np.arange(n, dtype=np.float32)
    weights = fold_constants.fold_params(module, {"w": w})
    ops = _ops(module)
    assert "graph.mul" not in ops
    if kind == "constant":
        const = [op for op in module.walk() if isinstance(op, g.ConstantOp)]
        assert "graph.param" not in ops and len(const) == 1
        np.testing.assert_array_equal(const[0].to_numpy(), w * 2)
    else:
        params = [op.pname for op in module.walk() if isinstance(op, g.ParamOp)]
        assert params == ["folded.0"]
        np.testing.assert_array_equal(weights["folded.0"], w * 2)


def test_nothing_above_the_eval_limit_is_evaluated(monkeypatch):
    monkeypatch.setattr(fold_constants, "EVAL_LIMIT", 15)
    module = pipeline.parse_module(_broadcast_module(4))  # 16 elements
    pipeline.run("graph-fold-constants", module, pipeline.PipelineOptions())
    assert "graph.broadcast" in _ops(module)
    monkeypatch.setattr(fold_constants, "EVAL_LIMIT", 16)
    pipeline.run("graph-fold-constants", module, pipeline.PipelineOptions())
    assert "graph.broadcast" not in _ops(module)


@pytest.mark.parametrize("rows, foldable", [(1 << 22, True), ((1 << 22) + 1, False)])
def test_default_eval_limit_is_2_to_the_24(rows, foldable):
    """An op of 2^24 elements is evaluated, one of 2^24 + 4 is not (the default EVAL_LIMIT);
    asked of the predicate, so that no 64 MB value is built."""
    module = pipeline.parse_module(_broadcast_module(rows))
    const = next(op for op in module.walk() if isinstance(op, g.ConstantOp))
    bcast = next(op for op in module.walk() if op.name == "graph.broadcast")
    assert fold_constants._foldable(bcast, {const.output: const.to_numpy()}) is foldable
