"""Schedule primitives `cache_read` and `cache_write`: stage the tile of a buffer that a
loop's body touches in a local buffer (packing of matmul/conv operands, register or
cache blocking of an accumulator).

Input/Output: loop dialect.  Requires: 1) the buffer is accessed inside the loop
2) every access to it inside the loop has affine indices in loop induction variables
3) an access guarded by `scf.if` is a padded read, `scf.if c { yield load } else { yield
constant }` whose condition `c` is exactly a conjunction of bounds checks of the load's
own indices (`idx >= 0`, `idx < dim`), all such reads with the same checks and constant
(cache_read only) 4) all accesses agree on the part of their indices that depends on loops
around the tile (so the footprint is one box) 5) cache_read only: the loop does not
store to the buffer.  Guarantees: a local `memref` shaped like the footprint box is
allocated at the start of the loop's body (so it is private to an iteration, and to a
thread under a `parallel` loop); cache_read copies the box in before the body,
cache_write copies it in before and back out after; the body's accesses are redirected
to the local buffer. A padded read makes the local buffer a padded copy, and the body
reads it unguarded (a convolution's zero padding resolved once, not per multiply-add):
the border is stored with the constant and the interior copied with unguarded loads,
each a nest vectorized along the last dim (static ranges where the box's origin in a
checked dim is a constant, one `scf.if` per row where it moves with a loop around the
box; only a box whose columns move keeps a guarded copy, a check per element). Numerics
unchanged. Symbolic dims (passes/lower/_symbolic.py): cache_write's copy-back loop of a
dim that one marked loop of the nest spans (`dlpc.extent`, from 0, a step of 1, the
box's extent, every store moved by its iv alone) gets that loop's `dlpc.extent` and
`dlpc.extent_base`, so it stops at the call's extent as that loop does.

With `pack` (cache_read only) the local buffer is not the footprint box but a 1-D
buffer indexed by the loops inside the loop that index the buffer, in nesting order
(GotoBLAS panels `Bp[jr][k][j]`; for a convolution's input, im2col rows
`xp[ci][kh][kw][ow]`). It requires, instead of 2)-4): all accesses have one affine form
(`CachePackError`), each such loop's step divides its packed stride, and a guarded
access is `scf.if c { yield load } else { yield constant }` (padding; the packing nest
recomputes the guard, so the packed reads are unguarded) depending only on those loops.
A pack of a weight (a param or constant of @main) is still made inside the kernel here;
on the C target `loop-prepack-weights` (passes/lower/prepack.py) then moves it out of the
call: all its panels are packed once per binding of the weights, into a resident buffer.

Before (`cache_read k/ic B -> Bl`):

    loop.for %ic = 0 to 64 step 16 {name = "ic"} {
      loop.for %ii = 0 to 16 step 1 {name = "ii"} {
        loop.for %j = 0 to 32 step 1 {name = "j"} {
          %b = memref.load %B[%ii, %j] : memref<16x32xf32>  ...

After:

    loop.for %ic = 0 to 64 step 16 {name = "ic"} {
      %Bl = memref.alloca() : memref<16x32xf32>
      loop.for %c0 = 0 to 16 step 1 {name = "Bl_0"} {
        loop.for %c1 = 0 to 32 step 1 {name = "Bl_1", vectorize} {
          %v = memref.load %B[%c0, %c1]   memref.store %v, %Bl[%c0, %c1] } }
      loop.for %ii ... { loop.for %j ... { %b = memref.load %Bl[%ii, %j] ... } }
    }
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    Affine,
    ScheduleError,
    affine,
    block_of,
    bound_tests,
    conjunction,
    copy_annotations,
    emit_affine,
    erase,
    find_buffer,
    get_loop,
    guarded,
    inner_loops,
    memref_type,
    name_iv,
    rows_in_bounds,
)
from dlpc.passes.schedule._footprint import (
    STACK_BYTES,
    CacheGuardedAccessError,
    CacheNoAccessError,
    CacheNotAffineError,
    CacheReadWrittenError,
    Footprint,
    Padding,
    footprint,
    guard_of,
    padding,
    read_only_loads,
)
from dlpc.passes.schedule.deinterleave import cache_read_deinterleaved


class CachePackError(ScheduleError):
    pass


LINE = 16  # elements a cache line or more apart: each read of the copy touches its own line
ROW = 8  # the least contiguous run worth making the packing copy's inner loop


def _pack(root, kernel: str, loop: str, buffer: str | SSAValue, name: str | None) -> SSAValue:
    """cache_read in packed layout: the local buffer is indexed by the loops inside
    `loop` that index the buffer, in nesting order (GotoBLAS panels: `Bp[jr][k][j]`;
    for a convolution's input, im2col rows `xp[ci][kh][kw][ow]`), flattened to 1-D; the
    accesses must share one affine form. A padding guard (`scf.if` yielding the load or
    a constant) is recomputed by the packing nest, so the packed reads are unguarded."""
    target, buf, what, loads = read_only_loads(root, kernel, loop, buffer)
    k = target.kernel()
    forms = []
    units = []  # what is replaced: the load, or the scf.if guarding it (padding)
    for op in loads:
        unit = guard_of(op, target) if guarded(op, target) else op
        if unit is None:
            raise CacheGuardedAccessError(
                f"an access to buffer '{buf.name_hint}' in loop {what} is guarded by scf.if "
                "in a form pack does not handle (then: the load, else: a constant)"
            )
        units.append(unit)
        f = [affine(i) for i in op.indices]
        if any(x is None for x in f):
            raise CacheNotAffineError(
                f"an index of buffer '{buf.name_hint}' in loop {what} is not affine in the loop variables"
            )
        forms.append(f)
    if any(f != forms[0] for f in forms):
        raise CachePackError(
            f"accesses to buffer '{buf.name_hint}' in loop {what} differ; pack needs one access pattern"
        )
    inner = inner_loops(target)
    used = [lp for lp in inner if any(lp.induction_var in d.terms for d in forms[0])]
    extents = [lp.trip_count for lp in used]
    strides = [math.prod(extents[n + 1 :]) for n in range(len(used))]
    for lp, st in zip(used, strides):
        if st % lp.stride:
            raise CachePackError(
                f"loop {kernel}/{lp.loop_name} has step {lp.stride}, which does not divide its "
                f"packed stride {st} in buffer '{buf.name_hint}'"
            )
    lin = Affine(
        -sum(lp.lower * st // lp.stride for lp, st in zip(used, strides)),
        {lp.induction_var: st // lp.stride for lp, st in zip(used, strides)},
    )
    ty = memref_type(buf)
    size = math.prod(extents)
    alloc_cls = memref.AllocaOp if size * 4 <= STACK_BYTES else memref.AllocOp
    alloc = alloc_cls.get(ty.get_element_type(), shape=[size])
    label = name or f"{buf.name_hint or 'buf'}_p"
    alloc.memref.name_hint = label if label.isidentifier() else None
    # the packing nest clones the first access (with its guard) over the used loops
    slice_ops = _slice(units[0], target, used, what, buf)
    template = units[0]
    first = target.block.first_op
    assert first is not None  # the loop holds the loads being packed
    target.block.insert_op_before(alloc, first)
    copies: list[ForOp] = []
    copy_of: dict[int, ForOp] = {}
    for lp in _copy_order(used, forms[0], ty.get_shape()):
        c = ForOp(lp.lower, lp.upper, lp.stride, name=k.fresh_loop_name(f"{label}_{lp.loop_name}"))
        # (symbolic dims: a split's outer loop keeps its id, which its inner loop's base lists)
        copy_annotations(lp, c, ("dlpc.extent", "dlpc.extent_base", "dlpc.extent_id"))
        (copies[-1].block.add_op(c) if copies else target.block.insert_op_before(c, first))
        name_iv(c)
        copies.append(c)
        copy_of[id(lp)] = c
    if copies[-1].trip_count > 1:
        copies[-1].annotate("vectorize")
    body = copies[-1].block
    mapper: dict[SSAValue, SSAValue] = {
        lp.induction_var: copy_of[id(lp)].induction_var for lp in used
    }
    for op in slice_ops + [template]:
        body.add_op(op.clone(value_mapper=mapper))
    value = mapper[template.results[0]]
    lin_c = Affine(lin.const, {mapper[v]: c for v, c in lin.terms.items()})
    lin_value = emit_affine(lin_c, body)
    body.add_op(memref.StoreOp.get(value, alloc.memref, [lin_value]))
    for op in units:
        block = block_of(op)
        new = memref.LoadOp.get(alloc.memref, [emit_affine(lin, block, before=op)])
        block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(new.res)
        erase(op)
    if alloc_cls is memref.AllocOp:
        target.block.add_op(memref.DeallocOp.get(alloc.memref))
    return alloc.memref


def _copy_order(used: list[ForOp], form: list[Affine], shape) -> list[ForOp]:
    """The packing nest's loop order: the used loops in nesting order, except that when
    the innermost one reads the source a cache line or more apart (B[n, k] packed along
    n, A[m, k] along m: a transposed operand) and another unit-step loop of at least
    ROW iterations reads it contiguously, that loop goes innermost, so the copy streams
    along the source's rows and scatters into the packed buffer (which stays in cache)
    instead of touching one line per element, all in the same cache set at a power-of-two
    row length. The packed layout does not depend on this order."""
    if len(used) < 2 or any(d < 0 for d in shape):
        return used
    rows = [math.prod(shape[d + 1 :]) for d in range(len(shape))]

    def stride(lp: ForOp) -> int:
        return int(abs(sum(f.terms.get(lp.induction_var, 0) * r for f, r in zip(form, rows))))

    if stride(used[-1]) * used[-1].stride < LINE:
        return used
    best = [lp for lp in used[:-1] if lp.stride == 1 and stride(lp) == 1 and lp.trip_count >= ROW]
    if not best:
        return used
    return [lp for lp in used if lp is not best[0]] + [best[0]]


def _slice(unit: Operation, loop: ForOp, used: list[ForOp], what: str, buf) -> list[Operation]:
    """The pure ops inside `loop` that `unit` depends on, in program order; they may
    only depend on the used loops and on values from outside `loop`."""
    ivs = {id(lp.induction_var) for lp in used}
    needed: set[int] = set()
    work = [o for op in unit.walk() for o in op.operands]
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, Operation):
            if loop.is_ancestor(owner) and not unit.is_ancestor(owner) and id(owner) not in needed:
                if owner.regions or isinstance(owner, memref.LoadOp | memref.StoreOp):
                    raise CachePackError(
                        f"the access to buffer '{buf.name_hint}' in loop {what} depends on "
                        f"'{owner.name}', which pack cannot recompute"
                    )
                needed.add(id(owner))
                work.extend(owner.operands)
        elif (
            (parent := owner.parent_op()) is not None
            and parent is not loop
            and loop.is_ancestor(parent)
            and id(v) not in ivs
        ):
            raise CachePackError(
                f"the access to buffer '{buf.name_hint}' in loop {what} depends on a loop "
                "that does not index the buffer"
            )
    return [op for op in loop.walk() if id(op) in needed]


def _local_index(
    op: memref.LoadOp | memref.StoreOp, fp: Footprint, at: Operation | None = None
) -> list[SSAValue]:
    """idx - base, materialised right before the access (or before `at`)."""
    out = []
    at = at or op
    block = block_of(at)
    for d, idx in enumerate(op.indices):
        form = affine(idx)
        assert form is not None
        rel = form.add(fp.base[d], -1)
        out.append(emit_affine(rel, block, before=at))
    return out


def _copy_nest(
    loop: ForOp,
    buf,
    local,
    fp: Footprint,
    name: str,
    into_local: bool,
    at,
    parent_block=None,
    pad: Padding | None = None,
    marks: list[ForOp | None] | None = None,
):
    """A nest copying the box between `buf` and `local`, inserted before `at` (or at the
    end of `parent_block`, by default the loop's body); the loop of dim d copies the
    symbolic-extent marks of `marks[d]` (a loop of the body over the same range)."""
    kernel = loop.kernel()
    loops = []
    parent_block = parent_block or loop.block
    if into_local and pad is not None and fp.extents and not _moves(fp, pad, len(fp.extents) - 1):
        # the border stored with the fill value, the interior copied unguarded
        return _padded_copy(loop, buf, local, fp, name, at, parent_block, pad)
    for d, extent in enumerate(fp.extents):
        lp = ForOp(
            0, extent, 1, name=kernel.fresh_loop_name(f"{name}_{'in' if into_local else 'out'}{d}")
        )
        name_iv(lp)
        mark = marks[d] if marks else None
        if mark is not None:
            copy_annotations(mark, lp, ("dlpc.extent", "dlpc.extent_base"))
        if loops:
            loops[-1].block.add_op(lp)
        elif at is not None:
            parent_block.insert_op_before(lp, at)
        else:
            parent_block.add_op(lp)
        loops.append(lp)
    if loops and fp.extents[-1] > 1:
        loops[-1].annotate("vectorize")
    body = loops[-1].block if loops else None
    if body is None:  # 0-d buffer: copy one element
        raise CacheNotAffineError(f"buffer '{buf.name_hint}' has no dims to cache in loop {name}")
    ivs = [lp.induction_var for lp in loops]
    glob = [emit_affine(fp.base[d].add(Affine(0, {ivs[d]: 1})), body) for d in range(len(ivs))]
    if into_local and pad is not None:
        # the box's columns move with a loop around it: one guarded nest, the fill
        # value where a checked index is out of bounds
        shape = memref_type(buf).get_shape()
        conds, cond = conjunction(bound_tests(sorted(pad.checks), glob, shape))
        load = memref.LoadOp.get(buf, glob)
        fill = pad.fill.clone()
        elt = memref_type(buf).get_element_type()
        guard = scf.IfOp(
            cond, [elt], [load, scf.YieldOp(load.res)], [fill, scf.YieldOp(fill.result)]
        )
        body.add_ops([*conds, guard, memref.StoreOp.get(guard.results[0], local, ivs)])
    elif into_local:
        load = memref.LoadOp.get(buf, glob)
        body.add_ops([load, memref.StoreOp.get(load.res, local, ivs)])
    else:
        load = memref.LoadOp.get(local, ivs)
        body.add_ops([load, memref.StoreOp.get(load.res, buf, glob)])
    return loops[0]


def _moves(fp: Footprint, pad: Padding, d: int) -> bool:
    """Whether dim `d` is checked and the box's origin in it moves with a loop around."""
    return bool(fp.base[d].terms) and any(dd == d for dd, _ in pad.checks)


def _padded_copy(
    loop: ForOp, buf, local, fp: Footprint, name: str, at, parent_block, pad: Padding
) -> ForOp | None:
    """The padded copy without a guard per element: the border (where a checked index
    is out of bounds) stored with the fill value, the interior copied with unguarded
    loads, each as nests whose innermost loop (the last dim) vectorizes. A checked dim
    whose origin is a constant gets static ranges: a fill nest per side over its border
    rows, the interior nest over the rest; one whose origin moves with a loop around the
    box (a block of rows) gets one `scf.if` per row (its rows are checked, not its
    elements), filling the row where it is out of bounds. The last dim's origin must be
    a constant (`_copy_nest` keeps a guarded nest otherwise): per row, the fill value
    left and right of its static in-bounds range, the range copied. Returns the first
    loop (or None when the box has no interior and no border to store)."""
    kernel = loop.kernel()
    shape = memref_type(buf).get_shape()
    rank = len(fp.extents)
    last = rank - 1
    checks = pad.checks

    def inside(d: int) -> tuple[int, int]:
        """The local indices of dim d within the input (all of them where d is not
        checked, or checked per row)."""
        n = fp.extents[d]
        if fp.base[d].terms:
            return 0, n
        c0 = fp.base[d].const
        lo = min(n, max(0, -c0)) if (d, "lo") in checks else 0
        hi = max(lo, min(n, shape[d] - c0)) if (d, "hi") in checks else n
        return lo, hi

    spans = [inside(d) for d in range(rank)]
    moving = [d for d in range(last) if _moves(fp, pad, d)]
    first: list[ForOp] = []

    def place(op: Operation, block, before) -> None:
        if before is not None:
            block.insert_op_before(op, before)
        else:
            block.add_op(op)

    def nest(ranges, label: str, block, before, fill: bool, ivs_out=()) -> list[ForOp]:
        """A nest over `ranges` (dims len(ivs_out)...) storing the fill value (or
        copying) at the local index ivs_out + its ivs; placed in `block`."""
        loops: list[ForOp] = []
        for k, (lo, hi) in enumerate(ranges):
            d = len(ivs_out) + k
            lp = ForOp(lo, hi, 1, name=kernel.fresh_loop_name(f"{name}_{label}{d}"))
            name_iv(lp)
            if loops:
                loops[-1].block.add_op(lp)
            else:
                place(lp, block, before)
                if block is parent_block:
                    first.append(lp)
            loops.append(lp)
        if loops and ranges[-1][1] - ranges[-1][0] > 1:
            loops[-1].annotate("vectorize")
        body = loops[-1].block
        ivs = [*ivs_out, *(lp.induction_var for lp in loops)]
        if fill:
            v = pad.fill.clone()
            body.add_ops([v, memref.StoreOp.get(v.result, local, ivs)])
        else:
            glob = [emit_affine(fp.base[d].add(Affine(0, {ivs[d]: 1})), body) for d in range(rank)]
            load = memref.LoadOp.get(buf, glob)
            body.add_ops([load, memref.StoreOp.get(load.res, local, ivs)])
        return loops

    # the border rows of the checked outer dims with a constant origin (the corners
    # are stored twice: cheaper than splitting the nests)
    for d in range(last):
        lo, hi = spans[d]
        for a, b, side in ((0, lo, "lo"), (hi, fp.extents[d], "hi")):
            if a < b:
                ranges = [(0, n) for n in fp.extents]
                ranges[d] = (a, b)
                nest(ranges, f"pad{side}", parent_block, at, fill=True)
    if any(lo >= hi for lo, hi in spans[:last]):
        return first[0] if first else None
    # the interior rows; per row: its border columns and its in-bounds range
    outer: list[ForOp] = []
    for d in range(last):
        lo, hi = spans[d]
        lp = ForOp(lo, hi, 1, name=kernel.fresh_loop_name(f"{name}_in{d}"))
        name_iv(lp)
        if outer:
            outer[-1].block.add_op(lp)
        else:
            place(lp, parent_block, at)
            first.append(lp)
        outer.append(lp)
    ivs = [lp.induction_var for lp in outer]
    row_block, row_at = (outer[-1].block, None) if outer else (parent_block, at)
    if moving:  # rows out of bounds in a moving dim: all fill
        assert outer
        conds, cond = rows_in_bounds(fp.base, ivs, moving, checks, shape, row_block)
        guard = scf.IfOp(cond, [], [scf.YieldOp()], [scf.YieldOp()])
        row_block.add_ops([*conds, guard])
        other = guard.false_region.block
        nest([(0, fp.extents[last])], "padrow", other, other.last_op, True, ivs)
        row_block = guard.true_region.block
        row_at = row_block.last_op
    lo, hi = spans[last]
    for a, b, label, fill in (
        (0, lo, "padl", True),
        (lo, hi, "in", False),
        (hi, fp.extents[last], "padr", True),
    ):
        if a < b:
            nest([(a, b)], label, row_block, row_at, fill, ivs)
    return first[0] if first else None


def stage(
    root,
    kernel: str,
    loop: str,
    buffer: str | SSAValue,
    name: str | None,
    write: bool,
    around: bool = False,
    marks_out: list[ForOp | None] | None = None,
) -> SSAValue:
    """Stage `buffer` for the body of `loop` (or, with `around`, for the loop itself:
    the local buffer and copies are placed next to it in its parent block). With
    `marks_out` (cache_write), the loops whose symbolic-extent marks the copies of each
    dim took (`_write_marks`) are appended to it."""
    target = get_loop(root, kernel, loop)
    k = target.kernel()
    buf = find_buffer(k, target, buffer)
    what = f"{kernel}/{loop}"
    loads = [op for op in target.walk() if isinstance(op, memref.LoadOp) and op.memref is buf]
    stores = [op for op in target.walk() if isinstance(op, memref.StoreOp) and op.memref is buf]
    if not loads and not stores:
        raise CacheNoAccessError(f"buffer '{buf.name_hint}' is not accessed in loop {what}")
    if not write and stores:
        raise CacheReadWrittenError(
            f"buffer '{buf.name_hint}' is written in loop {what}; use cache_write"
        )
    pad = padding(loads, target, buf, what) if not write else None
    padded = frozenset(id(op) for op in loads if pad is not None and guarded(op, target))
    fp = footprint(target, buf, loads + stores, what, around, padded)
    ty = memref_type(buf)
    local_ty = MemRefType(ty.get_element_type(), fp.extents)
    nbytes = math.prod(fp.extents) * 4
    alloc_cls = memref.AllocaOp if nbytes <= STACK_BYTES else memref.AllocOp
    alloc = alloc_cls.get(ty.get_element_type(), shape=fp.extents)
    assert alloc.memref.type == local_ty
    label = name or f"{buf.name_hint or 'buf'}_l"
    alloc.memref.name_hint = label if label.isidentifier() else None
    marks = _write_marks(target, stores, fp, around) if write else None
    if marks_out is not None and marks is not None:
        marks_out.extend(marks)
    # redirect the body's accesses (before adding the copies, which access `buf` too)
    for op in loads:
        unit = guard_of(op, target) if id(op) in padded else op
        assert unit is not None
        # (a padded read: the whole guard is replaced, the index computed before it)
        new = memref.LoadOp.get(alloc.memref, _local_index(op, fp, at=unit))
        block_of(unit).insert_op_before(new, unit)
        unit.results[0].replace_all_uses_with(new.res)
        erase(unit)
    for op in stores:
        new = memref.StoreOp.get(op.value, alloc.memref, _local_index(op, fp))
        block_of(op).insert_op_before(new, op)
        erase(op)
    if around:
        block, first, after = block_of(target), target, target.next_op
    else:
        block, first, after = target.block, target.block.first_op, None
    block.insert_op_before(alloc, first) if first is not None else block.add_op(alloc)
    # the origin of the box is computed where the copies are, from the loops around them
    _copy_nest(target, buf, alloc.memref, fp, label, True, first, block, pad, marks=marks)
    if write:
        _copy_nest(target, buf, alloc.memref, fp, label, False, after, block, marks=marks)
    if alloc_cls is memref.AllocOp:
        dealloc = memref.DeallocOp.get(alloc.memref)
        block.insert_op_before(dealloc, after) if after is not None else block.add_op(dealloc)
    return alloc.memref


def _write_marks(
    target: ForOp, stores: list[memref.StoreOp], fp: Footprint, around: bool
) -> list[ForOp | None]:
    """Per dim of the box written back after `target` (in its body, or with `around`
    next to it): the loop of `target`'s nest whose iv alone moves every store's index
    in that dim over the box's extent, when it is marked over a symbolic extent
    (`dlpc.extent`) and the split loops its index adds all enclose the write-back; else
    None. The write-back loop of that dim then stops at the extent as that loop does (a
    register tile's rows: at seq 1 one row written back, not eight)."""
    outside = _ancestors(target) + ([] if around else [target])
    enclosing = {
        o.attributes["dlpc.extent_id"]
        for o in outside
        if isinstance(o, ForOp) and "dlpc.extent_id" in o.attributes
    }
    inner: dict[SSAValue, ForOp] = {
        lp.induction_var: lp
        for lp in target.walk()
        if isinstance(lp, ForOp) and (around or lp is not target)
    }
    out: list[ForOp | None] = []
    for d, extent in enumerate(fp.extents):
        found: ForOp | None = None
        for op in stores:
            form = affine(op.indices[d])
            moving = {v: c for v, c in (form.terms if form else {}).items() if v in inner}
            lp = inner.get(next(iter(moving))) if len(moving) == 1 else None
            if lp is None or moving[lp.induction_var] != 1 or found not in (None, lp):
                found = None
                break
            found = lp
        base = getattr(found.attributes.get("dlpc.extent_base"), "data", ()) if found else ()
        ok = (
            found is not None
            and "dlpc.extent" in found.attributes
            and "dlpc.extent_scale" not in found.attributes
            and (found.lower, found.upper, found.stride) == (0, extent, 1)
            and all(b in enclosing for b in base)
        )
        out.append(found if ok else None)
    return out


def _ancestors(op: Operation) -> list[Operation]:
    out = []
    parent = op.parent_op()
    while parent is not None:
        out.append(parent)
        parent = parent.parent_op()
    return out


def cache_read(
    root,
    kernel: str,
    loop: str,
    buffer: str | SSAValue,
    name: str | None = None,
    pack: bool = False,
    deinterleave: bool = False,
) -> SSAValue:
    if pack:
        return _pack(root, kernel, loop, buffer, name)
    if deinterleave:  # stride-s reads as s phase planes (passes/schedule/deinterleave.py)
        return cache_read_deinterleaved(root, kernel, loop, buffer, name)
    return stage(root, kernel, loop, buffer, name, write=False)


def cache_write(
    root, kernel: str, loop: str, buffer: str | SSAValue, name: str | None = None
) -> SSAValue:
    return stage(root, kernel, loop, buffer, name, write=True)


@dataclass(frozen=True)
class LoopCacheRead(ModulePass):
    """`loop-cache-read{kernel=matmul_0 loop=ic buffer=B local=Bl pack=true}` (buffer: name
    or index; `pack`: GotoBLAS-style panel layout by loops instead of the footprint box;
    `deinterleave`: the box with its strided last dim split into phase planes)"""

    name = "loop-cache-read"
    kernel: str
    loop: str
    buffer: str
    local: str | None = None
    pack: bool = False
    deinterleave: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cache_read(
            op, self.kernel, self.loop, self.buffer, self.local, self.pack, self.deinterleave
        )


@dataclass(frozen=True)
class LoopCacheWrite(ModulePass):
    """`loop-cache-write{kernel=matmul_0 loop=ir buffer=C local=acc}`"""

    name = "loop-cache-write"
    kernel: str
    loop: str
    buffer: str
    local: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cache_write(op, self.kernel, self.loop, self.buffer, self.local)
