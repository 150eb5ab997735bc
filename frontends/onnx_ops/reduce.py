"""ONNX reductions: Reduce* over axes given as an attribute or an input, ArgMax / ArgMin."""

from __future__ import annotations

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext

REDUCE = {
    "ReduceSum": graph.ReduceSumOp,
    "ReduceMean": graph.ReduceMeanOp,
    "ReduceMax": graph.ReduceMaxOp,
    "ReduceMin": graph.ReduceMinOp,
    "ReduceProd": graph.ReduceProdOp,
    "ReduceSumSquare": graph.ReduceSumOp,
    "ReduceL1": graph.ReduceSumOp,
    "ReduceL2": graph.ReduceSumOp,
    "ReduceLogSum": graph.ReduceSumOp,
    "ReduceLogSumExp": graph.ReduceSumOp,
}


@handles(*REDUCE)
def reduce(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
    x = imp.required(0)
    axes = a["axes"]
    if axes is None:
        given = imp.const(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if not axes:
        if a["noop_with_empty_axes"]:
            return [x]
        axes = list(range(len(imp.shape(x))))
    axes = tuple(int(v) for v in axes)
    if op in ("ReduceSumSquare", "ReduceL2"):
        x = imp.emit(graph.MulOp, x, x)
    elif op == "ReduceL1":
        x = imp.emit(graph.AbsOp, x)
    elif op == "ReduceLogSumExp":
        x = imp.emit(graph.ExpOp, x)
    y = imp.emit(REDUCE[op], x, axes=axes, keepdims=bool(a["keepdims"]))
    if op == "ReduceL2":
        y = imp.emit(graph.SqrtOp, y)
    elif op in ("ReduceLogSum", "ReduceLogSumExp"):
        y = imp.emit(graph.LogOp, y)
    return [y]


@handles("ArgMax", "ArgMin")
def arg_extreme(imp: NodeContext):
    """The first (or last, select_last_index) position of the extreme along the axis:
    m = reduce_max(x); where(x == m, iota, n) reduced by min (or where(.., -1) by max)."""
    a = imp.attrs({"axis": 0, "keepdims": 1, "select_last_index": 0})
    op = imp.op_type
    x = imp.required(0)
    s = imp.shape(x)
    axis = norm_axis(imp, a["axis"], len(s))
    ext = graph.ReduceMaxOp if op == "ArgMax" else graph.ReduceMinOp
    m = imp.emit(ext, x, axes=(axis,), keepdims=True)
    hit = imp.emit(graph.CompareOp, x, m, predicate="eq")
    if imp.dtype(x).kind == "f":  # a NaN is the extreme (reduce_max/min propagate it): its
        # position is a hit, as numpy's and torch's argmax/argmin take it (x == NaN is false)
        nan = imp.emit(graph.CompareOp, x, x, predicate="ne")
        hit = imp.emit(graph.WhereOp, nan, Const(np.asarray(True)), hit)
    shape = [1] * len(s)
    shape[axis] = s[axis]
    if s[axis] > 2**24:
        raise imp.error(f"axis {axis} has {s[axis]} elements; dlpc's Arg{op[3:]} takes 2**24")
    # positions as float32 (exact below 2**24): float reductions are what every backend has
    iota = Const(np.arange(s[axis], dtype=np.float32).reshape(shape))
    last = bool(a["select_last_index"])
    other = Const(np.asarray(-1 if last else s[axis], np.float32))
    cand = imp.emit(graph.WhereOp, hit, iota, other)
    pick = graph.ReduceMaxOp if last else graph.ReduceMinOp
    y = imp.emit(pick, cand, axes=(axis,), keepdims=bool(a["keepdims"]))
    return [cast_to(imp, y, np.dtype(np.int64))]
