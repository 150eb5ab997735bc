"""Tests for passes/train written after train seed 49's re-timed survivors (issue 35, eighth
round, bench/mutation.py --area train): the numpy validation loss (`numpy_loss`) of every
kind against PyTorch, with class weights on rank-2 and rank-4 predictions; the graph losses'
values and input gradients with class weights against PyTorch on the numpy reference; the
running statistics of a training batch norm; the closed-form batch-norm adjoint's pattern,
taken and refused. Small float64 shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.ir import Block, Region

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.pipeline import parse_module
from dlpc.passes.train import _grad, schedule, step
from dlpc.passes.train._build import Builder
from dlpc.passes.train.autodiff import differentiate
from dlpc.passes.train.losses import (
    GraphLoss,
    Loss,
    as_loss,
    build_correct,
    build_loss,
    numpy_loss,
    numpy_metric,
    target_type,
)
from dlpc.reference.graph import run_reference

F = torch.nn.functional
WEIGHT = (0.5, 2.0, 1.25)


def _class_case(rank: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (4, 3) if rank == 2 else (2, 3, 2, 2)
    x = rng.standard_normal(shape)
    y = rng.integers(0, 3, (shape[0], *shape[2:]))
    return x, y


def _torch_class(loss: Loss, x, y, reduction=None):
    kw = {"reduction": reduction or loss.reduction}
    if loss.weight is not None:
        kw["weight"] = torch.tensor(loss.weight, dtype=torch.float64)
    if loss.ignore_index is not None:
        kw["ignore_index"] = loss.ignore_index
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y)
    if loss.kind == "cross_entropy":
        out = F.cross_entropy(tx, ty, label_smoothing=loss.label_smoothing, **kw)
    else:
        out = F.nll_loss(tx, ty, **kw)
    return out, tx


CLASS_LOSSES = [
    Loss("cross_entropy", weight=WEIGHT),
    Loss("cross_entropy", weight=WEIGHT, reduction="sum"),
    Loss("cross_entropy", weight=WEIGHT, ignore_index=1),
    Loss("nll", weight=WEIGHT),
    Loss("nll", ignore_index=2),
    Loss("cross_entropy", label_smoothing=0.2),
    Loss("cross_entropy"),
]


@pytest.mark.parametrize("rank", [2, 4])
@pytest.mark.parametrize("loss", CLASS_LOSSES, ids=str)
def test_numpy_class_loss_matches_torch(loss, rank):
    """numpy_loss of the class-id losses (class weights broadcast along axis 1 of a rank-2
    or rank-4 prediction) against PyTorch."""
    x, y = _class_case(rank)
    want, _ = _torch_class(loss, x, y)
    assert numpy_loss(loss, x, y) == pytest.approx(want.item(), rel=1e-12)


@pytest.mark.parametrize("rank", [2, 4])
def test_numpy_class_loss_none_is_the_mean_of_each(rank):
    """reduction 'none' validates with the mean of the per-sample losses (weighted ones
    included, not divided by the weights)."""
    x, y = _class_case(rank, 1)
    loss = Loss("cross_entropy", weight=WEIGHT, reduction="none")
    want, _ = _torch_class(loss, x, y)
    assert numpy_loss(loss, x, y) == pytest.approx(want.mean().item(), rel=1e-12)


POINTWISE = [
    ("mse", Loss("mse"), F.mse_loss, {}),
    ("l1", Loss("l1", reduction="sum"), F.l1_loss, {}),
    ("bce_with_logits", Loss("bce_with_logits"), F.binary_cross_entropy_with_logits, {}),
    ("bce", Loss("bce", reduction="sum"), F.binary_cross_entropy, {}),
    ("smooth_l1", Loss("smooth_l1", beta=0.5), F.smooth_l1_loss, {"beta": 0.5}),
    ("huber", Loss("huber", delta=0.7), F.huber_loss, {"delta": 0.7}),
    ("kl_div", Loss("kl_div", reduction="batchmean"), F.kl_div, {}),
    (
        "kl_div_log",
        Loss("kl_div", log_target=True, reduction="sum"),
        F.kl_div,
        {"log_target": True},
    ),
]


@pytest.mark.parametrize("name, loss, fn, kw", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_numpy_pointwise_loss_matches_torch(name, loss, fn, kw):
    """numpy_loss of each pointwise kind (differences both under and over smooth L1's beta
    and Huber's delta) against PyTorch."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4)) * 1.5
    y = rng.standard_normal((3, 4))
    if loss.kind in ("bce_with_logits", "bce"):
        y = rng.random((3, 4))
    if loss.kind == "bce":
        x = rng.uniform(0.05, 0.95, (3, 4))
    if loss.kind == "kl_div":
        x = np.log(rng.dirichlet(np.ones(4), 3))
        y = rng.dirichlet(np.ones(4), 3)
        if loss.log_target:
            y = np.log(y)
    if loss.kind in ("smooth_l1", "huber"):
        a = np.abs(x - y)
        limit = loss.beta if loss.kind == "smooth_l1" else loss.delta
        assert (a < limit).any() and (a > limit).any()
    want = fn(torch.tensor(x), torch.tensor(y), reduction=loss.reduction, **kw)
    assert numpy_loss(loss, x, y) == pytest.approx(want.item(), rel=1e-12)


def test_numpy_metric_of_each_kind():
    x = np.array([[0.2, 0.9, -1.0], [1.0, 0.0, 0.5], [0.0, 0.1, 0.3], [2.0, 1.0, 0.0]])
    y = np.array([1, 2, 2, 0])
    assert numpy_metric(Loss(), x, y) == 0.75
    assert numpy_metric(Loss(ignore_index=2), x, y) == 1.0
    assert np.isnan(numpy_metric(Loss(ignore_index=2), x, np.array([2, 2, 2, 2])))
    p = np.array([0.3, -0.2, 0.6, 0.0])
    t = np.array([1.0, 0.0, 0.0, 1.0])
    assert numpy_metric(Loss("bce_with_logits"), p, t) == 0.5  # threshold 0: 0.3 and -0.2 agree
    assert numpy_metric(Loss("bce"), p, t) == 0.25  # threshold 0.5: only -0.2 (< 0.5, 0) agrees
    assert numpy_metric(Loss("mse"), p, t) == pytest.approx(np.mean((p - t) ** 2))


def _loss_module(loss: Loss, x_shape, y_shape) -> ModuleOp:
    block = Block(
        arg_types=[graph.tensor_type(x_shape, graph.f64), graph.tensor_type(y_shape, i64)]
    )
    b = Builder.at_end(block)
    value = build_loss(b, loss, block.args[0], block.args[1])
    block.add_op(func.ReturnOp(value))
    types = ([a.type for a in block.args], [value.type])
    return ModuleOp([func.FuncOp("main", types, Region(block))])


@pytest.mark.parametrize("rank", [2, 4])
@pytest.mark.parametrize("loss", CLASS_LOSSES[:5], ids=str)
def test_graph_class_loss_and_gradient_match_torch(loss, rank):
    """build_loss's value and its gradient in the prediction (graph-autodiff) against
    PyTorch, with class weights, on the numpy reference."""
    x, y = _class_case(rank, 2)
    module = _loss_module(loss, x.shape, y.shape)
    want, tx = _torch_class(loss, x, y)
    want.backward()
    assert float(run_reference(module, [x, y], {})[0]) == pytest.approx(want.item(), rel=1e-10)
    differentiate(module, wrt_inputs=True)
    module.verify()
    value, gx, *_ = run_reference(module, [x, y], {})
    assert float(value) == pytest.approx(want.item(), rel=1e-10)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-9, atol=1e-12)  # type: ignore[union-attr]


BN = """func.func @main(%x: tensor<{x}x{t}>, %s: tensor<3x{t}>, %b: tensor<3x{t}>) -> tensor<{x}x{t}> {{
  %m = graph.param "m" : tensor<3x{t}>
  %v = graph.param "v" : tensor<3x{t}>
  %y = graph.batch_norm %x, %s, %b, %m, %v : (tensor<{x}x{t}>, tensor<3x{t}>, tensor<3x{t}>, tensor<3x{t}>, tensor<3x{t}>) -> tensor<{x}x{t}>
  func.return %y : tensor<{x}x{t}>
}}"""


@pytest.mark.parametrize("x", ["4x3", "2x3x2x2"])
def test_running_statistics_match_torch(x):
    """step.py's running-statistics update: the mean's plain, the variance's unbiased (the
    batch variance times n / (n - 1)), each blended by momentum 0.1, as torch's BatchNorm."""
    module = parse_module(BN.format(x=x, t="f32"))  # (step.py's running params are f32)
    f = module.body.block.ops.first
    assert isinstance(f, func.FuncOp)
    shapes = step._training_batch_norm(f)
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    updates = step._running_updates(f, Builder.before(ret), shapes, 0.1)
    f.body.block.erase_op(ret)
    f.body.block.add_op(func.ReturnOp(updates["m"], updates["v"]))
    f.function_type = func.FunctionType.from_lists(
        [a.type for a in f.body.block.args], [updates["m"].type, updates["v"].type]
    )
    module.verify()
    rng = np.random.default_rng(5)
    shape = tuple(int(d) for d in x.split("x"))
    arrays = [rng.standard_normal(shape), rng.uniform(0.5, 2.0, 3), rng.standard_normal(3)]
    arrays = [a.astype(np.float32) for a in arrays]
    m, v = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2.0, 3).astype(np.float32)
    new_m, new_v = run_reference(module, arrays, {"m": m, "v": v})
    bn = (
        torch.nn.BatchNorm1d(3, momentum=0.1, dtype=torch.float32)
        if len(shape) == 2
        else (torch.nn.BatchNorm2d(3, momentum=0.1, dtype=torch.float32))
    )
    bn.running_mean.copy_(torch.tensor(m))  # type: ignore[union-attr]
    bn.running_var.copy_(torch.tensor(v))  # type: ignore[union-attr]
    bn.train()(torch.tensor(arrays[0]))
    np.testing.assert_allclose(new_m, bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)  # type: ignore[union-attr]
    np.testing.assert_allclose(new_v, bn.running_var.numpy(), rtol=1e-5, atol=1e-6)  # type: ignore[union-attr]


def _marked_bn(x="4x3"):
    module = parse_module(BN.format(x=x, t="f64"))
    f = module.body.block.ops.first
    assert isinstance(f, func.FuncOp)
    step._training_batch_norm(f)
    (y,) = [o for o in f.walk() if _grad.BN_TRAIN in o.attributes]
    return f, y


def test_closed_form_pattern_is_taken_on_steps_form():
    """batch_norm_train_vjp takes step.py's form: the adjoints of x, scale and bias."""
    f, y = _marked_bn()
    ret = f.body.block.last_op
    assert ret is not None
    pairs = _grad.batch_norm_train_vjp(Builder.before(ret), y, y.results[0])
    assert pairs is not None
    x, s, b = f.body.block.args
    assert [p[0] for p in pairs] == [x, s, b]
    assert [graph.shape_of(p[1]) for p in pairs] == [(4, 3), (3,), (3,)]


@pytest.mark.parametrize("part", ["add", "scale", "norm", "centred", "rstd"])
def test_closed_form_pattern_is_refused_on_other_forms(part):
    """Each of the form's five checks refuses a graph whose op there is another one."""
    f, y = _marked_bn()
    mul, bias_r = (v.owner for v in y.operands)
    xhat, scale_r = mul.operands  # type: ignore[union-attr]
    norm = xhat.owner
    centred, rstd = norm.operands  # type: ignore[union-attr]
    x = f.body.block.args[0]
    b = Builder.before(y)
    t = y.results[0].type
    other = b.add(x, x)
    target = {
        "add": (y, 0),
        "scale": (mul, 1),
        "norm": (mul, 0),
        "centred": (norm, 0),
        "rstd": (norm, 1),
    }[part]
    if part == "add":
        other = b.add(b.mul(x, x), x)
    target[0].operands[target[1]] = other  # type: ignore[index]
    assert other.type == t
    ret = f.body.block.last_op
    assert ret is not None
    assert _grad.batch_norm_train_vjp(Builder.before(ret), y, y.results[0]) is None


# ---- the graph losses of the pointwise kinds, the counts, the option and shape checks ----


def _float_module(loss: Loss, shape, correct: bool = False) -> ModuleOp:
    block = Block(arg_types=[graph.tensor_type(shape, graph.f64)] * 2)
    b = Builder.at_end(block)
    make = build_correct if correct else build_loss
    value = make(b, loss, block.args[0], block.args[1])
    block.add_op(func.ReturnOp(value))
    types = ([a.type for a in block.args], [value.type])
    return ModuleOp([func.FuncOp("main", types, Region(block))])


@pytest.mark.parametrize("name, loss, fn, kw", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_graph_pointwise_loss_and_gradient_match_torch(name, loss, fn, kw):
    """build_loss of each pointwise kind: its value and its gradients in the prediction and
    the target (graph-autodiff) against PyTorch on the numpy reference, rank 3."""
    rng = np.random.default_rng(6)
    shape = (2, 3, 2)
    x, y = rng.standard_normal(shape) * 1.5, rng.standard_normal(shape)
    if loss.kind in ("bce_with_logits", "bce"):
        y = rng.random(shape)
    if loss.kind == "bce":
        x = rng.uniform(0.05, 0.95, shape)
    if loss.kind == "kl_div":
        x, y = np.log(rng.dirichlet(np.ones(2), (2, 3))), rng.dirichlet(np.ones(2), (2, 3))
        y = np.log(y) if loss.log_target else y
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    want = fn(tx, ty, reduction=loss.reduction, **kw)
    want.backward()
    module = _float_module(loss, shape)
    differentiate(module, wrt_inputs=True)
    module.verify()
    value, gx, gy = run_reference(module, [x, y], {})
    assert float(value) == pytest.approx(want.item(), rel=1e-10)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-9, atol=1e-12)  # type: ignore[union-attr]
    if loss.kind != "bce":  # (torch has no gradient of bce in the target)
        np.testing.assert_allclose(gy, ty.grad.numpy(), rtol=1e-9, atol=1e-12)  # type: ignore[union-attr]


def test_graph_pointwise_none_and_mean_reductions():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    y = np.array([[0.0, 1.0], [0.5, 1.0]])
    each = run_reference(_float_module(Loss("l1", reduction="none"), (2, 2)), [x, y], {})[0]
    np.testing.assert_array_equal(each, [[1.0, 3.0], [0.0, 2.0]])
    mean = run_reference(_float_module(Loss("l1"), (2, 2)), [x, y], {})[0]
    assert float(mean) == 1.5


@pytest.mark.parametrize(
    "kind, want", [("bce_with_logits", 1.0), ("bce", 0.5)], ids=["logits", "probabilities"]
)
def test_build_correct_of_binary_losses(kind, want):
    """The thresholded outputs (logit 0, probability 0.5) that agree with the 0/1 targets,
    each of a sample's 2 elements counting 1/2."""
    x = np.array([[0.3, -0.2], [0.6, 0.0]])
    t = np.array([[1.0, 0.0], [0.0, 1.0]])
    got = run_reference(_float_module(Loss(kind), (2, 2), correct=True), [x, t], {})[0]
    assert float(got) == want


def test_build_correct_with_ignored_labels():
    x = np.array([[0.2, 0.9, -1.0], [1.0, 0.0, 0.5], [0.0, 0.1, 0.3], [2.0, 1.0, 0.0]])
    y = np.array([1, 2, 2, 0])
    block = Block(arg_types=[graph.tensor_type((4, 3), graph.f64), graph.tensor_type((4,), i64)])
    b = Builder.at_end(block)
    value = build_correct(b, Loss(ignore_index=0), block.args[0], block.args[1])
    block.add_op(func.ReturnOp(value))
    f = func.FuncOp("main", ([a.type for a in block.args], [value.type]), Region(block))
    assert float(run_reference(ModuleOp([f]), [x, y], {})[0]) == 2.0  # (row 3 ignored)


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            {"kind": "mse", "weight": (1.0,)},
            "error: class weights apply to class-id losses, not mse",
        ),
        (
            {"weight": (1.0,), "label_smoothing": 0.1},
            "error: class weights with label smoothing are not supported",
        ),
        (
            {"reduction": "batchmean"},
            "error: reduction 'batchmean' applies to kl_div, not cross_entropy",
        ),
        ({"kind": "smooth_l1", "beta": 0.0}, "error: smooth_l1 beta and huber delta must be > 0"),
        ({"kind": "huber", "delta": -1.0}, "error: smooth_l1 beta and huber delta must be > 0"),
        ({"label_smoothing": 1.5}, "error: label smoothing 1.5 is not in [0, 1]"),
        (
            {"kind": "nll", "label_smoothing": 0.1},
            "error: label smoothing applies to cross_entropy, not nll",
        ),
        (
            {"kind": "l1", "ignore_index": 0},
            "error: ignore_index applies to class-id losses, not l1",
        ),
    ],
)
def test_loss_option_diagnostics(kw, message):
    with pytest.raises(DlpcError) as e:
        Loss(**kw)
    assert str(e.value) == message


def test_loss_properties():
    assert Loss(weight=[1, 2]).weight == (1.0, 2.0)
    assert [Loss(k).metric for k in ("nll", "bce", "l1")] == ["accuracy", "accuracy", "mse"]
    assert Loss("bce").classifies is False and Loss("nll").classifies is True
    assert as_loss("huber") == Loss("huber")
    ce = Loss()
    assert as_loss(ce) is ce


def test_shape_and_dtype_diagnostics():
    block = Block(
        arg_types=[
            graph.tensor_type((4,), graph.f64),
            graph.tensor_type((4, 3), graph.f64),
            graph.tensor_type((4,), i64),
            graph.tensor_type((4, 3), i64),
        ]
    )
    v, p, t, ip = block.args
    b = Builder.at_end(block)
    with pytest.raises(DlpcError) as e:
        target_type(Loss(), v.type)  # type: ignore[arg-type]
    assert str(e.value) == "error: cross_entropy needs a prediction [N, C, ...], got 4"
    assert target_type(Loss("mse"), p.type) == p.type  # type: ignore[arg-type]
    with pytest.raises(DlpcError) as e:
        build_loss(b, Loss("nll"), p, p)
    assert str(e.value) == (
        "error: nll targets have shape 4x3, expected 4 for predictions of shape 4x3"
    )
    with pytest.raises(DlpcError) as e:
        build_loss(b, Loss("mse"), ip, ip)
    assert str(e.value) == "error: mse needs float predictions"
    with pytest.raises(DlpcError) as e:
        build_loss(b, Loss(weight=(1.0, 2.0)), p, t)
    assert str(e.value) == "error: 2 class weights for 3 classes"


# ---- a user's graph loss: a builder callable or a module's @main, and its checks -------------

L1_TEXT = """func.func @main(%p: tensor<2x2xf64>, %t: tensor<2x2xf64>) -> tensor<f64> {
  %d = graph.sub %p, %t : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %a = graph.abs %d : (tensor<2x2xf64>) -> tensor<2x2xf64>
  %s = graph.reduce_sum %a : (tensor<2x2xf64>) -> tensor<f64>
  func.return %s : tensor<f64>
}"""


def _apply(loss: GraphLoss, n_targets: int = 1):
    t = graph.tensor_type((2, 2), graph.f64)
    types = [t, *loss.target_types(1)][: 1 + n_targets]
    block = Block(arg_types=types)
    b = Builder.at_end(block)
    value = loss.apply(b, [block.args[0]], list(block.args[1:]))
    block.add_op(func.ReturnOp(value))
    f = func.FuncOp("main", (types, [value.type]), Region(block))
    return ModuleOp([f])


def test_graph_loss_from_a_module_and_a_builder():
    x, y = np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([[0.0, 1.0], [0.5, 1.0]])
    from_module = GraphLoss(module=parse_module(L1_TEXT), name="l1")
    assert from_module.target_types(1) == [graph.tensor_type((2, 2), graph.f64)]
    assert float(run_reference(_apply(from_module), [x, y], {})[0]) == 6.0
    built = GraphLoss(
        lambda b, p, t: b.sum(b.abs(b.sub(p[0], t[0]))), targets=[((2, 2), "float64")]
    )
    assert float(run_reference(_apply(built), [x, y], {})[0]) == 6.0


def _text_error(text: str, name="mine", n_targets=1) -> str:
    with pytest.raises(DlpcError) as e:
        _apply(GraphLoss(module=parse_module(text), name=name), n_targets)
    return str(e.value)


def test_graph_loss_diagnostics():
    with pytest.raises(DlpcError) as e:
        GraphLoss()
    assert str(e.value) == "error: a graph loss needs a builder callable or a module, one"
    one_arg = L1_TEXT.replace(", %t: tensor<2x2xf64>", "").replace("%p, %t", "%p, %p")
    with pytest.raises(DlpcError) as e:
        GraphLoss(module=parse_module(one_arg), name="mine").target_types(1)
    assert str(e.value) == (
        "error: loss 'mine' takes 1 arguments; the model gives 1 predictions and it needs "
        "at least one target"
    )
    assert _text_error(L1_TEXT.replace("@main", "@other")) == (
        "error: the loss module has no func.func @main"
    )
    three = L1_TEXT.replace("%t: tensor<2x2xf64>)", "%t: tensor<2x2xf64>, %u: tensor<2x2xf64>)")
    assert _text_error(three, n_targets=1) == "error: loss 'mine' takes 3 arguments, given 2"
    two = L1_TEXT.replace(
        "func.return %s : tensor<f64>", "func.return %s, %s : tensor<f64>, tensor<f64>"
    )
    two = two.replace("-> tensor<f64> {", "-> (tensor<f64>, tensor<f64>) {")
    assert _text_error(two) == "error: loss 'mine' must return one value"
    with_param = L1_TEXT.replace("  %d", '  %w = graph.param "w" : tensor<2x2xf64>\n  %d')
    assert _text_error(with_param) == "error: loss 'mine' has a graph.param ('w'); losses have none"
    not_scalar = L1_TEXT.replace(
        "func.return %s : tensor<f64>", "func.return %a : tensor<2x2xf64>"
    ).replace("-> tensor<f64> {", "-> tensor<2x2xf64> {")
    assert _text_error(not_scalar) == "error: loss 'mine' must return a rank-0 value"


def test_graph_loss_argument_type_is_checked():
    loss = GraphLoss(module=parse_module(L1_TEXT), name="mine")
    t = graph.tensor_type((2, 2), graph.f64)
    block = Block(arg_types=[t, graph.tensor_type((2, 2), graph.f32)])
    with pytest.raises(DlpcError) as e:
        loss.apply(Builder.at_end(block), [block.args[0]], [block.args[1]])
    assert str(e.value) == (
        "error: loss 'mine' argument 1 has type tensor<2x2xf64>, given tensor<2x2xf32>"
    )


# ---- written after train seed 50 (its killable survivors) -----------------------------------


class _Groups:
    def __init__(self, groups):
        self.param_groups = groups


@pytest.mark.parametrize("threshold_mode", ["rel", "abs"])
@pytest.mark.parametrize("mode", ["max", "min"])
def test_reduce_on_plateau_threshold_against_torch(mode, threshold_mode):
    """ReduceLROnPlateau's improvement test in each mode: a metric better than the best by
    less than the threshold (10 %, or 0.1 absolute) is no improvement; the lr after each
    step equals torch's."""
    options = dict(mode=mode, factor=0.5, patience=1, threshold=0.1)
    options["threshold_mode"] = threshold_mode
    p = torch.nn.Parameter(torch.zeros(1))
    topt = torch.optim.SGD([p], lr=1.0)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **options)  # type: ignore[arg-type]
    groups = _Groups([{"lr": 1.0}])
    ds = schedule.ReduceLROnPlateau(groups, **options)  # type: ignore[arg-type]
    ups = [1.0, 1.05, 1.08, 1.5, 1.55, 1.6, 1.62, 2.0]  # small gains, then big ones
    metrics = ups if mode == "max" else [1 / u for u in ups]
    lrs = []
    for m in metrics:
        ts.step(m)
        ds.step(m)
        assert groups.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"])
        lrs.append(groups.param_groups[0]["lr"])
    assert lrs[-1] < 1.0  # (the small gains did not count)


def test_dilate_by_one_adds_no_op():
    """_grad.dilate with step 1 is the value itself (no reshape / pad ops for a stride-1
    conv's gradient); step 2 puts a zero after each element."""
    block = Block(arg_types=[graph.tensor_type((2, 3), graph.f64)])
    b = Builder.at_end(block)
    v = block.args[0]
    assert _grad.dilate(b, v, 1, 1) is v
    assert not list(block.ops)
    wide = _grad.dilate(b, v, 1, 2)
    block.add_op(func.ReturnOp(wide))
    f = func.FuncOp("main", ([v.type], [wide.type]), Region(block))
    x = np.arange(6.0).reshape(2, 3)
    got = run_reference(ModuleOp([f]), [x], {})[0]
    np.testing.assert_array_equal(got, [[0, 0, 1, 0, 2, 0], [3, 0, 4, 0, 5, 0]])


def test_load_arrays_of_npz_npy_and_compressed_files(tmp_path):
    """data.load_arrays: np.savez's members (a local header with a zip64 extra field, read
    as a memmap at the right offset), a compressed member, a .npy, an empty array; and the
    one-line errors."""
    from dlpc.passes.train.data import columns, load_arrays

    a, c = np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[1, 2], [3, 4]], order="F")
    np.savez(tmp_path / "d.npz", a=a, long_member_name=c, e=np.zeros((0, 3)))
    out = load_arrays(tmp_path / "d.npz")
    assert sorted(out) == ["a", "e", "long_member_name"]
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["long_member_name"], c)
    assert out["e"].shape == (0, 3)
    assert isinstance(out["a"], np.memmap)
    np.savez_compressed(tmp_path / "z.npz", a=a)
    np.testing.assert_array_equal(load_arrays(tmp_path / "z.npz")["a"], a)
    np.save(tmp_path / "x.npy", c)
    np.testing.assert_array_equal(load_arrays(tmp_path / "x.npy")["x"], c)
    assert [x.shape for x in columns(out, ["e", "a"], "d.npz")] == [(0, 3), (3, 4)]
    with pytest.raises(DlpcError) as e:
        columns(out, ["a", "y"], "d.npz")
    assert str(e.value) == "error: data d.npz has no 'y' array (it has a, long_member_name, e)"
    with pytest.raises(DlpcError) as e:
        load_arrays(tmp_path / "none.npz")
    assert str(e.value) == f"error: no such data file: {tmp_path / 'none.npz'}"
    (tmp_path / "t.txt").write_text("1 2")
    with pytest.raises(DlpcError) as e:
        load_arrays(tmp_path / "t.txt")
    assert str(e.value) == f"error: data file {tmp_path / 't.txt'} must be .npy or .npz"
    np.savez(tmp_path / "o.npz", o=np.array([{}, 1], dtype=object))
    with pytest.raises(DlpcError) as e:
        load_arrays(tmp_path / "o.npz")
    assert str(e.value) == f"error: data {tmp_path / 'o.npz'}: member o.npy holds Python objects"


def test_datasets_gather_and_batches():
    """data.py's data sets: an ArrayDataset's samples and batches, a user's data set
    gathered sample by sample, which values count as data sets, and the one-line errors."""
    from dlpc.passes.train.data import ArrayDataset, gather, is_dataset, iterate_batches

    x, y = np.arange(8.0).reshape(4, 2), [0, 1, 1, 0]
    ds = ArrayDataset(x, y)
    assert len(ds) == 4 and ds[2][0].tolist() == [4.0, 5.0] and ds[2][1] == 1
    xb, yb = gather(ds, np.array([3, 1]))
    assert xb.tolist() == [[6.0, 7.0], [2.0, 3.0]] and yb.tolist() == [0, 1]

    class Samples:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return (np.full(2, i), i * 10)

    xb, yb = gather(Samples(), np.array([2, 0]))
    assert xb.tolist() == [[2, 2], [0, 0]] and yb.tolist() == [20, 0]
    assert is_dataset(Samples()) and is_dataset([(1, 2)]) and is_dataset(ds)
    assert not any(is_dataset(v) for v in (x, "data.npz", b"x", Path("d.npz"), 3))
    assert [[a.tolist() for a in b] for b in iterate_batches([(x[:1], [1]), [x[1:2], [0]]])] == [
        [[[0.0, 1.0]], [1]],
        [[[2.0, 3.0]], [0]],
    ]
    for call, message in [
        (lambda: ArrayDataset(), "error: a data set needs at least one array"),
        (lambda: ArrayDataset(x, [1, 2]), "error: the data's arrays have different lengths [2, 4]"),
        (
            lambda: gather([np.zeros(2)], np.array([0])),
            "error: a data set's sample must be a tuple (inputs..., targets...), got ndarray",
        ),
        (
            lambda: gather([(1, 2), (1,)], np.array([0, 1])),
            "error: the data set's samples have different lengths",
        ),
        (
            lambda: list(iterate_batches([(x, y), x])),
            "error: batch 1 must be a tuple (inputs..., targets...), got ndarray",
        ),
    ]:
        with pytest.raises(DlpcError) as e:
            call()
        assert str(e.value) == message
