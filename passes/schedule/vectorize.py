"""Schedule primitive `vectorize`: mark an innermost loop for SIMD execution.

Input/Output: loop dialect.  Requires: 1) the loop is innermost (no loop.for inside)
2) it is not a reduction loop: it is not marked `reduction` and every store in it indexes
with its induction variable (iterations write distinct elements).  Guarantees: the loop
carries `vectorize` (C: `#pragma omp simd`); numerics unchanged.

Before (`vectorize k/i1`):   loop.for %i1 = 0 to 64 step 1 {name = "i1"} { ... }
After:                       loop.for %i1 = 0 to 64 step 1 {name = "i1", vectorize} { ... }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import ScheduleError, get_loop, inner_loops, is_reduction


class VectorizeNotInnermostError(ScheduleError):
    pass


class VectorizeReductionError(ScheduleError):
    pass


def vectorize(root, kernel: str, loop: str) -> ForOp:
    target = get_loop(root, kernel, loop)
    inside = inner_loops(target)
    if inside:
        raise VectorizeNotInnermostError(
            f"loop {kernel}/{loop} is not innermost: it contains loop "
            f"{kernel}/{inside[0].loop_name}"
        )
    if is_reduction(target):
        raise VectorizeReductionError(
            f"loop {kernel}/{loop} is a reduction loop (its iterations write the same "
            "element) and cannot be vectorized"
        )
    target.annotate("vectorize")
    return target


@dataclass(frozen=True)
class LoopVectorize(ModulePass):
    """`loop-vectorize{kernel=relu_0 loop=i1}`"""

    name = "loop-vectorize"
    kernel: str
    loop: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        vectorize(op, self.kernel, self.loop)
