"""graph-to-te's decisions, fourth round (issue 35, bench/mutation.py --area lowering), on
the lines added since seed 42: the bit operations (and, or, xor, not, ONNX BitShift with
amounts below 0 and at or past the width, on signed and unsigned types), bitcast, each
lowered from hand-written graph IR and run on the te evaluator against the numpy
reference, with the shifts' te bodies pinned exactly (on the evaluator a shift by the
width gives the fill anyway; in C it is undefined, so the guard's bound matters); a fused
int8 matmul whose weight's column sums are a hoisted kernel of their own; and a module
with symbolic dims in two functions refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import lower_and_check, te_ops
from xdsl.utils.exceptions import DiagnosticException

from dlpc.passes.lower.graph_to_te import GraphToTe
from dlpc.passes.pipeline import context, parse_module

RNG = np.random.default_rng(11)


def ty(shape: tuple, elt: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{elt}>"


def one_op(op: str, ins: list[tuple[str, str]], out: str, shape=(16,), attrs: str = ""):
    args = ", ".join(f"%{n}: {ty(shape, e)}" for n, e in ins)
    operands = ", ".join(f"%{n}" for n, _ in ins)
    types = ", ".join(ty(shape, e) for _, e in ins)
    return parse_module(
        f"func.func @main({args}) -> {ty(shape, out)} {{\n"
        f"  %r = {op} {operands} {attrs} : ({types}) -> {ty(shape, out)}\n"
        f"  func.return %r : {ty(shape, out)}\n}}"
    )


INTS = {"i8": np.int8, "ui8": np.uint8, "i16": np.int16, "ui16": np.uint16, "i32": np.int32,
        "ui32": np.uint32, "i64": np.int64}  # fmt: skip


def values(elt: str, n: int = 16) -> np.ndarray:
    """The type's extremes, -1, 0, 1 and random values."""
    dt = np.dtype(INTS[elt])
    info = np.iinfo(dt)
    edge = [info.min, info.max, 0, 1, info.max // 3]
    if info.min < 0:
        edge += [-1, info.min + 1]
    rand = RNG.integers(info.min, info.max, n - len(edge), dtype=dt, endpoint=True)
    return np.concatenate([np.array(edge, dt), rand])


def amounts(elt: str) -> np.ndarray:
    """Shift amounts: every one of 0..width-1 somewhere, the width and past it, and below
    0 for a signed type (its bits read as the type's value)."""
    width = np.dtype(INTS[elt]).itemsize * 8
    dt = np.dtype(INTS[elt])
    low = -3 if np.iinfo(dt).min < 0 else 0
    base = [low, -1 if low else 0, 0, 1, width - 1, width, width + 1, 2, 3, 5, 7]
    a = np.array(base + list(RNG.integers(0, width, 16 - len(base))), dtype=np.int64)
    return a.astype(dt)


@pytest.mark.parametrize("elt", list(INTS))
@pytest.mark.parametrize("op", ["graph.shift_left", "graph.shift_right"])
def test_shifts_match_the_reference(op, elt):
    x, s = values(elt), amounts(elt)
    lower_and_check(one_op(op, [("x", elt), ("s", elt)], elt), [x, s])


@pytest.mark.parametrize("elt", ["i8", "ui16", "i32", "i64"])
@pytest.mark.parametrize("op", ["graph.bit_and", "graph.bit_or", "graph.bit_xor"])
def test_bitwise_binaries_match_the_reference(op, elt):
    lower_and_check(one_op(op, [("x", elt), ("y", elt)], elt), [values(elt), values(elt)[::-1]])


@pytest.mark.parametrize("elt", ["i8", "ui8", "i32", "ui32"])
def test_bit_not_matches_the_reference(elt):
    lower_and_check(one_op("graph.bit_not", [("x", elt)], elt), [values(elt)])


def test_bitwise_ops_broadcast():
    m = parse_module(
        "func.func @main(%x: tensor<3x4xi32>, %y: tensor<4xi32>) -> tensor<3x4xi32> {\n"
        "  %r = graph.bit_xor %x, %y : (tensor<3x4xi32>, tensor<4xi32>) -> tensor<3x4xi32>\n"
        "  func.return %r : tensor<3x4xi32>\n}"
    )
    x = RNG.integers(-1000, 1000, (3, 4), dtype=np.int32)
    lower_and_check(m, [x, np.array([0, -1, 5, 1 << 30], np.int32)])


@pytest.mark.parametrize(
    "src, dst, x",
    [
        ("f32", "i32", np.array([0.0, -0.0, 1.0, -2.5, np.inf, np.nan, 3e-39, 1e30], np.float32)),
        ("i32", "f32", np.array([0, 1, -1, 0x3F800000, 0x7F800000, -(1 << 31), 5, 7], np.int32)),
        ("i8", "ui8", np.array([-128, -1, 0, 1, 127, 5, -7, 9], np.int8)),
        ("ui16", "i16", np.array([0, 1, 65535, 32768, 32767, 7, 9, 11], np.uint16)),
    ],
)
def test_bitcast_reads_the_same_bits(src, dst, x):
    m = one_op("graph.bitcast", [("x", src)], dst, shape=(8,), attrs=f"{{to = {dst}}}")
    out = lower_and_check(m, [x])
    names = [o.name for o in out.walk()]
    assert "arith.bitcast" in names


def body(module) -> list[str]:
    """The lines of the (one) te.compute's body, its SSA names as printed."""
    lines = [line.strip() for line in str(module).splitlines()]
    start = next(k for k, line in enumerate(lines) if "= te.compute" in line)
    end = next(k for k, line in enumerate(lines) if line.startswith("} attributes"))
    return lines[start + 1 : end]


def lowered(module):
    GraphToTe().apply(context(), module)
    module.verify()
    return module


GUARD = [
    "%0 = te.read %x[%i0] : tensor<16xi8>",
    "%1 = te.read %s[%i0] : tensor<16xi8>",
    "%2 = arith.constant 0 : i8",
    "%3 = arith.cmpi sge, %1, %2 : i8",
    "%4 = arith.constant 8 : i8",
    "%5 = arith.cmpi slt, %1, %4 : i8",
    "%6 = arith.andi %3, %5 : i1",
    "%7 = arith.constant 0 : i8",
    "%8 = arith.select %6, %1, %7 : i8",
]


def test_a_left_shift_runs_on_the_unsigned_twin_and_selects_0_out_of_range():
    m = lowered(one_op("graph.shift_left", [("x", "i8"), ("s", "i8")], "i8"))
    assert body(m) == [
        *GUARD,
        "%9 = arith.bitcast %0 : i8 to ui8",
        "%10 = arith.bitcast %8 : i8 to ui8",
        "%11 = arith.shli %9, %10 : ui8",
        "%12 = arith.bitcast %11 : ui8 to i8",
        "%13 = arith.constant 0 : i8",
        "%14 = arith.select %6, %12, %13 : i8",
        "te.yield %14 : i8",
    ]


def test_a_signed_right_shift_selects_the_sign_fill_out_of_range():
    m = lowered(one_op("graph.shift_right", [("x", "i8"), ("s", "i8")], "i8"))
    assert body(m) == [
        *GUARD,
        "%9 = arith.constant 0 : i8",
        "%10 = arith.cmpi slt, %0, %9 : i8",
        "%11 = arith.constant -1 : i8",
        "%12 = arith.constant 0 : i8",
        "%13 = arith.select %10, %11, %12 : i8",
        "%14 = arith.shrsi %0, %8 : i8",
        "%15 = arith.select %6, %14, %13 : i8",
        "te.yield %15 : i8",
    ]


def test_an_unsigned_right_shift_is_logical_and_selects_0_out_of_range():
    m = lowered(one_op("graph.shift_right", [("x", "ui16"), ("s", "ui16")], "ui16"))
    assert body(m) == [
        "%0 = te.read %x[%i0] : tensor<16xui16>",
        "%1 = te.read %s[%i0] : tensor<16xui16>",
        "%2 = arith.constant 0 : i16",
        "%3 = arith.bitcast %2 : i16 to ui16",
        "%4 = arith.cmpi sge, %1, %3 : ui16",
        "%5 = arith.constant 16 : i16",
        "%6 = arith.bitcast %5 : i16 to ui16",
        "%7 = arith.cmpi slt, %1, %6 : ui16",
        "%8 = arith.andi %4, %7 : i1",
        "%9 = arith.constant 0 : i16",
        "%10 = arith.bitcast %9 : i16 to ui16",
        "%11 = arith.select %8, %1, %10 : ui16",
        "%12 = arith.shrui %0, %11 : ui16",
        "%13 = arith.constant 0 : i16",
        "%14 = arith.bitcast %13 : i16 to ui16",
        "%15 = arith.select %8, %12, %14 : ui16",
        "te.yield %15 : ui16",
    ]


def test_bit_not_is_xor_with_all_ones():
    m = lowered(one_op("graph.bit_not", [("x", "i32")], "i32"))
    assert body(m) == [
        "%0 = te.read %x[%i0] : tensor<16xi32>",
        "%1 = arith.constant -1 : i32",
        "%2 = arith.xori %0, %1 : i32",
        "te.yield %2 : i32",
    ]


FUSED = """
func.func @main(%a: tensor<2x8xi8>, %b: tensor<4x8xi8>, %s: tensor<4xf32>) -> tensor<2x4xf32> {
  %y = graph.fused "mmi_scale" %a, %b, %s : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%p: tensor<2x8xi8>, %q: tensor<4x8xi8>, %t: tensor<4xf32>):
    %za = graph.constant dense<-3> : tensor<i8>
    %zb = graph.constant dense<0> : tensor<i8>
    %m = graph.matmul_integer %p, %q, %za, %zb {transpose_b = true} : (tensor<2x8xi8>, tensor<4x8xi8>, tensor<i8>, tensor<i8>) -> tensor<2x4xi32>
    %f = graph.cast %m {to = f32} : (tensor<2x4xi32>) -> tensor<2x4xf32>
    %r = graph.mul %f, %t : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    graph.yield %r : tensor<2x4xf32>
  }
  func.return %y : tensor<2x4xf32>
}
"""


def test_a_fused_int8_matmul_keeps_its_column_sums_a_kernel_of_their_own():
    """The weight is an argument: its column sums are a hoisted te.reduce, which is not
    the fused op's anchor; the matmul's reduce takes the cast and the scale as its
    epilogue: two te ops, exact against the reference."""
    a = RNG.integers(-128, 128, (2, 8), dtype=np.int8)
    b = RNG.integers(-128, 128, (4, 8), dtype=np.int8)
    s = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    m = lower_and_check(parse_module(FUSED), [a, b, s])
    ops = te_ops(m)
    assert [op.name for op in ops] == ["te.reduce", "te.reduce"]
    text = str(m)
    assert 'te.reduce "matmul_integer_0_colsum"' in text
    assert "} epilogue (" in text.split("_colsum", 2)[2]
    assert "arith.sitofp" in text.split("} epilogue (", 1)[1]


def test_symbolic_dims_in_two_functions_are_refused():
    ty1 = 'tensor<?x4xf32, ["s"]>'
    fn = (
        "func.func @{name}(%x: {t}) -> {t} {{\n  %y = graph.relu %x : ({t}) -> {t}\n"
        "  func.return %y : {t}\n}}\n"
    )
    m = parse_module(fn.format(name="main", t=ty1) + fn.format(name="other", t=ty1))
    with pytest.raises(DiagnosticException) as e:
        GraphToTe().apply(context(), m)
    assert str(e.value) == "graph-to-te: symbolic dims in more than one function"


def test_two_fused_ops_of_one_name_get_distinct_kernel_names():
    f = 'graph.fused "f" %{a} : (tensor<4xf32>) -> tensor<4xf32> {{\n  ^bb0(%a: tensor<4xf32>):\n'
    m = parse_module(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        f"  %y = {f.format(a='x')}"
        "    %0 = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>\n"
        "    graph.yield %0 : tensor<4xf32>\n  }\n"
        f"  %z = {f.format(a='y')}"
        "    %0 = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>\n"
        "    %1 = graph.neg %0 : (tensor<4xf32>) -> tensor<4xf32>\n"
        "    graph.yield %1 : tensor<4xf32>\n  }\n"
        "  func.return %z : tensor<4xf32>\n}"
    )
    out = lower_and_check(m, [np.array([0.5, -1, 2, 0], np.float32)])
    assert [op.compute_name for op in te_ops(out)] == ["f", "f_1"]
