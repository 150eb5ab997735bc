"""Attention folded into the row chain that reads its merged heads (loop-to-dlp, batch 1).

At batch 1 the attention chain (scores `q k^T` times a scale, softmax over the keys, the
product with `v`, its head merge stored by the chain: `Swap`) is a kernel of its own whose
time is two DMA latencies (0.4 us) for 0.07 us of compute, and the chain after it (the
output projection, layer norm and feed-forward layers) loads its merged rows back. Here
the row chain computes them itself: each of its tasks, for its token rows, all heads'
scores, softmax and products, into the NRAM tile it would have loaded. K and V are whole
buffers of the row chain (in WRAM, staged in SRAM like its weights), q one strided copy a
tile (its rows of every head), the scale a whole buffer; the attention kernels and the
merge copy go (their names join the chain's `dlpc.fused`).

Matched exactly (else nothing changes): a chain of six kernels over `[1, H, S, S]`
scores: a batched product `out[0,h,i,j] = sum_r q[0,h,i,r] k[0,h,j,r]` (times a 0-d
scale, or not), softmax's four kernels (origin `graph.softmax`: the row maximum, exp of
the difference, the row sum, the quotient) over the last axis, a batched product
`o[0,h,i,e] = sum_r p[0,h,i,r] v[0,h,r,e]`; the merge `m[0,i,h,e] = o[0,h,i,e]` a `Swap`;
a later chain reading `m` (or a row-major alias of it, `[1, S, H * D]`) one row per work
iteration, on whole tiles (its rows divide evenly among its tasks), where rows of `S` and
`D` floats start vector-aligned and the added buffers fit; taken where the attention
chain's estimate is larger than what the fold adds to the row chain (`added_cycles`: a
rough model of the same terms as the simulator's, measured on the transformer:
docs/dlp.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import Float32Type, FloatAttr
from xdsl.ir import SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, KernelOp, spine
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.lower._dlp_build import BufferPlan, Builder, finish_for, round_up
from dlpc.targets.dlp import DlpTarget


@dataclass
class Attention:
    """A matched attention chain and what the row chain needs to compute it."""

    kernels: list[KernelOp]  # the attention chain's members, then the merge copy
    q: SSAValue
    k: SSAValue
    v: SSAValue
    scale: SSAValue | None  # a 0-d buffer the scores are multiplied by
    merged: set[SSAValue]  # the merge's destination and its aliases
    heads: int
    rows: int  # S: query rows = keys
    depth: int  # D: elements of a head's row


@dataclass
class _Product:
    lhs: SSAValue
    rhs: SSAValue
    out: SSAValue
    scale: SSAValue | None
    transposed: bool
    shape: tuple[int, ...]  # (1, H, M, N) of out


def _product(k: KernelOp) -> _Product | None:
    """`out[0,h,i,j] = sum_r lhs[0,h,i,r] * rhs[0,h,j,r]` (transposed) or `rhs[0,h,r,j]`,
    times a 0-d `scale[]` or not; None for anything else."""
    loops = spine(k)
    if len(loops) != 4 or loops[0].trip_count != 1:
        return None
    if any(lp.lower != 0 or lp.stride != 1 for lp in loops):
        return None
    i0, h, i, j = (lp.induction_var for lp in loops)
    body = loops[3].block
    reds = [op for op in body.ops if isinstance(op, ForOp)]
    allocas = [op for op in body.ops if isinstance(op, memref.AllocaOp)]
    stores = [op for op in body.ops if isinstance(op, memref.StoreOp) and op.indices]
    if len(reds) != 1 or len(allocas) != 1 or len(stores) != 1:
        return None
    red, acc = reds[0], allocas[0].memref
    r = red.induction_var
    if red.lower != 0 or red.stride != 1:
        return None
    loads = [op for op in red.block.ops if isinstance(op, memref.LoadOp) and op.indices]
    if len(loads) != 2 or list(loads[0].indices) != [i0, h, i, r]:
        return None
    rhs = list(loads[1].indices)
    if rhs not in ([i0, h, j, r], [i0, h, r, j]):
        return None
    muls = [op for op in red.block.ops if isinstance(op, arith.MulfOp)]
    adds = [op for op in red.block.ops if isinstance(op, arith.AddfOp)]
    if len(muls) != 1 or {id(v) for v in muls[0].operands} != {id(x.res) for x in loads}:
        return None
    if len(adds) != 1 or muls[0].result not in adds[0].operands:
        return None
    inits = [op for op in body.ops if isinstance(op, memref.StoreOp) and op.memref is acc]
    zero = inits[0].value.owner if len(inits) == 1 else None
    if not isinstance(zero, arith.ConstantOp) or not isinstance(zero.value, FloatAttr):
        return None
    if zero.value.value.data != 0.0:  # (the sum starts at zero)
        return None
    store = stores[0]
    if list(store.indices) != [i0, h, i, j]:
        return None
    value, scale = store.value.owner, None
    if isinstance(value, arith.MulfOp):
        got = [v.owner for v in value.operands]  # (two: one load of acc, one of the scale)
        acc_loads = [g for g in got if isinstance(g, memref.LoadOp) and g.memref is acc]
        others = [g for g in got if isinstance(g, memref.LoadOp) and g.memref is not acc]
        if len(acc_loads) != 1 or len(others) != 1 or shape_of(others[0].memref) != ():
            return None
        scale = others[0].memref
    elif not (isinstance(value, memref.LoadOp) and value.memref is acc):
        return None
    shape = tuple(shape_of(store.memref))
    return _Product(
        loads[0].memref, loads[1].memref, store.memref, scale, rhs == [i0, h, j, r], shape
    )


def _io(k: KernelOp) -> tuple[set[SSAValue], set[SSAValue]]:
    """(buffers from outside the kernel it loads, those it stores)."""
    inside = {id(op) for op in k.walk()}
    loads, stores = set(), set()
    for op in k.walk():
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            m = op.memref
            if id(m.owner) in inside:
                continue
            (stores if isinstance(op, memref.StoreOp) else loads).add(m)
    return loads, stores


def match(kernels: list[KernelOp], swaps: dict) -> Attention | None:
    """`kernels` (a chain's members) as the attention described above, with its merge."""
    if len(kernels) != 6:
        return None
    scores, smax, sexp, ssum, snorm, prod = kernels
    a, b = _product(scores), _product(prod)
    if a is None or b is None or not a.transposed or b.transposed or b.scale is not None:
        return None
    if any(k.origin is None or k.origin.data != "graph.softmax" for k in kernels[1:5]):
        return None
    sc = a.out
    outs = [_io(k)[1] for k in (smax, sexp, ssum, snorm)]
    if any(len(o) != 1 for o in outs):
        return None
    mx, ex, sm, p = (next(iter(o)) for o in outs)
    if _io(smax)[0] != {sc} or _io(sexp)[0] != {sc, mx} or _io(ssum)[0] != {ex}:
        return None
    if _io(snorm)[0] != {ex, sm} or b.lhs is not p:
        return None
    _, heads, rows, keys = a.shape
    depth = shape_of(a.lhs)[3]
    if keys != rows or shape_of(mx) != (1, heads, rows) or shape_of(sm) != (1, heads, rows):
        return None  # (softmax over the last axis: one value a row)
    if shape_of(b.rhs) != (1, heads, rows, depth) or b.shape != (1, heads, rows, depth):
        return None
    if shape_of(a.rhs) != (1, heads, rows, depth):
        return None
    swap = swaps.get(b.out)
    if swap is None or swap.axis != 1 or shape_of(swap.dst) != (1, rows, heads, depth):
        return None
    merged = {swap.dst}
    for use in swap.dst.uses:
        cast = use.operation
        if isinstance(cast, memref.ReinterpretCastOp) and shape_of(cast.result) == (
            1,
            rows,
            heads * depth,
        ):
            if list(cast.static_offsets.get_values()) == [0]:
                merged.add(cast.result)
    return Attention(
        [*kernels, swap.kernel], a.lhs, a.rhs, b.rhs, a.scale, merged, heads, rows, depth
    )


def reader(attn: Attention, plans) -> BufferPlan | None:
    """The plan (of a chain member) reading the merged heads one row a work iteration,
    whole rows, read-only; None where the chain reads them otherwise."""
    found = None
    for plan in plans:
        for p in plan.buffers.values():
            if p.value not in attn.merged:
                continue
            rank = len(p.shape)
            if p.written or p.kind != "tiled" or p.dim != rank - 2 or p.a != 1:
                return None
            if p.rlo != 0 or p.rhi != 0 or any(c != 0 for c in p.prefix):
                return None
            found = found or p
    return found


def fits(attn: Attention, fused, desc: DlpTarget) -> bool:
    """Whether the chain `fused` can compute the attention of its rows (see above)."""
    last = fused.plans[-1]
    vec = desc.vector_align // 4
    if fused.bands != 1 or last.trip != attn.rows:
        return False
    # (whole tiles: the rows divide evenly among the tasks)
    if fused.tile * fused.tasks != attn.rows or attn.rows % vec or attn.depth % vec:
        return False
    if not isinstance(element_type(attn.q), Float32Type):
        return False
    if reader(attn, fused.plans) is None:
        return False
    extra = extra_bytes(attn, fused.tile, desc)
    use = {"nram": 0, "wram": 0, "sram": 0}
    for plan in fused.plans:
        for space, n in plan.space_bytes(fused.tile, False, fused.sram).items():
            use[space] += n
    return all(use[s] + extra[s] <= desc.capacity(s) for s in use)


def extra_bytes(attn: Attention, tile: int, desc: DlpTarget) -> dict[str, int]:
    """On-chip bytes the fold adds to a chain of `tile` rows a task."""
    h, s, d = attn.heads, attn.rows, attn.depth
    a = desc.dma_align
    rows = h * tile
    nram = round_up(rows * d * 4, a) + 5 * round_up(rows * s * 4, a) + 2 * round_up(rows * 4, a)
    nram += a  # the scale
    kv = 2 * round_up(h * s * d * 4, a)
    return {"nram": nram, "wram": kv, "sram": kv}


def added_cycles(attn: Attention, fused, desc: DlpTarget) -> float:
    """What the fold adds to the row chain `fused`, roughly: the longer of its slowest
    task's added work (the products on the matrix unit, six vector passes over the
    scores, two scalar loops over the rows; K and V's SRAM -> WRAM copies and staging
    share, q's rows) and its GDRAM port's (K and V once per cluster, q, less the merged
    rows no longer loaded). The chain is on both at batch 1."""
    h, s, d, tile = attn.heads, attn.rows, attn.depth, fused.tile
    clusters = -(-fused.tasks // desc.cores_per_cluster)
    per_cycle = desc.gdram_bandwidth_gbs / desc.clock_ghz
    kv = 2 * h * s * d * 4
    compute = (
        2 * h * tile * s * d / desc.throughput("matmul")
        + 6 * h * tile * s / desc.vector_width
        + 2 * h * tile * 3 / desc.scalar_ops_per_cycle
    )
    task = (
        compute
        + kv / (desc.sram_bandwidth_gbs / desc.clock_ghz)
        + kv / min(fused.tasks, desc.cores_per_cluster) / per_cycle
        + h * tile * d * 4 / per_cycle
    )
    port = (kv * clusters + h * s * d * 4 - s * h * d * 4) / per_cycle
    return max(task, port)


@dataclass
class Locals:
    """The fold's buffers in one kernel."""

    whole: list[BufferPlan]  # K, V (WRAM) and the scale (NRAM): loaded with the chain's
    q: SSAValue
    scores: SSAValue
    scaled: SSAValue
    shifted: SSAValue
    exp: SSAValue
    probs: SSAValue
    maxima: SSAValue
    sums: SSAValue


def prepare(attn: Attention, b: Builder, tile: int, desc: DlpTarget) -> Locals:
    """Allocate the fold's buffers at the top of the kernel."""
    h, s, d = attn.heads, attn.rows, attn.depth
    f32 = element_type(attn.q)
    a = desc.dma_align // 4
    whole = []
    for value, space in ((attn.k, "wram"), (attn.v, "wram"), (attn.scale, "nram")):
        if value is None:
            continue
        p = BufferPlan(value, tuple(shape_of(value)), read=True, space=space)
        n = round_up(p.elements(1), a)
        p.local = b.alloc(space, n, f32, f"{p.name}_{space}")
        p.slot = b.c(0)
        whole.append(p)
    rows = h * tile
    names = ("scores", "scaled", "shifted", "exp", "probs")
    mats = [b.alloc("nram", round_up(rows * s, a), f32, f"attn_{n}_nram") for n in names]
    q = b.alloc("nram", round_up(rows * d, a), f32, "attn_q_nram")
    maxima = b.alloc("nram", round_up(rows, a), f32, "attn_max_nram")
    sums = b.alloc("nram", round_up(rows, a), f32, "attn_sum_nram")
    return Locals(whole, q, mats[0], mats[1], mats[2], mats[3], mats[4], maxima, sums)


def load_q(attn: Attention, loc: Locals, b: Builder, t0: SSAValue, n: SSAValue, tile: int):
    """The tile's rows of every head's q: one strided copy (a segment a head)."""
    s, d = attn.rows, attn.depth
    b.op(
        dlp.MemcpyStridedAsyncOp(
            loc.q,
            b.c(0),
            attn.q,
            b.mul(t0, b.c(d)),
            b.mul(n, b.c(d)),
            b.c(attn.heads),
            b.c(tile * d),
            b.c(s * d),
        )
    )


def compute(attn: Attention, loc: Locals, b: Builder, out: BufferPlan, tile: int) -> None:
    """Scores, softmax and products of the tile's rows (all heads), the products into the
    merged rows of `out`'s tile (`[rows][H * D]`). Rows a task: `tile` (whole tiles)."""
    h, s, d = attn.heads, attn.rows, attn.depth
    k, v = loc.whole[0].local, loc.whole[1].local
    c0 = b.c(0)
    rows = h * tile
    for head in range(h):  # scores = q k^T, a head at a time
        b.op(
            dlp.MatmulOp(
                loc.scores,
                b.c(head * tile * s),
                loc.q,
                b.c(head * tile * d),
                k,
                b.c(head * s * d),
                b.c(tile),
                b.c(d),
                b.c(s),
                transpose_rhs=True,
            )
        )
    scores = loc.scores
    if attn.scale is not None:
        c = b.v(memref.LoadOp.get(loc.whole[2].local, [c0]))
        b.op(dlp.MulScalarOp(loc.scaled, c0, loc.scores, c0, c, b.c(rows * s)))
        scores = loc.scaled
    b.op(dlp.ReduceMaxOp(loc.maxima, c0, scores, c0, b.c(rows), b.c(s)))
    _, inner, r = b.for_(c0, b.c(rows), b.c(1))
    m = inner.v(arith.NegfOp(inner.v(memref.LoadOp.get(loc.maxima, [r]))))
    at = inner.mul(r, inner.c(s))
    inner.op(dlp.AddScalarOp(loc.shifted, at, scores, at, m, inner.c(s)))
    finish_for(inner)
    b.op(dlp.ExpOp(loc.exp, c0, loc.shifted, c0, b.c(rows * s)))
    b.op(dlp.ReduceSumOp(loc.sums, c0, loc.exp, c0, b.c(rows), b.c(s)))
    one = b.v(arith.ConstantOp(FloatAttr(1.0, Float32Type())))  # (fits: f32 only)
    _, inner, r = b.for_(c0, b.c(rows), b.c(1))
    inv = inner.v(arith.DivfOp(one, inner.v(memref.LoadOp.get(loc.sums, [r]))))
    at = inner.mul(r, inner.c(s))
    inner.op(dlp.MulScalarOp(loc.probs, at, loc.exp, at, inv, inner.c(s)))
    finish_for(inner)
    width = h * d
    for head in range(h):  # a row's products into its merged row, at the head's columns
        _, inner, r = b.for_(c0, b.c(tile), b.c(1))
        dst = inner.add(out.slot, inner.add(inner.mul(r, inner.c(width)), inner.c(head * d)))
        src = inner.add(inner.mul(r, inner.c(s)), inner.c(head * tile * s))
        inner.op(
            dlp.MatmulOp(
                out.local,
                dst,
                loc.probs,
                src,
                v,
                inner.c(head * s * d),
                inner.c(1),
                inner.c(s),
                inner.c(d),
            )
        )
        finish_for(inner)


def flops_names(attn: Attention) -> list[str]:
    """The folded kernels' names (for the chain's `dlpc.fused`)."""
    return [k.sym for k in attn.kernels]


def keep_alive(attn: Attention, kernel) -> None:
    """Move the deallocations of the buffers the chain reads for the attention (q, k, v)
    that come before its kernel (they followed the attention's kernels) after it."""
    block = kernel.parent_block()
    assert block is not None  # (placed in @main)
    ops = list(block.ops)
    at = ops.index(kernel)
    for op in ops[:at]:
        if isinstance(op, memref.DeallocOp) and op.memref in (attn.q, attn.k, attn.v):
            op.detach()
            block.insert_op_after(op, kernel)
