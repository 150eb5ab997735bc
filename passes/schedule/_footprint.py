"""The footprint of a buffer's accesses in a loop, what cache_read / cache_write and
their variants (`cache.py`, `deinterleave.py`, `compute_at.py`) stage: the box the
accesses cover (`footprint`), the padding of guarded reads (`padding`, `guard_of`), and
the errors these analyses raise. Analyses only: nothing here changes the IR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.ir import SSAValue

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    Affine,
    ScheduleError,
    affine,
    find_buffer,
    get_loop,
    guarded,
    inner_loops,
    iv_loop,
    memref_type,
)

STACK_BYTES = 1 << 20  # local buffers up to 1 MiB live on the stack (alloca)


class CacheNoAccessError(ScheduleError):
    pass


class CacheNotAffineError(ScheduleError):
    pass


class CacheGuardedAccessError(ScheduleError):
    pass


class CacheFootprintError(ScheduleError):
    pass


class CacheReadWrittenError(ScheduleError):
    pass


def read_only_loads(root, kernel: str, loop: str, buffer: str | SSAValue):
    """(the loop, the buffer, "kernel/loop", its loads in the loop) for a cache_read of a
    buffer the loop reads and does not write; the errors otherwise."""
    target = get_loop(root, kernel, loop)
    buf = find_buffer(target.kernel(), target, buffer)
    what = f"{kernel}/{loop}"
    loads = [op for op in target.walk() if isinstance(op, memref.LoadOp) and op.memref is buf]
    if not loads:
        raise CacheNoAccessError(f"buffer '{buf.name_hint}' is not accessed in loop {what}")
    if any(isinstance(op, memref.StoreOp) and op.memref is buf for op in target.walk()):
        raise CacheReadWrittenError(
            f"buffer '{buf.name_hint}' is written in loop {what}; use cache_write"
        )
    return target, buf, what, loads


def guard_of(load: memref.LoadOp, loop: ForOp) -> scf.IfOp | None:
    """The scf.if that guards `load` as `if c { yield load } else { yield constant }`."""
    g = load.parent_op()
    if not isinstance(g, scf.IfOp) or g.parent_op() is None or not loop.is_ancestor(g):
        return None
    then = list(g.true_region.block.ops)
    other = list(g.false_region.block.ops) if g.false_region.blocks else []
    ok = (
        len(then) == 2
        and then[0] is load
        and tuple(then[1].operands) == (load.res,)
        and len(other) == 2
        and isinstance(other[0], arith.ConstantOp)
        and tuple(other[1].operands) == (other[0].result,)
        and len(g.results) == 1
    )
    return g if ok else None


@dataclass(frozen=True)
class Padding:
    """The padded reads of a buffer: the checked (dim, side) bounds and the fill value."""

    checks: frozenset[tuple[int, str]]
    fill: arith.ConstantOp


def _bounds_checks(cond: SSAValue, load: memref.LoadOp) -> frozenset[tuple[int, str]] | None:
    """`cond` as a conjunction of bounds checks of `load`'s indices: {(dim, "lo" | "hi")},
    or None when it is anything else."""
    shape = memref_type(load.memref).get_shape()
    forms = [affine(i) for i in load.indices]
    out: set[tuple[int, str]] = set()
    work = [cond]
    while work:
        v = work.pop()
        op = v.owner
        if isinstance(op, arith.AndIOp):
            work += [op.lhs, op.rhs]
            continue
        if not isinstance(op, arith.CmpiOp):
            return None
        lhs, rhs = affine(op.lhs), affine(op.rhs)
        if lhs is None or rhs is None or rhs.terms:
            return None
        dims = [d for d, f in enumerate(forms) if f is not None and f == lhs]
        if not dims:
            return None
        pred, k = op.predicate.value.data, rhs.const
        # arith.cmpi predicates: 2 slt, 3 sle, 4 sgt, 5 sge
        if (pred, k) in ((5, 0), (4, -1)):
            out.add((dims[0], "lo"))
        elif (pred, k) in ((2, shape[dims[0]]), (3, shape[dims[0]] - 1)):
            out.add((dims[0], "hi"))
        else:
            return None
    return frozenset(out)


def padding(loads: list[memref.LoadOp], loop: ForOp, buf, what: str) -> Padding | None:
    """The padding of the guarded reads among `loads` (None if there are none)."""
    found: Padding | None = None
    for op in loads:
        if not guarded(op, loop):
            continue
        g = guard_of(op, loop)
        checks = _bounds_checks(g.cond, op) if g is not None else None
        fill = next(iter(g.false_region.block.ops)) if g is not None else None
        if g is None or not checks or not isinstance(fill, arith.ConstantOp):
            raise CacheGuardedAccessError(
                f"an access to buffer '{buf.name_hint}' in loop {what} is guarded by scf.if "
                "in a form cache_read does not handle (then: the load, else: a constant, "
                "the condition: bounds checks of the load's indices)"
            )
        pad = Padding(checks, fill)
        if found is not None and (found.checks != pad.checks or found.fill.value != fill.value):
            raise CacheGuardedAccessError(
                f"the guarded accesses to buffer '{buf.name_hint}' in loop {what} differ "
                "in their bounds checks or fill value"
            )
        found = found or pad
    return found


@dataclass
class Footprint:
    base: list[Affine]  # per dim: the box origin (outer terms + min)
    extents: list[int]


def footprint(
    loop: ForOp,
    buf: SSAValue,
    accesses: Sequence[memref.LoadOp | memref.StoreOp],
    what: str,
    around: bool = False,
    padded: frozenset[int] = frozenset(),
    delinearize: bool = False,
) -> Footprint:
    inner = {id(lp) for lp in inner_loops(loop)} | ({id(loop)} if around else set())
    rank = len(memref_type(buf).get_shape())
    lo = [math.inf] * rank
    hi = [-math.inf] * rank
    outer_parts: list[dict | None] = [None] * rank
    for op in accesses:
        if guarded(op, loop) and id(op) not in padded:
            raise CacheGuardedAccessError(
                f"an access to buffer '{buf.name_hint}' in loop {what} is guarded by scf.if"
            )
        for d, idx in enumerate(op.indices):
            form = affine(idx, delinearize)
            if form is None:
                raise CacheNotAffineError(
                    f"an index of buffer '{buf.name_hint}' in loop {what} is not affine "
                    "in the loop variables"
                )
            outer = {v: c for v, c in form.terms.items() if id(iv_loop(v)) not in inner}
            if outer_parts[d] is None:
                outer_parts[d] = outer
            elif outer_parts[d] != outer:
                raise CacheFootprintError(
                    f"accesses to buffer '{buf.name_hint}' in loop {what} do not share one "
                    f"tile origin in dim {d}"
                )
            a, b = form.const, form.const
            for v, c in form.terms.items():
                if v in outer:
                    continue
                lp = iv_loop(v)
                first, last = lp.lower, lp.lower + (lp.trip_count - 1) * lp.stride
                a += min(c * first, c * last)
                b += max(c * first, c * last)
            lo[d], hi[d] = min(lo[d], float(a)), max(hi[d], float(b))  # (whole: see affine_range)
    base = [Affine(int(lo[d]), dict(outer_parts[d] or {})) for d in range(rank)]
    return Footprint(base, [int(hi[d] - lo[d] + 1) for d in range(rank)])
