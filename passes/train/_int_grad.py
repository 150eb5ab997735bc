"""The gradient rules of the integer-only graph ops (bit operations and shifts) and of
bitcast: their operands are integers, or bits reread as another type, which take no
adjoint (a rule still exists, so `graph-autodiff` knows the op rather than refusing it)."""

from __future__ import annotations

from dlpc.passes.train._grad import rule


@rule("bit_and", "bit_or", "bit_xor", "bit_not", "shift_left", "shift_right", "bitcast")
def _bits(b, op, g, want):
    return [None] * len(op.operands)
