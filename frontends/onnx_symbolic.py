"""Import-time evaluation of ONNX shape arithmetic over symbolic dims.

`Shape` of a tensor with symbolic dims (`dialects.symdims`) is an import-time constant
whose entries may be SymDims (a numpy object array). The integer shape arithmetic that
exporters build on it (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Slice of a
position buffer up to a dim, Where(Equal(shape, -1), ...) for Expand) is evaluated here,
entry by entry, so the shapes it feeds stay symbolic in the graph (`graph.reshape` and
`graph.slice` take symbolic ints properties). An operator this table does not know is a
ValueError: the importer then gives up on the symbolic graph (the model is imported per
call shape instead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dlpc.dialects.symdims import SymDim


def has_symbols(a: np.ndarray) -> bool:
    return a.dtype == object and any(isinstance(v, SymDim) for v in a.reshape(-1))


def settle(a: np.ndarray) -> np.ndarray:
    """An object array without symbols back as int64 (the other import paths read it)."""
    if a.dtype == object and not has_symbols(a):
        return a.astype(np.int64) if a.size else np.zeros(a.shape, np.int64)
    return a


def _ints(a: np.ndarray | None, what: str) -> list[int]:
    if a is None:
        return []
    if has_symbols(a):
        raise ValueError(f"'{what}' must not be symbolic")
    return [int(v) for v in a.reshape(-1)]


def _slice(data, starts, ends, axes, steps):
    s, e = starts.reshape(-1).tolist(), ends.reshape(-1).tolist()
    ax = _ints(axes, "axes") or list(range(len(s)))
    st = _ints(steps, "steps") or [1] * len(s)
    index = [slice(None)] * data.ndim
    for start, stop, axis, step in zip(s, e, ax, st):
        if isinstance(start, SymDim) or isinstance(stop, SymDim):
            raise ValueError("a slice of a shape with symbolic bounds")
        index[axis % data.ndim] = slice(int(start), int(stop), int(step))
    return data[tuple(index)]


def _unsqueeze(data, axes):
    out = data
    rank = data.ndim + len(_ints(axes, "axes"))
    for a in sorted(k % rank for k in _ints(axes, "axes")):
        out = np.expand_dims(out, a)
    return out


def _squeeze(data, axes=None):
    if axes is None:
        return np.squeeze(data)
    return np.squeeze(data, axis=tuple(k % data.ndim for k in _ints(axes, "axes")))


def _elementwise(fn: Callable) -> Callable:
    def apply(a, b):
        a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
        out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=object)
        for idx, (x, y) in zip(np.ndindex(out.shape), np.broadcast(a, b)):
            out[idx] = fn(x, y)
        return out

    return apply


def _equal(a, b):
    out = _elementwise(lambda x, y: x == y)(a, b)
    return out.astype(bool)


def _div(x, y):
    if isinstance(x, SymDim) or isinstance(y, SymDim):
        return x // y
    return int(np.trunc(x / y)) if y else 0


OPS: dict[str, Callable[..., np.ndarray]] = {
    "Identity": lambda x: x,
    "Gather": lambda d, i, axis=0: np.take(d, i.astype(np.int64), axis=axis),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda *xs, axis: np.concatenate([np.asarray(x, dtype=object) for x in xs], axis),
    "Slice": lambda d, s, e, a=None, st=None: _slice(d, s, e, a, st),
    "Add": _elementwise(lambda x, y: x + y),
    "Sub": _elementwise(lambda x, y: x - y),
    "Mul": _elementwise(lambda x, y: x * y),
    "Div": _elementwise(_div),
    "Equal": _equal,
    "Where": lambda c, a, b: np.where(c.astype(bool), a, b),
    "Reshape": lambda d, s: d.reshape(_ints(s, "shape")),
}


def fold(op_type: str, attrs: dict, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The outputs of one shape-arithmetic node whose inputs may hold SymDims; a
    ValueError names what cannot be evaluated symbolically."""
    if op_type == "Cast":
        (x,) = inputs
        assert x is not None
        to = attrs.get("to")
        if to not in (6, 7):  # INT32, INT64: dims stay dims
            raise ValueError("a symbolic dim cast to a non-integer type")
        return [x]
    fn = OPS.get(op_type)
    if fn is None:
        raise ValueError(f"'{op_type}' of a symbolic dim is not evaluated at import time")
    args = list(inputs)
    while args and args[-1] is None:
        args.pop()
    kwargs = {k: v for k, v in attrs.items() if k == "axis"}
    if op_type == "Concat" and "axis" not in kwargs:
        raise ValueError("Concat needs 'axis'")
    try:
        out = fn(*args, **kwargs)
    except (TypeError, IndexError, ValueError, ArithmeticError) as e:
        raise ValueError(f"'{op_type}' of a symbolic dim: {e}") from None
    if not isinstance(out, np.ndarray):  # (numpy gives a scalar entry as the object itself)
        out = np.asarray(out, dtype=object)
    return [settle(out)]
