"""Intrinsic `slide` (`tensorize K/L slide`) and pass `loop-slide-rows`: a sliding-window
row (a depthwise conv's tile) as vector values, each input row loaded once per tile.

A depthwise 3x3 tile vectorized along the row reads `x[row][w + kw]` for kw = 0, 1, 2:
three unaligned 64-byte loads of almost the same bytes, one per multiply-add, which is
what bounds the kernel (GCC does not reuse a load across the taps or the rows of a
tile). Here each input row the tile reads is loaded once, as whole vectors, and every
tap's shifted window is built from two of them by a two-input shuffle (`vpermt2ps`,
`valignd`): per row, `ceil(E / 16)` loads feed `kw * rows-it-feeds` multiply-adds
(docs/design/schedules.md#depthwise-slide).

`tensorize K/L slide` (a schedule primitive) checks that loop L heads such a nest and
marks it (`dlpc.slide`); the C target's `loop-slide-rows` rewrites each marked nest into
straight-line vector ops (`vector.load`, `vector.shuffle`, `vector.broadcast`,
`arith.mulf`/`addf` on `vector<16xf32>`, `vector.store`), which only the C printer reads:
the OpenCL and DLP targets, scheduled by the same script, ignore the mark. The vector
code is for AVX-512 (`#if defined(__AVX512F__)`, `CPP_IF`); the nest as scheduled stays
beside it for other compilers, where GCC lowers 16-float vectors and their shuffles
through memory (8x slower than the nest on AVX2).

Input/Output: loop dialect.  Requires (`SlideShapeError`, `SlideMismatchError`): 1) L
heads a perfect nest whose innermost loop `w` is vectorized, from 0 with step 1, its trip
a multiple of 16, and whose other loops have at most `MAX_POINTS` iterations in all
2) the innermost body is index/compare arithmetic, loads and one store
`C[..] = C[..] + X[..] * K[..]` (either operand order), C read and written at the same
element 3) C's last index moves with `w` by 1, its others not; X's last index is `w` +
the nest's loops + a constant (no loop outside the nest), its others do not move with
`w`, X's rows are at least 16 long; K does not move with `w` 4) C, X and K are distinct
buffers.  Guarantees (`loop-slide-rows`): the nest is replaced by two trip-1 loops at its
place, one marked `dlpc.cpp_if = "defined(__AVX512F__)"` holding straight-line code, the
other `"!defined(__AVX512F__)"` holding the nest unchanged (its loops renamed fresh).
Where the loop around the nest (the tile loop) holds only a setup writing its own local
buffers (the accumulator tile, zeroed), the nest, and an epilogue writing nothing the
setup or the nest reads, and the nest fills fewer than `MERGE_VECTORS` accumulator
vectors, `m` consecutive tiles are merged instead: under the AVX-512 condition a tile
loop stepping m times as far runs the m setups, one straight-line code for the m nests
(a row two tiles read loaded once), the m epilogues; under the other, the tile loop as
it was. In the straight-line code every distinct K element loaded and broadcast once, every input row's vectors
loaded once (at 0, 16, ..., the last one clamped to end at the row's end: in bounds),
each tap's window either such a vector or a shuffle of two, every C vector loaded once
before its first multiply-add and stored once after the last. The iterations are
visited row by row (grouped by X's row) when that keeps the order in which each C
element receives its terms, else in the nest's order: each element sums its terms in
the nest's order either way (numerics unchanged). Where X is a padded copy of a buffer S
(`cache_read` of a padded read: loops right after X's allocation storing zeros and, in
one place, `X[i] = S[i + offset]` over a box whose rows are S's whole rows of whole
vectors, every zero from the fill's loop on outside the box), that nothing but the nest and code under `!defined` reads, and S is written
nowhere in the kernel (`READ_IN_PLACE`), the vector code reads S in place: a window's
lanes outside S's row are zero lanes shuffled in, a row outside the box a zero vector
(tested at run time where the row moves: S's first row read, then zeros selected), and
the copy's loops move into a trip-1 loop marked `!defined` (the nest as scheduled still
reads X): no copy on AVX-512, the same sums (a zero lane adds 0 * k as the copy's zero).

Before (`tensorize k/r1 slide`, X rows of 34, a tile of 2 rows x 32):

    loop.for %r1 = 0 to 3 {unroll = 3} { loop.for %r2 = 0 to 3 {unroll = 3} {
      loop.for %hi = 0 to 2 {unroll = 2} { loop.for %w = 0 to 32 {vectorize} {
        acc[%hi, %w] += xp[%ho + %hi + %r1, %w + %r2] * k[%c, %r1, %r2] }}}}

After `loop-slide-rows` (one input row shown; then the nest as it was, `#if !defined`):

    loop.for %v = 0 to 1 {dlpc.cpp_if = "defined(__AVX512F__)"} {
    %a0 = vector.load %xp[%row, 0]  %a1 = vector.load %xp[%row, 16]  %a2 = ... [%row, 18]
    %s = vector.shuffle %a0, %a1 [1, 2, ..., 16]        // the row at w + 1
    %c0 = vector.load %acc[0, 0] ...  %m = arith.mulf %s, %k01 : vector<16xf32> ...
    vector.store %c0, %acc[0, 0] ... }
    loop.for %s = 0 to 1 {dlpc.cpp_if = "!defined(__AVX512F__)"} { (the nest) }
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    ModuleOp,
    StringAttr,
    VectorType,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    TEAM_LOOP,
    Affine,
    ScheduleError,
    affine,
    affine_range,
    block_of,
    child_loop,
    conjunction,
    const,
    depends_on,
    emit_affine,
    erase,
    get_loop,
    iv_loop,
    loop_name,
    memref_type,
)

LANES = 16  # floats per vector (`tensorize.LANES`: 512 bits; GCC splits it on AVX2)
MAX_POINTS = 96  # iterations of the nest's unrolled loops (3 x 3 taps x 8 rows = 72)
SLIDE = "dlpc.slide"  # the mark `tensorize ... slide` leaves on the nest's head
# a loop the C printer wraps in `#if <value>` ... `#endif`: the vector code where the C
# compiler targets AVX-512 (16-float vectors, two-input shuffles in one instruction), the
# nest one row at a time elsewhere (GCC lowers 16-float vectors and their shuffles
# through memory on AVX2: 8x slower than the scalar nest)
CPP_IF = "dlpc.cpp_if"
VECTOR_ISA = "defined(__AVX512F__)"
# accumulator vectors of a tile on AVX-512: consecutive tiles of fewer are merged into one
# (`_merged`: the rows two tiles both read loaded once; 16 of the 32 zmm registers, the
# rest for the row's vectors, windows and weights)
MERGE_VECTORS = 16
# the vector code reads a padded copy's source in place (`_padded_source`; the copy kept
# for the nest as scheduled): no copy on AVX-512 (docs/design/schedules.md#depthwise-slide)
READ_IN_PLACE = True


class SlideShapeError(ScheduleError):
    pass


class SlideMismatchError(ScheduleError):
    pass


@dataclass
class SlideNest:
    loops: list[ForOp]  # the head ... the vectorized innermost loop
    store: memref.StoreOp
    acc: memref.LoadOp  # C[..], read where it is stored
    x: memref.LoadOp  # the row read along w
    k: memref.LoadOp  # the factor constant along w
    acc_first: bool  # addf(C, product) (else addf(product, C))
    x_first: bool  # mulf(X, K) (else mulf(K, X))


def _form(value: SSAValue, inner: Collection[SSAValue], hoist: Callable[[SSAValue], SSAValue]):
    """`value` as an Affine in the nest's loops, a part that moves with none of them (a
    fused loop's `f / C`) as one opaque term (`hoist`'s value for it), else None."""
    form = affine(value)
    if form is not None:
        return form
    if not any(depends_on(value, iv) for iv in inner):
        return Affine(0, {hoist(value): 1})
    op = value.owner
    if isinstance(op, arith.AddiOp | arith.SubiOp):
        a, b = _form(op.lhs, inner, hoist), _form(op.rhs, inner, hoist)
        if a is not None and b is not None:
            return a.add(b, 1 if isinstance(op, arith.AddiOp) else -1)
    return None


def _forms(
    op: Operation, what: str, inner: Collection[SSAValue], hoist: Callable[[SSAValue], SSAValue]
) -> list[Affine]:
    assert isinstance(op, memref.LoadOp | memref.StoreOp)
    forms = [_form(i, inner, hoist) for i in op.indices]
    if any(f is None for f in forms):
        raise SlideMismatchError(f"the nest at loop {what} reads or writes at non-affine indices")
    return [f for f in forms if f is not None]


def _same(value: SSAValue) -> SSAValue:
    return value


def _load(value: SSAValue, body) -> memref.LoadOp | None:
    op = value.owner
    return op if isinstance(op, memref.LoadOp) and op.parent_block() is body else None


def match(head: ForOp, what: str) -> SlideNest:
    """The nest `head` heads, checked against requirements 1)-4) (module docstring)."""
    loops = [head]
    while (nxt := child_loop(loops[-1])) is not None:
        loops.append(nxt)
    w, chain = loops[-1], loops[:-1]
    body = w.block
    if (
        not chain
        or w.vectorize is None
        or w.lower != 0
        or w.stride != 1
        or w.trip_count % LANES
        or math.prod(lp.trip_count for lp in chain) > MAX_POINTS
    ):
        raise SlideShapeError(
            f"loop {what} must head a perfect nest whose innermost loop is vectorized over "
            f"a multiple of {LANES} from 0 by 1, the loops above it at most {MAX_POINTS} "
            "iterations in all, for 'slide'"
        )
    stores = [op for op in body.ops if isinstance(op, memref.StoreOp)]
    others = [
        op
        for op in body.ops
        if not isinstance(op, memref.LoadOp | memref.StoreOp) and op.dialect_name() != "arith"
    ]
    mismatch = SlideMismatchError(f"the nest at loop {what} does not store a sum C + X * K")
    if len(stores) != 1 or others:
        raise mismatch
    store = stores[0]
    add = store.value.owner
    if not isinstance(add, arith.AddfOp) or add.parent_block() is not body:
        raise mismatch
    for acc_first in (True, False):
        acc, prod = (add.lhs, add.rhs) if acc_first else (add.rhs, add.lhs)
        acc_load, mul = _load(acc, body), prod.owner
        if acc_load is None or acc_load.memref != store.memref:
            continue
        if not isinstance(mul, arith.MulfOp) or mul.parent_block() is not body:
            continue
        a, b = _load(mul.lhs, body), _load(mul.rhs, body)
        if a is None or b is None:
            continue
        iv, inner = w.induction_var, {lp.induction_var for lp in loops}
        moves = [any(iv in f.terms for f in _forms(op, what, inner, _same)) for op in (a, b)]
        if moves not in ([True, False], [False, True]):
            continue
        x, k = (a, b) if moves[0] else (b, a)
        nest = SlideNest(loops, store, acc_load, x, k, acc_first, moves[0])
        _check_indices(nest, what)
        return nest
    raise mismatch


def _check_indices(nest: SlideNest, what: str) -> None:
    iv = nest.loops[-1].induction_var
    inner = {lp.induction_var for lp in nest.loops}
    acc, stored = (_forms(op, what, inner, _same) for op in (nest.acc, nest.store))
    if acc != stored:
        raise SlideMismatchError(
            f"the nest at loop {what} does not accumulate into the element it stores"
        )
    x = _forms(nest.x, what, inner, _same)
    extent = memref_type(nest.x.memref).get_shape()[-1]
    buffers = {nest.store.memref, nest.x.memref, nest.k.memref}
    if (
        len(buffers) != 3
        or acc[-1].terms.get(iv) != 1
        or any(iv in f.terms for f in acc[:-1])
        or x[-1].terms.get(iv) != 1
        or any(v not in inner for v in x[-1].terms)
        or any(iv in f.terms for f in x[:-1])
        or not LANES <= extent
        or not 0 <= affine_range(x[-1])[0] <= affine_range(x[-1])[1] < extent
    ):
        raise SlideMismatchError(
            f"the nest at loop {what} must read X's row along its vectorized loop (by 1, "
            f"inside the nest and the row, rows of at least {LANES}) and write a distinct C's "
            "row by 1"
        )


def mark(root, kernel: str, loop: str) -> ForOp:
    """`tensorize K/L slide`: check the nest (`match`) and mark its head."""
    head = get_loop(root, kernel, loop)
    match(head, f"{kernel}/{loop}")
    head.annotate(SLIDE)
    return head


# ---------------------------------------------------------------------- the rewrite


def _at(form: Affine, env: dict[SSAValue, int]) -> Affine:
    """`form` with the nest's loops at `env`'s values (the vectorized loop at 0)."""
    value = form.const + sum(c * env.get(v, 0) for v, c in form.terms.items() if v in env)
    return Affine(int(value), {v: c for v, c in form.terms.items() if v not in env})


def _key(form: Affine):
    return (form.const, frozenset(form.terms.items()))


class _Emitter:
    """Straight-line ops before `at`, each distinct index, load and window once."""

    def __init__(self, block: Block, nest: SlideNest, source: _Source | None = None):
        self.block = block
        self.vec = VectorType(nest.acc.res.type, [LANES])
        self.cache: dict = {}
        self.source = source  # X a padded copy: its windows read from its source in place

    def put(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def once(self, key, make) -> SSAValue:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def index(self, form: Affine) -> SSAValue:
        def make() -> SSAValue:
            here = Block()  # (emit_affine's ops, appended in order)
            value = emit_affine(form, here)
            for op in list(here.ops):
                op.detach()
                self.block.add_op(op)
            return value

        return self.once(("i", _key(form)), make)

    def indices(self, forms: list[Affine]) -> list[SSAValue]:
        return [self.index(f) for f in forms]

    def load(self, buf: SSAValue, forms: list[Affine]) -> SSAValue:
        key = ("v", buf, tuple(_key(f) for f in forms))
        return self.once(key, lambda: self.put(vector.LoadOp(buf, self.indices(forms), self.vec)))

    def window(self, buf: SSAValue, row: list[Affine], start: int, extent: int) -> SSAValue:
        """X[row..., start : start + LANES]: one vector, or a shuffle of the two loaded
        vectors that hold it (the last clamped to end at `extent`); of a padded copy X,
        the same lanes of its source's row (`_inplace`)."""
        src = self.source
        if src is not None and buf == src.copy:
            key = ("w", buf, tuple(_key(f) for f in row), start)
            return self.once(key, lambda: self._inplace(src, row, start))

        def at(col: int) -> SSAValue:
            return self.load(buf, [*row, Affine(col, {})])

        def make() -> SSAValue:
            a = min(start - start % LANES, extent - LANES)
            if a == start:
                return at(a)
            b = min(a + LANES, extent - LANES)
            lanes = [e - a if e < a + LANES else LANES + e - b for e in range(start, start + LANES)]
            mask = DenseArrayBase.from_list(i64, lanes)
            return self.put(vector.ShuffleOp(at(a), at(b), mask, result_type=self.vec))

        return self.once(("w", buf, tuple(_key(f) for f in row), start), make)

    def zero(self) -> SSAValue:
        def make() -> SSAValue:
            z = self.put(arith.ConstantOp(FloatAttr(0.0, cast(AnyFloat, self.vec.element_type))))
            return self.put(vector.BroadcastOp(z, self.vec))

        return self.once(("zero",), make)

    def _inplace(self, src: _Source, row: list[Affine], start: int) -> SSAValue:
        """X[row..., start : start + LANES] of the padded copy X = pad(S) from S's row:
        lanes outside S's row zero (shuffled in from a zero vector), a row outside S (in a
        dim where X's row moves at run time: tested) zero."""
        t = start + src.col_offset  # S's column of the window's first lane
        a = t - t % LANES

        def at(col: int) -> SSAValue:
            return self.source_row(src, row, col) if 0 <= col < src.width else self.zero()

        if a == t:
            return at(a)
        lanes = [e - a for e in range(t, t + LANES)]
        mask = DenseArrayBase.from_list(i64, lanes)
        return self.put(vector.ShuffleOp(at(a), at(a + LANES), mask, result_type=self.vec))

    def source_row(self, src: _Source, row: list[Affine], col: int) -> SSAValue:
        """S[row + offset..., col : col + LANES], zero where X's row lies in its border."""

        def make() -> SSAValue:
            where = self.source_index(src, row)
            if where is None:
                return self.zero()
            cond, index = where
            loaded = self.put(
                vector.LoadOp(src.source, [*index, self.index(Affine(col, {}))], self.vec)
            )
            return loaded if cond is None else self.put(arith.SelectOp(cond, loaded, self.zero()))

        return self.once(("s", tuple(_key(f) for f in row), col), make)

    def source_index(
        self, src: _Source, row: list[Affine]
    ) -> tuple[SSAValue | None, list[SSAValue]] | None:
        """(the test that X's row lies inside S or None where it always does, S's row
        index: row `lo` of a dim where the test fails), or None where it never does."""

        def make() -> tuple[SSAValue | None, list[SSAValue]] | None:
            tests, index = [], []
            for d, form in enumerate(row):
                lo, hi = src.inside[d]
                static = all(_is_iv(v) for v in form.terms)
                first, last = affine_range(form) if static else (lo - 1, hi)
                if static and (last < lo or first >= hi):
                    return None
                value = self.index(form)
                if first < lo:
                    tests.append((value, lo, "sge"))
                if last >= hi:
                    tests.append((value, hi, "slt"))
                index.append(value)
            cond = None
            if tests:  # (a row in the border: read row `lo` instead, then zero)
                ops, cond = conjunction(tests)
                for op in ops:
                    self.put(op)
                for d, value in enumerate(index):
                    if any(t[0] is value for t in tests):
                        low = self.index(Affine(src.inside[d][0], {}))
                        index[d] = self.put(arith.SelectOp(cond, value, low))
            at = [
                self.put(arith.AddiOp(value, self.index(src.offset[d])))
                for d, value in enumerate(index)
            ]
            return cond, at

        key = ("r", tuple(_key(f) for f in row))
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def splat(self, buf: SSAValue, forms: list[Affine]) -> SSAValue:
        def make() -> SSAValue:
            scalar = self.put(memref.LoadOp.get(buf, self.indices(forms)))
            return self.put(vector.BroadcastOp(scalar, self.vec))

        return self.once(("k", buf, tuple(_key(f) for f in forms)), make)


def _row(x: list[Affine], env: dict) -> tuple:
    return tuple(_at(f, env).const for f in x[:-1])


def _order(points: list[tuple]) -> list[tuple]:
    """The iterations (forms, env) grouped by X's row where each C vector then still
    receives its terms in the nest's order (its rows non-decreasing along the nest), else
    as they are."""
    seen: dict = {}
    for forms, env in points:
        target = (forms.c, tuple(_key(_at(f, env)) for f in forms.acc))
        row = _row(forms.x, env)
        if seen.get(target, row) > row:
            return points
        seen[target] = row
    return sorted(points, key=lambda p: _row(p[0].x, p[1]))  # (stable)


@dataclass
class _Forms:
    nest: SlideNest
    c: SSAValue  # C
    acc: list[Affine]
    x: list[Affine]
    k: list[Affine]


def _is_iv(value: SSAValue) -> bool:
    return isinstance(value, BlockArgument) and isinstance(value.block.parent_op(), ForOp)


@dataclass
class _Source:
    """X (`copy`) a padded copy of S (`source`): X[i] = S[i + offset] for i inside the box
    `inside` (per dim but the last [lo, hi)), 0 elsewhere; X's last dim reads S's row at
    `col_offset`, S's whole row (`width` columns, whole vectors)."""

    copy: SSAValue
    source: SSAValue
    offset: list[Affine]  # (values defined before the copy)
    inside: list[tuple[int, int]]
    col_offset: int
    width: int
    loops: list[ForOp]  # the copy: consecutive loops in X's block


def _padded_source(
    x: SSAValue, heads: list[ForOp], gone: tuple[Operation, ...] = ()
) -> _Source | None:
    """Where the nests `heads` read X from a padded copy (`cache_read` of a padded read:
    loops right after X's allocation storing zeros and, in one place, S[i + offset] at
    X[i]) that nothing else reads but code for other compilers (`!defined` loops), and S
    is written nowhere in the kernel (`gone`: ops erased next, not counted): that copy,
    else None (the vector code reads X)."""
    alloc = x.owner
    if not READ_IN_PLACE or not isinstance(alloc, memref.AllocaOp | memref.AllocOp) or not heads:
        return None
    block = alloc.parent_block()
    if block is None:
        return None
    ops = list(block.ops)
    copy: list[ForOp] = []
    for op in ops[ops.index(alloc) + 1 :]:
        if not isinstance(op, ForOp) or x not in _stores([op]):
            break
        copy.append(op)
    if not copy:
        return None
    inner = {lp.induction_var for top in copy for lp in top.walk() if isinstance(lp, ForOp)}
    fills, zeros = [], []  # (the stores, with their top loop's place in the copy)
    for place, top in enumerate(copy):
        for op in top.walk():
            if isinstance(op, vector.StoreOp | vector.LoadOp):
                return None
            if isinstance(op, memref.StoreOp):
                if op.memref != x:
                    return None
                zero = op.value.owner
                if not (
                    isinstance(zero, arith.ConstantOp)
                    and isinstance(zero.value, FloatAttr)
                    and zero.value.value.data == 0.0
                ):
                    fills.append((op, place))
                else:
                    zeros.append((op, place))
    if len(fills) != 1 or not isinstance(fills[0][0].value.owner, memref.LoadOp):
        return None
    (store, fill_at), load = fills[0], fills[0][0].value.owner
    s = load.memref
    xs, ss = memref_type(x).get_shape(), memref_type(s).get_shape()
    if s == x or len(xs) != len(ss) or len(store.indices) != len(xs):
        return None
    offset, inside = [], []
    for at, read in zip(store.indices, load.indices, strict=True):
        lp = iv_loop(at) if _is_iv(at) and at in inner else None
        form = _form(read, inner, _same)
        if lp is None or lp.stride != 1 or form is None or form.terms.get(at) != 1:
            return None
        off = form.add(Affine(0, {at: 1}), -1)
        if any(v in inner for v in off.terms) or any(  # (defined before the copy)
            not _is_iv(v) and any(top.is_ancestor(v.owner) for top in copy)
            for v in off.terms  # type: ignore[arg-type]
        ):
            return None
        offset.append(off)
        inside.append((lp.lower, lp.upper))
    for zero, place in zeros:  # a zero written at or after the fill lies outside the box
        forms = [affine(i) for i in zero.indices]
        if place >= fill_at and not any(
            f is not None
            and all(_is_iv(v) for v in f.terms)
            and (affine_range(f)[1] < a or affine_range(f)[0] >= b)
            for f, (a, b) in zip(forms, inside, strict=True)
        ):
            return None
    col = offset.pop()
    lo, hi = inside.pop()
    if (
        col.terms
        or lo + col.const != 0
        or hi + col.const != ss[-1]
        or ss[-1] % LANES
        or any(
            off.terms and (b - a, xs[d]) != (1, 1)
            for d, (off, (a, b)) in enumerate(zip(offset, inside, strict=True))
        )
    ):
        return None
    kernel = heads[0].kernel()
    scalar = f"!{VECTOR_ISA}"
    for op in kernel.walk():
        if isinstance(op, memref.StoreOp | vector.StoreOp) and op.operands[1] == s:
            return None
        if isinstance(op, memref.LoadOp | vector.LoadOp) and op.operands[0] == x:
            if any(h.is_ancestor(op) for h in [*heads, *gone, *copy]):
                continue
            if not any(isinstance(a, ForOp) and _cpp_if(a) == scalar for a in _parents(op)):
                return None
    return _Source(x, s, offset, inside, col.const, ss[-1], copy)


def _cpp_if(loop: ForOp) -> str | None:
    attr = loop.attributes.get(CPP_IF)
    return attr.data if isinstance(attr, StringAttr) else None


def _parents(op: Operation) -> list[Operation]:
    out, p = [], op.parent_op()
    while p is not None:
        out.append(p)
        p = p.parent_op()
    return out


def _emit(vec: ForOp, heads: list[ForOp], what: str, gone: tuple[Operation, ...] = ()) -> None:
    """Straight-line vector code for the nests `heads` head (the same X, K) into `vec`'s
    body, their loop-invariant index parts computed before `vec`; the nests erased (`gone`:
    ops the caller erases next)."""
    points: list[tuple] = []
    for head in heads:
        nest = match(head, what)
        inner = {lp.induction_var for lp in nest.loops}
        hoisted: dict[SSAValue, SSAValue] = {}

        def hoist(value: SSAValue, head=head, hoisted=hoisted) -> SSAValue:
            """`value` (moving with no loop of the nest) computed before `vec`: its ops
            inside the nest (index arithmetic sunk there) cloned there."""
            op = value.owner
            if not isinstance(op, Operation) or not head.is_ancestor(op):
                return value
            if value not in hoisted:
                operands = {v: hoist(v) for v in op.operands}
                clone = op.clone(value_mapper=operands)
                block_of(vec).insert_op_before(clone, vec)
                hoisted[value] = clone.results[op.results.index(value)]
            return hoisted[value]

        acc, x, k = (_forms(op, what, inner, hoist) for op in (nest.acc, nest.x, nest.k))
        forms = _Forms(nest, nest.store.memref, acc, x, k)
        chain, w = nest.loops[:-1], nest.loops[-1]
        ranges = [range(lp.lower, lp.upper, lp.stride) for lp in chain]
        ivs = [lp.induction_var for lp in chain]
        # (the vectorized loop at 0: a window's or C vector's first lane)
        for p in itertools.product(*ranges):
            points.append((forms, {**dict(zip(ivs, p, strict=True)), w.induction_var: 0}))
    first = points[0][0].nest
    source = _padded_source(first.x.memref, heads, gone)
    em = _Emitter(vec.block, first, source)
    sums: dict = {}  # C vector -> (C, its indices, its running sum)
    for forms, env in _order(points):
        nest = forms.nest
        kv = em.splat(nest.k.memref, [_at(f, env) for f in forms.k])
        row = [_at(f, env) for f in forms.x[:-1]]
        extent = memref_type(nest.x.memref).get_shape()[-1]
        for q in range(0, nest.loops[-1].trip_count, LANES):
            xv = em.window(nest.x.memref, row, _at(forms.x[-1], env).const + q, extent)
            c = [_at(f, env) for f in forms.acc[:-1]]
            c.append(_at(forms.acc[-1], env).add(Affine(q, {})))
            key = (forms.c, tuple(_key(f) for f in c))
            if key not in sums:
                sums[key] = (forms.c, c, em.load(forms.c, c))
            prod = em.put(arith.MulfOp(xv, kv) if nest.x_first else arith.MulfOp(kv, xv))
            old = sums[key][2]
            new = em.put(arith.AddfOp(old, prod) if nest.acc_first else arith.AddfOp(prod, old))
            sums[key] = (forms.c, c, new)
    for buf, c, value in sums.values():
        vec.block.add_op(vector.StoreOp(value, buf, em.indices(c)))
    for head in heads:
        erase(head)
    if source is not None:  # the copy only for the nest as scheduled
        kernel = vec.kernel()
        top = ForOp(0, 1, 1, name=kernel.fresh_loop_name(f"{loop_name(source.loops[0])}_scalar"))
        block_of(source.loops[0]).insert_op_before(top, source.loops[0])
        for lp in source.loops:
            lp.detach()
            top.block.add_op(lp)
        top.annotate(CPP_IF, f"!{VECTOR_ISA}")


def rewrite(head: ForOp, what: str) -> None:
    """Replace the nest `head` heads by the vector code and the nest (module docstring);
    on AVX-512 `MERGE_VECTORS` accumulators' worth of consecutive tiles in one (`_merged`)."""
    nest = match(head, what)
    tile = head.parent_op()
    merged = _merged(tile, head, nest, what) if isinstance(tile, ForOp) else None
    if merged is not None:
        return
    vec = ForOp(0, 1, 1, name=head.kernel().fresh_loop_name(f"{head.loop_name}_v{LANES}"))
    block_of(head).insert_op_before(vec, head)
    rows = _scalar_copy(head)
    rows.annotate(CPP_IF, f"!{VECTOR_ISA}")  # (before `_emit`: it reads the marks)
    _emit(vec, [head], what)
    vec.annotate(CPP_IF, VECTOR_ISA)


def _stores(ops) -> set[SSAValue]:
    return {
        op.operands[1]
        for top in ops
        for op in top.walk()
        if isinstance(op, memref.StoreOp | vector.StoreOp)
    }


def _loads(ops) -> set[SSAValue]:
    return {op.operands[0] for top in ops for op in top.walk() if isinstance(op, memref.LoadOp)}


def _merged(tile: ForOp, head: ForOp, nest: SlideNest, what: str) -> ForOp | None:
    """Where the nest fills few accumulators, `m` consecutive iterations of the tile loop
    around it as one on AVX-512 (a tile loop stepping m times as far, the m copies' setup
    first, one vector code for their m nests sharing the rows they read, then their
    epilogues), the tile loop as it was beside it for other compilers; None (nothing
    changed) where the tile's body is not `setup, nest, epilogue` with the setup writing
    only its own local buffers and the epilogue writing nothing the setup or the nest
    reads, or no m > 1 fits."""
    from dlpc.passes.schedule.nest import largest_divisor

    body = list(tile.block.ops)
    at = body.index(head)
    pre, post = body[:at], body[at + 1 :]
    local = {op.results[0] for op in pre if isinstance(op, memref.AllocaOp)}
    plain = all(
        isinstance(op, memref.AllocaOp | ForOp) or (op.dialect_name() == "arith" and not op.regions)
        for op in pre + post
    )
    acc_vectors = len(
        {
            tuple(_key(_at(f, env)) for f in _forms(nest.acc, what, set(), _same))
            for env in _points(nest)
        }
    ) * (nest.loops[-1].trip_count // LANES)
    m = largest_divisor(tile.trip_count, max(1, MERGE_VECTORS // max(1, acc_vectors)))
    if (
        m < 2
        or not plain
        or tile.parallel is not None
        or TEAM_LOOP in tile.attributes  # (its iterations may run on two threads)
        or tile.unroll is not None
        or not _stores(pre) <= local
        or _stores(post) & (_loads(pre) | _loads([head]) | {nest.x.memref, nest.k.memref})
    ):
        return None
    kernel = tile.kernel()
    scalar = tile.clone()
    block_of(tile).insert_op_before(scalar, tile)
    for lp in [op for op in scalar.walk() if isinstance(op, ForOp)]:
        lp.attributes.pop(SLIDE, None)
        lp.attributes["name"] = StringAttr(kernel.fresh_loop_name(loop_name(lp)))
    big = ForOp(
        tile.lower,
        tile.upper,
        tile.stride * m,
        name=kernel.fresh_loop_name(f"{loop_name(tile)}_v{LANES}"),
    )
    block_of(tile).insert_op_before(big, tile)
    mappers = []
    for j in range(m):
        step = const(j * tile.stride)
        iv = arith.AddiOp(big.induction_var, step.result)
        big.block.add_ops([step, iv])
        mappers.append({tile.induction_var: iv.result})
    for j in range(m):
        for op in pre:
            big.block.add_op(op.clone(value_mapper=mappers[j]))
    vec = ForOp(0, 1, 1, name=kernel.fresh_loop_name(f"{head.loop_name}_v{LANES}"))
    big.block.add_op(vec)
    heads = []
    for j in range(m):
        clone = head.clone(value_mapper=mappers[j])
        big.block.add_op(clone)
        heads.append(clone)
    for j in range(m):
        for op in post:
            big.block.add_op(op.clone(value_mapper=mappers[j]))
    scalar.annotate(CPP_IF, f"!{VECTOR_ISA}")  # (before `_emit`: it reads the marks)
    _emit(vec, heads, what, gone=(tile,))
    for lp in [op for op in big.walk() if isinstance(op, ForOp) and op not in (big, vec)]:
        lp.attributes["name"] = StringAttr(kernel.fresh_loop_name(loop_name(lp)))
    big.annotate(CPP_IF, VECTOR_ISA)
    erase(tile)
    return big


def _points(nest: SlideNest) -> list[dict]:
    chain, w = nest.loops[:-1], nest.loops[-1]
    ranges = [range(lp.lower, lp.upper, lp.stride) for lp in chain]
    ivs = [lp.induction_var for lp in chain]
    return [
        {**dict(zip(ivs, p, strict=True)), w.induction_var: 0} for p in itertools.product(*ranges)
    ]


def _scalar_copy(head: ForOp) -> ForOp:
    """The nest as scheduled, in a trip-1 loop inserted before `head` (its loops renamed
    fresh): what a compiler without AVX-512 runs, the same code as without `slide`."""
    kernel = head.kernel()
    top = ForOp(0, 1, 1, name=kernel.fresh_loop_name(f"{head.loop_name}_scalar"))
    block_of(head).insert_op_before(top, head)
    clone = head.clone()
    clone.attributes.pop(SLIDE, None)
    top.block.add_op(clone)
    for lp in [op for op in clone.walk() if isinstance(op, ForOp)]:
        lp.attributes["name"] = StringAttr(kernel.fresh_loop_name(loop_name(lp)))
    return top


@dataclass(frozen=True)
class LoopSlideRows(ModulePass):
    """`loop-slide-rows`: every nest marked by `tensorize ... slide` as vector code."""

    name = "loop-slide-rows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        marked = [lp for lp in op.walk() if isinstance(lp, ForOp) and SLIDE in lp.attributes]
        for lp in marked:
            what = f"{lp.kernel().sym}/{lp.loop_name}"
            rewrite(lp, what)
