"""Integer element types (int8, int16, uint8, uint16, uint32, uint64) through
`dlpc.load` + `dlpc.compile` on numpy and C, with ONNX's semantics: arithmetic wraps
around, Div truncates toward zero (C's `/`), Mod takes the divisor's sign (fmod = 0) or
the dividend's (fmod = 1), comparisons and Max/Min order unsigned values as unsigned, Cast
between them wraps, bit operations and BitShift (an amount < 0 or >= the width gives the
sign fill alone, as opset 28 defines it). One ONNX model per type holds every op (one C build each); the
expected values are computed here with Python integers, and onnxruntime's are checked
against the same where its CPU provider has the kernels."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

TYPES = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]
CASTS = ["int8", "uint8", "int32", "uint64", "float32"]


def _inputs(dtype: str):
    """a, b of shape (3, 4) with the type's extremes; b has no zero."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    a = [lo, hi, lo + 1, hi - 1, 0, 1, 7, -7 if lo < 0 else 9, 100, hi // 3, lo // 3, 5]
    b = [-1 if lo < 0 else 3, 2, -2 if lo < 0 else 5, hi, 3, lo if lo < 0 else hi, 2, 3]
    b += [-3 if lo < 0 else 7, 7, 5, 1]
    a = np.array(a, dtype=object)
    a[:] = [min(max(int(v), lo), hi) for v in a]
    a = np.array(list(a), dtype=dtype).reshape(3, 4)
    b = np.array(b, dtype=dtype).reshape(3, 4)
    return a, b


def _model(dtype: str):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [
        helper.make_node("Add", ["a", "b"], ["add"]),
        helper.make_node("Sub", ["a", "b"], ["sub"]),
        helper.make_node("Mul", ["a", "b"], ["mul"]),
        helper.make_node("Div", ["a", "b"], ["div"]),
        helper.make_node("Mod", ["a", "b"], ["mod"], fmod=0),
        helper.make_node("Mod", ["a", "b"], ["fmod"], fmod=1),
        helper.make_node("Max", ["a", "b"], ["max"]),
        helper.make_node("Min", ["a", "b"], ["min"]),
        helper.make_node("Less", ["a", "b"], ["less"]),
        helper.make_node("Greater", ["a", "b"], ["greater"]),
        helper.make_node("Equal", ["a", "b"], ["equal"]),
        helper.make_node("BitwiseAnd", ["a", "b"], ["and"]),
        helper.make_node("BitwiseOr", ["a", "b"], ["or"]),
        helper.make_node("BitwiseXor", ["a", "b"], ["xor"]),
        helper.make_node("BitwiseNot", ["a"], ["not"]),
        helper.make_node("BitShift", ["a", "b"], ["shl"], direction="LEFT"),
        helper.make_node("BitShift", ["a", "b"], ["shr"], direction="RIGHT"),
    ]
    nodes += [
        helper.make_node(
            "Cast", ["a"], [f"to_{t}"], to=helper.np_dtype_to_tensor_dtype(np.dtype(t))
        )
        for t in CASTS
    ]
    outs = [n.output[0] for n in nodes]
    types = {"less": onnx.TensorProto.BOOL, "greater": onnx.TensorProto.BOOL}
    types["equal"] = onnx.TensorProto.BOOL
    types.update({f"to_{t}": helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in CASTS})
    graph = helper.make_graph(
        nodes,
        f"int_{dtype}",
        [helper.make_tensor_value_info(n, elem, [3, 4]) for n in ("a", "b")],
        [helper.make_tensor_value_info(o, types.get(o, elem), [3, 4]) for o in outs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _shift(x: int, n: int, bits: int, left: bool) -> int:
    """ONNX BitShift on Python ints: an amount < 0 or >= the width leaves the sign fill."""
    if not 0 <= n < bits:
        return -1 if x < 0 and not left else 0
    return x << n if left else x >> n


def _expected(dtype: str, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """ONNX's results with Python integers, wrapped to the type."""
    bits = np.iinfo(dtype).bits
    signed = np.iinfo(dtype).min < 0

    def wrap(values):
        out = []
        for v in values:
            v %= 2**bits
            out.append(v - 2**bits if signed and v >= 2 ** (bits - 1) else v)
        return np.array(out, dtype=dtype).reshape(a.shape)

    pa, pb = [int(v) for v in a.reshape(-1)], [int(v) for v in b.reshape(-1)]

    def trunc_div(x, y):
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    return {
        "add": wrap(x + y for x, y in zip(pa, pb)),
        "sub": wrap(x - y for x, y in zip(pa, pb)),
        "mul": wrap(x * y for x, y in zip(pa, pb)),
        "div": wrap(trunc_div(x, y) for x, y in zip(pa, pb)),
        "mod": wrap(x % y for x, y in zip(pa, pb)),  # Python's %: the divisor's sign
        "fmod": wrap(x - trunc_div(x, y) * y for x, y in zip(pa, pb)),  # C's %
        "max": np.maximum(a, b),
        "min": np.minimum(a, b),
        "less": a < b,
        "greater": a > b,
        "equal": a == b,
        **{f"to_{t}": a.astype(t) for t in CASTS},
        "and": a & b,
        "or": a | b,
        "xor": a ^ b,
        "not": ~a,
        "shl": wrap(_shift(x, y, bits, True) for x, y in zip(pa, pb)),
        "shr": wrap(_shift(x, y, bits, False) for x, y in zip(pa, pb)),
    }


@pytest.fixture(scope="module", params=TYPES)
def case(request, tmp_path_factory):
    dtype = request.param
    model = _model(dtype)
    path = tmp_path_factory.mktemp("int") / f"{dtype}.onnx"
    path.write_bytes(model.SerializeToString())
    a, b = _inputs(dtype)
    return dtype, model, path, a, b


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_integer_ops_follow_onnx(case, target):
    dtype, model, path, a, b = case
    want = _expected(dtype, a, b)
    got = dlpc.compile(dlpc.load(str(path)), target=target)(a, b)
    names = [o.name for o in model.graph.output]
    assert len(got) == len(names)
    for name, g in zip(names, got):
        w = want[name]
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"{dtype} {name} on {target}")


@pytest.mark.parametrize("dtype", ["int16", "uint64"])
def test_integer_ops_on_opencl(dtype, tmp_path):
    """The same model on OpenCL (two types: the kernels are the C ones, printed for
    OpenCL C, whose int16_t ... uint64_t are the prelude's typedefs)."""
    pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    model = _model(dtype)
    path = tmp_path / f"{dtype}.onnx"
    path.write_bytes(model.SerializeToString())
    a, b = _inputs(dtype)
    want = _expected(dtype, a, b)
    got = dlpc.compile(dlpc.load(str(path)), target="opencl")(a, b)
    for out, g in zip(model.graph.output, got):
        assert g.dtype == want[out.name].dtype, out.name
        np.testing.assert_array_equal(g, want[out.name], err_msg=f"{dtype} {out.name}")


def test_expected_values_match_onnxruntime(case):
    """The hand-computed ONNX semantics are onnxruntime's, op by op where it has the
    kernel (its CPU provider lacks some, e.g. Div on int8)."""
    dtype, model, _, a, b = case
    want = _expected(dtype, a, b)
    checked = 0
    for node in model.graph.node:
        out = node.output[0]
        if out == "fmod" and dtype == "uint64":
            continue  # (onnxruntime's fmod of 64-bit integers goes through double)
        if out in ("shl", "shr") and dtype in ("int8", "int16"):
            continue  # (BitShift on signed types is opset 28's, which onnxruntime lacks)
        single = helper.make_model(
            helper.make_graph(
                [node],
                "one",
                list(model.graph.input),
                [o for o in model.graph.output if o.name == out],
            ),
            opset_imports=[helper.make_opsetid("", 18)],
            ir_version=8,
        )
        try:
            sess = ort.InferenceSession(
                single.SerializeToString(), providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - no kernel for this type
            continue
        (got,) = sess.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(got, want[out], err_msg=f"{dtype} {out}")
        checked += 1
    assert checked >= 5, f"onnxruntime ran only {checked} of the {dtype} ops"


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_max_pool_on_uint8(tmp_path, target):
    """MaxPool over uint8: its padding, and the reduction's start, is the type's minimum
    (0), not -inf or the signed minimum."""
    x = np.arange(36, dtype=np.uint8).reshape(1, 1, 6, 6)[:, :, ::-1].copy()
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", onnx.TensorProto.UINT8, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.UINT8, [1, 1, 6, 6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    (want,) = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, {"x": x})
    path = tmp_path / "pool.onnx"
    path.write_bytes(model.SerializeToString())
    got = dlpc.compile(dlpc.load(str(path)), target=target)(x)
    assert got[0].dtype == np.uint8
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
def test_bitcast_rereads_the_bits(tmp_path, target):
    """BitCast between types of one width: f32 -> i32, f64 -> i64, i8 -> u8, u16 -> i16."""
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    pairs = [("float32", "int32"), ("float64", "int64"), ("int8", "uint8"), ("uint16", "int16")]
    xs = [
        np.array([1.0, -2.5, np.inf, 0.0], np.float32),
        np.array([1.0, -0.0, 3.25, np.nan], np.float64),
        np.array([-128, -1, 0, 127], np.int8),
        np.array([0, 1, 32768, 65535], np.uint16),
    ]
    nodes, ins, outs = [], [], []
    for k, (src, dst) in enumerate(pairs):
        t = helper.np_dtype_to_tensor_dtype
        nodes.append(helper.make_node("BitCast", [f"x{k}"], [f"y{k}"], to=t(np.dtype(dst))))
        ins.append(helper.make_tensor_value_info(f"x{k}", t(np.dtype(src)), [4]))
        outs.append(helper.make_tensor_value_info(f"y{k}", t(np.dtype(dst)), [4]))
    model = helper.make_model(
        helper.make_graph(nodes, "bitcast", ins, outs),
        opset_imports=[helper.make_opsetid("", 26)],
        ir_version=10,
    )
    path = tmp_path / "bitcast.onnx"
    path.write_bytes(model.SerializeToString())
    got = dlpc.compile(dlpc.load(str(path)), target=target)(*xs)
    for (_, dst), x, g in zip(pairs, xs, got):
        assert g.dtype == np.dtype(dst)
        np.testing.assert_array_equal(g, x.view(dst))
