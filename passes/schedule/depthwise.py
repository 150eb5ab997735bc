"""The depthwise convolution template of the default schedule (`default.py` picks it
through `conv.conv_tile_script` when the input channel follows the output channel).
Returns a schedule script or raises `ScheduleError`.
"""

from __future__ import annotations

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import ScheduleError, guarded
from dlpc.passes.schedule.nest import Nest, buffer_token, is_strided, largest_divisor

# Vector pieces of one depthwise tile (rows x the pieces GCC splits a row into: 28 is
# 16 + 8 + 4). Few: the unrolled window loads every input vector once per tap (GCC does
# not reuse a load across the rows of a tile), so more rows only add register pressure.
# 1 thread, in-process, min of 5 medians (vs 16): 32x32 rows (rb 2) 0.96x, 28x28 (2)
# 0.84-0.95x, 56x56 (1) 0.82-0.87x; 24 made 14x14 1.8x slower.
DEPTHWISE_TILE_VECTORS = 6
# Output rows per tile at most (a narrow row: the whole window is unrolled per row).
DEPTHWISE_ROWS = 8
# Multiply-adds above which a depthwise conv runs on two threads. A depthwise MAC costs
# more time than a dense conv's (9 FMAs per output, the padded copy and the epilogue per
# output), so the threshold is below CONV_PARALLEL_MACS: mobilenet's 32x32x32 3x3 layer
# (295K MACs, ~11 us on one thread) already gains from two.
DEPTHWISE_PARALLEL_MACS = 1 << 18


def depthwise_tile_script(kernel: KernelOp, nest: Nest, x, out, load, lanes: int = 16) -> str:
    """Depthwise conv, NCHW (the input channel follows the output channel), stride 1.
    Each (image, channel) is independent: its input plane is staged once, with its
    padding, in a local buffer (`cache_read` of a padded read at the channel loop: a
    zero border instead of a guard per multiply-add, L1-sized, and made by the thread
    that uses it); a tile of `rb` output rows x the whole row accumulates in registers
    (`cache_write`) across the fully unrolled window, the row vectorized, the window's
    weights broadcast once per tile. The (image, channel) pairs are one loop, parallel
    when the work pays for a second thread.

        for n, c:                        (fused, parallel)
          xp = padded copy of x[n, c]    (cache_read, when padded)
          for ho:                        (rows / rb)
            acc[rb][W] = 0               (cache_write: registers)
            for r0, r1, r2, hi: (unrolled)  for w: (vectorized)
              acc[hi][w] += xp[ho + hi + r1][w + r2] * k[c][r1][r2]
            out[n, c, ho:ho+rb, :] = epilogue(acc)
    """
    K = kernel.sym
    n, c, h, w = nest.spatial
    if is_strided(kernel, nest) or nest.trips[w] > 4 * lanes:
        raise ScheduleError(f"kernel '{K}': strided or wide depthwise conv")
    H, W = nest.trips[h], nest.trips[w]
    nv = W // lanes + bin(W % lanes).count("1")  # GCC's vector pieces per row
    rb = largest_divisor(H, max(1, min(DEPTHWISE_ROWS, DEPTHWISE_TILE_VECTORS // nv)))
    lines = [f"decompose {K}"]
    row, inner_h = h, []
    if rb > 1:
        lines.append(f"split {K}/{h} by {rb} -> {h}o, {h}i")
        row, inner_h = f"{h}o", [f"{h}i"]
    lines.append(f"reorder {K}: {', '.join([n, c, row] + nest.reduce + inner_h + [w])}")
    if guarded(load, kernel):  # one channel's padded plane, per (image, channel)
        lines.append(f"cache_read {K}/{c} {buffer_token(kernel, x)} -> {K}_xp")
    lines.append(f"cache_write {K}/{row} {buffer_token(kernel, out)} -> {K}_acc")
    lines += [f"unroll {K}/{r}" for r in nest.reduce + inner_h]
    lines.append(f"vectorize {K}/{w}")
    lines.append(f"serial {K}")
    top = c
    if nest.trips[n] > 1:
        lines.append(f"fuse {K}/{n}, {c} -> {n}{c}")
        top = f"{n}{c}"
    macs = 1
    for trips in nest.trips.values():
        macs *= trips
    if macs >= DEPTHWISE_PARALLEL_MACS:
        lines.append(f"parallel {K}/{top}")
    return "\n".join(lines)
