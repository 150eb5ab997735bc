"""What an index expression does with a loop variable: affine in the loops
(`affine_index`), the variable plus what does not vary with it (`varies_with`), or any
use of it (`depends_on`).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import Block, Operation, SSAValue

AFFINE_OPS = ("arith.addi", "arith.subi")


def affine_index(value: SSAValue) -> bool:
    """Is `value` an affine function (`addi`, `subi`, `muli` by a constant) of loop
    variables (block arguments) and constants? Then its values at the lanes between two
    lanes lie between its values at those two."""
    owner = value.owner
    if isinstance(owner, Block) or isinstance(owner, arith.ConstantOp):
        return True
    if owner.name in AFFINE_OPS:
        return all(affine_index(v) for v in owner.operands)
    if owner.name == "arith.muli":
        return any(isinstance(v.owner, arith.ConstantOp) for v in owner.operands) and all(
            affine_index(v) for v in owner.operands
        )
    return False


def varies_with(index: SSAValue, iv: SSAValue) -> bool:
    """Is `index` the induction variable `iv`, or `iv` plus or minus what does not vary with it?"""
    if index is iv:
        return True
    owner = index.owner
    if isinstance(owner, arith.AddiOp | arith.SubiOp):
        a, b = owner.lhs, owner.rhs
        return (varies_with(a, iv) and not depends_on(b, iv)) or (
            isinstance(owner, arith.AddiOp) and varies_with(b, iv) and not depends_on(a, iv)
        )
    return False


def depends_on(value: SSAValue, iv: SSAValue) -> bool:
    """Is `value` the induction variable `iv` or computed from it?"""
    if value is iv:
        return True
    owner = value.owner
    return isinstance(owner, Operation) and any(depends_on(v, iv) for v in owner.operands)
