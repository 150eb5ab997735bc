"""Default schedules of the Winograd F(2x2, 3x3) transforms (graph-winograd's kernels;
the batched matmul between them is an ordinary gemm and takes the gemm template).

Input/Output: loop dialect.  Requires: te-to-loop's nest of a kernel whose `origin` is
`graph.winograd_input_transform` or a `graph.fused(graph.winograd_output_transform, ...)`
(its fused epilogue: bias, relu, residual add).  Guarantees: numerics unchanged.

- input transform, V[t, n, c, th, tw] (16 reads per tile at (2 th + i - top, 2 tw + j -
  left), the point t chosen by selects): the loops become (n, c, t, th, tw), the plane
  of one (n, c) staged once as two phase planes (`cache_read ... deinterleave`: padding
  filled, even and odd columns apart, so the tile loop reads with unit stride), the
  point loop unrolled (its selects fold: 4 loads and 3 adds per element), the tiles
  vectorized; one image's channels or the images parallel. resnet 16 -> 16 on 32x32:
  236 us (guarded stride-2 reads as masked gathers) -> 10.6 us, 32 -> 32 on 16x16 4.7 us,
  1 thread (the point loop outside the tile rows: each point's stores stream through one
  plane of V; inside them, 16 stores 16 KiB apart per row: 11.6 and 11.2 us);
- output transform, y[n, o, h, w] plus its fused epilogue (9 reads of M per output, the
  row/column in the tile h % 2, w % 2 choosing the coefficients): h and w become (tile,
  in-tile) loops with y / 2, y % 2 folded to them (`tile_by_two`, a rewrite of the nest
  before the script: GCC gathers M for `(2 t + r) / 2`), the in-tile loops unrolled
  outside the vectorized tile column (M read with unit stride), a residual staged per
  tile row as phase planes; channels parallel. resnet: 58 -> 4.2 us (relu), 51 -> 5.9 us
  (residual add + relu; staged per output row 11 us, unstaged 15.5 us), 1 thread. An odd
  height keeps its row loop (64 -> 64 on 33x32: 251 -> 30 us); an odd width keeps
  te-to-loop's nest.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr
from xdsl.ir import SSAValue

from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    buffers_accessed,
    fresh_name,
    get_kernel,
    get_loop,
    memref_type,
    name_iv,
)
from dlpc.passes.schedule.nest import Nest, analyse, buffer_token


def _origin(kernel: KernelOp) -> str:
    attr = kernel.attributes.get("origin")
    return attr.data if isinstance(attr, StringAttr) else ""


def input_transform_script(kernel: KernelOp, nest: Nest) -> str:
    K = kernel.sym
    t, n, c, th, tw = nest.spatial
    x = buffers_accessed(kernel, external=True)[0]  # the input (V is written)
    lines = [
        f"reorder {K}: {n}, {c}, {t}, {th}, {tw}",
        f"cache_read {K}/{c} {buffer_token(kernel, x)} -> {K}_xq deinterleave",
        f"unroll {K}/{t}",
        f"vectorize {K}/{tw}",
        f"serial {K}",
        f"parallel {K}/{c if nest.trips[n] == 1 else n}",  # images, or one image's channels
    ]
    return "\n".join(lines)


def _constant(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def tile_by_two(kernel: KernelOp, name: str) -> tuple[str, str]:
    """Loop `name` over an output dim `y` (0 to 2 T, step 1) as tile and in-tile loops
    `<name>t` (0 to T) and `<name>r` (0 to 2), `y = 2 t + r`, and `y / 2`, `y % 2` (the
    output transform's tile and coefficient indices) folded to `t` and `r`: the tile
    index becomes affine in a loop, so the tile loop vectorizes with unit-stride reads
    of M (GCC gathers for `(2 t + r) / 2`). Numerics unchanged.

        loop.for %y = 0 to 32 {          loop.for %t = 0 to 16 {
          %a = arith.divsi %y, %c2   ->    loop.for %r = 0 to 2 {
          %b = arith.remsi %y, %c2           %y = 2 * %t + %r   (a, b: uses of t, r)
    """
    target = get_loop(kernel, kernel.sym, name)
    if target.lower != 0 or target.stride != 1 or target.upper % 2:
        raise ScheduleError(f"loop {kernel.sym}/{name} is not 0 to an even bound by 1")
    outer = ForOp(0, target.upper // 2, 1, name=fresh_name(kernel, None, f"{name}t"))
    inner = ForOp(0, 2, 1, name=fresh_name(kernel, None, f"{name}r"))
    outer.block.add_op(inner)
    name_iv(outer)
    name_iv(inner)
    two = arith.ConstantOp(IntegerAttr(2, IndexType()))
    twice = arith.MuliOp(outer.induction_var, two.result)
    y = arith.AddiOp(twice.result, inner.induction_var)
    y.result.name_hint = target.induction_var.name_hint
    inner.block.add_ops([two, twice, y])
    for op in list(target.block.ops):
        op.detach()
        inner.block.add_op(op)
    target.induction_var.replace_all_uses_with(y.result)
    for use in list(y.result.uses):
        op = use.operation
        if isinstance(op, arith.DivSIOp | arith.RemSIOp) and op.lhs is y.result:
            if _constant(op.rhs) == 2:
                folded = outer if isinstance(op, arith.DivSIOp) else inner
                op.result.replace_all_uses_with(folded.induction_var)
    parent = target.parent_block()
    assert parent is not None
    parent.insert_op_before(outer, target)
    target.detach()
    target.erase()
    return outer.loop_name or "", inner.loop_name or ""


def output_transform_script(kernel: KernelOp, nest: Nest) -> str:
    """Tiles of y: the columns (and the rows, when their count is even) as (tile, in-tile)
    loops (`tile_by_two`, done on the kernel before the script), the tile column
    vectorized with the in-tile loops unrolled outside it, (image, channel) parallel. An
    odd row count keeps its row loop (`y / 2`, `y % 2` are invariant in the vectorized
    loop: no gathers); an odd column count keeps te-to-loop's nest (ScheduleError)."""
    K = kernel.sym
    n, o, h, w = nest.spatial
    if nest.trips[w] % 2:
        raise ScheduleError(f"kernel '{K}': an odd output width keeps the plain nest")
    wt, wr = tile_by_two(kernel, w)
    rows = list(tile_by_two(kernel, h)) if nest.trips[h] % 2 == 0 else [h]
    lines = [f"reorder {K}: {', '.join(rows)}, {wr}, {wt}"]
    lines += [f"unroll {K}/{r}" for r in rows[1:]]
    lines += [
        f"unroll {K}/{wr}",
        f"vectorize {K}/{wt}",
        f"serial {K}",
        f"parallel {K}/{o}",
    ]
    out = buffers_accessed(kernel, external=True)
    shape = memref_type(out[-1]).get_shape()
    for k, buffer in enumerate(out[1:-1], start=1):
        if memref_type(buffer).get_shape() == shape:  # a residual, read as phase planes
            lines.append(f"cache_read {K}/{rows[0]} @{k} -> {K}_r{k} deinterleave")
    return "\n".join(lines)


def _is_transform(origin: str) -> bool:
    return origin in (
        "graph.winograd_input_transform",
        "graph.winograd_output_transform",
    ) or origin.startswith("graph.fused(graph.winograd_output_transform")


def winograd_scripts(module, name: str) -> list[str] | None:
    """The schedules of a Winograd transform kernel, best first; None for other kernels."""
    kernel = get_kernel(module, name)
    origin = _origin(kernel)
    nest = analyse(kernel)
    if nest is None:
        return None
    if origin == "graph.winograd_input_transform":
        return [input_transform_script(kernel, nest)]
    if _is_transform(origin):
        try:
            return [output_transform_script(kernel, nest)]
        except ScheduleError:
            return []
    return None
