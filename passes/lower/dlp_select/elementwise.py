"""Elementwise nests as vector intrinsics, and the epilogues other patterns end with.

Matches a perfect nest of full-range loops below the work loop whose innermost body
loads, computes with `arith`/`math`, and stores `out[.., v, i1, .., im]`. Each load is
the same element of another tiled buffer (a vector operand), a whole buffer indexed by
the trailing loop variables (a broadcast operand: `dlp.cycle_*`), a per-row value (one
intrinsic per row), or one element (a scalar). Every op becomes one vector intrinsic
over the tile's `n * inner` elements:

    out[i, j] = max(x[i, j] + b[j], 0)   ->   dlp.cycle_add %t, %x, %b ; dlp.relu %out, %t

The epilogue of a matmul, convolution, pooling or reduction (bias, activation, average
pooling's division) is matched the same way over its accumulator tile (`match_epilogue`),
or kept as scalar loops over it when no intrinsic covers it (`ScalarEpilogue`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import element_type, float_type
from dlpc.passes.lower._dlp_build import BufferPlan, Cloner, Selection
from dlpc.passes.lower.dlp_select._matching import (
    NoMatch,
    const_index,
    const_value,
    scratch_elems,
    tile_bytes,
)

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

# erfc(a) = t * exp(-a*a + P(t)), t = 1 / (1 + a/2), a >= 0: fractional error below
# 1.2e-7 everywhere (Numerical Recipes' erfcc); P's coefficients, highest degree first
ERFC_POLY = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
)
# erf(y) = y * sum_n c_n (y^2)^n, c_n = 2/sqrt(pi) (-1)^n / (n! (2n + 1)), n = 0..7
ERF_SERIES = (
    1.1283791670955126,
    -0.37612638903183754,
    0.11283791670955126,
    -0.026866170645131252,
    0.005223977625442188,
    -0.0008548327023450852,
    0.00012055332981789664,
    -1.492565035840625e-05,
)
ERF_TEMPS = 5  # the scratch buffers `_emit_erf` uses besides its destination
ERF_VECTOR_OPS = 70  # the vector ops `_emit_erf` issues (the time estimates' cost of an erf)


@dataclass
class Operand:
    kind: str  # "vec" | "cycle" | "scalar"
    buffer: BufferPlan | None = None  # vec, cycle, row, scalar loads; None: a preset value
    seg: int = 0  # cycle: segment length
    value: SSAValue | None = None  # scalar: the original SSA value
    local: SSAValue | None = None  # vec: a temp buffer (None: the buffer's own tile)
    index: int = 0  # scalar load: flat element index
    period: int = 0  # row of a whole buffer: rows repeat every `period` (0: they do not)


@dataclass
class Elementwise:
    """An elementwise body over the iteration space `loops` (work loop first)."""

    loops: list[ForOp]
    body: list[Operation]  # the innermost ops, in order, ending with the store
    out: BufferPlan
    preset: dict[SSAValue, Operand] = field(default_factory=dict)  # e.g. the matmul result
    transposed_rows: int = 0  # ops with a "rowT" operand: a scratch buffer each

    @property
    def inner(self) -> int:
        return math.prod(lp.trip_count for lp in self.loops[1:])

    def temps(self) -> int:
        n = sum(
            1
            for op in self.body
            if op.name in BINARY or op.name in UNARY or op.name in ("arith.negf", "math.erf")
        )
        erfs = sum(op.name == "math.erf" for op in self.body)
        # one fresh buffer per vector op at most (sign flips work in place), and erf's
        return n + ERF_TEMPS * erfs + self.transposed_rows

    def passthrough(self, sum_value: SSAValue) -> bool:
        """The body only stores `sum_value` (a max pool's window maximum): the intrinsic
        producing it can write the output tile itself, no accumulator and no copy."""
        ops = [op for op in self.body if not isinstance(op, arith.ConstantOp)]
        return len(ops) == 1 and isinstance(ops[0], memref.StoreOp) and ops[0].value is sum_value

    def emit_after(self, lowering, b, count, acc, t0, n, sum_value) -> None:
        """The epilogue as vector intrinsics over the accumulator tile `acc`."""
        emit_elementwise(lowering, b, self, count, {sum_value: (acc, b.c(0))})


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


def match_epilogue(
    plan, spatial: list[ForOp], block_ops: list[Operation], post: list[Operation], sum_value
) -> Elementwise | ScalarEpilogue:
    """Vector epilogue when it matches, else scalar loops (spatial loops from 0, step 1)."""
    try:
        return match_elementwise(plan, spatial, post, {sum_value: Operand("vec")})
    except NoMatch:
        if any(lp.lower != 0 or lp.stride != 1 for lp in spatial[1:]):
            raise
        consts: list[Operation] = [op for op in block_ops if isinstance(op, arith.ConstantOp)]
        return ScalarEpilogue(spatial, consts, post)


def _ivs(loops: list[ForOp]) -> list[SSAValue]:
    return [lp.induction_var for lp in loops]


def _tile_matches(p, indices, loops, shape) -> bool:
    """indices == [prefix consts.., v, iv1, .., ivm] over full trailing dims; dims of
    extent 1 and loops of one iteration are left out on both sides (their index is 0:
    global average pooling's 1x1 output, read by loops over the channel only)."""
    d = p.dim
    if not (p.kind == "tiled" and p.a == 1 and p.rlo == 0 and p.rhi == 0 and len(indices) > d):
        return False
    rest = [lp for lp in loops[1:] if lp.trip_count != 1]
    dims = [(x, n) for x, n in zip(indices[d + 1 :], shape[d + 1 :]) if n != 1]
    return (
        indices[d] is loops[0].induction_var
        and [x for x, _ in dims] == _ivs(rest)
        and [n for _, n in dims] == [lp.trip_count for lp in rest]
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
                aligned = (seg * 4) % plan.desc.vector_align == 0
                return Operand("row" if aligned else "rowT", p, seg=seg)
    if p.kind != "whole":
        raise NoMatch
    ivs = _ivs(loops)
    extents = [lp.trip_count for lp in loops]
    for j in range(2, len(loops)):  # indexed by loops[1:j] (a bias per channel of an image)
        lead = idx[: len(idx) - (j - 1)]
        if (
            idx[len(idx) - (j - 1) :] == ivs[1:j]
            and all(const_index(plan, x) == 0 for x in lead)
            and math.prod(shape) == math.prod(extents[1:j])
        ):
            seg = math.prod(extents[j:])
            aligned = (seg * 4) % plan.desc.vector_align == 0
            return Operand("row" if aligned else "rowT", p, seg=seg, period=math.prod(extents[1:j]))
    # whole buffer indexed by the trailing loop variables (leading indices 0): broadcast
    for k in range(1, len(loops) + 1):
        tail = ivs[k:]
        lead = idx[: len(idx) - len(tail)]
        if (
            idx[len(idx) - len(tail) :] == tail
            and all(const_index(plan, x) == 0 for x in lead)
            and tuple(shape[len(shape) - len(tail) :]) == tuple(lp.trip_count for lp in loops[k:])
        ):
            if not tail:
                return Operand("scalar", p, index=0)
            if math.prod(shape) != math.prod(lp.trip_count for lp in loops[k:]):
                raise NoMatch
            return Operand("cycle", p, seg=math.prod(lp.trip_count for lp in loops[k:]))
    maybe = [const_index(plan, x) for x in idx]
    consts = [c for c in maybe if c is not None]
    if len(consts) == len(maybe):
        flat = sum(c * math.prod(shape[j + 1 :]) for j, c in enumerate(consts))
        return Operand("scalar", p, index=flat)
    raise NoMatch


def check_expr(plan, loops: list[ForOp], ops: list[Operation], kinds: dict[SSAValue, str]) -> None:
    """Kinds ("vec", "cycle", "row", "scalar") of every value `ops` compute, or NoMatch.
    "rowT": a row operand whose rows do not start vector-aligned, added to, subtracted
    from or multiplied into a vector by transposing it (`_emit_rows_transposed`)."""
    for op in ops:
        if isinstance(op, memref.LoadOp):
            kinds[op.res] = _classify_load(plan, op, loops).kind
        elif op.name in BINARY:
            a, b = (
                kinds.get(x, "scalar" if const_value(x) is not None else None) for x in op.operands
            )
            if a is None or b is None:
                raise NoMatch
            pair = {a, b}
            name = BINARY[op.name]
            if pair == {"scalar"}:
                kinds[op.results[0]] = "scalar"
                continue
            if "rowT" in pair and (pair != {"vec", "rowT"} or name not in CYCLE or b != "rowT"):
                raise NoMatch
            if pair == {"row", "scalar"}:  # a per-row scalar of a row value (softmax's 1 / sum)
                kinds[op.results[0]] = "row"
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
        elif op.name in UNARY or op.name in ("arith.negf", "math.erf"):
            if kinds.get(op.operands[0]) != "vec":
                raise NoMatch
            kinds[op.results[0]] = "vec"
        else:
            raise NoMatch


def match_elementwise(plan, loops: list[ForOp], body: list[Operation], preset=None) -> Elementwise:
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
    check_expr(plan, loops, ops[:-1], kinds)
    if kinds.get(store.value) != "vec":
        raise NoMatch
    transposed = sum(
        any(kinds.get(x) == "rowT" for x in op.operands) for op in ops if op.name in BINARY
    )
    return Elementwise(loops, body, out, dict(preset or {}), transposed)


@dataclass
class ElementwiseSelection(Selection):
    ew: Elementwise

    def scratch_bytes(self, plan, tile: int) -> int:
        return tile_bytes(plan, tile * self.ew.inner) * self.ew.temps()

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        count = b.mul(n, b.c(self.ew.inner))
        emit_elementwise(lowering, b, self.ew, count, {})


def emit_elementwise(
    lowering, b, ew: Elementwise, count: SSAValue, preset, result=None, final=None
) -> None:
    """One intrinsic per op over `count` elements; temps are fresh NRAM buffers. The value
    stored by the body (or `result`) lands in the output tile (or `final`)."""
    plan = lowering.plan
    elt = float_type(element_type(ew.out.value))  # select_compute: f32 buffers only
    tile_elems = scratch_elems(plan, plan.tile * ew.inner)
    vec: dict[SSAValue, tuple[SSAValue, SSAValue]] = dict(preset)  # value -> (buffer, offset)
    cyc: dict[SSAValue, tuple[SSAValue, int]] = {}
    # a row value: (buffer, row length, period, the scalar ops applied to each row's value)
    rows: dict[SSAValue, tuple[BufferPlan, int, int, tuple]] = {}
    rows_t: dict[
        SSAValue, tuple[BufferPlan, int, int]
    ] = {}  # unaligned rows: (buffer, length, period)
    scal: dict[SSAValue, SSAValue] = {}
    ops = [op for op in ew.body if not isinstance(op, arith.ConstantOp)]
    if result is None:
        store = ops[-1]
        assert isinstance(store, memref.StoreOp)  # match_elementwise: the body ends with it
        result, final, ops = store.value, (ew.out.local, ew.out.slot), ops[:-1]
    assert final is not None, "a result is passed with the place it goes to"
    into: tuple[SSAValue, SSAValue] = final

    def scalar(x: SSAValue) -> SSAValue:
        if x in scal:
            return scal[x]
        c = const_value(x)
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
                rows[op.res] = (p, o.seg, o.period, ())
            elif o.kind == "rowT" and plan.tile * ew.inner <= o.seg:
                rows[op.res] = (p, o.seg, o.period, ())  # one row a tile: it starts aligned
            elif o.kind == "rowT":
                rows_t[op.res] = (p, o.seg, o.period)
            else:
                scal[op.res] = b.v(memref.LoadOp.get(p.local, [b.c(o.index)]))
            continue
        if op.name in UNARY or op.name in ("arith.negf", "math.erf"):
            d = dest(op)
            if op.name == "arith.negf":
                neg(vec[op.operands[0]], d)
            elif op.name == "math.erf":
                _emit_erf(
                    b, d, vec[op.operands[0]], [fresh("erf") for _ in range(ERF_TEMPS)], count
                )
            else:
                b.op(UNARY[op.name](*d, *vec[op.operands[0]], count))
            vec[op.results[0]] = d
            continue
        name = BINARY[op.name]
        x, y = op.operands
        if (x in rows) != (y in rows) and not {x, y} & (set(vec) | set(cyc)):
            r, other = (x, y) if x in rows else (y, x)  # row with scalar: still a row
            p_, seg, period, derived = rows[r]
            rows[op.results[0]] = (p_, seg, period, (*derived, (op, r, other, scalar(other))))
            continue
        if x not in vec and x not in cyc and y not in vec and y not in cyc:  # scalar op
            new = op.clone(value_mapper={x: scalar(x), y: scalar(y)})
            b.op(new)
            scal[op.results[0]] = new.results[0]
            continue
        d = dest(op)
        if y in rows_t:
            _emit_rows_transposed(b, name, d, vec[x], *rows_t[y], count, fresh("rows_t"))
            vec[op.results[0]] = d
            continue
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
            if name == "max" and const_value(sv) == 0.0:
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


Slot = tuple[SSAValue, SSAValue]  # an NRAM buffer and an element offset into it


def _emit_erf(b, d: Slot, y: Slot, temps: list[Slot], count: SSAValue) -> None:
    """d = erf(y) in vector intrinsics, two formulas selected by a 0/1 mask m = [|y| <
    1/2] (products by 0 and 1 and a sum with a zero: exact, signed zeros kept):
    - |y| < 1/2: y * (its Taylor series in y^2 to y^15), relative error below 1e-9,
      subnormals kept (y clamped to [-1/2, 1/2] first, so it stays finite where unused);
    - else sign(y) * (1 - erfc(|y|)), erfc by `ERFC_POLY`, 1 / (1 + a/2) as exp(-log(..))
      (no vector reciprocal), sign(y) as y * 1e30 clamped to [-1, 1].
    m and the clamps: max_scalar, and min(v, c) = -max(-v, -c)."""
    elt = float_type(element_type(y[0]))

    def k(value: float) -> SSAValue:
        return b.v(arith.ConstantOp(FloatAttr(value, elt)))

    def neg(v: Slot) -> None:
        b.op(dlp.MulScalarOp(*v, *v, k(-1.0), count))

    def clamp(v: Slot, lo: float, hi: float) -> None:
        b.op(dlp.MaxScalarOp(*v, *v, k(lo), count))
        neg(v)
        b.op(dlp.MaxScalarOp(*v, *v, k(-hi), count))
        neg(v)

    a, t, p, q, g = temps
    b.op(dlp.MulScalarOp(*a, *y, k(-1.0), count))
    b.op(dlp.MaxOp(*a, *a, *y, count))  # a = |y|
    # |y| >= 1/2: sign(y) * (1 - erfc(a)) into p
    b.op(dlp.MulScalarOp(*t, *a, k(0.5), count))
    b.op(dlp.AddScalarOp(*t, *t, k(1.0), count))
    b.op(dlp.LogOp(*t, *t, count))
    neg(t)
    b.op(dlp.ExpOp(*t, *t, count))  # t = 1 / (1 + a/2)
    b.op(dlp.MulScalarOp(*p, *t, k(ERFC_POLY[0]), count))
    for c in ERFC_POLY[1:-1]:
        b.op(dlp.AddScalarOp(*p, *p, k(c), count))
        b.op(dlp.MulOp(*p, *p, *t, count))
    b.op(dlp.AddScalarOp(*p, *p, k(ERFC_POLY[-1]), count))
    b.op(dlp.MulOp(*q, *a, *a, count))
    b.op(dlp.SubOp(*p, *p, *q, count))
    b.op(dlp.ExpOp(*p, *p, count))
    b.op(dlp.MulOp(*p, *p, *t, count))  # erfc(a)
    b.op(dlp.MulScalarOp(*p, *p, k(-1.0), count))
    b.op(dlp.AddScalarOp(*p, *p, k(1.0), count))  # erf(a)
    b.op(dlp.MulScalarOp(*q, *y, k(1e30), count))
    clamp(q, -1.0, 1.0)  # sign(y)
    b.op(dlp.MulOp(*p, *p, *q, count))
    # m = [a < 1/2] into q
    b.op(dlp.MulScalarOp(*q, *a, k(-1.0), count))
    b.op(dlp.AddScalarOp(*q, *q, k(0.5), count))
    b.op(dlp.MulScalarOp(*q, *q, k(1e30), count))
    clamp(q, 0.0, 1.0)
    # |y| < 1/2: yc * series(yc^2) into g, yc = y clamped to [-1/2, 1/2] (in t)
    b.op(dlp.MulScalarOp(*t, *y, k(1.0), count))
    clamp(t, -0.5, 0.5)
    b.op(dlp.MulOp(*a, *t, *t, count))  # z = yc^2
    b.op(dlp.MulScalarOp(*g, *a, k(ERF_SERIES[-1]), count))
    for c in reversed(ERF_SERIES[1:-1]):
        b.op(dlp.AddScalarOp(*g, *g, k(c), count))
        b.op(dlp.MulOp(*g, *g, *a, count))
    b.op(dlp.AddScalarOp(*g, *g, k(ERF_SERIES[0]), count))
    b.op(dlp.MulOp(*g, *g, *t, count))
    # d = m * small + (1 - m) * large
    b.op(dlp.MulOp(*g, *g, *q, count))
    b.op(dlp.MulScalarOp(*q, *q, k(-1.0), count))
    b.op(dlp.AddScalarOp(*q, *q, k(1.0), count))
    b.op(dlp.MulOp(*p, *p, *q, count))
    b.op(dlp.AddOp(*d, *g, *p, count))


def _emit_rows_transposed(
    b, name: str, d: Slot, v_: Slot, p: BufferPlan, inner: int, period: int, count, t: Slot
) -> None:
    """d = v (+|-|*) p's row values where rows of `inner` elements do not start aligned
    (a 5 x 5 conv's 100-element output planes): v's R rows transposed into t (`inner`
    rows of R, every one starting with row 0), one `dlp.cycle_*` of the R row values (the
    tile's, contiguous in p's slot; a whole buffer's `period` values repeating), and t
    transposed back into d."""
    rows_n = b.v(arith.DivSIOp(count, b.c(inner)))
    b.op(dlp.TransposeOp(*t, *v_, rows_n, b.c(inner)))
    seg = b.c(period) if period else rows_n
    b.op(CYCLE[name](*t, *t, p.local, p.slot, count, seg))
    b.op(dlp.TransposeOp(*d, *t, b.c(inner), rows_n))


def _emit_rows(
    b, name: str, d, v_, p, inner: int, period: int, derived: tuple, count: SSAValue
) -> None:
    """d[r*inner + i] = v[r*inner + i] (+|-|*) f(p[r]) (p[r % period] for a whole
    buffer's rows repeating per image) for every row r of the tile, f the `derived`
    scalar ops (op, row operand, other operand, its value) applied to the row's value."""
    rows_n = b.v(arith.DivSIOp(count, b.c(inner)))
    loop, body, r = b.for_(b.c(0), rows_n, b.c(1))
    row = body.v(arith.RemSIOp(r, body.c(period))) if period else r
    s = body.v(memref.LoadOp.get(p.local, [body.add(p.slot, row)]))
    for op, was, other, value in derived:
        new = op.clone(value_mapper={was: s, other: value})
        body.op(new)
        s = new.results[0]
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
