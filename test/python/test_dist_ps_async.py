"""The asynchronous parameter server with bounded staleness (dlpc.dist.parameter_server)
on 3 MPI ranks (a server and 2 workers): staleness 0 equals one device's SGD on the same
global batches; with staleness 1 and 2 (a slowed worker) every pull the server served
kept the bound. The worker is this file, run under mpiexec. From the command line,
`dlpc-train --ps 3 --ps-async --staleness S`: at S = 0 one device's epochs, resumed
from its checkpoint as the uninterrupted run; its bad options are one line each."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240  # a stuck rank fails the test instead of hanging CI
STEPS, GLOBAL_BATCH, LR = 8, 8, 0.5

TINY = """model tiny(x: f32[B, 8]) {
  param fc1.weight: f32[6, 8] = kaiming(seed=1)
  param fc1.bias: f32[6] = normal(seed=2, std=0.1)
  param fc2.weight: f32[4, 6] = kaiming(seed=3)
  param fc2.bias: f32[4] = zeros()

  return linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
}
"""

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


@needs_mpi
def test_async_parameter_server_staleness(tmp_path):
    pytest.importorskip("mpi4py")
    model = tmp_path / "tiny.dlpc"
    model.write_text(TINY)
    command = ["mpiexec", "-n", "3", sys.executable, __file__, "worker", str(model)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) ps-async", result.stdout)) == ["0", "1", "2"]


def _epochs(result: subprocess.CompletedProcess) -> list[str]:
    """The epoch and test lines without their samples/s."""
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [re.sub(r", \d+ samples/s", "", line) for line in (result.stderr + result.stdout).splitlines()]  # fmt: skip
    return [line for line in lines if line.startswith(("epoch ", "test accuracy"))]


@needs_mpi
def test_async_parameter_server_from_dlpc_train(tmp_path):
    """Staleness 0 prints one device's SGD epochs (the workers' losses and correct
    counts, the server's params evaluated); 1 epoch, saved, then resumed to 2 prints the
    uninterrupted run's; staleness 2 trains too (its pull order is timing's)."""
    pytest.importorskip("mpi4py")
    (tmp_path / "tiny.dlpc").write_text(TINY)
    rng = np.random.default_rng(31)
    x = rng.standard_normal((90, 8)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=(x[:, :4].argmax(axis=1)).astype(np.int64))
    common = ["dlpc-train", str(tmp_path / "tiny.dlpc"), "--data", str(tmp_path / "d.npz"), "--batch", "8", "--optimizer", "sgd", "--lr", "0.5", "--target", "numpy"]  # fmt: skip
    ps = ["mpiexec", "-n", "3", *common, "--ps", "3", "--ps-async"]

    def run(command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)

    one = _epochs(run([*common, "--epochs", "2"]))
    assert len(one) == 3
    assert _epochs(run([*ps, "--staleness", "0", "--epochs", "2"])) == one
    save = ["--save", str(tmp_path / "w.npz")]
    first = _epochs(run([*ps, "--epochs", "1", *save]))
    resumed = run([*ps, "--epochs", "2", *save, "--resume"])
    assert "resumed from" in resumed.stderr
    assert first[0].split(":")[1] == one[0].split(":")[1]  # epoch 1/1, epoch 1/2
    assert _epochs(resumed) == one[1:]
    stale = _epochs(run([*ps, "--staleness", "2", "--epochs", "2"]))
    assert [line.split(":")[0] for line in stale] == ["epoch 1/2", "epoch 2/2", "test accuracy"]


@pytest.mark.parametrize(
    "options, message",
    [
        (["--ps", "3", "--ps-async"], "--ps-async runs plain SGD on the server (--optimizer sgd, a constant --lr), not with --optimizer adam"),
        (["--ps", "3", "--ps-async", "--optimizer", "sgd", "--momentum", "0.9"], "--ps-async runs plain SGD on the server (--optimizer sgd, a constant --lr), not with --momentum"),
        (["--ps", "3", "--staleness", "1"], "--staleness applies to --ps-async"),
        (["--dp", "2", "--ps-async"], "--ps-async needs --ps N (a server and N - 1 workers)"),
        (["--ps", "1", "--ps-async"], "--ps-async needs --ps 2 or more (1 server), got 1"),
        (["--ps", "3", "--ps-async", "--optimizer", "sgd", "--batch", "7"], "batch size 7 does not divide by 2 workers (--ps 3: rank 0 serves)"),
        (["--ps", "3", "--ps-async", "--optimizer", "sgd", "--staleness", "-1"], "--staleness must be >= 0, got -1"),
    ],
)  # fmt: skip
def test_async_parameter_server_bad_options(options, message):
    """One line before any rank starts (no mpiexec here)."""
    command = ["dlpc-train", "examples/mlp.dlpc", "--data", "digits", *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert (result.returncode, result.stderr.strip()) == (1, f"dlpc-train: error: {message}")


def worker(model: str) -> int:
    import dlpc.train
    from dlpc.dist.parameter_server import AsyncParameterServer
    from dlpc.passes.train.optim import SGD
    from dlpc.runtime.mpi import world

    C = world()
    rng = np.random.default_rng(29)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 8)).astype(np.float32)
    ys = rng.integers(0, 4, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    workers = C.size - 1

    # staleness 0: the synchronous server, one device's SGD on the global batches
    sync = AsyncParameterServer(model, lr=LR, batch_size=GLOBAL_BATCH, staleness=0).run(xs, ys)
    assert len(sync.pulls) == workers * STEPS
    # each step's pull sees exactly the previous steps' updates, every worker's
    assert all(p.updates == workers * p.clock for p in sync.pulls), sync.pulls
    one = dlpc.train.Trainer(model, "cross_entropy", SGD(lr=LR), GLOBAL_BATCH, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    # a step's loss over the global batch is the mean of the workers' shares
    np.testing.assert_allclose(np.mean(sync.losses, axis=0), one_losses, rtol=1e-5, atol=1e-6)
    init = dlpc.load(model).weights
    for name, value in one.weights.items():
        assert float(np.abs(value - init[name]).max()) > 1e-3, f"{name} did not move"
        np.testing.assert_allclose(sync.weights[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(sync.history[-1]["fc1.weight"], sync.weights["fc1.weight"])

    # staleness s > 0, worker 1 slowed: a pull for step c waits until every worker has
    # pushed c - s steps, so it holds every update of steps < c - s, and none of a step
    # >= c + s
    for s in (1, 2):
        ps = AsyncParameterServer(
            model, lr=LR, batch_size=GLOBAL_BATCH, staleness=s, delay={1: 0.01}
        )
        run = ps.run(xs, ys)
        assert len(run.pulls) == workers * STEPS
        for p in run.pulls:
            assert p.clock - p.slowest <= s, (s, p)
            assert workers * (p.clock - s) <= p.updates <= workers * (p.clock + s), (s, p)
        assert run.max_staleness <= s
        print(f"rank {C.rank} staleness {s}: max seen {run.max_staleness}", flush=True)
        assert all(np.isfinite(v).all() for v in run.weights.values())
    print(f"ok {C.rank} ps-async", flush=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    from dlpc.runtime.mpi import guard

    sys.exit(guard(lambda: worker(sys.argv[2]), "test_dist_ps_async"))
