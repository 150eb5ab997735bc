"""Training gaps closed against torch (or a float64 numpy reference where torch has
none): a custom graph loss's validation loss, BCE's training accuracy during `fit`, LARS,
and OneCycleLR cycling the momentum of an SGD built with momentum 0."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from test_train_optim import (
    BATCH,
    assert_same_params,
    batches,
    run_both,
    small_model,
    torch_small,
)

import dlpc

F = torch.nn.functional


def _l1_plus(b, predictions, targets):
    (p,), (y,) = predictions, targets
    return b.add(b.mean(b.abs(b.sub(p, y))), b.mul(b.mean(b.mul(p, p)), 0.1))


def _torch_l1_plus(p, y):
    return (p - y).abs().mean() + 0.1 * (p * p).mean()


def _torch_val_loss(net, x, y, fn):
    """The validation loss as evaluate defines it: batches of BATCH rows (the last one
    completed by wrapping around), each weighted by its new rows."""
    total, rows = 0.0, len(x)
    for start in range(0, rows, BATCH):
        idx = (start + np.arange(BATCH)) % rows
        with torch.no_grad():
            value = fn(net(torch.tensor(x[idx])), torch.tensor(y[idx])).item()
        total += value * min(BATCH, rows - start)
    return total / rows


@pytest.mark.parametrize("form", ["builder", "dlpc"])
def test_graph_loss_validation(tmp_path, form):
    """A custom loss (builder callable or .dlpc file) reports its validation loss: the
    loss graph on the validation batches (10 rows: a partial last batch) equals torch's."""
    if form == "builder":
        loss = dlpc.train.GraphLoss(_l1_plus, targets=[((BATCH, 3), "float32")])
    else:
        path = tmp_path / "myloss.dlpc"
        path.write_text(
            "model myloss(p: f32[B, 3], y: f32[B, 3]) {\n"
            "  return reduce_mean(abs(p - y)) + reduce_mean(p * p) * 0.1\n}\n"
        )
        loss = str(path)
    trainer = dlpc.train(small_model(tmp_path), loss=loss, optimizer="sgd", batch_size=BATCH)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    vx = rng.standard_normal((10, 6)).astype(np.float32)
    vy = rng.standard_normal((10, 3)).astype(np.float32)
    history = trainer.fit(x, y, epochs=2, validation=(vx, vy))
    net, _ = torch_small(trainer.weights)
    want = _torch_val_loss(net, vx, vy, _torch_l1_plus)
    assert history["val_loss"][-1] == pytest.approx(want, rel=1e-5)
    assert trainer.evaluate(vx, vy) == {"loss": pytest.approx(want, rel=1e-5)}
    # the first epoch's value is that of the weights after it (not the final ones)
    assert history["val_loss"][0] != pytest.approx(want, rel=1e-9)


def test_bce_training_accuracy(tmp_path):
    """BCE's training accuracy during fit: the thresholded outputs that agree with the
    0/1 targets, as the steps saw them (torch recomputed step by step)."""
    logits = small_model(tmp_path)
    probs = tmp_path / "small_sigmoid.dlpc"  # plain BCE reads probabilities
    text = open(logits).read().replace("return linear(", "return sigmoid(linear(")
    probs.write_text(text.replace("fc2.bias)\n}", "fc2.bias))\n}"))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4 * BATCH, 6)).astype(np.float32)
    y = (rng.random((4 * BATCH, 3)) > 0.5).astype(np.float32)
    for kind, model, wrap, threshold in (
        ("bce_with_logits", logits, lambda t: t, 0.0),
        ("bce", str(probs), torch.sigmoid, 0.5),
    ):
        trainer = dlpc.train(model, loss=kind, optimizer=dlpc.optim.SGD(lr=0.5), batch_size=BATCH)
        net, _ = torch_small(trainer.weights)
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        history = trainer.fit(x, y, epochs=1, shuffle=False)
        hits = 0.0
        fn = (
            F.binary_cross_entropy_with_logits
            if kind == "bce_with_logits"
            else F.binary_cross_entropy
        )
        for start in range(0, len(x), BATCH):
            out = wrap(net(torch.tensor(x[start : start + BATCH])))
            target = torch.tensor(y[start : start + BATCH])
            hits += float(((out > threshold) == (target > 0.5)).double().mean(dim=1).sum())
            opt.zero_grad()
            fn(out, target).backward()
            opt.step()
        assert not np.isnan(history["accuracy"][0]), kind
        assert history["accuracy"][0] == pytest.approx(hits / len(x), abs=1e-6), kind


def _lars_reference(weights, data, lr, momentum, weight_decay, eta, eps):
    """LARS in float64 numpy (gradients from torch in float64): the paper's formula."""
    net, names = torch_small(weights, torch.float64)
    params = {names[n]: p.detach().numpy().copy() for n, p in net.named_parameters()}
    bufs = {k: np.zeros_like(v) for k, v in params.items()}
    for x, y in data:
        for tname, p in net.named_parameters():
            p.data = torch.tensor(params[names[tname]])
            p.grad = None
        F.cross_entropy(net(torch.tensor(x)), torch.tensor(y)).backward()
        for tname, p in net.named_parameters():
            name = names[tname]
            w, g = params[name], p.grad.numpy()
            wn, gn = np.linalg.norm(w), np.linalg.norm(g)
            ratio = eta * wn / (gn + weight_decay * wn + eps) if wn > 0 and gn > 0 else 1.0
            step = lr * ratio * (g + weight_decay * w)
            bufs[name] = momentum * bufs[name] + step if momentum else step
            params[name] = w - bufs[name]
    return params


@pytest.mark.parametrize(("momentum", "weight_decay"), [(0.9, 0.01), (0.0, 0.0), (0.5, 0.0)])
def test_lars_matches_numpy(tmp_path, momentum, weight_decay):
    """LARS over 20 steps of an f64 model against the formula in float64 numpy."""
    opt = dlpc.optim.LARS(lr=0.5, momentum=momentum, weight_decay=weight_decay, eta=0.02)
    trainer = dlpc.train(small_model(tmp_path, "f64"), optimizer=opt, batch_size=BATCH)
    start = trainer.weights
    data = batches(dtype=np.float64)
    for x, y in data:
        trainer.step(x, y)
    want = _lars_reference(start, data, 0.5, momentum, weight_decay, 0.02, 1e-8)
    got = trainer.weights
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)
        assert not np.allclose(value, start[name]), name  # the params moved
    if momentum:  # the buffer is kept only when there is momentum
        assert "opt.momentum.fc1.weight" in trainer.state
    else:
        assert "opt.momentum.fc1.weight" not in trainer.state


def _onecycle_both(tmp_path, dlpc_opt, torch_opt, attached=False, **options):
    """OneCycleLR over 20 steps on both: made after the trainer built with
    cycle_momentum=True, or (`attached`) given to the Trainer as a factory: the partial,
    or ("lambda") any callable taking the trainer."""
    onecycle = functools.partial(
        dlpc.train.lr_scheduler.OneCycleLR, max_lr=0.3, total_steps=20, **options
    )
    if attached:
        factory = (lambda t: onecycle(t)) if attached == "lambda" else onecycle
        trainer = dlpc.train(
            small_model(tmp_path), optimizer=dlpc_opt, batch_size=BATCH, scheduler=factory
        )
        ours = trainer.scheduler
    else:
        trainer = dlpc.train(
            small_model(tmp_path), optimizer=dlpc_opt, batch_size=BATCH, cycle_momentum=True
        )
        ours = onecycle(trainer)
    net, names = torch_small(trainer.weights)
    topt = torch_opt(net.parameters())
    theirs = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.3, total_steps=20, **options)
    momenta = []

    def after(_):
        ours.step()
        theirs.step()
        momenta.append((trainer.param_groups[0]["momentum"], topt.param_groups[0]["momentum"]))

    mine, torch_losses = run_both(trainer, net, topt, batches(), after)
    np.testing.assert_allclose(mine, torch_losses, rtol=1e-5, atol=1e-6)
    assert_same_params(trainer, net, names)
    return trainer, momenta


@pytest.mark.parametrize("attached", [False, True, "lambda"])
def test_onecycle_cycles_momentum_of_sgd_built_without(tmp_path, attached):
    """SGD built with momentum 0 and cycle_momentum=True (or the OneCycleLR given to the
    Trainer): OneCycleLR switches momentum on and cycles it as torch does over 20 steps
    (same losses, same params)."""
    trainer, momenta = _onecycle_both(
        tmp_path,
        dlpc.optim.SGD(lr=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.0),
        attached,
    )
    assert all(a == pytest.approx(b) for a, b in momenta)
    assert len({round(a, 6) for a, _ in momenta}) > 5  # it did cycle
    assert "opt.momentum.fc1.weight" in trainer.state


def test_cycle_momentum_keeps_plain_sgd(tmp_path):
    """cycle_momentum=True without a scheduler: momentum stays 0 and the steps are plain
    SGD's (torch's momentum-0 SGD over 20 steps); weight decay too."""
    trainer = dlpc.train(
        small_model(tmp_path),
        optimizer=dlpc.optim.SGD(lr=0.1, weight_decay=0.01),
        batch_size=BATCH,
        cycle_momentum=True,
    )
    assert trainer.param_groups[0]["momentum"] == 0.0
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, weight_decay=0.01)
    mine, theirs = run_both(trainer, net, topt, batches())
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    assert_same_params(trainer, net, names)


def test_onecycle_momentum_without_cycle_momentum_is_an_error(tmp_path):
    """Without cycle_momentum, OneCycleLR on SGD built with momentum 0 is a one-line
    error naming the fix, at the scheduler's construction; cycle_momentum on an
    optimizer with neither momentum nor betas is one too."""
    trainer = dlpc.train(small_model(tmp_path), optimizer=dlpc.optim.SGD(lr=0.1), batch_size=BATCH)
    with pytest.raises(dlpc.diagnostics.DlpcError, match="cycle_momentum=True"):
        dlpc.train.lr_scheduler.OneCycleLR(trainer, max_lr=0.3, total_steps=20)
    sched = dlpc.train.lr_scheduler
    assert sched.cycles_momentum(functools.partial(sched.OneCycleLR, max_lr=0.1))
    assert not sched.cycles_momentum(
        functools.partial(sched.OneCycleLR, max_lr=0.1, cycle_momentum=False)
    )
    assert not sched.cycles_momentum(functools.partial(sched.StepLR, step_size=2))
    with pytest.raises(dlpc.diagnostics.DlpcError, match="momentum or betas"):
        dlpc.train(
            small_model(tmp_path), optimizer="adagrad", batch_size=BATCH, cycle_momentum=True
        )
