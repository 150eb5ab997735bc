"""One rank of test_dist.py: data parallel against one device on the same global batch.

    mpiexec -n 2 python test/python/dist_worker.py dp <optimizer>

Every rank trains examples/mlp.dlpc with DataParallelTrainer (global batch 8) for 10
steps; rank 0 also trains one Trainer at batch 8 on the same global batches. Both ranks
must hold the same params, equal to the one device's within fp32 tolerance.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import dlpc.train
from dlpc.dist import DataParallelTrainer, TensorParallelTrainer
from dlpc.runtime.mpi import guard, world

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp.dlpc"
GLOBAL_BATCH = 8
STEPS = 10


def dp(optimizer: str) -> int:
    C = world()
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = DataParallelTrainer(
        MLP, "cross_entropy", optimizer, batch_size=GLOBAL_BATCH, bucket_mb=0.5
    )
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    mine = trainer.weights
    # the replicas agree exactly: the same averaged gradients, the same update
    for name, value in mine.items():
        other = C.broadcast(value, 0, trainer.group)
        assert np.array_equal(other, value), f"rank {C.rank} differs from rank 0 on {name}"
    if C.rank == 0:
        one = dlpc.train.Trainer(
            MLP, "cross_entropy", optimizer, batch_size=GLOBAL_BATCH, target="numpy"
        )
        one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
        np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
        for name, value in one.weights.items():
            np.testing.assert_allclose(mine[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
        moved = max(float(np.abs(mine[n] - v).max()) for n, v in dlpc.load(MLP).weights.items())
        assert moved > 1e-4, "the params did not change"
    print(f"ok {C.rank} dp {optimizer}", flush=True)
    return 0


def tp(optimizer: str) -> int:
    """TensorParallelTrainer on the whole batch against one device, 10 steps."""
    C = world()
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = TensorParallelTrainer(MLP, "cross_entropy", optimizer, batch_size=GLOBAL_BATCH)
    assert trainer.sharded == {"fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1}
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    full = trainer.full_weights()
    one = dlpc.train.Trainer(
        MLP, "cross_entropy", optimizer, batch_size=GLOBAL_BATCH, target="numpy"
    )
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    for name, value in one.weights.items():
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    print(f"ok {C.rank} tp {optimizer}", flush=True)
    return 0


MODES = {"dp": dp, "tp": tp}

if __name__ == "__main__":
    sys.exit(guard(lambda: MODES[sys.argv[1]](*sys.argv[2:]), "dist_worker"))
