"""The gradient rules of the integer-only graph ops (bit operations and shifts): their
operands are integers, which take no adjoint (a rule still exists, so `graph-autodiff`
knows the op rather than refusing it)."""

from __future__ import annotations

from dlpc.passes.train._grad import rule


@rule("bit_and", "bit_or", "bit_xor", "bit_not", "shift_left", "shift_right")
def _bits(b, op, g, want):
    return [None] * len(op.operands)
