"""graph-winograd's chains as the OpenCL target writes them (`loop-opencl-winograd`).

Input: loop IR as te-to-loop builds it for the OpenCL target (no CPU schedules,
`pipeline.schedules_for`), graph-winograd's kernels (origins
`graph.winograd_input_transform`, `graph.matmul`, `graph.winograd_output_transform` or a
`graph.fused(...)` of it). Output: loop IR.
Requires: a `func.func @main` (or a module of one function).
Guarantees: the same results up to rounding (the fused kernel sums the transforms and
the gemm in its own order, as the C's fused kernel does; within graph-winograd's
tolerance). A second run changes nothing (kernels it made are marked).

**Fused** (`fuse_chain`): a chain input transform -> (reshape) -> batched matmul ->
(reshape) -> output transform with its fused epilogue (bias; a residual add; relu; in
that order, any of them) of a conv with padding 1 on every side, an even output height,
output tile columns a multiple of 8, output channels a multiple of 8, and V and M of one
row of tiles within a work-item's private memory (`FUSED_MAX_FLOATS`, graph-winograd's
`OPENCL_FUSED_MAX_FLOATS`) becomes one kernel: the chain's nests, one after the other,
in the output transform's kernel (what it computes: the profile counts their FLOPs; V, M
and the reshapes' buffers stay allocated, only the chain reads them), marked
`opencl_winograd = "fused x=.. u=.. bias=.. residual=.. y=.."` (the positions of its
buffers among the values it uses). The OpenCL printer writes that kernel as hand-blocked
OpenCL C (backends/opencl/winograd.py).

**Unfused** chains (taken with `graph_winograd={"where": "all"}` only: an odd output, an
epilogue not of that form, ...) keep their kernels, with the nests the C schedules start
from, marked `opencl_nests`:

- input transform: the loops (n, c, th, tw, t) (`reorder`), the tile's 16 loads hoisted
  out of the point loop (`_hoist`), the point loop unrolled in the IR
  (`unroll_in_place`), its selects folded and equal index arithmetic merged
  (`_simplify`); images and channels parallel (the NDRange), the tile columns the
  vector lanes;
- output transform (with its epilogue): `tile_by_two` on the rows and columns and
  `tiles_inside` (the 2x2 tile unrolled inside the tile column).

Why the fused form and these nests: docs/design/opencl-experiments.md (Winograd).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.graph.winograd import OPENCL_FUSED_MAX_FLOATS
from dlpc.passes.lower.view_copies import main_function

DONE = "opencl_nests"  # a kernel attribute: winograd_nests made its nest


def origin_of(kernel: KernelOp) -> str:
    """The graph op a kernel came from (its `origin`), "" when not recorded."""
    attr = kernel.attributes.get("origin")
    return attr.data if isinstance(attr, StringAttr) else ""


def _is_output_transform(origin: str) -> bool:
    return origin == "graph.winograd_output_transform" or origin.startswith(
        "graph.fused(graph.winograd_output_transform"
    )


def _nest(kernel: KernelOp) -> list[ForOp]:
    """The kernel's perfect chain of outer loops, outermost first (te-to-loop's nest)."""
    loops: list[ForOp] = []
    ops = list(kernel.block.ops)
    while len(ops) == 1 and isinstance(ops[0], ForOp):
        loops.append(ops[0])
        ops = list(ops[0].block.ops)
    return loops


def _invariant(op: Operation, loop: ForOp, hoisted: set[Operation]) -> bool:
    """Does `op` (and everything nested in it) read only values from outside `loop`'s
    body or results of ops already hoisted out of it, and store nothing?"""
    for inner in op.walk():
        if isinstance(inner, memref.StoreOp):
            return False
        for v in inner.operands:
            owner = v.owner
            if isinstance(owner, Block):
                if owner is loop.block:
                    return False
                continue
            if owner in hoisted or not defined_inside(v, loop) or op.is_ancestor(owner):
                continue
            return False
    return True


def _hoist(loop: ForOp) -> None:
    """Loop-invariant ops of `loop`'s body moved before it (loads and `scf.if`s of loads
    too: the kernel's other buffers are never the one it stores)."""
    hoisted: set[Operation] = set()
    block = loop.parent_block()
    assert block is not None
    for op in list(loop.block.ops):
        if isinstance(op, scf.YieldOp) or op.name == "loop.yield":
            continue
        if _invariant(op, loop, hoisted):
            op.detach()
            block.insert_op_before(op, loop)
            hoisted.add(op)


def _constant(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


_CMP = {
    0: lambda a, b: a == b,
    1: lambda a, b: a != b,
    2: lambda a, b: a < b,
    3: lambda a, b: a <= b,
    4: lambda a, b: a > b,
    5: lambda a, b: a >= b,
}
_INT = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: int(a / b) if b else None,
    "arith.remsi": lambda a, b: a - b * int(a / b) if b else None,
}


def _fold(op: Operation) -> SSAValue | int | None:
    """A value `op`'s result equals (an operand, or an integer constant), or None."""
    if isinstance(op, arith.SelectOp):
        cond = _constant(op.cond)
        if cond is not None:
            return op.lhs if cond else op.rhs
        return None
    args = [_constant(v) for v in op.operands]
    if op.name in _INT and None not in args:
        return _INT[op.name](*args)
    if isinstance(op, arith.CmpiOp) and None not in args and op.predicate.value.data in _CMP:
        return int(_CMP[op.predicate.value.data](*args))
    return None


def _simplify(block: Block) -> None:
    """Constants folded (the unrolled point's selects), equal pure arith ops merged, and
    arith ops left without uses erased, in `block` (not in nested regions)."""
    seen: dict[tuple, Operation] = {}
    for op in list(block.ops):
        if not op.name.startswith("arith.") or op.regions or len(op.results) != 1:
            continue
        folded = _fold(op)
        if isinstance(folded, int):
            kind = op.results[0].type
            assert isinstance(kind, IntegerType | IndexType)
            const = arith.ConstantOp(IntegerAttr(folded, kind))
            block.insert_op_before(const, op)
            folded = const.result
        if folded is not None:
            op.results[0].replace_all_uses_with(folded)
            op.detach()
            op.erase()
            continue
        key = (
            op.name,
            tuple(op.operands),
            str(op.properties),
            str(op.attributes),
            op.results[0].type,
        )
        if key in seen:
            op.results[0].replace_all_uses_with(seen[key].results[0])
            op.detach()
            op.erase()
            continue
        seen[key] = op
    for op in reversed(list(block.ops)):
        if op.name.startswith("arith.") and not op.regions and not any(r.uses for r in op.results):
            op.detach()
            op.erase()


def _input_transform(module: ModuleOp, kernel: KernelOp) -> None:
    from dlpc.passes.schedule._common import get_loop, unroll_in_place
    from dlpc.passes.schedule.reorder import reorder

    loops = _nest(kernel)
    if len(loops) != 5 or loops[0].upper != 16:
        return
    t, n, c, th, tw = (lp.loop_name or "" for lp in loops)
    reorder(module, kernel.sym, [n, c, th, tw, t])
    point = get_loop(module, kernel.sym, t)
    _hoist(point)  # the tile's 16 loads, once for its 16 points
    parent = point.parent_block()
    assert parent is not None
    unroll_in_place(point)
    _simplify(parent)
    for lp in _nest(kernel):  # images (when more than one) and channels: the NDRange
        name = lp.loop_name
        lp.annotate("parallel", name == c or (name == n and lp.upper > 1))
        lp.annotate("vectorize", False)
    kernel.attributes[DONE] = UnitAttr()


def _output_transform(module: ModuleOp, kernel: KernelOp) -> None:
    from dlpc.passes.schedule.winograd import tile_by_two, tiles_inside

    loops = _nest(kernel)
    if len(loops) != 4 or any(lp.loop_name is None for lp in loops):
        return
    if loops[2].upper % 2 or loops[3].upper % 2:
        return  # an odd output keeps te-to-loop's nest
    h, w = loops[2].loop_name or "", loops[3].loop_name or ""
    wt, wr = tile_by_two(kernel, w)
    rows = list(tile_by_two(kernel, h))
    tiles_inside(module, kernel, rows, wr, wt)
    for lp in _nest(kernel):
        lp.annotate("vectorize", False)
    kernel.attributes[DONE] = UnitAttr()


# ------------------------------------------------------------------ the fused chain

FUSED = "opencl_winograd"  # a kernel attribute: "fused", the chain's nests in one kernel
FUSED_MAX_FLOATS = OPENCL_FUSED_MAX_FLOATS  # (graph-winograd's OpenCL rule keeps to it)
EPILOGUES = {
    (): "",
    ("graph.relu",): "relu",
    ("graph.add",): "add",
    ("graph.add", "graph.relu"): "add relu",
}


@dataclass(frozen=True)
class FusedSpec:
    """What `fused_source` writes: the buffers' roles and the shapes."""

    x: SSAValue  # input [N, C, H, W]
    u: SSAValue  # transformed filter [16, 1, Co, C] (or [16, Co, C])
    bias: SSAValue | None  # [Co]
    residual: SSAValue | None  # [N, Co, H, W]
    y: SSAValue  # output [N, Co, H, W]
    n: int
    c: int
    co: int
    h: int
    w: int
    relu: bool


def _producer(kernel: KernelOp, buffer: SSAValue) -> KernelOp | None:
    """The nearest kernel before `kernel` in its block that stores to `buffer`."""
    op = kernel.prev_op
    while op is not None:
        if isinstance(op, KernelOp) and any(
            isinstance(s, memref.StoreOp) and s.memref is buffer for s in op.walk()
        ):
            return op
        op = op.prev_op
    return None


def _loaded(kernel: KernelOp) -> list[SSAValue]:
    """Buffers from outside `kernel` it loads, in order of first load."""
    out: list[SSAValue] = []
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp) and not defined_inside(op.memref, kernel):
            if op.memref not in out:
                out.append(op.memref)
    return out


def _stored(kernel: KernelOp) -> list[SSAValue]:
    return list(
        dict.fromkeys(
            op.memref
            for op in kernel.walk()
            if isinstance(op, memref.StoreOp) and not defined_inside(op.memref, kernel)
        )
    )


def _through_reshape(kernel: KernelOp, buffer: SSAValue, origin: str, chain: list[KernelOp]):
    """The kernel of `origin` that produced `buffer` for `kernel`, through at most one
    reshape copy (appended to `chain`); None if there is none."""
    p = _producer(kernel, buffer)
    if p is not None and origin_of(p) == "graph.reshape":
        src = _loaded(p)
        if len(src) != 1:
            return None
        chain.append(p)
        p = _producer(p, src[0])
    return p if p is not None and origin_of(p) == origin else None


def _pads(it: KernelOp, x: SSAValue) -> tuple[int, int] | None:
    """(top, left) padding of the input transform `it`: the least constant of its loads'
    row and column indices (2 th + i - top, 2 tw + j - left)."""
    from dlpc.passes.schedule._common import affine

    least: list[int] = []
    for dim in (2, 3):
        consts = []
        for op in it.walk():
            if isinstance(op, memref.LoadOp) and op.memref is x:
                form = affine(op.indices[dim])
                if form is None:
                    return None
                consts.append(form.const)
        if not consts:
            return None
        least.append(-min(consts))
    return least[0], least[1]


def fused_spec(ot: KernelOp) -> tuple[FusedSpec, list[KernelOp]] | None:
    """The spec of output transform `ot`'s chain and the chain's other kernels (input
    transform first), when `fused_source` can write it; else None."""
    origin = origin_of(ot)
    inner = (
        origin[len("graph.fused(") : -1].split(", ")
        if origin.startswith("graph.fused(")
        else [origin]
    )
    if inner[0] != "graph.winograd_output_transform" or tuple(inner[1:]) not in EPILOGUES:
        return None
    epilogue = EPILOGUES[tuple(inner[1:])]
    stored = _stored(ot)
    if len(stored) != 1:
        return None
    y = stored[0]
    ys = shape_of(y)
    if len(ys) != 4 or element_type(y) != Float32Type():
        return None
    n, co, h, w = ys
    rest = [b for b in _loaded(ot) if b is not y]
    bias = [b for b in rest if shape_of(b) == (co,)]
    residual = [b for b in rest if shape_of(b) == tuple(ys)]
    products = [b for b in rest if b not in bias and b not in residual]
    if len(bias) > 1 or len(products) != 1 or len(residual) != (1 if "add" in epilogue else 0):
        return None
    chain: list[KernelOp] = []
    mm = _through_reshape(ot, products[0], "graph.matmul", chain)
    if mm is None:
        return None
    chain.append(mm)
    operands = _loaded(mm)
    if len(operands) != 2:
        return None
    u, v = operands
    it = _through_reshape(mm, v, "graph.winograd_input_transform", chain)
    if it is None or _producer(mm, u) is not None:  # (U: a weight, never computed here)
        return None
    chain.append(it)
    xs = _loaded(it)
    if len(xs) != 1 or len(shape_of(xs[0])) != 4:
        return None
    x = xs[0]
    _, c, xh, xw = shape_of(x)
    if (xh, xw) != (h, w) or _pads(it, x) != (1, 1) or shape_of(x)[0] != n:
        return None
    if h % 2 or w % 16 or co % 8 or 16 * (c + co) * (w // 2) > FUSED_MAX_FLOATS:
        return None
    if math.prod(shape_of(u)) != 16 * co * c:
        return None
    # V, M and the reshapes' copies are read by the chain only (the fused kernel keeps
    # them in private memory: what is in the buffers afterwards is not theirs)
    members = {ot, *chain}
    for k in chain:
        for b in _stored(k):
            for use in b.uses:
                user = use.operation
                kernel = user if isinstance(user, KernelOp) else None
                while user is not None and kernel is None:
                    user = user.parent_op()
                    kernel = user if isinstance(user, KernelOp) else None
                if kernel is None and not isinstance(use.operation, memref.DeallocOp):
                    return None
                if kernel is not None and kernel not in members:
                    return None
    spec = FusedSpec(
        x,
        u,
        bias[0] if bias else None,
        residual[0] if residual else None,
        y,
        n,
        c,
        co,
        h,
        w,
        "relu" in epilogue,
    )
    return spec, list(reversed(chain))


def fuse_chain(ot: KernelOp) -> bool:
    """The chain of output transform `ot` in one kernel (module docstring): the other
    kernels' nests moved, in order, to the front of `ot`'s body, their kernels erased,
    deallocations between them and `ot` of buffers the moved nests use moved after it;
    `ot` marked `FUSED`. False (nothing changed) when `fused_spec` says no."""
    found = fused_spec(ot)
    if found is None:
        return False
    _, chain = found
    block = ot.parent_block()
    assert block is not None
    first = ot.block.first_op
    moved_buffers: set[SSAValue] = set()
    for j, k in enumerate(chain):
        for b in _loaded(k) + _stored(k):
            moved_buffers.add(b)
        for lp in (o for o in k.walk() if isinstance(o, ForOp)):  # (names unique in `ot`)
            lp.attributes["name"] = StringAttr(f"w{j}_{lp.loop_name}")
        for op in list(k.block.ops):
            op.detach()
            if first is None:
                ot.block.add_op(op)
            else:
                ot.block.insert_op_before(op, first)
    late: list[Operation] = []
    op = chain[0].next_op
    while op is not None and op is not ot:
        nxt = op.next_op
        if isinstance(op, memref.DeallocOp) and op.memref in moved_buffers:
            op.detach()
            late.append(op)
        op = nxt
    for k in chain:
        k.detach()
        k.erase()
    after = ot
    for d in late:
        block.insert_op_after(d, after)
        after = d
    spec = found[0]
    free = outside_values(ot)
    roles = [("x", spec.x), ("u", spec.u), ("bias", spec.bias), ("residual", spec.residual)]
    where = " ".join(f"{r}={free.index(v) if v is not None else -1}" for r, v in roles)
    ot.attributes[FUSED] = StringAttr(f"fused {where} y={free.index(spec.y)}")
    return True


def is_fused(kernel: KernelOp) -> bool:
    attr = kernel.attributes.get(FUSED)
    return isinstance(attr, StringAttr) and attr.data.startswith("fused")


def winograd_nests(module: ModuleOp, fn: func.FuncOp) -> None:
    """graph-winograd's transform kernels of `fn` as the OpenCL target writes them best
    (module docstring), in place."""
    for kernel in [op for op in fn.walk() if isinstance(op, KernelOp)]:
        if _is_output_transform(origin_of(kernel)) and FUSED not in kernel.attributes:
            fuse_chain(kernel)
    for kernel in [op for op in fn.walk() if isinstance(op, KernelOp)]:
        origin = origin_of(kernel)
        if DONE in kernel.attributes or FUSED in kernel.attributes:
            continue
        if origin == "graph.winograd_input_transform":
            _input_transform(module, kernel)
        elif _is_output_transform(origin):
            _output_transform(module, kernel)


def outside_values(kernel: Operation) -> list[SSAValue]:
    """The values `kernel` uses from outside it, in order of first use (the order of a
    kernel's parameters in the printers: the fused kernel's roles are positions in it)."""
    free: list[SSAValue] = []
    for op in kernel.walk():
        for v in op.operands:
            if not defined_inside(v, kernel) and v not in free:
                free.append(v)
    return free


@dataclass(frozen=True)
class LoopOpenCLWinograd(ModulePass):
    """`loop-opencl-winograd`: graph-winograd's chains fused into one kernel where the
    OpenCL printer's fused form applies, the other transforms' nests as it writes them
    best (module docstring)."""

    name = "loop-opencl-winograd"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        winograd_nests(op, main_function(op, self.name))
