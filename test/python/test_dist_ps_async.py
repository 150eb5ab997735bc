"""The asynchronous parameter server with bounded staleness (dlpc.dist.parameter_server)
on 3 MPI ranks (a server and 2 workers): staleness 0 equals one device's SGD on the same
global batches; with staleness 1 and 2 (a slowed worker) every pull the server served
kept the bound. The worker is this file, run under mpiexec."""

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
