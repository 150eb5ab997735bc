"""Gradient accumulation and gradient access (passes/train/step.py, train.py): k
micro-batches make one update equal to one step on the k-times batch (summation order
aside), the calls between updates leave params and optimizer state bit for bit; the
gradients a step returns are torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_train_optim import assert_same_params, small_model, torch_small

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes.train.losses import Loss

K, MICRO = 2, 4


def _data(n, batch, seed=11):
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((batch, 6)).astype(np.float32), rng.integers(0, 3, batch))
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "opt,loss",
    [
        (lambda: dlpc.optim.Adam(lr=0.01), Loss()),
        (lambda: dlpc.optim.SGD(lr=0.1, momentum=0.9, clip_norm=0.5), Loss(reduction="sum")),
    ],
    ids=["adam_mean", "sgd_clip_sum"],
)
def test_accumulation_equals_the_big_batch(tmp_path, opt, loss):
    model = small_model(tmp_path)
    big = dlpc.train(model, loss=loss, optimizer=opt(), batch_size=K * MICRO)
    acc = dlpc.train(model, loss=loss, optimizer=opt(), batch_size=MICRO, accumulate=K)
    for x, y in _data(4, K * MICRO):
        big.step(x, y)
        before = acc.state
        acc.step(x[:MICRO], y[:MICRO])
        assert not acc.update_done
        middle = acc.state
        for name, value in before.items():  # nothing but the accumulator and counter moved
            if not name.startswith(("opt.grad_acc.", "opt.micro")):
                assert np.array_equal(middle[name], value), name
        acc.step(x[MICRO:], y[MICRO:])
        assert acc.update_done
    assert acc.steps_done == big.steps_done == 4
    a, b = acc.weights, big.weights
    for name in b:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_accumulation_matches_torch(tmp_path):
    """torch's recipe: backward (loss / k) on each micro-batch, then step."""
    trainer = dlpc.train(
        small_model(tmp_path),
        optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.9),
        batch_size=MICRO,
        accumulate=K,
    )
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for k, (x, y) in enumerate(_data(6, MICRO)):
        trainer.step(x, y)
        loss = torch.nn.functional.cross_entropy(net(torch.tensor(x)), torch.tensor(y)) / K
        loss.backward()
        if k % K == K - 1:
            topt.step()
            topt.zero_grad()
    assert_same_params(trainer, net, names)


def test_gradients_are_torch_s(tmp_path):
    trainer = dlpc.train(
        small_model(tmp_path), optimizer="sgd", batch_size=MICRO, return_grads=True
    )
    with pytest.raises(DlpcError, match="before the first step"):
        _ = trainer.grads
    net, names = torch_small(trainer.weights)
    ((x, y),) = _data(1, MICRO)
    trainer.step(x, y)
    torch.nn.functional.cross_entropy(net(torch.tensor(x)), torch.tensor(y)).backward()
    grads = trainer.grads
    assert set(grads) == set(names.values())
    for tname, p in net.named_parameters():
        assert p.grad is not None
        np.testing.assert_allclose(grads[names[tname]], p.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert "grad.fc1.weight" not in trainer.state  # outputs, not state
    plain = dlpc.train(small_model(tmp_path), optimizer="sgd", batch_size=MICRO)
    with pytest.raises(DlpcError, match="return_grads=True"):
        _ = plain.grads
    with pytest.raises(DlpcError, match="accumulate must be a positive int"):
        dlpc.train(small_model(tmp_path), batch_size=MICRO, accumulate=0)
