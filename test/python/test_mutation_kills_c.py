"""Tests written against surviving mutants of the C backend (issue 35, bench/mutation.py
--area c-backend): hand-written loop IR compiled to C, run, compared with numpy."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from dlpc.backends.runtime.cbuild import CFunction
from dlpc.passes.pipeline import parse_module

ATTRS = "attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}"


def test_a_splat_global_fills_every_element():
    """`dense<2.5>` over 4 elements is 2.5 four times, not 2.5 then zeros."""
    module = parse_module(f"""
"memref.global"() <{{sym_name = "w", type = memref<4xf32>, initial_value = dense<2.5> : tensor<4xf32>, sym_visibility = "private", constant}}> : () -> ()
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %g = memref.get_global @w : memref<4xf32>
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0"}} {{
      %a = memref.load %x[%i] : memref<4xf32>
      %b = memref.load %g[%i] : memref<4xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }}
  }}
  func.return
}}""")
    x = np.arange(4, dtype=np.float32)
    (out,) = CFunction(module, name="splat_global")(x, x)
    np.testing.assert_array_equal(out, x + np.float32(2.5))


def _unordered(op):
    return lambda a, b: op(a, b) | np.isnan(a) | np.isnan(b)


PREDICATES = {
    "oeq": operator.eq,
    "ogt": operator.gt,
    "oge": operator.ge,
    "olt": operator.lt,
    "ole": operator.le,
    "one": lambda a, b: (a < b) | (a > b),
    "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "ueq": _unordered(operator.eq),
    "ugt": _unordered(operator.gt),
    "uge": _unordered(operator.ge),
    "ult": _unordered(operator.lt),
    "ule": _unordered(operator.le),
    "une": operator.ne,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
}


@pytest.mark.parametrize("pred", PREDICATES)
def test_float_comparisons_with_nan(pred):
    """Every arith.cmpf predicate on NaN, equal, smaller and larger operands: ordered
    ones are false and unordered ones true when an operand is NaN."""
    module = parse_module(f"""
func.func @main(%x: memref<6xf32>, %y: memref<6xf32>, %out: memref<6xi32>) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %i = 0 to 6 step 1 {{name = "i0"}} {{
      %a = memref.load %x[%i] : memref<6xf32>
      %b = memref.load %y[%i] : memref<6xf32>
      %c = arith.cmpf {pred}, %a, %b : f32
      %v = arith.extui %c : i1 to i32
      memref.store %v, %out[%i] : memref<6xi32>
    }}
  }}
  func.return
}}""")
    nan = np.float32("nan")
    x = np.array([nan, 1, nan, 1, 2, 1], np.float32)
    y = np.array([1, nan, nan, 1, 1, 2], np.float32)
    (out,) = CFunction(module, name=f"cmpf_{pred}")(x, y)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, PREDICATES[pred](x, y).astype(np.int32))


def _one_kernel(args: str, body: str, n: int = 4) -> str:
    return f"""
func.func @main({args}) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %i = 0 to {n} step 1 {{name = "i0"}} {{
{body}
    }}
  }}
  func.return
}}"""


def test_math_binary_ops_and_fpowi():
    """math.powf / atan2 / copysign and math.fpowi read their second operand."""
    body = """
      %a = memref.load %x[%i] : memref<4xf32>
      %b = memref.load %y[%i] : memref<4xf32>
      %p = math.powf %a, %b : f32
      %t = math.atan2 %b, %a : f32
      %c = math.copysign %a, %b : f32
      %n = arith.constant 3 : i32
      %q = math.fpowi %b, %n : f32, i32
      %s1 = arith.addf %p, %t : f32
      %s2 = arith.addf %c, %q : f32
      %s = arith.addf %s1, %s2 : f32
      memref.store %s, %out[%i] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    module = parse_module(_one_kernel(args, body))
    x = np.array([0.5, 1.5, 2.0, 3.0], np.float32)
    y = np.array([-2.0, 0.5, 1.5, -0.25], np.float32)
    (out,) = CFunction(module, name="math_binary")(x, y)
    want = x**y + np.arctan2(y, x) + np.copysign(x, y) + y**3
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_narrow_integers_unsigned_division_and_wrapped_constants():
    """i8 and i16: divui/remui read the bits as unsigned (uint8_t, not uint64_t), and
    `255 : i8` is -1 (a signless constant written in its unsigned form)."""
    body = """
      %a = memref.load %x[%i] : memref<4xi8>
      %b = memref.load %y[%i] : memref<4xi8>
      %d = arith.divui %a, %b : i8
      %k = arith.constant 255 : i8
      %r = arith.addi %d, %k : i8
      memref.store %r, %out[%i] : memref<4xi8>
      %w = arith.extsi %a : i8 to i16
      %v = arith.remui %w, %w : i16"""
    args = "%x: memref<4xi8>, %y: memref<4xi8>, %out: memref<4xi8>"
    module = parse_module(_one_kernel(args, body))
    x = np.array([-1, -128, 100, 7], np.int8)
    y = np.array([2, 3, 7, 2], np.int8)
    (out,) = CFunction(module, name="narrow_unsigned")(x, y)
    want = (x.view(np.uint8) // y.view(np.uint8)).astype(np.uint8).view(np.int8) - 1
    np.testing.assert_array_equal(out, want.astype(np.int8))


def test_an_index_constant_below_int64_is_a_diagnostic():
    from dlpc.backends.c import emit_c
    from dlpc.diagnostics import DlpcError

    body = """
      %k = arith.constant -9223372036854775809 : index
      %a = memref.load %x[%i] : memref<4xf32>
      memref.store %a, %out[%k] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    with pytest.raises(DlpcError, match="integer constant -9223372036854775809 does not fit"):
        emit_c(parse_module(_one_kernel(args, body)))


def test_an_index_constant_of_2_to_the_63_wraps_to_int64_min():
    """An index attribute may hold 2**63 (its unsigned form): C gets INT64_MIN's spelling."""
    from dlpc.backends.c import emit_c

    body = """
      %k = arith.constant 9223372036854775808 : index
      %z = arith.constant 0 : index
      %c = arith.cmpi slt, %k, %z : index
      %a = memref.load %x[%i] : memref<4xf32>
      %b = arith.select %c, %a, %a : f32
      memref.store %b, %out[%i] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    assert "(INT64_C(-9223372036854775807) - 1)" in emit_c(parse_module(_one_kernel(args, body)))


def test_a_module_whose_one_function_is_not_main():
    """find_main takes the only func.func whatever its name; units are made from a source
    of at least min_bytes (0 here)."""
    from dlpc.backends.c import emit_c_units

    body = """
      %a = memref.load %x[%i] : memref<4xf32>
      memref.store %a, %out[%i] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    text = _one_kernel(args, body).replace("@main(", "@copy(")
    source, units = emit_c_units(parse_module(text), count=2, min_bytes=0)
    assert "int dlpc_main(void **args)" in source and units


def test_a_heap_buffer_inside_a_parallel_loop_aborts_when_out_of_memory():
    """`return` is not allowed inside an OpenMP loop: a failed allocation there calls
    dlpc_oom() instead of returning 1 from the kernel."""
    from dlpc.backends.c import emit_c

    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0", parallel}} {{
      %t = memref.alloc() : memref<1000000xf32>
      %a = memref.load %x[%i] : memref<4xf32>
      %c0 = arith.constant 0 : index
      memref.store %a, %t[%c0] : memref<1000000xf32>
      %b = memref.load %t[%c0] : memref<1000000xf32>
      memref.store %b, %out[%i] : memref<4xf32>
      memref.dealloc %t : memref<1000000xf32>
    }}
  }}
  func.return
}}""")
    source = emit_c(module)
    assert "dlpc_oom();" in source
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(CFunction(module, name="omp_heap")(x, x)[0], x)


ARENA_VIEWS = f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %arena = memref.alloc() {{dlpc.arena}} : memref<64xi8>
  %b0 = arith.constant 0 : index
  %b4 = arith.constant 4 : index
  %b8 = arith.constant 8 : index
  %b20 = arith.constant 20 : index
  %b24 = arith.constant 24 : index
  %b32 = arith.constant 32 : index
  %d = memref.view %arena[%b0][] : memref<64xi8> to memref<2xf32>
  %f = memref.view %arena[%b4][] : memref<64xi8> to memref<1xf32>
  %a = memref.view %arena[%b8][] : memref<64xi8> to memref<2x2xf32>
  %r = memref.reinterpret_cast %a to offset: [0], sizes: [4], strides: [1] : memref<2x2xf32> to memref<4xf32>
  %e = memref.view %arena[%b20][] : memref<64xi8> to memref<1xf32>
  %c = memref.view %arena[%b24][] : memref<64xi8> to memref<2xf32>
  %g = memref.view %arena[%b32][] : memref<64xi8> to memref<2xf32>
  %rc = memref.reinterpret_cast %c to offset: [0], sizes: [2], strides: [1] : memref<2xf32> to memref<2xf32>
  loop.kernel "disjoint" {{
    loop.for %i = 0 to 2 step 1 {{name = "i0"}} {{
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %c[%i] : memref<2xf32>
      memref.store %v, %r[%i] : memref<4xf32>
      memref.store %v, %d[%i] : memref<2xf32>
      memref.store %v, %g[%i] : memref<2xf32>
    }}
  }}
  loop.kernel "overlap" {{
    %z = arith.constant 0 : index
    %one = arith.constant 1 : index
    %two = arith.constant 2 : index
    %t = arith.constant 3 : index
    %v = memref.load %x[%t] : memref<4xf32>
    memref.store %v, %e[%z] : memref<1xf32>
    %w = memref.load %r[%t] : memref<4xf32>
    memref.store %w, %out[%z] : memref<4xf32>
    %u = memref.load %x[%two] : memref<4xf32>
    memref.store %u, %f[%z] : memref<1xf32>
    %s = memref.load %d[%one] : memref<2xf32>
    memref.store %s, %out[%one] : memref<4xf32>
    %q = memref.load %x[%z] : memref<4xf32>
    memref.store %q, %rc[%one] : memref<2xf32>
    %p = memref.load %c[%one] : memref<2xf32>
    memref.store %p, %out[%two] : memref<4xf32>
  }}
  func.return
}}"""


def test_arena_views_are_restrict_exactly_when_their_bytes_are_disjoint():
    """`restrict` only on buffers whose bytes no other parameter shares: d [0, 8), the
    reshape r of a [8, 24), c [24, 32), g [32, 40) are adjacent, not shared (all
    restrict); e [20, 24) lies inside r, f [4, 8) inside d, the reshape rc of c is c
    (none restrict, and r[3], d[1], c[1] read what e[0], f[0], rc[1] stored)."""
    from dlpc.backends.c import emit_c

    module = parse_module(ARENA_VIEWS)
    source = emit_c(module)
    disjoint = next(ln for ln in source.splitlines() if "void kernel_disjoint(" in ln)
    for name in ("v_c", "v_r", "v_d", "v_g"):
        assert f"float *restrict {name}" in disjoint, disjoint
    overlap = next(ln for ln in source.splitlines() if "void kernel_overlap(" in ln)
    for name in ("v_e", "v_r", "v_f", "v_d", "v_rc", "v_c"):
        assert f"float *{name}" in overlap, overlap
    x = np.arange(4, dtype=np.float32) + 1
    (out,) = CFunction(module, name="arena_views")(x, x)
    np.testing.assert_array_equal(out[:3], [x[3], x[2], x[0]])


def test_a_scalar_defined_in_main_is_a_kernel_parameter():
    """A value of @main used inside a kernel is passed by value (`float v_k`)."""
    from dlpc.backends.c import emit_c

    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  %k = arith.constant 3.0 : f32
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0"}} {{
      %a = memref.load %x[%i] : memref<4xf32>
      %s = arith.mulf %a, %k : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }}
  }}
  func.return
}}""")
    assert "float v_k" in emit_c(module)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(CFunction(module, name="scalar_param")(x, x)[0], x * 3)


def test_parameters_take_their_names_from_dlpc_params():
    """One input, three params, one output, no dlpc.name: in order x, p, q, s, out0."""
    from dlpc.backends.c import argument_names, find_main

    module = parse_module("""
func.func @main(%x: memref<1xf32>, %p: memref<1xf32>, %q: memref<1xf32>, %s: memref<1xf32>, %o: memref<1xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w.p", "w.q", "w.s"], dlpc.num_outputs = 1 : i64} {
  func.return
}""")
    assert argument_names(find_main(module)) == ["x", "w.p", "w.q", "w.s", "out0"]


def test_fma_and_infinite_constants():
    """math.fma reads its three operands; +inf and -inf constants keep their signs."""
    body = """
      %a = memref.load %x[%i] : memref<4xf32>
      %b = memref.load %y[%i] : memref<4xf32>
      %f = math.fma %a, %b, %b : f32
      %inf = arith.constant 0x7F800000 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %lo = arith.minimumf %a, %inf : f32
      %hi = arith.maximumf %b, %ninf : f32
      %s1 = arith.addf %f, %lo : f32
      %s = arith.addf %s1, %hi : f32
      memref.store %s, %out[%i] : memref<4xf32>"""
    args = "%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>"
    module = parse_module(_one_kernel(args, body))
    x = np.array([0.5, 1.5, 2.0, 3.0], np.float32)
    y = np.array([-2.0, 0.5, 1.5, -0.25], np.float32)
    (out,) = CFunction(module, name="fma_inf")(x, y)
    np.testing.assert_allclose(out, x * y + y + x + y, rtol=1e-6)


@pytest.mark.parametrize("attr, omp", [("parallel", True), ("vectorize", True), ("", False)])
def test_a_failed_allocation_returns_unless_inside_an_openmp_loop(attr, omp):
    """Inside a `parallel` or `vectorize` loop (an OpenMP pragma) a failed heap
    allocation calls dlpc_oom(); in a plain loop it returns 1 from the kernel."""
    from dlpc.backends.c import emit_c

    extra = f", {attr}" if attr else ""
    module = parse_module(f"""
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {ATTRS} {{
  loop.kernel "k" {{
    loop.for %i = 0 to 4 step 1 {{name = "i0"{extra}}} {{
      %t = memref.alloc() : memref<1000000xf32>
      %a = memref.load %x[%i] : memref<4xf32>
      %c0 = arith.constant 0 : index
      memref.store %a, %t[%c0] : memref<1000000xf32>
      %b = memref.load %t[%c0] : memref<1000000xf32>
      memref.store %b, %out[%i] : memref<4xf32>
      memref.dealloc %t : memref<1000000xf32>
    }}
  }}
  func.return
}}""")
    assert ("dlpc_oom();" in emit_c(module)) == omp
