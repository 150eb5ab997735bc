"""Losses (passes/train/losses.py) as graph compositions, against PyTorch on numpy and C,
and their option checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.ir import Block, Region

from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.model import Model
from dlpc.passes.train._build import Builder
from dlpc.passes.train.losses import Loss, build_correct, build_loss

torch.manual_seed(0)


# ------------------------------------------------------------------------ losses


def _loss_model(loss: Loss, pred_shape, target_shape, target_dtype) -> Model:
    block = Block(
        arg_types=[graph.tensor_type(pred_shape), graph.tensor_type(target_shape, target_dtype)]
    )
    b = Builder.at_end(block)
    values = [build_loss(b, loss, block.args[0], block.args[1])]
    if loss.classifies:
        values.append(build_correct(b, loss, block.args[0], block.args[1]))
    block.add_op(func.ReturnOp(*values))
    f = func.FuncOp("main", ([a.type for a in block.args], [v.type for v in values]), Region(block))
    return Model(ModuleOp([f]), {}, "loss")


CE_CASES = [
    Loss(),
    Loss(reduction="sum"),
    Loss(reduction="none"),
    Loss(label_smoothing=0.1),
    Loss(ignore_index=-100),
    Loss(ignore_index=2, label_smoothing=0.2, reduction="mean"),
]


@pytest.mark.parametrize("target", ["numpy", "c"])
@pytest.mark.parametrize("loss", CE_CASES, ids=str)
def test_cross_entropy_matches_torch(loss, target):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    if loss.ignore_index is not None:
        y[1] = loss.ignore_index if loss.ignore_index < 0 else y[1]
    fn = api.compile(_loss_model(loss, (6, 5), (6,), i64), target=target)
    out = fn(x, y)
    want = torch.nn.functional.cross_entropy(
        torch.tensor(x),
        torch.tensor(y),
        reduction=loss.reduction,
        ignore_index=-100 if loss.ignore_index is None else loss.ignore_index,
        label_smoothing=loss.label_smoothing,
    )
    np.testing.assert_allclose(out[0], want.numpy(), rtol=1e-5, atol=1e-6)
    valid = y != (loss.ignore_index if loss.ignore_index is not None else -12345)
    assert out[1] == np.sum((x.argmax(1) == y) & valid)


@pytest.mark.parametrize("kind", ["nll", "mse", "bce_with_logits"])
def test_other_losses_match_torch(kind):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    F = torch.nn.functional
    if kind == "nll":
        y = rng.integers(0, 3, (4, 2))
        model = _loss_model(Loss(kind), x.shape, y.shape, i64)
        want = F.nll_loss(torch.tensor(x), torch.tensor(y))
    else:
        y = rng.random(x.shape).astype(np.float32)
        model = _loss_model(Loss(kind), x.shape, y.shape, graph.f32)
        f = F.mse_loss if kind == "mse" else F.binary_cross_entropy_with_logits
        want = f(torch.tensor(x), torch.tensor(y))
    for target in ("numpy", "c"):
        out = api.compile(model, target=target)(x, y)
        np.testing.assert_allclose(out[0], want.numpy(), rtol=1e-5, atol=1e-6)


def test_loss_options_are_checked():
    with pytest.raises(DlpcError, match="unknown loss 'hinge'"):
        Loss("hinge")
    with pytest.raises(DlpcError, match="label smoothing applies to cross_entropy"):
        Loss("mse", label_smoothing=0.1)
    with pytest.raises(DlpcError, match="unknown reduction"):
        Loss(reduction="max")
