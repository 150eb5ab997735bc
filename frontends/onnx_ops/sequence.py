"""ONNX SplitToSequence with split sizes known at import time: a sequence of known length
is a Python list of tensor values, one slice each. The importer keeps such a list only as
a graph output (`@main` returns its tensors in order, and its `dlpc.sequence_outputs`
attribute says how they group: the compiled model returns a list for that output, as
onnxruntime does); a node that reads a sequence is refused in one line."""

from __future__ import annotations

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import NodeContext, Value


@handles("SplitToSequence")
def split_to_sequence(imp: NodeContext):
    """Pieces of the given sizes along `axis` (a scalar `split`: pieces of that size, the
    last one shorter); without `split`, every element of the axis its own piece, its axis
    removed when keepdims is 0."""
    a = imp.attrs({"axis": 0, "keepdims": 1})
    x = imp.required(0)
    shape = imp.shape(x)
    if not shape:
        raise imp.error("input must have at least one dimension")
    ax = norm_axis(imp, a["axis"], len(shape))
    n = shape[ax]
    split = imp.const(1, "split")
    squeeze = False
    if split is None:
        sizes = [1] * n
        squeeze = not a["keepdims"]
    elif split.ndim == 0:
        step = int(split)
        if step < 1:
            raise imp.error(f"'split' = {step} must be positive")
        sizes = [min(step, n - s) for s in range(0, n, step)]
    else:
        sizes = [int(v) for v in split.reshape(-1)]
        if any(s < 1 for s in sizes) or sum(sizes) != n:
            raise imp.error(
                f"'split' {sizes} must be positive sizes that sum to the axis' extent {n}"
            )
    if not sizes:
        raise imp.error("an empty sequence (the axis has no elements), which dlpc does not support")
    pieces: list[Value] = []
    start = 0
    for size in sizes:
        part = x
        if size != n:
            part = imp.emit(
                graph.SliceOp, x, starts=(start,), ends=(start + size,), axes=(ax,), steps=(1,)
            )
        if squeeze:
            part = imp.reshape(part, shape[:ax] + shape[ax + 1 :])
        pieces.append(part)
        start += size
    return [pieces]
