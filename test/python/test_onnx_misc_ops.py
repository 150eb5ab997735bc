"""The last node-suite operators onnxruntime runs (issue 34), on cases the node suite does
not try, through `dlpc.load` + `dlpc.compile` against onnxruntime: TfIdfVectorizer (IDF and
TFIDF with weights, 1- to 3-grams with skips, int32 batches; onnx_ops/text.py), MaxUnpool
(pads, duplicate indices, output_shape; vision.py) and Upsample (opset 7's attribute form,
linear, fractional nearest; resize.py), SplitToSequence (a list output beside a tensor,
split sizes from a graph input: specialised per value; sequence.py) and MelWeightMatrix
(specialised on its inputs; spectral.py); and their one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

F, I32, L = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def _save(tmp_path, nodes, inputs, outputs, opset, inits=(), name="m"):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _ort(path, feeds: dict):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            _same(g, w)
            continue
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _tfidf(out, x, mode, lo, hi, skip, weights=None):
    extra = {} if weights is None else {"weights": weights}
    return helper.make_node(
        "TfIdfVectorizer",
        [x],
        [out],
        mode=mode,
        min_gram_length=lo,
        max_gram_length=hi,
        max_skip_count=skip,
        # unigrams 1 2 3 5 4, bigrams (2 3) (3 5) (5 5), trigram (1 2 3)
        pool_int64s=[1, 2, 3, 5, 4, 2, 3, 3, 5, 5, 5, 1, 2, 3],
        ngram_counts=[0, 5, 11],
        ngram_indexes=[0, 1, 2, 3, 4, 5, 6, 7, 8],
        **extra,
    )


@pytest.mark.parametrize("target", ["numpy", "c", "dlp"])
def test_tfidf_vectorizer_matches_onnxruntime(tmp_path, target):
    w = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    nodes = [
        _tfidf("idf", "a", "IDF", 1, 3, 1, w),
        _tfidf("tfidf", "b", "TFIDF", 1, 3, 2, w),
        _tfidf("tf", "b", "TF", 2, 3, 1),
        _tfidf("idf1", "a", "IDF", 1, 1, 0),  # (no weights: 0 / 1)
    ]
    ins = [
        helper.make_tensor_value_info("a", L, [9]),
        helper.make_tensor_value_info("b", I32, [2, 8]),
    ]
    outs = [helper.make_tensor_value_info(n, F, None) for n in ("idf", "tfidf", "tf", "idf1")]
    path = _save(tmp_path, nodes, ins, outs, 9)
    a = np.array([1, 2, 3, 5, 5, 1, 7, 2, 3], np.int64)
    b = np.array([[1, 2, 3, 3, 5, 5, 2, 3], [5, 1, 5, 2, 5, 3, 1, 1]], np.int32)
    got = dlpc.compile(dlpc.load(str(path)), target=target)(a, b)
    _same(got, _ort(path, {"a": a, "b": b}))


def _unpool(tmp_path):
    nodes = [
        helper.make_node(
            "MaxUnpool", ["x", "i"], ["u"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0]
        ),
        helper.make_node(
            "MaxUnpool", ["x", "i", "osh"], ["u2"], kernel_shape=[2, 2], strides=[2, 2]
        ),
    ]
    inits = [helper.make_tensor("osh", L, [4], [1, 2, 6, 7])]
    ins = [
        helper.make_tensor_value_info("x", F, [1, 2, 3, 3]),
        helper.make_tensor_value_info("i", L, [1, 2, 3, 3]),
    ]
    outs = [helper.make_tensor_value_info(n, F, None) for n in ("u", "u2")]
    return _save(tmp_path, nodes, ins, outs, 13, inits)


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
def test_maxunpool_matches_onnxruntime(tmp_path, target):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    path = _unpool(tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype(np.float32)
    # offsets into the whole (1, 2, 4, 4) output, plane 1's into its own plane; one
    # duplicate (the later input wins, as in onnxruntime)
    i = np.array(
        [[[[0, 2, 3], [5, 7, 7], [12, 13, 15]], [[16, 18, 19], [21, 22, 23], [28, 30, 31]]]]
    )
    got = dlpc.compile(dlpc.load(str(path)), target=target)(x, i)
    _same(got, _ort(path, {"x": x, "i": i}))


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_upsample_matches_onnxruntime(tmp_path, target):
    """Upsample-9 (scales an input: linear, fractional nearest) and Upsample-7 (scales an
    attribute)."""
    nodes = [
        helper.make_node("Upsample", ["y", "sc"], ["up_lin"], mode="linear"),
        helper.make_node("Upsample", ["y", "sc2"], ["up_near"], mode="nearest"),
    ]
    inits = [
        helper.make_tensor("sc", F, [4], [1, 1, 2, 3]),
        helper.make_tensor("sc2", F, [4], [1, 2, 1.5, 2.5]),
    ]
    ins = [helper.make_tensor_value_info("y", F, [1, 2, 3, 2])]
    outs = [helper.make_tensor_value_info(n, F, None) for n in ("up_lin", "up_near")]
    path = _save(tmp_path, nodes, ins, outs, 9, inits)
    y = np.random.default_rng(2).standard_normal((1, 2, 3, 2)).astype(np.float32)
    _same(dlpc.compile(dlpc.load(str(path)), target=target)(y), _ort(path, {"y": y}))
    node = helper.make_node("Upsample", ["y"], ["z"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])
    out = [helper.make_tensor_value_info("z", F, None)]
    path = _save(tmp_path, [node], ins, out, 7, name="v7")
    _same(dlpc.compile(dlpc.load(str(path)), target=target)(y), _ort(path, {"y": y}))


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_split_to_sequence_returns_lists_like_onnxruntime(tmp_path, target):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("SplitToSequence", ["x", "four"], ["s"], axis=-1),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["t"], axis=0),
        helper.make_node("SplitToSequence", ["x"], ["u"], axis=0, keepdims=0),
    ]
    ins = [
        helper.make_tensor_value_info("x", F, [3, 10]),
        helper.make_tensor_value_info("sizes", L, [2]),
    ]
    outs = [helper.make_tensor_value_info("r", F, None)] + [
        helper.make_tensor_sequence_value_info(n, F, None) for n in ("s", "t", "u")
    ]
    inits = [helper.make_tensor("four", L, [], [4])]
    path = _save(tmp_path, nodes, ins, outs, 13, inits)
    f = dlpc.compile(dlpc.load(str(path)), target=target)
    x = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
    for sizes in ([1, 2], [2, 1], [1, 2]):  # (a build per value of 'sizes')
        sz = np.array(sizes, np.int64)
        got = f(x, sz)
        assert [a.shape for a in got[1]] == [(3, 4), (3, 4), (3, 2)]
        _same(got, _ort(path, {"x": x, "sizes": sz}))
    assert len(f.specialisations) == 2


def test_mel_weight_matrix_is_specialised_on_its_inputs(tmp_path):
    names = ["bins", "dft", "rate", "lo", "hi"]
    types = [L, L, L, F, F]
    ins = [helper.make_tensor_value_info(n, t, []) for n, t in zip(names, types)]
    node = helper.make_node("MelWeightMatrix", names, ["m"])
    path = _save(tmp_path, [node], ins, [helper.make_tensor_value_info("m", F, None)], 17)
    f = dlpc.compile(dlpc.load(str(path)), target="numpy")
    for vals in ((8, 32, 16000, 0.0, 8000.0), (5, 20, 8000, 100.0, 3000.0)):
        feeds = {
            n: np.array(v, np.int64 if t == L else np.float32)
            for n, v, t in zip(names, vals, types)
        }
        _same(f(*feeds.values()), _ort(path, feeds))
    assert len(f.specialisations) == 2


def _refusal(tmp_path, nodes, ins, opset=13, inits=()):
    out = [helper.make_tensor_value_info(nodes[-1].output[0], F, None)]
    path = _save(tmp_path, nodes, ins, out, opset, inits)
    with pytest.raises(DlpcError) as info:
        dlpc.compile(dlpc.load(str(path)), target="numpy")
    text = str(info.value)
    assert "\n" not in text
    return text


def test_refusals_are_one_line_naming_the_operator(tmp_path):
    x = [helper.make_tensor_value_info("x", F, [2, 4])]
    text = _refusal(
        tmp_path,
        [
            helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1),
        ],
        x,
    )
    assert "(ConcatFromSequence -> 'y'): error: input 's' is a sequence" in text
    text = _refusal(
        tmp_path,
        [
            helper.make_node(
                "TfIdfVectorizer",
                ["x"],
                ["y"],
                mode="TF",
                min_gram_length=1,
                max_gram_length=1,
                max_skip_count=0,
                pool_strings=["a", "b"],
                ngram_counts=[0],
                ngram_indexes=[0, 1],
            )
        ],
        x,
        9,
    )
    assert "(TfIdfVectorizer -> 'y'): error: a string pool" in text
    big = [
        helper.make_tensor_value_info("x", F, [1, 8, 64, 64]),
        helper.make_tensor_value_info("i", L, [1, 8, 64, 64]),
    ]
    text = _refusal(
        tmp_path,
        [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        big,
    )
    assert "(MaxUnpool -> 'y'): error: MaxUnpool of 32768 elements into 131072" in text
    text = _refusal(
        tmp_path,
        [helper.make_node("Upsample", ["x", "sc"], ["y"])],
        x,
        9,
        [helper.make_tensor("sc", F, [2], [1.0, 0.5])],
    )
    assert "(Upsample -> 'y'): error: 'scales' [1.0, 0.5] must be at least 1" in text
