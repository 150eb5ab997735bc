"""ONNX data movement and shape operators: Reshape, Flatten, (Un)Squeeze, Transpose,
Concat, Split, Slice, Gather(Elements), Expand, Tile, DepthToSpace / SpaceToDepth,
Trilu, Pad, Shape, Size, and the import-time-only ConstantOfShape / Range."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from xdsl.ir import SSAValue

from dlpc.dialects import graph, symdims
from dlpc.frontends.onnx_ops.dynamic_slice import dynamic_slice
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value


def _resolve_shape(imp: NodeContext, in_shape, target, allowzero: bool) -> tuple[int, ...]:
    target = [dim(d) for d in target]
    if allowzero and 0 in target:
        raise imp.error(
            "attribute 'allowzero' = 1 with a 0 dim gives an empty tensor, "
            "which dlpc does not support"
        )
    for i, d in enumerate(target):
        if isinstance(d, int) and d < -1:  # (-1 is the one inferred dim)
            raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
        if d == 0:
            if i >= len(in_shape):  # 0 copies the input's dim i, which must exist
                raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
            target[i] = in_shape[i]
    total = math.prod(in_shape)
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        if known == 0 or total % known or target.count(-1) > 1:
            raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
        target[target.index(-1)] = total // known
    if math.prod(target) != total:
        raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
    return tuple(target)


def dim(d) -> int:
    """An entry of a shape value: an int, or a symbolic dim (`dialects.symdims`; it acts
    as an int in shape arithmetic)."""
    return cast(int, d) if isinstance(d, symdims.SymDim) else int(d)


@handles("Reshape")
def reshape(imp: NodeContext):
    a = imp.attrs({"allowzero": 0})
    x = imp.required(0)
    shape = _resolve_shape(
        imp, imp.shape(x), imp.required_const(1, "shape").reshape(-1), bool(a["allowzero"])
    )
    return [imp.reshape(x, shape)]


@handles("Flatten")
def flatten(imp: NodeContext):
    a = imp.attrs({"axis": 1})
    x = imp.required(0)
    s = imp.shape(x)
    axis = a["axis"] + len(s) if a["axis"] < 0 else a["axis"]  # axis in [-r, r]
    if not 0 <= axis <= len(s):
        raise imp.error(f"attribute 'axis' = {a['axis']} is out of range for rank {len(s)}")
    return [imp.reshape(x, (math.prod(s[:axis]), math.prod(s[axis:])))]


@handles("Squeeze")
def squeeze(imp: NodeContext):
    a = imp.attrs({"axes": None})
    x = imp.required(0)
    s = imp.shape(x)
    axes = a["axes"]
    if axes is None:
        given = imp.const(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if axes is None:
        axes = [i for i, d in enumerate(s) if d == 1]
    axes = {norm_axis(imp, int(i), len(s), "axes") for i in axes}
    for i in axes:
        if s[i] != 1:
            raise imp.error(f"cannot squeeze axis {i} of size {s[i]}")
    return [imp.reshape(x, [d for i, d in enumerate(s) if i not in axes])]


@handles("Unsqueeze")
def unsqueeze(imp: NodeContext):
    a = imp.attrs({"axes": None})
    x = imp.required(0)
    axes = a["axes"]
    if axes is None:
        axes = imp.required_const(1, "axes").reshape(-1).tolist()
    s = list(imp.shape(x))
    rank = len(s) + len(axes)
    norm = sorted(norm_axis(imp, int(i), rank, "axes") for i in axes)
    for i in norm:
        s.insert(i, 1)
    return [imp.reshape(x, s)]


@handles("Transpose")
def transpose(imp: NodeContext):
    a = imp.attrs({"perm": None})
    x = imp.required(0)
    perm = tuple(a["perm"]) if a["perm"] is not None else None
    if perm == tuple(range(len(imp.shape(x)))):
        return [x]
    return [imp.emit(graph.TransposeOp, x, perm=perm)]


@handles("Concat")
def concat(imp: NodeContext):
    a = imp.attrs({"axis": None})
    if a["axis"] is None:
        raise imp.error("attribute 'axis' is required")
    ins = [v for i in range(len(imp.node.input)) if (v := imp.input(i)) is not None]
    ins = [v for v in ins if math.prod(imp.shape(v)) > 0]  # empty pieces add nothing
    if len(ins) == 1:
        return [ins[0]]
    return [imp.emit(graph.ConcatOp, *ins, axis=a["axis"])]


def _slice(imp: NodeContext, x: Value, axis: int, start: int, stop: int) -> Value:
    return imp.emit(graph.SliceOp, x, starts=(start,), ends=(stop,), axes=(axis,))


@handles("Split")
def split(imp: NodeContext):
    a = imp.attrs({"axis": 0, "split": None, "num_outputs": None})
    x = imp.required(0)
    s = imp.shape(x)
    axis = norm_axis(imp, a["axis"], len(s))
    sizes = a["split"]
    if sizes is None:
        given = imp.const(1, "split")
        sizes = None if given is None else given.reshape(-1).tolist()
    n = len(imp.node.output)
    if sizes is None:
        n = a["num_outputs"] or n
        chunk = -(-s[axis] // n)
        sizes = [min(chunk, s[axis] - i * chunk) for i in range(n)]
    if sum(sizes) != s[axis] or any(v < 0 for v in sizes):
        raise imp.error(f"split sizes {list(sizes)} do not partition axis {axis} of size {s[axis]}")
    outs, start = [], 0
    for size in sizes:
        outs.append(_slice(imp, x, axis, start, start + size))
        start += size
    return outs


@handles("Slice")
def slice_(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    if any(isinstance(imp.input(k), SSAValue) for k in (1, 2)):  # run-time offsets
        y = dynamic_slice(imp)
        if y is not None:
            return [y]
    starts = imp.required_const(1, "starts").reshape(-1).tolist()
    ends = imp.required_const(2, "ends").reshape(-1).tolist()
    axes = imp.const(3, "axes")
    steps = imp.const(4, "steps")
    axes = list(range(len(starts))) if axes is None else axes.reshape(-1).tolist()
    steps = [1] * len(starts) if steps is None else steps.reshape(-1).tolist()
    return [imp.emit(graph.SliceOp, x, starts=starts, ends=ends, axes=axes, steps=steps)]


@handles("Gather")
def gather(imp: NodeContext):
    a = imp.attrs({"axis": 0})
    idx = imp.required(1)
    if isinstance(idx, Const) and idx.array.dtype != np.int64:
        idx = Const(idx.array.astype(np.int64))
    return [imp.emit(graph.GatherOp, imp.required(0), idx, axis=a["axis"])]


@handles("GatherElements")
def gather_elements(imp: NodeContext):
    """out[i][j][k] = data[i][idx[i][j][k]][k] (axis 1) as one graph.gather on the flattened
    data: flat = idx * stride[axis] + sum over the other axes k of i_k * stride[k] (a
    constant); negative indices count from the end."""
    a = imp.attrs({"axis": 0})
    data, idx = imp.required(0), imp.required(1)
    d, i = imp.shape(data), imp.shape(idx)
    r = len(d)
    if len(i) != r:
        raise imp.error(f"indices have rank {len(i)} but data has rank {r}")
    axis = norm_axis(imp, a["axis"], r)
    if any(i[k] > d[k] for k in range(r) if k != axis):
        raise imp.error(f"indices shape {list(i)} exceeds data shape {list(d)} off the axis")
    cut = tuple(i[k] if k != axis else d[k] for k in range(r))
    if cut != d:
        data = imp.emit(
            graph.SliceOp, data, starts=(0,) * r, ends=cut, axes=tuple(range(r)), steps=(1,) * r
        )
    strides = [math.prod(cut[k + 1 :]) for k in range(r)]
    idx = cast_to(imp, idx, np.dtype(np.int64))
    neg = imp.emit(graph.CompareOp, idx, Const(np.asarray(0, np.int64)), predicate="lt")
    idx = imp.emit(
        graph.WhereOp, neg, imp.emit(graph.AddOp, idx, Const(np.asarray(d[axis], np.int64))), idx
    )
    flat = imp.emit(graph.MulOp, idx, Const(np.asarray(strides[axis], np.int64)))
    if symdims.is_symbolic(i):  # the offsets as broadcast aranges, one per other axis
        if symdims.is_symbolic(strides):
            raise imp.error(f"indices {list(i)} give symbolic strides {strides}")
        for k in range(r):
            if k != axis and i[k] != 1:
                ramp = _arange(imp, i[k], tuple(i[k] if j == k else 1 for j in range(r)))
                step = Const(np.asarray(strides[k], np.int64))
                flat = imp.emit(graph.AddOp, flat, imp.emit(graph.MulOp, ramp, step))
        return [imp.emit(graph.GatherOp, imp.reshape(data, (math.prod(cut),)), flat, axis=0)]
    grid = np.indices(i, dtype=np.int64)  # (0,)-shaped for rank-0 indices: no case of its own
    base = sum((grid[k] * strides[k] for k in range(r) if k != axis), np.zeros(i, np.int64))
    flat = imp.emit(graph.AddOp, flat, Const(np.asarray(base, np.int64)))
    return [imp.emit(graph.GatherOp, imp.reshape(data, (math.prod(cut),)), flat, axis=0)]


@handles("Expand")
def expand(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    target = tuple(dim(d) for d in imp.required_const(1, "shape").reshape(-1))
    try:
        out = graph.broadcast_shapes(imp.shape(x), target)
    except Exception:  # noqa: BLE001 - VerifyException with the shapes
        raise imp.error(f"cannot expand {list(imp.shape(x))} to {list(target)}") from None
    if out == imp.shape(x):
        return [x]
    return [imp.emit(graph.BroadcastOp, x, shape=out)]


@handles("Tile")
def tile(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    reps = [int(r) for r in imp.required_const(1, "repeats").reshape(-1)]
    s = imp.shape(x)
    # tile(x, r) = reshape(broadcast(reshape(x, [1, d0, 1, d1, ...]), [r0, d0, r1, d1, ...]))
    inter = [v for d in s for v in (1, d)]
    big = [v for r, d in zip(reps, s) for v in (r, d)]
    y = imp.emit(graph.BroadcastOp, imp.reshape(x, inter), shape=big)
    return [imp.reshape(y, [r * d for r, d in zip(reps, s)])]


@handles("DepthToSpace", "SpaceToDepth")
def depth_space(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"blocksize": None, "mode": "DCR"})
    imp.require(a, "mode", ("DCR", "CRD"))
    x = imp.required(0)
    b = a["blocksize"]
    n, c, h, w = imp.shape(x)
    if op == "SpaceToDepth":  # [n, c, h/b, b, w/b, b] -> DCR [n, b, b, c, ..], CRD [n, c, b, b, ..]
        y = imp.reshape(x, (n, c, h // b, b, w // b, b))
        perm = (0, 3, 5, 1, 2, 4) if a["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
        y = imp.emit(graph.TransposeOp, y, perm=perm)
        return [imp.reshape(y, (n, c * b * b, h // b, w // b))]
    if a["mode"] == "DCR":  # [n, b, b, c', h, w] -> [n, c', h, b, w, b]
        y = imp.reshape(x, (n, b, b, c // (b * b), h, w))
        y = imp.emit(graph.TransposeOp, y, perm=(0, 3, 4, 1, 5, 2))
    else:  # CRD: [n, c', b, b, h, w] -> [n, c', h, b, w, b]
        y = imp.reshape(x, (n, c // (b * b), b, b, h, w))
        y = imp.emit(graph.TransposeOp, y, perm=(0, 1, 4, 2, 5, 3))
    return [imp.reshape(y, (n, c // (b * b), h * b, w * b))]


@handles("Trilu")
def trilu(imp: NodeContext):
    a = imp.attrs({"upper": 1})
    x = imp.required(0)
    k = imp.const(1, "k")
    k = 0 if k is None else int(k.reshape(-1)[0])
    rows, cols = imp.shape(x)[-2:]
    zeros = imp.scalar(0, x)
    if symdims.is_symbolic((rows, cols)):  # the mask from two aranges: j - i >= k (upper)
        i = _arange(imp, rows, (rows, 1))
        j = _arange(imp, cols, (1, cols))
        diff = imp.emit(graph.SubOp, j, i)
        bound = Const(np.asarray(k, np.int64))
        keep = imp.emit(graph.CompareOp, diff, bound, predicate="ge" if a["upper"] else "le")
        return [imp.emit(graph.WhereOp, keep, x, zeros)]
    mask = (
        np.triu(np.ones((rows, cols), bool), k)
        if a["upper"]
        else np.tril(np.ones((rows, cols), bool), k)
    )
    zeros = Const(np.zeros(imp.shape(x), dtype=imp.dtype(x)))
    return [imp.emit(graph.WhereOp, Const(mask), x, zeros)]


def _arange(imp: NodeContext, n, shape) -> Value:
    """0..n-1 (int64) reshaped to `shape`; n may be symbolic (a slice of an arange)."""
    if not isinstance(n, symdims.SymDim):
        return Const(np.arange(n, dtype=np.int64).reshape(shape))
    ramp = Const(np.arange(SYMBOLIC_RANGE, dtype=np.int64))
    part = imp.emit(graph.SliceOp, ramp, starts=(0,), ends=(n,), axes=(0,))
    return imp.reshape(part, shape)


@handles("Pad")
def pad(imp: NodeContext):
    a = imp.attrs({"mode": "constant"})
    imp.require(a, "mode", ("constant", "reflect", "edge", "wrap"))
    x = imp.required(0)
    rank = len(imp.shape(x))
    pads = [int(p) for p in imp.required_const(1, "pads").reshape(-1)]
    value = imp.const(2, "constant_value")
    axes = imp.const(3, "axes")
    if len(pads) != 2 * (rank if axes is None else axes.size):
        n = rank if axes is None else axes.size
        raise imp.error(f"'pads' has {len(pads)} values; {n} axes need {2 * n}")
    if axes is not None:
        axes = [norm_axis(imp, int(v), rank, "axes") for v in axes.reshape(-1)]
        full = [0] * (2 * rank)
        for k, ax in enumerate(axes):
            full[ax], full[ax + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if a["mode"] != "constant":
        return [_pad_from_input(imp, x, pads, a["mode"])]
    v = 0.0 if value is None or value.size == 0 else float(value.reshape(-1)[0])
    return [imp.emit(graph.PadOp, x, pads=pads, value=v)]


def _pad_from_input(imp: NodeContext, x: Value, pads: list[int], mode: str) -> Value:
    """reflect/edge/wrap padding, one axis at a time, as slices of x concatenated:
    reflect [1 2 3] by 2 -> [3 2 | 1 2 3 | 2 1], edge -> [1 1 | ... | 3 3],
    wrap -> [2 3 | ... | 1 2]."""
    rank = len(imp.shape(x))
    for ax in range(rank):
        begin, end = pads[ax], pads[ax + rank]
        if begin < 0 or end < 0:
            raise imp.error(f"negative pads {pads} with mode '{mode}' are not supported")
        n = imp.shape(x)[ax]
        if mode == "reflect" and max(begin, end) >= n:
            raise imp.error(f"reflect pads {pads} must be smaller than dim {ax} ({n})")
        pieces = []
        if begin:
            pieces.append(_pad_piece(imp, x, ax, n, begin, mode, front=True))
        pieces.append(x)
        if end:
            pieces.append(_pad_piece(imp, x, ax, n, end, mode, front=False))
        if len(pieces) > 1:
            x = imp.emit(graph.ConcatOp, *pieces, axis=ax)
    return x


def _pad_piece(imp: NodeContext, x: Value, ax: int, n: int, k: int, mode: str, front: bool):
    def cut(start: int, stop: int, step: int = 1) -> Value:
        if stop < 0:  # (a negative end would count from the back: "before index 0" is -n-1)
            stop = -n - 1
        return imp.emit(graph.SliceOp, x, starts=(start,), ends=(stop,), axes=(ax,), steps=(step,))

    if mode == "reflect":  # x[k], ..., x[1]  or  x[n-2], ..., x[n-1-k]
        return cut(k, 0, -1) if front else cut(n - 2, n - 2 - k, -1)
    if mode == "wrap":  # x[n-k:]  or  x[:k]  (k may exceed n: whole copies then a part)
        reps, rest = divmod(k, n)
        parts = [x] * reps
        if rest:
            parts.insert(0 if front else len(parts), cut(n - rest, n) if front else cut(0, rest))
        return parts[0] if len(parts) == 1 else imp.emit(graph.ConcatOp, *parts, axis=ax)
    edge = cut(0, 1) if front else cut(n - 1, n)  # edge: the end element, k times
    shape = list(imp.shape(edge))
    shape[ax] = k
    return imp.emit(graph.BroadcastOp, edge, shape=shape)


@handles("Shape")
def shape(imp: NodeContext):
    a = imp.attrs({"start": 0, "end": None})
    s = imp.shape(imp.required(0))[a["start"] : a["end"]]
    return [Const(np.asarray(s, dtype=object if symdims.is_symbolic(s) else np.int64))]


@handles("Size")
def size(imp: NodeContext):
    imp.attrs({})
    return [Const(np.asarray(math.prod(imp.shape(imp.required(0))), dtype=np.int64))]


# the longest Range over a symbolic dim: a slice of an arange of this many values
SYMBOLIC_RANGE = 8192


@handles("ConstantOfShape", "Range")
def import_time_only(imp: NodeContext):
    """Their output shape depends on their input values: they fold, or, over symbolic dims
    (import-time values holding SymDims), become a broadcast of the value to the symbolic
    shape / a slice of an arange up to the symbolic limit (position ids from `seq`);
    otherwise reaching this handler means an input is computed at run time (or is a graph
    input to freeze)."""
    names = {"ConstantOfShape": ["input"], "Range": ["start", "limit", "delta"]}
    values = [imp.const(i, what) for i, what in enumerate(names[imp.node.op_type])]
    # (imp.const raised for an input computed at run time; inputs all known at import
    # time were folded unless one holds a symbolic dim: that is the case left here)
    assert any(v is not None and v.dtype == object for v in values), "folded at import"
    return [_symbolic(imp, values)]


def _symbolic(imp: NodeContext, values: list) -> Value:
    if imp.node.op_type == "ConstantOfShape":
        a = imp.attrs({"value": None})
        fill = np.zeros(1, np.float32) if a["value"] is None else a["value"]
        from onnx import numpy_helper

        fill = fill if isinstance(fill, np.ndarray) else numpy_helper.to_array(fill)
        shape = tuple(dim(d) for d in values[0].reshape(-1))
        return imp.emit(graph.BroadcastOp, Const(fill.reshape(())), shape=shape)
    imp.attrs({})
    start, limit, delta = (v.reshape(()).item() for v in values)
    if isinstance(start, symdims.SymDim) or isinstance(delta, symdims.SymDim) or delta != 1:
        raise imp.error("a Range over a symbolic dim needs a constant start and delta 1")
    dtype = values[0].dtype if values[0].dtype != object else np.dtype(np.int64)
    ramp = Const(np.arange(start, start + SYMBOLIC_RANGE, dtype=dtype))
    return imp.emit(graph.SliceOp, ramp, starts=(0,), ends=(dim(limit) - start,), axes=(0,))
