"""The numpy definition of every comm op: a function of the inputs of every rank of one
group (in group order) giving every rank's outputs (in the same order).

    outs = all_reduce([x0, x1], kind="sum")        # outs[i] is group rank i's result

The MPI runtime (`dlpc.runtime.mpi`) is checked against these on 2, 3 and 4 ranks.
Reductions combine in group order in the inputs' dtype; `avg` is the sum divided by the
group size. Ranks that a rooted op gives nothing (gather's and reduce's non-roots) get
zeros: the value that makes reduce the adjoint of broadcast (`dlpc.passes.train._comm_grad`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation

from dlpc.dialects import comm, graph, typed

Arrays = Sequence[np.ndarray]

REDUCE_KINDS = ("sum", "prod", "min", "max", "avg")


def combine(xs: Arrays, kind: str) -> np.ndarray:
    """The reduction of `xs` (group order), in their dtype."""
    if kind not in REDUCE_KINDS:
        raise ValueError(f"unknown reduction '{kind}'")
    out = np.array(xs[0], copy=True)
    for x in xs[1:]:
        if kind in ("sum", "avg"):
            out = out + x
        elif kind == "prod":
            out = out * x
        elif kind == "min":
            out = np.minimum(out, x)
        else:
            out = np.maximum(out, x)
    if kind == "avg":
        out = out / np.asarray(len(xs), dtype=out.dtype)
    return out.astype(xs[0].dtype, copy=False)


def broadcast(xs: Arrays, root: int) -> list[np.ndarray]:
    return [np.array(xs[root]) for _ in xs]


def reduce(xs: Arrays, kind: str, root: int) -> list[np.ndarray]:
    total = combine(xs, kind)
    return [total if i == root else np.zeros_like(x) for i, x in enumerate(xs)]


def scatter(xs: Arrays, dim: int, root: int) -> list[np.ndarray]:
    return [np.array(c) for c in np.split(xs[root], len(xs), axis=dim)]


def gather(xs: Arrays, dim: int, root: int) -> list[np.ndarray]:
    whole = np.concatenate(xs, axis=dim)
    return [whole if i == root else np.zeros_like(whole) for i in range(len(xs))]


def all_reduce(xs: Arrays, kind: str) -> list[np.ndarray]:
    total = combine(xs, kind)
    return [np.array(total) for _ in xs]


def all_gather(xs: Arrays, dim: int) -> list[np.ndarray]:
    whole = np.concatenate(xs, axis=dim)
    return [np.array(whole) for _ in xs]


def reduce_scatter(xs: Arrays, kind: str, dim: int) -> list[np.ndarray]:
    return [np.array(c) for c in np.split(combine(xs, kind), len(xs), axis=dim)]


def all_to_all(xs: Arrays, split_dim: int, concat_dim: int) -> list[np.ndarray]:
    n = len(xs)
    chunks = [np.split(x, n, axis=split_dim) for x in xs]  # chunks[src][dst]
    return [
        np.concatenate([chunks[src][dst] for src in range(n)], axis=concat_dim) for dst in range(n)
    ]


def send_recv(x: np.ndarray) -> np.ndarray:
    """What a recv returns: the matching send's input, unchanged."""
    return np.array(x)


# ------------------------------------------------------------ an op's arguments


def group_args(group: comm.GroupAttr) -> tuple[int, tuple[int, ...], tuple[int, ...], str]:
    """A `#comm.group` as plain values: (world, ranks, mesh, axis)."""
    return (group.world_size, group.rank_list, group.mesh_shape, group.axis.data)


def op_args(op: Operation) -> dict:
    """The keyword arguments of a comm op's runtime call (`dlpc.runtime.mpi`), in plain
    Python values; its tensor operands are passed positionally before them."""
    assert isinstance(op, comm.CommOp)
    args: dict = {}
    for name in ("kind", "root", "dim", "split_dim", "concat_dim", "peer", "tag"):
        if name in op.properties:
            value = op.properties[name]
            args[name] = (
                str(value.data.value)
                if isinstance(value, comm.ReduceKindAttr)
                else typed.int_value(value)
            )
    if isinstance(op, comm.RecvOp):
        args["shape"] = tuple(typed.shape_of(op.output))
        args["dtype"] = graph.numpy_dtype(typed.element_type(op.output))
    args["group"] = group_args(op.group)
    return args
