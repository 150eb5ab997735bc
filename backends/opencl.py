"""OpenCL backend: OpenCL C kernels from the loop level, one per `loop.kernel`.

Input: a loop-level module (`func.func @main` with `loop.kernel`s, `memref`, `arith`,
`math`, `scf.if`), in the calling convention of docs/architecture.md.
Output: one OpenCL C program; the host side (`runtime/opencl_rt.py`) walks `@main`,
allocates device buffers and enqueues each kernel with the NDRange recorded here.

Mapping (`plan_launch`):
- the leading `parallel` loops of a kernel's nest (extent-1 loops in between are
  fixed) become NDRange dimensions, at most three: `i = lb + step * get_global_id(d)`;
  a kernel with no parallel loop runs as one work-item;
- cache stages become `__local` memory: when the body of a mapped parallel loop G holds
  local buffers (`cache_read`/`cache_write` stages), their copy nests and one inner
  parallel loop L, then G is the work-group index and L the local index
  (`get_group_id`/`get_local_id`, local size = L's extent), the stages are `__local`
  arrays, copy nests are shared among the group's work-items, with `barrier()`s between
  copy-in, compute and copy-out;
- other kernel-local buffers are private arrays; 0-d ones are scalars.

    /* kernel "relu_0" (from graph.relu): global (4), local (-) */
    __kernel void kernel_relu_0(__global const float *restrict v_x, __global float *restrict v_out0)
    {
      const long v_i0 = get_global_id(0);
      for (long v_i1 = 0; v_i1 < 8; v_i1++) { ... }
    }

Every name from the IR becomes an identifier through `backends/names.py` (the `v_` and
`kernel_` prefixes meet no OpenCL C keyword, builtin function or macro).

`emit_opencl(module) -> str`; `plan_launch(kernel) -> Launch`; `OpenCLTarget` registers
`dlpc-opt -t opencl`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import IO

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, IntegerType, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.target import Target

from dlpc.backends import c as cbe
from dlpc.backends.c import Buffer, FunctionWriter, c_type
from dlpc.backends.names import Scope, c_comment
from dlpc.backends.opencl_winograd import write_fused
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside, spine
from dlpc.dialects.typed import element_type, shape_of

PRELUDE = (
    """\
typedef long int64_t;
typedef ulong uint64_t;
typedef int int32_t;
typedef uint uint32_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef char int8_t;
typedef uchar uint8_t;
#define INT64_C(x) x##L
typedef float dlpc_float16u __attribute__((ext_vector_type(16), aligned(4)));
"""
    + cbe.SCALAR_HELPERS
)
# the C backend spells float math with the libm `f` suffix; OpenCL C overloads one name
_RENAMED = {"nearbyint": "rint"}
#: f32 math written with dlpc's own functions (scalars through the C spelling `erff`,
#: vectors in `vector_math`); f64 keeps OpenCL's builtins
OWN_F32 = {"erf": "dlpc_erf"}
# erf as a rational function (the odd/even minimax pair that Eigen and XLA use for float
# erf) on scalars and vectors alike: PoCL's erf cost ~3.7 ns an element, most of the
# transformer's gelu linear at batch 32 (332 us, its matmul 90); this one is fmas and
# a division. Within 6 ulp of erf (float64) on [-6, 6], exactly +-1 beyond |x| = 3.85
# (float erf rounds to 1 there: gelu far left stays -0.0), NaN kept (every comparison
# is false), the product with x last (a subnormal x loses no more than its own bits).
# OpenCL allows erf 16 ulp. Operators and `?:` only: PoCL calls its builtins on
# vectors (clamp, select, fma, copysign) as functions, which kept it at 2.2 ns an element.
# (`static`: as a plain C99 `inline` overload set, one program, test_ieee's, built with
# no kernels at all and an empty log.) f32 only (`OWN_F32`): f64 keeps the builtin.
ERF = """\
#define DLPC_ERF(T) \\
__attribute__((overloadable)) static inline T dlpc_erf(T x) \\
{ \\
  const T c = x > (T)(4.0f) ? (T)(4.0f) : x < (T)(-4.0f) ? (T)(-4.0f) : x, z = c * c; \\
  T p = z * (T)(-2.72614225801306e-10f) + (T)(2.77068142495902e-08f); \\
  p = p * z + (T)(-2.10102402082508e-06f); \\
  p = p * z + (T)(-5.69250639462346e-05f); \\
  p = p * z + (T)(-7.34990630326855e-04f); \\
  p = p * z + (T)(-2.95459980854025e-03f); \\
  p = p * z + (T)(-1.60960333262415e-02f); \\
  T q = z * (T)(-1.45660718464996e-05f) + (T)(-2.13374055278905e-04f); \\
  q = q * z + (T)(-1.68282697438203e-03f); \\
  q = q * z + (T)(-7.37332916720468e-03f); \\
  q = q * z + (T)(-1.42647390514189e-02f); \\
  return x > (T)(3.85f) ? (T)(1.0f) : x < (T)(-3.85f) ? (T)(-1.0f) : c * (p / q); \\
}
"""
FLOATS = ("float", "float2", "float4", "float8", "float16")
MATH_MACROS = (
    ERF
    + "\n".join(
        f"#define {name}f {OWN_F32.get(name, _RENAMED.get(name, name))}"
        for name in sorted({*cbe.MATH_UNARY.values(), *cbe.MATH_BINARY.values(), "fma"})
        if name != "tanh"
    )
    + "\n#define nearbyint rint\n"
    # PoCL's tanh stops one ulp short of +-1 for large |x| (OpenCL allows 4 ulp), so
    # gelu's 1 + tanh(...) was 6e-8 instead of 0 far left (-88 -> -2.6e-6, -inf -> -inf);
    # float tanh is exactly +-1 beyond |x| = 10, as glibc and torch give (docs/numerics.md)
    + "inline float dlpc_tanhf(float x) { return fabs(x) > 10.0f ? copysign(1.0f, x) : tanh(x); }\n"
    + "#define tanhf dlpc_tanhf\n"
    + "".join(f"DLPC_ERF({t})\n" for t in FLOATS)
)


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
        # batch-1 conv plan blocks (`plan_lanes`) then ran as one serial loop per
        # work-item (resnet at batch 32: 149 ms against 19 for the C). Not for a
        # linear's features: its lanes over the batch share the weights' loads
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
        for loop in launch.partials:  # (transformer's attention matmuls: 6 -> 3 us)
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
        # (resnet's pool at batch 32, 256 elements a sum: 163 -> 56 us on PoCL; the
        # transformer's sums of 64 or fewer went slower with partials: its softmax max
        # 6 -> 10 us, its Q.K^T matmul 37 -> 252)
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
        and any(_varies_with(i, iv) for i in o.indices)
    ]
    return not varying or any(
        _varies_with(o.indices[-1], iv) or o.memref in launch.relayout for o in varying
    )


#: register blocking (`plan_lanes`): lanes of the last NDRange loop (output channels,
#: features: they share their inputs' loads), of the innermost independent loop below it
#: (contiguous outputs: SLP-vectorisable), at most `MAX_LANES` in all, and at most
#: `MAX_LANE_OPS` ops emitted per work-item body. 64 lanes are 8 output channels x 8
#: columns, 8 float8 accumulators (`plan_vector`): enough independent sums to keep the
#: fma units busy (32 lanes, 4 vectors, left resnet's convs latency-bound: 587 -> 354 us)
MAPPED_LANES = (8, 6, 5, 4, 3, 2)  # (6, 5, 3: lenet's 6 channels and 10 rows, 56 -> 41 us)
INNER_LANES = (8, 4, 2)
#: partial sums of an innermost reduction loop (the order of the additions changes, as
#: the C backend's `omp simd reduction` changes it): lanes, and each partial's start
PARTIAL_LANES = (8, 4, 2)
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
MAX_LANES = 64
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
#: channels. mobilenet's depthwise conv (9 taps), us at batch 1 / 32, by the lanes in
#: all: 64 with 8 inner (the 8-lane plan) 34.8 / 1285; 16 inner and 16 in all 218 /
#: 881, 32 in all 16.1 / 538, 64 in all 23.4 / 707, 128 in all 53 / 1743 (its border
#: tiles are written per lane: many lanes, much code)
SHORT_PADDED = 16
LANES_16_SHORT = LaneProfile((16, 8, 4, 2), (16, 8, 4, 2), 32, ragged=True)
#: a device whose native float vector is 16 wide (Intel's CPU runtime on AVX-512
#: reports `native_vector_width_float` 16): 16 inner lanes, 128 in all, ragged inner
#: lanes. On this machine (AMD Zen 5, Intel's runtime), 8 -> 16 lanes, A/B twice: at
#: batch 1 resnet's stride-2 conv 36.1 -> 27.4 us and mobilenet's pointwise conv 36.7 ->
#: 28.6 (lenet, mlp and the transformer within noise); whole calls at batch 32 resnet
#: 1887 -> 1717 us, mobilenet 1531 -> 1209, the transformer 432 -> 137, mlp 173 -> 123,
#: lenet 385 -> 388. Padded convs with a short sum take `LANES_16_SHORT`
LANES_16 = LaneProfile((16, 8, 4, 2), (16, 8, 4, 2), 128, ragged=True, short=LANES_16_SHORT)


def lane_profile(width: int) -> LaneProfile:
    """The lane profile for a device whose native float vector has `width` lanes."""
    return LANES_16 if width >= 16 else LANES_8


MAX_LANE_BUFFER = 16  # elements of a private buffer allocated in a laned body


def _steps(trip_count: int, lanes: int) -> int:
    """The steps of a loop of `trip_count` iterations laned `lanes` wide: 0 when the lanes
    do not divide it, at most 6 (many)."""
    return min(trip_count // lanes, 6) if trip_count % lanes == 0 else 0


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
            if any(_uses(i, ivs[0]) for i in indices) and not any(
                _uses(i, ivs[1]) for i in indices
            ):
                return True
    return False


#: inner lanes as wide as two 8-float registers (a `float16`), when the mapped lanes stay
#: few (at most `WIDE_MAPPED`) and the body has no vector math: lenet's second conv at
#: batch 32 (16 output channels as the vector, 5 rows mapped) 365 -> 138 us, its linears
#: 62 -> 36 and 23 -> 15 us (PoCL basic, profiling events). With more mapped lanes (8
#: channels x 16 columns of resnet's convs) fewer channels fit: resnet at batch 1
#: 256 -> 434 us of kernels, so those keep 8
WIDE_LANES = 16
WIDE_MAPPED = 5


def _wide_inner(
    inner: ForOp | None,
    lanes: dict[ForOp, int],
    middle: ForOp | None,
    last: ForOp,
    profile: LaneProfile = LANES_8,
) -> bool:
    """Do `inner`'s 8 lanes widen to `WIDE_LANES` (see there)?"""
    if inner is None or lanes.get(inner) != 8:
        return False
    if middle is not None and profile.max_lanes // (8 * lanes.get(last, 1)) > 1:
        return False  # (the middle loop takes lanes: the attention's rows)
    if _steps(inner.trip_count, WIDE_LANES) not in (1, 2, 4, 5, 6):
        return False
    if lanes.get(last, 1) * WIDE_LANES > WIDE_MAPPED * WIDE_LANES:
        return False
    return not any(op.name in VECTOR_MATH for op in last.walk())


#: the pointwise (1x1) conv's tile (`_wide_tile`): 6 output channels x 16 columns, 12
#: float8 accumulators (8 left PoCL's fmas waiting on each other: mobilenet's pointwise
#: conv, extracted kernels on PoCL basic, 0.88 ns per output with 8 x 8, 0.85 with 4 x 16,
#: 0.70 with 5 x 16, 0.64 with 6 x 16; 7 x 16 and 8 x 16 spill: 1.04 and 1.17)
WIDE_TILE = (6, 16)


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
    if lanes.get(last) not in (8, WIDE_TILE[0]) or lanes.get(inner) != 8:
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
        u = next((u for u in profile.inner if _steps(inner.trip_count, u) in (1, 2, 4, 5, 6)), 1)
        if profile.ragged:  # (PoCL's plans stay as measured)
            u = next((r for r in profile.inner if r > max(u, 4) and _ragged(inner, r)), u)
        if u > 1:
            lanes[inner] = u
    # lanes left after the mapped ones: an independent loop between the NDRange and the
    # inner lanes whose lanes share a load of the inner lanes (a batched matmul's rows
    # share a row of the right operand: attention 118 -> 43 us at batch 32; a conv's rows
    # share none of its input's loads, and lenet's first conv went 497 -> 646 us with them)
    middle = None
    if inner is not None and inner in lanes:
        shared = [lp for lp in below[: below.index(inner)] if lp.trip_count > 1]
        shared = [lp for lp in shared if independent(lp) and _shares_loads(inner, lp)]
        middle = shared[-1] if shared else None
    # the mapped lanes leave at least 2 work-items along their loop; with no middle lanes
    # to come, an NDRange dim before it (a batch) may hold them instead (lenet's 6
    # channels at batch 32 as 6 lanes, not 2 x 3: its first conv 497 -> 288 us; the
    # attention's heads stay 2 lanes, their rows 4: 4 x 2 took 66 us against 43)
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
        u = next((u for u in fit if _steps(middle.trip_count, u) in (1, 2, 4, 5, 6)), 1)
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
VECTOR_WIDTHS = (2, 4, 8, 16)
MASKED_WIDTHS = (8, 16)  # vector lanes a guarded load is masked on (`masked_load`)
#: vector lanes whose consecutive global loads and stores are one unaligned vector access
#: (`contiguous_access`, through `dlpc_float16u`): PoCL's LLVM gathered a float16 from 16
#: scalar loads and stored it as 16 scalars (the 8-lane ones it does merge)
CONTIGUOUS_WIDTHS = (16,)
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
    result). A linear at batch 1 (8 rows x 8 partials a work-item) was 64 scalar
    accumulators that PoCL's LLVM did not vectorise: mlp's first layer 33 -> 9 us."""
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


def _affine_index(value: SSAValue) -> bool:
    """Is `value` an affine function (`addi`, `subi`, `muli` by a constant) of loop
    variables (block arguments) and constants? Then its values at the lanes between two
    lanes lie between its values at those two."""
    owner = value.owner
    if isinstance(owner, Block) or isinstance(owner, arith.ConstantOp):
        return True
    if owner.name in _AFFINE:
        return all(_affine_index(v) for v in owner.operands)
    if owner.name == "arith.muli":
        return any(isinstance(v.owner, arith.ConstantOp) for v in owner.operands) and all(
            _affine_index(v) for v in owner.operands
        )
    return False


def _varies_with(index: SSAValue, iv: SSAValue) -> bool:
    """Is `index` the induction variable `iv`, or `iv` plus or minus what does not vary with it?"""
    if index is iv:
        return True
    owner = index.owner
    if isinstance(owner, arith.AddiOp | arith.SubiOp):
        a, b = owner.lhs, owner.rhs
        return (_varies_with(a, iv) and not _uses(b, iv)) or (
            isinstance(owner, arith.AddiOp) and _varies_with(b, iv) and not _uses(a, iv)
        )
    return False


def _uses(value: SSAValue, iv: SSAValue) -> bool:
    if value is iv:
        return True
    owner = value.owner
    return isinstance(owner, Operation) and any(_uses(v, iv) for v in owner.operands)


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
        where = [k for k, index in enumerate(indices) if _uses(index, iv)]
        if len(where) != 1 or where[0] == len(indices) - 1:
            continue
        if not _varies_with(indices[where[0]], iv):
            continue
        n = len(indices)
        perm = (*(d for d in range(n) if d != where[0]), where[0])
        if plan.setdefault(op.memref, perm) != perm:  # two loads want two layouts
            plan[op.memref] = ()
    return {v: perm for v, perm in plan.items() if perm}


#: padding guards of a reduction nest: the `scf.if`s, the ops computing their
#: conditions (in order), the loops of the nest those depend on
Guards = tuple[list[scf.IfOp], list[Operation], list[ForOp]]
_AFFINE = ("arith.addi", "arith.subi")
_INEQUALITY = ("slt", "sle", "sgt", "sge")


def padding_guards(nest: ForOp) -> Guards | None:
    """The `scf.if`s in `nest` whose condition is a conjunction (`andi`) of signed
    inequalities (`cmpi`) between affine functions (`addi`, `subi`, `muli` by a constant)
    of the nest's loop variables, constants and the variables of the loops around it
    (not other values from outside: they need not be affine in the lanes): a conv's
    padding tests around its input loads. Such a condition holds on the whole box of the
    nest's iterations (and lanes) when it holds at the box's corners (the set where it
    holds is convex). None when there is none."""
    loops: dict[SSAValue, ForOp] = {
        lp.induction_var: lp for lp in nest.walk() if isinstance(lp, ForOp)
    }
    ifs: list[scf.IfOp] = []
    needed: set[Operation] = set()
    used: set[ForOp] = set()

    def slice_of(value: SSAValue, ops: set[Operation], ivs: set[ForOp]) -> bool:
        if value in loops:
            ivs.add(loops[value])
            return True
        if not defined_inside(value, nest):  # an enclosing loop's variable or a constant:
            # affine in the lanes too (a value computed outside, `i3 / 2`, need not be)
            return isinstance(value.owner, Block) or isinstance(value.owner, arith.ConstantOp)
        op = value.owner
        if not isinstance(op, Operation):
            return False
        if isinstance(op, arith.ConstantOp):
            pass
        elif isinstance(op, arith.CmpiOp):
            pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            if pred not in _INEQUALITY:
                return False
        elif op.name == "arith.muli":
            if not any(isinstance(v.owner, arith.ConstantOp) for v in op.operands):
                return False
        elif op.name not in (*_AFFINE, "arith.andi"):
            return False
        ops.add(op)
        return all(slice_of(v, ops, ivs) for v in op.operands)

    for op in nest.walk():
        if not isinstance(op, scf.IfOp) or op.cond.type != IntegerType(1):
            continue
        ops: set[Operation] = set()
        ivs: set[ForOp] = set()
        if slice_of(op.cond, ops, ivs) and ivs:
            ifs.append(op)
            needed |= ops
            used |= ivs
    if not ifs:
        return None
    order = [op for op in nest.walk() if op in needed]
    return ifs, order, [lp for lp in loops.values() if lp in used]


def resident_values(module: ModuleOp) -> set[SSAValue]:
    """@main's parameters and the `memref.get_global` results in it: the buffers whose
    contents are known before a call and do not change during one."""
    main = cbe.find_main(module)
    n_in, params, _ = cbe.calling_convention(main)
    values: set[SSAValue] = set(main.body.block.args[n_in : n_in + len(params)])
    values.update(o.memref for o in main.walk() if isinstance(o, memref.GetGlobalOp))
    return values


@dataclass
class PermutedBuffer(Buffer):
    """A buffer stored with its dims permuted by `perm` (`Launch.relayout`), indexed by
    the original dims."""

    perm: tuple[int, ...] = ()

    def at(self, indices: list[str]) -> str:
        return Buffer(self.name, self.shape).at([indices[d] for d in self.perm])


def contracted(op: Operation) -> bool:
    """Is `op` a product whose only use is a sum (`arith.addf`/`subf`)? On vector lanes
    it is written inside that sum's expression, `acc + (a * b)`, which OpenCL C's default
    `FP_CONTRACT ON` makes one fused multiply-add, as GCC contracts the C backend's (a
    conv's accumulation: 140 -> 119 us on PoCL). The fma rounds once where the two
    operations round twice: within the reference tolerance, as the C backend is."""
    if op.name != "arith.mulf":
        return False
    uses = list(op.results[0].uses)
    return len(uses) == 1 and uses[0].operation.name in ("arith.addf", "arith.subf")


class LaneMap(MutableMapping):
    """A KernelWriter's `expr` or `buffers` with lanes: a value defined while lanes of
    some laned loops are fixed (`writer.emitting`) has one entry per combination of
    them, and is looked up under the lanes the writer has fixed now (`writer.current`)."""

    def __init__(self, writer: KernelWriter):
        self.writer = writer
        self.data: dict = {}

    def _key(self, value, deps):
        return (value, tuple(self.writer.current[lp] for lp in deps))

    def __getitem__(self, value):
        return self.data[self._key(value, self.writer.deps.get(value, ()))]

    def __setitem__(self, value, item) -> None:
        deps = self.writer.emitting
        self.writer.deps[value] = deps
        self.data[self._key(value, deps)] = item

    def __delitem__(self, value) -> None:
        del self.data[self._key(value, self.writer.deps.get(value, ()))]

    def __iter__(self):
        return iter({key[0]: None for key in self.data})

    def __len__(self) -> int:
        return len({key[0] for key in self.data})


class KernelWriter(FunctionWriter):
    """An OpenCL kernel body (C syntax, OpenCL address spaces and work-item ids).

    Register blocking (`Launch.lanes`): a laned loop of U lanes steps U iterations at a
    time (a mapped one takes U consecutive iterations per work-item) and its body is
    emitted once per lane, unrolled and jammed into the loops inside it: each op is
    written once per combination of the lanes its operands vary with (`deps`), so an
    input load shared by the lanes of an output-channel loop is written once, each
    lane's accumulator is a scalar of its own, and the lanes' reductions interleave in
    one loop. Every output is computed by the same operations in the same order as
    without lanes."""

    def __init__(self, emitter, names: Scope, what: str, launch: Launch):
        super().__init__(emitter, names, what)
        self.launch = launch
        self.deps: dict[SSAValue, tuple[ForOp, ...]] = {}  # laned loops a value varies with
        self.current: dict[ForOp, int] = {}  # the lane of each laned loop being written
        self.emitting: tuple[ForOp, ...] = ()  # the laned loops the current op varies with
        self.active: list[ForOp] = []  # laned loops entered, outermost first
        self.fixed = 0  # > 0 inside an op written for one combination of lanes
        self.expr = LaneMap(self)
        self.buffers = LaneMap(self)
        # vector lanes (`Launch.vector`): (value or 0-d buffer, the lanes of its other
        # laned loops) -> the name of the OpenCL vector holding its lanes
        self.vectors: dict[tuple, str] = {}
        # interior/border split (`split_interior`): padding guards known to hold
        self.assumed: set[scf.IfOp] = set()
        self.splitting = False
        # a border tile whose guarded loads lie in their buffers at every lane and tap
        # (`split_interior`'s `bound_tests`): masked loads need no per-lane fallback
        self.in_bounds = False
        self.masked = 0  # masked loads written (`masked_load`)

    def op(self, op: Operation) -> None:
        if not self.active or self.fixed or isinstance(op, ForOp):
            return self.plain(op)
        deps = self.deps_of(op)
        if self.vector_math(op, deps) or self.vector_op(op, deps) or self.masked_load(op, deps):
            return None
        if self.contiguous_access(op, deps):
            return None
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in deps)):
            self.current.update(zip(deps, combination))
            self.emitting, self.fixed = deps, self.fixed + 1
            try:
                self.plain(op)
            finally:
                self.emitting, self.fixed = (), self.fixed - 1
        return None

    def vector_key(self, value: SSAValue) -> tuple:
        """`value`'s key in `vectors` under the lanes fixed now (all but the vector's)."""
        vec = self.launch.vector
        return (value, tuple(self.current[lp] for lp in self.deps.get(value, ()) if lp is not vec))

    def vector_operand(self, value: SSAValue, width: int) -> str:
        """`value` as an expression of the vector's type: its vector, a vector built from
        its lanes, or a scalar (OpenCL widens it) when it does not vary with the lanes."""
        vec = self.launch.vector
        assert vec is not None
        if vec not in self.deps.get(value, ()):
            return f"(float{width})({self[value]})"
        key = self.vector_key(value)
        if key in self.vectors:
            return self.vectors[key]
        parts = []
        for lane in range(width):
            self.current[vec] = lane
            parts.append(self[value])
        return f"(float{width})({', '.join(parts)})"

    def vector_op(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """Write `op` once per combination of its other lanes, on an OpenCL vector of the
        lanes of `Launch.vector`, when it varies with them and is f32 arithmetic
        (`VECTOR_BINARY`, negf) or a 0-d f32 private buffer (an accumulator: one vector
        variable, each lane `.sK` of it), its load or its store; False otherwise. Each
        lane is the same IEEE operation as when written alone, in the same order; ops on
        other types, global loads and stores and `scf.if`s stay per lane (`.sK` reads a
        lane of a vector, `(float8)(a, b, ...)` makes one)."""
        vec = self.launch.vector
        if vec is None or vec not in deps:
            return False
        f32 = Float32Type()
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            if shape_of(op.memref) != () or element_type(op.memref) != f32:
                return False
            if op.memref in self.launch.shared:
                return False
        elif isinstance(op, memref.LoadOp | memref.StoreOp):
            if self.vector_key(op.memref) not in self.vectors:
                return False
        elif op.name in VECTOR_BINARY or op.name == "arith.negf" or op.name in VECTOR_MACRO:
            if any(v.type != f32 for v in (*op.operands, *op.results)):
                return False
        else:
            return False
        width = self.launch.lanes[vec]
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            if isinstance(op, memref.AllocOp | memref.AllocaOp):
                name = self.names.fresh(op.memref.name_hint, "buf")
                self.line(f"float{width} {name};")
                self.lanes_of(
                    op.memref, deps, name, lambda k, n=name: Buffer(f"{n}.s{k:X}", (), scalar=True)
                )
                continue
            if isinstance(op, memref.StoreOp):
                value = self.vector_operand(op.value, width)
                self.line(f"{self.vectors[self.vector_key(op.memref)]} = {value};")
                continue
            if isinstance(op, memref.LoadOp):
                expr = self.vectors[self.vector_key(op.memref)]
            elif op.name == "arith.negf":
                expr = f"-{self.vector_operand(op.operands[0], width)}"
            elif op.name in VECTOR_MACRO:
                a, b = (self.vector_operand(v, width) for v in op.operands)
                expr = f"{VECTOR_MACRO[op.name]}({a}, {b})"
            else:
                a, b = (self.vector_operand(v, width) for v in op.operands)
                expr = f"{a} {cbe.BINARY[op.name]} {b}"
            if contracted(op):  # written inside the sum that uses it: one fma
                self.lanes_of(op.results[0], deps, f"({expr})", lambda k, e=expr: f"({e}).s{k:X}")
                continue
            name = self.names.fresh(op.results[0].name_hint)
            self.line(f"const float{width} {name} = {expr};")
            self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def contiguous_access(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """An f32 load or store of a kernel's global buffer whose lanes of the vector
        loop (`CONTIGUOUS_WIDTHS`) are consecutive elements (the loop's variable, step 1,
        plus what does not vary with it as the last index; no other index varies with
        it), written once per combination of its other lanes as one unaligned vector
        access, `*(__global dlpc_float16u *)&buf[first lane]`: the same elements. False
        when `op` is not one."""
        vec = self.launch.vector
        if (
            vec is None
            or vec not in deps
            or vec.stride != 1
            or self.launch.lanes[vec] not in CONTIGUOUS_WIDTHS
            or not isinstance(op, memref.LoadOp | memref.StoreOp)
            or element_type(op.memref) != Float32Type()
            or not op.indices
        ):
            return False
        iv = vec.induction_var
        indices = list(op.indices)
        if not _varies_with(indices[-1], iv) or any(_uses(i, iv) for i in indices[:-1]):
            return False
        kernel = op.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is None or defined_inside(op.memref, kernel):
            return False  # (a private or `__local` array)
        buf = self.buffers.get(op.memref)
        if type(buf) is not Buffer or buf.scalar or not buf.shape:
            return False
        width = self.launch.lanes[vec]
        load = isinstance(op, memref.LoadOp)
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            self.current[vec] = 0
            where = f"&{buf.at([self[i] for i in indices])}"
            if not load:
                value = self.vector_operand(op.operands[0], width)
                self.line(f"*(__global dlpc_float{width}u *){where} = {value};")
                continue
            name = self.names.fresh(op.res.name_hint)
            self.line(f"const float{width} {name} = *(__global const dlpc_float{width}u *){where};")
            self.lanes_of(op.res, deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def masked_load(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """A guarded f32 load of a global buffer (`scf.if (g) { load } else { pad }`: a
        conv's padding) whose guard varies with the vector lanes, written once per
        combination of its other lanes as one vector: when the flat indices of the first
        and the last lane lie in the buffer (the indices are affine in the lanes, so every
        lane's does), all lanes are loaded (consecutive ones: one vector load) and the
        lanes whose guard fails take the pad (`mask ? loaded : pad`, a blend); otherwise
        each lane is loaded under its own guard, as before. The same values either way.
        A border tile's taps that hold for some lanes only (`border_nest`) had been 8
        guarded scalar loads per vector (mobilenet's depthwise conv 26.5 -> 21.6 us,
        extracted kernel on PoCL basic). False when `op` is not one."""
        vec = self.launch.vector
        if (
            not isinstance(op, scf.IfOp)
            or vec is None
            or vec not in deps
            or op in self.assumed
            or self.launch.lanes[vec] not in MASKED_WIDTHS
            or len(op.results) != 1
            or not isinstance(op.results[0].type, Float32Type)
            or not op.false_region.blocks
        ):
            return False
        true_ops = list(op.true_region.block.ops)
        false_ops = list(op.false_region.block.ops)
        load, yielded = true_ops[0], true_ops[-1]
        pad_yield = false_ops[-1]
        if (
            len(true_ops) != 2
            or not isinstance(load, memref.LoadOp)
            or not isinstance(yielded, scf.YieldOp)
            or yielded.operands[0] is not load.res
            or not isinstance(pad_yield, scf.YieldOp)
            or not all(isinstance(o, arith.ConstantOp) for o in false_ops[:-1])
            or defined_inside(load.memref, op)
            or not all(_affine_index(i) for i in load.indices)
        ):
            return False
        parent = op.parent_op()
        while parent is not None and parent is not vec:
            # a loop around the load that the guard does not vary with (a conv's input
            # channels) repeats each lane's branch the same way: there the per-lane loads
            # measured faster (resnet's 3x3 convs at batch 1, 16-32 channels: 60 -> 65 us
            # masked), as with 4 lanes (lenet's first conv at batch 32: 260 -> 289 us)
            if (
                isinstance(parent, ForOp)
                and parent.trip_count > 1
                and not _uses(op.cond, parent.induction_var)
            ):
                return False
            parent = parent.parent_op()
        pad_value = pad_yield.operands[0]
        if defined_inside(pad_value, op):
            if not isinstance(pad_value.owner, arith.ConstantOp):
                return False
        elif vec in self.deps.get(pad_value, ()):
            return False
        buf = self.buffers.get(load.memref)
        if type(buf) is not Buffer or buf.scalar or not buf.shape or buf.span is not None:
            return False
        width = self.launch.lanes[vec]
        size = math.prod(buf.shape)
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            self.emitting, self.fixed = rest, self.fixed + 1
            try:
                for const in false_ops[:-1]:
                    self.plain(const)
            finally:
                self.emitting, self.fixed = (), self.fixed - 1
            pad = self[pad_value]
            guards, loads = [], []
            for lane in range(width):
                self.current[vec] = lane
                guards.append(self[op.cond])
                loads.append(buf.at([self[i] for i in load.indices]))
            first, last = (a[len(buf.name) + 1 : -1] for a in (loads[0], loads[-1]))
            mask = f"(int{width})({', '.join(f'-(int)({g})' for g in guards)})"
            vector = f"(float{width})({', '.join(loads)})"
            guarded = ", ".join(f"({g}) ? {a} : {pad}" for g, a in zip(guards, loads))
            name = self.names.fresh(op.results[0].name_hint)
            self.masked += 1
            if self.in_bounds:  # (`border_tiles`: every lane's index is in the buffer)
                self.line(f"const float{width} {name} = {mask} ? {vector} : (float{width})({pad});")
            else:
                self.line(
                    f"const float{width} {name} = (({first}) >= 0 && ({last}) < {size}) ? "
                    f"({mask} ? {vector} : (float{width})({pad})) : (float{width})({guarded});"
                )
            self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def lanes_of(self, value: SSAValue, deps: tuple[ForOp, ...], name: str, lane) -> None:
        """Record `name` as the vector of `value` (under the lanes fixed now) and lane k
        of it, `lane(k)`, as `value`'s entry for lane k (in `buffers` for a buffer)."""
        vec = self.launch.vector
        assert vec is not None
        table = self.buffers if isinstance(value.type, MemRefType) else self.expr
        self.emitting = deps
        for k in range(self.launch.lanes[vec]):
            self.current[vec] = k
            table[value] = lane(k)
        self.emitting = ()
        self.vectors[self.vector_key(value)] = name

    def vector_math(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """Write a `VECTOR_MATH` op on f32 once per combination of its other lanes, as one
        call on a vector of the lanes of its innermost laned loop; False if it is not one."""
        if (
            op.name not in VECTOR_MATH
            or not deps
            or not isinstance(op.results[0].type, Float32Type)
        ):
            return False
        inner, rest = deps[-1], deps[:-1]
        width = self.launch.lanes[inner]
        if width not in (2, 4, 8, 16):
            return False
        call = OWN_F32.get(cbe.MATH_UNARY[op.name], cbe.MATH_UNARY[op.name])
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            if inner is self.launch.vector:  # (its operand may be a vector already)
                arg = self.vector_operand(op.operands[0], width)
            else:
                args = []
                for lane in range(width):
                    self.current[inner] = lane
                    args.append(self[op.operands[0]])
                arg = f"(float{width})({', '.join(args)})"
            name = self.names.fresh(op.results[0].name_hint)
            self.line(f"const float{width} {name} = {call}({arg});")
            if inner is self.launch.vector:
                self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
                continue
            self.emitting = deps
            for lane in range(width):
                self.current[inner] = lane
                self.expr[op.results[0]] = f"{name}.s{lane:X}"
            self.emitting = ()
        return True

    def deps_of(self, op: Operation) -> tuple[ForOp, ...]:
        """The laned loops `op` varies with: a buffer allocated in a laned body is one
        per lane of every enclosing laned loop; other ops vary with their operands."""
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return tuple(self.active)
        used: set[ForOp] = set()
        for inner in op.walk() if op.regions else (op,):
            for v in inner.operands:
                if inner is op or not defined_inside(v, op):
                    used.update(self.deps.get(v, ()))
        return tuple(lp for lp in self.active if lp in used)

    def plain(self, op: Operation) -> None:
        if isinstance(op, ForOp):
            return self.for_(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return self.private(op)
        if isinstance(op, memref.DeallocOp):
            return None
        return super().op(op)

    def private(self, op) -> None:
        if op.memref in self.launch.shared:
            return None  # declared `__local` at the top of the kernel
        shape, elt = cbe.memref_info(op.memref.type)
        t = c_type(elt)
        name = self.names.fresh(op.memref.name_hint, "buf")
        if not shape:
            self.line(f"{t} {name};")
            self.buffers[op.memref] = Buffer(name, shape, scalar=True)
            return None
        self.line(f"{t} {name}[{max(math.prod(shape), 1)}];")
        self.buffers[op.memref] = Buffer(name, shape)
        return None

    def laned(self, op: ForOp) -> None:
        """A laned loop: U iterations per step (per work-item when mapped), its body
        written once per lane (see the class docstring); a reduction loop's lanes sum
        into partials of their accumulators, combined after it."""
        lanes = self.launch.lanes[op]
        partials = self.declare_partials(op, lanes)
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        step = op.stride * lanes
        once = op in self.launch.mapped or op.trip_count == lanes  # no loop around the lanes
        if op in self.launch.mapped:
            gid = f"(long){self.launch.mapped[op]}"
            first = f"{step} * {gid}" if op.lower == 0 else f"{op.lower} + {step} * {gid}"
            if op.trip_count % lanes:  # ragged (`clampable`): the last work-item's lanes
                # end at the loop's end, redoing some of the one before it
                first = f"DLPC_MIN({first}, {op.lower + op.stride * (op.trip_count - lanes)})"
            self.line(f"const long {iv} = {first};")
        elif once:
            self.line(f"const long {iv} = {op.lower};")
        elif op.trip_count % lanes:  # ragged (`_ragged`): the last step ends at the end
            at = self.names.fresh(f"{op.loop_name or op.induction_var.name_hint or 'i'}_step", "i")
            self.line(f"for (long {at} = {op.lower}; {at} < {op.upper}; {at} += {step}) {{")
            self.depth += 1
            last = op.lower + op.stride * (op.trip_count - lanes)
            self.line(f"const long {iv} = DLPC_MIN({at}, {last});")
        else:
            self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {iv} += {step}) {{")
            self.depth += 1
        self.active.append(op)
        for lane in range(lanes):
            self.current[op] = lane
            self.emitting = (op,)
            self.expr[op.induction_var] = f"({iv} + {lane * op.stride})" if lane else iv
        for acc, deps, combination, names in partials:  # lane k sums into partial k
            self.current.update(zip(deps, combination))
            if op is self.launch.vector:  # the partials are the lanes of one vector
                vector = names[0].partition(".")[0]
                self.lanes_of(
                    acc,
                    (*deps, op),
                    vector,
                    lambda k, n=vector: Buffer(f"{n}.s{k:X}", (), scalar=True),
                )
                continue
            for lane, name in enumerate(names):
                self.current[op], self.emitting = lane, (*deps, op)
                self.buffers[acc] = Buffer(name, (), scalar=True)
        self.emitting = ()
        self.block(op.block)
        self.active.remove(op)
        if not once:
            self.depth -= 1
            self.line("}")
        for acc, deps, combination, names in partials:
            self.deps[acc] = deps
            self.current.update(zip(deps, combination))
            combine = dict(self.launch.partials[op])[acc]
            total = self.buffers[acc].name
            if op is self.launch.vector:  # partial 0 is lane 0 of the vector
                self.line(f"{total} = {names[0]};")
            for name in names[1:]:
                if combine in cbe.BINARY:
                    self.line(f"{total} = {total} {cbe.BINARY[combine]} {name};")
                else:
                    self.line(f"{total} = {cbe.MACRO_BINARY[combine]}({total}, {name});")

    def split_interior(self, op: ForOp, guards: Guards) -> None:
        """A reduction nest whose loads are guarded by padding tests (`padding_guards`):
        written twice, `if (every guard holds everywhere) { the nest, guards taken as
        true } else { the nest as it is }`. A guard is a conjunction of affine
        inequalities of the loops and lanes, so it holds on the nest's whole box of
        iterations when it holds at its corners (and at the first and last lane): the
        tests are written once per corner before the nest. Interior tiles run loads and
        fmas only, the contiguous lanes' loads without per-element tests. (Splitting each
        iteration of a border tile the same way, one test per tap for all lanes, made
        resnet's 16 x 16 conv, all border tiles in 8-lane vectors, 3.0 -> 7.2 ms on PoCL:
        not done.)"""
        ifs, ops, loops = guards
        corners = [sorted({lp.lower, lp.lower + lp.stride * (lp.trip_count - 1)}) for lp in loops]
        tests: list[str] = []
        bounds: list[str] | None = []
        for corner in itertools.product(*corners):
            self.emitting = ()
            for lp, value in zip(loops, corner):
                self.expr[lp.induction_var] = str(value)
            for inner in ops:
                self.op(inner)
            tests += [t for t in self.guard_tests(ifs) if t not in tests]
            if bounds is not None and self.launch.vector is not None:
                found = self.bound_tests(ifs)
                bounds = None if found is None else bounds + [t for t in found if t not in bounds]
        self.splitting = True
        try:
            self.line(f"if ({' && '.join(tests)}) {{")
            self.depth += 1
            self.assumed = set(ifs)
            self.for_(op)
            self.assumed = set()
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            self.border_tiles(op, guards, bounds)
            self.depth -= 1
            self.line("}")
        finally:
            self.splitting, self.assumed, self.in_bounds = False, set(), False

    def border_tiles(self, op: ForOp, guards: Guards, bounds: list[str] | None) -> None:
        """The border copy of `split_interior`, itself written twice when the flat indices
        of its guarded loads lie in their buffers at every corner (`bounds`: then at
        every lane and tap, they are affine) and the copy has masked loads: there they
        need no per-lane fallback (mobilenet's depthwise conv, extracted kernel on PoCL
        basic: 28 -> 19.5 us; the fallback, 8 guarded scalar loads beside each vector
        load, is taken only at the first and last tiles of a buffer)."""
        if bounds:
            mark, masked, vectors = len(self.lines), self.masked, dict(self.vectors)
            self.line(f"if ({' && '.join(bounds)}) {{")
            self.depth += 1
            self.in_bounds = True
            try:
                self.border_nest(op, guards)
            finally:
                self.in_bounds = False
            self.depth -= 1
            self.vectors = vectors  # (the copy's own vectors are not the next copy's)
            if self.masked > masked:
                self.line("} else {")
                self.depth += 1
                self.border_nest(op, guards)
                self.depth -= 1
                self.line("}")
                return None
            del self.lines[mark:]  # (no masked load: one copy)
        self.border_nest(op, guards)
        return None

    def bound_tests(self, ifs: list[scf.IfOp]) -> list[str] | None:
        """`(i) >= 0` and `(i) < size` for the flat index i of each guarded global f32
        load of `ifs` (an `scf.if` yielding a load, `masked_load`'s shape) at the first
        and the last lane of each laned loop its indices vary with, under the values
        bound now (a corner of the window); None when one is not such a load or an
        index is not known here."""
        tests: list[str] = []
        for if_op in ifs:
            true_ops = list(if_op.true_region.block.ops)
            load = true_ops[0] if true_ops else None
            if not isinstance(load, memref.LoadOp) or defined_inside(load.memref, if_op):
                return None
            if not all(_affine_index(i) for i in load.indices):
                return None
            buf = self.buffers.get(load.memref)
            if type(buf) is not Buffer or buf.scalar or not buf.shape or buf.span is not None:
                return None
            size = math.prod(buf.shape)
            deps = [
                lp for lp in self.active if any(lp in self.deps.get(i, ()) for i in load.indices)
            ]
            ends = (sorted({0, self.launch.lanes[lp] - 1}) for lp in deps)
            for combination in itertools.product(*ends):
                self.current.update(zip(deps, combination))
                try:
                    at = buf.at([self[i] for i in load.indices])
                except (KeyError, DlpcError):
                    return None
                flat = at[len(buf.name) + 1 : -1]
                tests += [t for t in (f"({flat}) >= 0", f"({flat}) < {size}") if t not in tests]
        return tests

    def border_nest(self, op: ForOp, guards: Guards) -> None:
        """A border tile's nest. A perfect nest whose guards vary with some of its loops
        only (a conv's window, not its input channels) is written with those loops
        outside (`for kh, kw: if (guards hold for all lanes) for c: <unguarded> else for
        c: <guarded>`): one test per tap and tile instead of one per element. This sums
        a border tile's outputs in another order (taps, then channels) than the interior
        ones (channels, then taps), as the C backend's direct conv reorders its sums:
        within the reference tolerance."""
        ifs, ops, loops = guards
        nest = [op]
        while len(nest[-1].block.ops) == 1 and isinstance(nest[-1].block.first_op, ForOp):
            nest.append(nest[-1].block.first_op)
        inner = [lp for lp in nest if lp not in loops]
        if (
            not inner
            or any(lp not in nest for lp in loops)
            or any(lp in self.launch.lanes for lp in nest)
        ):
            return self.for_(op)
        opened = 0
        for lp in [lp for lp in nest if lp in loops]:
            self.loop_header(lp)
            opened += 1
        for slice_op in ops:
            self.op(slice_op)
        self.line(f"if ({' && '.join(self.guard_tests(ifs))}) {{")
        self.depth += 1
        for assumed in (True, False):
            self.assumed = set(ifs) if assumed else set()
            for lp in inner:
                self.loop_header(lp)
            self.block(nest[-1].block)
            for _ in inner:
                self.depth -= 1
                self.line("}")
            self.assumed = set()
            if assumed:
                self.depth -= 1
                self.line("} else {")
                self.depth += 1
        self.depth -= 1
        self.line("}")
        for _ in range(opened):
            self.depth -= 1
            self.line("}")
        return None

    def loop_header(self, op: ForOp) -> None:
        """`for (...) {` of a plain loop, its induction variable bound; depth + 1."""
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
        self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1

    def guard_tests(self, ifs: list[scf.IfOp]) -> list[str]:
        """The conditions of `ifs` at the first and the last lane of each laned loop they
        vary with (affine in the lane: the lanes between hold when those do)."""
        tests: list[str] = []
        for if_op in ifs:
            deps = self.deps.get(if_op.cond, ())
            ends = (sorted({0, self.launch.lanes[lp] - 1}) for lp in deps)
            for combination in itertools.product(*ends):
                self.current.update(zip(deps, combination))
                test = self[if_op.cond]
                if test not in tests:
                    tests.append(test)
        return tests

    def if_(self, op: scf.IfOp) -> None:
        if op not in self.assumed:
            return super().if_(op)
        for inner in op.true_region.block.ops:  # the guard holds: its true branch inline
            if isinstance(inner, scf.YieldOp):
                for r, v in zip(op.results, inner.operands):
                    self.expr[r] = self[v]
            else:
                self.op(inner)
        return None

    def declare_partials(self, op: ForOp, lanes: int) -> list[tuple]:
        """Before a laned reduction loop: partials 1.. of each accumulator (per
        combination of the lanes it already varies with), starting at the identity;
        partial 0 is the accumulator itself."""
        partials = []
        for acc, combine in self.launch.partials.get(op, []):
            deps = self.deps.get(acc, ())
            elt = element_type(acc)
            t = c_type(elt)
            start = cbe.float_literal(PARTIAL_IDENTITY[combine], elt)
            for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in deps)):
                self.current.update(zip(deps, combination))
                names = [self.buffers[acc].name]
                if op is self.launch.vector:  # one vector: lane 0 the accumulator
                    vector = self.names.fresh(acc.name_hint, "acc")
                    lanes_init = ", ".join([names[0], *[start] * (lanes - 1)])
                    self.line(f"{t}{lanes} {vector} = ({t}{lanes})({lanes_init});")
                    names = [f"{vector}.s{k:X}" for k in range(lanes)]
                else:
                    for _ in range(1, lanes):
                        names.append(self.names.fresh(acc.name_hint, "acc"))
                        self.line(f"{t} {names[-1]} = {start};")
                partials.append((acc, deps, combination, names))
        return partials

    def for_(self, op: ForOp) -> None:
        if op in self.launch.lanes:
            return self.laned(op)
        if self.active and op.reduction is not None and not self.splitting:
            guards = padding_guards(op)
            if guards:
                return self.split_interior(op, guards)
        if op in self.launch.barrier_before and self.launch.local_size is not None:
            self.line("barrier(CLK_LOCAL_MEM_FENCE);")
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        if op in self.launch.mapped:
            gid = self.launch.mapped[op]
            expr = (
                gid
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * (long){gid}"
            )
            self.line(f"const long {iv} = (long){expr};")
            self.block(op.block)
            return
        local = self.launch.local_size
        lid = local[-1] if local else 1
        if op in self.launch.cooperative:  # split the copy's outer loop over the group
            assert local is not None  # (a cooperative copy is planned only in a work-group)
            lid_expr = f"(long)get_local_id({len(local) - 1})"
            start = (
                lid_expr
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * {lid_expr}"
            )
            self.line(f"for (long {iv} = {start}; {iv} < {op.upper}; {iv} += {op.stride * lid}) {{")
        else:
            step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
            self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1
        self.block(op.block)
        self.depth -= 1
        self.line("}")


@dataclass
class Chain:
    """Consecutive kernels run as one launch of one work-item (`OpenCLEmitter.emit`'s
    `chains`): the kernel `name` walks each member's NDRange in turn and calls its body.
    `args` are its parameters in order: a buffer of @main and the permutation it is read
    in (`Launch.relayout`), or None; each once."""

    name: str
    kernels: list[KernelOp]
    args: list[tuple[SSAValue, tuple[int, ...] | None]]
    # work-groups of one work-item each (`batch_split`): group g runs its share of
    # every member's first NDRange dimension (images g * B / parts ...), 1: the whole
    parts: int = 1
    # a team chain (`OpenCLEmitter.team_chain`): launched once on each of `team` serial
    # devices, the members' work-items shared among those that join; 1: no team
    team: int = 1
    chunks: tuple[int, ...] = ()  # a team chain's chunks per member


def _nbytes(value: SSAValue) -> int:
    shape, elt = cbe.memref_info(value.type)
    return math.prod(shape) * cbe._size_of(elt)


#: a kernel reading more resident bytes (weights) than this is no member of a split
#: chain: each work-group reads them again, where launched alone its work-items split the
#: outputs and read each weight once. mlp at batch 32 on PoCL pthread (784x256 and
#: 256x256 weights): 0.33 ms launched alone, 0.42 split (load 3)
MAX_SPLIT_RESIDENT = 256 * 1024


def batch_split(
    kernel: KernelOp, launch: Launch, parts: int, resident: set[SSAValue]
) -> int | None:
    """The batch B when `parts` work-groups can each run their range of images of this
    kernel with no other group's data: its first NDRange dimension is a loop from 0 by 1
    over B iterations, its work-items (B / lanes) split evenly into `parts`, and every
    buffer it loads or stores that is not resident (parameters, globals: read only) has
    B as its first dimension and that loop's variable as its first index. Then a chain
    of such kernels with the same B needs no barrier: group g writes and reads images
    g * B / parts ... only. Else None."""
    if not launch.mapped or launch.local_size is not None or launch.shared:
        return None
    first = next((lp for lp, e in launch.mapped.items() if e == "get_global_id(0)"), None)
    if first is None or first.lower != 0 or first.stride != 1:
        return None
    batch = first.trip_count
    if batch % parts or launch.global_size[0] % parts:
        return None
    iv = first.induction_var
    weights = {
        o.memref for o in kernel.walk() if isinstance(o, memref.LoadOp) and o.memref in resident
    }
    if sum(_nbytes(v) for v in weights) > MAX_SPLIT_RESIDENT:
        return None  # (every group would read them again)
    for op in kernel.walk():
        if not isinstance(op, memref.LoadOp | memref.StoreOp):
            continue
        if defined_inside(op.memref, kernel) or op.memref in resident:
            continue
        if shape_of(op.memref)[:1] != (batch,) or not op.indices or op.indices[0] is not iv:
            return None
    return batch


#: work-groups of a split chain per compute unit, the most that every member's batch
#: and first NDRange dimension divide into (1 always does: `batch_split`): a worker
#: that wakes late or is preempted on a shared machine leaves its share to the other
SPLIT_GROUPS_PER_UNIT = (8, 4, 2, 1)


#: a chain's parameters at most (OpenCL guarantees 1024 bytes of kernel arguments: 128
#: pointers); a longer run of kernels is cut into several chains
MAX_CHAIN_ARGS = 120

#: a team chain's synchronisation words (longs of the `sync` buffer, fine-grained SVM
#: that the host and both devices' kernels read and write, `OpenCLEmitter.team_chain`):
#: the call id the host starts (TEAM_GO), the call id the caller's launch has started
#: (TEAM_STARTED), the argument version the host expects (TEAM_VERSION), what the last
#: helper launch did (TEAM_RESULT: TEAM_JOINED a call, TEAM_IDLE: gave up waiting,
#: TEAM_STALE: armed with old arguments), the chunks helpers have run (TEAM_HELPED), the
#: last call id a helper saw (TEAM_SEEN), then two counters per member from TEAM_COUNTERS
#: on
TEAM_GO, TEAM_STARTED, TEAM_VERSION, TEAM_RESULT, TEAM_HELPED, TEAM_SEEN = 0, 1, 2, 3, 4, 5
TEAM_COUNTERS = 8
TEAM_JOINED, TEAM_IDLE, TEAM_STALE = 1, 3, 4
#: chunks a member's work-items are taken in, at most (one atomic each)
TEAM_CHUNKS = 16


def team_sync_words(members: int) -> int:
    """The longs of a team chain's `sync` buffer for `members` kernels."""
    return TEAM_COUNTERS + 2 * members


class OpenCLEmitter:
    def __init__(self, module: ModuleOp, vector_width: int = 8):
        self.module = module
        # the lanes by the device's float vector width (`lane_profile`)
        self.profile = lane_profile(vector_width)
        self.top = Scope()
        self.launches: dict[KernelOp, Launch] = {}
        self.parts: list[str] = []
        self.resident: set[SSAValue] = set()
        # kernels written as a body function beside their `__kernel`: kernel -> (body
        # name, its parameters' types, (buffer, permutation) per parameter)
        self.bodies: dict[KernelOp, tuple[str, list[str], list]] = {}
        self.chains: list[Chain] = []
        self.groups = 1
        self.team = 1
        self.batches: dict[KernelOp, int] = {}  # chained kernels' batch (`batch_split`)

    def emit(
        self, chains: list[list[KernelOp]] | None = None, parts: int = 1, team: int = 1
    ) -> str:
        """The program. `chains`: runs of consecutive kernels of @main (no copy between
        them) that the runtime launches as one (`Chain`): on a device where every
        launch runs in the calling thread (PoCL's basic driver) a launch costs about
        1.5 us of PoCL and pyopencl, and the kernels of a small model run for less
        (transformer at batch 1: 16 launches, about 20 us of kernels). Each member is
        written once, as a body function taking its work-item ids, called by its own
        `__kernel` (get_global_id) and by the chain's (loops over the NDRange). Kernels
        with `__local` stages stay out of chains. `parts` > 1 (a device with that many
        compute units): only kernels that `batch_split` into `parts` images ranges are
        chained, and the chain runs as `parts` work-groups, each its range of images
        through every member with no barrier between them (one hand-off to PoCL
        pthread's workers a call instead of one a kernel). `team` > 1: each chain is a
        team chain (`team_chain`), of one kernel too."""
        self.groups = parts
        self.team = team
        main = cbe.find_main(self.module)
        self.resident = resident_values(self.module)
        out = [c_comment("generated by dlpc (OpenCL backend); do not edit"), PRELUDE, MATH_MACROS]
        chained = {k for run in chains or [] for k in run if len(run) > 1 or team > 1}
        for k in (op for op in main.walk() if isinstance(op, KernelOp)):
            self.kernel(k, k in chained)
        for run in chains or []:
            self.chain_runs(run)
        if any("double" in part for part in self.parts):  # f64 models need the extension
            out.insert(1, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if any(chain.team > 1 for chain in self.chains):  # (a team's counters)
            out.insert(1, "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable")
        return "\n".join([*out, *self.parts])

    def chain_runs(self, run: list[KernelOp]) -> None:
        """`Chain`s for a run of kernels: split at kernels without a body and where the
        parameters would pass `MAX_CHAIN_ARGS`; a piece of one kernel is no chain."""
        piece: list[KernelOp] = []
        args: dict[tuple, str] = {}  # (buffer, permutation) -> parameter type
        for k in [*run, None]:
            if k is not None and k in self.bodies:
                _, types, keys = self.bodies[k]
                new = {key for key in keys if key not in args}
                same = not piece or self.batches.get(k) == self.batches.get(piece[0])
                if len(args) + len(new) <= MAX_CHAIN_ARGS and same:
                    piece.append(k)
                    for key, t in zip(keys, types):
                        # (written by any member: not const)
                        args[key] = t if args.get(key, t) == t else t.replace("const ", "")
                    continue
            if len(piece) > 1 or (piece and self.team > 1):
                self.chain(piece, args)
            piece, args = [], {}
            if k is not None and k in self.bodies:
                _, types, keys = self.bodies[k]
                piece, args = [k], dict(zip(keys, types))

    def _chain_head(self, args: dict[tuple, str]):
        """A chain kernel's name, its scope and its buffer parameters (one per (buffer,
        permutation) of `args`, no restrict: the members' buffers may alias)."""
        name = self.top.fresh("chain", kind="kernel")
        names = Scope(self.top.used)
        params, arg_name = [], {}
        for (v, perm), t in args.items():
            arg_name[v, perm] = names.fresh(v.name_hint, "arg")
            params.append(f"__global {t} *{arg_name[v, perm]}")
        return name, names, params, arg_name

    def _chain_kernel(self, note: str, name: str, params: list[str], lines: list[str]) -> None:
        """Append a chain's `__kernel` function: its comment, signature and body lines."""
        self.parts.append(
            f"{c_comment(note)}\n__kernel void {name}({', '.join(params)})\n{{\n"
            + "\n".join(lines)
            + "\n}\n"
        )

    def chain(self, kernels: list[KernelOp], args: dict[tuple, str]) -> None:
        """One `__kernel` of one work-item calling each member's body over its NDRange."""
        if self.team > 1:
            self.team_chain(kernels, args)
            return
        name, names, params, arg_name = self._chain_head(args)
        lines = []
        part = names.fresh("part")
        groups = 1
        if self.groups > 1:  # more groups than units: PoCL deals them out as workers come
            groups = next(
                g
                for g in (self.groups * m for m in SPLIT_GROUPS_PER_UNIT)
                if all(
                    self.batches[k] % g == 0 and self.launches[k].global_size[0] % g == 0
                    for k in kernels
                )
            )
            lines.append(f"  const long {part} = (long)get_global_id(0);")
        for k in kernels:
            body, _, keys = self.bodies[k]
            sizes = self.launches[k].global_size if self.launches[k].mapped else ()
            ids = [names.fresh(f"id{d}") for d in range(len(sizes))]
            indent = "  "
            for d, (iv, n) in enumerate(zip(ids, sizes)):
                first, last = "0", str(n)
                if d == 0 and groups > 1:  # this group's images
                    share = n // groups
                    first, last = f"{part} * {share}", f"({part} + 1) * {share}"
                lines.append(f"{indent}for (long {iv} = {first}; {iv} < {last}; {iv}++)")
                indent += "  "
            call_args = [arg_name[key] for key in keys] + ids
            lines.append(f"{indent}{body}({', '.join(call_args)});")
        note = (
            "chain of kernels "
            + ", ".join(k.sym for k in kernels)
            + f": global ({groups}), local (1)"
        )
        self._chain_kernel(note, name, params, lines)
        self.chains.append(Chain(name, kernels, list(args), groups))

    def team_chain(self, kernels: list[KernelOp], args: dict[tuple, str]) -> None:
        """A chain that `self.team` serial devices (PoCL basic: each runs its launch in
        the thread that enqueues it) run together, one launch each from its own host
        thread (`opencl_rt.Team`): `role` 0 is the caller's launch, which runs the whole
        call if need be; role 1 a helper's, armed ahead of calls, which helps with every
        call that starts while it waits (at most `spin` reads) and returns after that.

        The `sync` words (longs of fine-grained SVM, `TEAM_*`): the caller's host writes
        the call id to `sync[TEAM_GO]`; the caller's launch sets each member's two
        counters (work-items taken, work-items done) to (id << 32) + 0 and then
        publishes the id in `sync[TEAM_STARTED]`. Each launch in the call takes chunks
        of a member's flattened NDRange (`atom_cmpxchg` of the taken counter, only while
        its upper half is this call's id), runs them, counts them done (`atom_add`),
        and when none are left to take waits until all are done before the next member
        (a launch that finds another call's id there left the call: it was over). The
        caller's launch returns when the last member is done. Every work-item runs
        once, with the same operations as on one device: the results are the same."""
        name, names, params, arg_name = self._chain_head(args)
        sync, role, spin, version = (names.fresh(n) for n in ("sync", "role", "spin", "version"))
        params += [
            f"__global volatile long *{sync}",
            f"const int {role}",
            f"const int {spin}",
            f"const int {version}",
        ]
        cid, seen, n, v, d, k, run = (
            names.fresh(x) for x in ("id", "seen", "n", "v", "d", "k", "run")
        )
        # by images (`batch_split`, `self.groups` of them): a chunk is a range of images
        # through every member, one pair of counters, no wait between members
        groups = self.groups if self.groups > 1 else 0
        counters = 2 if groups else 2 * len(kernels)
        go, started, ver, res = (
            f"{sync}[{i}]" for i in (TEAM_GO, TEAM_STARTED, TEAM_VERSION, TEAM_RESULT)
        )
        tag = f"((ulong){cid} << 32)"
        chunks: list[int] = []
        lines = [
            f"  ulong {cid}, {seen} = 0;",
            f"  int {n} = 0;",
            f"  if ({role} == 0) {{  /* the caller's launch: start the call */",
            f"    {cid} = (ulong){go};",
            f"    for (int {k} = 0; {k} < {counters}; {k}++)",
            f"      {sync}[{TEAM_COUNTERS} + {k}] = (long){tag};",
            "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
            f"    {started} = (long){cid};",
            "  }",
            "  for (;;) {",
            f"    if ({role} != 0) {{  /* a helper: wait for a call it has not seen */",
            f"      {cid} = (ulong){started};",
            f"      if ({cid} == {seen}) {{",
            f"        if (++{n} > {spin}) {{ {res} = {TEAM_IDLE}; return; }}",
            "        continue;",
            "      }",
            f"      if ({ver} != {version}) {{ {res} = {TEAM_STALE}; return; }}",
            f"      {seen} = {cid};",
            f"      {sync}[{TEAM_SEEN}] = (long){cid};",
            f"      {n} = 0;",
            "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
            "    }",
            f"    int {run} = 1;",
        ]
        if groups:
            lines += self._team_images(kernels, arg_name, names, sync, role, cid, run, groups)
            chunks.append(groups)
        for m, kern in enumerate([] if groups else kernels):
            body, _, keys = self.bodies[kern]
            sizes = self.launches[kern].global_size if self.launches[kern].mapped else ()
            total = math.prod(sizes)
            chunk = max(1, -(-total // TEAM_CHUNKS))
            chunks.append(-(-total // chunk))
            taken, done = (f"{sync}[{TEAM_COUNTERS + 2 * m + j}]" for j in (0, 1))
            ids = [names.fresh(f"id{dim}") for dim in range(len(sizes))]
            flat, last = names.fresh("f"), names.fresh("last")
            lines += [
                f"    while ({run}) {{  /* member {m}: {kern.sym}, {total} work-items */",
                f"      const ulong {v} = (ulong){taken};",
                f"      if (({v} >> 32) != ({cid} & 0xffffffffUL) || ({v} & 0xffffffffUL) >= "
                f"{total}UL) break;",
                f"      const ulong {last} = min({v} + {chunk}UL, {tag} + {total}UL);",
                f"      if ((ulong)atom_cmpxchg(&{taken}, (long){v}, (long){last}) != {v}) "
                "continue;",
                f"      for (long {flat} = (long)({v} & 0xffffffffUL); "
                f"{flat} < (long)({last} & 0xffffffffUL); {flat}++) {{",
            ]
            inner = 1
            for dim in reversed(range(len(sizes))):
                value = flat if inner == 1 else f"{flat} / {inner}"
                if dim > 0:
                    value = f"({value}) % {sizes[dim]}"
                lines.append(f"        const long {ids[dim]} = {value};")
                inner *= sizes[dim]
            call_args = [arg_name[key] for key in keys] + ids
            lines += [
                f"        {body}({', '.join(call_args)});",
                "      }",
                "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
                f"      atom_add(&{done}, (long)({last} - {v}));",
                f"      if ({role} != 0) atom_inc(&{sync}[{TEAM_HELPED}]);",
                "    }",
                f"    while ({run}) {{  /* until member {m} is done (or the call is over) */",
                f"      const ulong {d} = (ulong){done};",
                f"      if ({d} == {tag} + {total}UL) break;",
                f"      if (({d} >> 32) != ({cid} & 0xffffffffUL)) {run} = 0;",
                "    }",
                "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
            ]
        lines += [
            f"    if ({role} == 0) return;",
            f"    {res} = {TEAM_JOINED};",
            "  }",
        ]
        note = (
            "team chain of kernels "
            + ", ".join(k.sym for k in kernels)
            + f": global (1), local (1), on {self.team} devices"
        )
        self._chain_kernel(note, name, params, lines)
        self.chains.append(Chain(name, kernels, list(args), groups or 1, self.team, tuple(chunks)))

    def _team_images(self, kernels, arg_name, names, sync, role, cid, run, groups) -> list[str]:
        """The work of a team chain by images: chunk g (of `groups`, taken as the members'
        are in `team_chain`) runs images g * B / groups ... through every member; the
        members split by images (`batch_split`), so no chunk reads another's data and
        only the last chunk done ends the call (one wait a call, not one a member; a
        helper preempted while it runs a chunk holds the call up once)."""
        g, v, d = (names.fresh(x) for x in ("g", "v", "d"))
        taken, done = (f"{sync}[{TEAM_COUNTERS + j}]" for j in (0, 1))
        tag = f"((ulong){cid} << 32)"
        lines = [
            f"    while ({run}) {{  /* a range of images through every member */",
            f"      const ulong {v} = (ulong){taken};",
            f"      if (({v} >> 32) != ({cid} & 0xffffffffUL) || ({v} & 0xffffffffUL) >= "
            f"{groups}UL) break;",
            f"      if ((ulong)atom_cmpxchg(&{taken}, (long){v}, (long)({v} + 1UL)) != {v}) "
            "continue;",
            f"      const long {g} = (long)({v} & 0xffffffffUL);",
        ]
        for kern in kernels:
            body, _, keys = self.bodies[kern]
            sizes = self.launches[kern].global_size if self.launches[kern].mapped else ()
            ids = [names.fresh(f"id{dim}") for dim in range(len(sizes))]
            indent = "      "
            for dim, (iv, size) in enumerate(zip(ids, sizes)):
                first, last = "0", str(size)
                if dim == 0:
                    share = size // groups
                    first, last = f"{g} * {share}", f"({g} + 1) * {share}"
                lines.append(f"{indent}for (long {iv} = {first}; {iv} < {last}; {iv}++)")
                indent += "  "
            lines.append(f"{indent}{body}({', '.join([arg_name[key] for key in keys] + ids)});")
        lines += [
            "      mem_fence(CLK_GLOBAL_MEM_FENCE);",
            f"      atom_inc(&{done});",
            f"      if ({role} != 0) atom_inc(&{sync}[{TEAM_HELPED}]);",
            "    }",
            f"    while ({run}) {{  /* until every range is done (or the call is over) */",
            f"      const ulong {d} = (ulong){done};",
            f"      if ({d} == {tag} + {groups}UL) break;",
            f"      if (({d} >> 32) != ({cid} & 0xffffffffUL)) {run} = 0;",
            "    }",
            "    mem_fence(CLK_GLOBAL_MEM_FENCE);",
        ]
        return lines

    def kernel(self, k: KernelOp, chained: bool = False) -> None:
        if write_fused(self, k, chained):  # a Winograd chain as one kernel (opencl_winograd)
            return
        fname = self.top.fresh(k.sym, kind="kernel")
        launch = plan_launch(k, fname, resident=self.resident, profile=self.profile)
        self.launches[k] = launch
        free, stored = cbe.kernel_uses(k)
        w = KernelWriter(self, Scope(self.top.used), f"kernel '{k.sym}'", launch)
        bodied = chained and launch.local_size is None and not launch.shared
        if bodied and self.groups > 1:
            batch = batch_split(k, launch, self.groups, self.resident)
            bodied = batch is not None
            if batch is not None:
                self.batches[k] = batch
        ids: list[str] = []
        if bodied:  # the work-item ids are the body's parameters
            dims = len(launch.global_size) if launch.mapped else 0
            ids = [w.names.fresh(f"id{d}") for d in range(dims)]
            for lp, expr in list(launch.mapped.items()):
                launch.mapped[lp] = ids[int(expr[len("get_global_id(") : -1])]
        params = []
        for k_arg, v in enumerate(free):
            if not isinstance(v.type, MemRefType):
                raise DlpcError(
                    f"error: opencl backend: kernel '{k.sym}' uses scalar {v} from outside"
                )
            shape, elt = cbe.memref_info(v.type)
            name = w.names.fresh(v.name_hint, f"arg{k_arg}")
            perm = launch.relayout.get(v)
            if perm:
                shape = tuple(shape[d] for d in perm)
                w.buffers[v] = PermutedBuffer(name, shape, perm=perm)
            else:
                w.buffers[v] = Buffer(name, shape)
            const = "" if v in stored else "const "
            params.append(f"__global {const}{c_type(elt)} *restrict {name}")
            launch.args.append(v)
        for stage in launch.shared:
            shape, elt = cbe.memref_info(stage.type)
            name = w.names.fresh(stage.name_hint, "stage")
            w.line(f"__local {c_type(elt)} {name}[{max(math.prod(shape), 1)}];")
            w.buffers[stage] = Buffer(name, shape)
        w.block(k.block)
        local = "(" + ", ".join(map(str, launch.local_size)) + ")" if launch.local_size else "(-)"
        note = (
            cbe.kernel_note(k)
            + f": global ({', '.join(map(str, launch.global_size))}), local {local}"
        )
        if not bodied:
            signature = f"__kernel void {fname}({', '.join(params) or 'void'})"
            self.parts.append(w.function(c_comment(note), signature))
            return
        body = self.top.fresh(f"{k.sym}_body", kind="kernel")
        body_params = [*params, *(f"const long {iv}" for iv in ids)]
        signature = f"static inline void {body}({', '.join(body_params) or 'void'})"
        self.parts.append(w.function(c_comment(note), signature))
        names = [p.rsplit(" ", 1)[1] for p in params]
        call = [*names, *(f"(long)get_global_id({d})" for d in range(len(ids)))]
        self.parts.append(
            f"__kernel void {fname}({', '.join(params) or 'void'})\n{{\n"
            f"  {body}({', '.join(call)});\n}}\n"
        )
        types = [p[len("__global ") :].rsplit(" *restrict ", 1)[0] for p in params]
        keys = [(v, launch.relayout.get(v)) for v in launch.args]
        self.bodies[k] = (body, types, keys)


def emit_opencl(module: ModuleOp) -> str:
    """The OpenCL C program for a loop-level module (see the module docstring)."""
    return OpenCLEmitter(module).emit()


@dataclass(frozen=True)
class OpenCLTarget(Target):
    """`dlpc-opt -t opencl`: print the OpenCL C kernels of a loop-level module."""

    name = "opencl"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_opencl(module))
