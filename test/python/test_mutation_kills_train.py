"""Tests written against surviving mutants of autodiff and training (issue 35,
bench/mutation.py --area train)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.passes.pipeline import parse_module
from dlpc.passes.train.autodiff import differentiate
from dlpc.reference.graph import run_reference


@pytest.mark.parametrize("param_first", [True, False], ids=["w@x", "x@w"])
def test_matmul_gradient_of_one_operand(param_first):
    """Only the param's gradient is wanted (the input's is not): each side of the matmul
    rule computes its own operand's gradient."""
    mm = "%w, %x : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>"
    if not param_first:
        mm = "%x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>"
    xt = "tensor<3x4xf32>" if param_first else "tensor<4x2xf32>"
    yt = "tensor<2x4xf32>" if param_first else "tensor<4x3xf32>"
    module = parse_module(f"""
func.func @main(%x: {xt}) -> tensor<f32> {{
  %w = graph.param "w" : tensor<2x3xf32>
  %y = graph.matmul {mm}
  %l = graph.reduce_sum %y : ({yt}) -> tensor<f32>
  func.return %l : tensor<f32>
}}""")
    differentiate(module)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4) if param_first else (4, 2)).astype(np.float32)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    _, gw = run_reference(module, [x], {"w": w})
    # d/dw sum(w @ x) = 1 @ x^T; d/dw sum(x @ w) = x^T @ 1
    want = np.ones((2, 4)) @ x.T if param_first else x.T @ np.ones((4, 3))
    np.testing.assert_allclose(gw, want, rtol=1e-5)


@pytest.mark.parametrize(
    "kind, x", [("bce_with_logits", [2.0, -1.0, -0.5, -3.0]), ("bce", [0.9, 0.2, 0.4, 0.1])]
)
def test_binary_accuracy_thresholds_outputs_and_labels(kind, x):
    """The binary losses' metric: outputs above 0 (logits) or 0.5 (probabilities) against
    labels above 0.5; here predictions 1, 0, 0, 0 against labels 1, 0, 0, 1: 3 of 4."""
    from dlpc.passes.train.losses import Loss, numpy_metric

    y = np.array([1.0, 0.0, 0.0, 1.0])
    assert numpy_metric(Loss(kind), np.array(x), y) == 0.75


def test_samples_of_different_lengths_are_refused():
    """A sample longer than the first one is as wrong as a shorter one."""
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.data import gather

    samples = [(np.zeros(2), 0), (np.ones(2), 1, "extra")]
    with pytest.raises(DlpcError, match="samples have different lengths"):
        gather(samples, np.array([0, 1]))
    with pytest.raises(DlpcError, match="samples have different lengths"):
        gather(samples[::-1], np.array([0, 1]))


@pytest.mark.parametrize(
    "options, ok",
    [
        ({"momentum": 0.9}, True),
        ({"momentum": 0.9, "dampening": 0.1}, False),
        ({"momentum": 0.0}, False),
    ],
)
def test_nesterov_needs_momentum_and_no_dampening(options, ok):
    """SGD(nesterov=True) as torch takes it: momentum > 0 and dampening 0."""
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.optim import SGD

    if ok:
        SGD(lr=0.1, nesterov=True, **options)
    else:
        with pytest.raises(DlpcError, match="nesterov momentum needs momentum > 0"):
            SGD(lr=0.1, nesterov=True, **options)


def test_what_counts_as_a_data_set():
    """A sequence of samples is a data set; an array, a string, bytes or a path (things
    with a length that are data or where to find it) are not."""
    from pathlib import Path

    from dlpc.passes.train.data import is_dataset

    class Samples:
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return (np.zeros(3), i)

    assert is_dataset([(np.zeros(3), 0)]) and is_dataset(Samples())
    for data in (np.zeros((2, 3)), "data.npz", b"data.npz", Path("data.npz")):
        assert not is_dataset(data)


@pytest.mark.parametrize(
    "kind, option, want",
    [
        ("huber", {"delta": 2.0}, lambda d: np.where(d < 2, 0.5 * d * d, 2 * (d - 1))),
        ("smooth_l1", {"beta": 0.5}, lambda d: np.where(d < 0.5, d * d, d - 0.25)),
    ],
)
def test_huber_and_smooth_l1_away_from_one(kind, option, want):
    """Huber (0.5 d^2 inside delta, delta (d - delta / 2) outside) and smooth L1 (its
    quadratic divided by beta) with delta, beta != 1, per element on numpy."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region

    from dlpc import api
    from dlpc.dialects import graph
    from dlpc.model import Model
    from dlpc.passes.train._build import Builder
    from dlpc.passes.train.losses import Loss, build_loss

    block = Block(arg_types=[graph.tensor_type((6,)), graph.tensor_type((6,))])
    loss = build_loss(
        Builder.at_end(block), Loss(kind=kind, reduction="none", **option), *block.args
    )
    block.add_op(func.ReturnOp(loss))
    f = func.FuncOp("main", ([a.type for a in block.args], [loss.type]), Region(block))
    x = np.array([0.0, 0.3, 1.0, -1.5, 3.0, -4.0], np.float32)
    y = np.zeros(6, np.float32)
    (out,) = api.compile(Model(ModuleOp([f]), {}, "loss"), target="numpy")(x, y)
    np.testing.assert_allclose(out, want(np.abs(x)), rtol=1e-6)
