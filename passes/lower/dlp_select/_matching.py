"""What every intrinsic pattern matches with: `NoMatch` (a kernel keeps its scalar
loops), constant values and indices, the loop nest below the work loop, linear index
forms, and the size of the NRAM scratch a selection asks for.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from dlpc.dialects.loop import ForOp, spine
from dlpc.passes.lower._dlp_build import KernelPlan, round_up


class NoMatch(Exception):
    pass


def const_value(value: SSAValue) -> int | float | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        v = op.value
        if isinstance(v, FloatAttr):
            return float(v.value.data)
        if isinstance(v, IntegerAttr):
            return v.value.data
    return None


def const_index(plan: KernelPlan, value: SSAValue) -> int | None:
    """An index's constant value: an arith.constant or an extent-1 loop's variable."""
    if value in plan.fixed:
        return plan.fixed[value]
    c = const_value(value)
    return c if isinstance(c, int) else None


def work_nest(work: ForOp) -> list[ForOp]:
    """The work loop and the perfect nest of loops below it."""
    return [work, *spine(work)]


def loop_chain(first: ForOp, perfect: bool) -> list[ForOp]:
    """`first` and the loops below it, one per level, outermost first; NoMatch where a
    level holds several loops or, with `perfect`, other ops than constants besides its loop."""
    chain = [first]
    while True:
        inner = [op for op in chain[-1].block.ops if isinstance(op, ForOp)]
        if not inner:
            return chain
        others = [op for op in chain[-1].block.ops if not isinstance(op, ForOp | arith.ConstantOp)]
        if len(inner) != 1 or perfect and others:
            raise NoMatch
        chain.append(inner[0])


def linear_form(plan: KernelPlan, value: SSAValue) -> dict[SSAValue | int, int] | None:
    """value as {induction variable or 1: coefficient}, or None if not linear."""
    c = const_index(plan, value)
    if c is not None:
        return {1: c}
    op = value.owner
    if not isinstance(op, Operation):
        return {value: 1}
    if op.name in ("arith.index_cast", "arith.index_castui"):
        return linear_form(plan, op.operands[0])
    if op.name in ("arith.addi", "arith.subi", "arith.muli"):
        x, y = (linear_form(plan, v) for v in op.operands)
        if x is None or y is None:
            return None
        if op.name == "arith.muli":
            if set(x) == {1}:
                x, y = y, x
            if set(y) != {1}:
                return None
            return {k: v * y[1] for k, v in x.items()}
        sign = 1 if op.name == "arith.addi" else -1
        out = dict(x)
        for k, v in y.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v or k == 1}
    return None


def tile_bytes(plan, elems: int) -> int:
    """Bytes of an f32 NRAM scratch buffer of `elems` elements, rounded up to DMA alignment."""
    return round_up(elems * 4, plan.desc.dma_align)


def scratch_elems(plan, elems: int) -> int:
    return tile_bytes(plan, elems) // 4
