"""Tests written against surviving mutants of the graph rewrites, graph-to-te and the ONNX
importer (issue 35's named survivors, bench/mutation.py --area graph-rewrites / lowering):
a simplification whose condition holds on only some elements of a constant, reductions
over booleans, and an importer diagnostic naming its node. Expected values are numpy
written out in the test."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

import dlpc
from dlpc.model import Model
from dlpc.passes.pipeline import parse_module
from dlpc.universe import PASSES

TARGETS = ["numpy", "c"]


def compiled(src: str, target: str, level: int):
    return dlpc.compile(Model(parse_module(src), {}, "m"), target, opt_level=level)


def op_names(src: str, spec: str = "graph-simplify") -> list[str]:
    """The ops of `src` after the pass pipeline `spec`."""
    module = parse_module(src)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    return [op.name for op in module.walk()]


# ---------------------------------------- a unit that only some elements of a constant are

PARTIAL_UNITS = [
    # (graph op, constant, numpy): the constant's first element is the unit, not the rest
    ("graph.mul", "[1.0, 2.0]", lambda x, c: x * c),
    ("graph.add", "[0.0, 3.0]", lambda x, c: x + c),
    ("graph.sub", "[0.0, 3.0]", lambda x, c: x - c),
    ("graph.div", "[1.0, 4.0]", lambda x, c: x / c),
]


@pytest.mark.parametrize("op,const,ref", PARTIAL_UNITS, ids=[p[0] for p in PARTIAL_UNITS])
@pytest.mark.parametrize("target", TARGETS)
def test_a_constant_with_only_some_units_is_not_forwarded(op, const, ref, target):
    """`x * [1, 2]` is not x: the unit rule needs every element to be the unit."""
    src = f"""
func.func @main(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {{
  %c = graph.constant dense<{const}> : tensor<2xf32>
  %y = {op} %x, %c : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}}"""
    x = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5
    c = np.array(eval(const), np.float32)
    (got,) = compiled(src, target, 2)(x)
    np.testing.assert_allclose(got, ref(x, c), rtol=1e-6)


def test_a_constant_with_only_some_zeros_does_not_zero_a_product():
    """`[0, 2] * x` keeps the mul: x * 0 -> 0 needs every element 0."""
    src = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[0.0, 2.0]> : tensor<2xf32>
  %y = graph.mul %c, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}"""
    assert "graph.mul" in op_names(src)
    x = np.array([3.0, -1.5], np.float32)
    for target in TARGETS:
        (got,) = compiled(src, target, 2)(x)
        np.testing.assert_array_equal(got, np.array([0.0, -3.0], np.float32))


def test_exp_log_of_a_constant_with_a_negative_element_keeps_its_nan():
    """exp(log(c)) -> c only for c >= 0 everywhere: exp(log(-1)) is nan, not -1."""
    src = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[4.0, -1.0]> : tensor<2xf32>
  %l = graph.log %c : (tensor<2xf32>) -> tensor<2xf32>
  %e = graph.exp %l : (tensor<2xf32>) -> tensor<2xf32>
  %y = graph.add %x, %e : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}"""
    assert "graph.exp" in op_names(src)
    x = np.array([1.0, 1.0], np.float32)
    for target in TARGETS:
        (got,) = compiled(src, target, 0)(x)
        assert got[0] == pytest.approx(5.0) and np.isnan(got[1])


# ------------------------------------------------------------- reductions over booleans

# an all-true, an all-false and a mixed row (axis 1); the transpose has them as columns
BOOL_X = np.array(
    [[True, True, True, True], [False, False, False, False], [True, False, True, False]]
)

BOOL_REDUCTIONS = [
    ("graph.reduce_max", 1, BOOL_X, lambda x: x.any(axis=1)),
    ("graph.reduce_min", 1, BOOL_X, lambda x: x.all(axis=1)),
    ("graph.reduce_max", 0, BOOL_X.T.copy(), lambda x: x.any(axis=0)),
    ("graph.reduce_min", 0, BOOL_X.T.copy(), lambda x: x.all(axis=0)),
]


@pytest.mark.parametrize("op,axis,x,ref", BOOL_REDUCTIONS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("level", [0, 2])
def test_max_and_min_over_booleans_are_any_and_all(op, axis, x, ref, target, level):
    """An all-true row's min is true and an all-false row's max false: the i1
    accumulator starts at false (max) or true (min), not at a signed i1's -1 / 0."""
    rows, cols = x.shape
    src = f"""
func.func @main(%x: tensor<{rows}x{cols}xi1>) -> tensor<3xi1> {{
  %y = {op} %x {{axes = array<i64: {axis}>}} : (tensor<{rows}x{cols}xi1>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}}"""
    (got,) = compiled(src, target, level)(x)
    np.testing.assert_array_equal(np.asarray(got, bool), ref(x))
    assert np.asarray(got).dtype == np.bool_


def test_counting_booleans_through_a_cast():
    """sum(cast(mask, f32)) counts the trues; mean is their fraction."""
    src = """
func.func @main(%x: tensor<3x4xi1>) -> (tensor<3xf32>, tensor<4xf32>) {
  %f = graph.cast %x {to = f32} : (tensor<3x4xi1>) -> tensor<3x4xf32>
  %s = graph.reduce_sum %f {axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3xf32>
  %m = graph.reduce_mean %f {axes = array<i64: 0>} : (tensor<3x4xf32>) -> tensor<4xf32>
  func.return %s, %m : tensor<3xf32>, tensor<4xf32>
}"""
    for target in TARGETS:
        s, m = compiled(src, target, 2)(BOOL_X)
        np.testing.assert_array_equal(s, BOOL_X.sum(axis=1).astype(np.float32))
        np.testing.assert_allclose(m, BOOL_X.mean(axis=0).astype(np.float32), rtol=1e-6)


# ------------------------------------------------------------- an importer diagnostic


def _onnx_model(nodes):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[onnx]')")
    h = onnx.helper
    f = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", f, [2])],
        [h.make_tensor_value_info("z", f, [2])],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_an_unnamed_node_reading_an_undefined_input_is_one_line_naming_it():
    """The node is named by its index and first output when it has no name."""
    from onnx import helper

    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.onnx import load_model

    model = _onnx_model(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Add", ["y", "w"], ["z"])]
    )
    with pytest.raises(DlpcError) as info:
        load_model(model)
    text = str(info.value)
    assert "\n" not in text
    assert "node #1 (Add -> 'z'): error: input 'w' is not defined before its use" in text


def test_a_function_attribute_reference_is_one_line_naming_the_node():
    from onnx import AttributeProto, helper

    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.onnx import load_model

    node = helper.make_node("LeakyRelu", ["x"], ["z"], name="act")
    ref = AttributeProto(name="alpha", ref_attr_name="a", type=AttributeProto.FLOAT)
    node.attribute.append(ref)
    with pytest.raises(DlpcError) as info:
        load_model(_onnx_model([node]))
    text = str(info.value)
    assert "\n" not in text
    assert "node 'act' (LeakyRelu): error: attribute 'alpha' refers to a function attribute" in text


# ------------------------------------- graph-rewrites survivors of the seed-36 sample


def _reference(src: str, spec: str, inputs, weights=None):
    """The numpy reference of `src` before and after the pipeline `spec`, and its ops."""
    from dlpc.reference.graph import run_reference

    module = parse_module(src)
    before = run_reference(module, inputs, weights or {})
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    module.verify()
    after = run_reference(module, inputs, weights or {})
    return before, after, [op.name for op in module.walk()]


def test_a_rank_3_spatial_mean_is_a_global_average_pool():
    """mean over axis 2 of [N, C, L], keepdims, is global_avg_pool at rank 3 too
    (simplify.py:250, `rank >= 3`)."""
    src = """
func.func @main(%x: tensor<2x3x5xf32>) -> tensor<2x3x1xf32> {
  %y = graph.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  func.return %y : tensor<2x3x1xf32>
}"""
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    _, (after,), ops = _reference(src, "graph-simplify", [x])
    assert "graph.global_avg_pool" in ops and "graph.reduce_mean" not in ops
    np.testing.assert_allclose(after, x.mean(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)


def test_zero_times_x_is_zero_with_the_constant_first():
    """0 * x -> 0 with the zero on the left as well as the right (simplify.py:107)."""
    src = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %z = graph.constant dense<0.0> : tensor<2x3xf32>
  %y = graph.mul %z, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}"""
    x = np.ones((2, 3), np.float32)
    _, (after,), ops = _reference(src, "graph-simplify", [x])
    assert "graph.mul" not in ops
    np.testing.assert_array_equal(after, np.zeros((2, 3), np.float32))


def test_constants_added_after_an_add_of_x_are_summed_once():
    """(x + c2) + c1 -> x + (c1 + c2): the inner add on the left is tried too
    (substitute.py:78, the operand-order loop)."""
    src = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c2 = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %c1 = graph.constant dense<0.5> : tensor<4xf32>
  %a = graph.add %x, %c2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = graph.add %a, %c1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %b : tensor<4xf32>
}"""
    x = np.array([0.0, -1.0, 2.0, 8.0], np.float32)
    _, (after,), ops = _reference(src, "graph-substitute,graph-fold-constants", [x])
    assert ops.count("graph.add") == 1
    np.testing.assert_array_equal(after, x + np.array([1.5, 2.5, 3.5, 4.5], np.float32))


def test_an_nchw_batch_norm_after_an_nhwc_conv_is_not_folded():
    """The batch norm normalises the NHWC conv's axis 1 (H), not its channels: folding it
    into the conv's weight would scale channels instead (substitute.py:253, layouts
    compared with `!=`; the lit test has the other order)."""
    src = """
func.func @main(%x: tensor<1x6x6x3xf32>) -> tensor<1x4x4x4xf32> {
  %w = graph.param "w" : tensor<4x3x3x3xf32>
  %g = graph.param "g" : tensor<4xf32>
  %b = graph.param "b" : tensor<4xf32>
  %m = graph.param "m" : tensor<4xf32>
  %v = graph.param "v" : tensor<4xf32>
  %c = graph.conv2d %x, %w {layout = "nhwc"} : (tensor<1x6x6x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  %y = graph.batch_norm %c, %g, %b, %m, %v : (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}"""
    rng = np.random.default_rng(1)
    weights = {
        "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "g": np.array([1.0, 2.0, 3.0, 4.0], np.float32),
        "b": np.array([0.5, -1.0, 0.0, 2.0], np.float32),
        "m": np.array([0.1, 0.2, -0.3, 0.0], np.float32),
        "v": np.array([1.0, 4.0, 0.25, 2.0], np.float32),
    }
    x = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
    (before,), (after,), ops = _reference(src, "graph-substitute", [x], weights)
    assert "graph.batch_norm" in ops
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)


# ------------------------------------------------ lowering survivors of the seed-36 sample

WINO_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_filter_transform_of_a_run_time_weight(target):
    """U[4a + b, o, i] = (G w[o, i] G^T)[a, b] lowered to te, as a weight that is an input
    (not folded at compile time) needs: every point a, b (graph_to_te.py:341, `a == 3`;
    :350, `t / 4`)."""
    src = """
func.func @main(%w: tensor<2x3x3x3xf32>) -> tensor<16x2x3xf32> {
  %u = graph.winograd_filter_transform %w : (tensor<2x3x3x3xf32>) -> tensor<16x2x3xf32>
  func.return %u : tensor<16x2x3xf32>
}"""
    w = np.random.default_rng(2).standard_normal((2, 3, 3, 3)).astype(np.float32)
    want = np.einsum("ak,oikj,bj->aboi", WINO_G, w, WINO_G).reshape(16, 2, 3)
    (got,) = compiled(src, target, 0)(w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_an_average_pool_window_clipped_on_the_right_of_a_tall_input(target):
    """Without count_include_pad the last column window holds one cell of two: its mean
    divides by 2 cells, not 4; the width check bounds by the width 3, not the height 6
    (graph_to_te.py:456, `hi[1]`)."""
    src = """
func.func @main(%x: tensor<1x1x6x3xf32>) -> tensor<1x1x3x2xf32> {
  %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 1>} : (tensor<1x1x6x3xf32>) -> tensor<1x1x3x2xf32>
  func.return %y : tensor<1x1x3x2xf32>
}"""
    x = np.arange(18, dtype=np.float32).reshape(1, 1, 6, 3)
    want = np.empty((1, 1, 3, 2), np.float32)
    for i in range(3):
        for j in range(2):
            want[0, 0, i, j] = x[0, 0, 2 * i : 2 * i + 2, 2 * j : min(2 * j + 2, 3)].mean()
    (got,) = compiled(src, target, 0)(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------ frontends-text survivors of the seed-36 sample


def _text_error(src: str) -> str:
    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.text import parse_model

    with pytest.raises(DlpcError) as info:
        parse_model(src, "m.dlpc")
    return str(info.value)


def test_end_of_file_is_located_on_the_last_line():
    """The column is one past the last line's text, not the second line's
    (parser.py:189, `lines[-1]`)."""
    msg = _text_error("model m(x: f32[2]) {\n  let y = x\n  let z = relu(x\n  ")
    assert msg.startswith("m.dlpc:4:3: error: unexpected end of file")
    msg = _text_error("model m(x: f32[2]) {\n  let z = relu(x\n   ")  # 3 columns
    assert msg.startswith("m.dlpc:3:4: error: unexpected end of file")


@pytest.mark.parametrize("name", ["f32", "i32", "inf", "true"])
def test_a_type_or_constant_name_cannot_name_a_dimension(name):
    """Either kind of reserved name is refused (irgen.py:93, `or`)."""
    msg = _text_error(f"model m(x: f32[{name}]) {{\n  return x\n}}\n")
    assert msg.startswith(f"m.dlpc:1:16: error: '{name}' cannot name a dimension")


def test_the_nesting_limit_counts_from_the_root():
    """A chain of MAX_NESTING + 1 trees (depth MAX_NESTING) passes, one more does not
    (parser.py:206, the root at depth 0)."""
    from lark import Tree

    from dlpc.diagnostics import DlpcError
    from dlpc.frontends.text.parser import MAX_NESTING, _check_nesting

    def chain(n: int) -> Tree:
        tree = Tree("leaf", [])
        for _ in range(n - 1):
            tree = Tree("neg", [tree])
        return tree

    _check_nesting(chain(MAX_NESTING + 1), "m.dlpc", "x")
    with pytest.raises(DlpcError, match=f"nested more than {MAX_NESTING} levels"):
        _check_nesting(chain(MAX_NESTING + 2), "m.dlpc", "x")


def test_a_scale_that_broadcasts_the_conv_input_stays_on_the_input():
    """conv2d(c * x, w) with x of 1 channel broadcast to c's 3: the scale cannot move into
    w (x * c has another type than x); -O2 computes the conv of the broadcast product."""
    src = """
func.func @main(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %c = graph.constant dense<[[[[1.0]], [[2.0]], [[-3.0]]]]> : tensor<1x3x1x1xf32>
  %w = graph.constant dense<[[[[1.0]], [[0.5]], [[2.0]]], [[[-1.0]], [[1.0]], [[0.25]]]]> : tensor<2x3x1x1xf32>
  %xs = graph.mul %c, %x : (tensor<1x3x1x1xf32>, tensor<1x1x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = graph.conv2d %xs, %w : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}"""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) - 7.5
    c = np.array([1.0, 2.0, -3.0], np.float32)
    w = np.array([[1.0, 0.5, 2.0], [-1.0, 1.0, 0.25]], np.float32)
    want = np.einsum("oc,c,nhw->nohw", w, c, x[:, 0])
    (got,) = compiled(src, "numpy", 2)(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_concat_of_three_hundred_operands_groups_its_constants():
    """graph-substitute walks a concat's operands by index: 300 operands (past CPython's
    small-int cache), every third a constant pair grouped into one inner concat."""
    lines, operands = ["func.func @main(%x: tensor<1xf32>) -> tensor<300xf32> {"], []
    for k in range(100):
        lines.append(f"  %a{k} = graph.constant dense<{k}.0> : tensor<1xf32>")
        lines.append(f"  %b{k} = graph.constant dense<-{k}.0> : tensor<1xf32>")
        operands += ["%x", f"%a{k}", f"%b{k}"]
    types = ", ".join(["tensor<1xf32>"] * 300)
    lines.append(
        f"  %y = graph.concat {', '.join(operands)} {{axis = 0 : i64}} : ({types}) -> tensor<300xf32>"
    )
    lines += ["  func.return %y : tensor<300xf32>", "}"]
    names = op_names("\n".join(lines), "graph-substitute")
    assert names.count("graph.concat") == 101


@pytest.mark.parametrize("target", TARGETS)
def test_factor_common_of_terms_sharing_both_factors(target):
    """x*a + a*x: both factors are common to every term; the sum is factored once,
    x * (a + a), and stays right."""
    src = """
func.func @main(%x: tensor<3xf32>, %a: tensor<3xf32>) -> tensor<3xf32> {
  %p = graph.mul %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %q = graph.mul %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.add %p, %q : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    assert op_names(src, "graph-substitute").count("graph.mul") == 1
    x, a = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    (got,) = compiled(src, target, 2)(x, a)
    np.testing.assert_allclose(got, 2 * x * a, rtol=1e-6)


WINO_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_input_transform_of_every_point(target):
    """V[4a + b, n, c, ti, tj] = (B^T d B)[a, b], d the 4x4 tile at (2 ti, 2 tj) of the
    input padded by 1: every point a, b of the transform as graph-to-te lowers it."""
    src = """
func.func @main(%x: tensor<1x2x6x6xf32>) -> tensor<16x1x2x3x3xf32> {
  %v = graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x6x6xf32>) -> tensor<16x1x2x3x3xf32>
  func.return %v : tensor<16x1x2x3x3xf32>
}"""
    x = np.random.default_rng(3).standard_normal((1, 2, 6, 6)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    tiles = np.stack(
        [
            np.stack([xp[:, :, 2 * i : 2 * i + 4, 2 * j : 2 * j + 4] for j in range(3)], 2)
            for i in range(3)
        ],
        2,
    )  # [n, c, ti, tj, 4, 4]
    want = np.einsum("ak,nctukj,bj->abnctu", WINO_BT, tiles, WINO_BT).reshape(16, 1, 2, 3, 3)
    (got,) = compiled(src, target, 0)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_one_operand_concat_is_its_operand():
    src = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = graph.concat %x {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}"""
    assert "graph.concat" not in op_names(src)


def test_gather_clamps_an_out_of_range_index_on_c():
    """graph-to-te clamps a gather index into [0, n): an index past the end (or before
    the start, after the negative wrap) reads the nearest element, never outside data."""
    src = """
func.func @main(%d: tensor<4xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  %y = graph.gather %d, %i {axis = 0 : i64} : (tensor<4xf32>, tensor<3xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    d = np.array([10.5, 20.5, 30.5, 40.5], np.float32)
    (got,) = compiled(src, "c", 0)(d, np.array([4, 7, -9], np.int64))
    np.testing.assert_array_equal(got, [40.5, 40.5, 10.5])


@pytest.mark.parametrize("seed", [-1, 2**32 - 1, 2**32 + 5])
def test_dropout_seed_keeps_its_low_32_bits_on_c(seed):
    """graph-to-te hashes a dropout seed's low 32 bits (seed & 0xFFFFFFFF), as the numpy
    reference does: negative and wide seeds draw the reference's mask on C."""
    from dlpc.reference.graph import dropout_keep

    src = f"""
func.func @main(%x: tensor<4x8xf32>, %step: tensor<f32>) -> tensor<4x8xf32> {{
  %y = graph.dropout %x, %step {{p = 0.5 : f64, seed = {seed} : i64}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}}"""
    x = np.ones((4, 8), np.float32)
    (got,) = compiled(src, "c", 0)(x, np.array(3.0, np.float32))
    keep = dropout_keep((4, 8), 3, seed, 0.5)
    assert 0 < keep.sum() < 32
    np.testing.assert_array_equal(got, np.where(keep, 2.0, 0.0))


def test_a_let_may_shadow_a_let_but_not_an_input_or_a_param():
    """Rebinding a let name is allowed; a let naming an input or a param is a duplicate
    (irgen.py:83: both bindings must be lets)."""
    msg = _text_error("model m(x: f32[1, 4]) {\n  let x = relu(x)\n  return x\n}\n")
    assert msg.startswith("m.dlpc:2:7: error: duplicate name 'x' (already defined as an input")
    src = "model m(x: f32[1, 4]) {\n  param w: f32[4]\n  let w = relu(x)\n  return w\n}\n"
    assert "duplicate name 'w' (already defined as a parameter at line 2)" in _text_error(src)
    from dlpc.frontends.text import parse_model

    parse_model(
        "model m(x: f32[1, 4]) {\n  let y = relu(x)\n  let y = relu(y)\n  return y\n}\n", "m.dlpc"
    )


def test_a_variadic_op_takes_its_operands_as_one_list_and_a_let_names_its_value():
    """concat([x, y], axis=1): the list is the operands (irgen.py:256); `let h = ...`
    names the op's result %h (irgen.py:130: a value without a name takes the let's)."""
    from dlpc.frontends.text import parse_model

    model = parse_model(
        "model m(x: f32[1, 4]) {\n  let h = relu(x)\n  return concat([x, h], axis=1)\n}\n", "m.dlpc"
    )
    text = str(model.module)
    assert "%h = graph.relu %x" in text
    assert (
        "graph.concat %x, %h {axis = 1 : i64} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>"
        in text
    )
    # a list followed by more operands is not the operands (irgen.py:256, `len(args) == 1`)
    msg = _text_error("model m(x: f32[1, 4]) {\n  return concat([x, x], x, axis=1)\n}\n")
    assert msg.startswith("m.dlpc:2:17: error: concat operand 1 must be a tensor")


@pytest.mark.parametrize("target", TARGETS)
def test_a_vector_times_a_batch_of_matrices(target):
    """[3] @ [2, 3, 4] -> [2, 4] (numpy's matmul: the vector is one row of every batch)."""
    src = """
func.func @main(%a: tensor<3xf32>, %b: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  %y = graph.matmul %a, %b : (tensor<3xf32>, tensor<2x3x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}"""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(3).astype(np.float32)
    b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (got,) = compiled(src, target, 0)(a, b)
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_input_transform_unpadded_of_an_odd_size(target):
    """No pads on a 5x5 input: 2 tiles of 4 reach row and column 5, past the input, so
    those reads are guarded (zeros), though no pad asks for it."""
    src = """
func.func @main(%x: tensor<1x1x5x5xf32>) -> tensor<16x1x1x2x2xf32> {
  %v = graph.winograd_input_transform %x {pads = array<i64: 0, 0, 0, 0>} : (tensor<1x1x5x5xf32>) -> tensor<16x1x1x2x2xf32>
  func.return %v : tensor<16x1x1x2x2xf32>
}"""
    x = np.random.default_rng(8).standard_normal((1, 1, 5, 5)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    tiles = np.stack(
        [
            np.stack([xp[:, :, 2 * i : 2 * i + 4, 2 * j : 2 * j + 4] for j in range(2)], 2)
            for i in range(2)
        ],
        2,
    )
    want = np.einsum("ak,nctukj,bj->abnctu", WINO_BT, tiles, WINO_BT).reshape(16, 1, 1, 2, 2)
    (got,) = compiled(src, target, 0)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_rank_4_per_channel_scale_moves_into_the_conv_weight():
    """conv2d([1, 3, 1, 1] * x, w) -> conv2d(x, w * scale): a scale of rank 4 (NCHW, one
    value per input channel) is taken, as one of rank 1 or 3 is."""
    src = """
func.func @main(%x: tensor<1x3x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %c = graph.constant dense<[[[[1.0]], [[2.0]], [[-3.0]]]]> : tensor<1x3x1x1xf32>
  %w = graph.param "w" : tensor<2x3x1x1xf32>
  %xs = graph.mul %c, %x : (tensor<1x3x1x1xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %y = graph.conv2d %xs, %w : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}"""
    module = parse_module(src)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, "graph-substitute").apply(
        Context(), module
    )
    conv = next(op for op in module.walk() if op.name == "graph.conv2d")
    assert conv.operands[0].name_hint == "x"


def test_dims_symbolic_given_as_a_built_string():
    """dims="symbolic" is compared by value: a string built at run time (a CLI's) keeps the
    named dim symbolic too (irgen.py:53, `is`)."""
    from dlpc.frontends.text import parse_model

    dims = "".join(["sym", "bolic"])
    model = parse_model("model m(x: f32[B, 4]) {\n  return relu(x)\n}\n", "m.dlpc", dims=dims)
    assert 'tensor<?x4xf32, ["B"]>' in str(model.module)


# ---------------------------------------- three fused ops of one kernel name (graph_to_te.py:902)

_TWICE = """
  %{out} = graph.fused "twice" %{arg} : (tensor<4x4xf32>) -> tensor<4x4xf32> {{
  ^bb0(%a: tensor<4x4xf32>):
    %r = graph.add %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    graph.yield %r : tensor<4x4xf32>
  }}"""
THREE_FUSED = (
    "func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {"
    + _TWICE.format(out="y0", arg="x")
    + _TWICE.format(out="y1", arg="y0")
    + _TWICE.format(out="y2", arg="y1")
    + "\n  func.return %y2 : tensor<4x4xf32>\n}"
)


def test_three_fused_ops_of_one_kernel_name_get_three_names():
    """The third kernel named like two before it is numbered past the second: twice,
    twice_1, twice_2 (the counter must advance, else the renaming never ends)."""
    module = parse_module(THREE_FUSED)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, "graph-to-te").apply(Context(), module)
    names = [op.compute_name for op in module.walk() if hasattr(op, "compute_name")]
    assert names == ["twice", "twice_1", "twice_2"]
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    (got,) = compiled(THREE_FUSED, "numpy", 0)(x)
    np.testing.assert_allclose(got, x * 8)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_input_transform_padded_at_the_start_only(target):
    """Pads top/left 1, bottom/right 0 on 5x5: 2 tiles of 4 end at row 5, inside the
    input, yet row -1 is the padding: the pad alone asks for the guard (graph_to_te.py:383)."""
    src = """
func.func @main(%x: tensor<1x1x5x5xf32>) -> tensor<16x1x1x2x2xf32> {
  %v = graph.winograd_input_transform %x {pads = array<i64: 1, 1, 0, 0>} : (tensor<1x1x5x5xf32>) -> tensor<16x1x1x2x2xf32>
  func.return %v : tensor<16x1x1x2x2xf32>
}"""
    x = np.random.default_rng(12).standard_normal((1, 1, 5, 5)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (1, 0)))
    tiles = np.stack(
        [
            np.stack([xp[:, :, 2 * i : 2 * i + 4, 2 * j : 2 * j + 4] for j in range(2)], 2)
            for i in range(2)
        ],
        2,
    )
    want = np.einsum("ak,nctukj,bj->abnctu", WINO_BT, tiles, WINO_BT).reshape(16, 1, 1, 2, 2)
    (got,) = compiled(src, target, 0)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_output_transform_with_a_bias(target):
    """Y[n, o, 2 ti + r, 2 tj + s] = (A^T M A)[r, s] + bias[o], A^T = [[1, 1, 1, 0],
    [0, 1, -1, -1]] (graph_to_te.py:406 the bias operand, :416 all three rows of M)."""
    src = """
func.func @main(%m: tensor<16x1x2x2x2xf32>, %b: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  %y = graph.winograd_output_transform %m, %b {output = array<i64: 4, 4>} : (tensor<16x1x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}"""
    rng = np.random.default_rng(13)
    m = rng.standard_normal((16, 1, 2, 2, 2)).astype(np.float32)
    bias = np.array([0.5, -2.0], np.float32)
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)
    y = np.einsum("ra,abnouv,sb->nourvs", at, m.reshape(4, 4, 1, 2, 2, 2), at)
    want = y.reshape(1, 2, 4, 4) + bias[None, :, None, None]
    (got,) = compiled(src, target, 0)(m, bias)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
