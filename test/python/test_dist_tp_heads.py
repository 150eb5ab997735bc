"""graph-tensor-parallel beyond MLP pairs: attention split by heads (examples/transformer)
and convs split by output channels (examples/lenet), on 2 MPI ranks against one device.

    mpiexec -n 2 python test/python/test_dist_tp_heads.py <model> <optimizer>

Each rank trains its shards with TensorParallelTrainer on the whole batch for 10 steps
and one device's Trainer on the same batches: the first step's loss and parameter
updates (the gradients times the learning rate), every step's loss, and the gathered
params after 10 steps must agree within fp32 tolerance.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.utils.exceptions import DiagnosticException

ROOT = Path(__file__).resolve().parents[2]
STEPS = 10
BATCH = 4
TIMEOUT = 300  # a stuck rank fails the test instead of hanging CI

# model: (file, loss, input shape, target maker)
MODELS = {
    "transformer": ("transformer.dlpc", "mse", (16, 64)),
    "lenet": ("lenet.dlpc", "cross_entropy", (1, 28, 28)),
}
SHARDED = {
    "transformer": {
        "attn.wq": 0,
        "attn.bq": 0,
        "attn.wk": 0,
        "attn.bk": 0,
        "attn.wv": 0,
        "attn.bv": 0,
        "attn.wo": 1,
        "ffn.w1": 0,
        "ffn.b1": 0,
        "ffn.w2": 1,
    },
    "lenet": {
        "conv1.weight": 0,
        "conv1.bias": 0,
        "conv2.weight": 0,
        "conv2.bias": 0,
        "fc1.weight": 0,
        "fc1.bias": 0,
        "fc2.weight": 1,
    },
}


def worker(model: str, optimizer: str) -> int:
    import dlpc
    import dlpc.train
    from dlpc.dist import TensorParallelTrainer
    from dlpc.runtime.mpi import world

    C = world()
    path, loss, shape = MODELS[model]
    path = ROOT / "examples" / path
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((STEPS, BATCH, *shape)).astype(np.float32)
    if loss == "mse":
        ys = rng.standard_normal((STEPS, BATCH, *shape)).astype(np.float32)
    else:
        ys = rng.integers(0, 10, (STEPS, BATCH)).astype(np.int64)
    tp = TensorParallelTrainer(path, loss, optimizer, batch_size=BATCH)
    assert tp.sharded == SHARDED[model], tp.sharded
    one = dlpc.train.Trainer(path, loss, optimizer, batch_size=BATCH, target="numpy")
    start = dlpc.load(path).weights
    tp_losses = [tp.step(xs[0], ys[0])]
    one_losses = [one.step(xs[0], ys[0])]
    full = tp.full_weights()
    for name, w0 in start.items():  # step 1: the update is -lr * gradient
        np.testing.assert_allclose(
            full[name] - w0, one.weights[name] - w0, rtol=1e-4, atol=1e-6, err_msg=name
        )
    for k in range(1, STEPS):
        tp_losses.append(tp.step(xs[k], ys[k]))
        one_losses.append(one.step(xs[k], ys[k]))
    np.testing.assert_allclose(tp_losses, one_losses, rtol=1e-5, atol=1e-6)
    full = tp.full_weights()
    for name, value in one.weights.items():
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    moved = max(float(np.abs(full[n] - v).max()) for n, v in start.items())
    assert moved > 1e-4, "the params did not change"
    print(f"ok {C.rank} {model} {optimizer}", flush=True)
    return 0


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")
@pytest.mark.parametrize("model", ["transformer", "lenet"])
def test_tensor_parallel_heads_and_channels_equal_one_device(model):
    pytest.importorskip("mpi4py")
    command = ["mpiexec", "-n", "2", sys.executable, __file__, model, "sgd"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok 0 {model} sgd" in result.stdout and f"ok 1 {model} sgd" in result.stdout


def test_heads_the_ranks_do_not_divide_is_one_line():
    import dlpc
    from dlpc.passes.dist.tensor_parallel import tensor_parallel

    module = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=2).module.clone()
    with pytest.raises(DiagnosticException) as error:
        tensor_parallel(module, 3)
    assert str(error.value) == (
        "graph-tensor-parallel: the attention projection attn.wq has 4 heads, which do not "
        "divide by ranks 3"
    )


def test_channels_the_ranks_do_not_divide_is_one_line():
    import dlpc
    from dlpc.passes.dist.tensor_parallel import tensor_parallel

    module = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=2).module.clone()
    with pytest.raises(DiagnosticException) as error:
        tensor_parallel(module, 4)
    assert str(error.value) == (
        "graph-tensor-parallel: conv1.weight has 6 entries along dim 0, which do not divide "
        "by ranks 4"
    )


if __name__ == "__main__":
    from dlpc.runtime.mpi import guard

    sys.exit(guard(lambda: worker(*sys.argv[1:]), "test_dist_tp_heads"))
