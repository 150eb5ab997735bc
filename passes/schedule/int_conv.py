"""Integer convolution template of the default schedule (`default.py` tries it first for a
kernel it fits): graph-fold-qdq's fused int8 convs (`conv_integer` + rescale + bias +
activation + the next layer's requantization, one kernel with an i32 accumulator).

The float templates (`conv.py`) look for the float product (`arith.mulf`) and accumulate
in the output; an integer conv whose i32 sums are requantized to i8 cannot. Here
`decompose` gives the sums a kernel-local i32 buffer (`sums`), and the register-tiled
direct conv of the float template is rebuilt over it: per output row, a block of `cb`
output channels x the row accumulates in an i32 tile (`cache_write` of `sums`) around
all reduction loops, the channels unrolled (one broadcast weight each) and the row
vectorized (16 i32 lanes: GCC widens the i8 products); a padded input is staged as a
padded copy (`cache_read`: quant_to_te reads the padding as the zero point, a
constant), so the row reads no guard. The epilogue nest requantizes the sums. Images
are parallel (each thread staging its own), else the rows of one image.

Requires: an NCHW conv nest (spatial n, c, h, w; reductions), stride 1, an integer
product (`arith.muli`) in the innermost reduction loop, i32 sums stored as another type.
Raises `ScheduleError` otherwise.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref

from dlpc.dialects.loop import KernelOp
from dlpc.dialects.typed import element_type
from dlpc.passes.schedule._common import ScheduleError, guarded
from dlpc.passes.schedule.nest import (
    Nest,
    buffer_token,
    conv_input,
    conv_load,
    conv_output,
    is_strided,
    largest_divisor,
    parallel_pays,
)
from dlpc.passes.schedule.tensorize import LANES

# i32 vector accumulators of the tile (as CONV_TILE_VECTORS: of 32 zmm registers, the
# rest hold the widened input and the broadcast weights)
INT_TILE_VECTORS = 24


def _integer_sums(kernel: KernelOp, nest: Nest) -> bool:
    """Is the innermost reduction an integer product summed in an i32 accumulator that
    is stored as another type (what `decompose` gives a `sums` buffer)?"""
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    inner = loops[nest.reduce[-1]]
    if not any(isinstance(op, arith.MuliOp) for op in inner.walk()):
        return False
    if any(isinstance(op, arith.MulfOp) for op in inner.walk()):
        return False
    accs = [
        op
        for op in kernel.walk()
        if isinstance(op, memref.AllocaOp) and not op.memref.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
    ]
    out = conv_output(kernel)
    return (
        len(accs) == 1
        and out is not None
        and str(element_type(accs[0].memref)) == "i32"
        and element_type(out) != element_type(accs[0].memref)
    )


def int_conv_script(kernel: KernelOp, nest: Nest, threads: int = 2) -> str:
    """The integer register-tiled direct conv (module docstring) as a schedule script."""
    K = kernel.sym
    x = conv_input(kernel, nest)
    if x is None or len(nest.spatial) != 4 or not nest.reduce:
        raise ScheduleError(f"kernel '{K}' is not convolution-shaped")
    if not _integer_sums(kernel, nest):
        raise ScheduleError(f"kernel '{K}' is no integer product with requantized i32 sums")
    if is_strided(kernel, nest):
        raise ScheduleError(f"kernel '{K}': a strided integer conv (no template)")
    load = conv_load(kernel, x)
    assert load is not None
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    n, c, h, w = nest.spatial
    if any(i is loops[c].induction_var for i in load.indices):
        raise ScheduleError(f"kernel '{K}': a depthwise integer conv (no template)")
    W = nest.trips[w]
    wt = W if W <= 4 * LANES else largest_divisor(W, 4 * LANES, LANES)
    if wt < LANES and wt < W:
        raise ScheduleError(f"kernel '{K}': row of {W} does not tile by {LANES}")
    pieces = wt // LANES + bin(wt % LANES).count("1")  # a 28-wide row: 16 + 8 + 4
    cb = largest_divisor(nest.trips[c], max(1, INT_TILE_VECTORS // pieces))
    lines = [f"decompose {K}"]
    inner_c, outer_c = [c], []
    if cb < nest.trips[c]:
        lines.append(f"split {K}/{c} by {cb} -> {c}o, {c}i")
        inner_c, outer_c = [f"{c}i"], [f"{c}o"]
    inner_w, outer_w = w, []
    if wt < W:
        lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
        inner_w, outer_w = f"{w}i", [f"{w}o"]
    tile = [n, h, *outer_c, *outer_w]
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + inner_c + [inner_w])}")
    if guarded(load, kernel):  # padded: a padded copy of the image, read unguarded
        lines.append(f"cache_read {K}/{n} {buffer_token(kernel, x)} -> {K}_xp")
    lines.append(f"cache_write {K}/{tile[-1]} sums -> {K}_acc")
    lines += [f"unroll {K}/{ci}" for ci in inner_c]
    lines.append(f"vectorize {K}/{inner_w}")
    lines.append(f"serial {K}")
    if nest.trips[n] >= threads and parallel_pays(nest):  # a batch: images per thread
        lines.append(f"parallel {K}/{n}")
    elif nest.trips[h] >= threads and parallel_pays(nest):
        lines.append(f"parallel {K}/{h}")
    return "\n".join(lines)
