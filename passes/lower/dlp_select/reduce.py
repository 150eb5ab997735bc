"""Row reductions as `dlp.reduce_sum` / `dlp.reduce_max`.

Matches `acc = init; for r..: acc = add|max(acc, prologue(..)); out[..] = epilogue(acc)`
over a perfect nest of reduction loops: the elementwise prologue becomes vector
intrinsics into a row buffer (`elementwise.emit_elementwise`), the reduction one
intrinsic over its rows, the epilogue is selected over the accumulator tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.ir import SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import Selection
from dlpc.passes.lower.dlp_select._matching import (
    NoMatch,
    const_value,
    loop_chain,
    scratch_elems,
    tile_bytes,
    work_nest,
)
from dlpc.passes.lower.dlp_select.elementwise import (
    Elementwise,
    ScalarEpilogue,
    _classify_load,
    check_expr,
    emit_elementwise,
    match_epilogue,
)

COMBINERS = {
    "arith.addf": (dlp.ReduceSumOp, 0.0),
    "arith.maximumf": (dlp.ReduceMaxOp, float("-inf")),
    "arith.maxnumf": (dlp.ReduceMaxOp, float("-inf")),
}


@dataclass
class ReduceSelection(Selection):
    """acc[row] = combine over the row's trailing reduction elements of an elementwise
    prologue (or a plain load), then the epilogue: `dlp.reduce_sum`/`dlp.reduce_max`."""

    prologue: Elementwise  # over spatial + reduction loops; body computes `value`
    value: SSAValue  # the element combined into the accumulator
    op: type  # dlp.ReduceSumOp or dlp.ReduceMaxOp
    cols: int  # elements per row (the reduction extent)
    ew: Elementwise | ScalarEpilogue  # the epilogue over the spatial loops
    acc: SSAValue  # the accumulator value read after the reduction
    in_place: bool = False  # the combined value is a plain load of the tile: reduced there

    @property
    def passthrough(self) -> bool:
        """The reduced value is the output (softmax's max and sum): reduced into the
        output tile itself, no accumulator and no NRAM2NRAM copy (a DMA latency)."""
        return isinstance(self.ew, Elementwise) and self.ew.passthrough(self.acc)

    def scratch_bytes(self, plan, tile: int) -> int:
        rows = tile_bytes(plan, tile * self.ew.inner)
        full = tile_bytes(plan, tile * self.ew.inner * self.cols)
        row_nram = 0 if self.in_place else 1
        acc = 0 if self.passthrough else self.ew.temps() + 1
        return rows * acc + full * (self.prologue.temps() + row_nram)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        elt = element_type(self.prologue.out.value)
        rows = b.mul(n, b.c(self.ew.inner))
        ops = [op for op in self.prologue.body if not isinstance(op, arith.ConstantOp)]
        if self.in_place and isinstance(ops[0], memref.LoadOp):
            # the combined value is the tile itself: reduce it there (a copy into a row
            # buffer would be one more DMA)
            tile = _classify_load(plan, ops[0], self.prologue.loops).buffer
            assert tile is not None  # a "vec" load names its buffer
            src, at = tile.local, tile.slot
        else:
            src = b.alloc(
                "nram", scratch_elems(plan, plan.tile * self.prologue.inner), elt, "row_nram"
            )
            at = b.c(0)
            emit_elementwise(
                lowering,
                b,
                self.prologue,
                b.mul(rows, b.c(self.cols)),
                {},
                result=self.value,
                final=(src, at),
            )
        if self.passthrough:
            assert isinstance(self.ew, Elementwise)  # (passthrough says so)
            out = self.ew.out
            b.op(self.op(out.local, out.slot, src, at, rows, b.c(self.cols)))
            return
        acc = b.alloc("nram", scratch_elems(plan, plan.tile * self.ew.inner), elt, "acc_nram")
        b.op(self.op(acc, b.c(0), src, at, rows, b.c(self.cols)))
        self.ew.emit_after(lowering, b, rows, acc, t0, n, self.acc)


def match_reduce(plan) -> ReduceSelection:
    spatial = work_nest(plan.work)
    s = spatial[-1]
    ops = [op for op in s.block.ops if not isinstance(op, arith.ConstantOp)]
    loops_in = [op for op in ops if isinstance(op, ForOp)]
    if len(loops_in) != 1 or any(lp.lower != 0 or lp.stride != 1 for lp in spatial):
        raise NoMatch
    red = loop_chain(loops_in[0], perfect=True)
    if any(lp.lower != 0 or lp.stride != 1 for lp in red):
        raise NoMatch
    pos = ops.index(red[0])
    pre, post = ops[:pos], ops[pos + 1 :]
    if (
        len(pre) != 2
        or not isinstance(pre[0], memref.AllocaOp)
        or not isinstance(pre[1], memref.StoreOp)
    ):
        raise NoMatch
    acc = pre[0].memref
    body = [op for op in red[-1].block.ops if not isinstance(op, arith.ConstantOp)]
    if (
        len(body) < 4
        or not post
        or not isinstance(post[0], memref.LoadOp)
        or post[0].memref is not acc
    ):
        raise NoMatch
    la, comb, st = body[-3:]
    if not (
        isinstance(la, memref.LoadOp)
        and la.memref is acc
        and comb.name in COMBINERS
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is comb.results[0]
        and la.res in comb.operands
    ):
        raise NoMatch
    op_cls, init = COMBINERS[comb.name]
    if const_value(pre[1].value) != init:
        raise NoMatch
    value = (
        next(x for x in comb.operands if x is not la.res)
        if comb.operands[0] is not comb.operands[1]
        else None
    )
    if value is None:
        raise NoMatch
    loops = [*spatial, *red]
    prologue_ops = body[:-3]
    kinds: dict[SSAValue, str] = {}
    check_expr(plan, loops, prologue_ops, kinds)
    if kinds.get(value) != "vec":
        raise NoMatch
    consts = [op for op in red[-1].block.ops if isinstance(op, arith.ConstantOp)]
    out = plan.buffers.get(post[-1].memref) if isinstance(post[-1], memref.StoreOp) else None
    if out is None:
        raise NoMatch
    prologue = Elementwise(loops, [*consts, *prologue_ops], out)
    ew = match_epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
    loads = [op for op in prologue_ops if not isinstance(op, arith.ConstantOp)]
    in_place = len(loads) == 1 and isinstance(loads[0], memref.LoadOp) and loads[0].res is value
    return ReduceSelection(
        prologue,
        value,
        op_cls,
        math.prod(lp.trip_count for lp in red),
        ew,
        post[0].res,
        in_place,
    )
