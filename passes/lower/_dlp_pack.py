"""Adjacent views of one packed param (`dlp-pack-params`) that a kernel reads whole: one
DMA for all of them (loop-to-dlp's builders call this before placing whole buffers).

Every DMA a task waits for costs a latency at batch 1 once more than `dma_queue_depth`
copies share a wait, and every staged buffer costs one copy into SRAM and one out of it:
a feed-forward chain's seven biases and norm scales were seven of each. Where two or more
whole, read-only NRAM buffers of a kernel are views of one pack lying side by side (each
at the next aligned offset after the one before), they become one `BufferPlan` of the
covering view (a `memref.reinterpret_cast` of the pack made in @main before the kernel),
loaded or staged like any whole buffer; each member's NRAM copy is a view of that one at
its offset (aligned, as an intrinsic operand must be).
"""

from __future__ import annotations

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import DictionaryAttr, MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.typed import element_type
from dlpc.passes.lower._dlp_build import BufferPlan, Builder, round_up
from dlpc.passes.lower.dlp_pack_params import PACK
from dlpc.targets.dlp import DlpTarget


def packed_view(value: SSAValue) -> tuple[BlockArgument, int] | None:
    """(the pack, element offset) where `value` is a static view of a packed param."""
    op = value.owner
    if not isinstance(op, memref.ReinterpretCastOp) or op.offsets or op.sizes or op.strides:
        return None
    src = op.source
    if not isinstance(src, BlockArgument) or not isinstance(src.owner, Block):
        return None
    fn = src.owner.parent_op()
    if not isinstance(fn, func.FuncOp) or fn.arg_attrs is None:
        return None
    attrs = fn.arg_attrs.data[src.index]
    if not isinstance(attrs, DictionaryAttr) or PACK not in attrs.data:
        return None
    offsets = list(op.static_offsets.get_values())
    return (src, int(offsets[0])) if len(offsets) == 1 else None


def _step(p: BufferPlan, desc: DlpTarget) -> int:
    """Elements of `p`'s on-chip copy (rounded to whole DMA alignments, as it is allocated)."""
    return round_up(p.elements(1) * p.elt_bytes, desc.dma_align) // p.elt_bytes


def runs(plans: list[BufferPlan], desc: DlpTarget) -> list[list[BufferPlan]]:
    """Groups of at least two of `plans` that are whole, read-only NRAM buffers, views of
    one pack lying side by side at aligned offsets, in offset order (one plan a value)."""
    align = max(desc.dma_align, desc.vector_align)
    found: dict[BlockArgument, dict[int, BufferPlan]] = {}
    for p in plans:
        if p.kind != "whole" or p.written or not p.read or p.direct or p.outer or p.space != "nram":
            continue
        got = packed_view(p.value)
        if got is None or (got[1] * p.elt_bytes) % align:
            continue
        found.setdefault(got[0], {}).setdefault(got[1], p)
    out: list[list[BufferPlan]] = []
    for views in found.values():
        run: list[BufferPlan] = []
        end = None
        for off in sorted(views):
            p = views[off]
            if run and off != end:
                out.append(run)
                run = []
            run.append(p)
            end = off + _step(p, desc)
        out.append(run)
    return [r for r in out if len(r) >= 2]


def merge(run: list[BufferPlan], before: Operation, desc: DlpTarget) -> BufferPlan:
    """The plan of the view covering `run`, made in @main right before `before`."""
    first = packed_view(run[0].value)
    assert first is not None  # (runs: every member is a view)
    pack, lo = first
    last = packed_view(run[-1].value)
    assert last is not None
    n = last[1] + _step(run[-1], desc) - lo
    elt = element_type(run[0].value)
    ty = MemRefType(elt, [n])  # (no layout: the printers read the offset from the op)
    view = memref.ReinterpretCastOp.from_dynamic(pack, [lo], [n], [1], ty)
    view.result.name_hint = "packed"
    block = before.parent_block()
    assert block is not None  # a kernel of @main
    block.insert_op_before(view, before)
    return BufferPlan(view.result, (n,), read=True)


def member_views(run: list[BufferPlan], merged: BufferPlan, b: Builder, desc: DlpTarget) -> None:
    """Each member's on-chip copy: a view of the merged copy at its offset."""
    first = packed_view(merged.value)
    assert first is not None
    for p in run:
        got = packed_view(p.value)
        assert got is not None
        off, n = got[1] - first[1], _step(p, desc)
        ty = dlp.memref_in(p.space, [n], element_type(p.value))
        view = memref.ReinterpretCastOp.from_dynamic(merged.local, [off], [n], [1], ty)
        p.local = b.v(view)
        p.local.name_hint = f"{p.name}_{p.space}"
