"""Views for reshapes, and a static memory plan: @main's intermediates in one arena.

Input: loop IR (`loop.kernel`s over memrefs in `func.func @main`, intermediates as
`memref.alloc`/`memref.dealloc` in @main, as te-to-loop writes them).
Output: the same, with

- `loop-views`: first every pure copy kernel with an affine index map (`dst[i] =
  src[f(i)]`: slices with any steps, transposes, dim-splitting reshapes, chains of them;
  `CopyMap`) removed where a view can replace it: its readers load `src[f(i)]` (the view
  is in their index arithmetic; `read_through`), or, for a transpose, the kernels that
  produce src store at the permuted index into dst (`write_through`); then every
  reshape-family copy kernel (origin graph.reshape, squeeze, unsqueeze, flatten) that
  copies a buffer into a fresh intermediate in row-major order removed; the intermediate
  becomes `memref.reinterpret_cast %src to offset: [0], sizes: [...], strides: [...]`
  (row-major, contiguous), an alias of the same memory;
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
from collections.abc import Iterator
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
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.loop import ForOp, KernelOp, ancestor_in, defined_inside
from dlpc.dialects.typed import memref_type

ALIGN = 64  # bytes: arena offsets and packed weights start at multiples (aligned_alloc's)
ARENA = "dlpc.arena"
RESHAPES = ("graph.reshape", "graph.squeeze", "graph.unsqueeze", "graph.flatten")
ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1}
ELEMENT_BYTES.update({f"ui{w}": w // 8 for w in (8, 16, 32, 64)})  # (unsigned: the same sizes)


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


def _ops_after(op: Operation) -> Iterator[Operation]:
    """The ops after `op` in its block, in order (`op.is_before_in_block(o)`, walked once)."""
    o = op.next_op
    while o is not None:
        yield o
        o = o.next_op


def _dealloc_of(value: SSAValue, fn: func.FuncOp) -> memref.DeallocOp | None:
    for use in value.uses:
        if isinstance(use.operation, memref.DeallocOp):
            return use.operation
    return None


def alias_reshapes(fn: func.FuncOp) -> int:
    """Replace reshape copy kernels into fresh intermediates by aliases; the count."""
    removed = 0
    # each top-level op's writes, walked once (not once per reshape kernel: quadratic in
    # a training step); an entry is dropped when an alias rewrites that op's operands
    cached: dict[Operation, set[SSAValue]] = {}

    def writes(o: Operation) -> set[SSAValue]:
        if o not in cached:
            cached[o] = _writes(o)
        return cached[o]

    for k in [op for op in fn.body.block.ops if isinstance(op, KernelOp)]:
        pair = is_reshape_copy(k)
        if pair is None:
            continue
        src, dst = pair
        alloc = dst.owner
        if not isinstance(alloc, memref.AllocOp) or alloc.parent_block() is not fn.body.block:
            continue  # an output of @main, or a kernel-local buffer: the copy stays
        if any(dst in writes(o) for o in fn.body.block.ops if o is not k):
            continue  # written again later: not a value, keep the copy
        source = set(_aliases(src))
        if any(source & writes(o) for o in _ops_after(k)):
            continue  # the source is overwritten later: an alias would read the new data
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
        cached.pop(k, None)
        k.detach()
        k.erase()
        for use in dst.uses:  # their writes name dst: walked again when next asked
            cached.pop(ancestor_in(use.operation, fn.body.block), None)
        dst.replace_all_uses_with(cast.result)
        alloc.detach()
        alloc.erase()
        removed += 1
    return removed


# ------------------------------------------------------------ strided views


@dataclass(frozen=True)
class Lin:
    """An affine index form `const + sum(coef * iv)` over loop induction variables."""

    const: int
    terms: tuple[tuple[SSAValue, int], ...] = ()

    def coef(self, iv: SSAValue) -> int:
        return next((c for v, c in self.terms if v is iv), 0)

    def plus(self, other: Lin, sign: int = 1) -> Lin:
        terms = dict(self.terms)
        for v, c in other.terms:
            terms[v] = terms.get(v, 0) + sign * c
        return Lin(self.const + sign * other.const, tuple((v, c) for v, c in terms.items() if c))

    def times(self, k: int) -> Lin:
        return Lin(self.const * k, tuple((v, c * k) for v, c in self.terms if c * k))


IVRange = dict[SSAValue, tuple[int, int]]


def _span(form: Lin, ranges: IVRange) -> tuple[int, int]:
    lo = hi = form.const
    for v, c in form.terms:
        a, b = ranges[v]
        lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
    return lo, hi


def _divmod(form: Lin, d: int, ranges: IVRange) -> tuple[Lin, Lin] | None:
    """(form // d, form % d) as affine forms, when the iv ranges show that the terms
    whose coefficients `d` does not divide stay within [0, d) (a reshape that splits a
    dimension: ((i * 4 + h) * 16 + j) // 64 == i for h < 4, j < 16); None otherwise."""
    if d <= 0 or _span(form, ranges)[0] < 0:
        return None
    qc, rc = divmod(form.const, d)
    quot = tuple((v, c // d) for v, c in form.terms if c % d == 0)
    rest = Lin(rc, tuple((v, c) for v, c in form.terms if c % d))
    lo, hi = _span(rest, ranges)
    if lo < 0 or hi >= d:
        return None
    return Lin(qc, quot), rest


def index_form(value: SSAValue, ranges: IVRange) -> Lin | None:
    """The affine form of an index computed from the ivs in `ranges` with constants,
    +, -, * by a constant, and / or % by a constant that resolves (see `_divmod`)."""
    if value in ranges:
        return Lin(0, ((value, 1),))
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return Lin(op.value.value.data)
    if not isinstance(op, Operation) or len(op.operands) != 2:
        return None
    a, b = (index_form(v, ranges) for v in op.operands)
    if a is None or b is None:
        return None
    if isinstance(op, arith.AddiOp):
        return a.plus(b)
    if isinstance(op, arith.SubiOp):
        return a.plus(b, -1)
    if isinstance(op, arith.MuliOp) and (not a.terms or not b.terms):
        return b.times(a.const) if not a.terms else a.times(b.const)
    divides = arith.DivSIOp | arith.DivUIOp | arith.FloorDivSIOp | arith.RemSIOp | arith.RemUIOp
    if isinstance(op, divides) and not b.terms:
        qr = _divmod(a, b.const, ranges)
        if qr is not None:
            return qr[1] if isinstance(op, arith.RemSIOp | arith.RemUIOp) else qr[0]
    return None


@dataclass
class CopyMap:
    """A kernel that only copies: `dst[s_0, .., s_n] = src[f(s)]`, each `s_d` the
    induction variable of one loop `0 to dst.shape[d] step 1`, `f` affine (`forms`,
    one per dim of src): every element of dst is written once, from src at `f`."""

    kernel: KernelOp
    src: SSAValue
    dst: SSAValue
    ivs: list[SSAValue]  # the store's indices: ivs[d] runs along dst's dim d
    forms: list[Lin]

    def permutation(self) -> list[int] | None:
        """p with src dim m == dst dim p[m] when f only permutes (a transpose)."""
        p = []
        for form in self.forms:
            if form.const or len(form.terms) != 1 or form.terms[0][1] != 1:
                return None
            p.append(self.ivs.index(form.terms[0][0]))
        if sorted(p) != list(range(len(self.ivs))):
            return None
        # a slice at offset 0 of a longer dim reads like one too: the extents must agree
        src, dst = memref_type(self.src).get_shape(), memref_type(self.dst).get_shape()
        return p if all(src[m] == dst[d] for m, d in enumerate(p)) else None


INDEX_OPS = (
    arith.ConstantOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivSIOp,
    arith.DivUIOp,
    arith.FloorDivSIOp,
    arith.RemSIOp,
    arith.RemUIOp,
)


def copy_map(k: KernelOp) -> CopyMap | None:
    """The CopyMap of `k` when it is a pure copy kernel with an affine map (slices with
    any steps, transposes, reshapes that split dims, and chains of them), else None."""
    loops: list[ForOp] = []
    loads: list[memref.LoadOp] = []
    stores: list[memref.StoreOp] = []
    for op in k.walk():
        if op is k:
            continue
        if isinstance(op, ForOp):
            loops.append(op)
        elif isinstance(op, memref.LoadOp):
            loads.append(op)
        elif isinstance(op, memref.StoreOp):
            stores.append(op)
        elif not isinstance(op, INDEX_OPS):
            return None
    if len(loads) != 1 or len(stores) != 1 or stores[0].value is not loads[0].res:
        return None
    (load,), (store,) = loads, stores
    src, dst = load.memref, store.memref
    s, d = src.type, dst.type
    if not isinstance(s, MemRefType) or not isinstance(d, MemRefType) or src is dst:
        return None
    if not isinstance(s.layout, NoneAttr) or not isinstance(d.layout, NoneAttr):
        return None
    ivs = list(store.indices)
    by_iv: dict[SSAValue, ForOp] = {lp.induction_var: lp for lp in loops}
    if len(loops) != len(ivs) or len(set(ivs)) != len(ivs) or any(v not in by_iv for v in ivs):
        return None
    for v, n in zip(ivs, d.get_shape()):
        lp = by_iv[v]
        if lp.lower != 0 or lp.stride != 1 or lp.trip_count != n:
            return None
    ranges = {v: (0, by_iv[v].trip_count - 1) for v in ivs}
    forms = [index_form(i, ranges) for i in load.indices]
    if any(f is None for f in forms):
        return None
    return CopyMap(k, src, dst, ivs, [f for f in forms if f is not None])


def _emit_form(form: Lin, subst: dict[SSAValue, SSAValue], before: Operation) -> SSAValue:
    """Materialise `form` with its ivs replaced by `subst`, just before `before`."""
    ops: list[Operation] = []

    def constant(c: int) -> SSAValue:
        ops.append(arith.ConstantOp(IntegerAttr(c, IndexType())))
        return ops[-1].results[0]

    acc: SSAValue | None = None
    for v, c in form.terms:
        term = subst[v]
        if c != 1:
            ops.append(arith.MuliOp(term, constant(c)))
            term = ops[-1].results[0]
        if acc is not None:
            ops.append(arith.AddiOp(acc, term))
            term = ops[-1].results[0]
        acc = term
    if acc is None or form.const:
        value = constant(form.const)
        if acc is not None:
            ops.append(arith.AddiOp(acc, value))
            value = ops[-1].results[0]
        acc = value
    block = before.parent_block()
    assert block is not None
    block.insert_ops_before(ops, before)
    return acc


def _positions(fn: func.FuncOp) -> dict[Operation, int]:
    return {op: n for n, op in enumerate(fn.body.block.ops)}


def _refree(value: SSAValue, fn: func.FuncOp) -> None:
    """Move `value`'s dealloc after the last top-level op that uses it (or an alias)."""
    free = _dealloc_of(value, fn)
    if free is None:
        return
    block = fn.body.block
    last = max(
        (ancestor_in(u.operation, block) for v in _aliases(value) for u in v.uses),
        key=_positions(fn).__getitem__,
    )
    if last is not free and free.is_before_in_block(last):
        free.detach()
        block.insert_op_after(free, last)


def _is_intermediate(value: SSAValue, fn: func.FuncOp) -> bool:
    alloc = value.owner
    return isinstance(alloc, memref.AllocOp) and alloc.parent_block() is fn.body.block


def _written_after(value: SSAValue, at: int, where: dict[Operation, int], block: Block) -> bool:
    """Does a store or copy into `value` sit in a top-level op after position `at`?
    (`value in _writes(op)` for those ops, found from value's uses, not by walking them.)"""
    for use in value.uses:
        op = use.operation
        if isinstance(op, memref.StoreOp | memref.CopyOp) and use.index == 1:
            if where[ancestor_in(op, block)] > at:
                return True
    return False


def read_through(c: CopyMap, fn: func.FuncOp) -> bool:
    """Remove copy kernel `c` by making every reader of dst load src at `f` (the view
    is in the consumers' index arithmetic). Requires dst to be an intermediate only
    read, after the copy, by memref.load, and src not written after the copy."""
    block = fn.body.block
    if not _is_intermediate(c.dst, fn):
        return False
    where = _positions(fn)
    at = where[c.kernel]
    loads: list[memref.LoadOp] = []
    for use in c.dst.uses:
        user = use.operation
        if isinstance(user, memref.DeallocOp) or user.parent_op() is None:
            continue
        if isinstance(user, memref.StoreOp) and ancestor_in(user, block) is c.kernel:
            continue
        if not isinstance(user, memref.LoadOp) or where[ancestor_in(user, block)] <= at:
            return False
        reader = ancestor_in(user, block)
        if isinstance(reader, KernelOp) and is_reshape_copy(reader) is not None:
            # alias_reshapes later makes a reshape kernel an alias of what it reads, as if
            # it read row-major: read through a transpose map, it would not (NHWC lenet's
            # transpose -> flatten read the pool's NHWC buffer as NCHW)
            return False
        loads.append(user)
    if any(_written_after(v, at, where, block) for v in _aliases(c.src)):
        return False
    for load in loads:
        subst = dict(zip(c.ivs, load.indices))
        indices = [_emit_form(f, subst, load) for f in c.forms]
        new = memref.LoadOp.get(c.src, indices)
        new.res.name_hint = load.res.name_hint
        assert load.parent_block() is not None
        load.parent_block().insert_op_before(new, load)  # type: ignore[union-attr]
        load.res.replace_all_uses_with(new.res)
        load.detach()
        load.erase()
    _drop_copy(c, fn)
    _refree(c.src, fn)
    return True


def write_through(c: CopyMap, fn: func.FuncOp) -> bool:
    """Remove transpose kernel `c` by making the kernels that produce src write dst
    (and read back what they wrote) at the permuted indices. Requires `f` to be a
    permutation, src an intermediate accessed only by loads and stores before the copy,
    and dst untouched before the copy."""
    perm = c.permutation()
    if perm is None or not _is_intermediate(c.src, fn):
        return False
    block = fn.body.block
    where = _positions(fn)
    at = where[c.kernel]
    accesses: list[memref.LoadOp | memref.StoreOp] = []
    for use in c.src.uses:
        user = use.operation
        if isinstance(user, memref.DeallocOp):
            continue
        if not isinstance(user, memref.LoadOp | memref.StoreOp) or user.memref is not c.src:
            return False
        if ancestor_in(user, block) is c.kernel:
            continue
        if where[ancestor_in(user, block)] >= at:
            return False
        producer = ancestor_in(user, block)
        if isinstance(producer, KernelOp) and is_reshape_copy(producer) is not None:
            return False  # (as in read_through: alias_reshapes would alias it as row-major)
        accesses.append(user)
    if any(where[ancestor_in(u.operation, block)] < at for u in c.dst.uses):
        return False
    for op in accesses:
        indices = [op.indices[perm.index(d)] for d in range(len(perm))]
        if isinstance(op, memref.LoadOp):
            new = memref.LoadOp.get(c.dst, indices)
            new.res.name_hint = op.res.name_hint
            op.res.replace_all_uses_with(new.res)
        else:
            new = memref.StoreOp.get(op.value, c.dst, indices)
        op.parent_block().insert_op_before(new, op)  # type: ignore[union-attr]
        op.detach()
        op.erase()
    # dst is now written where src was: allocated where src was
    src_alloc, dst_alloc = c.src.owner, c.dst.owner
    assert isinstance(src_alloc, memref.AllocOp)
    if isinstance(dst_alloc, memref.AllocOp):
        dst_alloc.detach()
        block.insert_op_before(dst_alloc, src_alloc)
    free = _dealloc_of(c.src, fn)
    c.kernel.detach()
    c.kernel.erase()
    if free is not None:
        free.detach()
        free.erase()
    src_alloc.detach()
    src_alloc.erase()
    return True


def _drop_copy(c: CopyMap, fn: func.FuncOp) -> None:
    """Erase the copy kernel and dst (its alloc and dealloc): nothing reads dst now."""
    free = _dealloc_of(c.dst, fn)
    c.kernel.detach()
    c.kernel.erase()
    if free is not None:
        free.detach()
        free.erase()
    alloc = c.dst.owner
    assert isinstance(alloc, memref.AllocOp) and not c.dst.uses
    alloc.detach()
    alloc.erase()


def view_copies(fn: func.FuncOp) -> int:
    """Remove every copy kernel (slice, transpose, splitting reshape, chains of them)
    that a view can replace; the count. A transpose that keeps the innermost dim
    whose source only its producers touch is written through (the producer stores at
    the permuted index, its consumers read contiguous memory); otherwise the readers
    load through the map; failing both, the copy stays."""
    removed, changed = 0, True
    while changed:
        changed = False
        for k in [op for op in fn.body.block.ops if isinstance(op, KernelOp)]:
            c = copy_map(k)
            if c is None:
                continue
            perm = c.permutation()
            inner_kept = perm is not None and perm[-1:] == [len(perm) - 1]
            if (inner_kept and write_through(c, fn)) or read_through(c, fn):
                removed, changed = removed + 1, True
            elif perm is not None and write_through(c, fn):
                removed, changed = removed + 1, True
    return removed


@dataclass(frozen=True)
class LoopViews(ModulePass):
    """`loop-views`: copy kernels that a view can replace are removed: slices,
    transposes and splitting reshapes are read (or written) through their index map,
    the remaining reshape/squeeze/unsqueeze/flatten copies become aliases."""

    name = "loop-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = _main(op)
        if fn is not None:
            view_copies(fn)
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
                position[ancestor_in(use.operation, block)]
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
        source = op.operands[0].owner if isinstance(op, memref.ViewOp) else None
        # (views of the arena only: loop-prepack-weights's packed block is another one)
        if isinstance(source, memref.AllocOp) and ARENA in source.attributes:
            assert isinstance(op, memref.ViewOp)
            shift = op.byte_shift.owner
            assert isinstance(shift, arith.ConstantOp)
            offset = shift.value.value.data  # type: ignore[union-attr]
            ty = op.result.type
            assert isinstance(ty, MemRefType)
            users = [
                position[ancestor_in(use.operation, block)]
                for v in _aliases(op.result)
                for use in v.uses
            ]
            users = users or [position[op]]
            size = buffer_bytes(ty, "a view")
            views.append((op.result, op.source, offset, size, min(users), max(users)))
    problems = []
    for i, (v1, base1, o1, s1, a1, e1) in enumerate(views):
        for v2, base2, o2, s2, a2, e2 in views[i + 1 :]:
            if base1 is not base2:  # views of different blocks (the arena, packed weights)
                continue
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
