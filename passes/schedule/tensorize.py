"""Schedule primitive `tensorize`: replace an inner loop nest by a micro-kernel.

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
another loop (j) 4) `mr = trips(i) <= 16`, `nr = trips(j) <= 64`, `mr * nr <= 512`
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

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp
from dlpc.passes.schedule._common import (
    ScheduleError,
    child_loop,
    depends_on,
    get_loop,
    loop_name,
)
from dlpc.passes.schedule.cache import _stage
from dlpc.passes.schedule.reorder import reorder

MAX_MR, MAX_NR, MAX_TILE = 16, 64, 512


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


def tensorize(root, kernel: str, loop: str, intrinsic: str) -> ForOp:
    if intrinsic != "gemm":
        raise TensorizeUnknownIntrinsicError(
            f"unknown intrinsic '{intrinsic}' for loop {kernel}/{loop} (known: gemm)"
        )
    what = f"{kernel}/{loop}"
    top = get_loop(root, kernel, loop)
    loops = [top]
    while len(loops) < 4 and (nxt := child_loop(loops[-1])) is not None:
        loops.append(nxt)
    if len(loops) != 3 or any(isinstance(op, ForOp) for op in loops[-1].block.ops):
        raise TensorizeShapeError(
            f"loop {what} must head a perfect nest of exactly three loops for 'gemm'"
        )
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
    _stage(
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
