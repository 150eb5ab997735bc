"""dlpc.eager: eager ops equal the numpy reference on every device; eager gradients equal
graph-autodiff's and torch's; the dispatcher caches kernels, takes user kernels and says
which op and device lack one; optimizers follow the training step's rules; dlpc.jit of
an eager LeNet equals eager; a short eager MLP run on the digits trains."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.eager import optim as eager_optim
from dlpc.frontends.builder import GraphBuilder
from dlpc.model import Model
from dlpc.runtime.device import devices

OPENCL = [d.name for d in devices("opencl")][:1]
DEVICES = ["cpu", *OPENCL]
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]

rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# (op, numpy operands, attributes)
CASES = [
    ("relu", [_r(3, 4)], {}),
    ("exp", [_r(5)], {}),
    ("add", [_r(2, 3), _r(3)], {}),
    ("mul", [_r(4, 1), _r(1, 5)], {}),
    ("matmul", [_r(3, 4), _r(4, 2)], {}),
    ("linear", [_r(2, 4), _r(3, 4), _r(3)], {}),
    ("conv2d", [_r(1, 2, 7, 7), _r(3, 2, 3, 3)], {"stride": 2}),
    ("max_pool2d", [_r(1, 2, 4, 4)], {"kernel_size": 2, "stride": 2}),
    ("softmax", [_r(2, 5)], {"axis": 1}),
    ("reduce_sum", [_r(3, 4)], {"axes": [1]}),
    ("transpose", [_r(2, 3, 4)], {"perm": [2, 0, 1]}),
    ("sub", [_r(3, 4), _r(4)], {}),
    ("div", [_r(3, 4), _r(3, 4) + 4.0], {}),
    ("tanh", [_r(6)], {}),
    ("sigmoid", [_r(6)], {}),
    ("gelu", [_r(6)], {}),
    ("leaky_relu", [_r(6)], {"alpha": 0.2}),
    ("log_softmax", [_r(3, 5)], {"axis": 1}),
    ("reduce_mean", [_r(3, 4)], {"axes": [0], "keepdims": True}),
    ("reduce_max", [_r(3, 4)], {"axes": [1]}),
    ("avg_pool2d", [_r(1, 2, 4, 4)], {"kernel_size": 2, "stride": 2}),
    ("global_avg_pool", [_r(1, 3, 4, 4)], {}),
    ("concat", [_r(2, 3), _r(2, 2)], {"axis": 1}),
    ("pad", [_r(2, 3)], {"pads": [1, 0, 0, 2]}),
    ("layer_norm", [_r(2, 6), _r(6), _r(6)], {}),
    ("gather", [_r(5, 3), np.array([4, 0, 2], np.int64)], {"axis": 0}),
]
DLP_CASES = ["relu", "add", "matmul", "linear", "conv2d", "max_pool2d", "softmax", "reduce_sum"]


def _reference(name, arrays, attrs):
    gb = GraphBuilder("ref")
    values = [
        gb.input(f"a{k}", a.shape, dispatch.dtype_name(a.dtype)) for k, a in enumerate(arrays)
    ]
    gb.output(dispatch.build_op(gb, name, values, attrs))
    return api.reference(Model(gb.module(), {}, "ref"), arrays)[0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_equals_reference(device, case):
    name, arrays, attrs = case
    tensors = [dlpc.tensor(a, device=device) for a in arrays]
    out = getattr(dlpc.ops, name)(*tensors, **attrs)
    assert out.device.name == device
    np.testing.assert_allclose(
        np.asarray(out), _reference(name, arrays, attrs), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("name", DLP_CASES)
def test_op_equals_reference_on_dlp(name):
    """The DLP simulator's device (host memory, its own allocator) runs the kernels
    compiled for the dlp target."""
    _, arrays, attrs = next(c for c in CASES if c[0] == name)
    out = getattr(dlpc.ops, name)(*[dlpc.tensor(a, device="dlp:0") for a in arrays], **attrs)
    assert out.device.name == "dlp:0" and dlpc.memory_stats("dlp:0")["active_blocks"] > 0
    np.testing.assert_allclose(
        np.asarray(out), _reference(name, arrays, attrs), rtol=1e-4, atol=1e-5
    )


def test_operators_and_methods():
    a, b = _r(3, 4), _r(3, 4)
    x, y = dlpc.tensor(a), dlpc.tensor(b)
    checks = [
        (x + y, a + b),
        (x - 1.0, a - 1),
        (2.0 * x, 2 * a),
        (x / 2.0, a / 2),
        (-x, -a),
        (x @ y.T, a @ b.T),
        (x.sum(1), a.sum(1)),
        (x.mean(), a.mean()),
        ((x > 0).astype(np.float32), (a > 0).astype(np.float32)),
        (x.T.contiguous(), a.T),
    ]
    for got, want in checks:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_dispatch_caches_and_errors():
    x = dlpc.tensor(_r(2, 2))
    x.relu()
    before = dispatch.cache_size()
    x.relu()
    assert dispatch.cache_size() == before  # a hit builds nothing
    with pytest.raises(DlpcError) as e:
        dlpc.ops.linear(x, dlpc.tensor(_r(3, 5)))
    assert "linear" in str(e.value) and "\n" not in str(e.value)
    if OPENCL:
        with pytest.raises(DlpcError) as e:
            x + dlpc.tensor(_r(2, 2), device=OPENCL[0])
        assert "cpu" in str(e.value) and OPENCL[0] in str(e.value)


def test_user_kernel_and_missing_kernel():
    calls = []

    def my_relu(x):
        calls.append(x.shape)
        return dlpc.from_numpy(np.maximum(np.asarray(x), 0) * 1.0)

    dlpc.register_kernel("relu", "cpu", my_relu)
    try:
        x = dlpc.tensor(np.array([-1.0, 2.0], np.float32))
        assert np.asarray(x.relu()).tolist() == [0.0, 2.0] and calls == [(2,)]
    finally:
        dlpc.unregister_kernel("relu", "cpu")
    del dispatch.KERNELS[("gelu", "dlp")]
    try:
        with pytest.raises(DlpcError) as e:
            dlpc.ops.gelu(dlpc.tensor(_r(3), device="dlp:0"))
        assert "gelu" in str(e.value) and "dlp:0" in str(e.value)
    finally:
        dispatch.KERNELS[("gelu", "dlp")] = dispatch.compiled


# ------------------------------------------------------------------ autograd


def _mlp_arrays():
    w = {"w1": _r(6, 8) * 0.3, "b1": _r(6) * 0.1, "w2": _r(3, 6) * 0.3, "b2": _r(3) * 0.1}
    return _r(4, 8), np.array([0, 2, 1, 2]), w


def _eager_loss(x, y, p, device):
    h = dlpc.ops.linear(x, p["w1"], p["b1"]).relu()
    logits = dlpc.ops.linear(h[:, 1:], p["w2"][:, 1:], p["b2"])  # a view in the path
    return dlpc.ops.cross_entropy(logits, y)


@pytest.mark.parametrize("device", DEVICES)
def test_grads_equal_torch(device):
    torch = pytest.importorskip("torch")
    x, y, w = _mlp_arrays()
    p = {k: dlpc.tensor(v, device=device, requires_grad=True) for k, v in w.items()}
    loss = _eager_loss(dlpc.tensor(x, device=device), dlpc.tensor(y, device=device), p, device)
    loss.backward()
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    h = torch.nn.functional.linear(torch.tensor(x), tp["w1"], tp["b1"]).relu()
    logits = torch.nn.functional.linear(h[:, 1:], tp["w2"][:, 1:], tp["b2"])
    tl = torch.nn.functional.cross_entropy(logits, torch.tensor(y))
    tl.backward()
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)
    for k in w:
        np.testing.assert_allclose(np.asarray(p[k].grad), tp[k].grad.numpy(), rtol=1e-4, atol=1e-6)


def test_grads_through_views_equal_torch():
    """Every view records its graph op (slice + reshape, transpose, reshape, broadcast):
    the gradient through a chain of them is torch's."""
    torch = pytest.importorskip("torch")
    a, c = _r(3, 4), _r(6)

    def chain(x):
        return x[1:, ::2].T.unsqueeze(2).expand(2, 2, 3)[:, :1].squeeze(1).reshape(6)

    x = dlpc.tensor(a, requires_grad=True)
    (chain(x) * dlpc.tensor(c)).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    (chain(tx) * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=1e-6)


def test_grads_equal_graph_autodiff():
    from dlpc.passes.train.autodiff import differentiate

    x, y, w = _mlp_arrays()
    gb = GraphBuilder("mlp")
    xv = gb.input("x", x.shape)
    hot = gb.input("hot", (4, 3))
    pv = {k: gb.param(k, v.shape) for k, v in w.items()}
    h = gb.relu(gb.linear(xv, pv["w1"], pv["b1"]))
    logits = gb.linear(h, pv["w2"], pv["b2"])
    picked = gb.reduce_sum(gb.mul(gb.log_softmax(logits, axis=1), hot), axes=[1])
    gb.output(gb.neg(gb.reduce_mean(picked)))
    module = gb.module()
    differentiate(module)
    outs = api.reference(Model(module, w, "mlp"), [x, np.eye(3, dtype=np.float32)[y]])
    p = {k: dlpc.tensor(v, requires_grad=True) for k, v in w.items()}
    h = dlpc.ops.linear(dlpc.tensor(x), p["w1"], p["b1"]).relu()
    loss = dlpc.ops.cross_entropy(dlpc.ops.linear(h, p["w2"], p["b2"]), dlpc.tensor(y))
    loss.backward()
    np.testing.assert_allclose(loss.item(), outs[0], rtol=1e-5)
    for k, g in zip(w, outs[1:]):
        np.testing.assert_allclose(np.asarray(p[k].grad), g, rtol=1e-4, atol=1e-6)


def test_grad_accumulates_and_no_grad():
    x = dlpc.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * np.array([1.0, -2.0, 3.0]) + 3)
    with dlpc.no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.is_leaf
    with pytest.raises(DlpcError):
        y.sum().backward()


@pytest.mark.parametrize(
    "name, device", [("sgd", "cpu"), ("adam", "cpu"), *(("adam", d) for d in OPENCL)]
)
def test_optimizer_matches_torch(name, device):
    torch = pytest.importorskip("torch")
    w0, g = _r(5, 3), _r(5, 3)
    opts = {"lr": 0.1, "momentum": 0.9} if name == "sgd" else {"lr": 0.01}
    p = dlpc.tensor(w0, device=device, requires_grad=True)
    opt = eager_optim.make(name, [p], **opts)
    tp = torch.tensor(w0, requires_grad=True)
    topt = (torch.optim.SGD if name == "sgd" else torch.optim.Adam)([tp], **opts)
    for k in range(3):
        p.grad = dlpc.tensor(g * (k + 1), device=device)
        opt.step()
        tp.grad = torch.tensor(g * (k + 1))
        topt.step()
    np.testing.assert_allclose(np.asarray(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ jit


class LeNet:
    def __init__(self, weights):
        self.p = {k: dlpc.tensor(v) for k, v in weights.items()}

    def __call__(self, x):
        p, ops = self.p, dlpc.ops
        h = ops.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=2).relu()
        h = ops.max_pool2d(h, kernel_size=2, stride=2)
        h = ops.conv2d(h, p["conv2.weight"], p["conv2.bias"]).relu()
        h = ops.max_pool2d(h, kernel_size=2, stride=2)
        h = h.reshape(h.shape[0], 400)
        h = ops.linear(h, p["fc1.weight"], p["fc1.bias"]).relu()
        h = ops.linear(h, p["fc2.weight"], p["fc2.bias"]).relu()
        return ops.linear(h, p["fc3.weight"], p["fc3.bias"])


def test_jit_lenet_equals_eager():
    model = LeNet(dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=2).weights)
    fast = dlpc.jit(model)
    x = dlpc.tensor(_r(2, 1, 28, 28))
    eager = np.asarray(model(x))
    np.testing.assert_allclose(np.asarray(fast(x)), eager, rtol=1e-4, atol=1e-5)
    assert "graph.conv2d" in fast.graph and "graph.max_pool2d" in fast.graph
    fast(dlpc.tensor(_r(2, 1, 28, 28)))
    assert fast.traces == 1  # same signature: no re-trace
    x3 = dlpc.tensor(_r(3, 1, 28, 28))
    np.testing.assert_allclose(np.asarray(fast(x3)), np.asarray(model(x3)), rtol=1e-4, atol=1e-5)
    assert fast.traces == 2  # a new shape: traced again


def test_jit_sees_weight_updates_and_guards_python_values():
    w = dlpc.tensor(_r(3, 4))

    def f(x, scale):
        y = dlpc.ops.linear(x, w)
        return y * 2.0 if scale > 1 else y

    fast = dlpc.jit(f)
    x = dlpc.tensor(_r(2, 4))
    np.testing.assert_allclose(np.asarray(fast(x, 2)), np.asarray(f(x, 2)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fast(x, 1)), np.asarray(f(x, 1)), rtol=1e-5)
    assert fast.traces == 2
    w._set_(dlpc.tensor(_r(3, 4)))  # an in-place update (as an optimizer step)
    np.testing.assert_allclose(np.asarray(fast(x, 1)), np.asarray(f(x, 1)), rtol=1e-5)

    def views(x):  # every kind of view, traced
        return x[1:, ::2].T.unsqueeze(2).expand(2, 2, 3)[:, :1].squeeze(1).reshape(6) * 2.0

    xv = dlpc.tensor(_r(3, 4))
    np.testing.assert_allclose(np.asarray(dlpc.jit(views)(xv)), np.asarray(views(xv)), rtol=1e-6)

    def bad(x):
        return x * 2.0 if x.sum().item() > 0 else x

    with pytest.raises(DlpcError) as e:
        dlpc.jit(bad)(x)
    assert "eagerly" in str(e.value)


@pytest.mark.parametrize("device", DEVICES)
def test_jit_records_one_node_with_graph_autodiff_backward(device):
    """On every device: the compiled forward's output and the gradients of the
    graph-autodiff backward equal eager's; inputs, weights and results stay tensors of
    the device."""
    w = dlpc.tensor(_r(3, 4), device=device, requires_grad=True)
    b = dlpc.tensor(_r(3), device=device, requires_grad=True)

    def f(x, y):
        return dlpc.ops.cross_entropy(dlpc.ops.linear(x, w, b).relu(), y)

    x = dlpc.tensor(_r(5, 4), device=device)
    y = dlpc.tensor(np.array([0, 1, 2, 1, 0]), device=device)
    loss = f(x, y)
    loss.backward()
    eager = [np.asarray(w.grad).copy(), np.asarray(b.grad).copy()]
    w.grad = b.grad = None
    fast = dlpc.jit(f)
    jitted = fast(x, y)
    assert jitted._node is not None and jitted._node.name == "jit:f"
    assert jitted.device.name == device
    jitted.backward()
    np.testing.assert_allclose(jitted.item(), loss.item(), rtol=1e-6)
    for got, want in zip([w.grad, b.grad], eager):
        assert got is not None and got.device.name == device
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)
    w._set_(dlpc.tensor(_r(3, 4), device=device))  # a step: the weights are bound again
    with dlpc.no_grad():
        np.testing.assert_allclose(np.asarray(fast(x, y)), np.asarray(f(x, y)), rtol=1e-5)


# ------------------------------------------------------------------ done means


STEPS = 6


@pytest.fixture(scope="module")
def dlpc_train_losses():
    """dlpc.train's losses over the first STEPS digits batches of epoch 0 (Adam, lr
    1e-3, batch 32, examples/mlp.dlpc's initial weights), as dlpc-train runs them."""
    pytest.importorskip("sklearn")
    from dlpc.tools.dlpc_train import fit_to_input, load_data

    x, y = load_data("digits")[:2]
    x = fit_to_input(x, (784,), "digits", lambda s: None)
    trainer = dlpc.train.Trainer(
        ROOT / "examples" / "mlp.dlpc", optimizer=dlpc.optim.Adam(lr=1e-3), batch_size=32
    )
    order = np.random.default_rng([0, 0]).permutation(len(x))  # (epoch 0's order)
    return [
        trainer.step(x[order[k : k + 32]], y[order[k : k + 32]]) for k in range(0, 32 * STEPS, 32)
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_eager_mlp_steps_equal_dlpc_train(device, dlpc_train_losses):
    """examples/eager_mlp.py's loop (eager ops, backward, the eager Adam; on cpu through
    dlpc.jit) takes the same steps as dlpc.train's compiled step on the same digits
    batches: the same loss after every update."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("eager_mlp", ROOT / "examples" / "eager_mlp.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    losses: list[float] = []
    mod.train(
        device, 1, jit=device == "cpu", say=lambda s: None, max_steps=STEPS, step_losses=losses
    )
    np.testing.assert_allclose(losses, dlpc_train_losses, rtol=1e-5)
