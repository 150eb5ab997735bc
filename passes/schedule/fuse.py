"""Schedule primitive `fuse`: two perfectly nested loops become one loop.

Input/Output: loop dialect.  Requires: `inner` is the only op in `outer`'s body
(adjacent, perfect; index arithmetic between them is sunk into the body).  Guarantees:
one loop over `trips(outer) * trips(inner)` iterations in the same order; the old
induction variables are recovered with `divui`/`remui`; annotations are dropped except
`parallel` of the outer loop, `reduction` of either and a symbolic extent's mark of the
outer loop (`fuse_extent`).

Before (`fuse k/i0, i1 -> f`):

    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} { body(%i0, %i1) }
    }

After:

    loop.for %f = 0 to 32 step 1 {name = "f", parallel} {
      %c8 = arith.constant 8 : index
      %i0 = arith.divui %f, %c8 : index
      %i1 = arith.remui %f, %c8 : index
      body(%i0, %i1)
    }

(with `lb + k * step` around each when the loops do not start at 0 or step 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    child_loop,
    const,
    fresh_name,
    get_loop,
    name_iv,
)


class FuseNotAdjacentError(ScheduleError):
    pass


def _rescale(k: SSAValue, loop: ForOp, ops: list[Operation]) -> SSAValue:
    """lb + k * step"""
    value = k
    if loop.stride != 1:
        c = const(loop.stride)
        mul = arith.MuliOp(value, c.result)
        ops += [c, mul]
        value = mul.result
    if loop.lower != 0:
        c = const(loop.lower)
        add = arith.AddiOp(value, c.result)
        ops += [c, add]
        value = add.result
    return value


def fuse(root, kernel: str, outer: str, inner: str, fused: str | None = None) -> ForOp:
    out = get_loop(root, kernel, outer)
    inn = get_loop(root, kernel, inner)
    if child_loop(out) is not inn:
        raise FuseNotAdjacentError(
            f"loop {kernel}/{inner} is not the only op in the body of loop {kernel}/{outer}"
        )
    k = out.kernel()
    n_out, n_in = out.trip_count, inn.trip_count
    name = fresh_name(k, fused, f"{outer}_{inner}")
    loop = ForOp(0, n_out * n_in, 1, name=name, parallel=out.parallel is not None)
    if out.reduction is not None or inn.reduction is not None:
        loop.annotate("reduction")
    fuse_extent(out, inn, loop)
    name_iv(loop)
    c = const(n_in)
    div = arith.DivUIOp(loop.induction_var, c.result)
    rem = arith.RemUIOp(loop.induction_var, c.result)
    ops: list[Operation] = [c, div, rem]
    v_out = _rescale(div.result, out, ops)
    v_in = _rescale(rem.result, inn, ops)
    v_out.name_hint = out.induction_var.name_hint
    v_in.name_hint = inn.induction_var.name_hint
    loop.block.add_ops(ops)
    for op in list(inn.block.ops):
        op.detach()
        loop.block.add_op(op)
    out.induction_var.replace_all_uses_with(v_out)
    inn.induction_var.replace_all_uses_with(v_in)
    parent = out.parent_block()
    assert parent is not None
    parent.insert_op_before(loop, out)
    out.detach()
    out.erase()
    return loop


def fuse_extent(out: ForOp, inn: ForOp, loop: ForOp) -> None:
    """An outer loop over a symbolic extent (`dlpc.extent`, passes/lower/_symbolic.py)
    from 0 by 1, fused with an unmarked inner one of n iterations: the fused loop keeps
    the mark, its limit n times the outer's (`dlpc.extent_scale`), so it still stops at
    the call's extent. (Other marked pairs lose the marks: the loop runs to its bound.)"""
    marks = ("dlpc.extent", "dlpc.extent_base")
    if (
        "dlpc.extent" not in out.attributes
        or any(k in inn.attributes for k in marks)
        or "dlpc.extent_id" in out.attributes
        or (out.lower, out.stride) != (0, 1)
    ):
        return
    for key in marks:
        if key in out.attributes:
            loop.attributes[key] = out.attributes[key]
    scale = out.attributes.get("dlpc.extent_scale")
    times = scale.value.data if isinstance(scale, IntegerAttr) else 1
    loop.attributes["dlpc.extent_scale"] = IntegerAttr(times * inn.trip_count, 64)


@dataclass(frozen=True)
class LoopFuse(ModulePass):
    """`loop-fuse{kernel=relu_0 outer=i0 inner=i1 fused=f}`"""

    name = "loop-fuse"
    kernel: str
    outer: str
    inner: str
    fused: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse(op, self.kernel, self.outer, self.inner, self.fused)
