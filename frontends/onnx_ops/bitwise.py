"""Bit operations on integers: BitwiseAnd / Or / Xor / Not and BitShift (LEFT / RIGHT,
logical on ONNX's unsigned types), each one graph op."""

from __future__ import annotations

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import NodeContext

BINARY = {"BitwiseAnd": graph.BitAndOp, "BitwiseOr": graph.BitOrOp, "BitwiseXor": graph.BitXorOp}


def _integers(imp: NodeContext, *values) -> None:
    for v in values:
        if imp.dtype(v).kind not in "iu":
            raise imp.error(f"operands must be integers, got {imp.dtype(v)}")


@handles(*BINARY)
def bitwise(imp: NodeContext):
    imp.attrs({})
    a, b = imp.required(0), imp.required(1)
    _integers(imp, a, b)
    return [imp.emit(BINARY[imp.node.op_type], a, b)]


@handles("BitwiseNot")
def bitwise_not(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    _integers(imp, x)
    return [imp.emit(graph.BitNotOp, imp.value(0))]


@handles("BitShift")
def bit_shift(imp: NodeContext):
    a = imp.attrs({"direction": None})
    imp.require(a, "direction", ("LEFT", "RIGHT"))
    x, n = imp.required(0), imp.required(1)
    _integers(imp, x, n)
    op = graph.ShiftLeftOp if a["direction"] == "LEFT" else graph.ShiftRightOp
    return [imp.emit(op, x, n)]
