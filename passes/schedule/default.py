"""Default (untuned) schedules: a reasonable heuristic schedule for every kernel, so
that compiled code is fast without tuning; and the entry point that prefers a tuned
schedule from a tuning log.

Input/Output: loop dialect.  Requires: nothing (a kernel whose schedule does not apply
is left as te-to-loop made it).  Guarantees: numerics unchanged; each kernel gets one of

- gemm (matmul, linear, batch matmul, 1x1 conv as a matmul-shaped nest):
  GotoBLAS blocking `jc, kc, ic, jr, ir` with packed A/B panels (`cache_read ... pack`)
  and the `gemm` micro-kernel (`tensorize`): an `mr x nr` accumulator tile in registers;
  leading (batch) loops of A and C go inside the B panel loops when B does not depend
  on them (a linear layer over `[B, T, K]`: each panel of B packed once per call);
  no packing when B is contiguous along the columns and A is a single block (a small
  `P x V` per attention head: packing costs more than it saves);
  the register tile is 8 x 32 when the shape allows, else the divisor tile with the
  most FMAs per load (`_gemm_tile`), else tiles of 8 rows plus a remainder tile
  (`gemm8`, M prime above 24); a tile of 2-4 rows of whole vectors carries B's row in
  registers (`gemm_pipe`); a weight B is always packed (loop-prepack-weights moves
  that pack to load time); with up to 8 rows and B read along k, the `dot` kernel
  (`dot_script`: register blocks of dot products along k, no packing) when B is not a
  weight, there are fewer than 4 rows, or 16 does not divide N;
- convolution (`conv.py`, `depthwise.py`): the register-tiled direct conv: an output
  tile of `cb` channels x the row (x 64 columns when wider; several rows for a ragged
  row) accumulates in a local `acc` (`cache_write`) around all reduction loops, the
  channels unrolled (one broadcast weight each) and the row vectorized, so GCC keeps
  the tile in `cb * ceil(W/16)` zmm registers. The input is staged: a stride-1 padded
  input as a padded copy (`cache_read` of a padded read: border filled, interior copied
  unguarded), a strided one as phase planes (`cache_read ... deinterleave`: the strided
  columns split so the row reads them with unit stride), a 1x1 strided one as im2col
  rows; an unpadded stride-1 input is read directly. Output rows, or (image, row) with
  a batch, are parallel; the input is staged inside the parallel loop by each thread
  for its own work when the rows (one image) or the images split evenly over the
  threads: per block of rows, per image, or per block of images. Depthwise: NCHW planes
  staged per (image, channel) inside the parallel loop, rows x the row in registers;
  NHWC vectorized over the channels. NHWC convs (`nhwc_conv_tile_script`): columns x
  channel vectors in registers, the weight packed once, the padded input staged as for
  NCHW. Convs under CONV_PARALLEL_MACS stay serial. The templates below are fallbacks;
  an int8 conv (i32 sums requantized in the epilogue): the same tile over a local i32
  buffer of sums (`int_conv.py`);
- im2col rows (`conv_script`, a fallback, and pooling): the input a row of outputs needs is
  packed once per output row (`cache_read ... pack`, padding resolved in the packing),
  so the vectorized row reads it with unit stride; output channels blocked by 4 and
  unrolled, the rows parallel;
- reduction (stride-1 and depthwise conv, other reductions): the reduction loops
  are moved inside the last spatial loop's siblings so the innermost loop is the last
  spatial one, which is vectorized (`decompose`, `reorder`, `vectorize`); conv output
  channels are blocked by 4 and unrolled so each input vector feeds 4 FMAs;
- elementwise: te-to-loop's outer `parallel` / inner `vectorize` stay;

and tiny kernels (less than `SERIAL_WORK` iterations) lose `parallel` (an OpenMP
fork/join costs more than their work), unless they stream their inputs (at most
`STREAM_RATIO` iterations per element read, a linear layer at batch 1: two threads read
the weights through two caches).

    dlpc-opt model.loop.mlir -p loop-default-schedule

`default_script(module, kernel)` returns the schedule as script text (what the tuner
starts from); `apply_tuned_or_default(module, tuning_log)` is what the pipeline calls.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, UnitAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, kernels, verify_ir
from dlpc.passes.schedule._common import (
    TEAM_LOOP,
    ScheduleError,
    affine,
    buffers_accessed,
    depends_on,
    get_kernel,
    is_reduction,
    memref_type,
)
from dlpc.passes.schedule.conv import conv_script, pool_script, tile_script
from dlpc.passes.schedule.int_conv import int_conv_script
from dlpc.passes.schedule.nest import (
    Nest,
    analyse,
    buffer_token,
    first_divisor,
    is_strided,
    kernel_work,
    largest_divisor,
)
from dlpc.passes.schedule.script import apply_script, parse_script
from dlpc.passes.schedule.tensorize import LANES, MAX_DOT, MAX_MR, MAX_NR, PIPE_ROWS
from dlpc.passes.schedule.winograd import fused_into, winograd_scripts

# Kernels of fewer iterations (multiply-adds for a matmul) stay serial: waking the second
# OpenMP thread costs more than their work (see docs/design/schedules.md#serial-work).
SERIAL_WORK = 1 << 18
# ... unless they stream: at most STREAM_RATIO iterations per element read (a linear
# layer at batch 1-4 reads each weight once or a few times) and at least
# STREAM_SERIAL_WORK iterations: two threads then read the weights through two cores'
# L2 caches and bandwidth (docs/design/schedules.md#stream-serial-work).
STREAM_SERIAL_WORK = 1 << 15
STREAM_RATIO = 4
# ... but from TEAM_WORK iterations on, their parallel loop keeps a mark (TEAM_LOOP): the
# C backend runs it serially in the kernel's function, and shares it with the other
# thread inside @main's team region, where that thread is awake and would otherwise wait
# for the kernel at the barrier (docs/design/schedules.md#team-loops).
TEAM_WORK = 1 << 16


# --------------------------------------------------------------- nest analysis


# ------------------------------------------------------------------ templates


@dataclass(frozen=True)
class GemmParams:
    mc: int
    nc: int
    kc: int
    mr: int
    nr: int
    pack_a: bool = True
    pack_b: bool = True
    rows_tail: bool = False  # M in tiles of mr plus one remainder tile (`gemmN`), A unpacked
    cols_tail: bool = False  # N likewise in tiles of nr (`gemmNxM`; with rows_tail)


def gemm_operands(kernel: KernelOp, nest: Nest) -> tuple[SSAValue, SSAValue] | None:
    """(A, B) buffers of a gemm-shaped nest `C[.., i, j] += A[.., i, k] * B[.., k, j]`
    (any layouts), or None."""
    if len(nest.reduce) != 1 or len(nest.spatial) < 2:
        return None
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    j = loops[nest.spatial[-1]]
    i = loops[nest.spatial[-2]]
    muls = [op for op in loops[nest.reduce[0]].walk() if isinstance(op, arith.MulfOp)]
    if len(muls) != 1 or any(op.name == "scf.if" for op in loops[nest.reduce[0]].walk()):
        return None
    a, b = (o.owner for o in muls[0].operands)
    if not isinstance(a, memref.LoadOp) or not isinstance(b, memref.LoadOp) or a.memref is b.memref:
        return None
    loads = (a, b)
    uses_j = [any(depends_on(x, j.induction_var) for x in ld.indices) for ld in loads]
    uses_i = [any(depends_on(x, i.induction_var) for x in ld.indices) for ld in loads]
    if uses_j == [False, True] and uses_i == [True, False]:
        return loads[0].memref, loads[1].memref
    if uses_j == [True, False] and uses_i == [False, True]:
        return loads[1].memref, loads[0].memref
    return None


def b_contiguous_in_k(kernel: KernelOp, nest: Nest, b) -> bool:
    """Does B's innermost index run along the reduction loop (linear's `W[n, k]`)?"""
    k = next(lp for lp in kernel.loops() if lp.loop_name == nest.reduce[0])
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp) and op.memref is b:
            return depends_on(op.indices[-1], k.induction_var)
    return False


def _b_contiguous_in_j(kernel: KernelOp, nest: Nest, b) -> bool:
    """Does B's innermost index advance by one along the column loop j (`B[.., k, j]`)?"""
    j = next(lp for lp in kernel.loops() if lp.loop_name == nest.spatial[-1])
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp) and op.memref is b:
            form = affine(op.indices[-1])
            return form is not None and form.terms.get(j.induction_var) == 1
    return False


def contiguous_reduction(kernel: KernelOp, nest: Nest) -> bool:
    """One reduction loop, innermost, and every load that varies along it reads along
    its innermost dimension (a row reduction: softmax, layer norm, reduce over the last
    axis): rfactor vectorizes it; the reduction template would read down columns."""
    if len(nest.reduce) != 1 or nest.trips[nest.reduce[0]] < 8:
        return False
    k = next(lp for lp in kernel.loops() if lp.loop_name == nest.reduce[0])
    varying = [
        op
        for op in k.walk()
        if isinstance(op, memref.LoadOp) and any(depends_on(i, k.induction_var) for i in op.indices)
    ]
    return bool(varying) and all(depends_on(op.indices[-1], k.induction_var) for op in varying)


def flat_reduction(kernel: KernelOp, nest: Nest) -> bool:
    """Two or more reduction loops, innermost, over which every load that varies along
    them reads one contiguous block: its trailing indices are exactly the innermost
    reduction loops' induction variables, in order, over whole dimensions (global average
    pooling's `x[n, c, r0, r1]`, a sum over the last axes); outer reduction loops may
    index the leading dims (batch norm's statistics, `x[r0, c, r1, r2]`: a block per
    sample and channel)."""
    if len(nest.reduce) < 2 or nest.trips[nest.reduce[-1]] < 4:
        return False
    loops = {lp.loop_name: lp for lp in kernel.loops()}
    if any(loops[r].lower != 0 or loops[r].stride != 1 for r in nest.reduce):
        return False
    inner = loops[nest.reduce[-1]]
    if any(isinstance(op, ForOp) for op in inner.block.ops):
        return False
    every = [loops[r].induction_var for r in nest.reduce]
    varying = [
        op
        for op in inner.walk()
        if isinstance(op, memref.LoadOp)
        and any(depends_on(i, iv) for i in op.indices for iv in every)
    ]
    if not varying:
        return False
    for n in range(len(every), 1, -1):  # the longest block of trailing reduction loops
        block, outer = every[-n:], every[:-n]
        trips = [nest.trips[r] for r in nest.reduce[-n:]]
        if all(_reads_block(op, block, outer, trips) for op in varying):
            return True
    return False


def _reads_block(op: memref.LoadOp, block, outer, trips) -> bool:
    """Are `op`'s trailing indices exactly `block`'s variables over whole dims, with the
    other reduction variables (`outer`) only in the leading indices, each alone?"""
    n = len(block)
    shape = op.memref.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
    if len(op.indices) < n or list(shape[-n:]) != trips:
        return False
    if any(op.indices[-n + d] is not block[d] for d in range(n)):
        return False
    lead = op.indices[:-n]
    if any(depends_on(i, iv) for i in lead for iv in block):
        return False
    return all(i in outer or not any(depends_on(i, iv) for iv in outer) for i in lead)


def flat_reduction_script(kernel: KernelOp, nest: Nest) -> str:
    """A reduction over a contiguous block (`flat_reduction`): the innermost reduction
    loop accumulates in a vector of partial results (`rfactor`), which rfactor keeps
    around all the reduction loops, so they are folded once per output element (the
    row is read with unit stride; fusing the loops instead made GCC gather)."""
    K, r = kernel.sym, nest.reduce[-1]
    return "\n".join(
        [f"decompose {K}", f"rfactor {K}/{r} by {largest_divisor(nest.trips[r], RFACTOR)}"]
    )


# partial sums of a reduction vectorized by `rfactor`: one vector of floats
RFACTOR = LANES


def gemv_script(kernel: KernelOp, nest: Nest, factor: int = RFACTOR) -> str:
    """Few rows and B contiguous along k: vectorize the dot products (rfactor)."""
    K, k = kernel.sym, nest.reduce[0]
    f = first_divisor(nest.trips[k], (factor, RFACTOR, 8, 4, 2))
    return "\n".join([f"decompose {K}", f"rfactor {K}/{k} by {f}"])


DOT_ROWS = 8  # up to this many rows (and B contiguous along k): the dot kernel
# and up to twice as many when B is no weight and k is long (a weight gradient
# g @ im2col(x)^T per sample: packing B, read by at most two row blocks, costs as much
# as the products; docs/design/schedules.md#dot-or-gemm)
DOT_LONG_K = 256
# dot products per row of a dot block at most: 8 independent FMA chains hide the FMA
# latency; more only add register pressure
DOT_COLS = 8


def dot_tile(m: int, n: int) -> tuple[int, int]:
    """(mr, nr) of the dot kernel: all `m` rows (m <= DOT_ROWS) or the largest divisor
    of m within DOT_ROWS, and the largest divisor of n that keeps `mr * nr` partial-sum
    vectors within MAX_DOT registers and at most DOT_COLS."""
    mr = largest_divisor(m, DOT_ROWS)
    nr = largest_divisor(n, max(1, min(DOT_COLS, MAX_DOT // mr)))
    return mr, nr


def dot_script(
    kernel: KernelOp,
    nest: Nest,
    tile: tuple[int, int] | None = None,
    threads: int = 2,
    parallel: str = "auto",
) -> str:
    """Few rows and B contiguous along k (a linear layer at a small batch): an `mr x nr`
    block of dot products accumulates in vector registers along k (`tensorize .. dot`),
    reading x and W where they are: no packing, each weight row read once per row block.
    `tile`: (mr, nr), default `dot_tile`; `parallel` as for `gemm_script`."""
    K = kernel.sym
    i, j, k = nest.spatial[-2], nest.spatial[-1], nest.reduce[0]
    m, n = nest.trips[i], nest.trips[j]
    mr, nr = tile or dot_tile(m, n)
    outer = nest.spatial[:-2]
    lines = [f"decompose {K}"]
    order = list(outer)
    if mr < m:
        lines.append(f"split {K}/{i} by {mr} -> {i}o, {i}i")
        order.append(f"{i}o")
    if nr < n:
        lines.append(f"split {K}/{j} by {nr} -> {j}o, {j}i")
        order.append(f"{j}o")
    ii, ji = (f"{i}i" if mr < m else i), (f"{j}i" if nr < n else j)
    order += [ii, ji, k]
    lines.append(f"reorder {K}: {', '.join(order)}")
    lines.append(f"tensorize {K}/{ii} dot")
    lines.append(f"serial {K}")
    tiles = [(x, nest.trips[x]) for x in outer]
    tiles += [(f"{i}o", m // mr)] if mr < m else []
    tiles += [(f"{j}o", n // nr)] if nr < n else []
    par = next((x for x, t in tiles if t >= 2 * threads), None)
    if parallel == "outer":  # the outermost loop of 2 or more iterations
        par = next((x for x, t in tiles if t >= 2), par)
    if par is not None and parallel != "none":
        lines.append(f"parallel {K}/{par}")
    return "\n".join(lines)


A_BLOCK_BYTES = 256 * 1024  # a packed A block of up to 256 rows within this (L2 / 4)
ACC_VECTORS = 24  # accumulator vectors of a gemm tile (of 32 zmm: room for B and A)


def _gemm_tile(m: int, n: int) -> tuple[int, int]:
    """(mr, nr): an `mr x nr` register tile with `mr | m`, `nr | n`. The tile GotoBLAS
    kernels use (8 x 32: 16 accumulators, each B vector feeding 8 FMAs) when the shape
    allows it; otherwise the tile with the most FMAs per load (`mr * v / (mr + v)` for
    `v = ceil(nr / 16)` vectors per row, scaled by the share of vector lanes in use),
    within ACC_VECTORS accumulators: M = 17 gets one 17 x 16 tile instead of 1 x 32
    strips, N = 10 one 10-wide (masked) vector per row instead of 2-wide ones."""
    nr = first_divisor(n, (32, 16))
    mr = first_divisor(m, (8, 6, 4))
    if mr in (4, 6) and m == mr and n % 64 == 0:
        return mr, 64  # one row block of 4 or 6 rows: 16 or 24 accumulators, not 8 or 12
    if nr > 1 and mr > 1:
        return mr, nr
    best, tile = -1.0, (1, 1)
    for c in range(1, min(n, MAX_NR) + 1):
        if n % c:
            continue
        v = -(-c // LANES)
        for r in range(1, min(m, MAX_MR, ACC_VECTORS // v) + 1):
            if m % r:
                continue
            score = r * v / (r + v) * c / (v * LANES)
            if score > best + 1e-9:
                best, tile = score, (r, c)
    return tile


def gemm_default_params(m: int, n: int, k: int) -> GemmParams:
    """Blocks: kc and nc up to 512 (a smaller nc packs the A blocks more often), mc up to
    128, or up to 256 while the A block stays within A_BLOCK_BYTES (one A block instead of
    two); see docs/design/schedules.md#gemm-blocks."""
    mr, nr = _gemm_tile(m, n)
    kc = largest_divisor(k, 512)
    if kc < 64 or (m <= mr and k <= 2048):
        # no useful divisor (k prime, 257 ..): one block, not k blocks of 1; or one row
        # block, which streams each panel of B once whatever kc is: one block too
        kc = k
    if nr < 8 and n > MAX_NR:
        # no divisor of N makes a tile half a vector wide (N prime above 128): tiles of
        # 8 x 16 and remainder tiles in both directions (8 x 32 was slower:
        # docs/design/schedules.md#gemm-prime-n)
        return GemmParams(m, n, kc, 8, 16, False, True, True, True)
    if mr < 4 and m > 8:
        # no divisor of M makes a tile of 4 rows or more (M = 37, 101, 2 * 37 ..): tiles
        # of mr rows and one remainder tile, as a GEMM library's edge kernels do
        nr = first_divisor(n, (32, 16, 64, 48)) if n % LANES == 0 else nr
        mr = max(1, min(8, ACC_VECTORS // -(-nr // LANES)))
        return GemmParams(m, largest_divisor(n, 512, nr), kc, mr, nr, False, True, True)
    mc = largest_divisor(m, 256, mr)
    if mc * kc * 4 > A_BLOCK_BYTES:
        mc = largest_divisor(m, 128, mr)
    return GemmParams(
        mc=mc,
        nc=largest_divisor(n, 512, nr),
        kc=kc,
        mr=mr,
        nr=nr,
    )


def gemm_script(
    kernel: KernelOp, nest: Nest, p: GemmParams, threads: int = 2, parallel: str = "auto"
) -> str:
    """The gemm template; `parallel`: "auto" (first blocked loop with >= 2 x threads
    iterations), "outer" (the outermost blocked loop of 2 or more iterations: a parallel
    loop of one iteration runs on one thread; the tuner, measuring one thread, could not
    tell) or "none"."""
    a, b = gemm_operands(kernel, nest) or (None, None)
    if a is None:
        raise ScheduleError(f"kernel '{kernel.sym}' is not gemm-shaped")
    K = kernel.sym
    i, j, k = nest.spatial[-2], nest.spatial[-1], nest.reduce[0]
    outer = nest.spatial[:-2]
    if p.rows_tail:
        return _gemm_tail_script(kernel, nest, p, b, threads, parallel)
    # one k block (kc = K): no k split, so no reduction loop (of one trip) encloses the
    # accumulator tile's copies and loop-fold-init-epilogue folds the zero init and the
    # epilogue (bias, activation) into them; B's panel is then packed at the jc loop
    ksplit = p.kc < nest.trips[k]
    kc, k1 = (f"{k}c", f"{k}1") if ksplit else (f"{j}c", k)
    blocked = [f"{j}c", f"{k}c", f"{i}c", f"{j}r", f"{i}r", f"{i}i", f"{j}j", k1]
    if not ksplit:
        blocked.remove(f"{k}c")
    # a tile of 2-4 rows and whole vectors carries B's row in registers (`gemm_pipe`);
    # its operands are packed first, the reduction loop already outside the tile's rows
    # and columns (the pipelined nest reads them in more than one pattern, which pack does
    # not take). One row gains nothing (each B vector feeds one FMA either way), nor a
    # 4 x 60 tile (docs/design/schedules.md#gemm-pipe)
    pipe = 2 <= p.mr <= PIPE_ROWS and p.nr > LANES and p.nr % LANES == 0
    pipe = pipe and min(p.kc, nest.trips[k]) >= 2
    if pipe:
        blocked.remove(k1)
        blocked.insert(blocked.index(f"{i}i"), k1)
    at = blocked.index(kc) + 1
    if outer and not _b_follows(kernel, outer, b):
        # leading (batch) dims of A and C only, B shared (a linear layer over [B, T, K]):
        # they go inside the B panel loops, so each panel of B is packed once per call,
        # not once per leading index
        order = blocked[:at] + outer + blocked[at:]
    else:
        order = outer + blocked
    lines = [
        f"decompose {K}",
        f"split {K}/{j} by {p.nc} -> {j}c, {j}1",
        *([f"split {K}/{k} by {p.kc} -> {k}c, {k}1"] if ksplit else []),
        f"split {K}/{i} by {p.mc} -> {i}c, {i}1",
        f"split {K}/{j}1 by {p.nr} -> {j}r, {j}j",
        f"split {K}/{i}1 by {p.mr} -> {i}r, {i}i",
        f"reorder {K}: {', '.join(order)}",
    ]
    if not pipe:
        lines.append(f"tensorize {K}/{i}i gemm")
    if p.pack_b:
        lines.append(f"cache_read {K}/{kc} {buffer_token(kernel, b)} -> {K}_Bp pack")
    if p.pack_a:
        lines.append(f"cache_read {K}/{i}c {buffer_token(kernel, a)} -> {K}_Ap pack")
    if pipe:
        lines.append(f"tensorize {K}/{k1} gemm_pipe")
    trips = {f"{j}c": nest.trips[j] // p.nc, f"{i}c": nest.trips[i] // p.mc, f"{j}r": p.nc // p.nr}
    candidates = [(x, nest.trips[x]) for x in outer] + list(trips.items())
    par = next((x for x, t in candidates if t >= 2 * threads), None)
    par = par or max(candidates, key=lambda xt: xt[1])[0]
    if parallel == "outer":  # the outermost loop of 2 or more iterations (one of 1 is serial)
        par = next((x for x, t in candidates if t >= 2), par)
    lines.append(f"serial {K}")
    if parallel != "none":
        lines.append(f"parallel {K}/{par}")
        # the panels are packed by all threads too when the parallel loop is inside the
        # packing loop (a pack outside it would run on one thread while the others wait)
        packs = [(p.pack_b, f"{K}_Bp_{j}r", kc), (p.pack_a, f"{K}_Ap_{i}r", f"{i}c")]
        for packed, pack_loop, at in packs:
            if packed and order.index(par) > order.index(at):
                lines.append(f"parallel {K}/{pack_loop}")
    return "\n".join(lines)


def _gemm_tail_script(kernel: KernelOp, nest: Nest, p: GemmParams, b, threads, parallel) -> str:
    """The gemm template for an M without a useful divisor (a prime above 24): all M
    rows in one block, B packed in panels as usual, the rows in tiles of mr and one
    remainder tile (`tensorize .. gemmN`), A read in place."""
    K = kernel.sym
    i, j, k = nest.spatial[-2], nest.spatial[-1], nest.reduce[0]
    outer = nest.spatial[:-2]
    if p.cols_tail:  # the columns are tiled by tensorize (`gemmNxM`: loop {j}r)
        blocked = [f"{k}c", i, f"{k}1", j]
        splits = [f"split {K}/{k} by {p.kc} -> {k}c, {k}1"]
        trips = {f"{j}r": nest.trips[j] // p.nr}
        intrinsic = f"gemm{p.mr}x{p.nr}"
    else:
        blocked = [f"{j}c", f"{k}c", f"{j}r", i, f"{k}1", f"{j}j"]
        splits = [
            f"split {K}/{j} by {p.nc} -> {j}c, {j}1",
            f"split {K}/{k} by {p.kc} -> {k}c, {k}1",
            f"split {K}/{j}1 by {p.nr} -> {j}r, {j}j",
        ]
        trips = {f"{j}c": nest.trips[j] // p.nc, f"{j}r": p.nc // p.nr}
        intrinsic = f"gemm{p.mr}"
    at = blocked.index(f"{k}c") + 1
    if outer and not _b_follows(kernel, outer, b):
        order = blocked[:at] + outer + blocked[at:]
    else:
        order = outer + blocked
    lines = [f"decompose {K}", *splits, f"reorder {K}: {', '.join(order)}"]
    if p.pack_b:  # before tensorize: the remainder tile's copy then reads the panel too
        lines.append(f"cache_read {K}/{k}c {buffer_token(kernel, b)} -> {K}_Bp pack")
    lines.append(f"tensorize {K}/{i} {intrinsic}")
    candidates = [(x, nest.trips[x]) for x in outer] + list(trips.items())
    par = next((x for x, t in candidates if t >= 2 * threads), None)
    par = par or max(candidates, key=lambda xt: xt[1])[0]
    if parallel == "outer":  # the outermost loop of 2 or more iterations (one of 1 is serial)
        par = next((x for x, t in candidates if t >= 2), par)
    lines.append(f"serial {K}")
    if parallel != "none":
        lines.append(f"parallel {K}/{par}")
    return "\n".join(lines)


def _b_follows(kernel: KernelOp, outer: list[str], b) -> bool:
    """Does B vary with one of the leading loops `outer` (a batched matmul's B)?"""
    ivs = [lp.induction_var for lp in kernel.loops() if lp.loop_name in outer]
    return any(
        depends_on(i, iv)
        for op in kernel.walk()
        if isinstance(op, memref.LoadOp) and op.memref is b
        for i in op.indices
        for iv in ivs
    )


def reduction_script(kernel: KernelOp, nest: Nest) -> str:
    K = kernel.sym
    s, r = nest.spatial, nest.reduce
    last = s[-1]
    if nest.trips[last] < 4:
        raise ScheduleError(f"kernel '{K}': innermost spatial loop too short to vectorize")
    lines = [f"decompose {K}"]
    order = s[:-1] + r + [last]
    if len(s) == 4 and nest.trips[s[1]] % 4 == 0 and nest.trips[s[1]] > 4:
        lines.append(f"split {K}/{s[1]} by 4 -> {s[1]}o, {s[1]}i")
        order = [s[0], f"{s[1]}o"] + s[2:-1] + r + [f"{s[1]}i", last]
        lines.append(f"reorder {K}: {', '.join(order)}")
        lines.append(f"unroll {K}/{s[1]}i")
    else:
        lines.append(f"reorder {K}: {', '.join(order)}")
    lines.append(f"vectorize {K}/{last}")
    return "\n".join(lines)


def default_scripts(module: ModuleOp, name: str, winograd_fuse: bool = True) -> list[str]:
    """Heuristic schedules of one kernel, best first (the first that applies is used).
    `winograd_fuse`: graph-winograd's kernels fused per block (`winograd_scripts`)."""
    winograd = winograd_scripts(module, name, winograd_fuse)  # graph-winograd's kernels
    if winograd is not None:
        return winograd
    kernel = get_kernel(module, name)
    nest = analyse(kernel)
    if nest is None or not nest.reduce:
        return []
    if gemm_operands(kernel, nest) is None and contiguous_reduction(kernel, nest):
        return [gemv_script(kernel, nest)]
    if gemm_operands(kernel, nest) is None and flat_reduction(kernel, nest):
        return [flat_reduction_script(kernel, nest)]
    out = []
    if gemm_operands(kernel, nest) is not None:
        try:
            out += gemm_scripts(kernel, nest)
        except ScheduleError:
            pass
    else:
        try:
            out.append(default_script(module, name))
        except ScheduleError:
            pass
    try:
        out.append(conv_script(kernel, nest))
    except ScheduleError:
        pass
    if len(nest.spatial) == 4 and len(out) == 2 and is_strided(kernel, nest):
        out.reverse()  # a strided conv: im2col rows first, the plain reorder as fallback
    if len(nest.spatial) == 4 and gemm_operands(kernel, nest) is None:
        try:  # a convolution: the register-tiled direct conv first, the others as fallback
            out.insert(0, tile_script(kernel, nest))
        except ScheduleError:
            pass
        try:  # a small pooling window: the plain nest, the window unrolled
            out.insert(0, pool_script(kernel, nest))
        except ScheduleError:
            pass
        try:  # an integer conv with requantized i32 sums: its register-tiled template
            out.insert(0, int_conv_script(kernel, nest))
        except ScheduleError:
            pass
    return [s for s in out if s]


@dataclass(frozen=True)
class DotParams:
    """The dot kernel's `mr x nr` block of dot products (`dot_script`)."""

    mr: int
    nr: int


def gemm_plans(kernel: KernelOp, nest: Nest) -> list[GemmParams | DotParams]:
    """The schedules of a gemm-shaped kernel, best first, as template parameters: the dot
    kernel for a few rows (or fewer than 16 columns) against a B contiguous along k (a
    linear layer at a small batch), then the blocked gemm (the fallback should the dot
    kernel not apply). The tuner's space (tune/space.py) starts from the first."""
    operands = gemm_operands(kernel, nest)
    assert operands is not None
    b = operands[1]
    m, n, k = (nest.trips[x] for x in (nest.spatial[-2], nest.spatial[-1], nest.reduce[0]))
    out: list[GemmParams | DotParams] = []
    outer = nest.spatial[:-2]
    rows = m if _b_follows(kernel, outer, b) else m * math.prod(nest.trips[x] for x in outer)
    weight = _is_weight(kernel, b)
    few = rows <= DOT_ROWS or n < LANES or (rows <= 2 * DOT_ROWS and k >= DOT_LONG_K and not weight)
    dot = few and k >= LANES and b_contiguous_in_k(kernel, nest, b)
    # a weight's panels are packed once (see below), so the packed gemm wins from 2 rows
    # on (its 2-4-row tiles carry B's row in registers, `gemm_pipe`; one row stays the dot
    # kernel), unless N is no multiple of 16 (a 10-wide tile row vectorizes as 8 + 2 with
    # shuffles; so the dot kernel also takes any rows when N < 16);
    # docs/design/schedules.md#dot-or-gemm
    dot_first = dot and (not weight or rows < 2 or n % LANES != 0)
    if dot_first:
        out.append(DotParams(*dot_tile(m, n)))
    p = gemm_default_params(m, n, k)
    if weight:
        # B's panels are packed once, when the weights are bound (loop-prepack-weights
        # hoists the pack), so the packed gemm beats the unpacked dot kernel; A is read in
        # place when it is one row block
        p = replace(p, pack_a=m > p.mr and not p.rows_tail, pack_b=True)
        if rows * k * 4 <= A_IN_PLACE_BYTES and not p.rows_tail:
            # all of A stays in L2 for the whole call: one k block (the tile's init and
            # epilogue then fold into it, see gemm_script) and A read in place (no serial
            # pack), unless the tile's rows end in a part-vector: then the packed A was
            # faster (docs/design/schedules.md#a-in-place)
            p = replace(p, kc=k, pack_a=p.pack_a and p.nr % LANES != 0)
    elif m < 4 or (m <= p.mc and k <= p.kc and _b_contiguous_in_j(kernel, nest, b)):
        # B rows contiguous along j already and a single block of A: packing costs more
        # than it saves (docs/design/schedules.md#no-pack)
        p = replace(p, pack_a=False, pack_b=False)
    out.append(p)
    if dot and not dot_first:
        out.append(DotParams(*dot_tile(m, n)))  # the fallback
    return out


def gemm_scripts(kernel: KernelOp, nest: Nest) -> list[str]:
    """`gemm_plans` rendered as scripts."""
    return [
        dot_script(kernel, nest, (p.mr, p.nr))
        if isinstance(p, DotParams)
        else gemm_script(kernel, nest, p)
        for p in gemm_plans(kernel, nest)
    ]


# A of at most this many bytes (a quarter of a core's L2) is read in place by the
# weight gemm, in one k block (docs/design/schedules.md#a-in-place)
A_IN_PLACE_BYTES = 256 * 1024


def _is_weight(kernel: KernelOp, value: SSAValue) -> bool:
    """Is `value` a param of @main (after its `dlpc.num_inputs` inputs) or a constant
    global: what loop-prepack-weights packs once per binding of the weights?"""
    owner = value.owner
    if isinstance(owner, memref.GetGlobalOp):
        module = kernel.parent_op()
        while module is not None and not isinstance(module, ModuleOp):
            module = module.parent_op()
        name = owner.name_.root_reference.data
        return module is not None and any(
            isinstance(op, memref.GlobalOp) and op.sym_name.data == name and op.constant
            for op in module.ops
        )
    fn = kernel.parent_op()
    while fn is not None and not isinstance(fn, func.FuncOp):  # (a kernel in an scf.if)
        fn = fn.parent_op()
    if not isinstance(value, BlockArgument) or fn is None or value.owner is not fn.regions[0].block:
        return False
    params, n_in = fn.attributes.get("dlpc.params"), fn.attributes.get("dlpc.num_inputs")
    if not isinstance(params, ArrayAttr) or not isinstance(n_in, IntegerAttr):
        return False
    return n_in.value.data <= value.index < n_in.value.data + len(params.data)


def default_script(module: ModuleOp, name: str) -> str:
    """The heuristic schedule of one kernel as script text ('' when none applies)."""
    kernel = get_kernel(module, name)
    nest = analyse(kernel)
    if nest is None or not nest.reduce:
        return ""
    if gemm_operands(kernel, nest) is not None:
        return gemm_scripts(kernel, nest)[0]
    try:
        return reduction_script(kernel, nest)
    except ScheduleError:
        return ""


def finish_kernel(kernel: KernelOp) -> None:
    """Vectorize the innermost loop of init/epilogue nests; serialise tiny kernels."""
    for loop in list(kernel.loops()):
        name = loop.loop_name or ""
        if (
            name.endswith(("_init", "_post"))
            and not any(isinstance(op, ForOp) for op in loop.block.ops)
            and loop.trip_count > 1
            and not is_reduction(loop)
        ):
            loop.annotate("vectorize")
    work = kernel_work(kernel)
    streams = work >= STREAM_SERIAL_WORK and work <= STREAM_RATIO * _elements_read(kernel)
    if work < SERIAL_WORK and not streams:
        for loop in kernel.loops():
            if loop.parallel is not None and work >= TEAM_WORK:
                loop.attributes[TEAM_LOOP] = UnitAttr()  # shared inside a team region only
            loop.annotate("parallel", False)


def _elements_read(kernel: KernelOp) -> int:
    """Elements of the buffers from outside `kernel` that it reads and does not write
    (a linear layer's input, weight and bias)."""
    stored = {op.memref for op in kernel.walk() if isinstance(op, memref.StoreOp)}
    return sum(
        math.prod(memref_type(b).get_shape())
        for b in buffers_accessed(kernel, external=True)
        if b not in stored
    )


def try_script(module: ModuleOp, script: str) -> bool:
    """Apply `script` if it applies cleanly (checked on a clone first: of the one kernel
    the script schedules when it names one, else of the module); the scheduled and
    verified clone then takes the original's place."""
    if not script:
        return False
    try:
        trial, scratch = _trial_copy(module, script)
    except (ScheduleError, ValueError, VerifyException):
        return False  # e.g. a kernel name the script syntax cannot spell ("1 mm")
    try:
        apply_script(trial, script)
        if scratch is None:
            _verify_named(trial, script)
        else:  # the kernel alone: the scratch module does not hold the buffers it uses
            for op in scratch.body.block.ops:
                verify_ir(op)
    except (ScheduleError, ValueError, VerifyException):
        if scratch is not None:
            scratch.erase()  # drop the clone's uses of the module's buffers
        return False  # this candidate does not apply: the caller tries the next one
    if scratch is None:  # a whole clone, scheduled and verified: it becomes the module
        _adopt(module, trial)
    else:
        _adopt_kernel(module, scratch, script)
    return True


def _adopt_kernel(module: ModuleOp, scratch: ModuleOp, script: str) -> None:
    """Put the scheduled kernel of `scratch` in place of the module's kernel of that
    name (cheaper than applying the script a second time, to the module:
    docs/design/schedules.md#adopt-kernel). A script that left the scratch module with
    more than its one kernel is applied to the module instead. The replaced kernel is
    erased (its uses of the module's buffers dropped); its name stays readable for callers
    holding it."""
    ops = list(scratch.body.block.ops)
    if len(ops) == 1 and isinstance(ops[0], KernelOp):
        new = ops[0]
        old = get_kernel(module, new.sym)
        scratch.body.block.detach_op(new)
        block = old.parent_block()
        assert block is not None  # (a kernel of the module)
        block.insert_op_before(new, old)
        block.erase_op(old)
    else:
        apply_script(module, script)
    scratch.erase()


def _verify_named(root: Operation, script: str) -> None:
    """Verify `root` after `script` ran on it, except the kernels the script does not
    name: they are as te-to-loop made them, verified then (verifying every kernel of
    resnet after each of its three fused Winograd scripts was a third of its compile)."""
    if isinstance(root, KernelOp):
        if re.search(rf"(?<![\w.]){re.escape(root.sym)}(?![\w.])", script):
            verify_ir(root)
        return
    root.verify(verify_nested_ops=False)
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                _verify_named(op, script)


def _adopt(module: ModuleOp, trial: Operation) -> None:
    """Make `trial` (a scheduled clone of `module`) the module: its block replaces the
    module's, instead of applying the script a second time (a cross-kernel script, such
    as a fused Winograd chain's, took a second of resnet's compile doing so). The old
    block is detached, not erased: callers may hold its kernels for their names."""
    assert isinstance(trial, ModuleOp)
    old, new = module.body.blocks[0], trial.body.blocks[0]
    trial.body.detach_block(new)
    module.body.insert_block_before(new, old)
    module.body.detach_block(old)
    module.attributes = dict(trial.attributes)


def _trial_copy(module: ModuleOp, script: str) -> tuple[Operation, ModuleOp | None]:
    """A copy to try `script` on. A script whose steps all name one kernel (and do not
    move code between kernels) only changes that kernel, so a clone of it alone, in a
    scratch module, is enough; cloning and verifying the whole module for every
    candidate of every kernel made the pass quadratic in the kernel count."""
    steps = parse_script(script)
    names = {step.args[0].split("/")[0].split(":")[0] for step in steps}
    if len(names) != 1 or any(step.prim in ("compute_at", "compute_inline") for step in steps):
        return module.clone(), None
    try:
        kernel = get_kernel(module, names.pop())
    except ScheduleError:
        return module.clone(), None
    scratch = ModuleOp([kernel.clone()])
    return scratch, scratch


# Seconds the schedule search may take over one module: each kernel tries at most two
# candidate scripts, but a pathological (mutated, huge) nest must not stall compilation;
# kernels reached after the budget is spent keep te-to-loop's (identity) schedule. The
# seconds are the compiling thread's CPU time: by the wall clock a loaded machine (a
# tenth of a core: resnet's training step took 500 s) left half the kernels unscheduled,
# the compiled code depending on the load.
SEARCH_BUDGET = 60.0


class _Budget:
    """The search deadline; says once on stderr when it ran out and what that means."""

    def __init__(self, seconds: float | None, what: str):
        self.seconds = SEARCH_BUDGET if seconds is None else seconds
        self.deadline = time.thread_time() + self.seconds
        self.what = what
        self.skipped = 0

    def spent(self) -> bool:
        if time.thread_time() < self.deadline:
            return False
        self.skipped += 1
        return True

    def report(self, total: int) -> None:
        if self.skipped:
            print(
                f"dlpc: note: {self.what}: schedule search stopped after its budget of "
                f"{self.seconds:g} s; {self.skipped} of {total} kernels keep the identity "
                "schedule",
                file=sys.stderr,
            )


def apply_default(
    module: ModuleOp, budget: float | None = None, winograd_fuse: bool = True
) -> None:
    todo = list(kernels(module))
    clock = _Budget(budget, "loop-default-schedule")
    for kernel in todo:
        if clock.spent():
            continue
        for script in default_scripts(module, kernel.sym, winograd_fuse):
            if try_script(module, script):
                break
    for kernel in kernels(module):
        finish_kernel(kernel)
    clock.report(len(todo))


def apply_tuned_or_default(
    module: ModuleOp, tuning_log: str | None = None, target: str = "c"
) -> dict[str, str]:
    """Schedule every kernel: the best schedule of a matching record in `tuning_log`
    (same kernel signature and target, measured on this machine and tuned against
    today's default schedule), else the default. Returns kernel -> "tuned" / "default" /
    "none". Kernels with records but none measured on this machine (`machine_fingerprint`;
    records without a machine count as another machine's) take the default, and one
    warning line says how many there were; kernels with records of this machine that
    were all tuned against another default schedule (stale, see `tuning_log`) take the
    default, and another warning line says how many. A kernel is in one of the two: with
    no record of this machine it is foreign, whatever default its records name."""
    from dlpc.passes.schedule.tuning_log import (
        TuningLog,
        kernel_signature,
        machine_fingerprint,
        rename_script,
        schedule_digest,
    )

    log = TuningLog(tuning_log) if tuning_log else None
    machine = machine_fingerprint() if log is not None else ""
    how: dict[str, str] = {}
    stale: list[str] = []
    foreign: list[str] = []
    todo = list(kernels(module))
    clock = _Budget(None, "loop-apply-tuning-log")
    for kernel in todo:
        name = kernel.sym
        if clock.spent():
            how[name] = "none"
            continue
        best, defaults = None, None
        # (a kernel computed inside another, graph-winograd's matmul, keeps its default:
        # a record of the same signature tuned standalone would break the fusion)
        if log is not None and fused_into(module, name) is None:
            sig = kernel_signature(kernel)
            if log.best(sig, target) is not None:
                defaults = default_scripts(module, name)
                best = log.best(sig, target, schedule_digest(defaults, name), machine)
                if best is None and log.best(sig, target, machine=machine) is None:
                    foreign.append(name)
                elif best is None:
                    stale.append(name)
        if best is not None and try_script(module, rename_script(best.script, best.kernel, name)):
            how[name] = "tuned"
        elif any(try_script(module, s) for s in defaults or default_scripts(module, name)):
            how[name] = "default"
        else:
            how[name] = "none"
    for kernel in kernels(module):
        finish_kernel(kernel)
    clock.report(len(todo))
    if foreign:
        print(
            f"dlpc: warning: tuning log {tuning_log}: {len(foreign)} kernel(s) "
            f"({_first_three(foreign)}) have only records measured on other machines; they "
            f"use today's default (re-tune with dlpc-tune on this machine, '{machine}')",
            file=sys.stderr,
        )
    if stale:
        print(
            f"dlpc: warning: tuning log {tuning_log}: {len(stale)} kernel(s) "
            f"({_first_three(stale)}) have only records tuned against an older default "
            "schedule; they use today's default (re-tune with dlpc-tune to refresh them)",
            file=sys.stderr,
        )
    return how


def _first_three(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


@dataclass(frozen=True)
class LoopDefaultSchedule(ModulePass):
    """`loop-default-schedule`"""

    name = "loop-default-schedule"
    # seconds the search may take (default SEARCH_BUDGET); later kernels keep the identity
    budget: float | None = None
    # graph-winograd's transforms and matmul fused per row of tiles up to 32 channels
    # (passes/schedule/winograd.py fused_script); false: always the three kernels
    winograd_fuse: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_default(op, self.budget, self.winograd_fuse)


@dataclass(frozen=True)
class LoopApplyTuningLog(ModulePass):
    """`loop-apply-tuning-log{log=tune.jsonl target=c}`: tuned schedules where the log
    has one for a kernel's signature, default schedules elsewhere."""

    name = "loop-apply-tuning-log"
    log: str | None = None
    target: str = "c"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.log and not os.path.isfile(self.log):
            raise DlpcError(f"error: no such tuning log: {self.log}")
        apply_tuned_or_default(op, self.log, self.target)
