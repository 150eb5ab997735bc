"""Dimension permutations (a transpose kernel, attention's head split) as `dlp.transpose`.

Matches a pure copy `dst[v, i1, .., ik] = src[v, i_q1, .., i_qk]` over the work loop `v`
(whole items: both buffers tiled by `v` in their first dimension, full trailing dims)
whose permutation swaps two adjacent groups of dims and keeps the innermost ones: per
item, the source is `[A, B, C]` and the destination `[B, A, C]` (A, B, C products of
extents). With C == 1 that is one `dlp.transpose` (A rows, B cols); otherwise one
transpose of the item as A rows of B*C into a scratch `[B*C, A]`, then one per b of its
`[C, A]` block into `[A, C]`. Every operand starts vector-aligned or the pattern does
not match (the kernel keeps its scalar loops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.ir import SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import BufferPlan, Selection
from dlpc.passes.lower.dlp_select._matching import NoMatch, scratch_elems, tile_bytes, work_nest


@dataclass
class PermuteSelection(Selection):
    """Per item of the tile: src `[A, B, C]` -> dst `[B, A, C]` by transposes."""

    src: BufferPlan
    dst: BufferPlan
    a: int
    b: int
    c: int

    @property
    def item(self) -> int:
        return self.a * self.b * self.c

    def scratch_bytes(self, plan, tile: int) -> int:
        return tile_bytes(plan, self.item) if self.c > 1 else 0

    def max_tile(self, plan) -> int | None:
        # each item's slot must start aligned: a tile of one item where it does not
        return 1 if (self.item * 4) % plan.desc.vector_align else None

    def emit(self, lowering, b, t0: SSAValue, n: SSAValue) -> None:
        plan = lowering.plan
        A, B, C = self.a, self.b, self.c
        tmp = (
            b.alloc(
                "nram", scratch_elems(plan, self.item), element_type(self.src.value), "perm_nram"
            )
            if C > 1
            else None
        )
        _, body, i = b.for_(b.c(0), n, b.c(1))
        src = body.add(self.src.slot, body.mul(i, body.c(self.item)))
        dst = body.add(self.dst.slot, body.mul(i, body.c(self.item)))
        if tmp is None:
            body.op(dlp.TransposeOp(self.dst.local, dst, self.src.local, src, body.c(A), body.c(B)))
        else:
            body.op(dlp.TransposeOp(tmp, body.c(0), self.src.local, src, body.c(A), body.c(B * C)))
            _, inner, j = body.for_(body.c(0), body.c(B), body.c(1))
            block = inner.mul(j, inner.c(A * C))
            inner.op(
                dlp.TransposeOp(
                    self.dst.local, inner.add(dst, block), tmp, block, inner.c(C), inner.c(A)
                )
            )
            inner.op(scf.YieldOp())
        body.op(scf.YieldOp())


def match_permute(plan) -> PermuteSelection:
    loops = work_nest(plan.work)
    if any(lp.lower != 0 or lp.stride != 1 for lp in loops):
        raise NoMatch
    body = [op for op in loops[-1].block.ops if not isinstance(op, arith.ConstantOp)]
    if len(body) != 2:
        raise NoMatch
    load, store = body
    if not isinstance(load, memref.LoadOp) or not isinstance(store, memref.StoreOp):
        raise NoMatch
    if store.value is not load.res:
        raise NoMatch
    src, dst = plan.buffers.get(load.memref), plan.buffers.get(store.memref)
    if src is None or dst is None or src is dst:
        raise NoMatch
    ivs: list[SSAValue] = [lp.induction_var for lp in loops]
    k = len(loops) - 1
    extents = [lp.trip_count for lp in loops]
    for p in (src, dst):
        if not (p.kind == "tiled" and p.dim == 0 and p.a == 1 and p.rlo == p.rhi == 0):
            raise NoMatch
        if len(p.shape) != k + 1:
            raise NoMatch
    if list(store.indices) != ivs or tuple(dst.shape[1:]) != tuple(extents[1:]):
        raise NoMatch
    idx = list(load.indices)
    if idx[0] is not ivs[0] or sorted(map(id, idx)) != sorted(map(id, ivs)):
        raise NoMatch
    q = [ivs.index(x) for x in idx]  # source dim j is indexed by loop q[j]
    if tuple(src.shape[1:]) != tuple(extents[q[j]] for j in range(1, k + 1)):
        raise NoMatch
    m = k  # the innermost dims the permutation keeps in place: C
    while m > 0 and q[m] == m:
        m -= 1
    # source dims 1..m are loops b+1..m then 1..b: A = extents b+1..m, B = extents 1..b
    for split in range(1, m):
        if q[1 : m + 1] == [*range(split + 1, m + 1), *range(1, split + 1)]:
            break
    else:
        raise NoMatch
    a = math.prod(extents[split + 1 : m + 1])
    bb = math.prod(extents[1 : split + 1])
    c = math.prod(extents[m + 1 :])
    align = plan.desc.vector_align
    if c > 1 and bb > 1 and (a * c * 4) % align:
        raise NoMatch  # the per-b blocks would start unaligned
    return PermuteSelection(src, dst, a, bb, c)
