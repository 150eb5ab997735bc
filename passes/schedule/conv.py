"""Convolution and pooling templates of the default schedule (see `default.py` for
which kernel gets which): the register-tiled direct conv (NCHW, `conv_tile_script`, and
NHWC, `nhwc_conv_tile_script`), im2col rows (`conv_script`, also the strided fallback)
and small pooling windows (`pool_script`). Depthwise convs: `depthwise.py`.

Each template returns a schedule script (`passes/schedule/script.py`) or raises
`ScheduleError` when it does not apply.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    affine,
    depends_on,
    guarded,
    memref_type,
)
from dlpc.passes.schedule.depthwise import depthwise_tile_script, nhwc_depthwise_operands
from dlpc.passes.schedule.nest import (
    CONV_PACK_BYTES,
    CONV_RAGGED_ROWS,
    CONV_ROW_STAGE_BLOCKS,
    CONV_ROWS_PANEL_BYTES,
    CONV_STAGE_SPLIT_BYTES,
    CONV_TILE_VECTORS,
    Nest,
    buffer_token,
    conv_input,
    conv_load,
    conv_output,
    is_strided,
    largest_divisor,
    nhwc_reduction_loads,
    parallel_pays,
)
from dlpc.passes.schedule.tensorize import LANES


def conv_script(
    kernel: KernelOp, nest: Nest, cb: int = 4, threads: int = 2, register_tile: bool = False
) -> str:
    """Convolution / pooling as im2col-style rows: the input rows one output row needs
    are packed (padding resolved) into `xp[ci][kh][kw][ow]`, shared by all output
    channels; output channels blocked by `cb` (unrolled), the output row vectorized."""
    x = conv_input(kernel, nest)
    if x is None or len(nest.spatial) != 4:
        raise ScheduleError(f"kernel '{kernel.sym}' is not convolution-shaped")
    K = kernel.sym
    n, c, h, w = nest.spatial
    lines = [f"decompose {K}"]
    inner_c: list[str] = []
    outer_c = c
    if cb > 1 and nest.trips[c] % cb == 0 and nest.trips[c] > cb:
        lines.append(f"split {K}/{c} by {cb} -> {c}o, {c}i")
        outer_c, inner_c = f"{c}o", [f"{c}i"]
    outer_w, inner_w = [], w
    if nest.trips[w] > 64:
        wt = largest_divisor(nest.trips[w], 64)
        if wt >= 8:
            lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
            outer_w, inner_w = [f"{w}o"], f"{w}i"
    tile = [n, h, outer_c] + outer_w
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + inner_c + [inner_w])}")
    lines.append(f"cache_read {K}/{h} {buffer_token(kernel, x)} -> {K}_xp pack")
    out = conv_output(kernel)
    width = nest.trips[inner_w] if not outer_w else largest_divisor(nest.trips[w], 64)
    if out is not None and register_tile and cb * width <= 256:
        # the output tile (cb x width) accumulates in registers across the reductions
        lines.append(f"cache_write {K}/{tile[-1]} {buffer_token(kernel, out)} -> {K}_acc")
        lines += [f"unroll {K}/{ci}" for ci in inner_c]
        lines.append(f"unroll {K}/{inner_w}")
    else:
        lines += [f"unroll {K}/{ci}" for ci in inner_c]
        lines.append(f"vectorize {K}/{inner_w}")
    lines.append(f"serial {K}")
    if nest.trips[h] >= threads:
        lines.append(f"parallel {K}/{h}")
    return "\n".join(lines)


def conv_tile_script(kernel: KernelOp, nest: Nest, threads: int = 2, lanes: int = LANES) -> str:
    """Direct convolution with an output tile in registers (the conv analogue of the
    gemm micro-kernel): for each output row, a block of `cb` output channels x the row
    accumulates in a local `acc` (cache_write) across all reduction loops, the channel
    block unrolled (one broadcast weight each) and the row vectorized, so the tile stays
    in `cb * ceil(W / lanes)` vector registers. The input the rows read is staged: a
    stride-1 padded input as a padded copy (`cache_read` of a padded read), a strided one
    wider than 1 (3x3 stride 2) as stride-1 phase planes (`cache_read ... deinterleave`:
    column q at [q % s][q / s], padding resolved), a strided 1x1 as im2col rows
    `xp[oh][ci][ow]`; an unpadded stride-1 input (1x1 conv) is read directly, or, with
    `CONV_ROW_STAGE_BLOCKS` channel blocks or more, an output row's input rows are copied
    together first (`xr`, per row: its channels lie a plane apart in place).
    The output rows are parallel (more work than the few channel blocks). Staging, each
    thread copying what its own work reads, inside the parallel loop: one image, per
    block of rows (the halo rows copied by both neighbours), one block per thread; a
    batch whose images split evenly over the threads, per image inside the parallel image
    loop when a copy is large enough, else per block of images, one block per thread,
    its (image, row) pairs one loop. Otherwise (rows or images that do not split evenly,
    one thread at compile time) the input is staged before the parallel loop: one image
    before its rows, a batch at once before one parallel (image, row) loop. Depthwise convs:
    `depthwise_tile_script`; not for pooling."""
    x = conv_input(kernel, nest)
    out = conv_output(kernel)
    if x is None or out is None or len(nest.spatial) != 4:
        raise ScheduleError(f"kernel '{kernel.sym}' is not convolution-shaped")
    K = kernel.sym
    n, c, h, w = nest.spatial
    W = nest.trips[w]
    nv = -(-W // lanes)
    if nv > 4:  # a wide row: tile it, a multiple of the vector width
        wt = largest_divisor(W, 4 * lanes, lanes)
        if wt < lanes:
            raise ScheduleError(f"kernel '{K}': row of {W} does not tile by {lanes}")
        nv = wt // lanes
    else:
        wt = W
    load = conv_load(kernel, x)
    assert load is not None
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    if not any(isinstance(op, arith.MulfOp) for op in loops[nest.reduce[-1]].walk()):
        raise ScheduleError(f"kernel '{K}' is a pooling, not a convolution")
    depthwise = any(depends_on(i, loops[c].induction_var) for i in load.indices)
    if depthwise or nhwc_depthwise_operands(kernel, nest) is not None:  # NCHW or NHWC
        return depthwise_tile_script(kernel, nest, x, out, load)
    strided = is_strided(kernel, nest)
    # a strided conv with a kernel wider than 1 (3x3 stride 2): the input as phase planes
    # (`deinterleave`: column q at [q % s][q / s], so the row reads it with unit stride, a
    # copy 1.1x the input); a 1x1 one as im2col rows (its rows are exactly the strided
    # subsample, smaller than the planes)
    phased = strided and kernel_width(kernel, nest, load) > 1
    direct = not guarded(load, kernel) and not strided
    pointwise = direct and sum(nest.trips[r] > 1 for r in nest.reduce) <= 1  # a 1x1 conv
    rb = 1  # output rows per tile
    pieces = W // lanes + bin(W % lanes).count("1")  # GCC: a 28-wide row is 16 + 8 + 4
    # a 1x1 conv over one-vector rows whose tile of rows reads few enough input rows to
    # stay in L1 (a MobileNetV2 expand conv on 16x16): rows per tile as for a ragged row
    # (docs/design/schedules.md#conv-pointwise-rows)
    panel = math.prod(nest.trips[r] for r in nest.reduce) * CONV_RAGGED_ROWS * W * 4
    short_rows = pointwise and pieces == 1 and panel <= CONV_ROWS_PANEL_BYTES
    if wt == W and (pieces >= 3 or short_rows) and nest.trips[h] > 1:
        # a ragged row: several rows per tile, so each broadcast weight feeds more FMAs
        # and the tile's fixed costs (zeroing, copy-out) spread over more rows; measured
        # on such rows only, hence only 3+ pieces (docs/design/schedules.md#conv-ragged-rows)
        rows = max(1, min(CONV_RAGGED_ROWS, CONV_TILE_VECTORS // pieces))
        rb = largest_divisor(nest.trips[h], rows)
        nv = pieces * rb
    cb = largest_divisor(nest.trips[c], max(1, CONV_TILE_VECTORS // nv))
    staged = 0  # bytes staged per image
    if strided and not phased:
        staged = nest.trips[h] * W * math.prod(nest.trips[r] for r in nest.reduce) * 4
        if staged > CONV_PACK_BYTES:
            raise ScheduleError(f"kernel '{K}': im2col of {staged} bytes is too large")
    elif not direct:
        staged = 4 * math.prod(memref_type(x).get_shape()) // nest.trips[n]
    N = nest.trips[n]
    nrows = nest.trips[h] // rb
    pays = parallel_pays(nest) and threads > 1
    # the staged input copied inside the parallel loop, each thread for its own work (in
    # parallel, and from the rows the thread's own previous kernel wrote, mostly):
    # - a batch whose images split evenly over the threads: per image, when an image's
    #   copy is worth it (CONV_STAGE_SPLIT_BYTES; smaller ones, like the stem's, stay
    #   staged at once and (image, row) fused: the better balance)
    # - one image, staged (phase planes of a strided conv, or a stride-1 padded copy): per
    #   block of rows, one block per thread (the blocks' copies overlap by the kernel's
    #   extra rows, the halo): each thread copies rows from its own cache and none waits
    #   for the other's copy (docs/design/schedules.md#conv-staging-per-block)
    per_image = pays and N > 1 and N % threads == 0 and staged >= CONV_STAGE_SPLIT_BYTES
    blocked_copy = phased or not (strided or direct)  # a copy made from rows of the input
    chunked = pays and blocked_copy and N == 1 and nrows % threads == 0 and nrows >= 2 * threads
    # a batch: stage every image at once and run the (image, row) pairs as one parallel
    # loop (one fork/join per call instead of one per image), within the staging budget
    batched = N > 1 and N * staged <= CONV_PACK_BYTES and not per_image
    # ... and with threads, in one block of images per thread, each staged by its thread
    # inside the parallel block loop (the blocks' (image, row) pairs serial inside)
    blocked = batched and pays and staged > 0 and N % threads == 0
    lines = [f"decompose {K}"]
    inner_c, outer_c = [], c
    if cb < nest.trips[c]:
        lines.append(f"split {K}/{c} by {cb} -> {c}o, {c}i")
        inner_c, outer_c = [f"{c}i"], f"{c}o"
    else:
        inner_c, outer_c = [c], None
    outer_w, inner_w = [], w
    if wt < W:
        lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
        outer_w, inner_w = [f"{w}o"], f"{w}i"
    row, inner_h = h, []
    if rb > 1:
        lines.append(f"split {K}/{h} by {rb} -> {h}o, {h}i")
        row, inner_h = f"{h}o", [f"{h}i"]
    tile = [n, row] + ([outer_c] if outer_c else []) + outer_w
    stage_at = n
    if chunked:
        lines.append(f"split {K}/{row} by {nrows // threads} -> {h}t, {h}r")
        tile = [n, f"{h}t", f"{h}r"] + tile[2:]
        stage_at = f"{h}t"
    if batched:
        lines.append(f"split {K}/{n} by {N // threads if blocked else N} -> {n}b, {n}n")
        tile = [f"{n}b", f"{n}n"] + tile[1:]
        stage_at = f"{n}b"
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + inner_h + inner_c + [inner_w])}")
    if phased:  # stride-1 phase planes, padding resolved
        lines.append(f"cache_read {K}/{stage_at} {buffer_token(kernel, x)} -> {K}_xq deinterleave")
    elif strided:  # im2col rows: strides removed, padding resolved
        lines.append(f"cache_read {K}/{stage_at} {buffer_token(kernel, x)} -> {K}_xp pack")
    elif not direct:  # stride 1, padded: a padded copy (1.1x the input, not im2col's 9x)
        lines.append(f"cache_read {K}/{stage_at} {buffer_token(kernel, x)} -> {K}_xp")
    elif (
        pointwise
        and nest.trips[c] >= CONV_ROW_STAGE_BLOCKS * cb
        and nest.trips[h] > 1
        and panel // CONV_RAGGED_ROWS * rb <= CONV_ROWS_PANEL_BYTES
    ):
        # a 1x1 conv read in place: the input rows of an output row, copied together once
        # for all its channel blocks (its channels lie a plane apart, thrashing L1), when
        # they fit L1
        lines.append(f"cache_read {K}/{row} {buffer_token(kernel, x)} -> {K}_xr")
    # the accumulator tile around the reduction loops (cb x rb rows x wt)
    lines.append(f"cache_write {K}/{tile[-1]} {buffer_token(kernel, out)} -> {K}_acc")
    lines += [f"unroll {K}/{hi}" for hi in inner_h]
    lines += [f"unroll {K}/{ci}" for ci in inner_c]
    lines.append(f"vectorize {K}/{inner_w}")
    lines.append(f"serial {K}")
    if per_image:
        lines.append(f"parallel {K}/{n}")
    elif chunked:
        lines.append(f"parallel {K}/{h}t")
    elif batched:
        lines.append(f"fuse {K}/{n}n, {row} -> {n}{h}")
        if blocked:
            lines.append(f"parallel {K}/{n}b")
        elif parallel_pays(nest):
            lines.append(f"parallel {K}/{n}{h}")
    elif nest.trips[h] // rb >= threads and parallel_pays(nest):
        lines.append(f"parallel {K}/{row}")
    return "\n".join(lines)


def kernel_width(kernel: KernelOp, nest: Nest, load) -> int:
    """The product of the trips of the reduction loops in the input's last index (the
    kernel's width: 3 for a 3x3 conv, 1 for a 1x1)."""
    form = affine(load.indices[-1])
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    terms = form.terms if form is not None else {}
    return math.prod(nest.trips[r] for r in nest.reduce if loops[r].induction_var in terms)


def nhwc_conv_operands(kernel: KernelOp, nest: Nest):
    """(input, weight) of an NHWC convolution nest (spatial n, h, w, c: the output
    channel innermost; the weight read along c and the reductions, the input along h/w
    and the reductions but not c), else None (NCHW, depthwise, pooling, not a conv)."""
    loads = nhwc_reduction_loads(kernel, nest)
    if loads is None:
        return None
    x = w = None
    for op, on_c, on_h, on_w in loads:
        if on_c and not (on_h or on_w):
            w = op.memref
        elif on_h and on_w and not on_c:
            x = op.memref
    if x is None or w is None:
        return None
    return x, w


def nhwc_conv_tile_script(
    kernel: KernelOp, nest: Nest, threads: int = 2, lanes: int = LANES
) -> str:
    """NHWC direct convolution with an output tile in registers: `wt` output columns x
    `cb` output channels (whole vectors) accumulate in a local `acc` (cache_write, the
    channels contiguous) around all reduction loops; the columns unrolled (one
    broadcast input value each), the channels vectorized. The weight is packed once per
    call as `wp[c/cb][kh][kw][ci][cb]` (`cache_read ... pack`: contiguous along the
    vectorized channels whatever layout it arrives in, and hoistable to load time); a
    padded input is staged as a padded copy. With a batch, (image, row) pairs are one
    loop; else the rows are. When the images (a batch) or the rows (one image) split
    evenly over the threads, the parallel loop runs one block of them per thread and
    each thread stages the padded copy its block reads (a block of rows: with the halo
    rows) inside it, as the NCHW template does; else the copy is made once before the
    parallel (image, row) or row loop."""
    ops = nhwc_conv_operands(kernel, nest)
    out = conv_output(kernel)
    if ops is None or out is None:
        raise ScheduleError(f"kernel '{kernel.sym}' is not an NHWC convolution")
    x, weight = ops
    K = kernel.sym
    n, h, w, c = nest.spatial
    N, W, C = nest.trips[n], nest.trips[w], nest.trips[c]
    if C % lanes:
        raise ScheduleError(f"kernel '{K}': {C} output channels are not whole vectors")
    cbv = largest_divisor(C // lanes, 4)
    wt = largest_divisor(W, max(1, CONV_TILE_VECTORS // cbv))
    if wt < 2 and W > 1:
        raise ScheduleError(f"kernel '{K}': row of {W} does not tile")
    load = conv_load(kernel, x)
    assert load is not None
    padded = guarded(load, kernel)
    staged = 4 * math.prod(memref_type(x).get_shape()) if padded else 0
    if staged > CONV_PACK_BYTES:
        raise ScheduleError(f"kernel '{K}': padded input of {staged} bytes is too large")
    H = nest.trips[h]
    pays = parallel_pays(nest) and threads > 1
    # the padded copy staged per thread, inside the parallel loop: a block of images, or
    # of rows (plus halo), per thread
    image_blocks = padded and pays and N > 1 and N % threads == 0
    row_blocks = padded and pays and N == 1 and H % threads == 0 and H >= 2 * threads
    lines = [f"decompose {K}"]
    top = stage_at = n
    tile = [n, h]
    images = f"{n}n"  # the images of the (image, row) loop
    if N > 1:  # the weight packed at n_b (1 iteration): once, not in a parallel loop
        lines.append(f"split {K}/{n} by {N} -> {n}b, {n}n")
        top, tile = f"{n}b", [f"{n}b", f"{n}n", h]
        stage_at = top
    if image_blocks:
        lines.append(f"split {K}/{n}n by {N // threads} -> {n}t, {n}u")
        images, tile = f"{n}u", [f"{n}b", f"{n}t", f"{n}u", h]
        stage_at = f"{n}t"
    if row_blocks:
        lines.append(f"split {K}/{h} by {H // threads} -> {h}t, {h}r")
        tile = [n, f"{h}t", f"{h}r"]
        stage_at = f"{h}t"
    inner_w, inner_c = w, c
    if wt < W:
        lines.append(f"split {K}/{w} by {wt} -> {w}o, {w}i")
        tile.append(f"{w}o")
        inner_w = f"{w}i"
    if cbv * lanes < C:
        lines.append(f"split {K}/{c} by {cbv * lanes} -> {c}o, {c}i")
        tile.append(f"{c}o")
        inner_c = f"{c}i"
    lines.append(f"reorder {K}: {', '.join(tile + nest.reduce + [inner_w, inner_c])}")
    lines.append(f"cache_read {K}/{top} {buffer_token(kernel, weight)} -> {K}_wp pack")
    if padded:  # a zero border instead of a guard per multiply-add
        lines.append(f"cache_read {K}/{stage_at} {buffer_token(kernel, x)} -> {K}_xp")
    lines.append(f"cache_write {K}/{tile[-1]} {buffer_token(kernel, out)} -> {K}_acc")
    lines.append(f"unroll {K}/{inner_w}")
    lines.append(f"vectorize {K}/{inner_c}")
    lines.append(f"serial {K}")
    if N > 1:
        lines.append(f"fuse {K}/{images}, {h} -> {n}{h}")
        if image_blocks:
            lines.append(f"parallel {K}/{n}t")
        elif parallel_pays(nest):
            lines.append(f"parallel {K}/{n}{h}")
    elif row_blocks:
        lines.append(f"parallel {K}/{h}t")
    elif H > 1 and parallel_pays(nest):
        lines.append(f"parallel {K}/{h}")
    return "\n".join(lines)


def pool_script(kernel: KernelOp, nest: Nest) -> str:
    """A small pooling window (max/avg over at most 2x2): te-to-loop's nest with the
    window loops unrolled, so the output loop is innermost for GCC and the window is
    straight-line code (faster than im2col rows on 2x2: docs/design/schedules.md#pool-script)."""
    K = kernel.sym
    if len(nest.spatial) != 4 or len(nest.reduce) != 2:
        raise ScheduleError(f"kernel '{K}' is not pooling-shaped")
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    if any(isinstance(op, arith.MulfOp) for op in loops[nest.reduce[-1]].walk()):
        raise ScheduleError(f"kernel '{K}' is a convolution, not a pooling")
    if math.prod(nest.trips[r] for r in nest.reduce) > 4:
        raise ScheduleError(f"kernel '{K}': pooling window larger than 2x2")
    return "\n".join(f"unroll {K}/{r}" for r in nest.reduce)


def tile_script(kernel: KernelOp, nest: Nest) -> str:
    """The register-tiled direct conv for this nest, NHWC or NCHW (depthwise included):
    what the default schedule tries first for a convolution, and the tuner's `tile`
    knob. Raises ScheduleError when no tile template applies."""
    if nhwc_conv_operands(kernel, nest) is not None:
        return nhwc_conv_tile_script(kernel, nest)
    return conv_tile_script(kernel, nest)
