"""Losses through the compiled training step against torch (passes/train/losses.py): class
weights, L1, smooth L1, Huber, KL divergence, plain BCE; a custom loss as a builder
callable and as a `.dlpc` function, differentiated by graph-autodiff; a model with two
inputs and two outputs trained with two targets, called in order and by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_train_optim import BATCH, assert_same_params, small_model, torch_small

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes.train.losses import Loss

F = torch.nn.functional
STEPS = 8


def _train_both(model, loss, torch_loss, targets, net_wrap=lambda y: y, opt=None):
    trainer = dlpc.train(
        model, loss=loss, optimizer=opt or dlpc.optim.SGD(lr=0.1), batch_size=BATCH
    )
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1)
    rng = np.random.default_rng(9)
    ours, theirs = [], []
    for _ in range(STEPS):
        x = rng.standard_normal((BATCH, 6)).astype(np.float32)
        y = targets(rng)
        ours.append(trainer.step(x, y))
        topt.zero_grad()
        value = torch_loss(net_wrap(net(torch.tensor(x))), torch.tensor(y))
        value.backward()
        topt.step()
        theirs.append(value.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert_same_params(trainer, net, names)
    return trainer


def _floats(rng):
    return (rng.standard_normal((BATCH, 3)) * 2).astype(np.float32)


def _probs(rng):
    p = rng.random((BATCH, 3)).astype(np.float32)
    p[0, 0] = 0.0  # a zero target: y log y is 0
    return p / p.sum(axis=1, keepdims=True)


CASES = [
    ("l1", Loss("l1"), F.l1_loss, _floats),
    ("l1_sum", Loss("l1", reduction="sum"), lambda a, b: F.l1_loss(a, b, reduction="sum"), _floats),
    (
        "smooth_l1",
        Loss("smooth_l1", beta=0.5),
        lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
        _floats,
    ),
    ("huber", Loss("huber", delta=0.7), lambda a, b: F.huber_loss(a, b, delta=0.7), _floats),
    (
        "kl_div",
        Loss("kl_div", reduction="batchmean"),
        lambda a, b: F.kl_div(a, b, reduction="batchmean"),
        _probs,
    ),
    ("kl_div_mean", Loss("kl_div"), lambda a, b: F.kl_div(a, b, reduction="mean"), _probs),
    (
        "kl_div_log_target",
        Loss("kl_div", reduction="sum", log_target=True),
        lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True),
        lambda rng: np.log(_probs(rng) + 0.1).astype(np.float32),
    ),
]


@pytest.mark.parametrize("name,loss,torch_loss,targets", CASES, ids=[c[0] for c in CASES])
def test_regression_losses_train_as_torch(tmp_path, name, loss, torch_loss, targets):
    _train_both(small_model(tmp_path), loss, torch_loss, targets)


def test_plain_bce_trains_as_torch(tmp_path):
    path = tmp_path / "sig.dlpc"
    text = open(small_model(tmp_path)).read()
    path.write_text(
        text.replace("return linear(relu", "return sigmoid(linear(relu").replace(
            "fc2.bias)\n", "fc2.bias))\n"
        )
    )
    targets = lambda rng: (rng.random((BATCH, 3)) > 0.5).astype(np.float32)  # noqa: E731
    _train_both(str(path), Loss("bce"), F.binary_cross_entropy, targets, lambda y: torch.sigmoid(y))


@pytest.mark.parametrize("ignore", [None, 1])
def test_class_weights_train_as_torch(tmp_path, ignore):
    weight = (0.2, 1.0, 3.0)
    loss = Loss("cross_entropy", weight=weight, ignore_index=ignore)
    tw = torch.tensor(weight)
    torch_loss = lambda a, b: F.cross_entropy(  # noqa: E731
        a, b, weight=tw, ignore_index=-100 if ignore is None else ignore
    )
    _train_both(small_model(tmp_path), loss, torch_loss, lambda rng: rng.integers(0, 3, BATCH))


def test_builder_loss_is_differentiated(tmp_path):
    """A custom loss given as a builder callable: mean |p - y| + 0.1 mean p^2."""

    def build(b, predictions, targets):
        (p,), (y,) = predictions, targets
        l1 = b.mean(b.abs(b.sub(p, y)))
        return b.add(l1, b.mul(b.mean(b.mul(p, p)), 0.1))

    loss = dlpc.train.GraphLoss(build, targets=[((BATCH, 3), "float32")])
    torch_loss = lambda p, y: (p - y).abs().mean() + 0.1 * (p * p).mean()  # noqa: E731
    _train_both(small_model(tmp_path), loss, torch_loss, _floats)


def test_dlpc_loss_is_differentiated(tmp_path):
    """The same loss written in the model language, given as a path."""
    path = tmp_path / "myloss.dlpc"
    path.write_text(
        """model myloss(p: f32[B, 3], y: f32[B, 3]) {
  return reduce_mean(abs(p - y)) + reduce_mean(p * p) * 0.1
}
"""
    )
    torch_loss = lambda p, y: (p - y).abs().mean() + 0.1 * (p * p).mean()  # noqa: E731
    _train_both(small_model(tmp_path), str(path), torch_loss, _floats)


def test_two_inputs_two_outputs_two_targets(tmp_path):
    """A model with two inputs and two outputs; a .dlpc loss of both with two targets;
    step(*inputs, *targets) and step by name train as torch."""
    model = tmp_path / "two.dlpc"
    model.write_text(
        """model two(a: f32[B, 6], c: f32[B, 2]) {
  param fc1.weight: f32[5, 6] = kaiming(seed=1)
  param fc1.bias: f32[5] = zeros()
  param fc2.weight: f32[3, 5] = kaiming(seed=2)
  param fc2.bias: f32[3] = zeros()
  param side.weight: f32[3, 2] = kaiming(seed=3)
  let h = relu(linear(a, fc1.weight, fc1.bias))
  let out = linear(h, fc2.weight, fc2.bias) + linear(c, side.weight)
  return out, h
}
"""
    )
    loss = """model both(out: f32[B, 3], h: f32[B, 5], y: f32[B, 3], z: f32[B, 5]) {
  return reduce_mean((out - y) * (out - y)) + reduce_mean(abs(h - z)) * 0.5
}"""
    trainer = dlpc.train(
        str(model), loss=loss, optimizer=dlpc.optim.Adam(lr=0.01), batch_size=BATCH
    )
    assert trainer.input_names == ["a", "c"] and trainer.target_names == ["target0", "target1"]
    w = trainer.weights
    params = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    topt = torch.optim.Adam(params.values(), lr=0.01)
    rng = np.random.default_rng(2)
    ours, theirs = [], []
    for k in range(10):
        a = rng.standard_normal((BATCH, 6)).astype(np.float32)
        c = rng.standard_normal((BATCH, 2)).astype(np.float32)
        y = rng.standard_normal((BATCH, 3)).astype(np.float32)
        z = rng.random((BATCH, 5)).astype(np.float32)
        if k % 2:
            ours.append(trainer.step(a, c, y, z))
        else:
            ours.append(trainer.step(a=a, c=c, target0=y, target1=z))
        topt.zero_grad()
        h = F.relu(F.linear(torch.tensor(a), params["fc1.weight"], params["fc1.bias"]))
        out = F.linear(h, params["fc2.weight"], params["fc2.bias"]) + F.linear(
            torch.tensor(c), params["side.weight"]
        )
        value = ((out - torch.tensor(y)) ** 2).mean() + 0.5 * (h - torch.tensor(z)).abs().mean()
        value.backward()
        topt.step()
        theirs.append(value.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert ours[-1] < ours[0]
    for name, p in params.items():
        np.testing.assert_allclose(trainer.weights[name], p.detach().numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(DlpcError, match="the step takes 4 arrays"):
        trainer.step(a, c)
    with pytest.raises(DlpcError, match="no input 'x'"):
        trainer.step(x=a)


def test_loss_errors_are_one_line(tmp_path):
    with pytest.raises(DlpcError, match="class weights apply to class-id losses"):
        Loss("mse", weight=(1.0,))
    with pytest.raises(DlpcError, match="'batchmean' applies to kl_div"):
        Loss("l1", reduction="batchmean")
    with pytest.raises(DlpcError, match="2 class weights for 3 classes"):
        dlpc.train(small_model(tmp_path), loss=Loss(weight=(1.0, 2.0)), batch_size=BATCH)
    bad = "model l(p: f32[B, 3], y: f32[B, 3]) { return p - y }"
    with pytest.raises(DlpcError, match="must return a rank-0 value"):
        dlpc.train(small_model(tmp_path), loss=bad, batch_size=BATCH)
