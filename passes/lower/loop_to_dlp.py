"""Lower loop kernels to the DLP accelerator: scratchpad tiling, DMA, multi-core split.

Input: loop, memref, arith, math, scf (a loop-level `@main`, see docs/architecture.md).
Output: dlp, scf, memref, arith, math: every `loop.kernel` becomes a `dlp.kernel`
running one task per core; `@main` keeps its GDRAM buffers.
Requires: static shapes; kernels in the form te-to-loop produces (a nest of counted
loops; buffers indexed by affine functions of the loop variables, anything else is
handled as a whole-buffer load).
Guarantees: every memory access inside a kernel touches NRAM (or WRAM for matrix
weights); GDRAM is reached only by `dlp.memcpy`; the working set of every kernel fits
the capacities of the target description, or the pass fails with
`kernel 'K' needs N bytes of nram but the target has M` (naming kernel, space, bytes).

The plan for one kernel, in order:

1. pick the *work loop*: the outermost loop of the kernel's perfect-nest spine (outer
   loops of extent 1 are fixed) whose iterations write disjoint parts of every buffer
   the kernel stores to (so not a reduction);
2. classify buffers: *tiled* (indexed `a*v + r` in one dimension with a constant prefix
   before it, so a tile of the work loop is one contiguous GDRAM range), or *whole*
   (read-only and independent of, or not affinely dependent on, the work loop);
3. split the work loop's iterations across tasks (`dlp.task_id`), and each task's share
   into tiles of T iterations, T the largest that fits NRAM; with `double-buffer` the
   tile buffers are ping-pong pairs and tile k+1 is loaded (`dlp.memcpy_async`) while
   tile k computes;
4. whole buffers are staged once per cluster in SRAM (core 0 copies, `dlp.sync_cluster`,
   every core copies SRAM2NRAM) when they fit, else copied GDRAM2NRAM per core;
5. the tile's compute is the work loop's body over NRAM copies (scalar loops), unless
   it matches an intrinsic (dlp_select/): an elementwise nest becomes vector
   intrinsics (`dlp.add`, `dlp.cycle_add`, `dlp.relu`, ...), a matmul/linear nest
   `dlp.matmul` with its right operand DMA'd to WRAM, a convolution `dlp.conv2d` with its
   weights in WRAM, max/average pooling `dlp.pool` (max or sum; the average's division
   is the epilogue), a row reduction `dlp.reduce_sum`/`dlp.reduce_max`; their epilogues
   become vector ops (or scalar loops over the accumulator tile).

Before any of this, a pure data-movement kernel (reshape, concat, contiguous slices, head
splits) whose pieces contiguous in source and destination are few becomes direct
`dlp.memcpy GDRAM2GDRAM` copies split over the tasks, without NRAM (_dlp_copy.py).

A kernel with no usable work loop runs whole on task 0 (every buffer copied to NRAM).

    loop.kernel "relu_0" { loop.for %i0 = 0 to 64 {parallel} { loop.for %i1 = 0 to 64 {
        ... memref.load %x[%i0, %i1] ... arith.maximumf ... memref.store ... %out[%i0, %i1] } } }

becomes (16 tasks, 4 rows per task, one tile):

    dlp.kernel "relu_0" attributes {origin = "graph.relu", tasks = 16 : i64, ...} {
      %t = dlp.task_id
      %x_t = memref.alloc() : memref<256xf32, #dlp.space<nram>>
      ...
      scf.for %t0 = %lo to %hi step %c4 {
        dlp.memcpy GDRAM2NRAM %x_t[%c0], %x[%base], %count : ...
        dlp.relu %out_t[%c0], %x_t[%c0], %count : ...
        dlp.memcpy NRAM2GDRAM %out[%base], %out_t[%c0], %count : ...
      }
    }
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import dlp
from dlpc.dialects.dlp import constant_index as _const
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside, spine
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.lower import _dlp_attn, _dlp_pack
from dlpc.passes.lower._dlp_build import (
    BufferPlan,
    Builder,
    Cloner,
    KernelPlan,
    Work,
    compute_cycles,
    early_loads,
    finish_for,
    latencies,
    round_up,
)
from dlpc.passes.lower.dlp_select import select_compute
from dlpc.passes.lower.dlp_select.elementwise import ERF_VECTOR_OPS, ScalarEpilogue
from dlpc.passes.lower.dlp_select.permute import PermuteSelection
from dlpc.passes.lower.dlp_select.reduce import ReduceSelection
from dlpc.targets.dlp import DlpTarget, resolve

INF = float("inf")
COPIES = (dlp.MemcpyOp, dlp.MemcpyAsyncOp, dlp.MemcpyStridedAsyncOp)

# ------------------------------------------------------------------ index analysis


@dataclass(frozen=True)
class Affine:
    """value = a * v + r with r in [lo, hi], v the work loop's induction variable."""

    a: int
    lo: float
    hi: float


class IndexAnalysis:
    """Affine form of index values w.r.t. the work loop variable `v` (None: non-affine)."""

    def __init__(self, v: SSAValue | None, ranges: dict[SSAValue, tuple[int, int]]):
        self.v = v
        self.ranges = ranges  # other induction variables: [lo, hi] inclusive
        self.memo: dict[SSAValue, Affine | None] = {}

    def __call__(self, value: SSAValue) -> Affine | None:
        if value not in self.memo:
            self.memo[value] = self._compute(value)
        return self.memo[value]

    def _compute(self, value: SSAValue) -> Affine | None:
        if value is self.v:
            return Affine(1, 0, 0)
        if value in self.ranges:
            lo, hi = self.ranges[value]
            return Affine(0, lo, hi)
        c = _const(value)
        if c is not None:
            return Affine(0, c, c)
        op = value.owner
        if isinstance(op, Block) or not isinstance(op, Operation):
            return Affine(0, -INF, INF)  # a value from outside the nest: independent
        forms = [self(x) for x in op.operands]
        name = op.name
        if name in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui"):
            return forms[0]
        args = [x for x in forms if x is not None]
        if len(args) < len(forms):
            return None
        if name == "arith.addi":
            x, y = args
            return Affine(x.a + y.a, x.lo + y.lo, x.hi + y.hi)
        if name == "arith.subi":
            x, y = args
            return Affine(x.a - y.a, x.lo - y.hi, x.hi - y.lo)
        if name == "arith.muli":
            x, y = args
            if y.a == 0 and y.lo == y.hi:
                x, y = y, x
            if x.a == 0 and x.lo == x.hi:  # constant * y
                c = x.lo
                bounds = sorted([c * y.lo, c * y.hi]) if c else [0, 0]
                return Affine(int(c * y.a), *bounds)
            if x.a == 0 and y.a == 0:
                ps = [p * q for p in (x.lo, x.hi) for q in (y.lo, y.hi) if not math.isnan(p * q)]
                return Affine(0, min(ps), max(ps))
            return None
        if all(x.a == 0 for x in args):  # independent of v: interval bounds
            return self._interval(name, args)
        return None

    @staticmethod
    def _interval(name: str, args: list[Affine]) -> Affine:
        if (
            name in ("arith.divsi", "arith.divui", "arith.floordivsi")
            and args[1].lo == args[1].hi > 0
        ):
            c = args[1].lo
            return Affine(
                0,
                args[0].lo // c if args[0].lo > -INF else -INF,
                args[0].hi // c if args[0].hi < INF else INF,
            )
        if (
            name in ("arith.remsi", "arith.remui")
            and args[1].lo == args[1].hi > 0
            and args[0].lo >= 0
        ):
            return Affine(0, 0, args[1].lo - 1)
        if name in ("arith.maxsi", "arith.minsi", "arith.select"):
            vals = args[-2:] if name == "arith.select" else args
            return Affine(0, min(x.lo for x in vals), max(x.hi for x in vals))
        return Affine(0, -INF, INF)


# ------------------------------------------------------------------------ planning


def _hint(value: SSAValue, name: str) -> None:
    """Name a freshly computed value (never rename a value that already has a name)."""
    if value.name_hint is None and not isinstance(value.owner, arith.ConstantOp):
        value.name_hint = name


class PlanError(Exception):
    """This candidate work loop cannot be used (the next one is tried)."""


def _accesses(root: Operation) -> list[memref.LoadOp | memref.StoreOp]:
    return [op for op in root.walk() if isinstance(op, memref.LoadOp | memref.StoreOp)]


def _full_coverage(store: memref.StoreOp, work: ForOp, ranges_ops: dict[SSAValue, ForOp]) -> bool:
    """Does this store, over the work loop's inner loops, write every element of its box?
    (unconditional; after the work dim, each index is a distinct full-range loop var)"""
    parent = store.parent_op()
    while parent is not work:
        if not isinstance(parent, ForOp):
            return False  # under scf.if
        parent = parent.parent_op()
    shape = shape_of(store.memref)
    idx = list(store.indices)
    pos = next((k for k, x in enumerate(idx) if x is work.induction_var), None)
    if pos is None:
        return False
    seen = set()
    for k in range(pos + 1, len(idx)):
        loop = ranges_ops.get(idx[k])
        if (
            loop is None
            or loop in seen
            or loop.lower != 0
            or loop.stride != 1
            or loop.upper != shape[k]
        ):
            return False
        seen.add(loop)
    return True


def plan_buffers(
    kernel: KernelOp, work: ForOp | None, fixed: dict[SSAValue, int]
) -> dict[SSAValue, BufferPlan]:
    """Classify every outside memref the kernel touches (raises PlanError)."""
    ranges: dict[SSAValue, tuple[int, int]] = {v: (c, c) for v, c in fixed.items()}
    loop_of: dict[SSAValue, ForOp] = {}
    for loop in kernel.loops():
        if loop is not work and loop.induction_var not in fixed:
            last = loop.lower + (loop.trip_count - 1) * loop.stride
            ranges[loop.induction_var] = (loop.lower, max(loop.lower, last))
            loop_of[loop.induction_var] = loop
    v = work.induction_var if work is not None else None
    analysis = IndexAnalysis(v, ranges)
    plans: dict[SSAValue, BufferPlan] = {}
    forms: dict[SSAValue, list[AccessForm | None]] = {}
    for op in _accesses(kernel):
        m = op.memref
        if defined_inside(m, kernel):
            continue  # a kernel-local buffer (accumulator, cache stage)
        if not isinstance(m.type, MemRefType) or any(d < 0 for d in m.type.get_shape()):
            raise DiagnosticException(
                f"loop-to-dlp needs static shapes; kernel '{kernel.sym}' uses {m.type}"
            )
        plan = plans.setdefault(m, BufferPlan(m, tuple(m.type.get_shape())))
        is_store = isinstance(op, memref.StoreOp)
        plan.read |= not is_store
        plan.written |= is_store
        if isinstance(op, memref.StoreOp) and work is not None:
            if not _full_coverage(op, work, loop_of):
                plan.full_write = False
        forms.setdefault(m, []).append(
            _access_form(analysis, op, work) if work is not None else None
        )
    for m, plan in plans.items():
        if work is None:
            plan.full_write = False
            continue
        fs = [f for f in forms[m] if f is not None]
        affine = len(fs) == len(forms[m])
        if affine and all(f.a == 0 for f in fs):  # independent of the work loop
            if plan.written:
                raise PlanError(f"buffer {plan.name} is written by every iteration")
            continue
        dims = {(f.dim, f.a, f.prefix) for f in fs}
        if not affine or len(dims) != 1:
            if plan.written:
                raise PlanError(f"buffer {plan.name} is written non-affinely")
            continue  # read-only: load it whole
        ((dim, a, prefix),) = dims
        rlo = min(f.rlo for f in fs)
        rhi = max(f.rhi for f in fs)
        if a <= 0 or rlo == -INF or rhi == INF:
            if plan.written:
                raise PlanError(f"buffer {plan.name} has no bounded tile")
            continue
        if plan.written and rhi - rlo >= a:
            raise PlanError(f"iterations overlap in written buffer {plan.name}")
        plan.kind, plan.dim, plan.a, plan.rlo, plan.rhi, plan.prefix = (
            "tiled",
            dim,
            a,
            int(rlo),
            int(rhi),
            prefix,
        )
    return plans


class AccessForm(NamedTuple):
    """An access's index along `dim` is `a * j + r`, r in [rlo, rhi], j the work loop's
    iteration number; the dims before `dim` are the constants `prefix`. a == 0: the
    access does not depend on the work loop."""

    dim: int
    a: int
    rlo: float  # -INF / INF: unbounded
    rhi: float
    prefix: tuple[int, ...]


def _access_form(
    analysis: IndexAnalysis, op: memref.LoadOp | memref.StoreOp, work: ForOp
) -> AccessForm | None:
    """The access's form w.r.t. the work loop, or None if it is not affine."""
    maybe = [analysis(i) for i in op.indices]
    forms = [f for f in maybe if f is not None]
    if len(forms) < len(maybe):
        return None
    dep = [k for k, f in enumerate(forms) if f.a != 0]
    if not dep:
        return AccessForm(0, 0, 0, 0, ())
    if len(dep) != 1:
        return None
    d = dep[0]
    if any(f.lo != f.hi for f in forms[:d]):
        return None
    f = forms[d]
    # v = lb + step * j  =>  a*v + r = (a*step) * j + (r + a*lb)
    a = f.a * work.stride
    return AccessForm(
        d,
        a,
        f.lo + f.a * work.lower,
        f.hi + f.a * work.lower,
        tuple(int(g.lo) for g in forms[:d]),
    )


def plan_kernel(
    kernel: KernelOp, desc: DlpTarget, double_buffer: bool, multicore: bool, intrinsics: bool
) -> KernelPlan:
    nest = spine(kernel)
    candidates: list[tuple[ForOp | None, dict[SSAValue, int]]] = []
    fixed: dict[SSAValue, int] = {}
    # (batch, work loop, fixed): the first loop of several iterations as a batch around
    # the next one, tried when the first gives no intrinsic selection
    outer: tuple[ForOp, ForOp, dict[SSAValue, int]] | None = None
    for k, loop in enumerate(nest):
        if loop.trip_count > 1:
            candidates.append((loop, dict(fixed)))
            below = {loop.induction_var: 0}
            for inner in nest[k + 1 :]:
                if inner.trip_count > 1:
                    if loop.lower == 0 and loop.stride == 1:
                        outer = (loop, inner, {**fixed, **below})
                    break
                below[inner.induction_var] = inner.lower
        if loop.trip_count != 1:
            break
        fixed[loop.induction_var] = loop.lower
    candidates.append((None, {}))
    local = sum(
        _local_bytes(op) for op in kernel.walk() if isinstance(op, memref.AllocOp | memref.AllocaOp)
    )
    smallest: tuple[int, str, KernelPlan] | None = None
    for work, fixed in candidates:
        try:
            buffers = plan_buffers(kernel, work, fixed)
        except PlanError:
            continue
        plan = KernelPlan(kernel, desc, work, fixed, buffers, local_bytes=local)
        plan.tasks = min(desc.cores, plan.trip) if (multicore and work is not None) else 1
        if intrinsics:
            plan.selection = select_compute(plan)
        dropped = not plan.fits(1, False, False) and plan.selection is not None
        if dropped:
            plan.selection = None  # intrinsic scratch may be what overflows
        plan.scalar = scalar_reason(plan, intrinsics, dropped)
        if _choose_tile(plan, double_buffer):
            if multicore and work is not None:
                _choose_clusters(plan, double_buffer, _flops(kernel.block))
            if intrinsics and plan.selection is None and outer is not None:
                batched = _outer_plan(kernel, desc, double_buffer, multicore, outer, local)
                if batched is not None:
                    return batched  # intrinsics image by image beat scalar loops
            return plan
        use = plan.space_bytes(1, False, False)
        for space, need in use.items():
            if need > desc.capacity(space) and (smallest is None or need < smallest[0]):
                smallest = (need, space, plan)
    assert smallest is not None
    need, space, _ = smallest
    raise DiagnosticException(
        f"kernel '{kernel.sym}' needs {need} bytes of {space} but the target "
        f"'{desc.name}' has {desc.capacity(space)}"
    )


def _outer_plan(
    kernel: KernelOp,
    desc: DlpTarget,
    double_buffer: bool,
    multicore: bool,
    outer: tuple[ForOp, ForOp, dict[SSAValue, int]],
    local: int,
) -> KernelPlan | None:
    """The plan with the batch loop outside the work loop (every task runs the images in
    turn, each image as at batch 1), when it finds an intrinsic selection that fits;
    buffers indexed by the batch in dim 0 are offset one image per iteration."""
    batch, work, fixed = outer
    try:
        buffers = plan_buffers(kernel, work, fixed)
        _mark_outer(kernel, batch, buffers)
    except PlanError:
        return None
    plan = KernelPlan(kernel, desc, work, fixed, buffers, local_bytes=local, outer=batch)
    plan.tasks = min(desc.cores, plan.trip) if multicore else 1
    if multicore and batch.trip_count > 1:
        # images split over groups of tasks: each image crosses GDRAM once per task of
        # its group instead of once per task
        plan.groups = max(
            g for g in range(1, desc.cores + 1) if desc.cores % g == 0 and g <= batch.trip_count
        )
        plan.tasks = plan.groups * min(desc.cores // plan.groups, plan.trip)
    plan.selection = select_compute(plan)
    if plan.selection is None or not _choose_tile(plan, double_buffer):
        return None
    plan.scalar = scalar_reason(plan, True, False)
    if multicore and plan.groups == 1:
        _choose_clusters(plan, double_buffer, _flops(kernel.block).per(batch.trip_count))
    return plan


def _mark_outer(kernel: KernelOp, batch: ForOp, buffers: dict[SSAValue, BufferPlan]) -> None:
    """Mark the buffers every access of which indexes dim 0 by the batch loop (PlanError
    when only some do, or a buffer written is not one of them)."""
    uses: dict[SSAValue, set[bool]] = {}
    for op in _accesses(kernel):
        if op.memref in buffers:
            idx = list(op.indices)
            uses.setdefault(op.memref, set()).add(bool(idx) and idx[0] is batch.induction_var)
    for m, p in buffers.items():
        kinds = uses[m]  # (plan_buffers plans only the buffers the kernel accesses)
        if len(kinds) != 1:
            raise PlanError(f"buffer {p.name} is read both per image and across images")
        p.outer = kinds == {True}
        if p.outer and p.shape[0] != batch.trip_count:
            raise PlanError(f"buffer {p.name} is not one image per batch iteration")
        if p.written and not p.outer:
            raise PlanError(f"buffer {p.name} is written by every image")


def scalar_reason(plan: KernelPlan, intrinsics: bool, dropped: bool) -> str | None:
    """Why the plan's compute runs as scalar loops, or None where it runs on intrinsics
    (what `dlpc --stats` reports per kernel)."""
    sel = plan.selection
    if sel is not None:
        if isinstance(getattr(sel, "ew", None), ScalarEpilogue):
            return "its epilogue is not vector intrinsics (an op without one, or rows not vector-aligned)"
        return None
    if plan.work is None:
        return "no loop whose iterations write disjoint parts of its outputs (one task)"
    if not intrinsics:
        return "intrinsics are off"
    if dropped:
        return "the intrinsic's scratch does not fit the scratchpad"
    if any(not isinstance(element_type(p.value), Float32Type) for p in plan.buffers.values()):
        return "a buffer is not f32"
    return "no intrinsic pattern matches its loop nest"


def _choose_tile(plan: KernelPlan, double_buffer: bool, sram: bool | None = None) -> bool:
    """Pick tile size, double buffering and SRAM staging (staged where it fits, or as
    `sram` asks); False if nothing fits."""
    chunk = plan.chunk
    if plan.selection is not None:
        chunk = min(chunk, plan.selection.max_tile(plan) or chunk)
    has_whole = any(b.kind == "whole" and b.read for b in plan.buffers.values())
    sram_options = (
        [True, False]
        if (has_whole and plan.desc.cores_per_cluster > 1 and plan.tasks > 1)
        else [False]
    )
    if sram is not None:
        sram_options = [o for o in sram_options if o == sram]
    for staged in sram_options:
        if double_buffer and plan.work is not None and chunk >= 2:
            t = _largest_tile(plan, min(chunk, -(-chunk // 2)), True, staged)
            if t:
                plan.tile, plan.double, plan.sram = t, True, staged
                _mark_resident(plan)
                return True
        t = _largest_tile(plan, chunk, False, staged)
        if t:
            plan.tile, plan.double, plan.sram = t, False, staged
            _mark_resident(plan)
            return True
    return False


def _mark_resident(plan: KernelPlan) -> None:
    """On the matrix unit (conv, matmul) over several tiles a task: the read-only tiled
    buffers one row a work iteration (weights, bias rows) whose task share fits beside
    the rest are loaded once a task (`BufferPlan.resident`), each tile's rows starting
    vector-aligned in it."""
    for p in plan.buffers.values():
        p.resident = False
    if not getattr(plan.selection, "matrix_unit", False) or plan.tile >= plan.chunk:
        return
    align = plan.desc.vector_align
    for p in plan.buffers.values():
        if p.kind != "tiled" or p.direct or p.written or not p.read or p.outer:
            continue
        if p.a != 1 or p.rlo != 0 or p.rhi != 0 or (plan.tile * p.inner * p.elt_bytes) % align:
            continue
        p.resident = True
        if not plan.fits(plan.tile, plan.double, plan.sram):
            p.resident = False


def _flops(block: Block, in_reduction: bool = False) -> Work:
    """Floating-point operations of one execution of `block` (an scf.if: its larger
    branch): the work the time estimates divide among tasks, those inside a reduction
    loop (a matmul's or convolution's MACs: the matrix unit's where it runs) apart from
    the rest (epilogues: vector ops). An erf counts the vector ops its expansion takes."""
    mac = other = 0.0
    for op in block.ops:
        if isinstance(op, ForOp):
            inner = _flops(op.block, in_reduction or op.reduction is not None)
            mac += op.trip_count * inner.mac
            other += op.trip_count * inner.other
        elif isinstance(op, scf.IfOp):
            branches = [_flops(r.block, in_reduction) for r in op.regions if r.blocks]
            if branches:
                most = max(branches, key=lambda w: w.mac + w.other)
                mac, other = mac + most.mac, other + most.other
        elif op.name.startswith(("arith.", "math.")) and not isinstance(op, arith.ConstantOp):
            if any(isinstance(r.type, AnyFloat) for r in op.results):
                n = ERF_VECTOR_OPS if op.name == "math.erf" else 1
                if in_reduction:
                    mac += n
                else:
                    other += n
    return Work(mac, other)


def _estimate(plan: KernelPlan, flops: Work) -> float:
    """Cycles the simulator's model (backends/runtime/dlp_sim.py) would give a plan whose
    compute is intrinsics, roughly: whole buffers cross GDRAM once per cluster when staged in SRAM (else once
    per task), tiles once; the kernel takes the longer of the shared GDRAM port and its
    slowest task (compute, then DMA latency and bytes, overlapped when double-buffered)."""
    d = plan.desc
    tasks = plan.tasks
    clusters = -(-tasks // d.cores_per_cluster)
    reads = [
        p
        for p in plan.buffers.values()
        if p.kind == "whole" and not p.direct and (p.read or not p.full_write)
    ]
    staged = [p for p in reads if plan.sram and plan.stages(p)]
    whole = sum(p.elements(1) * p.elt_bytes for p in staged)  # (staged once per cluster)
    own = sum(p.elements(1) * p.elt_bytes for p in reads if p not in staged)
    tiled = sum(
        p.elements(plan.trip) * p.elt_bytes * (p.read + p.written)
        for p in plan.buffers.values()
        if p.kind == "tiled" and not p.direct
    )
    gdram = whole * clusters + own * tasks + tiled
    per_cycle = d.gdram_bandwidth_gbs / d.clock_ghz
    compute = compute_cycles(plan, flops) / tasks
    tiles = -(-plan.chunk // plan.tile)
    per_tile = [p for p in plan.buffers.values() if p.kind == "tiled" and not p.direct]
    loads = sum(p.read or not p.full_write for p in per_tile if not p.resident)
    stores = sum(p.written for p in per_tile if not p.resident)
    wholes = len(reads) + sum(p.resident and not p.direct for p in plan.buffers.values())
    early = len(early_loads(d, staged, reads))
    transfer = (
        latencies(
            d,
            [len(staged) + early] * bool(staged)
            + [wholes - early + loads]
            + [stores + loads] * (tiles - 1)
            + [stores],
        )
        + tiled / tasks / per_cycle
        + whole / _stagers(plan) / per_cycle  # (staged by shares)
        + own / per_cycle
        + whole / (d.sram_bandwidth_gbs / d.clock_ghz)
    )
    task = compute + transfer - (min(compute, transfer) if plan.double else 0.0)
    return max(gdram / per_cycle, task)


def _choose_clusters(plan: KernelPlan, double_buffer: bool, flops: Work) -> None:
    """For a kernel with whole buffers (a linear layer's weights, a convolution's image):
    fewer clusters where the whole buffers each cluster stages would cross GDRAM more
    times than the extra cores save; for it or a row reduction, where a task's share fits
    one tile, that tile
    without ping-pong where a second tile's DMAs (weights, bias, output again) cost more
    than the overlap saves (little compute, as at batch 1); and whole buffers staged in
    SRAM or copied by each task from GDRAM (a small input: one DMA latency less a task):
    the task count, buffering and staging with the lowest `_estimate`."""
    d = plan.desc
    has_whole = any(p.kind == "whole" and not p.direct for p in plan.buffers.values())
    sel = plan.selection
    if not (has_whole or isinstance(sel, ReduceSelection)) or sel is None:
        return
    if isinstance(getattr(sel, "ew", None), ScalarEpilogue):
        return  # scalar loops (GELU's erf): their cost, index arithmetic included, is not modelled
    best = (_estimate(plan, flops), plan.tasks, plan.tile, plan.double, plan.sram)
    default, cheapest = best[0], best
    fewer = (min(k * d.cores_per_cluster, plan.trip) for k in range(1, d.clusters))
    counts = [plan.tasks, *sorted({t for t in fewer if t < plan.tasks and has_whole}, reverse=True)]
    for tasks in counts:
        plan.tasks = tasks
        for double in [double_buffer, False] if double_buffer else [False]:
            # whole buffers staged in SRAM or each task's own GDRAM2NRAM copy: staging
            # saves GDRAM bytes and costs each task a second DMA latency
            for sram in (True, False):
                if not _choose_tile(plan, double, sram):
                    continue
                if double_buffer and not double and plan.tile < plan.chunk:
                    continue  # single-buffered over several tiles: ping-pong is the option asked
                cost = _estimate(plan, flops)
                if cost < cheapest[0]:
                    cheapest = (cost, plan.tasks, plan.tile, plan.double, plan.sram)
    if cheapest[0] < default:  # (the model splits matrix and vector work: the cheapest)
        best = cheapest
    _, plan.tasks, plan.tile, plan.double, plan.sram = best
    _mark_resident(plan)


def _stagers(plan: KernelPlan) -> int:
    """Cores of each cluster that stage the whole buffers in SRAM, a share each: every
    core of the cluster where all clusters of the launch are alike, else core 0 alone."""
    cpc = plan.desc.cores_per_cluster
    if plan.tasks <= cpc:
        return plan.tasks
    return cpc if plan.tasks % cpc == 0 else 1


def _largest_tile(plan: KernelPlan, limit: int, double: bool, sram: bool) -> int:
    if not plan.fits(1, double, sram):
        return 0
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if plan.fits(mid, double, sram):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _local_bytes(op: memref.AllocOp | memref.AllocaOp) -> int:
    ty = op.memref.type
    return math.prod(ty.get_shape()) * dlp.element_bytes(ty)


# ---------------------------------------------------------------------- code building


class KernelLowering:
    """Builds the dlp.kernel for one plan."""

    def __init__(self, plan: KernelPlan):
        self.plan = plan
        self.desc = plan.desc
        k = plan.kernel
        attrs: dict[str, Attribute] = {
            "tasks": IntegerAttr(plan.tasks, i64),
            "dma_align": IntegerAttr(self.desc.dma_align, i64),
            "vector_align": IntegerAttr(self.desc.vector_align, i64),
        }
        if k.origin is not None:
            attrs["origin"] = StringAttr(k.origin.data)
        if plan.double:
            attrs["double_buffered"] = UnitAttr()
        if plan.scalar is not None:
            attrs["dlpc.scalar"] = StringAttr(plan.scalar)
        self.op = dlp.KernelOp(k.sym, **attrs)
        self.b = Builder(self.op.block)
        self.image: dict[BufferPlan, SSAValue] = {}  # outer buffer -> this image's offset
        self.first: dict[BufferPlan, SSAValue] = {}  # resident buffer -> the task's first row

    def build(self) -> dlp.KernelOp:
        plan, b = self.plan, self.b
        tid = b.v(dlp.TaskIdOp())
        _hint(tid, "task")
        c0 = b.c(0)
        tiled = [p for p in plan.buffers.values() if p.kind == "tiled" and not p.direct]
        whole = [p for p in plan.buffers.values() if p.kind == "whole" and not p.direct]
        copies = 2 if plan.double else 1
        # adjacent views of one packed param read whole: one copy for them all
        packs = _dlp_pack.runs(list(plan.buffers.values()), self.desc)
        packed = {p for run in packs for p in run}
        merged = [_dlp_pack.merge(run, plan.kernel, self.desc) for run in packs]
        whole = [p for p in whole if p not in packed] + merged
        for p in (p for p in [*plan.buffers.values(), *merged] if not p.direct and p not in packed):
            rows = plan.chunk if p.resident else plan.tile
            n = round_up(p.elements(rows) * p.elt_bytes, self.desc.dma_align) // p.elt_bytes
            p.local = b.alloc(
                p.space,
                n * (copies if p.kind == "tiled" and not p.resident else 1),
                element_type(p.value),
                f"{p.name}_{p.space}",
            )
            p.slot = c0
        for run, m in zip(packs, merged):
            _dlp_pack.member_views(run, m, b, self.desc)
            for p in run:
                p.slot = c0
        self.load_whole([p for p in whole if not p.outer], c0)
        if plan.work is None:
            self.untiled(tid, whole, c0)
            b.op(dlp.WaitDmaOp())
            return self.op
        batch = plan.outer
        if batch is not None:  # every task of a group runs the group's images in turn
            images = b.c(batch.trip_count)
            first, last = b.c(0), images
            if plan.groups > 1:
                per_group = plan.tasks // plan.groups
                group = b.v(arith.DivSIOp(tid, b.c(per_group)))
                _hint(group, "group")
                tid = b.sub(tid, b.mul(group, b.c(per_group)))  # the task within its group
                share = b.c(-(-batch.trip_count // plan.groups))
                first = b.min(b.mul(group, share), images)
                last = b.min(b.add(first, share), images)
            _, inner, n = b.for_(first, last, b.c(1))
            _hint(n, "image")
            for p in plan.buffers.values():
                if p.outer:
                    self.image[p] = inner.mul(n, inner.c(p.image))
            b = self.b = inner
            # (a work loop's whole buffers are read-only: plan_buffers refuses a written
            # one, so none is stored back, nor waited for before the next image's load)
            for p in whole:
                if p.outer:
                    b.op(dlp.MemcpyAsyncOp(p.local, c0, p.value, self.image[p], b.c(p.elements(1))))
        trip = b.c(plan.trip)
        lo = b.min(b.mul(tid, b.c(plan.chunk)), trip)
        hi = b.min(b.add(lo, b.c(plan.chunk)), trip)
        _hint(lo, "lo")
        _hint(hi, "hi")
        self.load_resident(tiled, lo, hi)
        if plan.double:
            self.double_buffered(tiled, lo, hi)
        else:
            loop, inner, t0 = b.for_(lo, hi, b.c(plan.tile))
            _hint(t0, "t0")
            n = inner.min(inner.c(plan.tile), inner.sub(hi, t0))
            _hint(n, "n")
            # a tile's loads go back to back with the last tile's stores, one wait
            self.tile_bases(inner, tiled, t0, n)
            self.copies(inner, tiled, "in", n, dlp.MemcpyAsyncOp)
            inner.op(dlp.WaitDmaOp())
            self.compute(inner, t0, n)
            self.copies(inner, tiled, "out", n, dlp.MemcpyAsyncOp)
            finish_for(inner)
        if batch is not None:
            finish_for(b)
            self.b = b.parent if b.parent is not None else self.b
        if not isinstance(self.b.block.last_op, dlp.WaitDmaOp):
            self.b.op(dlp.WaitDmaOp())  # every copy lands before the kernel ends
        return self.op

    # ---- pieces ---------------------------------------------------------------
    def load_whole(self, whole: list[BufferPlan], c0: SSAValue) -> None:
        b, plan = self.b, self.plan
        reads = [p for p in whole if p.read or not p.full_write]
        staged = [p for p in reads if plan.sram and plan.stages(p)]
        if staged:
            core = b.v(dlp.CoreIdOp())
            core.name_hint = "core"
            for p in staged:
                n = round_up(p.elements(1) * p.elt_bytes, self.desc.dma_align) // p.elt_bytes
                p.staged = b.alloc("sram", n, element_type(p.value), f"{p.name}_sram")
            here = _stagers(plan)
            if here == 1:
                is_first = b.v(arith.CmpiOp(core, c0, "eq"))
                is_first.name_hint = "is_core0"
                first = Block()
                b.op(scf.IfOp(is_first, [], Region(first)))
                fb = b.nested(first)
                for p in staged:
                    fb.op(
                        dlp.MemcpyAsyncOp(p.staged, fb.c(0), p.value, fb.c(0), fb.c(p.elements(1)))
                    )
                fb.op(scf.YieldOp())
            for p in staged if here > 1 else []:
                # every core of the cluster stages its DMA-aligned share of the buffer
                n = p.elements(1)
                piece = round_up(-(-n // here), self.desc.dma_align // p.elt_bytes)
                start = b.min(b.mul(core, b.c(piece)), b.c(n))
                count = b.min(b.c(piece), b.sub(b.c(n), start))
                share = Block()
                b.op(scf.IfOp(b.v(arith.CmpiOp(count, c0, "sgt")), [], Region(share)))
                sb = b.nested(share)
                sb.op(dlp.MemcpyAsyncOp(p.staged, start, p.value, start, count))
                sb.op(scf.YieldOp())
            # the task's own loads fill the staging wait's queue (they do not read SRAM):
            # that many fewer copies share the wait after the barrier
            for p in early_loads(self.desc, staged, reads):
                b.op(dlp.MemcpyAsyncOp(p.local, c0, p.value, c0, b.c(p.elements(1))))
            b.op(dlp.WaitDmaOp())  # the cluster's copies are in SRAM before the barrier
            b.op(dlp.SyncClusterOp())
            for p in staged:
                b.op(dlp.MemcpyAsyncOp(p.local, c0, p.staged, c0, b.c(p.elements(1))))
        # issued back to back: waited for with the first tile's loads
        early = early_loads(self.desc, staged, reads)
        for p in reads:
            if p not in staged and p not in early:
                b.op(dlp.MemcpyAsyncOp(p.local, c0, p.value, c0, b.c(p.elements(1))))

    def untiled(self, tid: SSAValue, whole: list[BufferPlan], c0: SSAValue) -> None:
        """No work loop: task 0 runs the whole kernel on its NRAM copies."""
        b = self.b
        body = Block()
        b.op(scf.IfOp(b.v(arith.CmpiOp(tid, c0, "eq")), [], Region(body)))
        inner = b.nested(body)
        inner.op(dlp.WaitDmaOp())
        vmap: dict[SSAValue, SSAValue] = {}
        Cloner(self.plan, vmap).block(self.plan.kernel.block, inner)
        for p in whole:
            if p.written:
                inner.op(
                    dlp.MemcpyAsyncOp(
                        p.value, inner.c(0), p.local, inner.c(0), inner.c(p.elements(1))
                    )
                )
        inner.op(scf.YieldOp())

    def load_resident(self, tiled: list[BufferPlan], lo: SSAValue, hi: SSAValue) -> None:
        """The task's rows lo..hi of each resident buffer, one DMA each (none where the
        task has no rows); `first` keeps where they start, for the tiles' slots."""
        b = self.b
        resident = [p for p in tiled if p.resident]
        if not resident:
            return
        body = Block()
        b.op(scf.IfOp(b.v(arith.CmpiOp(hi, lo, "sgt")), [], Region(body)))
        inner = b.nested(body)
        for p in resident:
            self.first[p] = lo
            start = inner.add(inner.c(p.prefix_offset), inner.mul(lo, inner.c(p.inner)))
            count = inner.mul(inner.sub(hi, lo), inner.c(p.inner))
            inner.op(dlp.MemcpyAsyncOp(p.local, inner.c(0), p.value, start, count))
        inner.op(scf.YieldOp())

    def tile_bases(self, b: Builder, tiled: list[BufferPlan], t0: SSAValue, n: SSAValue) -> None:
        """Per tiled buffer: the flat GDRAM offset of this tile's box and its element count.
        Rows are `a*t0 + rlo .. a*(t0+n-1) + rhi`, clamped to the dimension when a halo
        (e.g. convolution padding) can reach outside it."""
        for p in tiled:
            top = p.shape[p.dim] - 1
            first = b.add(b.mul(b.c(p.a), t0), b.c(p.rlo))
            in_range = p.rlo >= 0 and p.a * (self.plan.trip - 1) + p.rhi <= top
            if in_range:
                rows = b.add(b.mul(b.c(p.a), n), b.c(p.rhi - p.rlo + 1 - p.a))
            else:
                last = b.add(b.mul(b.c(p.a), b.add(t0, b.sub(n, b.c(1)))), b.c(p.rhi))
                first = b.min(b.max(first, b.c(0)), b.c(top))
                last = b.min(b.max(last, b.c(0)), b.c(top))
                rows = b.add(b.sub(last, first), b.c(1))
            p.base = b.add(b.c(p.prefix_offset), b.mul(first, b.c(p.inner)))
            _hint(p.base, f"{p.name}_base")
            p.count = b.mul(rows, b.c(p.inner))
            if p.resident:  # this tile's rows within the task's share
                p.slot = b.mul(b.sub(t0, self.first[p]), b.c(p.inner))

    def copies(self, b: Builder, tiled: list[BufferPlan], way: str, n: SSAValue, op_cls) -> None:
        for p in tiled:
            if p.resident:
                continue  # loaded once a task (load_resident)
            base = b.add(p.base, self.image[p]) if p in self.image else p.base
            if way == "in" and (p.read or not p.full_write):
                b.op(op_cls(p.local, p.slot, p.value, base, p.count))
            if way == "out" and p.written:
                b.op(op_cls(p.value, base, p.local, p.slot, p.count))

    def compute(self, b: Builder, t0: SSAValue, n: SSAValue) -> None:
        plan = self.plan
        if plan.selection is not None:
            plan.selection.emit(self, b, t0, n)
            return
        loop, inner, ii = b.for_(b.c(0), n, b.c(1))
        _hint(ii, "ii")
        j = inner.add(t0, ii)
        work = plan.work
        assert work is not None  # tiles exist only over a work loop
        v = (
            inner.add(inner.c(work.lower), inner.mul(j, inner.c(work.stride)))
            if (work.lower or work.stride != 1)
            else j
        )
        vmap: dict[SSAValue, SSAValue] = {work.induction_var: v}
        Cloner(plan, vmap).block(work.block, inner)
        finish_for(inner)

    def double_buffered(self, tiled: list[BufferPlan], lo: SSAValue, hi: SSAValue) -> None:
        """Ping-pong: wait, prefetch tile k+1 into the other slot, compute tile k, store it
        asynchronously."""
        b, plan = self.b, self.plan
        T = plan.tile
        span = b.sub(hi, lo)
        ntiles = b.v(arith.CeilDivSIOp(b.max(span, b.c(0)), b.c(T)))
        _hint(ntiles, "ntiles")
        sizes = {p: shape_of(p.local)[0] // 2 for p in tiled if not p.resident}

        def issue(bb: Builder, k: SSAValue) -> None:
            t0 = bb.add(lo, bb.mul(k, bb.c(T)))
            n = bb.min(bb.c(T), bb.sub(hi, t0))
            slot = bb._fold(k, bb.c(2), lambda p, q: p % q, arith.RemSIOp)
            self.tile_bases(bb, tiled, t0, n)
            for p in tiled:
                if not p.resident:
                    p.slot = bb.mul(slot, bb.c(sizes[p]))
            self.copies(bb, tiled, "in", n, dlp.MemcpyAsyncOp)

        # prologue: tile 0
        pro = Block()
        b.op(scf.IfOp(b.v(arith.CmpiOp(ntiles, b.c(0), "sgt")), [], Region(pro)))
        pb = b.nested(pro)
        issue(pb, pb.c(0))
        pb.op(scf.YieldOp())
        loop, inner, k = b.for_(b.c(0), ntiles, b.c(1))
        _hint(k, "k")
        inner.op(dlp.WaitDmaOp())
        nxt = inner.add(k, inner.c(1))
        pre = Block()
        inner.op(scf.IfOp(inner.v(arith.CmpiOp(nxt, ntiles, "slt")), [], Region(pre)))
        prb = inner.nested(pre)
        issue(prb, nxt)
        prb.op(scf.YieldOp())
        t0 = inner.add(lo, inner.mul(k, inner.c(T)))
        _hint(t0, "t0")
        n = inner.min(inner.c(T), inner.sub(hi, t0))
        _hint(n, "n")
        slot = inner._fold(k, inner.c(2), lambda p, q: p % q, arith.RemSIOp)
        self.tile_bases(inner, tiled, t0, n)
        for p in tiled:
            if not p.resident:
                p.slot = inner.mul(slot, inner.c(sizes[p]))
        self.compute(inner, t0, n)
        self.copies(inner, tiled, "out", n, dlp.MemcpyAsyncOp)
        finish_for(inner)
        b.op(dlp.WaitDmaOp())


# ---------------------------------------------------------------------------- pass


def _prepare(
    kernel: KernelOp, desc: DlpTarget, double_buffer: bool, multicore: bool, intrinsics: bool
) -> tuple[dlp.KernelOp | None, KernelPlan | None]:
    """The kernel as direct GDRAM2GDRAM copies (built), or its plan. The choice is made
    on the copies one DMA a piece; a direct kernel chosen then issues each task's
    equally spaced pieces as one strided DMA."""
    from dlpc.passes.lower._dlp_copy import lower_copy

    direct = lower_copy(kernel, desc, multicore, strided=False)
    if direct is None:
        return None, plan_kernel(kernel, desc, double_buffer, multicore, intrinsics)
    built = lower_copy(kernel, desc, multicore)
    copies = sum(isinstance(op, COPIES) for op in direct.walk())
    if copies <= 2 * direct.num_tasks or not intrinsics:
        return built, None
    # many short pieces a task (a head split): staged whole items and dlp.transpose
    # pay two DMA latencies a tile instead of one a piece
    plan = plan_kernel(kernel, desc, double_buffer, multicore, intrinsics)
    if not isinstance(plan.selection, PermuteSelection):
        one = _one_item_plan(kernel, desc)
        if one is None or _copy_cycles(direct, desc) <= _one_item_cycles(one):
            return built, None
        plan = one
    return None, plan


def _one_item_plan(kernel: KernelOp, desc: DlpTarget) -> KernelPlan | None:
    """A permutation whose outer loop has one iteration (a head split at batch 1: no
    whole items to split over tasks) as that one item on one task: loaded, transposed,
    stored (two DMAs); None where it is no `PermuteSelection` or does not fit."""
    nest = spine(kernel)
    if not nest or nest[0].trip_count != 1:
        return None
    try:
        buffers = plan_buffers(kernel, nest[0], {})
    except PlanError:
        return None
    plan = KernelPlan(kernel, desc, nest[0], {}, buffers)
    plan.selection = select_compute(plan)
    if not isinstance(plan.selection, PermuteSelection) or not _choose_tile(plan, False):
        return None
    return plan


def _copy_cycles(direct: dlp.KernelOp, desc: DlpTarget) -> float:
    """The simulator's time of a direct copy kernel, roughly: its busiest task's DMAs
    (issued back to back: their latencies overlap up to the queue depth; bytes read and
    written) or the GDRAM port."""
    per_task = [0] * direct.num_tasks
    elements = 0
    for op in direct.walk():
        if isinstance(op, COPIES):
            owner = op.parent_op()
            task = 0
            if isinstance(owner, scf.IfOp):  # `if (task == t)`: _dlp_copy's pieces of task t
                cond = owner.cond.owner
                if isinstance(cond, arith.CmpiOp):
                    task = _const(cond.rhs) or 0
            per_task[min(task, len(per_task) - 1)] += 1
            segments = _const(op.segments) if isinstance(op, dlp.MemcpyStridedAsyncOp) else 1
            elements += (_const(op.operands[4]) or 0) * (segments or 1)
    per_cycle = desc.gdram_bandwidth_gbs / desc.clock_ghz
    moved = 2 * elements * 4 / per_cycle
    return max(latencies(desc, [max(per_task)]) + moved / direct.num_tasks, moved)


def _one_item_cycles(plan: KernelPlan) -> float:
    """The same for a one-item plan: two DMAs, the item's bytes both ways, its
    transposes at the vector width (twice where the item has a C block)."""
    sel = plan.selection
    assert isinstance(sel, PermuteSelection)
    d = plan.desc
    moved = 2 * sel.item * 4 / (d.gdram_bandwidth_gbs / d.clock_ghz)
    return 2 * d.dma_latency_cycles + moved + sel.item * (1 + (sel.c > 1)) / d.vector_width


def lower_module(
    module: ModuleOp,
    desc: DlpTarget,
    target_desc: str = "",
    double_buffer: bool = True,
    multicore: bool = True,
    intrinsics: bool = True,
    fuse: bool = True,
) -> None:
    """Lower every loop.kernel of `module` in place; record the description on @main.
    With `fuse`, chains of kernels passing tiles along become one kernel (_dlp_fuse.py),
    and so do runs of independent direct copies (_dlp_copy.sibling_runs)."""
    from xdsl.transforms.common_subexpression_elimination import cse

    from dlpc.passes.lower import _dlp_columns, _dlp_commute, _dlp_copy, _dlp_fuse

    kernels = [k for k in module.walk() if isinstance(k, KernelOp)]
    if intrinsics and fuse:  # a conv's bias and ReLU on its max pool's (fewer) outputs
        _dlp_commute.commute(kernels)
    prepared = {k: _prepare(k, desc, double_buffer, multicore, intrinsics) for k in kernels}
    columns = {}  # linears over a few rows split by output columns where that is cheaper
    for k, (direct, plan) in prepared.items() if multicore and intrinsics else []:
        c = _dlp_columns.match(k) if plan is not None and direct is None else None
        got = _dlp_columns.choose(c, desc) if c is not None else None
        if c is not None and got is not None and got < _estimate(plan, _flops(k.block)):  # type: ignore[arg-type]
            columns[k] = c
    plans = {
        k: plan for k, (direct, plan) in prepared.items() if plan is not None and k not in columns
    }
    done: set[KernelOp] = set()
    chains = [
        fused
        for run in (_dlp_fuse.chains(kernels, plans) if intrinsics and fuse else [])
        for fused in _dlp_fuse.segments(
            run, plans, desc, multicore, lambda k: _flops(k.block), _estimate
        )
    ]
    fused_kernels = {k for fused in chains for k in fused.kernels}
    swaps = {  # (copies a chain may store itself: the head merge)
        v: s for v, s in _dlp_fuse.swaps(kernels).items() if s.kernel not in fused_kernels
    }
    folded: list[KernelOp] = []  # attention chains a later row chain computes itself
    for fused in list(chains) if multicore else []:
        attn = _dlp_attn.match(fused.kernels, swaps)
        if attn is None:
            continue
        later = chains[chains.index(fused) + 1 :]
        row = next((f for f in later if _dlp_attn.reader(attn, f.plans) is not None), None)
        if row is None or row.attention is not None:
            continue
        if not _dlp_attn.fits(attn, row, desc):
            continue
        own = _dlp_fuse.estimate(  # (the attention chain alone, against what it adds)
            fused.kernels, plans, desc, multicore, lambda k: _flops(k.block)
        )
        if own is None or own <= _dlp_attn.added_cycles(attn, row, desc):
            continue
        row.attention = attn
        chains.remove(fused)
        folded += attn.kernels
    for fused in chains:
        new = _dlp_fuse.build_chain(fused, KernelLowering, swaps)
        _dlp_fuse.place(fused, new)
        if fused.attention is not None:  # q, k, v, scale live until the chain is done
            _dlp_attn.keep_alive(fused.attention, new)
        cse(new)
        done.update(fused.kernels)
        for swap in {id(s): s for s in fused.swapped}.values():
            swap.kernel.detach()
            swap.kernel.erase()
            done.add(swap.kernel)
            alloc = swap.dst.owner  # (allocated after the chain's last member: before it now)
            block = new.parent_block()
            if isinstance(alloc, memref.AllocOp) and block is not None and alloc.parent is block:
                alloc.detach()
                block.insert_op_before(alloc, new)
    for kernel in folded:  # (computed by the chain that reads their result)
        kernel.detach()
        kernel.erase()
        done.add(kernel)
    for kernel in kernels:
        if kernel in done:
            continue
        direct, plan = prepared[kernel]
        if kernel in columns:
            new = _dlp_columns.build(columns[kernel], desc)
        else:
            new = direct if direct is not None else KernelLowering(plan).build()  # type: ignore[arg-type]
        block = kernel.parent_block()
        assert block is not None  # found by walking the module
        block.insert_op_before(new, kernel)
        kernel.detach()
        kernel.erase()
        cse(new)  # the per-buffer tile arithmetic repeats itself
    direct_ops = {id(d) for d, _ in prepared.values() if d is not None}
    copies = [k for k in module.walk() if isinstance(k, dlp.KernelOp) and id(k) in direct_ops]
    for run in _dlp_copy.sibling_runs(copies) if fuse else []:
        cse(_dlp_copy.merge_siblings(run))
    for fn in module.walk():
        if isinstance(fn, func.FuncOp):
            fn.attributes["dlpc.target"] = StringAttr(desc.name)
            if target_desc:
                fn.attributes["dlpc.target_desc"] = StringAttr(target_desc)


@dataclass(frozen=True)
class LoopToDlp(ModulePass):
    """`loop-to-dlp{target-desc=tiny double-buffer=false multicore=false intrinsics=false
    fuse=false}`"""

    name = "loop-to-dlp"

    target_desc: str = ""
    double_buffer: bool = True
    multicore: bool = True
    intrinsics: bool = True
    fuse: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_module(
            op,
            resolve(self.target_desc or None),
            self.target_desc,
            self.double_buffer,
            self.multicore,
            self.intrinsics,
            self.fuse,
        )
