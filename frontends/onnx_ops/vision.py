"""ONNX's remaining window and sampling operators, each as a composition of graph ops (so
every backend that runs the parts runs them): LpPool (a sum pool of |x|^p), LRN (a sum of
squares over a channel window), Col2Im (each kernel position's columns placed into the
image and summed), GridSample (gathers of the sampled pixels, weighted) and DeformConv
(bilinear samples at offset kernel positions, then a matmul per group)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.nn import _pool_by_slices, _window, zero_stuff
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import Const, NodeContext, Value


def _float_input(imp: NodeContext, v: Value, what: str) -> np.dtype:
    dt = imp.dtype(v)
    if dt.kind != "f":
        raise imp.error(f"input '{what}' has element type {dt.name}; {imp.op_type} needs floats")
    return dt


@handles("LpPool")
def lp_pool(imp: NodeContext):
    """y = (sum over the window of |x|^p)^(1/p); padding counts as zeros."""
    a = imp.attrs(
        {
            "auto_pad": "NOTSET",
            "ceil_mode": 0,
            "dilations": None,
            "kernel_shape": None,
            "p": 2,
            "pads": None,
            "strides": None,
        }
    )
    x = imp.required(0)
    _float_input(imp, x, "X")
    kernel = tuple(int(k) for k in a["kernel_shape"] or ())
    if not kernel or len(kernel) != len(imp.shape(x)) - 2:
        raise imp.error(f"attribute 'kernel_shape' = {list(kernel)} does not match the input")
    p = a["p"]
    if p < 1:
        raise imp.error(f"attribute 'p' = {p} must be at least 1")
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    powered = (
        imp.emit(graph.AbsOp, x)
        if p == 1
        else imp.emit(graph.MulOp, x, x)
        if p == 2
        else imp.emit(graph.PowOp, imp.emit(graph.AbsOp, x), imp.scalar(float(p), x))
    )
    spec = dict(a, count_include_pad=1)
    [total] = _pool_by_slices(
        imp, powered, spec, kernel, strides, dil, pads, False, False, sums=True
    )
    if p == 1:
        return [total]
    if p == 2:
        return [imp.emit(graph.SqrtOp, total)]
    return [imp.emit(graph.PowOp, total, imp.scalar(1.0 / p, x))]


@handles("LRN")
def lrn(imp: NodeContext):
    """y = x / (bias + alpha / size * sum of x^2 over channels c - floor((size-1)/2) ..
    c + ceil((size-1)/2))^beta, channels outside the input counting as zeros."""
    a = imp.attrs({"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": None})
    x = imp.required(0)
    _float_input(imp, x, "X")
    shape = imp.shape(x)
    size = a["size"]
    if size is None or size < 1:
        raise imp.error(f"attribute 'size' = {size} must be a positive integer")
    if len(shape) < 3:
        raise imp.error(f"the input must have rank 3 or more (N, C, D1, ...), got {list(shape)}")
    r = len(shape)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = imp.emit(graph.MulOp, x, x)
    padded = imp.emit(graph.PadOp, sq, pads=(0, lo) + (0,) * (r - 2) + (0, hi) + (0,) * (r - 2))
    c = shape[1]
    acc: Value | None = None
    for k in range(size):
        v = imp.emit(graph.SliceOp, padded, starts=(k,), ends=(k + c,), axes=(1,), steps=(1,))
        acc = v if acc is None else imp.emit(graph.AddOp, acc, v)
    assert acc is not None
    scaled = imp.emit(graph.MulOp, acc, imp.scalar(a["alpha"] / size, x))
    base = imp.emit(graph.AddOp, scaled, imp.scalar(a["bias"], x))
    denom = imp.emit(graph.PowOp, base, imp.scalar(a["beta"], x))
    return [imp.emit(graph.DivOp, x, denom)]


def _place(imp: NodeContext, v: Value, starts, strides, padded) -> Value:
    """v (N, C, *L) written at positions start_d + stride_d * l of a zero (N, C, *padded)."""
    v = zero_stuff(imp, v, strides)
    span = imp.shape(v)[2:]
    after = [p - st - sz for p, st, sz in zip(padded, starts, span)]
    if any(starts) or any(after):
        v = imp.emit(graph.PadOp, v, pads=(0, 0, *starts, 0, 0, *after))
    return v


@handles("Col2Im")
def col2im(imp: NodeContext):
    """The inverse of im2col: input (N, C * prod(block), L) holds, for each kernel position,
    a column per sliding block; each position's columns are placed into the padded image at
    their strided offsets and summed, and the pads are cut off."""
    a = imp.attrs({"dilations": None, "pads": None, "strides": None})
    x = imp.required(0)
    image = [int(d) for d in imp.required_const(1, "image_shape").reshape(-1)]
    block = [int(d) for d in imp.required_const(2, "block_shape").reshape(-1)]
    r = len(image)
    if len(block) != r or r == 0:
        raise imp.error(f"image_shape {image} and block_shape {block} must have one length")
    dil = list(a["dilations"] or [1] * r)
    pads = list(a["pads"] or [0] * (2 * r))
    strides = list(a["strides"] or [1] * r)
    if len(dil) != r or len(strides) != r or len(pads) != 2 * r:
        raise imp.error(f"dilations/pads/strides do not match {r} spatial dims")
    if min(block + strides + dil) < 1 or min(pads) < 0:
        raise imp.error("block_shape, strides and dilations must be positive and pads >= 0")
    shape = imp.shape(x)
    k = math.prod(block)
    if len(shape) != 3 or shape[1] % k:
        raise imp.error(f"input shape {list(shape)} is not (N, C * {k}, L)")
    n, c = shape[0], shape[1] // k
    padded = [image[i] + pads[i] + pads[r + i] for i in range(r)]
    blocks = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(r)]
    if min(blocks) < 1 or math.prod(blocks) != shape[2]:
        raise imp.error(f"input has {shape[2]} columns but the image holds {blocks} blocks")
    cols = imp.reshape(x, (n, c, k, *blocks))
    acc: Value | None = None
    for j, pos in enumerate(itertools.product(*(range(b) for b in block))):
        v = imp.emit(graph.SliceOp, cols, starts=(j,), ends=(j + 1,), axes=(2,), steps=(1,))
        v = imp.reshape(v, (n, c, *blocks))
        starts = [pos[i] * dil[i] for i in range(r)]
        v = _place(imp, v, starts, strides, padded)
        acc = v if acc is None else imp.emit(graph.AddOp, acc, v)
    assert acc is not None
    if any(pads):
        acc = imp.emit(
            graph.SliceOp,
            acc,
            starts=tuple(pads[:r]),
            ends=tuple(pads[i] + image[i] for i in range(r)),
            axes=tuple(range(2, 2 + r)),
            steps=(1,) * r,
        )
    return [acc]


_CUBIC_A = -0.75  # the cubic convolution's alpha, as ONNX's (and PyTorch's) bicubic


class _Sampler:
    """Elementwise float helpers for GridSample: one graph op per call."""

    def __init__(self, imp: NodeContext, like: Value):
        self.imp, self.like = imp, like

    def k(self, value: float) -> Const:
        return self.imp.scalar(value, self.like)

    def op(self, cls, *args: Value, **attrs) -> Value:
        return self.imp.emit(cls, *args, **attrs)

    def add(self, a: Value, b: Value) -> Value:
        return self.op(graph.AddOp, a, b)

    def sub(self, a: Value, b: Value) -> Value:
        return self.op(graph.SubOp, a, b)

    def mul(self, a: Value, b: Value) -> Value:
        return self.op(graph.MulOp, a, b)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        return self.op(graph.WhereOp, cond, a, b)

    def cmp(self, a: Value, b: Value, pred: str) -> Value:
        return self.op(graph.CompareOp, a, b, predicate=pred)

    def clip(self, v: Value, lo: float, hi: float) -> Value:
        return self.op(graph.ClipOp, v, min=float(lo), max=float(hi))

    def reflect(self, x: Value, lo: float, hi: float) -> Value:
        """x folded into [lo, hi] by reflections at both ends (ONNX's _gs_reflect)."""
        rng = self.k(hi - lo)
        two = self.k(2.0)

        def fold(d: Value, near: float, far: float) -> Value:
            # d >= 0 past the `near` end: n whole ranges and a remainder r
            n = self.op(graph.FloorOp, self.op(graph.DivOp, d, rng))
            rem = self.sub(d, self.mul(n, rng))
            half = self.op(graph.FloorOp, self.op(graph.DivOp, n, two))
            even = self.cmp(self.sub(n, self.mul(half, two)), self.k(0.0), "eq")
            towards = self.k(1.0 if far > near else -1.0)
            return self.where(
                even,
                self.add(self.k(near), self.mul(towards, rem)),
                self.sub(self.k(far), self.mul(towards, rem)),
            )

        below = fold(self.sub(self.k(lo), x), lo, hi)
        above = fold(self.sub(x, self.k(hi)), hi, lo)
        return self.where(
            self.cmp(x, self.k(lo), "lt"),
            below,
            self.where(self.cmp(x, self.k(hi), "gt"), above, x),
        )


def _cubic_weights(s: _Sampler, t: Value) -> list[Value]:
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for a fraction t."""
    a = _CUBIC_A

    def near(x: Value) -> Value:  # |x| <= 1: ((a + 2) x - (a + 3)) x^2 + 1
        inner = s.sub(s.mul(s.k(a + 2), x), s.k(a + 3))
        return s.add(s.mul(s.mul(inner, x), x), s.k(1.0))

    def far(x: Value) -> Value:  # 1 < |x| < 2: ((a x - 5a) x + 8a) x - 4a
        inner = s.add(s.mul(s.sub(s.mul(s.k(a), x), s.k(5 * a)), x), s.k(8 * a))
        return s.sub(s.mul(inner, x), s.k(4 * a))

    one_minus = s.sub(s.k(1.0), t)
    return [
        far(s.add(t, s.k(1.0))),
        near(t),
        near(one_minus),
        far(s.add(one_minus, s.k(1.0))),
    ]


@handles("GridSample")
def grid_sample(imp: NodeContext):
    """Y[n, c, p] = X[n, c] sampled at grid[n, p] (x, y[, z] normalised to [-1, 1]):
    nearest, (bi/tri)linear or bicubic, with zeros, border or reflection padding, as
    ONNX's reference computes it. Each neighbour's pixels are one graph.gather from X laid
    out as (N * spatial, C); weights and masks are elementwise ops on the grid."""
    a = imp.attrs({"align_corners": 0, "mode": "linear", "padding_mode": "zeros"})
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(a["mode"], a["mode"])
    if mode not in ("linear", "nearest", "cubic"):
        raise imp.error(f"attribute 'mode' = '{a['mode']}' is not supported")
    imp.require(a, "padding_mode", ("zeros", "border", "reflection"))
    x, grid = imp.required(0), imp.required(1)
    dt = _float_input(imp, x, "X")
    xs, gs = imp.shape(x), imp.shape(grid)
    r = len(xs) - 2
    if r < 1 or len(gs) != r + 2 or gs[0] != xs[0] or gs[-1] != r:
        raise imp.error(f"grid shape {list(gs)} does not fit input shape {list(xs)}")
    if mode == "cubic" and r != 2:
        raise imp.error("mode 'cubic' needs a 2-D input")
    n, c, sp = xs[0], xs[1], xs[2:]
    outs = gs[1:-1]
    grid = cast_to(imp, grid, dt)
    s = _Sampler(imp, x)
    align = bool(a["align_corners"])
    pad = a["padding_mode"]
    coords: list[Value] = []  # per spatial dim of X (grid's last axis lists them reversed)
    for i in range(r):
        g = imp.emit(graph.SliceOp, grid, starts=(r - 1 - i,), ends=(r - i,), axes=(r + 1,))
        g = imp.reshape(g, (n, *outs))
        size = sp[i]
        if align:  # -1 and 1 are the corner pixels' centres
            u = s.mul(s.add(g, s.k(1.0)), s.k((size - 1) / 2))
        else:  # -1 and 1 are the image's edges
            u = s.mul(s.sub(s.mul(s.add(g, s.k(1.0)), s.k(float(size))), s.k(1.0)), s.k(0.5))
        if mode == "nearest":
            u = s.op(graph.RoundOp, u)
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if pad == "border" and mode != "cubic":
            # (a cubic sample clamps each tap only, as PyTorch and onnxruntime do; ONNX's
            # reference also clamps the coordinate, which moves the taps)
            outside = s.where(s.cmp(u, s.k(lo), "lt"), s.k(1.0), s.k(0.0))
            outside = s.where(s.cmp(u, s.k(hi), "gt"), s.k(1.0), outside)
            u = s.where(s.cmp(outside, s.k(0.0), "ne"), s.clip(u, 0, size - 1), u)
        elif pad == "reflection":
            u = s.reflect(u, lo, hi)
        coords.append(u)
    # the taps per dim: (integer position as float, weight)
    taps: list[list[tuple[Value, Value | None]]] = []
    for u in coords:
        if mode == "nearest":
            taps.append([(u, None)])
            continue
        base = s.op(graph.FloorOp, u)
        t = s.sub(u, base)
        if mode == "linear":
            taps.append([(base, s.sub(s.k(1.0), t)), (s.add(base, s.k(1.0)), t)])
        else:
            ws = _cubic_weights(s, t)
            taps.append([(s.add(base, s.k(float(o))), ws[o + 1]) for o in range(-1, 3)])
    table = imp.reshape(
        imp.emit(graph.TransposeOp, imp.reshape(x, (n, c, math.prod(sp))), perm=(0, 2, 1)),
        (n * math.prod(sp), c),
    )
    strides = [math.prod(sp[i + 1 :]) for i in range(r)]
    batch = Const((np.arange(n, dtype=np.int64) * math.prod(sp)).reshape((n,) + (1,) * len(outs)))
    acc: Value | None = None
    for combo in itertools.product(*taps):
        flat: Value = batch
        weight: Value | None = None
        for i, (pos, w) in enumerate(combo):
            size = sp[i]
            if pad == "zeros":
                inside = s.where(s.cmp(pos, s.k(0.0), "lt"), s.k(0.0), s.k(1.0))
                inside = s.where(s.cmp(pos, s.k(size - 1.0), "gt"), s.k(0.0), inside)
                w = inside if w is None else s.mul(w, inside)
                pos = s.clip(pos, 0, size - 1)
            elif pad == "border":
                pos = s.clip(pos, 0, size - 1)
            else:  # a tap outside is reflected, then truncated towards zero (ONNX's int())
                lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
                pos = s.clip(s.reflect(pos, lo, hi), 0, size - 1)
            index = imp.emit(graph.CastOp, pos, to=graph.NUMPY_TO_ELT["int64"])
            flat = imp.emit(
                graph.AddOp, flat, imp.emit(graph.MulOp, index, Const(np.asarray(strides[i])))
            )
            if w is not None:
                weight = w if weight is None else s.mul(weight, w)
        pixels = imp.emit(graph.GatherOp, table, flat, axis=0)  # (n, *outs, c)
        if weight is not None:
            pixels = s.mul(pixels, imp.reshape(weight, (n, *outs, 1)))
        acc = pixels if acc is None else s.add(acc, pixels)
    assert acc is not None
    perm = (0, len(outs) + 1, *range(1, len(outs) + 1))
    return [imp.emit(graph.TransposeOp, acc, perm=perm)]


def _bilinear_taps(s: _Sampler, y: Value, x: Value, h: int, w: int):
    """The four taps (flat index y * w + x, weight) of a bilinear sample at pixel
    coordinates (y, x); a tap outside the image weighs 0 (its index clamped inside)."""
    taps = []
    y0, x0 = s.op(graph.FloorOp, y), s.op(graph.FloorOp, x)
    ty, tx = s.sub(y, y0), s.sub(x, x0)
    for dy, dx in itertools.product((0, 1), (0, 1)):
        py = y0 if dy == 0 else s.add(y0, s.k(1.0))
        px = x0 if dx == 0 else s.add(x0, s.k(1.0))
        wy = s.sub(s.k(1.0), ty) if dy == 0 else ty
        wx = s.sub(s.k(1.0), tx) if dx == 0 else tx
        weight = s.mul(wy, wx)
        for pos, size in ((py, h), (px, w)):
            weight = s.where(s.cmp(pos, s.k(0.0), "lt"), s.k(0.0), weight)
            weight = s.where(s.cmp(pos, s.k(size - 1.0), "gt"), s.k(0.0), weight)
        iy = s.imp.emit(graph.CastOp, s.clip(py, 0, h - 1), to=graph.NUMPY_TO_ELT["int64"])
        ix = s.imp.emit(graph.CastOp, s.clip(px, 0, w - 1), to=graph.NUMPY_TO_ELT["int64"])
        flat = s.imp.emit(graph.AddOp, s.imp.emit(graph.MulOp, iy, Const(np.asarray(w))), ix)
        taps.append((flat, weight))
    return taps


@handles("DeformConv")
def deform_conv(imp: NodeContext):
    """A 2-D deformable convolution: each kernel position (a, b) of each output pixel reads
    X bilinearly (zeros outside) at its regular position plus the offset of its offset
    group, times the mask; the sampled columns (N * oH * oW, C * kH * kW) are multiplied
    by each group's weight rows."""
    a = imp.attrs(
        {
            "dilations": None,
            "group": 1,
            "kernel_shape": None,
            "offset_group": 1,
            "pads": None,
            "strides": None,
        }
    )
    x, w, off = imp.required(0), imp.required(1), imp.required(2)
    b, mask = imp.input(3), imp.input(4)
    _float_input(imp, x, "X")
    xs, ws, os_ = imp.shape(x), imp.shape(w), imp.shape(off)
    if len(xs) != 4 or len(ws) != 4:
        raise imp.error(f"only 2-D deformable convolutions are supported (X has rank {len(xs)})")
    n, c, h, wd = xs
    oc, cg, kh, kw = ws
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != (kh, kw):
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from the weight's "
            f"{[kh, kw]}"
        )
    g, og = a["group"], a["offset_group"]
    if g < 1 or og < 1 or c != cg * g or oc % g or c % og:
        raise imp.error(
            f"X has {c} channels, W {list(ws)}: group = {g} and offset_group = {og} do not fit"
        )
    sth, stw = a["strides"] or (1, 1)
    dh, dw = a["dilations"] or (1, 1)
    pads = a["pads"] or (0, 0, 0, 0)
    oh = (h + pads[0] + pads[2] - (kh - 1) * dh - 1) // sth + 1
    ow = (wd + pads[1] + pads[3] - (kw - 1) * dw - 1) // stw + 1
    k = kh * kw
    if tuple(os_) != (n, og * 2 * k, oh, ow):
        raise imp.error(f"offset shape {list(os_)} is not {[n, og * 2 * k, oh, ow]}")
    if mask is not None and tuple(imp.shape(mask)) != (n, og * k, oh, ow):
        raise imp.error(f"mask shape {list(imp.shape(mask))} is not {[n, og * k, oh, ow]}")
    s = _Sampler(imp, x)
    dt = imp.dtype(x)
    off = imp.reshape(off, (n, og, k, 2, oh, ow))
    if mask is not None:
        mask = imp.reshape(mask, (n, og, k, oh, ow))
    table = imp.reshape(imp.emit(graph.TransposeOp, x, perm=(0, 2, 3, 1)), (n * h * wd, c))
    cpo = c // og
    batch = Const((np.arange(n, dtype=np.int64) * h * wd).reshape(n, 1, 1))

    def piece(v: Value, starts, ends, axes, shape) -> Value:
        cut = imp.emit(graph.SliceOp, v, starts=starts, ends=ends, axes=axes)
        return imp.reshape(cut, shape)

    per_k: list[Value] = []  # per kernel position: the samples (n, oh, ow, c)
    for kk, (ka, kb) in enumerate(itertools.product(range(kh), range(kw))):
        base_y = Const((np.arange(oh) * sth - pads[0] + ka * dh).astype(dt).reshape(1, oh, 1))
        base_x = Const((np.arange(ow) * stw - pads[1] + kb * dw).astype(dt).reshape(1, 1, ow))
        groups = []
        for gi in range(og):
            dy = piece(off, (gi, kk, 0), (gi + 1, kk + 1, 1), (1, 2, 3), (n, oh, ow))
            dx = piece(off, (gi, kk, 1), (gi + 1, kk + 1, 2), (1, 2, 3), (n, oh, ow))
            y, xx = s.add(dy, base_y), s.add(dx, base_x)
            chans = table
            if og > 1:
                chans = imp.emit(
                    graph.SliceOp, table, starts=(gi * cpo,), ends=((gi + 1) * cpo,), axes=(1,)
                )
            acc: Value | None = None
            for flat, weight in _bilinear_taps(s, y, xx, h, wd):
                flat = imp.emit(graph.AddOp, flat, batch)
                px = imp.emit(graph.GatherOp, chans, flat, axis=0)  # (n, oh, ow, cpo)
                px = s.mul(px, imp.reshape(weight, (n, oh, ow, 1)))
                acc = px if acc is None else s.add(acc, px)
            assert acc is not None
            if mask is not None:
                m = piece(mask, (gi, kk), (gi + 1, kk + 1), (1, 2), (n, oh, ow, 1))
                acc = s.mul(acc, m)
            groups.append(acc)
        v = groups[0] if og == 1 else imp.emit(graph.ConcatOp, *groups, axis=3)
        per_k.append(imp.reshape(v, (n, oh, ow, c, 1)))
    cols = per_k[0] if k == 1 else imp.emit(graph.ConcatOp, *per_k, axis=4)
    cols = imp.reshape(cols, (n * oh * ow, c * k))  # columns ordered (channel, kh, kw)
    ocg = oc // g
    outs = []
    for gi in range(g):
        cg_cols = cols
        if g > 1:
            cg_cols = imp.emit(
                graph.SliceOp, cols, starts=(gi * cg * k,), ends=((gi + 1) * cg * k,), axes=(1,)
            )
        wg = w
        if g > 1:
            wg = imp.emit(graph.SliceOp, w, starts=(gi * ocg,), ends=((gi + 1) * ocg,), axes=(0,))
        wg = imp.reshape(wg, (ocg, cg * k))
        outs.append(imp.emit(graph.MatMulOp, cg_cols, wg, transpose_b=True))
    y = outs[0] if g == 1 else imp.emit(graph.ConcatOp, *outs, axis=1)
    if b is not None:
        y = s.add(y, b)
    y = imp.reshape(y, (n, oh, ow, oc))
    return [imp.emit(graph.TransposeOp, y, perm=(0, 3, 1, 2))]


@handles("MaxUnpool")
def max_unpool(imp: NodeContext):
    """Y (zeros) with Y.flat[I.flat[k]] = X.flat[k]: the indices are offsets into the whole
    output, as MaxPool's Indices are. A one-hot mask between every output element and
    every input element, the last input to hit a position winning (onnxruntime's order);
    O(outputs x inputs), so larger tensors are refused in one line. The output shape is
    `output_shape` (known at import time) or (in - 1) * stride - pads + kernel."""
    from dlpc.frontends.onnx_ops.indexing import _scatter, _wrap

    a = imp.attrs({"kernel_shape": None, "pads": None, "strides": None})
    x, idx = imp.required(0), imp.required(1)
    shape = imp.shape(x)
    kernel = tuple(int(k) for k in a["kernel_shape"] or ())
    r = len(shape) - 2
    if r < 1 or len(kernel) != r:
        raise imp.error(f"attribute 'kernel_shape' = {list(kernel)} does not match the input")
    if imp.shape(idx) != shape:
        raise imp.error(f"indices {list(imp.shape(idx))} must have X's shape {list(shape)}")
    strides = tuple(a["strides"] or (1,) * r)
    pads = tuple(a["pads"] or (0,) * (2 * r))
    if len(strides) != r or len(pads) != 2 * r:
        raise imp.error(f"strides/pads do not match {r} spatial dims")
    given = imp.const(2, "output_shape")
    if given is not None:
        out = tuple(int(d) for d in given.reshape(-1))
        if len(out) != len(shape) or out[:2] != shape[:2]:
            raise imp.error(f"'output_shape' {list(out)} does not fit X {list(shape)}")
    else:
        spatial = [
            (n - 1) * s - pads[d] - pads[r + d] + k
            for d, (n, s, k) in enumerate(zip(shape[2:], strides, kernel))
        ]
        out = (*shape[:2], *spatial)
    m, k = math.prod(out), math.prod(shape)
    if m * k > 1 << 24:
        raise imp.error(
            f"MaxUnpool of {k} elements into {m} is too large for dlpc (a one-hot mask of "
            f"{m} x {k})"
        )
    flat = _wrap(imp, imp.reshape(idx, (1, k)), Const(np.asarray(m, np.int64)))
    mask = imp.emit(
        graph.CompareOp,
        flat,
        Const(np.arange(m, dtype=np.int64).reshape(m, 1)),
        predicate="eq",
    )
    src = Const(np.arange(k, dtype=np.int64).reshape(1, k))
    zeros = Const(np.zeros(m, imp.dtype(x)))
    y = _scatter(imp, zeros, mask, imp.reshape(x, (1, k)), src, 1, "none")
    return [imp.reshape(y, out)]
