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
  vectorized; one image's channels or the images parallel; the point loop outside the
  tile rows, so each point's stores stream through one plane of V
  (docs/design/schedules.md#winograd-transforms);
- output transform, y[n, o, h, w] plus its fused epilogue (9 reads of M per output, the
  row/column in the tile h % 2, w % 2 choosing the coefficients): h and w become (tile,
  in-tile) loops with y / 2, y % 2 folded to them (`tile_by_two`, a rewrite of the nest
  before the script: GCC gathers M for `(2 t + r) / 2`), the in-tile loops unrolled
  outside the vectorized tile column (M read with unit stride), a residual staged per
  tile row as phase planes; channels parallel. An odd height keeps its row loop; an odd
  width keeps te-to-loop's nest;
- fused (the default up to FUSED_MAX_CHANNELS; `loop-default-schedule{winograd_fuse=
  false}` keeps the three kernels): the output
  transform's loop over tile rows computes the whole chain per row (`fused_script`:
  `compute_inline` of both reshapes, `compute_at ... local` of the matmul and the input
  transform into stack arrays of the row's footprint, V[16][C][tiles] and
  M[16][Co][tiles]; the matmul decomposed, its init folded into the register tile
  (loop-fold-init-epilogue) and tensorized 16 co x tiles with U packed [16][C][Co] once
  per binding (loop-prepack-weights); the producers get no schedule of their own,
  `fused_into`); the output transform's in-tile loops inside the tile column, unrolled
  in the IR (`tiles_inside`), the block's input rows staged as phase planes once for
  all channels, the register tile's copy-in/out rows unrolled (and for rows of 16
  tiles its copy-out vector loop). It beats the direct conv on resnet's 16- and
  32-channel convs at any batch, on 1 and 2 threads, so graph-winograd's rule takes them
  (docs/design/schedules.md#winograd-fused).
  Blocks are one tile row, or two where a row is half a vector (8 tiles, a 16x16
  output): V's reshape is then a copy per block, split per row of tiles so its reads of
  V are exact (docs/design/schedules.md#winograd-two-rows).
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr
from xdsl.ir import Operation, SSAValue

from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    affine,
    buffers_accessed,
    emit_affine,
    fresh_name,
    get_kernel,
    get_loop,
    memref_type,
    name_iv,
    unroll_in_place,
)
from dlpc.passes.schedule.nest import Nest, analyse, buffer_token
from dlpc.passes.schedule.reorder import reorder
from dlpc.passes.schedule.tensorize import LANES, MAX_MR, MAX_NR, MAX_TILE


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
    for use in list(y.result.uses):  # y / 2 -> t, y % 2 -> r (exact over the loops)
        op = use.operation
        if isinstance(op, arith.DivSIOp | arith.RemSIOp) and op.lhs is y.result:
            form = affine(op.result, delinearize=True)
            if form is not None:
                op.result.replace_all_uses_with(emit_affine(form, inner.block, before=op))
    parent = target.parent_block()
    assert parent is not None
    parent.insert_op_before(outer, target)
    target.detach()
    target.erase()
    return outer.loop_name or "", inner.loop_name or ""


def output_transform_scripts(module, kernel: KernelOp, nest: Nest, fuse: bool = False) -> list[str]:
    """The output transform's schedules, best first: fused with its producers
    (`fused_script`) when `fusable`, then the transform alone (`output_transform_script`);
    `tile_by_two` is applied to the kernel once, for both."""
    K = kernel.sym
    n, o, h, w = nest.spatial
    if nest.trips[w] % 2:
        raise ScheduleError(f"kernel '{K}': an odd output width keeps the plain nest")
    chain = fused_chain(module, K) if fuse and fusable(kernel, nest) else None
    wt, wr = tile_by_two(kernel, w)
    rows = list(tile_by_two(kernel, h)) if nest.trips[h] % 2 == 0 else [h]
    out = []
    if chain is not None:
        tiles_inside(module, kernel, rows, wr, wt)
        if _two_rows(nest, rows):  # else blocks of one row
            out.append(fused_script(kernel, nest, chain, rows, wr, wt, two=True))
        out.append(fused_script(kernel, nest, chain, rows, wr, wt))
        out.append(output_transform_script(kernel, nest, rows, wr, wt, inside=True))
        return out
    out.append(output_transform_script(kernel, nest, rows, wr, wt))
    return out


def tiles_inside(module, kernel: KernelOp, rows: list[str], wr: str, wt: str) -> None:
    """The in-tile loops (`rows[1]`, `wr`) moved inside the tile column `wt` and
    unrolled there in the IR (`unroll_in_place`): one iteration of `wt` computes a whole
    2x2 tile, so the 16 reads of M are shared by its four outputs and the two columns of
    a tile row are one interleaved store (and residual load) group instead of four
    vector loops, each with 9 reads of M and a stride-2 scatter
    (docs/design/schedules.md#winograd-fused)."""
    K = kernel.sym
    reorder(module, K, [rows[0], wt, *rows[1:]])
    unroll_in_place(get_loop(module, K, wr))
    for r in rows[1:]:
        unroll_in_place(get_loop(module, K, r))


def _tile_lines(
    kernel: KernelOp,
    rows: list[str],
    wr: str,
    wt: str,
    par: str,
    stage: str,
    inside: bool = False,
) -> list[str]:
    """y's tiles in both output transform schedules: the in-tile loops unrolled outside
    the vectorized tile column, the kernel serial but for loop `par`, a residual staged
    per `stage`; with `inside` (`tiles_inside` done) the tile column alone, vectorized,
    its residual read in place (a load group of the tile's two columns)."""
    K = kernel.sym
    if inside:
        return [f"vectorize {K}/{wt}", f"serial {K}", f"parallel {K}/{par}"]
    return [
        *(f"unroll {K}/{r}" for r in rows[1:]),
        f"unroll {K}/{wr}",
        f"vectorize {K}/{wt}",
        f"serial {K}",
        f"parallel {K}/{par}",
        *_residual_lines(kernel, stage),
    ]


def _residual_lines(kernel: KernelOp, loop: str) -> list[str]:
    """A residual (an operand of y's shape) staged per `loop` as phase planes."""
    K = kernel.sym
    out = buffers_accessed(kernel, external=True)
    shape = memref_type(out[-1]).get_shape()
    return [
        f"cache_read {K}/{loop} @{k} -> {K}_r{k} deinterleave"
        for k, buffer in enumerate(out[1:-1], start=1)
        if memref_type(buffer).get_shape() == shape
    ]


# output channels per register tile of the fused matmul when they are more than MAX_MR
CO_BLOCK = 16


def fusable(kernel: KernelOp, nest: Nest) -> bool:
    """The fused schedule applies: even output height and width (the (tile, in-tile)
    loops), output channels <= MAX_MR or a multiple of CO_BLOCK and a block of at most
    MAX_NR tiles (the matmul's register tile, `tensorize gemm`'s limits)."""
    n, o, h, w = nest.spatial
    if nest.trips[h] % 2 or nest.trips[w] % 2:
        return False
    co = nest.trips[o]
    tiles = nest.trips[w] // 2
    mr = co if co <= MAX_MR else CO_BLOCK
    return (co <= MAX_MR or co % CO_BLOCK == 0) and tiles <= MAX_NR and mr * tiles <= MAX_TILE


def fused_script(
    kernel: KernelOp,
    nest: Nest,
    chain: list[KernelOp],
    rows: list[str],
    wr: str,
    wt: str,
    two: bool = False,
) -> str:
    """One kernel per block of 2x2 output tiles (image, one row of tiles; two with `two`,
    V's reshape then a copy per block, split per row so its reads of V are exact): the output
    transform's block loop computes its producers there (`compute_at ... local`: the
    input transform of the block's input rows into a stack array V[16][C][tiles], the
    reshapes, the 16 small gemms into M[16][Co][tiles]), then transforms M to y with the
    epilogue. The gemm as the 16 x tiles register-tiled micro-kernel (`tensorize gemm`,
    U broadcast, K = C), the input transform as its own template does (phase planes of
    the block's rows, point loop unrolled, tiles vectorized); blocks parallel (one
    image's, or the images)."""
    K = kernel.sym
    n, o = nest.spatial[:2]
    r3, mm, r1, it = (p.sym for p in chain)
    tiles = nest.trips[nest.spatial[3]] // 2
    if two:  # blocks of two tile rows (`_two_rows`, #winograd-two-rows)
        blk = f"{rows[0]}b"
        lines = [
            f"split {K}/{rows[0]} by 2 -> {blk}, {rows[0]}k",
            f"reorder {K}: {', '.join([n, blk, f'{rows[0]}k', o, wt])}",
            f"compute_inline {r3}",
            f"compute_at {mm} -> {K}/{blk} local",
            # V's reshape as a copy into the flat V[16][1][C][2 rows of tiles]: its
            # reads of V exact per row of tiles (a split by the row's tiles)
            f"compute_at {r1} -> {K}/{blk} local",
            f"split {K}/{r1}_i3 by {tiles} -> {r1}_i3o, {r1}_i3i",
            f"vectorize {K}/{r1}_i3i",
            f"compute_at {it} -> {K}/{blk} local",
        ]
        tiles *= 2
    else:
        blk = rows[0]
        lines = [f"reorder {K}: {', '.join([n, blk, o, wt])}"]  # (tiles_inside done)
        lines += [
            f"compute_inline {r3}",  # the reshapes read through (no copies)
            f"compute_at {mm} -> {K}/{blk} local",
            f"compute_inline {r1}",
            f"compute_at {it} -> {K}/{blk} local",
        ]
    lines.append(f"decompose {K}/{mm}_i0")
    if nest.trips[o] > MAX_MR:
        lines += [
            f"split {K}/{mm}_i2 by {CO_BLOCK} -> {mm}_co, {mm}_ci",
            f"reorder {K}: {mm}_i0, {mm}_i1, {mm}_co, {mm}_ci, {mm}_i3, {mm}_r0",
            f"tensorize {K}/{mm}_ci gemm",
        ]
    else:
        lines.append(f"tensorize {K}/{mm}_i2 gemm")
    m = _stored(chain[1])
    if m.name_hint:  # the register tile's copy-in (zeros) and copy-out rows unrolled:
        # as loops GCC made them memset/memcpy calls; and, for rows of 16 tiles, the
        # copy-out's vector loop too (under `omp simd` GCC also stored every accumulator
        # to the dead stack tile; rows of 8 gained nothing): docs/design/schedules.md#winograd-fused
        acc, rank = f"{m.name_hint}_b_acc", len(memref_type(m).get_shape())
        lines += [f"unroll {K}/{acc}_in{rank - 2}", f"unroll {K}/{acc}_out{rank - 2}"]
        if tiles >= LANES:  # blocks of whole vectors of tiles
            lines.append(f"unroll {K}/{acc}_out{rank - 1}")
    u = buffers_accessed(chain[1], external=True)[0]  # U, [16][1][Co][C]
    if u.name_hint:  # packed [16][C][Co] (once per binding, loop-prepack-weights): the
        # broadcasts of one k 4 bytes apart (disp8; 64 apart GCC spent a register each)
        lines.append(f"cache_read {K}/{mm}_i0 {u.name_hint} -> {K}_up pack")
    # the input x: the first buffer the fused kernel accesses (its first nest, the input
    # transform's, loads x first), by position at this step (`@n` would count from the
    # start of the script, when the kernel did not read x)
    lines += [
        f"reorder {K}: {it}_i1, {it}_i2, {it}_i0, {it}_i3, {it}_i4",
        f"cache_read {K}/{it}_i1 0 -> {K}_xq deinterleave",
        f"unroll {K}/{it}_i0",
        f"vectorize {K}/{it}_i4",
    ]
    lines += _tile_lines(kernel, rows, wr, wt, blk if nest.trips[n] == 1 else n, blk, True)
    return "\n".join(lines)


def _two_rows(nest: Nest, rows: list[str]) -> bool:
    """The fused block is two rows of tiles: a row is half a vector (8 tiles: the block's
    gemm then fills whole vectors) and the tile rows pair up
    (docs/design/schedules.md#winograd-two-rows)."""
    n, o, h, w = nest.spatial
    tiles = nest.trips[w] // 2
    # (the block's gemm tile fits: its rows, at most MAX_MR, times 2 x 8 tiles is at most
    # 24 x 16 = 384 <= MAX_TILE)
    return len(rows) == 2 and 2 * tiles == LANES and (nest.trips[h] // 2) % 2 == 0


def _stored(kernel: KernelOp) -> SSAValue:
    """The buffer a kernel of the chain stores to (its last, as te-to-loop builds it)."""
    stores = [op.memref for op in kernel.walk() if isinstance(op, memref.StoreOp)]
    return stores[-1]


def output_transform_script(
    kernel: KernelOp, nest: Nest, rows: list[str], wr: str, wt: str, inside: bool = False
) -> str:
    """Tiles of y: the columns (and the rows, when their count is even) as (tile, in-tile)
    loops (`tile_by_two`, done on the kernel before the script), the tile column
    vectorized with the in-tile loops unrolled outside it, (image, channel) parallel. An
    odd row count keeps its row loop (`y / 2`, `y % 2` are invariant in the vectorized
    loop: no gathers); an odd column count keeps te-to-loop's nest (ScheduleError)."""
    K = kernel.sym
    o = nest.spatial[1]
    if inside:  # (tiles_inside done)
        return "\n".join(
            [f"reorder {K}: {rows[0]}, {wt}", *_tile_lines(kernel, rows, wr, wt, o, rows[0], True)]
        )
    lines = [f"reorder {K}: {', '.join(rows)}, {wr}, {wt}"]
    lines += _tile_lines(kernel, rows, wr, wt, o, rows[0])
    return "\n".join(lines)


def _producer(kernel: KernelOp, buffer: SSAValue) -> KernelOp | None:
    """The kernel before `kernel` in its block that stores to `buffer` (nearest first).
    Found from the buffer's uses (walking every earlier kernel for every buffer was a
    sixth of resnet's compile once its three Winograd chains were fused)."""
    writers: set[int] = set()
    for use in buffer.uses:
        op: Operation | None = use.operation
        if not (isinstance(op, memref.StoreOp) and op.memref is buffer):
            continue
        while op is not None and not isinstance(op, KernelOp):
            op = op.parent_op()
        if op is not None:
            writers.add(id(op))
    op = kernel.prev_op
    while op is not None and writers:
        if isinstance(op, KernelOp) and id(op) in writers:
            return op
        op = op.prev_op
    return None


FUSED_MAX_CHANNELS = 32
"""Input and output channels up to which the fused schedule is used: with 64, V, M and
the packed U of a block leave L1 and three kernels are faster
(docs/design/schedules.md#fused-max-channels)."""


def _channels(chain: list[KernelOp]) -> int:
    """The input channels of a fused chain: V's dim 2 ([16, N, C, th, tw])."""
    v = buffers_accessed(chain[3], external=True)[-1]
    return memref_type(v).get_shape()[2]


def fused_chain(module, name: str) -> list[KernelOp] | None:
    """The kernels a Winograd output transform `name` fuses (`fused_script`): its
    reshape of M, the batched matmul, the reshape of V, the input transform (in that
    order, nearest first), each read only by the next; None when `name` is no output
    transform or the chain is not that one."""
    kernel = get_kernel(module, name)
    if not _is_transform(_origin(kernel)) or _origin(kernel) == "graph.winograd_input_transform":
        return None
    chain: list[KernelOp] = []
    current = kernel
    wanted = ("graph.reshape", "graph.matmul", "graph.reshape", "graph.winograd_input_transform")
    for origin in wanted:
        producers = [_producer(current, b) for b in buffers_accessed(current, external=True)]
        found = [p for p in producers if p is not None and _origin(p) == origin]
        if len(found) != 1:
            return None
        chain.append(found[0])
        current = found[0]
    nest = analyse(kernel)
    if nest is None or max(_channels(chain), nest.trips[nest.spatial[1]]) > FUSED_MAX_CHANNELS:
        return None
    return chain


def fused_into(module, name: str, fuse: bool = True) -> str | None:
    """The output transform that will compute kernel `name` inside itself (its
    `fused_script`, with `fuse`), or None: the producer's own template must then leave
    it alone (compute_at wants its plain loop chain)."""
    kernel = get_kernel(module, name)
    if not fuse or _origin(kernel) not in (
        "graph.reshape",
        "graph.matmul",
        "graph.winograd_input_transform",
    ):
        return None
    op, seen = kernel.next_op, 0
    while op is not None and seen < 8:  # (other kernels may come between)
        if isinstance(op, KernelOp):
            seen += 1
            origin = _origin(op)
            if _is_transform(origin) and origin != "graph.winograd_input_transform":
                nest = analyse(op)
                chain = fused_chain(module, op.sym)
                if nest is not None and chain and kernel in chain and fusable(op, nest):
                    return op.sym
        op = op.next_op
    return None


def _is_transform(origin: str) -> bool:
    return origin in (
        "graph.winograd_input_transform",
        "graph.winograd_output_transform",
    ) or origin.startswith("graph.fused(graph.winograd_output_transform")


def winograd_scripts(module, name: str, fuse: bool = True) -> list[str] | None:
    """The schedules of a Winograd transform kernel, best first; None for other kernels.
    With `fuse` (the default; `loop-default-schedule{winograd_fuse=false}` turns it
    off), an output transform whose
    producers chain as graph-winograd builds them computes them per block
    (`fused_script`), and they (the input transform, reshapes, matmul) get [] (left
    alone until then)."""
    kernel = get_kernel(module, name)
    origin = _origin(kernel)
    if fused_into(module, name, fuse) is not None:
        return []  # computed inside its output transform
    nest = analyse(kernel)
    if nest is None:
        return None
    if origin == "graph.winograd_input_transform":
        return [input_transform_script(kernel, nest)]
    if _is_transform(origin):
        try:
            return output_transform_scripts(module, kernel, nest, fuse)
        except ScheduleError:
            return []
    return None
