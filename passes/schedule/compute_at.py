"""Schedule primitive `compute_at`: move a producer kernel into a loop of its consumer,
computing there only the tile of its output that one iteration of the loop reads
(TVM's `compute_at`; fusion of a producer into a tiled consumer).

Input/Output: loop dialect.  Requires: 1) the producer kernel comes before the consumer
in the same block 2) the producer stores to exactly one buffer, a `memref.alloc`
intermediate (not an argument of `@main`) that no kernel other than the two touches
3) the producer's outer loops, one per dim of that buffer, form a perfect chain starting
at 0 with step 1 and index every store directly (`T[i0, i1, ...]`) 4) the consumer only
loads the buffer inside the loop, with affine unguarded indices sharing one tile origin
(as for `cache_read`; a reshape copy's `x / K`, `x % K` count as affine where the loop
ranges make them exact, `_common.affine(..., delinearize=True)`: `(8 jo + ji) / 8` is jo
for ji in [0, 8), so a chain of producers through reshape copies fuses).  Guarantees: the producer kernel is gone; at the start of the
loop's body a nest over the footprint box recomputes the needed elements of the buffer
(overlapping tiles are recomputed); cloned loops are renamed `<producer>_<loop>`, and
lose `parallel`. With `local` (`compute_at P -> K/L local`, `loop-compute-at{... local=true}`)
the buffer itself shrinks to that box: a stack array at the start of the loop's body (one
per iteration, so per thread under a parallel loop), every access in the loop indexed
from the box's origin, the intermediate's alloc gone (TVM's storage of a compute_at stage;
lit `loop-compute-at-local.mlir`). The recomputed nest's own divided indices (`x / K`,
`x % K` of a reshape copy) become their exact affine form. Numerics unchanged.

Before (`compute_at relu_0 -> add_1/i0`):

    loop.kernel "relu_0" { loop.for %i0 = 0 to 4 ... { loop.for %i1 = 0 to 8 ... {
        ... memref.store %r, %t[%i0, %i1] } } }
    loop.kernel "add_1" { loop.for %i0 = 0 to 4 {name = "i0"} { loop.for %i1 = 0 to 8 ... {
        %v = memref.load %t[%i0, %i1] ... } } }

After:

    loop.kernel "add_1" { loop.for %i0 = 0 to 4 {name = "i0"} {
        loop.for %c0 = 0 to 1 {name = "relu_0_i0"} { loop.for %c1 = 0 to 8 {name = "relu_0_i1"} {
            %p0 = arith.addi %i0, %c0   ... memref.store %r, %t[%p0, %c1] } }
        loop.for %i1 = 0 to 8 ... { %v = memref.load %t[%i0, %i1] ... } } }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp, KernelOp, kernels
from dlpc.passes.schedule._common import (
    Affine,
    ScheduleError,
    affine,
    block_of,
    child_loop,
    emit_affine,
    erase,
    get_kernel,
    get_loop,
    memref_type,
)
from dlpc.passes.schedule._footprint import footprint


class ComputeAtOrderError(ScheduleError):
    pass


class ComputeAtEscapeError(ScheduleError):
    pass


class ComputeAtProducerError(ScheduleError):
    pass


class ComputeAtNoUseError(ScheduleError):
    pass


def _output(producer: KernelOp) -> SSAValue:
    """The one buffer the producer stores to (buffers it allocates itself excluded)."""
    written: list[SSAValue] = []
    for op in producer.walk():
        if not isinstance(op, memref.StoreOp):
            continue
        owner = op.memref.owner
        local = isinstance(owner, memref.AllocOp | memref.AllocaOp) and producer.is_ancestor(owner)
        if not local and op.memref not in written:
            written.append(op.memref)
    if len(written) != 1:
        raise ComputeAtProducerError(
            f"producer kernel '{producer.sym}' must store to exactly one buffer, "
            f"stores to {len(written)}"
        )
    return written[0]


def compute_at(root, producer: str, kernel: str, loop: str, local: bool = False) -> ForOp:
    prod = get_kernel(root, producer)
    target = get_loop(root, kernel, loop)
    cons = target.kernel()
    what = f"{kernel}/{loop}"
    block = block_of(cons)
    if prod.parent_block() is not block or prod is cons or not _before(prod, cons):
        raise ComputeAtOrderError(
            f"producer kernel '{producer}' does not come before kernel '{kernel}' in one block"
        )
    buf = _output(prod)
    if not isinstance(buf.owner, memref.AllocOp):
        raise ComputeAtEscapeError(
            f"buffer '{buf.name_hint}' written by kernel '{producer}' is not an intermediate "
            f"(memref.alloc), so it cannot be computed inside loop {what}"
        )
    scope = block.parent_op()
    assert scope is not None, "a kernel's block belongs to a function"
    for other in kernels(scope):
        if other not in (prod, cons) and any(
            getattr(op, "memref", None) is buf for op in other.walk()
        ):
            raise ComputeAtEscapeError(
                f"buffer '{buf.name_hint}' of kernel '{producer}' is also used by kernel "
                f"'{other.sym}'"
            )
    rank = len(memref_type(buf).get_shape())
    chain = [lp for lp in prod.block.ops if isinstance(lp, ForOp)][:1]
    while chain and len(chain) < rank and (nxt := child_loop(chain[-1])) is not None:
        chain.append(nxt)
    stores = [op for op in prod.walk() if isinstance(op, memref.StoreOp) and op.memref is buf]
    ok = (
        len(chain) == rank
        and len(list(prod.block.ops)) == 1
        and all(lp.lower == 0 and lp.stride == 1 for lp in chain)
        and all(list(s.indices) == [lp.induction_var for lp in chain] for s in stores)
    )
    if not ok:
        raise ComputeAtProducerError(
            f"the outer loops of producer kernel '{producer}' must be a perfect nest from 0 "
            f"step 1 that indexes its stores to '{buf.name_hint}' directly"
        )
    if any(isinstance(op, memref.StoreOp) and op.memref is buf for op in cons.walk()):
        raise ComputeAtEscapeError(f"kernel '{kernel}' writes buffer '{buf.name_hint}'")
    loads = [op for op in target.walk() if isinstance(op, memref.LoadOp) and op.memref is buf]
    outside = [
        op
        for op in cons.walk()
        if isinstance(op, memref.LoadOp) and op.memref is buf and not target.is_ancestor(op)
    ]
    if not loads or outside:
        raise ComputeAtNoUseError(
            f"kernel '{kernel}' must read buffer '{buf.name_hint}' only inside loop {what}"
        )
    fp = footprint(target, buf, loads, what, delinearize=True)  # reshape copies too
    # the recompute nest, at the start of the loop's body
    first = target.block.first_op
    loops: list[ForOp] = []
    for d, extent in enumerate(fp.extents):
        name = cons.fresh_loop_name(f"{producer}_{chain[d].loop_name or d}")
        lp = ForOp(0, extent, 1, name=name)
        if loops:
            loops[-1].block.add_op(lp)
        else:
            target.block.insert_op_before(lp, first) if first else target.block.add_op(lp)
        loops.append(lp)
    body = loops[-1].block
    mapper: dict[SSAValue, SSAValue] = {}
    for d, lp in enumerate(loops):
        mapper[chain[d].induction_var] = emit_affine(
            fp.base[d].add(Affine(0, {lp.induction_var: 1})), body
        )
    for op in list(chain[-1].block.ops):
        body.add_op(op.clone(value_mapper=mapper))
    _fold_delinearized(loops[0])
    _keep_inputs_alive(prod, cons)
    for op in body.walk():
        if (
            isinstance(op, ForOp)
            and op.parent_op() is not None
            and op is not loops[-1]
            and op not in loops
        ):
            op.annotate("name", cons.fresh_loop_name(f"{producer}_{op.loop_name}"))
            op.annotate("parallel", False)
    erase(prod)
    if local:
        _localize(target, buf, fp, loops[0])
    return loops[0]


def compute_inline(root, producer: str) -> None:
    """`compute_inline P` (TVM's): a producer whose value at an element depends on that
    element alone (a reshape copy, an elementwise op) is substituted into its consumer's
    loads: each `load T[idx]` becomes the producer's body at `idx` (its store dropped),
    and the producer and T are gone. Requires 1)-3) of `compute_at` (with one consumer
    kernel after it, the only other user of T) and a body without loops, loads of T or
    buffers of its own. Indices that divide (`x / K`, `x % K`) are folded to their exact
    affine form where the consumer's loop ranges allow. Numerics unchanged."""
    prod = get_kernel(root, producer)
    buf = _output(prod)
    block = block_of(prod)
    scope = block.parent_op()
    assert scope is not None, "a kernel's block belongs to a function"
    users = [
        k
        for k in kernels(scope)
        if k is not prod and any(getattr(op, "memref", None) is buf for op in k.walk())
    ]
    if not isinstance(buf.owner, memref.AllocOp) or len(users) != 1:
        raise ComputeAtEscapeError(
            f"buffer '{buf.name_hint}' of kernel '{producer}' must be an intermediate "
            "(memref.alloc) read by exactly one other kernel to inline it"
        )
    cons = users[0]
    if not _before(prod, cons):
        raise ComputeAtOrderError(
            f"producer kernel '{producer}' does not come before kernel '{cons.sym}' in one block"
        )
    rank = len(memref_type(buf).get_shape())
    chain = [lp for lp in prod.block.ops if isinstance(lp, ForOp)][:1]
    while chain and len(chain) < rank and (nxt := child_loop(chain[-1])) is not None:
        chain.append(nxt)
    body = list(chain[-1].block.ops) if chain else []
    stores = [op for op in body if isinstance(op, memref.StoreOp)]
    ok = (
        len(chain) == rank
        and len(list(prod.block.ops)) == 1
        and all(lp.lower == 0 and lp.stride == 1 for lp in chain)
        and len(stores) == 1
        and stores[0].memref is buf
        and list(stores[0].indices) == [lp.induction_var for lp in chain]
        and not any(op.regions for op in body)
        and not any(
            isinstance(op, memref.AllocOp | memref.AllocaOp)
            or (isinstance(op, memref.LoadOp) and op.memref is buf)
            for op in body
        )
    )
    if not ok:
        raise ComputeAtProducerError(
            f"producer kernel '{producer}' must be a perfect nest from 0 step 1 whose "
            f"innermost body (no loops, no scf) stores once to '{buf.name_hint}' at its loop "
            "variables, to inline it"
        )
    if any(isinstance(op, memref.StoreOp) and op.memref is buf for op in cons.walk()):
        raise ComputeAtEscapeError(f"kernel '{cons.sym}' writes buffer '{buf.name_hint}'")
    store = stores[0]
    for load in [op for op in cons.walk() if isinstance(op, memref.LoadOp) and op.memref is buf]:
        mapper: dict[SSAValue, SSAValue] = {
            lp.induction_var: idx for lp, idx in zip(chain, load.indices)
        }
        at = block_of(load)
        for op in body:
            if op is store:
                continue
            new = op.clone(value_mapper=mapper)
            at.insert_op_before(new, load)
            if isinstance(new, memref.LoadOp):
                _fold_indices(new)
        load.results[0].replace_all_uses_with(mapper.get(store.value, store.value))
        erase(load)
    _keep_inputs_alive(prod, cons)
    erase(prod)
    for use in list(buf.uses):
        if isinstance(use.operation, memref.DeallocOp):
            erase(use.operation)
    if not buf.uses:
        erase(buf.owner)


def _fold_indices(op: memref.LoadOp | memref.StoreOp) -> None:
    """`_fold_delinearized` of one access."""
    block = op.parent_block()
    assert block is not None
    start = len(op.operands) - len(op.indices)
    for n, idx in enumerate(op.indices):
        form = affine(idx, True) if _has_divide(idx) else None
        if form is not None:
            op.operands[start + n] = emit_affine(form, block, before=op)


def _localize(target: ForOp, buf: SSAValue, fp, nest: ForOp) -> None:
    """`local`: the buffer becomes the footprint box alone, a stack array at the start of
    the loop's body (one per iteration, so per thread under a parallel loop), every
    access inside the loop indexed from the box's origin; the intermediate is gone."""
    ty = memref_type(buf)
    alloc = memref.AllocaOp.get(ty.get_element_type(), shape=fp.extents)
    alloc.memref.name_hint = f"{buf.name_hint or 'buf'}_b"
    target.block.insert_op_before(alloc, nest)
    for op in list(target.walk()):
        if not isinstance(op, memref.LoadOp | memref.StoreOp) or op.memref is not buf:
            continue
        block = op.parent_block()
        assert block is not None
        index = []
        for d, idx in enumerate(op.indices):
            form = affine(idx, True)
            assert form is not None  # (the footprint was computed from these forms)
            index.append(emit_affine(form.add(fp.base[d], -1), block, before=op))
        if isinstance(op, memref.LoadOp):
            new = memref.LoadOp.get(alloc.memref, index)
            block.insert_op_before(new, op)
            op.results[0].replace_all_uses_with(new.res)
        else:
            new = memref.StoreOp.get(op.value, alloc.memref, index)
            block.insert_op_before(new, op)
        erase(op)
    owner = buf.owner
    for use in list(buf.uses):
        if isinstance(use.operation, memref.DeallocOp):
            erase(use.operation)
    if isinstance(owner, memref.AllocOp) and not buf.uses:
        erase(owner)


def _index_op(op) -> bool:
    return isinstance(
        op, arith.DivSIOp | arith.RemSIOp | arith.AddiOp | arith.SubiOp | arith.MuliOp
    ) or (isinstance(op, arith.ConstantOp) and isinstance(op.result.type, IndexType))


def _has_divide(value: SSAValue) -> bool:
    op = value.owner
    if isinstance(op, arith.DivSIOp | arith.RemSIOp):
        return True
    if isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        return _has_divide(op.lhs) or _has_divide(op.rhs)
    return False


def _fold_delinearized(nest: ForOp) -> None:
    """Indices of the recompute nest's loads and stores that divide (a reshape copy's
    `x / K`, `x % K`) rewritten as their affine form where the nest's ranges make it
    exact: plain strides for the C compiler (it vectorizes the 64-bit divisions
    otherwise). Same values."""
    for op in list(nest.walk()):
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            _fold_indices(op)
    dead = True
    while dead:  # the index arithmetic no access uses any more
        dead = False
        for op in list(nest.walk()):
            if _index_op(op) and not any(r.uses for r in op.results):
                op.detach()
                op.erase()
                dead = True


def _keep_inputs_alive(prod: KernelOp, cons: KernelOp) -> None:
    """Deallocs, between the producer and its consumer, of buffers the producer reads
    move after the consumer (which now reads them): no use after free."""
    read = {op.memref for op in prod.walk() if isinstance(op, memref.LoadOp)}
    op = prod.next_op
    while op is not None and op is not cons:
        nxt = op.next_op
        if isinstance(op, memref.DeallocOp) and op.memref in read:
            op.detach()
            block = block_of(cons)
            block.insert_op_after(op, cons)
        op = nxt


def _before(a, b) -> bool:
    op = a.next_op
    while op is not None:
        if op is b:
            return True
        op = op.next_op
    return False


@dataclass(frozen=True)
class LoopComputeInline(ModulePass):
    """`loop-compute-inline{producer=reshape_1}`"""

    name = "loop-compute-inline"
    producer: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        compute_inline(op, self.producer)


@dataclass(frozen=True)
class LoopComputeAt(ModulePass):
    """`loop-compute-at{producer=relu_0 kernel=add_1 loop=i0}`"""

    name = "loop-compute-at"
    producer: str
    kernel: str
    loop: str
    local: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        compute_at(op, self.producer, self.kernel, self.loop, self.local)
