"""CumSum / CumProd (exclusive, reverse, a middle axis, float32 and int32), Hardmax (ties go
to the first maximum) and EyeLike (k, dtype) imported from ONNX and run through
`dlpc.load` + `dlpc.compile` on numpy and C against onnxruntime, all in one model (one C
build)."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

F, I = TensorProto.FLOAT, TensorProto.INT32


def _model():
    nodes, outs = [], []

    def out(name, elem, shape):
        outs.append(helper.make_tensor_value_info(name, elem, shape))

    k = 0
    for op in ("CumSum", "CumProd"):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                for x, elem in (("xf", F), ("xi", I)):
                    name = f"{op}_{x}_{exclusive}{reverse}"
                    axis = "ax1" if k % 2 else "ax_last"
                    nodes.append(
                        helper.make_node(
                            op, [x, axis], [name], exclusive=exclusive, reverse=reverse
                        )
                    )
                    out(name, elem, [2, 5, 3])
                    k += 1
    for axis in (-1, 0, 1):
        nodes.append(helper.make_node("Hardmax", ["h"], [f"hardmax_{axis}"], axis=axis))
        out(f"hardmax_{axis}", F, [3, 4, 4])
    nodes.append(helper.make_node("EyeLike", ["e"], ["eye"], k=1))
    out("eye", F, [3, 5])
    nodes.append(helper.make_node("EyeLike", ["e"], ["eye_int"], k=-2, dtype=TensorProto.INT32))
    out("eye_int", I, [3, 5])
    axes = [
        helper.make_tensor("ax1", TensorProto.INT64, [], [1]),
        helper.make_tensor("ax_last", TensorProto.INT64, [], [-1]),
    ]
    graph = helper.make_graph(
        nodes,
        "scan",
        [
            helper.make_tensor_value_info("xf", F, [2, 5, 3]),
            helper.make_tensor_value_info("xi", I, [2, 5, 3]),
            helper.make_tensor_value_info("h", F, [3, 4, 4]),
            helper.make_tensor_value_info("e", F, [3, 5]),
        ],
        outs,
        initializer=axes,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)


def _inputs():
    rng = np.random.default_rng(3)
    xf = rng.uniform(0.5, 1.5, (2, 5, 3)).astype(np.float32) * rng.choice([-1, 1], (2, 5, 3))
    xi = rng.integers(-4, 5, (2, 5, 3)).astype(np.int32)
    h = rng.integers(0, 3, (3, 4, 4)).astype(np.float32)  # many ties
    e = np.zeros((3, 5), np.float32)
    return [xf.astype(np.float32), xi, h, e]


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    model = _model()
    path = tmp_path_factory.mktemp("scan") / "scan.onnx"
    path.write_bytes(model.SerializeToString())
    xs = _inputs()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = dict(zip(("xf", "xi", "h", "e"), xs))
    return path, xs, [o.name for o in model.graph.output], sess.run(None, feeds)


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_cumulative_hardmax_eyelike_match_onnxruntime(case, target):
    path, xs, names, want = case
    got = dlpc.compile(dlpc.load(str(path)), target=target)(*xs)
    assert len(got) == len(want)
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=name)


def test_cumsum_axis_given_at_run_time_is_specialised(tmp_path):
    """A run-time axis is specialised per value (the model compiles once the value is
    seen): two axes give two results."""
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    graph = helper.make_graph(
        [node],
        "cumsum",
        [
            helper.make_tensor_value_info("x", F, [2, 3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", F, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    path = tmp_path / "cumsum.onnx"
    path.write_bytes(model.SerializeToString())
    f = dlpc.compile(dlpc.load(str(path)), target="numpy")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x, np.array(0))[0], np.cumsum(x, 0))
    np.testing.assert_array_equal(f(x, np.array(1))[0], np.cumsum(x, 1))
