"""Schedule primitive `tensorize`: replace an inner loop nest by a micro-kernel.

Intrinsics: `gemm` (below), `gemmN` (`gemm` over any number of rows: tiles of N rows and
one remainder tile, `tensorize_gemm_rows`), `gemmNxM` (the same over the columns too,
tiles of M columns and a remainder, `tensorize_gemm_tiles`), `gemm_pipe` (`gemm` with
B's row carried in registers from one k to the next, for tiles of few rows,
`tensorize_gemm_pipe`) and `dot` (an mr x nr block of dot products along k for
operands both contiguous along k, `tensorize_dot`), and `slide` (a depthwise conv's
sliding-window row as vector values, `slide.py`: marked here, rewritten on the C target).

Input/Output: loop dialect.  The micro-kernels ("intrinsics") are written as loop IR
that the C backend turns into register-resident SIMD code, so no backend hook is
needed: `gemm` is the register-blocked matmul micro-kernel

    acc[mr][nr] = C tile                       (cache_write around the nest)
    for k:                                     (reduction loop outermost)
      for i < mr {unroll = mr}:                (fully unrolled: one broadcast of A each)
        for j < nr {vectorize}:                (`omp simd`: GCC keeps the tile in
          acc[i][j] += A[i, k] * B[k, j]        mr * nr/16 vector registers, one FMA each)
    C tile = acc

Requires: 1) the loop heads a perfect nest of exactly three loops 2) the innermost body
is `C[i, j] = C[i, j] + A[.., k] * B[.., j]` (one store, one multiply-add) 3) exactly one
of the loops (k) is absent from C's indices, and the innermost dim of C is indexed by
another loop (j) 4) `mr = trips(i) <= 24`, `nr = trips(j) <= 128`, `mr * nr <= 512`
(the tile must fit the register file, with AVX-512 32 x 16 floats).
Guarantees: the loops are reordered to (k, i, j) over the same positions, the C tile is
staged in a local `acc` placed around the nest, `i` is fully unrolled and `j` vectorized.
Numerics: each element still sums its k terms in increasing order.

Before (`tensorize matmul_0/ii gemm`):

    loop.for %ii = 0 to 8 step 1 {name = "ii"} {
      loop.for %jj = 0 to 32 step 1 {name = "jj"} {
        loop.for %k = 0 to 256 step 1 {name = "k", reduction} {
          %a = memref.load %A[..] ... %c = memref.load %C[%i, %j] ...
          memref.store %s, %C[%i, %j] }}}

After:

    %acc = memref.alloca() : memref<8x32xf32>
    (copy C tile -> acc)
    loop.for %k = 0 to 256 step 1 {name = "k", reduction} {
      loop.for %ii = 0 to 8 step 1 {name = "ii", unroll = 8} {
        loop.for %jj = 0 to 32 step 1 {name = "jj", vectorize} {
          ... %c = memref.load %acc[%ii, %jj] ... memref.store %s, %acc[%ii, %jj] }}}
    (copy acc -> C tile)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import float_type
from dlpc.passes.schedule._common import (
    Affine,
    ScheduleError,
    affine,
    block_of,
    child_loop,
    const,
    copy_annotations,
    depends_on,
    emit_affine,
    erase,
    get_loop,
    loop_name,
    memref_type,
    name_iv,
)
from dlpc.passes.schedule.cache import stage
from dlpc.passes.schedule.reorder import reorder
from dlpc.passes.schedule.split import split

MAX_MR, MAX_NR, MAX_TILE = 24, 128, 512
LANES = 16  # floats per 512-bit vector: the dot intrinsic's partial-sum width
MAX_DOT = 24  # partial-sum vectors of the dot intrinsic (of 32 zmm registers)


class TensorizeUnknownIntrinsicError(ScheduleError):
    pass


class TensorizeShapeError(ScheduleError):
    pass


class TensorizeMismatchError(ScheduleError):
    pass


class TensorizeExtentError(ScheduleError):
    pass


def _match_gemm(loops: list[ForOp], what: str):
    """The roles (k, i, j) of the three loops and the C buffer, or a mismatch error."""
    stores = [op for op in loops[-1].walk() if isinstance(op, memref.StoreOp)]
    if len(stores) != 1:
        raise TensorizeMismatchError(
            f"the nest at loop {what} must store exactly once, found {len(stores)}"
        )
    store = stores[0]
    add = store.value.owner
    if not isinstance(add, arith.AddfOp):
        raise TensorizeMismatchError(f"the nest at loop {what} does not store a sum C + A * B")
    operands = [o.owner for o in add.operands]
    loads = [o for o in operands if isinstance(o, memref.LoadOp)]
    muls = [o for o in operands if isinstance(o, arith.MulfOp)]
    if (
        len(loads) != 1
        or len(muls) != 1
        or loads[0].memref is not store.memref
        or list(loads[0].indices) != list(store.indices)
    ):
        raise TensorizeMismatchError(
            f"the nest at loop {what} does not accumulate into the element it stores"
        )
    if not all(isinstance(o.owner, memref.LoadOp) for o in muls[0].operands):
        raise TensorizeMismatchError(f"the product in the nest at loop {what} is not of two loads")
    ivs = [lp.induction_var for lp in loops]
    in_c = [any(depends_on(i, iv) for i in store.indices) for iv in ivs]
    if in_c.count(False) != 1:
        raise TensorizeMismatchError(
            f"exactly one loop of the nest at loop {what} must be a reduction over C's index"
        )
    k = loops[in_c.index(False)]
    last = store.indices[-1]
    js = [lp for lp in loops if lp is not k and depends_on(last, lp.induction_var)]
    if len(js) != 1:
        raise TensorizeMismatchError(
            f"the innermost dim of C must be indexed by one loop of the nest at loop {what}"
        )
    j = js[0]
    i = next(lp for lp in loops if lp is not k and lp is not j)
    return k, i, j, store.memref


def _nest3(root, kernel: str, loop: str, intrinsic: str) -> list[ForOp]:
    top = get_loop(root, kernel, loop)
    loops = [top]
    while len(loops) < 4 and (nxt := child_loop(loops[-1])) is not None:
        loops.append(nxt)
    if len(loops) != 3 or any(isinstance(op, ForOp) for op in loops[-1].block.ops):
        raise TensorizeShapeError(
            f"loop {kernel}/{loop} must head a perfect nest of exactly three loops for '{intrinsic}'"
        )
    return loops


def tensorize(root, kernel: str, loop: str, intrinsic: str) -> ForOp:
    if intrinsic == "dot":
        return tensorize_dot(root, kernel, loop)
    if intrinsic == "gemm_pipe":
        return tensorize_gemm_pipe(root, kernel, loop)
    if intrinsic == "slide":  # a sliding-window row, marked for loop-slide-rows (slide.py)
        from dlpc.passes.schedule.slide import mark

        return mark(root, kernel, loop)
    tiles = re.fullmatch(r"gemm([1-9]\d*)(?:x([1-9]\d*))?", intrinsic)
    if tiles and tiles.group(2):
        return tensorize_gemm_tiles(root, kernel, loop, int(tiles.group(1)), int(tiles.group(2)))
    if tiles:
        return tensorize_gemm_rows(root, kernel, loop, int(tiles.group(1)))
    if intrinsic != "gemm":
        raise TensorizeUnknownIntrinsicError(
            f"unknown intrinsic '{intrinsic}' for loop {kernel}/{loop} "
            "(known: gemm, gemmN, gemmNxM, gemm_pipe, dot, slide)"
        )
    what = f"{kernel}/{loop}"
    loops = _nest3(root, kernel, loop, "gemm")
    k, i, j, c_buf = _match_gemm(loops, what)
    mr, nr = i.trip_count, j.trip_count
    if mr > MAX_MR or nr > MAX_NR or mr * nr > MAX_TILE:
        raise TensorizeExtentError(
            f"gemm tile {mr}x{nr} at loop {what} exceeds the register file "
            f"(mr <= {MAX_MR}, nr <= {MAX_NR}, mr * nr <= {MAX_TILE})"
        )
    names = [loop_name(k), loop_name(i), loop_name(j)]
    new = reorder(root, kernel, names)  # k, i, j over the three positions
    k_loop, i_loop, j_loop = new
    label = f"{c_buf.name_hint}_acc" if c_buf.name_hint else "acc"
    stage(
        root,
        kernel,
        loop_name(k_loop),
        str(c_buf.name_hint or _index_of(c_buf, k_loop)),
        label,
        write=True,
        around=True,
    )
    i_loop.annotate("unroll", mr)
    i_loop.annotate("vectorize", False)
    # j is the SIMD dimension: `omp simd` on it makes GCC keep the mr x nr tile in
    # vector registers with one FMA per vector; fully unrolling j instead made GCC
    # vectorise across i with shuffles and no FMA (shared/perf-findings.md, cause 1)
    j_loop.annotate("unroll", False)
    j_loop.annotate("vectorize")
    return k_loop


def _rename_tail(top: ForOp, kern, suffix: str = "tail") -> None:
    for lp in [top, *(op for op in top.walk() if isinstance(op, ForOp) and op is not top)]:
        assert isinstance(lp, ForOp)
        lp.annotate("name", kern.fresh_loop_name(f"{loop_name(lp)}_{suffix}"))


# Up to this many rows a tile's B row is carried in registers (`gemm_pipe`, used by the
# gemm template): GCC folds a B vector that feeds 4 or fewer FMAs into each FMA as a
# memory operand, so such a tile runs at the load ports' pace instead of the FMA peak
# (docs/design/schedules.md#gemm-pipe)
PIPE_ROWS = 4


def tensorize_gemm_pipe(root, kernel: str, loop: str) -> ForOp:
    """The `gemm_pipe` intrinsic: `gemm`, with B's row of the tile (the `nr` values
    `B[k, j..]` every row multiplies) loaded one k ahead into a local row that the next
    iteration reads, so the compiler keeps it in vector registers across the loop (a
    value set in one iteration and used in the next has no memory home to fold loads
    from) instead of loading it once per row:

        acc[mr][nr] = C tile;  row[nr] = B[k0, j..]               (k0: the first k)
        for k in k0..kl {reduction}:                               (kl: the last k)
          for i < mr - 1 {unroll}: for j {vectorize}: acc[i][j] += A[i, k] * row[j]
          for j {vectorize}: acc[mr-1][j] += A[mr-1, k] * row[j];  row[j] = B[k + 1, j]
        for i < mr {unroll}: for j {vectorize}: acc[i][j] += A[i, kl] * row[j]
        C tile = acc

    The last row's loop loads the next k's row as it uses the current one (a separate
    copy loop became a `memcpy` call, which kept the row and the tile in memory).
    Requires what `gemm` does, and: the reduction loop has 2 or more iterations, the
    rows and columns loops step by 1, and the factor read along the columns (B) has
    affine indices and does not depend on the rows (pack B before: `cache_read .. pack`
    needs one access pattern). Numerics unchanged: each element sums its k terms in
    increasing order, as `gemm` does."""
    what = f"{kernel}/{loop}"
    loops = _nest3(root, kernel, loop, "gemm_pipe")
    k, i, j, _ = _match_gemm(loops, what)
    if k.trip_count < 2:
        raise TensorizeExtentError(
            f"gemm_pipe at loop {what} needs a reduction of at least 2 iterations"
        )
    if i.stride != 1 or j.stride != 1:
        raise TensorizeShapeError(
            f"the rows and columns loops of the gemm_pipe at loop {what} must step by 1"
        )
    store = next(op for op in loops[-1].walk() if isinstance(op, memref.StoreOp))
    b = _row_operand(store, i, j)
    if b is None or any(affine(x) is None for x in b.indices):
        raise TensorizeMismatchError(
            f"the factor read along the columns of the gemm_pipe at loop {what} must not "
            "depend on its rows and must have affine indices"
        )
    k_loop = tensorize(root, kernel, loop, "gemm")
    _carry_row(k_loop)
    return k_loop


def _row_operand(store: memref.StoreOp, i: ForOp, j: ForOp) -> memref.LoadOp | None:
    """The factor of the stored multiply-add that varies with the columns j and not with
    the rows i (B), or None."""
    add = store.value.owner
    assert isinstance(add, arith.AddfOp)
    mul = next(o.owner for o in add.operands if isinstance(o.owner, arith.MulfOp))
    for operand in mul.operands:
        ld = operand.owner
        assert isinstance(ld, memref.LoadOp)
        on_i = any(depends_on(x, i.induction_var) for x in ld.indices)
        on_j = any(depends_on(x, j.induction_var) for x in ld.indices)
        if on_j and not on_i:
            return ld
    return None


def _drop_unused(values: list[SSAValue]) -> None:
    """Erase the index arithmetic computing `values` that nothing uses any more."""
    todo = list(values)
    while todo:
        op = todo.pop().owner
        if (
            isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.ConstantOp)
            and not any(r.uses for r in op.results)
            and op.parent_block() is not None
        ):
            todo += list(op.operands)
            erase(op)


def _carry_row(k_loop: ForOp) -> None:
    """Rewrite the (k, i, j) nest `gemm` made as `tensorize_gemm_pipe` shows."""
    kern = k_loop.kernel()
    i_loop = child_loop(k_loop)
    j_loop = child_loop(i_loop) if i_loop is not None else None
    assert i_loop is not None and j_loop is not None and list(k_loop.block.ops) == [i_loop]
    store = next(op for op in j_loop.walk() if isinstance(op, memref.StoreOp))
    b_load = _row_operand(store, i_loop, j_loop)
    assert b_load is not None
    forms = [affine(x) for x in b_load.indices]
    b_buf, kv, jv = b_load.memref, k_loop.induction_var, j_loop.induction_var
    step, first_k = k_loop.stride, k_loop.lower
    last_k = first_k + (k_loop.trip_count - 1) * step
    last_row = i_loop.lower + i_loop.trip_count - 1
    label = f"{b_buf.name_hint}_row" if b_buf.name_hint else "row"
    row = memref.AllocaOp.get(memref_type(b_buf).get_element_type(), shape=[j_loop.trip_count])
    row.memref.name_hint = label

    def slot(block: Block, column: SSAValue, before: Operation | None = None) -> SSAValue:
        """The row's index of column `column` (`j - j0`), emitted in `block`."""
        return emit_affine(Affine(-j_loop.lower, {column: 1}), block, before)

    def store_next(block: Block, at_k: Affine, column: SSAValue) -> None:
        """`row[column] = B[.. at k = at_k, j = column ..]` at the end of `block`."""
        index = []
        for f in forms:
            assert f is not None
            # (whole coefficients: these forms are not delinearized)
            c_k, c_j = int(f.terms.get(kv, 0)), int(f.terms.get(jv, 0))
            rest = Affine(f.const, {v: c for v, c in f.terms.items() if v not in (kv, jv)})
            index.append(emit_affine(rest.add(at_k, c_k).add(Affine(0, {column: 1}), c_j), block))
        value = memref.LoadOp.get(b_buf, index)
        block.add_ops([value, memref.StoreOp.get(value.res, row.memref, [slot(block, column)])])

    # the loop reads the row instead of B
    new = memref.LoadOp.get(row.memref, [slot(block_of(b_load), jv, b_load)])
    block_of(b_load).insert_op_before(new, b_load)
    b_load.res.replace_all_uses_with(new.res)
    index = list(b_load.indices)
    erase(b_load)
    _drop_unused(index)
    # the last k: a copy of the rows loop after the loop, at k = last_k
    parent = block_of(k_loop)
    at_last = const(last_k)
    tail = i_loop.clone(value_mapper={kv: at_last.result})
    _rename_tail(tail, kern, "klast")
    parent.insert_op_after(at_last, k_loop)
    parent.insert_op_after(tail, at_last)
    # the last row: its own columns loop after the rows loop, loading the next k's row
    at_row = const(last_row)
    next_row = j_loop.clone(value_mapper={i_loop.induction_var: at_row.result})
    _rename_tail(next_row, kern, "rlast")
    k_loop.block.add_ops([at_row, next_row])
    store_next(next_row.block, Affine(step, {kv: 1}), next_row.induction_var)
    k_loop.properties["ub"] = IntegerAttr(last_k, i64)
    if i_loop.trip_count > 1:
        i_loop.properties["ub"] = IntegerAttr(last_row, i64)
        i_loop.annotate("unroll", i_loop.trip_count)
    else:
        erase(i_loop)
    # the first k's row, before the loop
    fill = ForOp(j_loop.lower, j_loop.upper, 1, name=kern.fresh_loop_name(f"{label}_in"))
    name_iv(fill)
    fill.annotate("vectorize")
    parent.insert_op_before(row, k_loop)
    parent.insert_op_before(fill, k_loop)
    store_next(fill.block, Affine(first_k, {}), fill.induction_var)


def tensorize_gemm_rows(root, kernel: str, loop: str, mr: int) -> ForOp:
    """The `gemmN` intrinsic: `gemm` over any number of rows T, in tiles of N rows and
    one remainder tile of T mod N rows (GotoBLAS's edge kernel), so a prime M still
    runs full-width register tiles. The loop heads the nest (i, k, j) or any order of
    it; the rows loop is split by N (the part that N divides), the rest is a copy of the
    nest over the last T mod N rows, and each part is tensorized as `gemm`:

        for ir in 0..T' step N:  gemm tile (N rows)          (T' = T rounded down to N)
        gemm tile (T - T' rows)                               (the remainder, if any)

    Requires what `gemm` does, with N and T mod N as the tile's rows; the rows loop
    counts by 1. A pack of the operands made before (`cache_read .. pack` with the
    loops already in (i, k, j) order) is read by both parts alike.
    """
    what = f"{kernel}/{loop}"
    loops = _nest3(root, kernel, loop, f"gemm{mr}")
    k, i, j, _ = _match_gemm(loops, what)
    if i.stride != 1:
        raise TensorizeShapeError(f"the rows loop of the gemm at loop {what} must step by 1")
    kern = loops[0].kernel()
    rows = i.trip_count
    if rows <= mr:
        return tensorize(root, kernel, loop, "gemm")
    i, k, j = reorder(root, kernel, [loop_name(i), loop_name(k), loop_name(j)])
    main = rows - rows % mr
    tail = None
    if main < rows:  # the remainder rows: a copy of the nest
        tail = i.clone()
        _rename_tail(tail, kern)
        tail.properties["lb"] = IntegerAttr(i.lower + main, i64)
        block_of(i).insert_op_after(tail, i)
        i.properties["ub"] = IntegerAttr(i.lower + main, i64)
    name = loop_name(i)
    outer, inner = split(
        root, kernel, name, mr, kern.fresh_loop_name(f"{name}r"), kern.fresh_loop_name(f"{name}i")
    )
    tensorize(root, kernel, loop_name(inner), "gemm")
    if tail is not None:
        tensorize(root, kernel, loop_name(tail), "gemm")
    return outer


def tensorize_gemm_tiles(root, kernel: str, loop: str, mr: int, nr: int) -> ForOp:
    """The `gemmNxM` intrinsic: `gemmN` over the columns too: the columns loop in tiles
    of M columns (a loop around the rows) and one remainder tile of U mod M columns (a
    copy of the nest), each run as `gemmN` over the rows; so an N without a useful
    divisor (a prime above 128) still gets full-width vectors.

        for jr in 0..U' step M:  gemmN over the rows, M columns      (U' = U rounded down)
        gemmN over the rows, U - U' columns                           (the remainder)

    Requires what `gemmN` does, and a columns loop stepping by 1."""
    what = f"{kernel}/{loop}"
    loops = _nest3(root, kernel, loop, f"gemm{mr}x{nr}")
    k, i, j, _ = _match_gemm(loops, what)
    if j.stride != 1:
        raise TensorizeShapeError(f"the columns loop of the gemm at loop {what} must step by 1")
    kern = loops[0].kernel()
    cols = j.trip_count
    if cols <= nr:
        return tensorize_gemm_rows(root, kernel, loop, mr)
    i, k, j = reorder(root, kernel, [loop_name(i), loop_name(k), loop_name(j)])
    main = cols - cols % nr
    tail = None
    if main < cols:  # the remainder columns: a copy of the nest
        tail = i.clone()
        _rename_tail(tail, kern)
        tail_j = [op for op in tail.walk() if isinstance(op, ForOp)][-1]
        tail_j.properties["lb"] = IntegerAttr(j.lower + main, i64)
        block_of(i).insert_op_after(tail, i)
        j.properties["ub"] = IntegerAttr(j.lower + main, i64)
    name = loop_name(j)
    outer, inner = split(
        root, kernel, name, nr, kern.fresh_loop_name(f"{name}r"), kern.fresh_loop_name(f"{name}j")
    )
    order = [loop_name(outer), loop_name(i), loop_name(k), loop_name(inner)]
    outer, rows, _, _ = reorder(root, kernel, order)  # (jr, i, k, jj)
    tensorize_gemm_rows(root, kernel, loop_name(rows), mr)
    if tail is not None:
        tensorize_gemm_rows(root, kernel, loop_name(tail), mr)
    return outer


def _reads_along(store: memref.StoreOp, k: ForOp) -> bool:
    """Do both factors of the product read along their innermost dimension with k?"""
    add = store.value.owner
    assert isinstance(add, arith.AddfOp)
    mul = next(o.owner for o in add.operands if isinstance(o.owner, arith.MulfOp))
    loads = [o.owner for o in mul.operands]
    return all(
        isinstance(ld, memref.LoadOp) and depends_on(ld.indices[-1], k.induction_var)
        for ld in loads
    )


def _zero_nest(shape: list[int], buf, kernel, label: str, value) -> ForOp:
    """`for a, b, .. : buf[a, b, ..] = value` (the last loop vectorized)."""
    loops = [
        ForOp(0, n, 1, name=kernel.fresh_loop_name(f"{label}_z{d}")) for d, n in enumerate(shape)
    ]
    for outer, inner in zip(loops, loops[1:]):
        outer.block.add_op(inner)
    for lp in loops:
        name_iv(lp)
    loops[-1].annotate("vectorize")
    loops[-1].block.add_op(memref.StoreOp.get(value, buf, [lp.induction_var for lp in loops]))
    return loops[0]


def tensorize_dot(root, kernel: str, loop: str) -> ForOp:
    """The `dot` intrinsic: an `mr x nr` block of dot products along k, for a product
    whose two factors are both read along k (a linear layer's `x[i, k] * W[j, k]` with
    few rows i): every (i, j) of the tile accumulates a vector of LANES partial sums,
    the partials stay in `mr * nr` vector registers for the whole reduction and are
    summed once at the end (no packing: both operands are already contiguous along k).

        acc[mr][nr] = C tile                           (staged around the nest)
        part[mr][nr][LANES] = 0
        for ko in 0..K' step LANES:                    (K' = K rounded down to LANES)
          for i < mr {unroll}: for j < nr {unroll}:
            for kv < LANES {vectorize}:
              part[i][j][kv] += A[i, ko + kv] * B[j, ko + kv]
        acc[i][j] += sum_kv part[i][j][kv]
        C tile = acc
        for k in K'..K: for i: for j: C[i, j] += A[i, k] * B[j, k]     (the k tail)

    Requires what `gemm` does, but `mr * nr <= MAX_DOT`, both factors read along k in
    their innermost dimension, `K >= LANES`, and the i and j loops counting from 0 by 1.
    Numerics: the k terms are reassociated into LANES interleaved partial sums (as
    `rfactor` does); each result agrees with the sequential order to rounding.
    """
    what = f"{kernel}/{loop}"
    loops = _nest3(root, kernel, loop, "dot")
    k, i, j, c_buf = _match_gemm(loops, what)
    mr, nr, kk = i.trip_count, j.trip_count, k.trip_count
    if mr * nr > MAX_DOT:
        raise TensorizeExtentError(
            f"dot tile {mr}x{nr} at loop {what} exceeds the register file (mr * nr <= {MAX_DOT})"
        )
    if kk < LANES or k.stride != 1:
        raise TensorizeExtentError(
            f"dot at loop {what} needs a unit-step reduction of at least {LANES} iterations"
        )
    if any(lp.lower != 0 or lp.stride != 1 for lp in (i, j)):
        raise TensorizeShapeError(
            f"the tile loops of the dot at loop {what} must count from 0 by 1"
        )
    store = next(op for op in loops[-1].walk() if isinstance(op, memref.StoreOp))
    if not _reads_along(store, k):
        raise TensorizeMismatchError(
            f"the factors in the nest at loop {what} are not both read along the reduction"
        )
    kern = loops[0].kernel()
    names = [loop_name(i), loop_name(j), loop_name(k)]
    i, j, k = reorder(root, kernel, names)  # k innermost
    main = kk - kk % LANES
    if main < kk:  # the k tail: a copy of the nest over the last kk % LANES iterations
        tail = i.clone()
        _rename_tail(tail, kern)
        tail_k = [op for op in tail.walk() if isinstance(op, ForOp)][-1]
        tail_k.properties["lb"] = IntegerAttr(k.lower + main, i64)
        block_of(i).insert_op_after(tail, i)
        k.properties["ub"] = IntegerAttr(k.lower + main, i64)
    ko, kv = split(
        root, kernel, loop_name(k), LANES, None, kern.fresh_loop_name(f"{loop_name(k)}_v")
    )
    ko.annotate("name", names[2])
    kv.annotate("reduction", False)
    kv.annotate("vectorize")
    ko, i, j, kv = reorder(root, kernel, [names[2], names[0], names[1], loop_name(kv)])
    label = f"{c_buf.name_hint}_acc" if c_buf.name_hint else "acc"
    marks: list[ForOp | None] = []  # (symbolic dims: the tile's loop per dim of acc)
    acc = stage(
        root,
        kernel,
        names[2],
        str(c_buf.name_hint or _index_of(c_buf, ko)),
        label,
        write=True,
        around=True,
        marks_out=marks,
    )
    # the staged tile's element accumulates LANES partials instead
    shape = [*memref_type(acc).get_shape(), LANES]
    ty = float_type(memref_type(acc).get_element_type())
    part = memref.AllocaOp.get(ty, shape=shape)
    part.memref.name_hint = f"{label}_part"
    ld = next(op for op in kv.walk() if isinstance(op, memref.LoadOp) and op.memref is acc)
    st = next(op for op in kv.walk() if isinstance(op, memref.StoreOp) and op.memref is acc)
    new_ld = memref.LoadOp.get(part.memref, [*ld.indices, kv.induction_var])
    block_of(ld).insert_op_before(new_ld, ld)
    ld.res.replace_all_uses_with(new_ld.res)
    erase(ld)
    new_st = memref.StoreOp.get(st.value, part.memref, [*st.indices, kv.induction_var])
    block_of(st).insert_op_before(new_st, st)
    erase(st)
    zero = arith.ConstantOp(FloatAttr(0.0, ty))
    parent = block_of(ko)
    parent.insert_op_before(part, ko)
    parent.insert_op_before(zero, ko)
    parent.insert_op_before(_zero_nest(shape, part.memref, kern, label, zero.result), ko)
    # acc[a, b] += part[a, b, v], v in order
    fold = [ForOp(0, n, 1, name=kern.fresh_loop_name(f"{label}_f{d}")) for d, n in enumerate(shape)]
    for outer, inner in zip(fold, fold[1:]):
        outer.block.add_op(inner)
    for lp in fold:
        name_iv(lp)
    fold[-1].annotate("reduction")
    ivs = [lp.induction_var for lp in fold]
    v = memref.LoadOp.get(part.memref, ivs)
    c = memref.LoadOp.get(acc, ivs[:-1])
    s = arith.AddfOp(c.res, v.res)
    fold[-1].block.add_ops([v, c, s, memref.StoreOp.get(s.result, acc, ivs[:-1])])
    parent.insert_op_after(fold[0], ko)
    # the partials' zeroing and folding stop at the call's extent as the tile does
    zeros = [lp for lp in block_of(ko).ops if isinstance(lp, ForOp) and lp.next_op is ko]
    nests = [[o for o in zeros[0].walk() if isinstance(o, ForOp)], fold] if zeros else [fold]
    for nest in nests:
        for lp, mark in zip(nest, marks):
            if mark is not None:
                copy_annotations(mark, lp, ("dlpc.extent", "dlpc.extent_base"))
    i.annotate("unroll", mr)
    i.annotate("vectorize", False)
    j.annotate("unroll", nr)
    j.annotate("vectorize", False)
    return ko


def _index_of(buf, loop: ForOp) -> int:
    from dlpc.passes.schedule._common import buffers_accessed

    return buffers_accessed(loop.kernel()).index(buf)


@dataclass(frozen=True)
class LoopTensorize(ModulePass):
    """`loop-tensorize{kernel=matmul_0 loop=ii intrinsic=gemm}`"""

    name = "loop-tensorize"
    kernel: str
    loop: str
    intrinsic: str = "gemm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tensorize(op, self.kernel, self.loop, self.intrinsic)
