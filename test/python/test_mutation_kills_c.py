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
