"""Tests of the graph passes outside graph-rewrites (issue 35, fourth round, area
graph-passes of bench/mutation.py): graph-canonicalize's idiom rules and their guards,
graph-winograd's eligibility and cost rules at their bounds, graph-conv-layout's choice,
graph-layout's options, graph-fuse's groups and chains, graph-infer-shapes' diagnostics and
the shared helpers of _util. Each rewrite is also checked against the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u
from dlpc.passes.graph import conv_layout, winograd
from dlpc.passes.graph.infer_shapes import infer_module
from dlpc.passes.graph.layout import evaluate_nhwc
from dlpc.reference.graph import run_reference
from dlpc.universe import PASSES


def parse(src: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph):
        ctx.load_dialect(dialect)
    module = Parser(ctx, src).parse_module()
    module.verify()
    return module


def run(module: ModuleOp, spec: str) -> ModuleOp:
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    module.verify()
    return module


def names(module: ModuleOp) -> list[str]:
    return [op.name.removeprefix("graph.") for op in module.walk() if op.name.startswith("graph.")]


def first(module: ModuleOp, name: str):
    return next(op for op in module.walk() if op.name == name)


def same_values(src: str, spec: str, seed: int = 0) -> ModuleOp:
    """The module after `spec`, its outputs checked against the reference before it."""
    module = parse(src)
    rng = np.random.default_rng(seed)
    weights = {
        op.pname: rng.standard_normal(g.shape_of(op.results[0])).astype(np.float32)
        for op in module.walk()
        if isinstance(op, g.ParamOp)
    }
    fn = next(op for op in module.walk() if op.name == "func.func")
    inputs = [
        rng.standard_normal(a.type.get_shape()).astype(np.float32) for a in fn.body.block.args
    ]
    before = run_reference(module, inputs, weights)
    run(module, spec)
    after = run_reference(module, inputs, weights)
    for b, a in zip(before, after, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return module


# ------------------------------------------------------------------ graph-canonicalize

GELU = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %h = graph.constant dense<{half}> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %k = graph.constant dense<{k}> : tensor<f32>
  %s = graph.{scale} {scale_args} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = graph.erf %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = graph.add {add_args} : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = graph.mul %x, %h : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = graph.mul %m, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}}"""


def gelu_src(half="0.5", k="0.70710678", scale="mul", add_first=True):
    scale_args = "%x, %k" if scale == "mul" else "%x, %k"
    add_args = "%one, %e" if add_first else "%e, %one"
    src = GELU.format(half=half, k=k, scale=scale, scale_args=scale_args, add_args=add_args)
    if not add_first:
        src = src.replace("(tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n  %m", "X")
        src = src.replace(
            "%a = graph.add %e, %one : X",
            "%a = graph.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>\n  %m",
        )
    return src


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"scale": "div", "k": "1.41421356"}, {"add_first": False}],
    ids=["mul", "div", "erf_plus_one"],
)
def test_gelu_idioms_become_gelu(kwargs):
    module = same_values(gelu_src(**kwargs), "graph-canonicalize")
    assert "gelu" in names(module) and "erf" not in names(module)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"half": "0.5001"},  # not 0.5 within float32 rounding
        {"k": "0.7072"},  # not 1/sqrt 2
        {"scale": "div", "k": "0.70710678"},  # x / 0.707 is not x / sqrt 2
        {"scale": "div", "k": "1.415"},
    ],
    ids=["half", "k", "div_by_k", "div_sqrt2"],
)
def test_gelu_needs_the_exact_constants(kwargs):
    module = same_values(gelu_src(**kwargs), "graph-canonicalize")
    assert "gelu" not in names(module) and "erf" in names(module)


def test_gelu_with_a_shared_erf_stays():
    """The erf has a second user (returned): rewriting would compute it twice."""
    src = gelu_src().replace(
        "func.return %y : tensor<4x8xf32>", "func.return %y, %e : tensor<4x8xf32>, tensor<4x8xf32>"
    )
    src = src.replace("-> tensor<4x8xf32> {\n  %h", "-> (tensor<4x8xf32>, tensor<4x8xf32>) {\n  %h")
    module = same_values(src, "graph-canonicalize")
    assert "gelu" not in names(module)


def test_gelu_of_another_value_stays():
    """0.5 * z * (1 + erf(x / sqrt 2)) with z not x is no gelu."""
    src = gelu_src().replace(
        "func.func @main(%x: tensor<4x8xf32>)",
        "func.func @main(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>)",
    )
    src = src.replace("%m = graph.mul %x, %h", "%m = graph.mul %z, %h")
    module = same_values(src, "graph-canonicalize")
    assert "gelu" not in names(module)


MATMUL = """
func.func @main(%x: tensor<2x3x8xf32>) -> tensor<2x3x4xf32> {{
  %w = graph.param "w" : tensor<{w}xf32>
  %b = graph.param "b" : tensor<{b}xf32>
  %m = graph.matmul %x, %w {attrs}: (tensor<2x3x8xf32>, tensor<{w}xf32>) -> tensor<2x3x4xf32>
  %y = graph.add {add} : ({add_types}) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}}"""


def matmul_src(w="8x4", b="4", attrs="", bias_first=False):
    add = "%b, %m" if bias_first else "%m, %b"
    types = (
        f"tensor<{b}xf32>, tensor<2x3x4xf32>"
        if bias_first
        else f"tensor<2x3x4xf32>, tensor<{b}xf32>"
    )
    return MATMUL.format(w=w, b=b, attrs=attrs, add=add, add_types=types)


@pytest.mark.parametrize("bias_first", [False, True])
def test_matmul_and_bias_become_one_linear(bias_first):
    module = same_values(matmul_src(bias_first=bias_first), "graph-canonicalize")
    assert names(module) == ["param", "param", "transpose", "linear"]
    assert len(first(module, "graph.linear").operands) == 3


def test_matmul_with_transposed_weight_needs_no_transpose():
    module = same_values(matmul_src(w="4x8", attrs="{transpose_b = true} "), "graph-canonicalize")
    assert names(module) == ["param", "param", "linear"]


def test_a_bias_of_another_width_stays_an_add():
    """b of shape [3x4] broadcasts but is not a [N] bias: linear without bias, then add."""
    module = same_values(matmul_src(b="3x4"), "graph-canonicalize")
    assert names(module) == ["param", "param", "transpose", "linear", "add"]
    assert len(first(module, "graph.linear").operands) == 2


def test_matmul_of_an_activation_weight_or_transposed_input_stays():
    src = matmul_src().replace('%w = graph.param "w" : tensor<8x4xf32>', "")
    src = src.replace("(%x: tensor<2x3x8xf32>)", "(%x: tensor<2x3x8xf32>, %w: tensor<8x4xf32>)")
    assert "linear" not in names(same_values(src, "graph-canonicalize"))
    src = matmul_src(w="8x4", attrs="{transpose_a = true} ").replace("2x3x8", "2x8x3")
    assert "linear" not in names(same_values(src, "graph-canonicalize"))


def test_integer_matmul_stays():
    src = """
func.func @main(%x: tensor<3x8xi32>) -> tensor<3x4xi32> {
  %w = graph.param "w" : tensor<8x4xi32>
  %m = graph.matmul %x, %w : (tensor<3x8xi32>, tensor<8x4xi32>) -> tensor<3x4xi32>
  func.return %m : tensor<3x4xi32>
}"""
    assert names(run(parse(src), "graph-canonicalize")) == ["param", "matmul"]


def test_rank_one_input_matmul_stays():
    src = """
func.func @main(%x: tensor<8xf32>) -> tensor<4xf32> {
  %w = graph.param "w" : tensor<8x4xf32>
  %m = graph.matmul %x, %w : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}"""
    assert names(run(parse(src), "graph-canonicalize")) == ["param", "matmul"]


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis,want", [(0, -2), (1, -1), (-2, -2)])
def test_softmax_axis_becomes_negative(op, axis, want):
    src = f"""
func.func @main(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {{
  %y = graph.{op} %x {{axis = {axis} : i64}} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}}"""
    module = same_values(src, "graph-canonicalize")
    assert first(module, f"graph.{op}").axis == want


# ------------------------------------------------------------------------ graph-winograd

CONV = """
func.func @main(%x: tensor<{n}x{c}x{h}x{w}xf32>) -> tensor<{n}x{o}x{oh}x{ow}xf32> {{
  %k = graph.param "k" : tensor<{o}x{c}x3x3xf32>
  %y = graph.conv2d %x, %k {{pads = array<i64: {p}, {p}, {p}, {p}>}} : (tensor<{n}x{c}x{h}x{w}xf32>, tensor<{o}x{c}x3x3xf32>) -> tensor<{n}x{o}x{oh}x{ow}xf32>
  {tail}
}}"""


def conv(o, c, h, w, n=1, p=1, tail=None):
    oh, ow = h + 2 * p - 2, w + 2 * p - 2
    out = f"tensor<{n}x{o}x{oh}x{ow}xf32>"
    tail = tail or f"func.return %y : {out}"
    return CONV.format(n=n, c=c, h=h, w=w, o=o, oh=oh, ow=ow, p=p, tail=tail.format(t=out))


def pays(src: str, target: str = "c") -> bool:
    op = first(parse(src), "graph.conv2d")
    assert winograd.eligible(op)
    return winograd.pays(op, target)


@pytest.mark.parametrize(
    "o,c,h,w,want",
    [
        (32, 32, 8, 8, True),  # fused: equal 32 channels, an even output
        (16, 16, 8, 8, True),  # fused: equal 16 channels
        (32, 32, 7, 8, False),  # odd output height
        (32, 32, 8, 7, False),  # odd output width
        (32, 16, 8, 8, False),  # unequal channels, below 64
        (8, 8, 8, 8, False),
        (32, 32, 2, 258, False),  # 129 tile columns: beyond the fused kernel's row
        (32, 32, 2, 256, True),  # 128 tile columns, its bound
        (64, 64, 32, 32, True),  # 64 channels, 256 tiles
        (64, 64, 30, 32, False),  # 240 tiles
        (64, 48, 32, 32, False),  # min(o, c) < 64
        (48, 64, 32, 32, False),
        (64, 128, 32, 32, True),
    ],
)
def test_winograd_cost_rule_for_c_at_its_bounds(o, c, h, w, want):
    assert pays(conv(o, c, h, w)) is want


RELU = "%r = graph.relu %y : ({t}) -> {t}\n  func.return %r : {t}"
RESIDUAL = (
    "%a = graph.add %y, %x : ({t}, {t}) -> {t}\n  %r = graph.relu %a : ({t}) -> {t}\n"
    "  func.return %r : {t}"
)


@pytest.mark.parametrize(
    "o,c,h,w,p,tail,want",
    [
        (16, 16, 4, 16, 1, RELU, True),
        (16, 16, 4, 16, 1, RESIDUAL, True),
        (16, 16, 4, 16, 1, None, False),  # no relu after it
        (16, 16, 4, 18, 0, RELU, False),  # padding 0
        (16, 16, 3, 16, 1, RELU, False),  # odd height
        (16, 16, 4, 8, 1, RELU, False),  # 4 tile columns, not 8
        (12, 16, 4, 16, 1, RELU, False),  # 12 output channels
        (32, 32, 4, 128, 1, RELU, False),  # 16 * 64 * 64 floats > 8192
    ],
)
def test_winograd_cost_rule_for_opencl(o, c, h, w, p, tail, want):
    assert pays(conv(o, c, h, w, p=p, tail=tail), "opencl") is want


def test_winograd_opencl_rule_at_the_float_bound():
    # 16 * (c + o) * (ow // 2) == 8192 exactly: c = o = 16, ow = 32 -> 16 * 32 * 16 = 8192
    assert pays(conv(16, 16, 4, 32, tail=RELU), "opencl") is True
    assert pays(conv(24, 24, 4, 32, tail=RELU), "opencl") is False


def test_winograd_opencl_rule_needs_a_same_shape_residual():
    src = conv(16, 16, 4, 16, tail=RESIDUAL)
    # the residual broadcast from a [16, 1, 1] weight is not a residual of y's shape
    src = src.replace("%a = graph.add %y, %x", "%a = graph.add %y, %s")
    src = src.replace(
        "%y = graph.conv2d", '%s = graph.param "s" : tensor<16x1x1xf32>\n  %y = graph.conv2d'
    )
    src = src.replace(
        "(tensor<1x16x4x16xf32>, tensor<1x16x4x16xf32>) -> tensor<1x16x4x16xf32>\n  %r",
        "(tensor<1x16x4x16xf32>, tensor<16x1x1xf32>) -> tensor<1x16x4x16xf32>\n  %r",
    )
    assert pays(src, "opencl") is False


@pytest.mark.parametrize(
    "attr,out",
    [("strides = array<i64: 2, 2>", 4), ("dilations = array<i64: 2, 2>", 6)],
    ids=["stride", "dilation"],
)
def test_winograd_refuses_strides_and_dilations(attr, out):
    src = conv(32, 32, 8, 8).replace("1, 1, 1, 1>}", f"1, 1, 1, 1>, {attr}}}")
    src = src.replace("tensor<1x32x8x8xf32>\n", f"tensor<1x32x{out}x{out}xf32>\n")
    src = src.replace("-> tensor<1x32x8x8xf32> {", f"-> tensor<1x32x{out}x{out}xf32> {{")
    module = parse(src)
    assert not winograd.eligible(first(module, "graph.conv2d"))
    assert "conv2d" in names(run(module, "graph-winograd{where=all}"))


def test_winograd_refuses_groups_layouts_and_activation_weights():
    assert winograd.eligible(first(parse(conv(32, 32, 8, 8)), "graph.conv2d"))
    nhwc = conv(32, 32, 8, 8).replace("1, 1, 1, 1>}", '1, 1, 1, 1>, layout = "nhwc"}')
    nhwc = nhwc.replace("tensor<1x32x8x8xf32>", "tensor<1x8x8x32xf32>")
    assert not winograd.eligible(first(parse(nhwc), "graph.conv2d"))
    src = conv(32, 32, 8, 8).replace('%k = graph.param "k" : tensor<32x32x3x3xf32>', "")
    src = src.replace(
        "(%x: tensor<1x32x8x8xf32>)", "(%x: tensor<1x32x8x8xf32>, %k: tensor<32x32x3x3xf32>)"
    )
    assert not winograd.eligible(first(parse(src), "graph.conv2d"))
    grouped = conv(32, 32, 8, 8).replace("32x32x3x3", "32x16x3x3")
    grouped = grouped.replace(
        "pads = array<i64: 1, 1, 1, 1>}", "pads = array<i64: 1, 1, 1, 1>, groups = 2 : i64}"
    )
    assert not winograd.eligible(first(parse(grouped), "graph.conv2d"))


def test_winograd_all_matches_the_reference_with_bias_and_batch():
    src = (
        conv(4, 3, 6, 6, n=2)
        .replace(
            "%y = graph.conv2d %x, %k {",
            '%b = graph.param "b" : tensor<4xf32>\n  %y = graph.conv2d %x, %k, %b {',
        )
        .replace("tensor<4x3x3x3xf32>) ->", "tensor<4x3x3x3xf32>, tensor<4xf32>) ->")
    )
    module = same_values(src, "graph-winograd{where=all}")
    assert names(module).count("winograd_output_transform") == 1
    assert "conv2d" not in names(module)


@pytest.mark.parametrize(
    "opt,message",
    [
        ("where=some", "error: graph-winograd where must be pays, all or none, got 'some'"),
        ("target=dlp", "error: graph-winograd target must be c, opencl or opencl-gpu, got 'dlp'"),
    ],
)
def test_winograd_option_diagnostics(opt, message):
    with pytest.raises(DlpcError) as e:
        run(parse(conv(32, 32, 8, 8)), f"graph-winograd{{{opt}}}")
    assert str(e.value) == message


def test_winograd_none_and_pays_choose():
    assert "conv2d" in names(run(parse(conv(32, 32, 8, 8)), "graph-winograd{where=none}"))
    assert "conv2d" not in names(run(parse(conv(32, 32, 8, 8)), "graph-winograd"))
    assert "conv2d" in names(run(parse(conv(8, 8, 8, 8)), "graph-winograd"))


# ---------------------------------------------------------------------- graph-conv-layout


@pytest.mark.parametrize(
    "o,w,lanes,want",
    [
        (16, 10, 8, True),  # 16 channels fill two vectors, a 10-wide row does not
        (16, 16, 8, False),  # the row fills vectors too: NCHW
        (12, 10, 8, False),  # the channels do not
        (12, 10, 4, True),
        (16, 10, 1, False),  # one lane: every row fills
    ],
)
def test_conv_layout_prefers_nhwc(o, w, lanes, want):
    op = first(parse(conv(o, 8, 4, w, p=1)), "graph.conv2d")
    assert conv_layout.prefers_nhwc(op, lanes) is want


def test_conv_layout_converts_the_conv_and_its_pool_and_keeps_values():
    src = (
        conv(16, 8, 4, 10)
        .replace(
            "func.return %y : tensor<1x16x4x10xf32>",
            "%r = graph.relu %y : (tensor<1x16x4x10xf32>) -> tensor<1x16x4x10xf32>\n"
            "  %p = graph.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} "
            ": (tensor<1x16x4x10xf32>) -> tensor<1x16x2x5xf32>\n"
            "  func.return %p : tensor<1x16x2x5xf32>",
        )
        .replace("-> tensor<1x16x4x10xf32> {", "-> tensor<1x16x2x5xf32> {")
    )
    module = same_values(src, "graph-conv-layout")
    assert g.layout_of(first(module, "graph.conv2d")) == "nhwc"
    assert g.layout_of(first(module, "graph.max_pool2d")) == "nhwc"
    assert names(module).count("transpose") == 2  # one in, one out: the relu is inside


def test_conv_layout_grouped_conv_stays():
    src = (
        conv(16, 16, 4, 10)
        .replace("16x16x3x3", "16x8x3x3")
        .replace(
            "pads = array<i64: 1, 1, 1, 1>}", "pads = array<i64: 1, 1, 1, 1>, groups = 2 : i64}"
        )
    )
    module = run(parse(src), "graph-conv-layout")
    assert "transpose" not in names(module)


def test_conv_layout_lanes_must_be_positive():
    with pytest.raises(DlpcError) as e:
        run(parse(conv(16, 8, 4, 10)), "graph-conv-layout{lanes=0}")
    assert str(e.value) == "error: graph-conv-layout lanes must be positive, got 0"


# --------------------------------------------------------------------------- graph-layout


@pytest.mark.parametrize(
    "opt,message",
    [
        ("to=nchw where=pays", "error: graph-layout where=pays converts to nhwc only"),
        ("to=chwn", "error: graph-layout to must be nhwc or nchw, got 'chwn'"),
        ("where=some", "error: graph-layout where must be all or pays, got 'some'"),
    ],
)
def test_layout_option_diagnostics(opt, message):
    with pytest.raises(DlpcError) as e:
        run(parse(conv(16, 8, 4, 10)), f"graph-layout{{{opt}}}")
    assert str(e.value) == message


def test_layout_round_trip_through_nchw_restores_the_attribute_free_form():
    module = same_values(conv(4, 3, 5, 6), "graph-layout")
    assert g.layout_of(first(module, "graph.conv2d")) == "nhwc"
    run(module, "graph-layout{to=nchw}")
    op = first(module, "graph.conv2d")
    assert g.layout_of(op) == "nchw" and "layout" not in op.attributes
    assert "transpose" not in names(module)


def test_layout_where_pays_is_conv_layouts_choice():
    kept = run(parse(conv(16, 8, 4, 16)), "graph-layout{where=pays}")
    assert g.layout_of(first(kept, "graph.conv2d")) == "nchw"
    moved = run(parse(conv(16, 8, 4, 10)), "graph-layout{where=pays lanes=8}")
    assert g.layout_of(first(moved, "graph.conv2d")) == "nhwc"


def test_evaluate_nhwc_is_the_nchw_value_transposed():
    module = run(parse(conv(4, 3, 5, 6)), "graph-layout")
    op = first(module, "graph.conv2d")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 6, 3)).astype(np.float32)
    k = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got = evaluate_nhwc(op, [x, k])
    xn = np.transpose(x, (0, 3, 1, 2))
    xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 4, 5, 6), np.float32)
    for i in range(5):
        for j in range(6):
            want[0, :, i, j] = np.einsum("chw,ochw->o", xp[0, :, i : i + 3, j : j + 3], k)
    np.testing.assert_allclose(got, np.transpose(want, (0, 2, 3, 1)), rtol=1e-5, atol=1e-5)


def test_sinking_moves_a_static_operand_through_the_inverse_permutation():
    """relu(conv) + a static [4, 1, 1] weight sinks: the weight is reshaped and transposed."""
    src = conv(4, 3, 5, 6).replace(
        "func.return %y : tensor<1x4x5x6xf32>",
        '%s = graph.param "s" : tensor<4x1x1xf32>\n'
        "  %a = graph.add %y, %s : (tensor<1x4x5x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x5x6xf32>\n"
        "  %c = graph.constant dense<2.0> : tensor<f32>\n"
        "  %m = graph.mul %a, %c : (tensor<1x4x5x6xf32>, tensor<f32>) -> tensor<1x4x5x6xf32>\n"
        "  func.return %m : tensor<1x4x5x6xf32>",
    )
    module = same_values(src, "graph-layout")
    ops = names(module)
    # in and out only: the weight's reshape + transpose simplify to one reshape to [1,1,1,4]
    assert ops[-1] == "transpose" and ops.count("transpose") == 2
    reshape = first(module, "graph.reshape")
    assert g.shape_of(reshape.results[0]) == (1, 1, 1, 4)


# ----------------------------------------------------------------------------- graph-fuse

QKV = """
func.func @main(%x: tensor<3x8xf32>) -> (tensor<3x4xf32>, tensor<3x6xf32>) {{
  %wq = graph.param "wq" : tensor<{wq}xf32>
  %wk = graph.param "wk" : tensor<{wk}xf32>
  %q = graph.{op} %x, %wq {attrs}: (tensor<3x8xf32>, tensor<{wq}xf32>) -> tensor<3x4xf32>
  %k = graph.{op} %x, %wk {attrs}: (tensor<3x8xf32>, tensor<{wk}xf32>) -> tensor<3x6xf32>
  func.return %q, %k : tensor<3x4xf32>, tensor<3x6xf32>
}}"""


@pytest.mark.parametrize(
    "op,wq,wk,attrs,axis",
    [
        ("linear", "4x8", "6x8", "", 0),
        ("matmul", "8x4", "8x6", "", 1),
        ("matmul", "4x8", "6x8", "{transpose_b = true} ", 0),
    ],
    ids=["linear", "matmul", "matmul_tb"],
)
def test_horizontal_fusion_concatenates_along_the_output_axis(op, wq, wk, attrs, axis):
    module = same_values(QKV.format(op=op, wq=wq, wk=wk, attrs=attrs), "graph-fuse{vertical=false}")
    assert names(module).count(op) == 1
    assert first(module, "graph.concat").axis == axis
    slices = [o for o in module.walk() if o.name == "graph.slice"]
    assert [(tuple(s.starts), tuple(s.ends)) for s in slices] == [((0,), (4,)), ((4,), (10,))]


def test_horizontal_fusion_needs_equal_keys():
    src = QKV.format(op="matmul", wq="8x4", wk="8x6", attrs="")
    src = src.replace("%k = graph.matmul %x, %wk", "%k = graph.matmul %x, %wk {transpose_a = true}")
    src = src.replace(
        '%wk = graph.param "wk" : tensor<8x6xf32>', '%wk = graph.param "wk" : tensor<3x6xf32>'
    )
    src = src.replace(
        "(tensor<3x8xf32>, tensor<8x6xf32>) -> tensor<3x6xf32>",
        "(tensor<3x8xf32>, tensor<3x6xf32>) -> tensor<8x6xf32>",
    )
    src = src.replace("tensor<3x6xf32>) {", "tensor<8x6xf32>) {").replace(
        "%q, %k : tensor<3x4xf32>, tensor<3x6xf32>", "%q, %k : tensor<3x4xf32>, tensor<8x6xf32>"
    )
    module = same_values(src, "graph-fuse{vertical=false}")
    assert names(module).count("matmul") == 2 and "concat" not in names(module)


def test_horizontal_matmuls_take_their_bias_adds():
    src = """
func.func @main(%x: tensor<3x8xf32>) -> (tensor<3x4xf32>, tensor<3x6xf32>) {
  %wq = graph.param "wq" : tensor<8x4xf32>
  %wk = graph.param "wk" : tensor<8x6xf32>
  %bq = graph.param "bq" : tensor<4xf32>
  %bk = graph.param "bk" : tensor<6xf32>
  %q = graph.matmul %x, %wq : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %k = graph.matmul %x, %wk : (tensor<3x8xf32>, tensor<8x6xf32>) -> tensor<3x6xf32>
  %qb = graph.add %q, %bq : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %kb = graph.add %bk, %k : (tensor<6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  func.return %qb, %kb : tensor<3x4xf32>, tensor<3x6xf32>
}"""
    module = same_values(src, "graph-fuse{vertical=false}")
    ops = names(module)
    assert ops.count("matmul") == 1 and ops.count("add") == 1 and ops.count("concat") == 2
    # a bias of the wrong width (a [3, 4] add) keeps the adds outside
    wide = src.replace(
        '%bq = graph.param "bq" : tensor<4xf32>', '%bq = graph.param "bq" : tensor<3x4xf32>'
    )
    wide = wide.replace("(tensor<3x4xf32>, tensor<4xf32>)", "(tensor<3x4xf32>, tensor<3x4xf32>)")
    module = same_values(wide, "graph-fuse{vertical=false}")
    assert names(module).count("add") == 2 and names(module).count("concat") == 1


def test_vertical_chain_respects_max_chain_and_the_option_bound():
    src = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.exp %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = graph.neg %b : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %c : tensor<4x8xf32>
}"""
    module = same_values(src, "graph-fuse{max-chain=2}")
    fused = [op for op in module.walk() if op.name == "graph.fused"]
    assert [op.kernel.data for op in fused] == ["relu_exp_0"]
    module = same_values(src, "graph-fuse")
    fused = [op for op in module.walk() if op.name == "graph.fused"]
    assert [op.kernel.data for op in fused] == ["relu_exp_neg_0"]
    with pytest.raises(DlpcError) as e:
        run(parse(src), "graph-fuse{max-chain=1}")
    assert str(e.value) == "error: graph-fuse max-chain must be >= 2, got 1"


def test_vertical_chain_stops_at_a_shape_change_and_numbers_kernels():
    src = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8xf32> {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = graph.relu %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = graph.reduce_sum %r {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %e = graph.exp %s : (tensor<8xf32>) -> tensor<8xf32>
  %n = graph.neg %e : (tensor<8xf32>) -> tensor<8xf32>
  func.return %n : tensor<8xf32>
}"""
    module = same_values(src, "graph-fuse")
    kernels = [op.kernel.data for op in module.walk() if op.name == "graph.fused"]
    assert kernels == ["matmul_relu_0", "exp_neg_1"]


def test_static_chains_are_left_to_folding():
    src = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = graph.param "w" : tensor<4xf32>
  %a = graph.exp %w : (tensor<4xf32>) -> tensor<4xf32>
  %b = graph.neg %a : (tensor<4xf32>) -> tensor<4xf32>
  %y = graph.add %x, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}"""
    module = same_values(src, "graph-fuse")
    assert "fused" not in names(module)


# --------------------------------------------------------------------- graph-infer-shapes


def test_infer_shapes_names_the_op_and_its_value():
    src = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = graph.param "w" : tensor<7x4xf32>
  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<7x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}"""
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph):
        ctx.load_dialect(dialect)
    module = Parser(ctx, src).parse_module()
    with pytest.raises(VerifyException) as e:
        infer_module(module)
    assert str(e.value).startswith("cannot infer the type of graph.matmul (%y): ")


def test_infer_shapes_retypes_a_fused_region_and_the_signature():
    src = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<9x9xf32> {
  %y = graph.fused "relu_neg_0" %x : (tensor<2x3xf32>) -> tensor<9x9xf32> {
  ^bb0(%a: tensor<1x1xf32>):
    %r = graph.relu %a : (tensor<1x1xf32>) -> tensor<1x1xf32>
    %n = graph.neg %r : (tensor<1x1xf32>) -> tensor<1x1xf32>
    graph.yield %n : tensor<1x1xf32>
  }
  func.return %y : tensor<9x9xf32>
}"""
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph):
        ctx.load_dialect(dialect)
    module = Parser(ctx, src).parse_module()
    infer_module(module)
    module.verify()
    fn = first(module, "func.func")
    assert str(fn.function_type) == "(tensor<2x3xf32>) -> tensor<2x3xf32>"
    assert g.shape_of(first(module, "graph.neg").results[0]) == (2, 3)


def test_infer_shapes_refuses_an_oversized_unread_argument():
    src = """
func.func @main(%x: tensor<2x3xf32>, %big: tensor<1048576x1048576xf32>) -> tensor<2x3xf32> {
  func.return %x : tensor<2x3xf32>
}"""
    with pytest.raises(VerifyException) as e:
        infer_module(parse(src))
    assert str(e.value).startswith("@main argument 1: ")


# ------------------------------------------------------------------------------ _util


def test_util_splat_and_static_helpers():
    src = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[3.0, 3.0]> : tensor<2xf32>
  %d = graph.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %w = graph.param "w" : tensor<2xf32>
  %s = graph.add %c, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %y = graph.add %s, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %z = graph.add %y, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %z : tensor<2xf32>
}"""
    module = parse(src)
    ops = {op.results[0].name_hint: op for op in module.walk() if op.results}
    assert u.splat_value(ops["c"].results[0]) == 3.0
    assert u.splat_value(ops["d"].results[0]) is None
    assert u.splat_value(ops["w"].results[0]) is None
    assert u.is_static(ops["s"].results[0]) and not u.is_static(ops["y"].results[0])
    memo: dict = {}
    assert not u.is_static(ops["z"].results[0], memo) and u.is_static(ops["s"].results[0], memo)
    assert not u.is_splat(np.array([5.0])) and u.is_splat(np.array([5.0, 5.0]))
    i = u.constant_like(np.full((2, 3), 7), ops["c"].results[0])
    assert np.array_equal(i.to_numpy(), np.full((2, 3), 7.0, np.float32))
    assert u.result_dtype(ops["c"].results[0]) == np.float32


# ------------------------------------------- survivors of graph-passes --seed 42 (e714a92)


def test_a_chain_is_cut_to_its_longest_closed_prefix_one_op_shorter():
    """matmul -> relu -> exp with relu also read by a reduction: [matmul, relu, exp] is
    not closed (relu escapes), [matmul, relu] is: the cut tries every length (fuse.py's
    `range(len, 1, -1)`), not every other one."""
    src = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = graph.relu %m : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = graph.exp %r : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = graph.reduce_sum %r {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %e, %s : tensor<4x8xf32>, tensor<8xf32>
}"""
    module = same_values(src, "graph-fuse")
    kernels = [op.kernel.data for op in module.walk() if op.name == "graph.fused"]
    assert kernels == ["matmul_relu_0"]


def test_evaluate_nhwc_refuses_an_nchw_op():
    op = first(parse(conv(4, 3, 5, 6)), "graph.conv2d")
    with pytest.raises(AssertionError):
        evaluate_nhwc(op, [np.zeros((1, 5, 6, 3), np.float32), np.zeros((4, 3, 3, 3), np.float32)])


def test_winograd_refuses_a_conv_of_a_symbolic_input():
    """The input's shape is checked, not only the weight's (winograd.py `eligible`)."""
    t = 'tensor<?x8x8x8xf32, ["batch"]>'
    src = f"""
func.func @main(%x: {t}) -> {t} {{
  %k = graph.param "k" : tensor<8x8x3x3xf32>
  %y = graph.conv2d %x, %k {{pads = array<i64: 1, 1, 1, 1>}} : ({t}, tensor<8x8x3x3xf32>) -> {t}
  func.return %y : {t}
}}"""
    module = parse(src)
    assert not winograd.eligible(first(module, "graph.conv2d"))
    assert "conv2d" in names(run(module, "graph-winograd{where=all}"))


def test_gelu_whose_result_is_read_twice_is_still_gelu():
    """The root product's own users do not matter (canonicalize.py `_factors`, root=True):
    only the inner products must have one user."""
    src = gelu_src().replace(
        "func.return %y : tensor<4x8xf32>",
        "%z = graph.add %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  %q = graph.mul %z, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  func.return %q : tensor<4x8xf32>",
    )
    module = same_values(src, "graph-canonicalize")
    assert "gelu" in names(module) and "erf" not in names(module)


def test_an_empty_array_is_no_splat():
    """(graph-passes --seed 43, _util.py:111: `size > 1`, not `size != 1`, which would
    index the first element of an empty array)"""
    assert not u.is_splat(np.zeros((0, 3), np.float32))
    src = """
func.func @main(%x: tensor<0x3xf32>) -> tensor<0x3xf32> {
  func.return %x : tensor<0x3xf32>
}"""
    arg = first(parse(src), "func.func").body.block.args[0]
    empty = u.constant_like(np.zeros((0, 3)), arg)
    assert empty.to_numpy().shape == (0, 3)
