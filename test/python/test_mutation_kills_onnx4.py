"""The ONNX importer's decisions, fourth round (issue 35, bench/mutation.py --area onnx):
the decisions onnx seed 44 and 45 left untested, each imported on the input that tells
the right decision from its neighbour, against onnxruntime or the importer's diagnostic."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle here")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dlpc.diagnostics import DlpcError  # noqa: E402
from dlpc.frontends.onnx import load_model  # noqa: E402
from dlpc.reference.graph import run_reference  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, feeds, inits=(), opset=19, infer=True, ir_version=8):
    """A model of `nodes` over graph inputs `feeds` and initializers `inits` (name ->
    array) with one output y, typed by onnx's shape inference when `infer`."""
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in feeds.items()
    ]
    g = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in dict(inits).items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    return onnx.shape_inference.infer_shapes(m, strict_mode=False) if infer else m


def check(proto, feeds, atol=1e-5):
    """dlpc's import on the numpy reference gives onnxruntime's outputs."""
    m = load_model(proto)
    got = run_reference(m.module, list(feeds.values()), m.weights)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        g_ = np.asarray(g_)
        assert g_.shape == w.shape and g_.dtype == w.dtype, (g_.shape, g_.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=atol)


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


# ------------------------------------------------------------------ seed 44's six


def test_scan_without_state_variables_keeps_every_scan_output():
    """Scan with no state (N = 0) and no scan_output_axes: its outputs are all scan
    outputs (count = body outputs - N), each stacked along axis 0."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [node("Mul", ["x", "x"], ["sq"]), node("Neg", ["x"], ["ng"])],
        "body",
        [vi("x", F, [3])],
        [vi("sq", F, [3]), vi("ng", F, [3])],
    )
    scan = node("Scan", ["xs"], ["y", "z"], body=body, num_scan_inputs=1)
    g = helper.make_graph(
        [scan], "g", [vi("xs", F, [4, 3])], [vi("y", F, [4, 3]), vi("z", F, [4, 3])]
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=8)
    xs = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    check(proto, {"xs": xs})


@pytest.mark.parametrize("axes", [[1, 2, 3], None], ids=["axes-1-2-3", "rank-3"])
def test_crop_and_resize_roi_over_three_axes(axes):
    """tf_crop_and_resize's roi over 3 axes: starts are roi[k], ends roi[3 + k] (with
    2 or 4 axes, 2 + k and 4 + k equal 2 | k and 4 | k, the cases tested before)."""
    x = np.random.default_rng(44).standard_normal((2, 3, 4, 5)).astype(np.float32)
    roi = np.array([0.0, 0.2, 0.1, 1.0, 0.9, 0.7], np.float32)
    sizes = np.array([2, 3, 4], np.int64)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    if axes is None:  # a rank-3 input, all its axes
        x = x[0]
    else:
        attrs["axes"] = axes
        sizes = np.array([2, 3, 3, 4], np.int64)[1:]
    inits = {"roi": roi, "scales": np.array([], np.float32), "sizes": sizes}
    proto = model([node("Resize", ["x", "roi", "scales", "sizes"], **attrs)], {"x": x}, inits)
    check(proto, {"x": x}, atol=1e-5)


@pytest.mark.parametrize("axis,ok", [(-2, True), (-3, False)])
def test_an_axis_of_minus_rank_is_the_first_and_one_less_is_refused(axis, ok):
    """ArgMax over rank 2: axis -2 is axis 0; -3 is one past the range, refused in one
    line (not wrapped to axis 1)."""
    x = np.array([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0]], np.float32)
    proto = model([node("ArgMax", ["x"], axis=axis)], {"x": x}, infer=ok)
    if ok:
        check(proto, {"x": x})
        return
    with pytest.raises(DlpcError) as e:
        load_model(proto)
    assert "attribute 'axis' = -3 is out of range for rank 2" in str(e.value)
    assert "\n" not in str(e.value)


def _bitcast(x, to):
    t = helper.np_dtype_to_tensor_dtype
    g = helper.make_graph(
        [node("BitCast", ["x"], to=t(np.dtype(to)))],
        "g",
        [helper.make_tensor_value_info("x", t(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("y", t(np.dtype(to)), list(x.shape))],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
    m = load_model(proto)
    (got,) = run_reference(m.module, [x], m.weights)
    return np.asarray(got)


@pytest.mark.parametrize(
    "src,to",
    [("bool", "uint8"), ("bool", "int8"), ("float32", "int32"), ("float32", "uint32"),
     ("float64", "int64"), ("int32", "uint32")],
)  # fmt: skip
def test_bitcast_rereads_the_bits_and_bool_is_its_bytes(src, to):
    """BitCast keeps the bits: f32 1.0 -> i32 1065353216 (not 1, a value cast); a bool is
    the byte 0 / 1; int32 -1 -> uint32 4294967295. (onnxruntime has no BitCast yet: the
    oracle is numpy's view.)"""
    if src == "bool":
        x = np.array([True, False, True])
    else:
        x = np.array([1.0, -2.5, 0.0, 3.75, -1.0], src)
    got = _bitcast(x, to)
    assert got.dtype == np.dtype(to)
    np.testing.assert_array_equal(got, x.view(to))


def test_bitcast_from_bool_to_a_wider_type_is_refused():
    with pytest.raises(DlpcError) as e:
        _bitcast(np.array([True, False]), "int32")
    assert "BitCast from bool to int32: the widths must match (not bool)" in str(e.value)


@pytest.mark.parametrize(
    "xs,attrs",
    [((1, 1, 6), {"kernel_shape": [3], "dilations": [2], "pads": [1, 2]}),
     ((1, 2, 5, 4, 3), {"kernel_shape": [3, 2, 2], "pads": [1, 1, 0, 2, 1, 1]})],
    ids=["1d-dilated", "3d"],
)  # fmt: skip
def test_average_pool_by_slices_counts_the_end_pads_with_count_include_pad(xs, attrs):
    """count_include_pad = 1 on the any-rank path (dilated or 3-D): the end pad's cells
    count too, the counted span ends at input + begin + end pads (7 + 2 = 9, where
    7 ^ 2 = 5 would leave the last windows' pad cells out)."""
    x = np.random.default_rng(45).standard_normal(xs).astype(np.float32)
    attrs = {**attrs, "count_include_pad": 1}
    check(model([node("AveragePool", ["x"], **attrs)], {"x": x}), {"x": x})


# ------------------------------------------------------------------ seed 45


def test_a_constant_nodes_tensor_is_read_without_the_reference_evaluator(monkeypatch):
    """A Constant's `value` tensor is read directly (onnx's ReferenceEvaluator, ~17 MB
    of imports, is only for the other attribute forms): with the evaluator broken the
    import still succeeds, and a `value_float` Constant still goes to it."""
    import onnx.reference

    class Broken:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("the reference evaluator was called")

    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", Broken)
    x = np.array([1.0, -2.0], np.float32)
    c = numpy_helper.from_array(np.array([0.5, 4.0], np.float32))
    proto = model([node("Constant", [], ["c"], value=c), node("Add", ["x", "c"])], {"x": x})
    m = load_model(proto)
    (got,) = run_reference(m.module, [x], m.weights)
    np.testing.assert_array_equal(got, [1.5, 2.0])
    other = model([node("Constant", [], ["c"], value_float=0.5), node("Add", ["x", "c"])], {"x": x})
    with pytest.raises(DlpcError, match="cannot evaluate at import time: the reference evaluator"):
        load_model(other)


@pytest.mark.parametrize(
    "dim_param,symbol", [("batch2", "batch2"), ("2batch", "_2batch"), ("n-1 x", "n_1_x")]
)
def test_a_dim_param_becomes_a_symbol_with_no_digit_first(dim_param, symbol):
    g = helper.make_graph(
        [node("Relu", ["x"])],
        "g",
        [helper.make_tensor_value_info("x", F, [dim_param, 3])],
        [helper.make_tensor_value_info("y", F, [dim_param, 3])],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    text = str(load_model(proto).module)
    assert f'tensor<?x3xf32, ["{symbol}"]>' in text, text


def test_an_unsupported_output_after_an_omitted_one_is_refused():
    """BatchNormalization in inference computes Y alone: a running_var output named after
    an omitted running_mean is refused (not only the output right after Y)."""
    x = np.zeros((2, 3), np.float32)
    s = np.ones(3, np.float32)
    bn = node("BatchNormalization", ["x", "s", "s", "s", "s"], ["y", "", "rv"])
    proto = model([bn], {"x": x}, {"s": s}, infer=False)
    with pytest.raises(DlpcError) as e:
        load_model(proto)
    assert "output 2 ('rv') is not supported" in str(e.value) and "\n" not in str(e.value)


def test_cast_like_imports_as_one_cast_and_refuses_an_unknown_attribute():
    """CastLike's handler (not its ONNX function body, which would take any attribute):
    one graph.cast to the second input's type; an attribute it does not know refused."""
    x = np.array([[-3.0, 1.5], [0.2, 2.7]], np.float32)
    t = {"t": np.array([1], np.int64)}
    m = load_model(model([node("CastLike", ["x", "t"])], {"x": x}, t))
    (got,) = run_reference(m.module, [x], m.weights)
    np.testing.assert_array_equal(got, x.astype(np.int64))
    bad = model([node("CastLike", ["x", "t"], foo=1)], {"x": x}, t, infer=False)
    with pytest.raises(DlpcError, match="\\(CastLike -> 'y'\\): error: unsupported attribute 'foo'$"):  # fmt: skip
        load_model(bad)
