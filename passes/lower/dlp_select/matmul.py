"""Matrix products as one `dlp.matmul` per tile.

Matches `acc = 0; for r: acc += A[.., m, r] * B[..]; out[.., m, n] = epilogue(acc)` with
the work loop over rows m (B whole, in WRAM), over columns n of a transposed B when m is
fixed (B tiles in WRAM), or over the batch of a batched product (one `dlp.matmul` per
batch entry). The epilogue (bias, activation) is selected over the accumulator tile
(`elementwise.match_epilogue`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.ir import SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import BufferPlan, Selection
from dlpc.passes.lower.dlp_select._matching import (
    NoMatch,
    const_index,
    const_value,
    scratch_elems,
    tile_bytes,
    work_nest,
)
from dlpc.passes.lower.dlp_select.elementwise import Elementwise, ScalarEpilogue, match_epilogue


@dataclass
class MatmulSelection(Selection):
    matrix_unit = True

    ew: Elementwise | ScalarEpilogue  # the epilogue, over the output tile
    lhs: BufferPlan
    rhs: BufferPlan  # in WRAM
    acc: SSAValue  # the reduction's accumulator value `sum`
    k: int
    cols: int  # n per output row (case rows) or 1 (case columns)
    rows_tiled: bool  # True: work loop over rows m; False: over columns n
    transpose_rhs: bool
    batch: tuple[int, int] | None = None  # batched (work loop over the batch): (m, n)

    @property
    def passthrough(self) -> bool:
        """The product is the output (no bias, no activation): computed into the output
        tile itself, no accumulator and no NRAM2NRAM copy (a DMA latency)."""
        return isinstance(self.ew, Elementwise) and self.ew.passthrough(self.acc)

    def scratch_bytes(
        self, plan, tile: int
    ) -> int:  # the accumulator tile, the epilogue's temporaries
        if self.passthrough:
            return 0
        return tile_bytes(plan, tile * self.ew.inner) * (self.ew.temps() + 1)

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        count = b.mul(n, b.c(self.ew.inner))
        if self.passthrough:
            assert isinstance(self.ew, Elementwise)  # (passthrough says so)
            acc, at0 = self.ew.out.local, self.ew.out.slot
        else:
            tile_elems = scratch_elems(plan, plan.tile * self.ew.inner)
            acc = b.alloc("nram", tile_elems, element_type(self.lhs.value), "acc_nram")
            at0 = b.c(0)
        if self.batch is not None:  # one matmul per batch entry of the tile
            m, cols = self.batch
            _, body, ii = b.for_(b.c(0), n, b.c(1))
            at = lambda buf, slot, size: (buf, body.add(slot, body.mul(ii, body.c(size))))  # noqa: E731
            body.op(
                dlp.MatmulOp(
                    *at(acc, at0, m * cols),
                    *at(self.lhs.local, self.lhs.slot, m * self.k),
                    *at(self.rhs.local, self.rhs.slot, self.k * cols),
                    body.c(m),
                    body.c(self.k),
                    body.c(cols),
                    transpose_rhs=self.transpose_rhs,
                )
            )
            body.op(scf.YieldOp())
            if not self.passthrough:
                self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)
            return
        if self.rows_tiled:
            m, cols = n, b.c(self.cols)
        else:
            m, cols = b.c(1), n
        b.op(
            dlp.MatmulOp(
                acc,
                at0,
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
        if not self.passthrough:
            self.ew.emit_after(lowering, b, count, acc, t0, n, self.acc)


def match_matmul(plan) -> MatmulSelection:
    nest = work_nest(plan.work)
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
    if const_value(pre[1].value) != 0.0 or pre[1].memref is not acc_buf:
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
            ew = match_epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
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
                and all(const_index(plan, x) == 0 for x in ib[:-2])
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
                and all(const_index(plan, x) is not None for x in ia[:-1])
                and ia[-1] is r
                and rhs.kind == "tiled"
                and rhs.a == 1
                and rhs.rlo == rhs.rhi == 0
                and ib[rhs.dim :] == [v, r]
                and rhs.shape[-1] == k
            ):
                continue
            if any(const_index(plan, x) != 0 for x in ia[:-1]) or math.prod(lhs.shape) != k:
                continue
            transpose, cols = True, 1
        ew = match_epilogue(plan, spatial, list(s.block.ops), post[1:], post[0].res)
        rhs.space = "wram"
        return MatmulSelection(ew, lhs, rhs, post[0].res, k, cols, rows_tiled, transpose)
    raise NoMatch
