"""ONNX's neural-network layers: MatMul and Gemm, Conv and ConvTranspose (1-D, 2-D,
3-D), MaxPool / AveragePool (2-D as one graph op; other ranks, dilations and MaxPool's
Indices as strided slices) and the global pools."""

from __future__ import annotations

import itertools
import math

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import Const, NodeContext, Value


@handles("MatMul")
def matmul(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(graph.MatMulOp, imp.required(0), imp.required(1))]


@handles("Gemm")
def gemm(imp: NodeContext):
    a = imp.attrs({"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    x, w, c = imp.required(0), imp.required(1), imp.input(2)
    if len(imp.shape(x)) != 2 or len(imp.shape(w)) != 2:
        raise imp.error(f"A and B must be matrices, got shapes {imp.shape(x)} and {imp.shape(w)}")
    n = imp.shape(w)[0 if a["transB"] else 1]
    if (
        not a["transA"]
        and a["transB"]
        and a["alpha"] == 1.0
        and (c is None or (a["beta"] == 1.0 and imp.shape(c) in ((n,), (1, n))))
    ):
        # y = x @ w^T + c: PyTorch's nn.Linear as exported
        return [imp.emit(graph.LinearOp, x, w, *([c] if c is not None else []))]
    y = imp.emit(graph.MatMulOp, x, w, transpose_a=bool(a["transA"]), transpose_b=bool(a["transB"]))
    if a["alpha"] != 1.0:
        y = imp.emit(graph.MulOp, y, imp.scalar(a["alpha"], y))
    if c is not None:
        if a["beta"] != 1.0:
            c = imp.emit(graph.MulOp, c, imp.scalar(a["beta"], c))
        y = imp.emit(graph.AddOp, y, c)
    return [y]


def _window(imp: NodeContext, a: dict, spatial: tuple[int, ...], kernel: tuple[int, ...]):
    """(strides, dilations, pads as [begin..., end...]) with auto_pad resolved."""
    r = len(spatial)
    strides = tuple(a.get("strides") or (1,) * r)
    dil = tuple(a.get("dilations") or (1,) * r)
    pads = tuple(a.get("pads") or (0,) * (2 * r))
    if len(strides) != r or len(dil) != r or len(pads) != 2 * r:
        raise imp.error(f"strides/dilations/pads do not match {r} spatial dims")
    mode = a["auto_pad"]
    imp.require(a, "auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))
    if mode == "VALID":
        pads = (0,) * (2 * r)
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dil):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if mode == "SAME_UPPER" else big)
            end.append(big if mode == "SAME_UPPER" else small)
        pads = (*begin, *end)
    return strides, dil, pads


def _to_2d(imp: NodeContext, x: Value, what: str) -> tuple[Value, bool]:
    """Give a 1-D (N, C, W) input an H of 1; 2-D passes; other ranks are errors."""
    shape = imp.shape(x)
    if len(shape) == 3:
        return imp.reshape(x, (shape[0], shape[1], 1, shape[2])), True
    if len(shape) != 4:
        raise imp.error(f"only 1-D and 2-D {what} are supported (input has rank {len(shape)})")
    return x, False


def _pads_2d(pads, one_d: bool) -> tuple[int, int, int, int]:
    # ONNX [begin..., end...] -> graph [top, left, bottom, right]
    return (0, pads[0], 0, pads[1]) if one_d else (pads[0], pads[1], pads[2], pads[3])


def _from_2d(imp: NodeContext, y: Value, one_d: bool) -> Value:
    if not one_d:
        return y
    n, c, _, w = imp.shape(y)
    return imp.reshape(y, (n, c, w))


@handles("Conv")
def conv(imp: NodeContext):
    a = imp.attrs(
        {
            "auto_pad": "NOTSET",
            "dilations": None,
            "group": 1,
            "kernel_shape": None,
            "pads": None,
            "strides": None,
        }
    )
    x, w, b = imp.required(0), imp.required(1), imp.input(2)
    kernel = imp.shape(w)[2:]
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != kernel:
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from "
            f"the weight's {list(kernel)}"
        )
    if len(kernel) not in (1, 2, 3) or len(imp.shape(x)) != len(kernel) + 2:
        raise imp.error(
            f"only 1-D, 2-D and 3-D convolutions are supported (input has rank {len(imp.shape(x))})"
        )
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    return [_conv(imp, x, w, b, strides, dil, pads, a["group"])]


def _conv_transpose_pads(imp: NodeContext, a: dict, spatial, kernel) -> list[int]:
    """Pads from output_shape / SAME auto_pad, as the ONNX ConvTranspose spec gives them."""
    r = len(spatial)
    strides = a["strides"] or (1,) * r
    dil = a["dilations"] or (1,) * r
    outpad = a["output_padding"] or (0,) * r
    out = a["output_shape"] or [d * s for d, s in zip(spatial, strides)]
    out = list(out)[-r:]
    begin, end = [], []
    for i in range(r):
        total = strides[i] * (spatial[i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - out[i]
        # (a negative total pads the output: negative pads give extra rows/columns)
        small, big = total // 2, total - total // 2
        first_small = a["auto_pad"] == "SAME_UPPER"
        begin.append(small if first_small else big)
        end.append(big if first_small else small)
    return begin + end


@handles("ConvTranspose")
def conv_transpose(imp: NodeContext):
    """The transposed convolution as a direct one (1-D, 2-D and 3-D): zero-stuff x by the
    strides, pad it by dilation * (k - 1) - pads (+ output_padding at the end; negative
    amounts crop), and convolve with the flipped weight whose in/out channel roles are
    swapped per group. A weight computed at run time is flipped and regrouped by graph ops."""
    a = imp.attrs(
        {
            "auto_pad": "NOTSET",
            "dilations": None,
            "group": 1,
            "kernel_shape": None,
            "output_padding": None,
            "output_shape": None,
            "pads": None,
            "strides": None,
        }
    )
    imp.require(a, "auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    x, w, b = imp.required(0), imp.required(1), imp.input(2)
    wshape = imp.shape(w)
    kernel = tuple(wshape[2:])
    r = len(kernel)
    if r not in (1, 2, 3) or len(imp.shape(x)) != r + 2:
        raise imp.error(
            f"only 1-D, 2-D and 3-D convolutions are supported (weight has rank {len(wshape)})"
        )
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != kernel:
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from "
            f"the weight's {list(kernel)}"
        )
    if a["output_shape"] is not None or a["auto_pad"] in ("SAME_UPPER", "SAME_LOWER"):
        a["pads"] = _conv_transpose_pads(imp, a, imp.shape(x)[2:], kernel)
    strides = tuple(a["strides"] or (1,) * r)
    dil = tuple(a["dilations"] or (1,) * r)
    pads = list(a["pads"] or (0,) * (2 * r))
    outpad = tuple(a["output_padding"] or (0,) * r)
    g = a["group"]
    cin, cout_g = wshape[:2]
    # W'[g*cout_g + o, c, k...] = W[g*cin_g + c, o, flipped k...]
    if isinstance(w, Const):
        wg = w.array.reshape(g, cin // g, cout_g, *kernel)[
            (slice(None),) * 3 + (slice(None, None, -1),) * r
        ]
        perm = (0, 2, 1, *range(3, 3 + r))
        wt: Value = Const(
            np.ascontiguousarray(wg.transpose(perm).reshape(g * cout_g, cin // g, *kernel))
        )
    else:
        wg = imp.reshape(w, (g, cin // g, cout_g, *kernel))
        wg = imp.emit(
            graph.SliceOp,
            wg,
            starts=tuple(k - 1 for k in kernel),
            ends=tuple(-k - 1 for k in kernel),
            axes=tuple(range(3, 3 + r)),
            steps=(-1,) * r,
        )
        wg = imp.emit(graph.TransposeOp, wg, perm=(0, 2, 1, *range(3, 3 + r)))
        wt = imp.reshape(wg, (g * cout_g, cin // g, *kernel))
    x = zero_stuff(imp, x, strides)
    lo = [dil[i] * (kernel[i] - 1) - pads[i] for i in range(r)]
    hi = [dil[i] * (kernel[i] - 1) - pads[r + i] + outpad[i] for i in range(r)]
    if any(lo + hi):
        x = imp.emit(graph.PadOp, x, pads=(0, 0, *lo, 0, 0, *hi))
    return [_conv(imp, x, wt, b, (1,) * r, dil, (0,) * (2 * r), g)]


def zero_stuff(imp: NodeContext, x: Value, strides) -> Value:
    """x (N, C, *L) with stride - 1 zeros between neighbours along each spatial dim:
    (N, C, *((L - 1) * stride + 1)), as [n, c, l0, 1, l1, 1, ...] padded and merged."""
    n, c, *sp = imp.shape(x)
    r = len(sp)
    if all(st == 1 for st in strides):
        return x
    y = imp.reshape(x, (n, c, *[v for d in sp for v in (d, 1)]))
    stuff = [0] * (2 + 2 * r) + [0, 0] + [v for st in strides for v in (0, st - 1)]
    y = imp.emit(graph.PadOp, y, pads=tuple(stuff))
    y = imp.reshape(y, (n, c, *[d * st for d, st in zip(sp, strides)]))
    return imp.emit(
        graph.SliceOp,
        y,
        starts=(0,) * r,
        ends=tuple((d - 1) * st + 1 for d, st in zip(sp, strides)),
        axes=tuple(range(2, 2 + r)),
    )


def _conv(imp: NodeContext, x: Value, w: Value, b: Value | None, strides, dil, pads, groups):
    """A 1-D, 2-D or 3-D convolution (ONNX pads [begin..., end...]) through graph.conv2d:
    1-D with an H of 1; 3-D as the sum over the depth taps kd of 2-D convolutions of the
    strided depth slices, each slice's depths folded into the batch."""
    r = len(strides)
    if r < 3:
        x2, one_d = _to_2d(imp, x, "convolutions")
        if one_d:
            w = imp.reshape(w, (*imp.shape(w)[:2], 1, imp.shape(w)[2]))
            strides, dil = (1, strides[0]), (1, dil[0])
        y = imp.emit(
            graph.Conv2DOp,
            x2,
            w,
            *([b] if b is not None else []),
            strides=strides,
            dilations=dil,
            pads=_pads_2d(pads, one_d),
            groups=groups,
        )
        return _from_2d(imp, y, one_d)
    if any(pads):
        x = imp.emit(graph.PadOp, x, pads=(0, 0, *pads[:3], 0, 0, *pads[3:]))
    n, c, d, h, wd = imp.shape(x)
    o, cg, kd, kh, kw = imp.shape(w)
    od = (d - (kd - 1) * dil[0] - 1) // strides[0] + 1
    if od < 1:
        raise imp.error(f"the kernel does not fit depth {d}")
    acc: Value | None = None
    for t in range(kd):
        start = t * dil[0]
        xs = imp.emit(
            graph.SliceOp,
            x,
            starts=(start,),
            ends=(start + (od - 1) * strides[0] + 1,),
            axes=(2,),
            steps=(strides[0],),
        )
        xs = imp.emit(graph.TransposeOp, xs, perm=(0, 2, 1, 3, 4))
        xs = imp.reshape(xs, (n * od, c, h, wd))
        if isinstance(w, Const):
            wt: Value = Const(np.ascontiguousarray(w.array[:, :, t]))
        else:
            wt = imp.reshape(
                imp.emit(graph.SliceOp, w, starts=(t,), ends=(t + 1,), axes=(2,)), (o, cg, kh, kw)
            )
        y = imp.emit(graph.Conv2DOp, xs, wt, strides=strides[1:], dilations=dil[1:], groups=groups)
        acc = y if acc is None else imp.emit(graph.AddOp, acc, y)
    assert acc is not None
    oh, ow = imp.shape(acc)[2:]
    y = imp.emit(graph.TransposeOp, imp.reshape(acc, (n, od, o, oh, ow)), perm=(0, 2, 1, 3, 4))
    if b is not None:
        y = imp.emit(graph.AddOp, y, imp.reshape(b, (o, 1, 1, 1)))
    return y


@handles("MaxPool", "AveragePool")
def pool(imp: NodeContext):
    is_max = imp.op_type == "MaxPool"
    spec = {
        "auto_pad": "NOTSET",
        "ceil_mode": 0,
        "dilations": None,
        "kernel_shape": None,
        "pads": None,
        "strides": None,
    }
    spec.update({"storage_order": 0} if is_max else {"count_include_pad": 0})
    a = imp.attrs(spec)
    imp.no_extra_outputs(2 if is_max else 1)
    x = imp.required(0)
    kernel = tuple(int(k) for k in a["kernel_shape"] or ())
    if len(kernel) != len(imp.shape(x)) - 2:
        raise imp.error(f"attribute 'kernel_shape' = {list(kernel)} does not match the input")
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    indices = is_max and len(imp.node.output) > 1 and bool(imp.node.output[1])
    if len(kernel) not in (1, 2) or any(d != 1 for d in dil) or indices:
        return _pool_by_slices(imp, x, a, kernel, strides, dil, pads, is_max, indices)
    x2, one_d = _to_2d(imp, x, "pools")
    if one_d:
        kernel, strides = (1, kernel[0]), (1, strides[0])
    attrs = dict(
        kernel=kernel, strides=strides, pads=_pads_2d(pads, one_d), ceil_mode=bool(a["ceil_mode"])
    )
    if is_max:
        y = imp.emit(graph.MaxPool2DOp, x2, **attrs)
    else:
        y = imp.emit(graph.AvgPool2DOp, x2, count_include_pad=bool(a["count_include_pad"]), **attrs)
    return [_from_2d(imp, y, one_d)]


def _pool_by_slices(
    imp: NodeContext, x: Value, a: dict, kernel, strides, dil, pads, is_max, indices, sums=False
):
    """Any-rank pooling with dilations (and MaxPool's Indices) as one strided slice of the
    padded input per kernel position: max pool is their running maximum (Indices: the flat
    input position of the first maximum, row-major or, storage_order 1, column-major
    within each 2-D image), average pool their sum divided by the number of positions
    each window counts (pads too with count_include_pad, never the extra cells ceil_mode
    adds); `sums` gives the window sums undivided (LpPool's)."""
    shape = imp.shape(x)
    n, c, spatial = shape[0], shape[1], shape[2:]
    r = len(spatial)
    begin, end = list(pads[:r]), list(pads[r:])
    out, extra = [], []
    for i in range(r):
        span = (kernel[i] - 1) * dil[i] + 1
        total = spatial[i] + begin[i] + end[i] - span
        o = (-(-total // strides[i]) if a["ceil_mode"] else total // strides[i]) + 1
        if a["ceil_mode"] and (o - 1) * strides[i] >= spatial[i] + begin[i]:
            o -= 1  # the last window must start inside the input or its left pad
        if o < 1:
            raise imp.error(f"the pool window does not fit spatial dim {i} ({spatial[i]})")
        out.append(o)
        extra.append(max(0, (o - 1) * strides[i] + span - (spatial[i] + begin[i] + end[i])))
    fill = -np.inf if is_max else 0.0
    full = (0, 0, *begin, 0, 0, *[e + x_ for e, x_ in zip(end, extra)])
    xp = imp.emit(graph.PadOp, x, pads=full, value=fill) if any(full) else x
    # per spatial dim: which padded positions are counted (avg) / their input index (max)
    inside = [np.zeros(spatial[i] + begin[i] + end[i] + extra[i], bool) for i in range(r)]
    for i in range(r):
        lo = 0 if a.get("count_include_pad") else begin[i]
        hi = spatial[i] + begin[i] + (end[i] if a.get("count_include_pad") else 0)
        inside[i][lo:hi] = True
    col_major = is_max and a.get("storage_order") == 1
    if col_major and r != 2:
        raise imp.error("attribute 'storage_order' = 1 needs a 2-D pool")
    if not indices:
        # max and sum over a box are separable: one axis at a time, k slices per axis
        # (sum(k) slices instead of prod(k)); the count of a box is the product of the
        # per-axis counts
        y = xp
        count1 = np.ones(out, np.float64)
        for i in range(r):
            acc_i: Value | None = None
            for o in range(kernel[i]):
                start = o * dil[i]
                v = imp.emit(
                    graph.SliceOp,
                    y,
                    starts=(start,),
                    ends=(start + (out[i] - 1) * strides[i] + 1,),
                    axes=(2 + i,),
                    steps=(strides[i],),
                )
                join = graph.MaxOp if is_max else graph.AddOp
                acc_i = v if acc_i is None else imp.emit(join, acc_i, v)
            assert acc_i is not None
            y = acc_i
            taps = [
                inside[i][np.arange(out[i]) * strides[i] + o * dil[i]] for o in range(kernel[i])
            ]
            counted = np.sum(taps, axis=0).reshape([-1 if j == i else 1 for j in range(r)])
            count1 = count1 * counted
        if is_max or sums:
            return [y]
        return [imp.emit(graph.DivOp, y, Const(count1.astype(imp.dtype(x))))]
    # MaxPool's Indices: where a kernel position's slice beats the running maximum, it
    # becomes the maximum and its input positions the indices
    acc: Value | None = None
    best: Value | None = None
    for offs in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offs, dil)]
        ends = [st + (o - 1) * s + 1 for st, o, s in zip(starts, out, strides)]
        v = imp.emit(
            graph.SliceOp,
            xp,
            starts=starts,
            ends=ends,
            axes=tuple(range(2, 2 + r)),
            steps=tuple(strides),
        )
        pos = [np.arange(o) * s + st for o, s, st in zip(out, strides, starts)]
        here = Const(_flat_index(pos, begin, spatial, col_major))
        if acc is None or best is None:
            acc, best = v, here
            continue
        better = imp.emit(graph.CompareOp, v, acc, predicate="gt")
        acc = imp.emit(graph.WhereOp, better, v, acc)
        best = imp.emit(graph.WhereOp, better, here, best)
    assert acc is not None and best is not None  # (a kernel has at least one position)
    per_image = math.prod(spatial)
    base = (np.arange(n * c, dtype=np.int64) * per_image).reshape((n, c) + (1,) * r)
    return [acc, imp.emit(graph.AddOp, best, Const(base))]


def _flat_index(pos, begin, spatial, col_major: bool) -> np.ndarray:
    """The flat index within one image of the input position each output reads (padded
    positions give an index outside the image; they never hold a maximum)."""
    r = len(pos)
    coords = [
        (p - b).reshape([-1 if j == i else 1 for j in range(r)])
        for i, (p, b) in enumerate(zip(pos, begin))
    ]
    order = list(range(r))[::-1] if col_major else list(range(r))
    flat = np.zeros([len(p) for p in pos], np.int64)
    for i in order:
        flat = flat * spatial[i] + coords[i]
    return flat.astype(np.int64)


@handles("GlobalAveragePool", "GlobalMaxPool")
def global_pool(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    if imp.node.op_type == "GlobalAveragePool":
        return [imp.emit(graph.GlobalAvgPoolOp, x)]
    axes = tuple(range(2, len(imp.shape(x))))
    return [imp.emit(graph.ReduceMaxOp, x, axes=axes, keepdims=True)]
