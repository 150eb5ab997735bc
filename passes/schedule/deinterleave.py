"""`cache_read ... deinterleave`: stage a strided read as stride-1 phase planes.

A stride-`s` convolution reads its input row at `s * ow + kw`: vectorized over the
output columns `ow`, that is a gather (GCC: ~14 GFLOP/s on a 3x3 stride-2 conv against
~100 at stride 1). Deinterleaving the staged copy's last dim by `s` puts column `q` at
`[q % s][q / s]`, so the read becomes `[kw % s][ow + kw / s]`: unit stride in `ow`, one
vector load per (ci, kh, kw) shared by every output channel, like the stride-1 padded
copy (and 1.1x the input, not im2col's `kh * kw / s^2`-fold copy).

Input/Output: loop dialect.  Requires (besides cache_read's 1), 3), 4), 5), see
`cache.py`): 1) the innermost loop indexing the buffer's last dim does so with a step `s`
> 1, the same in every access (`CacheDeinterleaveError` otherwise, naming the loop)
2) in each access, the part of the last index not divisible by `s` (the kernel column
and the offsets) is never negative over the tile.  Guarantees: a local buffer shaped
like the footprint box with its last dim `E` replaced by `[s][ceil(E / s)]`, allocated
at the start of the loop's body; the copy nest fills it (the padding's fill value where
the read is out of bounds, and past the box's end); the body reads it at
`[..., r % s, d / s + r / s]` (`d` the terms divisible by `s`, `r` the rest: `arith.remui`
and `arith.divui`, constant when `r` is, else invariant in the vectorized loop).
Numerics unchanged.

Before (`cache_read k/n x -> xq deinterleave`, x read at `[ci][2*oh + kh][2*ow + kw]`):

    loop.for %ow ... { %v = memref.load %x[%ci, %h, %w] ... }   // %w = 2 * %ow + %kw

After:

    %xq = memref.alloca() : memref<16x33x2x17xf32>
    loop.for %c0 ... { loop.for %c1 ... { loop.for %p = 0 to 2 { loop.for %j = 0 to 17 {vectorize}
      ... memref.store (x[%c0, %c1 - 1, 2 * %j + %p - 1] or 0), %xq[%c0, %c1, %p, %j] }}}}
    loop.for %ow ... { %v = memref.load %xq[%ci, %h + 1, %kw % 2, %ow + %kw / 2] ... }
"""

from __future__ import annotations

import math
from fractions import Fraction

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, SSAValue

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    Affine,
    ScheduleError,
    affine,
    ancestors,
    block_of,
    bound_tests,
    conjunction,
    const,
    emit_affine,
    erase,
    guarded,
    iv_loop,
    memref_type,
    name_iv,
    rows_in_bounds,
)
from dlpc.passes.schedule._footprint import (
    STACK_BYTES,
    footprint,
    guard_of,
    padding,
    read_only_loads,
)


class CacheDeinterleaveError(ScheduleError):
    pass


def _split(rel: Affine, s: int) -> tuple[Affine, Affine]:
    """rel = d + r: `d` the terms whose coefficient `s` divides, `r` the rest (and the
    constant)."""
    d = {v: c for v, c in rel.terms.items() if c % s == 0}
    r = {v: c for v, c in rel.terms.items() if c % s}
    return Affine(0, d), Affine(rel.const, r)


def _minimum(form: Affine) -> int:
    low = form.const
    for v, c in form.terms.items():
        lp = iv_loop(v)
        first, last = lp.lower, lp.lower + (lp.trip_count - 1) * lp.stride
        low += min(c * first, c * last)
    return int(low)  # (whole: a Fraction term is whole on its loop's values)


def cache_read_deinterleaved(
    root, kernel: str, loop: str, buffer: str | SSAValue, name: str | None = None
) -> SSAValue:
    target, buf, what, loads = read_only_loads(root, kernel, loop, buffer)
    pad = padding(loads, target, buf, what)
    padded = frozenset(id(op) for op in loads if pad is not None and guarded(op, target))
    fp = footprint(target, buf, loads, what, False, padded)
    last = len(fp.extents) - 1
    # the step: the coefficient of the innermost loop in the last index (the loop that
    # is vectorized), the same in every access
    steps: set[int] = set()
    for op in loads:
        form = affine(op.indices[last])
        assert form is not None  # footprint checked
        if not form.terms:
            raise CacheDeinterleaveError(
                f"buffer '{buf.name_hint}' is read at a fixed last index in loop {what}; "
                "nothing to deinterleave"
            )
        v = max(form.terms, key=lambda v: len(ancestors(iv_loop(v))))
        if form.terms[v] <= 1:
            raise CacheDeinterleaveError(
                f"buffer '{buf.name_hint}' is read with step {form.terms[v]} along loop "
                f"{kernel}/{iv_loop(v).loop_name} in loop {what}; deinterleave needs a step > 1"
            )
        steps.add(int(form.terms[v]))
    if len(steps) > 1:
        raise CacheDeinterleaveError(
            f"the accesses to buffer '{buf.name_hint}' in loop {what} step the last index "
            f"by {sorted(steps)}; deinterleave needs one step"
        )
    s = steps.pop()
    extent = fp.extents[last]
    per_phase = -(-extent // s)
    shape = [*fp.extents[:last], s, per_phase]
    elt = memref_type(buf).get_element_type()
    alloc_cls = memref.AllocaOp if math.prod(shape) * 4 <= STACK_BYTES else memref.AllocOp
    alloc = alloc_cls.get(elt, shape=shape)
    label = name or f"{buf.name_hint or 'buf'}_q"
    alloc.memref.name_hint = label if label.isidentifier() else None
    # redirect the reads: [..., q] -> [..., r % s, d / s + r / s] with q = d + r
    for op in loads:
        unit = guard_of(op, target) if id(op) in padded else op
        assert unit is not None
        block = block_of(unit)
        rels = []
        for i, b in zip(op.indices, fp.base):
            form = affine(i)
            assert form is not None  # footprint checked
            rels.append(form.add(b, -1))
        index = [emit_affine(rel, block, before=unit) for rel in rels[:last]]
        d, r = _split(rels[last], s)
        if _minimum(r) < 0:
            raise CacheDeinterleaveError(
                f"an access to buffer '{buf.name_hint}' in loop {what} has a last index "
                f"whose part not divisible by {s} can be negative; cannot deinterleave it"
            )
        if not r.terms:
            index.append(emit_affine(Affine(r.const % s), block, before=unit))
            index.append(emit_affine(Affine(r.const // s, _div(d, s)), block, before=unit))
        else:
            rv = emit_affine(r, block, before=unit)
            sv = const(s)
            phase, quot = arith.RemUIOp(rv, sv.result), arith.DivUIOp(rv, sv.result)
            dv = emit_affine(Affine(0, _div(d, s)), block, before=unit) if d.terms else None
            ops: list[Operation] = [sv, phase, quot]
            pos = quot.result
            if dv is not None:
                add = arith.AddiOp(dv, quot.result)
                ops.append(add)
                pos = add.result
            block.insert_ops_before(ops, unit)
            index += [phase.result, pos]
        new = memref.LoadOp.get(alloc.memref, index)
        block.insert_op_before(new, unit)
        unit.results[0].replace_all_uses_with(new.res)
        erase(unit)
    first = target.block.first_op
    assert first is not None
    target.block.insert_op_before(alloc, first)
    _copy_nest(target, buf, alloc.memref, fp, s, label, first, pad, elt)
    if alloc_cls is memref.AllocOp:
        target.block.add_op(memref.DeallocOp.get(alloc.memref))
    return alloc.memref


# Bytes of a phase-plane buffer up to which only what the copies leave is filled
# (`_fill_nest`); a larger one is filled whole first. resnet's stride-2 conv, 1 thread:
# batch 1 (a 37 KB block of rows per thread, on the stack) 23.0 -> 22.3 us with the edges
# only; batch 32 (a 72 KB image, allocated per image) 775 -> 827 us, so it keeps the
# whole fill.
EDGE_FILL_BYTES = 64 << 10


def _div(form: Affine, s: int) -> dict[SSAValue, int | Fraction]:
    return {v: c // s for v, c in form.terms.items()}


def _copy_nest(loop: ForOp, buf, local, fp, s: int, name: str, at: Operation, pad, elt) -> None:
    """local[..., p, j] = buf[base + (..., s * j + p)]. When the last dim's origin is a
    constant (or it is not checked), its in-bounds part is a static range per phase: the
    padding is filled first (up to EDGE_FILL_BYTES only where the copies do not write,
    `_fill_nest`; else a vectorized nest over the whole buffer), then each phase
    copies its in-bounds range with unguarded loads (GCC: two vector loads and a permute
    per 16 elements, not a masked gather); the other checked dims get static ranges too
    where their origin is constant, else one `scf.if` per row around the phase loops (a
    box whose rows move with a loop around it: staged per block of output rows).
    Otherwise (the columns' origin moves) one guarded nest does both."""
    checks = pad.checks if pad is not None else frozenset()
    last = len(fp.extents) - 1
    if any(d == last and fp.base[d].terms for d, _ in checks):
        _guarded_copy_nest(loop, buf, local, fp, s, name, at, pad, elt)
        return
    moving = sorted({d for d, _ in checks if fp.base[d].terms})
    kernel = loop.kernel()
    shape = memref_type(buf).get_shape()
    per_phase = -(-fp.extents[last] // s)

    def nest(ranges: list[tuple[int, int]], label: str) -> list[ForOp]:
        loops: list[ForOp] = []
        for d, (lo, hi) in enumerate(ranges):
            lp = ForOp(lo, hi, 1, name=kernel.fresh_loop_name(f"{name}_{label}{d}"))
            name_iv(lp)
            (loops[-1].block.add_op(lp) if loops else loop.block.insert_op_before(lp, at))
            loops.append(lp)
        return loops

    def inside(d: int, start: int, step: int, count: int) -> tuple[int, int]:
        """The range of i in [0, count) with base_d + start + step * i within the input
        where dim d is checked."""
        lo, hi = 0, count
        if d in moving:  # checked per row instead
            return lo, hi
        c0 = fp.base[d].const + start
        if (d, "lo") in checks:
            lo = max(lo, -(c0 // step) if c0 < 0 else 0)
        if (d, "hi") in checks:
            hi = min(hi, max(0, -(-(shape[d] - c0) // step)))
        return lo, hi

    if pad is not None and math.prod(memref_type(local).get_shape()) * 4 <= EDGE_FILL_BYTES:
        _fill_nest(loop, local, fp, s, name, at, pad, shape, inside)
    elif pad is not None:  # the fill value everywhere; the copies overwrite the inside
        loops = nest([(0, n) for n in [*fp.extents[:last], s, per_phase]], "fill")
        if per_phase > 1:
            loops[-1].annotate("vectorize")
        fill = pad.fill.clone()
        fill_ivs = [lp.induction_var for lp in loops]
        loops[-1].block.add_ops([fill, memref.StoreOp.get(fill.result, local, fill_ivs)])
    outer = [inside(d, 0, 1, fp.extents[d]) for d in range(last)]
    if any(lo >= hi for lo, hi in outer):
        return
    loops = nest(outer, "in")
    body = loops[-1].block if loops else None
    ivs = [lp.induction_var for lp in loops]
    if moving:  # the rows of the input the box covers here: a guard around the phases
        assert body is not None  # moving dims are outer dims
        conds, cond = rows_in_bounds(fp.base, ivs, moving, checks, shape, body)
        guard = scf.IfOp(cond, [], [scf.YieldOp()])
        body.add_ops([*conds, guard])
        body = guard.true_region.block
        yield_op = body.last_op
        assert yield_op is not None
        body.detach_op(yield_op)
    for phase in range(s):
        lo, hi = inside(last, phase, s, -(-(fp.extents[last] - phase) // s))
        if lo >= hi:
            continue
        lp = ForOp(lo, hi, 1, name=kernel.fresh_loop_name(f"{name}_in{last}p{phase}"))
        name_iv(lp)
        (body.add_op(lp) if body is not None else loop.block.insert_op_before(lp, at))
        if hi - lo > 1:
            lp.annotate("vectorize")
        j = lp.induction_var
        inner = lp.block
        glob = [emit_affine(fp.base[d].add(Affine(0, {ivs[d]: 1})), inner) for d in range(last)]
        glob.append(emit_affine(fp.base[last].add(Affine(phase, {j: s})), inner))
        k = const(phase)
        load = memref.LoadOp.get(buf, glob)
        inner.add_ops([k, load, memref.StoreOp.get(load.res, local, [*ivs, k.result, j])])
    if moving and body is not None:
        body.add_op(scf.YieldOp())


def _fill_nest(
    loop: ForOp, local, fp, s: int, name: str, at: Operation, pad, shape, inside
) -> None:
    """The fill value where the copies do not write: per row of the box (every dim but
    the last), the phases' columns outside their in-bounds ranges (and past the box's
    end) where the row is within the input, the whole row where it is not (a padding
    row), instead of every element first and the copies over it (the box stored twice)."""
    kernel = loop.kernel()
    last = len(fp.extents) - 1
    per_phase = -(-fp.extents[last] // s)

    def loop_in(block, lo: int, hi: int, label: str, before=None) -> ForOp:
        lp = ForOp(lo, hi, 1, name=kernel.fresh_loop_name(f"{name}_{label}"))
        name_iv(lp)
        (block.insert_op_before(lp, before) if before is not None else block.add_op(lp))
        return lp

    rows: list[ForOp] = []
    for d in range(last):
        if rows:
            rows.append(loop_in(rows[-1].block, 0, fp.extents[d], f"fill{d}"))
        else:  # the outermost: before the copies
            rows.append(loop_in(loop.block, 0, fp.extents[d], f"fill{d}", at))
    ivs = [lp.induction_var for lp in rows]

    def store(block, p: int, lo: int, hi: int, before) -> None:
        if lo >= hi:
            return
        lp = loop_in(block, lo, hi, f"fill{last}p{p}", before)
        if hi - lo > 1:
            lp.annotate("vectorize")
        k, fill = const(p), pad.fill.clone()
        lp.block.add_ops(
            [k, fill, memref.StoreOp.get(fill.result, local, [*ivs, k.result, lp.induction_var])]
        )

    body = rows[-1].block if rows else loop.block
    checked = sorted((d, side) for d, side in pad.checks if d != last)
    if checked:
        index = {
            d: emit_affine(fp.base[d].add(Affine(0, {ivs[d]: 1})), body)
            for d in {d for d, _ in checked}
        }
        conds, cond = conjunction(bound_tests(checked, index, shape))
        guard = scf.IfOp(cond, [], [scf.YieldOp()], [scf.YieldOp()])
        body.add_ops([*conds, guard])
        edge_block, edge_at = guard.true_region.block, guard.true_region.block.last_op
        row_block = guard.false_region.block
        for p in range(s):
            store(row_block, p, 0, per_phase, row_block.last_op)
    else:
        edge_block, edge_at = body, (None if rows else at)
    for p in range(s):
        lo, hi = inside(last, p, s, -(-(fp.extents[last] - p) // s))
        if lo >= hi:  # nothing of this phase in bounds
            store(edge_block, p, 0, per_phase, edge_at)
            continue
        store(edge_block, p, 0, lo, edge_at)
        store(edge_block, p, hi, per_phase, edge_at)


def _guarded_copy_nest(
    loop: ForOp, buf, local, fp, s: int, name: str, at: Operation, pad, elt
) -> None:
    """local[..., p, j] = buf[base + (..., s * j + p)], the fill value where the padding's
    checks fail or `s * j + p` is past the box."""
    kernel = loop.kernel()
    extents = [*fp.extents[:-1], s, -(-fp.extents[-1] // s)]
    loops: list[ForOp] = []
    for d, n in enumerate(extents):
        lp = ForOp(0, n, 1, name=kernel.fresh_loop_name(f"{name}_in{d}"))
        name_iv(lp)
        (loops[-1].block.add_op(lp) if loops else loop.block.insert_op_before(lp, at))
        loops.append(lp)
    if extents[-1] > 1:
        loops[-1].annotate("vectorize")
    body = loops[-1].block
    ivs = [lp.induction_var for lp in loops]
    last = len(fp.extents) - 1
    column = Affine(0, {ivs[-1]: s, ivs[-2]: 1})  # the column within the box
    glob = [emit_affine(fp.base[d].add(Affine(0, {ivs[d]: 1})), body) for d in range(last)]
    glob.append(emit_affine(fp.base[last].add(column), body))
    shape = memref_type(buf).get_shape()
    tests = bound_tests(sorted(pad.checks), glob, shape) if pad is not None else []
    if fp.extents[-1] % s:  # the last phase planes run past the box
        tests.append((emit_affine(column, body), fp.extents[-1], "slt"))
    load = memref.LoadOp.get(buf, glob)
    if not tests:
        body.add_ops([load, memref.StoreOp.get(load.res, local, ivs)])
        return
    conds, cond = conjunction(tests)
    fill = pad.fill.clone() if pad is not None else arith.ConstantOp(FloatAttr(0.0, elt))
    guard = scf.IfOp(cond, [elt], [load, scf.YieldOp(load.res)], [fill, scf.YieldOp(fill.result)])
    body.add_ops([*conds, guard, memref.StoreOp.get(guard.results[0], local, ivs)])
