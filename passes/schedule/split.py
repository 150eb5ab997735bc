"""Schedule primitive `split`: one loop becomes an outer and an inner loop.

Input/Output: loop dialect.  Requires: 1) the loop exists 2) `factor >= 1` and it divides
the loop's trip count (bounds stay static, no tail).  Guarantees: the iteration order and
numerics are unchanged; the old induction variable is `outer + inner`.

Before (`split k/i1 by 32 -> i1o, i1i`):

    loop.for %i1 = 0 to 128 step 1 {name = "i1"} {
      memref.store %v, %out[%i0, %i1] : memref<4x128xf32>
    }

After:

    loop.for %o = 0 to 128 step 32 {name = "i1o"} {
      loop.for %n = 0 to 32 step 1 {name = "i1i"} {
        %i1 = arith.addi %o, %n : index
        memref.store %v, %out[%i0, %i1] : memref<4x128xf32>
      }
    }

`reduction` carries over to both loops, `parallel` to the outer and `vectorize` to the
inner one; `unroll` is dropped (reapply it to the loop you mean).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    copy_annotations,
    fresh_name,
    get_loop,
    name_iv,
    split_extent,
)


class SplitFactorError(ScheduleError):
    pass


def split(
    root, kernel: str, loop: str, factor: int, outer: str | None = None, inner: str | None = None
) -> tuple[ForOp, ForOp]:
    target = get_loop(root, kernel, loop)
    trips = target.trip_count
    if factor < 1 or trips % factor:
        raise SplitFactorError(
            f"expected split factor {factor} to divide the trip count {trips} "
            f"of loop {kernel}/{loop}"
        )
    k = target.kernel()
    outer = fresh_name(k, outer, f"{loop}o")
    inner = fresh_name(k, inner, f"{loop}i")
    step = target.stride
    out = ForOp(target.lower, target.upper, step * factor, name=outer)
    inn = ForOp(0, step * factor, step, name=inner)
    copy_annotations(target, out, ("reduction", "parallel"))
    copy_annotations(target, inn, ("reduction", "vectorize"))
    split_extent(target, out, inn)
    out.block.add_op(inn)
    name_iv(out)
    name_iv(inn)
    add = arith.AddiOp(out.induction_var, inn.induction_var)
    add.result.name_hint = target.induction_var.name_hint
    inn.block.add_op(add)
    for op in list(target.block.ops):
        op.detach()
        inn.block.add_op(op)
    target.induction_var.replace_all_uses_with(add.result)
    parent = target.parent_block()
    assert parent is not None
    parent.insert_op_before(out, target)
    target.detach()
    target.erase()
    return out, inn


@dataclass(frozen=True)
class LoopSplit(ModulePass):
    """`loop-split{kernel=matmul_0 loop=i1 factor=32 outer=i1o inner=i1i}`"""

    name = "loop-split"
    kernel: str
    loop: str
    factor: int
    outer: str | None = None
    inner: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        split(op, self.kernel, self.loop, self.factor, self.outer, self.inner)
