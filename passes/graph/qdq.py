"""Integer kernels for quantize-dequantize (QDQ) models: a matmul, linear or conv2d whose
data operands are both dequantized 8-bit integers becomes the integer product of those
integers (i32 accumulation) rescaled once.

Input: graph, func.  Output: graph, func.
Requires: nothing; runs before graph-fold-constants, which would fold a dequantized
constant weight into floats.
Guarantees: results equal up to float rounding: sum_k (x - zx) sx (w - zw) sw is computed
as f32(sum_k (x - zx) (w - zw)) * (sx * sw), exact in the i32 sum (no overflow for
K < 2**17 with 8-bit operands) where the float form rounds every product. A rewrite
needs: x's dequantize per tensor; w's per tensor or per output channel (axis N = 1 of a
[K, N] matmul weight, axis 0 of a linear's [O, K] or a conv's OIHW weight); the matmul
without transposes and of rank >= 2; an NCHW conv2d; f32 scales. Anything else is left
as it is (the float op on dequantized values).

    %x = graph.dequantize %xq, %sx, %zx               %a = graph.matmul_integer %xq, %wq, %zx, %zw
    %w = graph.dequantize %wq, %sw, %zw     ->        %f = graph.cast %a {to = f32}
    %y = graph.matmul %x, %w                          %s = graph.mul %sx, %sw
                                                      %y = graph.mul %f, %s

A graph.quantize of the result (the next layer's input, as onnxruntime's quantize_static
writes) then follows the rescale as elementwise ops, so graph-fuse makes the product, the
rescale, a bias add, an activation and the requantization one kernel.

Two exact rewrites remove the pairs QDQ puts around ops that only move or select values:

    max_pool2d / reshape (dequantize(q, s, z))  ->  dequantize(max_pool2d / reshape (q), s, z)
        per tensor, every scale > 0 (dequantize is then increasing, so the max of the
        dequantized values is the dequantized max), q of i8 or ui8;
    quantize(dequantize(q, s, z), s, z)  ->  q
        the same scale and zero point (the same values or equal constants), per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, ModuleOp, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects import graph as g
from dlpc.passes.graph import _util as u


def _dequantized(v: SSAValue) -> g.DequantizeOp | None:
    """The dequantize of 8-bit integers with f32 scales that `v` is, else None."""
    op = u.producer(v)
    if not isinstance(op, g.DequantizeOp):
        return None
    elt = g.element_type_of(op.operands[0])
    if not isinstance(elt, IntegerType) or elt.bitwidth != 8:
        return None
    return op if g.element_type_of(op.operands[1]) == f32 else None


def _per_tensor(dq: g.DequantizeOp | g.QuantizeOp) -> bool:
    return g.shape_of(dq.operands[1]) in ((), (1,))


def _per_channel(dq: g.DequantizeOp, axis: int) -> bool:
    """Per tensor, or per `axis` of its (rank >= 2) input."""
    if _per_tensor(dq):
        return True
    rank = len(g.shape_of(dq.operands[0]))
    return rank >= 2 and g.normalize_axis(dq.axis, rank) == axis


class _Emitter:
    def __init__(self, anchor: Operation):
        self.anchor = anchor

    def __call__(self, cls: type[g.GraphOp], *operands: SSAValue, **attrs) -> SSAValue:
        op = cls.make(*operands, **attrs)
        u.insert_before(self.anchor, op)
        return op.results[0]


def _rescale(emit: _Emitter, acc: SSAValue, sx: SSAValue, sw: SSAValue, shape) -> SSAValue:
    """f32(acc) * (sx * sw), sw reshaped to `shape` (broadcasting along the channel)."""
    if g.shape_of(sw) not in ((), (1,), tuple(shape)):
        sw = emit(g.ReshapeOp, sw, shape=shape)
    f = emit(g.CastOp, acc, to=f32)
    return emit(g.MulOp, f, emit(g.MulOp, sx, sw))


def _rewrite(op: Operation) -> SSAValue | None:
    """The integer form of `op`'s result, built before it, or None."""
    if not isinstance(op, g.MatMulOp | g.LinearOp | g.Conv2DOp):
        return None
    xd, wd = _dequantized(op.operands[0]), _dequantized(op.operands[1])
    if xd is None or wd is None or not _per_tensor(xd):
        return None
    xq, sx, zx = xd.operands
    wq, sw, zw = wd.operands
    emit = _Emitter(op)
    if isinstance(op, g.MatMulOp):
        rank_x, rank_w = len(g.shape_of(xq)), len(g.shape_of(wq))
        if op.transpose_a or op.transpose_b or rank_x < 2 or rank_w != 2:
            return None
        if not _per_channel(wd, 1):
            return None
        if u.is_static(wq):  # [K, N] -> [N, K] (folded): the reduction reads it contiguously
            wt = emit(g.TransposeOp, wq, perm=[1, 0])
            acc = emit(g.MatMulIntegerOp, xq, wt, zx, zw, transpose_b=True)
        else:
            acc = emit(g.MatMulIntegerOp, xq, wq, zx, zw)
        return _rescale(emit, acc, sx, sw, (g.shape_of(wq)[1],))
    if isinstance(op, g.LinearOp):
        if len(g.shape_of(xq)) < 2 or not _per_channel(wd, 0):
            return None
        acc = emit(g.MatMulIntegerOp, xq, wq, zx, zw, transpose_b=True)
        y = _rescale(emit, acc, sx, sw, (g.shape_of(wq)[0],))
        return emit(g.AddOp, y, op.operands[2]) if len(op.operands) == 3 else y
    assert isinstance(op, g.Conv2DOp)
    if g.layout_of(op) != "nchw" or not _per_channel(wd, 0):
        return None
    acc = emit(
        g.ConvIntegerOp,
        xq,
        wq,
        zx,
        zw,
        strides=op.strides,
        pads=op.pads,
        dilations=op.dilations,
        groups=op.groups,
    )
    o = g.shape_of(wq)[0]
    y = _rescale(emit, acc, sx, sw, (o, 1, 1))
    if len(op.operands) == 3:
        y = emit(g.AddOp, y, emit(g.ReshapeOp, op.operands[2], shape=(o, 1, 1)))
    return y


def _same(a: SSAValue, b: SSAValue) -> bool:
    if a is b:
        return True
    x, y = u.const_array(a), u.const_array(b)
    return x is not None and y is not None and x.dtype == y.dtype and np.array_equal(x, y)


def _requantized(op: Operation) -> SSAValue | None:
    """q for quantize(dequantize(q, s, z), s, z), else None."""
    if not isinstance(op, g.QuantizeOp):
        return None
    dq = u.producer(op.operands[0])
    if not isinstance(dq, g.DequantizeOp) or not (_per_tensor(dq) and _per_tensor(op)):
        return None
    q, s, z = dq.operands  # (the same z: q's type is the quantize's, by both verifiers)
    return q if _same(s, op.operands[1]) and _same(z, op.operands[2]) else None


def _hoisted(op: Operation) -> SSAValue | None:
    """dequantize(f(q)) for f(dequantize(q)), f a max pool or a reshape, else None."""
    if not isinstance(op, g.MaxPool2DOp | g.ReshapeOp):  # (each of one operand)
        return None
    dq = u.producer(op.operands[0])
    if not isinstance(dq, g.DequantizeOp) or not _per_tensor(dq):
        return None
    q, s, z = dq.operands
    scale = u.const_array(s)
    elt = g.element_type_of(q)
    if not isinstance(elt, IntegerType) or elt.bitwidth != 8:
        return None
    if scale is None or not (scale > 0).all():
        return None
    emit = _Emitter(op)
    moved = u.rebuild(op, [q])
    u.insert_before(op, moved)
    return emit(g.DequantizeOp, moved.results[0], s, z)


def _rewrite_any(op: Operation) -> SSAValue | None:
    return _rewrite(op) or _requantized(op) or _hoisted(op)


@dataclass(frozen=True)
class GraphFoldQdq(ModulePass):
    """Dequantized matmul / linear / conv2d -> integer product + rescale."""

    name = "graph-fold-qdq"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in u.funcs(op):
            block = fn.body.block
            for inner in list(block.ops):  # (in order: a rewrite feeds its users')
                value = _rewrite_any(inner)
                if value is None:
                    continue
                assert value.type == inner.results[0].type, (value.type, inner.results[0].type)
                inner.results[0].replace_all_uses_with(value)
                dequantized = [u.producer(v) for v in inner.operands[:2]]
                block.erase_op(inner)
                for dq in dequantized:  # (a dequantize another op reads stays)
                    if isinstance(dq, g.DequantizeOp) and not dq.results[0].uses:
                        block.erase_op(dq)
