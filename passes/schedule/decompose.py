"""Schedule primitive `decompose_reduction`: split a reduction nest into init, update and
epilogue nests (TVM's `decompose_reduction`), so reduction loops can be reordered among
the spatial ones (the GEMM `i, k, j` order, tiling `k` outside `i`/`j`).

Input/Output: loop dialect.  Requires: 1) the kernel's spatial loops form a perfect chain
whose innermost body holds exactly one loop nest (the reduction) besides scalar ops
2) the element is accumulated either directly in the output buffer or in a 0-d
`memref.alloca` accumulator that is finally stored to an output element whose indices
depend only on the spatial loops, with the output's element type (an f32 sum stored
as f16 is not decomposed: accumulating in the output would round it), except an
integer accumulator stored as another type (i32 sums requantized to i8, or dequantized to
f32): its sums go to a kernel-local buffer `sums` indexed by the spatial loops (each from
0 by 1), which the epilogue nest reads.  Guarantees: three nests over the same spatial loops;
the accumulator becomes the output element (or its `sums` element); the original (update) nest keeps the loop
names, the others get `_init` / `_post` suffixes; the epilogue nest is omitted when it
would only copy the element onto itself. Numerics unchanged.

Before (`decompose matmul_0`):

    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          ... %a = memref.load %acc[] ... memref.store %s, %acc[] ...
        }
        %v = memref.load %acc[] : memref<f32>
        %y = arith.maximumf %v, %zero : f32
        memref.store %y, %out[%i0, %i1] : memref<4x8xf32>
      }
    }

After:

    loop.for %i0 = 0 to 4 step 1 {name = "i0_init"} { loop.for ... {name = "i1_init"} {
        memref.store %zero, %out[%i0, %i1] } }
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} { loop.for ... {name = "i1"} {
        loop.for %r0 ... { ... memref.load %out[%i0, %i1] ... memref.store %s, %out[%i0, %i1] } } }
    loop.for %i0 = 0 to 4 step 1 {name = "i0_post"} { loop.for ... {name = "i1_post"} {
        %v = memref.load %out[%i0, %i1]   %y = arith.maximumf %v, %zero
        memref.store %y, %out[%i0, %i1] } }
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import IntegerType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.schedule._common import (
    ScheduleError,
    block_of,
    child_loop,
    erase,
    get_kernel,
    get_loop,
    index_arith,
    is_reduction,
)


class DecomposeShapeError(ScheduleError):
    pass


class DecomposeAccumulatorError(ScheduleError):
    pass


def _spatial_chain(kernel: KernelOp, top: ForOp | None = None) -> list[ForOp]:
    if top is None:
        tops = [op for op in kernel.block.ops if isinstance(op, ForOp)]
        if len(tops) != 1 or len(list(kernel.block.ops)) != 1:
            raise DecomposeShapeError(
                f"kernel '{kernel.sym}' must hold exactly one loop nest to decompose its reduction"
            )
        top = tops[0]
    chain = [top]
    while (nxt := child_loop(chain[-1])) is not None and not is_reduction(nxt):
        chain.append(nxt)
    if is_reduction(chain[0]):
        raise DecomposeShapeError(f"kernel '{kernel.sym}' has no spatial loop around its reduction")
    return chain


def _hoist_index_ops(loop: ForOp) -> None:
    """Move index arithmetic that depends only on values defined outside the body to the
    front of the body (so accumulator indices dominate the reduction nest)."""
    block = loop.block
    hoisted: list[Operation] = []
    for op in list(block.ops):
        local = [
            o.owner
            for o in op.operands
            if isinstance(o.owner, Operation) and o.owner.parent_block() is block
        ]
        if index_arith(op) and all(owner in hoisted for owner in local):
            hoisted.append(op)
    first = block.first_op
    for op in hoisted:
        if op is first:
            first = op.next_op
            continue
        op.detach()
        block.insert_op_before(op, first) if first is not None else block.add_op(op)


def _innermost(top: ForOp, depth: int) -> ForOp:
    loop = top
    for _ in range(depth - 1):
        loop = next(op for op in loop.block.ops if isinstance(op, ForOp))
    return loop


def _prune(body_loop: ForOp, keep: list[Operation]) -> None:
    """Erase every top-level op of the body that `keep` does not (transitively) need."""
    block = body_loop.block
    needed: set[int] = set()
    work = list(keep)
    while work:
        op = work.pop()
        if id(op) in needed:
            continue
        needed.add(id(op))
        for inner in op.walk():
            for v in inner.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner.parent_block() is block:
                    work.append(owner)
    for op in reversed(list(block.ops)):
        if id(op) not in needed:
            erase(op)


def _substitute_acc(acc: memref.AllocaOp, out: SSAValue, idx: list[SSAValue]) -> None:
    for use in list(acc.memref.uses):
        op = use.operation
        if isinstance(op, memref.LoadOp):
            new = memref.LoadOp.get(out, idx)
            block_of(op).insert_op_before(new, op)
            op.results[0].replace_all_uses_with(new.results[0])
            erase(op)
        elif isinstance(op, memref.StoreOp):
            new = memref.StoreOp.get(op.value, out, idx)
            block_of(op).insert_op_before(new, op)
            erase(op)
    erase(acc)


def decompose_reduction(root, kernel: str, loop: str | None = None) -> list[ForOp]:
    """Returns the top loops of the init, update (and post) nests. With `loop`, the nest
    that loop heads (one of several in the kernel, e.g. a producer that `compute_at`
    cloned into it) instead of the kernel's one nest."""
    k = get_kernel(root, kernel)
    chain = _spatial_chain(k, get_loop(root, kernel, loop) if loop else None)
    inner = chain[-1]
    _hoist_index_ops(inner)
    ops = list(inner.block.ops)
    nests = [op for op in ops if isinstance(op, ForOp)]
    if len(nests) != 1 or not is_reduction(nests[0]):
        raise DecomposeShapeError(
            f"loop {kernel}/{inner.loop_name} must hold exactly one reduction loop nest, "
            f"found {len(nests)} loops"
        )
    red = nests[0]
    pos = ops.index(red)
    pre, post = ops[:pos], ops[pos + 1 :]
    accs = [op for op in pre if isinstance(op, memref.AllocaOp) and not shape_of(op.memref)]
    if len(accs) > 1:
        raise DecomposeAccumulatorError(f"loop {kernel}/{inner.loop_name} has several accumulators")
    final = [op for op in post if isinstance(op, memref.StoreOp)]
    if accs and len(final) != 1:
        raise DecomposeAccumulatorError(
            f"the accumulator of loop {kernel}/{inner.loop_name} must be stored to exactly one "
            f"output element, found {len(final)} stores"
        )
    if accs and not all(
        index_arith(i.owner) if isinstance(i.owner, Operation) else True for i in final[0].indices
    ):
        raise DecomposeAccumulatorError(
            f"the output element of loop {kernel}/{inner.loop_name} is not indexed by the "
            "spatial loops"
        )
    acc_type = element_type(accs[0].memref) if accs else None
    out_type = element_type(final[0].memref) if accs else None
    local = None  # an integer sum stored as another type: a kernel-local buffer of sums
    if acc_type != out_type and not _local_sums(chain, acc_type):
        # accumulating in the output would round every partial sum to the output type
        raise DecomposeAccumulatorError(
            f"the accumulator of loop {kernel}/{inner.loop_name} has type "
            f"{acc_type}, its output element {out_type}: it cannot accumulate in the output"
        )
    if acc_type != out_type:
        assert isinstance(acc_type, IntegerType)
        local = _sums_buffer(chain, acc_type)
        block_of(chain[0]).insert_op_before(local, chain[0])
    top = chain[0]
    depth = len(chain)
    walk_all = list(top.walk())
    # per nest: its top loop and (with an accumulator) the accumulator and the final store
    parts: list[tuple[ForOp, tuple[memref.AllocaOp, memref.StoreOp] | None]] = []
    for suffix in ("_init", "_post"):
        clone = top.clone()
        walk_new = list(clone.walk())
        for new in walk_new:
            if isinstance(new, ForOp) and new.loop_name:
                new.annotate("name", new.loop_name + suffix)
        mapping = {id(o): n for o, n in zip(walk_all, walk_new)}
        pair = None
        if accs:
            acc, store = mapping[id(accs[0])], mapping[id(final[0])]
            # a clone walks in the order of its original: same positions, same op classes
            assert isinstance(acc, memref.AllocaOp) and isinstance(store, memref.StoreOp)
            pair = (acc, store)
        parts.append((clone, pair))
    parent = block_of(top)
    (init_top, init_pair), (post_top, post_pair) = parts
    parent.insert_op_before(init_top, top)
    parent.insert_op_after(post_top, top)
    for loop_top, part, pair in (
        (init_top, "init", init_pair),
        (top, "update", (accs[0], final[0]) if accs else None),
        (post_top, "post", post_pair),
    ):
        body_loop = _innermost(loop_top, depth)
        if pair is not None and local is not None:  # the sum of element [i0, i1, ..]
            ivs: list[SSAValue] = [_innermost(loop_top, n + 1).induction_var for n in range(depth)]
            _substitute_acc(pair[0], local.memref, ivs)
        elif pair is not None:
            acc, store = pair
            _substitute_acc(acc, store.memref, list(store.indices))
        body = list(body_loop.block.ops)
        at = next(n for n, op in enumerate(body) if isinstance(op, ForOp))
        keep: list[Operation]
        if part == "update":
            keep = [body[at]]
        else:
            side = body[:at] if part == "init" else body[at + 1 :]
            keep = [op for op in side if isinstance(op, memref.StoreOp)]
        _prune(body_loop, keep)
    result = [init_top, top]
    post_body = [op for op in _innermost(post_top, depth).block.ops if not index_arith(op)]
    if _is_self_copy(post_body):
        erase(post_top)
    else:
        result.append(post_top)
    init_body = [op for op in _innermost(init_top, depth).block.ops if not index_arith(op)]
    if not init_body:
        erase(init_top)
        result.pop(0)
    return result


# an i32 sum stored as i8 (a fused requantization) or f32 (a dequantization) sums into a
# kernel-local buffer over the spatial loops instead; larger ones go on the heap
LOCAL_SUMS_BYTES = 1 << 20


def _local_sums(chain: list[ForOp], acc_type) -> bool:
    """Can the sums of an accumulator of `acc_type` live in a kernel-local buffer indexed
    by the spatial loops `chain`? Integer sums only (a float sum stored narrower keeps the
    refusal: its float schedules are unchanged), over loops from 0 by 1."""
    return isinstance(acc_type, IntegerType) and all(
        lp.lower == 0 and lp.stride == 1 and lp.trip_count > 0 for lp in chain
    )


def _sums_buffer(chain: list[ForOp], acc_type: IntegerType) -> memref.AllocaOp | memref.AllocOp:
    shape = [lp.trip_count for lp in chain]
    nbytes = math.prod(shape) * max(1, acc_type.width.data // 8)
    alloc_cls = memref.AllocaOp if nbytes <= LOCAL_SUMS_BYTES else memref.AllocOp
    alloc = alloc_cls.get(acc_type, shape=shape)
    alloc.memref.name_hint = "sums"
    return alloc


def _is_self_copy(ops: list[Operation]) -> bool:
    if not ops:
        return True
    if len(ops) != 2:
        return False
    load, store = ops
    return (
        isinstance(load, memref.LoadOp)
        and isinstance(store, memref.StoreOp)
        and store.value is load.res
        and store.memref is load.memref
        and list(store.indices) == list(load.indices)
    )


@dataclass(frozen=True)
class LoopDecomposeReduction(ModulePass):
    """`loop-decompose-reduction{kernel=matmul_0}` (or `{kernel=k loop=l}`: the nest
    that loop `l` heads)"""

    name = "loop-decompose-reduction"
    kernel: str
    loop: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        decompose_reduction(op, self.kernel, self.loop or None)
