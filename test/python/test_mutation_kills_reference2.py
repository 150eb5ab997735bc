"""The numpy reference's ops added since its seed-39 sample (issue 35, bench/mutation.py
--area reference), each against an independent computation written here (plain Python
on the elements): trig and rounding, bitcast, integer division, bit ops and shifts,
integer max pool and sums, dynamic_slice, quantize / dequantize, matmul_integer and
conv_integer; the emitted numpy program agrees with the reference; the te evaluator's
new ops against numpy."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from dlpc.backends.numpy import emit_numpy
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference


def T(shape: str, elt: str) -> str:
    return f"tensor<{shape}x{elt}>" if shape else f"tensor<{elt}>"


def run(op: str, arrays: list[np.ndarray], result: str, props: str = "", types=None):
    """`op` over `arrays` (their tensor types from their shapes and dtypes, or `types`)
    on the reference and the emitted numpy program: both agree; the reference's answer."""
    from dlpc.dialects import graph as g

    if types is None:
        types = [T("x".join(map(str, a.shape)), str(g.NUMPY_TO_ELT[a.dtype.name])) for a in arrays]
    args = ", ".join(f"%a{n}: {t}" for n, t in enumerate(types))
    names = ", ".join(f"%a{n}" for n in range(len(types)))
    module = parse_module(
        f"func.func @main({args}) -> {result} {{\n"
        f"  %0 = {op} {names}{props} : ({', '.join(types)}) -> {result}\n"
        f"  func.return %0 : {result}\n}}"
    )
    (out,) = run_reference(module, arrays, {})
    namespace: dict = {}
    exec(emit_numpy(module), namespace)
    (emitted,) = namespace["main"](*arrays, params={})
    assert emitted.dtype == out.dtype and emitted.shape == out.shape
    np.testing.assert_array_equal(emitted, out)
    return out


def each(f, *arrays, dtype):
    """f over the elements (Python scalars), as an array of `dtype`."""
    flat = [f(*vals) for vals in zip(*(a.ravel().tolist() for a in arrays), strict=True)]
    return np.array(flat, dtype=dtype).reshape(arrays[0].shape)


def wrap(v: int, bits: int, signed: bool = True) -> int:
    v %= 1 << bits
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


# ---------------------------------------------------------------- float elementwise

UNARY = {
    "sin": (math.sin, (-3.0, 3.0)),
    "cos": (math.cos, (-3.0, 3.0)),
    "tan": (math.tan, (-1.2, 1.2)),
    "asin": (math.asin, (-0.9, 0.9)),
    "acos": (math.acos, (-0.9, 0.9)),
    "atan": (math.atan, (-5.0, 5.0)),
    "sinh": (math.sinh, (-3.0, 3.0)),
    "cosh": (math.cosh, (-3.0, 3.0)),
    "asinh": (math.asinh, (-5.0, 5.0)),
    "acosh": (math.acosh, (1.1, 5.0)),
    "atanh": (math.atanh, (-0.9, 0.9)),
}


@pytest.mark.parametrize("name", UNARY)
def test_trig_ops(name):
    f, (lo, hi) = UNARY[name]
    x = np.linspace(lo, hi, 7, dtype=np.float32)
    out = run(f"graph.{name}", [x], "tensor<7xf32>")
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, each(f, x, dtype=np.float64), rtol=2e-6, atol=1e-6)


def test_floor_ceil_and_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6, 3.0], np.float32)
    for name, f in (("floor", math.floor), ("ceil", math.ceil), ("round", round)):
        out = run(f"graph.{name}", [x], "tensor<9xf32>")
        np.testing.assert_array_equal(out, np.array([float(f(v)) for v in x.tolist()], np.float32))
    assert run("graph.round", [x], "tensor<9xf32>").tolist()[:6] == [-2, -2, 0, 0, 2, 2]


def test_bitcast_f32_to_i32_and_i8_to_ui8():
    x = np.array([1.0, -2.5, 0.0, 3.0e-3], np.float32)
    out = run("graph.bitcast", [x], "tensor<4xi32>", " {to = i32}")
    bits = [struct.unpack("<i", struct.pack("<f", v))[0] for v in x.tolist()]
    np.testing.assert_array_equal(out, np.array(bits, np.int32))
    b = np.array([-128, -1, 0, 127], np.int8)
    out = run("graph.bitcast", [b], "tensor<4xui8>", " {to = ui8}")
    assert out.dtype == np.uint8 and out.tolist() == [128, 255, 0, 127]


# ---------------------------------------------------------------- integers


def _c_div(a: int, b: int, bits: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q, bits)


@pytest.mark.parametrize("dtype, bits", [(np.int8, 8), (np.int32, 32), (np.int64, 64)])
def test_signed_division_truncates_and_divides_by_zero_to_zero(dtype, bits):
    """C's division: toward zero, x / 0 = 0, MIN / -1 wraps to MIN."""
    lo = int(np.iinfo(dtype).min)
    a = np.array([7, -7, 7, -7, 6, -6, 5, lo, lo, 0, -1], dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 0, -1, 1, 3, 5], dtype)
    n = len(a)
    out = run("graph.div", [a, b], T(str(n), str(np.dtype(dtype)).replace("int", "i")))
    np.testing.assert_array_equal(out, each(lambda x, y: _c_div(x, y, bits), a, b, dtype=dtype))


def test_unsigned_division_by_zero_is_zero():
    a = np.array([200, 7, 255, 9, 0], np.uint8)
    b = np.array([3, 0, 16, 2, 0], np.uint8)
    out = run("graph.div", [a, b], "tensor<5xui8>")
    assert out.dtype == np.uint8 and out.tolist() == [66, 0, 15, 4, 0]


def test_float_division_is_plain():
    a = np.array([1.0, -3.0, 2.0], np.float32)
    b = np.array([4.0, 2.0, 0.5], np.float32)
    assert run("graph.div", [a, b], "tensor<3xf32>").tolist() == [0.25, -1.5, 4.0]


def test_bit_ops():
    a = np.array([0b1100, -1, 5, -128], np.int8)
    b = np.array([0b1010, 3, -6, 127], np.int8)
    t = "tensor<4xi8>"
    for name, f in (
        ("bit_and", lambda x, y: x & y),
        ("bit_or", lambda x, y: x | y),
        ("bit_xor", lambda x, y: x ^ y),
    ):
        np.testing.assert_array_equal(run(f"graph.{name}", [a, b], t), each(f, a, b, dtype=np.int8))
    np.testing.assert_array_equal(
        run("graph.bit_not", [a], t), each(lambda x: ~x, a, dtype=np.int8)
    )


SHIFTS = np.array([-1, 0, 1, 3, 7, 8, 9, 100], np.int64)


@pytest.mark.parametrize("dtype, bits, signed", [(np.int8, 8, True), (np.uint8, 8, False)])
def test_shifts_by_out_of_range_amounts(dtype, bits, signed):
    """A shift by < 0 or >= the width: left gives 0, right gives the sign fill (-1 for a
    negative signed value, else 0); right shifts are arithmetic on signed types,
    logical on unsigned ones."""
    vals = [-100, -1, 1, 77] if signed else [156, 255, 1, 77]
    a = np.repeat(np.array(vals, dtype), len(SHIFTS))
    raw = np.tile(SHIFTS, len(vals))
    b = raw.astype(dtype) if signed else np.where(raw < 0, 200, raw).astype(dtype)
    elt = "i8" if signed else "ui8"
    t = f"tensor<{len(a)}x{elt}>"

    def left(x, s):
        return wrap(x << s, bits, signed) if 0 <= s < bits else 0

    def right(x, s):
        return x >> s if 0 <= s < bits else (-1 if x < 0 else 0)

    np.testing.assert_array_equal(run("graph.shift_left", [a, b], t), each(left, a, b, dtype=dtype))
    np.testing.assert_array_equal(
        run("graph.shift_right", [a, b], t), each(right, a, b, dtype=dtype)
    )


def test_integer_max_pool_pads_with_the_minimum():
    """An i8 max pool over all-negative values with padding: the pad never wins (it is
    the type's minimum, as -inf for floats)."""
    x = -np.arange(1, 17, dtype=np.int8).reshape(1, 1, 4, 4)
    props = (
        " {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}"
    )
    out = run("graph.max_pool2d", [x], "tensor<1x1x3x3xi8>", props)
    want = np.zeros((3, 3), np.int8)
    for oh in range(3):
        for ow in range(3):
            cells = [
                int(x[0, 0, h, w])
                for h in range(2 * oh - 1, 2 * oh + 1)
                for w in range(2 * ow - 1, 2 * ow + 1)
                if 0 <= h < 4 and 0 <= w < 4
            ]
            want[oh, ow] = max(cells)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out[0, 0], want)
    u = np.arange(16, dtype=np.uint8).reshape(1, 1, 4, 4)
    out = run("graph.max_pool2d", [u], "tensor<1x1x3x3xui8>", props)
    assert out[0, 0, 0, 0] == 0 and out[0, 0, 2, 2] == 15


def test_integer_sums_and_products_wrap_in_their_type():
    """reduce_sum / reduce_prod of i32 stay i32 and wrap (numpy would widen to int64)."""
    x = np.array([[2**30, 2**30, 2**30], [-5, 7, 3]], np.int32)
    s = run("graph.reduce_sum", [x], "tensor<2xi32>", " {axes = array<i64: 1>}")
    p = run("graph.reduce_prod", [x], "tensor<2xi32>", " {axes = array<i64: 1>}")
    assert s.dtype == np.int32 and p.dtype == np.int32
    assert s.tolist() == [wrap(3 * 2**30, 32), 5]
    assert p.tolist() == [wrap(2**90, 32), -105]
    f = np.array([[0.5, 1.5], [2.0, 4.0]], np.float32)
    assert run("graph.reduce_sum", [f], "tensor<2xf32>", " {axes = array<i64: 1>}").tolist() == [
        2,
        6,
    ]
    assert run("graph.reduce_prod", [f], "tensor<2xf32>", " {axes = array<i64: 0>}").tolist() == [
        1,
        6,
    ]


# ---------------------------------------------------------------- dynamic_slice


@pytest.mark.parametrize(
    "starts, axes, sizes",
    [
        ([1], [0], [2]),
        ([-2], [1], [2]),  # from the end
        ([-9], [1], [3]),  # clamped to 0
        ([3], [0], [2]),  # clamped to dim - size
        ([9, -1], [-1, 0], [1, 1]),  # negative axis; both clamped
        ([0, 1], [1, 0], [5, 3]),  # the whole axis 1
    ],
)
def test_dynamic_slice(starts, axes, sizes):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    s = np.array(starts, np.int64)
    shape = [4, 5]
    for a, n in zip(axes, sizes, strict=True):
        shape[a % 2] = n
    props = (
        f" {{axes = array<i64: {', '.join(map(str, axes))}>, "
        f"sizes = array<i64: {', '.join(map(str, sizes))}>}}"
    )
    out = run("graph.dynamic_slice", [x, s], f"tensor<{shape[0]}x{shape[1]}xf32>", props)
    rows, cols = list(range(4)), list(range(5))
    for k, (a, n) in enumerate(zip(axes, sizes, strict=True)):
        dim = 4 if a % 2 == 0 else 5
        st = starts[k] + dim if starts[k] < 0 else starts[k]
        st = min(max(st, 0), dim - n)
        if a % 2 == 0:
            rows = rows[st : st + n]
        else:
            cols = cols[st : st + n]
    want = [[5 * r + c for c in cols] for r in rows]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


# ---------------------------------------------------------------- quantization


def _quant(v: float, s: float, z: int, lo: int, hi: int) -> int:
    if math.isnan(v):
        return lo
    q = round(v / s) + z  # Python's round: halves to even
    return min(max(q, lo), hi)


def test_quantize_per_tensor_saturates_and_rounds_halves_to_even():
    x = np.array([0.0, 0.5, 1.5, 2.5, -0.5, 100.0, -100.0, np.nan, 7.2], np.float32)
    s, z = np.array(0.5, np.float32), np.array(3, np.int8)
    out = run("graph.quantize", [x, s, z], "tensor<9xi8>")
    want = each(lambda v: _quant(v, 0.5, 3, -128, 127), x, dtype=np.int8)
    np.testing.assert_array_equal(out, want)
    zu = np.array([250], np.uint8)
    su = np.array([1.0], np.float32)
    out = run("graph.quantize", [x, su, zu], "tensor<9xui8>")
    np.testing.assert_array_equal(
        out, each(lambda v: _quant(v, 1.0, 250, 0, 255), x, dtype=np.uint8)
    )


@pytest.mark.parametrize(
    "axis, props", [(0, " {axis = 0 : i64}"), (1, ""), (0, " {axis = -2 : i64}")]
)
def test_quantize_and_dequantize_per_axis(axis, props):
    x = np.array([[0.3, -1.7, 2.5], [4.0, -0.25, 9.0]], np.float32)
    n = x.shape[axis]
    s = np.array([0.5, 0.25, 2.0][:n], np.float32)
    z = np.array([-3, 0, 5][:n], np.int8)
    out = run("graph.quantize", [x, s, z], "tensor<2x3xi8>", props)
    want = np.zeros((2, 3), np.int8)
    for i in range(2):
        for j in range(3):
            k = i if axis == 0 else j
            want[i, j] = _quant(float(x[i, j]), float(s[k]), int(z[k]), -128, 127)
    np.testing.assert_array_equal(out, want)
    back = run("graph.dequantize", [out, s, z], "tensor<2x3xf32>", props)
    for i in range(2):
        for j in range(3):
            k = i if axis == 0 else j
            assert back[i, j] == np.float32((int(out[i, j]) - int(z[k])) * float(s[k]))


def test_dequantize_per_tensor_of_i32_and_ui8():
    q = np.array([-7, 0, 2**20], np.int32)
    out = run(
        "graph.dequantize", [q, np.array(0.5, np.float32), np.array(1, np.int32)], "tensor<3xf32>"
    )
    assert out.dtype == np.float32 and out.tolist() == [-4.0, -0.5, (2**20 - 1) * 0.5]
    u = np.array([0, 128, 255], np.uint8)
    out = run(
        "graph.dequantize",
        [u, np.array([2.0], np.float32), np.array([128], np.uint8)],
        "tensor<3xf32>",
    )
    assert out.tolist() == [-256.0, 0.0, 254.0]


# ---------------------------------------------------------------- matmul / conv integer


def _matmul_int(a, b, za, zb):
    m, k = a.shape
    n = b.shape[1]
    return np.array(
        [
            [
                sum((int(a[i, t]) - za[i]) * (int(b[t, j]) - zb[j]) for t in range(k))
                for j in range(n)
            ]
            for i in range(m)
        ],
        np.int32,
    )


@pytest.mark.parametrize("per_row, transpose", [(False, False), (True, False), (True, True)])
def test_matmul_integer(per_row, transpose):
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (3, 4)).astype(np.uint8)
    b = rng.integers(-128, 128, (4, 5)).astype(np.int8)
    if per_row:
        za, zb = np.array([1, 200, 7], np.uint8), np.array([3, -2, 0, 5, -128], np.int8)
        zas, zbs = za.tolist(), zb.tolist()
    else:
        za, zb = np.array(129, np.uint8), np.array(-3, np.int8)
        zas, zbs = [129] * 3, [-3] * 5
    bt = np.ascontiguousarray(b.T) if transpose else b
    props = " {transpose_b = true}" if transpose else ""
    out = run("graph.matmul_integer", [a, bt, za, zb], "tensor<3x5xi32>", props)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, _matmul_int(a, b, zas, zbs))


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_integer(per_channel):
    """(x - zx) conv (w - zw), padding adding 0 (not -zx), stride 2, zw per output channel."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    zx = np.array(100, np.uint8)
    zw = np.array([1, -5, 9], np.int8) if per_channel else np.array(-7, np.int8)
    zws = zw.tolist() if per_channel else [-7] * 3
    props = " {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}"
    out = run("graph.conv_integer", [x, w, zx, zw], "tensor<1x3x3x3xi32>", props)
    want = np.zeros((1, 3, 3, 3), np.int64)
    for co in range(3):
        for oh in range(3):
            for ow in range(3):
                acc = 0
                for ci in range(2):
                    for kh in range(3):
                        for kw in range(3):
                            h, v = 2 * oh - 1 + kh, 2 * ow - 1 + kw
                            if 0 <= h < 5 and 0 <= v < 5:
                                acc += (int(x[0, ci, h, v]) - 100) * (
                                    int(w[co, ci, kh, kw]) - zws[co]
                                )
                want[0, co, oh, ow] = acc
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- the te evaluator


def _te(body: str, arrays, in_types: list[str], out_type: str):
    from dlpc.reference.te import run_te

    args = ", ".join(f"%a{n}: {t}" for n, t in enumerate(in_types))
    module = parse_module(f"""func.func @main({args}) -> {out_type} {{
  %y = te.compute "k_0" (%i0) : {out_type} {{
{body}
  }}
  func.return %y : {out_type}
}}""")
    (out,) = run_te(module, arrays)
    return out


def test_te_bitcast_shrui_fptoui():
    """arith.bitcast reads the bits (f32 -> i32), arith.shrui shifts an unsigned value
    logically, arith.fptoui converts a float to an unsigned integer."""
    x = np.array([1.0, -2.5, 200.7, 3.0], np.float32)
    body = """    %v = te.read %a0[%i0] : tensor<4xf32>
    %b = arith.bitcast %v : f32 to i32
    te.yield %b : i32"""
    out = _te(body, [x], ["tensor<4xf32>"], "tensor<4xi32>")
    np.testing.assert_array_equal(
        out, [struct.unpack("<i", struct.pack("<f", v))[0] for v in x.tolist()]
    )
    body = """    %v = te.read %a0[%i0] : tensor<4xf32>
    %u = arith.fptoui %v : f32 to ui8
    te.yield %u : ui8"""
    xp = np.array([1.0, 2.5, 200.7, 255.0], np.float32)
    out = _te(body, [xp], ["tensor<4xf32>"], "tensor<4xui8>")
    assert out.dtype == np.uint8 and out.tolist() == [1, 2, 200, 255]
    body = """    %v = te.read %a0[%i0] : tensor<4xui8>
    %s = te.read %a1[%i0] : tensor<4xui8>
    %r = arith.shrui %v, %s : ui8
    te.yield %r : ui8"""
    u = np.array([255, 128, 7, 200], np.uint8)
    sh = np.array([1, 7, 0, 3], np.uint8)
    out = _te(body, [u, sh], ["tensor<4xui8>", "tensor<4xui8>"], "tensor<4xui8>")
    assert out.tolist() == [127, 1, 7, 25]


TE_UNARY = [
    ("sin", math.sin, 0.5),
    ("cos", math.cos, 0.5),
    ("tan", math.tan, 0.5),
    ("asin", math.asin, 0.5),
    ("acos", math.acos, 0.5),
    ("atan", math.atan, 0.5),
    ("sinh", math.sinh, 0.5),
    ("cosh", math.cosh, 0.5),
    ("asinh", math.asinh, 0.5),
    ("acosh", math.acosh, 1.5),
    ("atanh", math.atanh, 0.5),
    ("floor", math.floor, -1.5),
    ("ceil", math.ceil, -1.5),
    ("roundeven", round, 2.5),
]


@pytest.mark.parametrize("name, f, at", TE_UNARY)
def test_te_math_unary(name, f, at):
    x = np.array(
        [at, -at if name not in ("acosh",) else at + 1, 0.25 if name != "acosh" else 3.0],
        np.float32,
    )
    body = f"""    %v = te.read %a0[%i0] : tensor<3xf32>
    %r = math.{name} %v : f32
    te.yield %r : f32"""
    out = _te(body, [x], ["tensor<3xf32>"], "tensor<3xf32>")
    np.testing.assert_allclose(out, each(lambda v: float(f(v)), x, dtype=np.float64), rtol=2e-6)


def test_quantize_and_dequantize_in_f16():
    """x / scale in x's float type (f16), and dequantize's answer in the scale's type."""
    x = np.array([0.1, 1.0, 3.3, -2.05], np.float16)
    s, z = np.array(np.float16(0.1)), np.array(0, np.int8)
    out = run("graph.quantize", [x, s, z], "tensor<4xi8>")
    want = [round(float(np.float16(v) / np.float16(0.1))) for v in x.tolist()]
    assert out.tolist() == want
    back = run("graph.dequantize", [out, s, z], "tensor<4xf16>")
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, (out.astype(np.float32) * np.float32(s)).astype(np.float16))


# ---------------------------------------------------------------- older te evaluator lines


def test_te_bool_extension_and_a_scalar_if():
    """arith.extui of an i1 is 0 / 1; an scf.if on a condition the same for every index
    takes one branch for all."""
    x = np.array([-1.0, 2.0, 0.0, 5.0], np.float32)
    body = """    %v = te.read %a0[%i0] : tensor<4xf32>
    %z = arith.constant 0.0 : f32
    %p = arith.cmpf ogt, %v, %z : f32
    %e = arith.extui %p : i1 to i32
    %t = arith.constant true
    %r = scf.if %t -> (i32) {
      %k = arith.constant 10 : i32
      %s = arith.addi %e, %k : i32
      scf.yield %s : i32
    } else {
      scf.yield %e : i32
    }
    te.yield %r : i32"""
    out = _te(body, [x], ["tensor<4xf32>"], "tensor<4xi32>")
    assert out.dtype == np.int32 and out.tolist() == [10, 11, 10, 11]


def test_te_refusals():
    """A read past a dim is an IndexError naming the range; an op the evaluator lacks and
    a missing weight are one-line errors."""
    from dlpc.diagnostics import DlpcError
    from dlpc.reference.te import run_te

    x = np.arange(4, dtype=np.float32)
    body = """    %c = arith.constant 1 : index
    %j = arith.addi %i0, %c : index
    %v = te.read %a0[%j] : tensor<4xf32>
    te.yield %v : f32"""
    with pytest.raises(
        IndexError, match=r"^te.read of tensor<4xf32> out of bounds: index 1..4 for a dim of 4$"
    ):
        _te(body, [x], ["tensor<4xf32>"], "tensor<4xf32>")
    body = """    %v = te.read %a0[%i0] : tensor<4xf32>
    %r = math.cbrt %v : f32
    te.yield %r : f32"""
    with pytest.raises(DlpcError, match=r"^error: te evaluator does not know math.cbrt$"):
        _te(body, [x], ["tensor<4xf32>"], "tensor<4xf32>")
    module = parse_module("""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = graph.param "w" : tensor<4xf32>
  func.return %w : tensor<4xf32>
}""")
    with pytest.raises(DlpcError, match=r"^error: no value for weight 'w' \(graph.param\)$"):
        run_te(module, [x])
    np.testing.assert_array_equal(run_te(module, [x], {"w": x + 1})[0], x + 1)


def test_dropout_without_a_step_is_a_copy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run("graph.dropout", [x], "tensor<2x3xf32>", " {p = 0.5 : f64}")
    np.testing.assert_array_equal(out, x)
    assert out is not x


# ---------------------------------------------------------------- seed 49's survivors


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_batch_norm_per_channel(layout):
    """Each channel c: (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], channels
    on axis 1 (nchw) or last (nhwc)."""
    rng = np.random.default_rng(6)
    shape = (2, 3, 2, 2) if layout == "nchw" else (2, 2, 2, 3)
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = np.array([0.5, 2.0, 1.0], np.float32)
    t = "x".join(map(str, shape))
    props = (
        ' {epsilon = 0.001 : f64, layout = "nhwc"}'
        if layout == "nhwc"
        else " {epsilon = 0.001 : f64}"
    )
    out = run("graph.batch_norm", [x, scale, bias, mean, var], f"tensor<{t}xf32>", props)
    want = np.zeros(shape, np.float64)
    for idx in np.ndindex(*shape):
        c = idx[1] if layout == "nchw" else idx[3]
        v = (float(x[idx]) - float(mean[c])) / math.sqrt(float(var[c]) + 0.001)
        want[idx] = v * float(scale[c]) + float(bias[c])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3), (2, 5), (1, 4), (2, 4, 1), (8,)])
def test_an_input_of_another_shape_is_refused(shape):
    """Smaller or larger, of another rank: one line naming the input and both shapes."""
    from dlpc.diagnostics import DlpcError

    module = parse_module("""func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  func.return %x : tensor<2x4xf32>
}""")
    got = "x".join(map(str, shape))
    with pytest.raises(DlpcError) as e:
        run_reference(module, [np.zeros(shape, np.float32)], {})
    assert str(e.value) == f"error: input 'x' has shape {got} but the model expects 2x4"


def _unordered(op):
    return lambda a, b: op(a, b) | np.isnan(a) | np.isnan(b)


CMPF = {
    "false": lambda a, b: np.zeros(a.shape, bool),
    "oeq": lambda a, b: a == b,
    "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b,
    "olt": lambda a, b: a < b,
    "ole": lambda a, b: a <= b,
    "one": lambda a, b: (a < b) | (a > b),
    "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "ueq": _unordered(lambda a, b: a == b),
    "ugt": _unordered(lambda a, b: a > b),
    "uge": _unordered(lambda a, b: a >= b),
    "ult": _unordered(lambda a, b: a < b),
    "ule": _unordered(lambda a, b: a <= b),
    "une": lambda a, b: a != b,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    "true": lambda a, b: np.ones(a.shape, bool),
}


@pytest.mark.parametrize("pred", CMPF)
def test_te_float_comparisons_with_nan(pred):
    """The te evaluator's arith.cmpf, each predicate on NaN, equal, smaller and larger
    operands: ordered ones false and unordered ones true where an operand is NaN."""
    nan = np.float32("nan")
    x = np.array([nan, 1, nan, 1, 2, 1], np.float32)
    y = np.array([1, nan, nan, 1, 1, 2], np.float32)
    body = f"""    %a = te.read %a0[%i0] : tensor<6xf32>
    %b = te.read %a1[%i0] : tensor<6xf32>
    %c = arith.cmpf {pred}, %a, %b : f32
    %e = arith.extui %c : i1 to i32
    te.yield %e : i32"""
    out = _te(body, [x, y], ["tensor<6xf32>", "tensor<6xf32>"], "tensor<6xi32>")
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, CMPF[pred](x, y).astype(np.int32))


@pytest.mark.parametrize(
    "pred", ["slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge", "eq", "ne"]
)
def test_te_integer_comparisons_signed_and_unsigned(pred):
    """arith.cmpi on i8: the s* predicates compare signed values, the u* ones the bits as
    unsigned (-1 is 255)."""
    x = np.array([-1, 1, 5, -128, 7], np.int8)
    y = np.array([1, -1, 5, 127, 7], np.int8)
    body = f"""    %a = te.read %a0[%i0] : tensor<5xi8>
    %b = te.read %a1[%i0] : tensor<5xi8>
    %c = arith.cmpi {pred}, %a, %b : i8
    %e = arith.extui %c : i1 to i32
    te.yield %e : i32"""
    out = _te(body, [x, y], ["tensor<5xi8>", "tensor<5xi8>"], "tensor<5xi32>")
    ops = {
        "lt": "__lt__",
        "le": "__le__",
        "gt": "__gt__",
        "ge": "__ge__",
        "eq": "__eq__",
        "ne": "__ne__",
    }
    vx, vy = x.tolist(), y.tolist()
    if pred[0] == "u":
        vx, vy = [v % 256 for v in vx], [v % 256 for v in vy]
    name = ops[pred if pred in ("eq", "ne") else pred[1:]]
    want = [int(getattr(a, name)(b)) for a, b in zip(vx, vy, strict=True)]
    assert out.tolist() == want


@pytest.mark.parametrize("pred", [p for p in CMPF if p not in ("ord", "uno")])
def test_te_float_comparisons_without_nan(pred):
    """The same without NaN: an unordered predicate is its ordered one (ugt on equal
    operands is false, uge true)."""
    x = np.array([1, 2, 1, -0.0], np.float32)
    y = np.array([1, 1, 2, 0.0], np.float32)
    body = f"""    %a = te.read %a0[%i0] : tensor<4xf32>
    %b = te.read %a1[%i0] : tensor<4xf32>
    %c = arith.cmpf {pred}, %a, %b : f32
    %e = arith.extui %c : i1 to i32
    te.yield %e : i32"""
    out = _te(body, [x, y], ["tensor<4xf32>", "tensor<4xf32>"], "tensor<4xi32>")
    np.testing.assert_array_equal(out, CMPF[pred](x, y).astype(np.int32))


# ---------------------------------------------------------------- seed 50's survivor


def test_a_loop_of_zero_trips_runs_no_iteration():
    """graph.loop {trip_count = 0} with a true condition: no iteration, on the reference
    and in the emitted numpy program (whose `while` bounds the count unless it is -1)."""
    from test_control_flow import LOOP

    module = parse_module(LOOP.replace("trip_count = 5", "trip_count = 0"))
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    inputs = [a, w, np.array(1e9, np.float32)]
    want = run_reference(module, inputs, {})
    np.testing.assert_array_equal(want[0], a)
    assert want[1] == 0
    namespace: dict = {}
    exec(emit_numpy(module), namespace)
    got = namespace["main"](*inputs, params={})
    np.testing.assert_array_equal(got[0], a)
    assert got[1] == 0


# ---------------------------------------------------------------- the numpy program's comm ops

OVERLAP = """func.func @main(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = comm.all_reduce sum %a group <world 1, ranks [0]> : tensor<4xf32>
  %b = graph.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = graph.relu %b : (tensor<4xf32>) -> tensor<4xf32>
  %z = graph.add %y, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %u = comm.all_reduce avg %z group <world 1, ranks [0]> : tensor<4xf32>
  %v = graph.neg %u : (tensor<4xf32>) -> tensor<4xf32>
  func.return %v, %z : tensor<4xf32>, tensor<4xf32>
}"""


def _main_of(source: str) -> list[str]:
    return source[source.index("def main(") :].strip().splitlines()


def test_an_all_reduce_overlaps_the_ops_up_to_its_first_reader():
    """An all_reduce whose result the next op does not read is started, the ops between run,
    and it is waited for just before its first reader; one the next op reads blocks. On
    one rank the program runs: the sums are the values."""
    module = parse_module(OVERLAP)
    source = emit_numpy(module)
    group = "group=(1, (0,), (), '')"
    assert _main_of(source) == [
        "def main(*inputs, params):",
        "    (v_x, v_w,) = inputs",
        "    v_a = mul(v_x, v_x)",
        f"    v_request = COMM.all_reduce_start([v_a], kind='sum', {group})",
        "    del v_a",
        "    v_b = add(v_w, v_w)",
        "    v_c = relu(v_b)",
        "    del v_b",
        "    v_y, = v_request.wait()",
        "    v_z = add(v_y, v_c)",
        "    del v_y, v_c",
        f"    v_u, = COMM.all_reduce([v_z], kind='avg', {group})",
        "    v_v = neg(v_u)",
        "    return (v_v, v_z,)",
    ]
    assert "from dlpc.runtime.mpi import world\n\nCOMM = world()\n" in source
    namespace: dict = {}
    exec(source, namespace)
    x = np.arange(4, dtype=np.float32)
    w = np.array([-1, 0.5, 1, 2], np.float32)
    v, z = namespace["main"](x, w, params={})
    np.testing.assert_array_equal(z, x * x + np.maximum(w + w, 0))
    np.testing.assert_array_equal(v, -z)
    assert "COMM" not in emit_numpy(parse_module(LOOP_FREE))


LOOP_FREE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}"""


def test_comm_calls_of_one_bucket_a_send_and_a_recv():
    """A two-operand all_reduce is one bucket (one list), its unread result blocks it; a
    send has no target; a recv names its shape and dtype."""
    module = parse_module("""func.func @main(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y:2 = comm.all_reduce sum %x, %w group <world 2, ranks [0, 1]> : tensor<4xf32>, tensor<4xf32>
  comm.send %x to 1 tag 0 group <world 2, ranks [0, 1]> : tensor<4xf32>
  %r = comm.recv from 1 tag 0 group <world 2, ranks [0, 1]> : tensor<4xf32>
  %z = graph.add %y#1, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}""")
    group = "group=(2, (0, 1), (), '')"
    assert _main_of(emit_numpy(module)) == [
        "def main(*inputs, params):",
        "    (v_x, v_w,) = inputs",
        f"    v_y, v_y_2, = COMM.all_reduce([v_x, v_w], kind='sum', {group})",
        "    del v_y",
        f"    COMM.send(v_x, peer=1, tag=0, {group})",
        f"    v_r = COMM.recv(peer=1, tag=0, shape=(4,), dtype='float32', {group})",
        "    v_z = add(v_y_2, v_r)",
        "    return (v_z,)",
    ]


# ---------------------------------------------------------------- seed 51's survivor


def test_constants_in_the_numpy_program():
    """A constant whose elements are all equal is `np.full`; one whose other elements are
    only smaller (or larger) than the first lists them all."""
    module = parse_module("""func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = graph.constant dense<[3.0, 1.0, 2.0]> : tensor<3xf32>
  %b = graph.constant dense<[1.0, 4.0, 5.0]> : tensor<3xf32>
  %c = graph.constant dense<7.0> : tensor<3xf32>
  %s = graph.add %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %t = graph.add %s, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.add %t, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}""")
    source = emit_numpy(module)
    assert "np.array([3.0, 1.0, 2.0], dtype=np.float32).reshape((3,))" in source
    assert "np.array([1.0, 4.0, 5.0], dtype=np.float32).reshape((3,))" in source
    assert "np.full((3,), 7.0, dtype=np.float32)" in source
    namespace: dict = {}
    exec(source, namespace)
    x = np.array([0.5, 0.25, 0.125], np.float32)
    (y,) = namespace["main"](x, params={})
    np.testing.assert_array_equal(y, np.array([11.5, 12.25, 14.125], np.float32))
