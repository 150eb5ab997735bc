"""GPU-shaped launch plans (`plan_gpu_launch` -> `Launch`): the plan a kernel gets under
the `gpu` profile (`GpuProfile`; the runtime's default on a GPU device, selectable on
any OpenCL device so that CI checks its numerics on the CPU platforms).

What holds for a GPU plan:
- every leading independent loop of the kernel's perfect nest (`spine`; `independent`:
  the iterations write disjoint elements and read none another writes) is a work-item
  dimension, one iteration per work-item: many light work-items, not the CPU plan's few
  fat ones (`plan_launch`);
- the innermost of them is NDRange dimension 0, so that consecutive work-items of a
  work-group write consecutive outputs and read consecutive inputs (coalesced); the one
  above it dimension 1; any further outer ones (a batch and channels above rows and
  columns) are collapsed into dimension 2 (`get_global_id(2)` split by `/` and `%`);
- a resident buffer (weights) that dimension 0's work-items read along an index other
  than its last is passed transposed (`plan_relayout`), so those reads are coalesced too
  (a linear's `W[feature, k]` read by work-items over the features: `W^T[k, feature]`);
- work-groups of 64-256 work-items (dimension 0 first, then 1), fewer work-items per
  group while there are fewer groups than the device's compute units; the NDRange is
  rounded up to whole groups, and the work-items past a loop's end do nothing
  (`Launch.bounds`);
- reductions inside a work-group (`split_reduction`): where the work-items are fewer than
  the units x `GROUP_ITEMS` and each output sums `SPLIT_ITEMS` or more terms in one loop,
  a work-group of `SPLIT_ITEMS` per output strides that loop from its local ids and
  combines its partials in `__local` memory (the sum's order changes: within the
  reference's tolerance, as the CPU plan's partial sums). A nest of reduction loops (a
  global pool's rows and columns: resnet's at batch 32 took 51 us of its 191 on an
  H200, 256 work-items summing 256 terms each, 8 KB apart) is one flat index, the last
  loop's fastest (coalesced), where the outputs are fewer than the units x
  `MIN_GROUP_ITEMS`: a conv's 144-term sums over resnet's 16384 outputs at batch 1 keep
  a work-item each (latency-bound at 12 us either way, not measured split);
- register blocking (`row_lanes`): in a kernel with a reduction and no padding guards, a
  work-item computes 4 (or 2) consecutive iterations of dimension 1's loop as lanes
  (`Launch.lanes`, unrolled and jammed as on a CPU): a linear's weight element is loaded
  once for 4 batch rows. Dimension 1 is then never rounded up (its group size divides its
  work-items). No vectors or partial sums: every output is computed by the same
  operations in the same order as the loop IR (the reference's order within a sum).

The sizes above are choices, not device facts: `GpuParams` (per kernel, the constants
below by default) holds them, `dlpc-tune --target opencl` searches them on a device and a
tuning log gives them per kernel (`tune/gpu.py`); `GpuProfile` holds the device's facts.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr
from xdsl.ir import SSAValue

from dlpc.backends.opencl.lanes import PARTIAL_IDENTITY, _laneable, accumulators, independent
from dlpc.backends.opencl.launch import Launch, TileParams, plan_relayout
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, kernels, spine
from dlpc.dialects.typed import element_type
from dlpc.passes.schedule.tuning_log import TuningLog, kernel_signature

#: work-items per work-group the plan aims at, and the fewest it goes down to while the
#: groups are fewer than the compute units (a GPU schedules warps / wavefronts of 32-64)
GROUP_ITEMS = 256
MIN_GROUP_ITEMS = 64
#: register blocking: the iterations of dimension 1's loop a work-item computes (a
#: linear's batch rows, a conv's output rows), tried widest first; its lanes share the
#: loads that do not vary with them (the weight's), each lane its own accumulator
ROW_LANES = (4, 2)
#: a kernel with fewer work-items than the compute units x `GROUP_ITEMS` whose outputs
#: each sum at least `SPLIT_ITEMS` terms in one loop (a linear at batch 1, a global
#: average pool) splits each sum over a work-group of `SPLIT_ITEMS` (`split_reduction`)
SPLIT_ITEMS = 64
#: the widest row lanes a tuned plan may ask for (each lane is a copy of the body)
MAX_ROW_LANES = 16
#: the local memory of a work-group OpenCL guarantees (CL_DEVICE_LOCAL_MEM_SIZE of a
#: full-profile device): a `GpuProfile`'s when it names none
TILE_LOCAL_BYTES = 32 * 1024


def tile_local_bytes(t: TileParams) -> int:
    """The `__local` bytes a tiled product's kernel declares with tile `t`, at most: the
    TK x TM tile of A and the TK x TN tile of B, f32, each row one padding word longer
    where its operand is loaded along k (`gpu_tile.write_tiled`; the bound takes both)."""
    return (t.tm + t.tn + 2) * t.tk * 4


@dataclass(frozen=True)
class GpuParams:
    """The choices of one kernel's GPU plan, which `dlpc-tune --target opencl` searches
    (`tune/gpu.py`) and a tuning log gives per kernel; the defaults are the module's
    constants. `group_items`: the work-items a group aims at (capped by the device's
    largest group), `min_group_items`: the fewest it is halved to while the groups are
    fewer than the units; `row_lanes`: the widest register blocking of dimension 1's loop
    (tried halving down to 2 until one divides the loop; 1: none); `split_items`: a split
    reduction's work-group (0: no split); `tile`: a matrix product's `__local` tile
    (`gpu_tile`): "" the rule's choice, "off" none, or `TileParams`' text
    `TMxTNxTK/RMxRN` (tiled with it, whatever the rule says). The device facts stay in
    `GpuProfile`."""

    group_items: int = GROUP_ITEMS
    min_group_items: int = MIN_GROUP_ITEMS
    row_lanes: int = ROW_LANES[0]
    split_items: int = SPLIT_ITEMS
    tile: str = ""

    def tile_params(self) -> TileParams | None:
        """The tile `tile` names (None: the rule's, or "off")."""
        return TileParams.parse(self.tile)

    def lanes(self) -> tuple[int, ...]:
        """The lane counts tried, widest first: `row_lanes` halved down to 2."""
        out, u = [], self.row_lanes
        while u >= 2:
            out.append(u)
            u //= 2
        return tuple(out)

    def check(self, profile: GpuProfile, where: str = "") -> None:
        """A one-line DlpcError unless these params make plans on a device of `profile`:
        work-group sizes are powers of two (a split's partials meet pairwise) up to the
        device's largest group, `min_group_items` at most `group_items`, the lanes 1 to
        `MAX_ROW_LANES`."""
        at = f" ({where})" if where else ""

        def bad(what: str) -> DlpcError:
            return DlpcError(f"error: opencl: GPU plan params{at}: {what}")

        for name in ("group_items", "min_group_items", "split_items"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise bad(f"{name} must be an integer, got {value!r}")
            if name == "split_items" and value == 0:
                continue
            if value < 1 or value & (value - 1):
                raise bad(f"{name} must be a power of two, got {value}")
            if value > profile.max_group:
                raise bad(
                    f"{name} {value} is over the device's largest work-group ({profile.max_group})"
                )
        if self.min_group_items > self.group_items:
            raise bad(
                f"min_group_items {self.min_group_items} is over group_items {self.group_items}"
            )
        lanes = self.row_lanes
        if not isinstance(lanes, int) or isinstance(lanes, bool) or not 1 <= lanes <= MAX_ROW_LANES:
            raise bad(f"row_lanes must be an integer from 1 to {MAX_ROW_LANES}, got {lanes!r}")
        if not isinstance(self.tile, str) or self.tile in ("", "off"):
            if not isinstance(self.tile, str):
                raise bad(f"tile must be text, got {self.tile!r}")
            return
        t = self.tile_params()
        if t is None:
            raise bad(f"tile must be '', 'off' or TMxTNxTK/RMxRN, got {self.tile!r}")
        gx, gy = t.group if t.rm and t.rn else (0, 0)
        if min(t.tm, t.tn, t.tk, t.rm, t.rn) < 1 or t.tm % t.rm or t.tn % t.rn:
            raise bad(f"tile {t}: positive sizes, RM dividing TM and RN dividing TN")
        if gx * gy > profile.max_group:
            raise bad(
                f"tile {t}: {gx * gy} work-items, over the device's largest work-group "
                f"({profile.max_group})"
            )
        if tile_local_bytes(t) > profile.local_mem_size:
            raise bad(
                f"tile {t}: its __local tiles ({tile_local_bytes(t)} bytes) are over the "
                f"device's local memory ({profile.local_mem_size} bytes)"
            )

    def to_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> GpuParams:
        """The params of a tuning record's `params` (a one-line DlpcError for other keys
        or a value that is not an integer; `check` judges the values)."""
        at = f" ({where})" if where else ""
        if not isinstance(data, dict):
            raise DlpcError(f"error: opencl: GPU plan params{at}: not an object: {data!r}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise DlpcError(
                f"error: opencl: GPU plan params{at}: unknown key {unknown[0]!r} (expected "
                f"{', '.join(cls.__dataclass_fields__)})"
            )
        for key, value in data.items():
            if key == "tile":
                if not isinstance(value, str):
                    raise DlpcError(
                        f"error: opencl: GPU plan params{at}: tile must be text, got {value!r}"
                    )
            elif not isinstance(value, int) or isinstance(value, bool):
                raise DlpcError(
                    f"error: opencl: GPU plan params{at}: {key} must be an integer, got {value!r}"
                )
        return cls(**data)

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.__dict__.items() if k != "tile" or v)


@dataclass(frozen=True)
class GpuProfile:
    """The device facts a GPU plan is sized by: the largest work-group
    (`max_work_group_size`), the compute units to fill (`max_compute_units`) and the
    `__local` bytes a work-group may declare (`local_mem_size`: a tile needing more is
    never chosen nor tried; an H200 reports 48 KB). A device's profile is `of_device`'s;
    a test names its own figures, the local memory defaulting to OpenCL's guaranteed
    32 KB (a profile that does not name it fits every device)."""

    max_group: int
    units: int
    local_mem_size: int = TILE_LOCAL_BYTES

    @classmethod
    def of_device(cls, device) -> GpuProfile:
        """The profile of an OpenCL device (a `pyopencl.Device`)."""
        return cls(
            int(device.max_work_group_size),
            int(device.max_compute_units),
            int(device.local_mem_size),
        )


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def work_items(kernel: KernelOp) -> list[ForOp]:
    """The loops of `kernel` a GPU plan maps to work-items, outermost first: the leading
    loops of its perfect nest that are independent (extent-1 loops in between stay
    ordinary loops), up to the first that is not."""
    loops: list[ForOp] = []
    for loop in spine(kernel):
        if loop.trip_count == 1 and loop.parallel is None:
            continue
        if not independent(loop):
            break
        loops.append(loop)
    return loops


DEFAULT_PARAMS = GpuParams()
#: tuning records of GPU-plan params (`tune/gpu.py`): their target, and what they were
#: tuned against (`Record.default`: a record made against other defaults is stale, as a
#: C record tuned against another default schedule)
TUNING_TARGET = "opencl-gpu"
DEFAULT_DIGEST = hashlib.sha256(str(DEFAULT_PARAMS).encode()).hexdigest()[:16]


def group_shape(
    extents: tuple[int, ...], profile: GpuProfile, params: GpuParams = DEFAULT_PARAMS
) -> tuple[int, ...]:
    """The work-group size for NDRange `extents` (dimension 0 first): up to
    `params.group_items` (`GROUP_ITEMS`) work-items, dimension 0 first, then 1; halved
    (down to `params.min_group_items`) while the groups are fewer than the compute units."""
    cap = max(1, min(params.group_items, profile.max_group))
    local = [1] * len(extents)
    local[0] = min(_pow2_at_least(extents[0]), cap)
    if len(extents) > 1:
        local[1] = min(_pow2_at_least(extents[1]), max(1, cap // local[0]))

    def groups() -> int:
        return math.prod(-(-e // w) for e, w in zip(extents, local))

    while math.prod(local) > params.min_group_items and groups() < profile.units:
        d = max(range(len(local)), key=lambda k: local[k])
        local[d] //= 2
    return tuple(local)


def plan_gpu_launch(
    kernel: KernelOp,
    fname: str,
    profile: GpuProfile,
    resident: set[SSAValue] | None = None,
    params: GpuParams | None = None,
) -> Launch:
    """How `kernel` is launched under the GPU profile (see the module docstring), with
    `params` (a tuning log's for this kernel: checked against the device, `GpuParams.check`)
    or the defaults (capped by the device)."""
    if params is not None and params != DEFAULT_PARAMS:
        params.check(profile, f"kernel '{kernel.sym}'")
    params = params or DEFAULT_PARAMS
    loops = work_items(kernel)
    if not loops:
        return Launch(fname, (1,), (1,))
    split = split_reduction(loops, profile, params)
    if split is not None:
        return _split_launch(fname, loops, split, profile, params)
    inner = loops[::-1][:2]  # dimension 0: the innermost loop, 1: the one above it
    outer = loops[: len(loops) - len(inner)]
    launch = Launch(fname, (), None)
    extents = [lp.trip_count for lp in inner]
    for d, lp in enumerate(inner):
        launch.mapped[lp] = f"get_global_id({d})"
    if outer:  # collapsed into dimension 2 (dimensions 0 and 1 are both taken: outer
        # loops exist only past two), the outermost varying slowest
        stride = 1
        for lp in reversed(outer):
            gid = "get_global_id(2)"
            expr = f"({gid} / {stride})" if stride > 1 else gid
            launch.mapped[lp] = f"({expr} % {lp.trip_count})" if lp is not outer[0] else expr
            stride *= lp.trip_count
        extents.append(stride)
    local = group_shape(tuple(extents), profile, params)
    launch.global_size = tuple(-(-e // w) * w for e, w in zip(extents, local))
    launch.local_size = local
    launch.bounds = {
        lp: lp.trip_count for d, lp in enumerate(inner) if launch.global_size[d] != lp.trip_count
    }
    launch.relayout = plan_relayout(kernel, inner[0], resident or set())
    if len(inner) == 2:
        lanes = row_lanes(kernel, inner[1], inner[0], params)
        if lanes > 1:
            launch.lanes = {inner[1]: lanes}
            rows = inner[1].trip_count // lanes
            local = (local[0], min(local[1], rows & -rows), *local[2:])  # (divides rows)
            launch.local_size = local
            launch.global_size = (launch.global_size[0], rows, *launch.global_size[2:])
            launch.bounds.pop(inner[1], None)  # (not rounded up)
    return launch


def row_lanes(
    kernel: KernelOp, rows: ForOp, inner: ForOp, params: GpuParams = DEFAULT_PARAMS
) -> int:
    """The lanes of dimension 1's loop `rows` (module docstring), 1 for none: when a
    reduction sits below dimension 0's loop `inner`, the kernel has no `scf.if` (padding
    guards: the CPU plan's interior/border split is not written for these plans), the
    body can be unrolled (`_laneable`) and the lanes divide the loop."""
    if any(isinstance(op, scf.IfOp) for op in kernel.walk()) or not _laneable(rows):
        return 1
    if not any(isinstance(op, ForOp) and op.reduction is not None for op in inner.walk()):
        return 1
    return next((u for u in params.lanes() if rows.trip_count % u == 0), 1)


def _only_loop(block) -> ForOp | None:
    """The loop that is the whole of `block`, else None."""
    ops = list(block.ops)
    return ops[0] if len(ops) == 1 and isinstance(ops[0], ForOp) else None


def reduction_nest(loop: ForOp) -> list[ForOp]:
    """`loop` and the reduction loops each the whole body of the one before it,
    outermost first (a global pool's rows and columns): the iterations a split reduction
    flattens into one index, the last loop's body the update."""
    nest = [loop]
    while (below := _only_loop(nest[-1].block)) is not None and below.reduction is not None:
        nest.append(below)
    return nest


def split_reduction(
    loops: list[ForOp], profile: GpuProfile, params: GpuParams = DEFAULT_PARAMS
) -> tuple[ForOp, SSAValue, str] | None:
    """(reduction loop, accumulator, combining op) when `params.split_items` is not 0,
    the work-items `loops` make are too few to fill the device (fewer than its units x
    `params.group_items`) and the body of the innermost one (below any extent-1 loops:
    a global pool's 1 x 1 output window) holds one loop, a reduction nest
    (`reduction_nest`: one loop, or a pool's rows and columns, a conv's channels and
    window, only while the outputs are fewer than the units x `params.min_group_items`)
    of at least
    `params.split_items` (`SPLIT_ITEMS`) iterations in all updating one float accumulator
    (`accumulators`) that starts at the combining op's identity (each work-item's
    partial starts there too); else None."""
    inner = loops[-1]
    if not params.split_items:
        return None
    if math.prod(lp.trip_count for lp in loops) >= profile.units * params.group_items:
        return None
    host = inner
    while (below := _only_loop(host.block)) is not None and below.trip_count == 1:
        if below.reduction is not None:
            break
        host = below
    nested = [op for op in host.block.walk() if isinstance(op, ForOp)]
    red = next((op for op in host.block.ops if isinstance(op, ForOp)), None)
    if red is None:
        return None
    nest = reduction_nest(red)
    if len(nested) != len(nest):  # (no other loop beside or inside the nest)
        return None
    outputs = math.prod(lp.trip_count for lp in loops)
    if len(nest) > 1 and outputs >= profile.units * params.min_group_items:
        return None  # (a nest only where the outputs are fewest: module docstring)
    terms = math.prod(lp.trip_count for lp in nest)
    found = accumulators(nest[-1]) if terms >= params.split_items else None
    if not found or len(found) != 1:
        return None
    acc, combine = found[0]
    if element_type(acc) not in (Float32Type(), Float64Type()):
        return None
    ops = list(host.block.ops)
    init = [o for o in ops[: ops.index(red)] if isinstance(o, memref.StoreOp) and o.memref is acc]
    if len(init) != 1 or not isinstance(init[0].value.owner, arith.ConstantOp):
        return None
    value = init[0].value.owner.value
    if not isinstance(value, FloatAttr) or abs(value.value.data) != abs(PARTIAL_IDENTITY[combine]):
        return None  # (0.0 or -0.0 for a sum: the same total)
    return red, acc, combine


def _split_launch(
    fname: str,
    loops: list[ForOp],
    split: tuple[ForOp, SSAValue, str],
    profile: GpuProfile,
    params: GpuParams = DEFAULT_PARAMS,
) -> Launch:
    """The launch of a split reduction: a work-group of `params.split_items`
    (`SPLIT_ITEMS`) per iteration of the innermost loop (dimension 0's group id), the loop
    above it on dimension 1, any further ones collapsed into 2 (groups of one there)."""
    group = min(params.split_items, profile.max_group)
    launch = Launch(fname, (), None)
    inner, rest = loops[-1], loops[:-1]
    launch.mapped[inner] = "get_group_id(0)"
    extents = [inner.trip_count * group]
    if rest:
        launch.mapped[rest[-1]] = "get_global_id(1)"
        extents.append(rest[-1].trip_count)
    outer = rest[:-1]
    stride = 1
    for lp in reversed(outer):
        expr = f"(get_global_id(2) / {stride})" if stride > 1 else "get_global_id(2)"
        launch.mapped[lp] = f"({expr} % {lp.trip_count})" if lp is not outer[0] else expr
        stride *= lp.trip_count
    if outer:
        extents.append(stride)
    launch.global_size = tuple(extents)
    launch.local_size = (group, *([1] * (len(extents) - 1)))
    launch.split = split
    return launch


def logged_params(path: str, module, machine: str) -> dict[str, GpuParams]:
    """Kernel name -> the params of the fastest record (median) for its signature in the
    tuning log at `path`, measured on the device `machine` (`opencl_rt.device_key`)
    against today's defaults; kernels without one are not in it (the defaults). Kernels
    with records of other devices only get one warning line on stderr."""
    log = TuningLog(path)
    out: dict[str, GpuParams] = {}
    foreign: list[str] = []
    for k in kernels(module):
        sig = kernel_signature(k)
        rec = log.best(sig, TUNING_TARGET, DEFAULT_DIGEST, machine)
        if rec is not None:
            out[k.sym] = GpuParams.from_dict(rec.params, f"tuning log {path}, kernel '{k.sym}'")
        elif log.best(sig, TUNING_TARGET) is not None:
            foreign.append(k.sym)
    if foreign:
        names = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        print(
            f"dlpc: warning: tuning log {path}: {len(foreign)} kernel(s) ({names}) have GPU "
            f"plan records only for other devices or older defaults; they use the default "
            f"plans (re-tune with dlpc-tune --target opencl on this device, '{machine}')",
            file=sys.stderr,
        )
    return out
