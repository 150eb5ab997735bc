"""The NCHW <-> NHWC rewrite shared by graph-layout (`layout.py`) and graph-conv-layout
(`conv_layout.py`): which ops carry a layout, the conversion of one op
(`op(x) -> transpose(op_to(transpose(x, into)), back)`), and the sinking of the border
transposes through elementwise ops until they cancel (`sink_transposes`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u
from dlpc.passes.graph.fuse import ELEMENTWISE
from dlpc.passes.graph.simplify import SimplifyReshape, SimplifyTranspose

LAYOUT_OPS = (g.Conv2DOp, g.MaxPool2DOp, g.AvgPool2DOp, g.GlobalAvgPoolOp, g.BatchNormOp)
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
SINKABLE = tuple(c for c in ELEMENTWISE if c is not g.BatchNormOp)


def with_layout(op: Operation, layout: str, operands: list[SSAValue]) -> Operation:
    """A copy of the layout op `op` with `layout` on `operands` (result type inferred)."""
    new = u.rebuild(op, operands, layout=StringAttr(layout))
    if layout == "nchw":  # the default is written by leaving the attribute out
        del new.attributes["layout"]
    return new


def convert(block: Block, op: Operation, to: str) -> None:
    """op(x) -> transpose(op_to(transpose(x, into)), back), in place in `block`."""
    into, back = (TO_NHWC, TO_NCHW) if to == "nhwc" else (TO_NCHW, TO_NHWC)
    t_in = g.TransposeOp.make(op.operands[0], perm=into)
    new = with_layout(op, to, [t_in.results[0], *op.operands[1:]])
    t_out = g.TransposeOp.make(new, perm=back)
    block.insert_ops_before([t_in, new, t_out], op)
    op.results[0].replace_all_uses_with(t_out.results[0])
    block.erase_op(op)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


class SinkTranspose(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        # op(transpose(a, p), c) -> transpose(op(a, c'), p), c one-element or static
        if not isinstance(op, SINKABLE) or u.is_static(op.results[0]):
            return
        out_shape = g.shape_of(op.results[0])
        perm = None
        for v in op.operands:
            t = u.producer(v)
            if isinstance(t, g.TransposeOp) and g.shape_of(v) == out_shape:
                perm = t.permutation()
                break
        if perm is None:
            return
        new_ops: list[Operation] = []
        operands: list[SSAValue] = []
        for v in op.operands:
            t = u.producer(v)
            if (
                isinstance(t, g.TransposeOp)
                and t.permutation() == perm
                and g.shape_of(v) == out_shape
            ):
                operands.append(t.operands[0])
            elif u.numel(g.shape_of(v)) == 1 and len(g.shape_of(v)) <= len(out_shape):
                operands.append(v)
            elif u.is_static(v) and len(g.shape_of(v)) <= len(out_shape):
                shape = g.shape_of(v)
                full = (1,) * (len(out_shape) - len(shape)) + shape
                r = g.ReshapeOp.make(v, shape=full)
                tr = g.TransposeOp.make(r, perm=_inverse(perm))
                new_ops += [r, tr]
                operands.append(tr.results[0])
            else:
                return
        inner = u.rebuild(op, operands)
        out = g.TransposeOp.make(inner, perm=perm)
        if out.results[0].type != op.results[0].type:
            return
        u.build(rewriter, op, *new_ops, inner, out)


def sink_transposes(module: ModuleOp) -> None:
    """Sink transposes through elementwise ops and cancel those that meet."""
    PatternRewriteWalker(
        GreedyRewritePatternApplier([SimplifyTranspose(), SimplifyReshape(), SinkTranspose()]),
        apply_recursively=True,
    ).rewrite_module(module)
