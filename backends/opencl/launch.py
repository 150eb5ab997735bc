"""Launch planning: a kernel's NDRange, its `__local` cache stages, its lanes and the
resident buffers it reads transposed (`plan_launch` -> `Launch`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from dlpc.backends import c as cbe
from dlpc.backends.opencl.guards import padding_guards
from dlpc.backends.opencl.indices import depends_on, varies_with
from dlpc.backends.opencl.lanes import (
    LANES_8,
    SHORT_PADDED,
    LaneProfile,
    independent,
    partial_vector,
    plan_lanes,
    plan_vector,
)
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside, spine
from dlpc.dialects.typed import shape_of


@dataclass(frozen=True)
class TileParams:
    """A tiled product's sizes (`gpu_tile`, the GPU plans; what a tuner may search): the
    tile of a work-group (TM rows x TN columns of outputs), the reduction's step TK, and
    each work-item's register block (RM x RN); RM divides TM and RN divides TN."""

    tm: int = 64
    tn: int = 64
    tk: int = 16
    rm: int = 4
    rn: int = 4

    @property
    def group(self) -> tuple[int, int]:
        """The work-group: (columns, rows) of work-items, dimension 0 first."""
        return (self.tn // self.rn, self.tm // self.rm)

    def __str__(self) -> str:
        return f"{self.tm}x{self.tn}x{self.tk}/{self.rm}x{self.rn}"

    @classmethod
    def parse(cls, text: str) -> TileParams | None:
        """`TMxTNxTK/RMxRN` (`str`'s form: a tuning record's), None for any other text."""
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)/(\d+)x(\d+)", text)
        return cls(*(int(g) for g in m.groups())) if m else None


@dataclass(frozen=True)
class Tile:
    """A matrix product `gpu_tile.match_product` recognised, and its tile: the output
    loops of the rows (A's) and of the columns (B's), each outermost first; the reduction
    nest (its outer loop, then the loops inside it: a conv's kernel rows and columns, of
    extent 1 in a 1x1 conv), flattened into k; its 0-d accumulator; the loads of A (rows
    x k) and B (k x columns), the last of each factor's (a padded conv's: under its
    guard); the epilogue's ops; M, N, K; the loop IR's ops computing each factor from the
    loop variables (constants, index arithmetic, guards, loads: the last yields it); and
    whether it is an implicit GEMM (a conv's window, or a factor that is not one plain
    load), whose tiles are loaded through those ops; and the batch loops of a batched
    product (output loops both factors use, outermost first; none for a plain one)."""

    params: TileParams
    rows: tuple[ForOp, ...]
    cols: tuple[ForOp, ...]
    red: ForOp
    inner: tuple[ForOp, ...]
    acc: SSAValue
    a: memref.LoadOp
    b: memref.LoadOp
    epilogue: tuple[Operation, ...]
    m: int
    n: int
    k: int
    a_ops: tuple[Operation, ...] = ()
    b_ops: tuple[Operation, ...] = ()
    implicit: bool = False
    batch: tuple[ForOp, ...] = ()

    @property
    def batches(self) -> int:
        """The products the kernel computes (1 without batch loops)."""
        return math.prod(lp.trip_count for lp in self.batch)


@dataclass
class Launch:
    """How one kernel is enqueued: NDRange and the loops mapped onto it."""

    name: str  # the OpenCL kernel function name
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    mapped: dict[ForOp, str] = field(default_factory=dict)  # loop -> id expression
    shared: list[SSAValue] = field(default_factory=list)  # cache stages in __local memory
    cooperative: list[ForOp] = field(default_factory=list)  # copy nests split over the group
    barrier_before: set[Operation] = field(default_factory=set)
    args: list[SSAValue] = field(default_factory=list)  # buffers from @main, in order
    # register blocking: loop -> lanes, each work-item computes that many iterations of it
    lanes: dict[ForOp, int] = field(default_factory=dict)
    # a laned reduction loop -> its accumulators (0-d buffer, combining op name): each
    # lane sums into a partial of its own, combined after the loop
    partials: dict[ForOp, list[tuple[SSAValue, str]]] = field(default_factory=dict)
    # the laned loop whose lanes f32 arithmetic and accumulators are written on as one
    # OpenCL vector (`float8`), None for scalar lanes only (`plan_vector`)
    vector: ForOp | None = None
    # resident read-only buffers (parameters, globals) the kernel reads in another
    # layout: buffer -> the permutation of its dims (`plan_relayout`); the runtime passes
    # a copy of the buffer transposed by it (`numpy.transpose(a, perm)`, made once)
    relayout: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict)
    # mapped loops whose NDRange dimension is rounded up to whole work-groups (GPU
    # plans, `gpu_launch`): loop -> its trip count; a work-item past it does nothing
    bounds: dict[ForOp, int] = field(default_factory=dict)
    # a reduction loop split over the work-items of a group (GPU plans, `gpu_launch`):
    # (loop, its accumulator, the combining op's name); its partials meet in `__local`
    split: tuple[ForOp, SSAValue, str] | None = None
    # a matrix product tiled through `__local` memory with register blocking (GPU plans,
    # `gpu_tile`): the product and its tile; the kernel is written by `write_tiled`
    tile: Tile | None = None


def _local_stage_plan(g: ForOp):
    """(stages, copy nests, inner parallel loop) if G's body has the cache-stage shape."""
    stages, copies, inner = [], [], None
    for op in g.block.ops:
        if isinstance(op, memref.AllocaOp | memref.AllocOp) and op.memref.type.get_shape():
            stages.append(op.memref)
        elif isinstance(op, arith.ConstantOp | memref.DeallocOp):
            continue
        elif isinstance(op, ForOp) and op.parallel is not None and inner is None:
            inner = op
        elif isinstance(op, ForOp):
            copies.append(op)
        else:
            return None
    if not stages or inner is None:
        return None
    for c in copies:  # a copy nest moves data between a stage and a global buffer only
        touched = {o.memref for o in c.walk() if isinstance(o, memref.LoadOp | memref.StoreOp)}
        if not touched & set(stages):
            return None
    return stages, copies, inner


def plan_launch(
    kernel: KernelOp,
    fname: str,
    max_group: int = 256,
    resident: set[SSAValue] | None = None,
    profile: LaneProfile | None = None,
) -> Launch:
    """How `kernel` is launched: its NDRange, `__local` stages or lanes (`profile`: by
    the device's vector width, `lane_profile`; None: `LANES_8`)."""
    profile = profile or LANES_8
    nest = spine(kernel)
    dims: list[ForOp] = []
    for loop in nest:
        if loop.trip_count == 1 and loop.parallel is None:
            continue
        # the loop after a mapped outermost loop (a batch) when its iterations are
        # independent and an independent loop below it can be vector lanes: te-to-loop
        # marks one loop of a nest `parallel`, the batch at batch > 1, and the channels a
        # batch-1 conv plan blocks (`plan_lanes`) would run as one serial loop per
        # work-item. Not for a linear's features: its lanes over the batch share the
        # weights' loads
        rest = nest[nest.index(loop) + 1 :]
        after_batch = (
            dims == [nest[0]]
            and independent(loop)
            and any(lp.trip_count > 1 and independent(lp) for lp in rest)
        )
        if (loop.parallel is None and not after_batch) or len(dims) == 3:
            break
        dims.append(loop)
    if not dims:
        return Launch(fname, (1,), None)
    launch = Launch(fname, tuple(lp.trip_count for lp in dims), None)
    last = dims[-1]
    staged = _local_stage_plan(last) if len(dims) < 3 else None
    if staged is not None and staged[2].trip_count <= max_group:
        stages, copies, inner = staged
        d = len(dims) - 1
        for k, lp in enumerate(dims[:-1]):
            launch.mapped[lp] = f"get_global_id({k})"
        launch.mapped[last] = f"get_group_id({d})"
        launch.mapped[inner] = f"get_local_id({d})"
        ls = inner.trip_count
        launch.global_size = (*launch.global_size[:-1], last.trip_count * ls)
        launch.local_size = (*([1] * d), ls)
        launch.shared = stages
        launch.cooperative = copies
        ops = list(last.block.ops)
        launch.barrier_before = {op for op in ops if op is inner or op in copies}
        return launch
    for k, lp in enumerate(dims):
        launch.mapped[lp] = f"get_global_id({k})"
    if profile.short and _reduction_length(last) < SHORT_PADDED and padding_guards(last):
        profile = profile.short
    launch.lanes, launch.partials = plan_lanes(nest, dims, profile=profile)
    launch.vector = plan_vector(nest, dims, launch.lanes, {})
    if launch.vector is not None and launch.partials:  # vector lanes rather than partials
        for loop in launch.partials:
            del launch.lanes[loop]
        launch.partials = {}
    if launch.vector is None:
        launch.vector = partial_vector(launch.lanes, launch.partials)
    if last in launch.lanes:  # a work-item takes `lanes` consecutive iterations (ragged:
        # the last one's end at the loop's end, `clampable`)
        work_items = -(-last.trip_count // launch.lanes[last])
        launch.global_size = (*launch.global_size[:-1], work_items)
    launch.relayout = plan_relayout(kernel, launch.vector, resident or set())
    if launch.vector is not None and not _contiguous_lanes(kernel, launch):
        # every load the vector varies with strides by a row (a global average pool's
        # lanes over channels): partial sums over a long contiguous reduction instead
        # (`LONG_REDUCTION`; shorter sums are slower with partials:
        # docs/design/opencl-experiments.md)
        lanes, partials = plan_lanes(nest, dims, no_inner=True, profile=profile)
        if partials and _reduction_length(launch.vector) >= LONG_REDUCTION:
            launch.lanes, launch.partials, launch.vector, launch.relayout = (
                lanes,
                partials,
                None,
                {},
            )
            launch.global_size = tuple(lp.trip_count for lp in dims)
            if last in lanes:
                launch.global_size = (*launch.global_size[:-1], last.trip_count // lanes[last])
    return launch


LONG_REDUCTION = 128


def _reduction_length(loop: ForOp) -> int:
    """The iterations of the reduction loops inside `loop` (per iteration of it)."""
    inner = [lp for lp in loop.block.walk() if isinstance(lp, ForOp) and lp.reduction]
    return math.prod(lp.trip_count for lp in inner) if inner else 0


def _contiguous_lanes(kernel: KernelOp, launch: Launch) -> bool:
    """Does a load the vector loop varies with read its lanes consecutively (its last
    index, or a buffer passed transposed), or does none vary with it?"""
    assert launch.vector is not None
    iv = launch.vector.induction_var
    varying = [
        o
        for o in kernel.walk()
        if isinstance(o, memref.LoadOp)
        and shape_of(o.memref) != ()
        and any(varies_with(i, iv) for i in o.indices)
    ]
    return not varying or any(
        varies_with(o.indices[-1], iv) or o.memref in launch.relayout for o in varying
    )


def plan_relayout(
    kernel: KernelOp, vector: ForOp | None, resident: set[SSAValue]
) -> dict[SSAValue, tuple[int, ...]]:
    """Resident buffers to read transposed: a buffer in `resident` (a parameter or a
    global, never stored by the kernel) that the kernel loads with the vector loop's
    induction variable (plus an offset) as an index other than the last, and no other
    index varying with it, is read from a copy whose dims are permuted so that index is
    the last: the vector's lanes then load consecutive elements (one vector load) instead
    of one scalar each, `stride` apart (a linear's weight `W[feature, k]` with the lanes
    over the features: `W^T[k, feature]`). {buffer: permutation}."""
    if vector is None:
        return {}
    iv = vector.induction_var
    stored = {o.memref for o in kernel.walk() if isinstance(o, memref.StoreOp)}
    plan: dict[SSAValue, tuple[int, ...]] = {}
    for op in vector.walk():
        if not isinstance(op, memref.LoadOp) or op.memref not in resident:
            continue
        if op.memref in stored or defined_inside(op.memref, kernel):
            continue
        indices = list(op.indices)
        where = [k for k, index in enumerate(indices) if depends_on(index, iv)]
        if len(where) != 1 or where[0] == len(indices) - 1:
            continue
        if not varies_with(indices[where[0]], iv):
            continue
        n = len(indices)
        perm = (*(d for d in range(n) if d != where[0]), where[0])
        if plan.setdefault(op.memref, perm) != perm:  # two loads want two layouts
            plan[op.memref] = ()
    return {v: perm for v, perm in plan.items() if perm}


def resident_values(module: ModuleOp) -> set[SSAValue]:
    """@main's parameters and the `memref.get_global` results in it: the buffers whose
    contents are known before a call and do not change during one."""
    main = cbe.find_main(module)
    n_in, params, _ = cbe.calling_convention(main)
    values: set[SSAValue] = set(main.body.block.args[n_in : n_in + len(params)])
    values.update(o.memref for o in main.walk() if isinstance(o, memref.GetGlobalOp))
    return values
