"""ONNX If / Loop / Scan imported onto graph.if / graph.loop (frontends/onnx_ops/control.py):
onnx's own backend test cases, and a TorchScript model with a data-dependent if and a
while loop against onnxruntime, on the numpy and C backends."""

import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError

onnx = pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import onnx_conformance as oc  # noqa: E402

TARGETS = ["numpy", "c"]


def case(name):
    return next(c for c in oc.collect() if c.name == name)


def run(model, inputs, target):
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "m.onnx")
        onnx.save(model, path)
        out = dlpc.compile(dlpc.load(path), target=target)(*inputs)
    return list(out) if isinstance(out, list | tuple) else [out]


@pytest.mark.parametrize("target", TARGETS)
def test_conformance_if(target):
    """test_if: the condition is a graph input, so the import keeps a graph.if."""
    assert oc.run_case(case("test_if"), target).status == "pass"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["test_scan9_sum", "test_scan9_scalar", "test_scan9_multi_state"])
def test_conformance_scan(name, target):
    """Scan-9 cases; their body nodes (Add at opset 9) are older than the importer's opset
    policy accepts, so the model is converted to opset 13 first (same semantics)."""
    from onnx import version_converter

    c = case(name)
    got = run(version_converter.convert_version(c.model, 13), c.inputs, target)
    for g_, e in zip(got, c.outputs, strict=True):
        np.testing.assert_allclose(g_, e, rtol=oc.RTOL, atol=oc.ATOL)


def test_loop_with_a_runtime_slice_is_one_line():
    """test_loop11's body slices at the loop index (a run-time offset): refused, naming
    the node, not a traceback."""
    from onnx import version_converter

    c = case("test_loop11")
    with pytest.raises(DlpcError, match=r"Slice.*computed at run time"):
        run(version_converter.convert_version(c.model, 13), c.inputs, "numpy")


def _loop_model():
    """Loop with M = 4, a captured weight (a param moved out of the body), a carried
    state and a scan output, at opset 13."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(
        (np.random.default_rng(0).standard_normal((8, 8)) * 0.3).astype(np.float32), "w"
    )
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["x_in", "w"], ["xw"]),
            helper.make_node("Tanh", ["xw"], ["x_out"]),
            helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2, 8]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
        ],
    )
    m = helper.make_tensor("M", TensorProto.INT64, [], [4])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y", "sums"], body=body)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("sums", TensorProto.FLOAT, [4]),
        ],
        initializer=[w, m],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("target", TARGETS)
def test_loop_scan_output_and_captured_weight(target):
    ort = pytest.importorskip("onnxruntime")
    model = _loop_model()
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    for g_, w_ in zip(run(model, [x], target), want, strict=True):
        np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_torchscript_if_and_while_against_onnxruntime(target):
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:
                x = torch.tanh(self.fc(x))
            else:
                x = x * 2.0
            k = 0
            while bool(x.abs().sum() < 40.0) and k < 6:
                x = torch.relu(self.fc(x)) + x * 1.5
                k += 1
            return x

    torch.manual_seed(0)
    scripted = torch.jit.script(Model().eval())
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = str(Path(d) / "m.onnx")
        torch.onnx.export(scripted, (torch.randn(2, 4),), path, opset_version=17, dynamo=False)
        ops = {n.op_type for n in onnx.load(path).graph.node}
        assert {"If", "Loop"} <= ops
        compiled = dlpc.compile(dlpc.load(path), target=target)
        session = ort.InferenceSession(path)
        name = session.get_inputs()[0].name
        for sign in (1.0, -1.0):  # each branch of the if; the loop stops on its condition
            x = (np.abs(np.random.default_rng(1).standard_normal((2, 4))) * sign).astype(np.float32)
            (want,) = session.run(None, {name: x})
            got = compiled(x)
            got = got[0] if isinstance(got, list | tuple) else got
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _runtime_m_model():
    """Loop whose trip count M is a graph input: x = x * 1.5 + i, while sum(x) < 100."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k"], value_float=1.5),
            helper.make_node("Mul", ["x_in", "k"], ["xk"]),
            helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["xk", "fi"], ["x_out"]),
            helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
            helper.make_node("Constant", [], ["limit"], value_float=100.0),
            helper.make_node("Less", ["s", "limit"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [3]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)],
        "g",
        [
            helper.make_tensor_value_info("m", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("target", TARGETS)
def test_loop_trip_count_from_an_input_is_one_program(target):
    """A run-time M is carried (cond and i < M), not specialised on: one compiled program
    serves M = 0, 1, 3, 20 (the last stopped by the condition), as onnxruntime runs them."""
    ort = pytest.importorskip("onnxruntime")
    model = _runtime_m_model()
    session = ort.InferenceSession(model.SerializeToString())
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "m.onnx")
        onnx.save(model, path)
        loaded = dlpc.load(path)
        assert loaded.specialiser is None and loaded.ir is not None
        compiled = dlpc.compile(loaded, target=target)
    x = np.array([0.5, -1.0, 2.0], np.float32)
    for m in (0, 1, 3, 20):
        (want,) = session.run(None, {"m": np.array(m, np.int64), "x": x})
        got = compiled(np.array(m, np.int64), x)
        got = got[0] if isinstance(got, list | tuple) else got
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
