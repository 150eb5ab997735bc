"""Direct GDRAM2GDRAM copies for `loop-to-dlp`: pure data-movement kernels without NRAM.

A kernel whose only store writes a value loaded from another GDRAM buffer (possibly chosen
by `scf.if`, as concatenation does) moves data and computes nothing. Its index arithmetic
is evaluated at compile time over the whole (static) iteration space, with numpy, giving
for each element written its destination offset and its source (buffer, offset). Maximal
runs contiguous in both are *pieces*; a reshape is one piece, a concatenation one per
input, a slice one per kept row. When the pieces are few (at most `MAX_PIECES_PER_TASK`
per task, or `MAX_LONG_PIECES_PER_TASK` averaging `MIN_PIECE_ELEMENTS`) the kernel becomes one `dlp.memcpy GDRAM2GDRAM` per piece, the elements split
evenly over the tasks; otherwise (a transpose: pieces of one element) it returns None and
the kernel is staged through NRAM as before.

    loop.kernel "reshape_6" { loop.for %i1 = 0 to 400 { ... %9 = memref.load %x[%c0, %1, %5, %7]
                              memref.store %9, %reshape[%i0, %i1] } }

becomes (16 tasks of 25 elements each)

    dlp.kernel "reshape_6" attributes {tasks = 16 : i64, ...} {
      %task = dlp.task_id
      %0 = arith.cmpi eq, %task, %c0 : index
      scf.if %0 { dlp.memcpy GDRAM2GDRAM %reshape[%c0], %x[%c0], %c25 : ... }
      ...
    }
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlpc.dialects import dlp
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.dialects.typed import element_type, shape_of

MAX_ELEMENTS = 1 << 22  # iteration spaces evaluated at compile time
MAX_PIECES_PER_TASK = 8
# more pieces a task where they average at least this many elements (a batch of slices or
# head splits: one DMA latency per 16-element row beats staging through NRAM as scalar
# loops), up to a ceiling on the copies written out per task
MIN_PIECE_ELEMENTS = 16
MAX_LONG_PIECES_PER_TASK = 64
MIN_ELEMENTS_PER_TASK = 64  # below this a task is not worth its DMA latency


class _NoCopy(Exception):
    pass


def _strides(shape) -> list[int]:
    return [math.prod(shape[k + 1 :]) for k in range(len(shape))]


def _tdiv(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_INT = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": _tdiv,
    "arith.remsi": lambda a, b: a - b * _tdiv(a, b),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.ceildivsi": lambda a, b: -((-a) // b),
    "arith.divui": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b,
    "arith.minsi": np.minimum,
    "arith.maxsi": np.maximum,
    "arith.minui": np.minimum,
    "arith.maxui": np.maximum,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
}
_CMP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
    "ult": np.less,
    "ule": np.less_equal,
    "ugt": np.greater,
    "uge": np.greater_equal,
}


Index = np.ndarray | np.integer  # an index value at every point of the iteration space
Loaded = tuple[str, Index, Index]  # ("load", source number, flat offset in the source)


class _Eval:
    """Values over the iteration space: index arrays, or loaded elements as (buffer, offset)."""

    def __init__(self, sources: list[SSAValue]):
        self.env: dict[SSAValue, Index | Loaded] = {}
        self.sources = sources

    def index(self, v: SSAValue) -> Index:
        """`v` used as an index; a loaded value is data-dependent (a gather or scatter)."""
        x = self.env[v]
        if isinstance(x, tuple):
            raise _NoCopy
        return x

    def block(self, block: Block) -> list:
        """Evaluate `block`; return the values its terminator yields."""
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                return [self.env[v] for v in op.operands]
            if not isinstance(op, memref.StoreOp):  # the one store, read by copy_pieces
                self.op(op)
        return []

    def op(self, op: Operation) -> None:
        env = self.env
        data = op.operands[:1] if isinstance(op, scf.IfOp | arith.SelectOp) else op.operands
        if any(isinstance(env.get(v), tuple) for v in data):
            raise _NoCopy  # a loaded value used as an index (a gather): data-dependent
        if isinstance(op, arith.ConstantOp):
            if not isinstance(op.value, IntegerAttr):
                raise _NoCopy
            value = op.value.value.data
            if not -(2**63) <= value < 2**63:  # no int64 address arithmetic models it
                raise _NoCopy
            env[op.result] = np.int64(value)
        elif op.name in _INT:
            a, b = (env[v] for v in op.operands)
            env[op.results[0]] = _INT[op.name](a, b)
        elif isinstance(op, arith.CmpiOp):
            a, b = (env[v] for v in op.operands)
            env[op.result] = _CMP[arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]](a, b)
        elif op.name in ("arith.index_cast", "arith.index_castui"):
            env[op.results[0]] = env[op.operands[0]]
        elif isinstance(op, arith.SelectOp):
            c, a, b = (env[v] for v in op.operands)
            env[op.result] = self.where(c, a, b)
        elif isinstance(op, memref.LoadOp):  # (`sources`: every buffer the kernel loads)
            shape = shape_of(op.memref)
            off = sum((self.index(v) * s for v, s in zip(op.indices, _strides(shape))), np.int64(0))
            env[op.res] = ("load", np.int64(self.sources.index(op.memref)), off)
        elif isinstance(op, scf.IfOp):
            c = env[op.cond]
            yes = self.block(op.true_region.block)
            no = self.block(op.false_region.block) if op.false_region.blocks else []
            for r, a, b in zip(op.results, yes, no):
                env[r] = self.where(c, a, b)
        else:
            raise _NoCopy

    @staticmethod
    def where(c, a, b):
        if isinstance(a, tuple) != isinstance(b, tuple):
            raise _NoCopy
        if isinstance(a, tuple):
            return ("load", np.where(c, a[1], b[1]), np.where(c, a[2], b[2]))
        return np.where(c, a, b)


def _nest(kernel: KernelOp) -> tuple[list[ForOp], Block]:
    loops: list[ForOp] = []
    block = kernel.block
    while True:
        fors = [op for op in block.ops if isinstance(op, ForOp)]
        if not fors:
            return loops, block
        if len(fors) != 1 or any(not isinstance(op, ForOp | arith.ConstantOp) for op in block.ops):
            raise _NoCopy
        loops.append(fors[0])
        block = fors[0].block


def copy_pieces(kernel: KernelOp):
    """(destination, sources, pieces) with pieces [(dst offset, source index, src offset,
    count)] in destination order, or None when the kernel is not a pure copy."""
    try:
        loops, body = _nest(kernel)
        stores = [op for op in kernel.walk() if isinstance(op, memref.StoreOp)]
        if not loops or len(stores) != 1 or stores[0].parent_block() is not body:
            return None
        store = stores[0]
        dst = store.memref
        sources = []
        for op in kernel.walk():
            if isinstance(op, memref.LoadOp) and op.memref not in sources:
                sources.append(op.memref)
            if isinstance(op, memref.AllocOp | memref.AllocaOp):
                return None
        if dst in sources or any(defined_in(kernel, v) for v in [dst, *sources]):
            return None
        if any(element_type(v) != element_type(dst) for v in sources):
            return None
        trips = [lp.trip_count for lp in loops]
        n = math.prod(trips)
        if n == 0 or n > MAX_ELEMENTS:
            return None
        ev = _Eval(sources)
        grids = np.indices(trips, dtype=np.int64).reshape(len(trips), -1)
        for lp, g in zip(loops, grids):
            ev.env[lp.induction_var] = lp.lower + g * lp.stride
        ev.block(body)
        value = ev.env[store.value]
        if not isinstance(value, tuple):
            return None
        strides = _strides(shape_of(dst))
        d = np.broadcast_to(
            sum((ev.index(v) * s for v, s in zip(store.indices, strides)), np.int64(0)), (n,)
        )
        b = np.broadcast_to(value[1], (n,))
        s = np.broadcast_to(value[2], (n,))
    except (_NoCopy, KeyError):
        return None
    order = np.argsort(d, kind="stable")
    d, b, s = d[order], b[order], s[order]
    if np.any(np.diff(d) == 0) or d[0] < 0 or d[-1] >= math.prod(shape_of(dst)):
        return None
    sizes = [math.prod(shape_of(v)) for v in sources]
    if np.any(s < 0) or np.any(s >= np.array(sizes, dtype=np.int64)[b]):
        return None
    brk = np.flatnonzero((np.diff(d) != 1) | (np.diff(b) != 0) | (np.diff(s) != 1)) + 1
    starts = np.concatenate(([0], brk))
    ends = np.concatenate((brk, [n]))
    pieces = [(int(d[i]), int(b[i]), int(s[i]), int(j - i)) for i, j in zip(starts, ends)]
    return dst, sources, pieces


def defined_in(kernel: KernelOp, v: SSAValue) -> bool:
    owner = v.owner
    op = owner.parent_op() if isinstance(owner, Block) else owner
    while op is not None:
        if op is kernel:
            return True
        op = op.parent_op()
    return False


def _split(pieces, tasks: int) -> list[list[tuple]]:
    """Cut the pieces into `tasks` runs of (nearly) equal element counts."""
    total = sum(p[3] for p in pieces)
    share = -(-total // tasks)
    out: list[list[tuple]] = [[] for _ in range(tasks)]
    pos = 0
    for d, b, s, n in pieces:
        k = 0
        while k < n:
            t = pos // share
            take = min(n - k, (t + 1) * share - pos)
            out[t].append((d + k, b, s + k, take))
            k += take
            pos += take
    return [o for o in out if o]


def _strided(part: list[tuple]) -> list[tuple]:
    """A task's pieces (dst, source, src, n) as runs (dst, source, src, n, segments,
    dst stride, src stride): consecutive pieces of one source and length whose offsets
    step by constant positive strides are one strided DMA (a slice's rows, a head split's
    rows of one head)."""
    out: list[tuple] = []
    for d, b, s, n in part:
        if out:
            d0, b0, s0, n0, k, ds, ss = out[-1]
            last_d, last_s = d0 + (k - 1) * ds, s0 + (k - 1) * ss
            if b0 == b and n0 == n and d > last_d and s > last_s:
                step = (d - last_d, s - last_s)
                if k == 1 and step[0] >= n:
                    out[-1] = (d0, b0, s0, n0, 2, *step)
                    continue
                if k > 1 and step == (ds, ss):
                    out[-1] = (d0, b0, s0, n0, k + 1, ds, ss)
                    continue
        out.append((d, b, s, n, 1, 0, 0))
    return out


def lower_copy(
    kernel: KernelOp, desc, multicore: bool, strided: bool = True
) -> dlp.KernelOp | None:
    """The kernel as direct GDRAM2GDRAM copies, or None (see the module docstring); with
    `strided`, a task's equally spaced pieces are one strided DMA (`_strided`)."""
    found = copy_pieces(kernel)
    if found is None:
        return None
    dst, sources, pieces = found
    total = sum(p[3] for p in pieces)
    tasks = max(1, min(desc.cores if multicore else 1, total // MIN_ELEMENTS_PER_TASK))
    parts = _split(pieces, tasks)
    most = max(len(p) for p in parts)
    long_pieces = most <= MAX_LONG_PIECES_PER_TASK and total >= MIN_PIECE_ELEMENTS * len(pieces)
    if most > MAX_PIECES_PER_TASK and not long_pieces:
        return None
    attrs: dict[str, Attribute] = {
        "tasks": IntegerAttr(len(parts), i64),
        "dma_align": IntegerAttr(desc.dma_align, i64),
        "vector_align": IntegerAttr(desc.vector_align, i64),
    }
    if kernel.origin is not None:
        attrs["origin"] = StringAttr(kernel.origin.data)
    new = dlp.KernelOp(kernel.sym, **attrs)
    block = new.block
    consts: dict[int, SSAValue] = {}

    def c(v: int) -> SSAValue:
        if v not in consts:
            op = arith.ConstantOp(IntegerAttr(v, IndexType()))
            block.add_op(op)
            consts[v] = op.result
        return consts[v]

    tid = dlp.TaskIdOp()
    block.add_op(tid)
    tid.results[0].name_hint = "task"
    for t, part in enumerate(parts):
        body = Block()
        runs = _strided(part) if strided else [(*piece, 1, 0, 0) for piece in part]
        for d, b, s, n, k, ds, ss in runs:  # (back to back, one wait)
            if k == 1:
                body.add_op(dlp.MemcpyAsyncOp(dst, c(d), sources[b], c(s), c(n)))
            else:
                copy = dlp.MemcpyStridedAsyncOp(
                    dst, c(d), sources[b], c(s), c(n), c(k), c(ds), c(ss)
                )
                body.add_op(copy)
        body.add_op(scf.YieldOp())
        cond = arith.CmpiOp(tid.results[0], c(t), "eq")
        block.add_op(cond)
        block.add_op(scf.IfOp(cond.result, [], Region(body)))
    block.add_op(dlp.WaitDmaOp())
    return new


def _adjacent(a: Operation, b: Operation) -> bool:
    """Only allocations, deallocations, constants and views (a reshape's
    reinterpret_cast: no data read) between `a` and `b`."""
    quiet = (
        memref.AllocOp,
        memref.DeallocOp,
        memref.ReinterpretCastOp,
        memref.GetGlobalOp,
        arith.ConstantOp,
    )
    op = a.next_op
    while op is not None and op is not b:
        if not isinstance(op, quiet):
            return False
        op = op.next_op
    return op is b


def _root(v: SSAValue) -> SSAValue:
    """The buffer a view (a reshape's reinterpret_cast, a subview, a cast) is of."""
    views = (
        memref.ReinterpretCastOp,
        memref.SubviewOp,
        memref.CastOp,
        memref.ExpandShapeOp,
        memref.CollapseShapeOp,
    )
    while isinstance(v.owner, views):
        v = v.owner.operands[0]
    return v


def _touches(kernel: dlp.KernelOp) -> tuple[set[SSAValue], set[SSAValue]]:
    """(GDRAM buffers read, written) by a direct copy kernel, views as their buffer."""
    read: set[SSAValue] = set()
    written: set[SSAValue] = set()
    for op in kernel.walk():
        if isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp | dlp.MemcpyStridedAsyncOp):
            written.add(_root(op.dst))
            read.add(_root(op.src))
    return read, written


def sibling_runs(kernels: list[dlp.KernelOp]) -> list[list[dlp.KernelOp]]:
    """Runs of consecutive direct copy kernels (`kernels`, in program order) that are
    independent: none reads or writes a buffer an earlier one of the run writes, nor
    writes one it reads (attention's three slices of one projection, then the three head
    splits): each run can be one kernel whose tasks issue every member's pieces back to
    back, one DMA latency for all instead of one a kernel."""
    runs: list[list[dlp.KernelOp]] = []
    run: list[dlp.KernelOp] = []
    read: set[SSAValue] = set()
    written: set[SSAValue] = set()
    for k in kernels:
        r, w = _touches(k)
        if run and _adjacent(run[-1], k) and not (r | w) & written and not w & read:
            run.append(k)
        else:
            if len(run) > 1:
                runs.append(run)
            run, read, written = [k], set(), set()
        read |= r
        written |= w
    if len(run) > 1:
        runs.append(run)
    return runs


def merge_siblings(run: list[dlp.KernelOp]) -> dlp.KernelOp:
    """One kernel for a run of `sibling_runs`, named after its last member (`dlpc.fused`
    lists the members), put where the last member was; the deallocations between the
    members move after it."""
    last = run[-1]
    attrs: dict[str, Attribute] = {
        "tasks": IntegerAttr(max(k.num_tasks for k in run), i64),
        "dlpc.fused": StringAttr(",".join(k.sym for k in run)),
    }
    for key in ("dma_align", "vector_align", "origin"):
        if key in last.attributes:
            attrs[key] = last.attributes[key]
    new = dlp.KernelOp(last.sym, **attrs)
    tid = dlp.TaskIdOp()
    tid.results[0].name_hint = "task"
    new.block.add_op(tid)
    for k in run:
        for op in list(k.block.ops):
            if isinstance(op, dlp.TaskIdOp):
                op.results[0].replace_all_uses_with(tid.results[0])
                continue
            if isinstance(op, dlp.WaitDmaOp) and op is k.block.last_op:
                continue  # (one wait for every member's copies)
            op.detach()
            new.block.add_op(op)
    new.block.add_op(dlp.WaitDmaOp())
    block = last.parent_block()
    assert block is not None  # a kernel of the module
    block.insert_op_before(new, last)
    moved: list[Operation] = []
    op = run[0].next_op
    while op is not None and op is not new:
        nxt = op.next_op
        if isinstance(op, memref.DeallocOp):
            op.detach()
            moved.append(op)
        op = nxt
    for k in run:
        k.detach()
        k.erase()
    anchor: Operation = new
    for d in moved:
        block.insert_op_after(d, anchor)
        anchor = d
    return new
