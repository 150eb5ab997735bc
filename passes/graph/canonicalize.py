"""Canonical forms of the idioms exporters write for ops the graph dialect has whole.

Input: graph, func.  Output: graph, func (the same values, the .dlpc front end's ops).
Requires: graph-infer-shapes (static shapes on the ops it reads).
Guarantees: no result type changes; every rule fires only where the replacement computes
the same function of its inputs (up to float rounding of the constants it checks):

    x * 0.5 * (1 + erf(x * 0.70710678))  (any order of the three factors, and with
      x / 1.41421356 for the erf argument)    -> gelu(x)            (torch.onnx writes
                                                                     nn.GELU so at opset < 20)
    matmul(x, w) + b, w a [K, N] weight (graph.param or graph.constant), b a [N] weight
      -> linear(x, transpose(w), b)          (nn.Linear as torch.onnx writes it for x of
                                              rank 3; fold-params folds the transpose)
    matmul(x, w) with no bias add            -> linear(x, transpose(w))
    matmul(x, w, transpose_b)                -> linear(x, w [, b])
    softmax / log_softmax with axis a >= 0   -> axis a - rank (the last axis is -1, the
                                              default the .dlpc front end writes)

graph-simplify runs these rules too, so every -O level from 1 reaches these forms.

    %m = graph.matmul %x, %w : (tensor<1x16x64xf32>, tensor<64x192xf32>) -> tensor<1x16x192xf32>
    %y = graph.add %m, %b : (tensor<1x16x192xf32>, tensor<192xf32>) -> tensor<1x16x192xf32>
    // -> %t = graph.transpose %w {perm = array<i64: 1, 0>}; %y = graph.linear %x, %t, %b
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u

_SQRT1_2 = 1 / math.sqrt(2)


def _close(value: SSAValue, x: float) -> bool:
    """A splat float constant within float32 rounding of `x`."""
    v = u.splat_value(value)
    return v is not None and math.isclose(v, x, rel_tol=1e-6)


def _is_weight(value: SSAValue) -> bool:
    return isinstance(u.producer(value), g.ParamOp | g.ConstantOp)


def _factors(value: SSAValue, root: bool = True) -> list[SSAValue]:
    """The factors of a product tree of graph.mul ops (inner ones used only there)."""
    op = u.producer(value)
    if isinstance(op, g.MulOp) and (root or u.single_user(value) is not None):
        return [f for x in op.operands for f in _factors(x, root=False)]
    return [value]


def _erf_argument_of(value: SSAValue) -> SSAValue | None:
    """x where `value` is 1 + erf(x * 0.7071...) or 1 + erf(x / 1.4142...) (either add
    order), the add and the erf used only there."""
    add = u.producer(value)
    if not isinstance(add, g.AddOp) or u.single_user(value) is None:
        return None
    a, b = add.operands
    erf_value = b if _close(a, 1.0) else a if _close(b, 1.0) else None
    erf = u.producer(erf_value) if erf_value is not None else None
    if not isinstance(erf, g.ErfOp) or u.single_user(erf.results[0]) is None:
        return None
    scaled = u.producer(erf.operands[0])
    if isinstance(scaled, g.MulOp):
        x, k = scaled.operands
        if _close(x, _SQRT1_2):
            x, k = k, x
        return x if _close(k, _SQRT1_2) else None
    if isinstance(scaled, g.DivOp) and _close(scaled.operands[1], math.sqrt(2)):
        return scaled.operands[0]
    return None


class GeluFromErf(RewritePattern):
    """x * 0.5 * (1 + erf(x / sqrt 2)) -> gelu(x)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.MulOp):
            return
        if isinstance(parent := u.single_user(op.results[0]), g.MulOp):
            return  # (only the root of a product tree)
        del parent
        factors = _factors(op.results[0])
        if len(factors) != 3:
            return
        for half in factors:
            if not _close(half, 0.5):
                continue
            rest = [f for f in factors if f is not half]
            for x, erf_part in (rest, rest[::-1]):
                if _erf_argument_of(erf_part) == x and u.same_type(x, op.results[0]):
                    return u.build(rewriter, op, g.GeluOp.make(x))


def _bias_of(add: Operation | None, mm: SSAValue, n: int) -> SSAValue | None:
    """b where `add` is mm + b or b + mm with b a [n] weight."""
    if not isinstance(add, g.AddOp):
        return None
    a, b = add.operands
    bias = b if a == mm else a
    if bias == mm or not _is_weight(bias) or g.shape_of(bias) != (n,):
        return None
    return bias if u.same_type(add.results[0], mm) else None


class MatmulToLinear(RewritePattern):
    """matmul(x, w) [+ b] with w a rank-2 weight -> linear(x, w^T [, b])."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.MatMulOp) or op.transpose_a:
            return
        x, w = op.operands
        if not _is_weight(w) or len(g.shape_of(w)) != 2 or len(g.shape_of(x)) < 2:
            return
        if not g.is_float_type(g.element_type_of(x)):
            return
        n = g.shape_of(w)[0 if op.transpose_b else 1]
        weight: list[Operation] = [] if op.transpose_b else [g.TransposeOp.make(w, perm=(1, 0))]
        w_nk = weight[0].results[0] if weight else w
        add = u.single_user(op.results[0])
        bias = _bias_of(add, op.results[0], n)
        if add is not None and bias is not None:
            linear = g.LinearOp.make(x, w_nk, bias)
            u.insert_before(op, *weight)
            rewriter.replace(add, [linear], [linear.results[0]])
            return rewriter.erase(op)
        u.build(rewriter, op, *weight, g.LinearOp.make(x, w_nk))


class NegativeAxis(RewritePattern):
    """softmax / log_softmax: axis a >= 0 -> a - rank."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if isinstance(op, g.SoftmaxOp | g.LogSoftmaxOp) and op.axis >= 0:
            rank = len(g.shape_of(op.operands[0]))
            axis = g.to_attr("int", op.axis - rank)
            u.build(rewriter, op, u.rebuild(op, [*op.operands], axis=axis))


def canonical_patterns() -> list[RewritePattern]:
    return [GeluFromErf(), MatmulToLinear(), NegativeAxis()]


@dataclass(frozen=True)
class GraphCanonicalize(ModulePass):
    """graph-canonicalize: exporters' idioms -> the graph dialect's ops."""

    name = "graph-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(canonical_patterns()), apply_recursively=True
        )
        walker.rewrite_module(op)
