"""ONNX models through the public API, as a user runs them: `dlpc.compile(dlpc.load(path),
target=...)(*inputs)` with every graph input, compared with onnxruntime.

- inputs whose values decide shapes (Reshape's `shape`, Slice's bounds, a window's size)
  are specialised at call time, once per distinct value (the compiled model's cache);
- inputs that are data for their op (Clip's bounds, ConvTranspose's weight) stay operands;
- empty graph inputs (an omitted `axes`) are taken and ignored;
- operators added for issue #9: function-body imports (SoftmaxCrossEntropyLoss), ArgMax,
  GatherElements, 3-D convolution and pooling with dilations and MaxPool's Indices.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (dlpc[onnx])")

from onnx import TensorProto, helper  # noqa: E402

import dlpc  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402

TARGETS = ("numpy", "c")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _save(tmp_path, nodes, inputs, outputs, opset=18, inits=()) -> str:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return path


def _onnxruntime(path: str, feeds: list) -> list:
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, feeds)))


def _check(path: str, feeds: list, target: str, compiled=None):
    compiled = compiled or dlpc.compile(dlpc.load(path), target=target)
    got = compiled(*feeds)
    want = _onnxruntime(path, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return compiled


@pytest.mark.parametrize("target", TARGETS)
def test_shape_input_is_specialised_per_value(tmp_path, target):
    path = _save(
        tmp_path,
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [("x", F, [2, 6]), ("shape", I64, [2])],
        [("y", F)],
    )
    model = dlpc.load(path)
    assert model.input_names == ["x", "shape"]
    assert model.specialiser is not None and model.specialiser.shape_inputs == ["shape"]
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    fn = dlpc.compile(model, target=target)
    _check(path, [x, np.array([3, 4])], target, fn)
    _check(path, [x, np.array([4, -1])], target, fn)
    _check(path, [x, np.array([3, 4])], target, fn)  # the first specialisation, reused
    assert len(fn.specialisations) == 2
    assert fn.source  # the newest specialisation's code


def test_shape_dependent_model_has_no_single_graph(tmp_path):
    path = _save(
        tmp_path,
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [("x", F, [2, 6]), ("shape", I64, [2])],
        [("y", F)],
    )
    model = dlpc.load(path)
    with pytest.raises(DlpcError) as e:
        _ = model.module
    assert "'shape'" in str(e.value) and "\n" not in str(e.value)
    fn = dlpc.compile(model, target="numpy")
    with pytest.raises(DlpcError, match=r"takes 2 inputs \(x, shape\) but 1 were given"):
        fn(np.zeros((2, 6), np.float32))
    with pytest.raises(DlpcError, match=r"input 'shape' has dtype int32"):
        fn(np.zeros((2, 6), np.float32), np.array([3, 4], np.int32))


@pytest.mark.parametrize("target", TARGETS)
def test_slice_bounds_computed_from_inputs(tmp_path, target):
    """Slice's starts come from a graph input through an Add: that input is frozen."""
    one = helper.make_tensor("one", I64, [1], [1])
    path = _save(
        tmp_path,
        [
            helper.make_node("Add", ["s", "one"], ["s1"]),
            helper.make_node("Slice", ["x", "s1", "e", "axes"], ["y"]),
        ],
        [("x", F, [4, 5]), ("s", I64, [1]), ("e", I64, [1]), ("axes", I64, [1])],
        [("y", F)],
        inits=[one],
    )
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    fn = _check(path, [x, np.array([0]), np.array([4]), np.array([1])], target)
    _check(path, [x, np.array([1]), np.array([3]), np.array([0])], target, fn)
    assert sorted(fn.model.specialiser.shape_inputs) == ["axes", "e", "s"]


@pytest.mark.parametrize("target", TARGETS)
def test_empty_optional_input_is_taken(tmp_path, target):
    """ReduceSum with an empty `axes` graph input: the call passes both inputs."""
    path = _save(
        tmp_path,
        [helper.make_node("ReduceSum", ["data", "axes"], ["y"], keepdims=1)],
        [("data", F, [3, 2, 2]), ("axes", I64, [0])],
        [("y", F)],
        opset=13,
    )
    x = np.random.default_rng(1).standard_normal((3, 2, 2)).astype(np.float32)
    fn = _check(path, [x, np.zeros(0, np.int64)], target)
    assert fn.source and len(fn.specialisations) == 1  # one graph, built at compile
    with pytest.raises(DlpcError, match=r"takes 2 inputs \(data, axes\) but 1 were given"):
        fn(x)


@pytest.mark.parametrize("target", TARGETS)
def test_clip_bounds_are_operands(tmp_path, target):
    path = _save(
        tmp_path,
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [("x", F, [3, 4]), ("lo", F, []), ("hi", F, [])],
        [("y", F)],
    )
    model = dlpc.load(path)
    assert model.specialiser is None  # no value decides a shape: one graph
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    fn = _check(path, [x, np.array(-0.5, np.float32), np.array(0.25, np.float32)], target)
    _check(path, [x, np.array(-1.0, np.float32), np.array(1.0, np.float32)], target, fn)


@pytest.mark.parametrize("target", TARGETS)
def test_clip_with_one_element_bounds(tmp_path, target):
    """Bounds of shape (1,) (as some exporters write them) are scalars."""
    lo = helper.make_tensor("lo", F, [1], [0.0])
    hi = helper.make_tensor("hi", F, [1], [6.0])
    path = _save(
        tmp_path,
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [("x", F, [2, 8])],
        [("y", F)],
        inits=[lo, hi],
    )
    x = (np.random.default_rng(3).standard_normal((2, 8)) * 5).astype(np.float32)
    _check(path, [x], target)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose_weight_as_input(tmp_path, target):
    path = _save(
        tmp_path,
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1])],
        [("x", F, [1, 2, 3, 3]), ("w", F, [2, 3, 3, 2])],
        [("y", F)],
    )
    assert dlpc.load(path).specialiser is None
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 2)).astype(np.float32)
    _check(path, [x, w], target)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_3d(tmp_path, target):
    path = _save(
        tmp_path,
        [
            helper.make_node(
                "Conv",
                ["x", "w", "b"],
                ["y"],
                strides=[2, 1, 1],
                pads=[1, 0, 1, 1, 1, 0],
                dilations=[1, 2, 1],
                group=2,
            )
        ],
        [("x", F, [1, 4, 5, 6, 5]), ("w", F, [6, 2, 3, 2, 2]), ("b", F, [6])],
        [("y", F)],
    )
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in ((1, 4, 5, 6, 5), (6, 2, 3, 2, 2))]
    _check(path, [*feeds, rng.standard_normal(6).astype(np.float32)], target)


@pytest.mark.parametrize("target", TARGETS)
def test_max_pool_3d_dilated_with_indices(tmp_path, target):
    path = _save(
        tmp_path,
        [
            helper.make_node(
                "MaxPool",
                ["x"],
                ["y", "i"],
                kernel_shape=[2, 2, 2],
                dilations=[2, 1, 1],
                strides=[1, 2, 1],
                pads=[0, 1, 0, 1, 0, 1],
                ceil_mode=1,
            ),
        ],
        [("x", F, [2, 2, 5, 4, 3])],
        [("y", F), ("i", I64)],
        opset=12,
    )
    x = np.random.default_rng(6).standard_normal((2, 2, 5, 4, 3)).astype(np.float32)
    _check(path, [x], target)


@pytest.mark.parametrize("target", TARGETS)
def test_argmax_and_gather_elements(tmp_path, target):
    path = _save(
        tmp_path,
        [
            helper.make_node("ArgMax", ["x"], ["a"], axis=1, keepdims=0, select_last_index=1),
            helper.make_node("GatherElements", ["x", "idx"], ["g"], axis=1),
        ],
        [("x", F, [3, 4]), ("idx", I64, [3, 2])],
        [("a", I64), ("g", F)],
    )
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 2], [0, -1, 5, 5]], np.float32)
    idx = np.array([[0, -1], [3, 1], [-4, 2]], np.int64)
    _check(path, [x, idx], target)


def test_softmax_cross_entropy_through_its_function_body(tmp_path):
    """SoftmaxCrossEntropyLoss has no handler: it is imported through its ONNX function
    (LogSoftmax, NegativeLogLikelihoodLoss -> GatherElements, ...)."""
    path = _save(
        tmp_path,
        [
            helper.make_node(
                "SoftmaxCrossEntropyLoss",
                ["x", "t", "w"],
                ["loss", "logp"],
                reduction="mean",
                ignore_index=1,
            )
        ],
        [("x", F, [4, 5, 2]), ("t", I64, [4, 2]), ("w", F, [5])],
        [("loss", F), ("logp", F)],
    )
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 5, 2)).astype(np.float32)
    t = rng.integers(0, 5, (4, 2)).astype(np.int64)
    w = rng.random(5).astype(np.float32) + 0.5
    _check(path, [x, t, w], "numpy")


def test_window_size_reaches_range_through_a_cast(tmp_path):
    """HannWindow's integer size is cast to float on its way to Range (its function
    body): the specialisation follows it through the float value."""
    path = _save(
        tmp_path,
        [helper.make_node("HannWindow", ["n"], ["y"])],
        [("n", TensorProto.INT32, [])],
        [("y", F)],
    )
    fn = _check(path, [np.array(10, np.int32)], "numpy")
    _check(path, [np.array(7, np.int32)], "numpy", fn)
    assert fn.model.specialiser.shape_inputs == ["n"]
