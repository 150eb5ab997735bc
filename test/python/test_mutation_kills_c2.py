"""Tests for the C backend's lines added since its seed-40 sample (issue 35, bench/mutation.py
--area c-backend): vector<16xf32> ops and `#if` loops (loop-slide-rows), data integer
arithmetic that wraps or divides by zero as ONNX and numpy do, bitcasts, clamped loops and
their short / long copies, and which kernels @main's team region takes. Hand-written loop
IR through the emitter: exact C text and answers against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.backends.c import emit_c
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module

ATTRS = "attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _kernel_text(source: str, name: str = "k") -> list[str]:
    """The stripped lines of kernel `name`'s plain function."""
    body = source[source.index(f"static void kernel_{name}(") :]
    return [ln.strip() for ln in body[: body.index("\n}\n")].splitlines()]


def _one_loop(args: str, body: str, n: int = 4, attrs: str = "") -> str:
    return f"""
func.func @main({args}) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %i = 0 to {n} step 1 {{name = "i0"{attrs}}} {{
{body}
    }}
  }}
  func.return
}}"""


# ---------------------------------------------------------------- vector<16xf32>, #if

VECTOR = f"""
func.func @main(%x: memref<2x32xf32>, %w: memref<1xf32>, %out: memref<2x16xf32>) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %r = 0 to 2 step 1 {{name = "r", dlpc.cpp_if = "1"}} {{
      %z = arith.constant 0 : index
      %s = arith.constant 16 : index
      %a = vector.load %x[%r, %z] : memref<2x32xf32>, vector<16xf32>
      %b = vector.load %x[%r, %s] : memref<2x32xf32>, vector<16xf32>
      %k = memref.load %w[%z] : memref<1xf32>
      %kb = vector.broadcast %k : f32 to vector<16xf32>
      %sh = vector.shuffle %a, %b [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 31] : vector<16xf32>, vector<16xf32>
      %m = arith.mulf %sh, %kb : vector<16xf32>
      vector.store %m, %out[%r, %z] : memref<2x16xf32>, vector<16xf32>
    }}
    loop.for %q = 0 to 2 step 1 {{name = "q", dlpc.cpp_if = "0"}} {{
      %z = arith.constant 0 : index
      %c = arith.constant 7.0 : f32
      memref.store %c, %out[%q, %z] : memref<2x16xf32>
    }}
  }}
  func.return
}}"""


def test_vector_ops_and_cpp_if_loops():
    """vector.load / store are 16 floats through `dlpc_v16f` at an element's address, a
    broadcast is the scalar 16 times, a shuffle names its lanes (16 + j is the second
    input's lane j); a `dlpc.cpp_if` loop sits between `#if <cond>` and `#endif`, so the
    `#if 0` loop's stores of 7 never run."""
    module = parse_module(VECTOR)
    source = emit_c(module)
    lines = _kernel_text(source)
    assert lines[lines.index("#if 1") + 1] == "for (int64_t v_r = 0; v_r < 2; v_r++) {"
    assert "const dlpc_v16f v_a = *(const dlpc_v16f *)&v_x[v_r * 32 + 0];" in lines
    assert "const dlpc_v16f v_b = *(const dlpc_v16f *)&v_x[v_r * 32 + 16];" in lines
    assert f"const dlpc_v16f v_kb = (dlpc_v16f){{{', '.join(['v_k'] * 16)}}};" in lines
    lanes = ", ".join(str(i) for i in [*range(1, 16), 31])
    assert f"const dlpc_v16f v_sh = DLPC_SHUFFLE16(v_a, v_b, {lanes});" in lines
    assert "*(dlpc_v16f *)&v_out0[v_r * 16 + 0] = v_m;" in lines
    assert lines.count("#endif") == 2
    at = lines.index("#if 0")
    assert lines[at + 1] == "for (int64_t v_q = 0; v_q < 2; v_q++) {"
    assert lines[lines.index("#endif", at) - 1] == "}"
    x = np.random.default_rng(1).standard_normal((2, 32)).astype(np.float32)
    w = np.array([1.5], np.float32)
    (out,) = CFunction(module, name="v16_ops")(x, w)
    want = np.concatenate([x[:, 1:16], x[:, 31:32]], axis=1) * w[0]
    np.testing.assert_array_equal(out, want)


def test_c_types_refused():
    """A vector other than 16 x f32 and an integer of another width have no C type."""
    from xdsl.dialects.builtin import IntegerType, VectorType, f32, f64

    from dlpc.backends.c import c_type

    assert c_type(VectorType(f32, [16])) == "dlpc_v16f"
    for ty in (VectorType(f32, [8]), VectorType(f64, [16]), IntegerType(4)):
        with pytest.raises(DlpcError, match=f"^error: c backend: unsupported type {ty}$"):
            c_type(ty)


# ---------------------------------------------------------------- data integers

SIGNED_DIV = """
      %a = memref.load %x[%i] : memref<8xi32>
      %b = memref.load %y[%i] : memref<8xi32>
      %d = arith.divsi %a, %b : i32
      %r = arith.remsi %a, %b : i32
      %n = math.absi %a : i32
      %ten = arith.constant 10 : i32
      %dr = arith.muli %d, %ten : i32
      %s = arith.addi %dr, %r : i32
      memref.store %s, %out[%i] : memref<8xi32>
      memref.store %n, %abs[%i] : memref<8xi32>"""


def _trunc_div(a: int, b: int) -> tuple[int, int]:
    """C's signed division: the quotient rounded toward 0, x / 0 = 0, INT_MIN / -1 wraps."""
    if b == 0:
        return 0, 0
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    q = (q + 2**31) % 2**32 - 2**31
    return q, 0 if b == -1 else a - q * b


def test_signed_division_by_zero_and_int_min_by_minus_one():
    """divsi / remsi on i32 data: x / 0 and x % 0 are 0 (numpy's, x86 would trap),
    INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0, else C's truncation; absi of
    INT_MIN wraps to INT_MIN (ONNX's Abs)."""
    args = "%x: memref<8xi32>, %y: memref<8xi32>, %out: memref<8xi32>, %abs: memref<8xi32>"
    module = parse_module(
        _one_loop(args, SIGNED_DIV, n=8).replace("dlpc.num_outputs = 1", "dlpc.num_outputs = 2")
    )
    source = emit_c(module)
    lines = _kernel_text(source)
    assert (
        "const int32_t v_d = (v_b == 0 ? (int32_t)0 : v_b == -1 ? (int32_t)((uint32_t)0 - "
        "(uint32_t)v_a) : v_a / v_b);" in lines
    )
    assert (
        "const int32_t v_r = (v_b == 0 ? (int32_t)0 : v_b == -1 ? (int32_t)0 : v_a % v_b);" in lines
    )
    assert "const int32_t v_n = (v_a < 0 ? (int32_t)((uint32_t)0 - v_a) : v_a);" in lines
    x = np.array([7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 9], np.int32)
    y = np.array([2, 2, -2, -2, 0, -1, 1, -1], np.int32)
    out, ab = CFunction(module, name="signed_div")(x, y)
    want = []
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        q, r = _trunc_div(a, b)
        want.append(((q * 10 + r) + 2**31) % 2**32 - 2**31)
    np.testing.assert_array_equal(out, np.array(want, np.int32))
    np.testing.assert_array_equal(ab, np.array([7, 7, 7, 7, 5, INT32_MIN, INT32_MIN, 9]))


WRAP = """
      %a = memref.load %x[%i] : memref<4x{t}>
      %b = memref.load %y[%i] : memref<4x{t}>
      %s = arith.addi %a, %b : {t}
      %m = arith.muli %a, %b : {t}
      %d = arith.subi %s, %m : {t}
      memref.store %d, %out[%i] : memref<4x{t}>"""


@pytest.mark.parametrize(
    "t, dtype, cast, wide",
    [
        ("i8", np.int8, "int8_t", "uint32_t"),
        ("ui8", np.uint8, "uint8_t", "uint32_t"),
        ("ui16", np.uint16, "uint16_t", "uint32_t"),
        ("i32", np.int32, "int32_t", "uint32_t"),
        ("i64", np.int64, "int64_t", "uint64_t"),
        ("ui32", np.uint32, None, None),
        ("ui64", np.uint64, None, None),
    ],
)
def test_integer_add_sub_mul_wrap(t, dtype, cast, wide):
    """Data integer add / sub / mul wrap modulo 2**bits (numpy's and ONNX's): narrower
    types and signed ones through uint32_t / uint64_t and back (65535 * 65535 overflows
    int), uint32_t and uint64_t as they are."""
    args = f"%x: memref<4x{t}>, %y: memref<4x{t}>, %out: memref<4x{t}>"
    module = parse_module(_one_loop(args, WRAP.format(t=t)))
    lines = _kernel_text(emit_c(module))
    ctype = cast or ("uint32_t" if t == "ui32" else "uint64_t")
    if cast:
        assert f"const {ctype} v_s = ({cast})(({wide})v_a + ({wide})v_b);" in lines
        assert f"const {ctype} v_m = ({cast})(({wide})v_a * ({wide})v_b);" in lines
        assert f"const {ctype} v_d = ({cast})(({wide})v_s - ({wide})v_m);" in lines
    else:
        assert (
            f"const {ctype} v_s = v_a + v_b;" in lines
            and f"const {ctype} v_d = v_s - v_m;" in lines
        )
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max, 3], dtype)
    y = np.array([info.max, info.max, 1, 5], dtype)
    (out,) = CFunction(module, name=f"wrap_{t}")(x, y)
    with np.errstate(over="ignore"):
        want = (x + y) - (x * y)
    np.testing.assert_array_equal(out, want)


def test_nsw_arithmetic_is_plain_signed_c():
    """An `overflow<nsw>` add / mul of a signed type is printed as plain C (its producer
    keeps it in range); on an unsigned one the flag changes nothing."""
    body = """
      %a = memref.load %x[%i] : memref<4x{t}>
      %b = memref.load %y[%i] : memref<4x{t}>
      %s = arith.addi %a, %b overflow<nsw> : {t}
      %m = arith.muli %s, %b overflow<nsw> : {t}
      memref.store %m, %out[%i] : memref<4x{t}>"""
    for t in ("i16", "ui16"):
        args = f"%x: memref<4x{t}>, %y: memref<4x{t}>, %out: memref<4x{t}>"
        module = parse_module(_one_loop(args, body.format(t=t)))
        lines = _kernel_text(emit_c(module))
        if t == "i16":
            assert (
                "const int16_t v_s = v_a + v_b;" in lines
                and "const int16_t v_m = v_s * v_b;" in lines
            )
        else:
            assert "const uint16_t v_s = (uint16_t)((uint32_t)v_a + (uint32_t)v_b);" in lines
        x = np.array([1, 2, -3, 100], np.int16).astype(np.dtype(t.replace("i", "int")))
        y = np.array([4, 5, 6, 7], np.int16).astype(x.dtype)
        (out,) = CFunction(module, name=f"nsw_{t}")(x, y)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(out, (x + y) * y)


def test_unsigned_data_division_by_zero_and_by_a_constant():
    """ui8 divsi / remsi read the bits unsigned: x / 0 is 0 and x % 0 is x (numpy's);
    an i8 divui by a nonzero constant needs no guard, by a zero constant it does."""
    body = """
      %a = memref.load %x[%i] : memref<4xui8>
      %b = memref.load %y[%i] : memref<4xui8>
      %d = arith.divsi %a, %b : ui8
      %r = arith.remsi %a, %b : ui8
      %e = arith.bitcast %a : ui8 to i8
      %k = arith.constant 3 : i8
      %q = arith.divui %e, %k : i8
      %z = arith.constant 0 : i8
      %q0 = arith.divui %e, %z : i8
      %q1 = arith.addi %q, %q0 : i8
      %qu = arith.bitcast %q1 : i8 to ui8
      %s1 = arith.addi %d, %r : ui8
      %s = arith.addi %s1, %qu : ui8
      memref.store %s, %out[%i] : memref<4xui8>"""
    args = "%x: memref<4xui8>, %y: memref<4xui8>, %out: memref<4xui8>"
    module = parse_module(_one_loop(args, body))
    lines = _kernel_text(emit_c(module))
    assert (
        "const uint8_t v_d = (uint8_t)((uint8_t)v_b == 0 ? (uint8_t)0 : (uint8_t)v_a / (uint8_t)v_b);"
        in lines
    )
    assert (
        "const uint8_t v_r = (uint8_t)((uint8_t)v_b == 0 ? (uint8_t)v_a : (uint8_t)v_a % (uint8_t)v_b);"
        in lines
    )
    assert "const int8_t v_q = (int8_t)((uint8_t)v_e / (uint8_t)3);" in lines
    assert (
        "const int8_t v_q0 = (int8_t)((uint8_t)0 == 0 ? (uint8_t)0 : (uint8_t)v_e / (uint8_t)0);"
        in lines
    )
    x = np.array([200, 7, 255, 9], np.uint8)
    y = np.array([0, 0, 16, 2], np.uint8)
    (out,) = CFunction(module, name="ui8_div")(x, y)
    a, b = x.astype(np.int64), y.astype(np.int64)
    d = np.where(b == 0, 0, a // np.maximum(b, 1))
    r = np.where(b == 0, a, a % np.maximum(b, 1))
    np.testing.assert_array_equal(out, ((d + r + a // 3) % 256).astype(np.uint8))


def test_bitcasts():
    """Integer to integer of one width is a C cast (i8 -> ui8: the same bits); f32 <->
    i32 goes through a union (the bits, not the value)."""
    body = """
      %a = memref.load %x[%i] : memref<4xf32>
      %b = arith.bitcast %a : f32 to i32
      %one = arith.constant 1 : i32
      %c = arith.addi %b, %one : i32
      %f = arith.bitcast %c : i32 to f32
      memref.store %f, %out[%i] : memref<4xf32>
      %e = arith.trunci %b : i32 to i8
      %u = arith.bitcast %e : i8 to ui8
      memref.store %u, %bytes[%i] : memref<4xui8>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>, %bytes: memref<4xui8>"
    module = parse_module(
        _one_loop(args, body).replace("dlpc.num_outputs = 1", "dlpc.num_outputs = 2")
    )
    lines = _kernel_text(emit_c(module))
    assert "const int32_t v_b = ((union { float a; int32_t b; }){ .a = v_a }).b;" in lines
    assert "const float v_f = ((union { int32_t a; float b; }){ .a = v_c }).b;" in lines
    assert "const uint8_t v_u = (uint8_t)v_e;" in lines
    x = np.array([1.0, -2.5, 3.0e-3, 0.0], np.float32)
    out, by = CFunction(module, name="bitcasts")(x, x)
    np.testing.assert_array_equal(out, (x.view(np.int32) + 1).view(np.float32))
    np.testing.assert_array_equal(by, x.view(np.int32).astype(np.int8).view(np.uint8))


# ---------------------------------------------------------------- clamped loops

CLAMP = """
func.func @main(%x: memref<24xf32>, %dims: memref<1xi64>, %out: memref<24xf32>) {attrs} {{
  loop.kernel "k" {{
    %c0 = arith.constant 0 : index
    %d = memref.load %dims[%c0] : memref<1xi64>
    %n = arith.index_cast %d : i64 to index
    %cz = arith.constant 0.0 : f32
    loop.for %i = 0 to {upper} step {step} {{name = "i0"{marks}}} {{
      {limit}%in = arith.cmpi {pred}, {lhs}, {rhs} : index
      scf.if %in {{
        %a = memref.load %x[%i] : memref<24xf32>
        %b = arith.negf %a : f32
        {inner}memref.store %b, %out[%i] : memref<24xf32>
      }}{orelse}
    }}
  }}
  func.return
}}"""


def _clamp(**kw) -> str:
    fields = dict(upper=24, step=1, marks="", limit="", pred="slt", lhs="%i", rhs="%n")
    fields.update(orelse="", inner="", attrs=ATTRS)
    fields.update(kw)
    return CLAMP.format(**fields)


def _run_clamp(module, name: str, step: int = 1, last: int | None = None):
    f = CFunction(module, name=name)
    x = np.arange(1, 25, dtype=np.float32)
    for n in (0, 5, 17, 24, 30):
        (out,) = f(x, np.array([n], np.int64))
        hit = np.zeros(24, bool)
        hit[: min(n if last is None else last(n), 24) : step] = True
        np.testing.assert_array_equal(out[hit], -x[hit])


def test_a_loop_whose_body_is_if_iv_below_a_limit_stops_at_it():
    """`for i < upper { if (i < n) body }` runs to min(n, upper) with no `if` (`clamped`);
    with a step of 2 too."""
    for step in (1, 2):
        module = parse_module(_clamp(step=step))
        lines = _kernel_text(emit_c(module))
        inc = "v_i0++" if step == 1 else "v_i0 += 2"
        assert f"for (int64_t v_i0 = 0; v_i0 < (v_n < 24 ? v_n : 24); {inc}) {{" in lines
        assert not any(ln.startswith("if (") for ln in lines)
        _run_clamp(module, f"clamp_{step}", step)


@pytest.mark.parametrize(
    "kw",
    [
        {"pred": "sle"},  # i <= n: one more iteration than `<`
        {"lhs": "%n", "rhs": "%i", "pred": "sgt"},  # the limit on the left
        {"rhs": "%i"},  # a limit defined inside the loop (its induction variable)
        {"orelse": " else {\n        memref.store %cz, %out[%i] : memref<24xf32>\n      }"},
        {"inner": "%u = arith.select %in, %a, %b : f32\n        "},  # the comparison used twice
        {"limit": "%m = arith.addi %n, %n : index\n      "},  # three ops, not only the if
    ],
)
def test_a_loop_that_is_not_clamped_keeps_its_guard(kw):
    """Any other shape of body keeps its `if` inside a loop to the static bound."""
    module = parse_module(_clamp(**kw))
    lines = _kernel_text(emit_c(module))
    assert "for (int64_t v_i0 = 0; v_i0 < 24; v_i0++) {" in lines
    assert any(ln.startswith("if (") for ln in lines)
    if kw.get("pred") == "sle":
        _run_clamp(module, "clamp_sle", last=lambda n: n + 1)
    elif "rhs" not in kw:
        _run_clamp(module, f"clamp_{len(kw)}_{next(iter(kw))}")


def test_an_empty_else_is_still_clamped():
    """An `else` holding only its yield changes nothing: still clamped."""
    module = parse_module(_clamp(orelse=" else {\n      }"))
    assert "for (int64_t v_i0 = 0; v_i0 < (v_n < 24 ? v_n : 24); v_i0++) {" in _kernel_text(
        emit_c(module)
    )


@pytest.mark.parametrize(
    "upper, step, marks, split",
    [
        (24, 1, ", vectorize", True),  # 24 > SHORT_TRIP: two copies
        (16, 1, ", vectorize", False),  # exactly SHORT_TRIP: one
        (24, 2, ", vectorize", False),  # a step of 2: one
        (24, 1, ", vectorize, unroll = 2", False),  # GCC ivdep, not omp simd: one
    ],
)
def test_short_and_long_copies_of_a_clamped_vector_loop(upper, step, marks, split):
    """A clamped `omp simd` loop of step 1 over more than SHORT_TRIP iterations is printed
    twice: `simdlen(8)` when the call's trip count is below SHORT_TRIP, else the widest,
    the same body in both; any other vector loop once."""
    module = parse_module(_clamp(upper=upper, step=step, marks=marks))
    lines = _kernel_text(emit_c(module))
    head = f"for (int64_t v_i0 = 0; v_i0 < (v_n < {upper} ? v_n : {upper}); "
    fors = [ln for ln in lines if ln.startswith(head)]
    if split:
        at = lines.index("if (v_n - 0 < 16) {")
        assert lines[at + 1] == "#pragma omp simd simdlen(8)"
        other = lines.index("} else {", at)
        assert lines[other + 1] == "#pragma omp simd"
        assert lines[at + 2 : other] == lines[other + 2 : other + 2 + other - at - 2]
        assert len(fors) == 2
    else:
        assert not any("simdlen" in ln for ln in lines) and len(fors) == 1
    if upper == 24:
        _run_clamp(module, f"short_long_{step}_{len(marks)}", step)


# ---------------------------------------------------------------- simd reductions

SUM = """
func.func @main(%x: memref<64x{t}>, %y: memref<64x{t}>, %out: memref<{t}>) {attrs} {{
  loop.kernel "k" {{
    %acc = memref.alloca() : memref<{t}>
    %z = arith.constant 0 : {t}
    memref.store %z, %acc[] : memref<{t}>
    loop.for %r = 0 to 64 step 1 {{name = "r0", vectorize, reduction}} {{
      %v = memref.load %x[%r] : memref<64x{t}>
      %a = memref.load %acc[] : memref<{t}>
      %s = arith.addi %a, %v : {t}
      memref.store %s, %acc[] : memref<{t}>
    }}
    %t = memref.load %acc[] : memref<{t}>
    memref.store %t, %out[] : memref<{t}>
  }}
  func.return
}}"""


@pytest.mark.parametrize("t, dtype, clause", [("i32", np.int32, False), ("i64", np.int64, False)])
def test_a_wrapping_integer_sum_is_no_openmp_reduction(t, dtype, clause):
    """An i32 / i64 sum wraps through uint32_t / uint64_t: OpenMP would add its partial
    sums in the signed type (overflow is UB), so the loop is `GCC ivdep`, not `omp simd
    reduction`; the sum still wraps as numpy's."""
    module = parse_module(SUM.format(t=t, attrs=ATTRS))
    lines = _kernel_text(emit_c(module))
    assert ("#pragma GCC ivdep" in lines) != clause
    assert any(ln.startswith("#pragma omp simd reduction(+:") for ln in lines) == clause
    x = np.full(64, np.iinfo(dtype).max // 16, dtype)
    (out,) = CFunction(module, name=f"wrapsum_{t}")(x, x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, x.sum(dtype=dtype))


def test_a_float_sum_in_a_clamped_loop_is_an_openmp_reduction():
    """The accumulator's load and store inside a clamped loop's `if` still make an
    `omp simd reduction` (its body is the if's)."""
    text = SUM.format(t="f32", attrs=ATTRS).replace("arith.addi", "arith.addf")
    text = text.replace("arith.constant 0 : f32", "arith.constant 0.0 : f32")
    text = text.replace(
        "      %v = memref.load %x[%r]",
        "      %in = arith.cmpi slt, %r, %n : index\n"
        "      scf.if %in {\n      %v = memref.load %x[%r]",
    ).replace(
        "memref.store %s, %acc[] : memref<f32>\n",
        "memref.store %s, %acc[] : memref<f32>\n      }\n",
    )
    text = text.replace(
        "    %acc = memref.alloca()",
        "    %c00 = arith.constant 0 : index\n    %yv = memref.load %y[%c00] : memref<64xf32>\n"
        "    %yi = arith.fptosi %yv : f32 to i64\n    %n = arith.index_cast %yi : i64 to index\n"
        "    %acc = memref.alloca()",
    )
    module = parse_module(text)
    lines = _kernel_text(emit_c(module))
    assert "#pragma omp simd simdlen(8) reduction(+:v_acc)" in lines
    assert "#pragma omp simd reduction(+:v_acc)" in lines
    x = np.arange(64, dtype=np.float32)
    f = CFunction(module, name="clamped_fsum")
    for n in (3, 40):
        y = np.zeros(64, np.float32)
        y[0] = n
        (out,) = f(x, y)
        assert out == x[:n].sum()


# ---------------------------------------------------------------- @main's team region

PAR = """
  loop.kernel "{name}" {{
{pre}    loop.for %{name}t = 0 to 2 step 1 {{name = "{name}t"{outer}}} {{
      loop.for %{i} = 0 to 64 step 1 {{name = "{name}0", parallel}} {{
        loop.for %{j} = 0 to 1024 step 1 {{name = "{name}1"}} {{
          %{v} = memref.load %x[%{i}, %{j}] : memref<64x1024xf32>
          %{w} = arith.addf %{v}, %{v} : f32
          memref.store %{w}, %y[%{i}, %{j}] : memref<64x1024xf32>
        }}
      }}
    }}
  }}
"""
SERIAL = """
  loop.kernel "one" {{
    %c0 = arith.constant 0 : index
    %t = memref.alloca() : memref<{n}xi8>
    %v = memref.load %x[%c0, %c0] : memref<64x1024xf32>
    memref.store %v, %y[%c0, %c0] : memref<64x1024xf32>
  }}
"""


def _team(middle: str = "", second_outer: str = "", serial: int = 16, main: str = "") -> str:
    first = PAR.format(name="a", i="i", j="j", v="v", w="w", pre="", outer="")
    second = PAR.format(name="b", i="p", j="q", v="r", w="s", pre="", outer=second_outer)
    return f"""
func.func @main(%x: memref<64x1024xf32>, %y: memref<64x1024xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
{main}{first}{middle}{second}{SERIAL.format(n=serial)}  func.return
}}"""


def _main_and_kernels(text: str):
    from dlpc.dialects.loop import KernelOp

    module = parse_module(text)
    main = next(op for op in module.walk() if op.name == "func.func")
    return module, main, {k.sym: k for k in module.walk() if isinstance(k, KernelOp)}


def test_team_region_over_two_parallel_kernels_and_a_serial_one():
    """Two kernels of serial loops around a parallel loop and one serial kernel whose
    64 KiB local (STACK_LIMIT, not above) stays on the stack: the region opens at the
    first kernel; the answer is the same."""
    from dlpc.backends.c import team_kind, team_region

    module, main, kernels = _main_and_kernels(_team(serial=65536))
    assert [team_kind(k) for k in kernels.values()] == ["loop", "loop", "single"]
    assert team_region(main) is kernels["a"]
    source = emit_c(module)
    assert "#pragma omp parallel\n" in source and "kernel_b_team(" in source
    x = np.random.default_rng(3).standard_normal((64, 1024)).astype(np.float32)
    (y,) = CFunction(module, name="team_three")(x)
    want = 2 * x
    want[0, 0] = x[0, 0]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(
    "kw, why",
    [
        ({"serial": 65537}, "a serial kernel whose heap local may fail"),
        ({"second_outer": ", unroll = 2"}, "an unrolled serial loop around the parallel one"),
        (
            {
                "middle": '  "memref.copy"(%x, %y) : (memref<64x1024xf32>, memref<64x1024xf32>) -> ()\n'
            },
            "a copy in @main between the kernels",
        ),
        (
            {"main": "  %h = memref.alloc() : memref<4xf32>\n"},
            "a heap buffer in @main",
        ),
    ],
)
def test_no_team_region(kw, why):
    """@main gets no region when some kernel has no team kind, an op between kernels is
    neither a kernel nor a pointer or constant, or @main allocates on the heap."""
    from dlpc.backends.c import team_kind, team_region

    module, main, kernels = _main_and_kernels(_team(**kw))
    assert team_region(main) is None, why
    if "serial" in kw:
        assert team_kind(kernels["one"]) is None
    if "second_outer" in kw:
        assert team_kind(kernels["b"]) is None and team_kind(kernels["a"]) == "loop"
    source = emit_c(module)
    assert "#pragma omp parallel\n" not in source and "_team(" not in source


def test_no_kernel_no_region():
    """@main without a kernel call: no region."""
    from dlpc.backends.c import team_region

    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  func.return
}}""")
    assert team_region(next(op for op in module.walk() if op.name == "func.func")) is None
    assert "#pragma omp parallel" not in emit_c(module)


# ---------------------------------------------------------------- work and bounds

WORK = """
func.func @main(%x: memref<4x20xf32>, %dims: memref<1xi64>, %out: memref<4x20xf32>) {attrs} {{
  loop.kernel "k" {{
    %c0 = arith.constant 0 : index
    %d = memref.load %dims[%c0] : memref<1xi64>
    %n = arith.index_cast %d : i64 to index
    loop.for %i = 0 to 4 step 1 {{name = "i0"}} {{
      %in = arith.cmpi slt, %i, %n : index
      scf.if %in {{
        loop.for %j = 0 to 20 step 1 {{name = "i1"{marks}}} {{
          %a = memref.load %x[%i, %j] : memref<4x20xf32>
          memref.store %a, %out[%i, %j] : memref<4x20xf32>
        }}
      }}
    }}
  }}
  func.return
}}"""


@pytest.mark.parametrize("marks, work", [("", 4 * 20), (", vectorize", 4 * 3)])
def test_vector_work_counts_vectors_and_loops_under_an_if(marks, work):
    """`vector_work` counts a vectorised innermost loop of 20 in ceil(20 / 8) = 3 steps,
    and finds a loop under an `scf.if` when no loop is a direct child; the outer loop is
    clamped, so its nest is `runtime_bounded`, the inner one is not."""
    from dlpc.backends.c import loop_work, runtime_bounded, vector_work
    from dlpc.dialects.loop import ForOp

    module = parse_module(WORK.format(attrs=ATTRS, marks=marks))
    outer, inner = [op for op in module.walk() if isinstance(op, ForOp)]
    assert vector_work(outer) == work and loop_work(outer) == 4 * 20
    assert runtime_bounded(outer) and not runtime_bounded(inner)


def test_a_big_parallel_loop_that_stops_at_a_runtime_limit_keeps_its_serial_copy():
    """A parallel nest of ONE_BODY_MIN_WORK steps or more whose inner loop is clamped
    (a symbolic extent: the call's work may be tiny) keeps the two-copy form."""
    body = """
      loop.for %j = 0 to 65536 step 1 {name = "i1"} {
        %in = arith.cmpi slt, %j, %n : index
        scf.if %in {
          %a = memref.load %x[%i, %j] : memref<16x65536xf32>
          memref.store %a, %out[%i, %j] : memref<16x65536xf32>
        }
      }"""
    text = f"""
func.func @main(%x: memref<16x65536xf32>, %dims: memref<1xi64>, %out: memref<16x65536xf32>) {ATTRS} {{
  loop.kernel "k" {{
    %c0 = arith.constant 0 : index
    %d = memref.load %dims[%c0] : memref<1xi64>
    %n = arith.index_cast %d : i64 to index
    loop.for %i = 0 to 16 step 1 {{name = "i0", parallel}} {{{body}
    }}
  }}
  func.return
}}"""
    lines = _kernel_text(emit_c(parse_module(text)))
    assert "if (dlpc_parallel()) {" in lines and "} else {" in lines
    assert not any("if(parallel:" in ln for ln in lines)
    plain = _kernel_text(emit_c(parse_module(text.replace("%j, %n", "%j, %j"))))
    assert "#pragma omp parallel for if(parallel: dlpc_parallel())" in plain


@pytest.mark.parametrize("lower, upper, split", [(4, 24, True), (4, 20, False)])
def test_short_and_long_copies_of_a_loop_not_from_0(lower, upper, split):
    """The short copy's test subtracts the loop's lower bound (`n - 4 < 16`), and a loop
    of 4 to 20 runs SHORT_TRIP iterations at most: one copy."""
    text = _clamp(upper=upper, marks=", vectorize").replace("= 0 to", f"= {lower} to")
    module = parse_module(text)
    lines = _kernel_text(emit_c(module))
    assert ("if (v_n - 4 < 16) {" in lines) == split
    assert any("simdlen(8)" in ln for ln in lines) == split
    if split:
        f = CFunction(module, name="short_long_from_4")
        x = np.arange(1, 25, dtype=np.float32)
        for n in (2, 10, 19, 21, 30):
            (out,) = f(x, np.array([n], np.int64))
            np.testing.assert_array_equal(out[4:n], -x[4:n])


# ---------------------------------------------------------------- seed 49's survivors


def test_an_index_of_a_zero_stride_is_multiplied_by_0():
    """A dimension after an empty one has stride 0 (row-major strides are products of the
    later dims): its index is multiplied by 0, only a stride of 1 drops the product."""
    from dlpc.backends.c import Buffer

    assert Buffer("v", (4, 0)).at(["i", "j"]) == "v[i * 0 + j]"
    assert Buffer("v", (4, 1, 3)).at(["i", "j", "k"]) == "v[i * 3 + j * 3 + k]"
    assert Buffer("v", (2, 3)).at(["i", "j"]) == "v[i * 3 + j]"


def test_an_empty_view_at_the_end_of_the_packed_block_shares_no_bytes():
    """The packed weights' block spans [0, 16): an empty view at byte 16 shares no byte
    with it (`restrict`); the block and a view at 8 do (neither)."""
    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %p = memref.alloc() {{dlpc.packed}} : memref<16xi8>
  %c16 = arith.constant 16 : index
  %c8 = arith.constant 8 : index
  %e = memref.view %p[%c16][] : memref<16xi8> to memref<0xf32>
  %h = memref.view %p[%c8][] : memref<16xi8> to memref<2xf32>
  loop.kernel "k" {{
    %c0 = arith.constant 0 : index
    %b = memref.load %p[%c0] : memref<16xi8>
    %f = arith.constant false
    scf.if %f {{
      %v = memref.load %e[%c0] : memref<0xf32>
      memref.store %v, %out[%c0] : memref<4xf32>
    }}
    %w = memref.load %h[%c0] : memref<2xf32>
    %bf = arith.sitofp %b : i8 to f32
    %s = arith.addf %bf, %w : f32
    memref.store %s, %out[%c0] : memref<4xf32>
  }}
  func.return
}}""")
    signature = _kernel_text(emit_c(module))[0]
    assert signature == (
        "static void kernel_k(const int8_t *v_p, const float *restrict v_e, "
        "float *restrict v_out0, const float *v_h)"
    )


# ---------------------------------------------------------------- older lines no area test reached


def test_memref_info_refusals():
    """Each memref the C backend cannot lay out is a one-line diagnostic naming it."""
    from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, f32

    from dlpc.backends.c import memref_info

    assert memref_info(MemRefType(f32, [2, 3])) == ((2, 3), f32)
    cases = [
        (f32, f"error: c backend: expected a memref, got {f32}"),
        (MemRefType(f32, [-1]), "error: c backend: dynamic memref {} is not supported"),
        (
            MemRefType(f32, [4], StridedLayoutAttr([2], 0)),
            "error: c backend: memref {} has a non-identity layout",
        ),
    ]
    for ty, msg in cases:
        with pytest.raises(DlpcError) as e:
            memref_info(ty)
        assert str(e.value) == msg.format(ty)
    with pytest.raises(
        DlpcError,
        match=r"^error: c backend: memref<1099511627776x1099511627776xf32> has \d+ bytes, over dlpc.s limit of 2\^40 bytes \(1 TiB\) for one tensor$",
    ):
        memref_info(MemRefType(f32, [2**40, 2**40]))


def test_float_and_bool_literals():
    from xdsl.dialects.builtin import IntegerType, f16, f32, f64

    from dlpc.backends.c import float_literal, int_literal

    assert float_literal(float("nan"), f32) == "NAN"
    assert float_literal(float("inf"), f64) == "INFINITY"
    assert float_literal(float("-inf"), f32) == "(-INFINITY)"
    assert float_literal(2.0, f32) == "2.0f" and float_literal(2.0, f64) == "2.0"
    assert float_literal(1e20, f32) == "1e+20f" and float_literal(-0.5, f64) == "(-0.5)"
    assert float_literal(0.5, f16) == "((_Float16)0.5f)"
    assert int_literal(1, IntegerType(1)) == "true" and int_literal(0, IntegerType(1)) == "false"


def test_unsigned_max_min_and_comparisons_of_signless_bits():
    """arith.maxui / minui and the u* predicates of cmpi read i8 bits unsigned (-1 is 255)."""
    body = """
      %a = memref.load %x[%i] : memref<4xi8>
      %b = memref.load %y[%i] : memref<4xi8>
      %mx = arith.maxui %a, %b : i8
      %mn = arith.minui %a, %b : i8
      %lt = arith.cmpi ult, %a, %b : i8
      %ge = arith.cmpi uge, %a, %b : i8
      %slt = arith.cmpi slt, %a, %b : i8
      %l = arith.extui %lt : i1 to i8
      %g = arith.extui %ge : i1 to i8
      %s = arith.extui %slt : i1 to i8
      %c4 = arith.constant 4 : i8
      %c16 = arith.constant 16 : i8
      %g4 = arith.muli %g, %c4 : i8
      %s16 = arith.muli %s, %c16 : i8
      %f1 = arith.addi %l, %g4 : i8
      %f = arith.addi %f1, %s16 : i8
      %m = arith.subi %mx, %mn : i8
      memref.store %m, %out[%i] : memref<4xi8>
      memref.store %f, %flags[%i] : memref<4xi8>"""
    args = "%x: memref<4xi8>, %y: memref<4xi8>, %out: memref<4xi8>, %flags: memref<4xi8>"
    module = parse_module(
        _one_loop(args, body).replace("dlpc.num_outputs = 1", "dlpc.num_outputs = 2")
    )
    lines = _kernel_text(emit_c(module))
    assert "const int8_t v_mx = (int8_t)DLPC_MAX((uint8_t)v_a, (uint8_t)v_b);" in lines
    assert "const int8_t v_mn = (int8_t)DLPC_MIN((uint8_t)v_a, (uint8_t)v_b);" in lines
    assert "const bool v_lt = (uint8_t)v_a < (uint8_t)v_b;" in lines
    x = np.array([-1, 3, 5, -128], np.int8)
    y = np.array([1, 3, -2, 127], np.int8)
    out, flags = CFunction(module, name="unsigned_cmp")(x, y)
    ux, uy = x.view(np.uint8).astype(int), y.view(np.uint8).astype(int)
    want = np.maximum(ux, uy) - np.minimum(ux, uy)
    np.testing.assert_array_equal(out.view(np.uint8), want.astype(np.uint8))
    want_flags = (ux < uy) * 1 + (ux >= uy) * 4 + (x < y) * 16
    np.testing.assert_array_equal(flags, want_flags.astype(np.int8))


def test_globals_uninitialised_and_integer():
    """A memref.global without a value is a zeroed static array; an integer one lists its
    values (not a splat)."""
    module = parse_module(f"""
"memref.global"() <{{sym_name = "z", type = memref<4xf32>, initial_value, sym_visibility = "private"}}> : () -> ()
"memref.global"() <{{sym_name = "w", type = memref<4xi32>, initial_value = dense<[1, -2, 3, 70000]> : tensor<4xi32>, sym_visibility = "private", constant}}> : () -> ()
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %gz = memref.get_global @z : memref<4xf32>
  %gw = memref.get_global @w : memref<4xi32>
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0"}} {{
      %a = memref.load %gz[%i] : memref<4xf32>
      %b = memref.load %gw[%i] : memref<4xi32>
      %bf = arith.sitofp %b : i32 to f32
      %s = arith.addf %a, %bf : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }}
  }}
  func.return
}}""")
    source = emit_c(module)
    assert "static float g_z[4];" in source
    assert "static const int32_t g_w[4] = {1, (-2), 3, 70000};" in source
    x = np.zeros(4, np.float32)
    (out,) = CFunction(module, name="int_global")(x, x)
    np.testing.assert_array_equal(out, [1, -2, 3, 70000])


def test_module_and_signature_refusals():
    """Two functions, none @main; @main's attributes counting other arguments; a view at
    a runtime offset: each one line."""
    two = parse_module("""
func.func @f(%x: memref<1xf32>) {
  func.return
}
func.func @g(%x: memref<1xf32>) {
  func.return
}""")
    with pytest.raises(DlpcError, match=r"^error: c backend: the module has no func.func @main$"):
        emit_c(two)
    bad = parse_module("""
func.func @main(%x: memref<1xf32>, %y: memref<1xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w"], dlpc.num_outputs = 1 : i64} {
  func.return
}""")
    with pytest.raises(DlpcError) as e:
        emit_c(bad)
    assert (
        str(e.value)
        == "error: @main has 2 arguments but its attributes say 1 inputs, 1 params and 1 outputs"
    )
    view = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %arena = memref.alloc() {{dlpc.arena}} : memref<64xi8>
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xf32>
  %o = arith.fptosi %v : f32 to i64
  %off = arith.index_cast %o : i64 to index
  %d = memref.view %arena[%off][] : memref<64xi8> to memref<2xf32>
  func.return
}}""")
    with pytest.raises(DlpcError) as e:
        emit_c(view)
    assert str(e.value) == "error: c backend: memref.view needs a constant offset in @main"


def test_an_unrolled_parallel_loop_drops_its_unroll():
    """GCC takes no pragma between an OpenMP loop's and its `for`: the unroll is dropped,
    saying so, and the loop is still one OpenMP loop."""
    body = """
      %a = memref.load %x[%i] : memref<65536xf32>
      memref.store %a, %out[%i] : memref<65536xf32>"""
    args = "%x: memref<65536xf32>, %y: memref<65536xf32>, %out: memref<65536xf32>"
    module = parse_module(_one_loop(args, body, n=65536, attrs=", parallel, unroll = 4"))
    lines = _kernel_text(emit_c(module))
    assert "/* unroll 4 dropped: not expressible on an OpenMP loop */" in lines
    assert not any("GCC unroll" in ln for ln in lines)


@pytest.mark.parametrize(
    "body",
    [
        # the accumulator stored twice
        """
      %a = memref.load %acc[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[] : memref<f32>
      memref.store %s, %acc[] : memref<f32>""",
        # stored before it is loaded
        """
      memref.store %v, %acc[] : memref<f32>
      %a = memref.load %acc[] : memref<f32>
      %s = arith.addf %a, %v : f32""",
        # its update under an if
        """
      %a = memref.load %acc[] : memref<f32>
      %c = arith.cmpf ogt, %v, %a : f32
      scf.if %c {
        memref.store %v, %acc[] : memref<f32>
      }""",
        # a combine that is no reduction (subtraction)
        """
      %a = memref.load %acc[] : memref<f32>
      %s = arith.subf %a, %v : f32
      memref.store %s, %acc[] : memref<f32>""",
        # the loaded value read twice
        """
      %a = memref.load %acc[] : memref<f32>
      %s = arith.addf %a, %v : f32
      %t = arith.addf %s, %a : f32
      memref.store %t, %acc[] : memref<f32>""",
        # the combine's value read outside the store
        """
      %a = memref.load %acc[] : memref<f32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[] : memref<f32>
      memref.store %s, %out[%r] : memref<64xf32>""",
    ],
)
def test_accumulator_updates_that_are_no_openmp_reduction(body):
    """A vectorised reduction loop whose accumulator is not `acc = acc op x` once, directly
    in its body, is `GCC ivdep`, not `omp simd reduction`."""
    text = f"""
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>, %out: memref<64xf32>) {ATTRS} {{
  loop.kernel "k" {{
    %acc = memref.alloca() : memref<f32>
    %z = arith.constant 0.0 : f32
    memref.store %z, %acc[] : memref<f32>
    loop.for %r = 0 to 64 step 1 {{name = "r0", vectorize, reduction}} {{
      %v = memref.load %x[%r] : memref<64xf32>{body}
    }}
    %t = memref.load %acc[] : memref<f32>
    %c0 = arith.constant 0 : index
    memref.store %t, %out[%c0] : memref<64xf32>
  }}
  func.return
}}"""
    lines = _kernel_text(emit_c(parse_module(text)))
    assert "#pragma GCC ivdep" in lines
    assert not any("reduction(" in ln for ln in lines)
    good = (
        text.split("      %v = memref.load")[0]
        + (
            "      %v = memref.load %x[%r] : memref<64xf32>\n"
            "      %a = memref.load %acc[] : memref<f32>\n"
            "      %s = arith.addf %a, %v : f32\n"
            "      memref.store %s, %acc[] : memref<f32>\n    }\n"
        )
        + text.split("    }\n    %t = ")[1].join(["    %t = ", ""])
    )
    assert "#pragma omp simd reduction(+:v_acc)" in _kernel_text(emit_c(parse_module(good)))


def test_a_graph_loop_is_a_c_loop_around_its_kernels():
    """graph.loop's host loop (scf.while in @main) is `for (;;) { before; if (!cond)
    break; after }`: it stops at the condition or the trip count, as plain Python does."""
    from test_control_flow import LOOP, loop_inputs, plain_loop

    from dlpc.passes import pipeline

    lowered = pipeline.lower(parse_module(LOOP), "loop", pipeline.PipelineOptions())
    source = emit_c(lowered)
    main = [ln.strip() for ln in source[source.index("int dlpc_main(void **args)") :].splitlines()]
    at = main.index("for (;;) {")
    stop = next(k for k in range(at, len(main)) if main[k].endswith(") break;"))
    assert main[stop].startswith("if (!(")
    f = CFunction(lowered, name="host_while")
    for limit in (-100.0, 3.0, 12.0, 1e9):
        inputs = loop_inputs(limit)
        got = f(*inputs)
        for g_, w_ in zip(got, plain_loop(*inputs), strict=True):
            np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- seed 50's survivors


def test_the_profile_arrays_of_one_kernel():
    """A program of one kernel has timer arrays of one entry (at least one, for none)."""
    body = """
      %a = memref.load %x[%i] : memref<4xf32>
      memref.store %a, %out[%i] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    source = emit_c(parse_module(_one_loop(args, body)))
    assert "int dlpc_num_kernels = 1;" in source
    assert "double dlpc_kernel_seconds[1];\nstatic double dlpc_kernel_start[1];" in source
    empty = emit_c(
        parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  func.return
}}""")
    )
    assert "int dlpc_num_kernels = 0;" in empty
    assert "double dlpc_kernel_seconds[1];\nstatic double dlpc_kernel_start[1];" in empty


def test_a_reinterpret_cast_of_other_strides_is_refused():
    """Strides other than the row-major ones of the result's shape: one line."""
    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %r = memref.reinterpret_cast %x to offset: [0], sizes: [2, 2], strides: [1, 2] : memref<4xf32> to memref<2x2xf32>
  func.return
}}""")
    with pytest.raises(DlpcError) as e:
        emit_c(module)
    assert str(e.value) == (
        "error: c backend: memref.reinterpret_cast must be static, contiguous and row-major "
        "in @main"
    )


# ---------------------------------------------------------------- seed 51's survivor


def test_dlpc_main_of_a_team_region_exactly():
    """dlpc_main of two parallel kernels and a serial one, as printed (indentation too:
    `dlpc --emit=c` shows it): the region, each shared kernel timed on the first thread,
    the serial one in `omp single`, and the calls again for a one-thread team."""
    source = emit_c(parse_module(_team(serial=16)))
    main = source[source.index("int dlpc_main(void **args)\n") :]
    assert main[: main.index("\n}\n") + 3] == (
        "int dlpc_main(void **args)\n"
        "{\n"
        "  float *v_x = (float *)args[0];\n"
        "  float *v_out0 = (float *)args[1];\n"
        "  if (dlpc_parallel()) {\n"
        "    #pragma omp parallel\n"
        "    {\n"
        "      if (dlpc_team_first()) DLPC_PROF_BEGIN(0);\n"
        "      kernel_a_team(v_x, v_out0);\n"
        "      if (dlpc_team_first()) DLPC_PROF_END(0);\n"
        "      if (dlpc_team_first()) DLPC_PROF_BEGIN(1);\n"
        "      kernel_b_team(v_x, v_out0);\n"
        "      if (dlpc_team_first()) DLPC_PROF_END(1);\n"
        "      #pragma omp single\n"
        "      {\n"
        "        DLPC_PROF_BEGIN(2);\n"
        "        kernel_one(v_x, v_out0);\n"
        "        DLPC_PROF_END(2);\n"
        "      }\n"
        "    }\n"
        "  } else {\n"
        "    DLPC_PROF_BEGIN(0);\n"
        "    kernel_a(v_x, v_out0);\n"
        "    DLPC_PROF_END(0);\n"
        "    DLPC_PROF_BEGIN(1);\n"
        "    kernel_b(v_x, v_out0);\n"
        "    DLPC_PROF_END(1);\n"
        "    DLPC_PROF_BEGIN(2);\n"
        "    kernel_one(v_x, v_out0);\n"
        "    DLPC_PROF_END(2);\n"
        "  }\n"
        "  return 0;\n"
        "}\n"
    )
