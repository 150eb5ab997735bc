"""Lower the quantization ops of the graph dialect to te (registered in graph-to-te's
table by importing this module).

Input: graph.quantize, graph.dequantize, graph.matmul_integer, graph.conv_integer (static
shapes, NCHW conv).  Output: te.compute / te.reduce.
Guarantees: the numpy reference's values (reference/graph.py) bit for bit: quantize
divides in x's float type, rounds half to even (math.roundeven: C's nearbyint), adds the
zero point, saturates to the zero point type's range (nan gives the minimum) and only
then converts; the integer products widen both operands to i32 and accumulate in i32
(te.reduce of an i32 result), so a fused requantization after them is the reduce's
epilogue. A zero point that is a graph.constant of zeros is not subtracted, and a scale
that is a graph.constant of ones not divided by (what the QDQ rewrite emits).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType, UnitAttr, f32, i32
from xdsl.ir import Operation, SSAValue

from dlpc.dialects import graph as g
from dlpc.dialects.te import NSW_SUM, BodyBuilder, int_limit, is_unsigned
from dlpc.passes.lower._te_builder import (
    Idx,
    Lowering,
    bcast,
    elt,
    lowers,
    shape,
    window_checks,
    window_index,
)


def _const(v: SSAValue) -> np.ndarray | None:
    owner = v.owner
    return owner.to_numpy() if isinstance(owner, g.ConstantOp) else None


def _all(v: SSAValue, value: float) -> bool:
    array = _const(v)
    return array is not None and bool((array == value).all())


def _axis(axis: int, x: SSAValue, scale: SSAValue) -> int:
    """The quantization axis of x; a per-tensor scale has none (ONNX ignores `axis` then,
    so the default 1 on a rank-1 input is no error)."""
    if shape(scale) in ((), (1,)) or not shape(x):
        return 0
    return g.normalize_axis(axis, len(shape(x)))


def _param_index(p: SSAValue, idx: Idx, axis: int) -> Idx:
    """Where a per-tensor ([] or [1]) or per-axis ([n]) parameter is read for out[idx]."""
    s = shape(p)
    if s == ():
        return []
    return [0] if s == (1,) else [idx[axis]]


# no signed wrap: an i32 sub or mul of operands that cannot leave the int32 range (two
# 8-bit values' difference, two such differences' product, |p| <= 255 * 255); the C
# printer prints such ops in plain signed arithmetic, which GCC vectorizes (the wrapping
# uint32_t form of a widened i8 product it did not, or in 32-bit lanes only)
NSW = arith.IntegerOverflowAttr((arith.IntegerOverflowFlag.NSW,))


def _widened(b: BodyBuilder, x: SSAValue, zero: SSAValue, zero_idx: Idx, skip: bool):
    """x - zero as i32, nsw (zero left out when it is a constant 0); x and zero are 8-bit
    (the verifiers of matmul_integer and conv_integer refuse any other width)."""
    v = b.cast(x, i32)
    if skip:
        return v
    return b.emit(arith.SubiOp(v, b.cast(b.read(zero, zero_idx), i32), overflow=NSW))


def _product(b: BodyBuilder, va: SSAValue, vb: SSAValue) -> SSAValue:
    """va * vb in i32, nsw (two 8-bit differences)."""
    return b.emit(arith.MuliOp(va, vb, overflow=NSW))


@lowers("quantize")
def lower_quantize(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.QuantizeOp)
    x, scale, zero = xs
    axis = _axis(op.axis, x, scale)
    to = elt(zero)
    assert isinstance(to, IntegerType)
    lo, hi = int_limit(to, False), int_limit(to, True)
    unit, no_zero = _all(scale, 1.0), _all(zero, 0)

    def body(b: BodyBuilder, idx: Idx):
        v = b.read(x, idx)
        where = _param_index(scale, idx, axis)
        if not unit:
            v = b.div(v, b.read(scale, where))
        q = b.math("roundeven", v)
        if not no_zero:
            q = b.add(q, b.cast(b.read(zero, where), v.type))
        q = b.select(b.cmp("gt", q, float(lo)), q, float(lo))  # (nan: the minimum)
        q = b.select(b.cmp("lt", q, float(hi)), q, float(hi))
        return b.cast(b.cast(q, i32), to)

    return L.compute(op.out_type, body)


@lowers("dequantize")
def lower_dequantize(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.DequantizeOp)
    x, scale, zero = xs
    axis = _axis(op.axis, x, scale)
    out = op.out_type.get_element_type()

    def body(b: BodyBuilder, idx: Idx):
        where = _param_index(scale, idx, axis)
        d = b.sub(b.cast(b.read(x, idx), f32), b.cast(b.read(zero, where), f32))
        return b.cast(b.mul(d, b.cast(b.read(scale, where), f32)), out)

    return L.compute(op.out_type, body)


@lowers("matmul_integer")
def lower_matmul_integer(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.MatMulIntegerOp)
    a, bm, za, zb = xs
    tb = op.transpose_b
    sa, sb, out = shape(a), shape(bm), op.out_shape
    skip_a, skip_b = _all(za, 0), _all(zb, 0)

    dot = _u8_dot(L, op, xs)
    if dot is not None:
        return dot

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        batch, m, n = list(idx[:-2]), idx[-2], idx[-1]
        ia = bcast(batch, sa[:-2], out[:-2]) + [m, r[0]]
        ib = bcast(batch, sb[:-2], out[:-2]) + ([n, r[0]] if tb else [r[0], n])
        ra, rb = b.read(a, ia), b.read(bm, ib)
        va = _widened(b, ra, za, _param_index(za, [m], 0), skip_a)
        vb = _widened(b, rb, zb, _param_index(zb, [n], 0), skip_b)
        return _product(b, va, vb)

    return L.reduce(op.out_type, [sa[-1]], "add", body)


def _u8_dot(L: Lowering, op: g.MatMulIntegerOp, xs) -> SSAValue | None:
    """An 8-bit activation times a constant 2-D int8 weight without a zero point, as
    `sum_k u[m, k] * w[k, n] - (za + d) * colsum(w)[n]`, where `u = a + d` lies in
    [0, 255] (d = 128 for int8 a, 0 for uint8) and colsum(w) is a constant: the sum of
    an unsigned 8-bit value times a signed one in a signed (nsw: |sum| <= K * 255 * 128)
    accumulator is what GCC turns into VNNI's `vpdpbusd` (the zero point inside the sum
    it did not). None where that does not hold."""
    a, bm, za, zb = xs
    w, ea, eb, ez = _const(bm), elt(a), elt(bm), elt(za)
    k = shape(a)[-1]
    if (
        len(shape(bm)) != 2
        or not _all(zb, 0)
        or not (isinstance(eb, IntegerType) and eb.width.data == 8 and not is_unsigned(eb))
        or not (isinstance(ea, IntegerType) and ea.width.data == 8)
        or not (isinstance(ez, IntegerType) and ez.width.data == 8)
        or k * 255 * 128 >= 2**31
    ):
        return None
    tb, sa, out = op.transpose_b, shape(a), op.out_shape
    d = 0 if is_unsigned(ea) else 128
    n = shape(bm)[0 if tb else 1]
    if w is not None:  # a constant weight: its column sums are one too
        sums = g.ConstantOp.from_numpy(w.astype(np.int32).sum(axis=1 if tb else 0, dtype=np.int32))
        anchor = L.anchor
        assert anchor is not None
        block = anchor.parent_block()
        assert block is not None
        block.insert_op_before(sums, anchor)
        colsum = sums.results[0]
    else:  # a parameter: summed by a kernel of its own (as a weight re-layout)
        colsum = L.reduce(
            g.tensor_type((n,), i32),
            [k],
            "add",
            lambda b, idx, r: b.cast(b.read(bm, [idx[0], r[0]] if tb else [r[0], idx[0]]), i32),
            suffix="_colsum",
        )
        colsum.owner.attributes[NSW_SUM] = UnitAttr()  # pyright: ignore[reportAttributeAccessIssue]
        L.hoisted.add(colsum.owner)  # pyright: ignore[reportArgumentType]

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        batch, m, n = list(idx[:-2]), idx[-2], idx[-1]
        u = b.cast(b.read(a, bcast(batch, sa[:-2], out[:-2]) + [m, r[0]]), i32)
        if d:
            u = b.emit(arith.AddiOp(u, b.const(d, i32), overflow=NSW))
        vw = b.cast(b.read(bm, [n, r[0]] if tb else [r[0], n]), i32)
        return b.emit(arith.MuliOp(u, vw, overflow=NSW))

    def epilogue(b: BodyBuilder, acc: SSAValue, idx: Idx):
        z = b.cast(b.read(za, _param_index(za, [idx[-2]], 0)), i32)
        if d:
            z = b.emit(arith.AddiOp(z, b.const(d, i32), overflow=NSW))
        fix = b.emit(arith.MuliOp(z, b.read(colsum, [idx[-1]]), overflow=NSW))
        return b.emit(arith.SubiOp(acc, fix, overflow=NSW))

    result = L.reduce(op.out_type, [k], "add", body, epilogue=epilogue)
    owner = result.owner
    assert isinstance(owner, Operation)
    owner.attributes[NSW_SUM] = UnitAttr()
    return result


@lowers("conv_integer")
def lower_conv_integer(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.ConvIntegerOp)
    # out[n, oc, oh, ow] = sum over (c, i, j) of (x - zx) * (w[oc] - zw[oc]); a padded
    # position contributes 0 (x equal to its zero point)
    x, w, zx, zw = xs
    _, _, h, wd = shape(x)
    o, cg, kh, kw = shape(w)
    og = o // op.groups
    checks = window_checks(op, (h, wd), op.out_shape[2:], (kh, kw))
    skip_x, skip_w = _all(zx, 0), _all(zw, 0)

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        n, oc, oh, ow = idx
        c, i, j = r
        ih, iw = window_index(b, op, oh, ow, i, j)
        if og == o:
            ic = c
        elif og == 1 and cg == 1:
            ic = oc
        else:
            ic = b.add(b.mul(b.div(oc, og), cg), c)
        where = [n, ic, ih, iw]

        def inside(t: BodyBuilder) -> SSAValue:
            return _widened(t, t.read(x, where), zx, _param_index(zx, [], 0), skip_x)

        zero = _const(zx)
        if checks:
            conds = [b.in_bounds(where[d], size) for d, size in checks]
            cond = conds[0] if len(conds) == 1 else b.and_(conds[0], conds[1])
        if checks and zero is not None and zero.size == 1:
            # a padded read of x's own type, padding = the zero point (the form the
            # schedule's padded staging copies); (x - zx) is then 0 there
            pad = int(zero.reshape(-1)[0])
            raw = b.if_(cond, lambda t: t.read(x, where), lambda e: pad, elt(x))
            v = _widened(b, raw, zx, _param_index(zx, [], 0), skip_x)
        elif checks:
            v = b.if_(cond, inside, lambda e: 0, i32)
        else:
            v = inside(b)
        rw = b.read(w, [oc, c, i, j])
        vw = _widened(b, rw, zw, _param_index(zw, [oc], 0), skip_w)
        return _product(b, v, vw)

    return L.reduce(op.out_type, [cg, kh, kw], "add", body)
