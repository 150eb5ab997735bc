"""Gradient rules of the comm ops, part of graph-autodiff's table
(`dlpc.passes.train._grad.RULES`): autodiff.py imports this module, so a bare
`dlpc-opt -p graph-autodiff` differentiates IR with comm ops (the comm dialect lies below
passes/train, the partition passes above it).

The objective is the sum of every rank's loss (each rank runs graph-autodiff on its own
program, its adjoints being its share of the sum), so a comm op's adjoint is the
transposed communication:

    y = all_reduce sum(x)        dx = all_reduce sum(dy)
    y = all_reduce avg(x)        dx = all_reduce avg(dy)
    y = all_gather(x, dim)       dx = reduce_scatter sum(dy, dim)
    y = reduce_scatter(x, dim)   dx = all_gather(dy, dim)        (avg: divided by n)
    y = broadcast(x, root)       dx = reduce sum(dy, root)       (non-roots: 0)
    y = reduce sum(x, root)      dx = broadcast(dy, root)
    y = scatter(x, dim, root)    dx = gather(dy, dim, root)
    y = gather(x, dim, root)     dx = scatter(dy, dim, root)
    y = all_to_all(x, s, c)      dx = all_to_all(dy, c, s)

send/recv pair across programs and have no rule here, because graph-autodiff's sweep
never calls one for them: it seeds adjoints from @main's scalar loss only (a stage before
the last has none: its share of the objective leaves through a send), visits an op only
when its single result has an adjoint (a send has no result), and marks a result active
only when an operand is (a recv has none, so it is a constant). Their adjoints (dx = a
recv of the gradient from the send's destination; a send of dy back to the recv's
source) need a sweep that also starts at sends and treats recvs as sources; graph-pipeline
writes them itself, a recv of dy for each send of y and a send of dy for each recv.

min / max / prod reductions have no rule here (graph-autodiff names the op). A value
every rank holds the same copy of (a replicated loss) therefore counts once per rank:
the partition passes rescale (graph-tensor-parallel: see there).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm
from dlpc.passes.train._build import Builder
from dlpc.passes.train._grad import RULES

Grads = Sequence[SSAValue | None]


def _ints(op: Operation, name: str) -> int:
    value = op.properties[name]
    return value.value.data  # type: ignore[attr-defined]


def _kind(op: Operation) -> str:
    return str(op.properties["kind"].data.value)  # type: ignore[attr-defined]


def _no_rule(op: Operation, why: str) -> DiagnosticException:
    return DiagnosticException(f"graph-autodiff has no gradient rule for {op.name} {why}")


def _all_reduce(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.AllReduceOp)
    kind = _kind(op)
    if kind not in ("sum", "avg") or len(op.inputs) != 1:
        raise _no_rule(op, f"{kind} of {len(op.inputs)} operands (sum or avg of one)")
    return [b.insert(comm.AllReduceOp([g], kind, op.group))]


def _all_gather(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.AllGatherOp)
    ty = op.input.type
    red = comm.ReduceScatterOp.create(
        operands=[g],
        result_types=[ty],
        properties={
            "kind": comm.ReduceKindAttr(comm.ReduceKind.SUM),
            "dim": op.dim,
            "group": op.group,
        },
    )
    return [b.insert(red)]


def _reduce_scatter(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.ReduceScatterOp)
    kind = _kind(op)
    if kind not in ("sum", "avg"):
        raise _no_rule(op, kind)
    gathered = comm.AllGatherOp.create(
        operands=[g],
        result_types=[op.input.type],
        properties={"dim": op.dim, "group": op.group},
    )
    dx = b.insert(gathered)
    return [b.div(dx, float(op.group.size)) if kind == "avg" else dx]


def _broadcast(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.BroadcastOp)
    return [b.insert(comm.ReduceOp(g, "sum", _ints(op, "root"), op.group))]


def _reduce(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.ReduceOp)
    if _kind(op) != "sum":
        raise _no_rule(op, _kind(op))
    return [b.insert(comm.BroadcastOp(g, _ints(op, "root"), op.group))]


def _rooted(cls: type[comm.CommOp]):
    def rule(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
        x = op.operands[0]
        new = cls.create(
            operands=[g],
            result_types=[x.type],
            properties={
                "dim": op.properties["dim"],
                "root": op.properties["root"],
                "group": op.properties["group"],
            },
        )
        return [b.insert(new)]

    return rule


def _all_to_all(b: Builder, op: Operation, g: SSAValue, want) -> Grads:
    assert isinstance(op, comm.AllToAllOp)
    new = comm.AllToAllOp.create(
        operands=[g],
        result_types=[op.input.type],
        properties={"split_dim": op.concat_dim, "concat_dim": op.split_dim, "group": op.group},
    )
    return [b.insert(new)]


RULES["comm.all_reduce"] = _all_reduce
RULES["comm.all_gather"] = _all_gather
RULES["comm.reduce_scatter"] = _reduce_scatter
RULES["comm.broadcast"] = _broadcast
RULES["comm.reduce"] = _reduce
RULES["comm.scatter"] = _rooted(comm.GatherOp)
RULES["comm.gather"] = _rooted(comm.ScatterOp)
RULES["comm.all_to_all"] = _all_to_all
