"""Algebraic simplification of graph ops (the graph dialect's canonicaliser).

Input: graph, func.  Output: graph, func (fewer or cheaper ops).
Requires: nothing.
Guarantees: no result type changes (a rule whose replacement would have another shape
or element type, e.g. `x + 0` where the 0 broadcasts x to a bigger shape, does not
fire); values are preserved under the assumptions stated per rule:

    x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x          exact (broadcast(x) when the
                                                            unit broadcasts x)
    x * 0, 0 * x, x - x -> 0                               exact for finite x (an inf/nan x
                                                            gives nan); integers always;
                                                            off with assume-finite=false
    neg(neg(x)) -> x                                        exact
    transpose(transpose(x, p), q) -> transpose(x, p∘q)      exact; identity -> x
    transpose(x, p) moving only size-1 dims -> reshape(x)   exact
    reshape(reshape(x, s1), s2) -> reshape(x, s2)           exact
    exp(log(x)) -> x                                        exact for x >= 0 (exp(log 0) = 0,
                                                            nan stays nan): fires only when
                                                            x comes from relu/abs/exp/
                                                            sigmoid/softmax/sqrt/rsqrt or is
                                                            a constant >= 0
    x / c -> x * (1 / c)                                    c a float constant with no zero;
                                                            differs by at most 1 ulp
    identity transpose/reshape/slice/pad/broadcast/cast,
    one-operand concat -> x                                 exact
    matmul(transpose(x, p), y) -> matmul(transpose(x, q), y, transpose_a = !transpose_a)
                                                            exact; q = p with its last two
                                                            entries swapped, when p puts
                                                            them out of order and q is
                                                            not the identity (then
                                                            graph-substitute's
                                                            matmul-transpose drops it) and
                                                            the transpose has no other
                                                            user; the same for y
    reduce_mean(x, axes = 2..rank-1, keepdims) -> global_avg_pool(x)
                                                            exact (the same mean: sum over
                                                            the spatial dims / their count)
    conv2d(pad(x, 0)) -> conv2d(x, pads + p)                exact: a pad of H and W only
    max_pool2d(pad(x, -inf)) -> max_pool2d(x, pads + p)     (the pad's own N/C pads zero,
    avg_pool2d(pad(x, 0)) -> avg_pool2d(x, pads + p)        none negative); pools only
                                                            without ceil_mode, average
                                                            pools only counting the pads
    and graph-canonicalize's rules (erf GELU -> gelu, matmul by a weight [+ bias] ->
    linear, softmax axes counted from the end)

    %z = graph.constant dense<0.0> : tensor<4xf32>
    %y = graph.add %x, %z : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>    // -> %x
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, ModuleOp
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
from dlpc.passes.graph.canonicalize import canonical_patterns


def _is(value: SSAValue, x: float) -> bool:
    return u.splat_value(value) == x


def _zeros_like(op: Operation) -> g.ConstantOp:
    return u.scalar_const(0, op.results[0], g.shape_of(op.results[0]))


def _exact_zero_ok(op: Operation, assume_finite: bool) -> bool:
    return assume_finite or isinstance(g.element_type_of(op.results[0]), IntegerType)


def _forward(rewriter: PatternRewriter, op: Operation, x: SSAValue) -> None:
    """Replace `op` by `x`, broadcast to `op`'s shape if needed."""
    if u.same_type(x, op.results[0]):
        return u.replace_with_value(rewriter, op, x)
    if g.element_type_of(x) == g.element_type_of(op.results[0]):
        u.build(rewriter, op, g.BroadcastOp.make(x, shape=g.shape_of(op.results[0])))


@dataclass
class SimplifyArith(RewritePattern):
    """Identities of add/sub/mul/div with 0 and 1, x - x, and x / c -> x * (1/c)."""

    assume_finite: bool = True

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.AddOp | g.SubOp | g.MulOp | g.DivOp) or len(op.operands) != 2:
            return
        a, b = op.operands
        # x + 0 -> x, 0 + x -> x, x - 0 -> x, x * 1 -> x, 1 * x -> x, x / 1 -> x
        # (when the unit broadcasts x to a bigger shape: -> broadcast(x))
        unit = 0.0 if isinstance(op, g.AddOp | g.SubOp) else 1.0
        if _is(b, unit):
            return _forward(rewriter, op, a)
        if isinstance(op, g.AddOp | g.MulOp) and _is(a, unit):
            return _forward(rewriter, op, b)
        # x * 0 -> 0, 0 * x -> 0 (finite x)
        if isinstance(op, g.MulOp) and (_is(a, 0.0) or _is(b, 0.0)):
            if _exact_zero_ok(op, self.assume_finite):
                return u.build(rewriter, op, _zeros_like(op))
        # x - x -> 0 (finite x)
        if isinstance(op, g.SubOp) and a == b and _exact_zero_ok(op, self.assume_finite):
            return u.build(rewriter, op, _zeros_like(op))
        # x / c -> x * (1 / c) for a float constant c without zeros
        c = u.const_array(b)
        if (
            isinstance(op, g.DivOp)
            and c is not None
            and g.is_float_type(g.element_type_of(b))
            and np.all(c != 0)
            and np.all(np.isfinite(c))
        ):
            recip = u.constant_like(1.0 / c.astype(np.float64), b)
            return u.build(rewriter, op, recip, g.MulOp.make(a, recip))


class SimplifyNegNeg(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # neg(neg(x)) -> x
        if isinstance(op, g.NegOp) and isinstance(inner := u.producer(op.operands[0]), g.NegOp):
            u.replace_with_value(rewriter, op, inner.operands[0])


class SimplifyTranspose(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.TransposeOp):
            return
        q = op.permutation()
        # transpose(x, identity) -> x
        if q == tuple(range(len(q))):
            return u.replace_with_value(rewriter, op, op.operands[0])
        # a transpose that only moves size-1 dims is a reshape
        shape = g.shape_of(op.operands[0])
        if [p for p in q if shape[p] != 1] == [i for i, d in enumerate(shape) if d != 1]:
            return u.build(rewriter, op, g.ReshapeOp.make(op.operands[0], shape=op.out_shape))
        # transpose(transpose(x, p), q) -> transpose(x, r) with r[j] = p[q[j]]
        inner = u.producer(op.operands[0])
        if isinstance(inner, g.TransposeOp):
            p = inner.permutation()
            r = tuple(p[j] for j in q)
            x = inner.operands[0]
            if r == tuple(range(len(r))):
                return u.replace_with_value(rewriter, op, x)
            u.build(rewriter, op, g.TransposeOp.make(x, perm=r))


class SimplifyReshape(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.ReshapeOp):
            return
        x = op.operands[0]
        # reshape(x, shape(x)) -> x
        if u.same_type(x, op.results[0]):
            return u.replace_with_value(rewriter, op, x)
        # reshape(reshape(x, s1), s2) -> reshape(x, s2)
        inner = u.producer(x)
        if isinstance(inner, g.ReshapeOp):
            u.build(rewriter, op, g.ReshapeOp.make(inner.operands[0], shape=op.out_shape))


NONNEGATIVE = (g.ReluOp, g.AbsOp, g.ExpOp, g.SigmoidOp, g.SoftmaxOp, g.SqrtOp, g.RsqrtOp)


def nonnegative(value: SSAValue) -> bool:
    """Is every element of `value` provably >= 0 (or nan)?"""
    if isinstance(u.producer(value), NONNEGATIVE):
        return True
    c = u.const_array(value)
    return c is not None and bool(np.all(c >= 0))


class SimplifyExpLog(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # exp(log(x)) -> x   for x >= 0
        if isinstance(op, g.ExpOp) and isinstance(inner := u.producer(op.operands[0]), g.LogOp):
            if nonnegative(inner.operands[0]):
                u.replace_with_value(rewriter, op, inner.operands[0])


class SimplifyIdentityMovement(RewritePattern):
    """Slices, pads, broadcasts and casts that return their input; one-input concat."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.GraphOp) or not op.operands:
            return
        x = op.operands[0]
        if not u.same_type(x, op.results[0]):
            return
        shape = g.shape_of(x)
        identity = (
            (isinstance(op, g.SliceOp) and op.normalized() == [(0, d, 1) for d in shape])
            or (isinstance(op, g.PadOp) and not any(op.pads))
            or isinstance(op, g.BroadcastOp | g.CastOp)
            or (isinstance(op, g.ConcatOp) and len(op.operands) == 1)
        )
        if identity:
            u.replace_with_value(rewriter, op, x)


class MatmulTransposeSwap(RewritePattern):
    """A transpose feeding a matmul that also swaps the last two dims leaves that swap to
    the matmul's transpose flag: exporters write K^T of attention as one transpose
    [0, 2, 3, 1] of the [B, S, H, D] keys, which becomes the head split [0, 2, 1, 3]
    (the same as a model written with `matmul(q, k, transpose_b=true)`) and a matmul
    reading K by rows."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.MatMulOp):
            return
        operands, flags = list(op.operands), [op.transpose_a, op.transpose_b]
        new_ops: list[Operation] = []
        for i, value in enumerate(operands):
            t = u.producer(value)
            if not isinstance(t, g.TransposeOp) or u.single_user(value) is not op:
                continue
            p = t.permutation()
            n = len(p)
            if n < 3 or p[n - 1] > p[n - 2]:
                continue  # rank 2 (all swap), or the last two dims in order: nothing to move
            q = (*p[: n - 2], p[n - 1], p[n - 2])
            if q == tuple(range(n)):
                continue  # a pure swap: graph-substitute's matmul-transpose
            # swap_last_two(transpose(x, p)) = transpose(x, q)
            inner = g.TransposeOp.make(t.operands[0], perm=q)
            new_ops.append(inner)
            operands[i], flags[i] = inner.results[0], not flags[i]
        if new_ops:
            mm = g.MatMulOp.make(*operands, transpose_a=flags[0], transpose_b=flags[1])
            u.build(rewriter, op, *new_ops, mm)


class MeanToGlobalAvgPool(RewritePattern):
    """x.mean(dim=(2, 3), keepdim=True), as exporters and hand-written pooling write it,
    is the global average pool of an NCHW tensor."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.ReduceMeanOp) or not op.keepdims:
            return
        x = op.operands[0]
        rank = len(g.shape_of(x))
        if rank >= 3 and op.reduced_axes() == tuple(range(2, rank)):
            if g.is_float_type(g.element_type_of(x)):
                u.build(rewriter, op, g.GlobalAvgPoolOp.make(x))


class FoldPadIntoWindow(RewritePattern):
    """An explicit spatial pad in front of a conv/pool becomes the window op's own pads
    (exporters write `Pad` then `Conv` for asymmetric or framework-level padding): one
    copy kernel and one intermediate fewer, and the conv schedules see the real input."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, g.Conv2DOp | g.MaxPool2DOp | g.AvgPool2DOp):
            return
        pad = u.producer(op.operands[0])
        if not isinstance(pad, g.PadOp) or g.layout_of(op) != "nchw":
            return
        pads, value = pad.pads, pad.value
        if len(pads) != 8 or any(p < 0 for p in pads) or any(pads[i] for i in (0, 1, 4, 5)):
            return  # only H and W padded, nothing cropped
        if isinstance(op, g.Conv2DOp):
            fits = value == 0.0
        elif isinstance(op, g.MaxPool2DOp):
            fits = value == -np.inf and not op.ceil_mode
        else:
            fits = value == 0.0 and not op.ceil_mode and op.count_include_pad
        if not fits:
            return
        # graph.pad is [n0, c0, h0, w0, n1, c1, h1, w1]; window pads [top, left, bottom, right]
        top, left, bottom, right = op.pads
        merged = (top + pads[2], left + pads[3], bottom + pads[6], right + pads[7])
        new = u.rebuild(op, [pad.operands[0], *op.operands[1:]], pads=g.to_attr("ints", merged))
        u.build(rewriter, op, new)
        if not pad.results[0].uses:
            rewriter.erase(pad)


def simplify_patterns(assume_finite: bool = True) -> list[RewritePattern]:
    return [
        SimplifyArith(assume_finite),
        SimplifyNegNeg(),
        SimplifyTranspose(),
        SimplifyReshape(),
        SimplifyExpLog(),
        SimplifyIdentityMovement(),
        MatmulTransposeSwap(),
        MeanToGlobalAvgPool(),
        FoldPadIntoWindow(),
        *canonical_patterns(),  # exporters' idioms -> whole ops (graph-canonicalize)
    ]


@dataclass(frozen=True)
class GraphSimplify(ModulePass):
    """graph-simplify{assume-finite=true}: algebraic simplification."""

    name = "graph-simplify"

    assume_finite: bool = True
    """Allow x * 0 -> 0 and x - x -> 0 on floats (wrong only for inf/nan x)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(simplify_patterns(self.assume_finite)),
            apply_recursively=True,
        )
        walker.rewrite_module(op)
