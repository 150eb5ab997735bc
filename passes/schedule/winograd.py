"""Default schedules of the Winograd F(2x2, 3x3) transforms (graph-winograd's kernels;
the batched matmul between them is an ordinary gemm and takes the gemm template).

Input/Output: loop dialect.  Requires: te-to-loop's nest of a kernel whose `origin` is
`graph.winograd_input_transform` or a `graph.fused(graph.winograd_output_transform, ...)`
(its fused epilogue: bias, relu, residual add).  Guarantees: numerics unchanged.

- input transform, V[t, c, n, th, tw] (16 reads per tile at (2 th + i - top, 2 tw + j -
  left), the point t chosen by selects): the loops become (c, n, th, t, tw), the padded
  plane of one (c, n) staged once (`cache_read` of a padded read: border filled, interior
  copied unguarded), the point loop unrolled (its selects fold: 4 loads and 3 adds per
  element) and the tiles vectorized; channels parallel;
- output transform, y[n, o, h, w] (9 reads of M per output, the row/column in the tile
  h % 2, w % 2 choosing the coefficients): h and w split by 2, the in-tile offsets
  unrolled outside the tile column loop, which is vectorized (M read with unit stride);
  (image, channel) parallel.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import ScheduleError, buffers_accessed, get_kernel
from dlpc.passes.schedule.nest import Nest, analyse, buffer_token


def _origin(kernel: KernelOp) -> str:
    attr = kernel.attributes.get("origin")
    return attr.data if isinstance(attr, StringAttr) else ""


def input_transform_script(kernel: KernelOp, nest: Nest) -> str:
    K = kernel.sym
    t, c, n, th, tw = nest.spatial
    x = buffers_accessed(kernel, external=True)[0]  # the input (V is written)
    lines = [
        f"reorder {K}: {c}, {n}, {th}, {t}, {tw}",
        f"cache_read {K}/{n} {buffer_token(kernel, x)} -> {K}_xp",
        f"unroll {K}/{t}",
        f"vectorize {K}/{tw}",
        f"serial {K}",
        f"parallel {K}/{c}",
    ]
    return "\n".join(lines)


def output_transform_script(kernel: KernelOp, nest: Nest) -> str:
    K = kernel.sym
    n, o, h, w = nest.spatial
    if nest.trips[h] % 2 or nest.trips[w] % 2:
        raise ScheduleError(f"kernel '{K}': an odd output size keeps the plain nest")
    lines = [
        f"split {K}/{h} by 2 -> {h}o, {h}i",
        f"split {K}/{w} by 2 -> {w}o, {w}i",
        f"reorder {K}: {n}, {o}, {h}o, {h}i, {w}i, {w}o",
        f"unroll {K}/{h}i",
        f"unroll {K}/{w}i",
        f"vectorize {K}/{w}o",
        f"serial {K}",
        f"parallel {K}/{o}",
    ]
    return "\n".join(lines)


def winograd_scripts(module, name: str) -> list[str] | None:
    """The schedules of a Winograd transform kernel, best first; None for other kernels."""
    kernel = get_kernel(module, name)
    origin = _origin(kernel)
    nest = analyse(kernel)
    if nest is None:
        return None
    if origin == "graph.winograd_input_transform":
        return [input_transform_script(kernel, nest)]
    if origin.startswith("graph.fused(graph.winograd_output_transform") or origin == (
        "graph.winograd_output_transform"
    ):
        try:
            return [output_transform_script(kernel, nest)]
        except ScheduleError:
            return []
    return None
