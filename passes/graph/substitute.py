"""The rule table of a classic graph optimiser: named algebraic substitutions.

Input: graph, func.  Output: graph, func.
Requires: nothing; run graph-fold-constants afterwards (and `fold_params` when the
weights are bound) to evaluate the static subgraphs the rules build.
Guarantees: result types never change; each rule is an algebraic identity, exact up to
floating-point rounding (rules reassociate or distribute). "c" below is a *static* value
(computed only from graph.constant/graph.param); work moves onto static values, never
onto model inputs. A rule only consumes an intermediate that has no other user.

    add-constants     add(c1, add(x, c2)) -> add(x, c1 + c2)
    conv-input-scale  conv2d(c1 * x, w) -> conv2d(x, w * c1)    c1 per input channel, groups=1
    concat-constants  concat([x, c1, c2, y]) -> concat([x, concat([c1, c2]), y])
    matmul-transpose  matmul(transpose(x), y) -> matmul(x, y, transpose_a = true)  (and rhs)
    cast-cast         cast(cast(x, t1), t2) -> cast(x, t2)     t1 holds every value of x's type
    reshape-reshape   reshape(reshape(x, s1), s2) -> reshape(x, s2)
    factor-common     x*a + b*x + c*x -> x * (a + b + c)        any number of terms
    regroup-scalars   (m1 + s1) + (m2 + s2) -> (m1 + m2) + (s1 + s2)   s1, s2 one element
    fold-batch-norm   batch_norm(conv2d(x, w, b), g, beta, m, v) -> conv2d(x, w * s, (b - m) * s + beta)
                      with s = g * rsqrt(v + eps) per output channel; likewise for linear
                      with a rank-2 result (inference semantics)

Select rules with `graph-substitute{rules=add-constants,cast-cast}` (all by default); an
unknown name is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.dialects.typed import bitwidth
from dlpc.passes.graph import _util as u
from dlpc.passes.graph.simplify import SimplifyReshape

_OpT = TypeVar("_OpT", bound=Operation)


def _owned(value: SSAValue, cls: type[_OpT] | tuple[type[_OpT], ...]) -> _OpT | None:
    """The producer of `value` if it is a `cls` op used only by one op."""
    op = u.producer(value)
    if isinstance(op, cls) and u.single_user(value) is not None:
        return op
    return None


def _finish(rewriter: PatternRewriter, op: Operation, new_ops: list[Operation]) -> bool:
    """Replace `op` by `new_ops` if the last one has the same result type."""
    if new_ops[-1].results[0].type != op.results[0].type:
        for new in reversed(new_ops):
            new.drop_all_references()
        return False
    u.build(rewriter, op, *new_ops)
    return True


class AddConstants(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # add(c1, add(x, c2)) -> add(x, c1 + c2), either operand order at both levels
        if not isinstance(op, g.AddOp):
            return
        for c1, inner_v in (op.operands, reversed(op.operands)):
            inner = _owned(inner_v, g.AddOp)
            if inner is None or not u.is_static(c1):
                continue
            for x, c2 in (inner.operands, reversed(inner.operands)):
                if u.is_static(c2) and not u.is_static(x):
                    csum = g.AddOp.make(c1, c2)
                    if _finish(rewriter, op, [csum, g.AddOp.make(x, csum)]):
                        return


class ConvInputScale(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # conv2d(c1 * x, w) -> conv2d(x, w * reshape(c1, [1, C, 1, 1]))
        if not isinstance(op, g.Conv2DOp) or op.groups != 1 or g.layout_of(op) != "nchw":
            return
        mul = _owned(op.operands[0], g.MulOp)
        if mul is None:
            return
        for scale, x in (mul.operands, reversed(mul.operands)):
            s = g.shape_of(scale)
            if not u.is_static(scale) or u.is_static(x) or not u.same_type(x, mul.results[0]):
                continue
            full = (1,) * (4 - len(s)) + s
            if len(s) > 4 or full[0] != 1 or full[2:] != (1, 1):
                continue
            s4 = g.ReshapeOp.make(scale, shape=(1, full[1], 1, 1))
            w = g.MulOp.make(op.operands[1], s4)
            conv = u.rebuild(op, [x, w.results[0], *op.operands[2:]])
            if _finish(rewriter, op, [s4, w, conv]):
                return


class ConcatConstants(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # concat([x, c1, c2, y]) -> concat([x, concat([c1, c2]), y])
        if not isinstance(op, g.ConcatOp):
            return
        operands = list(op.operands)
        static = [u.is_static(v) for v in operands]
        if all(static):
            return  # graph-fold-constants folds the whole concat
        axis = op.axis
        new_ops: list[Operation] = []
        grouped: list[SSAValue] = []
        i = 0
        while i < len(operands):
            j = i
            while j < len(operands) and static[j]:
                j += 1
            if j - i >= 2:
                inner = g.ConcatOp.make(*operands[i:j], axis=axis)
                new_ops.append(inner)
                grouped.append(inner.results[0])
                i = j
            else:
                grouped.append(operands[i])
                i += 1
        if new_ops:
            _finish(rewriter, op, [*new_ops, g.ConcatOp.make(*grouped, axis=axis)])


def _swaps_last_two(op: Operation | None) -> TypeGuard[g.TransposeOp]:
    if not isinstance(op, g.TransposeOp):
        return False
    perm = op.permutation()
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


class MatmulTranspose(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # matmul(transpose(x), y) -> matmul(x, y, transpose_a = !transpose_a); same for y
        if not isinstance(op, g.MatMulOp):
            return
        a, b = op.operands
        ta, tb = op.transpose_a, op.transpose_b
        ta_op, tb_op = u.producer(a), u.producer(b)
        if _swaps_last_two(ta_op):
            a, ta = ta_op.operands[0], not ta
        if _swaps_last_two(tb_op):
            b, tb = tb_op.operands[0], not tb
        if (a, b) != tuple(op.operands):
            _finish(rewriter, op, [g.MatMulOp.make(a, b, transpose_a=ta, transpose_b=tb)])


MANTISSA = {16: 11, 32: 24, 64: 53}


def lossless(src: Attribute, dst: Attribute) -> bool:
    """Does `dst` represent every value of `src` exactly?"""
    if isinstance(src, IntegerType) and bitwidth(src) == 1:
        return True
    if g.is_float_type(src):
        return g.is_float_type(dst) and bitwidth(dst) >= bitwidth(src)
    if isinstance(dst, IntegerType):
        return bitwidth(dst) >= bitwidth(src)
    return g.is_float_type(dst) and bitwidth(src) <= MANTISSA[bitwidth(dst)]


class CastCast(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # cast(cast(x, t1), t2) -> cast(x, t2)   when t1 holds every value of x's type
        if not isinstance(op, g.CastOp):
            return
        inner = u.producer(op.operands[0])
        if isinstance(inner, g.CastOp):
            x = inner.operands[0]
            if lossless(g.element_type_of(x), inner.to):
                _finish(rewriter, op, [g.CastOp.make(x, to=op.to)])


def _add_terms(value: SSAValue, root: bool = True) -> list[SSAValue]:
    """Leaves of the tree of adds under `value` (inner adds used once)."""
    op = u.producer(value) if root else _owned(value, g.AddOp)
    if not isinstance(op, g.AddOp):
        return [value]
    return [t for v in op.operands for t in _add_terms(v, root=False)]


class FactorCommon(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # x*a + b*x + c*x -> x * (a + b + c)
        if not isinstance(op, g.AddOp):
            return
        owned = [_owned(v, g.MulOp) for v in _add_terms(op.results[0])]
        terms = [t for t in owned if t is not None]
        if len(terms) < 2 or len(terms) < len(owned):
            return
        for x in terms[0].operands:
            if not all(x in t.operands for t in terms):
                continue
            others = [t.operands[1] if t.operands[0] == x else t.operands[0] for t in terms]
            new_ops: list[Operation] = []
            acc = others[0]
            for other in others[1:]:
                new_ops.append(g.AddOp.make(acc, other))
                acc = new_ops[-1].results[0]
            if _finish(rewriter, op, [*new_ops, g.MulOp.make(x, acc)]):
                return


def _split_scalar(add: Operation) -> tuple[SSAValue, SSAValue] | None:
    """(matrix, scalar) operands of an add whose one operand has one element."""
    a, b = add.operands
    sizes = [u.numel(g.shape_of(v)) for v in (a, b)]
    if sizes[1] == 1 and sizes[0] > 1:
        return a, b
    if sizes[0] == 1 and sizes[1] > 1:
        return b, a
    return None


class RegroupScalars(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # (m1 + s1) + (m2 + s2) -> (m1 + m2) + (s1 + s2): one full-size add fewer
        if not isinstance(op, g.AddOp):
            return
        lhs, rhs = (_owned(v, g.AddOp) for v in op.operands)
        if lhs is None or rhs is None or lhs is rhs:
            return
        left, right = _split_scalar(lhs), _split_scalar(rhs)
        if left is None or right is None:
            return
        (m1, s1), (m2, s2) = left, right
        mm, ss = g.AddOp.make(m1, m2), g.AddOp.make(s1, s2)
        _finish(rewriter, op, [mm, ss, g.AddOp.make(mm, ss)])


class FoldBatchNorm(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # batch_norm(conv2d(x, w, b), gamma, beta, mean, var)
        #   -> conv2d(x, w * s, (b - mean) * s + beta),  s = gamma * rsqrt(var + eps)
        if not isinstance(op, g.BatchNormOp) or not all(u.is_static(v) for v in op.operands[1:]):
            return
        anchor = _owned(op.operands[0], (g.Conv2DOp, g.LinearOp))
        if anchor is None or not all(u.is_static(v) for v in anchor.operands[1:]):
            return
        if isinstance(anchor, g.Conv2DOp) and g.layout_of(anchor) != g.layout_of(op):
            return  # the weight is OIHW in both layouts: only the channel axes must agree
        if isinstance(anchor, g.LinearOp) and len(anchor.out_shape) != 2:
            return  # batch norm normalises axis 1, the linear's features only at rank 2
        gamma, beta, mean, var = op.operands[1:]
        w = anchor.operands[1]
        out_channels = g.shape_of(w)[0]
        eps = u.scalar_const(op.epsilon, var)
        var_eps = g.AddOp.make(var, eps)
        rsqrt = g.RsqrtOp.make(var_eps)
        s = g.MulOp.make(gamma, rsqrt)
        s_w = g.ReshapeOp.make(s, shape=(out_channels,) + (1,) * (len(g.shape_of(w)) - 1))
        new_w = g.MulOp.make(w, s_w)
        ops: list[Operation] = [eps, var_eps, rsqrt, s, s_w, new_w]
        if len(anchor.operands) == 3:
            centred = g.SubOp.make(anchor.operands[2], mean)
            scaled = g.MulOp.make(centred, s)
            ops += [centred, scaled]
            new_b = g.AddOp.make(scaled, beta)
        else:
            scaled = g.MulOp.make(mean, s)
            ops.append(scaled)
            new_b = g.SubOp.make(beta, scaled)
        ops.append(new_b)
        ops.append(u.rebuild(anchor, [anchor.operands[0], new_w.results[0], new_b.results[0]]))
        _finish(rewriter, op, ops)


RULES: dict[str, type[RewritePattern]] = {
    "add-constants": AddConstants,
    "conv-input-scale": ConvInputScale,
    "concat-constants": ConcatConstants,
    "matmul-transpose": MatmulTranspose,
    "cast-cast": CastCast,
    "reshape-reshape": SimplifyReshape,
    "factor-common": FactorCommon,
    "regroup-scalars": RegroupScalars,
    "fold-batch-norm": FoldBatchNorm,
}


def rule_patterns(names: tuple[str, ...]) -> list[RewritePattern]:
    for name in names:
        if name not in RULES:
            raise DlpcError(
                f"error: graph-substitute has no rule '{name}' (rules: {', '.join(RULES)})"
            )
    return [RULES[name]() for name in names or tuple(RULES)]


@dataclass(frozen=True)
class GraphSubstitute(ModulePass):
    """graph-substitute{rules=a,b}: apply the named rules (all by default)."""

    name = "graph-substitute"

    rules: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(rule_patterns(self.rules)), apply_recursively=True
        )
        walker.rewrite_module(op)
