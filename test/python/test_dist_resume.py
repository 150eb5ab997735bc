"""Resuming a data-parallel run from its checkpoint (DataParallelTrainer.save / load):
one epoch of 5 steps, save on rank 0, a fresh run that loads it and trains one more
epoch equals 2 epochs without a stop: on 2 ranks bit for bit, 2 ranks -> 1 and
1 -> 2 within fp32 tolerance (the ranks' average of per-rank mean gradients sums in
another order than one device's mean). The resumed epoch is the next one: its shuffle
(the epoch's seed) is the uninterrupted run's second epoch. A pipeline (1f1b, 2bw) and
the parameter server resume on as many ranks through dlpc-train.

    mpiexec -n 2 python test/python/test_dist_resume.py first DIR
    mpiexec -n 1 python test/python/test_dist_resume.py resume DIR
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
BATCH, SAMPLES = 8, 44  # 5 global batches an epoch (4 samples left out)

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


def mpirun(n: int, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    result = subprocess.run(
        ["mpiexec", "-n", str(n), sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@needs_mpi
@pytest.mark.parametrize(
    "kind, before, after", [("dp", 2, 2), ("dp", 2, 1), ("dp", 1, 2), ("ps", 2, 2)]
)
def test_save_and_resume_equals_an_uninterrupted_run(tmp_path, kind, before, after):
    """ps: the synchronous parameter server, whose save gathers the server's state (it
    hung before: rank 0 alone ran the collective)."""
    mpirun(before, "first", str(tmp_path), kind)
    result = mpirun(after, "resume", str(tmp_path), str(before), kind)
    assert sorted(re.findall(r"ok (\d) resume", result.stdout)) == [str(r) for r in range(after)]


@needs_mpi
def test_resume_from_a_missing_file_stops_every_rank(tmp_path):
    pytest.importorskip("mpi4py")
    result = subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, __file__, "resume", str(tmp_path), "2"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode != 0
    assert re.search(r"dlpc: rank \d: error: no such weights file: .*epoch1\.npz", result.stderr)


def _epochs(result: subprocess.CompletedProcess) -> list[str]:
    """The epoch lines without their samples/s."""
    text = result.stdout + result.stderr
    lines = [re.sub(r", \d+ samples/s", "", line) for line in text.splitlines()]
    return [line.split(":", 1)[1] for line in lines if line.startswith("epoch ")]


@needs_mpi
@pytest.mark.parametrize(
    "strategy",
    [["--pp", "2", "--pp-schedule", "1f1b"], ["--pp", "2", "--pp-schedule", "2bw"], ["--ps", "2"]],
    ids=["1f1b", "2bw", "ps"],
)
def test_resume_through_dlpc_train(tmp_path, strategy):
    """`dlpc-train --ranks 2 <strategy> --save --resume`: epoch 1, then epoch 2
    resumed, prints the uninterrupted run's epochs; under 2bw the checkpoint carries
    the stashed version W(t-1) the next step runs on (without it epoch 2 differed). The
    parameter server (`--ps 2`) also prints one device's epochs (SGD: linear in the
    gradient, the ranks' summation order stays in the last bits)."""
    pytest.importorskip("mpi4py")
    x, y = _data()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    common = ["dlpc-train", str(MLP), "--data", str(tmp_path / "d.npz"), "--batch", str(BATCH), "--optimizer", "sgd", "--lr", "0.05", "--target", "numpy"]  # fmt: skip

    def train(save: str, *more: str, ranks=("--ranks", "2", *strategy)):
        result = subprocess.run(
            [*common, *ranks, "--save", str(tmp_path / save), *more],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    whole = _epochs(train("whole.npz", "--epochs", "2"))
    first = _epochs(train("run.npz", "--epochs", "1"))
    resumed = train("run.npz", "--epochs", "2", "--resume")
    assert "resumed from" in resumed.stdout + resumed.stderr
    assert len(whole) == 2 and whole[0] != whole[1]
    assert [*first, *_epochs(resumed)] == whole
    if strategy[0] == "--ps":
        assert _epochs(train("one.npz", "--epochs", "2", ranks=())) == whole


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((SAMPLES, 784)).astype(np.float32)
    return x, rng.integers(0, 10, SAMPLES).astype(np.int64)


def _trainer(kind: str):
    from dlpc.dist import DataParallelTrainer, ParameterServerTrainer

    if kind == "ps":
        return ParameterServerTrainer(MLP, "cross_entropy", "adam", batch_size=BATCH)
    return DataParallelTrainer(MLP, "cross_entropy", "adam", batch_size=BATCH, bucket_mb=0.5)


def first(directory: str, kind: str) -> int:
    """Epoch 1, saved; epoch 2 on, saved: the uninterrupted run."""
    from dlpc.runtime.mpi import world

    x, y = _data()
    trainer = _trainer(kind)
    trainer.fit(x, y, epochs=1, seed=4)
    assert trainer.epoch == 1 and trainer.steps_done == 5
    trainer.save(Path(directory) / "epoch1.npz")
    trainer.fit(x, y, epochs=1, seed=4)
    trainer.save(Path(directory) / "epoch2.npz")
    print(f"ok {world().rank} first", flush=True)
    return 0


def resume(directory: str, before: str, kind: str = "dp") -> int:
    """A fresh trainer on this run's ranks loads epoch 1 and trains epoch 2: the
    uninterrupted run's state (bit for bit on as many ranks)."""
    from dlpc.runtime.mpi import world

    C = world()
    x, y = _data()
    trainer = _trainer(kind)
    trainer.load(Path(directory) / "epoch1.npz")
    assert trainer.epoch == 1 and trainer.steps_done == 5
    trainer.fit(x, y, epochs=1, seed=4)
    assert trainer.epoch == 2 and trainer.steps_done == 10
    mine = trainer.state
    with np.load(Path(directory) / "epoch2.npz") as f:
        want = {n: f[n] for n in f.files}
    with np.load(Path(directory) / "epoch1.npz") as f:
        moved = max(float(np.abs(mine[n] - f[n]).max()) for n in trainer.weights)
    assert moved > 1e-4, "the resumed epoch changed nothing"
    assert sorted(mine) == sorted(want)
    for name, value in want.items():
        if int(before) == C.size:
            assert np.array_equal(mine[name], value), name
        else:
            np.testing.assert_allclose(mine[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    print(f"ok {C.rank} resume", flush=True)
    return 0


if __name__ == "__main__":
    from dlpc.runtime.mpi import guard

    sys.exit(guard(lambda: {"first": first, "resume": resume}[sys.argv[1]](*sys.argv[2:])))
