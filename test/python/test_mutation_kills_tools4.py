"""The tools area's whole modules read under branch coverage before its seed-53 draw (issue 35,
ninth round; bench/mutation.py --area tools: tools/*.py, diagnostics.py): the decisions that
ran but that no test compared. dlpc-train's `train()` driven with a stand-in trainer (each
line it prints, each argument it hands on, the progress bar, the saved history, resume),
its `emit_step`, both tools' plots (figure, axes, saved size), dlpc-tune's run loop with a
stand-in tuner, dlpc-run's comparison helpers over several chunks and each verdict, the -O
choices of every tool. Tools run in-process on a tiny model; no C compile."""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError

TINY = """model tiny(x: f32[B, 4]) {
  param w: f32[3, 4] = kaiming(seed=1)
  return linear(x, w)
}
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.dlpc"
    path.write_text(TINY)
    return str(path)


def _png_size(path) -> tuple[int, int]:
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _npz(tmp_path, n: int = 40, regression: bool = False) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (
        rng.standard_normal((n, 3)).astype(np.float32)
        if regression
        else rng.integers(0, 3, n).astype(np.int64)
    )
    path = tmp_path / ("reg.npz" if regression else "cls.npz")
    np.savez(path, x=x, y=y)
    return str(path)


# ---- dlpc-train's train() with a stand-in trainer -------------------------------------------
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeTrainer:
    """Records what train() hands it; each fit is one epoch of two batches, reported
    through the callback with fixed figures (2 s an epoch)."""

    made: list[FakeTrainer] = []

    def __init__(self, model, loss, optimizer, **kw):
        FakeTrainer.made.append(self)
        self.model, self.loss, self.optimizer, self.kw = model, loss, optimizer, kw
        self.epoch, self.steps_done = 0, 0
        self.fits: list[tuple[int, dict]] = []
        self.loaded: list[str] = []
        self.saved: list[str] = []
        self.spec = SimpleNamespace(recompute=False, kept_bytes=3072, kept_bytes_other=1024)

    def fit(self, x, y, **kw):
        self.fits.append((len(x), {k: v for k, v in kw.items() if k != "callback"}))
        callback = kw["callback"]
        callback("abort", {})  # (events other than "batch" and "epoch" are ignored)
        callback("zoom", {})
        for acc in (0.5, None):
            batch = {"batches": 2, "epoch": self.epoch, "accuracy": acc, "mean_loss": 1.25}
            callback("batch", {**batch, "samples_per_s": 123.4})
        seconds = 2.0 if self.epoch == 0 else 0.0  # (a zero time: 1e-9 s at least)
        epoch = {"epoch": self.epoch, "loss": 0.125, "seconds": seconds}
        callback("epoch", {**epoch, "accuracy": 0.75, "val_accuracy": 0.5})
        self.epoch += 1
        self.steps_done += 7
        return {"loss": [0.125], "accuracy": [0.75], "val_accuracy": [0.5]}

    def load(self, path):
        self.loaded.append(path)
        self.epoch, self.steps_done = 1, 7

    def save(self, path):
        self.saved.append(path)
        Path(path).write_bytes(b"weights")

    def evaluate(self, x, y):
        return {"accuracy": 0.625, "mse": 0.0123456789}


@pytest.fixture
def fake_trainer(monkeypatch):
    from dlpc.tools import dlpc_train

    FakeTrainer.made = []
    monkeypatch.setattr(dlpc_train, "_trainer_class", lambda args: FakeTrainer)
    return FakeTrainer


def test_train_hands_each_option_to_the_trainer_and_prints_each_line(
    tiny, tmp_path, fake_trainer, capsys
):
    """40 samples: 8 test, 3 validation, 29 training; batches of 4 are 7 steps (28 samples)
    an epoch, 14 samples/s at 2 s an epoch, 28e9 at 0 s (taken as 1e-9 s)."""
    from dlpc.tools.dlpc_train import main

    argv = [tiny, "--data", _npz(tmp_path), "--batch", "4", "--epochs", "2", "--seed", "5"]
    argv += ["--target", "numpy", "-O", "1", "--accumulate", "2", "--bn-momentum", "0.25"]
    argv += ["--freeze", "w", "--stats", "--keep-last"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    (trainer,) = fake_trainer.made
    assert trainer.kw == {
        "batch_size": 4,
        "target": "numpy",
        "opt_level": 1,
        "frozen": ["w"],
        "accumulate": 2,
        "bn_momentum": 0.25,
    }
    assert trainer.loss.kind == "cross_entropy" and trainer.loss.label_smoothing == 0.0
    assert trainer.optimizer.schedule.total_steps == 3 * 2  # (7 // 2 steps, 2 epochs)
    assert [n for n, _ in trainer.fits] == [29, 29]
    _, kw = trainer.fits[0]
    assert kw["epochs"] == 1 and kw["seed"] == 5 and kw["drop_last"] is False
    xv, yv = kw["validation"]
    assert xv.shape == (3, 4) and yv.shape == (3,)
    assert err.splitlines() == [
        "dlpc-train: backward keeps 3.0 KiB of activations alive (1.0 KiB with "
        "graph-autodiff recompute)",
        "epoch 1/2: loss 0.1250, accuracy 75.0 %, validation accuracy 50.0 %, 14 samples/s",
        "epoch 2/2: loss 0.1250, accuracy 75.0 %, validation accuracy 50.0 %, "
        "28000000000 samples/s",
    ]
    assert out == "test accuracy: 62.5 %\n"
    assert main([*argv[:-4], "--loss", "mse", "--data", _npz(tmp_path, regression=True)]) == 0
    out, err = capsys.readouterr()
    assert out == "test mse: 0.0123457\n"
    assert fake_trainer.made[-1].fits[0][1]["drop_last"] is True
    assert "backward keeps" not in err


def test_train_without_validation_samples_validates_on_nothing(tiny, tmp_path, fake_trainer):
    """A data set of 9 samples with its own test set: 9 // 10 = 0 validation samples."""
    from dlpc.tools.dlpc_train import main

    path = tmp_path / "own.npz"
    x = np.ones((9, 4), np.float32)
    np.savez(path, x=x, y=np.zeros(9, np.int64), x_test=x[:2], y_test=np.zeros(2, np.int64))
    argv = [tiny, "--data", str(path), "--batch", "3", "--epochs", "1", "--target", "numpy"]
    assert main(argv) == 0
    (trainer,) = fake_trainer.made
    assert trainer.fits[0][1]["validation"] is None and trainer.fits[0][0] == 9


def test_train_on_a_terminal_draws_a_bar_per_epoch(tiny, tmp_path, fake_trainer, monkeypatch):
    """On a terminal each batch updates a tqdm bar ('epoch E/N', 'loss L acc A% R
    samples/s', one step each) that the epoch closes; the epoch line goes to stdout."""
    bars = []

    class Bar:
        def __init__(self, **kw):
            self.kw, self.postfix, self.steps, self.closed = kw, [], [], False
            bars.append(self)

        def set_postfix_str(self, text, refresh=True):
            self.postfix.append((text, refresh))

        def update(self, n):
            self.steps.append(n)

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", SimpleNamespace(tqdm=Bar))

    class Stdout(io.StringIO):
        flushes = 0

        def flush(self):
            Stdout.flushes += 1

    tty, stdout = _Tty(), Stdout()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", stdout)
    from dlpc.tools.dlpc_train import main

    argv = [tiny, "--data", _npz(tmp_path), "--batch", "4", "--epochs", "2", "--target", "numpy"]
    assert main(argv) == 0
    assert len(bars) == 2 and all(b.closed for b in bars)
    assert bars[1].kw == {
        "total": 2,
        "desc": "epoch 2/2",
        "file": tty,
        "leave": True,
        "unit": "batch",
    }
    assert bars[0].postfix == [
        ("loss 1.2500 acc 50.0% 123 samples/s", False),
        ("loss 1.2500 123 samples/s", False),
    ]
    assert bars[0].steps == [1, 1]
    lines = stdout.getvalue().splitlines()
    assert lines == [
        "epoch 1/2: loss 0.1250, accuracy 75.0 %, validation accuracy 50.0 %, 14 samples/s",
        "epoch 2/2: loss 0.1250, accuracy 75.0 %, validation accuracy 50.0 %, "
        "28000000000 samples/s",
        "test accuracy: 62.5 %",
    ]
    assert tty.getvalue() == ""
    assert Stdout.flushes == 3  # (each epoch line as printed, then the tool's end)


def test_train_saves_resumes_and_plots(tiny, tmp_path, fake_trainer, monkeypatch, capsys):
    """--save writes the weights and `<save>.history.npz` after every epoch; --resume loads
    both and goes on from the trainer's epoch; --plot draws the whole history."""
    from dlpc.tools import dlpc_train

    plots = []
    monkeypatch.setattr(dlpc_train, "plot", lambda *a: plots.append(a))
    save = str(tmp_path / "run.npz")
    data = _npz(tmp_path)
    argv = [tiny, "--data", data, "--batch", "4", "--target", "numpy", "--save", save]
    assert dlpc_train.main([*argv, "--epochs", "1", "--plot", str(tmp_path / "p.png")]) == 0
    out, err = capsys.readouterr()
    assert fake_trainer.made[-1].saved == [save]
    with np.load(tmp_path / "run.history.npz") as f:
        assert sorted(f.files) == ["accuracy", "loss", "val_accuracy"]
        assert f["loss"].dtype == np.float64 and list(f["accuracy"]) == [0.75]
    ((history, path, title),) = plots
    assert history == {"loss": [0.125], "accuracy": [0.75], "val_accuracy": [0.5]}
    assert path == str(tmp_path / "p.png") and title == "dlpc-train tiny.dlpc on cls.npz"
    assert err.splitlines()[-2:] == [f"dlpc-train: plot: {path}", f"dlpc-train: saved: {save}"]
    assert dlpc_train.main([*argv, "--epochs", "3", "--resume"]) == 0
    out, err = capsys.readouterr()
    trainer = fake_trainer.made[-1]
    assert trainer.loaded == [save] and len(trainer.fits) == 2  # (epochs 2 and 3)
    assert err.splitlines()[0] == f"dlpc-train: resumed from {save} at epoch 1 (step 7)"
    assert [ln.split(":")[0] for ln in err.splitlines()[1:3]] == ["epoch 2/3", "epoch 3/3"]
    with np.load(tmp_path / "run.history.npz") as f:
        assert list(f["loss"]) == [0.125] * 3  # (the saved epoch's, then two more)
    # resumed without a saved history: only this run's epochs
    (tmp_path / "run.history.npz").unlink()
    assert dlpc_train.main([*argv, "--epochs", "2", "--resume"]) == 0
    with np.load(tmp_path / "run.history.npz") as f:
        assert list(f["loss"]) == [0.125]
    # resumed past its last epoch: no fit, no history to plot, no plot
    plots.clear()
    capsys.readouterr()
    argv = [*argv, "--epochs", "1", "--resume", "--plot", str(tmp_path / "q.png")]
    (tmp_path / "run.history.npz").unlink()
    assert dlpc_train.main(argv) == 0
    assert plots == [] and not fake_trainer.made[-1].fits
    assert "plot:" not in capsys.readouterr().err


def test_emit_step_prints_the_training_step_at_the_stage(tiny, capsys):
    """`dlpc-train --emit graph` prints the whole step (forward, loss, backward, update) at
    the batch asked for; -O, --label-smoothing and --freeze reach it."""
    from dlpc.tools.dlpc_train import main

    base = [tiny, "--emit", "graph", "--batch", "3", "--optimizer", "sgd"]
    assert main(base) == 0
    text = capsys.readouterr().out
    assert text.startswith("builtin.module {\n  func.func @main(%x: tensor<3x4xf32>")
    assert '{dlpc.name = "w"}, tensor<f32> {dlpc.name = "opt.step"})' in text
    assert "graph.fused" in text and "{axis = 1 : i64}" not in text  # (-O2: fused)
    assert "7.500000e-01" not in text
    assert main([*base, "--label-smoothing", "0.25"]) == 0
    assert "%5 = graph.constant dense<7.500000e-01> : tensor<f32>" in capsys.readouterr().out
    assert main([*base, "-O0"]) == 0
    text = capsys.readouterr().out
    assert "graph.fused" not in text and "graph.log_softmax %1 {axis = 1 : i64}" in text
    assert main([*base, "--freeze", "w"]) == 0
    assert '{dlpc.name = "w"}, tensor<f32>' not in capsys.readouterr().out


# ---- the plots: figure, axes, the saved image's size -----------------------------------------
def _captured_figures(monkeypatch) -> list:
    import matplotlib.pyplot as plt

    figures: list = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def _grid_alpha(ax) -> set:
    return {line.get_alpha() for line in ax.xaxis.get_gridlines() + ax.yaxis.get_gridlines()}


def test_dlpc_train_plot_draws_loss_and_accuracies_per_epoch(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from dlpc.tools.dlpc_train import plot

    figures = _captured_figures(monkeypatch)
    history = {"loss": [1.0, 0.5, 0.25], "accuracy": [0.5, 0.75, 1.0], "val_accuracy": [0, 0.5, 1]}
    path = tmp_path / "p.png"
    plot(history, str(path), "the title")
    (fig,) = figures
    assert tuple(fig.get_size_inches()) == (9.0, 3.5) and _png_size(path) == (900, 350)
    assert fig.get_suptitle() == "the title"
    a, b = fig.axes
    (loss,) = a.lines
    assert list(loss.get_xdata()) == [1, 2, 3] and list(loss.get_ydata()) == [1.0, 0.5, 0.25]
    assert loss.get_marker() == "o"
    assert (a.get_xlabel(), a.get_ylabel(), a.get_yscale()) == ("epoch", "training loss", "log")
    assert (b.get_xlabel(), b.get_ylabel(), b.get_yscale()) == ("epoch", "accuracy (%)", "linear")
    train, val = b.lines
    assert list(train.get_xdata()) == [1, 2, 3] and list(val.get_xdata()) == [1, 2, 3]
    assert list(train.get_ydata()) == [50, 75, 100] and list(val.get_ydata()) == [0, 50, 100]
    assert (train.get_marker(), val.get_marker()) == ("o", "s")
    assert (train.get_label(), val.get_label()) == ("train", "validation")
    legend = b.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
        "train",
        "validation",
    ]
    assert a.get_legend() is None
    for ax in (a, b):
        assert _grid_alpha(ax) == {0.3}
        assert all(line.get_visible() for line in ax.xaxis.get_gridlines())


def test_dlpc_tune_plot_draws_each_kernels_best_time_in_ms(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from dlpc.tools.dlpc_tune import plot

    figures = _captured_figures(monkeypatch)
    history = [(1, "k0", 0.004), (2, "k1", 0.002), (3, "k0", 0.001)]
    path = tmp_path / "t.png"
    plot(history, str(path), "tuned")
    (fig,) = figures
    assert tuple(fig.get_size_inches()) == (6.0, 4.0) and _png_size(path) == (600, 400)
    (ax,) = fig.axes
    assert ax.get_title() == "tuned" and ax.get_yscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("trial (whole log)", "best time found (ms)")
    k0, k1 = ax.lines
    assert list(k0.get_xdata()) == [1, 3] and list(k0.get_ydata()) == [4.0, 1.0]
    assert list(k1.get_xdata()) == [2] and list(k1.get_ydata()) == [2.0]
    assert (k0.get_label(), k0.get_drawstyle(), k0.get_marker()) == ("k0", "steps-post", ".")
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["k0", "k1"]
    assert {t.get_fontsize() for t in legend.get_texts()} == {7.0}
    assert _grid_alpha(ax) == {0.3}
    assert all(line.get_visible() for line in ax.yaxis.get_gridlines())
    # 12 kernels still get a legend, 13 do not
    for n, legend in ((12, True), (13, False)):
        figures.clear()
        plot([(t, f"k{t}", 0.001) for t in range(n)], str(path), "many")
        assert (figures[0].axes[0].get_legend() is not None) is legend, n


# ---- dlpc-tune's run loop with a stand-in tuner ----------------------------------------------
def test_dlpc_tune_run_hands_on_its_options_and_prints_the_table(
    tiny, tmp_path, monkeypatch, capsys
):
    """Trials: k0 first 4 ms then 2 ms, a failed one, a re-measurement (trial -1, skipped),
    k1 failed only (time None); k2 never measured. The bar steps to each trial number; the
    table shows first and best in ms and the speed-up; the log line counts the failures."""
    import dlpc.passes.pipeline as pipeline
    import dlpc.tune.search as search
    from dlpc.tools import dlpc_tune

    tasks = [SimpleNamespace(kernel=f"k{i}", sig=f"s{i}", default=f"d{i}") for i in range(3)]
    best = {"s0": SimpleNamespace(time=0.0016), "s1": None, "s2": None}
    asked = []

    def log_best(sig, target, default, machine):
        asked.append((sig, target, default, machine))
        return best[sig]

    log = SimpleNamespace(best=log_best, records=[1, 2, 3, 4, 5])
    E = SimpleNamespace
    events = [
        E(trial=1, ok=True, time=0.004, kernel="k0", best=0.004),
        E(trial=3, ok=True, time=0.002, kernel="k0", best=0.002),
        E(trial=-1, ok=False, time=None, kernel="k0", best=0.002),
        E(trial=4, ok=False, time=0.001, kernel="k0", best=0.002),
        E(trial=5, ok=True, time=None, kernel="k1-with-a-long-kernel-name-here", best=None),
    ]
    made = {}

    class FakeTuner:
        def __init__(self, module, **kw):
            made.update(kw)
            self.tasks, self.log, self.machine = tasks, log, "m1"

        def run(self, **kw):
            made["run"] = kw
            yield from events

    class Bar:
        def __init__(self, **kw):
            self.kw, self.n, self.steps, self.postfix = kw, 0, [], []

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, k):
            self.steps.append(k)
            self.n += k

        def set_postfix_str(self, text):
            self.postfix.append(text)

    bars = []
    lowered = []
    model = SimpleNamespace(module=SimpleNamespace(clone=lambda: "module"))
    monkeypatch.setattr(search, "Tuner", FakeTuner)
    monkeypatch.setattr(pipeline, "lower", lambda *a, **k: lowered.append((a, k)))
    monkeypatch.setattr(dlpc_tune, "load_model", lambda *a: model)
    monkeypatch.setattr(dlpc_tune, "bound_weights", lambda m: {"w": 1})
    monkeypatch.setattr(dlpc_tune, "replay_note", lambda *a: "replayed: NOTE")
    monkeypatch.setattr(dlpc_tune, "progress", lambda **kw: bars.append(Bar(**kw)) or bars[-1])
    plotted = []
    monkeypatch.setattr(dlpc_tune, "plot", lambda *a: plotted.append(a))
    monkeypatch.setattr(dlpc_tune, "history_of", lambda *a, **k: [("history", a, k)])
    log_path = str(tmp_path / "t.jsonl")
    png = str(tmp_path / "t.png")
    argv = [tiny, "--log", log_path, "--trials", "7", "--strategy", "random", "--seed", "3"]
    argv += ["--threads", "2", "--timeout", "9", "--verify", "0", "-O", "1", "--plot", png]
    argv += ["--time-budget", "30"]
    assert dlpc_tune.main(argv) == 0
    out, err = capsys.readouterr()
    assert made == {
        "log": log_path,
        "target": "c",
        "strategy": "random",
        "seed": 3,
        "threads": 2,
        "timeout": 9.0,
        "verify": 0,
        "run": {"trials": 7, "time_budget": 30.0},
    }
    ((args, kw),) = lowered
    assert args[:2] == ("module", "loop") and args[2].opt_level == 1 and args[2].schedule
    assert kw == {"weights": {"w": 1}, "unscheduled": True}
    (bar,) = bars
    assert bar.kw == {"total": 7, "desc": "tuning", "unit": "trial", "disable": None}
    assert bar.steps == [1, 2, 1, 1]
    assert bar.postfix == [
        "k0 best 4.000 ms failed 0",
        "k0 best 2.000 ms failed 0",
        "k0 best 2.000 ms failed 1",
        "k1-with-a-long-kernel-na best n/a failed 2",
    ]
    assert err == "replayed: NOTE\n"
    assert out.splitlines() == [
        f"{'kernel':32s} {'first (ms)':>12s} {'best (ms)':>12s} {'speedup':>8s}",
        f"{'k0':32s} {'4.0000':>12s} {'1.6000':>12s} {'2.50x':>8s}",
        f"{'k1':32s} {'not tuned':>12s} {'not tuned':>12s} {'-':>8s}",
        f"{'k2':32s} {'not tuned':>12s} {'not tuned':>12s} {'-':>8s}",
        f"log: {log_path} (5 records, 2 failed this run)",
        f"plot: {png}",
    ]
    assert asked == [(f"s{i}", "c", f"d{i}", "m1") for i in range(3)]
    ((history, path, title),) = plotted
    assert history == [("history", (log, tasks), {"machine": "m1"})]
    assert (path, title) == (png, f"dlpc-tune {tiny}")
    # --quiet: the bar is disabled; no note printed when there is none; no plot asked
    monkeypatch.setattr(dlpc_tune, "replay_note", lambda *a: None)
    assert dlpc_tune.main([tiny, "--log", log_path, "--quiet"]) == 0
    assert bars[-1].kw["disable"] is True and capsys.readouterr().err == ""
    assert len(plotted) == 1


# ---- dlpc-run's comparison over several chunks, each verdict, the summary --------------------
@pytest.fixture
def chunk2(monkeypatch):
    """Chunks of 2 elements: the helpers' loops over chunks run several times."""
    from dlpc.tools import dlpc_run

    monkeypatch.setattr(dlpc_run, "CHUNK", 2)
    return dlpc_run


def test_chunks_cover_the_flat_arrays_in_order(chunk2):
    out = np.arange(5, dtype=np.float32).reshape(5, 1)
    got = [(s, a.tolist(), b.tolist()) for s, a, b in chunk2._chunks(out, out + 1)]
    assert got == [(0, [0, 1], [1, 2]), (2, [2, 3], [3, 4]), (4, [4], [5])]
    assert all(a.dtype == np.float64 for _, a, _ in chunk2._chunks(out, out))
    assert chunk2.CHUNK == 2


def test_the_comparison_chunk_is_a_mebi_element():
    from dlpc.tools.dlpc_run import CHUNK

    assert CHUNK == 1 << 20 == 1048576


def test_difference_over_chunks_takes_the_largest_of_each(chunk2):
    ref = np.array([1.0, 2.0, 4.0, 0.0, np.nan, np.inf, -8.0], np.float32)
    out = np.array([1.0, 2.5, 5.0, 0.0, np.nan, np.inf, -8.25], np.float32)
    # |diff| 0.5 / 2, 1 / 4, 0.25 / 8; an exact zero against zero is no relative difference
    assert chunk2.difference(out, ref) == (1.0, 0.25)
    assert chunk2.difference(ref, ref) == (0.0, 0.0)
    small = np.array([0.125, 0.25], np.float32)
    assert chunk2.difference(small, small * 0) == (0.25, np.inf)
    assert chunk2.difference(small[:1], small) == (np.inf, np.inf)
    assert chunk2.difference(small + 0.0625, small) == (0.0625, 0.5)
    assert chunk2.difference(np.float32([np.inf]), np.float32([1.0])) == (np.inf, np.inf)
    assert chunk2.difference(np.float32([]), np.float32([])) == (0.0, 0.0)


def test_within_holds_in_every_chunk(chunk2):
    ref = np.array([1.0, 2.0, 4.0, np.nan, 8.0], np.float32)
    assert chunk2.within(ref, ref, rtol=0.0, atol=0.0)
    assert not chunk2.within(ref[:4], ref, rtol=1.0, atol=1.0)
    late = ref.copy()
    late[4] = 8.5  # (in the last chunk)
    assert not chunk2.within(late, ref, rtol=0.0, atol=0.25)
    assert chunk2.within(late, ref, rtol=0.0, atol=0.5)
    assert chunk2.within(late, ref, rtol=1 / 16, atol=0.0)
    assert not chunk2.within(late, ref, rtol=1 / 32, atol=0.0)


def test_each_verdict_and_the_worst_element_over_chunks(chunk2):
    verdict = chunk2.verdict
    ref = np.array([[1.0, 2.0], [4.0, 8.0], [16.0, 32.0]], np.float32)
    assert verdict(ref, ref, 0.0, 0.0) == (True, "ok (identical)", "")
    assert verdict(ref[:2], ref, 1.0, 1.0) == (
        False,
        "MISMATCH (shape 2x2, reference 3x2)",
        "",
    )
    assert verdict(np.float32(1), np.float32([1]), 0.0, 0.0)[1] == (
        "MISMATCH (shape scalar, reference 1)"
    )
    out = ref.copy()
    out[2, 1] = 32.5  # the largest |diff|, in the last chunk
    out[0, 1] = 2.25
    ok, said, worst = verdict(out, ref, 0.0, 1.0)
    assert (ok, said) == (True, "ok (atol holds alone; rtol alone would not)")
    assert worst == (
        "worst against its bound: [2, 1] = 32.5 vs reference 32 (|diff| 0.5, allowed 1)"
    )
    ok, said, worst = verdict(out, ref, 1 / 8, 0.0)  # (0.25 of 2 is the largest share)
    assert (ok, said) == (True, "ok (rtol holds alone; atol alone would not)")
    assert worst.startswith("worst against its bound: [0, 1] = 2.25 vs reference 2 ")
    assert worst.endswith("(|diff| 0.25, allowed 0.25)")
    assert verdict(out, ref, 1.0, 1.0)[1] == "ok (atol and rtol each hold alone)"
    # 0.5 <= 0.25 + 0.01 * 32 and 0.25 <= 0.25 + 0.01 * 2: only their sum holds
    assert verdict(out, ref, 0.01, 0.25)[:2] == (True, "ok (only atol + rtol*|ref| together hold)")
    ok, said, worst = verdict(out, ref, 0.0, 0.25)
    assert (ok, said) == (False, "MISMATCH (1 of 6 elements beyond atol + rtol*|ref|)")
    assert worst.startswith("worst against its bound: [2, 1] = 32.5 ")
    # equal excesses in two chunks: the first is named
    tie = ref.copy()
    tie[0, 0], tie[2, 0] = 1.5, 16.5
    assert verdict(tie, ref, 0.0, 0.0)[2].startswith("worst against its bound: [0, 0] = 1.5 ")
    # a NaN against a number is beyond any bound; integers print as integers
    nan = ref.copy()
    nan[1, 1] = np.nan
    ok, said, worst = verdict(nan, ref, 1.0, 1.0)
    assert (ok, said) == (False, "MISMATCH (1 of 6 elements beyond atol + rtol*|ref|)")
    assert worst == "worst against its bound: [1, 1] = nan vs reference 8 (|diff| inf, allowed 9)"
    ints = np.array([1, 2, 3], np.int64)
    assert verdict(ints + [0, 0, 1], ints, 0.0, 0.0)[2] == (
        "worst against its bound: [2] = 4 vs reference 3 (|diff| 1, allowed 0)"
    )


def test_summary_and_its_statistics_over_chunks(chunk2):
    summary = chunk2.summary
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 9.0], np.float32).reshape(2, 3)
    # mean 4, population variance (9 + 4 + 1 + 0 + 1 + 25) / 6 = 40 / 6
    assert summary(y) == f"2x3 float32  [1, 2, 3, 4, 5, ...]  mean 4  std {(40 / 6) ** 0.5:.6g}"
    assert summary(y, count=2) == f"2x3 float32  [1, 2, ...]  mean 4  std {(40 / 6) ** 0.5:.6g}"
    assert summary(np.float32(2.5)) == "scalar float32  [2.5]  mean 2.5  std 0"
    assert summary(np.zeros((0, 3), np.float32)) == "0x3 float32  []"
    assert summary(np.array([True, False])) == "2 bool  [True, False]"
    assert summary(np.array([3, 5], np.int64)) == "2 int64  [3, 5]  mean 4  std 1"
    assert chunk2.mean_std(np.array([1.0, 3.0, 5.0, 7.0, 9.0], np.float32)) == (5.0, 8**0.5)


# ---- every tool's -O: 0 to 3 ---------------------------------------------------------------
@pytest.mark.parametrize("tool", ["dlpc", "dlpc_run", "dlpc_train", "dlpc_tune"])
def test_each_tool_takes_o0_to_o3_only(tool):
    import importlib

    module = importlib.import_module(f"dlpc.tools.{tool}")
    parser = module.build_parser() if tool == "dlpc_train" else module.parser()
    for level in range(4):
        assert parser.parse_args(["m.dlpc", f"-O{level}"]).opt_level == level
    for level in ("4", "-1"):
        with pytest.raises(DlpcError, match="-O"):
            parser.parse_args(["m.dlpc", "-O", level])


# ---- dlpc-run's report lines ----------------------------------------------------------------
def test_dlpc_run_prints_each_line_of_its_report(tiny, monkeypatch, capsys):
    """The header, per output its summary and comparison, the median time in ms; --check
    with a mismatch: the one-line error and exit 1; --repeat below 1 refused."""
    from dlpc import api
    from dlpc.tools import dlpc_run

    timed = []

    def time(self, *inputs, repeat):
        timed.append((len(inputs), repeat))
        return 0.0125

    monkeypatch.setattr(api.CompiledModel, "time", time)
    argv = [tiny, "--target", "numpy", "--batch", "2", "--repeat", "3", "--seed", "4", "-O1"]
    assert dlpc_run.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tiny: target numpy, -O1, 1 input(s) seed 4"
    assert out[1].startswith("output 0: 2x3 float32  [")
    assert out[2] == (
        "  vs reference: max abs diff 0, max rel diff 0 (rtol 0.0001, atol 1e-05): ok (identical)"
    )
    assert out[3:] == ["time: 12.5 ms per run (median of 3)"]
    assert timed == [(1, 3)]
    real = api.reference
    monkeypatch.setattr(api, "reference", lambda m, xs: [y + 0.5 for y in real(m, xs)])
    assert dlpc_run.main([*argv, "--check", "--atol", "0.25", "--rtol", "0"]) == 1
    out, err = capsys.readouterr()
    assert "max abs diff 0.5, " in out and "(rtol 0, atol 0.25): MISMATCH (6 of 6 elements" in out
    assert err == "dlpc-run: error: output differs from the numpy reference beyond tolerance\n"
    assert dlpc_run.main([*argv, "--check", "--atol", "0.5", "--rtol", "0"]) == 0
    assert dlpc_run.main([*argv, "--atol", "0.25"]) == 0  # (reported, not checked)
    capsys.readouterr()
    assert dlpc_run.main([tiny, "--repeat", "0"]) == 1
    assert capsys.readouterr().err == "dlpc-run: error: --repeat must be >= 1, got 0\n"
    assert dlpc_run.main([tiny, "--target", "numpy", "--profile"]) == 1
    assert capsys.readouterr().err == (
        "dlpc-run: error: --profile needs --target c or opencl, not 'numpy'\n"
    )


# ---- diagnostics.py: the paths no tool run reaches -------------------------------------------
def test_one_line_cuts_at_exactly_its_limit():
    from dlpc.diagnostics import first_line, one_line

    assert one_line("x" * 10, limit=10) == "x" * 10
    assert one_line("x" * 11, limit=10) == "xxxxxxx..."
    assert one_line("why:\n  because  it\n is", limit=400) == "why: because it"
    assert one_line("no colon\nsecond") == "no colon"
    assert first_line("\n  \n first \nsecond") == "first" and first_line(" \n") == ""


def test_a_short_pass_pipeline_error_is_one_line():
    from xdsl.utils.exceptions import ArgSpecParseError

    from dlpc.diagnostics import format_exception

    def error(text: str) -> ArgSpecParseError:
        e = ArgSpecParseError.__new__(ArgSpecParseError)
        BaseException.__init__(e, text)
        return e

    four = error("Error parsing:\n  pass-pipeline:1:3\n  a{b\n   ^")
    assert format_exception(four) == (
        "error: bad pass pipeline: Error parsing: pass-pipeline:1:3 a{b ^"
    )
    five = error("Error parsing:\npass-pipeline:1:3\n\n  a{b  \n   ^\n  expected }")
    assert format_exception(five) == "error: bad pass pipeline 'a{b' at column 3: expected }"


def test_a_message_of_several_arguments_takes_a_string_first_one():
    from dlpc.diagnostics import _message

    assert _message(ValueError("first\nline", "second")) == "first"
    assert _message(ValueError(3, "second")) == "(3, 'second')"
    assert _message(ValueError("only")) == "only"


def test_a_failed_flush_of_stdout_is_one_line(monkeypatch):
    import errno

    from dlpc.diagnostics import _flush_stdout, run_guarded

    class Full(io.StringIO):
        def __init__(self, e):
            super().__init__()
            self.e = e

        def flush(self):
            raise self.e

    monkeypatch.setattr(sys, "stdout", Full(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(DlpcError) as e:
        _flush_stdout()
    assert str(e.value) == "error: cannot write to stdout: No space left on device"
    monkeypatch.setattr(sys, "stdout", Full(OSError("bare")))
    with pytest.raises(DlpcError) as e:
        _flush_stdout()
    assert str(e.value) == "error: cannot write to stdout: bare"
    monkeypatch.setattr(sys, "stdout", Full(BrokenPipeError()))
    with pytest.raises(BrokenPipeError):
        _flush_stdout()
    assert run_guarded(lambda: 0, "t") == 141


def test_write_stdout_to_a_closed_pipe_is_a_broken_pipe(monkeypatch):
    import os

    from dlpc.diagnostics import write_stdout

    r, w = os.pipe()
    os.close(r)
    with os.fdopen(w, "w") as f:
        monkeypatch.setattr(sys, "stdout", f)
        with pytest.raises(BrokenPipeError):
            write_stdout("x")


def test_versions_and_hints_without_package_metadata(monkeypatch):
    import importlib.metadata as metadata

    from dlpc.diagnostics import dlpc_version, install_hint, version_text

    tail = install_hint("train").split(", or pip install ")[1].split()
    assert tail and all("==" in p and ";" not in p and "extra" not in p for p in tail)
    assert [p.split("==")[0] for p in tail] == ["tqdm", "scikit-learn", "matplotlib"]

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    monkeypatch.setattr(metadata, "requires", missing)
    assert dlpc_version() == "unknown"
    assert version_text("dlpc") == "dlpc unknown (xdsl unknown)"
    assert version_text("dlpc-run") == "dlpc-run (dlpc unknown, xdsl unknown)"
    assert install_hint("train") == "pip install -e '.[train]' from the dlpc checkout"
    monkeypatch.setattr(metadata, "requires", lambda name: None)
    assert install_hint("train") == "pip install -e '.[train]' from the dlpc checkout"


def test_progress_draws_on_stderr_only_on_a_terminal(monkeypatch):
    from dlpc.diagnostics import progress

    made = []
    monkeypatch.setitem(
        sys.modules, "tqdm", SimpleNamespace(tqdm=lambda it, **kw: made.append((it, kw)))
    )
    progress([1], total=1)
    assert made == [([1], {"total": 1, "file": sys.stderr, "disable": None, "dynamic_ncols": True})]
    progress(disable=True)
    assert made[1] == (None, {"disable": True, "file": sys.stderr, "dynamic_ncols": True})


def test_a_new_file_gets_0666_less_the_umask_an_old_one_keeps_its_mode(tmp_path):
    import os
    import stat

    from dlpc.diagnostics import write_atomically

    for mask, mode in ((0o027, 0o640), (0o002, 0o664), (0o000, 0o666)):
        new = tmp_path / f"new{mask}.txt"
        old = os.umask(mask)
        try:
            write_atomically(new, "n")
        finally:
            os.umask(old)
        assert stat.S_IMODE(new.stat().st_mode) == mode, oct(mask)
    path = tmp_path / "old.sh"
    path.write_text("x")
    os.chmod(path, 0o4755)
    write_atomically(path, "y")
    assert stat.S_IMODE(path.stat().st_mode) == 0o4755 and path.read_text() == "y"


def test_write_atomically_lets_a_broken_pipe_through(tmp_path):
    import os

    from dlpc.diagnostics import write_atomically

    r, w = os.pipe()
    os.close(r)
    fifo_like = f"/dev/fd/{w}"
    try:
        with pytest.raises(BrokenPipeError):
            write_atomically(fifo_like, "x")
    finally:
        os.close(w)


# ---- tools/common.py: the model read from stdin, what a tool reads, memory --------------------
def test_model_inputs_of_stdin_and_of_a_file(tmp_path):
    from dlpc.tools.common import model_inputs

    model = tmp_path / "m.dlpc"
    model.write_text("")
    (tmp_path / "m.npz").write_bytes(b"")
    log = tmp_path / "t.jsonl"
    log.write_text("")
    w = tmp_path / "w.npz"
    w.write_bytes(b"")
    assert model_inputs("-", None, str(log), None) == [(str(log), "an input")]
    assert model_inputs("-", str(w)) == [(str(w), "the --weights input")]
    assert model_inputs(str(model), None) == [
        (str(model), "the model"),
        (str(tmp_path / "m.npz"), "the weights beside the model"),
    ]
    assert model_inputs(str(model), str(w), str(tmp_path / "absent")) == [
        (str(model), "the model"),
        (str(w), "the --weights input"),
    ]


def test_an_onnx_model_needs_onnx_and_reads_from_stdin(tmp_path, monkeypatch):
    from dlpc.tools.common import check_model_path, load_model

    path = tmp_path / "m.onnx"
    path.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(DlpcError) as e:
        check_model_path(str(path), None)
    assert str(e.value).startswith("error: importing an ONNX model needs onnx (pip install -e")
    monkeypatch.delitem(sys.modules, "onnx")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = onnx._serialize(proto) if hasattr(onnx, "_serialize") else proto.SerializeToString()
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data)))
    model = load_model("-", "onnx")
    assert (model.name, model.path) == ("stdin", None)
    assert "graph.relu" in str(model.module)


def test_load_model_checks_batch_first(tmp_path):
    from dlpc.tools.common import load_model

    with pytest.raises(DlpcError) as e:
        load_model("m.dlpc", None, None, 0)
    assert str(e.value) == "error: --batch must be >= 1, got 0"
    with pytest.raises(DlpcError) as e:
        load_model("m.onnx", None, None, 2)
    assert str(e.value) == "error: --batch applies to .dlpc models, not onnx"


def test_available_memory_when_the_process_status_is_unreadable(monkeypatch):
    import resource

    from dlpc.tools import common

    def fields(path):
        if path == "/proc/self/status":
            raise OSError("gone")
        return {"MemAvailable": 5000}

    monkeypatch.setattr(common, "_kib_fields", fields)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (800, 0))
    assert common.available_memory() == 800  # (the whole limit)


# ---- dlpc: --train's command line, --check-each-pass's weights --------------------------------
def test_dlpc_train_flag_hands_dlpc_train_its_command_line(tiny, monkeypatch, capsys):
    from dlpc.tools import dlpc, dlpc_train

    lines = []
    monkeypatch.setattr(dlpc_train, "main", lambda line: lines.append(line) or 0)
    argv = [tiny, "--train", "--emit", "te", "-O1", "--weights", "w.npz", "--batch", "4"]
    assert dlpc.main([*argv, "--dp", "2", "--pp", "3"]) == 0
    assert dlpc.main([tiny, "--train"]) == 0
    assert dlpc.main([tiny, "--tp", "2"]) == 1
    assert capsys.readouterr().err == "dlpc: error: --dp/--tp/--pp apply to --train\n"
    assert dlpc.main([tiny, "--train", "-o", "x.c"]) == 1
    assert capsys.readouterr().err == (
        "dlpc: error: --train prints to stdout; -o is not supported with it\n"
    )
    assert lines == [
        [tiny, "--emit=te", "-O", "1", "--weights", "w.npz", "--batch", "4"]
        + ["--dp", "2", "--pp", "3"],
        [tiny, "--emit=c", "-O", "2"],
    ]


def test_dlpc_check_each_pass_runs_on_the_known_weights(tmp_path, monkeypatch, capsys):
    """Folded: the checker gets the pipeline's weights; not folded but known: the model's
    own; unknown weights: None (random ones)."""
    from dlpc.backends.runtime import evaluate
    from dlpc.tools import dlpc

    seen = []
    real = evaluate.make_checker

    def make_checker(known=None, **kw):
        seen.append((None if known is None else sorted(known), kw))
        return real(known, **kw)

    monkeypatch.setattr(evaluate, "make_checker", make_checker)
    known = tmp_path / "k.dlpc"
    known.write_text(
        "model k(x: f32[2, 4]) {\n  param w: f32[4, 4] = kaiming(seed=1)\n"
        "  return relu(matmul(x, w))\n}\n"
    )
    unknown = tmp_path / "u.mlir"  # (graph IR without a weights file: w is unknown)
    unknown.write_text(
        'func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {\n  %w = graph.param "w" : '
        "tensor<2x4xf32>\n  %y = graph.add %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> "
        "tensor<2x4xf32>\n  func.return %y : tensor<2x4xf32>\n}\n"
    )
    for path, extra in ((known, []), (known, ["--no-fold-weights"]), (unknown, [])):
        assert dlpc.main([str(path), "--emit", "te", "--check-each-pass", *extra]) == 0
    capsys.readouterr()
    assert seen == [(["w"], {"functions": "main"})] * 2 + [(None, {"functions": "main"})]


# ---- dlpc-opt: stdin, any file name, its help ------------------------------------------------
OPT_INPUT = """func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
"""


def test_dlpc_opt_reads_stdin_and_a_file_of_any_name(tmp_path, monkeypatch, capsys):
    from dlpc.tools.dlpc_opt import main

    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(OPT_INPUT.encode())))
    assert main(["-", "-p", "graph-to-te"]) == 0
    assert "te.compute" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(OPT_INPUT.encode())))
    assert main([]) == 0  # (no file: stdin too)
    assert "graph.relu" in capsys.readouterr().out
    src = tmp_path / "model.txt"
    src.write_text(OPT_INPUT)
    assert main([str(src)]) == 0
    assert "graph.relu" in capsys.readouterr().out
    src.write_text("not ir")
    assert main([str(src)]) == 1
    assert capsys.readouterr().err == f"{src}:1:5: error: Operation not is not registered\n"


def test_dlpc_opt_help_documents_every_option(capsys):
    from dlpc.tools.dlpc_opt import main

    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "do not verify the IR after parsing and after each pass" in text
    assert "print the version of dlpc-opt (dlpc and xDSL) and exit" in text
    assert "IR file of any name (MLIR text); - or none reads stdin" in text


# ---- dlpc-train's image fitting: bilinear against a scalar reference --------------------------
def _bilinear_reference(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """align_corners=False, one output pixel at a time (the source clamped to the image)."""
    H, W = img.shape

    def source(i: int, n_out: int, n_in: int) -> tuple[int, int, float]:
        s = min(max((i + 0.5) * n_in / n_out - 0.5, 0.0), n_in - 1.0)
        lo = int(np.floor(s))
        return lo, min(lo + 1, n_in - 1), s - lo

    out = np.zeros((h, w))
    for i in range(h):
        r0, r1, fr = source(i, h, H)
        for j in range(w):
            c0, c1, fc = source(j, w, W)
            top = img[r0, c0] * (1 - fc) + img[r0, c1] * fc
            bottom = img[r1, c0] * (1 - fc) + img[r1, c1] * fc
            out[i, j] = top * (1 - fr) + bottom * fr
    return out


@pytest.mark.parametrize(("h", "w"), [(7, 4), (2, 9), (3, 5), (1, 1)])
def test_resize_bilinear_matches_the_reference_up_and_down(h, w):
    from dlpc.tools.dlpc_train import resize_bilinear

    images = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32) ** 3
    out = resize_bilinear(images, h, w)
    assert out.shape == (2, h, w) and out.dtype == np.float32
    for k in range(2):
        np.testing.assert_allclose(out[k], _bilinear_reference(images[k], h, w), rtol=1e-5)


def test_fit_to_input_keeps_reshapes_resizes_or_refuses():
    from dlpc.tools.dlpc_train import fit_to_input

    x = np.random.default_rng(0).standard_normal((2, 8, 8)).astype(np.float32)
    said: list[str] = []
    assert fit_to_input(x, (8, 8), "d", said.append) is x and said == []
    flat = fit_to_input(x, (64,), "d", said.append)
    assert flat.shape == (2, 64) and np.array_equal(flat, x.reshape(2, 64))
    assert said == ["d: samples 8x8 reshaped to the model's input 64"]
    said.clear()
    out = fit_to_input(x, (1, 16), "d", said.append)  # (one spatial dim, a square size)
    assert out.shape == (2, 1, 16) and out.dtype == np.float32
    want = x[1].reshape(4, 2, 4, 2).mean(axis=(1, 3)).ravel()
    np.testing.assert_allclose(out[1, 0], want, rtol=1e-5)
    assert said == ["d: 8x8 images resized to 4x4 (bilinear) for the model's input 1x16"]
    with pytest.raises(DlpcError) as e:
        fit_to_input(np.zeros(3, np.float32), (4,), "v", said.append)
    assert (
        str(e.value) == "error: v samples have shape scalar but the model's input is 4 per sample"
    )
    with pytest.raises(DlpcError) as e:
        fit_to_input(np.zeros((2, 2, 3, 4), np.float32), (1, 4, 4), "v", said.append)
    assert str(e.value) == (
        "error: v samples have shape 2x3x4 but the model's input is 1x4x4 per sample"
    )


def test_square_sides():
    from dlpc.tools.dlpc_train import _square

    assert [_square(n) for n in (0, 1, 2, 4, 8, 9, 24, 25, 26, 10000)] == [
        0, 1, 0, 2, 0, 3, 0, 5, 0, 100
    ]  # fmt: skip


# ---- dlpc-tune's option checks, dlpc-train's split seed --------------------------------------
def test_dlpc_tune_checks_each_count_and_its_log(tiny, tmp_path, capsys):
    from dlpc.tools import dlpc_tune

    log = str(tmp_path / "t.jsonl")
    for extra, message in [
        (["--trials", "0"], "dlpc-tune: error: --trials must be >= 1, got 0"),
        (["--threads", "0"], "dlpc-tune: error: --threads must be >= 1, got 0"),
        (["--verify", "-1"], "dlpc-tune: error: --verify must be >= 0, got -1"),
        (["--time-budget", "-2"], "dlpc-tune: error: --time-budget must be > 0 seconds, got -2.0"),
        (["--log", str(tmp_path)], f"dlpc-tune: error: tuning log {tmp_path} is not a file"),
        (
            ["--log", str(tmp_path / "no" / "t.jsonl")],
            f"dlpc-tune: error: cannot write {tmp_path / 'no' / 't.jsonl'}: no such directory "
            f"{tmp_path / 'no'}",
        ),
    ]:
        assert dlpc_tune.main([tiny, "--log", log, *extra]) == 1, extra
        assert capsys.readouterr().err == message + "\n", extra


def test_the_data_split_seed_is_zero(tmp_path):
    from dlpc.tools.dlpc_train import DATA_SPLIT_SEED, load_data

    assert DATA_SPLIT_SEED == 0
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((20, 2), np.float32), y=np.arange(20))
    _, ytr, _, yv, _, yt, _ = load_data(str(path))
    order = np.random.default_rng(0).permutation(20)
    assert yt.tolist() == order[:4].tolist() and yv.tolist() == order[4:5].tolist()
    assert ytr.tolist() == order[5:].tolist()


def test_a_model_path_sorting_before_the_dash_is_checked():
    """common.py:66 (`path != "-"` -> `>`: a missing '!m.dlpc' went unchecked)."""
    from dlpc.tools.common import check_model_path

    with pytest.raises(DlpcError) as e:
        check_model_path("!none.dlpc", None)
    assert str(e.value) == "error: no such file: !none.dlpc"


def test_available_memory_without_swap_is_memavailable(monkeypatch):
    """common.py:167 (a meminfo without SwapFree adds nothing)."""
    import resource

    from dlpc.tools import common

    monkeypatch.setattr(common, "_kib_fields", lambda path: {"MemAvailable": 1000})
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, 0))
    assert common.available_memory() == 1000


def test_train_takes_exactly_one_batch_of_samples(tiny, tmp_path, fake_trainer, capsys):
    """29 training samples in a batch of 29: one step an epoch (29 samples in 2 s)."""
    from dlpc.tools.dlpc_train import main

    argv = [tiny, "--data", _npz(tmp_path), "--batch", "29", "--epochs", "1", "--target", "numpy"]
    assert main(argv) == 0
    assert capsys.readouterr().err.splitlines() == [
        "epoch 1/1: loss 0.1250, accuracy 75.0 %, validation accuracy 50.0 %, 14 samples/s"
    ]
    assert main([*argv[:4], "30", *argv[5:]]) == 1
    assert capsys.readouterr().err == (
        "dlpc-train: error: 29 training samples are fewer than one batch of 30\n"
    )


def test_dlpc_tune_describes_itself_by_its_docstrings_first_line():
    from dlpc.tools.dlpc_tune import parser

    p = parser()
    assert p.description == (
        "search loop schedules for the kernels of a model and log the best ones."
    )
    assert (p.prog, p.example) == (
        "dlpc-tune",
        "dlpc-tune examples/mlp.dlpc --trials 16 --log tune.jsonl",
    )


def test_resize_bilinear_takes_the_edge_rows_exactly_when_upsampling():
    """Past the last source row the position is clamped to it (weight 0 for the next): the
    edge rows come out bit-identical, not as v * (1 - f) + v * f."""
    from dlpc.tools.dlpc_train import resize_bilinear

    images = np.random.default_rng(5).standard_normal((2, 3, 5)).astype(np.float32)
    out = resize_bilinear(images, 7, 5)
    assert np.array_equal(out[:, 0], images[:, 0]) and np.array_equal(out[:, -1], images[:, -1])
    out = resize_bilinear(images, 3, 11)
    assert np.array_equal(out[..., 0], images[..., 0])
    assert np.array_equal(out[..., -1], images[..., -1])


def test_history_of_compares_targets_and_machines_by_value():
    """dlpc_tune.py:166 (`!=` -> `is not`): a log's strings are read from JSON, equal to the
    ones asked for but other objects."""
    from dlpc.tools.dlpc_tune import history_of

    target, machine = "".join(["open", "cl"]), "".join(["m", "1"])
    log = SimpleNamespace(
        records=[
            SimpleNamespace(sig="s", script="a", time=2.0, machine=machine, target=target, ok=True)
        ]
    )
    tasks = [SimpleNamespace(sig="s", kernel="k")]
    assert history_of(log, tasks, target="opencl", machine="m1") == [(1, "k", 2.0)]


# ---- dlpc-tune: a kernel never measured, a failed first trial, unbound weights ---------------
def test_replay_note_of_a_kernel_never_measured(tmp_path):
    from dlpc.tools.dlpc_tune import replay_note

    record = SimpleNamespace(sig="s", target="c", machine="m", script="a", time=1e-3)

    class Log:
        records = [record]

        def best(self, sig, target, default=None, machine=None):
            return record if sig == "s" else None

    path = tmp_path / "t.jsonl"
    path.write_text("")
    tasks = [
        SimpleNamespace(sig="s", kernel="k", default=""),
        SimpleNamespace(sig="t", kernel="u", default=""),
    ]
    assert replay_note(Log(), tasks, str(path), machine="m").splitlines()[1:] == [
        "  k: best so far 1.0000 ms",
        "  u: best so far none yet",
    ]


def test_history_of_starts_a_kernels_curve_at_its_first_time():
    from dlpc.tools.dlpc_tune import history_of

    def rec(script, time, ok=True):
        return SimpleNamespace(sig="s", script=script, time=time, machine="m", target="c", ok=ok)

    log = SimpleNamespace(records=[rec("a", None, ok=False), rec("b", 4.0), rec("c", 5.0)])
    tasks = [SimpleNamespace(sig="s", kernel="k")]
    assert history_of(log, tasks, machine="m") == [(2, "k", 4.0), (3, "k", 4.0)]


def test_tuning_without_the_weights_is_a_note(tmp_path, capsys):
    from dlpc.tools.common import load_model
    from dlpc.tools.dlpc_tune import bound_weights

    path = tmp_path / "u.mlir"
    path.write_text(
        'func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {\n  %w = graph.param "w" : '
        "tensor<2x4xf32>\n  %y = graph.add %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> "
        "tensor<2x4xf32>\n  func.return %y : tensor<2x4xf32>\n}\n"
    )
    assert bound_weights(load_model(str(path))) is None
    assert capsys.readouterr().err == (
        "dlpc-tune: note: error: no value for weight 'w' (graph.param in u); pass weights= or "
        "--weights; tuning the model without its weights folded\n"
    )


def test_dlpc_run_hands_opencl_its_profile(tiny, monkeypatch, capsys):
    """dlpc_run.py:306 (`!= "opencl"` -> `<=`: --opencl-profile was refused on opencl too)."""
    pytest.importorskip("pyopencl")
    from dlpc import api
    from dlpc.tools import dlpc_run

    seen = []

    def compile(model, **kw):
        seen.append(kw)
        raise DlpcError("error: stop here")

    monkeypatch.setattr(api, "compile", compile)
    argv = [tiny, "--batch", "2", "--target", "opencl", "--opencl-profile", "cpu", "-O3"]
    assert dlpc_run.main(argv) == 1
    assert capsys.readouterr().err == "dlpc-run: error: stop here\n"
    assert seen == [{"target": "opencl", "opt_level": 3, "tuning_log": None, "profile": "cpu"}]
    assert dlpc_run.main([tiny, "--target", "c", "--opencl-profile", "cpu"]) == 1
    assert capsys.readouterr().err == (
        "dlpc-run: error: --opencl-profile needs --target opencl, not 'c'\n"
    )


def test_a_verdict_takes_equal_infinities_and_nans_as_identical(chunk2):
    """dlpc_run.py:215 (`(a == b) | both NaN` -> `&`: no element was the same, so equal
    infinities (inf - inf = NaN) and NaN against NaN were mismatches)."""
    x = np.array([np.inf, -np.inf, np.nan, 1.0, np.nan], np.float32)
    assert chunk2.verdict(x, x.copy(), 0.0, 0.0) == (True, "ok (identical)", "")
    y = x.copy()
    y[3] = 1.5
    ok, said, worst = chunk2.verdict(y, x, 0.0, 1.0)
    assert (ok, said) == (True, "ok (atol holds alone; rtol alone would not)")
    assert worst == "worst against its bound: [3] = 1.5 vs reference 1 (|diff| 0.5, allowed 1)"


def test_a_data_set_past_the_small_int_cache_loads(tmp_path):
    """dlpc_train.py:197 (`len(x) != len(y)` -> `is not`: 300 samples in x and y were told
    apart)."""
    from dlpc.tools.dlpc_train import load_data

    path = tmp_path / "big.npz"
    np.savez(path, x=np.zeros((300, 2), np.float32), y=np.zeros(300, np.int64))
    x, *_ = load_data(str(path))
    assert len(x) == 300 - 60 - 24


def test_a_multi_rank_run_from_the_command_line_gets_its_arguments(tiny, monkeypatch):
    """dlpc_train.py:328 (`sys.argv[1:]` -> `[0:]`: the program's name was handed on)."""
    from dlpc.dist import cli
    from dlpc.tools import dlpc_train

    seen = []
    monkeypatch.setattr(cli, "run", lambda args, line, *rest: seen.append(line) or 0)
    monkeypatch.setattr(sys, "argv", ["dlpc-train", tiny, "--dp", "2"])
    assert dlpc_train.main() == 0
    assert seen == [[tiny, "--dp", "2"]]


def test_a_data_file_named_after_digits_is_a_file(tmp_path, monkeypatch):
    """dlpc_train.py:158 (`spec == "digits"` -> `>=`: 'train.npz' sorts after 'digits' and
    loaded the digits instead)."""
    from dlpc.tools.dlpc_train import load_data

    monkeypatch.chdir(tmp_path)
    with pytest.raises(DlpcError) as e:
        load_data("train.npz")
    assert str(e.value) == "error: no such data file: train.npz"


def test_an_infinite_reference_allows_atol_alone(chunk2):
    """dlpc_run.py:218 (a non-finite reference scales rtol by 0, not by |-1|)."""
    ok, said, worst = chunk2.verdict(np.float32([1.0, 2.0]), np.float32([np.inf, 2.0]), 0.5, 0.25)
    assert (ok, said) == (False, "MISMATCH (1 of 2 elements beyond atol + rtol*|ref|)")
    assert worst == "worst against its bound: [0] = 1 vs reference inf (|diff| inf, allowed 0.25)"
