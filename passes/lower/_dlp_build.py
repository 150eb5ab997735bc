"""Building dlp kernels, shared by `loop_to_dlp` (the plan and the kernel skeleton) and
`dlp_select/` (intrinsic bodies): the plan of a kernel (`KernelPlan`, a `BufferPlan` per
GDRAM buffer, the `Selection` interface of intrinsic patterns), an index-folding op
`Builder`, the `Cloner` that copies loop-level ops into a kernel, and small helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import dlp
from dlpc.dialects.dlp import constant_index as _const
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.dialects.typed import memref_type
from dlpc.targets.dlp import DlpTarget


def round_up(x: int, a: int) -> int:
    return -(-x // a) * a


def latencies(desc: DlpTarget, groups: list[int]) -> float:
    """Cycles of DMA latency for copies issued in `groups` (each back to back, then one
    wait): a group of n takes ceil(n / dma_queue_depth) latencies (the simulator's rule)."""
    depth = desc.dma_queue_depth
    return sum(-(-n // depth) for n in groups) * desc.dma_latency_cycles


@dataclass(frozen=True)
class Work:
    """A kernel's floating-point operations for the time estimates: `mac` inside reduction
    loops (on the matrix unit where the kernel runs there), `other` the rest (vector ops)."""

    mac: float
    other: float

    def per(self, k: int) -> Work:
        return Work(self.mac / k, self.other / k)


def compute_cycles(plan: KernelPlan, work: Work) -> float:
    """Cycles of `work` on one core: a matrix-unit kernel's MACs at its rate, everything
    else at the vector width (the simulator charges each intrinsic its work / throughput)."""
    d = plan.desc
    if getattr(plan.selection, "matrix_unit", False):
        return work.mac / (2 * d.throughput("matmul")) + work.other / d.vector_width
    return (work.mac + work.other) / d.vector_width


def early_loads(
    desc: DlpTarget, staged: list[BufferPlan], reads: list[BufferPlan]
) -> list[BufferPlan]:
    """The whole buffers a task copies from GDRAM itself (`reads` not `staged`) that are
    issued with its SRAM staging copies, before their wait and the cluster barrier: as
    many as the queue holds beside the staging copies, so they add no latency there and
    that many fewer share the wait after the barrier. None where nothing is staged."""
    if not staged:
        return []
    own = [p for p in reads if p not in staged]
    return own[: max(0, desc.dma_queue_depth - len(staged))]


# -------------------------------------------------------------------------- plan


@dataclass(eq=False)
class BufferPlan:
    """How one GDRAM memref is staged on chip for a kernel."""

    value: SSAValue
    shape: tuple[int, ...]
    read: bool = False
    written: bool = False
    full_write: bool = True  # every element of a tile's box is stored by the tile
    kind: str = "whole"  # "whole" | "tiled"
    space: str = "nram"  # "nram" or "wram" (matmul weights)
    dim: int = 0  # tiled: the dimension indexed by the work loop
    a: int = 0  # tiled: index = a * j + r, j the work loop's iteration number
    rlo: int = 0
    rhi: int = 0
    prefix: tuple[int, ...] = ()  # constant indices of the dims before `dim`
    direct: bool = False  # moved by the intrinsic selection itself (no generic DMA)
    outer: bool = False  # indexed by the plan's outer (batch) loop in dim 0: one image a pass
    # tiled and read-only, the task's whole share loaded once before its tiles (a layer's
    # weights and bias rows: one DMA a task instead of one a tile); `slot` is then the
    # tile's offset in that share
    resident: bool = False
    # set by the kernel builder (KernelBuilder.build and its tile loops) before any use;
    # read through the properties below, which say so if one is read too early
    _local: SSAValue | None = None  # the NRAM/WRAM copy
    _base: SSAValue | None = None  # flat GDRAM offset of the current tile
    _slot: SSAValue | None = None  # element offset of the current ping-pong slot
    _staged: SSAValue | None = None  # the SRAM copy of a whole buffer
    _count: SSAValue | None = None  # elements in the current tile's box

    def _built(self, value: SSAValue | None, what: str) -> SSAValue:
        assert value is not None, f"buffer {self.name}: {what} read before the builder set it"
        return value

    @property
    def local(self) -> SSAValue:
        return self._built(self._local, "local")

    @local.setter
    def local(self, value: SSAValue) -> None:
        self._local = value

    @property
    def base(self) -> SSAValue:
        return self._built(self._base, "base")

    @base.setter
    def base(self, value: SSAValue) -> None:
        self._base = value

    @property
    def slot(self) -> SSAValue:
        return self._built(self._slot, "slot")

    @slot.setter
    def slot(self, value: SSAValue) -> None:
        self._slot = value

    @property
    def staged(self) -> SSAValue:
        return self._built(self._staged, "staged")

    @staged.setter
    def staged(self, value: SSAValue) -> None:
        self._staged = value

    @property
    def count(self) -> SSAValue:
        return self._built(self._count, "count")

    @count.setter
    def count(self, value: SSAValue) -> None:
        self._count = value

    @property
    def name(self) -> str:
        return self.value.name_hint or "buf"

    @property
    def elt_bytes(self) -> int:
        return dlp.element_bytes(memref_type(self.value))

    @property
    def inner(self) -> int:
        return math.prod(self.shape[self.dim + 1 :])

    @property
    def prefix_offset(self) -> int:
        strides = [math.prod(self.shape[k + 1 :]) for k in range(len(self.shape))]
        return sum(c * s for c, s in zip(self.prefix, strides))

    def rows(self, tile: int) -> int:
        """Rows of `dim` a tile of `tile` work iterations touches (at most)."""
        return min(self.shape[self.dim], self.a * (tile - 1) + self.rhi - self.rlo + 1)

    @property
    def image(self) -> int:
        """Elements of one index of dim 0 (an image of an `outer` buffer)."""
        return math.prod(self.shape[1:])

    def elements(self, tile: int) -> int:
        if self.kind == "whole":
            return self.image if self.outer else math.prod(self.shape)
        return self.rows(tile) * self.inner


@dataclass
class KernelPlan:
    kernel: KernelOp
    desc: DlpTarget
    work: ForOp | None  # None: the whole kernel runs as one tile on task 0
    fixed: dict[SSAValue, int]  # induction variables of the extent-1 loops outside `work`
    buffers: dict[SSAValue, BufferPlan]
    tasks: int = 1
    tile: int = 1
    double: bool = False
    sram: bool = False
    selection: Selection | None = None  # an intrinsic pattern (dlp_select/) or None
    # a batch loop around the work loop, run by every task in turn (its variable fixed at
    # 0 for the analysis; `outer` buffers are offset by one image per iteration)
    outer: ForOp | None = None
    # with `outer`: the tasks form `groups` groups, each running its own share of the
    # images (so an image is read by one group's tasks, not by every task), and the tasks
    # of a group split the work loop
    groups: int = 1
    scalar: str | None = None  # why the tile's compute (or its epilogue) is scalar loops
    local_bytes: int = 0  # allocations inside the kernel (accumulators, caches)

    @property
    def trip(self) -> int:
        return self.work.trip_count if self.work is not None else 1

    @property
    def chunk(self) -> int:
        return -(-self.trip // (self.tasks // self.groups))

    def space_bytes(self, tile: int, double: bool, sram: bool) -> dict[str, int]:
        align = self.desc.dma_align
        use = {"nram": self.local_bytes, "wram": 0, "sram": 0}
        for b in self.buffers.values():
            if b.direct:
                continue
            rows = self.chunk if b.resident else tile
            nbytes = round_up(b.elements(rows) * b.elt_bytes, align)
            copies = 2 if double and b.kind == "tiled" and not b.resident else 1
            use[b.space] += nbytes * copies
            if b.kind == "whole" and sram:
                use["sram"] += nbytes
        if self.selection is not None:
            use["nram"] += self.selection.scratch_bytes(self, tile)
            use["wram"] += self.selection.wram_bytes(self, tile)
        return use

    def fits(self, tile: int, double: bool, sram: bool) -> bool:
        use = self.space_bytes(tile, double, sram)
        return all(use[s] <= self.desc.capacity(s) for s in use)

    def stages(self, p: BufferPlan) -> bool:
        """With `sram`, is whole buffer `p` staged in SRAM (else each task copies it from
        GDRAM)? Where every task's own copy would cost the GDRAM port more than a DMA's
        share of a latency: staging costs a task two DMAs (into SRAM, out of it), a small
        bias or scale is one more copy in the task's load group."""
        d = self.desc
        clusters = -(-self.tasks // d.cores_per_cluster)
        extra = (self.tasks - clusters) * p.elements(1) * p.elt_bytes
        return extra / (d.gdram_bandwidth_gbs / d.clock_ghz) > d.dma_latency_cycles / (
            d.dma_queue_depth
        )


class Selection:
    """An intrinsic pattern `dlp_select` matched for a kernel: what it needs on chip
    besides the plan's buffers, and the code of one tile."""

    matrix_unit = False  # its work runs on the matrix unit (matmul, conv), else vectors

    def scratch_bytes(self, plan: KernelPlan, tile: int) -> int:
        """NRAM for temporaries at this tile size."""
        raise NotImplementedError

    def wram_bytes(self, plan: KernelPlan, tile: int) -> int:
        """WRAM the pattern stages itself (weights it moves directly)."""
        return 0

    def max_tile(self, plan: KernelPlan) -> int | None:
        """The most work iterations one tile may hold (None: as many as fit)."""
        return None

    def emit(self, lowering: Lowering, b: Builder, t0: SSAValue, n: SSAValue) -> None:
        """The body of the tile of `n` work iterations from `t0`."""
        raise NotImplementedError


class Lowering(Protocol):
    """What a selection reads of the kernel builder (`loop_to_dlp.KernelBuilder`)."""

    @property
    def plan(self) -> KernelPlan: ...


class Builder:
    """Appends ops to a block, folding index arithmetic on constants:
    `b.c(4)` is a (cached) index constant, `b.add(x, y)`, `b.mul`, `b.min`, ..."""

    def __init__(self, block: Block, parent: Builder | None = None):
        self.block = block
        self.parent = parent
        self.consts: dict[int, SSAValue] = {}

    def op(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def v(self, op: Operation) -> SSAValue:
        return self.op(op).results[0]

    def c(self, value: int) -> SSAValue:
        b: Builder | None = self
        while b is not None:
            if value in b.consts:
                return b.consts[value]
            b = b.parent
        const = self.v(arith.ConstantOp.from_int_and_width(int(value), IndexType()))
        self.consts[value] = const
        return const

    def _fold(self, x, y, fn, cls):
        cx, cy = _const(x), _const(y)
        if cx is not None and cy is not None:
            return self.c(fn(cx, cy))
        return self.v(cls(x, y))

    def add(self, x, y):
        if _const(y) == 0:
            return x
        if _const(x) == 0:
            return y
        return self._fold(x, y, lambda p, q: p + q, arith.AddiOp)

    def sub(self, x, y):
        if _const(y) == 0:
            return x
        return self._fold(x, y, lambda p, q: p - q, arith.SubiOp)

    def mul(self, x, y):
        if _const(y) == 1:
            return x
        if _const(x) == 1:
            return y
        if _const(x) == 0 or _const(y) == 0:
            return self.c(0)
        return self._fold(x, y, lambda p, q: p * q, arith.MuliOp)

    def min(self, x, y):
        return self._fold(x, y, min, arith.MinSIOp)

    def max(self, x, y):
        return self._fold(x, y, max, arith.MaxSIOp)

    def nested(self, block: Block) -> Builder:
        return Builder(block, self)

    def for_(self, lb, ub, step) -> tuple[scf.ForOp, Builder, SSAValue]:
        body = Block(arg_types=[IndexType()])
        loop = scf.ForOp(lb, ub, step, [], body)
        self.op(loop)
        return loop, self.nested(body), body.args[0]

    def alloc(self, space: str, elements: int, element_type, hint: str) -> SSAValue:
        ty = dlp.memref_in(space, [elements], element_type)
        value = self.v(memref.AllocOp([], [], ty))
        value.name_hint = hint
        return value


def finish_for(builder: Builder) -> None:
    builder.op(scf.YieldOp())


class Cloner:
    """Clones loop-level ops into a dlp kernel: `loop.for` -> `scf.for`, GDRAM accesses
    -> accesses of the on-chip copies at `flat index - tile base + slot`."""

    def __init__(self, plan: KernelPlan, vmap: dict[SSAValue, SSAValue]):
        self.plan = plan
        self.vmap = vmap

    def value(self, v: SSAValue, b: Builder) -> SSAValue:
        if v in self.plan.fixed:
            return b.c(self.plan.fixed[v])
        return self.vmap.get(v, v)

    def block(self, src: Block, b: Builder) -> None:
        for op in src.ops:
            self.op(op, b)

    def op(self, op: Operation, b: Builder) -> None:
        if isinstance(op, ForOp):
            loop, inner, iv = b.for_(b.c(op.lower), b.c(op.upper), b.c(op.stride))
            iv.name_hint = op.loop_name or op.induction_var.name_hint
            self.vmap[op.induction_var] = iv
            self.block(op.block, inner)
            finish_for(inner)
            return
        if isinstance(op, memref.LoadOp | memref.StoreOp) and op.memref in self.plan.buffers:
            p = self.plan.buffers[op.memref]
            idx = self.local_index(p, [self.value(i, b) for i in op.indices], b)
            if isinstance(op, memref.LoadOp):
                new = b.op(memref.LoadOp.get(p.local, [idx]))
                self.vmap[op.res] = new.results[0]
                new.results[0].name_hint = op.res.name_hint
            else:
                b.op(memref.StoreOp.get(self.value(op.value, b), p.local, [idx]))
            return
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            ty = op.memref.type
            new = b.op(
                type(op).get(
                    ty.get_element_type(), shape=ty.get_shape(), memory_space=dlp.space_attr("nram")
                )
            )
            new.results[0].name_hint = op.memref.name_hint
            self.vmap[op.memref] = new.results[0]
            return
        if isinstance(op, memref.DeallocOp):
            return
        if isinstance(op, scf.IfOp):
            then_b, else_b = Block(), Block()
            new = scf.IfOp(
                self.value(op.cond, b),
                [r.type for r in op.results],
                Region(then_b),
                Region(else_b) if op.false_region.blocks else None,
            )
            b.op(new)
            self.block(op.true_region.block, b.nested(then_b))
            if op.false_region.blocks:
                self.block(op.false_region.block, b.nested(else_b))
            for old, r in zip(op.results, new.results):
                self.vmap[old] = r
                r.name_hint = old.name_hint
            return
        if op.regions:
            raise DiagnosticException(
                f"loop-to-dlp: unsupported op '{op.name}' with regions in kernel '{self.plan.kernel.sym}'"
            )
        new = op.clone(value_mapper={x: self.value(x, b) for x in op.operands})
        b.op(new)
        for old, r in zip(op.results, new.results):
            self.vmap[old] = r
            r.name_hint = old.name_hint

    def local_index(self, p: BufferPlan, idx: list[SSAValue], b: Builder) -> SSAValue:
        flat = None
        for k, x in enumerate(idx):
            stride = math.prod(p.shape[k + 1 :])
            term = x if stride == 1 else b.mul(x, b.c(stride))
            flat = term if flat is None else b.add(flat, term)
        flat = flat if flat is not None else b.c(0)
        if p.kind == "tiled":
            flat = b.sub(flat, p.base)
        if p.slot is not None:  # (b.add folds a zero slot away)
            flat = b.add(flat, p.slot)
        return flat
