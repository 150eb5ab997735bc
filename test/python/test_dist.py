"""Data parallel training (graph-data-parallel, dlpc.dist) on 2 MPI ranks against one
device on the same global batch; the distributed sampler; dlpc-train's --dp/--ranks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlpc.dist import shard

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("dist_worker.py")
TIMEOUT = 120  # a stuck rank fails the test instead of hanging CI

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


def run(command: list[str]) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)


def test_shard_is_disjoint_per_epoch_and_reshuffled():
    n, batch, ranks = 50, 8, 2
    for epoch in (0, 1):
        parts = [list(shard(n, batch, ranks, r, seed=3, epoch=epoch)) for r in range(ranks)]
        assert all(len(p) == n // batch for p in parts)
        everything = np.concatenate([np.concatenate(p) for p in parts])
        assert len(set(everything.tolist())) == len(everything) == (n // batch) * batch
        # batch k of one device is the ranks' slices k, in rank order
        one = np.random.default_rng([3, epoch]).permutation(n)
        for k in range(n // batch):
            assert (np.concatenate([p[k] for p in parts]) == one[k * batch : (k + 1) * batch]).all()
    first = next(shard(n, batch, ranks, 0, seed=3, epoch=0))
    assert (first != next(shard(n, batch, ranks, 0, seed=3, epoch=1))).any()


@needs_mpi
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_data_parallel_equals_one_device(optimizer):
    result = run(["mpiexec", "-n", "2", sys.executable, str(WORKER), "dp", optimizer])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) dp", result.stdout)) == ["0", "1"], result.stdout


def test_emit_prints_each_ranks_program_with_its_comm_ops():
    result = run(["dlpc-train", "examples/mlp.dlpc", "--emit=graph", "--dp", "2", "--batch", "8"])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "// rank 0 of 2: data parallel, batch 4 of 8" in out
    assert "// rank 1 of 2" in out
    assert out.count("comm.all_reduce avg %grad.fc3.weight") == 2  # one bucket per rank
    assert "tensor<4x784xf32>" in out


def test_rank_count_that_does_not_divide_the_batch():
    result = run(
        ["dlpc-train", "examples/mlp.dlpc", "--data", "digits", "--dp", "3", "--batch", "8"]
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "dlpc-train: error: batch size 8 does not divide by 3 ranks (data parallel needs "
        "equal shares)"
    )


def _epoch_lines(stdout_and_err: str) -> list[str]:
    """The epoch and test lines without their samples/s."""
    lines = [re.sub(r", \d+ samples/s", "", line) for line in stdout_and_err.splitlines()]
    return [line for line in lines if line.startswith(("epoch ", "test accuracy"))]


@needs_mpi
@pytest.mark.parametrize("strategy", ["--dp", "--tp", "--pp"])
def test_ranks_starts_mpiexec_and_trains_as_one_device(tmp_path, strategy):
    """`dlpc-train --ranks 2 --<strategy> 2` (mpiexec started by the tool) prints one
    device's epoch figures and test accuracy; rank 0 alone prints and saves. SGD: its
    update is linear in the gradient, so the ranks' summation order stays in the last
    bits (Adam's division by the gradient's RMS moves the 4th digit of the loss)."""
    rng = np.random.default_rng(0)
    x = rng.random((80, 784), dtype=np.float32)
    y = (x[:, :10].argmax(axis=1)).astype(np.int64)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    common = ["dlpc-train", "examples/mlp.dlpc", "--data", str(tmp_path / "d.npz"), "--epochs", "2", "--batch", "8", "--optimizer", "sgd", "--lr", "0.05"]  # fmt: skip
    one = run([*common, "--target", "numpy"])
    assert one.returncode == 0, one.stderr[-3000:]
    save = tmp_path / "w.npz"
    result = run([*common, "--ranks", "2", strategy, "2", "--save", str(save)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("test accuracy:") == 1  # rank 0 alone prints
    want = _epoch_lines(one.stdout + one.stderr)
    assert len(want) == 3
    assert _epoch_lines(result.stdout + result.stderr) == want
    assert save.is_file()


@needs_mpi
def test_a_rank_error_stops_every_rank():
    result = run(
        ["mpiexec", "-n", "2", "dlpc-train", "examples/mlp.dlpc", "--data", "nope.npz", "--dp", "2"]
    )
    assert result.returncode != 0
    assert re.search(r"dlpc-train: rank \d: error: no such data file: nope.npz", result.stderr)


@needs_mpi
@pytest.mark.parametrize("strategy", ["dp", "tp", "pp"])
def test_one_failing_rank_stops_every_rank(strategy):
    """Rank 1 alone raises in a step while rank 0 waits in the step's collective (dp,
    tp) or recv (pp): one line naming rank 1, a non-zero exit, no hang (the timeout)."""
    result = run(["mpiexec", "-n", "2", sys.executable, str(WORKER), "fault", strategy])
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "dist_worker: rank" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert re.fullmatch(r"dist_worker: rank 1: error: .*", lines[0]), lines
    assert "unexpected" not in result.stdout


@needs_mpi
def test_a_killed_rank_stops_every_rank():
    """Rank 1 dies (SIGKILL, no Python left to abort) while rank 0 waits in the step's
    all-reduce: mpiexec (Hydra) ends rank 0 and exits non-zero, no hang. Its message
    names the process id and the signal, not the rank."""
    result = run(["mpiexec", "-n", "2", sys.executable, str(WORKER), "fault", "dp", "killed"])
    assert result.returncode != 0
    assert "unexpected" not in result.stdout
    assert "dist_worker: rank" not in result.stderr


@needs_mpi
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_tensor_parallel_equals_one_device(optimizer):
    result = run(["mpiexec", "-n", "2", sys.executable, str(WORKER), "tp", optimizer])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) tp", result.stdout)) == ["0", "1"], result.stdout


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_stages_equal_one_device(ranks, schedule):
    """Each stage's loss and gradients (3 micro-batches) equal graph-autodiff's of the
    whole model on the same batch."""
    result = run(["mpiexec", "-n", str(ranks), sys.executable, str(WORKER), "pp", schedule, "3"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) pp", result.stdout)) == [str(r) for r in range(ranks)]


def test_pipeline_schedules_cannot_deadlock():
    """gpipe and 1f1b on 2-4 stages and 1-8 micro-batches pass the blocking-send check
    (graph-pipeline runs it on its output; this drives it over the grid)."""
    from xdsl.parser import Parser

    from dlpc.passes.dist.pipeline import pipeline
    from dlpc.passes.pipeline import context

    sys.path.insert(0, str(WORKER.parent))
    from dist_worker import DEEP

    for stages in (2, 3, 4):
        for schedule in ("gpipe", "1f1b"):
            for m in (1, 2, 5, 8):
                module = Parser(context(), DEEP.replace("BATCH", "2")).parse_module()
                programs = pipeline(module, stages, m, schedule)
                assert len(programs) == stages


@needs_mpi
@pytest.mark.parametrize(
    "schedule, optimizer", [("gpipe", "sgd"), ("1f1b", "sgd"), ("1f1b", "adam")]
)
def test_pipeline_training_equals_one_device(schedule, optimizer):
    """10 steps of PipelineTrainer on 2 stages, 2 micro-batches, against one device."""
    command = ["mpiexec", "-n", "2", sys.executable, str(WORKER), "pptrain", schedule, optimizer]
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) pptrain", result.stdout)) == ["0", "1"]


def test_dlpc_emit_train_dp_prints_each_ranks_program():
    result = run(["dlpc", "examples/mlp.dlpc", "--emit=graph", "--train", "--dp", "2", "--batch", "8"])  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("comm.all_reduce avg %grad.fc3.weight") == 2
    assert "// rank 1 of 2: data parallel, batch 4 of 8" in result.stdout
    bad = run(["dlpc", "examples/mlp.dlpc", "--emit=graph", "--dp", "2"])
    assert (bad.returncode, bad.stderr.strip()) == (
        1,
        "dlpc: error: --dp/--tp/--pp apply to --train",
    )


@needs_mpi
def test_hybrid_dp_x_tp_on_4_ranks_equals_one_device():
    """dp 2 x tp 2 (mesh-axis groups): 10 SGD steps of the MLP against one device."""
    result = run(["mpiexec", "-n", "4", sys.executable, str(WORKER), "hybrid", "sgd"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) hybrid", result.stdout)) == ["0", "1", "2", "3"]


@needs_mpi
def test_parameter_server_equals_one_device():
    """Synchronous parameter server on rank 0: 10 SGD steps of the MLP on 2 ranks."""
    result = run(["mpiexec", "-n", "2", sys.executable, str(WORKER), "ps", "sgd"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) ps", result.stdout)) == ["0", "1"]
