"""Non-blocking gradient all-reduce (dlpc.runtime.comm_split's `overlap`): on the C
target the data-parallel step starts each bucket's all_reduce (MPI_Iallreduce) after the
segment that computes it and waits where a later segment first reads it. On 2 ranks,
10 Adam steps give the same params bit for bit as the blocking step, and the numpy
target's (blocking) step within fp32 tolerance.

    mpiexec -n 2 python test/python/test_dist_overlap.py dp
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TIMEOUT = 300  # a stuck rank fails the test instead of hanging CI
MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp.dlpc"

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


@needs_mpi
def test_overlapped_all_reduce_equals_blocking_on_c_and_numpy():
    pytest.importorskip("mpi4py")
    result = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, __file__, "dp"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) overlap", result.stdout)) == ["0", "1"], result.stdout


def dp() -> int:
    from dlpc.dist import DataParallelTrainer
    from dlpc.runtime.comm_split import Segment, SplitFunction
    from dlpc.runtime.mpi import world

    C = world()
    steps, batch = 10, 8
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((steps, batch, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (steps, batch)).astype(np.int64)
    # 0.5 MiB buckets: fc3 and fc2's gradients go first, fc1's (0.8 MiB) last
    trainer = DataParallelTrainer(
        MLP, "cross_entropy", "adam", batch_size=batch, bucket_mb=0.5, target="c"
    )
    fn = trainer.compiled.artifact
    assert isinstance(fn, SplitFunction) and fn.overlap
    # a bucket's all_reduce precedes a segment that computes without its results: the
    # backward that runs while the bucket is in flight
    reduces = [s for s in fn.steps if not isinstance(s, Segment) and "all_reduce" in s.name]
    assert len(reduces) >= 3, len(reduces)  # >= 2 gradient buckets, loss, metrics
    first = fn.steps.index(reduces[0])
    overlapped = [
        s
        for s in fn.steps[first + 1 :]
        if isinstance(s, Segment) and not set(s.inputs) & set(reduces[0].results)
    ]
    assert overlapped, "no segment runs while the first bucket is in flight"

    start = trainer.state
    overlap_losses = [trainer.step(xs[k], ys[k]) for k in range(steps)]
    overlap = trainer.weights
    trainer.load(start)
    fn.overlap = False
    blocking_losses = [trainer.step(xs[k], ys[k]) for k in range(steps)]
    blocking = trainer.weights
    assert overlap_losses == blocking_losses
    moved = 0.0
    for name, value in blocking.items():
        assert np.array_equal(overlap[name], value), name
        moved = max(moved, float(np.abs(value - start[name]).max()))
    assert moved > 1e-4, "the params did not change"

    numpy = DataParallelTrainer(MLP, "cross_entropy", "adam", batch_size=batch, bucket_mb=0.5)
    numpy_losses = [numpy.step(xs[k], ys[k]) for k in range(steps)]
    np.testing.assert_allclose(overlap_losses, numpy_losses, rtol=1e-5, atol=1e-6)
    for name, value in numpy.weights.items():
        np.testing.assert_allclose(overlap[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    print(f"ok {C.rank} overlap", flush=True)
    return 0


if __name__ == "__main__":
    from dlpc.runtime.mpi import guard

    sys.exit(guard({"dp": dp}[sys.argv[1]]))
