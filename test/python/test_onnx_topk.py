"""ONNX TopK on long axes (frontends/onnx_ops/indexing.py): past RANK_TOPK_MAX elements the
k elements are selected one at a time instead of ranked by an n x n comparison; both forms
against onnxruntime (no NaN) and against a stable sort with NaN as +inf (the order dlpc
documents), on numpy and C; the refusal of a long axis with a large k."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.frontends.onnx_ops.indexing import RANK_TOPK_MAX, SELECT_TOPK_MAX

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _save(tmp_path, shape, k, elem, axis, largest):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    g = helper.make_graph(
        [node],
        "topk",
        [helper.make_tensor_value_info("x", elem, shape)],
        [
            helper.make_tensor_value_info("v", elem, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None),
        ],
        initializer=[helper.make_tensor("k", TensorProto.INT64, [1], [k])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "topk.onnx"
    onnx.save(m, str(path))
    return str(path)


def _sorted(x, k, axis, largest):
    """The first k of a stable sort along axis, a NaN ranked as +inf."""
    key = np.where(np.isnan(x), np.inf, x) if x.dtype.kind == "f" else x.astype(np.float64)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


def _run(path, x, target):
    return dlpc.compile(dlpc.load(path), target=target)(x)


@pytest.mark.parametrize("largest", [1, 0])
def test_long_axis_is_selected_as_onnxruntime_does(tmp_path, largest):
    rng = np.random.default_rng(largest)
    n = RANK_TOPK_MAX + 977
    x = rng.integers(-40, 40, (2, n)).astype(np.float32)  # many ties
    x[0, 5] = np.inf
    x[1, 9] = -np.inf
    path = _save(tmp_path, list(x.shape), 7, TensorProto.FLOAT, 1, largest)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for target in ("numpy", "c"):
        v, i = _run(path, x, target)
        np.testing.assert_array_equal(v, want[0], err_msg=target)
        np.testing.assert_array_equal(i, want[1], err_msg=target)


@pytest.mark.parametrize(("n", "largest"), [(9, 1), (9, 0), (RANK_TOPK_MAX + 5, 1)])
def test_nan_ranks_as_inf_in_both_forms(tmp_path, n, largest):
    """A NaN is one element of rank as +inf (the rank count gave it and the element after
    it the same rank once, so output slot 0 summed two elements)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    x[0, 2] = np.nan
    x[1, [1, 4]] = [np.inf, np.nan]
    x[2, 3] = x[2, 6]
    path = _save(tmp_path, list(x.shape), 4, TensorProto.FLOAT, 1, largest)
    want_v, want_i = _sorted(x, 4, 1, largest)
    for target in ("numpy", "c"):
        v, i = _run(path, x, target)
        np.testing.assert_array_equal(i, want_i, err_msg=target)
        np.testing.assert_array_equal(v, want_v, err_msg=target)


def test_long_axis_of_integers_along_a_middle_axis(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 5, (2, RANK_TOPK_MAX + 100, 3)).astype(np.int32)
    x[0, 7, 1] = np.iinfo(np.int32).min  # equal to the marker of a taken element
    path = _save(tmp_path, list(x.shape), 3, TensorProto.INT32, 1, 0)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for target in ("numpy", "c"):
        v, i = _run(path, x, target)
        np.testing.assert_array_equal(v, want[0], err_msg=target)
        np.testing.assert_array_equal(i, want[1], err_msg=target)


def test_all_equal_to_the_marker_are_each_taken_once(tmp_path):
    x = np.full((1, RANK_TOPK_MAX + 3), -np.inf, np.float32)
    path = _save(tmp_path, list(x.shape), 3, TensorProto.FLOAT, 1, 1)
    v, i = _run(path, x, "numpy")
    np.testing.assert_array_equal(i, [[0, 1, 2]])
    np.testing.assert_array_equal(v, x[:, :3])


def test_long_axis_with_a_large_k_is_one_line(tmp_path):
    n, k = RANK_TOPK_MAX + 1, SELECT_TOPK_MAX + 1
    path = _save(tmp_path, [2, n], k, TensorProto.FLOAT, 1, 1)
    with pytest.raises(DlpcError) as err:
        dlpc.load(path)
    text = str(err.value)
    assert "\n" not in text and "(TopK" in text
    assert text.endswith(
        f"error: k = {k} over an axis of {n} elements: dlpc's TopK takes an axis of at "
        f"most {RANK_TOPK_MAX} elements or k <= {SELECT_TOPK_MAX}"
    )
