"""Resuming a data-parallel run from its checkpoint (DataParallelTrainer.save / load):
one epoch of 5 steps, save on rank 0, a fresh run that loads it and trains one more
epoch equals 2 epochs without a stop: on 2 ranks bit for bit, 2 ranks -> 1 and
1 -> 2 within fp32 tolerance (the ranks' average of per-rank mean gradients sums in
another order than one device's mean). The resumed epoch is the next one: its shuffle
(the epoch's seed) is the uninterrupted run's second epoch. A pipeline (1f1b, 2bw) and
the parameter server resume on as many ranks through dlpc-train. Tensor parallel (Adam)
and a pipeline (1F1B, SGD with momentum) save one device's state: saved on 2 ranks, they
resume on 1 and on 4 (the MLP's hidden sizes divide by 4; 4 stages of its layers), and a
tensor-parallel checkpoint resumes in one device's Trainer ("one").

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
    "kind, before, after",
    [
        ("dp", 2, 2), ("dp", 2, 1), ("dp", 1, 2), ("ps", 2, 2),
        ("tp", 2, 2), ("tp", 2, 1), ("tp", 2, 4), ("tp:one", 2, 1),
        ("pp", 2, 1), ("pp", 2, 4),
    ],
)  # fmt: skip
def test_save_and_resume_equals_an_uninterrupted_run(tmp_path, kind, before, after):
    """ps: the synchronous parameter server, whose save gathers the server's state (it
    hung before: rank 0 alone ran the collective)."""
    saved, resumed = (kind.split(":") * 2)[:2]
    mpirun(before, "first", str(tmp_path), saved)
    result = mpirun(after, "resume", str(tmp_path), str(before), resumed)
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
    "strategy, resume_on",
    [
        (["--pp", "2", "--pp-schedule", "1f1b"], None),
        (["--pp", "2", "--pp-schedule", "2bw"], None),
        (["--ps", "2"], None),
        (["--tp", "2"], None),
        (["--tp", "2"], ()),
        (["--pp", "2", "--pp-schedule", "gpipe"], ()),
    ],
    ids=["1f1b", "2bw", "ps", "tp", "tp-to-one-device", "gpipe-to-one-device"],
)
def test_resume_through_dlpc_train(tmp_path, strategy, resume_on):
    """`dlpc-train --ranks 2 <strategy> --save --resume`: epoch 1, then epoch 2
    resumed (on the same ranks, or `resume_on`: () for one device's dlpc-train), prints
    the uninterrupted run's epochs; under 2bw the checkpoint carries the stashed version
    W(t-1) the next step runs on (without it epoch 2 differed). The parameter server
    (`--ps 2`) also prints one device's epochs (SGD: linear in the gradient, the ranks'
    summation order stays in the last bits). Tensor parallel's checkpoint is gathered
    (before, both ranks wrote their shards to the one file)."""
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
    more = {} if resume_on is None else {"ranks": resume_on}
    resumed = train("run.npz", "--epochs", "2", "--resume", **more)
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
    import dlpc.train
    from dlpc.dist import (
        DataParallelTrainer,
        ParameterServerTrainer,
        PipelineTrainer,
        TensorParallelTrainer,
    )
    from dlpc.passes.train.optim import SGD

    if kind == "ps":
        return ParameterServerTrainer(MLP, "cross_entropy", "adam", batch_size=BATCH)
    if kind == "tp":
        return TensorParallelTrainer(MLP, "cross_entropy", "adam", batch_size=BATCH)
    if kind == "pp":
        sgd = SGD(lr=0.05, momentum=0.9)
        return PipelineTrainer(MLP, "cross_entropy", sgd, batch_size=BATCH, microbatches=2)
    if kind == "one":
        return dlpc.train.Trainer(MLP, "cross_entropy", "adam", batch_size=BATCH, target="numpy")
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
