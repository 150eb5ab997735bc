"""Bit operations on integers: BitwiseAnd / Or / Xor / Not and BitShift (LEFT / RIGHT,
logical on ONNX's unsigned types), each one graph op; BitCast (the same bits read as
another type of the same width) as graph.bitcast."""

from __future__ import annotations

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.elementwise import cast_to
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import NodeContext, onnx_dtype_to_numpy, onnx_type_name

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


@handles("BitCast")
def bit_cast(imp: NodeContext):
    a = imp.attrs({"to": None})
    dt = onnx_dtype_to_numpy(a["to"])
    if dt is None:
        raise imp.error(f"attribute 'to' = {onnx_type_name(a['to'])} is not supported")
    x = imp.required(0)
    if imp.dtype(x).kind == "b" and dt.itemsize == 1 and dt.kind in "iu":
        return [cast_to(imp, x, dt)]  # (false / true are the bytes 0 / 1)
    if imp.dtype(x).itemsize != dt.itemsize or "b" in (dt.kind, imp.dtype(x).kind):
        raise imp.error(f"BitCast from {imp.dtype(x)} to {dt}: the widths must match (not bool)")
    if imp.dtype(x) == dt:
        return [x]
    return [imp.emit(graph.BitcastOp, imp.value(0), to=graph.NUMPY_TO_ELT[dt.name])]
