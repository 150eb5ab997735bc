"""Cumulative and one-hot operators as compositions of graph ops: CumSum / CumProd (a
masked sum / product over a triangular mask: out[i] = reduce over k of (k <= i ? x[k] :
identity), with `exclusive` and `reverse` choosing the mask; O(n^2) along the axis, no scan
primitive), Hardmax (one-hot of the first maximum) and EyeLike (an import-time constant:
its value depends only on the input's static shape)."""

from __future__ import annotations

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, onnx_dtype_to_numpy, onnx_type_name


@handles("CumSum", "CumProd")
def cumulative(imp: NodeContext):
    a = imp.attrs({"exclusive": 0, "reverse": 0})
    x = imp.required(0)
    s = imp.shape(x)
    if not s:
        raise imp.error("input 0 must have at least one dimension")
    axis = norm_axis(imp, int(imp.required_const(1, "axis").reshape(())), len(s))
    n = s[axis]
    i, k = np.arange(n).reshape(n, 1), np.arange(n).reshape(1, n)
    if a["reverse"]:
        mask = k > i if a["exclusive"] else k >= i
    else:
        mask = k < i if a["exclusive"] else k <= i
    mask = mask.reshape((n, n) + (1,) * (len(s) - axis - 1))
    xk = imp.reshape(x, (*s[:axis], 1, *s[axis:]))  # the summed index k at axis + 1
    product = imp.node.op_type == "CumProd"
    fill = imp.scalar(1 if product else 0, x)
    masked = imp.emit(graph.WhereOp, Const(mask), xk, fill)
    reduce = graph.ReduceProdOp if product else graph.ReduceSumOp
    return [imp.emit(reduce, masked, axes=(axis + 1,), keepdims=False)]


@handles("Hardmax")
def hardmax(imp: NodeContext):
    """1 at the first maximum along the axis, 0 elsewhere (NaN counts as the maximum, as
    ArgMax takes it)."""
    a = imp.attrs({"axis": -1})
    x = imp.required(0)
    s = imp.shape(x)
    axis = norm_axis(imp, a["axis"], len(s))
    if s[axis] > 2**24:
        raise imp.error(f"axis {axis} has {s[axis]} elements; dlpc's Hardmax takes 2**24")
    m = imp.emit(graph.ReduceMaxOp, x, axes=(axis,), keepdims=True)
    hit = imp.emit(graph.CompareOp, x, m, predicate="eq")
    if imp.dtype(x).kind == "f":
        nan = imp.emit(graph.CompareOp, x, x, predicate="ne")
        hit = imp.emit(graph.WhereOp, nan, Const(np.asarray(True)), hit)
    shape = [1] * len(s)
    shape[axis] = s[axis]
    iota = Const(np.arange(s[axis], dtype=np.float32).reshape(shape))  # exact below 2**24
    cand = imp.emit(graph.WhereOp, hit, iota, Const(np.asarray(s[axis], np.float32)))
    first = imp.emit(graph.ReduceMinOp, cand, axes=(axis,), keepdims=True)
    one_hot = imp.emit(graph.CompareOp, iota, first, predicate="eq")
    return [imp.emit(graph.WhereOp, one_hot, imp.scalar(1, x), imp.scalar(0, x))]


@handles("EyeLike")
def eye_like(imp: NodeContext):
    a = imp.attrs({"dtype": None, "k": 0})
    x = imp.required(0)
    s = imp.shape(x)
    if len(s) != 2:
        raise imp.error(f"input 0 must be 2-D, got shape {list(s)}")
    dt = imp.dtype(x) if a["dtype"] is None else onnx_dtype_to_numpy(a["dtype"])
    if dt is None:
        raise imp.error(f"attribute 'dtype' = {onnx_type_name(a['dtype'])} is not supported")
    return [Const(np.eye(s[0], s[1], k=a["k"], dtype=dt))]
