"""Register blocking: how many iterations of which loops a work-item computes
(`plan_lanes`), by the width of the device's float vectors (`LaneProfile`,
`lane_profile`), and which laned loop is written on OpenCL vectors (`plan_vector`,
`partial_vector`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation, SSAValue

from dlpc.backends.opencl.indices import depends_on
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.dialects.typed import element_type, shape_of

#: the float vector widths the lane profiles are made for: 8 (AVX2; PoCL's LLVM 14, which
#: enables no AVX-512) and 16 (AVX-512; Intel's CPU runtime)
WIDTH_8 = 8
WIDTH_16 = 16
#: lane counts tried, widest first, on each width
HALVING_8 = (WIDTH_8, 4, 2)
HALVING_16 = (WIDTH_16, *HALVING_8)
#: register blocking (`plan_lanes`): lanes of the last NDRange loop (output channels,
#: features: they share their inputs' loads), of the innermost independent loop below it
#: (contiguous outputs: SLP-vectorisable), at most `MAX_LANES` in all, and at most
#: `MAX_LANE_OPS` ops emitted per work-item body. 64 lanes are 8 output channels x 8
#: columns, 8 float8 accumulators (`plan_vector`): enough independent sums to keep the
#: fma units busy (fewer left convs latency-bound; figures: docs/design/opencl-experiments.md)
MAPPED_LANES = (WIDTH_8, 6, 5, 4, 3, 2)  # (6, 5, 3: lenet's 6 channels and 10 rows)
INNER_LANES = HALVING_8
#: partial sums of an innermost reduction loop (the order of the additions changes, as
#: the C backend's `omp simd reduction` changes it): lanes, and each partial's start
PARTIAL_LANES = HALVING_8
#: float math written on the lanes of the innermost laned loop as one call on an OpenCL
#: vector (`erf((float8)(a, b, ...))`): PoCL's vector builtins (SLEEF) are several times
#: faster than as many scalar calls (tanh: `dlpc_tanhf` is scalar; cheap ops LLVM vectorises)
VECTOR_MATH = {
    "math.exp", "math.exp2", "math.expm1", "math.log", "math.log2", "math.log10",
    "math.log1p", "math.erf", "math.sin", "math.cos", "math.tan", "math.sinh", "math.cosh",
    "math.asinh", "math.acosh", "math.atanh", "math.asin", "math.acos", "math.atan",
    "math.cbrt",
}  # fmt: skip
PARTIAL_IDENTITY = {
    "arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -math.inf, "arith.minimumf": math.inf
}  # fmt: skip
MAX_LANES = WIDTH_8 * WIDTH_8
MAX_LANE_OPS = 8000


@dataclass(frozen=True)
class LaneProfile:
    """The register blocking `plan_lanes` aims at, by the width of the device's float
    vectors: `inner` and `partial` lane counts tried, at most `max_lanes` in all. The
    default (`LANES_8`) is the one the constants above describe: 8-float vectors, what
    PoCL's LLVM 14 uses (it enables no AVX-512, a `float16` is two registers) and what
    `dlpc --emit=opencl` writes without a device."""

    inner: tuple[int, ...] = INNER_LANES
    partial: tuple[int, ...] = PARTIAL_LANES
    max_lanes: int = MAX_LANES
    # inner lanes that do not divide their loop (`_ragged`): off for PoCL's plans
    ragged: bool = False
    # the profile of padded convs with a short sum (`SHORT_PADDED`), when not this one
    short: LaneProfile | None = None


LANES_8 = LaneProfile()
#: a kernel with padding guards summing fewer terms than this per output
#: (`SHORT_PADDED`) takes `LANES_16_SHORT` on a 16-wide device: 16 columns x 2
#: channels (its border tiles are written per lane: more lanes, much more code; figures:
#: docs/design/opencl-experiments.md)
SHORT_PADDED = 16
LANES_16_SHORT = LaneProfile(HALVING_16, HALVING_16, 2 * WIDTH_16, ragged=True)
#: a device whose native float vector is 16 wide (Intel's CPU runtime on AVX-512
#: reports `native_vector_width_float` 16): 16 inner lanes, 128 in all, ragged inner
#: lanes (why: docs/design/opencl-experiments.md). Padded convs with a short sum take
#: `LANES_16_SHORT`
LANES_16 = LaneProfile(
    HALVING_16, HALVING_16, WIDTH_8 * WIDTH_16, ragged=True, short=LANES_16_SHORT
)


def lane_profile(width: int) -> LaneProfile:
    """The lane profile for a device whose native float vector has `width` lanes."""
    return LANES_16 if width >= WIDTH_16 else LANES_8


MAX_LANE_BUFFER = 16  # elements of a private buffer allocated in a laned body


def _steps(trip_count: int, lanes: int) -> int:
    """The steps of a loop of `trip_count` iterations laned `lanes` wide: 0 when the lanes
    do not divide it."""
    return trip_count // lanes if trip_count % lanes == 0 else 0


def _good_steps(trip_count: int, lanes: int) -> bool:
    """Do `lanes` divide the loop into steps other than 3? (3 steps: PoCL's LLVM made slow
    code of them; docs/design/opencl-experiments.md)"""
    return _steps(trip_count, lanes) not in (0, 3)


def _laneable(loop: ForOp) -> bool:
    """Can `loop`'s body be emitted once per lane (unroll-and-jam)? Constants, loads,
    stores, small allocations, scalar arith/math, loops and `scf.if`s without loops."""
    for op in loop.block.walk():
        if isinstance(op, scf.IfOp) and any(isinstance(o, ForOp) for o in op.walk()):
            return False
        if isinstance(op, KernelOp) or (op.regions and not isinstance(op, ForOp | scf.IfOp)):
            return False
        if isinstance(op, memref.CopyOp | memref.GetGlobalOp):
            return False
        if isinstance(op, memref.AllocOp | memref.AllocaOp):  # one per lane: keep them small
            if math.prod(op.memref.type.get_shape()) > MAX_LANE_BUFFER:
                return False
    return True


def independent(loop: ForOp) -> bool:
    """Are `loop`'s iterations independent? Marked `parallel`, or: not a reduction, and
    every buffer from outside its body that it stores to is stored with the loop's own
    induction variable as one index, the same in every store, and never loaded in it
    (so iterations write disjoint elements and read none another writes)."""
    if loop.parallel is not None:
        return True
    if loop.reduction is not None:
        return False
    iv = loop.induction_var
    position: dict[SSAValue, int] = {}
    loaded = set()
    for op in loop.block.walk():
        if isinstance(op, memref.LoadOp) and not defined_inside(op.memref, loop):
            loaded.add(op.memref)
        if isinstance(op, memref.StoreOp) and not defined_inside(op.memref, loop):
            where = [k for k, index in enumerate(op.indices) if index is iv]
            if not where or position.setdefault(op.memref, where[0]) != where[0]:
                return False
    return not loaded & set(position)


def accumulators(loop: ForOp) -> list[tuple[SSAValue, str]] | None:
    """The accumulators of a reduction loop with no loop inside it, when every 0-d
    buffer from outside it that it touches is updated as `acc = acc <op> x` directly in
    its body (one load, the combine, one store; float add, mul, max or min) and it
    stores nothing else; else None. Such a loop may sum in partials (reassociated)."""
    if loop.reduction is None or any(isinstance(o, ForOp) for o in loop.block.walk()):
        return None
    accesses: dict[SSAValue, list[Operation]] = {}
    for op in loop.block.walk():
        if isinstance(op, memref.StoreOp | memref.LoadOp) and not defined_inside(op.memref, loop):
            if isinstance(op, memref.StoreOp) or shape_of(op.memref) == ():
                accesses.setdefault(op.memref, []).append(op)
    found: list[tuple[SSAValue, str]] = []
    for acc, ops in accesses.items():
        if shape_of(acc) != () or len(ops) != 2:
            return None
        load, store = ops
        if not isinstance(load, memref.LoadOp) or not isinstance(store, memref.StoreOp):
            return None
        if load.parent is not loop.block or store.parent is not loop.block:
            return None
        combine = store.value.owner
        uses = list(load.res.uses)
        if not isinstance(combine, Operation) or combine.name not in PARTIAL_IDENTITY:
            return None
        if len(uses) != 1:
            return None
        if uses[0].operation is not combine or len(list(store.value.uses)) != 1:
            return None
        found.append((acc, combine.name))
    return found or None


def _shares_loads(inner: ForOp, loop: ForOp) -> bool:
    """Does `inner`'s body load something that varies with `inner` but not with `loop`
    (so `loop`'s lanes would share that load)?"""
    for op in inner.walk():
        if isinstance(op, memref.LoadOp) and not defined_inside(op.memref, inner):
            indices = list(op.indices)
            ivs = (inner.induction_var, loop.induction_var)
            if any(depends_on(i, ivs[0]) for i in indices) and not any(
                depends_on(i, ivs[1]) for i in indices
            ):
                return True
    return False


#: inner lanes as wide as two 8-float registers (a `float16`), when the mapped lanes stay
#: few (at most `WIDE_MAPPED`) and the body has no vector math (lenet's second conv and
#: linears at batch 32); with more mapped lanes fewer channels fit (resnet's convs keep 8).
#: Figures: docs/design/opencl-experiments.md
WIDE_LANES = WIDTH_16
WIDE_MAPPED = 5


def _wide_inner(
    inner: ForOp | None,
    lanes: dict[ForOp, int],
    middle: ForOp | None,
    last: ForOp,
    profile: LaneProfile = LANES_8,
) -> bool:
    """Do `inner`'s 8 lanes widen to `WIDE_LANES` (see there)?"""
    if inner is None or lanes.get(inner) != WIDTH_8:
        return False
    if middle is not None and profile.max_lanes // (WIDTH_8 * lanes.get(last, 1)) > 1:
        return False  # (the middle loop takes lanes: the attention's rows)
    if not _good_steps(inner.trip_count, WIDE_LANES):
        return False
    if last in lanes and lanes[last] > WIDE_MAPPED:
        return False
    return not any(op.name in VECTOR_MATH for op in last.walk())


#: the pointwise (1x1) conv's tile (`_wide_tile`): 6 output channels x 16 columns, 12
#: float8 accumulators (8 left PoCL's fmas waiting on each other; 7 and 8 channels spill:
#: docs/design/opencl-experiments.md)
WIDE_TILE = (6, WIDE_LANES)


def clampable(loop: ForOp) -> bool:
    """May iterations of `loop` run twice (ragged mapped lanes: the last work-item's
    lanes end at the loop's end, `DLPC_MIN(6 * id, n - 6)`, redoing some iterations of
    the work-item before it)? When its body loads no buffer from outside it that it
    stores: an iteration then only overwrites elements with values computed from what
    no iteration writes, so running one twice stores the same bits twice."""
    stored, loaded = set(), set()
    for op in loop.block.walk():
        if isinstance(op, memref.StoreOp) and not defined_inside(op.memref, loop):
            stored.add(op.memref)
        if isinstance(op, memref.LoadOp) and not defined_inside(op.memref, loop):
            loaded.add(op.memref)
    return not stored & loaded


def _wide_tile(
    nest: list[ForOp],
    last: ForOp,
    inner: ForOp | None,
    middle: ForOp | None,
    lanes: dict[ForOp, int],
    partials: dict,
) -> bool:
    """Does an 8 x 8 (or 6 x 8) conv tile become `WIDE_TILE` (mapped output channels x inner
    columns)? For a conv without padding tests (a pointwise conv: the window's guards
    would be tested per tap over 16 columns) whose nest has an independent loop between
    the channels and the columns (its rows: not a linear), 16 columns dividing the row,
    and channels the 6 lanes cover with at most 1/16 left over (the last work-item
    redoes some channels of the one before, `clampable`: 64 channels as 11 x 6, the last
    58 ... 63)."""
    if inner is None or middle is not None or partials:
        return False
    if lanes.get(last) not in (WIDTH_8, WIDE_TILE[0]) or lanes.get(inner) != WIDTH_8:
        return False
    if inner.trip_count % WIDE_TILE[1]:
        return False
    between = nest[nest.index(last) + 1 : nest.index(inner)]
    if not any(lp.trip_count > 1 and independent(lp) for lp in between):
        return False
    if any(isinstance(op, scf.IfOp) for op in last.walk()):
        return False
    if any(op.name in VECTOR_MATH for op in last.walk()):
        return False
    n, u = last.trip_count, WIDE_TILE[0]
    spare = -n % u
    if n < 2 * u or spare * 16 > n or (spare and not clampable(last)):
        return False
    return True


#: ragged inner lanes (`_ragged`) redo at most this share of a loop's iterations
RAGGED_WASTE = 0.25


def _ragged(loop: ForOp, lanes: int) -> bool:
    """May `loop` take `lanes` inner lanes that do not divide it (`LaneProfile.ragged`:
    the widest such count of the profile)? When it has at least
    that many iterations, at most 6 steps,
    redoes at most `RAGGED_WASTE` of them, and may run iterations twice (`clampable`):
    the last step's lanes then end at the loop's end (`DLPC_MIN`), redoing some of the
    step before. lenet's first conv (28 columns: 4 lanes, or 16 and 16 from column 12)."""
    n = loop.trip_count
    steps = -(-n // lanes)
    if n % lanes == 0 or n < lanes or steps > 6:
        return False
    return (steps * lanes - n) <= RAGGED_WASTE * n and clampable(loop)


def plan_lanes(
    nest: list[ForOp],
    dims: list[ForOp],
    no_inner: bool = False,
    profile: LaneProfile = LANES_8,
) -> tuple[dict[ForOp, int], dict[ForOp, list[tuple[SSAValue, str]]]]:
    """Which loops a work-item writes as lanes (register blocking), how many, and the
    reduction loops among them with their accumulators (`no_inner`: no inner lanes;
    `profile`: the lane counts, by the device's vector width)."""
    if not dims or not _laneable(dims[-1]):
        return {}, {}
    last = dims[-1]
    lanes: dict[ForOp, int] = {}
    below = nest[nest.index(last) + 1 :]
    inner = next((lp for lp in reversed(below) if lp.trip_count > 1 and independent(lp)), None)
    if no_inner:
        inner = None
    if inner is not None:  # (3 steps: PoCL's LLVM made slow code of them)
        u = next((u for u in profile.inner if _good_steps(inner.trip_count, u)), 1)
        if profile.ragged:  # (PoCL's plans stay as measured)
            u = next((r for r in profile.inner if r > max(u, 4) and _ragged(inner, r)), u)
        if u > 1:
            lanes[inner] = u
    # lanes left after the mapped ones: an independent loop between the NDRange and the
    # inner lanes whose lanes share a load of the inner lanes (a batched matmul's rows
    # share a row of the right operand; a conv's rows share none of its input's loads,
    # and lanes over them were slower: docs/design/opencl-experiments.md)
    middle = None
    if inner is not None and inner in lanes:
        shared = [lp for lp in below[: below.index(inner)] if lp.trip_count > 1]
        shared = [lp for lp in shared if independent(lp) and _shares_loads(inner, lp)]
        middle = shared[-1] if shared else None
    # the mapped lanes leave at least 2 work-items along their loop; with no middle lanes
    # to come, an NDRange dim before it (a batch) may hold them instead (lenet's 6
    # channels at batch 32 as 6 lanes, not 2 x 3; the attention's heads stay 2 lanes,
    # their rows 4)
    others = math.prod(lp.trip_count for lp in dims[:-1]) if middle is None else 1
    fits = [
        u for u in MAPPED_LANES if last.trip_count % u == 0 and (last.trip_count > u or others >= 2)
    ]
    budget = profile.max_lanes // math.prod(lanes.values())
    u = next((u for u in fits if u <= budget), 1)
    if u > 1:
        lanes[last] = u
    if inner is not None and _wide_inner(inner, lanes, middle, last, profile):
        lanes[inner] = WIDE_LANES
    budget = profile.max_lanes // math.prod(lanes.values())
    if middle is not None and budget > 1:
        fit = (u for u in profile.inner if u <= budget)
        u = next((u for u in fit if _good_steps(middle.trip_count, u)), 1)
        if u > 1:
            lanes[middle] = u
    partials: dict[ForOp, list[tuple[SSAValue, str]]] = {}
    for loop in (o for o in last.block.walk() if isinstance(o, ForOp)):
        found = accumulators(loop)
        if not found:
            continue
        budget = profile.max_lanes // math.prod(lanes.values())
        u = next((u for u in profile.partial if _steps(loop.trip_count, u) >= 2 and u <= budget), 1)
        if u > 1:
            lanes[loop], partials[loop] = u, found
    if inner is not None and _wide_tile(nest, last, inner, middle, lanes, partials):
        lanes[last], lanes[inner] = WIDE_TILE
    body_ops = sum(1 for _ in last.block.walk())
    while lanes and body_ops * math.prod(lanes.values()) > MAX_LANE_OPS:
        loop = max(lanes, key=lambda lp: lanes[lp])
        lanes[loop] //= 2
        if lanes[loop] == 1:
            del lanes[loop]
            partials.pop(loop, None)
    return lanes, partials


#: lane counts written as OpenCL vectors, and the f32 ops written on them
VECTOR_WIDTHS = (2, 4, WIDTH_8, WIDTH_16)
MASKED_WIDTHS = (WIDTH_8, WIDTH_16)  # vector lanes a guarded load is masked on (`masked_load`)
#: vector lanes whose consecutive global loads and stores are one unaligned vector access
#: (`contiguous_access`, through `dlpc_float16u`): PoCL's LLVM gathered a float16 from 16
#: scalar loads and stored it as 16 scalars (the 8-lane ones it does merge)
CONTIGUOUS_WIDTHS = (WIDTH_16,)
#: f32 ops written on vectors as their scalar macro (`?:` selects lane by lane)
VECTOR_MACRO = {"arith.maximumf": "DLPC_MAXIMUMF", "arith.minimumf": "DLPC_MINIMUMF"}
VECTOR_BINARY = {"arith.addf", "arith.subf", "arith.mulf", "arith.divf"}


def plan_vector(
    nest: list[ForOp],
    dims: list[ForOp],
    lanes: dict[ForOp, int],
    partials: dict[ForOp, list[tuple[SSAValue, str]]],
) -> ForOp | None:
    """The laned loop to write as OpenCL vectors: the innermost independent laned loop
    below the NDRange (the contiguous outputs: a conv's output columns), when its lanes
    are a vector width and no reduction loop sums in partials (their accumulators are
    scalars per partial: `plan_launch` drops the partials of a kernel that has one)."""
    if not dims or partials:
        return None
    below = nest[nest.index(dims[-1]) + 1 :]
    inner = [lp for lp in below if lp in lanes and lanes[lp] in VECTOR_WIDTHS]
    return inner[-1] if inner else None


def partial_vector(
    lanes: dict[ForOp, int], partials: dict[ForOp, list[tuple[SSAValue, str]]]
) -> ForOp | None:
    """The partial-sum loop to write on OpenCL vectors when the kernel has no vector
    loop of its own: the only laned reduction loop, of a vector width, whose accumulators
    are all f32 sums or products. Each accumulator's partials are then the lanes of one
    vector (`float8 p = (float8)(acc, -0.0f, ...)`), the loop's loads gathered into
    vectors and its products and sums vector ops, one fma per 8 lanes; the partials are
    combined after the loop lane by lane in the same order as scalar partials (the same
    result). Scalar partials (a linear at batch 1: 64 scalar accumulators) are not
    vectorised by PoCL's LLVM."""
    if len(partials) != 1:
        return None
    ((loop, accs),) = partials.items()
    if lanes.get(loop) not in VECTOR_WIDTHS:
        return None
    f32 = Float32Type()
    if any(
        element_type(acc) != f32 or combine not in ("arith.addf", "arith.mulf")
        for acc, combine in accs
    ):
        return None
    return loop
