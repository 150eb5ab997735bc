"""ONNX Slice at run-time offsets onto graph.dynamic_slice.

A Slice whose `starts` or `ends` are computed at run time (test_loop11 slices row i of a
constant in a Loop body: starts = [i], ends = [i + 1]) still has a static result when
ends - starts is known at import time. Both are traced back through reshapes and
additions of import-time scalars to a common run-time base (ends = base + c1, starts =
base + c0: sizes c1 - c0), with steps 1; otherwise starts and ends must be known at import
time as for any Slice (a graph input is specialised on, anything else refused in one line).

Out of range the two differ: ONNX clamps start and end to the dim (a shorter result),
graph.dynamic_slice keeps the size and clamps the start to [0, dim - size].
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value


def _constant(v: SSAValue) -> np.ndarray | None:
    op = v.owner
    return op.to_numpy() if isinstance(op, graph.ConstantOp) else None


def _affine(v: Value) -> tuple[SSAValue | None, np.ndarray]:
    """(base, offset) with v = base + offset elementwise (base None: v is constant),
    through reshapes and additions / subtractions of constants."""
    offset = np.zeros((), np.int64)
    while True:
        if isinstance(v, Const):
            return None, (v.array.astype(np.int64) + offset).reshape(-1)
        known = _constant(v)
        if known is not None:
            return None, (known.astype(np.int64) + offset).reshape(-1)
        op = v.owner
        if isinstance(op, graph.ReshapeOp):
            v = op.operands[0]
            continue
        if isinstance(op, graph.AddOp | graph.SubOp):
            lhs, rhs = op.operands
            c = _constant(rhs)
            if c is not None and c.size == 1:
                offset = offset + (c.reshape(()) if isinstance(op, graph.AddOp) else -c.reshape(()))
                v = lhs
                continue
            c = _constant(lhs)
            if c is not None and c.size == 1 and isinstance(op, graph.AddOp):
                offset, v = offset + c.reshape(()), rhs
                continue
        return v, offset.reshape(-1)


def dynamic_slice(imp: NodeContext) -> Value | None:
    """Slice with run-time starts or ends: graph.dynamic_slice of the traced sizes (None
    when the sizes are not known at import time or a step is not 1: the caller then
    needs the starts and ends themselves at import time)."""
    x = imp.required(0)
    starts_in, ends_in = imp.required(1), imp.required(2)
    axes = imp.const(3, "axes")
    steps = imp.const(4, "steps")
    rank = len(imp.shape(x))
    k = int(np.prod(imp.shape(starts_in)))
    axes = list(range(k)) if axes is None else axes.reshape(-1).tolist()
    base_s, off_s = _affine(starts_in)
    base_e, off_e = _affine(ends_in)
    if steps is not None and any(int(s) != 1 for s in steps.reshape(-1)):
        return None
    if base_s is None or base_s is not base_e:
        return None
    sizes = np.broadcast_to(off_e - off_s, (k,)).tolist()
    axes = [norm_axis(imp, a, rank, "axes") for a in axes]
    for a, n in zip(axes, sizes):
        if not 0 <= n <= imp.shape(x)[a]:
            raise imp.error(f"Slice size ends - starts = {n} does not fit axis {a}")
    starts = imp.reshape(starts_in, (k,))
    return imp.emit(graph.DynamicSliceOp, x, starts, axes=axes, sizes=sizes)
