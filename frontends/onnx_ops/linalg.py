"""Det of small square matrices (n <= 3) by the Leibniz formula over the matrix's entries
(slices of the last two axes, batch dims kept): exact in structure and a handful of
elementwise ops; larger matrices (which need a pivoted elimination) are refused."""

from __future__ import annotations

import itertools

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import NodeContext, Value

MAX_DET = 3


def _parity(perm: tuple[int, ...]) -> int:
    inversions = sum(perm[i] > perm[j] for i, j in itertools.combinations(range(len(perm)), 2))
    return -1 if inversions % 2 else 1


@handles("Det")
def det(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    s = imp.shape(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise imp.error(f"input 0 must be square matrices [..., n, n], got shape {list(s)}")
    if imp.dtype(x).kind != "f":
        raise imp.error(f"input 0 must be floating-point, got {imp.dtype(x)}")
    n, batch, r = s[-1], tuple(s[:-2]), len(s)
    if n > MAX_DET:
        raise imp.error(f"Det of {n}x{n} matrices is not supported (dlpc takes n <= {MAX_DET})")
    if n == 0:
        raise imp.error("Det of 0x0 matrices is not supported")

    def entry(i: int, j: int) -> Value:
        e = imp.emit(
            graph.SliceOp, imp.value(x), starts=[i, j], ends=[i + 1, j + 1], axes=[r - 2, r - 1]
        )
        return imp.reshape(e, batch)

    cells = {(i, j): entry(i, j) for i in range(n) for j in range(n)}
    total = None
    for perm in itertools.permutations(range(n)):  # sum of sign(p) * prod_i x[i, p(i)]
        term = cells[0, perm[0]]
        for i in range(1, n):
            term = imp.emit(graph.MulOp, term, cells[i, perm[i]])
        if total is None:
            total = term if _parity(perm) > 0 else imp.emit(graph.NegOp, imp.value(term))
        else:
            total = imp.emit(graph.AddOp if _parity(perm) > 0 else graph.SubOp, total, term)
    assert total is not None
    return [total]
