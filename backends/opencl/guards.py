"""Padding guards of a reduction nest (`padding_guards`): the `scf.if`s that test a
padded index, the ops computing their conditions and the loops those depend on (the
kernel writer splits the interior, where every test holds, from the border).
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Block, Operation, SSAValue

from dlpc.backends.opencl.indices import AFFINE_OPS
from dlpc.dialects.loop import ForOp, defined_inside

#: padding guards of a reduction nest: the `scf.if`s, the ops computing their
#: conditions (in order), the loops of the nest those depend on
Guards = tuple[list[scf.IfOp], list[Operation], list[ForOp]]
_INEQUALITY = ("slt", "sle", "sgt", "sge")


def padding_guards(nest: ForOp) -> Guards | None:
    """The `scf.if`s in `nest` whose condition is a conjunction (`andi`) of signed
    inequalities (`cmpi`) between affine functions (`addi`, `subi`, `muli` by a constant)
    of the nest's loop variables, constants and the variables of the loops around it
    (not other values from outside: they need not be affine in the lanes): a conv's
    padding tests around its input loads. Such a condition holds on the whole box of the
    nest's iterations (and lanes) when it holds at the box's corners (the set where it
    holds is convex). None when there is none."""
    loops: dict[SSAValue, ForOp] = {
        lp.induction_var: lp for lp in nest.walk() if isinstance(lp, ForOp)
    }
    ifs: list[scf.IfOp] = []
    needed: set[Operation] = set()
    used: set[ForOp] = set()

    def slice_of(value: SSAValue, ops: set[Operation], ivs: set[ForOp]) -> bool:
        if value in loops:
            ivs.add(loops[value])
            return True
        if not defined_inside(value, nest):  # an enclosing loop's variable or a constant:
            # affine in the lanes too (a value computed outside, `i3 / 2`, need not be)
            return isinstance(value.owner, Block) or isinstance(value.owner, arith.ConstantOp)
        op = value.owner
        if not isinstance(op, Operation):
            return False
        if isinstance(op, arith.ConstantOp):
            pass
        elif isinstance(op, arith.CmpiOp):
            pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            if pred not in _INEQUALITY:
                return False
        elif op.name == "arith.muli":
            if not any(isinstance(v.owner, arith.ConstantOp) for v in op.operands):
                return False
        elif op.name not in (*AFFINE_OPS, "arith.andi"):
            return False
        ops.add(op)
        return all(slice_of(v, ops, ivs) for v in op.operands)

    for op in nest.walk():
        if not isinstance(op, scf.IfOp) or op.cond.type != IntegerType(1):
            continue
        ops: set[Operation] = set()
        ivs: set[ForOp] = set()
        if slice_of(op.cond, ops, ivs) and ivs:
            ifs.append(op)
            needed |= ops
            used |= ivs
    if not ifs:
        return None
    order = [op for op in nest.walk() if op in needed]
    return ifs, order, [lp for lp in loops.values() if lp in used]
