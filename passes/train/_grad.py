"""The gradient rules of `graph-autodiff`: one vector-Jacobian product per graph op, written
as graph ops (so the backward graph is optimised and lowered like any other graph).

A rule is `rule(b, op, g, want) -> [adjoint or None per operand]`: `g` is the adjoint of
`op`'s result (dL/dy, the result's shape), `want[i]` says whether operand i needs one, and
each returned adjoint has operand i's shape (broadcasting is undone by summing). Rules read
the forward values they need (operands or the result) and add their ops with `b`.

    y = exp(x)          dx = g * y
    y = a @ b           da = g @ b^T, db = a^T @ g   (summed over broadcast batch dims)
    y = conv2d(x, w)    dx = conv2d(g dilated by the stride, w flipped, channels swapped),
                        dw = g @ im2col(x)^T per sample, summed over samples
                        (im2col: a gather with a constant index table)

Integer and boolean operands (gather's indices, where's condition, compare) take no
adjoint. The rules table of docs/autodiff.md lists every rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph
from dlpc.passes.train._build import Builder

Grads = list[SSAValue | None]
Rule = Callable[[Builder, Operation, SSAValue, Sequence[bool]], Sequence[SSAValue | None]]
RULES: dict[str, Rule] = {}


def rule(*mnemonics: str):
    def register(fn: Rule) -> Rule:
        for m in mnemonics:
            RULES[f"graph.{m}"] = fn
        return fn

    return register


# ------------------------------------------------------------------------- helpers


def shape(v: SSAValue) -> tuple[int, ...]:
    return graph.shape_of(v)


def is_float(v: SSAValue) -> bool:
    return isinstance(v.type, graph.TensorType) and graph.is_float_type(graph.element_type_of(v))


def const(b: Builder, value, like: SSAValue) -> SSAValue:
    return b.const(value, graph.element_type_of(like))


def zeros(b: Builder, shp: Sequence[int], like: SSAValue) -> SSAValue:
    """0 of `like`'s element type, broadcast to `shp` (one scalar constant, no big literal)."""
    z = const(b, 0.0, like)
    return b.op(graph.BroadcastOp, z, shape=list(shp)) if tuple(shp) else z


def as_float(b: Builder, cond: SSAValue, like: SSAValue) -> SSAValue:
    """An i1 tensor as 0/1 of `like`'s element type."""
    return b.cast(cond, graph.element_type_of(like))


def reshape(b: Builder, v: SSAValue, shp: Sequence[int]) -> SSAValue:
    return v if shape(v) == tuple(shp) else b.reshape(v, shp)


def transpose(b: Builder, v: SSAValue, perm: Sequence[int]) -> SSAValue:
    if list(perm) == list(range(len(perm))):
        return v
    return b.op(graph.TransposeOp, v, perm=list(perm))


def sum_keep(b: Builder, v: SSAValue, axes: Sequence[int]) -> SSAValue:
    """Sum over `axes` keeping them as 1 (no op when `axes` is empty: an empty list
    would mean every axis to graph.reduce_sum)."""
    return b.sum(v, axes, keepdims=True) if axes else v


def unbroadcast(b: Builder, g: SSAValue, shp: Sequence[int]) -> SSAValue:
    """The adjoint of broadcasting a `shp` tensor to g's shape: sum g over the dims the
    broadcast added or stretched, then reshape to `shp`."""
    gs, shp = shape(g), tuple(shp)
    if gs == shp:
        return g
    lead = len(gs) - len(shp)
    axes = list(range(lead))
    axes += [lead + i for i, d in enumerate(shp) if d == 1 and gs[lead + i] != 1]
    return reshape(b, sum_keep(b, g, axes), shp)


def pad(b: Builder, v: SSAValue, begin: Sequence[int], end: Sequence[int], value=0.0):
    """graph.pad (a negative pad crops), or v itself when every pad is 0."""
    if not any(begin) and not any(end):
        return v
    return b.op(graph.PadOp, v, pads=[*begin, *end], value=value)


def slice_axes(b: Builder, v: SSAValue, axes, starts, ends, steps=None) -> SSAValue:
    steps = steps or [1] * len(axes)
    return b.op(
        graph.SliceOp, v, starts=list(starts), ends=list(ends), axes=list(axes), steps=list(steps)
    )


def dilate(b: Builder, v: SSAValue, axis: int, step: int) -> SSAValue:
    """Insert step - 1 zeros after every element along `axis` (n -> n * step):
    reshape to [.., n, 1, ..], pad the new dim to `step`, reshape back."""
    if step == 1:
        return v
    s = shape(v)
    wide = reshape(b, v, (*s[: axis + 1], 1, *s[axis + 1 :]))
    rank = len(s) + 1
    end = [0] * rank
    end[axis + 1] = step - 1
    wide = pad(b, wide, [0] * rank, end)
    return reshape(b, wide, (*s[:axis], s[axis] * step, *s[axis + 1 :]))


def place(b: Builder, v: SSAValue, axis: int, begin: int, step: int, size: int) -> SSAValue:
    """Zeros of length `size` along `axis` with v[k] at begin + k * step (positions outside
    [0, size) dropped): the adjoint of a strided read."""
    v = dilate(b, v, axis, step)
    rank, n = len(shape(v)), shape(v)[axis]
    lo, hi = [0] * rank, [0] * rank
    lo[axis], hi[axis] = begin, size - begin - n
    return pad(b, v, lo, hi)


def flip(b: Builder, v: SSAValue, axes: Sequence[int]) -> SSAValue:
    """Reverse `v` along `axes` (a slice with step -1; size-1 axes are left alone)."""
    axes = [a for a in axes if shape(v)[a] > 1]
    if not axes:
        return v
    ends = [-shape(v)[a] - 1 for a in axes]
    return slice_axes(b, v, axes, [-1] * len(axes), ends, [-1] * len(axes))


def add_all(b: Builder, values: Sequence[SSAValue]) -> SSAValue:
    total = values[0]
    for v in values[1:]:
        total = b.add(total, v)
    return total


def nchw_only(op: Operation) -> None:
    if graph.layout_of(op) != "nchw":
        raise DiagnosticException(
            f"graph-autodiff differentiates NCHW {op.name} only; run it before graph-layout"
        )


# ---------------------------------------------------------------------- elementwise


def _binary_operands(op: Operation) -> tuple[SSAValue, SSAValue]:
    return op.operands[0], op.operands[1]


def _to_operands(b: Builder, op: Operation, want, *grads) -> Grads:
    """Each operand's adjoint, summed down to the operand's (broadcast) shape."""
    return [
        unbroadcast(b, gr, shape(v)) if w and gr is not None else None
        for v, w, gr in zip(op.operands, want, grads)
    ]


@rule("add")
def _add(b, op, g, want):
    return _to_operands(b, op, want, g, g)


@rule("sub")
def _sub(b, op, g, want):
    return _to_operands(b, op, want, g, b.neg(g) if want[1] else None)


@rule("mul")
def _mul(b, op, g, want):
    x, y = _binary_operands(op)
    return _to_operands(
        b, op, want, b.mul(g, y) if want[0] else None, b.mul(g, x) if want[1] else None
    )


@rule("div")
def _div(b, op, g, want):
    # y = a / b: da = g / b, db = -(g / b) * y
    x, y = _binary_operands(op)
    ga = b.div(g, y)
    gb = b.neg(b.mul(ga, op.results[0])) if want[1] else None
    return _to_operands(b, op, want, ga, gb)


@rule("max", "min")
def _max_min(b, op, g, want):
    # the winner takes g, a tie splits it in halves (torch.maximum / torch.minimum)
    x, y = _binary_operands(op)
    wins = b.compare(x, y, "gt" if op.name == "graph.max" else "lt")
    w = b.add(as_float(b, wins, g), b.mul(as_float(b, b.compare(x, y, "eq"), g), 0.5))
    gx = b.mul(g, w) if want[0] else None
    gy = b.mul(g, b.sub(1.0, w)) if want[1] else None
    return _to_operands(b, op, want, gx, gy)


@rule("pow")
def _pow(b, op, g, want):
    # y = a ** p: da = g * p * a ** (p - 1) (0 where p == 0: not 0 * 0 ** -1 = nan, as
    # torch); dp = g * y * log(a) (0 where a == 0)
    a, p = _binary_operands(op)
    ga = gp = None
    if want[0]:
        da = b.mul(p, b.pow(a, b.sub(p, 1.0)))
        ga = b.mul(g, b.where(b.compare(p, 0.0, "eq"), 0.0, da))
    if want[1]:
        log_a = b.where(b.compare(a, 0.0, "eq"), 0.0, b.log(a))
        gp = b.mul(g, b.mul(op.results[0], log_a))
    return _to_operands(b, op, want, ga, gp)


@rule("prelu")
def _prelu(b, op, g, want):
    x, slope = _binary_operands(op)
    pos = b.compare(x, 0.0, "gt")
    gx = b.where(pos, g, b.mul(g, slope)) if want[0] else None
    gs = b.where(pos, 0.0, b.mul(g, x)) if want[1] else None
    return _to_operands(b, op, want, gx, gs)


@rule("where")
def _where(b, op, g, want):
    cond = op.operands[0]
    ga = b.where(cond, g, 0.0) if want[1] else None
    gb = b.where(cond, 0.0, g) if want[2] else None
    return _to_operands(b, op, want, None, ga, gb)


@rule("neg")
def _neg(b, op, g, want):
    return [b.neg(g)]


@rule("abs")
def _abs(b, op, g, want):
    x = op.operands[0]
    sign = b.sub(as_float(b, b.compare(x, 0.0, "gt"), g), as_float(b, b.compare(x, 0.0, "lt"), g))
    return [b.mul(g, sign)]


@rule("exp")
def _exp(b, op, g, want):
    return [b.mul(g, op.results[0])]


@rule("log")
def _log(b, op, g, want):
    return [b.div(g, op.operands[0])]


@rule("sqrt")
def _sqrt(b, op, g, want):
    return [b.div(b.mul(g, 0.5), op.results[0])]


@rule("rsqrt")
def _rsqrt(b, op, g, want):
    # y = x ** -1/2: dy/dx = -y ** 3 / 2
    y = op.results[0]
    return [b.mul(g, b.mul(b.mul(y, b.mul(y, y)), -0.5))]


@rule("tanh")
def _tanh(b, op, g, want):
    y = op.results[0]
    return [b.mul(g, b.sub(1.0, b.mul(y, y)))]


@rule("sigmoid")
def _sigmoid(b, op, g, want):
    y = op.results[0]
    return [b.mul(g, b.mul(y, b.sub(1.0, y)))]


def _gauss(b: Builder, x: SSAValue, scale: float) -> SSAValue:
    """scale * exp(-x^2 / 2)."""
    return b.mul(b.exp(b.mul(b.mul(x, x), -0.5)), scale)


@rule("erf")
def _erf(b, op, g, want):
    # d erf(x) = 2 / sqrt(pi) exp(-x^2) = (2 / sqrt(pi)) exp(-(sqrt(2) x)^2 / 2)
    x = op.operands[0]
    return [b.mul(g, _gauss(b, b.mul(x, math.sqrt(2.0)), 2.0 / math.sqrt(math.pi)))]


@rule("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
def _trig(b, op, g, want):
    x, y, f = op.operands[0], op.results[0], op.name.removeprefix("graph.")
    if f == "tan":  # 1 + tan^2
        return [b.mul(g, b.add(1.0, b.mul(y, y)))]
    if f in ("atan", "atanh"):  # 1 / (1 +- x^2)
        x2 = b.mul(x, x)
        return [b.div(g, b.add(1.0, x2) if f == "atan" else b.sub(1.0, x2))]
    if f in ("asin", "acos", "asinh", "acosh"):  # +-1 / sqrt(1 - x^2), 1 / sqrt(x^2 +- 1)
        x2 = b.mul(x, x)
        if f in ("asin", "acos"):
            root = b.sub(1.0, x2)
        else:
            root = b.add(x2, 1.0) if f == "asinh" else b.sub(x2, 1.0)
        dx = b.div(g, b.sqrt(root))
        return [b.neg(dx) if f == "acos" else dx]
    partner = {"sin": graph.CosOp, "cos": graph.SinOp, "sinh": graph.CoshOp, "cosh": graph.SinhOp}
    dx = b.mul(g, b.op(partner[f], x))
    return [b.neg(dx) if f == "cos" else dx]


@rule("floor", "ceil", "round")
def _step(b, op, g, want):
    # piecewise constant: zero almost everywhere (as torch gives)
    return [b.mul(g, 0.0)]


@rule("relu")
def _relu(b, op, g, want):
    # the result's sign (torch: result > 0): the forward keeps the result for the next layer.
    # g times a 0/1 float mask rather than where(mask, g, 0): the C backend vectorizes a
    # float mask in a fused epilogue, a bool one it does not (4x the dx conv's time)
    return [b.mul(g, as_float(b, b.compare(op.results[0], 0.0, "gt"), g))]


@rule("gelu")
def _gelu(b, op, g, want):
    x = op.operands[0]
    if op.approximate == "tanh":
        # t = tanh(k (x + c x^3)): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        x2 = b.mul(x, x)
        t = b.op(graph.TanhOp, b.mul(b.add(x, b.mul(b.mul(x2, x), c)), k))
        inner = b.mul(b.add(b.mul(x2, 3 * c), 1.0), k)
        right = b.mul(b.mul(b.mul(x, 0.5), b.sub(1.0, b.mul(t, t))), inner)
        d = b.add(b.mul(b.add(t, 1.0), 0.5), right)
    else:
        # Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi)
        cdf = b.mul(b.add(b.op(graph.ErfOp, b.mul(x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
        d = b.add(cdf, b.mul(x, _gauss(b, x, 1.0 / math.sqrt(2.0 * math.pi))))
    return [b.mul(g, d)]


@rule("leaky_relu")
def _leaky_relu(b, op, g, want):
    x = op.operands[0]
    return [b.where(b.compare(x, 0.0, "gt"), g, b.mul(g, op.alpha))]


@rule("clip")
def _clip(b, op, g, want):
    # g where min <= x <= max (torch.clamp), else 0: g times 0/1 float masks (see relu)
    x, lo, hi = op.operands[0], op.min, op.max
    masks = []
    if hi != math.inf:
        masks.append(as_float(b, b.compare(x, hi, "le"), g))
    if lo != -math.inf:
        masks.append(as_float(b, b.compare(x, lo, "ge"), g))
    for mask in masks:
        g = b.mul(g, mask)
    return [g]


@rule("cast")
def _cast(b, op, g, want):
    return [b.cast(g, graph.element_type_of(op.operands[0]))]


# -------------------------------------------------------------------- linear algebra


@rule("matmul")
def _matmul(b, op, g, want):
    a, m = _binary_operands(op)
    sa, sm = shape(a), shape(m)
    a_vec, m_vec = len(sa) == 1, len(sm) == 1
    ta, tm = op.transpose_a and not a_vec, op.transpose_b and not m_vec
    # as matrices: a vector lhs is [1, K], a vector rhs [K, 1]; g gets the dims back
    a2 = reshape(b, a, (1, *sa)) if a_vec else a
    m2 = reshape(b, m, (*sm, 1)) if m_vec else m
    full = shape(g)
    if a_vec:
        full = (
            *full[: len(full) - (0 if m_vec else 1)],
            1,
            *full[len(full) - (0 if m_vec else 1) :],
        )
    if m_vec:
        full = (*full, 1)
    g2 = reshape(b, g, full)
    ga = gm = None
    if want[0]:
        # a_eff = g @ m_eff^T; a = a_eff^T when transposed (= m_eff @ g^T)
        if ta:
            ga = b.op(graph.MatMulOp, m2, g2, transpose_a=tm, transpose_b=True)
        else:
            ga = b.op(graph.MatMulOp, g2, m2, transpose_b=not tm)
        ga = reshape(b, unbroadcast(b, ga, shape(a2)), sa)
    if want[1]:
        # m_eff = a_eff^T @ g; m = m_eff^T when transposed (= g^T @ a_eff)
        if tm:
            gm = b.op(graph.MatMulOp, g2, a2, transpose_a=True, transpose_b=ta)
        else:
            gm = b.op(graph.MatMulOp, a2, g2, transpose_a=not ta)
        gm = reshape(b, unbroadcast(b, gm, shape(m2)), sm)
    return [ga, gm]


@rule("linear")
def _linear(b, op, g, want):
    # y = x w^T + bias: dx = g w, dw = g^T x (over every leading dim), dbias = sum g
    x, w = op.operands[0], op.operands[1]
    out, inp = shape(w)
    grads: Grads = [None] * len(op.operands)
    if want[0]:
        grads[0] = b.op(graph.MatMulOp, g, w)
    if want[1]:
        rows = math.prod(shape(x)[:-1])
        g2, x2 = reshape(b, g, (rows, out)), reshape(b, x, (rows, inp))
        grads[1] = b.op(graph.MatMulOp, g2, x2, transpose_a=True)
    if len(op.operands) == 3 and want[2]:
        bias = op.operands[2]
        if shape(bias) == ():
            grads[2] = b.sum(g)
        else:
            lead = list(range(len(shape(g)) - 1))
            grads[2] = reshape(b, b.sum(g, lead) if lead else g, shape(bias))
    return grads


# ------------------------------------------------------------------- convolution


@rule("conv2d")
def _conv2d(b, op, g, want):
    nchw_only(op)
    x, w = op.operands[0], op.operands[1]
    n, c, h, wd = shape(x)
    o, cg, kh, kw = shape(w)
    groups = op.groups
    (sh, sw), pads, (dh, dw) = op.strides, op.pads, op.dilations
    oh, ow = shape(g)[2:]
    grads: Grads = [None] * len(op.operands)
    if want[0]:
        grads[0] = conv_transpose(b, g, w, (h, wd), (sh, sw), pads, (dh, dw), groups)
    if want[1]:
        # dw[o, c, i, j] = sum over (n, oh, ow) of g[n, o, oh, ow] xpad[n, c, oh*s + i*d, ..]:
        # im2col (one gather with a constant index table), then per sample and group a
        # matmul contracting over the positions (both operands read along them, no
        # transpose), summed over the samples
        cols = im2col(b, x, (kh, kw), (sh, sw), pads, (dh, dw), (oh, ow))  # [N, C, kk, P]
        p = oh * ow
        if cg == 1 and o == groups:  # depthwise: per channel, products summed
            g4 = reshape(b, g, (n, c, 1, p))  # per (sample, channel): cols [kk, P] @ g [P]
            dw = b.sum(b.op(graph.MatMulOp, cols, g4, transpose_b=True), [0])  # [C, kk, 1]
        else:
            cols = reshape(b, cols, (n, groups, cg * kh * kw, p))
            g4 = reshape(b, g, (n, groups, o // groups, p))
            dw = b.sum(b.op(graph.MatMulOp, g4, cols, transpose_b=True), [0])  # [G, O/G, C/G kk]
        grads[1] = reshape(b, dw, (o, cg, kh, kw))
    if len(op.operands) == 3 and want[2]:
        grads[2] = b.sum(g, [0, 2, 3])
    return grads


def conv_transpose(b: Builder, g, w, x_hw, strides, pads, dilations, groups: int) -> SSAValue:
    """dx of y = conv2d(x, w) as one conv2d (the transposed convolution), so it runs on
    the convolution's schedule: per spatial dim, dx[r] = sum_i g[(r + top - i d) / s] w[i]
    over the i where the division is exact. g dilated by the stride (s - 1 zeros after
    each entry) and padded by (k - 1) d - top in front, convolved at stride 1 and
    dilation d with w flipped in space and its two channel dims swapped within each
    group ([O, C/G, kh, kw] -> [C, O/G, kh, kw], groups G)."""
    n, o, oh, ow = shape(g)
    _, cg, kh, kw = shape(w)
    (sh, sw), (dh, dw) = strides, dilations
    if sh > 1 or sw > 1:  # [N, O, OH, 1, OW, 1] padded to [.., sh, .., sw]
        wide = pad(b, reshape(b, g, (n, o, oh, 1, ow, 1)), [0] * 6, [0, 0, 0, sh - 1, 0, sw - 1])
        g = reshape(b, wide, (n, o, oh * sh, ow * sw))
    before = [(kh - 1) * dh - pads[0], (kw - 1) * dw - pads[1]]
    after = [
        size + (k - 1) * d - lead - extent
        for size, k, d, lead, extent in zip(x_hw, (kh, kw), (dh, dw), before, (oh * sh, ow * sw))
    ]
    # negative pads crop g (rows no output cell reads); the rest is the conv's padding
    g = pad(b, g, [0, 0, *(min(p, 0) for p in before)], [0, 0, *(min(p, 0) for p in after)])
    wt = reshape(b, w, (groups, o // groups, cg, kh, kw))
    wt = flip(b, transpose(b, wt, (0, 2, 1, 3, 4)), [3, 4])
    wt = reshape(b, wt, (groups * cg, o // groups, kh, kw))
    return b.op(
        graph.Conv2DOp,
        g,
        wt,
        strides=[1, 1],
        pads=[max(before[0], 0), max(before[1], 0), max(after[0], 0), max(after[1], 0)],
        dilations=[dh, dw],
        groups=groups,
    )


# ------------------------------------------------- Winograd F(2x2, 3x3) (graph-winograd)
# Each transform is linear: y = K x over one index (the 16 points t = 4a + b) with
# K = kron(M, M) of the 1-D transform M; its adjoint is K^T applied the same way (one
# matmul with a constant), plus the tiles' placement (input) or cropping (output).

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])


def _points_adjoint(b: Builder, kron: np.ndarray, g: SSAValue, out_lead: int) -> SSAValue:
    """kron^T @ g over g's first dim (kron: [rows, cols]; g: [rows, ...]) as
    [cols, ...]."""
    rest = shape(g)[1:]
    flat = reshape(b, g, (kron.shape[0], math.prod(rest)))
    k = b.const(kron.T.astype(np.float32), graph.element_type_of(g))
    return reshape(b, b.op(graph.MatMulOp, k, flat), (out_lead, *rest))


@rule("winograd_filter_transform")
def _winograd_filter_transform(b, op, g, want):
    # U[t, o, c] = sum_k kron(G, G)[t, k] w[o, c, k]  ->  dw = kron(G, G)^T dU
    o, c = shape(op.operands[0])[:2]
    dw = _points_adjoint(b, np.kron(_G, _G), g, 9)  # [9, O, C]
    return [reshape(b, transpose(b, dw, (1, 2, 0)), (o, c, 3, 3)) if want[0] else None]


@rule("winograd_input_transform")
def _winograd_input_transform(b, op, g, want):
    # V[t, n, c, th, tw] = sum_ij kron(B^T, B^T)[t, 4i + j] xpad[n, c, 2 th + i, 2 tw + j]:
    # dx sums, for every (i, j), the tiles' adjoint placed at rows 2 th + i - top and
    # columns 2 tw + j - left (the padding and rows beyond the input dropped)
    if not want[0]:
        return [None]
    _, _, h, wd = shape(op.operands[0])
    top, left, _, _ = op.pads
    rest = shape(g)[1:]
    dd = _points_adjoint(b, np.kron(_BT, _BT), g, 16)  # [16, N, C, th, tw]
    parts = []
    for i in range(4):
        for j in range(4):
            k = 4 * i + j
            part = reshape(b, slice_axes(b, dd, [0], [k], [k + 1]), rest)
            part = place(b, part, 2, i - top, 2, h)
            parts.append(place(b, part, 3, j - left, 2, wd))
    return [add_all(b, parts)]


@rule("winograd_output_transform")
def _winograd_output_transform(b, op, g, want):
    # y[n, o, 2 th + a, 2 tw + b] = sum_ij kron(A^T, A^T)[2a + b, 4i + j] m[4i + j, ...]
    # (+ bias[o]), cropped: dm = kron(A^T, A^T)^T of dy's tiles (zero beyond the crop)
    _, n, o, th, tw = shape(op.operands[0])
    grads: Grads = [None] * len(op.operands)
    if want[0]:
        oh, ow = shape(g)[2:]
        full = pad(b, g, [0, 0, 0, 0], [0, 0, 2 * th - oh, 2 * tw - ow])
        tiles = reshape(b, full, (n, o, th, 2, tw, 2))
        tiles = reshape(b, transpose(b, tiles, (3, 5, 0, 1, 2, 4)), (4, n, o, th, tw))
        grads[0] = _points_adjoint(b, np.kron(_AT, _AT), tiles, 16)
    if len(op.operands) == 2 and want[1]:
        grads[1] = b.sum(g, [0, 2, 3])
    return grads


def _window_index(kernel, strides, dilations, out_hw, wp: int) -> np.ndarray:
    """[kh*kw, oh*ow]: the flat padded-input cell each (offset, output) pair reads."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilations, out_hw
    rows = np.arange(oh)[:, None] * sh + np.arange(kh)[None, :] * dh  # [oh, kh]
    columns = np.arange(ow)[:, None] * sw + np.arange(kw)[None, :] * dw  # [ow, kw]
    index = rows.T[:, None, :, None] * wp + columns.T[None, :, None, :]  # [kh, kw, oh, ow]
    return index.reshape(kh * kw, oh * ow)


def _padded_extent(x_hw, kernel, strides, pads, dilations, out_hw) -> tuple[int, int]:
    """Bottom/right padding up to what the last window reads (negative: rows no window
    reaches are cut)."""
    return tuple(  # type: ignore[return-value]
        (o - 1) * s + d * (k - 1) + 1 - size - before
        for o, s, d, k, size, before in zip(out_hw, strides, dilations, kernel, x_hw, pads[:2])
    )


def im2col(
    b: Builder, x: SSAValue, kernel, strides, pads, dilations, out_hw, value=0.0
) -> SSAValue:
    """cols[n, c, i*kw + j, oh*OW + ow] = xpad[n, c, oh*sh + i*dh, ow*sw + j*dw]: x padded
    (with `value`), flattened over H, W and gathered with a constant index table."""
    n, c, h, wd = shape(x)
    if tuple(kernel) == (1, 1) and tuple(strides) == (1, 1) and not any(pads):
        return reshape(b, x, (n, c, 1, h * wd))  # each cell is its own window
    bottom, right = _padded_extent((h, wd), kernel, strides, pads, dilations, out_hw)
    xp = pad(b, x, [0, 0, pads[0], pads[1]], [0, 0, bottom, right], value=value)
    hp, wp = shape(xp)[2:]
    table = b.const(_window_index(kernel, strides, dilations, out_hw, wp), i64)
    return b.op(graph.GatherOp, reshape(b, xp, (n, c, hp * wp)), table, axis=2)


def col2im(b: Builder, cols, x_shape, kernel, strides, pads, dilations, out_hw) -> SSAValue:
    """The adjoint of im2col: cols [N, .., kk, P] (C = the middle dims) summed into the
    input cells they were read from."""
    n, c, h, wd = x_shape
    kk, p = kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    bottom, right = _padded_extent((h, wd), kernel, strides, pads, dilations, out_hw)
    hp, wp = h + pads[0] + bottom, wd + pads[1] + right
    index = _window_index(kernel, strides, dilations, out_hw, wp).reshape(-1)  # by k*P + p
    readers: list[list[int]] = [[] for _ in range(hp * wp)]
    for entry, cell in enumerate(index):
        readers[cell].append(entry)
    width = max(len(r) for r in readers)
    zero = kk * p  # one zero column appended to cols
    table = np.array([r + [zero] * (width - len(r)) for r in readers], dtype=np.int64)
    flat = pad(b, reshape(b, cols, (n, c, kk * p)), [0, 0, 0], [0, 0, 1])
    gathered = b.op(graph.GatherOp, flat, b.const(table, i64), axis=2)  # [N, C, HpWp, width]
    summed = b.sum(gathered, [3]) if width > 1 else reshape(b, gathered, (n, c, hp * wp))
    xp = reshape(b, summed, (n, c, hp, wp))
    return pad(b, xp, [0, 0, -pads[0], -pads[1]], [0, 0, -bottom, -right])


def _pool_geometry(op: graph.PoolOp):
    x = op.operands[0]
    n, c, h, wd = shape(x)
    kh, kw = op.kernel
    (sh, sw), pads = op.strides, op.pads
    oh, ow = shape(op.results[0])[2:]
    return (h, wd), (kh, kw), (sh, sw), pads, (oh, ow)


@rule("max_pool2d")
def _max_pool2d(b, op, g, want):
    # g goes to the first maximum of each window in row-major order (PyTorch's CPU rule):
    # the window's cells as columns (im2col, -inf padding never wins), the smallest
    # offset k whose cell equals y takes g, col2im puts the columns back
    nchw_only(op)
    x, y = op.operands[0], op.results[0]
    hw, kernel, strides, pads, out_hw = _pool_geometry(op)
    n, c = shape(x)[:2]
    kk, p = kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    cols = im2col(b, x, kernel, strides, pads, (1, 1), out_hw, value=-math.inf)  # [N,C,kk,P]
    hit = b.compare(cols, reshape(b, y, (n, c, 1, p)), "eq")
    # offsets as floats (exact): the C backend's integer min-reduction has no identity
    k = const(b, np.arange(kk).reshape(kk, 1), g)
    first = b.op(graph.ReduceMinOp, b.where(hit, k, float(kk)), axes=[2], keepdims=True)
    taken = as_float(b, b.compare(k, first, "eq"), g)  # [N, C, kk, P]
    share = b.mul(taken, reshape(b, g, (n, c, 1, p)))
    return [col2im(b, share, (n, c, *hw), kernel, strides, pads, (1, 1), out_hw)]


def pool_counts(op: graph.AvgPool2DOp) -> np.ndarray:
    """avg_pool2d's divisor per output position [OH, OW] (the reference's rule)."""
    (h, wd), (kh, kw), (sh, sw), pads, (oh, ow) = _pool_geometry(op)
    include = op.count_include_pad
    lo_h, hi_h = (-pads[0], h + pads[2]) if include else (0, h)
    lo_w, hi_w = (-pads[1], wd + pads[3]) if include else (0, wd)
    rows = [
        max(0, min(a * sh - pads[0] + kh, hi_h) - max(a * sh - pads[0], lo_h)) for a in range(oh)
    ]
    cols = [
        max(0, min(a * sw - pads[1] + kw, hi_w) - max(a * sw - pads[1], lo_w)) for a in range(ow)
    ]
    return np.outer(rows, cols).astype(np.float64)


@rule("avg_pool2d")
def _avg_pool2d(b, op, g, want):
    # every cell of a window gets g / count: the columns, put back by col2im
    nchw_only(op)
    hw, kernel, strides, pads, out_hw = _pool_geometry(op)
    n, c = shape(op.operands[0])[:2]
    counts = pool_counts(op)
    if np.all(counts == counts.flat[0]):
        scaled = b.mul(g, 1.0 / counts.flat[0])
    else:
        scaled = b.mul(g, const(b, 1.0 / counts, g))
    kk, p = kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    share = b.op(graph.BroadcastOp, reshape(b, scaled, (n, c, 1, p)), shape=[n, c, kk, p])
    return [col2im(b, share, (n, c, *hw), kernel, strides, pads, (1, 1), out_hw)]


@rule("global_avg_pool")
def _global_avg_pool(b, op, g, want):
    nchw_only(op)
    x = op.operands[0]
    count = math.prod(shape(x)[2:])
    return [b.op(graph.BroadcastOp, b.mul(g, 1.0 / count), shape=list(shape(x)))]


# ----------------------------------------------------------------- normalisation


@rule("dropout")
def _dropout(b, op, g, want):
    # dx = g * mask / (1 - p): the same mask, redrawn from the same (seed, step, index) by
    # a dropout of g; the step counter takes no adjoint. Inference mode: the identity.
    steps = list(op.operands[1:])
    return [b.op(graph.DropoutOp, g, *steps, p=op.p, seed=op.seed)] + [None for _ in steps]


@rule("batch_norm")
def _batch_norm(b, op, g, want):
    # y = (x - mean) * inv * scale + bias, inv = (var + eps) ** -1/2, per channel (axis 1)
    nchw_only(op)
    x, scale, bias, mean, var = op.operands
    rank, channels = len(shape(x)), shape(x)[1]
    col = (1, channels, *[1] * (rank - 2))
    others = [a for a in range(rank) if a != 1]
    inv = b.op(graph.RsqrtOp, b.add(var, op.epsilon))
    grads: Grads = [None] * 5
    if want[0]:
        grads[0] = b.mul(g, reshape(b, b.mul(inv, scale), col))
    sum_g = b.sum(g, others) if want[2] or want[3] else None
    if want[1] or want[4]:
        sum_gc = b.sum(b.mul(g, b.sub(x, reshape(b, mean, col))), others)
        if want[1]:
            grads[1] = b.mul(sum_gc, inv)
        if want[4]:  # d inv / d var = -inv^3 / 2
            cube = b.mul(inv, b.mul(inv, inv))
            grads[4] = b.mul(b.mul(sum_gc, scale), b.mul(cube, -0.5))
    if want[2]:
        grads[2] = sum_g
    if want[3]:
        grads[3] = b.neg(b.mul(sum_g, b.mul(inv, scale)))
    return grads


# The mark of a training-mode batch norm's last op (passes/train/step.py builds it from
# primitives: y = (x - mean) * rsqrt(var + eps) * scale + bias, the batch's statistics).
# graph-autodiff differentiates the whole of it at that op by the closed form (below)
# instead of op by op: two reductions of g instead of four, one fused elementwise dx.
BN_TRAIN = "dlpc.train.bn_train"


def batch_norm_train_vjp(
    b: Builder, op: Operation, g: SSAValue
) -> list[tuple[SSAValue, SSAValue]] | None:
    """Adjoints of (x, scale, bias) of a marked training batch norm (y = op's result),
    PyTorch's closed form over the M reduced cells per channel, xhat = (x - mean) rstd:

        dbias = sum(g), dscale = sum(g xhat)
        dx = scale rstd (g - sum(g) / M - xhat sum(g xhat) / M)

    The mean and variance depend on x; this is their adjoint summed in. None when `op`
    is not the form step.py builds (then the ops are differentiated one by one)."""
    scaled, bias_r = op.operands
    mul, bias_op = scaled.owner, bias_r.owner
    if not isinstance(mul, graph.MulOp) or not isinstance(bias_op, graph.ReshapeOp):
        return None
    xhat, scale_r = mul.operands
    norm, scale_op = xhat.owner, scale_r.owner
    if not isinstance(norm, graph.MulOp) or not isinstance(scale_op, graph.ReshapeOp):
        return None
    centred, rstd = norm.operands
    sub = centred.owner
    if not isinstance(sub, graph.SubOp) or not isinstance(rstd.owner, graph.RsqrtOp):
        return None
    x, mean = sub.operands
    axes = [a for a, d in enumerate(shape(mean)) if d == 1]
    count = math.prod(shape(x)) // math.prod(shape(mean))
    scale, bias = scale_op.operands[0], bias_op.operands[0]
    sum_g = b.sum(g, axes, keepdims=True)
    sum_gx = b.sum(b.mul(g, xhat), axes, keepdims=True)
    k = b.mul(scale_r, rstd)
    mean_g, mean_gx = b.mul(sum_g, 1.0 / count), b.mul(sum_gx, 1.0 / count)
    dx = b.mul(k, b.sub(b.sub(g, mean_g), b.mul(xhat, mean_gx)))
    return [
        (x, dx),
        (scale, reshape(b, sum_gx, shape(scale))),
        (bias, reshape(b, sum_g, shape(bias))),
    ]


@rule("layer_norm")
def _layer_norm(b, op, g, want):
    # xhat = (x - mu) * rstd over the axes from `axis`; y = xhat * scale (+ bias)
    # dx = rstd (gx - mean(gx) - xhat mean(gx xhat)), gx = g * scale
    x, scale = op.operands[0], op.operands[1]
    rank = len(shape(x))
    axes = list(range(graph.normalize_axis(op.axis, rank), rank))
    centred = b.sub(x, b.mean(x, axes, keepdims=True))
    var = b.mean(b.mul(centred, centred), axes, keepdims=True)
    rstd = b.op(graph.RsqrtOp, b.add(var, op.epsilon))
    xhat = b.mul(centred, rstd)
    grads: Grads = [None] * len(op.operands)
    if want[0]:
        gx = b.mul(g, scale)
        mean_gx = b.mean(gx, axes, keepdims=True)
        mean_gxx = b.mean(b.mul(gx, xhat), axes, keepdims=True)
        grads[0] = b.mul(rstd, b.sub(b.sub(gx, mean_gx), b.mul(xhat, mean_gxx)))
    if want[1]:
        grads[1] = unbroadcast(b, b.mul(g, xhat), shape(scale))
    if len(op.operands) == 3 and want[2]:
        grads[2] = unbroadcast(b, g, shape(op.operands[2]))
    return grads


@rule("softmax")
def _softmax(b, op, g, want):
    # dx = y (g - sum(g y))
    y = op.results[0]
    axis = graph.normalize_axis(op.axis, len(shape(y)))
    return [b.mul(y, b.sub(g, b.sum(b.mul(g, y), [axis], keepdims=True)))]


@rule("log_softmax")
def _log_softmax(b, op, g, want):
    # dx = g - exp(y) sum(g)
    y = op.results[0]
    axis = graph.normalize_axis(op.axis, len(shape(y)))
    return [b.sub(g, b.mul(b.exp(y), b.sum(g, [axis], keepdims=True)))]


# --------------------------------------------------------------------- reductions


def _expand(b: Builder, op: graph.ReduceOp, v: SSAValue) -> SSAValue:
    """A reduction's result (or its adjoint) with the reduced axes back as size 1."""
    x = op.operands[0]
    kept = tuple(1 if i in op.reduced_axes() else d for i, d in enumerate(shape(x)))
    return reshape(b, v, kept)


def _spread(b: Builder, op: graph.ReduceOp, v: SSAValue) -> SSAValue:
    """`v` (reduced shape) broadcast over the input's shape."""
    return b.op(graph.BroadcastOp, _expand(b, op, v), shape=list(shape(op.operands[0])))


@rule("reduce_sum")
def _reduce_sum(b, op, g, want):
    return [_spread(b, op, g)]


@rule("reduce_mean")
def _reduce_mean(b, op, g, want):
    count = math.prod(shape(op.operands[0])[a] for a in op.reduced_axes())
    return [_spread(b, op, b.mul(g, 1.0 / count))]


@rule("reduce_max", "reduce_min")
def _reduce_extreme(b, op, g, want):
    # the maxima (minima) share g evenly, as torch.amax / amin
    x = op.operands[0]
    hit = as_float(b, b.compare(x, _expand(b, op, op.results[0]), "eq"), g)
    share = b.div(_expand(b, op, g), b.sum(hit, op.reduced_axes(), keepdims=True))
    return [b.mul(hit, share)]


@rule("reduce_prod")
def _reduce_prod(b, op, g, want):
    # dx_i = g * prod of the others: p / x_i with no zero; with one zero only that element
    # gets the product of the rest; with two or more every adjoint is 0
    x = op.operands[0]
    axes = op.reduced_axes()
    is_zero = b.compare(x, 0.0, "eq")
    safe = b.where(is_zero, 1.0, x)
    rest = b.op(graph.ReduceProdOp, safe, axes=list(axes), keepdims=True)
    zeros_n = b.sum(as_float(b, is_zero, g), axes, keepdims=True)
    at_zero = b.where(b.compare(zeros_n, 1.0, "eq"), rest, 0.0)
    elsewhere = b.where(b.compare(zeros_n, 0.0, "eq"), b.div(rest, safe), 0.0)
    return [b.mul(_expand(b, op, g), b.where(is_zero, at_zero, elsewhere))]


# ------------------------------------------------------------------ data movement


@rule("reshape")
def _reshape(b, op, g, want):
    return [reshape(b, g, shape(op.operands[0]))]


@rule("transpose")
def _transpose(b, op, g, want):
    perm = op.permutation()
    inverse = [perm.index(i) for i in range(len(perm))]
    return [transpose(b, g, inverse)]


@rule("broadcast")
def _broadcast(b, op, g, want):
    return [unbroadcast(b, g, shape(op.operands[0]))]


@rule("concat")
def _concat(b, op, g, want):
    axis = graph.normalize_axis(op.axis, len(shape(g)))
    grads: Grads = []
    start = 0
    for v, w in zip(op.operands, want):
        size = shape(v)[axis]
        grads.append(slice_axes(b, g, [axis], [start], [start + size]) if w else None)
        start += size
    return grads


@rule("slice")
def _slice(b, op, g, want):
    # out[k] = x[start + k * step] per axis: put g back there, zeros elsewhere
    x = op.operands[0]
    for axis, ((start, _, step), size) in enumerate(zip(op.normalized(), shape(x))):
        n = shape(g)[axis]
        if (start, step, n) == (0, 1, size):
            continue
        if n == 0:
            return [zeros(b, shape(x), g)]
        if step < 0:  # the same elements, ascending
            g = flip(b, g, [axis])
            start, step = start + (n - 1) * step, -step
        g = place(b, g, axis, start, step, size)
    return [g]


@rule("pad")
def _pad(b, op, g, want):
    # the inverse crop (a negative pad cropped x: those elements get 0)
    rank = len(shape(g))
    pads = op.pads
    return [pad(b, g, [-p for p in pads[:rank]], [-p for p in pads[rank:]])]


@rule("gather")
def _gather(b, op, g, want):
    # a scatter-add as a matmul with the one-hot of the indices:
    # data [A, D, B], indices -> [M], g [A, M, B]: d data = onehot[M, D]^T @ g
    data, indices = op.operands
    ds = shape(data)
    axis = graph.normalize_axis(op.axis, len(ds))
    pre, d, post = math.prod(ds[:axis]), ds[axis], math.prod(ds[axis + 1 :])
    m = math.prod(shape(indices))
    idx = reshape(b, indices, (m, 1))
    idx = b.where(b.compare(idx, 0, "lt"), b.add(idx, d), idx)  # negative counts from the end
    iota = b.const(np.arange(d), graph.element_type_of(indices))
    onehot = as_float(b, b.compare(idx, iota, "eq"), g)  # [M, D]
    g3 = reshape(b, g, (pre, m, post))
    grad = b.op(graph.MatMulOp, onehot, g3, transpose_a=True)  # [A, D, B]
    return [reshape(b, grad, ds), None]


# ------------------------------------------------------------------- no gradient


def no_gradient(value: SSAValue) -> bool:
    """Integer and boolean values carry no gradient."""
    return not is_float(value) or isinstance(graph.element_type_of(value), IntegerType)
