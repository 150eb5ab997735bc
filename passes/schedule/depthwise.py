"""The depthwise convolution template of the default schedule (`default.py` picks it
through `conv.conv_tile_script` when the input channel follows the output channel).
Returns a schedule script or raises `ScheduleError`.
"""

from __future__ import annotations

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import ScheduleError, guarded
from dlpc.passes.schedule.nest import Nest, buffer_token, is_strided, parallel_pays


def depthwise_tile_script(kernel: KernelOp, nest: Nest, x, out, load) -> str:
    """Depthwise conv (the input channel follows the output channel, stride 1): no input
    reuse across channels, so no im2col; the input is copied once per image with its
    padding (`cache_read` of a padded read: a zero border instead of a guard per
    multiply-add), and a block of 4 channels x the row accumulates in registers around
    the reductions (4 independent FMA chains per vector); channel blocks parallel."""
    K = kernel.sym
    n, c, h, w = nest.spatial
    if is_strided(kernel, nest) or nest.trips[w] > 4 * 16:
        raise ScheduleError(f"kernel '{K}': strided or wide depthwise conv")
    cb = 4 if nest.trips[c] % 4 == 0 and nest.trips[c] > 4 else 1
    lines = [f"decompose {K}"]
    outer = [n]
    inner_c = []
    if cb > 1:
        lines.append(f"split {K}/{c} by {cb} -> {c}o, {c}i")
        outer, inner_c = [n, f"{c}o"], [f"{c}i"]
    else:
        outer = [n, c]
    lines.append(f"reorder {K}: {', '.join(outer + [h] + nest.reduce + inner_c + [w])}")
    if guarded(load, kernel):
        lines.append(f"cache_read {K}/{n} {buffer_token(kernel, x)} -> {K}_xp")
    lines.append(f"cache_write {K}/{h} {buffer_token(kernel, out)} -> {K}_acc")
    lines += [f"unroll {K}/{ci}" for ci in inner_c]
    lines.append(f"vectorize {K}/{w}")
    lines.append(f"serial {K}")
    if parallel_pays(nest):
        lines.append(f"parallel {K}/{outer[1]}")
    return "\n".join(lines)
