"""Tests written against surviving mutants of the dialects (issue 35, bench/mutation.py
--area dialects): each one failed on its mutant and passes on the code."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import ints, lower_and_check, module_of, rand
from xdsl.dialects.builtin import Float16Type, f64, i1, i32, i64

from dlpc.dialects import graph as g


@pytest.mark.parametrize("to", [i1, i32, i64], ids=str)
def test_integer_casts_lower_through_the_te_builder(to):
    """te.Builder.cast between integer types: to i1 is `!= 0`, wider is a sign extension,
    narrower a truncation (mutant: every int->int cast taken as a test against 0)."""
    x = ints(3, 4) * 1000
    lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=to)), [x])
    b = x.astype(np.int32)
    lower_and_check(module_of([b], lambda a: g.CastOp.make(a, to=to)), [b])


@pytest.mark.parametrize("to", [f64, Float16Type()], ids=str)
def test_float_casts_of_every_width(to):
    """f32 -> f64 / f16 through graph-to-te and both references: numpy_dtype maps each
    float type (mutant: the f64 key of ELT_TO_NUMPY misspelt)."""
    x = rand(3, 4)
    lower_and_check(module_of([x], lambda a: g.CastOp.make(a, to=to)), [x], tol=1e-3)


def test_layer_norm_checks_the_bias_shape_by_its_name():
    """scale and bias are each checked against the normalised dims, under their names."""
    from xdsl.utils.exceptions import VerifyException

    from dlpc.passes.pipeline import parse_module

    text = """func.func @main(%x: tensor<16x64xf32>, %g: tensor<64xf32>, %b: tensor<1x64xf32>) -> tensor<16x64xf32> {
  %0 = graph.layer_norm %x, %g, %b : (tensor<16x64xf32>, tensor<64xf32>, tensor<1x64xf32>) -> tensor<16x64xf32>
  func.return %0 : tensor<16x64xf32>
}"""
    with pytest.raises(VerifyException, match="layer_norm bias has shape 1x64 but the normalised"):
        parse_module(text).verify()


def test_dlp_trailing_operands_follow_every_buffer_pair():
    """After three `%buf[%offset]` pairs (dst, lhs, rhs) come the count of dlp.add and
    matmul's m, k, n."""
    from dlpc.dialects import dlp
    from dlpc.passes.pipeline import parse_module

    nram = "memref<64xf32, #dlp.space<nram>>"
    wram = "memref<64xf32, #dlp.space<wram>>"
    module = parse_module(f"""func.func @main(%d: {nram}, %w: {wram}, %n: index, %m: index, %k: index) {{
  %c0 = arith.constant 0 : index
  dlp.add %d[%c0], %d[%c0], %d[%c0], %n : {nram}, {nram}, {nram}
  dlp.matmul %d[%c0], %d[%c0], %w[%c0], %m, %k, %n : {nram}, {nram}, {wram}
  func.return
}}""")
    n, m, k = module.body.block.ops.first.body.block.args[2:]  # type: ignore[union-attr]
    (add,) = [op for op in module.walk() if isinstance(op, dlp.AddOp)]
    (mm,) = [op for op in module.walk() if isinstance(op, dlp.MatmulOp)]
    assert add.trailing_operands() == (n,) and mm.trailing_operands() == (m, k, n)
