"""Kernel chains as one dlp kernel, for `loop-to-dlp`: a producer's tile stays in NRAM.

Consecutive loop kernels whose plans split the same work loop the same way (softmax's
max, exp, sum and scale; layer norm's mean, rstd and normalise; a convolution and the
pooling of its channels) and pass intermediates tile by tile (the consumer reads, at
each work iteration, exactly the rows its producer wrote there: both tiled in the same
dimension, one row an iteration) become ONE `dlp.kernel`, named after the last member:
per tile, each member in turn loads its other operands, computes on intrinsics and
stores what is read after the chain; an intermediate is neither stored nor reloaded (its
NRAM tile is the consumer's operand), a buffer several members read alike is loaded
once. At batch 1 every kernel costs a few DMA latencies (the simulator's 200 cycles
each, serially per task), so a chain of small kernels pays them once.

Fused only where every member is on intrinsics, has no batch loop around its work loop
and no operand moved by its selection itself, the members' task share fits one tile
single-buffered side by side, and a member writes nothing an earlier member reads. The
intermediates keep their GDRAM allocation (stored only where read after the chain).

A convolution of a one-channel image and the pooling of its channels, with fewer
channels than half the cores (LeNet's first layer: 6), may also be split into bands of
output rows (`Bands`, where the estimate says it is cheaper): one channel and band a
task, each reading only the image rows its band's windows reach.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.ir import Operation, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, KernelOp, spine
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.lower import _dlp_attn, _dlp_pack
from dlpc.passes.lower._dlp_build import (
    BufferPlan,
    Builder,
    KernelPlan,
    Work,
    compute_cycles,
    finish_for,
    latencies,
    round_up,
)
from dlpc.passes.lower.dlp_select.elementwise import Elementwise, ElementwiseSelection
from dlpc.passes.lower.dlp_select.matmul import MatmulSelection
from dlpc.passes.lower.dlp_select.reduce import ReduceSelection
from dlpc.passes.lower.dlp_select.window import ConvSelection, PoolSelection
from dlpc.targets.dlp import DlpTarget


def _tiling(p: BufferPlan) -> tuple:
    return (p.dim, p.a, p.rlo, p.rhi, p.prefix)


def _one_row(p: BufferPlan) -> bool:
    """Tiled one row a work iteration, from the iteration's own row (no halo)."""
    return p.kind == "tiled" and p.a == 1 and p.rlo == 0 and p.rhi == 0


def _eligible(plan: KernelPlan) -> bool:
    return (
        plan.work is not None
        and plan.outer is None
        and plan.selection is not None
        and not any(p.direct for p in plan.buffers.values())
    )


def chains(kernels: list[KernelOp], plans: dict[KernelOp, KernelPlan]) -> list[list[KernelOp]]:
    """Runs of consecutive kernels (only allocations, deallocations and constants between
    them) that can be one kernel: each member after the first reads an intermediate of
    the run, tiled as its producer wrote it."""
    runs: list[list[KernelOp]] = []
    run: list[KernelOp] = []
    for k in kernels:
        if run and _joins(run, k, plans):
            run.append(k)
            continue
        if len(run) > 1:
            runs.append(run)
        run = [k] if k in plans and _eligible(plans[k]) else []
    if len(run) > 1:
        runs.append(run)
    return runs


def _adjacent(a: KernelOp, b: KernelOp) -> bool:
    op = a.next_op
    while op is not None and op is not b:
        if not isinstance(op, memref.AllocOp | memref.DeallocOp | arith.ConstantOp):
            return False
        op = op.next_op
    return op is b


def _joins(run: list[KernelOp], k: KernelOp, plans: dict[KernelOp, KernelPlan]) -> bool:
    plan = plans.get(k)
    first = plans[run[0]]
    if plan is None or not _eligible(plan) or not _adjacent(run[-1], k):
        return False
    assert plan.work is not None and first.work is not None  # (_eligible)
    if plan.work.trip_count != first.work.trip_count:
        return False
    written: dict[SSAValue, BufferPlan] = {}
    read: set[SSAValue] = set()
    for m in run:
        for v, p in plans[m].buffers.items():
            if p.written:
                written[v] = p
            if p.read:
                read.add(v)
    linked = False
    for v, p in plan.buffers.items():
        if p.written and (v in read or v in written):
            return False  # an earlier member reads it (or writes it): order across tasks
        if v in written:
            q = written[v]
            if not (_one_row(p) and _one_row(q) and _tiling(p) == _tiling(q) and q.full_write):
                return False
            linked = True
    return linked


@dataclass
class Fused:
    """The members' plans with a common task count and tile (one tile a task)."""

    kernels: list[KernelOp]
    plans: list[KernelPlan]
    tasks: int
    tile: int
    sram: bool = False  # whole buffers staged once per cluster in SRAM
    bands: int = 1  # each channel's output rows split over this many tasks (`Bands`)
    swapped: list[Swap] = field(default_factory=list)  # copies stored by the chain itself
    attention: _dlp_attn.Attention | None = None  # computed by the chain itself (_dlp_attn)


@dataclass
class Bands:
    """A convolution of a one-channel image and the pooling of its channels, split into
    bands of output rows as well as by channel: one channel a task, each band a task of
    its own, reading only the image rows its windows reach (with the padding clamped at
    the image's edges: `ConvSelection.band_params`). A plane split by rows is the same
    memory as `bands` times as many planes of `1 / bands` the rows, so a split buffer is
    planned as that (`shape`: [1, C * bands, H / bands, W]) and tiled by `channel * bands
    + band`; per-channel operands (filters, bias) are every band's."""

    conv: ConvSelection | None  # None: a chain of row-wise members (`row_bands_of`)
    split: list[BufferPlan]  # the NCHW planes the members write and read, split by rows
    rows: list[ForOp]  # the members' loops over their output rows
    pools: list[PoolSelection]
    products: list[MatmulSelection] = field(default_factory=list)  # batched: m rows each

    def fraction(self, bands: int) -> float:
        """Of the image, the most rows one band reads (1: no image)."""
        if self.conv is None:
            return 1.0
        height = self.conv.params["height"]
        return max(p["height"] for p in self.conv.band_params(bands)) / height

    def counts(self, desc: DlpTarget, trip: int) -> list[int]:
        """Band counts that divide every member's output rows, one channel a task."""
        heights = [lp.trip_count for lp in self.rows]
        return [k for k in range(2, desc.cores // trip + 1) if all(h % k == 0 for h in heights)]


def _uses(index: SSAValue, iv: SSAValue) -> bool:
    """Does the index value depend on `iv`?"""
    if index is iv:
        return True
    op = index.owner
    return isinstance(op, Operation) and any(_uses(x, iv) for x in op.operands)


def row_bands_of(members: list[KernelPlan]) -> Bands | None:
    """The chain as a `Bands` split of row-wise members (attention over its heads: the
    scores' product, softmax's max, exp, sum and scale, the product with the values),
    each a batched product, a row reduction or an elementwise nest whose loop below the
    work loop runs over rows, as many in every member; a buffer indexed by that loop
    right after the work loop's dimension is split (the query rows, the scores, the
    output), one not indexed by it at all is every band's (keys, values, constants);
    None otherwise."""
    rows: list[ForOp] = []
    products: list[MatmulSelection] = []
    kinds: dict[SSAValue, bool] = {}  # buffer -> split
    for plan in members:
        sel = plan.selection
        if isinstance(sel, MatmulSelection):
            if sel.batch is None or not isinstance(sel.ew, Elementwise):
                return None
            products.append(sel)
        elif not isinstance(sel, ReduceSelection | ElementwiseSelection):
            return None
        assert plan.work is not None  # (_eligible)
        nest = [plan.work, *spine(plan.work)]
        if len(nest) < 2 or nest[1].lower != 0 or nest[1].stride != 1:
            return None
        row = nest[1]
        if rows and row.trip_count != rows[0].trip_count:
            return None
        rows.append(row)
        iv = row.induction_var
        for op in plan.kernel.walk():
            if not isinstance(op, memref.LoadOp | memref.StoreOp):
                continue
            p = plan.buffers.get(op.memref)
            if p is None:
                continue
            idx = list(op.indices)
            split = p.kind == "tiled" and len(idx) > p.dim + 1 and idx[p.dim + 1] is iv
            others = [x for k, x in enumerate(idx) if not (split and k == p.dim + 1)]
            if any(_uses(x, iv) for x in others):
                return None
            if kinds.setdefault(p.value, split) != split:
                return None
    for plan in members:
        for p in plan.buffers.values():
            if kinds.get(p.value) and (
                p.prefix != (0,) * p.dim
                or not _one_row(p)
                or p.shape[p.dim + 1] != rows[0].trip_count  # (a band: rows / bands of them)
            ):
                return None
    split_plans = [p for plan in members for p in plan.buffers.values() if kinds.get(p.value)]
    if not split_plans:
        return None
    return Bands(None, split_plans, rows, [], products)


def bands_of(members: list[KernelPlan]) -> Bands | None:
    """The chain as a `Bands` split, or None where it is not a convolution of a
    one-channel image (its vector epilogue over whole channels) followed by poolings
    whose windows tile the rows (no padding, stride = window), nor row-wise members
    (`row_bands_of`)."""
    conv = members[0].selection
    if not isinstance(conv, ConvSelection):
        return row_bands_of(members)
    if (
        type(conv) is not ConvSelection
        or conv.params["channels_in"] != 1
        or conv.src.kind != "whole"
        or len(conv.src.shape) != 4
        or not isinstance(conv.ew, Elementwise)
        or len(conv.ew.loops) != 3
    ):
        return None
    rows, pools = [conv.ew.loops[1]], []
    height = conv.out_h
    for plan in members[1:]:
        pool = plan.selection
        if type(pool) is not PoolSelection or pool.planes != 1 or len(pool.ew.loops) != 3:
            return None
        q = pool.params
        if (
            q["pad_top"]
            or q["kernel_h"] != q["stride_h"]
            or q["height"] != height
            or q["out_h"] * q["stride_h"] != height
            or not isinstance(pool.ew, Elementwise)
        ):
            return None
        height = q["out_h"]
        rows.append(pool.ew.loops[1])
        pools.append(pool)
    split: list[BufferPlan] = []
    for plan in members:
        for p in plan.buffers.values():
            if p.kind != "tiled" or p.dim == 0:
                continue  # whole, or a per-channel operand
            if not (len(p.shape) == 4 and p.dim == 1 and p.prefix == (0,) and _one_row(p)):
                return None
            split.append(p)
    return Bands(conv, split, rows, pools)


class _Common:
    """The members of a candidate chain set to the common plan while it lives (every
    member single-buffered, whole buffers per task, the task's share one tile); their
    own plans are put back unless `keep` is called."""

    def __init__(self, members: list[KernelPlan], tasks: int, chunk: int):
        self.members = members
        self.saved = [(p, p.tasks, p.groups, p.tile, p.double, p.sram) for p in members]
        self.residents = {b: b.resident for p in members for b in p.buffers.values()}
        self.kept = False
        for p in members:
            p.tasks, p.groups, p.tile, p.double, p.sram = tasks, 1, chunk, False, False
            for b in p.buffers.values():
                b.resident = False

    def keep(self) -> None:
        self.kept = True

    def __enter__(self) -> _Common:
        return self

    def __exit__(self, *exc) -> None:
        if self.kept:
            return
        for p, tasks, groups, tile, double, sram in self.saved:
            p.tasks, p.groups, p.tile, p.double, p.sram = tasks, groups, tile, double, sram
        for b, r in self.residents.items():
            b.resident = r


def _key(p: BufferPlan) -> tuple:
    return (p.value, p.kind, _tiling(p) if p.kind == "tiled" else (), p.space)


def _cycles(
    members: list[KernelPlan],
    flops: list[Work],
    stored: set[SSAValue],
    sram: bool,
    bands: tuple[Bands, int] | None = None,
) -> float:
    """The simulator's model of the chain as one kernel, roughly (as loop_to_dlp's
    `_estimate`): each buffer copy once a task (one tile), intermediates not moved; with
    `sram` the whole buffers staged once per cluster (every core a share); with `bands`
    (no staging) every channel's task split in that many, each its band of the image."""
    d = members[0].desc
    split, k = (bands[0], bands[1]) if bands is not None else (None, 1)
    tasks = members[0].tasks * k
    per_cycle = d.gdram_bandwidth_gbs / d.clock_ghz
    seen: set[tuple] = set()
    whole = own = tiled = 0.0  # whole bytes staged in SRAM (with `sram`), copied per task
    shared = 0.0  # per-channel tiles every band copies (counted once in `tiled`)
    loads = stores = wholes = staged = 0
    compute = 0.0
    for plan, f in zip(members, flops):
        compute += compute_cycles(plan, f) / tasks
        for p in plan.buffers.values():
            nbytes = p.elements(plan.trip if p.kind == "tiled" else 1) * p.elt_bytes
            if split is not None and p.kind == "tiled" and p not in split.split:
                shared += nbytes * (k - 1) * (p.read or not p.full_write) * (_key(p) not in seen)
            if p.written and p.value in stored:
                tiled += nbytes
                stores += 1
            if (p.read or not p.full_write) and _key(p) not in seen:
                if p.kind == "whole":
                    wholes += 1
                    if sram and plan.stages(p):
                        whole += nbytes
                        staged += 1
                    elif split is not None and split.conv and p.value is split.conv.src.value:
                        own += nbytes * split.fraction(k)
                    else:
                        own += nbytes
                else:
                    tiled += nbytes
                    loads += 1
            seen.add(_key(p))
    tiled += shared
    # (build_chain: the whole buffers and the tile's loads back to back, one wait; the
    # stores, one wait; with staging, `early_loads` of the own copies go before the barrier)
    early = min(wholes - staged, max(0, d.dma_queue_depth - staged)) if staged else 0
    groups = [staged + early] * bool(staged) + [wholes - early + loads, stores]
    cpc = d.cores_per_cluster
    stagers = tasks if tasks <= cpc else (cpc if tasks % cpc == 0 else 1)
    transfer = (
        latencies(d, groups)
        + (whole / stagers + own + tiled / tasks) / per_cycle
        + whole / (d.sram_bandwidth_gbs / d.clock_ghz)
    )
    return max((whole * -(-tasks // cpc) + own * tasks + tiled) / per_cycle, compute + transfer)


def _staging(members: list[KernelPlan]) -> list[bool]:
    """The whole-buffer options of the chain: per task, and staged in SRAM where the
    clusters have several cores and the buffers fit it."""
    d = members[0].desc
    sizes = {
        _key(p): round_up(p.elements(1) * p.elt_bytes, d.dma_align)
        for plan in members
        for p in plan.buffers.values()
        if p.kind == "whole" and p.read
    }
    fits = 0 < sum(sizes.values()) <= d.capacity("sram")
    return [False, True] if fits and d.cores_per_cluster > 1 and members[0].tasks > 1 else [False]


def _stored(chain: list[KernelOp], members: list[KernelPlan]) -> set[SSAValue]:
    return {
        p.value
        for plan in members
        for p in plan.buffers.values()
        if p.written and used_after(p.value, chain)
    }


def _best(chain: list[KernelOp], members: list[KernelPlan], fs: list[Work]) -> tuple[float, bool]:
    """(cycles, staged in SRAM) of the chain's cheaper whole-buffer option."""
    stored = _stored(chain, members)
    return min((_cycles(members, fs, stored, sram), sram) for sram in _staging(members))


def segments(
    run: list[KernelOp],
    plans: dict[KernelOp, KernelPlan],
    desc: DlpTarget,
    multicore: bool,
    flops: Callable[[KernelOp], Work],
    alone: Callable[[KernelPlan, Work], float],
) -> list[Fused]:
    """The chains of a run worth one kernel: the split of the run into stretches that
    saves the most (each stretch's estimate as one kernel against the sum of its members'
    own plans' `alone` estimates; a member alone saves nothing)."""
    n = len(run)
    saves: dict[tuple[int, int], float] = {}
    for i in range(n):
        for j in range(i + 1, n):
            got = _try(run[i : j + 1], plans, desc, multicore, flops, alone)
            if got is not None and got > 0:
                saves[i, j] = got
    best: list[tuple[float, list[tuple[int, int]]]] = [(0.0, [])] * (n + 1)
    for i in range(n - 1, -1, -1):
        best[i] = best[i + 1]
        for j in range(i + 1, n):
            if (i, j) in saves and saves[i, j] + best[j + 1][0] > best[i][0]:
                best[i] = (saves[i, j] + best[j + 1][0], [(i, j), *best[j + 1][1]])
    out: list[Fused] = []
    for i, j in best[0][1]:
        fused = plan_chain(run[i : j + 1], plans, desc, multicore, flops)
        assert fused is not None  # (_try planned the same)
        out.append(fused)
    return out


def _try(chain, plans, desc, multicore, flops, alone) -> float | None:
    """Cycles the chain saves against its members alone (None: it does not fit)."""
    members = [plans[k] for k in chain]
    before = sum(alone(p, flops(k)) for p, k in zip(members, chain))
    got = _choose(chain, plans, desc, multicore, flops)
    return None if got is None else before - got[0]


def estimate(chain, plans, desc, multicore, flops) -> float | None:
    """Cycles of `chain` as one kernel by its cheapest common plan (None: does not fit);
    its members' plans are left as they were."""
    got = _choose(chain, plans, desc, multicore, flops)
    return None if got is None else got[0]


def _choose(chain, plans, desc, multicore, flops) -> tuple[float, int, bool, int] | None:
    """(cycles, tasks, staged in SRAM, bands) of the chain's cheapest common plan: on
    every core the work loop has, or on fewer whole clusters where that is a clear (10 %)
    gain (a small image copied by each task rather than staged: fewer copies over the
    GDRAM port), or one channel a task split in bands of rows (`Bands`) where that is
    cheaper; None where the members do not fit side by side."""
    trip = plans[chain[0]].trip
    most = min(desc.cores, trip) if multicore else 1
    fewer = {k * desc.cores_per_cluster for k in range(1, desc.clusters)}
    best: tuple[float, int, bool, int] | None = None
    for tasks in [most, *sorted((t for t in fewer if t < most), reverse=True)]:
        common = _common(chain, plans, desc, multicore, tasks)
        if common is None:
            continue
        with common:
            cost, sram = _best(chain, common.members, [flops(k) for k in chain])
        if best is None or cost < 0.9 * best[0]:
            best = (cost, tasks, sram, 1)
    if best is None or not multicore or 2 * trip > desc.cores:
        return best
    common = _common(chain, plans, desc, multicore, trip)
    if common is None:
        return best
    with common:  # one channel a task, its rows split in bands (where cheaper)
        split = bands_of(common.members)
        for k in split.counts(desc, trip) if split is not None else []:
            assert split is not None  # (no counts without it)
            fs = [flops(m) for m in chain]
            cost = _cycles(common.members, fs, _stored(chain, common.members), False, (split, k))
            if cost < best[0]:
                best = (cost, trip, False, k)
    return best


def _common(chain, plans, desc, multicore, tasks: int | None = None) -> _Common | None:
    members = [plans[k] for k in chain]
    trip = members[0].trip
    if tasks is None:
        tasks = min(desc.cores, trip) if multicore else 1
    chunk = -(-trip // tasks)
    spaces: dict[SSAValue, str] = {}
    for p in members:
        for b in p.buffers.values():
            if spaces.setdefault(b.value, b.space) != b.space:
                return None  # (an intermediate read from another scratchpad than written)
        if p.selection is not None and (p.selection.max_tile(p) or chunk) < chunk:
            return None
    with _Common(members, tasks, chunk):
        use = {"nram": 0, "wram": 0}
        for p in members:
            got = p.space_bytes(chunk, False, False)
            for space in use:
                use[space] += got[space]
    if any(use[s] > desc.capacity(s) for s in use):
        return None
    return _Common(members, tasks, chunk)  # (after the trial's plans are put back)


def plan_chain(
    kernels: list[KernelOp],
    plans: dict[KernelOp, KernelPlan],
    desc: DlpTarget,
    multicore: bool,
    flops: Callable[[KernelOp], Work],
) -> Fused | None:
    """The chain's common plan, set on its members, or None where the members do not
    fit side by side (their plans then as they were)."""
    got = _choose(kernels, plans, desc, multicore, flops)
    common = None if got is None else _common(kernels, plans, desc, multicore, got[1])
    if got is None or common is None:
        return None
    common.keep()
    members = common.members
    return Fused(kernels, members, members[0].tasks, members[0].tile, got[2], got[3])


def used_after(value: SSAValue, chain: list[KernelOp]) -> bool:
    """Is `value` an output of the function, or read outside the chain's kernels (other
    than by its deallocation)?"""
    if not isinstance(value.owner, memref.AllocOp):
        return True  # an argument: the function's output
    inside = {id(op) for k in chain for op in k.walk()}
    for use in value.uses:
        op = use.operation
        if id(op) not in inside and not isinstance(op, memref.DeallocOp):
            return True
    return False


def build_chain(
    fused: Fused, lowering_cls, swapped: dict[SSAValue, Swap] | None = None
) -> dlp.KernelOp:
    """The one dlp.kernel of a chain (`lowering_cls`: loop_to_dlp.KernelLowering, whose
    per-buffer pieces each member's lowering reuses); an output one of `swapped` reads is
    stored into that copy's destination where the tiles allow (the used ones are left in
    `fused.swapped`)."""
    last = fused.plans[-1]
    op: dlp.KernelOp = lowering_cls(last).op
    first = fused.kernels[0]
    if first.origin is not None:
        op.attributes["origin"] = StringAttr(first.origin.data)
    names = [k.sym for k in fused.kernels]
    if fused.attention is not None:  # (the attention kernels and the merge it computes)
        names += _dlp_attn.flops_names(fused.attention)
    op.attributes["dlpc.fused"] = StringAttr(",".join(names))
    reasons = [f"{k.sym}: {p.scalar}" for k, p in zip(fused.kernels, fused.plans) if p.scalar]
    if reasons:  # (which member runs scalar loops, and why)
        op.attributes["dlpc.scalar"] = StringAttr("; ".join(reasons))
    elif "dlpc.scalar" in op.attributes:
        del op.attributes["dlpc.scalar"]
    b = Builder(op.block)
    tid = b.v(dlp.TaskIdOp())
    tid.name_hint = "task"
    c0 = b.c(0)
    desc = last.desc
    split = bands_of(fused.plans) if fused.bands > 1 else None
    band = None
    if split is not None:  # task = channel * bands + band
        op.attributes["tasks"] = IntegerAttr(fused.tasks * fused.bands, i64)
        band = b.v(arith.RemSIOp(tid, b.c(fused.bands)))
        band.name_hint = "band"
        tid = b.v(arith.DivSIOp(tid, b.c(fused.bands)))
        tid.name_hint = "work_task"
        with _banded(split, fused.bands, band):
            _build_members(fused, lowering_cls, op, b, tid, c0, desc, split, band, swapped or {})
    else:
        _build_members(fused, lowering_cls, op, b, tid, c0, desc, None, None, swapped or {})
    merged = list({s.kernel.sym: None for s in fused.swapped})  # (the copies it does)
    if merged:
        op.attributes["dlpc.fused"] = StringAttr(",".join([*names, *merged]))
    return op


@contextmanager
def _banded(split: Bands, bands: int, band: SSAValue) -> Iterator[None]:
    """The members planned as `bands` times the planes of `1 / bands` the rows while the
    chain is built (the conv told its band), as they were afterwards."""
    shapes = [(p, p.shape) for p in split.split]
    uppers = [(lp, lp.ub) for lp in split.rows]
    params = [(q, q.params) for q in split.pools]
    products = [(m, m.batch) for m in split.products]
    try:
        for p, shape in shapes:
            d = p.dim
            p.shape = (*shape[:d], shape[d] * bands, shape[d + 1] // bands, *shape[d + 2 :])
        for lp, ub in uppers:
            lp.ub = IntegerAttr(ub.value.data // bands, ub.type)
        for q, ps in params:
            q.params = {**ps, "height": ps["height"] // bands, "out_h": ps["out_h"] // bands}
        for m, batch in products:
            assert batch is not None  # (row_bands_of: batched products only)
            m.batch = (batch[0] // bands, batch[1])
        if split.conv is not None:
            split.conv.band = (band, split.conv.band_params(bands))
        yield
    finally:
        for p, shape in shapes:
            p.shape = shape
        for lp, ub in uppers:
            lp.ub = ub
        for q, ps in params:
            q.params = ps
        for m, batch in products:
            m.batch = batch
        if split.conv is not None:
            split.conv.band = None


def _build_members(fused, lowering_cls, op, b, tid, c0, desc, split, band, swapped) -> None:
    """build_chain's body: the members' buffers, loads, tiles and stores."""
    last = fused.plans[-1]
    lowerings = []
    # buffers: one NRAM/WRAM copy per GDRAM buffer and tiling (shared by the members
    # that read it alike; an intermediate's copy is its producer's output tile)
    local: dict[tuple, SSAValue] = {}
    stored: set[SSAValue] = set()
    loaded: dict[BufferPlan, bool] = {}
    # adjacent views of one packed param read whole: one copy for them all
    firsts: dict[tuple, BufferPlan] = {}
    for plan in fused.plans:
        for p in plan.buffers.values():
            firsts.setdefault(_key(p), p)
    packs = _dlp_pack.runs(list(firsts.values()), desc)
    merged = [_dlp_pack.merge(run, fused.kernels[0], desc) for run in packs]
    for run, m in zip(packs, merged):
        m.local = b.alloc(m.space, m.elements(1), element_type(m.value), "packed_nram")
        m.slot = c0
        _dlp_pack.member_views(run, m, b, desc)
        for p in run:
            local[_key(p)] = p.local
    for plan in fused.plans:
        lw = lowering_cls(plan)
        lw.op, lw.b = op, b
        lowerings.append(lw)
        for p in plan.buffers.values():
            key = (p.value, p.kind, _tiling(p) if p.kind == "tiled" else (), p.space)
            if key in local:
                p.local, loaded[p] = local[key], False
            else:
                n = round_up(p.elements(plan.tile) * p.elt_bytes, desc.dma_align) // p.elt_bytes
                p.local = b.alloc(p.space, n, element_type(p.value), f"{p.name}_{p.space}")
                local[key] = p.local
                loaded[p] = p.read or not p.full_write
            p.slot = c0
            if p.written and used_after(p.value, fused.kernels):
                stored.add(p.value)
    attn = fused.attention
    loc = _dlp_attn.prepare(attn, b, fused.tile, desc) if attn is not None else None
    out = _dlp_attn.reader(attn, fused.plans) if attn is not None else None
    merged_heads = attn.merged if attn is not None else set()
    for p in loaded:
        if p.value in merged_heads:  # (computed by the chain: never loaded)
            loaded[p] = False
    wholes = [p for plan in fused.plans for p in plan.buffers.values() if p.kind == "whole"]
    lead = lowerings[0]  # (its plan has the chain's task count)
    lead.plan.sram = fused.sram
    image = split.conv.src.value if split is not None and split.conv is not None else None
    extra = loc.whole if loc is not None else []
    lead.load_whole([p for p in wholes if loaded[p] and p.value is not image] + merged + extra, c0)
    if split is not None and split.conv is not None and band is not None:  # its image rows
        x = split.conv.src
        top, rows = split.conv.band_rows(b, band, fused.bands)
        width = b.c(x.shape[3])
        b.op(dlp.MemcpyAsyncOp(x.local, c0, x.value, b.mul(top, width), b.mul(rows, width)))
    trip = b.c(last.trip)
    lo = b.min(b.mul(tid, b.c(last.chunk)), trip)
    hi = b.min(b.add(lo, b.c(last.chunk)), trip)
    lo.name_hint, hi.name_hint = "lo", "hi"
    _, inner, t0 = b.for_(lo, hi, b.c(fused.tile))
    t0.name_hint = "t0"
    n = inner.min(inner.c(fused.tile), inner.sub(hi, t0))
    n.name_hint = "n"
    # the tile's loads of buffers no member writes go back to back, one wait (with the
    # last tile's stores); a buffer a member stored is loaded after its store landed
    written = {p.value for plan in fused.plans for p in plan.buffers.values() if p.written}
    tiles = [[p for p in plan.buffers.values() if p.kind == "tiled"] for plan in fused.plans]
    banded = set(split.split) if split is not None else set()
    t0b = inner.add(inner.mul(t0, inner.c(fused.bands)), band) if band is not None else t0
    for lw, tiled in zip(lowerings, tiles):
        lw.tile_bases(inner, [p for p in tiled if p not in banded], t0, n)
        lw.tile_bases(inner, [p for p in tiled if p in banded], t0b, n)
        for p in tiled:
            if loaded[p] and p.value not in written:
                inner.op(dlp.MemcpyAsyncOp(p.local, p.slot, p.value, p.base, p.count))
    if attn is not None and loc is not None:
        _dlp_attn.load_q(attn, loc, inner, t0, n, fused.tile)
    inner.op(dlp.WaitDmaOp())
    if attn is not None and loc is not None and out is not None:
        _dlp_attn.compute(attn, loc, inner, out, fused.tile)
    for lw, tiled in zip(lowerings, tiles):
        later = [p for p in tiled if loaded[p] and p.value in written]
        if later:
            inner.op(dlp.WaitDmaOp())
        for p in later:
            inner.op(dlp.MemcpyOp(p.local, p.slot, p.value, p.base, p.count))
        lw.compute(inner, t0, n)
        for p in tiled:
            if not (p.written and p.value in stored):
                continue
            swap = swapped.get(p.value)
            if swap is not None and fused.tile == 1 and _swapped_store(inner, p, swap, desc):
                fused.swapped.append(swap)
                continue
            inner.op(dlp.MemcpyAsyncOp(p.value, p.base, p.local, p.slot, p.count))
    finish_for(inner)  # (a written buffer is always tiled: plan_buffers)
    b.op(dlp.WaitDmaOp())  # every copy lands before the kernel ends


def place(fused: Fused, new: Operation) -> None:
    """Put the chain's kernel where its last member was, the deallocations between the
    members after it, and remove the members."""
    last = fused.kernels[-1]
    block = last.parent_block()
    assert block is not None  # a kernel of the module
    block.insert_op_before(new, last)
    moved: list[Operation] = []
    op = fused.kernels[0].next_op
    while op is not None and op is not last:
        nxt = op.next_op
        if isinstance(op, memref.DeallocOp):
            op.detach()
            moved.append(op)
        op = nxt
    for k in fused.kernels:
        k.detach()
        k.erase()
    anchor: Operation = new
    for d in moved:
        block.insert_op_after(d, anchor)
        anchor = d


@dataclass(frozen=True)
class Swap:
    """A copy kernel `dst[.., b, a, c..] = src[.., a, b, c..]` (attention's head merge)
    right after the kernel that writes `src`, its only reader: a chain storing its tiles
    of one `a` stores them into `dst` instead, one strided DMA a tile (its rows of b, each
    a segment of the c.. elements), and the copy kernel goes (`build_chain`)."""

    kernel: KernelOp
    src: SSAValue
    dst: SSAValue
    axis: int  # the dimension of a in src


def swaps(kernels: list[KernelOp]) -> dict[SSAValue, Swap]:
    """The copy kernels of the form `Swap` describes, by the buffer they read."""
    out: dict[SSAValue, Swap] = {}
    for prev, k in zip(kernels, kernels[1:]):
        nest = spine(k)
        if not nest or not _adjacent(prev, k):
            continue
        body = [op for op in nest[-1].block.ops if not isinstance(op, arith.ConstantOp)]
        if len(body) != 2:
            continue
        load, store = body
        if not isinstance(load, memref.LoadOp) or not isinstance(store, memref.StoreOp):
            continue
        if store.value is not load.res:
            continue
        trips: dict[SSAValue, int] = {lp.induction_var: lp.trip_count for lp in nest}
        src, dst = load.memref, store.memref
        shape = shape_of(src)
        got, put = list(load.indices), list(store.indices)
        if sorted(map(id, got)) != sorted(map(id, trips)) or len(got) != len(trips):
            continue  # (every loop indexes src once: it is read whole, element by element)
        if [trips[v] for v in got] != list(shape):
            continue
        if any(lp.lower != 0 or lp.stride != 1 for lp in nest):
            continue
        axis = next(
            (
                j
                for j in range(len(got) - 1)
                if put == [*got[:j], got[j + 1], got[j], *got[j + 2 :]]
            ),
            None,
        )
        if axis is None or any(d != 1 for d in shape[:axis]):
            continue
        writes = [op for op in prev.walk() if isinstance(op, memref.StoreOp) and op.memref is src]
        parent = k.parent_op()
        assert parent is not None  # (a kernel of a function)
        readers = [  # (in the function: loop-to-dlp's direct copies are not placed yet)
            u.operation
            for u in src.uses
            if parent.is_ancestor(u.operation)
            and not isinstance(u.operation, memref.DeallocOp)
            and u.operation not in writes
        ]
        if isinstance(src.owner, memref.AllocOp) and writes and readers == [load]:
            out[src] = Swap(k, src, dst, axis)
    return out


def _swapped_store(b: Builder, p: BufferPlan, swap: Swap, desc: DlpTarget) -> bool:
    """Store p's tile (one index of the swap's axis: its rows of the next dimension) into
    the swap's `dst` as one strided DMA; False where the tile is not of that form."""
    shape = shape_of(swap.src)
    a, rows = shape[swap.axis], shape[swap.axis + 1]
    inner = math.prod(shape[swap.axis + 2 :])
    if p.dim != swap.axis or (inner * p.elt_bytes) % desc.dma_align:
        return False
    item = b.v(arith.DivSIOp(p.base, b.c(rows * inner)))
    row = b.v(arith.DivSIOp(b.v(arith.RemSIOp(p.base, b.c(rows * inner))), b.c(inner)))
    at = b.add(b.mul(row, b.c(a * inner)), b.mul(item, b.c(inner)))
    segments = b.v(arith.DivSIOp(p.count, b.c(inner)))
    b.op(
        dlp.MemcpyStridedAsyncOp(
            swap.dst, at, p.local, p.slot, b.c(inner), segments, b.c(a * inner), b.c(inner)
        )
    )
    return True
