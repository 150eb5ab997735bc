"""PipeDream-2BW (graph-pipeline{schedule=2bw}) on 2 and 4 MPI ranks against a numpy simulation
of 2BW's update rule, W(t+1) = W(t) - lr * grad f(W(t-1)) (the gradient of step t taken
on the weight version one step older, coalesced over the step's micro-batches).

Each rank runs its stage's program for STEPS steps, feeding it its two weight versions
(the newest as `<p>`, the stashed one as `pipeline.stash.<p>`), applying the returned
gradient to the newest version and taking the returned `pipeline.stash.<p>` as the next
step's stash. PipelineTrainer(schedule="2bw") keeps the versions on the host; 8 SGD
steps of it match a one-device simulation of the same rule. The workers are this file,
run under mpiexec.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMEOUT = 180  # a stuck rank fails the test instead of hanging CI
STEPS, MICRO, ROWS, LR = 6, 2, 2, 0.2

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs the dist extra")


def _deep_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    shapes = {"w1": (6, 4), "w2": (6, 6), "w3": (6, 6), "w4": (3, 6)}
    return {k: (0.5 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}


def _batches() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(6)
    xs = rng.standard_normal((STEPS, MICRO * ROWS, 4)).astype(np.float32)
    ts = rng.standard_normal((STEPS, MICRO * ROWS, 3)).astype(np.float32)
    return xs, ts


def _loss_and_grads(w: dict[str, np.ndarray], x: np.ndarray, t: np.ndarray):
    """dist_worker.DEEP (three tanh layers, a linear output, the mean squared error) and
    its gradients, by hand in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    r1 = np.tanh(x @ w["w1"].T)
    r2 = np.tanh(r1 @ w["w2"].T)
    r3 = np.tanh(r2 @ w["w3"].T)
    y = r3 @ w["w4"].T
    loss = float(np.mean((y - t) ** 2))
    dy = 2 * (y - t) / y.size
    g4 = dy.T @ r3
    dh3 = (dy @ w["w4"]) * (1 - r3**2)
    g3 = dh3.T @ r2
    dh2 = (dh3 @ w["w3"]) * (1 - r2**2)
    g2 = dh2.T @ r1
    dh1 = (dh2 @ w["w2"]) * (1 - r1**2)
    g1 = dh1.T @ x
    return loss, {"w1": g1, "w2": g2, "w3": g3, "w4": g4}


def simulate(delayed: bool) -> tuple[list[float], dict[str, np.ndarray]]:
    """SGD over the batches, on 2BW's rule (`delayed`) or the plain one; the losses are
    those of the version each step's gradient is taken on."""
    xs, ts = _batches()
    cur = {k: v.astype(np.float64) for k, v in _deep_weights().items()}
    prev = dict(cur)  # at the first step both versions are W(0)
    losses = []
    for k in range(STEPS):
        loss, g = _loss_and_grads(prev if delayed else cur, xs[k], ts[k])
        losses.append(loss)
        prev, cur = cur, {n: cur[n] - LR * g[n] for n in cur}
    return losses, cur


def test_2bw_rule_is_not_plain_sgd():
    """The simulation the ranks are checked against differs from synchronous SGD, so the
    equality below tells 2BW's delayed update from a plain one."""
    _, two = simulate(True)
    _, plain = simulate(False)
    assert max(float(np.abs(two[n] - plain[n]).max()) for n in two) > 1e-3


def test_2bw_programs_cannot_deadlock_and_read_the_stash():
    """2bw on 2-4 stages and 1-5 micro-batches passes graph-pipeline's blocking-send
    check; every stage's ops read only the stashed version of its params, and it
    returns the newest as the next stash."""
    from xdsl.parser import Parser

    from dlpc.dialects import graph
    from dlpc.passes.dist.data_parallel import result_names
    from dlpc.passes.dist.pipeline import STASH, pipeline
    from dlpc.passes.pipeline import context

    sys.path.insert(0, str(HERE))
    from dist_worker import DEEP

    for stages in (2, 3, 4):
        for m in (1, 2, 5):
            module = Parser(context(), DEEP.replace("BATCH", "2")).parse_module()
            for f in pipeline(module, stages, m, "2bw"):
                names = result_names(f)
                own = [n[5:] for n in names if n.startswith("grad.")]
                assert [n for n in names if n.startswith(STASH)] == [STASH + p for p in own]
                for op in f.walk():
                    if isinstance(op, graph.ParamOp) and op.pname in own:
                        users = {u.operation.name for u in op.output.uses}
                        assert users == {"func.return"}, (op.pname, users)


@needs_mpi
@pytest.mark.parametrize("stages", [2, 4])
def test_2bw_stages_equal_the_simulated_update_rule(stages):
    pytest.importorskip("mpi4py")
    command = ["mpiexec", "-n", str(stages), sys.executable, __file__, "worker"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    found = sorted(re.findall(r"ok (\d) 2bw ", result.stdout))
    assert found == [str(r) for r in range(stages)], result.stdout


TINY = """model tiny(x: f32[B, 8]) {
  param fc1.weight: f32[6, 8] = kaiming(seed=1)
  param fc1.bias: f32[6] = normal(seed=2, std=0.1)
  param fc2.weight: f32[4, 6] = kaiming(seed=3)
  param fc2.bias: f32[4] = zeros()

  return linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
}
"""


@needs_mpi
def test_2bw_pipeline_trainer_equals_one_device_simulation(tmp_path):
    pytest.importorskip("mpi4py")
    model = tmp_path / "tiny.dlpc"
    model.write_text(TINY)
    command = ["mpiexec", "-n", "2", sys.executable, __file__, "trainer", str(model)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(re.findall(r"ok (\d) 2bw-trainer", result.stdout)) == ["0", "1"]


def trainer(model: str) -> int:
    """PipelineTrainer(schedule=2bw, 2 micro-batches) against one device's Trainer
    computing each step's gradient on W(t-1) and applying it to W(t) by hand."""
    import dlpc.train
    from dlpc.dist.pipeline import PipelineTrainer
    from dlpc.passes.train.optim import SGD
    from dlpc.runtime.mpi import world

    C = world()
    steps, batch, lr = 8, 8, 0.5
    rng = np.random.default_rng(31)
    xs = rng.standard_normal((steps, batch, 8)).astype(np.float32)
    ys = rng.integers(0, 4, (steps, batch)).astype(np.int64)
    pipe = PipelineTrainer(
        model, "cross_entropy", SGD(lr=lr), batch, microbatches=2, schedule="2bw"
    )
    losses = [pipe.step(xs[k], ys[k]) for k in range(steps)]
    full = pipe.full_weights()
    one = dlpc.train.Trainer(
        model, "cross_entropy", SGD(lr=lr), batch, target="numpy", return_grads=True
    )
    cur = {n: np.array(v) for n, v in one.weights.items()}
    prev = dict(cur)
    want = []
    for k in range(steps):
        one._resident.assign(prev)
        want.append(one.step(xs[k], ys[k]))
        g = one.grads
        prev, cur = cur, {n: cur[n] - np.float32(lr) * g[n] for n in cur}
    np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
    plain = dlpc.train.Trainer(model, "cross_entropy", SGD(lr=lr), batch, target="numpy")
    for k in range(steps):
        plain.step(xs[k], ys[k])
    for name, value in cur.items():
        np.testing.assert_allclose(full[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    # the delayed rule is not plain SGD's on these steps
    assert max(float(np.abs(plain.weights[n] - cur[n]).max()) for n in cur) > 1e-3
    print(f"ok {C.rank} 2bw-trainer", flush=True)
    return 0


def worker() -> int:
    from xdsl.dialects.builtin import ModuleOp, StringAttr
    from xdsl.parser import Parser

    from dlpc import api
    from dlpc.model import Model
    from dlpc.passes.dist.data_parallel import result_names
    from dlpc.passes.dist.pipeline import STASH, pipeline
    from dlpc.passes.pipeline import context
    from dlpc.runtime.mpi import world

    sys.path.insert(0, str(HERE))
    from dist_worker import DEEP

    C = world()
    micro = Parser(context(), DEEP.replace("BATCH", str(ROWS))).parse_module()
    mine = pipeline(micro, C.size, MICRO, "2bw")[C.rank]
    mine.sym_name = StringAttr("main")
    mine.detach()
    names = result_names(mine)
    own = [n[5:] for n in names if n.startswith("grad.")]
    assert own and all(STASH + p in names for p in own), names
    init = _deep_weights()
    cur = {p: init[p] for p in own}
    prev = dict(cur)
    xs, ts = _batches()
    losses = []
    for k in range(STEPS):
        weights = {**cur, **{STASH + p: prev[p] for p in own}}
        stage = Model(ModuleOp([mine.clone()]), weights, "stage", None)
        out = api.compile(stage, target="numpy", fold_weights=False)(xs[k], ts[k])
        got = dict(zip(names, out))
        losses.append(float(got["loss"]))
        for p in own:  # the stash comes back as the newest version, the rotation
            np.testing.assert_array_equal(got[STASH + p], cur[p])
        prev, cur = (
            {p: got[STASH + p] for p in own},
            {p: (cur[p] - LR * got[f"grad.{p}"]).astype(np.float32) for p in own},
        )
    want_losses, want = simulate(True)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
    for p in own:
        np.testing.assert_allclose(cur[p], want[p], rtol=1e-4, atol=1e-5, err_msg=p)
    print(f"ok {C.rank} 2bw {','.join(own)}", flush=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] in (["worker"], ["trainer"]):
    from dlpc.runtime.mpi import guard

    run = worker if sys.argv[1] == "worker" else lambda: trainer(sys.argv[2])
    sys.exit(guard(run, "test_dist_pipeline_2bw"))
