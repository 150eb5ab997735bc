"""Views for reshapes, and a static memory plan: @main's intermediates in one arena.

Input: loop IR (`loop.kernel`s over memrefs in `func.func @main`, intermediates as
`memref.alloc`/`memref.dealloc` in @main, as te-to-loop writes them).
Output: the same, with

- `loop-views`: every reshape-family copy kernel (origin graph.reshape, squeeze,
  unsqueeze, flatten) that copies a buffer into a fresh intermediate in row-major order
  removed; the intermediate becomes `memref.reinterpret_cast %src to offset: [0], sizes:
  [...], strides: [...]` (row-major, contiguous), an alias of the same memory;
- `loop-memory-plan`: every `memref.alloc` of @main's body replaced by
  `memref.view %arena[%offset][]` of one `memref.alloc() {dlpc.arena}` of
  `memref<PEAKxi8>`, placed first; the deallocs removed. @main records
  `dlpc.arena_bytes` (the peak) and `dlpc.intermediate_bytes` (the sum of all
  intermediates). The C backend keeps that arena resident: allocated once per compiled
  model, not per call.

Requires: static shapes, identity layouts. Guarantees (the plan): two buffers whose
lifetimes overlap never share a byte, except an elementwise kernel's output placed over
an input that dies in that kernel (in-place: every access to both uses the same index
values, so each element is read before it is written, by the same iteration).

Lifetimes are intervals over the order of @main's top-level ops: from the first op that
uses a buffer (or any alias of it) to the last. Placement is greedy by size, largest
first, each at the lowest 64-byte-aligned offset free for its whole lifetime (TFLite's
"greedy by size" arena planner); sizes are rounded up to 64 bytes (the C prelude's
alignment, a cache line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnitAttr,
    i8,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.loop import KernelOp, defined_inside
from dlpc.dialects.typed import memref_type

ALIGN = 64
ARENA = "dlpc.arena"
RESHAPES = ("graph.reshape", "graph.squeeze", "graph.unsqueeze", "graph.flatten")
ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1}


class MemoryPlanError(VerifyException):
    """A buffer the plan cannot place (dynamic shape, non-identity layout)."""


def _main(module: ModuleOp) -> func.FuncOp | None:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    named = [f for f in funcs if f.sym_name.data == "main"]
    return named[0] if named else (funcs[0] if len(funcs) == 1 else None)


def buffer_bytes(ty: MemRefType, what: str) -> int:
    """The bytes of a static, identity-layout memref (`what` names it in errors)."""
    shape = tuple(ty.get_shape())
    if any(d < 0 for d in shape):
        raise MemoryPlanError(f"loop-memory-plan needs static shapes; {what} is {ty}")
    if not isinstance(ty.layout, NoneAttr):
        raise MemoryPlanError(f"loop-memory-plan needs identity layouts; {what} is {ty}")
    elt = str(ty.get_element_type())
    size = ELEMENT_BYTES.get(elt, 1 if elt == "i1" else 8)
    return math.prod(shape) * size


def _top(op: Operation, block) -> Operation:
    """The ancestor of `op` that sits directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None, "an op outside @main"
        op = parent
    return op


def _aliases(value: SSAValue) -> list[SSAValue]:
    """`value` and every value that aliases it (reinterpret_cast / view chains)."""
    found, todo = [], [value]
    while todo:
        v = todo.pop()
        found.append(v)
        for use in v.uses:
            if isinstance(use.operation, memref.ReinterpretCastOp | memref.ViewOp):
                todo.append(use.operation.results[0])
    return found


def _writes(k: Operation) -> set[SSAValue]:
    return {op.operands[1] for op in k.walk() if isinstance(op, memref.StoreOp | memref.CopyOp)}


# ------------------------------------------------------------------------- views


def is_reshape_copy(k: KernelOp) -> tuple[SSAValue, SSAValue] | None:
    """(source, destination) when `k` is a reshape-family kernel copying one buffer into
    another of the same element type and count (row-major: what such a kernel means)."""
    origin = k.origin.data if k.origin is not None else ""
    if origin not in RESHAPES:
        return None
    free = [v for v in _free_values(k) if isinstance(v.type, MemRefType)]
    written = _writes(k)
    if len(free) != 2 or len(written) != 1:
        return None
    (dst,) = written
    (src,) = [v for v in free if v is not dst]
    s, d = src.type, dst.type
    assert isinstance(s, MemRefType) and isinstance(d, MemRefType)
    if s.get_element_type() != d.get_element_type():
        return None
    if math.prod(s.get_shape()) != math.prod(d.get_shape()):
        raise VerifyException(
            f"reshape kernel '{k.sym}' reads {math.prod(s.get_shape())} elements but "
            f"writes {math.prod(d.get_shape())}"
        )
    return src, dst


def _free_values(k: Operation) -> list[SSAValue]:
    free: list[SSAValue] = []
    for op in k.walk():
        for v in op.operands:
            if not defined_inside(v, k) and v not in free:
                free.append(v)
    return free


def _dealloc_of(value: SSAValue, fn: func.FuncOp) -> memref.DeallocOp | None:
    for use in value.uses:
        if isinstance(use.operation, memref.DeallocOp):
            return use.operation
    return None


def alias_reshapes(fn: func.FuncOp) -> int:
    """Replace reshape copy kernels into fresh intermediates by aliases; the count."""
    removed = 0
    for k in [op for op in fn.body.block.ops if isinstance(op, KernelOp)]:
        pair = is_reshape_copy(k)
        if pair is None:
            continue
        src, dst = pair
        alloc = dst.owner
        if not isinstance(alloc, memref.AllocOp) or alloc.parent_block() is not fn.body.block:
            continue  # an output of @main, or a kernel-local buffer: the copy stays
        if any(dst in _writes(o) for o in fn.body.block.ops if o is not k):
            continue  # written again later: not a value, keep the copy
        if not isinstance(src.type, MemRefType) or not isinstance(src.type.layout, NoneAttr):
            continue
        dst_type = memref_type(dst)
        shape = list(dst_type.get_shape())
        strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
        cast = memref.ReinterpretCastOp.from_dynamic(src, [0], shape, strides, dst_type)
        # the alias is defined where the source is live: just before the kernel
        fn.body.block.insert_op_before(cast, k)
        if cast.result.name_hint is None:
            cast.result.name_hint = dst.name_hint
        # one buffer now: freed where the later of the two was (src's dealloc moves
        # there; with none for dst, at the end of @main)
        src_free = _dealloc_of(src, fn)
        dst_free = _dealloc_of(dst, fn)
        if src_free is not None and dst_free is None:
            src_free.detach()
            src_free.erase()
        elif src_free is not None and dst_free is not None:
            if src_free.is_before_in_block(dst_free):  # dst lives longer: free there
                src_free.detach()
                fn.body.block.insert_op_after(src_free, dst_free)
        if dst_free is not None:
            dst_free.detach()
            dst_free.erase()
        k.detach()
        k.erase()
        dst.replace_all_uses_with(cast.result)
        alloc.detach()
        alloc.erase()
        removed += 1
    return removed


@dataclass(frozen=True)
class LoopViews(ModulePass):
    """`loop-views`: reshape/squeeze/unsqueeze/flatten copy kernels become aliases."""

    name = "loop-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = _main(op)
        if fn is not None:
            alias_reshapes(fn)


# ------------------------------------------------------------------ memory plan


@dataclass
class Buffer:
    """One intermediate: its bytes and lifetime [start, end] over @main's op order."""

    value: SSAValue
    size: int
    start: int
    end: int
    offset: int = -1
    # buffers placed at this one's offset (in-place reuse), this one included
    group: list[Buffer] = field(default_factory=list)


def _rounded(n: int) -> int:
    return max(ALIGN, (n + ALIGN - 1) // ALIGN * ALIGN)


def place(buffers: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Offsets for (size, start, end) buffers, greedy by size: the largest first, each
    at the lowest aligned offset that no placed buffer with an overlapping lifetime
    covers. Returns (offsets, peak bytes)."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i][0], buffers[i][1], i))
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    offsets = [0] * len(buffers)
    peak = 0
    for i in order:
        size, start, end = buffers[i]
        size = _rounded(size)
        busy = sorted((o, o + s) for o, s, s0, e0 in placed if s0 <= end and start <= e0)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, (hi + ALIGN - 1) // ALIGN * ALIGN)
        offsets[i] = offset
        placed.append((offset, size, start, end))
        peak = max(peak, offset + size)
    return offsets, peak


def _in_place_ok(k: Operation, src: SSAValue, dst: SSAValue) -> bool:
    """Whether kernel `k` may write `dst` over `src`: same bytes, and every load of
    `src` and every access to `dst` in `k` use the same index values, with no other
    alias of either involved (each element is read before it is written, in the same
    iteration)."""
    if src.type != dst.type:
        return False
    accesses = []
    for op in k.walk():
        if isinstance(op, memref.LoadOp | memref.StoreOp) and op.memref in (src, dst):
            if isinstance(op, memref.StoreOp) and op.memref is src:
                return False
            accesses.append(op)
        elif any(v in (src, dst) for v in op.operands) and not isinstance(op, KernelOp):
            return False  # a copy, a cast: not a plain elementwise access
    if not accesses or len({tuple(a.indices) for a in accesses}) != 1:
        return False
    if len({a.parent_block() for a in accesses}) != 1:
        return False
    # in one block, in program order: every read of src before the first store to dst
    first_store = next(n for n, a in enumerate(accesses) if isinstance(a, memref.StoreOp))
    return all(
        not (isinstance(a, memref.LoadOp) and a.memref is src) for a in accesses[first_store:]
    )


def plan(fn: func.FuncOp) -> tuple[list[Buffer], int]:
    """The plan for @main's allocs (offsets set on the buffers), and its peak bytes."""
    block = fn.body.block
    position = {op: n for n, op in enumerate(block.ops)}
    buffers: list[Buffer] = []
    for op in block.ops:
        if isinstance(op, memref.AllocOp) and ARENA not in op.attributes:
            ty = op.memref.type
            assert isinstance(ty, MemRefType)
            what = f"%{op.memref.name_hint}" if op.memref.name_hint else "an intermediate"
            size = buffer_bytes(ty, what)
            users = [
                position[_top(use.operation, block)]
                for v in _aliases(op.memref)
                for use in v.uses
                if not isinstance(use.operation, memref.DeallocOp)
            ]
            users = [u for u in users if u != position[op]] or [position[op]]
            buffers.append(Buffer(op.memref, size, min(users), max(users)))
    # in-place: an output of an elementwise kernel over an input that dies there
    by_value = {b.value: b for b in buffers}
    for b in sorted(buffers, key=lambda b: b.start):
        b.group = b.group or [b]
    leader: dict[int, Buffer] = {id(b): b for b in buffers}
    reused: set[int] = set()  # buffers whose slot a later buffer took
    for b in sorted(buffers, key=lambda b: b.start):
        k = list(block.ops)[b.start]
        if not isinstance(k, KernelOp) or leader[id(b)] is not b or len(b.group) > 1:
            continue
        for v in _free_values(k):
            a = by_value.get(v)
            if a is None or a is b or a.end != b.start or id(a) in reused:
                continue
            head = leader[id(a)]
            if head.size < b.size or not _in_place_ok(k, a.value, b.value):
                continue
            if len(_aliases(a.value)) > 1:
                continue
            reused.add(id(a))
            head.group.append(b)
            head.end = max(head.end, b.end)
            leader[id(b)] = head
            break
    heads = [b for b in buffers if leader[id(b)] is b]
    offsets, peak = place([(h.size, h.start, h.end) for h in heads])
    for h, offset in zip(heads, offsets):
        for member in h.group:
            member.offset = offset
    return buffers, peak


def apply_plan(fn: func.FuncOp) -> tuple[int, int]:
    """Rewrite @main's allocs into views of one arena; (peak, sum of intermediates)."""
    buffers, peak = plan(fn)
    if not buffers:
        return 0, 0
    block = fn.body.block
    arena = memref.AllocOp([], [], MemRefType(i8, [peak]))
    arena.attributes[ARENA] = UnitAttr()
    arena.memref.name_hint = "arena"
    first = block.first_op
    assert first is not None  # (it holds the allocs being planned)
    block.insert_op_before(arena, first)
    for b in buffers:
        alloc = b.value.owner
        assert isinstance(alloc, memref.AllocOp)
        offset = arith.ConstantOp(IntegerAttr(b.offset, IndexType()))
        view = memref.ViewOp(arena.memref, offset.result, [], memref_type(b.value))
        view.result.name_hint = b.value.name_hint
        block.insert_ops_before([offset, view], alloc)
        for use in list(b.value.uses):
            if isinstance(use.operation, memref.DeallocOp):
                use.operation.detach()
                use.operation.erase()
        b.value.replace_all_uses_with(view.result)
        alloc.detach()
        alloc.erase()
    total = sum(b.size for b in buffers)
    fn.attributes["dlpc.arena_bytes"] = IntegerAttr(peak, 64)
    fn.attributes["dlpc.intermediate_bytes"] = IntegerAttr(total, 64)
    return peak, total


def check_plan(fn: func.FuncOp) -> list[str]:
    """Every pair of arena views whose lifetimes overlap and whose bytes overlap, other
    than an in-place pair (for tests): an empty list when the plan is sound."""
    block = fn.body.block
    position = {op: n for n, op in enumerate(block.ops)}
    views = []
    for op in block.ops:
        if isinstance(op, memref.ViewOp):
            shift = op.byte_shift.owner
            assert isinstance(shift, arith.ConstantOp)
            offset = shift.value.value.data  # type: ignore[union-attr]
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            users = [
                position[_top(use.operation, block)] for v in _aliases(op.result) for use in v.uses
            ]
            users = users or [position[op]]
            views.append((op.result, offset, buffer_bytes(ty, "a view"), min(users), max(users)))
    problems = []
    for i, (v1, o1, s1, a1, e1) in enumerate(views):
        for v2, o2, s2, a2, e2 in views[i + 1 :]:
            if not (a1 <= e2 and a2 <= e1) or not (o1 < o2 + s2 and o2 < o1 + s1):
                continue
            k = list(block.ops)[max(a1, a2)]
            in_place = (e1 == a2 or e2 == a1) and isinstance(k, KernelOp)
            if in_place:
                src, dst = (v1, v2) if e1 == a2 else (v2, v1)
                if o1 == o2 and _in_place_ok(k, src, dst):
                    continue
            problems.append(
                f"%{v1.name_hint} [{o1}, {o1 + s1}) live {a1}..{e1} overlaps "
                f"%{v2.name_hint} [{o2}, {o2 + s2}) live {a2}..{e2}"
            )
    return problems


@dataclass(frozen=True)
class LoopMemoryPlan(ModulePass):
    """`loop-memory-plan`: @main's intermediates as views of one arena (see above)."""

    name = "loop-memory-plan"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = _main(op)
        if fn is not None and not any(ARENA in o.attributes for o in fn.body.block.ops):
            apply_plan(fn)
