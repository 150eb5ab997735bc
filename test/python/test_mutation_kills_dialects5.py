"""Tests for the dialects' lines added since the last scored sample (issue 35, seventh round,
bench/mutation.py --area dialects): the quantized ops' verifiers and shapes, the te body
builder's unsigned constants and integer limits, loop.verify_ir against Module.verify."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import lower_and_check, module_of
from xdsl.dialects.builtin import IntegerType, Signedness, f32, i1, i8, i16, i32, i64
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.dialects import te
from dlpc.passes.pipeline import parse_module


def verdict(op: str, operands: list[str], result: str, props: str = "") -> str:
    """'OK' or the first line of the verifier's message for `%0 = op %a0, ... : ... -> result`."""
    args = ", ".join(f"%a{n}: {t}" for n, t in enumerate(operands))
    names = ", ".join(f"%a{n}" for n in range(len(operands)))
    text = (
        f"func.func @main({args}) -> {result} {{\n"
        f"  %0 = {op} {names}{props} : ({', '.join(operands)}) -> {result}\n"
        f"  func.return %0 : {result}\n}}"
    )
    try:
        parse_module(text).verify()
    except VerifyException as e:
        return str(e).splitlines()[0]
    return "OK"


T = "tensor<{}>".format

QUANT_CASES = [
    # per tensor: a scale of shape [] or [1], a zero point of the same shape
    ("graph.quantize", ["4xf32", "f32", "i8"], "4xi8", "", "OK"),
    ("graph.quantize", ["2x3xf32", "1xf32", "1xui8"], "2x3xui8", "", "OK"),
    ("graph.quantize", ["2x3xf32", "f32", "i16"], "2x3xi16", "", "OK"),
    ("graph.quantize", ["2x3xf32", "f32", "ui16"], "2x3xui16", "", "OK"),
    # per axis: the default axis is 1; a negative axis counts from the end
    ("graph.quantize", ["2x3xf32", "3xf32", "3xi8"], "2x3xi8", "", "OK"),
    ("graph.quantize", ["2x3xf32", "2xf32", "2xi8"], "2x3xi8", " {axis = 0 : i64}", "OK"),
    ("graph.quantize", ["2x3xf32", "2xf32", "2xi8"], "2x3xi8", " {axis = -2 : i64}", "OK"),
    (
        "graph.quantize",
        ["2x3xf32", "2xf32", "2xi8"],
        "2x3xi8",
        "",
        "graph.quantize scale 2 is neither one value nor one per entry of axis 1 of 2x3",
    ),
    (
        "graph.quantize",
        ["2x3xf32", "3xf32", "3xi8"],
        "2x3xi8",
        " {axis = -2 : i64}",
        "graph.quantize scale 3 is neither one value nor one per entry of axis 0 of 2x3",
    ),
    (
        "graph.quantize",
        ["2x3xf32", "1x3xf32", "1x3xi8"],
        "2x3xi8",
        "",
        "graph.quantize scale 1x3 is neither one value nor one per entry of axis 1 of 2x3",
    ),
    (
        "graph.quantize",
        ["4xf32", "f32", "1xi8"],
        "4xi8",
        "",
        "graph.quantize zero point 1 must have the scale's shape scalar",
    ),
    (
        "graph.quantize",
        ["4xf32", "1xf32", "i8"],
        "4xi8",
        "",
        "graph.quantize zero point scalar must have the scale's shape 1",
    ),
    (
        "graph.quantize",
        ["4xi32", "f32", "i8"],
        "4xi8",
        "",
        "graph.quantize needs a float input and a scale of its type, got i32 and f32",
    ),
    (
        "graph.quantize",
        ["4xf32", "f16", "i8"],
        "4xi8",
        "",
        "graph.quantize needs a float input and a scale of its type, got f32 and f16",
    ),
    (
        "graph.quantize",
        ["4xf32", "f32", "i32"],
        "4xi32",
        "",
        "graph.quantize zero point must be one of i8, ui8, i16, ui16, got i32",
    ),
    (
        "graph.quantize",
        ["4xf32", "f32", "f32"],
        "4xf32",
        "",
        "graph.quantize zero point must be one of i8, ui8, i16, ui16, got f32",
    ),
    (
        "graph.quantize",
        ["4xf32", "f32", "i8"],
        "4xui8",
        "",
        "graph.quantize: inferred element type i8 but result type has ui8",
    ),
    # dequantize: the scale's float type out; an i32 input (a quantized bias)
    ("graph.dequantize", ["4xi8", "f32", "i8"], "4xf32", "", "OK"),
    ("graph.dequantize", ["4xui16", "f16", "ui16"], "4xf16", "", "OK"),
    ("graph.dequantize", ["2x3xi32", "3xf32", "3xi32"], "2x3xf32", "", "OK"),
    (
        "graph.dequantize",
        ["4xi8", "f32", "ui8"],
        "4xf32",
        "",
        "graph.dequantize needs an input of i8, ui8, i16, ui16 or i32 and a zero point of its "
        "type, got i8 and ui8",
    ),
    (
        "graph.dequantize",
        ["4xi64", "f32", "i64"],
        "4xf32",
        "",
        "graph.dequantize needs an input of i8, ui8, i16, ui16 or i32 and a zero point of its "
        "type, got i64 and i64",
    ),
    (
        "graph.dequantize",
        ["4xf32", "f32", "f32"],
        "4xf32",
        "",
        "graph.dequantize needs an input of i8, ui8, i16, ui16 or i32 and a zero point of its "
        "type, got f32 and f32",
    ),
    (
        "graph.dequantize",
        ["4xi8", "i32", "i8"],
        "4xi32",
        "",
        "graph.dequantize needs a float scale, got i32",
    ),
    (
        "graph.dequantize",
        ["2x3xi8", "2xf32", "2xi8"],
        "2x3xf32",
        "",
        "graph.dequantize scale 2 is neither one value nor one per entry of axis 1 of 2x3",
    ),
    (
        "graph.dequantize",
        ["4xi8", "f32", "i8"],
        "4xf16",
        "",
        "graph.dequantize: inferred element type f32 but result type has f16",
    ),
]

MM = "graph.matmul_integer"
MM_CASES = [
    (MM, ["4x8xui8", "8x16xi8", "ui8", "i8"], "4x16xi32", "", "OK"),
    (MM, ["4x8xi8", "16x8xi8", "i8", "i8"], "4x16xi32", " {transpose_b = true}", "OK"),
    (MM, ["2x4x8xi8", "8x16xi8", "i8", "i8"], "2x4x16xi32", "", "OK"),
    (MM, ["2x1x4x8xi8", "3x8x16xi8", "i8", "i8"], "2x3x4x16xi32", "", "OK"),
    (MM, ["4x8xi8", "8x16xi8", "4xi8", "16xi8"], "4x16xi32", "", "OK"),
    (MM, ["4x8xi8", "8x16xi8", "1xi8", "1xi8"], "4x16xi32", "", "OK"),
    (MM, ["8xi8", "8x16xi8", "i8", "i8"], "16xi32", "", f"{MM} operands must have rank >= 2"),
    (MM, ["4x8xi8", "8xi8", "i8", "i8"], "4xi32", "", f"{MM} operands must have rank >= 2"),
    (
        MM,
        ["4x8xi8", "9x16xi8", "i8", "i8"],
        "4x16xi32",
        "",
        f"{MM} contraction mismatch: lhs 4x8 has K=8 but rhs 9x16 has K=9",
    ),
    (
        MM,
        ["4x8xi8", "8x16xi8", "i8", "i8"],
        "4x8xi32",
        " {transpose_b = true}",
        f"{MM} contraction mismatch: lhs 4x8 has K=8 but rhs 16x8 has K=16",
    ),
    (
        MM,
        ["4x8xi8", "8x16xi8", "8xi8", "i8"],
        "4x16xi32",
        "",
        f"{MM} zero points 8, scalar must be one value or one per row of lhs (4) / column of "
        "rhs (16)",
    ),
    (
        MM,
        ["4x8xi8", "8x16xi8", "i8", "8xi8"],
        "4x16xi32",
        "",
        f"{MM} zero points scalar, 8 must be one value or one per row of lhs (4) / column of "
        "rhs (16)",
    ),
    (
        MM,
        ["4x8xi16", "8x16xi8", "i16", "i8"],
        "4x16xi32",
        "",
        f"{MM} lhs must be i8 or ui8 with a zero point of its type, got i16 and i16",
    ),
    (
        MM,
        ["4x8xi8", "8x16xi8", "i8", "ui8"],
        "4x16xi32",
        "",
        f"{MM} rhs must be i8 or ui8 with a zero point of its type, got i8 and ui8",
    ),
    (
        MM,
        ["4x8xf32", "8x16xi8", "f32", "i8"],
        "4x16xi32",
        "",
        f"{MM} lhs must be i8 or ui8 with a zero point of its type, got f32 and f32",
    ),
]

CI = "graph.conv_integer"
CONV_CASES = [
    (
        CI,
        ["1x3x8x8xui8", "4x3x3x3xi8", "ui8", "i8"],
        "1x4x8x8xi32",
        " {pads = array<i64: 1, 1, 1, 1>}",
        "OK",
    ),
    (CI, ["2x3x8x8xi8", "4x3x3x3xi8", "i8", "4xi8"], "2x4x6x6xi32", "", "OK"),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xi8", "1xi8", "1xi8"],
        "1x4x4x4xi32",
        " {dilations = array<i64: 2, 2>}",
        "OK",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xi8", "i8", "i8"],
        "1x4x3x3xi32",
        " {strides = array<i64: 2, 2>}",
        "OK",
    ),
    (CI, ["1x4x5x5xi8", "6x2x3x3xi8", "i8", "i8"], "1x6x3x3xi32", " {groups = 2 : i64}", "OK"),
    (
        CI,
        ["1x4x5x5xi8", "6x2x3x3xi8", "i8", "i8"],
        "1x6x3x3xi32",
        "",
        f"{CI} input has 4 channels but weight 6x2x3x3 with groups=1 expects 2 (and groups "
        "must divide 6)",
    ),
    (
        CI,
        ["1x4x5x5xi8", "6x2x3x3xi8", "i8", "i8"],
        "1x6x3x3xi32",
        " {groups = 0 : i64}",
        f"{CI} input has 4 channels but weight 6x2x3x3 with groups=0 expects 0 (and groups "
        "must divide 6)",
    ),
    (
        CI,
        ["1x6x5x5xi8", "4x2x3x3xi8", "i8", "i8"],
        "1x4x3x3xi32",
        " {groups = 3 : i64}",
        f"{CI} input has 6 channels but weight 4x2x3x3 with groups=3 expects 6 (and groups "
        "must divide 4)",
    ),
    (
        CI,
        ["1x5x5x5xi8", "4x2x3x3xi8", "i8", "i8"],
        "1x4x3x3xi32",
        " {groups = 2 : i64}",
        f"{CI} input has 5 channels but weight 4x2x3x3 with groups=2 expects 4 (and groups "
        "must divide 4)",
    ),
    (
        CI,
        ["3x8x8xi8", "4x3x3x3xi8", "i8", "i8"],
        "1x4x6x6xi32",
        "",
        f"{CI} expects NCHW input and OIHW weight, got 3x8x8 and 4x3x3x3",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3xi8", "i8", "i8"],
        "1x4x6x6xi32",
        "",
        f"{CI} expects NCHW input and OIHW weight, got 1x3x8x8 and 4x3x3",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xi8", "3xi8", "i8"],
        "1x4x6x6xi32",
        "",
        f"{CI} zero points 3, scalar: the input's must be one value, the weight's one value or "
        "one per output channel (4)",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xi8", "i8", "3xi8"],
        "1x4x6x6xi32",
        "",
        f"{CI} zero points scalar, 3: the input's must be one value, the weight's one value or "
        "one per output channel (4)",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xi8", "i8", "i8"],
        "1x4x6x6xi32",
        ' {layout = "nhwc"}',
        f"{CI} takes NCHW activations only",
    ),
    (
        CI,
        ["1x3x8x8xi8", "4x3x3x3xui8", "i8", "i8"],
        "1x4x6x6xi32",
        "",
        f"{CI} weight must be i8 or ui8 with a zero point of its type, got ui8 and i8",
    ),
    (
        CI,
        ["1x3x8x8xi32", "4x3x3x3xi8", "i32", "i8"],
        "1x4x6x6xi32",
        "",
        f"{CI} input must be i8 or ui8 with a zero point of its type, got i32 and i32",
    ),
]


@pytest.mark.parametrize(
    "op, operands, result, props, expected",
    QUANT_CASES + MM_CASES + CONV_CASES,
    ids=lambda v: v if isinstance(v, str) and "x" in v and len(v) < 20 else None,
)
def test_quantized_ops_verify_and_infer(op, operands, result, props, expected):
    """Each quantized op's shapes and element types: the result it infers (a declared result
    of another shape or type fails) or the one-line diagnostic, exactly."""
    assert verdict(op, [T(t) for t in operands], T(result), props) == expected


def test_quantized_ops_refuse_another_result_shape():
    """The inferred shapes are compared with the declared ones: one entry off fails."""
    assert verdict(MM, [T("4x8xi8"), T("8x16xi8"), T("i8"), T("i8")], T("4x15xi32")) == (
        f"{MM}: inferred result shape 4x16 but result type has shape 4x15"
    )
    assert verdict(CI, [T("1x3x8x8xi8"), T("4x3x3x3xi8"), T("i8"), T("i8")], T("1x4x7x6xi32")) == (
        f"{CI}: inferred result shape 1x4x6x6 but result type has shape 1x4x7x6"
    )
    assert verdict("graph.quantize", [T("2x3xf32"), T("f32"), T("i8")], T("3x2xi8")) == (
        "graph.quantize: inferred result shape 2x3 but result type has shape 3x2"
    )


# ---- te.BodyBuilder: unsigned constants and the integer limits ---------------------------

UI8 = IntegerType(8, Signedness.UNSIGNED)
UI16 = IntegerType(16, Signedness.UNSIGNED)
UI64 = IntegerType(64, Signedness.UNSIGNED)


@pytest.mark.parametrize(
    "ty, low, high",
    [
        (i1, 0, 1),
        (i8, -128, 127),
        (i16, -32768, 32767),
        (i32, -(2**31), 2**31 - 1),
        (i64, -(2**63), 2**63 - 1),
        (UI8, 0, 255),
        (UI16, 0, 65535),
        (UI64, 0, 2**64 - 1),
    ],
    ids=str,
)
def test_int_limit_of_every_integer_type(ty, low, high):
    assert (te.int_limit(ty, False), te.int_limit(ty, True)) == (low, high)
    assert te.is_unsigned(ty) == (ty in (UI8, UI16, UI64))
    assert not te.is_unsigned(f32)


@pytest.mark.parametrize(
    "ty, value, bits",
    [(UI8, 255, -1), (UI8, 128, -128), (UI8, 127, 127), (UI8, 0, 0), (UI16, 40000, 40000 - 65536)],
    ids=str,
)
def test_unsigned_constants_are_the_same_bits_signless(ty, value, bits):
    """arith.constant is signless: an unsigned value is its two's-complement bits in the
    signless type of its width, bitcast to the unsigned type."""
    from xdsl.dialects import arith
    from xdsl.ir import Block

    block = Block()
    v = te.BodyBuilder(block).const(value, ty)
    const, cast = list(block.ops)
    assert isinstance(const, arith.ConstantOp) and isinstance(cast, arith.BitcastOp)
    assert const.value.type == IntegerType(ty.bitwidth)  # type: ignore[union-attr]
    assert const.value.value.data == bits  # type: ignore[union-attr]
    assert v is cast.results[0] and v.type == ty


def test_infinite_constants_of_integer_types_are_their_limits():
    """A max-pool's -inf padding in an integer type is the type's smallest value (ui8: 0,
    bitcast from the signless 0; i8: -128); +inf is the largest."""
    from xdsl.ir import Block

    def values(ty, x):
        block = Block()
        te.BodyBuilder(block).const(x, ty)
        return [op.value.value.data for op in block.ops if hasattr(op, "value")]

    assert values(UI8, float("-inf")) == [0]
    assert values(UI8, float("inf")) == [-1]
    assert values(i8, float("-inf")) == [-128]
    assert values(i8, float("inf")) == [127]
    assert values(i32, 7.0) == [7]


def _cast(x, to):
    return lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=to)), [x])


@pytest.mark.parametrize("to", [UI8, i8, i16, f32, i1], ids=str)
def test_casts_from_unsigned_against_numpy(to):
    """ui8 -> wider signed: zero-extended (200 stays 200); -> i8: the same bits; -> f32:
    unsigned conversion (200.0, not -56.0); -> i1: != 0."""
    _cast(np.array([0, 1, 127, 128, 200, 255], np.uint8), to)


@pytest.mark.parametrize("to", [UI8, UI16], ids=str)
def test_casts_to_unsigned_against_numpy(to):
    """i8 -> ui8 the same bits; i8 -> ui16 sign-extended then reinterpreted; f32 -> ui8 by
    an unsigned conversion of values in range."""
    _cast(np.array([0, 1, 127, -1, -128, 5], np.int8), to)
    _cast(np.array([0.0, 1.5, 127.0, 200.0, 255.0], np.float32), to)


def test_max_pool_of_unsigned_pads_with_zero():
    """A padded max-pool over ui8 values pads with ui8's smallest value, 0, not -128."""
    x = np.array([200, 255, 3, 129, 128, 0, 7, 250, 5], np.uint8).reshape(1, 1, 3, 3)
    lower_and_check(
        module_of([x], lambda a: g.MaxPool2DOp.make(a, kernel=(2, 2), pads=(1, 1, 1, 1))), [x]
    )


@pytest.mark.parametrize(
    "ty, name",
    [
        (UI8, "uint8"),
        (UI16, "uint16"),
        (UI64, "uint64"),
        (i8, "int8"),
        (i64, "int64"),
        (i1, "bool"),
    ],
    ids=str,
)
def test_numpy_dtype_of_signed_and_unsigned_integers(ty, name):
    assert g.numpy_dtype(ty) == name
    assert g.NUMPY_TO_ELT[name] == ty


@pytest.mark.parametrize(
    "src, to, expected",
    [
        ("f32", "i32", "OK"),
        ("i8", "ui8", "OK"),
        ("f16", "i16", "OK"),
        ("f64", "i64", "OK"),
        ("f32", "i16", "graph.bitcast needs element types of one width (not i1), got f32 and i16"),
        ("i1", "i1", "graph.bitcast needs element types of one width (not i1), got i1 and i1"),
        (
            "i32",
            "index",
            "graph.bitcast needs element types of one width (not i1), got i32 and index",
        ),
    ],
)
def test_bitcast_needs_one_width(src, to, expected):
    assert verdict("graph.bitcast", [T(f"4x{src}")], T(f"4x{to}"), f" {{to = {to}}}") == expected


# ---- loop.verify_ir: Module.verify's checks, each kind of local op once ---------------------


def _unverified(text: str):
    from xdsl.parser import Parser

    from dlpc.passes.pipeline import context

    return Parser(context(), text).parse_module()


def _both(text: str) -> tuple[str, str]:
    """verify_ir's and Module.verify's first line of their diagnostic ('OK' when none)."""
    from dlpc.dialects.loop import verify_ir

    out = []
    for check in (verify_ir, lambda m: m.verify()):
        try:
            check(_unverified(text))
            out.append("OK")
        except Exception as e:  # (xDSL's memref.load raises a bare Exception)
            out.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    return out[0], out[1]


GRAPH_FUNC = """func.func @main(%x: tensor<2x2xf32>, %a: tensor<1x3x8x8xi8>, %w: tensor<4x3x3x3xi8>, %z: tensor<i8>) -> tensor<2x2xf32> {{
  %0 = graph.relu %x : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = graph.transpose %x {{perm = array<i64: 1, 0>}} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = graph.conv_integer %a, %w, %z, %z : (tensor<1x3x8x8xi8>, tensor<4x3x3x3xi8>, tensor<i8>, tensor<i8>) -> tensor<1x4x6x6xi32>
  {}
  %9 = graph.relu %x : (tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %9 : tensor<2x2xf32>
}}"""


@pytest.mark.parametrize(
    "line, expected",
    [
        ("%3 = graph.relu %x : (tensor<2x2xf32>) -> tensor<2x2xf32>", "OK"),
        (
            "%3 = graph.relu %x : (tensor<2x2xf32>) -> tensor<2x3xf32>",
            "graph.relu: inferred result shape 2x2 but result type has shape 2x3",
        ),
        (  # the same operand and result types as %1, another property
            "%3 = graph.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>",
            "graph.transpose",
        ),
        (  # the same types and properties as %2, another attribute
            '%3 = graph.conv_integer %a, %w, %z, %z {layout = "nhwc"} : (tensor<1x3x8x8xi8>, '
            "tensor<4x3x3x3xi8>, tensor<i8>, tensor<i8>) -> tensor<1x4x6x6xi32>",
            "graph.conv_integer takes NCHW activations only",
        ),
        (  # the same result type as %0, another operand type
            "%3 = graph.relu %a : (tensor<1x3x8x8xi8>) -> tensor<2x2xf32>",
            "graph.relu",
        ),
    ],
)
def test_verify_ir_checks_each_kind_of_graph_op(line, expected):
    """An op that differs from one already verified in its operand types, result types,
    properties or attributes is verified again: verify_ir fails where Module.verify does."""
    mine, full = _both(GRAPH_FUNC.format(line))
    assert mine == full
    assert mine.startswith("OK" if expected == "OK" else f"VerifyException: {expected}")


def test_verify_ir_checks_the_last_op_in_full():
    """func.return of the wrong type, after ops alike: still refused."""
    text = """func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = graph.relu %x : (tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %x, %x : tensor<2x2xf32>, tensor<2x2xf32>
}"""
    mine, full = _both(text)
    assert mine == full and mine != "OK"


LOOP_FUNC = """func.func @main(%m: memref<4x8xf32>, %v: memref<8xf32>) {{
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0"}} {{
      %a = memref.load %m[%i, %i] : memref<4x8xf32>
      memref.store %a, %m[%i, %i] : memref<4x8xf32>
    }}
    loop.for %l = 0 to 4 step 1 {{name = "i1"}} {{
    }}
  }}
  loop.kernel "k2" {{
    loop.for %j = 0 to 4 step 1 {{name = "i0"}} {{
      {}
    }}
    loop.for %k = 0 to 4 step 1 {{name = "i1"}} {{
    }}
  }}
  func.return
}}"""


@pytest.mark.parametrize(
    "line, ok",
    [
        ("%b = memref.load %m[%j, %j] : memref<4x8xf32>", True),
        ("%b = memref.load %v[%j] : memref<8xf32>", True),
        # the loop is alike k's first one (verified once); its body is checked all the same
        ("%b = memref.load %m[%j] : memref<4x8xf32>", False),
        ("%b = arith.addf %j, %j : index", False),
    ],
)
def test_verify_ir_checks_the_body_of_a_loop_alike_another(line, ok):
    mine, full = _both(LOOP_FUNC.format(line))
    assert mine == full
    assert (mine == "OK") == ok


def test_verify_ir_on_lowered_loop_ir():
    """A model lowered to loop IR verifies (its kernels' loops alike by kind); a loop outside
    any kernel is refused like Module.verify refuses it."""
    from dlpc.dialects.loop import verify_ir
    from dlpc.passes.pipeline import lower

    x = np.ones((4, 6), np.float32)
    module = module_of([x], lambda a: [r := g.ReluOp.make(a), g.AddOp.make(r.results[0], a)])
    module = lower(module, "loop")
    verify_ir(module)
    text = """func.func @main(%m: memref<4xf32>) {
  loop.for %i = 0 to 4 step 1 {name = "i0"} {
    %a = memref.load %m[%i] : memref<4xf32>
  }
  func.return
}"""
    mine, full = _both(text)
    assert mine == full


def test_float_to_bool_cast_is_not_equal_zero():
    """f32 -> i1: x != 0 (0.5 and -0.0 and NaN as numpy casts them)."""
    _cast(np.array([0.0, 0.5, -0.0, -2.0, 3.0], np.float32), i1)


@pytest.mark.parametrize("fn", sorted(te.MATH_FUNCTIONS))
def test_body_builder_math_emits_the_named_function(fn):
    from xdsl.ir import Block

    block = Block(arg_types=[f32])
    v = te.BodyBuilder(block).math(fn, block.args[0])
    (op,) = block.ops
    assert type(op) is te.MATH_FUNCTIONS[fn] and v is op.results[0]
    assert op.name == {"roundeven": "math.roundeven"}.get(fn, f"math.{fn}")


@pytest.mark.parametrize(
    "src_space, dst_space, direction",
    [
        ("gdram", "nram", "GDRAM2NRAM"),
        ("nram", "gdram", "NRAM2GDRAM"),
        ("gdram", "gdram", "GDRAM2GDRAM"),
    ],
)
def test_memcpy_strided_async_takes_its_direction_from_the_spaces(src_space, dst_space, direction):
    """The builder's DMA direction is source space to destination space, and the op prints
    and parses back with its eight operands in order."""
    from xdsl.dialects.builtin import IndexType, ModuleOp
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from dlpc.dialects import dlp

    src_t = dlp.memref_in(src_space, [16, 64], f32)
    dst_t = dlp.memref_in(dst_space, [16, 64], f32)
    block = Block(arg_types=[dst_t, src_t] + [IndexType()] * 6)
    d, s, *ix = block.args
    op = dlp.MemcpyStridedAsyncOp(d, ix[0], s, ix[1], ix[2], ix[3], ix[4], ix[5])
    block.add_ops([op, ReturnOp()])
    assert op.direction.data.value == direction
    assert list(op.operands) == [d, ix[0], s, ix[1], ix[2], ix[3], ix[4], ix[5]]
    types = [dst_t, src_t] + [IndexType()] * 6
    from xdsl.dialects.builtin import FunctionType

    module = ModuleOp([FuncOp("f", FunctionType.from_lists(types, []), Region(block))])
    module.verify()
    text = str(module)
    assert f"dlp.memcpy_strided_async {direction} %0[%2], %1[%3], %4 x %5, %6, %7" in text
    assert str(parse_module(text)) == text
