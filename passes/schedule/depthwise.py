"""The depthwise convolution templates of the default schedule (`default.py` picks them
through `conv.conv_tile_script` when the input channel follows the output channel):
NCHW, the row vectorized (`depthwise_tile_script`), and NHWC, the channels vectorized
(`nhwc_depthwise_tile_script`, what graph-layout makes at -O3). Each returns a schedule
script or raises `ScheduleError`.
"""

from __future__ import annotations

import math

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import ScheduleError, guarded, memref_type
from dlpc.passes.schedule.nest import (
    CONV_PACK_BYTES,
    Nest,
    buffer_token,
    conv_output,
    is_strided,
    largest_divisor,
    nhwc_reduction_loads,
)
from dlpc.passes.schedule.tensorize import LANES

# Vector pieces of one depthwise tile (rows x the pieces GCC splits a row into: 28 is
# 16 + 8 + 4). Few: the unrolled window loads every input vector once per tap (GCC does
# not reuse a load across the rows of a tile), so more rows only add register pressure
# (docs/design/schedules.md#depthwise-tile-vectors).
DEPTHWISE_TILE_VECTORS = 6
# Output rows per tile at most (a narrow row: the whole window is unrolled per row).
DEPTHWISE_ROWS = 8
# Multiply-adds above which a depthwise conv runs on two threads. A depthwise MAC costs
# more time than a dense conv's (9 FMAs per output, the padded copy and the epilogue per
# output), so the threshold is far below CONV_PARALLEL_MACS
# (docs/design/schedules.md#depthwise-parallel-macs).
DEPTHWISE_PARALLEL_MACS = 1 << 16


def depthwise_tile_script(kernel: KernelOp, nest: Nest, x, out, load, lanes: int = LANES) -> str:
    """Depthwise conv, NCHW (the input channel follows the output channel), any stride
    (an NHWC nest goes to `nhwc_depthwise_tile_script`). A strided one stages its
    channel's plane as stride-1 phase planes (`cache_read ... deinterleave`), so the
    vectorized row reads it with unit stride; the rest is as for stride 1.
    Each (image, channel) is independent: its input plane is staged once, with its
    padding, in a local buffer (`cache_read` of a padded read at the channel loop: a
    zero border instead of a guard per multiply-add, L1-sized, and made by the thread
    that uses it); a tile of `rb` output rows x the whole row accumulates in registers
    (`cache_write`) across the fully unrolled window, the row vectorized, the window's
    weights broadcast once per tile. The (image, channel) pairs are one loop, parallel
    when the work pays for a second thread. A row of whole vectors at stride 1 slides its
    window in registers (`tensorize ... slide`: each input row of the tile loaded once,
    the taps' shifted windows shuffled from it; the nest kept for compilers without
    AVX-512, docs/design/schedules.md#depthwise-slide).

        for n, c:                        (fused, parallel)
          xp = padded copy of x[n, c]    (cache_read, when padded)
          for ho:                        (rows / rb)
            acc[rb][W] = 0               (cache_write: registers)
            for r0, r1, r2, hi: (unrolled)  for w: (vectorized)
              acc[hi][w] += xp[ho + hi + r1][w + r2] * k[c][r1][r2]
            out[n, c, ho:ho+rb, :] = epilogue(acc)
    """
    if nhwc_depthwise_operands(kernel, nest) is not None:
        return nhwc_depthwise_tile_script(kernel, nest, lanes)
    K = kernel.sym
    n, c, h, w = nest.spatial
    strided = is_strided(kernel, nest)
    H, W = nest.trips[h], nest.trips[w]
    wt = W  # a wide row (mobilenet's 112 and 56): tiles of whole vectors
    if W > 4 * lanes:
        wt = largest_divisor(W, 4 * lanes, lanes)
        if wt < lanes:
            raise ScheduleError(f"kernel '{K}': row of {W} does not tile by {lanes}")
    nv = wt // lanes + bin(wt % lanes).count("1")  # GCC's vector pieces per row
    # a whole row of whole vectors, stride 1: the window slides in registers (slide.py;
    # docs/design/schedules.md#depthwise-slide)
    slide = not strided and wt == W and W % lanes == 0
    rb = largest_divisor(H, max(1, min(DEPTHWISE_ROWS, DEPTHWISE_TILE_VECTORS // nv)))
    lines = [f"decompose {K}"]
    row, inner_h = h, []
    if rb > 1:
        lines.append(f"split {K}/{h} by {rb} -> {h}o, {h}i")
        row, inner_h = f"{h}o", [f"{h}i"]
    tile, inner_w = [n, c, row], w
    if wt < W:
        lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
        tile, inner_w = tile + [f"{w}o"], f"{w}i"
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + inner_h + [inner_w])}")
    if strided:  # the channel's plane as stride-1 phase planes (padding resolved)
        lines.append(f"cache_read {K}/{c} {buffer_token(kernel, x)} -> {K}_xq deinterleave")
    elif guarded(load, kernel):  # one channel's padded plane, per (image, channel)
        lines.append(f"cache_read {K}/{c} {buffer_token(kernel, x)} -> {K}_xp")
    lines.append(f"cache_write {K}/{tile[-1]} {buffer_token(kernel, out)} -> {K}_acc")
    lines += [f"unroll {K}/{r}" for r in nest.reduce + inner_h]
    lines.append(f"vectorize {K}/{inner_w}")
    if slide:
        lines.append(f"tensorize {K}/{nest.reduce[0]} slide")
    lines.append(f"serial {K}")
    top = c
    if nest.trips[n] > 1:
        lines.append(f"fuse {K}/{n}, {c} -> {n}{c}")
        top = f"{n}{c}"
    if math.prod(nest.trips.values()) >= DEPTHWISE_PARALLEL_MACS:
        lines.append(f"parallel {K}/{top}")
    return "\n".join(lines)


# Vector pieces of one NHWC depthwise tile (columns x the channel block's pieces).
NHWC_DEPTHWISE_TILE_VECTORS = 8


def nhwc_depthwise_operands(kernel: KernelOp, nest: Nest):
    """(input, weight) of an NHWC depthwise conv nest (spatial n, h, w, c, the channel
    innermost: the input read along h, w, c and the reductions, the weight along c and
    the reductions but not h/w), else None."""
    loads = nhwc_reduction_loads(kernel, nest)
    if loads is None:
        return None
    x = w = None
    for op, on_c, on_h, on_w in loads:
        if on_c:
            x, w = (op, w) if on_h and on_w else (x, op)
    if x is None or w is None:
        return None
    return x, w


def nhwc_depthwise_tile_script(kernel: KernelOp, nest: Nest, lanes: int = LANES) -> str:
    """NHWC depthwise conv (the channel innermost, as graph-layout makes it), vectorized
    over the channels: a tile of `wt` output columns x a block of channels accumulates in
    registers (`cache_write`) across the unrolled window; the input and the HWIO weight
    are read as whole channel vectors (no broadcast, no shifted row: every load is one
    aligned vector when the channels are a multiple of the width). A padded input is
    staged once per call as a padded copy (all images, outside the parallel loop);
    (image, row) pairs are one parallel loop."""
    ops = nhwc_depthwise_operands(kernel, nest)
    out = conv_output(kernel)
    if ops is None or out is None:
        raise ScheduleError(f"kernel '{kernel.sym}' is not an NHWC depthwise convolution")
    load, weight = ops
    K = kernel.sym
    n, h, w, c = nest.spatial
    N, W, C = nest.trips[n], nest.trips[w], nest.trips[c]
    if is_strided(kernel, nest):
        raise ScheduleError(f"kernel '{K}': strided NHWC depthwise conv")
    cb = C if C <= 4 * lanes else largest_divisor(C, 4 * lanes, lanes)
    if cb < lanes and cb < C:
        raise ScheduleError(f"kernel '{K}': {C} channels do not block by {lanes}")
    pieces = cb // lanes + bin(cb % lanes).count("1")
    wt = largest_divisor(W, max(1, NHWC_DEPTHWISE_TILE_VECTORS // pieces))
    padded = guarded(load, kernel)
    staged = 4 * math.prod(memref_type(load.memref).get_shape()) if padded else 0
    if staged > CONV_PACK_BYTES:
        raise ScheduleError(f"kernel '{K}': padded input of {staged} bytes is too large")
    lines = [f"decompose {K}"]
    top, tile = n, [n, h]
    if N > 1:
        lines.append(f"split {K}/{n} by {N} -> {n}b, {n}n")
        top, tile = f"{n}b", [f"{n}b", f"{n}n", h]
    inner_w, inner_c = w, c
    if wt < W:
        lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
        tile.append(f"{w}o")
        inner_w = f"{w}i"
    if cb < C:
        lines.append(f"split {K}/{c} by {cb} -> {c}o, {c}i")
        tile.append(f"{c}o")
        inner_c = f"{c}i"
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + [inner_w, inner_c])}")
    # the weight contiguous along the channels (a folded OIHW weight is read 9 apart),
    # packed once when the weights are bound (loop-prepack-weights)
    lines.append(f"cache_read {K}/{top} {buffer_token(kernel, weight.memref)} -> {K}_wp pack")
    if padded:  # a zero border instead of a guard per multiply-add
        lines.append(f"cache_read {K}/{top} {buffer_token(kernel, load.memref)} -> {K}_xp")
    lines.append(f"cache_write {K}/{tile[-1]} {buffer_token(kernel, out)} -> {K}_acc")
    lines += [f"unroll {K}/{r}" for r in nest.reduce]
    lines.append(f"unroll {K}/{inner_w}")
    lines.append(f"vectorize {K}/{inner_c}")
    lines.append(f"serial {K}")
    macs = math.prod(nest.trips.values())
    parallel = macs >= DEPTHWISE_PARALLEL_MACS
    if N > 1:
        lines.append(f"fuse {K}/{n}n, {h} -> {n}{h}")
        if parallel:
            lines.append(f"parallel {K}/{n}{h}")
    elif parallel and nest.trips[h] > 1:
        lines.append(f"parallel {K}/{h}")
    return "\n".join(lines)
