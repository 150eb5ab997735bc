"""What the default schedules know about a kernel's loop nest: its spatial and
reduction loops (`analyse`), its work, divisor choices, buffer tokens for scripts, and
the convolution facts every conv template shares (the input and output buffers, whether
the input is strided, when a conv is worth two threads).

Read-only: nothing here changes IR. Used by `default.py` (the dispatcher and the gemm
and reduction templates), `conv.py`, `depthwise.py` and the tuner (`tune/space.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref

from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes.schedule._common import affine, buffers_accessed, depends_on, is_reduction


@dataclass
class Nest:
    """A single-nest reduction kernel: spatial loops, then reduction loops (names)."""

    spatial: list[str]
    reduce: list[str]
    trips: dict[str, int]


def analyse(kernel: KernelOp) -> Nest | None:
    """The loop structure of a te-to-loop kernel (read-only), or None if it has none."""
    tops = [op for op in kernel.block.ops if isinstance(op, ForOp)]
    if len(tops) != 1:
        return None
    spatial, reduce = [], []
    loop: ForOp | None = tops[0]
    while loop is not None and not is_reduction(loop):
        spatial.append(loop)
        inner = [op for op in loop.block.ops if isinstance(op, ForOp)]
        loop = inner[0] if len(inner) == 1 else None
    while loop is not None and is_reduction(loop):
        reduce.append(loop)
        inner = [op for op in loop.block.ops if isinstance(op, ForOp)]
        loop = inner[0] if len(inner) == 1 else None
    if not spatial:
        return None
    names = [lp.loop_name for lp in spatial + reduce]
    if any(n is None for n in names):
        return None
    return Nest(
        [lp.loop_name for lp in spatial],
        [lp.loop_name for lp in reduce],
        {lp.loop_name: lp.trip_count for lp in spatial + reduce},
    )


def kernel_work(kernel: KernelOp) -> int:
    total = 0
    for top in (op for op in kernel.block.ops if isinstance(op, ForOp)):
        total += nest_work(top)
    return total


def nest_work(loop: ForOp) -> int:
    inner = [op for op in loop.block.ops if isinstance(op, ForOp)]
    return loop.trip_count * max(1, sum(nest_work(lp) for lp in inner))


def largest_divisor(n: int, limit: int, multiple_of: int = 1) -> int:
    best = multiple_of if n % multiple_of == 0 else 1
    for d in range(1, min(n, limit) + 1):
        if n % d == 0 and d % multiple_of == 0:
            best = d
    return best


def first_divisor(n: int, choices) -> int:
    return next((c for c in choices if n % c == 0), 1)


def buffer_token(kernel: KernelOp, value) -> str:
    """`@n`: the buffer's position in the kernel's access order (stable while the script
    runs, and the same in a kernel extracted for tuning and in the whole model)."""
    return f"@{buffers_accessed(kernel, external=True).index(value)}"


# The register tile of `conv_tile_script`: at most this many vector accumulators
# (AVX-512 has 32 registers; the rest hold the input vectors and the broadcast weight).
CONV_TILE_VECTORS = 24
# Bytes of the whole-image im2col buffer above which the tiled conv is not used.
CONV_PACK_BYTES = 8 << 20
# Multiply-adds below which a conv stays on one thread: with the runtime's spinning
# workers a fork/join costs about a fifth of a 256K-MAC conv
# (docs/design/schedules.md#conv-parallel-macs).
CONV_PARALLEL_MACS = 1 << 18
# Bytes of one image's staged input from which a batch stages it per image inside the
# parallel image loop (each thread its own images) instead of every image at once before
# the fused (image, row) loop; resnet's stem (a 14 KB copy) was slower that way, so it
# stays below (docs/design/schedules.md#conv-stage-split).
CONV_STAGE_SPLIT_BYTES = 32 << 10
# Output rows per tile at most, for a ragged row (8 beat 4 on LeNet:
# docs/design/schedules.md#conv-ragged-rows).
CONV_RAGGED_ROWS = 8
# Channel blocks of a 1x1 conv read in place from which each output row's input rows are
# copied together first (when they fit CONV_ROWS_PANEL_BYTES): the channels lie a plane
# apart (4 KB for 32x32, one L1 set), so a tile's reduction thrashes L1; the copy pays
# where enough blocks reuse it (docs/design/schedules.md#conv-row-stage).
CONV_ROW_STAGE_BLOCKS = 4
# Bytes of the input rows a tile of CONV_RAGGED_ROWS rows of a 1x1 conv reads (channels x
# rows x row) up to which a one-vector row is tiled several rows at a time, and of a row
# tile's input rows up to which they are copied together: beyond, the rows leave L1
# (docs/design/schedules.md#conv-pointwise-rows).
CONV_ROWS_PANEL_BYTES = 16 << 10


def parallel_pays(nest: Nest) -> bool:
    return math.prod(nest.trips.values()) >= CONV_PARALLEL_MACS


def conv_input(kernel: KernelOp, nest: Nest):
    """The buffer read along the last spatial loop and the reduction loops (a conv's or
    pooling's input), or None."""
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    last, red = loops[nest.spatial[-1]].induction_var, loops[nest.reduce[-1]].induction_var
    for op in loops[nest.reduce[-1]].walk():
        if (
            isinstance(op, memref.LoadOp)
            and any(depends_on(i, last) for i in op.indices)
            and any(depends_on(i, red) for i in op.indices)
        ):
            return op.memref
    return None


def conv_output(kernel: KernelOp):
    stores = [
        op
        for op in kernel.walk()
        if isinstance(op, memref.StoreOp) and op.memref in buffers_accessed(kernel, external=True)
    ]
    return stores[0].memref if stores else None


def conv_load(kernel: KernelOp, x) -> memref.LoadOp | None:
    return next(
        (op for op in kernel.walk() if isinstance(op, memref.LoadOp) and op.memref is x), None
    )


def is_strided(kernel: KernelOp, nest: Nest) -> bool:
    """Does the input advance by more than one element per output column (stride > 1)?
    Then vectorizing the output row reads the input with a stride; packing fixes it."""
    x = conv_input(kernel, nest)
    w = next(lp for lp in kernel.loops() if lp.loop_name == nest.spatial[-1])
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp) and op.memref is x:
            form = affine(op.indices[-1])
            return form is not None and form.terms.get(w.induction_var, 1) > 1
    return False


def nhwc_reduction_loads(kernel: KernelOp, nest: Nest):
    """The loads of an NHWC-shaped conv nest (spatial n, h, w, c, then reductions whose
    innermost loop multiplies) that use a reduction variable, each as (load, uses c,
    uses h, uses w); None when the nest is not of that shape. The NHWC conv and
    depthwise templates tell their input from their weight by these uses."""
    if len(nest.spatial) != 4 or not nest.reduce:
        return None
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    inner = loops[nest.reduce[-1]]
    if not any(isinstance(op, arith.MulfOp) for op in inner.walk()):
        return None
    c, h, w = (loops[nest.spatial[i]].induction_var for i in (3, 1, 2))
    red = [loops[r].induction_var for r in nest.reduce]

    def uses(op: memref.LoadOp, ivs) -> bool:
        return any(depends_on(i, v) for i in op.indices for v in ivs)

    return [
        (op, uses(op, [c]), uses(op, [h]), uses(op, [w]))
        for op in inner.walk()
        if isinstance(op, memref.LoadOp) and uses(op, red)
    ]
