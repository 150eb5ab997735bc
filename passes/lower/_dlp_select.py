"""Intrinsic selection for `loop-to-dlp`: map a tile's compute onto DLP intrinsics.

Two patterns, both matched on the loop nest below the work loop (see loop_to_dlp.py):

- elementwise: a perfect nest of full-range loops whose innermost body loads, computes
  with `arith`/`math`, and stores `out[.., v, i1, .., im]`. Each load is either the same
  element of another tiled buffer (a vector operand), a whole buffer indexed by the
  trailing loop variables (a broadcast operand: `dlp.cycle_*`), or one element (a
  scalar). Every op becomes one vector intrinsic over the tile's `n * inner` elements:

      out[i, j] = max(x[i, j] + b[j], 0)   ->   dlp.cycle_add %t, %x, %b ; dlp.relu %out, %t

- matmul: `acc = 0; for r: acc += A[.., m, r] * B[..]; out[.., m, n] = epilogue(acc)`
  with the work loop over rows m (B whole, in WRAM) or, when m is fixed, over columns n
  of a transposed B (`linear`: B tiles in WRAM). The product is one `dlp.matmul`; the
  epilogue (bias, activation) is then selected as an elementwise nest over it.

- convolution (`dlp.conv2d`, depthwise as one per channel) and pooling: `acc = -inf|0;
  for kh, kw: acc = max|add(acc, x[c, oh*sh - pt + kh, ow*sw - pl + kw])` (guarded by
  `scf.if` where padding or ceil mode reach outside the image) over channel tiles is one
  `dlp.pool "max"|"sum"`; average pooling's division (a constant: `dlp.mul_scalar`, or
  the per-window count: scalar loops over the output tile) is its epilogue.

Anything else keeps the scalar loops. A selection reports the NRAM scratch it needs
(`scratch_bytes`) so tiling accounts for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, spine
from dlpc.dialects.typed import element_type, float_type
from dlpc.passes.lower._dlp_build import BufferPlan, Cloner, KernelPlan, Selection, _round_up

BINARY = {
    "arith.addf": "add",
    "arith.subf": "sub",
    "arith.mulf": "mul",
    "arith.divf": "div",
    "arith.maximumf": "max",
    "arith.maxnumf": "max",
    "arith.minimumf": "min",
    "arith.minnumf": "min",
}
UNARY = {
    "math.exp": dlp.ExpOp,
    "math.tanh": dlp.TanhOp,
    "math.log": dlp.LogOp,
    "math.sqrt": dlp.SqrtOp,
}
VECTOR = {
    "add": dlp.AddOp,
    "sub": dlp.SubOp,
    "mul": dlp.MulOp,
    "div": dlp.DivOp,
    "max": dlp.MaxOp,
    "min": dlp.MinOp,
}
CYCLE = {"add": dlp.CycleAddOp, "sub": dlp.CycleSubOp, "mul": dlp.CycleMulOp}


class NoMatch(Exception):
    pass


def _const(value: SSAValue) -> int | float | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        v = op.value
        if isinstance(v, FloatAttr):
            return float(v.value.data)
        if isinstance(v, IntegerAttr):
            return v.value.data
    return None


def _cidx(plan: KernelPlan, value: SSAValue) -> int | None:
    """An index's constant value: an arith.constant or an extent-1 loop's variable."""
    if value in plan.fixed:
        return plan.fixed[value]
    c = _const(value)
    return c if isinstance(c, int) else None


def _nest(work: ForOp) -> list[ForOp]:
    """The work loop and the perfect nest of loops below it."""
    return [work, *spine(work)]


def _loop_chain(first: ForOp, perfect: bool) -> list[ForOp]:
    """`first` and the loops below it, one per level, outermost first; NoMatch where a
    level holds several loops or, with `perfect`, other ops than constants besides its loop."""
    chain = [first]
    while True:
        inner = [op for op in chain[-1].block.ops if isinstance(op, ForOp)]
        if not inner:
            return chain
        others = [op for op in chain[-1].block.ops if not isinstance(op, ForOp | arith.ConstantOp)]
        if len(inner) != 1 or perfect and others:
            raise NoMatch
        chain.append(inner[0])


@dataclass
class Operand:
    kind: str  # "vec" | "cycle" | "scalar"
    buffer: BufferPlan | None = None  # vec, cycle, row, scalar loads; None: a preset value
    seg: int = 0  # cycle: segment length
    value: SSAValue | None = None  # scalar: the original SSA value
    local: SSAValue | None = None  # vec: a temp buffer (None: the buffer's own tile)
    index: int = 0  # scalar load: flat element index


@dataclass
class Elementwise:
    """An elementwise body over the iteration space `loops` (work loop first)."""

    loops: list[ForOp]
    body: list[Operation]  # the innermost ops, in order, ending with the store
    out: BufferPlan
    preset: dict[SSAValue, Operand] = field(default_factory=dict)  # e.g. the matmul result

    @property
    def inner(self) -> int:
        return math.prod(lp.trip_count for lp in self.loops[1:])

    def temps(self) -> int:
        n = sum(
            1
            for op in self.body
            if op.name in BINARY or op.name in UNARY or op.name == "arith.negf"
        )
        return n + 2  # intermediates, plus room for sign flips

    def emit_after(self, lowering, b, count, acc, t0, n, sum_value) -> None:
        """The epilogue as vector intrinsics over the accumulator tile `acc`."""
        _emit_elementwise(lowering, b, self, count, {sum_value: (acc, b.c(0))})


@dataclass
class ScalarEpilogue:
    """An epilogue no intrinsic covers: scalar loops over the accumulator tile."""

    loops: list[ForOp]  # the spatial loops, work loop first
    consts: list[Operation]
    ops: list[Operation]

    @property
    def inner(self) -> int:
        return math.prod(lp.trip_count for lp in self.loops[1:])

    def temps(self) -> int:
        return 0

    def emit_after(self, lowering, b, count, acc, t0, n, sum_value) -> None:
        work = lowering.plan.work
        _, body, ii = b.for_(b.c(0), n, b.c(1))
        j = body.add(t0, ii)
        vmap = {work.induction_var: body.add(body.c(work.lower), body.mul(j, body.c(work.stride)))}
        idx = body.mul(ii, body.c(self.inner))
        builders = [body]
        for k, lp in enumerate(self.loops[1:], start=1):
            _, inner, iv = builders[-1].for_(
                builders[-1].c(0), builders[-1].c(lp.upper), builders[-1].c(1)
            )
            vmap[lp.induction_var] = iv
            stride = math.prod(q.trip_count for q in self.loops[k + 1 :])
            idx = inner.add(idx, inner.mul(iv, inner.c(stride)))
            builders.append(inner)
        cur = builders[-1]
        vmap[sum_value] = cur.v(memref.LoadOp.get(acc, [idx]))
        cloner = Cloner(lowering.plan, vmap)
        for op in [*self.consts, *self.ops]:
            cloner.op(op, cur)
        for bb in reversed(builders):
            bb.op(scf.YieldOp())


def _epilogue(
    plan, spatial: list[ForOp], block_ops: list[Operation], post: list[Operation], sum_value
) -> Elementwise | ScalarEpilogue:
    """Vector epilogue when it matches, else scalar loops (spatial loops from 0, step 1)."""
    try:
        return _match_elementwise(plan, spatial, post, {sum_value: Operand("vec")})
    except NoMatch:
        if any(lp.lower != 0 or lp.stride != 1 for lp in spatial[1:]):
            raise
        consts: list[Operation] = [op for op in block_ops if isinstance(op, arith.ConstantOp)]
        return ScalarEpilogue(spatial, consts, post)


def _ivs(loops: list[ForOp]) -> list[SSAValue]:
    return [lp.induction_var for lp in loops]


def _tile_matches(p, indices, loops, shape) -> bool:
    """indices == [prefix consts.., v, iv1, .., ivm] over full trailing dims."""
    ivs = _ivs(loops)
    d = p.dim
    return (
        p.kind == "tiled"
        and p.a == 1
        and p.rlo == 0
        and p.rhi == 0
        and list(indices[d:]) == ivs
        and tuple(shape[d + 1 :]) == tuple(lp.trip_count for lp in loops[1:])
    )


def _classify_load(plan, load: memref.LoadOp, loops: list[ForOp]) -> Operand:
    p = plan.buffers.get(load.memref)
    if p is None:
        raise NoMatch
    shape = p.shape
    idx = list(load.indices)
    if _tile_matches(p, idx, loops, shape):
        return Operand("vec", p)
    if p.kind == "tiled" and p.a == 1 and p.rlo == p.rhi == 0:
        ivs = _ivs(loops)
        extents = [lp.trip_count for lp in loops]
        for j in range(1, len(loops)):  # indexed by loops[:j], broadcast over loops[j:]
            if idx[p.dim :] == ivs[:j] and tuple(shape[p.dim + 1 :]) == tuple(extents[1:j]):
                seg = math.prod(extents[j:])
                if (seg * 4) % plan.desc.vector_align == 0:
                    return Operand("row", p, seg=seg)
    if p.kind != "whole":
        raise NoMatch
    ivs = _ivs(loops)
    # whole buffer indexed by the trailing loop variables (leading indices 0): broadcast
    for k in range(1, len(loops) + 1):
        tail = ivs[k:]
        lead = idx[: len(idx) - len(tail)]
        if (
            idx[len(idx) - len(tail) :] == tail
            and all(_cidx(plan, x) == 0 for x in lead)
            and tuple(shape[len(shape) - len(tail) :]) == tuple(lp.trip_count for lp in loops[k:])
        ):
            if not tail:
                return Operand("scalar", p, index=0)
            if math.prod(shape) != math.prod(lp.trip_count for lp in loops[k:]):
                raise NoMatch
            return Operand("cycle", p, seg=math.prod(lp.trip_count for lp in loops[k:]))
    maybe = [_cidx(plan, x) for x in idx]
    consts = [c for c in maybe if c is not None]
    if len(consts) == len(maybe):
        flat = sum(c * math.prod(shape[j + 1 :]) for j, c in enumerate(consts))
        return Operand("scalar", p, index=flat)
    raise NoMatch


def _check_expr(plan, loops: list[ForOp], ops: list[Operation], kinds: dict[SSAValue, str]) -> None:
    """Kinds ("vec", "cycle", "row", "scalar") of every value `ops` compute, or NoMatch."""
    for op in ops:
        if isinstance(op, memref.LoadOp):
            kinds[op.res] = _classify_load(plan, op, loops).kind
        elif op.name in BINARY:
            a, b = (kinds.get(x, "scalar" if _const(x) is not None else None) for x in op.operands)
            if a is None or b is None:
                raise NoMatch
            pair = {a, b}
            name = BINARY[op.name]
            if pair == {"scalar"}:
                kinds[op.results[0]] = "scalar"
                continue
            if "cycle" in pair and (pair != {"vec", "cycle"} or name not in CYCLE):
                raise NoMatch
            if "row" in pair and (
                pair != {"vec", "row"} or name not in ("add", "sub", "mul", "div") or b != "row"
            ):
                raise NoMatch
            if a == "scalar" and name in ("div",):
                raise NoMatch
            kinds[op.results[0]] = "vec"
        elif op.name in UNARY or op.name == "arith.negf":
            if kinds.get(op.operands[0]) != "vec":
                raise NoMatch
            kinds[op.results[0]] = "vec"
        else:
            raise NoMatch


def _match_elementwise(plan, loops: list[ForOp], body: list[Operation], preset=None) -> Elementwise:
    if any(lp.lower != 0 or lp.stride != 1 for lp in loops):
        raise NoMatch
    ops = [op for op in body if not isinstance(op, arith.ConstantOp)]
    if not ops or not isinstance(ops[-1], memref.StoreOp):
        raise NoMatch
    store = ops[-1]
    out = plan.buffers.get(store.memref)
    if out is None or not _tile_matches(out, list(store.indices), loops, out.shape):
        raise NoMatch
    kinds: dict[SSAValue, str] = {v: o.kind for v, o in (preset or {}).items()}
    _check_expr(plan, loops, ops[:-1], kinds)
    if kinds.get(store.value) != "vec":
        raise NoMatch
    return Elementwise(loops, body, out, dict(preset or {}))


# ----------------------------------------------------------------------- selections


@dataclass
class ElementwiseSelection(Selection):
    ew: Elementwise

    def scratch_bytes(self, plan, tile: int) -> int:
        return _tile_bytes(plan, tile * self.ew.inner) * self.ew.temps()

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        count = b.mul(n, b.c(self.ew.inner))
        _emit_elementwise(lowering, b, self.ew, count, {})


@dataclass
class MatmulSelection(Selection):
    ew: Elementwise | ScalarEpilogue  # the epilogue, over the output tile
    lhs: BufferPlan
    rhs: BufferPlan  # in WRAM
    acc: SSAValue  # the reduction's accumulator value `sum`
    k: int
    cols: int  # n per output row (case rows) or 1 (case columns)
    rows_tiled: bool  # True: work loop over rows m; False: over columns n
    transpose_rhs: bool
    batch: tuple[int, int] | None = None  # batched (work loop over the batch): (m, n)

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        return _tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        count = b.mul(n, b.c(self.ew.inner))
        tile_elems = _scratch_elems(plan, plan.tile * self.ew.inner)
        acc = b.alloc("nram", tile_elems, element_type(self.lhs.value), "acc_nram")
        if self.batch is not None:  # one matmul per batch entry of the tile
            m, cols = self.batch
            _, body, ii = b.for_(b.c(0), n, b.c(1))
            at = lambda buf, slot, size: (buf, body.add(slot, body.mul(ii, body.c(size))))  # noqa: E731
            body.op(
                dlp.MatmulOp(
                    *at(acc, body.c(0), m * cols),
                    *at(self.lhs.local, self.lhs.slot, m * self.k),
                    *at(self.rhs.local, self.rhs.slot, self.k * cols),
                    body.c(m),
                    body.c(self.k),
                    body.c(cols),
                    transpose_rhs=self.transpose_rhs,
                )
            )
            body.op(scf.YieldOp())
            self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)
            return
        if self.rows_tiled:
            m, cols = n, b.c(self.cols)
        else:
            m, cols = b.c(1), n
        b.op(
            dlp.MatmulOp(
                acc,
                b.c(0),
                self.lhs.local,
                self.lhs.slot,
                self.rhs.local,
                self.rhs.slot,
                m,
                b.c(self.k),
                cols,
                transpose_rhs=self.transpose_rhs,
            )
        )
        self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)


def _tile_bytes(plan, elems: int) -> int:
    """Bytes of an f32 NRAM scratch buffer of `elems` elements, rounded up to DMA alignment."""
    return _round_up(elems * 4, plan.desc.dma_align)


def _scratch_elems(plan, elems: int) -> int:
    return _tile_bytes(plan, elems) // 4


def _emit_elementwise(
    lowering, b, ew: Elementwise, count: SSAValue, preset, result=None, final=None
) -> None:
    """One intrinsic per op over `count` elements; temps are fresh NRAM buffers. The value
    stored by the body (or `result`) lands in the output tile (or `final`)."""
    plan = lowering.plan
    elt = float_type(element_type(ew.out.value))  # select_compute: f32 buffers only
    tile_elems = _scratch_elems(plan, plan.tile * ew.inner)
    vec: dict[SSAValue, tuple[SSAValue, SSAValue]] = dict(preset)  # value -> (buffer, offset)
    cyc: dict[SSAValue, tuple[SSAValue, int]] = {}
    rows: dict[SSAValue, tuple[BufferPlan, int]] = {}
    scal: dict[SSAValue, SSAValue] = {}
    ops = [op for op in ew.body if not isinstance(op, arith.ConstantOp)]
    if result is None:
        store = ops[-1]
        assert isinstance(store, memref.StoreOp)  # _match_elementwise: the body ends with it
        result, final, ops = store.value, (ew.out.local, ew.out.slot), ops[:-1]
    assert final is not None, "a result is passed with the place it goes to"
    into: tuple[SSAValue, SSAValue] = final

    def scalar(x: SSAValue) -> SSAValue:
        if x in scal:
            return scal[x]
        c = _const(x)
        assert c is not None, "scalar operand without a value"
        scal[x] = b.v(arith.ConstantOp(FloatAttr(c, float_type(x.type))))
        return scal[x]

    def fresh(hint: str = "tmp") -> tuple[SSAValue, SSAValue]:
        return b.alloc("nram", tile_elems, elt, f"{hint}_nram"), b.c(0)

    def dest(op: Operation) -> tuple[SSAValue, SSAValue]:
        return into if op.results[0] is result else fresh()

    def neg(src: tuple[SSAValue, SSAValue], into: tuple[SSAValue, SSAValue]) -> None:
        minus = b.v(arith.ConstantOp(FloatAttr(-1.0, elt)))
        b.op(dlp.MulScalarOp(*into, *src, minus, count))

    for op in ops:
        if isinstance(op, memref.LoadOp):
            o = _classify_load(plan, op, ew.loops)
            p = o.buffer
            assert p is not None  # _classify_load names the buffer of every load
            if o.kind == "vec":
                vec[op.res] = (p.local, p.slot)
            elif o.kind == "cycle":
                cyc[op.res] = (p.local, o.seg)
            elif o.kind == "row":
                rows[op.res] = (p, o.seg)
            else:
                scal[op.res] = b.v(memref.LoadOp.get(p.local, [b.c(o.index)]))
            continue
        if op.name in UNARY or op.name == "arith.negf":
            d = dest(op)
            if op.name == "arith.negf":
                neg(vec[op.operands[0]], d)
            else:
                b.op(UNARY[op.name](*d, *vec[op.operands[0]], count))
            vec[op.results[0]] = d
            continue
        name = BINARY[op.name]
        x, y = op.operands
        if x not in vec and x not in cyc and y not in vec and y not in cyc:  # scalar op
            new = op.clone(value_mapper={x: scalar(x), y: scalar(y)})
            b.op(new)
            scal[op.results[0]] = new.results[0]
            continue
        d = dest(op)
        if y in rows:  # per-row scalar: one intrinsic per row of the tile
            _emit_rows(b, name, d, vec[x], *rows[y], count)
            vec[op.results[0]] = d
            continue
        if x in vec and y in vec:
            b.op(VECTOR[name](*d, *vec[x], *vec[y], count))
        elif x in vec and y in cyc or y in vec and x in cyc:
            v_, (seg, m) = (vec[x], cyc[y]) if x in vec else (vec[y], cyc[x])
            b.op(CYCLE[name](*d, *v_, seg, b.c(0), count, b.c(m)))
            if x in cyc and name == "sub":  # seg - v = -(v - seg)
                neg(d, d)
        else:  # vector with scalar
            v_, sv, swapped = (vec[x], y, False) if x in vec else (vec[y], x, True)
            if name == "max" and _const(sv) == 0.0:
                b.op(dlp.ReluOp(*d, *v_, count))
            elif name == "add":
                b.op(dlp.AddScalarOp(*d, *v_, scalar(sv), count))
            elif name == "mul":
                b.op(dlp.MulScalarOp(*d, *v_, scalar(sv), count))
            elif name == "sub" and not swapped:  # v - s
                b.op(dlp.AddScalarOp(*d, *v_, b.v(arith.NegfOp(scalar(sv))), count))
            elif name == "sub":  # s - v
                neg(v_, d)
                b.op(dlp.AddScalarOp(*d, *d, scalar(sv), count))
            elif name == "div":  # v / s
                one = b.v(arith.ConstantOp(FloatAttr(1.0, elt)))
                b.op(dlp.MulScalarOp(*d, *v_, b.v(arith.DivfOp(one, scalar(sv))), count))
            elif name == "max":
                b.op(dlp.MaxScalarOp(*d, *v_, scalar(sv), count))
            else:  # min(v, s) = -max(-v, -s)
                neg(v_, d)
                b.op(dlp.MaxScalarOp(*d, *d, b.v(arith.NegfOp(scalar(sv))), count))
                neg(d, d)
        vec[op.results[0]] = d
    got = vec[result]
    if got != into:  # the stored value is a plain load: copy it
        b.op(dlp.MemcpyOp(into[0], into[1], got[0], got[1], count))


def _emit_rows(b, name: str, d, v_, p, inner: int, count: SSAValue) -> None:
    """d[r*inner + i] = v[r*inner + i] (+|-|*) p[r] for every row r of the tile."""
    rows_n = b.v(arith.DivSIOp(count, b.c(inner)))
    loop, body, r = b.for_(b.c(0), rows_n, b.c(1))
    s = body.v(memref.LoadOp.get(p.local, [body.add(p.slot, r)]))
    off = body.mul(r, body.c(inner))
    dst, src = (d[0], body.add(d[1], off)), (v_[0], body.add(v_[1], off))
    n = body.c(inner)
    if name == "add":
        body.op(dlp.AddScalarOp(*dst, *src, s, n))
    elif name == "mul":
        body.op(dlp.MulScalarOp(*dst, *src, s, n))
    elif name == "div":
        one = body.v(arith.ConstantOp(FloatAttr(1.0, float_type(s.type))))
        body.op(dlp.MulScalarOp(*dst, *src, body.v(arith.DivfOp(one, s)), n))
    else:
        body.op(dlp.AddScalarOp(*dst, *src, body.v(arith.NegfOp(s)), n))
    body.op(scf.YieldOp())


def _linear(plan: KernelPlan, value: SSAValue) -> dict[SSAValue | int, int] | None:
    """value as {induction variable or 1: coefficient}, or None if not linear."""
    c = _cidx(plan, value)
    if c is not None:
        return {1: c}
    op = value.owner
    if not isinstance(op, Operation):
        return {value: 1}
    if op.name in ("arith.index_cast", "arith.index_castui"):
        return _linear(plan, op.operands[0])
    if op.name in ("arith.addi", "arith.subi", "arith.muli"):
        x, y = (_linear(plan, v) for v in op.operands)
        if x is None or y is None:
            return None
        if op.name == "arith.muli":
            if set(x) == {1}:
                x, y = y, x
            if set(y) != {1}:
                return None
            return {k: v * y[1] for k, v in x.items()}
        sign = 1 if op.name == "arith.addi" else -1
        out = dict(x)
        for k, v in y.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v or k == 1}
    return None


def _window_nest(
    plan: KernelPlan, n_reduce: int
) -> tuple[list[ForOp], list[ForOp], memref.StoreOp, memref.LoadOp, list[Operation], SSAValue]:
    """The shape conv and pooling kernels share: three unit-stride spatial loops from 0
    around `acc = alloca; store init; <n_reduce reduction loops>; load acc; ...`.
    Returns (spatial loops, reduction loops, the init store, the load of the total, the
    ops after it, acc)."""
    assert plan.work is not None  # select_compute matches only kernels with a work loop
    spatial = _nest(plan.work)
    if len(spatial) != 3 or any(lp.lower != 0 or lp.stride != 1 for lp in spatial):
        raise NoMatch
    ops = [op for op in spatial[-1].block.ops if not isinstance(op, arith.ConstantOp)]
    loops_in = [op for op in ops if isinstance(op, ForOp)]
    if len(loops_in) != 1:
        raise NoMatch
    red = _loop_chain(loops_in[0], perfect=False)
    if len(red) != n_reduce or any(lp.lower != 0 or lp.stride != 1 for lp in red):
        raise NoMatch
    pos = ops.index(red[0])
    pre, post = ops[:pos], ops[pos + 1 :]
    if (
        len(pre) != 2
        or not isinstance(pre[0], memref.AllocaOp)
        or not isinstance(pre[1], memref.StoreOp)
    ):
        raise NoMatch
    acc = pre[0].memref
    if not post or not isinstance(post[0], memref.LoadOp) or post[0].memref is not acc:
        raise NoMatch
    return spatial, red, pre[1], post[0], post[1:], acc


def _match_conv(plan) -> ConvSelection:
    spatial, (ci_l, kh_l, kw_l), init, total, rest, acc = _window_nest(plan, 3)
    co_l, oh_l, ow_l = spatial
    if _const(init.value) != 0.0:
        raise NoMatch
    body = [op for op in kw_l.block.ops if not isinstance(op, arith.ConstantOp)]
    la, add, st = body[-3:]
    if not (
        isinstance(la, memref.LoadOp)
        and la.memref is acc
        and add.name == "arith.addf"
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is add.results[0]
    ):
        raise NoMatch
    mul = next((o.owner for o in add.operands if o is not la.res), None)
    if not isinstance(mul, Operation) or mul.name != "arith.mulf":
        raise NoMatch
    loads = [o.owner for o in mul.operands]
    w_load = next(
        (
            o
            for o in loads
            if isinstance(o, memref.LoadOp)
            and o.memref in plan.buffers
            and plan.buffers[o.memref].kind == "tiled"
        ),
        None,
    )
    x_val = next((o for o in loads if o is not w_load), None)
    if w_load is None or x_val is None:
        raise NoMatch
    if isinstance(x_val, scf.IfOp):  # zero padding: if (in bounds) load else 0
        then_ops = [o for o in x_val.true_region.block.ops if not isinstance(o, arith.ConstantOp)]
        else_ops = list(x_val.false_region.block.ops) if x_val.false_region.blocks else []
        if (
            len(then_ops) != 2
            or not isinstance(then_ops[0], memref.LoadOp)
            or not else_ops
            or _const(else_ops[-1].operands[0]) != 0.0
        ):
            raise NoMatch
        x_load = then_ops[0]
    elif isinstance(x_val, memref.LoadOp):
        x_load = x_val
    else:
        raise NoMatch
    for o in body:
        if o not in (la, add, st, mul, w_load, x_val) and not (
            o.name.startswith("arith.") and o.name not in BINARY and o.name != "arith.negf"
        ):
            raise NoMatch
    pw, px = plan.buffers[w_load.memref], plan.buffers.get(x_load.memref)
    iv = [lp.induction_var for lp in (co_l, ci_l, kh_l, kw_l)]
    if (
        px is None
        or list(w_load.indices) != iv
        or pw.dim != 0
        or pw.a != 1
        or (pw.rlo, pw.rhi) != (0, 0)
        or len(px.shape) != 4
        or px.shape[0] != 1
    ):
        raise NoMatch
    _, cin, h, w = px.shape
    forms = [_linear(plan, v) for v in x_load.indices]
    xi = [f for f in forms if f is not None]  # used only when none is None
    if len(xi) < len(forms) or xi[0] != {1: 0}:
        raise NoMatch
    ci, co = ci_l.induction_var, co_l.induction_var
    depthwise = (
        xi[1] in ({co: 1, ci: 1}, {co: 1, ci: 1, 1: 0}, {co: 1}, {co: 1, 1: 0})
        and ci_l.trip_count == 1
    )
    if depthwise:  # channel c of the output reads channel c of the input
        if not (
            px.kind == "tiled"
            and px.dim == 1
            and px.a == 1
            and px.rlo == px.rhi == 0
            and pw.shape[1:] == (1, kh_l.trip_count, kw_l.trip_count)
        ):
            raise NoMatch
    elif (
        px.kind != "whole"
        or xi[1] not in ({ci: 1}, {ci: 1, 1: 0})
        or pw.shape[1:] != (cin, kh_l.trip_count, kw_l.trip_count)
        or ci_l.trip_count != cin
    ):
        raise NoMatch
    hy, wx = xi[2], xi[3]
    sh, sw = hy.get(oh_l.induction_var, 0), wx.get(ow_l.induction_var, 0)
    if (
        set(hy) - {oh_l.induction_var, kh_l.induction_var, 1}
        or set(wx) - {ow_l.induction_var, kw_l.induction_var, 1}
        or hy.get(kh_l.induction_var) != 1
        or wx.get(kw_l.induction_var) != 1
        or sh < 1
        or sw < 1
    ):
        raise NoMatch
    pt, pl = -hy.get(1, 0), -wx.get(1, 0)
    kh, kw = kh_l.trip_count, kw_l.trip_count
    pb = max(0, (oh_l.trip_count - 1) * sh + kh - h - pt)  # rows past the image read as 0
    pr = max(0, (ow_l.trip_count - 1) * sw + kw - w - pl)
    if min(pt, pl) < 0 or pt >= kh or pl >= kw:
        raise NoMatch
    if ((h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1) != (
        oh_l.trip_count,
        ow_l.trip_count,
    ):
        raise NoMatch
    if isinstance(x_val, memref.LoadOp) and max(pt, pl, pb, pr) > 0:
        raise NoMatch  # an unguarded load with padding would read out of bounds
    ew = _epilogue(plan, spatial, list(ow_l.block.ops), rest, total.res)
    params = dict(
        channels_in=1 if depthwise else cin,
        height=h,
        width=w,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=sh,
        stride_w=sw,
        pad_top=pt,
        pad_left=pl,
        pad_bottom=pb,
        pad_right=pr,
    )
    if depthwise:
        align = plan.desc.vector_align
        if (h * w * 4) % align or (ew.inner * 4) % align:
            raise NoMatch  # per-channel operands must start aligned
        pw.direct = True
        return DepthwiseSelection(ew, px, pw, total.res, params)
    pw.space = "wram"
    return ConvSelection(ew, px, pw, total.res, params)


@dataclass
class ConvSelection(Selection):
    ew: Elementwise | ScalarEpilogue  # the epilogue over the output channels of a tile
    src: BufferPlan  # the whole input image, NRAM
    weight: BufferPlan  # weight tiles, WRAM
    acc: SSAValue
    params: dict

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        return _tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        count = b.mul(n, b.c(self.ew.inner))
        acc = b.alloc(
            "nram",
            _scratch_elems(plan, plan.tile * self.ew.inner),
            element_type(self.src.value),
            "acc_nram",
        )
        b.op(
            dlp.Conv2dOp(
                acc,
                b.c(0),
                self.src.local,
                b.c(0),
                self.weight.local,
                self.weight.slot,
                n,
                **self.params,
            )
        )
        self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)


@dataclass
class DepthwiseSelection(ConvSelection):
    """One `dlp.conv2d` (1 in, 1 out channel) per channel of the tile; each channel's
    filter is DMA'd from GDRAM into its own aligned WRAM slot."""

    def slot_elems(self, plan) -> int:
        return _scratch_elems(plan, self.params["kernel_h"] * self.params["kernel_w"])

    def wram_bytes(self, plan, tile: int) -> int:
        return tile * self.slot_elems(plan) * 4

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        elt = element_type(self.src.value)
        count = b.mul(n, b.c(self.ew.inner))
        acc = b.alloc("nram", _scratch_elems(plan, plan.tile * self.ew.inner), elt, "acc_nram")
        slot = self.slot_elems(plan)
        taps = self.params["kernel_h"] * self.params["kernel_w"]
        filters = b.alloc("wram", plan.tile * slot, elt, f"{self.weight.name}_wram")
        hw = self.params["height"] * self.params["width"]
        _, body, c = b.for_(b.c(0), n, b.c(1))
        body.op(
            dlp.MemcpyOp(
                filters,
                body.mul(c, body.c(slot)),
                self.weight.value,
                body.mul(body.add(t0, c), body.c(taps)),
                body.c(taps),
            )
        )
        body.op(
            dlp.Conv2dOp(
                acc,
                body.mul(c, body.c(self.ew.inner)),
                self.src.local,
                body.add(self.src.slot, body.mul(c, body.c(hw))),
                filters,
                body.mul(c, body.c(slot)),
                body.c(1),
                **self.params,
            )
        )
        body.op(scf.YieldOp())
        self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)


def _match_matmul(plan) -> MatmulSelection:
    nest = _nest(plan.work)
    spatial = nest
    s = spatial[-1]
    ops = [op for op in s.block.ops if not isinstance(op, arith.ConstantOp)]
    loops_in = [op for op in ops if isinstance(op, ForOp)]
    if len(loops_in) != 1 or len(spatial) > 3:
        raise NoMatch
    red = loops_in[0]
    pos = ops.index(red)
    pre, post = ops[:pos], ops[pos + 1 :]
    if (
        len(pre) != 2
        or not isinstance(pre[0], memref.AllocaOp)
        or not isinstance(pre[1], memref.StoreOp)
    ):
        raise NoMatch
    acc_buf = pre[0].memref
    if _const(pre[1].value) != 0.0 or pre[1].memref is not acc_buf:
        raise NoMatch
    body = [op for op in red.block.ops if not isinstance(op, arith.ConstantOp)]
    if len(body) != 6 or red.lower != 0 or red.stride != 1:
        raise NoMatch
    l1, l2, mul, la, add, st = body
    if not (
        isinstance(l1, memref.LoadOp)
        and isinstance(l2, memref.LoadOp)
        and mul.name == "arith.mulf"
        and isinstance(la, memref.LoadOp)
        and la.memref is acc_buf
        and add.name == "arith.addf"
        and isinstance(st, memref.StoreOp)
        and st.memref is acc_buf
        and st.value is add.results[0]
        and set(mul.operands) == {l1.res, l2.res}
        and set(add.operands) == {la.res, mul.results[0]}
    ):
        raise NoMatch
    if not post or not isinstance(post[0], memref.LoadOp) or post[0].memref is not acc_buf:
        raise NoMatch
    r = red.induction_var
    k = red.trip_count
    pa, pb = plan.buffers.get(l1.memref), plan.buffers.get(l2.memref)
    if pa is None or pb is None:
        raise NoMatch
    v = plan.work.induction_var
    rows_tiled = len(spatial) == 2
    cand = [(pa, l1, pb, l2), (pb, l2, pa, l1)]
    for lhs, la_, rhs, lb_ in cand:
        ia, ib = list(la_.indices), list(lb_.indices)
        if len(spatial) == 3:  # batched: A[.., b, m, r] and B[.., b, r, n] (or [.., b, n, r]) tiled
            mvar, nvar = spatial[1].induction_var, spatial[2].induction_var
            mm, nn = spatial[1].trip_count, spatial[2].trip_count
            tiled = all(p.kind == "tiled" and p.a == 1 and p.rlo == p.rhi == 0 for p in (lhs, rhs))
            if not tiled or ia[lhs.dim :] != [v, mvar, r] or lhs.shape[lhs.dim + 1 :] != (mm, k):
                continue
            if ib[rhs.dim :] == [v, r, nvar] and rhs.shape[rhs.dim + 1 :] == (k, nn):
                transpose = False
            elif ib[rhs.dim :] == [v, nvar, r] and rhs.shape[rhs.dim + 1 :] == (nn, k):
                transpose = True
            else:
                continue
            if any((x * 4) % plan.desc.vector_align for x in (mm * k, k * nn, mm * nn)):
                continue  # each batch entry's operands must start aligned
            ew = _epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
            rhs.space = "wram"
            return MatmulSelection(ew, lhs, rhs, post[0].res, k, nn, False, transpose, (mm, nn))
        if rows_tiled:  # A[.., m, r] tiled rows, B whole (k x n or n x k)
            nvar = spatial[1].induction_var
            ncols = spatial[1].trip_count
            if not (
                lhs.kind == "tiled"
                and lhs.a == 1
                and lhs.rlo == lhs.rhi == 0
                and ia[lhs.dim :] == [v, r]
                and lhs.shape[-1] == k
                and rhs.kind == "whole"
                and all(_cidx(plan, x) == 0 for x in ib[:-2])
                and math.prod(rhs.shape) == k * ncols
            ):
                continue
            if ib[-2:] == [r, nvar]:
                transpose = False
            elif ib[-2:] == [nvar, r]:
                transpose = True
            else:
                continue
            cols = ncols
        else:  # A whole (one row), B[.., n, r] tiled columns
            if not (
                lhs.kind == "whole"
                and all(_cidx(plan, x) is not None for x in ia[:-1])
                and ia[-1] is r
                and rhs.kind == "tiled"
                and rhs.a == 1
                and rhs.rlo == rhs.rhi == 0
                and ib[rhs.dim :] == [v, r]
                and rhs.shape[-1] == k
            ):
                continue
            if any(_cidx(plan, x) != 0 for x in ia[:-1]) or math.prod(lhs.shape) != k:
                continue
            transpose, cols = True, 1
        ew = _epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
        rhs.space = "wram"
        return MatmulSelection(ew, lhs, rhs, post[0].res, k, cols, rows_tiled, transpose)
    raise NoMatch


COMBINERS = {
    "arith.addf": (dlp.ReduceSumOp, 0.0),
    "arith.maximumf": (dlp.ReduceMaxOp, float("-inf")),
    "arith.maxnumf": (dlp.ReduceMaxOp, float("-inf")),
}


@dataclass
class ReduceSelection(Selection):
    """acc[row] = combine over the row's trailing reduction elements of an elementwise
    prologue (or a plain load), then the epilogue: `dlp.reduce_sum`/`dlp.reduce_max`."""

    prologue: Elementwise  # over spatial + reduction loops; body computes `value`
    value: SSAValue  # the element combined into the accumulator
    op: type  # dlp.ReduceSumOp or dlp.ReduceMaxOp
    cols: int  # elements per row (the reduction extent)
    ew: Elementwise | ScalarEpilogue  # the epilogue over the spatial loops
    acc: SSAValue  # the accumulator value read after the reduction

    def scratch_bytes(self, plan, tile: int) -> int:
        rows = _tile_bytes(plan, tile * self.ew.inner)
        full = _tile_bytes(plan, tile * self.ew.inner * self.cols)
        return rows * (self.ew.temps() + 1) + full * self.prologue.temps()

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        elt = element_type(self.prologue.out.value)
        rows = b.mul(n, b.c(self.ew.inner))
        src = b.alloc(
            "nram", _scratch_elems(plan, plan.tile * self.prologue.inner), elt, "row_nram"
        )
        _emit_elementwise(
            lowering,
            b,
            self.prologue,
            b.mul(rows, b.c(self.cols)),
            {},
            result=self.value,
            final=(src, b.c(0)),
        )
        acc = b.alloc("nram", _scratch_elems(plan, plan.tile * self.ew.inner), elt, "acc_nram")
        b.op(self.op(acc, b.c(0), src, b.c(0), rows, b.c(self.cols)))
        self.ew.emit_after(lowering, b, rows, acc, t0, n, self.acc)


def _match_reduce(plan) -> ReduceSelection:
    spatial = _nest(plan.work)
    s = spatial[-1]
    ops = [op for op in s.block.ops if not isinstance(op, arith.ConstantOp)]
    loops_in = [op for op in ops if isinstance(op, ForOp)]
    if len(loops_in) != 1 or any(lp.lower != 0 or lp.stride != 1 for lp in spatial):
        raise NoMatch
    red = _loop_chain(loops_in[0], perfect=True)
    if any(lp.lower != 0 or lp.stride != 1 for lp in red):
        raise NoMatch
    pos = ops.index(red[0])
    pre, post = ops[:pos], ops[pos + 1 :]
    if (
        len(pre) != 2
        or not isinstance(pre[0], memref.AllocaOp)
        or not isinstance(pre[1], memref.StoreOp)
    ):
        raise NoMatch
    acc = pre[0].memref
    body = [op for op in red[-1].block.ops if not isinstance(op, arith.ConstantOp)]
    if (
        len(body) < 4
        or not post
        or not isinstance(post[0], memref.LoadOp)
        or post[0].memref is not acc
    ):
        raise NoMatch
    la, comb, st = body[-3:]
    if not (
        isinstance(la, memref.LoadOp)
        and la.memref is acc
        and comb.name in COMBINERS
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is comb.results[0]
        and la.res in comb.operands
    ):
        raise NoMatch
    op_cls, init = COMBINERS[comb.name]
    if _const(pre[1].value) != init:
        raise NoMatch
    value = (
        next(x for x in comb.operands if x is not la.res)
        if comb.operands[0] is not comb.operands[1]
        else None
    )
    if value is None:
        raise NoMatch
    loops = [*spatial, *red]
    prologue_ops = body[:-3]
    kinds: dict[SSAValue, str] = {}
    _check_expr(plan, loops, prologue_ops, kinds)
    if kinds.get(value) != "vec":
        raise NoMatch
    consts = [op for op in red[-1].block.ops if isinstance(op, arith.ConstantOp)]
    out = plan.buffers.get(post[-1].memref) if isinstance(post[-1], memref.StoreOp) else None
    if out is None:
        raise NoMatch
    prologue = Elementwise(loops, [*consts, *prologue_ops], out)
    ew = _epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
    return ReduceSelection(
        prologue, value, op_cls, math.prod(lp.trip_count for lp in red), ew, post[0].res
    )


@dataclass
class PoolSelection(Selection):
    """Max or sum pooling of the tile's channels: one `dlp.pool` into an NRAM accumulator
    tile, then the epilogue (average pooling's division) over it."""

    mode: str  # "max" | "sum"
    ew: Elementwise | ScalarEpilogue  # the epilogue over the output channels of a tile
    src: BufferPlan  # the input tile (whole channels), NRAM
    acc: SSAValue
    params: dict

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        return _tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        acc = b.alloc(
            "nram",
            _scratch_elems(plan, plan.tile * self.ew.inner),
            element_type(self.src.value),
            "acc_nram",
        )
        b.op(dlp.PoolOp(self.mode, acc, b.c(0), self.src.local, self.src.slot, n, **self.params))
        self.ew.emit_after(lowering, b, b.mul(n, b.c(self.ew.inner)), acc, t0, n, self.acc)


def _window_value(x_val, fill: float):
    """The load of a window cell: a plain load, or `if (inside) load else fill` (padding)."""
    if isinstance(x_val, memref.LoadOp):
        return x_val, False
    if isinstance(x_val, scf.IfOp):
        then_ops = [o for o in x_val.true_region.block.ops if not isinstance(o, arith.ConstantOp)]
        else_ops = list(x_val.false_region.block.ops) if x_val.false_region.blocks else []
        if (
            len(then_ops) == 2
            and isinstance(then_ops[0], memref.LoadOp)
            and else_ops
            and _const(else_ops[-1].operands[0]) == fill
        ):
            return then_ops[0], True
    raise NoMatch


def _match_pool(plan) -> PoolSelection:
    """`acc = init; for kh, kw: acc = max/add(acc, x[c, oh*sh - pt + kh, ow*sw - pl + kw]);
    out[c, oh, ow] = epilogue(acc)` over NCHW planes, the work loop over channels."""
    spatial, (kh_l, kw_l), init_store, total, rest, acc = _window_nest(plan, 2)
    c_l, oh_l, ow_l = spatial
    body = [op for op in kw_l.block.ops if not isinstance(op, arith.ConstantOp)]
    if len(body) < 4:
        raise NoMatch
    la, comb, st = body[-3:]
    if not (
        isinstance(la, memref.LoadOp)
        and la.memref is acc
        and isinstance(st, memref.StoreOp)
        and st.memref is acc
        and st.value is comb.results[0]
        and la.res in comb.operands
    ):
        raise NoMatch
    mode = {"arith.maximumf": "max", "arith.maxnumf": "max", "arith.addf": "sum"}.get(comb.name)
    if mode is None:
        raise NoMatch
    init = {"max": float("-inf"), "sum": 0.0}[mode]
    if _const(init_store.value) != init:
        raise NoMatch
    x_val = next((o.owner for o in comb.operands if o is not la.res), None)
    if not isinstance(x_val, Operation):
        raise NoMatch
    x_load, guarded = _window_value(x_val, init)
    for o in body:
        if o not in (la, comb, st, x_val) and not (
            o.name.startswith("arith.") and o.name not in BINARY and o.name != "arith.negf"
        ):
            raise NoMatch
    px = plan.buffers.get(x_load.memref)
    if (
        px is None
        or len(px.shape) != 4
        or px.shape[0] != 1
        or not (px.kind == "tiled" and px.dim == 1 and px.a == 1 and px.rlo == px.rhi == 0)
    ):
        raise NoMatch
    _, _, h, w = px.shape
    forms = [_linear(plan, v) for v in x_load.indices]
    xi = [f for f in forms if f is not None]  # used only when none is None
    if (
        len(xi) < len(forms)
        or xi[0] != {1: 0}
        or xi[1] not in ({c_l.induction_var: 1}, {c_l.induction_var: 1, 1: 0})
    ):
        raise NoMatch
    hy, wx = xi[2], xi[3]
    sh, sw = hy.get(oh_l.induction_var, 0), wx.get(ow_l.induction_var, 0)
    if (
        set(hy) - {oh_l.induction_var, kh_l.induction_var, 1}
        or set(wx) - {ow_l.induction_var, kw_l.induction_var, 1}
        or hy.get(kh_l.induction_var) != 1
        or wx.get(kw_l.induction_var) != 1
        or sh < 1
        or sw < 1
    ):
        raise NoMatch
    pt, pl = -hy.get(1, 0), -wx.get(1, 0)
    kh, kw, oh, ow = kh_l.trip_count, kw_l.trip_count, oh_l.trip_count, ow_l.trip_count
    if (
        min(pt, pl) < 0
        or pt >= kh
        or pl >= kw
        or (oh - 1) * sh - pt >= h
        or (ow - 1) * sw - pl >= w
    ):
        raise NoMatch
    if not guarded and (pt or pl or (oh - 1) * sh + kh - pt > h or (ow - 1) * sw + kw - pl > w):
        raise NoMatch  # an unguarded load past the image would read out of bounds
    ew = _epilogue(plan, spatial, list(ow_l.block.ops), rest, total.res)
    params = dict(
        height=h,
        width=w,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=sh,
        stride_w=sw,
        pad_top=pt,
        pad_left=pl,
        out_h=oh,
        out_w=ow,
    )
    return PoolSelection(mode, ew, px, total.res, params)


def select_compute(plan):
    """An intrinsic selection for the plan's tile compute, or None (scalar loops)."""
    if plan.work is None:
        return None
    if any(
        not isinstance(p.value.type.get_element_type(), Float32Type) for p in plan.buffers.values()
    ):
        return None  # the intrinsics are f32
    for matcher in (_match_matmul, _match_conv, _match_pool, _match_reduce):
        try:
            return matcher(plan)
        except NoMatch:
            pass
    nest = _nest(plan.work)
    try:
        ew = _match_elementwise(plan, nest, list(nest[-1].block.ops))
    except NoMatch:
        return None
    return ElementwiseSelection(ew)
