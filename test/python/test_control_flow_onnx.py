"""ONNX If / Loop / Scan imported onto graph.if / graph.loop (frontends/onnx_ops/control.py):
onnx's own backend test cases, and a TorchScript model with a data-dependent if and a
while loop against onnxruntime, on the numpy and C backends."""

import re
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


# every If / Loop / Scan case onnxruntime runs (test_loop11 and test_scan9_* have bodies at
# opset 11 / 9, test_scan_sum is Scan-8 with its batch axis)
PASSING = [
    "test_if",
    "test_if_seq",
    "test_if_opt",
    "test_loop11",
    "test_scan9_sum",
    "test_scan9_scalar",
    "test_scan9_multi_state",
    "test_scan_sum",
]
# the rest (onnxruntime cannot be fed them either): one line naming the operator
REFUSED = {
    "test_loop13_seq": r"'seq_empty' is not a tensor but a sequence \(read by Loop;",
    "test_loop16_seq_none": r"'opt_seq' is not a tensor but an optional \(read by Loop;",
}


def test_every_case_is_listed():
    names = {c.name for op in ("If", "Loop", "Scan") for c in oc.by_operator()[op]}
    assert names == set(PASSING) | set(REFUSED)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", PASSING)
def test_conformance_case(name, target):
    """onnx's own If / Loop / Scan cases, as the model files are (no conversion)."""
    result = oc.run_case(case(name), target)
    assert result.status == "pass", result.detail


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_conformance_refusal_is_one_line(name):
    result = oc.run_case(case(name), "numpy")
    assert result.status == "error" and "\n" not in result.detail, result.detail
    assert re.search(REFUSED[name], result.detail), result.detail


def test_if_of_an_optional_chooses_its_branch_at_import():
    """test_if_opt: a branch yields an optional (no tensor form), so the If's condition,
    a graph input, is specialised on; cond = true picks the empty optional: one line."""
    c = case("test_if_opt")
    with tempfile.TemporaryDirectory() as d:
        model = dlpc.load(_save(c.model, d))
        with pytest.raises(DlpcError, match=r"\(Optional -> 'optional_empty'\): error: an empty"):
            model.specialiser.build({"cond": np.array(True)})


def _save(model, d):
    path = str(Path(d) / "m.onnx")
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, opset=13):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _vi(name, shape, elem=None):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, elem or TensorProto.FLOAT, shape)


def _slice_loop(start_from_i=True, cond_from_body=False, opset=11):
    """test_loop11's form: y += x[i:i+1] (or x[i:i+2] read at a start not tied to the
    end), a scan output of y, trip count and cond graph inputs."""
    from onnx import TensorProto, helper

    x = helper.make_tensor("x", TensorProto.FLOAT, [6], [1, 2, 3, 4, 5, 6])
    body_nodes = [
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", 7, [], [1])),
        helper.make_node("Add", ["i", "one"], ["end"]),
        helper.make_node("Unsqueeze", ["i" if start_from_i else "one"], ["s"], axes=[0]),
        helper.make_node("Unsqueeze", ["end"], ["e"], axes=[0]),
        helper.make_node("Slice", ["x", "s", "e"], ["piece"]),
        helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
        helper.make_node("Identity", ["y_out"], ["scan"]),
    ]
    if cond_from_body:
        body_nodes += [
            helper.make_node("Constant", [], ["lim"], value_float=6.0),
            helper.make_node("ReduceSum", ["y_out"], ["tot"], keepdims=0),
            helper.make_node("Less", ["tot", "lim"], ["cond_out"]),
        ]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [1])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [1]), _vi("scan", [1])],
        initializer=[x],
    )
    return _model(
        [helper.make_node("Loop", ["m", "c", "y"], ["y_final", "ys"], body=body)],
        [_vi("m", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("y", [1])],
        [_vi("y_final", [1]), _vi("ys", None)],
        opset,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_loop_slice_at_the_iteration_and_cond_input(target):
    """Slice at a run-time offset (graph.dynamic_slice) in an opset-11 body; the scan
    output has as many rows as iterations run: M, or none when cond starts false (the
    model is specialised on M and cond, both graph inputs), as onnxruntime gives."""
    ort = pytest.importorskip("onnxruntime")
    model = _slice_loop()
    session = ort.InferenceSession(model.SerializeToString())
    with tempfile.TemporaryDirectory() as d:
        compiled = dlpc.compile(dlpc.load(_save(model, d)), target=target)
    y = np.array([-2.0], np.float32)
    for m, c in ((5, True), (2, True), (4, False)):
        feeds = [np.array(m, np.int64), np.array(c), y]
        want = session.run(None, dict(zip(("m", "c", "y"), feeds)))
        got = compiled(*feeds)
        assert [g_.shape for g_ in got] == [w_.shape for w_ in want], (m, c)
        for g_, w_ in zip(got, want, strict=True):
            np.testing.assert_allclose(g_, w_, rtol=1e-6)


def test_loop_refusals_are_one_line():
    """A scan output after a condition the body computes (its row count is known only at
    run time), and a Slice whose size ends - starts is not known at import time."""
    with tempfile.TemporaryDirectory() as d:
        feeds = {"m": np.array(3, np.int64), "c": np.array(True), "y": np.zeros(1, np.float32)}
        for model, message in (
            (_slice_loop(cond_from_body=True), r"Loop with scan outputs whose condition may end"),
            (_slice_loop(start_from_i=False), r"Slice.*'ends' must be known at import time"),
        ):
            with pytest.raises(DlpcError, match=message) as e:
                dlpc.load(_save(model, d)).specialiser.build(feeds)
            assert "\n" not in str(e.value)


def test_scan8_sequence_lens_and_older_opsets():
    """Scan-8 with a sequence_lens below the scan length is refused in one line; an older
    node whose meaning differs (Softmax-11 over a leading axis flattens to 2-D) names the
    operator and opset; Softmax-11 over the last axis and Unsqueeze-11's axes attribute
    import as at opset 13."""
    from onnx import TensorProto, helper

    c = case("test_scan_sum")
    g_ = onnx.GraphProto()
    g_.CopyFrom(c.model.graph)
    g_.node[0].input[0] = "lens"
    g_.initializer.append(helper.make_tensor("lens", TensorProto.INT64, [1], [2]))
    model = helper.make_model(g_, opset_imports=[helper.make_opsetid("", 8)], ir_version=8)
    with tempfile.TemporaryDirectory() as d:
        with pytest.raises(DlpcError, match=r"Scan-8 with sequence_lens \[2\] shorter"):
            dlpc.load(_save(model, d))
        x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
        for axis, ok in ((1, True), (-1, True), (0, False)):
            model = _model(
                [
                    helper.make_node("Softmax", ["x"], ["p"], axis=axis),
                    helper.make_node("Unsqueeze", ["p"], ["y"], axes=[0]),
                ],
                [_vi("x", [2, 3])],
                [_vi("y", [1, 2, 3])],
                opset=11,
            )
            if not ok:
                with pytest.raises(DlpcError, match=r"opset 11 is not supported for 'Softmax'"):
                    dlpc.load(_save(model, d))
                continue
            (got,) = run(model, [x], "numpy")
            e = np.exp(x - x.max(1, keepdims=True))
            np.testing.assert_allclose(got, (e / e.sum(1, keepdims=True))[None], rtol=1e-5)


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


def _legacy_cases():
    """(name, opset, nodes, inputs, output shape) of older-opset nodes the opset policy
    accepts, each checked against onnxruntime at its own opset."""
    from onnx import helper

    n = helper.make_node
    return [
        ("squeeze-11", 11, [n("Squeeze", ["x"], ["y"], axes=[1])], [(3, 1, 4)], [3, 4]),
        ("reducesum-11", 11, [n("ReduceSum", ["x"], ["y"], axes=[-1], keepdims=0)], [(3, 4)], [3]),
        ("split-11", 11, [n("Split", ["x"], ["y", "z"], axis=1, split=[1, 3])], [(2, 4)], [2, 1]),
        (
            "slice-1",
            9,
            [n("Slice", ["x"], ["y"], starts=[1], ends=[3], axes=[1])],
            [(2, 4)],
            [2, 2],
        ),
        ("pad-2", 10, [n("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], value=1.5)], [(2, 3)], [2, 6]),
        ("clip-6", 10, [n("Clip", ["x"], ["y"], min=-0.5, max=0.25)], [(2, 3)], [2, 3]),
        ("add-7", 8, [n("Add", ["x", "b"], ["y"])], [(2, 3), (3,)], [2, 3]),
        ("concat-4", 10, [n("Concat", ["x", "b"], ["y"], axis=0)], [(2, 3), (1, 3)], [3, 3]),
        ("logsoftmax-11", 12, [n("LogSoftmax", ["x"], ["y"], axis=-1)], [(2, 3)], [2, 3]),
    ]


@pytest.mark.parametrize("name,opset,nodes,shapes,out", _legacy_cases(), ids=lambda v: v)
def test_older_opset_nodes_against_onnxruntime(name, opset, nodes, shapes, out):
    """An older node whose operator means what it means at 13 imports in its opset-13
    form (a moved attribute rewritten as an input): numbers as onnxruntime's."""
    ort = pytest.importorskip("onnxruntime")
    names = ["x", "b"][: len(shapes)]
    outs = [o for o in nodes[0].output]
    model = _model(
        nodes,
        [_vi(k, list(s)) for k, s in zip(names, shapes)],
        [_vi(o, None) for o in outs],
        opset,
    )
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = ort.InferenceSession(model.SerializeToString()).run(None, dict(zip(names, feeds)))
    got = run(model, feeds, "numpy")
    assert list(want[0].shape) == out
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-6)


def test_an_older_operator_of_other_meaning_is_one_line():
    """Resize-10 (Upsample's coordinates, no roi) means something else at 13: refused,
    naming the operator and the opset."""
    from onnx import helper

    model = _model(
        [helper.make_node("Resize", ["x", "s"], ["y"])],
        [_vi("x", [1, 1, 2, 2]), _vi("s", [4])],
        [_vi("y", None)],
        10,
    )
    with tempfile.TemporaryDirectory() as d, pytest.raises(DlpcError) as e:
        dlpc.load(_save(model, d))
    assert "opset 10 is not supported for this operator" in str(e.value)
    assert "'Resize' changed at opset 13" in str(e.value) and "\n" not in str(e.value)
