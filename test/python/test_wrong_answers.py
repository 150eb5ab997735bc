"""Wrong answers with exit code 0: each test here failed to exist when a bug of its kind
was planted in the landed code and went unnoticed (issue 18). Every expected value comes
from an oracle that is not dlpc: torch, onnxruntime, or numpy written out in the test;
never dlpc's reference of the IR its own frontend produced.

Compiled at -O0 and -O2 (-O3 where the graph rewrites differ) on the numpy and C backends.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dlpc
from dlpc.frontends.text import parse_model

F = torch.nn.functional
TARGETS = ["numpy", "c"]


def run(src: str, *inputs: np.ndarray, target: str = "c", level: int = 2, weights=None):
    model = parse_model(src, weights=weights)
    return dlpc.compile(model, target, opt_level=level)(*inputs)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol, atol)


# ---------------------------------------------- literals folded by the text frontend

LITERALS = [
    ("x * (3.0 - 1.0)", lambda x: x * 2.0),
    ("x * (1.0 - 3.0)", lambda x: x * -2.0),
    ("x * (8.0 / 2.0)", lambda x: x * 4.0),
    ("x + (2 - 5) * 2.0", lambda x: x - 6.0),
    ("(10.0 - 4.0) / x", lambda x: 6.0 / x),
    ("x - (1.0 - 0.25)", lambda x: x - 0.75),
    ("(1.5 - 0.5) - x", lambda x: 1.0 - x),
    ("x * -(2.0 - 3.0)", lambda x: x * 1.0),
    ("leaky_relu(x, alpha=1.0 - 0.75)", lambda x: np.where(x > 0, x, 0.25 * x)),
    ("clip(x, min=0.5 - 1.0, max=3.0 / 4.0)", lambda x: np.clip(x, -0.5, 0.75)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr, oracle", LITERALS, ids=[e for e, _ in LITERALS])
def test_literal_arithmetic_in_the_text_frontend(expr, oracle, target):
    """`x * (3.0 - 1.0)` is 2x, with the operands of each literal op in source order."""
    x = rand(3, 4)
    x[x == 0] = 1.0
    (y,) = run(f"model m(x: f32[3, 4]) {{\n  return {expr}\n}}\n", x, target=target, level=0)
    close(y, oracle(x.astype(np.float64)))


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_operands_keep_their_order(target):
    x, y = rand(2, 5), rand(2, 5, seed=1) + 3.0
    src = "model m(x: f32[2, 5], y: f32[2, 5]) {\n  return x - y, y / x, 2.0 - x, x / 4.0\n}\n"
    got = run(src, x, y, target=target, level=0)
    tx, ty = torch.tensor(x), torch.tensor(y)
    for g, w in zip(got, [tx - ty, ty / tx, 2.0 - tx, tx / 4.0]):
        close(g, w.numpy())


# ------------------------------------------- a constant on the left of sub/div at -O2


CONST_LEFT = [
    ("1.0 / x", lambda t: 1.0 / t),
    ("0.0 - x", lambda t: -t),
    ("1.0 - x", lambda t: 1.0 - t),
    ("2.0 / x", lambda t: 2.0 / t),
    ("x / 1.0", lambda t: t),
    ("x - 0.0", lambda t: t),
    ("0.0 + x * 1.0", lambda t: t),
    ("1.0 / (1.0 / x)", lambda t: 1.0 / (1.0 / t)),
    ("0.0 - (0.0 - x)", lambda t: t),
    ("(x - x) - x", lambda t: -t),
]


@pytest.mark.parametrize("level", range(4))
@pytest.mark.parametrize("expr, oracle", CONST_LEFT, ids=[e for e, _ in CONST_LEFT])
def test_constant_on_the_left_through_the_graph_rewrites(expr, oracle, level):
    x = rand(4, 6) + 0.1
    (y,) = run(f"model m(x: f32[4, 6]) {{\n  return {expr}\n}}\n", x, level=level)
    close(y, oracle(torch.tensor(x)).numpy())


def _onnx(nodes, inputs, outputs, inits=()):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    g = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), onnx


def _vi(name, shape):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _onnx_check(tmp_path, proto, feeds: dict, levels=(0, 2, 3), targets=("numpy", "c")):
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    model = dlpc.load(path)
    for target in targets:
        for level in levels:
            got = dlpc.compile(model, target, opt_level=level)(*feeds.values())
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, 1e-5, 1e-5, err_msg=f"{target} -O{level}")


def test_onnx_reciprocal_and_constant_minus(tmp_path):
    """ONNX Reciprocal imports as div(1, x) and Sub(0, x) keeps the 0 on the left: at -O2
    neither may become x."""
    from onnx import helper

    nodes = [
        helper.make_node("Reciprocal", ["x"], ["r"]),
        helper.make_node("Sub", ["zero", "x"], ["n"]),
        helper.make_node("Div", ["one", "x"], ["d"]),
    ]
    zero, one = np.zeros((1,), np.float32), np.ones((1,), np.float32)
    proto, _ = _onnx(
        nodes,
        [_vi("x", [3, 4])],
        [_vi("r", [3, 4]), _vi("n", [3, 4]), _vi("d", [3, 4])],
        [("zero", zero), ("one", one)],
    )
    _onnx_check(tmp_path, proto, {"x": rand(3, 4) + 0.2})


# ------------------------------------------------- batch norm after a rank-3 linear


@pytest.mark.parametrize("level", range(4))
def test_batch_norm_after_rank3_linear(level):
    """batch_norm normalises axis 1 (here the 4 rows of each sample), not the linear's
    features (also 4): folding it into the weights would scale the wrong axis."""
    rng = np.random.default_rng(3)
    weights = {
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "b": rng.standard_normal(4).astype(np.float32),
        "g": rng.uniform(0.5, 2.0, 4).astype(np.float32),
        "beta": rng.standard_normal(4).astype(np.float32),
        "mean": rng.standard_normal(4).astype(np.float32),
        "var": rng.uniform(0.5, 2.0, 4).astype(np.float32),
    }
    src = """model m(x: f32[2, 4, 3]) {
  param w: f32[4, 3]
  param b: f32[4]
  param g: f32[4]
  param beta: f32[4]
  param mean: f32[4]
  param var: f32[4]
  return batch_norm(linear(x, w, b), g, beta, mean, var, epsilon=0.001)
}
"""
    x = rand(2, 4, 3, seed=4)
    t = {k: torch.tensor(v) for k, v in weights.items()}
    h = F.linear(torch.tensor(x), t["w"], t["b"])
    want = F.batch_norm(h, t["mean"], t["var"], t["g"], t["beta"], training=False, eps=1e-3)
    for target in TARGETS:
        (y,) = run(src, x, target=target, level=level, weights=weights)
        close(y, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", [0, 2])
def test_batch_norm_after_rank2_linear_still_folds(level):
    """The rank-2 case (features on axis 1) is folded, and right."""
    rng = np.random.default_rng(5)
    weights = {
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "g": rng.uniform(0.5, 2.0, 4).astype(np.float32),
        "beta": rng.standard_normal(4).astype(np.float32),
        "mean": rng.standard_normal(4).astype(np.float32),
        "var": rng.uniform(0.5, 2.0, 4).astype(np.float32),
    }
    src = """model m(x: f32[5, 3]) {
  param w: f32[4, 3]
  param g: f32[4]
  param beta: f32[4]
  param mean: f32[4]
  param var: f32[4]
  return batch_norm(linear(x, w), g, beta, mean, var)
}
"""
    x = rand(5, 3, seed=6)
    t = {k: torch.tensor(v) for k, v in weights.items()}
    want = F.batch_norm(
        F.linear(torch.tensor(x), t["w"]), t["mean"], t["var"], t["g"], t["beta"], False
    )
    (y,) = run(src, x, level=level, weights=weights)
    close(y, want.numpy())
    lowered = dlpc.compile(parse_model(src, weights=weights), "numpy", opt_level=level).lowered
    assert ("graph.batch_norm" in str(lowered)) == (level == 0)  # folded at -O2


# ----------------------------------------------------- NaN through max, relu, pooling


def _nan_inputs():
    x, y = rand(2, 8), rand(2, 8, seed=1)
    x[0, 0], y[0, 1], x[1, 3], y[1, 3] = np.nan, np.nan, np.nan, np.nan
    x[1, 5], y[1, 6] = np.inf, -np.inf
    return x, y


NAN_SRC = """model m(x: f32[2, 8], y: f32[2, 8]) {
  return relu(x), max(x, y), min(x, y), max_pool2d(reshape(x, shape=[1, 1, 4, 4]), kernel=2, stride=2), reduce_max(x, axes=[1]), reduce_min(y, axes=[1]), clip(x, min=-0.5, max=0.5)
}
"""


def _nan_oracle(x, y):
    tx, ty = torch.tensor(x), torch.tensor(y)
    return [
        torch.relu(tx),
        torch.maximum(tx, ty),
        torch.minimum(tx, ty),
        F.max_pool2d(tx.reshape(1, 1, 4, 4), 2, 2),
        tx.amax(dim=1),
        ty.amin(dim=1),
        torch.clamp(tx, -0.5, 0.5),
    ]


@pytest.mark.parametrize("level", [0, 2, 3])
@pytest.mark.parametrize("target", TARGETS)
def test_nan_propagates_like_torch(target, level):
    """NaN through relu/max/min/max-pool/reduce_max/clip stays NaN (torch), never 0."""
    x, y = _nan_inputs()
    got = run(NAN_SRC, x, y, target=target, level=level)
    for k, (g, w) in enumerate(zip(got, _nan_oracle(x, y))):
        w = w.numpy()
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"output {k}")
        np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)], err_msg=f"output {k}")


# ------------------------------------------------ padded 1-D conv and pool from ONNX


@pytest.mark.parametrize("pads", [[1, 2], [2, 0], [0, 1]])
def test_onnx_padded_1d_conv_and_pools(tmp_path, pads):
    """Asymmetric pads of a 1-D (N, C, W) conv/pool land on W, begin then end."""
    from onnx import helper

    w = rand(4, 2, 3, seed=7)
    b = rand(4, seed=8)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads, strides=[1]),
        helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[3], pads=pads, strides=[2]),
        helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[3], pads=pads),
        helper.make_node(
            "AveragePool", ["x"], ["api"], kernel_shape=[3], pads=pads, count_include_pad=1
        ),
    ]
    width = 9
    out = {
        "c": width + sum(pads) - 2,
        "mp": (width + sum(pads) - 3) // 2 + 1,
        "ap": width + sum(pads) - 2,
        "api": width + sum(pads) - 2,
    }
    proto, _ = _onnx(
        nodes,
        [_vi("x", [1, 2, width])],
        [_vi("c", [1, 4, out["c"]])] + [_vi(k, [1, 2, out[k]]) for k in ("mp", "ap", "api")],
        [("w", w), ("b", b)],
    )
    x = rand(1, 2, width, seed=9)
    x[0, 0, 0] = -5.0  # a max-pool window with a pad must not see 0 as its max
    _onnx_check(tmp_path, proto, {"x": x})


def test_onnx_padded_1d_conv_transpose(tmp_path):
    from onnx import helper

    w = rand(2, 3, 3, seed=10)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], pads=[1, 0], strides=[2])]
    proto, _ = _onnx(nodes, [_vi("x", [1, 2, 5])], [_vi("y", [1, 3, 10])], [("w", w)])
    _onnx_check(tmp_path, proto, {"x": rand(1, 2, 5, seed=11)}, levels=(0, 2))


# ------------------------------------------------------------ graph-to-te lowering


@pytest.mark.parametrize("c", ["1.0", "2.0", "3", "4.0", "2.5"])
def test_lowering_binary_ops_with_a_small_constant(c):
    """pow by a constant 1..4 lowers to products; no other binary op may (a mutant that
    took `x - 2.0` for a power survived the lowering tests)."""
    x = rand(3, 5) + 0.5
    src = (
        f"model m(x: f32[3, 5]) {{\n  return x - {c}, x / {c}, max(x, {c}), min(x, {c}), "
        f"pow(x, {c}), x + {c}, x * {c}, prelu(x, {c})\n}}\n"
    )
    got = run(src, x, level=0)
    t, k = torch.tensor(x), float(c)
    want = [t - k, t / k, torch.clamp(t, min=k), torch.clamp(t, max=k), torch.pow(t, k)]
    want += [t + k, t * k, torch.where(t > 0, t, t * k)]
    for g, w in zip(got, want):
        close(g, w.numpy())


@pytest.mark.parametrize("target", TARGETS)
def test_avg_pool_ceil_mode_counts_padding_like_torch(target):
    """count_include_pad with ceil_mode: a last window that hangs over the padded input
    counts only up to the padding's edge (torch)."""
    x = rand(1, 2, 6, 6, seed=12)
    src = (
        "model m(x: f32[1, 2, 6, 6]) {\n  return avg_pool2d(x, kernel_size=3, stride=2, "
        "padding=1, ceil_mode=true, count_include_pad=true)\n}\n"
    )
    (y,) = run(src, x, target=target, level=0)
    want = F.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True, count_include_pad=True)
    close(y, want.numpy())


@pytest.mark.parametrize("scale_shape", [(3, 1, 1), (1, 3, 1, 1), (5, 5), (1, 3, 5, 5), (5, 1)])
def test_conv_of_a_scaled_input(scale_shape):
    """conv2d(x * c, w) folds c into w only for one scale per input channel; a scale that
    varies over the image stays on the input (graph-substitute conv-input-scale)."""
    rng = np.random.default_rng(13)
    weights = {
        "w": rng.standard_normal((2, 3, 3, 3)).astype(np.float32),
        "c": rng.uniform(0.5, 2.0, scale_shape).astype(np.float32),
    }
    dims = ", ".join(map(str, scale_shape))
    src = (
        "model m(x: f32[1, 3, 5, 5]) {\n  param w: f32[2, 3, 3, 3]\n"
        f"  param c: f32[{dims}]\n  return conv2d(x * c, w, padding=1)\n}}\n"
    )
    x = rand(1, 3, 5, 5, seed=14)
    tx = torch.tensor(x) * torch.tensor(weights["c"])
    want = F.conv2d(tx, torch.tensor(weights["w"]), padding=1)
    for level in (0, 2):
        (y,) = run(src, x, level=level, weights=weights)
        close(y, want.numpy(), rtol=1e-4, atol=1e-5)


# ------------------------------ integer min/max reductions start at the type's bounds


@pytest.mark.parametrize("target", ["numpy", "c", "opencl", "dlp"])
@pytest.mark.parametrize("dtype", ["i8", "i32", "i64"])
@pytest.mark.parametrize("op", ["reduce_min", "reduce_max"])
def test_integer_min_max_reductions_are_exact(target, dtype, op):
    """The init of an int64 min was 2**63 - 1 as a double, i.e. 2**63, which wrapped to
    INT64_MIN in C: every reduce_min over int64 returned INT64_MIN."""
    if target == "opencl":
        pytest.importorskip("pyopencl")
    np_type = {"i8": np.int8, "i32": np.int32, "i64": np.int64}[dtype]
    info = np.iinfo(np_type)
    x = np.array(
        [[5, 9, 13], [info.max, info.max - 1, info.max], [info.min, info.min + 1, 0]], np_type
    )
    src = f"model m(x: {dtype}[3, 3]) {{\n  return {op}(x, axes=[1])\n}}\n"
    (got,) = run(src, x, target=target)
    got = np.asarray(got)
    want = (np.min if op == "reduce_min" else np.max)(x, axis=1)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
