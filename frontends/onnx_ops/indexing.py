"""ONNX's indexing operators as compositions of graph ops (so every backend runs them and
`graph-autodiff` differentiates them through where / gather / reduce):

- ScatterElements (and the deprecated Scatter) and ScatterND as a one-hot mask between
  every output position and every update (`mask[out, src] = index[src] == out`), reduced
  over the updates: reduction `none` takes the last update that hits a position (as
  onnxruntime does with duplicates, which ONNX leaves undefined), `add` / `mul` / `max` /
  `min` fold every update into the data; O(outputs x updates) along the scattered axis;
- GatherND (with batch_dims) as one graph.gather of the flattened leading dims;
- TopK as a rank count: rank[i] = #{j: x[j] beats x[i]} (larger, or smaller with
  largest=0; ties go to the lower index, as ONNX says), then output r takes the element of
  rank r; O(n^2) along the axis, so an axis of more than RANK_TOPK_MAX elements takes its
  k (at most SELECT_TOPK_MAX) elements one at a time instead. `sorted=0` gives the sorted
  order too (ONNX allows any).
- TensorScatter (a KV-cache write at per-batch offsets, linear or circular) as the same mask;
- OneHot as a compare against positions and a where; ReverseSequence as one gather;
- Compress (its condition), NonZero, Unique and NonMaxSuppression at import time: their
  sizes depend on the values, so a compiled model where they read graph inputs (directly
  or computed from them) is specialised on those inputs' values.
Negative indices count from the end."""

from __future__ import annotations

import math

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value

I64 = np.dtype(np.int64)


def _i64(v) -> Const:
    return Const(np.asarray(v, np.int64))


def _wrap(imp: NodeContext, idx: Value, extent: Value) -> Value:
    """Negative indices + extent (an int64 value broadcast against idx)."""
    idx = cast_to(imp, idx, I64)
    neg = imp.emit(graph.CompareOp, idx, _i64(0), predicate="lt")
    return imp.emit(graph.WhereOp, neg, imp.emit(graph.AddOp, idx, extent), idx)


def _extreme(dt: np.dtype, low: bool) -> Const:
    if dt.kind == "f":
        return Const(np.asarray(-np.inf if low else np.inf, dt))
    if dt.kind == "b":
        return Const(np.asarray(not low))
    info = np.iinfo(dt)
    return Const(np.asarray(info.min if low else info.max, dt))


def _scatter(
    imp: NodeContext, data: Value, mask: Value, upd: Value, src: Value, axis: int, red: str
):
    """`data` (shape S) with the updates folded in. `mask` and `upd` have S's shape with
    the updates' axis inserted at `axis` (broadcastable); `src` is that axis's iota
    (int64, broadcastable); mask[.., src, ..] says update src lands on that position."""
    dt = imp.dtype(data)
    if red == "add" or red == "mul":
        ident = imp.scalar(0 if red == "add" else 1, data)
        part = imp.emit(graph.WhereOp, mask, upd, ident)
        reduce = graph.ReduceSumOp if red == "add" else graph.ReduceProdOp
        folded = imp.emit(reduce, part, axes=(axis,), keepdims=False)
        combine = graph.AddOp if red == "add" else graph.MulOp
        return imp.emit(combine, data, folded)
    if red in ("max", "min"):
        low = red == "max"
        part = imp.emit(graph.WhereOp, mask, upd, _extreme(dt, low))
        reduce = graph.ReduceMaxOp if low else graph.ReduceMinOp
        folded = imp.emit(reduce, part, axes=(axis,), keepdims=False)
        hit = imp.emit(
            graph.ReduceMaxOp,
            imp.emit(graph.WhereOp, mask, _i64(1), _i64(0)),
            axes=(axis,),
            keepdims=False,
        )
        hit = imp.emit(graph.CompareOp, hit, _i64(0), predicate="gt")
        both = imp.emit(graph.MaxOp if low else graph.MinOp, data, folded)
        return imp.emit(graph.WhereOp, hit, both, data)
    # none: the last update that hits a position
    last = imp.emit(
        graph.ReduceMaxOp, imp.emit(graph.WhereOp, mask, src, _i64(-1)), axes=(axis,), keepdims=True
    )
    pick = imp.emit(graph.CompareOp, src, last, predicate="eq")
    pick = imp.emit(graph.WhereOp, mask, pick, Const(np.asarray(False)))
    value = imp.emit(
        graph.ReduceSumOp,
        imp.emit(graph.WhereOp, pick, upd, imp.scalar(0, data)),
        axes=(axis,),
        keepdims=False,
    )
    shape = list(imp.shape(last))
    del shape[axis]
    hit = imp.emit(graph.CompareOp, imp.reshape(last, shape), _i64(0), predicate="ge")
    return imp.emit(graph.WhereOp, hit, value, data)


def _reduction(imp: NodeContext, a: dict) -> str:
    imp.require(a, "reduction", ("none", "add", "mul", "max", "min"))
    return a["reduction"]


@handles("ScatterElements", "Scatter")
def scatter_elements(imp: NodeContext):
    scatter = imp.node.op_type == "Scatter"
    a = imp.attrs({"axis": 0} if scatter else {"axis": 0, "reduction": "none"})
    red = "none" if scatter else _reduction(imp, a)
    data, idx, upd = imp.required(0), imp.required(1), imp.required(2)
    d, i = imp.shape(data), imp.shape(idx)
    r = len(d)
    if len(i) != r or imp.shape(upd) != i:
        raise imp.error(
            f"indices {list(i)} and updates {list(imp.shape(upd))} must have the rank of "
            f"data {list(d)} and one shape"
        )
    if r == 0:
        raise imp.error("data must have at least one dimension")
    ax = norm_axis(imp, a["axis"], r)
    if any(i[k] > d[k] for k in range(r) if k != ax):
        raise imp.error(f"indices shape {list(i)} exceeds data shape {list(d)} off the axis")
    idx = _wrap(imp, idx, _i64(d[ax]))
    # position j along the axis (data's extent) before the update's index (the indices')
    ins = (*i[:ax], 1, *i[ax:])
    mask = imp.emit(
        graph.CompareOp,
        imp.reshape(idx, ins),
        _i64(np.arange(d[ax]).reshape((1,) * ax + (d[ax],) + (1,) * (r - ax))),
        predicate="eq",
    )
    src = _i64(np.arange(i[ax]).reshape((1,) * (ax + 1) + (i[ax],) + (1,) * (r - ax - 1)))
    region = tuple(d[k] if k == ax else i[k] for k in range(r))
    part = data
    if region != d:
        part = imp.emit(
            graph.SliceOp, data, starts=(0,) * r, ends=region, axes=tuple(range(r)), steps=(1,) * r
        )
    out = _scatter(imp, part, mask, imp.reshape(upd, ins), src, ax + 1, red)
    if region == d:
        return [out]
    pads = [0] * r + [d[k] - region[k] for k in range(r)]
    inside = np.zeros(d, bool)
    inside[tuple(slice(0, n) for n in region)] = True
    return [imp.emit(graph.WhereOp, Const(inside), imp.emit(graph.PadOp, out, pads=pads), data)]


def _linear(imp: NodeContext, idx: Value, dims: tuple[int, ...]) -> Value:
    """The row-major offset into dims of every index tuple (the last axis of idx)."""
    strides = [math.prod(dims[m + 1 :]) for m in range(len(dims))]
    idx = _wrap(imp, idx, _i64(dims))
    scaled = imp.emit(graph.MulOp, idx, _i64(strides))
    return imp.emit(graph.ReduceSumOp, scaled, axes=(len(imp.shape(idx)) - 1,), keepdims=False)


@handles("ScatterND")
def scatter_nd(imp: NodeContext):
    a = imp.attrs({"reduction": "none"})
    red = _reduction(imp, a)
    data, idx, upd = imp.required(0), imp.required(1), imp.required(2)
    d, q, u = imp.shape(data), imp.shape(idx), imp.shape(upd)
    if not q or not 1 <= q[-1] <= len(d) or u != (*q[:-1], *d[q[-1] :]):
        raise imp.error(
            f"indices {list(q)} and updates {list(u)} do not fit data {list(d)} "
            f"(updates must be indices.shape[:-1] + data.shape[indices.shape[-1]:])"
        )
    k = q[-1]
    lead, tail = math.prod(d[:k]), d[k:]
    n = math.prod(q[:-1])
    flat = imp.reshape(_linear(imp, idx, d[:k]), (1, n) + (1,) * len(tail))
    rows = _i64(np.arange(lead).reshape((lead, 1) + (1,) * len(tail)))
    mask = imp.emit(graph.CompareOp, flat, rows, predicate="eq")  # [lead, n, 1...]
    src = _i64(np.arange(n).reshape((1, n) + (1,) * len(tail)))
    out = _scatter(
        imp,
        imp.reshape(data, (lead, *tail)),
        mask,
        imp.reshape(upd, (1, n, *tail)),
        src,
        1,
        red,
    )
    return [imp.reshape(out, d)]


@handles("GatherND")
def gather_nd(imp: NodeContext):
    a = imp.attrs({"batch_dims": 0})
    data, idx = imp.required(0), imp.required(1)
    d, q = imp.shape(data), imp.shape(idx)
    b = a["batch_dims"]
    if not q or not 0 <= b < len(q) or q[:b] != d[:b] or not 1 <= q[-1] <= len(d) - b:
        raise imp.error(f"indices {list(q)} with batch_dims {b} do not fit data {list(d)}")
    k = q[-1]
    lin = _linear(imp, idx, d[b : b + k])  # [q[:-1]]
    if b:
        inner = math.prod(d[b : b + k])
        grid = np.indices(q[:b], dtype=np.int64)
        strides = [math.prod(q[m + 1 : b]) for m in range(b)]
        batch = sum((grid[m] * strides[m] for m in range(b)), np.zeros(q[:b], np.int64))
        offset = (batch * inner).reshape(q[:b] + (1,) * (len(q) - 1 - b))
        lin = imp.emit(graph.AddOp, lin, _i64(offset))
    rows = math.prod(d[: b + k])
    flat = imp.reshape(data, (rows, *d[b + k :]))
    return [imp.emit(graph.GatherOp, flat, lin, axis=0)]


def _ranked(imp: NodeContext, x: Value) -> Value:
    """What TopK compares: x with a NaN as +inf (so every element has one rank; a NaN ties
    with +inf, the lower index first; torch ranks a NaN above +inf, onnxruntime by mode)."""
    if imp.dtype(x).kind != "f":
        return x
    nan = imp.emit(graph.CompareOp, x, x, predicate="ne")
    return imp.emit(graph.WhereOp, nan, imp.scalar(float("inf"), x), x)


# TopK's rank count holds an n x n comparison per row: past RANK_TOPK_MAX elements it picks
# the k elements one at a time instead (O(n k), k <= SELECT_TOPK_MAX steps of a few ops)
RANK_TOPK_MAX = 1024
SELECT_TOPK_MAX = 64


def _top_k_by_selection(imp: NodeContext, x: Value, ax: int, k: int, largest: bool):
    """k steps, each taking the first extreme of the elements not taken yet (ties to the
    lower index); the choice runs on _ranked(x), the values are read from x."""
    s = imp.shape(x)
    n = s[ax]
    if n > 2**24:
        raise imp.error(f"axis {ax} has {n} elements; dlpc's TopK takes 2**24")
    dt = imp.dtype(x)
    work = _ranked(imp, x)
    if dt.kind == "f":
        past = Const(np.asarray(-np.inf if largest else np.inf, dt))
    else:
        info = np.iinfo(dt) if dt.kind in "iu" else None
        if info is None:
            raise imp.error(f"input 0 has element type {dt.name}; TopK needs numbers")
        past = Const(np.asarray(info.min if largest else info.max, dt))
    shape = [1] * len(s)
    shape[ax] = n
    iota = Const(np.arange(n, dtype=np.float32).reshape(shape))  # exact below 2**24
    beyond = Const(np.asarray(n, np.float32))
    extreme = graph.ReduceMaxOp if largest else graph.ReduceMinOp
    taken: Value | None = None  # bool: the elements already output
    values, where = [], []
    for _ in range(k):
        cand = work if taken is None else imp.emit(graph.WhereOp, taken, past, work)
        m = imp.emit(extreme, cand, axes=(ax,), keepdims=True)
        hit = imp.emit(graph.CompareOp, cand, m, predicate="eq")
        if taken is not None:  # a taken element equal to m (all left are `past`) is no hit
            hit = imp.emit(graph.WhereOp, taken, Const(np.asarray(False)), hit)
        pos = imp.emit(
            graph.ReduceMinOp,
            imp.emit(graph.WhereOp, hit, iota, beyond),
            axes=(ax,),
            keepdims=True,
        )
        sel = imp.emit(graph.CompareOp, iota, pos, predicate="eq")
        values.append(
            imp.emit(
                graph.ReduceSumOp,
                imp.emit(graph.WhereOp, sel, x, imp.scalar(0, x)),
                axes=(ax,),
                keepdims=True,
            )
        )
        where.append(cast_to(imp, pos, I64))
        taken = sel if taken is None else imp.emit(graph.WhereOp, sel, sel, taken)
    if k == 1:
        return [values[0], where[0]]
    return [
        imp.emit(graph.ConcatOp, *values, axis=ax),
        imp.emit(graph.ConcatOp, *where, axis=ax),
    ]


@handles("TopK")
def top_k(imp: NodeContext):
    a = imp.attrs({"axis": -1, "largest": 1, "sorted": 1})
    x = imp.required(0)
    s = imp.shape(x)
    if not s:
        raise imp.error("input 0 must have at least one dimension")
    ax = norm_axis(imp, a["axis"], len(s))
    k = int(imp.required_const(1, "k").reshape(-1)[0])
    n = s[ax]
    if not 0 <= k <= n:
        raise imp.error(f"k = {k} is out of range for an axis of {n} elements")
    if k == 0:
        raise imp.error("k = 0 gives an empty tensor, which dlpc does not support")
    if n > RANK_TOPK_MAX:
        if k > SELECT_TOPK_MAX:
            raise imp.error(
                f"k = {k} over an axis of {n} elements: dlpc's TopK takes an axis of at most "
                f"{RANK_TOPK_MAX} elements or k <= {SELECT_TOPK_MAX}"
            )
        return _top_k_by_selection(imp, x, ax, k, bool(a["largest"]))
    tail = (1,) * (len(s) - ax - 1)
    key = _ranked(imp, x)
    xi = imp.reshape(key, (*s[:ax], n, 1, *s[ax + 1 :]))  # element i at ax
    kj = imp.reshape(key, (*s[:ax], 1, n, *s[ax + 1 :]))  # its rivals j at ax + 1
    xj = imp.reshape(x, (*s[:ax], 1, n, *s[ax + 1 :]))
    better = imp.emit(graph.CompareOp, kj, xi, predicate="gt" if a["largest"] else "lt")
    same = imp.emit(graph.CompareOp, kj, xi, predicate="eq")
    j_first = Const(
        (np.arange(n).reshape(1, n) < np.arange(n).reshape(n, 1)).reshape((n, n) + tail)
    )
    beats = imp.emit(graph.WhereOp, same, j_first, better)
    rank = imp.emit(
        graph.ReduceSumOp,
        imp.emit(graph.WhereOp, beats, _i64(1), _i64(0)),
        axes=(ax + 1,),
        keepdims=False,
    )  # [s]: how many elements come before i
    ranks = imp.reshape(rank, (*s[:ax], 1, n, *s[ax + 1 :]))
    slot = _i64(np.arange(k).reshape((k, 1) + tail))
    sel = imp.emit(graph.CompareOp, ranks, slot, predicate="eq")  # [.., k, n, ..]
    values = imp.emit(
        graph.ReduceSumOp,
        imp.emit(graph.WhereOp, sel, xj, imp.scalar(0, x)),
        axes=(ax + 1,),
        keepdims=False,
    )
    where = imp.emit(
        graph.ReduceSumOp,
        imp.emit(graph.WhereOp, sel, _i64(np.arange(n).reshape((1, n) + tail)), _i64(0)),
        axes=(ax + 1,),
        keepdims=False,
    )
    return [values, where]


@handles("NonZero")
def nonzero(imp: NodeContext):
    """The indices of the non-zero elements, [rank, count]: the count depends on the values,
    so the input must be known when the model is built. When it comes from graph inputs
    the compiled model is specialised on their values (one build per distinct value, as
    for Reshape's shape); elsewhere (a loop body's value) it is refused in one line."""
    imp.attrs({})
    x = imp.required_const(0, "X")
    found = np.asarray(np.nonzero(x), np.int64).reshape(x.ndim, -1)
    if found.shape[1] == 0:
        raise imp.error("no element is non-zero: an empty result, which dlpc does not support")
    return [Const(found)]


@handles("TensorScatter")
def tensor_scatter(imp: NodeContext):
    """A KV-cache write: cache[b, .., (write_indices[b] + u) (mod S when circular), ..] =
    update[b, .., u, ..] along `axis`, as ScatterElements' mask over the cache's axis (a
    linear write past the end, undefined in ONNX, leaves those rows as they are)."""
    a = imp.attrs({"axis": -2, "mode": "linear"})
    imp.require(a, "mode", ("linear", "circular"))
    cache, upd, wi = imp.required(0), imp.required(1), imp.input(2)
    c, u = imp.shape(cache), imp.shape(upd)
    r = len(c)
    ax = norm_axis(imp, a["axis"], r)
    if r < 2 or ax == 0 or len(u) != r or any(u[k] != c[k] for k in range(r) if k != ax):
        raise imp.error(
            f"update {list(u)} must match past_cache {list(c)} off the axis {a['axis']} "
            f"(not the batch axis)"
        )
    if u[ax] > c[ax]:
        raise imp.error(f"update has {u[ax]} rows on axis {ax}, the cache {c[ax]}")
    steps = _i64(np.arange(u[ax]).reshape((1,) * (ax + 1) + (u[ax],) + (1,) * (r - ax - 1)))
    if wi is None:
        target: Value = steps
    else:
        if imp.shape(wi) != (c[0],):
            raise imp.error(f"write_indices {list(imp.shape(wi))} must be [{c[0]}]")
        start = imp.reshape(cast_to(imp, wi, I64), (c[0],) + (1,) * r)
        target = imp.emit(graph.AddOp, start, steps)
        if a["mode"] == "circular":  # start < S and u < S: one subtraction wraps
            size = _i64(c[ax])
            over = imp.emit(graph.CompareOp, target, size, predicate="ge")
            target = imp.emit(graph.WhereOp, over, imp.emit(graph.SubOp, target, size), target)
    rows = _i64(np.arange(c[ax]).reshape((1,) * ax + (c[ax],) + (1,) * (r - ax)))
    mask = imp.emit(graph.CompareOp, target, rows, predicate="eq")
    ins = (*u[:ax], 1, *u[ax:])
    return [_scatter(imp, cache, mask, imp.reshape(upd, ins), steps, ax + 1, "none")]


@handles("OneHot")
def one_hot(imp: NodeContext):
    """values[1] where index == position along the new axis, values[0] elsewhere (an index
    out of [-depth, depth) gives a row of values[0]); depth is specialised on."""
    a = imp.attrs({"axis": -1})
    idx, vals = imp.required(0), imp.required(2)
    depth = int(np.asarray(imp.required_const(1, "depth")).reshape(-1)[0])
    if depth < 1:
        raise imp.error(f"depth = {depth} must be positive")
    if imp.shape(vals) != (2,):
        raise imp.error(f"values must have shape [2], got {list(imp.shape(vals))}")
    s = imp.shape(idx)
    ax = norm_axis(imp, a["axis"], len(s) + 1)
    idx = _wrap(imp, idx, _i64(depth))
    spot = _i64(np.arange(depth).reshape((depth,) + (1,) * (len(s) - ax)))
    hit = imp.emit(graph.CompareOp, imp.reshape(idx, (*s[:ax], 1, *s[ax:])), spot, predicate="eq")
    off, on = (imp.reshape(_cut1(imp, vals, k), ()) for k in (0, 1))
    return [imp.emit(graph.WhereOp, hit, on, off)]


def _cut1(imp: NodeContext, v: Value, k: int) -> Value:
    if isinstance(v, Const):
        return Const(v.array[k : k + 1])
    return imp.emit(graph.SliceOp, v, starts=(k,), ends=(k + 1,), axes=(0,), steps=(1,))


@handles("ReverseSequence")
def reverse_sequence(imp: NodeContext):
    """Each batch entry's first sequence_lens[b] steps reversed along time_axis, the rest
    kept: one graph.gather of the flattened input at computed flat indices."""
    a = imp.attrs({"batch_axis": 1, "time_axis": 0})
    x, lens = imp.required(0), imp.required(1)
    s = imp.shape(x)
    if len(s) < 2 or {a["batch_axis"], a["time_axis"]} not in ({0, 1}, {1, 0}):
        raise imp.error("batch_axis and time_axis must be 0 and 1 (in either order)")
    ba, ta = a["batch_axis"], a["time_axis"]
    if imp.shape(lens) != (s[ba],):
        raise imp.error(f"sequence_lens {list(imp.shape(lens))} must be [{s[ba]}]")
    lens_e = imp.reshape(
        cast_to(imp, lens, I64), tuple(s[ba] if k == ba else 1 for k in range(len(s)))
    )
    t = _i64(np.arange(s[ta]).reshape(tuple(s[ta] if k == ta else 1 for k in range(len(s)))))
    inside = imp.emit(graph.CompareOp, t, lens_e, predicate="lt")
    back = imp.emit(graph.SubOp, imp.emit(graph.SubOp, lens_e, _i64(1)), t)
    src = imp.emit(graph.WhereOp, inside, back, t)  # the time step each element reads
    strides = [math.prod(s[k + 1 :]) for k in range(len(s))]
    grid = np.indices(s, dtype=np.int64)
    base = sum((grid[k] * strides[k] for k in range(len(s)) if k != ta), np.zeros(s, np.int64))
    flat = imp.emit(graph.AddOp, imp.emit(graph.MulOp, src, _i64(strides[ta])), _i64(base))
    return [imp.emit(graph.GatherOp, imp.reshape(x, (math.prod(s),)), flat, axis=0)]


@handles("Compress")
def compress(imp: NodeContext):
    """The slices along `axis` (of the flattened input without one) where condition is
    true: a data-dependent size, so the condition is specialised on (a graph input's
    value), then one graph.gather at those positions."""
    a = imp.attrs({"axis": None})
    x = imp.required(0)
    cond = np.asarray(imp.required_const(1, "condition")).reshape(-1).astype(bool)
    if a["axis"] is None:
        x = imp.reshape(x, (math.prod(imp.shape(x)),))
        ax = 0
    else:
        ax = norm_axis(imp, a["axis"], len(imp.shape(x)))
    n = imp.shape(x)[ax]
    keep = np.nonzero(cond[:n])[0]
    if keep.size == 0:
        raise imp.error("condition selects nothing: an empty result, which dlpc does not support")
    return [imp.emit(graph.GatherOp, x, _i64(keep), axis=ax)]


@handles("Unique")
def unique(imp: NodeContext):
    """np.unique at import time (its sizes depend on the values: a graph input is
    specialised on): Y, the first occurrence of each, the inverse map and the counts;
    `sorted=0` keeps the order of first occurrence."""
    a = imp.attrs({"axis": None, "sorted": 1})
    x = imp.required_const(0, "X")
    ax = None if a["axis"] is None else norm_axis(imp, a["axis"], x.ndim)
    if x.size == 0:
        raise imp.error("an empty input gives empty outputs, which dlpc does not support")
    y, first, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True, axis=ax
    )
    inverse = inverse.reshape(-1)
    if not a["sorted"]:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if ax is None else ax)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return [Const(np.asarray(y, x.dtype))] + [
        Const(np.asarray(v, np.int64)) for v in (first, inverse, counts)
    ]


def _suppresses(a: np.ndarray, b: np.ndarray, center: bool, iou_threshold: float) -> bool:
    """Does box b overlap box a by more than iou_threshold (ONNX's IoU: corners in any
    order, or center/size with center_point_box=1; an empty box overlaps nothing)?"""
    if center:
        lo_a, hi_a = a[:2] - a[2:] / 2, a[:2] + a[2:] / 2  # (x, y)
        lo_b, hi_b = b[:2] - b[2:] / 2, b[:2] + b[2:] / 2
    else:  # [y1, x1, y2, x2] -> (x, y)
        lo_a, hi_a = np.minimum(a[[1, 0]], a[[3, 2]]), np.maximum(a[[1, 0]], a[[3, 2]])
        lo_b, hi_b = np.minimum(b[[1, 0]], b[[3, 2]]), np.maximum(b[[1, 0]], b[[3, 2]])
    lo, hi = np.maximum(lo_a, lo_b), np.minimum(hi_a, hi_b)
    if np.any(hi <= lo):
        return False
    inter = float(np.prod(hi - lo))
    if inter <= 0:  # (underflow: each area is at least inter, so the union is positive)
        return False
    area_a, area_b = float(np.prod(hi_a - lo_a)), float(np.prod(hi_b - lo_b))
    return inter / (area_a + area_b - inter) > iou_threshold


@handles("NonMaxSuppression")
def non_max_suppression(imp: NodeContext):
    """ONNX's greedy NMS per batch and class at import time (the number of boxes kept
    depends on the values: graph inputs are specialised on): [kept, 3] of (batch, class,
    box), best score first (ties to the lower box index), a box dropped when its IoU with
    a kept one exceeds iou_threshold, only scores above score_threshold considered."""
    a = imp.attrs({"center_point_box": 0})
    imp.require(a, "center_point_box", (0, 1))
    boxes = np.asarray(imp.required_const(0, "boxes"), np.float64)
    scores = np.asarray(imp.required_const(1, "scores"), np.float64)

    def scalar(i: int, what: str, default):
        v = imp.const(i, what) if imp.input(i) is not None else None
        return default if v is None or v.size == 0 else v.reshape(-1)[0]

    keep_max = max(int(scalar(2, "max_output_boxes_per_class", 0)), 0)
    iou = float(scalar(3, "iou_threshold", 0.0))
    floor = scalar(4, "score_threshold", None)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3:
        raise imp.error(f"boxes {list(boxes.shape)} must be [batches, boxes, 4], scores 3-D")
    if scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise imp.error(f"scores {list(scores.shape)} do not match boxes {list(boxes.shape)}")
    kept = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [k for k in range(s.size) if floor is None or s[k] > float(floor)]
            cand.sort(key=lambda k: (-s[k], k))
            chosen: list[int] = []
            for k in cand:
                if len(chosen) >= keep_max:
                    break
                if not any(
                    _suppresses(boxes[b, j], boxes[b, k], bool(a["center_point_box"]), iou)
                    for j in chosen
                ):
                    chosen.append(k)
            kept += [(b, c, k) for k in chosen]
    if not kept:
        raise imp.error("no box is selected: an empty result, which dlpc does not support")
    return [Const(np.asarray(kept, np.int64))]
