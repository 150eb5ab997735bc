"""A linear layer over a few rows, split by output columns, for `loop-to-dlp`.

Input: a loop kernel `out[0.., m, n] = sum_r x[0.., m, r] * w[n, r] (+ b[n])` (te-to-loop's
linear over M rows: the row loop outside the column loop, f32, static shapes).
Output (`build`): one `dlp.kernel` where each task owns a block of output columns: its
weight rows (one contiguous GDRAM range) go straight to WRAM, so the weight crosses the
GDRAM port once in all; the input is staged in SRAM once per cluster (every core copies
a DMA-aligned share, `dlp.sync_cluster`, every core copies it all SRAM2NRAM); one `dlp.matmul` (the input times the
block's rows transposed: M x block), the bias as a `dlp.cycle_add` with period the block,
and the M rows of the block stored as one `dlp.memcpy_strided_async` (a segment a row).
The row split that loop-to-dlp plans otherwise needs every weight in every cluster that
runs rows: the transformer's QKV projection (16 rows, a 48 KiB weight) took its weight
over GDRAM twice.

Used where its estimate (`cycles`, the simulator's model) beats the row plan's: blocks of
a whole number of DMA alignments (each NRAM segment of the store starts aligned) that
divide the columns, whole clusters of tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Block, Region, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, KernelOp, spine
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import Builder, latencies, round_up
from dlpc.passes.lower.dlp_select._matching import const_value
from dlpc.targets.dlp import DlpTarget


@dataclass
class Columns:
    """The linear `kernel` computes: out[.., m, n] = sum_r x[.., m, r] * w[n, r] + b[n]."""

    kernel: KernelOp
    x: SSAValue
    w: SSAValue
    b: SSAValue | None
    out: SSAValue
    m: int
    k: int
    n: int
    tasks: int = 0
    block: int = 0


def _zero(value: SSAValue) -> bool:
    c = const_value(value)
    return isinstance(c, float) and c == 0.0


def match(kernel: KernelOp) -> Columns | None:
    """The kernel as a `Columns` linear, or None."""
    nest = spine(kernel)
    outer = [lp for lp in nest[:-2] if lp.trip_count == 1]
    if len(nest) < 2 or len(outer) != len(nest) - 2:
        return None
    rows, cols = nest[-2], nest[-1]
    if any(lp.lower != 0 or lp.stride != 1 for lp in nest) or rows.trip_count < 2:
        return None  # (one row: the row plan splits the columns already)
    ops = [op for op in cols.block.ops if not isinstance(op, arith.ConstantOp)]
    if len(ops) < 5 or not isinstance(ops[0], memref.AllocaOp) or not isinstance(ops[2], ForOp):
        return None
    acc = ops[0].memref
    init, red = ops[1], ops[2]
    if not (isinstance(init, memref.StoreOp) and init.memref is acc):
        return None
    body = [op for op in red.block.ops if not isinstance(op, arith.ConstantOp)]
    if len(body) != 6 or red.lower != 0 or red.stride != 1 or spine(red):
        return None
    lx, lw, mul, la, add, st = body
    if not (
        isinstance(lx, memref.LoadOp)
        and isinstance(lw, memref.LoadOp)
        and mul.name == "arith.mulf"
        and set(mul.operands) == {lx.res, lw.res}
        and isinstance(la, memref.LoadOp)
        and la.memref is acc
        and add.name == "arith.addf"
        and set(add.operands) == {la.res, mul.results[0]}
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is add.results[0]
    ):
        return None
    m, n, r = rows.induction_var, cols.induction_var, red.induction_var
    outer_ivs = [lp.induction_var for lp in outer]
    if list(lx.indices) != [*outer_ivs, m, r] or list(lw.indices) != [n, r]:
        return None
    post = ops[3:]
    total = post[0]
    if not (isinstance(total, memref.LoadOp) and total.memref is acc):
        return None
    b = None
    value = total.res
    rest = post[1:]
    if len(rest) == 3:  # + b[n]
        lb, badd, _ = rest
        if not (
            isinstance(lb, memref.LoadOp)
            and list(lb.indices) == [n]
            and badd.name == "arith.addf"
            and set(badd.operands) == {value, lb.res}
        ):
            return None
        b, value, rest = lb.memref, badd.results[0], rest[2:]
    store = rest[0] if len(rest) == 1 else None
    if not (
        isinstance(store, memref.StoreOp)
        and store.value is value
        and list(store.indices) == [*outer_ivs, m, n]
    ):
        return None
    bufs = [lx.memref, lw.memref, store.memref, *([b] if b is not None else [])]
    if not all(
        isinstance(v.type, MemRefType) and isinstance(element_type(v), Float32Type) for v in bufs
    ):
        return None
    if not _zero(init.value):
        return None
    return Columns(
        kernel,
        lx.memref,
        lw.memref,
        b,
        store.memref,
        rows.trip_count,
        red.trip_count,
        cols.trip_count,
    )


def _stagers(c: Columns, desc: DlpTarget, tasks: int | None = None) -> int:
    """Cores of a cluster that stage the input, a share each."""
    return min(tasks if tasks is not None else c.tasks, desc.cores_per_cluster)


def cycles(c: Columns, desc: DlpTarget, tasks: int) -> float:
    """The simulator's model of the kernel on `tasks` tasks (blocks of n / tasks)."""
    block = c.n // tasks
    clusters = -(-tasks // desc.cores_per_cluster)
    per_cycle = desc.gdram_bandwidth_gbs / desc.clock_ghz
    x, w, out = c.m * c.k * 4, c.n * c.k * 4, c.m * c.n * 4
    b = c.n * 4 if c.b is not None else 0
    port = (x * clusters + w + b + out) / per_cycle
    own = (block * c.k + block * (c.b is not None)) * 4 + x / _stagers(c, desc, tasks)
    compute = c.m * c.k * block / desc.throughput("matmul") + (c.m * block / desc.vector_width) * (
        c.b is not None
    )
    transfer = (
        latencies(desc, [3, 1, 1])
        + (own + c.m * block * 4) / per_cycle
        + x / (desc.sram_bandwidth_gbs / desc.clock_ghz)
    )
    return max(port, compute + transfer)


def choose(c: Columns, desc: DlpTarget) -> float | None:
    """Set the cheapest task count (its cycles), None where no split fits the rules."""
    align = desc.dma_align // 4
    best: tuple[float, int] | None = None
    cpc = desc.cores_per_cluster
    for tasks in range(2, desc.cores + 1):
        block = c.n // tasks
        if c.n % tasks or block % align or (tasks > cpc and tasks % cpc):
            continue
        use = {
            "nram": round_up(c.m * c.k * 4, desc.dma_align)
            + round_up(block * 4, desc.dma_align)
            + 2 * round_up(c.m * block * 4, desc.dma_align),
            "wram": round_up(block * c.k * 4, desc.dma_align),
            "sram": round_up(c.m * c.k * 4, desc.dma_align),
        }
        if any(use[s] > desc.capacity(s) for s in use):
            continue
        cost = cycles(c, desc, tasks)
        if best is None or cost < best[0]:
            best = (cost, tasks)
    if best is None:
        return None
    c.tasks, c.block = best[1], c.n // best[1]
    return best[0]


def build(c: Columns, desc: DlpTarget) -> dlp.KernelOp:
    """The column-split kernel (`choose` first)."""
    k = c.kernel
    attrs: dict = {
        "tasks": IntegerAttr(c.tasks, i64),
        "dma_align": IntegerAttr(desc.dma_align, i64),
        "vector_align": IntegerAttr(desc.vector_align, i64),
    }
    if k.origin is not None:
        attrs["origin"] = StringAttr(k.origin.data)
    op = dlp.KernelOp(k.sym, **attrs)
    b = Builder(op.block)
    f32 = element_type(c.x)
    tid = b.v(dlp.TaskIdOp())
    tid.name_hint = "task"
    core = b.v(dlp.CoreIdOp())
    core.name_hint = "core"
    c0 = b.c(0)
    align = desc.dma_align // 4
    xs = c.m * c.k
    x_sram = b.alloc("sram", round_up(xs, align), f32, "x_sram")
    x_nram = b.alloc("nram", round_up(xs, align), f32, "x_nram")
    w_wram = b.alloc("wram", round_up(c.block * c.k, align), f32, "w_wram")
    acc = b.alloc("nram", round_up(c.m * c.block, align), f32, "acc_nram")
    first = b.mul(tid, b.c(c.block))
    first.name_hint = "col"
    # the cluster's input into SRAM (every core of the cluster a DMA-aligned share), the
    # task's own weight rows and bias block with it: one wait, then the barrier
    piece = round_up(-(-xs // _stagers(c, desc)), align)
    start = b.min(b.mul(core, b.c(piece)), b.c(xs))
    count = b.min(b.c(piece), b.sub(b.c(xs), start))
    share = Block()
    b.op(scf.IfOp(b.v(arith.CmpiOp(count, c0, "sgt")), [], Region(share)))
    sb = b.nested(share)
    sb.op(dlp.MemcpyAsyncOp(x_sram, start, c.x, start, count))
    sb.op(scf.YieldOp())
    b.op(dlp.MemcpyAsyncOp(w_wram, c0, c.w, b.mul(first, b.c(c.k)), b.c(c.block * c.k)))
    bias = None
    if c.b is not None:
        bias = b.alloc("nram", round_up(c.block, align), f32, "b_nram")
        b.op(dlp.MemcpyAsyncOp(bias, c0, c.b, first, b.c(c.block)))
    b.op(dlp.WaitDmaOp())
    b.op(dlp.SyncClusterOp())
    b.op(dlp.MemcpyAsyncOp(x_nram, c0, x_sram, c0, b.c(xs)))
    b.op(dlp.WaitDmaOp())
    b.op(
        dlp.MatmulOp(
            acc, c0, x_nram, c0, w_wram, c0, b.c(c.m), b.c(c.k), b.c(c.block), transpose_rhs=True
        )
    )
    result = acc
    if bias is not None:
        result = b.alloc("nram", round_up(c.m * c.block, align), f32, "out_nram")
        b.op(dlp.CycleAddOp(result, c0, acc, c0, bias, c0, b.c(c.m * c.block), b.c(c.block)))
    b.op(
        dlp.MemcpyStridedAsyncOp(
            c.out, first, result, c0, b.c(c.block), b.c(c.m), b.c(c.n), b.c(c.block)
        )
    )
    b.op(dlp.WaitDmaOp())
    return op
