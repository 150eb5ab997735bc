"""Hybrid data x pipeline parallelism (HybridPipelineTrainer) on 4 MPI ranks, a device
mesh dp 2 x pp 2, against one device on the same global batches: 10 SGD steps of a tiny
three-layer MLP. The worker is this file, run under mpiexec."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300  # 4 ranks on 2 cores; a stuck rank fails the test instead of hanging CI
STEPS, GLOBAL_BATCH = 10, 8

TINY = """model tiny(x: f32[B, 8]) {
  param fc1.weight: f32[6, 8] = kaiming(seed=1)
  param fc1.bias: f32[6] = normal(seed=2, std=0.1)
  param fc2.weight: f32[6, 6] = kaiming(seed=3)
  param fc2.bias: f32[6] = normal(seed=4, std=0.1)
  param fc3.weight: f32[4, 6] = kaiming(seed=5)
  param fc3.bias: f32[4] = zeros()

  let h = relu(linear(x, fc1.weight, fc1.bias))
  let h = relu(linear(h, fc2.weight, fc2.bias))
  return linear(h, fc3.weight, fc3.bias)
}
"""

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


@needs_mpi
def test_hybrid_dp_x_pp_on_4_ranks_equals_one_device(tmp_path):
    pytest.importorskip("mpi4py")
    model = tmp_path / "tiny.dlpc"
    model.write_text(TINY)
    command = ["mpiexec", "-n", "4", sys.executable, __file__, "worker", str(model)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    found = sorted(re.findall(r"ok (\d) hybrid-pp", result.stdout))
    assert found == ["0", "1", "2", "3"], result.stdout


def worker(model: str) -> int:
    import dlpc.train
    from dlpc.dist.hybrid import HybridPipelineTrainer
    from dlpc.passes.train.optim import SGD
    from dlpc.runtime.mpi import world

    C = world()
    rng = np.random.default_rng(23)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 8)).astype(np.float32)
    ys = rng.integers(0, 4, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = HybridPipelineTrainer(
        model, "cross_entropy", SGD(lr=0.5), GLOBAL_BATCH, dp=2, pp=2, microbatches=2
    )
    # (d, s) = (r // 2, r % 2): each stage owns params, both stages are used
    assert (trainer.d, trainer.s) == divmod(C.rank, 2)
    assert set(trainer.owner.values()) == {0, 1}, trainer.owner
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    full = trainer.full_weights()
    one = dlpc.train.Trainer(model, "cross_entropy", SGD(lr=0.5), GLOBAL_BATCH, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    init = dlpc.load(model).weights
    for name, value in one.weights.items():
        assert float(np.abs(value - init[name]).max()) > 1e-3, f"{name} did not move"
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    print(f"ok {C.rank} hybrid-pp", flush=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    from dlpc.runtime.mpi import guard

    sys.exit(guard(lambda: worker(sys.argv[2]), "test_dist_hybrid_pp"))
