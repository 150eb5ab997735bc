"""LARS with biases (or any params) excluded from the layer adaptation and the weight decay,
against the formula in float64 numpy; and momentum switched on from 0 by OneCycleLR for
every optimizer that has a momentum (or beta1), against torch (f64) or the LARS formula."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from test_train_optim import BATCH, assert_same_params, batches, run_both, small_model, torch_small

import dlpc

F = torch.nn.functional


def _lars_reference(weights, data, lr, momenta, weight_decay, eta, eps, excluded):
    """LARS in float64 numpy (gradients from torch in float64): the paper's formula; an
    excluded param takes ratio 1 and no weight decay (SimCLR's LARS). `momenta`: the
    momentum of each step."""
    net, names = torch_small(weights, torch.float64)
    params = {names[n]: p.detach().numpy().copy() for n, p in net.named_parameters()}
    bufs = {k: np.zeros_like(v) for k, v in params.items()}
    for (x, y), momentum in zip(data, momenta):
        for tname, p in net.named_parameters():
            p.data = torch.tensor(params[names[tname]])
            p.grad = None
        F.cross_entropy(net(torch.tensor(x)), torch.tensor(y)).backward()
        for tname, p in net.named_parameters():
            name = names[tname]
            w, g = params[name], p.grad.numpy()
            wd = 0.0 if excluded(name) else weight_decay
            wn, gn = np.linalg.norm(w), np.linalg.norm(g)
            ratio = eta * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
            if excluded(name):
                ratio = 1.0
            bufs[name] = momentum * bufs[name] + lr * ratio * (g + wd * w)
            params[name] = w - bufs[name]
    return params


def _is_bias(name: str) -> bool:
    return name.endswith(".bias")


@pytest.mark.parametrize("how", ["patterns", "predicate", "param_groups"])
def test_lars_excludes_biases_as_the_formula_does(tmp_path, how):
    """Biases excluded (by pattern, by predicate, or by hand as a group with adapt=False
    and no weight decay): 20 steps of an f64 model equal the float64 formula's."""
    options = {"lr": 0.5, "momentum": 0.9, "weight_decay": 0.01, "eta": 0.02}
    if how == "patterns":
        opt = dlpc.optim.LARS(**options, exclude=["*.bias"])
    elif how == "predicate":
        opt = dlpc.optim.LARS(**options, exclude=_is_bias)
    else:
        group = {"params": "*.bias", "adapt": False, "weight_decay": 0.0}
        opt = dlpc.optim.LARS(**options, groups=(group,))
    trainer = dlpc.train(small_model(tmp_path, "f64"), optimizer=opt, batch_size=BATCH)
    start = trainer.weights
    data = batches(dtype=np.float64)
    for x, y in data:
        trainer.step(x, y)
    want = _lars_reference(start, data, 0.5, [0.9] * len(data), 0.01, 0.02, 1e-8, _is_bias)
    got = trainer.weights
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)
    # the adaptation matters: without the exclusion the biases move otherwise
    plain = _lars_reference(start, data, 0.5, [0.9] * len(data), 0.01, 0.02, 1e-8, lambda n: False)
    assert not np.allclose(plain["fc1.bias"], want["fc1.bias"], rtol=1e-6)
    biases = [g for g in trainer.param_groups if "fc1.bias" in g["params"]]
    assert biases[0]["params"] == ["fc1.bias", "fc2.bias"]
    assert biases[0]["adapt"] is False and biases[0]["weight_decay"] == 0.0


def test_lars_exclude_keeps_declared_groups_and_checks_its_argument():
    opt = dlpc.optim.LARS(exclude="*.bias", groups=({"params": "fc1.*", "lr": 0.2},))
    groups = opt.assign(["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])
    assert [g["params"] for g in groups] == [
        ["fc1.weight"],
        ["fc2.weight"],
        ["fc1.bias"],
        ["fc2.bias"],
    ]
    assert [g["lr"] for g in groups] == [0.2, 0.1, 0.2, 0.1]  # each keeps its group's rate
    assert [g["adapt"] for g in groups] == [True, True, False, False]
    with pytest.raises(dlpc.diagnostics.DlpcError, match="exclude must be"):
        dlpc.optim.LARS(exclude=3)


TORCH_MOMENTUM = {
    # (dlpc optimizer built with momentum / beta1 0, torch's)
    "rmsprop": (
        lambda: dlpc.optim.RMSprop(lr=0.01),
        lambda ps: torch.optim.RMSprop(ps, lr=0.01),
    ),
    "adam": (
        lambda: dlpc.optim.Adam(lr=0.01, betas=(0.0, 0.999)),
        lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.0, 0.999)),
    ),
    "adamw": (
        lambda: dlpc.optim.AdamW(lr=0.01, betas=(0.0, 0.999)),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.0, 0.999)),
    ),
    "nadam": (
        lambda: dlpc.optim.NAdam(lr=0.01, betas=(0.0, 0.999)),
        lambda ps: torch.optim.NAdam(ps, lr=0.01, betas=(0.0, 0.999)),
    ),
}


@pytest.mark.parametrize("name", sorted(TORCH_MOMENTUM))
def test_onecycle_switches_momentum_on_from_zero(tmp_path, name):
    """An optimizer built with momentum (or beta1) 0: OneCycleLR given to the Trainer
    switches it on and cycles it as torch's does, over 20 steps (losses and params)."""
    ours_opt, torch_opt = TORCH_MOMENTUM[name]
    schedule = {"max_lr": 0.05, "total_steps": 20}
    trainer = dlpc.train(
        small_model(tmp_path, "f64"),
        optimizer=ours_opt(),
        batch_size=BATCH,
        scheduler=functools.partial(dlpc.train.lr_scheduler.OneCycleLR, **schedule),
    )
    net, names = torch_small(trainer.weights, torch.float64)
    topt = torch_opt(net.parameters())
    theirs = torch.optim.lr_scheduler.OneCycleLR(topt, **schedule)
    key = "momentum" if name == "rmsprop" else "betas"

    def after(_):
        trainer.scheduler.step()
        theirs.step()
        assert trainer.param_groups[0][key] == pytest.approx(topt.param_groups[0][key])

    mine, torch_losses = run_both(trainer, net, topt, batches(dtype=np.float64), after)
    np.testing.assert_allclose(mine, torch_losses, rtol=1e-9)
    assert_same_params(trainer, net, names, rtol=1e-9, atol=1e-12)


def test_onecycle_switches_lars_momentum_on_from_zero(tmp_path):
    """LARS built with momentum 0: OneCycleLR switches the momentum on; 20 steps of an f64
    model equal the formula's with the same per-step momenta."""
    opt = dlpc.optim.LARS(lr=0.5, momentum=0.0, eta=0.02, exclude="*.bias")
    trainer = dlpc.train(
        small_model(tmp_path, "f64"),
        optimizer=opt,
        batch_size=BATCH,
        scheduler=functools.partial(dlpc.train.lr_scheduler.OneCycleLR, max_lr=0.5, total_steps=20),
    )
    start = trainer.weights
    data = batches(dtype=np.float64)
    rates, momenta = [], []
    for x, y in data:
        rates.append(trainer.param_groups[0]["lr"])
        momenta.append(trainer.param_groups[0]["momentum"])
        trainer.step(x, y)
        trainer.scheduler.step()
    assert momenta[0] > 0.9 and len(set(momenta)) > 5
    want = _reference_with_rates(start, data, rates, momenta)
    for name, value in want.items():
        np.testing.assert_allclose(trainer.weights[name], value, rtol=1e-10, atol=1e-12)


def _reference_with_rates(start, data, rates, momenta):
    """The LARS formula (biases excluded, no weight decay) one step at a time with each
    step's rate and momentum, the buffers carried over."""
    params, bufs = dict(start), None
    for k, batch in enumerate(data):
        net, names = torch_small(params, torch.float64)
        current = {names[n]: p.detach().numpy().copy() for n, p in net.named_parameters()}
        bufs = bufs or {n: np.zeros_like(v) for n, v in current.items()}
        net.zero_grad()
        F.cross_entropy(net(torch.tensor(batch[0])), torch.tensor(batch[1])).backward()
        for tname, p in net.named_parameters():
            name = names[tname]
            w, g = current[name], p.grad.numpy()
            wn, gn = np.linalg.norm(w), np.linalg.norm(g)
            ratio = 0.02 * wn / (gn + 1e-8) if wn > 0 and gn > 0 and not _is_bias(name) else 1.0
            bufs[name] = momenta[k] * bufs[name] + rates[k] * ratio * g
            params[name] = w - bufs[name]
    return {n: params[n] for n in start if n in params}
