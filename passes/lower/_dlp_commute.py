"""A convolution's bias and ReLU after the max pool of its output, for `loop-to-dlp`.

Input: two consecutive loop kernels (only allocations, deallocations and constants
between them): the first stores, per output element of an NCHW plane, `f(sum)`, `sum`
a window reduction's total and `f` a chain of `+ b[c]` (a per-channel value, `c` the
stored channel) or `+ constant` and `max(., constant)`; the second is a max pool of
that buffer, the only reader, storing each window's maximum as it is (unguarded
windows: every one has a cell).
Output: the first stores `sum`, the second `f(maximum)`, with `b[c]` read at its own
channel. Every op of `f` is non-decreasing in its operand, so `max_i f(x_i) = f(max_i
x_i)` exactly, rounding included (a rounded sum is monotone in its operand): the same
results, with `f` applied to the pooled plane (a quarter of the elements for a 2 x 2
pool: LeNet's bias and ReLU after its two pools).
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.ir import Operation, SSAValue

from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.passes.lower.dlp_select._matching import const_value

MAX = ("arith.maximumf", "arith.maxnumf")


def _adjacent(a: KernelOp, b: KernelOp) -> bool:
    op = a.next_op
    while op is not None and op is not b:
        if not isinstance(op, memref.AllocOp | memref.DeallocOp | arith.ConstantOp):
            return False
        op = op.next_op
    return op is b


def _outside_stores(kernel: KernelOp) -> list[memref.StoreOp]:
    return [
        op
        for op in kernel.walk()
        if isinstance(op, memref.StoreOp) and not defined_inside(op.memref, kernel)
    ]


def _const(value: SSAValue) -> bool:
    return isinstance(value.owner, arith.ConstantOp)


def _per_channel(value: SSAValue, channel: SSAValue, kernel: KernelOp) -> bool:
    """A load of an outside buffer at [channel] (a bias), used once."""
    op = value.owner
    return (
        isinstance(op, memref.LoadOp)
        and list(op.indices) == [channel]
        and not defined_inside(op.memref, kernel)
        and value.has_one_use()
    )


Step = tuple[Operation, SSAValue, SSAValue]  # an op of f, its operand from sum, the other


def _epilogue(store: memref.StoreOp, kernel: KernelOp) -> tuple[SSAValue, list[Step]] | None:
    """(sum, f's ops from sum on) where the store's value is f(sum), sum a load of a
    kernel-local accumulator, f as in the module docstring; None otherwise."""
    if len(store.indices) != 4:
        return None
    channel = store.indices[1]
    steps: list[Step] = []
    v = store.value
    while True:
        op = v.owner
        if isinstance(op, memref.LoadOp) and defined_inside(op.memref, kernel) and not op.indices:
            break  # the window's total
        if not isinstance(op, Operation) or op.name not in ("arith.addf", *MAX):
            return None
        if not op.results[0].has_one_use() or op.parent is not store.parent:
            return None
        x, y = op.operands
        pick = None
        for inner, side in ((x, y), (y, x)):
            fits = _const(side) or (op.name == "arith.addf" and _per_channel(side, channel, kernel))
            if fits and not _const(inner):
                pick = (op, inner, side)
                break
        if pick is None:
            return None
        steps.append(pick)
        v = pick[1]
    if not v.has_one_use() or not steps:
        return None
    steps.reverse()
    return v, steps


def _max_pool(kernel: KernelOp, mid: SSAValue) -> tuple[memref.LoadOp, memref.StoreOp] | None:
    """(the load of the window's maximum, its store) where `kernel` max-pools `mid`
    (every load of it an unguarded window cell at the stored channel), else None."""
    stores = _outside_stores(kernel)
    if len(stores) != 1 or len(stores[0].indices) != 4:
        return None
    store = stores[0]
    total = store.value.owner
    if not (
        isinstance(total, memref.LoadOp)
        and defined_inside(total.memref, kernel)
        and not total.indices
        and store.value.has_one_use()
    ):
        return None
    acc = total.memref
    for use in list(mid.uses):
        op = use.operation
        if not kernel.is_ancestor(op):
            continue
        if not isinstance(op, memref.LoadOp) or op.indices[1] is not store.indices[1]:
            return None
        if not isinstance(op.parent_op(), ForOp):
            return None  # a guarded (padded) cell
        uses = list(op.res.uses)
        comb = uses[0].operation if len(uses) == 1 else None
        if comb is None or comb.name not in MAX:
            return None
        uses = list(comb.results[0].uses)
        st = uses[0].operation if len(uses) == 1 else None
        if not (isinstance(st, memref.StoreOp) and st.memref is acc):
            return None
    inits = [
        op
        for op in kernel.walk()
        if isinstance(op, memref.StoreOp) and op.memref is acc and _const(op.value)
    ]
    if len(inits) != 1 or const_value(inits[0].value) != float("-inf"):
        return None
    return total, store


def commute(kernels: list[KernelOp]) -> int:
    """Move f after the max pool for every such pair of `kernels` (a module's loop
    kernels in order); the number of pairs rewritten."""
    done = 0
    for k1, k2 in zip(kernels, kernels[1:]):
        if not _adjacent(k1, k2):
            continue
        stores = _outside_stores(k1)
        if len(stores) != 1 or not isinstance(stores[0].memref.owner, memref.AllocOp):
            continue  # (an argument: the function's result itself)
        store = stores[0]
        mid = store.memref
        others = [
            u.operation
            for u in mid.uses
            if u.operation is not store and not isinstance(u.operation, memref.DeallocOp)
        ]
        if not others or any(not k2.is_ancestor(op) for op in others):
            continue  # read after the pool too
        got = _epilogue(store, k1)
        pool = _max_pool(k2, mid)
        if got is None or pool is None:
            continue
        _move(store, *got, *pool)
        done += 1
    return done


def _move(
    store: memref.StoreOp,
    total: SSAValue,
    steps: list[Step],
    window: memref.LoadOp,
    out: memref.StoreOp,
) -> None:
    """f applied to the pool's maximum before its store (a bias read at the pool's
    channel), the convolution's total stored as it is."""
    channel = out.indices[1]
    block = out.parent
    assert block is not None  # an op of the pool's nest
    v = window.res
    for op, inner, side in steps:
        if _const(side):
            new_side = side.owner.clone()  # type: ignore[union-attr]
        else:
            load = side.owner
            assert isinstance(load, memref.LoadOp)  # _epilogue: a per-channel value
            new_side = memref.LoadOp.get(load.memref, [channel])
        block.insert_op_before(new_side, out)
        new = op.clone(value_mapper={inner: v, side: new_side.results[0]})
        block.insert_op_before(new, out)
        v = new.results[0]
    out.operands[0] = v
    store.operands[0] = total
    for op, _, side in reversed(steps):
        op.detach()
        op.erase()
        if not _const(side) and side.first_use is None:
            load = side.owner
            assert isinstance(load, Operation)
            load.detach()
            load.erase()
