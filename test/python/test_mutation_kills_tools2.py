"""More tests written against surviving mutants of the tools area (issue 35,
bench/mutation.py --area tools): dlpc-train's data handling, validation split, plot,
progress line and multi-rank command line, dlpc-tune's timing table, dlpc-run's opencl
check. Each runs a tool in-process on small inputs."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError

MLP = Path(__file__).parents[2] / "examples" / "mlp.dlpc"

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


def _npz(tmp_path, n: int, shape=(4,)) -> str:
    rng = np.random.default_rng(0)
    path = tmp_path / "d.npz"
    np.savez(
        path,
        x=rng.standard_normal((n, *shape)).astype(np.float32),
        y=rng.integers(0, 3, n).astype(np.int64),
    )
    return str(path)


def test_npz_split_without_a_test_set(tmp_path):
    """100 samples, no x_test: a fifth for test (20), a tenth of the rest for validation (8)."""
    from dlpc.tools.dlpc_train import load_data

    x, y, xv, yv, xt, yt, name = load_data(_npz(tmp_path, 100))
    assert (len(x), len(xv), len(xt)) == (72, 8, 20)
    assert name == "d.npz"


def test_digits_split():
    """digits: 1797 samples -> 359 test, 143 validation, 1295 train."""
    pytest.importorskip("sklearn")
    from dlpc.tools.dlpc_train import load_data

    x, y, xv, yv, xt, yt, name = load_data("digits")
    assert (len(x), len(xv), len(xt)) == (1295, 143, 359)


def test_2d_samples_resized_to_a_2d_input():
    """[N, 8, 8] images fitted to a [1, 4, 4] input are resized (bilinear: 2x2 means)."""
    from dlpc.tools.dlpc_train import fit_to_input

    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 8, 8)
    said = []
    out = fit_to_input(x, (1, 4, 4), "d", said.append)
    assert out.shape == (2, 1, 4, 4)
    np.testing.assert_allclose(out[0, 0], x[0].reshape(4, 2, 4, 2).mean(axis=(1, 3)))
    assert said == ["d: 8x8 images resized to 4x4 (bilinear) for the model's input 1x4x4"]


def test_a_non_square_flat_input_refuses_images():
    """17 is not a square: [N, 8, 8] images do not fit a [17] input (one-line error)."""
    from dlpc.tools.dlpc_train import _square, fit_to_input

    assert (_square(16), _square(17), _square(15)) == (4, 0, 0)
    with pytest.raises(DlpcError, match="samples have shape 8x8 but the model's input is 17"):
        fit_to_input(np.zeros((2, 8, 8), np.float32), (17,), "d", lambda m: None)


def test_plot_shows_validation_accuracy_in_percent(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from dlpc.tools.dlpc_train import plot

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    history = {"loss": [1.0, 0.5], "accuracy": [0.5, 0.75], "val_accuracy": [0.25, 0.5]}
    plot(history, str(tmp_path / "p.png"), "t")
    (fig,) = figures
    train, val = fig.axes[1].lines
    np.testing.assert_allclose(train.get_ydata(), [50, 75])
    np.testing.assert_allclose(val.get_ydata(), [25, 50])
    assert (tmp_path / "p.png").is_file()


def test_multi_rank_run_gets_the_given_command_line(tiny, monkeypatch):
    """main(argv) hands argv itself (not sys.argv) to dlpc.dist.cli.run."""
    from dlpc.dist import cli
    from dlpc.tools import dlpc_train

    seen = []
    monkeypatch.setattr(cli, "run", lambda args, line, *rest: seen.append(line) or 0)
    argv = [tiny, "--dp", "2", "--batch", "4"]
    assert dlpc_train.main(argv) == 0
    assert seen == [argv]


def test_fewer_samples_than_a_batch(tiny, tmp_path, capsys):
    from dlpc.tools.dlpc_train import main

    code = main([tiny, "--data", _npz(tmp_path, 8), "--batch", "8", "--target", "numpy"])
    assert code == 1
    err = capsys.readouterr().err
    assert "error: 7 training samples are fewer than one batch of 8" in err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_shows_loss_and_accuracy(tiny, tmp_path, monkeypatch, capsys):
    """On a terminal each batch updates the bar: 'loss L acc A% R samples/s'."""
    pytest.importorskip("tqdm")
    from dlpc.tools.dlpc_train import main

    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    argv = [tiny, "--data", _npz(tmp_path, 40), "--batch", "8", "--epochs", "1"]
    assert main([*argv, "--target", "numpy"]) == 0
    bar = tty.getvalue()
    assert "epoch 1/1" in bar and " acc " in bar and "samples/s" in bar
    assert "Traceback" not in bar and "error" not in bar


def test_tune_timing_table_in_milliseconds(tmp_path, monkeypatch, capsys):
    """first 2 ms, best 1 ms: the table prints 2.0000 and 1.0000 and 2.00x."""
    import dlpc.passes.pipeline as pipeline
    import dlpc.tune.search as search
    from dlpc.tools import dlpc_tune

    task = SimpleNamespace(kernel="k0", sig="s", default=None)
    log = SimpleNamespace(best=lambda *a: SimpleNamespace(time=0.001), records=[1, 2])
    event = SimpleNamespace(trial=1, ok=True, time=0.002, kernel="k0", best=0.001)

    class FakeTuner:
        def __init__(self, *a, **k):
            self.tasks, self.log, self.machine = [task], log, "m"

        def run(self, **k):
            yield event

    model = SimpleNamespace(module=SimpleNamespace(clone=lambda: None))
    monkeypatch.setattr(search, "Tuner", FakeTuner)
    monkeypatch.setattr(pipeline, "lower", lambda *a, **k: None)
    monkeypatch.setattr(dlpc_tune, "load_model", lambda *a: model)
    monkeypatch.setattr(dlpc_tune, "bound_weights", lambda m: None)
    monkeypatch.setattr(dlpc_tune, "replay_note", lambda *a: "")
    log_path = str(tmp_path / "t.json")
    assert dlpc_tune.main([str(MLP), "--log", log_path, "--trials", "1"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("k0"))
    assert row.split() == ["k0", "2.0000", "1.0000", "2.00x"]


def test_run_opencl_without_pyopencl(monkeypatch, capsys):
    """--target opencl read from a command line (a string not interned) checks for pyopencl
    before anything else."""
    from dlpc.tools.dlpc_run import main

    monkeypatch.setitem(sys.modules, "pyopencl", None)  # import pyopencl -> ImportError
    target = "".join(["open", "cl"])  # as sys.argv gives it: equal to, not "opencl" itself
    assert main(["no-such-model.dlpc", "--target", target]) == 1
    err = capsys.readouterr().err
    assert "target 'opencl' needs pyopencl" in err
