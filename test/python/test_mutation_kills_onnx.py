"""Tests written against surviving mutants of the ONNX importer (issue 35, bench/mutation.py
--area onnx): small hand-built models against onnxruntime (or onnx's reference)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[onnx]')")

from onnx import helper  # noqa: E402
from test_onnx_import import check_numerics, make, vi  # noqa: E402


def test_softplus():
    proto = make([helper.make_node("Softplus", ["x"], ["y"])], [vi("x", [7])], [vi("y", [7])])
    check_numerics(proto, np.array([-20, -3, -0.5, 0, 0.5, 3, 20], np.float32))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_with_explicit_unit_dilations(op):
    """ceil_mode adds a partial last window (5 wide, kernel 2, stride 2: 3 windows), and
    `dilations = [1, 1]` written out is the default, not an unsupported dilation."""
    extra = {"dilations": [1, 1]} if op == "MaxPool" else {}
    node = helper.make_node(
        op, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, **extra
    )
    proto = make([node], [vi("x", [1, 2, 5, 7])], [vi("y", [1, 2, 3, 4])])
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    check_numerics(proto, x)


def test_dilated_pool_with_ceil_mode_pads_its_last_window():
    """Dilation 2 goes by strided slices: with ceil_mode the last window (starting at 6
    of 8, spanning 3) needs one extra padded cell."""
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
        ceil_mode=1,
    )  # fmt: skip
    proto = make([node], [vi("x", [1, 2, 8, 8])], [vi("y", [1, 2, 4, 4])])
    x = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    check_numerics(proto, x)


def test_unit_dilations_keep_the_pool_op():
    """`dilations = [1, 1]` is an ordinary 2-D pool: one graph.max_pool2d, not slices."""
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1, 1])
    proto = make([node], [vi("x", [1, 2, 5, 7])], [vi("y", [1, 2, 4, 6])])
    names = [op.name for op in load_model(proto).module.walk()]
    assert names.count("graph.max_pool2d") == 1 and "graph.slice" not in names


def test_softsign():
    proto = make([helper.make_node("Softsign", ["x"], ["y"])], [vi("x", [5])], [vi("y", [5])])
    check_numerics(proto, np.array([-4, -0.5, 0, 0.5, 4], np.float32))


def test_space_to_depth():
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)
    proto = make([node], [vi("x", [1, 2, 4, 6])], [vi("y", [1, 8, 2, 3])])
    check_numerics(proto, np.arange(48, dtype=np.float32).reshape(1, 2, 4, 6))


@pytest.mark.parametrize("mode", ["half_pixel", "pytorch_half_pixel"])
def test_resize_nearest_with_half_pixel_coordinates(mode):
    """Nearest downsampling by 3/4 and to one column: the source index of output i is
    round((i + 0.5) / scale - 0.5) (pytorch_half_pixel: 0 for a one-wide output)."""
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
        coordinate_transformation_mode=mode,
    )  # fmt: skip
    sizes = np.array([1, 2, 3, 1], dtype=np.int64)
    proto = make([node], [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 3, 1])], [("sizes", sizes)])
    check_numerics(proto, np.arange(40, dtype=np.float32).reshape(1, 2, 4, 5))


@pytest.mark.parametrize(
    "policy, out", [("not_larger", [1, 1, 4, 6]), ("not_smaller", [1, 1, 6, 9])]
)
def test_resize_keeps_the_aspect_ratio(policy, out):
    """sizes 6x6 of a 4x6 input: one common scale, the smaller (not_larger: 1) or the
    larger (not_smaller: 1.5) of the per-axis ones."""
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
        keep_aspect_ratio_policy=policy, axes=[2, 3],
    )  # fmt: skip
    sizes = np.array([6, 6], dtype=np.int64)
    proto = make([node], [vi("x", [1, 1, 4, 6])], [vi("y", out)], [("sizes", sizes)], opset=18)
    check_numerics(proto, np.arange(24, dtype=np.float32).reshape(1, 1, 4, 6))


def test_one_d_max_pool():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2])
    proto = make([node], [vi("x", [1, 2, 9])], [vi("y", [1, 2, 4])])
    check_numerics(proto, np.random.default_rng(2).standard_normal((1, 2, 9)).astype(np.float32))


def test_conv_transpose_with_a_weight_input():
    """A weight that is an input, not an initializer, is flipped by a reversed slice over
    both kernel axes."""
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    proto = make([node], [vi("x", [1, 2, 3, 3]), vi("w", [2, 3, 2, 3])], [vi("y", [1, 3, 6, 7])])
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    check_numerics(proto, x, w)


def test_resize_crop_and_resize_with_a_roi():
    """tf_crop_and_resize over the region roi of the last two axes (the others whole)."""
    node = helper.make_node(
        "Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
    )  # fmt: skip
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], dtype=np.float32)
    sizes = np.array([1, 1, 3, 4], dtype=np.int64)
    proto = make(
        [node], [vi("x", [1, 1, 5, 6])], [vi("y", [1, 1, 3, 4])], [("roi", roi), ("sizes", sizes)]
    )
    check_numerics(proto, np.arange(30, dtype=np.float32).reshape(1, 1, 5, 6))


def test_concat_of_run_time_tensors():
    """Concat of two inputs (not folded at import): x [2, 3] and y [2, 2] on axis 1."""
    node = helper.make_node("Concat", ["x", "y"], ["z"], axis=1)
    proto = make([node], [vi("x", [2, 3]), vi("y", [2, 2])], [vi("z", [2, 5])])
    rng = np.random.default_rng(2)
    check_numerics(
        proto,
        rng.standard_normal((2, 3)).astype(np.float32),
        rng.standard_normal((2, 2)).astype(np.float32),
    )


def test_conv_transpose_with_output_shape_and_no_output_padding():
    """output_shape (and SAME_UPPER auto_pad) give the pads; output_padding left out is
    zeros: a 1x1x3x3 input, 3x3 kernel, stride 2, to 6x6."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    for attrs in ({"output_shape": [6, 6]}, {"auto_pad": "SAME_UPPER"}):
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], **attrs)
        proto = make([node], [vi("x", [1, 1, 3, 3])], [vi("y", [1, 2, 6, 6])], [("w", w)])
        check_numerics(proto, rng.standard_normal((1, 1, 3, 3)).astype(np.float32))


def test_gather_elements_folded_with_indices_smaller_than_the_data():
    """GatherElements of two initializers is folded at import by dlpc's own evaluation
    (onnx's evaluator needs the indices as large as the data off the axis): data [3, 5],
    indices [2, 2] on axis 1 read the data's first 2 rows; a negative index counts from
    the end."""
    from onnx import TensorProto

    from dlpc.frontends.onnx import load_model
    from dlpc.reference.graph import run_reference

    data = np.arange(15, dtype=np.float32).reshape(3, 5)
    index = np.array([[4, 0], [-1, 2]], np.int64)
    nodes = [
        helper.make_node("GatherElements", ["d", "i"], ["g"], axis=1),
        helper.make_node("Add", ["x", "g"], ["y"]),
    ]
    proto = make(
        nodes, [vi("x", [2, 2])], [vi("y", [2, 2], TensorProto.FLOAT)], [("d", data), ("i", index)]
    )
    m = load_model(proto)
    assert "graph.gather" not in [op.name for op in m.module.walk()]
    x = np.ones((2, 2), np.float32)
    (got,) = run_reference(m.module, [x], m.weights)
    np.testing.assert_array_equal(got, x + np.array([[4, 0], [9, 7]], np.float32))


def test_resize_nearest_to_one_column_asymmetric():
    """3 columns to 1 (asymmetric: output 0 reads column 0) is not a whole-factor
    upsampling: there is no factor k >= 1 repeating each element."""
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
        coordinate_transformation_mode="asymmetric",
    )  # fmt: skip
    sizes = np.array([1, 1, 2, 1], dtype=np.int64)
    proto = make([node], [vi("x", [1, 1, 2, 3])], [vi("y", [1, 1, 2, 1])], [("sizes", sizes)])
    check_numerics(proto, np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3))


def test_depth_to_space_crd():
    """CRD mode: [n, c', b, b, h, w] -> [n, c', h, b, w, b] (8 channels, blocksize 2)."""
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")
    proto = make([node], [vi("x", [1, 8, 2, 3])], [vi("y", [1, 2, 4, 6])])
    check_numerics(proto, np.arange(48, dtype=np.float32).reshape(1, 8, 2, 3))


def test_resize_nearest_selects_so_infinities_stay():
    """Nearest 2 -> 3 columns selects one input per output (a gather): an infinite input
    is copied, not multiplied by the 0s of a selection matrix (inf * 0 = nan)."""
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")
    sizes = np.array([1, 1, 1, 3], dtype=np.int64)
    proto = make([node], [vi("x", [1, 1, 1, 2])], [vi("y", [1, 1, 1, 3])], [("sizes", sizes)])
    names = [op.name for op in load_model(proto).module.walk()]
    assert "graph.gather" in names and "graph.matmul" not in names
    check_numerics(proto, np.array([[[[np.inf, -1.0]]]], np.float32))


def test_dilated_strided_max_pool_without_ceil_mode():
    """Dilation 2, stride 2, floor: an 8-wide input has (8 - 3) // 2 + 1 = 3 windows."""
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2]
    )
    proto = make([node], [vi("x", [1, 2, 8, 8])], [vi("y", [1, 2, 3, 3])])
    check_numerics(proto, np.random.default_rng(4).standard_normal((1, 2, 8, 8)).astype(np.float32))


def test_conv_3d_dilated_depth():
    """A 3-D conv with dilation 2 on depth 6 (kernel 2: span 3): 4 output planes."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((2, 1, 2, 2, 2)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], dilations=[2, 1, 1])
    proto = make([node], [vi("x", [1, 1, 6, 3, 3])], [vi("y", [1, 2, 4, 2, 2])], [("w", w)])
    check_numerics(proto, rng.standard_normal((1, 1, 6, 3, 3)).astype(np.float32))


def test_average_pool_has_no_indices_output():
    """MaxPool's second output (Indices) is supported; AveragePool has none to give."""
    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("AveragePool", ["x"], ["y", "z"], kernel_shape=[2])
    proto = make([node], [vi("x", [1, 1, 4])], [vi("y", [1, 1, 3]), vi("z", [1, 1, 3])])
    with pytest.raises(DlpcError, match=r"AveragePool -> 'y'\): error: output 1 \('z'\)"):
        load_model(proto)


def test_constant_with_a_misnamed_tensor_attribute_is_refused():
    """A Constant's tensor must be its `value` attribute: one named otherwise is not read
    as the value (onnx's evaluator finds no constant: a one-line error)."""
    from onnx import numpy_helper

    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("Constant", [], ["c"])
    node.attribute.append(
        helper.make_attribute("valu", numpy_helper.from_array(np.ones(2, np.float32)))
    )
    add = helper.make_node("Add", ["x", "c"], ["y"])
    proto = make([node, add], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(DlpcError, match=r"Constant -> 'c'\): error: cannot evaluate"):
        load_model(proto)


def test_dilated_average_pool_counts_only_the_input():
    """Dilation 2 with 1 pad each side, count_include_pad 0: each window divides by the
    taps that fall inside the input (corners: 4 of 4 taps, 1 padded row: fewer)."""
    node = helper.make_node(
        "AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
        pads=[1, 1, 1, 1],
    )  # fmt: skip
    proto = make([node], [vi("x", [1, 1, 6, 6])], [vi("y", [1, 1, 3, 3])], opset=19)
    check_numerics(proto, np.random.default_rng(6).standard_normal((1, 1, 6, 6)).astype(np.float32))


def test_thresholded_relu():
    node = helper.make_node("ThresholdedRelu", ["x"], ["y"], alpha=0.5)
    proto = make([node], [vi("x", [6])], [vi("y", [6])])
    check_numerics(proto, np.array([-1, 0, 0.25, 0.5, 0.75, 2], np.float32))


@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_truncates_the_quotient(fmod):
    """Float Mod: r = a - trunc(a / b) * b, with a's sign (fmod 1, C's fmod) or b's
    (fmod 0, Python's %; onnxruntime refuses it for floats: numpy's mod is the oracle)."""
    from dlpc.frontends.onnx import load_model
    from dlpc.reference.graph import run_reference

    node = helper.make_node("Mod", ["a", "b"], ["r"], fmod=fmod)
    proto = make([node], [vi("a", [4]), vi("b", [4])], [vi("r", [4])])
    a = np.array([7.5, -7.5, 7.5, -7.5], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0], np.float32)
    m = load_model(proto)
    (got,) = run_reference(m.module, [a, b], m.weights)
    np.testing.assert_allclose(got, np.fmod(a, b) if fmod else np.mod(a, b), rtol=1e-6)


@pytest.mark.parametrize("opset", [7, 13])
def test_inference_dropout_of_any_opset_from_7_is_the_identity(opset):
    node = helper.make_node("Dropout", ["x"], ["y"])
    proto = make([node], [vi("x", [3])], [vi("y", [3])], opset=opset)
    check_numerics(proto, np.array([1.0, -2.0, 3.0], np.float32))


def test_conv_transpose_3d_with_a_different_end_pad_per_axis():
    """3-D ConvTranspose, end pads (1, 0, 1): each axis takes its own end pad."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((1, 1, 2, 2, 2)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], pads=[0, 0, 0, 1, 0, 1])
    proto = make([node], [vi("x", [1, 1, 3, 3, 3])], [vi("y", [1, 1, 3, 4, 3])], [("w", w)])
    check_numerics(proto, rng.standard_normal((1, 1, 3, 3, 3)).astype(np.float32))


def test_concat_keeps_one_element_pieces():
    """Only empty pieces are dropped: [1, 1] and [1, 2] concatenate to [1, 3]."""
    node = helper.make_node("Concat", ["x", "y"], ["z"], axis=1)
    proto = make([node], [vi("x", [1, 1]), vi("y", [1, 2])], [vi("z", [1, 3])])
    check_numerics(proto, np.array([[5.0]], np.float32), np.array([[1.0, 2.0]], np.float32))


def test_gemm_with_a_bias_scaled_by_beta():
    """x @ w^T + 0.5 c (transB, beta 0.5): not a plain linear with bias c."""
    rng = np.random.default_rng(10)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    c = rng.standard_normal(3).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, beta=0.5)
    proto = make([node], [vi("x", [2, 4])], [vi("y", [2, 3])], [("w", w), ("c", c)])
    check_numerics(proto, rng.standard_normal((2, 4)).astype(np.float32))


def test_conv_transpose_valid_auto_pad_with_output_shape_pads_the_start_more():
    """auto_pad VALID with output_shape splits an odd total pad like NOTSET, the larger
    half at the start (only SAME_UPPER puts it at the end; nn.py:134): 3x3 input, 3x3
    kernel, stride 2 gives 7, output_shape 6 crops one row and column."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="VALID", output_shape=[6, 6]
    )
    proto = make([node], [vi("x", [1, 1, 3, 3])], [vi("y", [1, 2, 6, 6])], [("w", w)])
    check_numerics(proto, rng.standard_normal((1, 1, 3, 3)).astype(np.float32))


def test_symbolic_squeeze_of_a_later_axis():
    """Squeeze of axis 1 (and -1) of shape entries holding a symbolic dim takes that axis
    (onnx_symbolic.py:64, the axis is taken modulo the rank)."""
    from dlpc.dialects.symdims import sym
    from dlpc.frontends.onnx_symbolic import fold

    n = sym("n")
    data = np.array([[n], [4]], dtype=object)  # shape (2, 1)
    for axes in ([1], [-1]):
        (out,) = fold("Squeeze", {}, [data, np.array(axes, np.int64)])
        assert out.shape == (2,) and out[0] == n and out[1] == 4


def test_symbolic_range_from_a_nonzero_start(tmp_path):
    """Range(2, n, 1) over a symbolic n has n - 2 entries 2 .. n - 1 (tensor.py:400)."""
    import onnx

    import dlpc

    i64 = onnx.TensorProto.INT64
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Range", ["two", "n", "one"], ["y"]),
    ]
    consts = [(k, np.array(v, np.int64)) for k, v in (("zero", 0), ("two", 2), ("one", 1))]
    proto = make(nodes, [vi("x", ["n"])], [vi("y", ["m"], i64)], consts)
    onnx.save(proto, str(tmp_path / "range.onnx"))
    model = dlpc.load(str(tmp_path / "range.onnx"))
    assert model.ir is not None and '["n + -2"]' in str(model.ir)
    fn = dlpc.api.compile(model, target="numpy")
    for length in (3, 6):
        (got,) = fn(np.zeros(length, np.float32))
        np.testing.assert_array_equal(got, np.arange(2, length))


def _reference(proto, *inputs):
    """dlpc's numpy reference of an imported model (for operators onnxruntime lacks)."""
    from dlpc.frontends.onnx import load_model
    from dlpc.reference.graph import run_reference

    m = load_model(proto)
    return run_reference(m.module, list(inputs), m.weights)


def test_swish_with_alpha_below_one():
    """Swish(x) = x * sigmoid(alpha x): alpha 0.5 scales the sigmoid's input
    (elementwise.py:123)."""
    node = helper.make_node("Swish", ["x"], ["y"], alpha=0.5)
    proto = make([node], [vi("x", [5])], [vi("y", [5])], opset=24)
    x = np.array([-4, -1, 0, 1, 4], np.float32)
    (got,) = _reference(proto, x)
    np.testing.assert_allclose(got, x / (1 + np.exp(-0.5 * x)), rtol=1e-6)


def test_xor_is_not_and():
    """Xor is a != b: true for (true, false), false for (true, true) (elementwise.py:311)."""
    from onnx import TensorProto

    t = TensorProto.BOOL
    node = helper.make_node("Xor", ["a", "b"], ["y"])
    proto = make([node], [vi("a", [4], t), vi("b", [4], t)], [vi("y", [4], t)])
    x = np.array([True, True, False, False])
    y = np.array([True, False, True, False])
    (got,) = _reference(proto, x, y)
    np.testing.assert_array_equal(got, x != y)


def test_group_normalization_of_a_batch_of_two():
    """Batch 2, 4 channels in 2 groups: each image's groups normalised apart
    (normalization.py:97 the batch dim; :112 the default stash_type 1 is taken)."""
    rng = np.random.default_rng(14)
    scale = np.array([1.0, 2.0, 0.5, -1.0], np.float32)
    bias = np.array([0.0, 1.0, -1.0, 0.5], np.float32)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    proto = make(
        [node], [vi("x", [2, 4, 3])], [vi("y", [2, 4, 3])], [("s", scale), ("b", bias)], opset=21
    )
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    g = x.reshape(2, 2, 6)
    norm = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    want = norm.reshape(2, 4, 3) * scale[:, None] + bias[:, None]
    (got,) = _reference(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_depth_to_space_dcr_of_odd_height():
    """DCR, blocksize 2 on 3x3: the output is 6x6 (h * b, not h + b; tensor.py:260)."""
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="DCR")
    proto = make([node], [vi("x", [1, 8, 3, 3])], [vi("y", [1, 2, 6, 6])])
    check_numerics(proto, np.arange(72, dtype=np.float32).reshape(1, 8, 3, 3))


def test_flatten_at_the_rank():
    """axis = rank is allowed: [2, 3] flattens to [6, 1] (tensor.py:63, axis <= rank)."""
    node = helper.make_node("Flatten", ["x"], ["y"], axis=2)
    proto = make([node], [vi("x", [2, 3])], [vi("y", [6, 1])])
    check_numerics(proto, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_rms_normalization_with_the_default_stash_type():
    """RMSNormalization (opset 23) with stash_type left at its default 1 is imported:
    x / sqrt(mean(x^2) + eps) * scale over the last axis (normalization.py:112)."""
    scale = np.array([1.0, -2.0, 0.5], np.float32)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"])
    proto = make([node], [vi("x", [2, 3])], [vi("y", [2, 3])], [("s", scale)], opset=23)
    x = np.array([[1, 2, 3], [-1, 0, 4]], np.float32)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * scale
    (got,) = _reference(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_resize_nearest_crop_and_resize_outside_the_input():
    """tf_crop_and_resize (nearest) over a roi reaching past the input: the points
    outside take extrapolation_value 7 (resize.py:196, the where over those points)."""
    node = helper.make_node(
        "Resize", ["x", "roi", "", "sizes"], ["y"], mode="nearest",
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0,
    )  # fmt: skip
    roi = np.array([0, 0, -0.5, 0, 1, 1, 1.5, 1], dtype=np.float32)
    sizes = np.array([1, 1, 5, 4], dtype=np.int64)
    proto = make(
        [node], [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 5, 4])], [("roi", roi), ("sizes", sizes)]
    )
    m = check_numerics(proto, np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    assert "graph.where" in [op.name for op in m.module.walk()]


def test_symbolic_gather_elements_along_a_later_axis(tmp_path):
    """GatherElements on axis 1 of [n, 3] by [n, 2] indices, n symbolic: each row's own
    offsets (the arange over the axis before the gathered one; tensor.py:203)."""
    import onnx

    import dlpc

    i64 = onnx.TensorProto.INT64
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    proto = make([node], [vi("x", ["n", 3]), vi("i", ["n", 2], i64)], [vi("y", ["n", 2])])
    onnx.save(proto, str(tmp_path / "ge.onnx"))
    model = dlpc.load(str(tmp_path / "ge.onnx"))
    assert model.ir is not None and '["n"]' in str(model.ir)
    fn = dlpc.api.compile(model, target="numpy")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i = np.array([[0, 2], [1, 1], [2, 0], [-1, 0]], np.int64)
    (got,) = fn(x, i)
    np.testing.assert_array_equal(got, np.take_along_axis(x, i % 3, axis=1))
