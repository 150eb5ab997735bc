"""graph.dropout: a counter-based mask (the PCG hash of seed, step and flat index, integer
ops only) that numpy, C, OpenCL and DLP draw bit-identically; its drop rate, gradient
(finite differences with the mask fixed) and the training step that feeds it `opt.step`."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, f64
from xdsl.ir import Block, Region

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder
from dlpc.passes.train.autodiff import differentiate
from dlpc.passes.train.step import train_step_module
from dlpc.reference.graph import dropout_keep, pcg_hash, run_reference

DROP = """\
func.func @main(%x: tensor<3x5x7xf32>, %s: tensor<f32>) -> tensor<3x5x7xf32> {
  %y = graph.dropout %x, %s {p = 0.3 : f64, seed = 1234 : i64} : (tensor<3x5x7xf32>, tensor<f32>) -> tensor<3x5x7xf32>
  func.return %y : tensor<3x5x7xf32>
}
"""

MODEL = """\
model dmlp(x: f32[B, 16]) {
  param fc1.weight: f32[32, 16] = kaiming(seed=1)
  param fc1.bias: f32[32] = normal(seed=3, std=0.1)
  param fc2.weight: f32[4, 32] = kaiming(seed=2, gain=1.0)
  param fc2.bias: f32[4] = zeros()
  let h = dropout(relu(linear(x, fc1.weight, fc1.bias)), p=0.5, seed=7)
  return linear(h, fc2.weight, fc2.bias)
}
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dlpc-cache"))


def _targets() -> list[str]:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return ["numpy", "c", "dlp"]
    return ["numpy", "c", "opencl", "dlp"]


def test_pcg_hash_known_values():
    # the published PCG hash (Jarzynski & Olano 2020), 32-bit, as uint32 arithmetic gives it
    def pcg32(v: int) -> int:
        s = (v * 747796405 + 2891336453) % 2**32
        w = (((s >> ((s >> 28) + 4)) ^ s) * 277803737) % 2**32
        return (w >> 22) ^ w

    values = np.array([0, 1, 2, 42, 2**31, 2**32 - 1], np.int64)
    assert [int(h) for h in pcg_hash(values)] == [pcg32(int(v)) for v in values]
    assert all(0 <= int(h) < 2**32 for h in pcg_hash(values))


def test_masks_are_bit_identical_on_every_backend(tmp_path):
    path = tmp_path / "drop.mlir"
    path.write_text(DROP)
    model = dlpc.load(path)
    x = np.ones((3, 5, 7), np.float32)
    fns = {t: dlpc.compile(model, target=t) for t in _targets()}
    masks = []
    for step in (0, 1, 12345):
        s = np.array(step, np.float32)
        outs = {t: fn(x, s)[0] for t, fn in fns.items()}
        want = dropout_keep(x.shape, step, 1234, 0.3)
        for t, out in outs.items():
            assert np.array_equal(out != 0, want), (t, step)
            kept = out[want]
            assert np.all(kept == np.float32(1 / 0.7)), (t, step)
            assert out.tobytes() == outs["numpy"].tobytes(), (t, step)
        masks.append(want)
    assert not np.array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[1], masks[2])
    # another seed, another mask
    assert not np.array_equal(masks[0], dropout_keep(x.shape, 0, 1235, 0.3))


def test_te_evaluator_draws_the_same_mask():
    """graph-to-te's integer ops, interpreted by the te evaluator (check-each-pass's)."""
    from xdsl.context import Context

    from dlpc.passes.lower.graph_to_te import GraphToTe
    from dlpc.passes.pipeline import parse_module
    from dlpc.reference.te import run_te

    module = parse_module(DROP)
    x = np.random.default_rng(2).standard_normal((3, 5, 7)).astype(np.float32)
    s = np.array(9, np.float32)
    (want,) = run_reference(module, [x, s], {})
    GraphToTe().apply(Context(), module)
    (got,) = run_te(module, [x, s])
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_drop_fraction_is_p(tmp_path, p):
    shape = (256, 1024)
    path = tmp_path / "big.mlir"
    t = "tensor<256x1024xf32>"
    path.write_text(
        f"func.func @main(%x: {t}, %s: tensor<f32>) -> {t} {{\n"
        f"  %y = graph.dropout %x, %s {{p = {p} : f64, seed = 5 : i64}} : ({t}, tensor<f32>) -> {t}\n"
        f"  func.return %y : {t}\n}}\n"
    )
    model = dlpc.load(path)
    x = np.ones(shape, np.float32)
    s = np.array(3, np.float32)
    (ref,) = dlpc.compile(model, target="numpy")(x, s)
    (c,) = dlpc.compile(model, target="c")(x, s)
    assert ref.tobytes() == c.tobytes()
    dropped = float(np.mean(ref == 0))
    assert abs(dropped - p) < 0.006  # 262144 draws: 5 standard deviations at p = 0.5
    # p = 0 keeps everything
    assert dropout_keep(shape, 3, 5, 0.0).all()


def test_inference_mode_is_the_identity():
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    block = Block(arg_types=[graph.tensor_type((4, 6))])
    b = Builder.at_end(block)
    y = b.op(graph.DropoutOp, block.args[0], p=0.5, seed=3)
    block.add_op(func.ReturnOp(y))
    f = func.FuncOp("main", ([a.type for a in block.args], [y.type]), Region(block))
    module = ModuleOp([f])
    module.verify()
    (out,) = run_reference(module, [x], {})
    assert np.array_equal(out, x)


def test_gradient_matches_finite_differences_with_the_mask_fixed():
    rng = np.random.default_rng(0)
    shape = (3, 4, 5)
    block = Block(arg_types=[graph.tensor_type(shape, f64), graph.tensor_type((), f64)])
    b = Builder.at_end(block)
    r = b.const(rng.standard_normal(shape), f64)
    y = b.op(graph.DropoutOp, block.args[0], block.args[1], p=0.4, seed=11)
    loss = b.sum(b.mul(b.mul(y, y), r))  # nonlinear in x: the adjoint flows through y
    block.add_op(func.ReturnOp(loss))
    f = func.FuncOp("main", ([a.type for a in block.args], [loss.type]), Region(block))
    module = ModuleOp([f])
    module.verify()
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    grad_module.verify()
    x = rng.standard_normal(shape)
    step = np.array(7.0)
    _, gx, gstep = run_reference(grad_module, [x, step], {})
    assert float(gstep) == 0.0  # the step counter takes no gradient
    eps = 1e-6
    fd = np.zeros(x.size)
    for k in range(x.size):
        vals = []
        for sign in (1, -1):
            moved = x.copy().reshape(-1)
            moved[k] += sign * eps
            vals.append(float(run_reference(module, [moved.reshape(shape), step], {})[0]))
        fd[k] = (vals[0] - vals[1]) / (2 * eps)
    np.testing.assert_allclose(gx.reshape(-1), fd, rtol=1e-6, atol=1e-8)
    keep = dropout_keep(shape, 7, 11, 0.4)
    assert np.all(gx[~keep] == 0) and np.all(gx[keep] != 0)


def _manual_loss(weights, x, y, step):
    """The model's cross-entropy in float64 with graph.dropout's mask for `step`."""
    w1, b1 = weights["fc1.weight"].astype(np.float64), weights["fc1.bias"].astype(np.float64)
    w2, b2 = weights["fc2.weight"].astype(np.float64), weights["fc2.bias"].astype(np.float64)
    h = np.maximum(x @ w1.T + b1, 0)
    h = np.where(dropout_keep(h.shape, step, 7, 0.5), h * 2.0, 0.0)
    z = h @ w2.T + b2
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def test_train_step_feeds_the_step_counter(tmp_path):
    path = tmp_path / "dmlp.dlpc"
    path.write_text(MODEL)
    rng = np.random.default_rng(0)
    batches = [
        (rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 4, 8)) for _ in range(4)
    ]
    losses = {}
    for target in ("numpy", "c"):
        trainer = dlpc.train(str(path), optimizer="sgd", batch_size=8, target=target)
        losses[target] = []
        for t, (x, y) in enumerate(batches):
            before = trainer.weights
            loss = trainer.step(x, y)
            # the loss of step t is the forward with mask(seed 7, step t)
            assert loss == pytest.approx(_manual_loss(before, x, y, t), rel=1e-5), (target, t)
            assert loss != pytest.approx(_manual_loss(before, x, y, t + 1), rel=1e-3)
            losses[target].append(loss)
        assert float(trainer.state["opt.step"]) == len(batches)
    np.testing.assert_allclose(losses["c"], losses["numpy"], rtol=1e-6)
    # the training step's graph gives every dropout (forward and backward) the step counter
    step = train_step_module(dlpc.load(path, batch=8).module, "cross_entropy", "sgd")
    drops = [o for o in step.module.walk() if isinstance(o, graph.DropoutOp)]
    assert len(drops) == 2 and all(o.training for o in drops)
    for o in drops:
        owner = o.operands[1].owner
        assert isinstance(owner, graph.ParamOp) and owner.pname == "opt.step"


def test_text_frontend_dropout_and_its_errors(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[2, 3]) {\n  return dropout(x, p=0.25, seed=4)\n}\n")
    model = dlpc.load(path)
    (op,) = [o for o in model.module.walk() if isinstance(o, graph.DropoutOp)]
    assert op.p == 0.25 and op.seed == 4 and not op.training
    bad = tmp_path / "bad.dlpc"
    bad.write_text("model m(x: f32[2, 3]) {\n  return dropout(x, p=1.5)\n}\n")
    with pytest.raises(DlpcError) as e:
        dlpc.load(bad)
    first = str(e.value).splitlines()[0]  # the diagnostic; then the line and a caret
    assert "bad.dlpc:2:" in first and "graph.dropout p = 1.5 is out of range [0, 1)" in first


@pytest.mark.parametrize("target", ["c", "dlp"])
def test_every_pass_keeps_the_mask(tmp_path, target):
    """check-each-pass: the reference, the te evaluator, C for loop IR and the DLP
    simulator agree after every pass on seeded random inputs (a random step included)."""
    path = tmp_path / "drop.mlir"
    path.write_text(DROP)
    fn = dlpc.compile(dlpc.load(path), target=target, check_each_pass=True)
    x = np.ones((3, 5, 7), np.float32)
    (out,) = fn(x, np.array(4, np.float32))
    assert np.array_equal(out != 0, dropout_keep(x.shape, 4, 1234, 0.3))
