"""graph-fold-qdq (passes/graph/qdq.py) and the quantization ops' lowering
(passes/lower/quant_to_te.py), first round (issue 35, bench/mutation.py --area quant):
each decision of the QDQ rewrite pinned on hand-written graph IR (rewritten or left, the
exact ops it emits) with the folded program's values against the unfolded one on the numpy
reference; the lowering's forms (unit scales and zero points left out, per-axis
parameters, grouped and depthwise integer convs, the u8 x s8 dot's conditions) run on the
te evaluator against the reference, bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_graph_to_te import context

from dlpc.dialects.te import NSW_SUM
from dlpc.passes.graph.qdq import GraphFoldQdq
from dlpc.passes.lower.graph_to_te import GraphToTe
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference
from dlpc.reference.te import run_te

RNG = np.random.default_rng(35)


def fold(text: str):
    module = parse_module(text)
    GraphFoldQdq().apply(context(), module)
    module.verify()
    return module


def names(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("graph.")]


def same_values(text: str, inputs, weights=None, exact=False):
    """The folded program's results equal the unfolded one's on the reference."""
    weights = weights or {}
    want = run_reference(parse_module(text), inputs, weights)
    folded = fold(text)
    got = run_reference(folded, inputs, weights)
    for w, o in zip(want, got, strict=True):
        assert o.dtype == w.dtype and o.shape == w.shape
        if exact:
            np.testing.assert_array_equal(o, w)
        else:
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)
    return folded


def i8(*shape, lo=-128, hi=128, dtype=np.int8):
    return RNG.integers(lo, hi, shape).astype(dtype)


def main(args: str, body: str, ret: str, rtype: str) -> str:
    return f"func.func @main({args}) -> {rtype} {{\n{body}\n  func.return {ret} : {rtype}\n}}"


# ---------------------------------------------------------------- graph-fold-qdq


def matmul_text(
    xt="i8",
    xshape="2x8",
    wshape="8x4",
    sw="dense<0.5> : tensor<f32>",
    zw=None,
    waxis="",
    attrs="",
    out="2x4",
    wparam=False,
    sx="dense<0.5> : tensor<f32>",
):
    zwt = zw or f"dense<0> : tensor<{xt if xt != 'ui8' else 'i8'}>"
    wdecl = "" if wparam else f'  %wq = graph.param "wq" : tensor<{wshape}xi8>\n'
    wargs = f", %wq: tensor<{wshape}xi8>" if wparam else ""
    swt = sw.split(" : ")[1]
    zwtt = zwt.split(" : ")[1]
    sxt = sx.split(" : ")[1]
    return main(
        f"%xq: tensor<{xshape}x{xt}>{wargs}",
        f"  %sx = graph.constant {sx}\n"
        f"  %zx = graph.constant dense<3> : tensor<{xt}>\n"
        f"{wdecl}"
        f"  %sw = graph.constant {sw}\n"
        f"  %zw = graph.constant {zwt}\n"
        f"  %x = graph.dequantize %xq, %sx, %zx : (tensor<{xshape}x{xt}>, {sxt}, tensor<{xt}>)"
        f" -> tensor<{xshape}xf32>\n"
        f"  %w = graph.dequantize %wq, %sw, %zw {waxis} : (tensor<{wshape}xi8>, {swt}, {zwtt})"
        f" -> tensor<{wshape}xf32>\n"
        f"  %y = graph.matmul %x, %w {attrs} : (tensor<{xshape}xf32>, tensor<{wshape}xf32>)"
        f" -> tensor<{out}xf32>",
        "%y",
        f"tensor<{out}xf32>",
    )


def test_matmul_with_a_parameter_weight_is_transposed_and_rescaled():
    """A graph.param weight is static: read transposed; a per-tensor [1] scale needs no
    reshape; the values are the float program's."""
    text = matmul_text(sw="dense<[0.25]> : tensor<1xf32>", zw="dense<[-2]> : tensor<1xi8>")
    folded = same_values(text, [i8(2, 8)], {"wq": i8(8, 4)})
    assert names(folded) == [
        "graph.constant", "graph.constant", "graph.param", "graph.constant", "graph.constant",
        "graph.transpose", "graph.matmul_integer", "graph.cast", "graph.mul", "graph.mul",
    ]  # fmt: skip


def test_matmul_per_column_scale_at_a_negative_axis():
    """axis -1 of a [K, N] weight is N: per output column, rewritten, no reshape (the
    scale is [N] already)."""
    text = matmul_text(
        sw="dense<[0.25, 0.5, 1.0, 2.0]> : tensor<4xf32>",
        zw="dense<[0, 1, -1, 2]> : tensor<4xi8>",
        waxis="{axis = -1 : i64}",
    )
    folded = same_values(text, [i8(2, 8)], {"wq": i8(8, 4)})
    assert "graph.matmul_integer" in names(folded) and "graph.reshape" not in names(folded)
    assert "graph.dequantize" not in names(folded)


def test_batched_matmul_is_rewritten_but_rank_three_weights_are_not():
    text = matmul_text(xshape="3x2x8", out="3x2x4")
    folded = same_values(text, [i8(3, 2, 8)], {"wq": i8(8, 4)})
    assert "graph.matmul_integer" in names(folded)
    kept = matmul_text(xshape="3x2x8", wshape="3x8x4", out="3x2x4")
    assert "graph.matmul_integer" not in names(fold(kept))


@pytest.mark.parametrize(
    "attrs,xshape,wshape,out",
    [
        ("{transpose_a = true}", "8x2", "8x4", "2x4"),
        ("{transpose_b = true}", "2x8", "4x8", "2x4"),
    ],
)
def test_transposed_matmuls_are_left_alone(attrs, xshape, wshape, out):
    text = matmul_text(xshape=xshape, wshape=wshape, attrs=attrs, out=out)
    folded = same_values(
        text, [i8(*map(int, xshape.split("x")))], {"wq": i8(*map(int, wshape.split("x")))}
    )
    assert names(folded).count("graph.dequantize") == 2
    assert "graph.matmul_integer" not in names(folded)


def test_per_row_weight_scale_of_a_matmul_is_left_alone():
    """A weight scale along K (axis 0 of [K, N]) is not one per output column."""
    text = matmul_text(
        sw="dense<[0.25, 0.5, 1.0, 2.0, 1.0, 1.0, 1.0, 0.5]> : tensor<8xf32>",
        zw="dense<0> : tensor<8xi8>",
        waxis="{axis = 0 : i64}",
    )
    assert "graph.matmul_integer" not in names(fold(text))


def test_sixteen_bit_and_f16_dequantizes_are_left_alone():
    """Only 8-bit integers with f32 scales become integer products."""
    i16 = main(
        "%xq: tensor<2x8xi16>, %wq: tensor<8x4xi8>",
        "  %s = graph.constant dense<0.5> : tensor<f32>\n"
        "  %z16 = graph.constant dense<0> : tensor<i16>\n"
        "  %z = graph.constant dense<0> : tensor<i8>\n"
        "  %x = graph.dequantize %xq, %s, %z16 : (tensor<2x8xi16>, tensor<f32>, tensor<i16>) -> tensor<2x8xf32>\n"
        "  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>\n"
        "  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>",
        "%y",
        "tensor<2x4xf32>",
    )
    assert "graph.matmul_integer" not in names(fold(i16))
    f16 = main(
        "%xq: tensor<2x8xi8>, %wq: tensor<8x4xi8>",
        "  %s = graph.constant dense<0.5> : tensor<f16>\n"
        "  %z = graph.constant dense<0> : tensor<i8>\n"
        "  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f16>, tensor<i8>) -> tensor<2x8xf16>\n"
        "  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f16>, tensor<i8>) -> tensor<8x4xf16>\n"
        "  %y = graph.matmul %x, %w : (tensor<2x8xf16>, tensor<8x4xf16>) -> tensor<2x4xf16>",
        "%y",
        "tensor<2x4xf16>",
    )
    assert "graph.matmul_integer" not in names(fold(f16))


def linear_text(bias: bool, xshape="2x8", out="2x4", sw="dense<0.5> : tensor<f32>", waxis=""):
    swt = sw.split(" : ")[1]
    zw = (
        "dense<0> : tensor<i8>"
        if swt == "tensor<f32>"
        else f"dense<0> : {swt.replace('f32', 'i8')}"
    )
    b = ", %b: tensor<4xf32>" if bias else ""
    return main(
        f"%xq: tensor<{xshape}xi8>, %wq: tensor<4x8xi8>{b}",
        "  %sx = graph.constant dense<0.5> : tensor<f32>\n"
        "  %zx = graph.constant dense<-3> : tensor<i8>\n"
        f"  %sw = graph.constant {sw}\n"
        f"  %zw = graph.constant {zw}\n"
        f"  %x = graph.dequantize %xq, %sx, %zx : (tensor<{xshape}xi8>, tensor<f32>, tensor<i8>) -> tensor<{xshape}xf32>\n"
        f"  %w = graph.dequantize %wq, %sw, %zw {waxis} : (tensor<4x8xi8>, {swt}, {zw.split(' : ')[1]}) -> tensor<4x8xf32>\n"
        f"  %y = graph.linear %x, %w{', %b' if bias else ''} : (tensor<{xshape}xf32>, tensor<4x8xf32>"
        f"{', tensor<4xf32>' if bias else ''}) -> tensor<{out}xf32>",
        "%y",
        f"tensor<{out}xf32>",
    )


def test_linear_without_bias_has_no_add():
    folded = same_values(linear_text(False), [i8(2, 8), i8(4, 8)])
    assert names(folded)[-3:] == ["graph.cast", "graph.mul", "graph.mul"]
    assert "graph.add" not in names(folded)


def test_linear_with_bias_and_per_output_channel_scale():
    text = linear_text(
        True, sw="dense<[0.25, 0.5, 1.0, 2.0]> : tensor<4xf32>", waxis="{axis = 0 : i64}"
    )
    b = RNG.standard_normal(4).astype(np.float32)
    folded = same_values(text, [i8(2, 8), i8(4, 8), b])
    assert names(folded)[-4:] == ["graph.cast", "graph.mul", "graph.mul", "graph.add"]


def test_linear_weight_scale_along_k_is_left_alone():
    text = linear_text(
        False,
        sw="dense<[1.0, 0.5, 0.5, 1.0, 1.0, 2.0, 1.0, 0.5]> : tensor<8xf32>",
        waxis="{axis = 1 : i64}",
    )
    assert "graph.matmul_integer" not in names(fold(text))


def conv_text(
    bias=True,
    layout="",
    sw="dense<[0.25, 0.5]> : tensor<2xf32>",
    waxis="{axis = 0 : i64}",
    attrs="strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>",
    xs="1x3x8x8",
    ws="2x3x3x3",
    out="1x2x4x4",
):
    swt = sw.split(" : ")[1]
    zwt = swt.replace("f32", "i8")
    b = ", %b: tensor<2xf32>" if bias else ""
    sep = ", " if layout and attrs else ""
    return main(
        f"%xq: tensor<{xs}xi8>, %wq: tensor<{ws}xi8>{b}",
        "  %sx = graph.constant dense<0.5> : tensor<f32>\n"
        "  %zx = graph.constant dense<-1> : tensor<i8>\n"
        f"  %sw = graph.constant {sw}\n"
        f"  %zw = graph.constant dense<0> : {zwt}\n"
        f"  %x = graph.dequantize %xq, %sx, %zx : (tensor<{xs}xi8>, tensor<f32>, tensor<i8>) -> tensor<{xs}xf32>\n"
        f"  %w = graph.dequantize %wq, %sw, %zw {waxis} : (tensor<{ws}xi8>, {swt}, {zwt}) -> tensor<{ws}xf32>\n"
        f"  %y = graph.conv2d %x, %w{', %b' if bias else ''} {{{attrs}{sep}{layout}}} : (tensor<{xs}xf32>, "
        f"tensor<{ws}xf32>{', tensor<2xf32>' if bias else ''}) -> tensor<{out}xf32>",
        "%y",
        f"tensor<{out}xf32>",
    )


def test_conv_without_bias_and_with_a_per_tensor_scale():
    """A per-tensor weight scale is not reshaped; without a bias nothing is added; the
    window attributes (dilations, groups) carry over."""
    text = conv_text(
        bias=False, sw="dense<0.25> : tensor<f32>", waxis="",
        attrs="dilations = array<i64: 2, 2>, groups = 2 : i64", xs="1x4x7x7", ws="2x2x3x3",
        out="1x2x3x3",
    )  # fmt: skip
    folded = same_values(text, [i8(1, 4, 7, 7), i8(2, 2, 3, 3)])
    assert names(folded)[-4:] == ["graph.conv_integer", "graph.cast", "graph.mul", "graph.mul"]
    conv = next(op for op in folded.walk() if op.name == "graph.conv_integer")
    assert list(conv.dilations) == [2, 2] and conv.groups == 2


def test_conv_with_bias_matches_the_float_program():
    text = conv_text()
    b = RNG.standard_normal(2).astype(np.float32)
    same_values(text, [i8(1, 3, 8, 8), i8(2, 3, 3, 3), b])


def test_conv_weight_scale_along_input_channels_is_left_alone():
    text = conv_text(
        sw="dense<[0.25, 0.5, 1.0]> : tensor<3xf32>",
        waxis="{axis = 1 : i64}",
        xs="1x3x8x8",
        ws="3x3x3x3",
        out="1x3x4x4",
    )
    text = text.replace("tensor<2xf32>", "tensor<3xf32>")
    assert "graph.conv_integer" not in names(fold(text))


def test_nhwc_conv_is_left_alone():
    text = conv_text(
        bias=False, layout='layout = "nhwc"', xs="1x8x8x3", ws="2x3x3x3", out="1x4x4x2"
    )
    assert "graph.conv_integer" not in names(fold(text))


def test_a_per_row_activation_scale_is_left_alone():
    text = main(
        "%xq: tensor<2x8xi8>, %wq: tensor<8x4xi8>",
        "  %sx = graph.constant dense<[0.5, 0.25]> : tensor<2xf32>\n"
        "  %zx = graph.constant dense<3> : tensor<2xi8>\n"
        "  %s = graph.constant dense<0.5> : tensor<f32>\n"
        "  %z = graph.constant dense<0> : tensor<i8>\n"
        "  %x = graph.dequantize %xq, %sx, %zx {axis = 0 : i64} : (tensor<2x8xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x8xf32>\n"
        "  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>\n"
        "  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>",
        "%y",
        "tensor<2x4xf32>",
    )
    assert "graph.matmul_integer" not in names(fold(text))


def test_a_dequantize_another_op_reads_stays():
    """The matmul is rewritten; its dequantized input also feeds a relu, so that
    dequantize stays while the weight's goes."""
    text = main(
        "%xq: tensor<2x8xi8>, %wq: tensor<8x4xi8>",
        "  %s = graph.constant dense<0.5> : tensor<f32>\n"
        "  %z = graph.constant dense<1> : tensor<i8>\n"
        "  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>\n"
        "  %w = graph.dequantize %wq, %s, %z : (tensor<8x4xi8>, tensor<f32>, tensor<i8>) -> tensor<8x4xf32>\n"
        "  %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>\n"
        "  %r = graph.relu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>",
        "%y, %r",
        "tensor<2x4xf32>, tensor<2x8xf32>",
    ).replace("-> tensor<2x4xf32>, tensor<2x8xf32> {", "-> (tensor<2x4xf32>, tensor<2x8xf32>) {")
    folded = same_values(text, [i8(2, 8), i8(8, 4)])
    assert names(folded).count("graph.dequantize") == 1
    assert "graph.matmul_integer" in names(folded)


def requant_text(
    s1="dense<0.5> : tensor<f32>",
    s2="dense<0.5> : tensor<f32>",
    z1="dense<-3> : tensor<i8>",
    z2="dense<-3> : tensor<i8>",
    axis="",
):
    st, zt = s1.split(" : ")[1], z1.split(" : ")[1]
    st2, zt2 = s2.split(" : ")[1], z2.split(" : ")[1]
    qt = zt2.split("x")[-1].rstrip(">") if "x" in zt2 else zt2[len("tensor<") : -1]
    return main(
        "%q: tensor<2x3xi8>",
        f"  %s = graph.constant {s1}\n  %z = graph.constant {z1}\n"
        f"  %s2 = graph.constant {s2}\n  %z2 = graph.constant {z2}\n"
        f"  %x = graph.dequantize %q, %s, %z : (tensor<2x3xi8>, {st}, {zt}) -> tensor<2x3xf32>\n"
        f"  %y = graph.quantize %x, %s2, %z2 {axis} : (tensor<2x3xf32>, {st2}, {zt2}) -> tensor<2x3x{qt}>",
        "%y",
        f"tensor<2x3x{qt}>",
    )


def test_requantization_with_equal_constants_cancels():
    folded = same_values(requant_text(), [i8(2, 3)], exact=True)
    assert "graph.quantize" not in names(folded) and "graph.dequantize" not in names(folded)


def test_requantization_with_the_same_values_cancels():
    text = requant_text().replace("%x, %s2, %z2", "%x, %s, %z")
    folded = same_values(text, [i8(2, 3)], exact=True)
    assert "graph.quantize" not in names(folded)


@pytest.mark.parametrize(
    "change",
    [
        {"s2": "dense<0.25> : tensor<f32>"},  # another scale
        {"z2": "dense<-2> : tensor<i8>"},  # another zero point
        {"z2": "dense<0> : tensor<ui8>"},  # another type
        {
            "s2": "dense<0.5> : tensor<2xf32>",
            "z2": "dense<-3> : tensor<2xi8>",
            "axis": "{axis = 0 : i64}",
        },
    ],
)
def test_requantization_to_other_parameters_stays(change):
    folded = same_values(requant_text(**change), [i8(2, 3)], exact=True)
    assert names(folded).count("graph.quantize") == 1


def test_requantization_after_a_per_axis_dequantize_stays():
    text = requant_text(s1="dense<0.5> : tensor<2xf32>", z1="dense<-3> : tensor<2xi8>").replace(
        "%x = graph.dequantize %q, %s, %z :", "%x = graph.dequantize %q, %s, %z {axis = 0 : i64} :"
    )
    folded = same_values(text, [i8(2, 3)], exact=True)
    assert names(folded).count("graph.quantize") == 1


def test_requantization_with_a_non_constant_scale_of_another_value_stays():
    text = main(
        "%q: tensor<2x3xi8>, %s: tensor<f32>, %s2: tensor<f32>",
        "  %z = graph.constant dense<-3> : tensor<i8>\n"
        "  %x = graph.dequantize %q, %s, %z : (tensor<2x3xi8>, tensor<f32>, tensor<i8>) -> tensor<2x3xf32>\n"
        "  %y = graph.quantize %x, %s2, %z : (tensor<2x3xf32>, tensor<f32>, tensor<i8>) -> tensor<2x3xi8>",
        "%y",
        "tensor<2x3xi8>",
    )
    half, quarter = np.float32(0.5).reshape(()), np.float32(0.25).reshape(())
    folded = same_values(text, [i8(2, 3, lo=-60, hi=60), half, quarter], exact=True)
    assert names(folded).count("graph.quantize") == 1


def hoist_text(q="i8", scale="dense<0.5> : tensor<f32>", op="reshape"):
    st = scale.split(" : ")[1]
    pool = (
        "  %p = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : "
        "(tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>"
        if op == "pool"
        else "  %p = graph.reshape %x {shape = array<i64: 2, 16>} : (tensor<1x2x4x4xf32>) -> tensor<2x16xf32>"
    )
    out = "tensor<1x2x2x2xf32>" if op == "pool" else "tensor<2x16xf32>"
    return main(
        f"%q: tensor<1x2x4x4x{q}>",
        f"  %s = graph.constant {scale}\n  %z = graph.constant dense<1> : tensor<{q}>\n"
        f"  %x = graph.dequantize %q, %s, %z : (tensor<1x2x4x4x{q}>, {st}, tensor<{q}>) -> tensor<1x2x4x4xf32>\n"
        + pool,
        "%p",
        out,
    )


@pytest.mark.parametrize(
    "q,op", [("i8", "pool"), ("ui8", "pool"), ("i8", "reshape"), ("ui8", "reshape")]
)
def test_pool_and_reshape_move_onto_the_integers(q, op):
    folded = same_values(hoist_text(q=q, op=op), [i8(1, 2, 4, 4, lo=0 if q == "ui8" else -128,
                         hi=256 if q == "ui8" else 128, dtype=np.uint8 if q == "ui8" else np.int8)],
                         exact=True)  # fmt: skip
    kinds = names(folded)
    moved = "graph.max_pool2d" if op == "pool" else "graph.reshape"
    assert kinds.index(moved) < kinds.index("graph.dequantize")
    assert kinds.count("graph.dequantize") == 1


@pytest.mark.parametrize(
    "q,scale",
    [
        ("i16", "dense<0.5> : tensor<f32>"),  # not 8-bit
        ("i8", "dense<0.0> : tensor<f32>"),  # a zero scale (not increasing)
        ("i8", "dense<[0.5, 0.25]> : tensor<2xf32>"),  # per axis
    ],
)
def test_pool_stays_on_floats(q, scale):
    text = hoist_text(q=q, scale=scale, op="pool")
    if "2xf32" in scale:
        text = text.replace("dense<1> : tensor<i8>", "dense<1> : tensor<2xi8>").replace(
            "tensor<f32>, tensor<i8>", "tensor<2xf32>, tensor<2xi8>"
        )
        text = text.replace("%s, %z :", "%s, %z {axis = 1 : i64} :").replace(
            f"{scale.split(' : ')[1]}, tensor<i8>", "tensor<2xf32>, tensor<2xi8>"
        )
    dt = np.int16 if q == "i16" else np.int8
    folded = same_values(text, [i8(1, 2, 4, 4, dtype=dt)], exact=True)
    kinds = names(folded)
    assert kinds.index("graph.dequantize") < kinds.index("graph.max_pool2d")


def test_pool_over_a_non_constant_scale_stays_on_floats():
    text = main(
        "%q: tensor<1x2x4x4xi8>, %s: tensor<f32>",
        "  %z = graph.constant dense<1> : tensor<i8>\n"
        "  %x = graph.dequantize %q, %s, %z : (tensor<1x2x4x4xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x4x4xf32>\n"
        "  %p = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : "
        "(tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>",
        "%p",
        "tensor<1x2x2x2xf32>",
    )
    folded = same_values(text, [i8(1, 2, 4, 4), np.float32(-0.5).reshape(())], exact=True)
    kinds = names(folded)
    assert kinds.index("graph.dequantize") < kinds.index("graph.max_pool2d")


def test_every_function_of_the_module_is_folded():
    one = matmul_text().replace("@main", "@first")
    two = requant_text().replace("@main", "@second")
    folded = fold(one + "\n" + two)
    kinds = names(folded)
    assert "graph.matmul_integer" in kinds and "graph.quantize" not in kinds


# ------------------------------------------------------------------ quant_to_te


def lower_check(text: str, inputs, weights=None):
    """Lowered to te, run on the te evaluator: the reference's values bit for bit."""
    weights = weights or {}
    module = parse_module(text)
    want = run_reference(module, inputs, weights)
    GraphToTe().apply(context(), module)
    module.verify()
    got = run_te(module, inputs, weights)
    for w, o in zip(want, got, strict=True):
        assert o.dtype == w.dtype and o.shape == w.shape
        np.testing.assert_array_equal(o, w)
    return module


def te_names(module) -> list[str]:
    return [op.name for op in module.walk()]


def quantize_text(scale, zero, axis="", xshape="2x3", rank_out=None):
    st, zt = scale.split(" : ")[1], zero.split(" : ")[1]
    qt = zt[:-1].split("x")[-1] if "x" in zt else zt[len("tensor<") : -1]
    return main(
        f"%x: tensor<{xshape}xf32>",
        f"  %s = graph.constant {scale}\n  %z = graph.constant {zero}\n"
        f"  %q = graph.quantize %x, %s, %z {axis} : (tensor<{xshape}xf32>, {st}, {zt}) -> tensor<{xshape}x{qt}>",
        "%q",
        f"tensor<{xshape}x{qt}>",
    )


def quant_inputs(*shape):
    x = (RNG.integers(-700, 700, shape) / 4).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    return [x]


@pytest.mark.parametrize(
    "scale,zero,axis,divides,adds",
    [
        ("dense<1.0> : tensor<f32>", "dense<0> : tensor<i8>", "", False, False),
        ("dense<1.0> : tensor<f32>", "dense<5> : tensor<ui8>", "", False, True),
        ("dense<0.5> : tensor<1xf32>", "dense<0> : tensor<1xi8>", "", True, False),
        (
            "dense<[0.5, 1.0, 0.25]> : tensor<3xf32>",
            "dense<[0, 3, -2]> : tensor<3xi8>",
            "{axis = -1 : i64}",
            True,
            True,
        ),
        (
            "dense<[0.5, 2.0]> : tensor<2xf32>",
            "dense<[7, 0]> : tensor<2xui8>",
            "{axis = 0 : i64}",
            True,
            True,
        ),
        ("dense<0.5> : tensor<f32>", "dense<-3> : tensor<i16>", "", True, True),
    ],
)
def test_quantize_leaves_out_unit_scales_and_zero_points(scale, zero, axis, divides, adds):
    """Per tensor, per [1], per axis (negative too), i8 / ui8 / i16: the reference's
    values, nan to the minimum, infinities saturated; a constant scale of ones is not
    divided by and a zero point of zeros not added (the IR has no such op)."""
    module = lower_check(quantize_text(scale, zero, axis), quant_inputs(2, 3))
    ops = te_names(module)
    assert ("arith.divf" in ops) == divides
    assert ("arith.addf" in ops) == adds


def test_quantize_of_a_rank_zero_input():
    text = main(
        "%x: tensor<f32>",
        "  %s = graph.constant dense<0.5> : tensor<f32>\n  %z = graph.constant dense<1> : tensor<i8>\n"
        "  %q = graph.quantize %x, %s, %z : (tensor<f32>, tensor<f32>, tensor<i8>) -> tensor<i8>",
        "%q",
        "tensor<i8>",
    )
    for v in (2.75, -500.0, 70.0):
        lower_check(text, [np.float32(v).reshape(())])


@pytest.mark.parametrize("axis", ["{axis = 0 : i64}", "{axis = -2 : i64}", "{axis = 1 : i64}"])
def test_dequantize_per_axis(axis):
    n = 3 if "1 :" in axis else 2
    text = main(
        "%q: tensor<2x3xui8>",
        f"  %s = graph.constant dense<{[0.5, 0.25, 2.0][:n]}> : tensor<{n}xf32>\n"
        f"  %z = graph.constant dense<{[0, 255, 9][:n]}> : tensor<{n}xui8>\n"
        f"  %x = graph.dequantize %q, %s, %z {axis} : (tensor<2x3xui8>, tensor<{n}xf32>, tensor<{n}xui8>) -> tensor<2x3xf32>",
        "%x",
        "tensor<2x3xf32>",
    )
    lower_check(text, [i8(2, 3, lo=0, hi=256, dtype=np.uint8)])


def test_dequantize_of_a_rank_zero_input_with_a_one_element_scale():
    text = main(
        "%q: tensor<i8>",
        "  %s = graph.constant dense<0.5> : tensor<1xf32>\n  %z = graph.constant dense<-7> : tensor<1xi8>\n"
        "  %x = graph.dequantize %q, %s, %z : (tensor<i8>, tensor<1xf32>, tensor<1xi8>) -> tensor<f32>",
        "%x",
        "tensor<f32>",
    )
    lower_check(text, [np.int8(100).reshape(())])


@pytest.mark.parametrize(
    "groups,xs,ws,zw",
    [
        (3, "1x3x5x5", "3x1x3x3", "dense<[1, -2, 0]> : tensor<3xi8>"),  # depthwise
        (2, "1x4x5x5", "4x2x3x3", "dense<[1, -2, 0, 5]> : tensor<4xi8>"),  # grouped
        (1, "1x3x5x5", "2x3x3x3", "dense<0> : tensor<i8>"),  # plain, no weight zero point
    ],
)
def test_grouped_and_depthwise_integer_convs(groups, xs, ws, zw):
    """The input channel each output channel reads: its own (depthwise), its group's
    (grouped), every one (plain); padding reads the zero point."""
    o = ws.split("x")[0]
    text = main(
        f"%x: tensor<{xs}xi8>, %w: tensor<{ws}xi8>",
        f"  %zx = graph.constant dense<4> : tensor<i8>\n  %zw = graph.constant {zw}\n"
        f"  %y = graph.conv_integer %x, %w, %zx, %zw {{pads = array<i64: 1, 1, 1, 1>, groups = {groups} : i64}} : "
        f"(tensor<{xs}xi8>, tensor<{ws}xi8>, tensor<i8>, {zw.split(' : ')[1]}) -> tensor<1x{o}x5x5xi32>",
        "%y",
        f"tensor<1x{o}x5x5xi32>",
    )
    lower_check(text, [i8(*map(int, xs.split("x"))), i8(*map(int, ws.split("x")))])


@pytest.mark.parametrize(
    "pads", ["", "pads = array<i64: 1, 0, 1, 0>", "pads = array<i64: 0, 2, 0, 1>"]
)
def test_integer_conv_with_a_non_constant_zero_point(pads):
    """A zero point that is an argument: a padded position contributes 0 (no padded read
    of a constant); padding along one dim only."""
    h = 4 + (2 if "1, 0, 1" in pads else 0)
    w = 4 + (3 if "0, 2" in pads else 0)
    text = main(
        "%x: tensor<1x2x4x4xui8>, %w: tensor<2x2x3x3xi8>, %zx: tensor<ui8>",
        "  %zw = graph.constant dense<[1, 0]> : tensor<2xi8>\n"
        f"  %y = graph.conv_integer %x, %w, %zx, %zw {{{pads}}} : (tensor<1x2x4x4xui8>, tensor<2x2x3x3xi8>, "
        f"tensor<ui8>, tensor<2xi8>) -> tensor<1x2x{h - 2}x{w - 2}xi32>",
        "%y",
        f"tensor<1x2x{h - 2}x{w - 2}xi32>",
    )
    lower_check(
        text,
        [i8(1, 2, 4, 4, lo=0, hi=256, dtype=np.uint8), i8(2, 2, 3, 3), np.uint8(200).reshape(())],
    )


def test_integer_conv_with_padding_and_a_zero_zero_point():
    """A constant zero point of 0 is left out of the sum, but a padded read still gives
    it (0): the values stay the reference's."""
    text = main(
        "%x: tensor<1x1x3x3xi8>, %w: tensor<1x1x3x3xi8>",
        "  %z = graph.constant dense<0> : tensor<i8>\n"
        "  %y = graph.conv_integer %x, %w, %z, %z {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x1x3x3xi8>, "
        "tensor<1x1x3x3xi8>, tensor<i8>, tensor<i8>) -> tensor<1x1x3x3xi32>",
        "%y",
        "tensor<1x1x3x3xi32>",
    )
    module = lower_check(text, [i8(1, 1, 3, 3), i8(1, 1, 3, 3)])
    assert not re.search(r"arith.subi .* : i32", str(module))  # (index arithmetic only)


def matmul_integer_text(a, b, za, zb, tb=False, out=None):
    at, bt = f"tensor<{a}>", f"tensor<{b}>"
    zat, zbt = za.split(" : ")[1], zb.split(" : ")[1]
    return main(
        f"%a: {at}, %b: {bt}",
        f"  %za = graph.constant {za}\n  %zb = graph.constant {zb}\n"
        f"  %y = graph.matmul_integer %a, %b, %za, %zb {{transpose_b = {str(tb).lower()}}} : "
        f"({at}, {bt}, {zat}, {zbt}) -> tensor<{out}xi32>",
        "%y",
        f"tensor<{out}xi32>",
    )


@pytest.mark.parametrize(
    "a,b,za,zb,tb,out,dot",
    [
        # u8 x s8 without a weight zero point: the dot form (column sums of a parameter)
        (
            "2x5xui8",
            "5x3xi8",
            "dense<[0, 255]> : tensor<2xui8>",
            "dense<0> : tensor<i8>",
            False,
            "2x3",
            True,
        ),
        (
            "2x5xi8",
            "3x5xi8",
            "dense<[-128]> : tensor<1xi8>",
            "dense<0> : tensor<1xi8>",
            True,
            "2x3",
            True,
        ),
        # a weight zero point, an unsigned weight, a rank-3 weight: the plain form
        (
            "2x5xi8",
            "5x3xi8",
            "dense<1> : tensor<i8>",
            "dense<[1, 0, -1]> : tensor<3xi8>",
            False,
            "2x3",
            False,
        ),
        (
            "2x5xi8",
            "5x3xui8",
            "dense<1> : tensor<i8>",
            "dense<0> : tensor<ui8>",
            False,
            "2x3",
            False,
        ),
        (
            "2x2x5xi8",
            "2x5x3xi8",
            "dense<1> : tensor<i8>",
            "dense<0> : tensor<i8>",
            False,
            "2x2x3",
            False,
        ),
        # a broadcast batch of the activation over a 2-D weight
        (
            "3x2x5xui8",
            "5x3xi8",
            "dense<7> : tensor<ui8>",
            "dense<0> : tensor<i8>",
            False,
            "3x2x3",
            True,
        ),
    ],
)
def test_matmul_integer_forms(a, b, za, zb, tb, out, dot):
    def arr(spec):
        *dims, t = spec.split("x")
        return i8(*map(int, dims), lo=0 if t == "ui8" else -128, hi=256 if t == "ui8" else 128,
                  dtype=np.uint8 if t == "ui8" else np.int8)  # fmt: skip

    module = lower_check(matmul_integer_text(a, b, za, zb, tb, out), [arr(a), arr(b)])
    kernels = [op for op in module.walk() if op.name == "te.reduce"]
    assert any(NSW_SUM in k.attributes for k in kernels) == dot
    assert (len(kernels) == 2) == dot  # (the column sums of a parameter weight: a kernel)
    assert ("arith.constant 128" in str(module)) == (dot and "xi8" == a[-3:] and "ui8" not in a)


def test_u8_dot_needs_k_below_the_i32_bound():
    """K * 255 * 128 < 2**31: K = 65793 takes the dot form, K = 65794 the plain one
    (lowered only: the IR says which)."""
    for k, dot in ((65793, True), (65794, False)):
        text = matmul_integer_text(
            f"1x{k}xi8", f"{k}x1xi8", "dense<0> : tensor<i8>", "dense<0> : tensor<i8>", out="1x1"
        )
        module = parse_module(text)
        GraphToTe().apply(context(), module)
        kernels = [op for op in module.walk() if op.name == "te.reduce"]
        assert any(NSW_SUM in k.attributes for k in kernels) == dot, k


def test_u8_dot_with_a_constant_weight_sums_its_columns_at_compile_time():
    text = main(
        "%a: tensor<2x4xi8>",
        "  %w = graph.constant dense<[[1, -128, 127], [5, 0, -1], [-7, 3, 2], [127, 127, -128]]> : tensor<4x3xi8>\n"
        "  %za = graph.constant dense<-5> : tensor<i8>\n  %zb = graph.constant dense<0> : tensor<i8>\n"
        "  %y = graph.matmul_integer %a, %w, %za, %zb : (tensor<2x4xi8>, tensor<4x3xi8>, tensor<i8>, tensor<i8>)"
        " -> tensor<2x3xi32>",
        "%y",
        "tensor<2x3xi32>",
    )
    module = lower_check(text, [i8(2, 4)])
    sums = [
        op
        for op in module.walk()
        if op.name == "graph.constant" and "xi32" in str(op.results[0].type)
    ]
    assert len(sums) == 1 and "dense<[126, 2, 0]>" in str(sums[0])
    assert len([op for op in module.walk() if op.name == "te.reduce"]) == 1


def test_a_float_weight_is_left_alone():
    """Only a product of two dequantized operands becomes an integer one."""
    text = main(
        "%xq: tensor<2x8xi8>, %wf: tensor<8x4xf32>",
        "  %s = graph.constant dense<0.5> : tensor<f32>\n"
        "  %z = graph.constant dense<0> : tensor<i8>\n"
        "  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<i8>)"
        " -> tensor<2x8xf32>\n"
        "  %y = graph.matmul %x, %wf : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>",
        "%y",
        "tensor<2x4xf32>",
    )
    folded = same_values(text, [i8(2, 8), RNG.standard_normal((8, 4)).astype(np.float32)])
    assert names(folded).count("graph.dequantize") == 1
    assert "graph.matmul_integer" not in names(folded)


@pytest.mark.parametrize(
    "xshape,wshape,out",
    [("8", "8x4", "4"), ("2x8", "8", "2")],
)
def test_matmul_with_a_vector_operand_is_left_alone(xshape, wshape, out):
    """matmul_integer takes operands of rank >= 2 only: a vector times a matrix, or a
    matrix times a vector, stays a float matmul."""
    text = matmul_text(xshape=xshape, wshape=wshape, out=out)
    shape = tuple(map(int, xshape.split("x")))
    wsh = tuple(map(int, wshape.split("x")))
    folded = same_values(text, [i8(*shape)], {"wq": i8(*wsh)})
    assert "graph.matmul_integer" not in names(folded)
    assert names(folded).count("graph.dequantize") == 2


def test_linear_of_a_vector_input_is_left_alone():
    text = linear_text(False, xshape="8", out="4")
    folded = same_values(text, [i8(8), i8(4, 8)])
    assert "graph.matmul_integer" not in names(folded)


def test_linear_with_a_row_bias_and_a_batch():
    """A [1, O] bias and a [B, S, K] input: the add broadcasts as the float linear's."""
    text = linear_text(True, xshape="3x2x8", out="3x2x4").replace(
        "tensor<4xf32>", "tensor<1x4xf32>"
    )
    b = RNG.standard_normal((1, 4)).astype(np.float32)
    folded = same_values(text, [i8(3, 2, 8), i8(4, 8), b])
    assert names(folded)[-4:] == ["graph.cast", "graph.mul", "graph.mul", "graph.add"]


@pytest.mark.parametrize(
    "groups,xs,ws",
    [
        (2, "1x4x5x5", "2x2x3x3"),  # one output channel a group, two input channels
        (2, "1x2x5x5", "4x1x3x3"),  # two output channels a group, one input channel
    ],
)
def test_integer_convs_whose_groups_have_one_output_or_one_input_channel(groups, xs, ws):
    o = ws.split("x")[0]
    text = main(
        f"%x: tensor<{xs}xi8>, %w: tensor<{ws}xi8>",
        "  %zx = graph.constant dense<-3> : tensor<i8>\n  %zw = graph.constant dense<2> : tensor<i8>\n"
        f"  %y = graph.conv_integer %x, %w, %zx, %zw {{groups = {groups} : i64}} : "
        f"(tensor<{xs}xi8>, tensor<{ws}xi8>, tensor<i8>, tensor<i8>) -> tensor<1x{o}x3x3xi32>",
        "%y",
        f"tensor<1x{o}x3x3xi32>",
    )
    lower_check(text, [i8(*map(int, xs.split("x"))), i8(*map(int, ws.split("x")))])


def test_u8_dot_with_a_constant_transposed_weight_sums_its_rows():
    """transpose_b: the [N, K] constant's sums along K are per row."""
    text = main(
        "%a: tensor<2x4xui8>",
        "  %w = graph.constant dense<[[1, -128, 127, 4], [5, 0, -1, 9], [-7, 3, 2, 1]]> : tensor<3x4xi8>\n"
        "  %za = graph.constant dense<200> : tensor<ui8>\n  %zb = graph.constant dense<0> : tensor<i8>\n"
        "  %y = graph.matmul_integer %a, %w, %za, %zb {transpose_b = true} : (tensor<2x4xui8>, tensor<3x4xi8>,"
        " tensor<ui8>, tensor<i8>) -> tensor<2x3xi32>",
        "%y",
        "tensor<2x3xi32>",
    )
    module = lower_check(text, [i8(2, 4, lo=0, hi=256, dtype=np.uint8)])
    sums = [
        op
        for op in module.walk()
        if op.name == "graph.constant" and "xi32" in str(op.results[0].type)
    ]
    assert len(sums) == 1 and "dense<[4, 13, -1]>" in str(sums[0])


def test_an_ungrouped_conv_reads_its_channel_directly_at_any_width():
    """groups = 1 with 300 output channels (past CPython's small-int cache): the input
    channel is the reduction's own index, no index division in the body (quant49)."""
    text = main(
        "%x: tensor<1x2x2x2xi8>, %w: tensor<300x2x1x1xi8>",
        "  %zx = graph.constant dense<1> : tensor<i8>\n  %zw = graph.constant dense<0> : tensor<i8>\n"
        "  %y = graph.conv_integer %x, %w, %zx, %zw : (tensor<1x2x2x2xi8>, tensor<300x2x1x1xi8>, "
        "tensor<i8>, tensor<i8>) -> tensor<1x300x2x2xi32>",
        "%y",
        "tensor<1x300x2x2xi32>",
    )
    module = lower_check(text, [i8(1, 2, 2, 2), i8(300, 2, 1, 1)])
    assert not any(op.name.startswith(("arith.div", "arith.floordiv")) for op in module.walk())


# ------------------------------------ the killable survivors of quant --seed 50 (ac227d2)


def test_plain_integer_matmul_broadcasts_a_batch_of_one():
    """A rank-3 weight takes the plain form; the activation's batch of 1 is read at 0
    for each of the weight's 3."""
    text = matmul_integer_text(
        "1x2x5xi8", "3x5x4xi8", "dense<2> : tensor<i8>", "dense<-1> : tensor<i8>", out="3x2x4"
    )
    module = lower_check(text, [i8(1, 2, 5), i8(3, 5, 4)])
    assert not any(NSW_SUM in op.attributes for op in module.walk() if op.name == "te.reduce")


def test_a_weight_zero_point_of_ones_is_subtracted():
    """Only a zero point of zeros is left out: ones are subtracted (the plain form)."""
    text = matmul_integer_text(
        "2x5xi8", "5x3xi8", "dense<0> : tensor<i8>", "dense<1> : tensor<i8>", out="2x3"
    )
    lower_check(text, [i8(2, 5), i8(5, 3)])


def test_a_depthwise_conv_reads_its_own_channel_without_index_arithmetic():
    """groups = channels, one input channel a group: the input channel is the output
    channel itself: the window's two index sums and no other index arithmetic."""
    text = main(
        "%x: tensor<1x3x3x3xi8>, %w: tensor<3x1x2x2xi8>",
        "  %zx = graph.constant dense<1> : tensor<i8>\n  %zw = graph.constant dense<0> : tensor<i8>\n"
        "  %y = graph.conv_integer %x, %w, %zx, %zw {groups = 3 : i64} : (tensor<1x3x3x3xi8>, "
        "tensor<3x1x2x2xi8>, tensor<i8>, tensor<i8>) -> tensor<1x3x2x2xi32>",
        "%y",
        "tensor<1x3x2x2xi32>",
    )
    module = lower_check(text, [i8(1, 3, 3, 3), i8(3, 1, 2, 2)])
    index_ops = [
        op.name
        for op in module.walk()
        if op.name in ("arith.divui", "arith.divsi", "arith.muli", "arith.addi")
        and str(op.results[0].type) == "index"
    ]
    assert index_ops == ["arith.addi", "arith.addi"]  # (oh + i, ow + j)
    assert re.search(r"te.read %x\[%i0, %i1, ", str(module))


# ------------------------------------ the killable survivors of quant --seed 51 (e8dc44f)


@pytest.mark.parametrize(
    "a,b,out",
    [
        ("2x3x2x5xi8", "2x3x5x4xi8", "2x3x2x4"),  # two batch dims on both sides
        ("3x2x5xi8", "1x5x4xi8", "3x2x4"),  # a weight batch of one, broadcast
    ],
)
def test_plain_integer_matmul_reads_the_weight_at_its_batch(a, b, out):
    def arr(spec):
        return i8(*map(int, spec.split("x")[:-1]))

    text = matmul_integer_text(a, b, "dense<1> : tensor<i8>", "dense<2> : tensor<i8>", out=out)
    lower_check(text, [arr(a), arr(b)])


def test_u8_dot_over_a_rank_five_activation():
    """Three batch dims before (m, k): each read at its own index."""
    text = matmul_integer_text(
        "2x1x2x2x5xui8",
        "5x3xi8",
        "dense<7> : tensor<ui8>",
        "dense<0> : tensor<i8>",
        out="2x1x2x2x3",
    )
    module = lower_check(text, [i8(2, 1, 2, 2, 5, lo=0, hi=256, dtype=np.uint8), i8(5, 3)])
    assert any(NSW_SUM in op.attributes for op in module.walk() if op.name == "te.reduce")
