"""The gradient rules of the integer-only graph ops (bit operations and shifts) and of
bitcast: their operands are integers, or bits reread as another type, which take no
adjoint (a rule still exists, so `graph-autodiff` knows the op rather than refusing it);
likewise the quantization ops, whose results are integers or whose inputs are."""

from __future__ import annotations

from xdsl.utils.exceptions import DiagnosticException

from dlpc.passes.train._grad import rule


@rule("bit_and", "bit_or", "bit_xor", "bit_not", "shift_left", "shift_right", "bitcast")
def _bits(b, op, g, want):
    return [None] * len(op.operands)


@rule("quantize", "matmul_integer", "conv_integer")
def _integer_result(b, op, g, want):
    # an integer result (quantize is a step function: its derivative is 0 where it exists)
    return [None] * len(op.operands)


@rule("dequantize")
def _dequantize(b, op, g, want):
    # the quantized input and its zero point are integers; a scale's adjoint is refused
    # rather than given as 0 (quantized models take their scales as constants)
    if want[1]:
        raise DiagnosticException(
            "graph-autodiff: no gradient with respect to the scale of graph.dequantize"
        )
    return [None] * len(op.operands)
