"""ONNX RNN / GRU / LSTM (frontends/onnx_ops/recurrent.py, unrolled into graph ops):

- outputs against onnxruntime over directions, layouts, initial states, biases, peepholes,
  sequence_lens, clip, linear_before_reset and other activations, on numpy (onnxruntime
  has no layout 1: it runs those as layout 0 on the swapped values); a bidirectional LSTM
  and GRU with sequence_lens on C, the LSTM on DLP C, a reverse RNN on OpenCL;
- LSTM gradients (graph-autodiff through the unrolled steps, via dlpc.train's
  return_grads) against central finite differences in float64 and against torch.nn.LSTM
  with the same weights; GRU's (linear_before_reset=1) against torch.nn.GRU;
- a small LSTM regressor trained with dlpc.train: its loss falls.
Tiny shapes: about a minute on a loaded 2-core machine (the DLP C build the most)."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes.train.optim import SGD

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, B, I, H = 3, 2, 3, 4


def _model(op, *, inputs, attrs, outputs=("Y", "Y_h"), dtype=TensorProto.FLOAT, inits=()):
    vi = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    node = helper.make_node(op, [n for n, _, _ in inputs], list(outputs), **attrs)
    outs = [helper.make_tensor_value_info(n, dtype, None) for n in outputs]
    g = helper.make_graph([node], "rnn", vi, outs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10  # onnxruntime's newest
    return m


def _case(op, direction="forward", layout=0, extra=(), attrs=None, seed=0, lens=(T, 1)):
    """(model, inputs) with X, W, R, B and the inputs named in `extra` (sequence_lens,
    initial_h, initial_c, P)."""
    rng = np.random.default_rng(seed)
    g, nd = GATES[op], 2 if direction == "bidirectional" else 1
    x_shape, state = (T, B, I), (nd, B, H)  # drawn in layout 0, swapped for layout 1
    spec = [
        ("X", x_shape),
        ("W", (nd, g * H, I)),
        ("R", (nd, g * H, H)),
        ("B", (nd, 2 * g * H)),
        ("sequence_lens", (B,)),
        ("initial_h", state),
        ("initial_c", state),
        ("P", (nd, 3 * H)),
    ]
    last = max([3] + [k for k, (n, _) in enumerate(spec) if n in extra])
    inputs, values, names = [], [], []
    for n, s in spec[: last + 1]:
        if n not in ("X", "W", "R", "B") and n not in extra:
            names.append("")
            continue
        if n == "sequence_lens":
            inputs.append((n, TensorProto.INT32, list(s)))
            values.append(np.array(lens, np.int32)[:B])
        else:
            inputs.append((n, TensorProto.FLOAT, list(s)))
            v = rng.standard_normal(s).astype(np.float32) * 0.7
            values.append(v)
        names.append(n)
    if layout:  # the same values batch first (X [B, T, I], states [B, dirs, H])
        for k, (n, _, shape) in enumerate(inputs):
            if n in ("X", "initial_h", "initial_c"):
                values[k] = np.ascontiguousarray(values[k].swapaxes(0, 1))
                inputs[k] = (n, TensorProto.FLOAT, [shape[1], shape[0], shape[2]])
    a = dict(hidden_size=H, direction=direction, layout=layout, **(attrs or {}))
    outs = ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")
    m = _model(op, inputs=inputs, attrs=a, outputs=outs)
    m.graph.node[0].ClearField("input")
    m.graph.node[0].input.extend(names)
    return m, values


CASES = [
    ("LSTM", "forward", 0, ("initial_h", "initial_c", "P"), None),
    ("LSTM", "reverse", 1, ("sequence_lens",), {"clip": 0.8}),
    ("LSTM", "bidirectional", 0, ("sequence_lens", "initial_h"), None),
    ("LSTM", "forward", 0, (), {"input_forget": 1}),
    ("GRU", "forward", 1, ("initial_h",), {"linear_before_reset": 1}),
    ("GRU", "bidirectional", 0, ("sequence_lens",), None),
    ("GRU", "reverse", 0, (), {"activations": ["HardSigmoid", "Softsign"]}),
    ("RNN", "bidirectional", 1, ("sequence_lens", "initial_h"), None),
    ("RNN", "forward", 0, (), {"activations": ["Relu"]}),
    (
        "RNN",
        "reverse",
        0,
        (),
        {"activations": ["LeakyRelu"], "activation_alpha": [0.3]},
    ),
]


def _run_ort(m, values, layout=0):
    """onnxruntime's outputs; it has no layout 1, so that runs as layout 0 on the values
    swapped back, and its outputs are swapped to batch first."""
    if layout:
        m0 = onnx.ModelProto()
        m0.CopyFrom(m)
        m0.graph.node[0].attribute.remove(
            next(a for a in m0.graph.node[0].attribute if a.name == "layout")
        )
        for i in m0.graph.input:
            if i.name in ("X", "initial_h", "initial_c"):
                d = i.type.tensor_type.shape.dim
                d[0].dim_value, d[1].dim_value = d[1].dim_value, d[0].dim_value
        swap = [
            np.ascontiguousarray(v.swapaxes(0, 1))
            if i.name in ("X", "initial_h", "initial_c")
            else v
            for i, v in zip(m.graph.input, values)
        ]
        y, *states = _run_ort(m0, swap)
        return [y.transpose(2, 0, 1, 3)] + [s.swapaxes(0, 1) for s in states]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(m.graph.input, values)}
    return sess.run(None, feeds)


def _load(m):
    """dlpc.load of the model saved in a fresh temporary file."""
    import tempfile

    d = tempfile.mkdtemp(prefix="dlpc_rnn_")
    path = f"{d}/model.onnx"
    onnx.save(m, path)
    return dlpc.load(path)


def _run(m, values, target):
    out = dlpc.compile(_load(m), target=target)(*values)
    return out if isinstance(out, list | tuple) else [out]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-layout{c[2]}-{len(c[3])}")
def test_matches_onnxruntime(case):
    op, direction, layout, extra, attrs = case
    m, values = _case(op, direction, layout, extra, attrs)
    want = _run_ort(m, values, layout)
    got = _run(m, values, "numpy")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_zero_length_entry_matches_onnxruntime(op, direction):
    """A batch entry of sequence length 0: zeros in Y, and its final states are 0 (not
    the initial states), as onnxruntime gives."""
    extra = ("sequence_lens", "initial_h") + (("initial_c",) if op == "LSTM" else ())
    m, values = _case(op, direction, 0, extra, lens=(0, 2))
    for g, w in zip(_run(m, values, "numpy"), _run_ort(m, values)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.fixture
def looped(monkeypatch):
    """Sequences longer than 2 steps as a graph.loop (the form of long sequences)."""
    from dlpc.frontends.onnx_ops import recurrent

    monkeypatch.setattr(recurrent, "UNROLL_MAX", 2)


@pytest.mark.parametrize("case", CASES[:3] + CASES[5:8], ids=lambda c: f"{c[0]}-{c[1]}")
def test_looped_matches_onnxruntime(case, looped):
    op, direction, layout, extra, attrs = case
    m, values = _case(op, direction, layout, extra, attrs)
    assert "graph.loop" in str(_load(m).ir)
    for g, w in zip(_run(m, values, "numpy"), _run_ort(m, values, layout)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["c", "dlp", "opencl"])
def test_looped_backends(target, looped):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    m, values = _case("LSTM", "bidirectional", 0, ("sequence_lens", "initial_h"), seed=2)
    for g, w in zip(_run(m, values, target), _run_ort(m, values)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_looped_lstm_gradient_matches_the_unrolled_one(monkeypatch):
    """The graph.loop form differentiates (the loop's replay) to the unrolled form's
    gradients, which match torch's (below)."""
    from dlpc.frontends.onnx_ops import recurrent

    w, r, b, head = _weights()
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((B, T, I)), rng.standard_normal((B, 1))
    loss, grads = _grads(w, r, b, head, x, y)
    monkeypatch.setattr(recurrent, "UNROLL_MAX", 2)
    loss2, grads2 = _grads(w, r, b, head, x, y)
    assert loss2 == pytest.approx(loss, rel=1e-12)
    for name in ("W", "R", "B", "head"):
        np.testing.assert_allclose(grads2[name], grads[name], rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("op,target", [("LSTM", "c"), ("GRU", "c"), ("LSTM", "dlp")])
def test_backends(op, target):
    m, values = _case(op, "bidirectional", 0, ("sequence_lens", "initial_h"), seed=1)
    want = _run_ort(m, values)
    for g, w in zip(_run(m, values, target), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_opencl():
    pytest.importorskip("pyopencl")
    m, values = _case("RNN", "reverse", 0, ())
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    values[0] = values[0][:2]
    want = _run_ort(m, values)
    for g, w in zip(_run(m, values, "opencl"), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_unsupported_activation_is_one_line():
    m, values = _case("RNN", attrs={"activations": ["Gelu"]})
    with pytest.raises(DlpcError, match=r"^.*error: activation 'Gelu' is not supported$"):
        _load(m)


# ------------------------------------------------------------------ gradients and training


def _lstm_regressor(w, r, b, head, dtype=TensorProto.DOUBLE, op="LSTM", lbr=0):
    """X [B, T, I] (layout 1) -> LSTM (weights as initializers, trainable params) -> the
    last hidden state [B, 1, H] -> reshape [B, H] -> @ head [H, 1] -> [B, 1]."""
    np_t = np.float64 if dtype == TensorProto.DOUBLE else np.float32
    inits = [
        helper.make_tensor(n, dtype, v.shape, v.astype(np_t).reshape(-1).tolist())
        for n, v in (("W", w), ("R", r), ("B", b), ("head", head))
    ]
    inits.append(helper.make_tensor("shape", TensorProto.INT64, [2], [B, H]))
    nodes = [
        helper.make_node(
            op,
            ["X", "W", "R", "B"],
            ["", "h"],
            hidden_size=H,
            layout=1,
            **({"linear_before_reset": lbr} if op == "GRU" else {}),
        ),
        helper.make_node("Reshape", ["h", "shape"], ["h2"]),
        helper.make_node("MatMul", ["h2", "head"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "lstm_reg",
        [helper.make_tensor_value_info("X", dtype, [B, T, I])],
        [helper.make_tensor_value_info("y", dtype, [B, 1])],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    return m


def _weights(seed=3):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((1, 4 * H, I)) * 0.5,
        rng.standard_normal((1, 4 * H, H)) * 0.5,
        rng.standard_normal((1, 8 * H)) * 0.5,
        rng.standard_normal((H, 1)) * 0.5,
    )


def _grads(w, r, b, head, x, y):
    m = _load(_lstm_regressor(w, r, b, head))
    trainer = dlpc.train.Trainer(
        m, "mse", SGD(lr=1e-3), batch_size=B, target="numpy", return_grads=True
    )
    loss = trainer.step(x, y)
    return loss, trainer.grads


def test_lstm_gradient_matches_finite_differences_and_torch():
    torch = pytest.importorskip("torch")
    w, r, b, head = _weights()
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((B, T, I)), rng.standard_normal((B, 1))
    loss, grads = _grads(w, r, b, head, x, y)
    assert set(grads) >= {"W", "R", "B", "head"}

    # torch.nn.LSTM with the same weights: ONNX's gate order i, o, f, c; torch's i, f, g, o
    def reorder(a):
        i, o, f, c = np.split(a, 4, axis=0)
        return np.concatenate([i, f, c, o], axis=0)

    lstm = torch.nn.LSTM(I, H, batch_first=True).double()
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(reorder(w[0])))
        lstm.weight_hh_l0.copy_(torch.from_numpy(reorder(r[0])))
        lstm.bias_ih_l0.copy_(torch.from_numpy(reorder(b[0, : 4 * H])))
        lstm.bias_hh_l0.copy_(torch.from_numpy(reorder(b[0, 4 * H :])))
    th = torch.from_numpy(head).requires_grad_()
    _, (hn, _) = lstm(torch.from_numpy(x))
    t_loss = torch.nn.functional.mse_loss(hn[0] @ th, torch.from_numpy(y))
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-10)
    np.testing.assert_allclose(grads["head"], th.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        grads["W"][0], reorder_back(lstm.weight_ih_l0.grad.numpy()), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        grads["R"][0], reorder_back(lstm.weight_hh_l0.grad.numpy()), rtol=1e-9, atol=1e-12
    )
    # the two biases get the same gradient (they are added)
    bias_grad = reorder_back(lstm.bias_ih_l0.grad.numpy())
    np.testing.assert_allclose(grads["B"][0, : 4 * H], bias_grad, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads["B"][0, 4 * H :], bias_grad, rtol=1e-9, atol=1e-12)

    # central finite differences of the loss (the forward on numpy) on a few entries
    def loss_at(w2, r2, b2):
        fwd = dlpc.compile(_load(_lstm_regressor(w2, r2, b2, head)), target="numpy")
        return float(np.mean((np.asarray(fwd(x)) - y) ** 2))

    eps = 1e-6
    for name, arr, k in (("W", w, (0, 5, 1)), ("R", r, (0, 13, 2)), ("B", b, (0, 30))):
        up, down = arr.copy(), arr.copy()
        up[k] += eps
        down[k] -= eps
        args_up = [up if n == name else v for n, v in (("W", w), ("R", r), ("B", b))]
        args_down = [down if n == name else v for n, v in (("W", w), ("R", r), ("B", b))]
        fd = (loss_at(*args_up) - loss_at(*args_down)) / (2 * eps)
        assert grads[name][k] == pytest.approx(fd, rel=1e-5, abs=1e-9), name


def reorder_back(a):
    """torch's gate order i, f, g, o -> ONNX's i, o, f, c."""
    i, f, g, o = np.split(a, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def test_gru_gradient_matches_torch():
    """ONNX GRU with linear_before_reset=1 is torch.nn.GRU (gates z, r, h against torch's
    r, z, n): loss and every weight's gradient agree in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    w, r = rng.standard_normal((1, 3 * H, I)) * 0.5, rng.standard_normal((1, 3 * H, H)) * 0.5
    b, head = rng.standard_normal((1, 6 * H)) * 0.5, rng.standard_normal((H, 1)) * 0.5
    x, y = rng.standard_normal((B, T, I)), rng.standard_normal((B, 1))
    m = _load(_lstm_regressor(w, r, b, head, op="GRU", lbr=1))
    trainer = dlpc.train.Trainer(
        m, "mse", SGD(lr=1e-3), batch_size=B, target="numpy", return_grads=True
    )
    loss = trainer.step(x, y)

    def to_torch(a):  # z, r, h -> r, z, n
        z, rr, h = np.split(a, 3, axis=0)
        return np.concatenate([rr, z, h], axis=0)

    gru = torch.nn.GRU(I, H, batch_first=True).double()
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(to_torch(w[0])))
        gru.weight_hh_l0.copy_(torch.from_numpy(to_torch(r[0])))
        gru.bias_ih_l0.copy_(torch.from_numpy(to_torch(b[0, : 3 * H])))
        gru.bias_hh_l0.copy_(torch.from_numpy(to_torch(b[0, 3 * H :])))
    th = torch.from_numpy(head).requires_grad_()
    _, hn = gru(torch.from_numpy(x))
    t_loss = torch.nn.functional.mse_loss(hn[0] @ th, torch.from_numpy(y))
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-10)
    grads = trainer.grads
    for name, tg in (("W", gru.weight_ih_l0.grad), ("R", gru.weight_hh_l0.grad)):
        np.testing.assert_allclose(
            to_torch(grads[name][0]), tg.numpy(), rtol=1e-9, atol=1e-12, err_msg=name
        )
    np.testing.assert_allclose(
        to_torch(grads["B"][0, : 3 * H]), gru.bias_ih_l0.grad.numpy(), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        to_torch(grads["B"][0, 3 * H :]), gru.bias_hh_l0.grad.numpy(), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(grads["head"], th.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lstm_trains():
    """An LSTM regressor learns the sum of its sequence (float32, Adam, on C): the loss of
    the last steps is well under the first step's."""
    w, r, b, head = (v.astype(np.float32) for v in _weights(seed=5))
    m = _load(_lstm_regressor(w, r, b, head, dtype=TensorProto.FLOAT))
    trainer = dlpc.train.Trainer(m, "mse", "adam", batch_size=B, target="c")
    trainer.lr = 0.05
    rng = np.random.default_rng(6)
    losses = []
    for _ in range(60):
        x = rng.standard_normal((B, T, I)).astype(np.float32) * 0.5
        y = x.sum(axis=(1, 2)).reshape(B, 1).astype(np.float32) * 0.3
        losses.append(trainer.step(x, y))
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < 0.3 * np.mean(losses[:5]), losses


def test_dynamic_sequence_length_is_specialised_per_length(tmp_path):
    """An exported dynamic axis on X: the unrolled layer cannot stay symbolic, so the
    model falls back to one program per call shape (model.specialiser says why)."""
    rng = np.random.default_rng(8)
    w, r = (rng.standard_normal(s).astype(np.float32) for s in ((1, 4 * H, I), (1, 4 * H, H)))
    inits = [
        helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.reshape(-1))
        for n, v in (("W", w), ("R", r))
    ]
    g = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=H)],
        "dyn",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["seq", "batch", I])],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    model = _load(m)
    assert "sequence length seq must be static" in model.specialiser.symbolic_error
    f = dlpc.compile(model, target="numpy")
    for t, b in ((2, 1), (5, 3)):
        x = rng.standard_normal((t, b, I)).astype(np.float32)
        (got,) = f(x)
        np.testing.assert_allclose(got, sess.run(None, {"X": x})[0], rtol=1e-5, atol=1e-6)
    assert f.stats["programs"] == 2
