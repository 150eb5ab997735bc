"""Lower graph ops to tensor expressions (te.compute / te.reduce).

Input: graph (static shapes), func.  Output: te (+ arith, math, scf in bodies), with
graph.param and graph.constant kept as they are.
Requires: static shapes (run graph-infer-shapes first if the frontend left any open).
Guarantees: no graph op other than graph.param/graph.constant remains; every te op is
named after the graph op it came from and that op's position (`relu_0`, `matmul_1`,
`softmax_2_max`, ...); no te.read can go out of bounds (padding and concatenation use
scf.if so that only in-bounds reads execute; gather indices are wrapped and clamped);
each graph.fused becomes ONE te op when its body is elementwise ops around at most one
reduction anchor (matmul, linear, conv2d, pooling, reductions): producers are inlined
into the anchor's body, consumers become its epilogue (plus, for an NHWC conv, the
weight re-layout below, kept as its own te.compute before it).
f16 numerics follow the numpy reference: matmul, linear, conv2d and softmax's sum
accumulate f16 values in f32 (acc_type f32) and round to f16 once, before any epilogue;
elementwise f16 ops round every result; i1 max/min are any/all (false < true).
Layout: conv2d, pools, global_avg_pool and batch_norm with `layout = "nhwc"`
(`graph.layout_of`) are lowered natively: activations are indexed [n, h, w, c], the
channel is the innermost output dim (contiguous, vectorisable) and conv reduces over
(kh, kw, c). The graph-level conv weight stays OIHW; an NHWC conv reads it through a
te.compute `<conv>_weight_hwio` of shape (kh, kw, c/groups, o), so that the vectorised
output-channel loop reads the weight contiguously too (unless c/groups*kh*kw = 1, where
OIHW already is). No activation transpose is introduced.

    %y = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>

becomes

    %y = te.compute "relu_0" (%i0, %i1) : tensor<4x8xf32> {
      %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
      %c = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %v, %c : f32
      te.yield %r : f32
    }
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    Float16Type,
    IndexType,
    IntegerType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    f16,
    f32,
    i64,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects import symdims
from dlpc.dialects.te import BodyBuilder, ComputeOp, ReduceOp, is_unsigned
from dlpc.passes.lower import quant_to_te  # noqa: F401 - registers its lowerings
from dlpc.passes.lower._symbolic import SymbolicFunction
from dlpc.passes.lower._te_builder import (
    Idx,
    Lowering,
    bcast,
    elt,
    guarded_read,
    lowers,
    op_name,
    shape,
    spatial_dims,
    window_checks,
    window_index,
)
from dlpc.passes.lower.te_inline import erase, fold_into_epilogue, inline_compute
from dlpc.reference.graph import dropout_threshold, pcg_hash

# ------------------------------------------------------------------- elementwise


def _gelu(b: BodyBuilder, x: SSAValue, approximate: str) -> SSAValue:
    if approximate == "tanh":
        cube = b.mul(b.mul(x, x), x)
        inner = b.mul(math.sqrt(2 / math.pi), b.add(x, b.mul(0.044715, cube)))
        return b.mul(b.mul(0.5, x), b.add(1.0, b.tanh(inner)))
    return b.mul(b.mul(0.5, x), b.add(1.0, b.erf(b.div(x, math.sqrt(2)))))


def _clip(b: BodyBuilder, x: SSAValue, lo: float, hi: float) -> SSAValue:
    if lo > -math.inf:
        x = b.max(x, lo)
    if hi < math.inf:
        x = b.min(x, hi)
    return x


# (the op argument is the graph op of the entry's name: gelu's is a g.GeluOp)
UNARY: dict[str, Callable[[BodyBuilder, SSAValue, Any], SSAValue]] = {
    "neg": lambda b, x, op: b.neg(x),
    "abs": lambda b, x, op: b.abs(x),
    "exp": lambda b, x, op: b.exp(x),
    "log": lambda b, x, op: b.log(x),
    "sqrt": lambda b, x, op: b.sqrt(x),
    "rsqrt": lambda b, x, op: b.div(1.0, b.sqrt(x)),
    "tanh": lambda b, x, op: b.tanh(x),
    "sigmoid": lambda b, x, op: b.div(1.0, b.add(1.0, b.exp(b.neg(x)))),
    "erf": lambda b, x, op: b.erf(x),
    "sin": lambda b, x, op: b.math("sin", x),
    "cos": lambda b, x, op: b.math("cos", x),
    "tan": lambda b, x, op: b.math("tan", x),
    "asin": lambda b, x, op: b.math("asin", x),
    "acos": lambda b, x, op: b.math("acos", x),
    "atan": lambda b, x, op: b.math("atan", x),
    "sinh": lambda b, x, op: b.math("sinh", x),
    "cosh": lambda b, x, op: b.math("cosh", x),
    "asinh": lambda b, x, op: b.math("asinh", x),
    "acosh": lambda b, x, op: b.math("acosh", x),
    "atanh": lambda b, x, op: b.math("atanh", x),
    "floor": lambda b, x, op: b.math("floor", x),
    "ceil": lambda b, x, op: b.math("ceil", x),
    "round": lambda b, x, op: b.math("roundeven", x),
    "bit_not": lambda b, x, op: b.emit(arith.XOrIOp(x, b.const(-1, x.type))),
    "relu": lambda b, x, op: b.max(x, 0),
    "gelu": lambda b, x, op: _gelu(b, x, op.approximate),
    "leaky_relu": lambda b, x, op: b.select(b.cmp("gt", x, 0), x, b.mul(op.alpha, x)),
    "clip": lambda b, x, op: _clip(b, x, op.min, op.max),
    "cast": lambda b, x, op: b.cast(x, op.to),
    "bitcast": lambda b, x, op: b.emit(arith.BitcastOp(x, op.to)),
}

BINARY: dict[str, Callable[[BodyBuilder, SSAValue, SSAValue], SSAValue]] = {
    "add": BodyBuilder.add,
    "sub": BodyBuilder.sub,
    "mul": BodyBuilder.mul,
    "div": BodyBuilder.div,
    "max": BodyBuilder.max,
    "min": BodyBuilder.min,
    "pow": BodyBuilder.pow,
    "prelu": lambda b, x, s: b.select(b.cmp("gt", x, 0), x, b.mul(s, x)),
    "bit_and": BodyBuilder.and_,
    "bit_or": BodyBuilder.or_,
    "bit_xor": lambda b, x, y: b.emit(arith.XOrIOp(x, y)),
    "shift_left": lambda b, x, y: _shift(b, x, y, left=True),
    "shift_right": lambda b, x, y: _shift(b, x, y, left=False),
}


def _shift(b: BodyBuilder, x: SSAValue, y: SSAValue, left: bool) -> SSAValue:
    """ONNX BitShift: a shift by less than 0 or at least the width gives what the sign
    fill alone gives (-1 for a right shift of a negative signed x, else 0); C's shift is
    undefined there, so the amount is 0 then and the fill selected. A left shift runs on
    the unsigned twin type (C's << of a negative signed value is undefined)."""
    ty = x.type
    assert isinstance(ty, IntegerType)
    ok = b.and_(b.cmp("ge", y, 0), b.cmp("lt", y, ty.width.data))
    amount = b.select(ok, y, 0)
    if left:
        twin = IntegerType(ty.width.data, Signedness.UNSIGNED)
        shifted = b.cast(b.emit(arith.ShLIOp(b.cast(x, twin), b.cast(amount, twin))), ty)
        return b.select(ok, shifted, 0)
    if is_unsigned(ty):
        return b.select(ok, b.emit(arith.ShRUIOp(x, amount)), 0)
    fill = b.select(b.cmp("lt", x, 0), b.const(-1, ty), b.const(0, ty))
    return b.select(ok, b.emit(arith.ShRSIOp(x, amount)), fill)


def elementwise(L: Lowering, op: g.GraphOp, xs: list[SSAValue], fn) -> SSAValue:
    """out[i] = fn(b, x0[bcast(i)], x1[bcast(i)], ...)."""

    def body(b: BodyBuilder, idx: Idx):
        return fn(b, *[b.read(x, bcast(idx, shape(x), op.out_shape)) for x in xs])

    return L.compute(op.out_type, body)


@lowers(*UNARY)
def lower_unary(L: Lowering, op: g.GraphOp, xs):
    fn = UNARY[op.name.removeprefix("graph.")]
    return elementwise(L, op, xs, lambda b, x: fn(b, x, op))


@lowers(*BINARY)
def lower_binary(L: Lowering, op: g.GraphOp, xs):
    if op.name == "graph.pow" and (n := _small_integer_exponent(op.operands[1])) is not None:
        return elementwise(L, op, xs[:1], lambda b, x: _power_by_products(b, x, n))
    return elementwise(L, op, xs, BINARY[op.name.removeprefix("graph.")])


def _small_integer_exponent(value: SSAValue) -> int | None:
    """n when `value` is a graph.constant whose every element is the integer n in 1..4
    (and broadcasting the exponent adds no dimension the base lacks), else None."""
    owner = value.owner
    if not isinstance(owner, g.ConstantOp):
        return None
    array = owner.to_numpy()
    if array.size == 0 or array.ndim > 0 and array.size != 1:
        return None
    n = float(array.reshape(-1)[0])
    return int(n) if n in (1.0, 2.0, 3.0, 4.0) else None


def _power_by_products(b: BodyBuilder, x: SSAValue, n: int) -> SSAValue:
    # pow(x, n) -> x * x * ... for n in 1..4: what powf computes, within an ulp, with
    # no call (a vectorised powf falls back to scalar code for negative bases)
    if n == 4:
        square = b.mul(x, x)
        return b.mul(square, square)
    result = x
    for _ in range(n - 1):
        result = b.mul(result, x)
    return result


@lowers("where")
def lower_where(L: Lowering, op: g.GraphOp, xs):
    return elementwise(L, op, xs, lambda b, c, x, y: b.select(c, x, y))


@lowers("compare")
def lower_compare(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.CompareOp)
    return elementwise(L, op, xs, lambda b, x, y: b.cmp(op.predicate, x, y))


# ----------------------------------------------------------------- linear algebra


def _prod(b: BodyBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
    """x * y, in f32 for f16 operands (see `_dot`)."""
    return b.mul(_widen(b, x), _widen(b, y))


def _widen(b: BodyBuilder, x: SSAValue) -> SSAValue:
    """x in f32 when it is an f16 value, else x."""
    return b.cast(x, f32) if isinstance(x.type, Float16Type) else x


def _dot(L: Lowering, ty: TensorType, extents, body, epilogue=None) -> SSAValue:
    """A sum of products (matmul, linear, conv). An f16 one accumulates in f32 and rounds
    once, before the epilogue, as numpy's f16 matmul does (the reference's definition);
    its body must build the products with `_prod`."""
    if not isinstance(ty.get_element_type(), Float16Type):
        return L.reduce(ty, extents, "add", body, epilogue=epilogue)

    def rounded(b: BodyBuilder, acc: SSAValue, idx: Idx):
        v = b.cast(acc, f16)
        return v if epilogue is None else epilogue(b, v, idx)

    return L.reduce(ty, extents, "add", body, epilogue=rounded, acc_type=f32)


@lowers("matmul")
def lower_matmul(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.MatMulOp)
    a, bm = xs
    sa, sb = shape(a), shape(bm)
    ta, tb = op.transpose_a, op.transpose_b
    k = sa[0] if len(sa) == 1 else (sa[-2] if ta else sa[-1])

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        full = list(idx)
        if len(sb) == 1:
            full.append(None)  # no n dim
        if len(sa) == 1:
            full.insert(len(full) - 1, None)  # no m dim
        batch, m, n = full[:-2], full[-2], full[-1]
        if len(sa) == 1:
            ia = [r[0]]
        else:
            ia = bcast(batch, sa[:-2], op.out_shape[: len(batch)]) + (
                [r[0], m] if ta else [m, r[0]]
            )
        if len(sb) == 1:
            ib = [r[0]]
        else:
            ib = bcast(batch, sb[:-2], op.out_shape[: len(batch)]) + (
                [n, r[0]] if tb else [r[0], n]
            )
        return _prod(b, b.read(a, ia), b.read(bm, ib))

    return _dot(L, op.out_type, [k], body)


def _bias_epilogue(bias: SSAValue | None, channel_dim: int):
    """Epilogue adding bias[idx[channel_dim]] (bias of shape [c], [1, c] or [])."""
    if bias is None:
        return None

    def epilogue(b: BodyBuilder, acc: SSAValue, idx: Idx):
        s = shape(bias)
        where = [0] * (len(s) - 1) + [idx[channel_dim]] if s else []
        return b.add(acc, b.read(bias, where))

    return epilogue


@lowers("linear")
def lower_linear(L: Lowering, op: g.GraphOp, xs):
    x, w = xs[0], xs[1]
    bias = xs[2] if len(xs) == 3 else None
    rank = len(op.out_shape)

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        return _prod(b, b.read(x, [*idx[:-1], r[0]]), b.read(w, [idx[-1], r[0]]))

    return _dot(L, op.out_type, [shape(w)[1]], body, _bias_epilogue(bias, rank - 1))


# ------------------------------------------------------------- windows (conv, pool)


def _nchw(op: g.GraphOp, values) -> list:
    """(n, c, h, w) of a layout op's activation index or shape, whatever its layout."""
    values = list(values)
    return [values[0], values[-1], *values[1:-1]] if g.layout_of(op) == "nhwc" else values


def _in_layout(op: g.GraphOp, n, c, *spatial) -> list:
    """The activation index [n, c, h, w] in the op's layout ([n, h, w, c] for NHWC)."""
    return [n, *spatial, c] if g.layout_of(op) == "nhwc" else [n, c, *spatial]


@lowers("conv2d")
def lower_conv2d(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.Conv2DOp)
    assert isinstance(op, g.Conv2DOp)  # LOWERINGS dispatches on the op name
    # NCHW: out[n, oc, oh, ow] = sum over (c, i, j); NHWC: out[n, oh, ow, oc] = sum over
    # (i, j, c), channel innermost in both the output and the reduction (weight OIHW)
    x, w = xs[0], xs[1]
    bias = xs[2] if len(xs) == 3 else None
    nhwc = g.layout_of(op) == "nhwc"
    _, _, h, wd = _nchw(op, shape(x))
    o, cg, kh, kw = shape(w)
    og = o // op.groups
    checks = window_checks(op, (h, wd), _nchw(op, op.out_shape)[2:], (kh, kw))
    wt, weight_at = w, lambda oc, c, i, j: [oc, c, i, j]
    if nhwc and cg * kh * kw > 1:
        # the OIHW weight laid out as (kh, kw, c, o), so that the innermost (channel)
        # output dim reads it contiguously; a separate kernel even inside graph.fused
        ty = g.tensor_type((kh, kw, cg, o), elt(w))
        wt = L.compute(
            ty, lambda b, idx: b.read(w, [idx[3], idx[2], idx[0], idx[1]]), suffix="_weight_hwio"
        )
        owner = wt.owner
        assert isinstance(owner, Operation)  # the result of the compute just built
        L.hoisted.add(owner)
        weight_at = lambda oc, c, i, j: [i, j, c, oc]  # noqa: E731

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        n, oc, oh, ow = _nchw(op, idx)
        i, j, c = r if nhwc else (r[1], r[2], r[0])
        ih, iw = window_index(b, op, oh, ow, i, j)
        if og == o:  # groups = 1
            ic = c
        elif og == 1 and cg == 1:  # depthwise: input channel = output channel (c is 0)
            ic = oc
        else:
            ic = b.add(b.mul(b.div(oc, og), cg), c)
        v = guarded_read(b, x, _in_layout(op, n, ic, ih, iw), checks, 0.0)
        return _prod(b, v, b.read(wt, weight_at(oc, c, i, j)))

    extents = [kh, kw, cg] if nhwc else [cg, kh, kw]
    return _dot(L, op.out_type, extents, body, _bias_epilogue(bias, spatial_dims(op)[0]))


# ------------------------------------------------- Winograd F(2x2, 3x3) transforms
# The transform matrices are 0/+-1 (and 1/2 in G): each element is a few adds. The
# coefficients are chosen by selects on the point index (a = t / 4, b = t % 4) and the
# row offsets by index selects, so an unrolled or hoisted point index folds them away and
# no coefficient table or multiply is left (Lavin & Gray's B^T, G, A^T).


def _is(b: BodyBuilder, i: SSAValue, value: int) -> SSAValue:
    return b.cmp("eq", i, value)


def _g_row(b: BodyBuilder, a: SSAValue, g0: SSAValue, g1: SSAValue, g2: SSAValue) -> SSAValue:
    """(G g)[a], G = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]."""
    s = b.add(g0, g2)
    mid = b.mul(b.select(_is(b, a, 1), b.add(s, g1), b.sub(s, g1)), 0.5)
    return b.select(_is(b, a, 0), g0, b.select(_is(b, a, 3), g2, mid))


@lowers("winograd_filter_transform")
def lower_winograd_filter_transform(L: Lowering, op: g.GraphOp, xs):
    (w,) = xs

    def body(b: BodyBuilder, idx: Idx):
        t, o, i = idx
        pa, pb = b.div(t, 4), b.rem(t, 4)
        cols = [_g_row(b, pa, *(b.read(w, [o, i, k, j]) for k in range(3))) for j in range(3)]
        return _g_row(b, pb, *cols)

    return L.compute(op.out_type, body)


def _bt(b: BodyBuilder, k: SSAValue, e: list[SSAValue]) -> SSAValue:
    """(B^T e)[k] for k = 0..3: e0 - e2, e1 + e2, e2 - e1, e1 - e3."""
    return b.select(
        _is(b, k, 0),
        b.sub(e[0], e[2]),
        b.select(
            _is(b, k, 1),
            b.add(e[1], e[2]),
            b.select(_is(b, k, 2), b.sub(e[2], e[1]), b.sub(e[1], e[3])),
        ),
    )


@lowers("winograd_input_transform")
def lower_winograd_input_transform(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.WinogradInputTransformOp)
    # the 16 reads of a tile at affine indices (2 th + i - top, 2 tw + j - left), so
    # that a schedule can stage the padded input (cache_read) and read it unguarded;
    # the point's selects fold once its loop is unrolled
    (x,) = xs
    _, _, h, wd = shape(x)
    pt, pl, _, _ = op.pads
    th, tw = op.out_shape[3:]
    checks = [
        (d, size)
        for d, size, pad, tiles in ((2, h, pt, th), (3, wd, pl, tw))
        if pad > 0 or 2 * tiles + 2 - pad > size
    ]

    def body(b: BodyBuilder, idx: Idx):
        t, n, c, ti, tj = idx
        pa, pb = b.div(t, 4), b.rem(t, 4)
        rows = [b.sub(b.add(b.mul(ti, 2), i), pt) for i in range(4)]
        cols = [b.sub(b.add(b.mul(tj, 2), j), pl) for j in range(4)]
        d = [[guarded_read(b, x, [n, c, r, col], checks, 0.0) for col in cols] for r in rows]
        return _bt(b, pa, [_bt(b, pb, row) for row in d])

    return L.compute(op.out_type, body)


def _at_row(b: BodyBuilder, r: SSAValue, m0: SSAValue, m1: SSAValue, m2: SSAValue) -> SSAValue:
    """(A^T m)[r] from m[r], m[r + 1], m[r + 2]: A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]."""
    rest = b.add(m1, m2)
    return b.select(_is(b, r, 0), b.add(m0, rest), b.sub(m0, rest))


@lowers("winograd_output_transform")
def lower_winograd_output_transform(L: Lowering, op: g.GraphOp, xs):
    m = xs[0]
    bias = xs[1] if len(xs) == 2 else None

    def body(b: BodyBuilder, idx: Idx):
        n, o, y, x = idx
        ti, ri, tj, rj = b.div(y, 2), b.rem(y, 2), b.div(x, 2), b.rem(x, 2)

        def at(k: int, l_: int) -> SSAValue:
            t = b.add(b.mul(b.add(ri, k), 4), b.add(rj, l_))
            return b.read(m, [t, n, o, ti, tj])

        rows = [_at_row(b, rj, at(k, 0), at(k, 1), at(k, 2)) for k in range(3)]
        out = _at_row(b, ri, *rows)
        return out if bias is None else b.add(out, b.read(bias, [o]))

    return L.compute(op.out_type, body)


@lowers("max_pool2d", "avg_pool2d")
def lower_pool(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.PoolOp)  # LOWERINGS dispatches on the op name
    x = xs[0]
    h, wd = _nchw(op, shape(x))[2:]
    kh, kw = op.kernel
    oh, ow = _nchw(op, op.out_shape)[2:]
    checks = window_checks(op, (h, wd), (oh, ow), (kh, kw))
    is_max = op.name == "graph.max_pool2d"

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        n, c, i, j = _nchw(op, idx)
        ih, iw = window_index(b, op, i, j, r[0], r[1])
        where = _in_layout(op, n, c, ih, iw)
        return guarded_read(b, x, where, checks, -math.inf if is_max else 0.0)

    if is_max:
        return L.reduce(op.out_type, [kh, kw], "max", body)
    (sh, sw), (pt, pl, pb, pr) = op.strides, op.pads
    if isinstance(op, g.AvgPool2DOp) and op.count_include_pad:
        lo, hi = (-pt, -pl), (h + pb, wd + pr)  # the window counts explicit padding
    else:
        lo, hi = (0, 0), (h, wd)

    def count(b: BodyBuilder, o, s, p, k, lo_, hi_):
        start = b.sub(b.mul(o, s), p)
        return b.sub(b.min(b.add(start, k), hi_), b.max(start, lo_))

    def static(o_size, s, p, k, lo_, hi_):  # every window has k cells inside [lo, hi)
        # window starts o * s - p grow with o: the first and the last window decide
        # (a loop over every o never ended for a 2^31-wide input)
        return o_size == 0 or (lo_ <= -p and (o_size - 1) * s - p + k <= hi_)

    if static(oh, sh, pt, kh, lo[0], hi[0]) and static(ow, sw, pl, kw, lo[1], hi[1]):
        return L.reduce(
            op.out_type,
            [kh, kw],
            "add",
            body,
            epilogue=lambda b, acc, idx: b.div(acc, float(kh * kw)),
        )

    def epilogue(b: BodyBuilder, acc: SSAValue, idx: Idx):
        _, _, i, j = _nchw(op, idx)
        ch = count(b, i, sh, pt, kh, lo[0], hi[0])
        cw = count(b, j, sw, pl, kw, lo[1], hi[1])
        return b.div(acc, b.cast(b.mul(ch, cw), elt(x)))

    return L.reduce(op.out_type, [kh, kw], "add", body, epilogue=epilogue)


@lowers("global_avg_pool")
def lower_global_avg_pool(L: Lowering, op: g.GraphOp, xs):
    x = xs[0]
    spatial = _nchw(op, shape(x))[2:]

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        n, c = _nchw(op, idx)[:2]
        return b.read(x, _in_layout(op, n, c, *r))

    return L.reduce(
        op.out_type,
        spatial,
        "add",
        body,
        epilogue=lambda b, acc, idx: b.div(acc, float(math.prod(spatial))),
    )


# ------------------------------------------------------------------------ dropout


def _pcg_hash(b: BodyBuilder, v: SSAValue) -> SSAValue:
    """`reference.graph.pcg_hash` on an i64 holding 32 bits (no product overflows int64)."""
    m = 0xFFFFFFFF
    s = b.and_(b.add(b.mul(v, 747796405), 2891336453), b.const(m, v.type))
    shift = b.add(b.emit(arith.ShRSIOp(s, b.const(28, v.type))), 4)
    w = b.emit(arith.XOrIOp(b.emit(arith.ShRSIOp(s, shift)), s))
    w = b.and_(b.mul(w, 277803737), b.const(m, v.type))
    return b.emit(arith.XOrIOp(b.emit(arith.ShRSIOp(w, b.const(22, v.type))), w))


@lowers("dropout")
def lower_dropout(L: Lowering, op: g.GraphOp, xs):
    """keep = (pcg(pcg(pcg(seed) ^ step) ^ flat index) >> 8) >= threshold, in i64
    (graph.DropoutOp); y = keep ? x * (1 / (1 - p)) : 0. Without a step: the identity."""
    assert isinstance(op, g.DropoutOp)
    p, seed = op.p, op.seed
    key = pcg_hash(seed & 0xFFFFFFFF)
    threshold = dropout_threshold(p)
    out = op.out_shape

    def body(b: BodyBuilder, idx: Idx):
        x = b.read(xs[0], idx)
        if len(xs) == 1:
            return x
        flat: SSAValue | int = 0
        for i, d in zip(idx, out):
            flat = b.add(b.mul(flat, d), i) if not isinstance(flat, int) else i
        flat_i = b.cast(flat, i64) if not isinstance(flat, int) else b.const(flat, i64)
        step = b.and_(b.cast(b.read(xs[1], []), i64), b.const(0xFFFFFFFF, i64))
        h = _pcg_hash(b, b.emit(arith.XOrIOp(b.const(key, i64), step)))
        h = _pcg_hash(b, b.emit(arith.XOrIOp(h, flat_i)))
        keep = b.cmp("ge", b.emit(arith.ShRSIOp(h, b.const(8, i64))), threshold)
        return b.select(keep, b.mul(x, 1.0 / (1.0 - p)), 0.0)

    return L.compute(op.out_type, body)


# ------------------------------------------------------------------ normalisation


@lowers("batch_norm")
def lower_batch_norm(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.BatchNormOp)
    eps = op.epsilon
    channel = len(op.out_shape) - 1 if g.layout_of(op) == "nhwc" else 1

    def fn(b: BodyBuilder, x, scale, bias, mean, var):
        inv = b.div(1.0, b.sqrt(b.add(var, eps)))
        return b.add(b.mul(b.sub(x, mean), b.mul(inv, scale)), bias)

    def body(b: BodyBuilder, idx: Idx):
        vals = [b.read(xs[0], idx)] + [b.read(p, [idx[channel]]) for p in xs[1:]]
        return fn(b, *vals)

    return L.compute(op.out_type, body)


def _stats_type(x: SSAValue, keep: int) -> TensorType:
    return g.tensor_type(shape(x)[:keep], elt(x))


def _mean_over_tail(
    L: Lowering, x: SSAValue, axis: int, suffix: str, fn=None, then=None
) -> SSAValue:
    """mean over x.shape[axis:] of fn(b, x[i, r], i) (default x[i, r]), then `then(b, m)`
    of it when given."""
    tail = shape(x)[axis:]
    count = float(math.prod(tail))
    done = (lambda b, m: then(b, m)) if then else (lambda b, m: m)

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        v = b.read(x, [*idx, *r])
        return fn(b, v, idx) if fn else v

    return L.reduce(
        _stats_type(x, axis),
        tail,
        "add",
        body,
        suffix=suffix,
        epilogue=lambda b, acc, idx: done(b, b.div(acc, count)),
    )


@lowers("layer_norm")
def lower_layer_norm(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.LayerNormOp)
    x = xs[0]
    rank = len(shape(x))
    axis = g.normalize_axis(op.axis, rank)
    mean = _mean_over_tail(L, x, axis, "_mean")

    def centred_sq(b: BodyBuilder, v, idx):
        d = b.sub(v, b.read(mean, idx))
        return b.mul(d, d)

    eps = op.epsilon
    # 1 / sqrt(var + eps) once per row, in the variance kernel's epilogue: the normalising
    # kernel then multiplies (a sqrt and a divide per element kept it scalar:
    # docs/design/lowering.md#layer-norm-rstd)
    rstd = _mean_over_tail(
        L, x, axis, "_rstd", centred_sq, lambda b, v: b.div(1.0, b.sqrt(b.add(v, eps)))
    )

    def body(b: BodyBuilder, idx: Idx):
        centred = b.sub(b.read(x, idx), b.read(mean, idx[:axis]))
        y = b.mul(centred, b.read(rstd, idx[:axis]))
        y = b.mul(y, b.read(xs[1], bcast(idx, shape(xs[1]), shape(x))))
        if len(xs) == 3:
            y = b.add(y, b.read(xs[2], bcast(idx, shape(xs[2]), shape(x))))
        return y

    return L.compute(op.out_type, body)


def _drop(idx: Idx, axis: int) -> Idx:
    return [*idx[:axis], *idx[axis + 1 :]]


def _put(idx: Idx, axis: int, v) -> Idx:
    return [*idx[:axis], v, *idx[axis:]]


@lowers("softmax", "log_softmax")
def lower_softmax(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.AxisOp)
    x = xs[0]
    s = shape(x)
    axis = g.normalize_axis(op.axis, len(s))
    stats = g.tensor_type(_drop(list(s), axis), elt(x))
    mx = L.reduce(
        stats, [s[axis]], "max", lambda b, idx, r: b.read(x, _put(idx, axis, r[0])), suffix="_max"
    )

    def shifted(b: BodyBuilder, idx: Idx) -> SSAValue:
        return b.sub(b.read(x, idx), b.read(mx, _drop(idx, axis)))

    # the f16 exps are summed in f32 and rounded once (the reference's `_sum_f32`)
    wide = isinstance(elt(x), Float16Type)

    def sum_of(term) -> SSAValue:
        return L.reduce(
            stats,
            [s[axis]],
            "add",
            lambda b, idx, r: _widen(b, term(b, _put(idx, axis, r[0]))),
            suffix="_sum",
            acc_type=f32 if wide else None,
            epilogue=(lambda b, acc, idx: b.cast(acc, f16)) if wide else None,
        )

    if op.name == "graph.softmax" and axis == len(s) - 1:
        # exp once: stored (te-to-loop keeps it in a row-local buffer of the fused row
        # kernel), summed, then scaled by 1 / sum
        e = L.compute(op.out_type, lambda b, idx: b.exp(shifted(b, idx)), suffix="_exp")
        total = sum_of(lambda b, idx: b.read(e, idx))
        if wide:  # f16: one rounding, as the reference's e / sum
            body = lambda b, idx: b.div(b.read(e, idx), b.read(total, _drop(idx, axis)))  # noqa: E731
        else:
            body = lambda b, idx: b.mul(b.read(e, idx), b.div(1.0, b.read(total, _drop(idx, axis))))  # noqa: E731
        return L.compute(op.out_type, body)
    total = sum_of(lambda b, idx: b.exp(shifted(b, idx)))
    if op.name == "graph.softmax":
        body = lambda b, idx: b.div(b.exp(shifted(b, idx)), b.read(total, _drop(idx, axis)))  # noqa: E731
    else:
        body = lambda b, idx: b.sub(shifted(b, idx), b.log(b.read(total, _drop(idx, axis))))  # noqa: E731
    return L.compute(op.out_type, body)


# --------------------------------------------------------------------- reductions

COMBINER = {
    "reduce_sum": "add",
    "reduce_mean": "add",
    "reduce_max": "max",
    "reduce_min": "min",
    "reduce_prod": "mul",
}


@lowers(*COMBINER)
def lower_reduce(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.ReduceOp)  # LOWERINGS dispatches on the op name
    x = xs[0]
    s = shape(x)
    axes = op.reduced_axes()
    keep = op.keepdims
    mnemonic = op.name.removeprefix("graph.")

    def body(b: BodyBuilder, idx: Idx, r: Idx):
        out = iter(idx)
        red = iter(r)
        where = []
        for d in range(len(s)):
            if d in axes:
                if keep:
                    next(out)
                where.append(next(red))
            else:
                where.append(next(out))
        return b.read(x, where)

    epilogue = None
    if mnemonic == "reduce_mean":
        count = math.prod(s[a] for a in axes)
        epilogue = lambda b, acc, idx: b.div(acc, count)  # noqa: E731
    return L.reduce(op.out_type, [s[a] for a in axes], COMBINER[mnemonic], body, epilogue=epilogue)


# ------------------------------------------------------------------ data movement


@lowers("reshape")
def lower_reshape(L: Lowering, op: g.GraphOp, xs):
    x = xs[0]
    sin, sout = shape(x), op.out_shape
    # symbolic dims: leading dims the reshape keeps are indexed as they are (no division
    # by a dim of the call: the index map stays static, the kernel schedulable)
    keep = 0
    if symdims.is_symbolic(sin):
        while keep < min(len(sin), len(sout)) - 1 and sin[keep] == sout[keep]:
            keep += 1

    def body(b: BodyBuilder, idx: Idx):
        flat = None  # row-major linear index of the output element
        for i, d in zip(idx[keep:], sout[keep:]):
            if d != 1:
                flat = i if flat is None else b.add(b.mul(flat, d), i)
        if flat is None:  # (every dim after the kept ones is 1)
            return b.read(x, [*idx[:keep], *[0] * (len(sin) - keep)])
        where, stride, leading = list(idx[:keep]), math.prod(sin[keep:]), True
        for d in sin[keep:]:
            stride //= d
            if d == 1:
                where.append(0)
                continue
            assert flat is not None  # an input dim > 1 means an output dim > 1
            v = b.div(flat, stride)
            where.append(v if leading else b.rem(v, d))  # the leading dim needs no modulo
            leading = False
        return b.read(x, where)

    return L.compute(op.out_type, body)


@lowers("transpose")
def lower_transpose(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.TransposeOp)  # LOWERINGS dispatches on the op name
    perm = op.permutation()
    source = [perm.index(d) for d in range(len(perm))]  # input dim d is output dim source[d]

    def body(b: BodyBuilder, idx: Idx):
        return b.read(xs[0], [idx[k] for k in source])

    return L.compute(op.out_type, body)


@lowers("concat")
def lower_concat(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.ConcatOp)
    axis = g.normalize_axis(op.axis, len(op.out_shape))
    offsets = [0]
    for x in xs:
        offsets.append(offsets[-1] + shape(x)[axis])

    def pick(b: BodyBuilder, idx: Idx, k: int) -> SSAValue:
        if k == len(xs) - 1:
            return b.read(xs[k], [*idx[:axis], b.sub(idx[axis], offsets[k]), *idx[axis + 1 :]])
        return b.if_(
            b.cmp("lt", idx[axis], offsets[k + 1]),
            lambda t: t.read(xs[k], [*idx[:axis], t.sub(idx[axis], offsets[k]), *idx[axis + 1 :]]),
            lambda e: pick(e, idx, k + 1),
            elt(xs[0]),
        )

    return L.compute(op.out_type, lambda b, idx: pick(b, idx, 0))


@lowers("slice")
def lower_slice(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.SliceOp)  # LOWERINGS dispatches on the op name
    bounds = op.normalized()

    def body(b: BodyBuilder, idx: Idx):
        return b.read(xs[0], [b.add(b.mul(i, st), s) for i, (s, _, st) in zip(idx, bounds)])

    return L.compute(op.out_type, body)


@lowers("dynamic_slice")
def lower_dynamic_slice(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.DynamicSliceOp)
    x, starts = xs
    dims = shape(x)
    at = dict(zip(op.axes, zip(range(len(op.axes)), op.sizes)))

    def body(b: BodyBuilder, idx: Idx):
        where: list[Any] = list(idx)
        for a, (k, n) in at.items():  # the start read per element: a run-time offset
            s = b.read(starts, [k])
            s = b.select(b.cmp("lt", s, 0), b.add(s, dims[a]), s)  # negative: from the end
            s = b.min(b.max(b.cast(s, IndexType()), 0), dims[a] - n)  # stays in bounds
            where[a] = b.add(idx[a], s)
        return b.read(x, where)

    return L.compute(op.out_type, body)


@lowers("pad")
def lower_pad(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.PadOp)
    x = xs[0]
    s = shape(x)
    pads = op.pads
    begin, end = pads[: len(s)], pads[len(s) :]
    checks = [(d, n) for d, n in enumerate(s) if begin[d] > 0 or end[d] > 0]

    def body(b: BodyBuilder, idx: Idx):
        where = [b.sub(i, p) for i, p in zip(idx, begin)]
        return guarded_read(b, x, where, checks, op.value)

    return L.compute(op.out_type, body)


@lowers("broadcast")
def lower_broadcast(L: Lowering, op: g.GraphOp, xs):
    def body(b: BodyBuilder, idx: Idx):
        return b.read(xs[0], bcast(idx, shape(xs[0]), op.out_shape))

    return L.compute(op.out_type, body)


@lowers("gather")
def lower_gather(L: Lowering, op: g.GraphOp, xs):
    assert isinstance(op, g.GatherOp)
    data, indices = xs
    axis = g.normalize_axis(op.axis, len(shape(data)))
    n, ri = shape(data)[axis], len(shape(indices))

    def body(b: BodyBuilder, idx: Idx):
        k = b.read(indices, idx[axis : axis + ri])
        k = b.select(b.cmp("lt", k, 0), b.add(k, n), k)  # negative indices count from the end
        k = b.min(b.max(b.cast(k, IndexType()), 0), n - 1)  # never read out of bounds
        return b.read(data, [*idx[:axis], k, *idx[axis + ri :]])

    return L.compute(op.out_type, body)


# --------------------------------------------------------------------------- fusion


def lower_fused(L: Lowering, op: g.FusedOp) -> SSAValue:
    """Lower the body's ops in place, then fuse them into one te op."""
    block: Block = op.body.block
    mapper: dict[SSAValue, SSAValue] = dict(zip(block.args, op.inputs))
    parent = op.parent_block()
    assert parent is not None
    start = len(L.created)
    for inner in block.ops:
        if isinstance(inner, g.YieldOp):
            break
        clone = inner.clone(value_mapper=mapper)
        parent.insert_op_before(clone, op)
        if isinstance(clone, g.GraphOp):
            value = L.lower(clone)
            clone.results[0].replace_all_uses_with(value)
            mapper[inner.results[0]] = value
            erase(clone)
    result = mapper[op.yield_op.values[0]]
    ops = [o for o in L.created[start:] if o.parent is not None]
    for producer in ops:
        if (
            isinstance(producer, ComputeOp)
            and producer.result is not result
            and producer not in L.hoisted
        ):
            inline_compute(producer)
    final = result.owner
    reduces = [  # (a hoisted reduce, e.g. a weight's column sums, is a kernel of its own)
        o for o in ops if isinstance(o, ReduceOp) and o.parent is not None and o not in L.hoisted
    ]
    if isinstance(final, ComputeOp) and len(reduces) == 1:
        fused = fold_into_epilogue(reduces[0], final)
        if fused is not None:
            return fused.results[0]
    return result


def describe_origin(op: Operation) -> str:
    """`graph.relu`, or for a fused op its body: `graph.fused(graph.conv2d, graph.relu)`."""
    if not isinstance(op, g.FusedOp):
        return op_name(op)
    body = ", ".join(op_name(o) for o in op.body.block.ops if not isinstance(o, g.YieldOp))
    return f"graph.fused({body})"


@dataclass(frozen=True)
class GraphToTe(ModulePass):
    """Lower every graph op (but graph.param/graph.constant) to te computes."""

    name = "graph-to-te"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # symbolic dims: the function gains dlpc_dims, bodies read the call's values
        # from it (passes/lower/_symbolic.py); one function with symbols per module
        symbolic = [
            s
            for fn in op.body.block.ops
            if isinstance(fn, func.FuncOp) and (s := SymbolicFunction.prepare(fn)) is not None
        ]
        if len(symbolic) > 1:
            raise DiagnosticException("graph-to-te: symbolic dims in more than one function")
        BodyBuilder.symbolic = symbolic[0].materialise if symbolic else None
        try:
            self.lower_all(op)
        finally:
            BodyBuilder.symbolic = None

    def lower_all(self, op: ModuleOp) -> None:
        L = Lowering()
        for inner in list(op.walk()):
            if inner.parent is None or isinstance(inner.parent_op(), g.FusedOp):
                continue  # already erased, or lowered together with its graph.fused
            if isinstance(inner, g.ControlOp | g.YieldOp):
                continue  # control flow stays (te-to-loop); its regions' ops lower in place
            start = len(L.created)
            if isinstance(inner, g.FusedOp):
                value = lower_fused(L, inner)
                owner = value.owner
                assert isinstance(owner, Operation)  # the te op computing the fused body
                owner.properties["name"] = g.StringAttr(inner.kernel_name)
            elif op_name(inner).startswith("graph.") and not isinstance(
                inner, g.ParamOp | g.ConstantOp
            ):
                value = L.lower(inner)
            else:
                continue
            value.name_hint = inner.results[0].name_hint or value.name_hint
            origin = StringAttr(describe_origin(inner))
            made = [*L.created[start:], value.owner]  # fusion may build the last one anew
            for te_op in made:  # kernels name the graph op they came from
                if te_op.parent is not None and "origin" not in te_op.attributes:
                    te_op.attributes["origin"] = origin
            inner.results[0].replace_all_uses_with(value)
            erase(inner)
        names: set[str] = set()
        for te_op in op.walk():
            if isinstance(te_op, ComputeOp | ReduceOp):
                for region in te_op.regions:
                    region_dce(region)  # constants left unused by inlining
                name, n = te_op.compute_name, 1
                while name in names:  # kernel names are unique (two fused ops may share one)
                    name, n = f"{te_op.compute_name}_{n}", n + 1
                names.add(name)
                te_op.properties["name"] = g.StringAttr(name)
