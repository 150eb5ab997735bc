"""Fold a decomposed reduction's init and epilogue nests into its accumulator tile.

Input/Output: loop dialect (after scheduling).  Requires: nothing (a kernel that does
not have the shape below is left as it is).  Guarantees: numerics unchanged; the
output is written once per element instead of three times.

`decompose` splits a reduction into an init nest (`out = init` over the whole output),
the update nest and an epilogue nest (`out = f(out, ...)`, a fused bias / activation /
residual add); a register-tiled schedule then stages each output tile in a local
accumulator (`cache_write`: copied in from `out` before the reductions, back out
after). When every reduction loop is inside the tile (a direct conv's tile; not a gemm
whose `kc` blocks revisit the tile), each element is copied in exactly once, right
after the init nest wrote `init` to it, and copied out exactly once, right before the
epilogue nest reads it. So the copy-in can store `init` itself and the copy-out can
store `f(acc, ...)`: the init and epilogue nests, two passes over the whole output
(serial ones, outside the parallel tile loop), disappear.

Before:

    loop.for %i = 0 to 8 {name = "i_init"} { memref.store %zero, %out[%i] }
    loop.for %t = 0 to 8 step 4 {parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 {name = "acc_in0"} { %v = memref.load %out[%t + %a]
                                                 memref.store %v, %acc[%a] }
      loop.for %r ... {reduction} { ... %acc ... }
      loop.for %a = 0 to 4 {name = "acc_out0"} { %s = memref.load %acc[%a]
                                                  memref.store %s, %out[%t + %a] }
    }
    loop.for %i = 0 to 8 {name = "i_post"} { %s = memref.load %out[%i]
        %b = memref.load %bias[%i]   %y = arith.addf %s, %b   memref.store %y, %out[%i] }

After:

    loop.for %t = 0 to 8 step 4 {parallel} {
      %acc = memref.alloca() : memref<4xf32>
      loop.for %a = 0 to 4 {name = "acc_in0"} { memref.store %zero, %acc[%a] }
      loop.for %r ... {reduction} { ... %acc ... }
      loop.for %a = 0 to 4 {name = "acc_out0"} { %s = memref.load %acc[%a]
          %b = memref.load %bias[%t + %a]   %y = arith.addf %s, %b
          memref.store %y, %out[%t + %a] }
    }

An integer sum requantized into another type accumulates in decompose's kernel-local
`sums` buffer, and its epilogue stores into the output: then the copy-out stores the
epilogue's value into the output itself, and `sums` goes with the two nests.

A copy-in that then stores zeros in front of a gemm-shaped reduction (one reduction
loop, the loops inside it spatial, each writing every element of the tile once with
`acc = acc + p`) is peeled into that loop's first iteration (`_peel_first`): the tile
starts as the first product and the reduction loop runs from its second iteration (no
zero fill; as loops GCC had made the fill a memset call). A direct conv's tile, whose
reduction nests more reduction loops, keeps its zeros.

Conditions checked per kernel (otherwise it is left alone): one top-level init nest
and at most one epilogue nest, each a perfect nest over the whole output (bounds 0 to
the dim, or short of it on a loop over a symbolic extent or in a `dlpc.short` kernel,
step 1, the element indexed by the induction variables in order); the init stores a
constant; the epilogue loads the element once, stores it last, and otherwise only
computes or loads other buffers the kernel never writes; the rest of the kernel touches
`out` exactly twice, one load (the copy-in) and one store (the copy-out), in the same
nest and under no reduction loop.

    dlpc-opt model.loop.mlir -p 'loop-fold-init-epilogue{kernel=conv2d_relu_0}'
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp, KernelOp, ancestor_in, kernels
from dlpc.passes.schedule._common import Affine, affine, get_kernel, is_reduction, memref_type


def _perfect_nest(top: ForOp, shape: tuple[int, ...]) -> tuple[list[ForOp], Block] | None:
    """The loops of a perfect nest over the whole of `shape` (0 to dim, step 1), and
    its innermost block; constants may sit between the loops."""
    loops, loop = [], top
    while True:
        if loop.lower != 0 or loop.stride != 1 or len(loops) >= len(shape):
            return None
        dim = shape[len(loops)]
        # a loop over a symbolic extent, or any loop of a short binding's static kernel
        # (loop-short-extents' `dlpc.short`), may stop short of its buffer's dim: past it
        # lies padding no result reads
        if loop.upper != dim and not (loop.upper < dim and _may_stop_short(loop)):
            return None
        loops.append(loop)
        inner = [op for op in loop.block.ops if isinstance(op, ForOp)]
        rest = [op for op in loop.block.ops if not isinstance(op, ForOp | arith.ConstantOp)]
        if not inner:
            return (loops, loop.block) if len(loops) == len(shape) else None
        if len(inner) != 1 or rest:
            return None
        loop = inner[0]


def _may_stop_short(loop: ForOp) -> bool:
    """Whether `loop` runs over a symbolic extent or sits in a `dlpc.short` kernel."""
    if "dlpc.extent" in loop.attributes:
        return True
    op = loop.parent_op()
    while op is not None and not isinstance(op, KernelOp):
        op = op.parent_op()
    return op is not None and "dlpc.short" in op.attributes


def _indexed_by(op: memref.LoadOp | memref.StoreOp, loops: list[ForOp]) -> bool:
    return list(op.indices) == [lp.induction_var for lp in loops]


def _init_value(top: ForOp, out: SSAValue) -> arith.ConstantOp | None:
    nest = _perfect_nest(top, memref_type(out).get_shape())
    if nest is None:
        return None
    loops, block = nest
    body = list(block.ops)
    stores = [op for op in body if isinstance(op, memref.StoreOp)]
    if len(stores) != 1 or stores[0].memref is not out or not _indexed_by(stores[0], loops):
        return None
    if any(not isinstance(op, memref.StoreOp | arith.ConstantOp) for op in body):
        return None
    value = stores[0].value.owner
    return value if isinstance(value, arith.ConstantOp) else None


def _epilogue(top: ForOp, out: SSAValue, written: set[SSAValue]):
    """(loops, body ops, the element's load, the final store) of an epilogue nest."""
    nest = _perfect_nest(top, memref_type(out).get_shape())
    if nest is None:
        return None
    loops, block = nest
    body = list(block.ops)
    if not body or not isinstance(body[-1], memref.StoreOp):
        return None
    store = body[-1]
    loads = [op for op in body if isinstance(op, memref.LoadOp) and op.memref is out]
    if not (store.memref is out or _sums_to(out, store.memref)):
        return None
    if not _indexed_by(store, loops) or len(loads) != 1:
        return None
    if not _indexed_by(loads[0], loops):
        return None
    for op in body[:-1]:
        if isinstance(op, memref.LoadOp):
            if op.memref is not out and op.memref in written:
                return None
        elif op.regions or not _pure(op):
            return None
    return loops, body, loads[0], store


def _sums_to(out: SSAValue, target: SSAValue) -> bool:
    """Is `out` a kernel-local buffer of sums (decompose's `sums`: an integer sum
    requantized into another type) whose epilogue stores into `target` of its shape?
    Then the copy-out stores the epilogue's value into `target` and `sums` goes."""
    return (
        isinstance(out.owner, memref.AllocaOp | memref.AllocOp)
        and out.name_hint == "sums"
        and isinstance(memref_type(out).get_element_type(), IntegerType)
        and memref_type(target).get_shape() == memref_type(out).get_shape()
    )


def _pure(op: Operation) -> bool:
    return op.dialect_name() in ("arith", "math")


def _under_reduction(op: Operation, kernel: KernelOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not kernel:
        if isinstance(parent, ForOp) and is_reduction(parent):
            return True
        parent = parent.parent_op()
    return False


def fold_kernel(kernel: KernelOp) -> bool:
    """Fold `kernel`'s init and epilogue nests into its accumulator tile; whether it did.
    The nests are looked for at the kernel's top level, else in the body of any loop
    (a reduction `compute_at` cloned into its consumer's loop and decomposed there)."""
    if _fold_block(kernel, kernel.block):
        return True
    done = False
    for loop in [op for op in kernel.walk() if isinstance(op, ForOp)]:
        if any(
            isinstance(op, ForOp) and (op.loop_name or "").endswith("_init")
            for op in loop.block.ops
        ):
            done = _fold_block(kernel, loop.block) or done
    return done


def _inside(op: Operation, region: Block) -> bool:
    current: Operation | None = op
    while current is not None:
        if current.parent_block() is region:
            return True
        current = current.parent_op()
    return False


def _fold_block(kernel: KernelOp, region: Block) -> bool:
    tops = [op for op in region.ops if isinstance(op, ForOp)]
    inits = [lp for lp in tops if (lp.loop_name or "").endswith("_init")]
    posts = [lp for lp in tops if (lp.loop_name or "").endswith("_post")]
    if len(inits) != 1 or len(posts) > 1:
        return False
    init = inits[0]
    stores = [op for op in init.walk() if isinstance(op, memref.StoreOp)]
    if len(stores) != 1:
        return False
    out = stores[0].memref
    value = _init_value(init, out)
    if value is None:
        return False
    others = [op for op in region.ops if op is not init and op not in posts]
    written = {op.memref for top in others for op in top.walk() if isinstance(op, memref.StoreOp)}
    post = _epilogue(posts[0], out, written) if posts else None
    if posts and post is None:
        return False
    touching = [
        op
        for top in others
        for op in top.walk()
        if isinstance(op, memref.LoadOp | memref.StoreOp) and op.memref is out
    ]
    copy_out = [op for op in touching if isinstance(op, memref.StoreOp)]
    if len(copy_out) != 1:
        return False
    main = ancestor_in(copy_out[0], region)
    loads = [op for op in touching if isinstance(op, memref.LoadOp)]
    copy_in = [op for op in loads if ancestor_in(op, region) is main]
    # without an epilogue nest, later nests may read the finished element (a consumer
    # the reduction was computed inside): they see the same values after the fold
    order = list(region.ops)
    later = [op for op in loads if op not in copy_in]
    if later and (
        posts or any(order.index(ancestor_in(op, region)) < order.index(main) for op in later)
    ):
        return False
    if len(copy_in) != 1:
        return False
    load, store = copy_in[0], copy_out[0]
    if post is not None:  # what the epilogue reads from outside it must be there already
        before = set(region.ops).difference([init, posts[0]])
        order = list(region.ops)
        for op in post[1]:
            for v in op.operands:
                owner = v.owner
                where = owner if isinstance(owner, Operation) else owner.parent_op()
                if where is None or not _inside(where, region):
                    continue  # defined outside the block: available everywhere in it
                if posts[0].is_ancestor(where):
                    continue
                top = ancestor_in(where, region)
                if top not in before or order.index(top) > order.index(main):
                    return False
    if _under_reduction(load, kernel) or _under_reduction(store, kernel):
        return False
    # the copy-in stores the init value itself
    block = load.parent_block()
    assert block is not None
    fresh = value.clone()
    block.insert_op_before(fresh, load)
    load.res.replace_all_uses_with(fresh.result)
    block.erase_op(load)
    _peel_first(block.parent_op())
    # the copy-out stores the epilogue of the accumulated value
    if post is not None:
        loops, body, element, final = post
        mapping: dict[SSAValue, SSAValue] = {
            lp.induction_var: idx for lp, idx in zip(loops, store.indices)
        }
        mapping[element.res] = store.value
        for lp in loops[:-1]:  # constants between the epilogue's loops
            for op in lp.block.ops:
                if isinstance(op, arith.ConstantOp):
                    copy = op.clone()
                    store.parent_block().insert_op_before(copy, store)  # type: ignore[union-attr]
                    mapping[op.result] = copy.result
        for op in body[:-1]:
            if op is element:
                continue
            copy = op.clone(value_mapper=mapping)
            store.parent_block().insert_op_before(copy, store)  # type: ignore[union-attr]
            for old, new in zip(op.results, copy.results):
                mapping[old] = new
        store.operands[0] = mapping.get(final.value, final.value)
        if final.memref is not out:  # the requantized value into the output, not sums
            block = store.parent_block()
            assert block is not None
            block.insert_op_before(
                memref.StoreOp.get(store.value, final.memref, store.indices), store
            )
            block.erase_op(store)
        region.erase_op(posts[0])
    region.erase_op(init)
    if not out.uses and isinstance(out.owner, memref.AllocaOp | memref.AllocOp):
        out.owner.detach()
        out.owner.erase()
    return True


def _is_zero(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, FloatAttr)
        and owner.value.value.data == 0.0
    )


def _peel_first(copy_in: Operation | None) -> None:
    """The first iteration of the reduction after a copy-in of zeros, peeled into the
    tile's init (the copy-in nest gone): `acc = 0; for r: acc = acc + p(r)` becomes
    `acc = p(r0); for r from r0 + 1: acc = acc + p(r)`. Only for a single reduction
    loop right after the copy-in whose loops inside are not reductions and write every
    element of the tile once (`acc[c, .., i, j]`, one loop from 0 per dim of more than
    one element, in order), with one load and one `addf` store of the tile (a gemm
    micro-kernel's shape; a direct conv's nested reductions are left alone). The
    products are the same; the first sum `0 + p` is `p` (a -0.0 product stays -0.0).
    No zero fill of the tile (docs/design/schedules.md#winograd-fused)."""
    nest = copy_in
    while isinstance(nest, ForOp) and isinstance(nest.parent_op(), ForOp):
        if any(isinstance(op, memref.AllocaOp) for op in nest.parent_block().ops):  # type: ignore[union-attr]
            break
        nest = nest.parent_op()
    if not isinstance(nest, ForOp):
        return
    stores = [op for op in nest.walk() if isinstance(op, memref.StoreOp)]
    if len(stores) != 1 or not _is_zero(stores[0].value):
        return
    acc = stores[0].memref
    if (
        not isinstance(acc.owner, memref.AllocaOp)
        or acc.owner.parent_block() is not nest.parent_block()
    ):
        return
    red = nest.next_op
    while isinstance(red, arith.ConstantOp):
        red = red.next_op
    if not isinstance(red, ForOp) or not is_reduction(red) or red.trip_count < 1:
        return
    inner = [op for op in red.walk() if isinstance(op, ForOp) and op is not red]
    loads = [op for op in red.walk() if isinstance(op, memref.LoadOp) and op.memref is acc]
    updates = [op for op in red.walk() if isinstance(op, memref.StoreOp) and op.memref is acc]
    if len(loads) != 1 or len(updates) != 1 or any(is_reduction(lp) for lp in inner):
        return
    load, update = loads[0], updates[0]
    add = update.value.owner
    if not isinstance(add, arith.AddfOp) or load.res not in (add.lhs, add.rhs):
        return
    same = [affine(i) == affine(j) is not None for i, j in zip(load.indices, update.indices)]
    if len(list(load.res.uses)) != 1 or not all(same):
        return
    if not _covers(update, memref_type(acc).get_shape(), inner):
        return
    # the peeled iteration: a copy of the loop over its first iteration storing p
    first = red.clone()
    first.properties["ub"] = IntegerAttr(red.lower + red.stride, i64)
    first.annotate("reduction", False)  # (one iteration)
    kernel = red.kernel()
    for lp in [op for op in first.walk() if isinstance(op, ForOp)]:  # (names unique)
        lp.annotate("name", kernel.fresh_loop_name(f"{lp.loop_name or 'r'}_first"))
    block = red.parent_block()
    assert block is not None
    block.insert_op_before(first, red)
    copied = [op for op in first.walk() if isinstance(op, memref.LoadOp | memref.StoreOp)]
    for op in copied:
        if isinstance(op, memref.StoreOp) and op.memref is acc:  # acc = p
            add = op.value.owner
            assert isinstance(add, arith.AddfOp)
            element = add.lhs.owner
            mine = isinstance(element, memref.LoadOp) and element.memref is acc
            op.operands[0] = add.rhs if mine else add.lhs
            add.detach()
            add.erase()
    for op in copied:
        if isinstance(op, memref.LoadOp) and op.memref is acc:
            op.detach()
            op.erase()
    if red.trip_count == 1:
        red.detach()
        red.erase()
    else:
        red.properties["lb"] = IntegerAttr(red.lower + red.stride, i64)
    nest.detach()
    nest.erase()


def _covers(store: memref.StoreOp, shape: tuple[int, ...], loops: list[ForOp]) -> bool:
    """The store writes each element of `shape` once over `loops`: each index is a
    constant 0 (a dim of one) or the variable of its own loop from 0 to the dim."""
    used: list[ForOp] = []
    for idx, dim in zip(store.indices, shape):
        form = affine(idx)
        if form is not None and form == Affine(0, {}) and dim == 1:
            continue
        lp = next((lp for lp in loops if lp.induction_var is idx), None)
        if lp is None or lp in used or (lp.lower, lp.upper, lp.stride) != (0, dim, 1):
            return False
        used.append(lp)
    return len(used) == len(loops)


@dataclass(frozen=True)
class LoopFoldInitEpilogue(ModulePass):
    """`loop-fold-init-epilogue{kernel=name}`: every kernel (or the one named)."""

    name = "loop-fold-init-epilogue"
    kernel: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        todo = [get_kernel(op, self.kernel)] if self.kernel else list(kernels(op))
        for kernel in todo:
            fold_kernel(kernel)
