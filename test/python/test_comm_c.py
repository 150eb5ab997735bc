"""Comm ops on the C target (dlpc.runtime.comm_split): a program cut at its collectives
into compiled C segments equals the numpy backend and reference.comm on 2 ranks, and the
data-parallel, tensor-parallel, pipeline and dp x tp trainers compiled for C equal one
device after 10 steps.

Each multi-rank case runs this file as the rank's program under mpiexec:

    mpiexec -n 2 python test/python/test_comm_c.py program
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

TIMEOUT = 300  # a stuck rank fails the test instead of hanging CI
MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp.dlpc"

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")

# compute on both sides of every collective; %h, %w and the constant %c cross them (%c
# also straight into an all_reduce)
PROGRAM = """
func.func @main(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<{n4}x5xf32>, tensor<4x5xf32>) {
  %w = graph.param "w" : tensor<5x5xf32>
  %h = graph.matmul %x, %w : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %r = graph.relu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %c = graph.constant dense<2.0> : tensor<4x5xf32>
  %s = comm.all_reduce sum %r group <world {n}> : tensor<4x5xf32>
  %cs = comm.all_reduce sum %c group <world {n}> : tensor<4x5xf32>
  %t0 = graph.add %s, %h : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %t = graph.mul %t0, %cs : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %g = comm.all_gather %t dim 0 group <world {n}> : tensor<4x5xf32> -> tensor<{n4}x5xf32>
  %b = comm.broadcast %t root 1 group <world {n}> : tensor<4x5xf32>
  %y0 = graph.mul %b, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %y = graph.add %y0, %c : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %z = graph.matmul %y, %w : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  func.return %z, %g, %s : tensor<4x5xf32>, tensor<{n4}x5xf32>, tensor<4x5xf32>
}
"""


def mpirun(n: int, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    return subprocess.run(
        ["mpiexec", "-n", str(n), sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@needs_mpi
def test_program_with_collectives_on_c_equals_numpy_and_reference():
    result = mpirun(2, "program")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) program", result.stdout)) == ["0", "1"], result.stdout


@needs_mpi
def test_program_on_c_without_the_mpi_header_runs_segments_between_mpi4py_calls():
    result = mpirun(2, "program-python")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) program", result.stdout)) == ["0", "1"], result.stdout


@needs_mpi
def test_data_parallel_on_c_equals_one_device():
    result = mpirun(2, "dp")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) dp", result.stdout)) == ["0", "1"], result.stdout


@needs_mpi
@pytest.mark.parametrize("strategy", ["tp", "pp"])
def test_tensor_and_pipeline_parallel_on_c_equal_one_device(strategy):
    result = mpirun(2, strategy)
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.findall(rf"ok (\d) {strategy}", result.stdout)
    assert sorted(found) == ["0", "1"], result.stdout


@needs_mpi
def test_hybrid_dp_x_tp_on_c_on_4_ranks_equals_one_device():
    result = mpirun(4, "hybrid")
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) hybrid", result.stdout)) == ["0", "1", "2", "3"]


def test_comm_ops_on_another_compiled_target_is_one_line(tmp_path):
    """OpenCL and DLP do not run comm ops: one line naming the targets that do."""
    import dlpc
    from dlpc.diagnostics import DlpcError

    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM.replace("{n4}", "8").replace("{n}", "2"))
    w = np.eye(5, dtype=np.float32)
    model = dlpc.load(path, weights={"w": w})
    with pytest.raises(DlpcError, match="comm ops run on targets numpy and c, not 'dlp'"):
        dlpc.compile(model, target="dlp")


# ---- the ranks' programs ----------------------------------------------------------------


def program(native: bool = True) -> int:
    """The program on C: `native`, the step in one C driver linked with libmpi (the dist
    extra's wheel has mpi.h); else as if the header were absent: segments between
    mpi4py's collectives."""
    import dlpc
    from dlpc.reference import comm as ref
    from dlpc.runtime import comm_native
    from dlpc.runtime.comm_split import SplitFunction
    from dlpc.runtime.mpi import world

    C = world()
    if not native:  # no MPI header: discovery says why, the split falls back
        real = comm_native._loaded_libmpi
        comm_native._loaded_libmpi = lambda: Path("/nonexistent/lib/libmpi.so.12")
        comm_native.find_mpi_c.cache_clear()
        mpi, why = comm_native.find_mpi_c()
        assert mpi is None and "no mpi.h of MPICH" in why, why
        comm_native._loaded_libmpi = real
    r, n = C.rank, C.size
    rng = np.random.default_rng(5)
    w = rng.standard_normal((5, 5)).astype(np.float32)
    xs = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "program.mlir"
        path.write_text(PROGRAM.replace("{n4}", str(4 * n)).replace("{n}", str(n)))
        model = dlpc.load(path, weights={"w": w})
    on_c = dlpc.compile(model, target="c")
    fn = on_c.artifact
    assert isinstance(fn, SplitFunction)
    # three segments around the all_reduce, and the all_gather/broadcast pair
    assert len(fn.segments) == 3, len(fn.segments)
    assert on_c.source.count("// ---- segment") == 3
    if native:
        assert fn.native is not None, fn.native_reason
        for call in ("MPI_Iallreduce", "MPI_Allgather", "MPI_Bcast", "seg_main[2]"):
            assert call in on_c.source, call
    else:
        assert fn.native is None and "no mpi.h" in fn.native_reason, fn.native_reason
        assert "MPI_" not in on_c.source
    comm_native.find_mpi_c.cache_clear()
    got = on_c(xs[r])
    want = dlpc.compile(model, target="numpy")(xs[r])
    for a, b, what in zip(got, want, ("z", "g", "s")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"c vs numpy: {what}")
    # reference.comm: every rank's values, the collectives by their definitions
    hs = [x @ w for x in xs]
    ss = ref.all_reduce([np.maximum(h, 0) for h in hs], "sum")
    ts = [(s + h) * (2.0 * n) for s, h in zip(ss, hs)]
    gs = ref.all_gather(ts, 0)
    bs = ref.broadcast(ts, 1)
    zs = [(b * t + 2.0) @ w for b, t in zip(bs, ts)]
    for a, b, what in zip(got, (zs[r], gs[r], ss[r]), ("z", "g", "s")):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"c vs reference: {what}")
    print(f"ok {r} program", flush=True)
    return 0


def dp() -> int:
    import dlpc
    import dlpc.train
    from dlpc.dist import DataParallelTrainer
    from dlpc.runtime.comm_split import SplitFunction
    from dlpc.runtime.mpi import world

    C = world()
    steps, batch = 10, 8
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((steps, batch, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (steps, batch)).astype(np.int64)
    trainer = DataParallelTrainer(
        MLP, "cross_entropy", "adam", batch_size=batch, bucket_mb=0.5, target="c"
    )
    assert isinstance(trainer.compiled.artifact, SplitFunction)
    losses = [trainer.step(xs[k], ys[k]) for k in range(steps)]
    mine = trainer.weights
    for name, value in mine.items():
        other = C.broadcast(value, 0, trainer.group)
        assert np.array_equal(other, value), f"rank {C.rank} differs from rank 0 on {name}"
    if C.rank == 0:
        one = dlpc.train.Trainer(MLP, "cross_entropy", "adam", batch_size=batch, target="numpy")
        one_losses = [one.step(xs[k], ys[k]) for k in range(steps)]
        np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
        for name, value in one.weights.items():
            np.testing.assert_allclose(mine[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
        moved = max(float(np.abs(mine[n] - v).max()) for n, v in dlpc.load(MLP).weights.items())
        assert moved > 1e-4, "the params did not change"
    print(f"ok {C.rank} dp", flush=True)
    return 0


def split(strategy: str) -> int:
    """TensorParallelTrainer (Adam), PipelineTrainer (1F1B, 2 micro-batches, SGD) or
    HybridTrainer (dp 2 x tp 2, SGD) on C against one device, 10 steps of the MLP."""
    import dlpc
    import dlpc.train
    from dlpc.dist import TensorParallelTrainer
    from dlpc.dist.hybrid import HybridTrainer
    from dlpc.dist.pipeline import PipelineTrainer
    from dlpc.runtime.comm_split import SplitFunction
    from dlpc.runtime.mpi import world

    C = world()
    steps, batch = 10, 8
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((steps, batch, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (steps, batch)).astype(np.int64)
    optimizer = "adam" if strategy == "tp" else "sgd"
    if strategy == "tp":
        trainer = TensorParallelTrainer(MLP, "cross_entropy", optimizer, batch, target="c")
    elif strategy == "hybrid":
        trainer = HybridTrainer(MLP, "cross_entropy", optimizer, batch, dp=2, tp=2, target="c")
    else:
        trainer = PipelineTrainer(
            MLP, "cross_entropy", optimizer, batch, target="c", microbatches=2, schedule="1f1b"
        )
    assert isinstance(trainer.compiled.artifact, SplitFunction)
    losses = [trainer.step(xs[k], ys[k]) for k in range(steps)]
    full = trainer.full_weights()
    one = dlpc.train.Trainer(MLP, "cross_entropy", optimizer, batch_size=batch, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(steps)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    init = dlpc.load(MLP).weights
    for name, value in one.weights.items():
        assert float(np.abs(value - init[name]).max()) > 0, name
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    print(f"ok {C.rank} {strategy}", flush=True)
    return 0


if __name__ == "__main__":
    from dlpc.runtime.mpi import guard

    cases = {"program": program, "program-python": lambda: program(native=False), "dp": dp}
    cases.update({s: lambda s=s: split(s) for s in ("tp", "pp", "hybrid")})
    sys.exit(guard(cases[sys.argv[1]]))
