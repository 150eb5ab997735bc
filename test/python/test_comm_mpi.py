"""comm ops on MPI (dlpc.runtime.mpi) against their numpy definitions
(dlpc.reference.comm), on 2, 3 and 4 ranks under mpiexec; the numpy backend running a
program with comm ops; a rank that raises stops the others (MPI_Abort)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlpc.reference import comm as ref

WORKER = Path(__file__).with_name("comm_worker.py")
TIMEOUT = 120  # a stuck rank fails the test instead of hanging CI

needs_mpi = pytest.mark.skipif(
    shutil.which("mpiexec") is None,
    reason="needs mpiexec (the dist extra)",
)


def mpirun(n: int, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    return subprocess.run(
        ["mpiexec", "-n", str(n), sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


# ---- the definitions themselves (one process) -------------------------------------


def test_reference_textbook_examples():
    ones = [np.ones(3, np.float32)] * 2
    assert (ref.all_reduce(ones, "sum")[1] == 2).all()
    assert ref.send_recv(np.ones(1))[0] == 1


def test_reference_shapes_and_roots():
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(3)]
    assert ref.all_gather(xs, 1)[2].shape == (2, 9)
    rs = ref.reduce_scatter([np.ones((6, 2), np.float32)] * 3, "sum", 0)
    assert [r.shape for r in rs] == [(2, 2)] * 3 and (rs[0] == 3).all()
    red = ref.reduce(xs, "max", root=2)
    assert (red[2] == xs[2]).all() and not red[0].any()  # non-roots get zeros
    assert (ref.scatter(xs, 1, root=1)[2] == xs[1][:, 2:3]).all()
    a2a = ref.all_to_all([np.full((2, 1), i, np.float32) for i in range(2)], 0, 1)
    assert a2a[1].tolist() == [[0, 1]]
    assert ref.all_reduce(xs, "avg")[0].dtype == np.float32


# ---- on MPI ---------------------------------------------------------------------------


@needs_mpi
@pytest.mark.parametrize("n", [2, 3, 4])
def test_collectives_match_reference(n):
    result = mpirun(n, str(WORKER), "collectives")
    assert result.returncode == 0, result.stderr[-2000:]
    # (the ranks' lines may interleave on the shared stdout)
    oks = re.findall(r"ok (\d+) (\d+)", result.stdout)
    assert sorted(int(r) for r, _ in oks) == list(range(n)), result.stdout
    assert all(int(count) > 0 for _, count in oks)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_numpy_program_with_comm_ops(n):
    result = mpirun(n, str(WORKER), "program")
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(re.findall(r"ok (\d+) program", result.stdout)) == [str(r) for r in range(n)]


@needs_mpi
def test_a_failing_rank_aborts_the_others():
    result = mpirun(2, str(WORKER), "fault")
    assert result.returncode != 0
    assert "comm_worker: rank 1: error: injected fault" in result.stderr
    assert "unexpected" not in result.stdout


@needs_mpi
def test_comm_gradient_rules_match_differences():
    result = mpirun(2, str(WORKER), "grad")
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(re.findall(r"ok (\d) grad", result.stdout)) == ["0", "1"]
