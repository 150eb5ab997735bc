"""Schedule primitive `reorder`: permute loops of one perfect loop chain.

Input/Output: loop dialect.  Requires: 1) each loop named once 2) the loops lie on one
chain (each is nested in the previous one, in some order) 3) the chain from the outermost
to the innermost named loop is perfect: every loop on it holds exactly the next loop and
nothing else.  Guarantees: the loop headers (bounds, step, annotations, induction
variable) are permuted into the given order over the same positions; loops of the chain
that are not named keep their position. Bounds are static, so any order is well defined;
each output element still sees its reduction iterations in increasing order.

Before (`reorder k: r0, i1`):

    loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
      loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
        ... %i1 ... %r0 ...
      }
    }

After:

    loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
        ... %i1 ... %r0 ...
      }
    }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import ScheduleError, ancestors, child_loop, get_loop, index


class ReorderDuplicateError(ScheduleError):
    pass


class ReorderNotNestedError(ScheduleError):
    pass


class ReorderImperfectError(ScheduleError):
    pass


def reorder(root, kernel: str, order: Sequence[str]) -> list[ForOp]:
    """Returns the loops at the permuted positions, outermost first."""
    seen = set()
    for name in order:
        if name in seen:
            raise ReorderDuplicateError(f"loop {kernel}/{name} is named twice in reorder")
        seen.add(name)
    loops = [get_loop(root, kernel, name) for name in order]
    by_depth = sorted(loops, key=lambda lp: len(ancestors(lp)))
    for outer, inner in zip(by_depth, by_depth[1:]):
        if outer not in ancestors(inner):
            raise ReorderNotNestedError(
                f"loops {kernel}/{outer.loop_name} and {kernel}/{inner.loop_name} "
                "are not nested in one another"
            )
    # the chain from the outermost to the innermost named loop must be perfect
    cur = by_depth[0]
    chain = [cur]
    while cur is not by_depth[-1]:
        nxt = child_loop(cur)
        if nxt is None:
            raise ReorderImperfectError(
                f"loop {kernel}/{cur.loop_name} holds more than the next loop of the chain "
                "(the nest is not perfect)"
            )
        chain.append(nxt)
        cur = nxt
    positions = [lp for lp in chain if lp in loops]
    headers = [(dict(lp.properties), dict(lp.attributes), lp.induction_var) for lp in loops]
    fresh = [pos.block.insert_arg(index, 0) for pos in positions]
    for pos, new_iv, (props, attrs, old_iv) in zip(positions, fresh, headers):
        pos.properties.clear()
        pos.properties.update(props)
        pos.attributes.clear()
        pos.attributes.update(attrs)
        new_iv.name_hint = old_iv.name_hint
        old_iv.replace_all_uses_with(new_iv)
    for pos in positions:
        pos.block.erase_arg(pos.block.args[1])
    return positions


@dataclass(frozen=True)
class LoopReorder(ModulePass):
    """`loop-reorder{kernel=matmul_0 order=i0,r0,i1}`"""

    name = "loop-reorder"
    kernel: str
    order: tuple[str, ...]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reorder(op, self.kernel, self.order)
