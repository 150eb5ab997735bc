"""Schedule primitive `unroll`: annotate a loop to be unrolled by a factor.

Input/Output: loop dialect.  Requires: 1) `factor >= 1` 2) the factor is at most the
loop's trip count.  Guarantees: `unroll = N` on the loop (N defaults to the trip count, a
full unroll); code generators unroll it (C: `#pragma GCC unroll N`). Numerics unchanged.

Before (`unroll k/i1i`):   loop.for %i = 0 to 8 step 1 {name = "i1i"} { ... }
After:                     loop.for %i = 0 to 8 step 1 {name = "i1i", unroll = 8} { ... }

Fully unrolling a small register-blocked nest (together with `cache_write` of the
accumulator) is how the matmul micro-kernel keeps its accumulators in registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import ScheduleError, get_loop


class UnrollFactorError(ScheduleError):
    pass


def unroll(root, kernel: str, loop: str, factor: int | None = None) -> ForOp:
    target = get_loop(root, kernel, loop)
    trips = target.trip_count
    n = trips if factor is None else factor
    if n < 1 or n > max(trips, 1):
        raise UnrollFactorError(
            f"expected unroll factor {n} of loop {kernel}/{loop} to be between 1 and "
            f"its trip count {trips}"
        )
    target.annotate("unroll", n)
    return target


@dataclass(frozen=True)
class LoopUnroll(ModulePass):
    """`loop-unroll{kernel=matmul_0 loop=i1i factor=4}` (no factor: full unroll)"""

    name = "loop-unroll"
    kernel: str
    loop: str
    factor: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        unroll(op, self.kernel, self.loop, self.factor)
