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


DEEP = """
func.func @main(%x: tensor<BATCHx4xf32>, %t: tensor<BATCHx3xf32>) -> tensor<f32> {
  %w1 = graph.param "w1" : tensor<6x4xf32>
  %w2 = graph.param "w2" : tensor<6x6xf32>
  %w3 = graph.param "w3" : tensor<6x6xf32>
  %w4 = graph.param "w4" : tensor<3x6xf32>
  %h1 = graph.linear %x, %w1 : (tensor<BATCHx4xf32>, tensor<6x4xf32>) -> tensor<BATCHx6xf32>
  %r1 = graph.tanh %h1 : (tensor<BATCHx6xf32>) -> tensor<BATCHx6xf32>
  %h2 = graph.linear %r1, %w2 : (tensor<BATCHx6xf32>, tensor<6x6xf32>) -> tensor<BATCHx6xf32>
  %r2 = graph.tanh %h2 : (tensor<BATCHx6xf32>) -> tensor<BATCHx6xf32>
  %h3 = graph.linear %r2, %w3 : (tensor<BATCHx6xf32>, tensor<6x6xf32>) -> tensor<BATCHx6xf32>
  %r3 = graph.tanh %h3 : (tensor<BATCHx6xf32>) -> tensor<BATCHx6xf32>
  %y = graph.linear %r3, %w4 : (tensor<BATCHx6xf32>, tensor<3x6xf32>) -> tensor<BATCHx3xf32>
  %d = graph.sub %y, %t : (tensor<BATCHx3xf32>, tensor<BATCHx3xf32>) -> tensor<BATCHx3xf32>
  %e = graph.mul %d, %d : (tensor<BATCHx3xf32>, tensor<BATCHx3xf32>) -> tensor<BATCHx3xf32>
  %l = graph.reduce_mean %e : (tensor<BATCHx3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


def _module(text: str):
    from xdsl.parser import Parser

    from dlpc.passes.pipeline import context

    return Parser(context(), text).parse_module()


def pp(schedule: str, microbatches: str) -> int:
    """graph-pipeline's program of this rank (its stage) against graph-autodiff of the
    whole model on the same batch: the loss and the stage's gradients."""
    from xdsl.dialects.builtin import ModuleOp, StringAttr

    from dlpc import api
    from dlpc.model import Model
    from dlpc.passes.dist.pipeline import pipeline
    from dlpc.passes.train.autodiff import differentiate

    C = world()
    m, b = int(microbatches), 2
    rng = np.random.default_rng(5)
    weights = {
        "w1": rng.standard_normal((6, 4)), "w2": rng.standard_normal((6, 6)),
        "w3": rng.standard_normal((6, 6)), "w4": rng.standard_normal((3, 6)),
    }  # fmt: skip
    weights = {k: (0.5 * v).astype(np.float32) for k, v in weights.items()}
    x = rng.standard_normal((m * b, 4)).astype(np.float32)
    t = rng.standard_normal((m * b, 3)).astype(np.float32)
    micro = _module(DEEP.replace("BATCH", str(b)))
    programs = pipeline(micro, C.size, m, schedule)
    mine = programs[C.rank]
    mine.sym_name = StringAttr("main")
    mine.detach()
    stage = Model(ModuleOp([mine]), weights, "stage", None)
    own = [n for n in api.check_weights(stage)]
    got = api.compile(stage, target="numpy", fold_weights=False)(x, t)
    whole = _module(DEEP.replace("BATCH", str(m * b)))
    differentiate(whole)
    want = api.compile(Model(whole, weights, "whole", None), target="numpy")(x, t)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    order = ["w1", "w2", "w3", "w4"]
    assert own, "a stage without params"
    for k, name in enumerate(own):
        np.testing.assert_allclose(
            got[1 + k], want[1 + order.index(name)], rtol=1e-4, atol=1e-6, err_msg=name
        )
    print(f"ok {C.rank} pp {schedule} {','.join(own)}", flush=True)
    return 0


def pptrain(schedule: str, optimizer: str) -> int:
    """PipelineTrainer (2 micro-batches) against one device, 10 steps of the MLP. Adam
    divides by the gradient's root mean square, so where a gradient is near 0 the
    micro-batches' summation order moves its update by up to a few percent of a step:
    its params are compared to 1 % of the distance they moved, SGD's to rtol 1e-4."""
    from dlpc.dist.pipeline import PipelineTrainer

    C = world()
    rng = np.random.default_rng(13)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = PipelineTrainer(
        MLP, "cross_entropy", optimizer, GLOBAL_BATCH, microbatches=2, schedule=schedule
    )
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    full = trainer.full_weights()
    one = dlpc.train.Trainer(MLP, "cross_entropy", optimizer, GLOBAL_BATCH, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    init = dlpc.load(MLP).weights
    for name, value in one.weights.items():
        moved = float(np.abs(value - init[name]).max())
        assert moved > 0, name
        if optimizer == "adam":
            assert float(np.abs(full[name] - value).max()) <= 0.01 * moved, name
        else:
            np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    print(f"ok {C.rank} pptrain {schedule} {optimizer}", flush=True)
    return 0


def hybrid(optimizer: str) -> int:
    """HybridTrainer dp 2 x tp 2 on 4 ranks against one device, 10 steps."""
    from dlpc.dist.hybrid import HybridTrainer

    C = world()
    rng = np.random.default_rng(17)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = HybridTrainer(MLP, "cross_entropy", optimizer, GLOBAL_BATCH, dp=2, tp=2)
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    full = trainer.full_weights()
    one = dlpc.train.Trainer(MLP, "cross_entropy", optimizer, GLOBAL_BATCH, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    for name, value in one.weights.items():
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    print(f"ok {C.rank} hybrid {optimizer}", flush=True)
    return 0


def ps(optimizer: str) -> int:
    """ParameterServerTrainer (server rank 0) against one device, 10 steps of the MLP
    (SGD: Adam's division by the gradient's RMS moves near-zero gradients' updates by the
    summation order; with Adam the server's params equal DataParallelTrainer's bit for bit
    here, both 2.5e-5 from one device's on fc1.weight)."""
    from dlpc.dist import ParameterServerTrainer

    C = world()
    rng = np.random.default_rng(19)
    xs = rng.standard_normal((STEPS, GLOBAL_BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (STEPS, GLOBAL_BATCH)).astype(np.int64)
    trainer = ParameterServerTrainer(MLP, "cross_entropy", optimizer, batch_size=GLOBAL_BATCH)
    losses = [trainer.step(xs[k], ys[k]) for k in range(STEPS)]
    server = trainer.weights
    one = dlpc.train.Trainer(MLP, "cross_entropy", optimizer, GLOBAL_BATCH, target="numpy")
    one_losses = [one.step(xs[k], ys[k]) for k in range(STEPS)]
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5, atol=1e-6)
    for name, value in one.weights.items():
        np.testing.assert_allclose(server[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    print(f"ok {C.rank} ps {optimizer}", flush=True)
    return 0


def fault(strategy: str, killed: str = "") -> int:
    """One step on every rank, then rank 1 alone fails (a batch of the wrong size) while
    rank 0 runs the next step, waiting in its collective or recv: guard prints rank 1's
    one line and MPI_Aborts, so rank 0 stops too. `killed`: rank 1 dies by SIGKILL
    instead (mpiexec ends the others)."""
    from dlpc.dist import PipelineTrainer

    C = world()
    rng = np.random.default_rng(23)
    x = rng.standard_normal((GLOBAL_BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, GLOBAL_BATCH).astype(np.int64)
    kinds = {"dp": DataParallelTrainer, "tp": TensorParallelTrainer, "pp": PipelineTrainer}
    trainer = kinds[strategy](MLP, "cross_entropy", "sgd", batch_size=GLOBAL_BATCH)
    trainer.step(x, y)
    if C.rank == 1 and strategy == "dp" and killed == "killed":
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    if C.rank == 1:
        trainer.step(x[:3], y[:3])
    else:
        trainer.step(x, y)
    print(f"ok {C.rank} fault (unexpected)", flush=True)
    return 0


MODES = {
    "fault": fault,
    "ps": ps,
    "dp": dp,
    "tp": tp,
    "pp": pp,
    "pptrain": pptrain,
    "hybrid": hybrid,
}

if __name__ == "__main__":
    sys.exit(guard(lambda: MODES[sys.argv[1]](*sys.argv[2:]), "dist_worker"))
