"""LpPool, LRN, Col2Im and GridSample (frontends/onnx_ops/vision.py): imported from ONNX and
run through `dlpc.load` + `dlpc.compile` against onnxruntime on inputs the node suite does
not try (grids reaching past the image, every mode x padding x align_corners, odd strides
and dilations, an even LRN size), on numpy with one model per family on C and OpenCL; and
their one-line diagnostics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def _model(node, inputs, output, opset=22):
    g = helper.make_graph(
        [node],
        "vision",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _check(tmp_path, model, feeds, targets=("numpy",), atol=1e-5, oracle="onnxruntime"):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    if oracle == "onnxruntime":
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)[0]
    else:  # the spec's formula, where onnxruntime refuses the case
        want = oracle(*feeds.values())
    for target in targets:
        got = dlpc.compile(dlpc.load(str(path)), target=target)(*feeds.values())
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol, err_msg=target)


GRID_CASES = list(
    itertools.product(("linear", "nearest", "cubic"), ("zeros", "border", "reflection"), (0, 1))
)


@pytest.mark.parametrize(("mode", "padding", "align"), GRID_CASES)
def test_grid_sample_2d_against_onnxruntime(tmp_path, mode, padding, align):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    # past the edges on both sides, more than one range away (reflections fold twice)
    grid = rng.uniform(-3.2, 3.2, (2, 4, 7, 2)).astype(np.float32)
    grid[0, 0, :4] = [[-1, -1], [1, 1], [-1.0, 1.0], [0.0, 0.0]]  # corners, centre
    node = helper.make_node(
        "GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode=padding, align_corners=align
    )
    model = _model(node, [("X", x.shape), ("G", grid.shape)], "Y")
    _check(tmp_path, model, {"X": x, "G": grid})


def test_grid_sample_3d_and_on_c_and_opencl(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.7, 1.7, (1, 2, 3, 2, 3)).astype(np.float32)
    node = helper.make_node(
        "GridSample", ["X", "G"], ["Y"], mode="linear", padding_mode="reflection"
    )
    model = _model(node, [("X", x.shape), ("G", grid.shape)], "Y")
    _check(tmp_path, model, {"X": x, "G": grid}, targets=("numpy", "c", "opencl"))


def test_grid_sample_bicubic_on_c(tmp_path):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (1, 3, 3, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode="cubic", padding_mode="border")
    model = _model(node, [("X", x.shape), ("G", grid.shape)], "Y")
    _check(tmp_path, model, {"X": x, "G": grid}, targets=("c",))


@pytest.mark.parametrize(
    ("p", "attrs"),
    [
        (1, dict(kernel_shape=[2, 3], strides=[2, 1], pads=[1, 0, 0, 2])),
        (2, dict(kernel_shape=[3, 2], dilations=[2, 1], ceil_mode=1, strides=[2, 2])),
        (3, dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[2, 3])),
    ],
)
def test_lp_pool_against_onnxruntime(tmp_path, p, attrs):
    rng = np.random.default_rng(p)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    node = helper.make_node("LpPool", ["X"], ["Y"], p=p, **attrs)
    _check(tmp_path, _model(node, [("X", x.shape)], "Y"), {"X": x}, targets=("numpy", "c"))


@pytest.mark.parametrize("size", [1, 4, 5])
def test_lrn_against_onnxruntime(tmp_path, size):
    rng = np.random.default_rng(size)
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32) * 3
    node = helper.make_node("LRN", ["X"], ["Y"], size=size, alpha=0.02, beta=0.6, bias=1.5)

    # onnxruntime refuses an even size (and onnx's reference evaluator sums over the batch
    # index, not the channel): the spec's window, the extra channel after (torch's: before)
    def spec(x):
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        sq = np.stack(
            [(x[:, max(0, c - lo) : c + hi + 1] ** 2).sum(1) for c in range(x.shape[1])], 1
        )
        return x / (1.5 + 0.02 / size * sq) ** 0.6

    oracle = "onnxruntime" if size % 2 else spec
    model = _model(node, [("X", x.shape)], "Y")
    _check(tmp_path, model, {"X": x}, targets=("numpy", "c"), oracle=oracle)


def test_col2im_against_onnxruntime(tmp_path):
    rng = np.random.default_rng(3)
    image, block, dil, pads, strides = [6, 7], [2, 3], [2, 1], [1, 0, 2, 1], [2, 2]
    padded = [image[i] + pads[i] + pads[2 + i] for i in range(2)]
    blocks = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(2)]
    x = rng.standard_normal((2, 3 * 6, blocks[0] * blocks[1])).astype(np.float32)
    node = helper.make_node(
        "Col2Im", ["X", "I", "B"], ["Y"], dilations=dil, pads=pads, strides=strides
    )
    g = helper.make_graph(
        [node],
        "col2im",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[
            helper.make_tensor("I", TensorProto.INT64, [2], image),
            helper.make_tensor("B", TensorProto.INT64, [2], block),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    _check(tmp_path, m, {"X": x}, targets=("numpy", "c"))


@pytest.mark.parametrize(
    ("node", "inputs", "message"),
    [
        (
            helper.make_node("GridSample", ["X", "G"], ["Y"], mode="area"),
            [("X", [1, 1, 2, 2]), ("G", [1, 2, 2, 2])],
            "attribute 'mode' = 'area' is not supported",
        ),
        (
            helper.make_node("GridSample", ["X", "G"], ["Y"], mode="cubic"),
            [("X", [1, 1, 2, 2, 2]), ("G", [1, 2, 2, 2, 3])],
            "mode 'cubic' needs a 2-D input",
        ),
        (
            helper.make_node("GridSample", ["X", "G"], ["Y"]),
            [("X", [1, 1, 2, 2]), ("G", [1, 2, 2, 3])],
            "grid shape [1, 2, 2, 3] does not fit input shape [1, 1, 2, 2]",
        ),
        (
            helper.make_node("LpPool", ["X"], ["Y"], kernel_shape=[2, 2], p=0),
            [("X", [1, 1, 3, 3])],
            "attribute 'p' = 0 must be at least 1",
        ),
        (
            helper.make_node("LRN", ["X"], ["Y"], size=3),
            [("X", [2, 3])],
            "the input must have rank 3 or more",
        ),
    ],
)
def test_diagnostics_name_the_node(tmp_path, node, inputs, message):
    node.name = "the_node"
    path = tmp_path / "bad.onnx"
    onnx.save(_model(node, inputs, "Y"), str(path))
    with pytest.raises(DlpcError) as err:
        dlpc.load(str(path))
    text = str(err.value)
    assert message in text and "the_node" in text and "\n" not in text.strip()


def test_ml_domain_and_string_models_are_refused_naming_the_operator(tmp_path):
    """A model of ai.onnx.ml operators only (it imports no default-domain opset) is refused
    naming its first operator; a string input names the operators that read it."""
    node = helper.make_node("Binarizer", ["X"], ["Y"], domain="ai.onnx.ml", threshold=0.5)
    g = helper.make_graph(
        [node],
        "ml",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)])
    onnx.save(m, str(tmp_path / "ml.onnx"))
    with pytest.raises(DlpcError) as err:
        dlpc.load(str(tmp_path / "ml.onnx"))
    assert str(err.value).endswith(
        "ml.onnx: node #0 (Binarizer): error: operator 'ai.onnx.ml.Binarizer' is not "
        "supported (only the default ONNX domain is)"
    )
    node = helper.make_node("StringNormalizer", ["S"], ["T"], case_change_action="UPPER")
    g = helper.make_graph(
        [node],
        "str",
        [helper.make_tensor_value_info("S", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("T", TensorProto.STRING, [2])],
    )
    onnx.save(helper.make_model(g), str(tmp_path / "s.onnx"))
    with pytest.raises(DlpcError) as err:
        dlpc.load(str(tmp_path / "s.onnx"))
    assert str(err.value).endswith(
        "s.onnx: error: graph input 'S' has element type string, which dlpc does not "
        "support (read by StringNormalizer)"
    )


@pytest.mark.parametrize(
    ("group", "offset_group", "with_mask", "attrs"),
    [
        (1, 1, False, dict(pads=[1, 1, 1, 1])),
        (2, 2, True, dict(strides=[2, 1], dilations=[1, 2], pads=[0, 2, 1, 0])),
    ],
)
def test_deform_conv_against_onnxruntime(tmp_path, group, offset_group, with_mask, attrs):
    """Offsets of several pixels (samples past every edge) and a mask, against onnxruntime."""
    rng = np.random.default_rng(group)
    n, c, h, w, oc, kh, kw = 2, 4, 5, 6, 4, 2, 3
    s, d, p = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs["pads"]
    oh = (h + p[0] + p[2] - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (w + p[1] + p[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    feeds = {
        "X": rng.standard_normal((n, c, h, w)).astype(np.float32),
        "W": rng.standard_normal((oc, c // group, kh, kw)).astype(np.float32),
        "O": rng.uniform(-3, 3, (n, offset_group * 2 * kh * kw, oh, ow)).astype(np.float32),
        "B": rng.standard_normal(oc).astype(np.float32),
    }
    if with_mask:
        feeds["M"] = rng.uniform(0, 1, (n, offset_group * kh * kw, oh, ow)).astype(np.float32)
    node = helper.make_node(
        "DeformConv", list(feeds), ["Y"], group=group, offset_group=offset_group, **attrs
    )
    model = _model(node, [(k, v.shape) for k, v in feeds.items()], "Y")
    _check(tmp_path, model, feeds, targets=("numpy", "c"))
