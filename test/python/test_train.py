"""Training: losses, optimizers and the compiled train step against PyTorch; resident
state and save/resume; the named batch dim; `dlpc-train`.

The step tests run `graph-autodiff` (passes/train/autodiff.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import dlpc
from dlpc.diagnostics import DlpcError

# the repository's examples, wherever pytest runs from
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

torch.manual_seed(0)


# ------------------------------------------------------------------------ the train step


def _torch_mlp(weights):
    layers = torch.nn.Sequential(
        torch.nn.Linear(784, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )
    for i, layer in ((0, "fc1"), (2, "fc2"), (4, "fc3")):
        layers[i].weight.data = torch.tensor(weights[f"{layer}.weight"])
        layers[i].bias.data = torch.tensor(weights[f"{layer}.bias"])
    names = {
        f"{i}.{k}": f"{layer}.{k}"
        for i, layer in ((0, "fc1"), (2, "fc2"), (4, "fc3"))
        for k in ("weight", "bias")
    }
    return layers, names


def _torch_lenet(weights):
    class LeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = torch.nn.Conv2d(6, 16, 5)
            self.fc1 = torch.nn.Linear(400, 120)
            self.fc2 = torch.nn.Linear(120, 84)
            self.fc3 = torch.nn.Linear(84, 10)

        def forward(self, x):
            F = torch.nn.functional
            h = F.max_pool2d(F.relu(self.conv1(x)), 2)
            h = F.max_pool2d(F.relu(self.conv2(h)), 2).reshape(x.shape[0], 400)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(h)))))

    net = LeNet()
    for name, p in net.named_parameters():
        p.data = torch.tensor(weights[name])
    return net, {n: n for n, _ in net.named_parameters()}


OPTIMIZERS = {
    "sgd": (
        lambda: dlpc.optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4),
        lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
    ),
    "adam": (
        lambda: dlpc.optim.Adam(lr=1e-3),
        lambda ps: torch.optim.Adam(ps, lr=1e-3),
    ),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("example", ["mlp", "lenet"])
def test_twenty_steps_track_torch(example, opt):
    """Same init, same batches: the loss at every step and the final weights agree."""
    batch, steps = 8, 20
    trainer = dlpc.train(
        str(EXAMPLES / f"{example}.dlpc"),
        loss="cross_entropy",
        optimizer=OPTIMIZERS[opt][0](),
        batch_size=batch,
        target="c",
    )
    init = trainer.weights
    net, names = (_torch_mlp if example == "mlp" else _torch_lenet)(init)
    torch_opt = OPTIMIZERS[opt][1](net.parameters())
    rng = np.random.default_rng(3)
    shape = (batch, 784) if example == "mlp" else (batch, 1, 28, 28)
    ours, theirs = [], []
    for _ in range(steps):
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, 10, batch)
        ours.append(trainer.step(x, y))
        torch_opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        torch_opt.step()
        theirs.append(loss.item())
    np.testing.assert_allclose(ours, theirs, rtol=2e-4, atol=2e-5)
    final = trainer.weights
    for tname, p in net.named_parameters():
        np.testing.assert_allclose(final[names[tname]], p.detach().numpy(), rtol=1e-3, atol=2e-5)
    assert trainer.state["opt.step"] == steps


def _batches(n, batch=8, seed=4):
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch))
        for _ in range(n)
    ]


@pytest.mark.parametrize("target", ["c", "numpy"])
def test_save_then_resume_is_bit_identical(tmp_path, target):
    batches = _batches(6)
    make = lambda: dlpc.train(
        str(EXAMPLES / "mlp.dlpc"), optimizer=dlpc.optim.Adam(lr=1e-3), batch_size=8, target=target
    )
    straight = make()
    straight_losses = [straight.step(x, y) for x, y in batches]
    first = make()
    losses = [first.step(x, y) for x, y in batches[:3]]
    first.save(tmp_path / "w.npz")
    resumed = make()
    resumed.load(tmp_path / "w.npz")
    losses += [resumed.step(x, y) for x, y in batches[3:]]
    assert losses == straight_losses
    a, b = straight.state, resumed.state
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_state_is_resident_and_readable():
    trainer = dlpc.train(str(EXAMPLES / "mlp.dlpc"), optimizer="sgd", batch_size=8, target="c")
    before = trainer.weights
    ((x, y),) = _batches(1)
    trainer.step(x, y)
    after = trainer.weights
    assert not np.array_equal(before["fc1.weight"], after["fc1.weight"])
    assert {"opt.step", "fc3.bias"} <= set(trainer.state)
    # trained weights feed inference
    fn = dlpc.compile(dlpc.load(str(EXAMPLES / "mlp.dlpc"), weights=after, batch=1), target="c")
    (out,) = fn(x[:1])
    np.testing.assert_allclose(out, trainer.predict(x)[:1], rtol=1e-4, atol=1e-5)


def test_fit_lowers_the_loss_on_digits():
    from dlpc.tools.dlpc_train import fit_to_input, load_data

    x, y, xv, yv, *_ = load_data("digits")
    x = fit_to_input(x, (784,), "digits", lambda m: None)
    xv = fit_to_input(xv, (784,), "digits", lambda m: None)
    trainer = dlpc.train(
        str(EXAMPLES / "mlp.dlpc"), optimizer=dlpc.optim.Adam(lr=1e-3), batch_size=32
    )
    history = trainer.fit(x, y, epochs=3, validation=(xv, yv))
    assert history["loss"][0] > history["loss"][1] > history["loss"][2]
    assert history["val_accuracy"][-1] > 0.85


# ------------------------------------------------------------------------ batch dim


def test_named_batch_dim_binds_and_is_symbolic_unbound():
    from dlpc.dialects.symdims import is_symbolic
    from dlpc.reference import graph as ref

    shape = lambda m: ref.graph.shape_of(ref.main_func(m.module).args[0])
    unbound = shape(dlpc.load(str(EXAMPLES / "lenet.dlpc")))
    assert is_symbolic(unbound) and unbound[1:] == (1, 28, 28)
    lenet = dlpc.load(str(EXAMPLES / "lenet.dlpc"), batch=4)
    assert shape(lenet) == (4, 1, 28, 28)
    x = np.random.default_rng(0).standard_normal((4, 1, 28, 28)).astype(np.float32)
    (y,) = dlpc.compile(lenet, target="numpy")(x)
    assert y.shape == (4, 10)


def test_bad_batch_binding_is_an_error():
    from dlpc.frontends.text import parse_model

    with pytest.raises(DlpcError, match="must be bound to a positive int"):
        parse_model("model m(x: f32[B, 4]) { return relu(x) }", dims={"B": 0})


def test_dlpc_train_is_callable_module():
    import dlpc.train as module

    assert callable(dlpc.train) and dlpc.train is module
    assert dlpc.optim.AdamW().weight_decay == 0.01


# ------------------------------------------------------------------------ dlpc-train


def test_dlpc_train_errors_are_one_line(tmp_path, capsys):
    from dlpc.tools.dlpc_train import main

    assert main([str(EXAMPLES / "mlp.dlpc"), "--data", "digits", "--batch", "0"]) == 1
    assert "--batch must be >= 1" in capsys.readouterr().err
    assert main([str(EXAMPLES / "mlp.dlpc"), "--data", "nope.csv"]) == 1
    assert "--data must be 'digits' or an .npz" in capsys.readouterr().err
    np.savez(tmp_path / "d.npz", x=np.zeros((40, 5, 7, 3), np.float32), y=np.zeros(40, np.int64))
    assert main([str(EXAMPLES / "mlp.dlpc"), "--data", str(tmp_path / "d.npz")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "5x7x3" in err and "784" in err


def test_dlpc_train_digits_short_run(tmp_path, capsys):
    from dlpc.tools.dlpc_train import main

    args = [
        str(EXAMPLES / "mlp.dlpc"),
        "--data",
        "digits",
        "--epochs",
        "2",
        "--save",
        str(tmp_path / "w.npz"),
    ]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "resized to 28x28" in out.err and out.out.startswith("test accuracy: ")
    assert main([*args[:3], "--epochs", "3", "--save", str(tmp_path / "w.npz"), "--resume"]) == 0
    assert "resumed from" in capsys.readouterr().err


def test_step_reads_a_non_contiguous_batch():
    """A batch with other strides than row-major (digits resized for LeNet come out so)
    gives the same step as its row-major copy on C."""
    rng = np.random.default_rng(6)
    x = np.asfortranarray(rng.standard_normal((8, 1, 28, 28)).astype(np.float32))
    y = rng.integers(0, 10, 8)
    a = dlpc.train(str(EXAMPLES / "lenet.dlpc"), optimizer="sgd", batch_size=8, target="c")
    b = dlpc.train(str(EXAMPLES / "lenet.dlpc"), optimizer="sgd", batch_size=8, target="c")
    assert not x.flags["C_CONTIGUOUS"]
    assert a.step(x, y) == b.step(np.ascontiguousarray(x), y)
