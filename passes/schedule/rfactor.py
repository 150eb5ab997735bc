"""Schedule primitive `rfactor`: vectorize a reduction by accumulating `F` partial
results (TVM's `rfactor`), then combining them.

Input/Output: loop dialect.  Requires: 1) the loop is innermost 2) `F >= 1` divides its
trip count 3) its body accumulates into one element: `T[idx] = T[idx] (op) e` with `op`
one of `addf`, `mulf`, `maximumf`, `minimumf`, where `idx` is defined outside the loop
and the loaded old value has no other use.  Guarantees: the reduction is computed as `F`
interleaved partial reductions in a local buffer (initialised with the combiner's
identity), the inner partial loop is vectorized (`omp simd`: the partials stay in a
vector register, and math calls in the body use their SIMD variants), and the partials are then combined into `T[idx]` in order. When
the loop is the inner end of a chain of reduction loops that hold nothing but the next
loop and do not index `T` (`for r0: for r1: T[c] += x[c, r0, r1]`), the partials go
around the whole chain and are combined once, after it. Numerics: the
terms are reassociated (as any vectorised float reduction is); results agree with the
sequential order to rounding.

Before (`rfactor k/r0 by 16`):

    loop.for %r0 = 0 to 784 step 1 {name = "r0", reduction} {
      %a = memref.load %x[%r0]   %b = memref.load %w[%j, %r0]   %p = arith.mulf %a, %b
      %c = memref.load %out[%j]  %s = arith.addf %c, %p         memref.store %s, %out[%j]
    }

After:

    %part = memref.alloca() : memref<16xf32>
    loop.for %q = 0 to 16 step 1 {name = "r0_init", unroll = 16} { memref.store %zero, %part[%q] }
    loop.for %ro = 0 to 784 step 16 {name = "r0", reduction} {
      loop.for %ri = 0 to 16 step 1 {name = "r0_rf", vectorize} {
        %r0 = arith.addi %ro, %ri   ... %c = memref.load %part[%ri]  %s = arith.addf %c, %p
        memref.store %s, %part[%ri] } }
    loop.for %q = 0 to 16 step 1 {name = "r0_fold", reduction} {
      %v = memref.load %part[%q]  %c = memref.load %out[%j]  %s = arith.addf %c, %v
      memref.store %s, %out[%j] }
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import float_type
from dlpc.passes.schedule._common import (
    ScheduleError,
    block_of,
    depends_on,
    erase,
    get_loop,
    inner_loops,
    is_reduction,
    name_iv,
)
from dlpc.passes.schedule.split import split

Combiner = arith.AddfOp | arith.MulfOp | arith.MaximumfOp | arith.MinimumfOp
IDENTITY: dict[type[Combiner], float] = {
    arith.AddfOp: 0.0,
    arith.MulfOp: 1.0,
    arith.MaximumfOp: -math.inf,
    arith.MinimumfOp: math.inf,
}


class RfactorNotInnermostError(ScheduleError):
    pass


class RfactorFactorError(ScheduleError):
    pass


class RfactorPatternError(ScheduleError):
    pass


def _match(loop: ForOp, what: str) -> tuple[memref.StoreOp, Combiner, memref.LoadOp]:
    stores = [op for op in loop.walk() if isinstance(op, memref.StoreOp)]
    if len(stores) != 1:
        raise RfactorPatternError(f"loop {what} must store exactly once, found {len(stores)}")
    store = stores[0]
    comb = store.value.owner
    if not isinstance(comb, Combiner):
        raise RfactorPatternError(f"loop {what} does not accumulate with add, mul, max or min")
    loads = [
        o.owner
        for o in comb.operands
        if isinstance(o.owner, memref.LoadOp)
        and o.owner.memref is store.memref
        and list(o.owner.indices) == list(store.indices)
    ]
    if not loads or len(list(loads[0].res.uses)) != 1:
        raise RfactorPatternError(f"loop {what} does not accumulate into the element it stores")
    for idx in store.indices:
        owner = idx.owner
        if (
            isinstance(owner, Operation)
            and loop.is_ancestor(owner)
            or (not isinstance(owner, Operation) and owner is loop.block)
        ):
            raise RfactorPatternError(
                f"the accumulated element of loop {what} is indexed inside the loop"
            )
    return store, comb, loads[0]


def rfactor(root, kernel: str, loop: str, factor: int) -> ForOp:
    target = get_loop(root, kernel, loop)
    what = f"{kernel}/{loop}"
    if inner_loops(target):
        raise RfactorNotInnermostError(f"loop {what} is not innermost")
    if factor < 1 or target.trip_count % factor:
        raise RfactorFactorError(
            f"expected rfactor factor {factor} to divide the trip count {target.trip_count} "
            f"of loop {what}"
        )
    store, comb, old = _match(target, what)
    ty = float_type(store.value.type)  # the combiners are float ops
    k = target.kernel()
    around = _partials_around(target, store)
    parent = block_of(around)
    # partial accumulators, initialised with the combiner's identity
    part = memref.AllocaOp.get(ty, shape=[factor])
    part.memref.name_hint = f"{loop}_part" if loop.isidentifier() else "part"
    init = ForOp(0, factor, 1, name=k.fresh_loop_name(f"{loop}_init"), unroll=factor)
    name_iv(init)
    ident = arith.ConstantOp(FloatAttr(IDENTITY[type(comb)], ty))
    init.block.add_ops([ident, memref.StoreOp.get(ident.result, part.memref, [init.induction_var])])
    parent.insert_op_before(part, around)
    parent.insert_op_before(init, around)
    # the loop accumulates into part[ri] instead of T[idx]
    out_buf, out_idx = store.memref, list(store.indices)
    outer, inner = split(root, kernel, loop, factor, None, k.fresh_loop_name(f"{loop}_rf"))
    outer.annotate("name", loop)  # the outer part keeps the loop's name
    inner.annotate("vectorize")  # `omp simd`: one vector of partials (vector math calls too)
    inner.annotate("reduction", False)
    new_load = memref.LoadOp.get(part.memref, [inner.induction_var])
    block_of(old).insert_op_before(new_load, old)
    old.res.replace_all_uses_with(new_load.res)
    erase(old)
    new_store = memref.StoreOp.get(store.value, part.memref, [inner.induction_var])
    block_of(store).insert_op_before(new_store, store)
    erase(store)
    # fold the partials into T[idx], in order
    fold = ForOp(0, factor, 1, name=k.fresh_loop_name(f"{loop}_fold"), reduction=True)
    name_iv(fold)
    v = memref.LoadOp.get(part.memref, [fold.induction_var])
    c = memref.LoadOp.get(out_buf, out_idx)
    s = type(comb)(c.res, v.res)
    fold.block.add_ops([v, c, s, memref.StoreOp.get(s.results[0], out_buf, out_idx)])
    parent.insert_op_after(fold, outer if around is target else around)
    return outer


def _partials_around(target: ForOp, store: memref.StoreOp) -> ForOp:
    """The loop the partials go around: `target`, or the outermost of the reduction
    loops enclosing it that hold nothing but the next loop and do not index the
    accumulated element (`r0` of `for r0: for r1: T[c] += x[c, r0, r1]`), so the partials
    accumulate over all of them and are folded once, not once per outer iteration."""
    anchor = target
    while isinstance(up := anchor.parent_op(), ForOp) and is_reduction(up):
        if list(up.block.ops) != [anchor] or any(
            depends_on(i, up.induction_var) for i in store.indices
        ):
            break
        anchor = up
    return anchor


@dataclass(frozen=True)
class LoopRfactor(ModulePass):
    """`loop-rfactor{kernel=linear_0 loop=r0 factor=16}`"""

    name = "loop-rfactor"
    kernel: str
    loop: str
    factor: int

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rfactor(op, self.kernel, self.loop, self.factor)
