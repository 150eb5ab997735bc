"""Elementwise math functions of floats: the trigonometric and hyperbolic functions and
their inverses (Sin ... Atanh) and rounding (Floor, Ceil, Round: halves to even), each one
graph op of the same name."""

from __future__ import annotations

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import NodeContext

FUNCTIONS = {
    "Sin": graph.SinOp,
    "Cos": graph.CosOp,
    "Tan": graph.TanOp,
    "Asin": graph.AsinOp,
    "Acos": graph.AcosOp,
    "Atan": graph.AtanOp,
    "Sinh": graph.SinhOp,
    "Cosh": graph.CoshOp,
    "Asinh": graph.AsinhOp,
    "Acosh": graph.AcoshOp,
    "Atanh": graph.AtanhOp,
    "Floor": graph.FloorOp,
    "Ceil": graph.CeilOp,
    "Round": graph.RoundOp,
}


@handles(*FUNCTIONS)
def math_function(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(FUNCTIONS[imp.node.op_type], imp.value(0))]
