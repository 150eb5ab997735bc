"""Schedule primitive `tile`: split several loops and move all outer parts outside.

Input/Output: loop dialect.  Requires what `split` and `reorder` require: 1) each factor
divides its loop's trip count 2) the loops form one perfect chain.  Guarantees: the nest
`x, y` becomes `xo, yo, xi, yi` (outer loops in the given order, then the inner ones).

Before (`tile k/i0, i1 by 8, 32`):

    loop.for %i0 = 0 to 64 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 128 step 1 {name = "i1"} { body(%i0, %i1) }
    }

After:

    loop.for %i0o = 0 to 64 step 8 {name = "i0o"} {
      loop.for %i1o = 0 to 128 step 32 {name = "i1o"} {
        loop.for %i0i = 0 to 8 step 1 {name = "i0i"} {
          loop.for %i1i = 0 to 32 step 1 {name = "i1i"} {
            %i0 = arith.addi %i0o, %i0i : index
            %i1 = arith.addi %i1o, %i1i : index
            body(%i0, %i1)
          }
        }
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
from dlpc.passes.schedule._common import ScheduleError
from dlpc.passes.schedule.reorder import reorder
from dlpc.passes.schedule.split import split


class TileArityError(ScheduleError):
    pass


def tile(root, kernel: str, loops: Sequence[str], factors: Sequence[int]) -> list[ForOp]:
    """Returns the new loops, outer parts first."""
    if len(loops) != len(factors) or not loops:
        raise TileArityError(
            f"tile of {kernel}/{','.join(loops)} needs one factor per loop, got {len(factors)}"
        )
    outers, inners = [], []
    for name, factor in zip(loops, factors):
        out, inn = split(root, kernel, name, factor)
        outers.append(out.loop_name)
        inners.append(inn.loop_name)
    return reorder(root, kernel, outers + inners)


@dataclass(frozen=True)
class LoopTile(ModulePass):
    """`loop-tile{kernel=matmul_0 loops=i0,i1 factors=8,32}`"""

    name = "loop-tile"
    kernel: str
    loops: tuple[str, ...]
    factors: tuple[int, ...]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tile(op, self.kernel, self.loops, self.factors)
