"""Schedule primitive `parallel`: run the iterations of a loop concurrently.

Input/Output: loop dialect.  Requires: 1) the loop is not a reduction loop (not marked
`reduction`, and every store inside it indexes with its induction variable) 2) no loop
around it or inside it is already `parallel` (one level of parallelism per nest).
Guarantees: the loop carries `parallel` (C: `#pragma omp parallel for`).

Before (`parallel k/i0`):   loop.for %i0 = 0 to 64 step 1 {name = "i0"} { ... }
After:                      loop.for %i0 = 0 to 64 step 1 {name = "i0", parallel} { ... }

`serial k[/loop]` (script only) drops `parallel` again, from one loop or the whole kernel.

Buffers allocated inside the loop body are private to an iteration, so `cache_read` /
`cache_write` buffers placed under a parallel loop are per-thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    ancestors,
    get_kernel,
    get_loop,
    inner_loops,
    is_reduction,
)


class ParallelReductionError(ScheduleError):
    pass


class ParallelNestedError(ScheduleError):
    pass


def parallel(root, kernel: str, loop: str) -> ForOp:
    target = get_loop(root, kernel, loop)
    if is_reduction(target):
        raise ParallelReductionError(
            f"loop {kernel}/{loop} is a reduction loop (its iterations write the same "
            "element) and cannot be parallel"
        )
    for other in ancestors(target) + inner_loops(target):
        if other.parallel is not None:
            raise ParallelNestedError(
                f"loop {kernel}/{loop} is nested with loop {kernel}/{other.loop_name}, "
                "which is already parallel"
            )
    target.annotate("parallel")
    return target


def serial(root, kernel: str, loop: str | None = None) -> None:
    """Drop `parallel` from one loop, or from every loop of the kernel (a schedule that
    places its own parallel loop starts with `serial K`)."""
    if loop is not None:
        get_loop(root, kernel, loop).annotate("parallel", False)
        return
    for lp in get_kernel(root, kernel).loops():
        lp.annotate("parallel", False)


@dataclass(frozen=True)
class LoopParallel(ModulePass):
    """`loop-parallel{kernel=matmul_0 loop=i0}`"""

    name = "loop-parallel"
    kernel: str
    loop: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        parallel(op, self.kernel, self.loop)
