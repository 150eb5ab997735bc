"""Training data (passes/train/data.py, Trainer.fit/evaluate): a data set object, an
iterable of batches, `.npz` / `.npy` memory-mapped, the last partial batch kept or dropped,
integer labels of any width, and the validation loss and metric that fit the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_train_optim import assert_same_params, small_model, torch_small

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes.train.data import load_arrays
from dlpc.passes.train.losses import Loss

BATCH = 4
F = torch.nn.functional


class Digits:
    """A PyTorch-style data set: __len__ and __getitem__ -> (sample, int32 label)."""

    def __init__(self, n=10, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((n, 6)).astype(np.float32)
        self.y = rng.integers(0, 3, n).astype(np.int32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return small_model(tmp_path_factory.mktemp("data"))


def test_dataset_with_partial_batch_trains_as_torch(model):
    """10 samples in batches of 4, the last partial batch kept: 3 steps per epoch, as a
    torch DataLoader(drop_last=False) without shuffling."""
    data = Digits()
    trainer = dlpc.train(model, optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.9), batch_size=BATCH)
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    history = trainer.fit(data, epochs=2, shuffle=False, drop_last=False)
    losses = []
    for _ in range(2):
        epoch = 0.0
        for k in range(0, 10, BATCH):
            x, y = torch.tensor(data.x[k : k + BATCH]), torch.tensor(data.y[k : k + BATCH]).long()
            topt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            topt.step()
            epoch += loss.item() * len(x)
        losses.append(epoch / 10)
    assert trainer.steps_done == 6
    np.testing.assert_allclose(history["loss"], losses, rtol=1e-5)
    assert_same_params(trainer, net, names)
    dropped = dlpc.train(model, optimizer="sgd", batch_size=BATCH)
    dropped.fit(data, epochs=1, shuffle=False)
    assert dropped.steps_done == 2


def test_batches_npz_and_arrays_agree(model, tmp_path):
    """The same batches from arrays, a generator of batches and a memory-mapped .npz
    (int8 labels) give bit-identical runs."""
    data = Digits(12, seed=3)
    np.savez(tmp_path / "d.npz", x=data.x, y=data.y.astype(np.int8))
    arrays = load_arrays(tmp_path / "d.npz")
    assert isinstance(arrays["x"], np.memmap) and arrays["y"].dtype == np.int8
    np.save(tmp_path / "x.npy", data.x)
    assert isinstance(load_arrays(tmp_path / "x.npy")["x"], np.memmap)
    runs = []
    for source in (
        (data.x, data.y.astype(np.int64)),
        (((data.x[k : k + BATCH], data.y[k : k + BATCH]) for k in range(0, 12, BATCH)),),
        (str(tmp_path / "d.npz"),),
    ):
        trainer = dlpc.train(model, optimizer="adam", batch_size=BATCH)
        trainer.fit(*source, epochs=1, shuffle=False)
        runs.append(trainer.weights)
    for run in runs[1:]:
        for name in runs[0]:
            assert np.array_equal(run[name], runs[0][name]), name


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32])
def test_integer_labels_of_any_width(model, dtype):
    x, y = Digits(4, seed=5).x, Digits(4, seed=5).y
    a = dlpc.train(model, optimizer="sgd", batch_size=BATCH)
    b = dlpc.train(model, optimizer="sgd", batch_size=BATCH)
    assert a.step(x, y.astype(dtype)) == b.step(x, y.astype(np.int64))


def test_validation_loss_and_metric(model, tmp_path):
    """Classification: val loss = torch's cross entropy of the predictions, accuracy;
    regression: val_loss and val_mse (no longer nan); BCE: thresholded accuracy."""
    data, val = Digits(8, seed=1), Digits(6, seed=2)
    trainer = dlpc.train(model, optimizer="sgd", batch_size=BATCH)
    h = trainer.fit(data, epochs=1, validation=(val.x, val.y))
    out = torch.tensor(trainer.predict(val.x))
    want = F.cross_entropy(out, torch.tensor(val.y).long()).item()
    assert h["val_loss"][0] == pytest.approx(want, rel=1e-5)
    assert h["val_accuracy"][0] == pytest.approx(float((out.argmax(1).numpy() == val.y).mean()))
    assert np.isnan(h["val_mse"][0])

    rng = np.random.default_rng(4)
    yr, yv = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((6, 3))
    reg = dlpc.train(model, loss="mse", optimizer="sgd", batch_size=BATCH)
    h = reg.fit(data.x, yr, epochs=1, validation=(val.x, yv))
    pred = reg.predict(val.x)
    assert h["val_mse"][0] == pytest.approx(float(np.mean((pred - yv) ** 2)), rel=1e-6)
    assert h["val_loss"][0] == pytest.approx(h["val_mse"][0])
    assert np.isnan(h["val_accuracy"][0])

    yb, yvb = (yr > 0).astype(np.float32), (yv > 0).astype(np.float32)
    bce = dlpc.train(model, loss="bce_with_logits", optimizer="sgd", batch_size=BATCH)
    h = bce.fit(data.x, yb, epochs=1, validation=(val.x, yvb))
    logits = bce.predict(val.x)
    assert h["val_accuracy"][0] == pytest.approx(float(((logits > 0) == (yvb > 0.5)).mean()))
    want = F.binary_cross_entropy_with_logits(torch.tensor(logits), torch.tensor(yvb)).item()
    assert h["val_loss"][0] == pytest.approx(want, rel=1e-5)


def test_data_errors_are_one_line(model, tmp_path):
    trainer = dlpc.train(model, optimizer="sgd", batch_size=BATCH)
    with pytest.raises(DlpcError, match="fewer than one batch"):
        trainer.fit(Digits(3), epochs=1)
    with pytest.raises(DlpcError, match="no 'y' array"):
        np.savez(tmp_path / "bad.npz", x=np.zeros((8, 6), np.float32))
        trainer.fit(str(tmp_path / "bad.npz"))
    with pytest.raises(DlpcError, match="sample must be a tuple"):
        trainer.fit([np.zeros(6, np.float32)] * 8)
    with pytest.raises(DlpcError, match="no such data file"):
        load_arrays(tmp_path / "nope.npz")
    with pytest.raises(DlpcError, match="different lengths"):
        trainer.fit(np.zeros((8, 6), np.float32), np.zeros(7, np.int64))
    assert Loss("bce").metric == "accuracy" and Loss("huber").metric == "mse"


def test_docs_example_runs(monkeypatch, capsys):
    """docs/training.md's PyTorch-style example (a data set object, a .dlpc custom loss,
    accumulation, OneCycleLR) runs as written and learns."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "training.md").read_text()
    block = text.split("### A PyTorch-style example", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    monkeypatch.chdir(root)
    namespace: dict = {"__name__": "docs_example"}
    exec(compile(code, "docs/training.md", "exec"), namespace)  # noqa: S102
    trainer, sched = namespace["trainer"], namespace["sched"]
    assert trainer.steps_done == namespace["epochs"] * namespace["updates"]
    assert sched.last_epoch == trainer.steps_done
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and float(lines[-1].rsplit(" ", 1)[1]) > 0.9


def test_dlpc_train_accumulate_keep_last_and_mse(model, tmp_path, capsys):
    from dlpc.tools.dlpc_train import main

    data = Digits(50, seed=7)
    np.savez(tmp_path / "d.npz", x=data.x, y=data.y)
    args = [model, "--data", str(tmp_path / "d.npz"), "--epochs", "1", "--batch", "4"]
    assert main([*args, "--accumulate", "2", "--keep-last", "--optimizer", "nadam"]) == 0
    assert capsys.readouterr().out.startswith("test accuracy: ")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "r.npz", x=data.x, y=rng.standard_normal((50, 3)).astype(np.float32))
    reg = [model, "--data", str(tmp_path / "r.npz"), "--epochs", "1", "--batch", "4"]
    assert main([*reg, "--loss", "huber"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("test mse: ") and "validation mse" in out.err
    assert main([*args, "--accumulate", "0"]) == 1
    assert "--accumulate must be >= 1" in capsys.readouterr().err
