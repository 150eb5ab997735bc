"""Resident, pre-packed weights: the packing of a weight moves out of the call.

Input: loop IR after scheduling and loop-memory-plan (`loop.kernel`s in `func.func @main`
in the calling convention of docs/architecture.md: inputs, params, outputs; no
`memref.alloc` left in @main's body other than the arena).
Output: the same, where every *weight pack* became a resident buffer:

- a weight pack is a local buffer of a kernel (`memref.alloca`/`alloc`, as
  `cache_read ... pack` and `cache_read` make them: GEMM B panels, conv weight tiles)
  filled by one loop nest that reads only weights (params of @main, constant
  `memref.global`s) and depends on no loop around it other than its enclosing loops
  (`D`); every other use of the buffer is a load after that nest;
- @main gets one `memref.alloc() {dlpc.packed} : memref<Nxi8>`, its first op: the packed
  block; each pack is a view of it, shaped `[trip counts of D (> 1)] + local shape`,
  holding the pack of every iteration of `D` (all panels, not one kc/jc block);
- the packing nest moves into a new kernel `<local>_prepack` marked `dlpc.prepare`,
  placed right before its consumer: `D` cloned around the nest, stores into the view at
  `[(d - lb) / step for d in D] + indices`;
- the consumer loads the view at the same position, `(d - lb) / step` computed where the
  local buffer was allocated; the local buffer and its packing nest are gone;
- a whole kernel over weights only (it reads weights or the outputs of earlier such
  kernels, and writes arena views nothing else writes: with --no-fold-weights the
  batch-norm folding `w * s`, a horizontal fusion's weight concat, a layout transpose)
  writes a view of the packed block instead of the arena and is marked `dlpc.prepare`
  in place; its output is a weight for what follows (a gemm packing it is prepacked).

Numerics unchanged: as IR, @main still packs on every run (every evaluator, the
per-pass checker and the OpenCL emitter see an ordinary program). The contract the C
backend builds on: a `dlpc.prepare` kernel reads only weights and writes only the packed
block, so it runs once per binding of the weights, in `dlpc_prepare`, not in
`dlpc_main` (docs/c-backend.md). Packs larger than `max_ratio` times the weight bytes
they read (duplication, padding) are left where they are.

Requires: the memory plan first; a plan made afterwards would put the packed block in
the arena, which is scratch (`PrepackOrderError` otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnitAttr,
    i8,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.loop import ForOp, KernelOp, ancestor_in
from dlpc.passes.lower.memory_plan import ALIGN, ARENA, ELEMENT_BYTES

PACKED = "dlpc.packed"  # the packed block: memref.alloc in @main
PREPARE = "dlpc.prepare"  # a kernel that packs weights: runs once per weights binding


class PrepackOrderError(VerifyException):
    """loop-prepack-weights found an intermediate the memory plan has not placed."""


@dataclass
class Pack:
    """One weight pack found in a kernel of @main."""

    kernel: KernelOp
    alloc: memref.AllocOp | memref.AllocaOp
    nest: ForOp
    outer: list[ForOp]  # the enclosing loops the nest depends on, outermost first
    local: list[Operation]  # pure ops of the kernel outside the nest it needs, in order
    weights: set[SSAValue] = field(default_factory=set)

    @property
    def buffer(self) -> SSAValue:
        return self.alloc.memref

    @property
    def dims(self) -> list[ForOp]:
        """The loops of `outer` that give the resident buffer a dim (trip count > 1)."""
        return [lp for lp in self.outer if lp.trip_count > 1]

    def resident_type(self) -> MemRefType:
        ty = self.buffer.type
        assert isinstance(ty, MemRefType)
        shape = [lp.trip_count for lp in self.dims] + list(ty.get_shape())
        return MemRefType(ty.get_element_type(), shape)


def _bytes(ty) -> int:
    assert isinstance(ty, MemRefType)
    return math.prod(ty.get_shape()) * ELEMENT_BYTES.get(str(ty.get_element_type()), 8)


def _main(module: ModuleOp) -> func.FuncOp | None:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    return funcs[0] if len(funcs) == 1 else None


def _param_args(fn: func.FuncOp) -> set[SSAValue]:
    """@main's arguments that are params (`dlpc.params`, after `dlpc.num_inputs` inputs)."""
    params = fn.attributes.get("dlpc.params")
    n_in = fn.attributes.get("dlpc.num_inputs")
    if not isinstance(params, ArrayAttr) or not isinstance(n_in, IntegerAttr):
        return set()
    first = n_in.value.data
    return set(fn.body.block.args[first : first + len(params.data)])


def _constant_globals(module: ModuleOp) -> set[str]:
    return {
        op.sym_name.data
        for op in module.ops
        if isinstance(op, memref.GlobalOp) and op.constant is not None
    }


def _pure(op: Operation) -> bool:
    """An op the pack may recompute: arith/math, no regions."""
    return not op.regions and op.name.startswith(("arith.", "math."))


class _Finder:
    """Finds the weight packs of @main (see the module docstring)."""

    def __init__(self, module: ModuleOp, fn: func.FuncOp, max_ratio: int):
        self.fn = fn
        self.params = _param_args(fn)
        self.globals = _constant_globals(module)
        self.max_ratio = max_ratio
        written = set()
        for op in fn.walk():
            if isinstance(op, memref.StoreOp):
                written.add(op.memref)
            elif isinstance(op, memref.CopyOp):
                written.add(op.destination)
        self.written = written
        self.hoisted: set[SSAValue] = set()  # arena views written by weight-only kernels
        self.hoisted_kernels: list[KernelOp] = []

    def hoist(self) -> list[SSAValue]:
        """The outputs of @main's weight-only kernels, in order: kernels that read only
        weights (or earlier such outputs) and write only arena views that nothing else
        writes (with --no-fold-weights: a batch-norm folding's `w * s`, a horizontal
        fusion's weight concat, a layout transpose of a weight)."""
        views: list[SSAValue] = []
        for k in self.fn.body.block.ops:
            if isinstance(k, KernelOp) and PREPARE not in k.attributes:
                writes = self.weight_only(k)
                if writes:
                    self.hoisted.update(writes)
                    self.hoisted_kernels.append(k)
                    views += writes
        return views

    def weight_only(self, k: KernelOp) -> list[SSAValue] | None:
        """The arena views kernel `k` writes when it reads only weights and writes only
        views of the arena that no other op writes; None otherwise."""
        reads: set[SSAValue] = set()
        writes: list[SSAValue] = []
        for op in k.walk():
            outside = [v for v in op.operands if not _inside(v, k)]
            if isinstance(op, memref.LoadOp) and op.memref in outside:
                reads.add(op.memref)
            elif isinstance(op, memref.StoreOp) and op.memref in outside:
                if op.memref not in writes:
                    writes.append(op.memref)
            elif any(isinstance(v.type, MemRefType) for v in outside):
                return None  # a copy, a view of an outside buffer, ...
            for v in outside:
                is_buffer = isinstance(v.type, MemRefType)
                if not is_buffer and not isinstance(v.owner, arith.ConstantOp):
                    return None  # a scalar computed outside
        if not writes or any(not self.weight(r) for r in reads if r not in writes):
            return None
        for w in writes:
            view = w.owner
            if not (isinstance(view, memref.ViewOp) and view.parent_block() is self.fn.body.block):
                return None
            arena = view.operands[0].owner
            if not (isinstance(arena, memref.AllocOp) and ARENA in arena.attributes):
                return None
            for alias in _aliases(w):
                for use in alias.uses:
                    user = use.operation
                    stores = isinstance(user, memref.StoreOp) and user.memref is alias
                    if (stores or isinstance(user, memref.CopyOp)) and not k.is_ancestor(user):
                        return None
        return writes

    def weight(self, v: SSAValue) -> bool:
        """`v` is a weight: a param of @main, a constant global, the output of a kernel
        over weights only (`hoisted`), a reshape of one; never written in @main (but by
        the kernel that makes it)."""
        if v in self.hoisted:
            return True
        if v in self.written:
            return False
        if isinstance(v, BlockArgument):
            return v in self.params
        op = v.owner
        if isinstance(op, memref.GetGlobalOp):
            return op.name_.root_reference.data in self.globals
        if isinstance(op, memref.ReinterpretCastOp):
            return not op.offsets and not op.sizes and not op.strides and self.weight(op.source)
        return False

    def packs(self) -> list[Pack]:
        found = []
        for k in _branch_kernels(self.fn.body.block):
            if PREPARE in k.attributes:
                continue
            if k in self.hoisted_kernels:
                continue
            for op in k.walk():
                if isinstance(op, memref.AllocOp | memref.AllocaOp):
                    pack = self.pack(k, op)
                    if pack is not None:
                        found.append(pack)
        return found

    def pack(self, k: KernelOp, alloc: memref.AllocOp | memref.AllocaOp) -> Pack | None:
        buf = alloc.memref
        ty = buf.type
        if not isinstance(ty, MemRefType) or not ty.get_shape() or alloc.operands:
            return None
        if any(d < 0 for d in ty.get_shape()) or not isinstance(ty.layout, NoneAttr):
            return None  # static, row-major buffers only
        block = alloc.parent_block()
        outer = _enclosing_loops(alloc, k)
        if block is None or outer is None:
            return None
        stores = [u.operation for u in buf.uses if isinstance(u.operation, memref.StoreOp)]
        if not stores or any(s.memref is not buf for s in stores):
            return None
        nests = {id(ancestor_in(s, block)) for s in stores}
        nest = ancestor_in(stores[0], block)
        if len(nests) != 1 or not isinstance(nest, ForOp):
            return None
        order = {id(op): n for n, op in enumerate(block.ops)}
        for u in buf.uses:
            user = u.operation
            if user in stores or isinstance(user, memref.DeallocOp):
                continue
            if not isinstance(user, memref.LoadOp) or nest.is_ancestor(user):
                return None
            if order[id(ancestor_in(user, block))] <= order[id(nest)]:
                return None
        pack = Pack(k, alloc, nest, [], [])
        if not self.reads_only_weights(pack, outer):
            return None
        source_bytes = sum(_bytes(w.type) for w in pack.weights)
        if _bytes(pack.resident_type()) > self.max_ratio * max(source_bytes, 1):
            return None
        return pack

    def reads_only_weights(self, pack: Pack, enclosing: list[ForOp]) -> bool:
        """Whether the nest reads weights only and depends on nothing outside it but the
        enclosing loops, pure ops and @main's constants; fills `pack.outer` and `.local`."""
        nest, k = pack.nest, pack.kernel
        ivs: dict[SSAValue, ForOp] = {lp.induction_var: lp for lp in enclosing}
        used_loops: set[int] = set()
        local: set[int] = set()
        for op in nest.walk():
            allowed = isinstance(
                op,
                ForOp
                | memref.LoadOp
                | memref.StoreOp
                | memref.GetGlobalOp
                | scf.IfOp
                | scf.YieldOp,
            )
            if not (allowed or _pure(op)):
                return False  # allocations, kernels, copies, calls: not a plain pack
            if isinstance(op, memref.LoadOp):
                if not self.weight(op.memref):
                    return False
                pack.weights.add(op.memref)
            if isinstance(op, memref.StoreOp) and op.memref is not pack.buffer:
                return False
        work = [v for op in nest.walk() for v in op.operands]
        seen: set[SSAValue] = set()
        while work:
            v = work.pop()
            if v in seen:
                continue
            seen.add(v)
            if _inside(v, nest) or v is pack.buffer or v in pack.weights:
                continue
            if v in ivs:
                used_loops.add(id(ivs[v]))
                continue
            if isinstance(v, BlockArgument):
                return False  # a loop that is not around the nest, an input or output
            op = v.owner
            assert isinstance(op, Operation)
            if k.is_ancestor(op):
                if not _pure(op):
                    return False
                local.add(id(op))
                work.extend(op.operands)
            elif not (isinstance(op, arith.ConstantOp) or self.weight(v)):
                return False
        pack.outer = [lp for lp in enclosing if id(lp) in used_loops]
        pack.local = [op for op in k.walk() if id(op) in local]
        return True


def _branch_kernels(block: Block) -> list[KernelOp]:
    """The kernels of `block` and of the scf.if branches in it (loop-short-extents'
    versions of a kernel), in order."""
    found: list[KernelOp] = []
    for op in block.ops:
        if isinstance(op, KernelOp):
            found.append(op)
        elif isinstance(op, scf.IfOp):
            for region in op.regions:
                for inner in region.blocks:
                    found += _branch_kernels(inner)
    return found


def _inside(v: SSAValue, root: Operation) -> bool:
    if isinstance(v, BlockArgument):
        parent = v.block.parent_op()
    else:
        parent = v.owner
    return isinstance(parent, Operation) and root.is_ancestor(parent)


def _enclosing_loops(op: Operation, k: KernelOp) -> list[ForOp] | None:
    """The loops from `k` down to `op`, outermost first; None when another op (scf.if)
    stands between."""
    loops = []
    parent = op.parent_op()
    while parent is not k:
        if not isinstance(parent, ForOp):
            return None
        loops.append(parent)
        parent = parent.parent_op()
    return loops[::-1]


def _index(pack: Pack, ivs: Mapping[ForOp, SSAValue]) -> tuple[list[Operation], list[SSAValue]]:
    """Ops computing `(iv - lb) / step` for each loop of `pack.dims`, and those values."""
    ops: list[Operation] = []
    values: list[SSAValue] = []
    for lp in pack.dims:
        v = ivs[lp]
        if lp.lower:
            lb = arith.ConstantOp(IntegerAttr(lp.lower, IndexType()))
            sub = arith.SubiOp(v, lb.result)
            ops += [lb, sub]
            v = sub.result
        if lp.stride != 1:
            step = arith.ConstantOp(IntegerAttr(lp.stride, IndexType()))
            div = arith.DivSIOp(v, step.result)
            ops += [step, div]
            v = div.result
        values.append(v)
    return ops, values


def _unique_kernel_name(block: Block, wanted: str) -> str:
    taken = {op.sym for op in block.ops if isinstance(op, KernelOp)}
    name, n = wanted, 1
    while name in taken:
        name, n = f"{wanted}_{n}", n + 1
    return name


def prepack(module: ModuleOp, max_ratio: int = 4) -> int:
    """Rewrite the weight packs of @main (see the module docstring); the packed bytes."""
    fn = _main(module)
    if fn is None:
        return 0
    block = fn.body.block
    if any(PACKED in op.attributes for op in block.ops):
        return 0  # already prepacked
    for op in block.ops:
        if isinstance(op, memref.AllocOp) and ARENA not in op.attributes:
            raise PrepackOrderError(
                f"loop-prepack-weights runs after loop-memory-plan (a later plan would put "
                f"the packed weights in the arena): @main allocates %{op.memref.name_hint or '?'}"
            )
    finder = _Finder(module, fn, max_ratio)
    outputs = finder.hoist()  # first: a pack may read the output of a weight-only kernel
    packs = finder.packs()
    if not packs and not outputs:
        return 0
    sizes = [_bytes(v.type) for v in outputs] + [_bytes(p.resident_type()) for p in packs]
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // ALIGN) * ALIGN
    packed = memref.AllocOp([], [], MemRefType(i8, [total]))
    packed.attributes[PACKED] = UnitAttr()
    packed.memref.name_hint = "packed"
    first = block.first_op
    assert first is not None  # (it holds the kernels of the packs)
    block.insert_op_before(packed, first)
    for k in finder.hoisted_kernels:
        k.attributes[PREPARE] = UnitAttr()
    for v, offset in zip(outputs, offsets):
        _move_to_packed(v, packed.memref, offset)
    for p, offset in zip(packs, offsets[len(outputs) :]):
        _rewrite(p, packed.memref, offset)
    fn.attributes["dlpc.packed_bytes"] = IntegerAttr(total, 64)
    return total


def _aliases(v: SSAValue) -> list[SSAValue]:
    """`v` and the reshapes of it (memref.reinterpret_cast, loop-views), transitively."""
    found = [v]
    for value in found:
        for use in value.uses:
            if isinstance(use.operation, memref.ReinterpretCastOp):
                found.append(use.operation.result)
    return found


def _move_to_packed(v: SSAValue, packed: SSAValue, offset: int) -> None:
    """The arena view `v` becomes a view of the packed block at `offset`."""
    view = v.owner
    assert isinstance(view, memref.ViewOp)
    block = view.parent_block()
    assert block is not None
    at = arith.ConstantOp(IntegerAttr(offset, IndexType()))
    ty = v.type
    assert isinstance(ty, MemRefType)
    new = memref.ViewOp(packed, at.result, [], ty)
    new.result.name_hint = v.name_hint
    block.insert_ops_before([at, new], view)
    v.replace_all_uses_with(new.result)
    shift = view.byte_shift.owner
    block.erase_op(view)
    if isinstance(shift, arith.ConstantOp) and not shift.result.uses:
        block.erase_op(shift)


def _rewrite(p: Pack, packed: SSAValue, offset: int) -> None:
    block = packed.owner.parent_block() if isinstance(packed.owner, Operation) else None
    assert block is not None
    # the resident view and the packing kernel, right before the consumer kernel (or the
    # scf.if in @main it is a branch of: the packing kernel runs in dlpc_prepare)
    anchor = ancestor_in(p.kernel, block)
    label = p.buffer.name_hint or "pack"
    at = arith.ConstantOp(IntegerAttr(offset, IndexType()))
    view = memref.ViewOp(packed, at.result, [], p.resident_type())
    view.result.name_hint = label
    block.insert_ops_before([at, view], anchor)
    # the packing kernel: the loops of D around the nest, the nest storing into the view
    kname = _unique_kernel_name(block, f"{label}_prepack")
    kernel = KernelOp(kname, origin=f"loop-prepack-weights: pack of {p.kernel.sym}")
    kernel.attributes[PREPARE] = UnitAttr()
    body = kernel.block
    ivs: dict[ForOp, SSAValue] = {}
    mapper: dict[SSAValue, SSAValue] = {}
    for lp in p.outer:
        clone = ForOp(lp.lower, lp.upper, lp.stride, name=lp.loop_name)
        clone.induction_var.name_hint = lp.induction_var.name_hint
        body.add_op(clone)
        body = clone.block
        ivs[lp] = clone.induction_var
        mapper[lp.induction_var] = clone.induction_var
    for op in p.local:
        body.add_op(op.clone(value_mapper=mapper))
    index_ops, index = _index(p, ivs)
    body.add_ops(index_ops)
    nest = p.nest.clone(value_mapper=mapper)
    body.add_op(nest)
    for store in [op for op in nest.walk() if isinstance(op, memref.StoreOp)]:
        if store.memref is p.buffer:
            new = memref.StoreOp.get(store.value, view.result, [*index, *store.indices])
            store_block = store.parent_block()
            assert store_block is not None
            store_block.insert_op_before(new, store)
            store_block.erase_op(store)
    block.insert_op_before(kernel, anchor)
    # the consumer: loads of the view at the iteration's position; no local, no nest
    alloc_block = p.alloc.parent_block()
    assert alloc_block is not None
    here = {lp: lp.induction_var for lp in p.outer}
    index_ops, index = _index(p, here)
    alloc_block.insert_ops_before(index_ops, p.alloc)
    alloc_block.erase_op(p.nest)
    for use in list(p.buffer.uses):
        user = use.operation
        user_block = user.parent_block()
        assert user_block is not None
        if isinstance(user, memref.LoadOp):
            new = memref.LoadOp.get(view.result, [*index, *user.indices])
            user_block.insert_op_before(new, user)
            user.res.replace_all_uses_with(new.res)
        user_block.erase_op(user)
    alloc_block.erase_op(p.alloc)
    for op in reversed(p.local):  # what only the nest needed
        op_block = op.parent_block()
        if op_block is not None and all(not r.uses for r in op.results):
            op_block.erase_op(op)


@dataclass(frozen=True)
class LoopPrepackWeights(ModulePass):
    """`loop-prepack-weights{max_ratio=4}`: weight packs become resident (see above)."""

    name = "loop-prepack-weights"
    max_ratio: int = 4

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_ratio < 1:
            raise VerifyException(
                f"loop-prepack-weights: expected max_ratio >= 1, got {self.max_ratio}"
            )
        prepack(op, self.max_ratio)
