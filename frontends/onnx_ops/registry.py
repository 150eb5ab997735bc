"""The handler registry of the ONNX importer: `HANDLERS[op_type](importer)`, filled by
`@handles(...)` in the operator family modules, and the helpers they share."""

from __future__ import annotations

from collections.abc import Callable

from dlpc.frontends.onnx_values import NodeContext, Value

HANDLERS: dict[str, Callable[[NodeContext], list[Value]]] = {}


def handles(*op_types: str):
    def register(fn):
        for t in op_types:
            HANDLERS[t] = fn
        return fn

    return register


def norm_axis(imp: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise imp.error(f"attribute '{what}' = {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def supported_operators() -> list[str]:
    """Operators with a handler (foldable-only operators are not listed)."""
    return sorted(HANDLERS)
