"""Bufferise tensor expressions into loop nests (te -> loop).

Input: func.func with tensor arguments and results holding graph.param, graph.constant,
te.compute, te.reduce (bodies in arith, math, scf.if, te.read), scalar arith.constant
(copied into the kernels that use them) and func.return.
Output: loop, memref, arith, math, scf: `@main` takes memrefs in the calling convention
(inputs, then one per distinct graph.param in order of first appearance, then one per
returned value) and returns nothing; attributes `dlpc.num_inputs`, `dlpc.params`,
`dlpc.num_outputs` describe the split.
Requires: static shapes; no graph op other than graph.param/graph.constant.
Guarantees: no te op remains; each te op becomes ONE `loop.kernel` named after it (except
a row group, below), with
loops named `i0..` (spatial, outermost first) and `r0..` (reduction, marked
`reduction`); the outermost spatial loop of extent > 1 is `parallel`; the innermost loop
of a te.compute is `vectorize` (extent > 1), and with the option
`vectorize_reductions` also the innermost reduction loop; a te.reduce accumulates in a 0-d
`memref.alloca` inside its spatial loops and applies its epilogue before the store;
graph.constant becomes a private constant `memref.global`; intermediates are
`memref.alloc`'d before their kernel and `memref.dealloc`'d after their last use; a
returned value that is an input, a param, a constant or returned twice is copied into
its output by a `copy_out<k>` kernel.

Row groups (option `fuse_rows`, on by default): reductions over the trailing dims of a
row, then computes over (row, tail) that only later members read at their own row, ending
in a compute (softmax: max, exp, sum, scale; layer norm: mean, rstd, normalise) become ONE
kernel named after the last member: the rows in blocks of up to 16, each member one row
after another in the block, reduced values and intermediate rows in block-local buffers
(a block's row of exps is stored once, summed and scaled), a reduction's epilogue
vectorized across the block (`RowGroup`, `KernelBuilder.row_group`).

    %y = te.compute "relu_0" (%i0, %i1) : tensor<4x8xf32> { ... te.yield %r : f32 }
    func.return %y : tensor<4x8xf32>

becomes

    func.func @main(%x: memref<4x8xf32>, %out0: memref<4x8xf32>) attributes {...} {
      loop.kernel "relu_0" attributes {origin = "graph.relu"} {
        loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
          loop.for %i1 = 0 to 8 step 1 {name = "i1", vectorize} {
            %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
            ...
            memref.store %r, %out0[%i0, %i1] : memref<4x8xf32>
      ...
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects import symdims, te
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.dialects.typed import float_type
from dlpc.passes.lower._symbolic import (
    BASE_ATTR,
    DIMS_ATTR,
    EXACT_ATTR,
    EXTENT_ATTR,
    ID_ATTR,
    Maxima,
    guard,
    reduce_extents,
)

TeOp = te.ComputeOp | te.ReduceOp

FLOAT_COMBINE = {
    "add": arith.AddfOp,
    "mul": arith.MulfOp,
    "max": arith.MaximumfOp,
    "min": arith.MinimumfOp,
}
INT_COMBINE = {"add": arith.AddiOp, "mul": arith.MuliOp, "max": arith.MaxSIOp, "min": arith.MinSIOp}
# i1 max/min compare unsigned (true > false); signed i1 would order true (-1) below false
BOOL_COMBINE = {"max": arith.MaxUIOp, "min": arith.MinUIOp}
NSW_FLAGS = arith.IntegerOverflowAttr((arith.IntegerOverflowFlag.NSW,))


def memref_of(ty: Attribute, what: str, maxima: Maxima | None = None) -> MemRefType:
    """The memref type of a static tensor type (of a symbolic one, at the `maxima`:
    passes/lower/_symbolic.py); `what` names the culprit on error."""
    if not isinstance(ty, TensorType):
        raise DiagnosticException(f"te-to-loop: {what} has type {ty}, expected a tensor")
    if maxima is not None and not ty.has_static_shape() and isinstance(ty.encoding, ArrayAttr):
        return MemRefType(ty.get_element_type(), maxima.shape(ty, what))
    shape = ty.get_shape()
    if any(d < 0 for d in shape):
        raise DiagnosticException(
            f"te-to-loop needs static shapes: {what} has type {ty}; run graph-infer-shapes first"
        )
    return MemRefType(ty.get_element_type(), list(shape))


def origin_of(op: TeOp) -> str | None:
    """The graph op a te op came from: its `origin` attribute, else its name's stem
    (`relu_0` -> graph.relu, `softmax_2_max` -> graph.softmax) if that is a graph op."""
    given = op.attributes.get("origin")
    if isinstance(given, StringAttr):
        return given.data
    m = re.match(r"^(.*?)_\d+(?:_.*)?$", op.compute_name)
    if m and f"graph.{m.group(1)}" in GRAPH_OP_NAMES:
        return f"graph.{m.group(1)}"
    return None


GRAPH_OP_NAMES = {op.name for op in g.Graph.operations}


# --------------------------------------------------------------------- kernels


class KernelBuilder:
    """Builds the loop.kernel of one te op, given the buffer of every tensor it reads."""

    def __init__(
        self,
        buffers: dict[SSAValue, SSAValue],
        vectorize_reductions: bool = False,
        maxima: Maxima | None = None,
    ):
        self.buffers = buffers
        self.vectorize_reductions = vectorize_reductions
        # symbolic dims: loops run to the maxima, guarded by the call's extents
        self.maxima = maxima
        self.guards: list[tuple[ForOp, symdims.SymDim, bool]] = []
        self.outer: dict[SSAValue, SSAValue] = {}  # function-level constants -> kernel copies

    def hoist_constants(self, op: TeOp, kernel: KernelOp) -> None:
        """Copy the function-level arith.constant ops `op`'s regions use into `kernel`."""
        self.outer = {}
        for inner in op.walk():
            for v in inner.operands:
                c = v.owner
                outside = not defined_inside(v, op)
                if isinstance(c, arith.ConstantOp) and outside and v not in self.outer:
                    copy = c.clone()
                    kernel.block.add_op(copy)
                    self.outer[v] = copy.result

    def nest(
        self,
        kernel: KernelOp,
        extents,
        names,
        innermost_vectorize: bool,
        reduction: bool = False,
        parent: Block | None = None,
    ) -> tuple[Block, list[SSAValue]]:
        """Loops over `extents` inside `parent` (default the kernel's block); the first
        loop of extent > 1 is parallel unless the nest reduces or sits in another nest."""
        block = parent if parent is not None else kernel.block
        ivs: list[SSAValue] = []
        parallel_done = reduction or parent is not None
        for n, (dim, name) in enumerate(zip(extents, names)):
            extent = dim
            if isinstance(dim, symdims.SymDim):
                assert self.maxima is not None  # (te-to-loop made one for symbolic types)
                extent = self.maxima.bound(dim, f"kernel '{kernel.sym}'")
            par = not parallel_done and extent > 1
            parallel_done |= par
            vec = innermost_vectorize and n == len(extents) - 1 and extent > 1
            loop = ForOp(0, extent, 1, name=name, parallel=par, vectorize=vec, reduction=reduction)
            loop.induction_var.name_hint = name
            block.add_op(loop)
            block = loop.block
            ivs.append(loop.induction_var)
            if isinstance(dim, symdims.SymDim):
                self.guards.append((loop, dim, reduction))
        return block, ivs

    def guarded(self, kernel: KernelOp) -> KernelOp:
        """`kernel` with its loops over symbolic extents bounded (passes/lower/_symbolic.py):
        every loop of a kernel whose body reads the dims (its indices depend on them)
        under its guard now (outer loops first); the loops of other kernels only marked
        `dlpc.extent`, so that schedules see plain nests (loop-runtime-extents guards
        what is left of them after scheduling). A reduction must stop exactly (a sum
        must not read padding): its kernel gets `dlpc.exact`, which loop-runtime-extents
        checks; `dlpc.guard_reductions` on the function guards reductions at once
        instead (unscheduled: the fallback when a schedule loses a mark)."""
        if self.guards:
            assert self.maxima is not None and self.maxima.dims is not None
            dims = self.maxima.dims
            reads = any(isinstance(op, memref.LoadOp) and op.memref is dims for op in kernel.walk())
            exact: list[Attribute] = []
            for loop, dim, reduction in self.guards:
                if reads or (reduction and self.maxima.guard_reductions):
                    guard(loop, dim, dims, self.maxima.names)
                    continue
                loop.attributes[EXTENT_ATTR] = StringAttr(str(dim))
                if reduction:
                    exact.append(StringAttr(loop.loop_name or ""))
            if exact:
                kernel.attributes[EXACT_ATTR] = ArrayAttr(exact)
            self.guards = []
        return kernel

    def inline_body(self, body: Block, target: Block, args: list[SSAValue]) -> SSAValue:
        """Clone `body` (minus its te.yield) into `target` with block args -> `args`,
        te.read -> memref.load; returns the yielded value."""
        mapping: dict[SSAValue, SSAValue] = {**self.outer, **dict(zip(body.args, args))}
        for op in body.ops:
            if isinstance(op, te.YieldOp):
                return mapping.get(op.value, op.value)
            new = op.clone(mapping)
            target.add_op(new)
            for inner in list(new.walk()):
                if isinstance(inner, te.ReadOp):
                    load = self.replace_read(inner)
                    if inner is new:
                        mapping[op.results[0]] = load
        raise AssertionError("te body without te.yield")

    def replace_read(self, read: te.ReadOp) -> SSAValue:
        buf = self.buffers.get(read.tensor)
        if buf is None:
            raise DiagnosticException(f"te-to-loop: te.read of {read.tensor} which has no buffer")
        load = memref.LoadOp.get(buf, list(read.indices))
        load.res.name_hint = read.result.name_hint
        block = read.parent_block()
        assert block is not None  # a te.read inside the body being lowered
        block.insert_op_before(load, read)
        read.result.replace_all_uses_with(load.res)
        read.detach()
        read.erase()
        return load.res

    def compute(self, op: te.ComputeOp, out: SSAValue) -> KernelOp:
        kernel = KernelOp(op.compute_name, origin=origin_of(op))
        self.hoist_constants(op, kernel)
        rank = len(op.shape)
        shape = g.shape_of(op.result)
        block, ivs = self.nest(kernel, shape, [f"i{n}" for n in range(rank)], True)
        value = self.inline_body(op.body.block, block, ivs)
        block.add_op(memref.StoreOp.get(value, out, ivs))
        return self.guarded(kernel)

    def reduce(self, op: te.ReduceOp, out: SSAValue) -> KernelOp:
        kernel = KernelOp(op.compute_name, origin=origin_of(op))
        self.hoist_constants(op, kernel)
        rank = len(op.shape)
        shape = g.shape_of(op.result)
        block, ivs = self.nest(kernel, shape, [f"i{n}" for n in range(rank)], False)
        acc_t = op.acc_type
        acc = memref.AllocaOp.get(acc_t, shape=[])
        acc.memref.name_hint = "acc"
        init = init_ops(op.init_value, acc_t)
        block.add_ops([acc, *init, memref.StoreOp.get(init[-1], acc, [])])
        nred = len(op.reduce_extents)
        inner, rivs = self.nest(
            kernel,
            reduce_extents(op),
            [f"r{n}" for n in range(nred)],
            self.vectorize_reductions,
            reduction=True,
            parent=block,
        )
        value = self.inline_body(op.body.block, inner, ivs + rivs)
        old = memref.LoadOp.get(acc, [])
        combine = combiner(op.combiner_name, acc_t)(old, value)
        if te.NSW_SUM in op.attributes:  # sums the producer bounds: a signed add in C
            if not isinstance(combine, arith.AddiOp) or acc_t == IntegerType(1):
                raise DiagnosticException(
                    f'te-to-loop: te.reduce "{op.compute_name}" has {te.NSW_SUM} but is '
                    f'no integer add (combiner "{op.combiner_name}" of {acc_t})'
                )
            combine.properties["overflowFlags"] = NSW_FLAGS
        inner.add_ops([old, combine, memref.StoreOp.get(combine, acc, [])])
        final = memref.LoadOp.get(acc, [])
        final.res.name_hint = "sum" if op.combiner_name == "add" else op.combiner_name
        block.add_op(final)
        result = final.res
        if op.has_epilogue:
            result = self.inline_body(op.epilogue.block, block, [final.res, *ivs])
        block.add_op(memref.StoreOp.get(result, out, ivs))
        return self.guarded(kernel)

    def row_group(self, group: RowGroup, out: SSAValue) -> KernelOp:
        """One kernel for a row group (see `row_groups`). The rows go in blocks of
        `group.block` along the last row dim; in each block, every member in order, one
        row after another (loop `b`): a te.reduce into one value per row (its epilogue
        then vectorized across the block: one sqrt for 16 rows), a te.compute into a
        block-local buffer, the last te.compute into `out`.

            for i0, .., ib (blocks of B rows):
              for b < B: mean[b] = sum_r x[row, r] / n
              for b < B: var[b] = sum_r (x[row, r] - mean[b])^2
              for e < B {vectorize}: rstd[e] = 1 / sqrt(var[e] / n + eps)
              for b < B: for j {vectorize}: y[row, j] = (x[row, j] - mean[b]) * rstd[b] ..
        """
        last = group.members[-1]
        kernel = KernelOp(last.compute_name, origin=origin_of(last))
        outer: dict[SSAValue, SSAValue] = {}
        for m in group.members:
            self.hoist_constants(m, kernel)
            outer.update(self.outer)
        self.outer = outer
        a, B, tail = len(group.rows), group.block, list(group.tail)
        last_row = group.rows[-1]
        split = isinstance(last_row, symdims.SymDim)
        extents = [*group.rows[:-1], last_row if split else last_row // B]
        what = f"kernel '{kernel.sym}'"
        sizes = [d if isinstance(d, int) else self.maxima.bound(d, what) for d in tail]  # type: ignore[union-attr]
        top, tops = self.nest(kernel, extents, [f"i{n}" for n in range(a)], False)
        start: SSAValue = tops[-1]
        if split:  # a symbolic last row dim: the block loop steps by B (its iv is the
            # block's first row) and each per-row loop stops at the extent, as a split
            # (passes/lower/_symbolic.py: dlpc.extent_base names the block loop)
            blocks = top.parent_op()
            assert isinstance(blocks, ForOp)
            blocks.properties["step"] = IntegerAttr(B, i64)
            blocks.attributes[ID_ATTR] = IntegerAttr(1, i64)
        else:
            size = arith.ConstantOp(IntegerAttr(B, IndexType()))
            mul = arith.MuliOp(tops[-1], size.result)
            top.add_ops([size, mul])
            start = mul.result
        block_ivs: set[SSAValue] = set()  # the ivs of the per-row loops (b, e)
        local: set[SSAValue] = set()
        own: set[memref.LoadOp] = set()  # loads of block buffers already at row b

        def rows_loop(name: str, vectorize: bool = False) -> tuple[Block, list[SSAValue]]:
            loop = ForOp(0, B, 1, name=name, vectorize=vectorize and B > 1)
            loop.induction_var.name_hint = name
            if split and not vectorize:  # (an epilogue's vector over the block runs whole)
                loop.attributes[EXTENT_ATTR] = StringAttr(str(last_row))
                loop.attributes[BASE_ATTR] = ArrayAttr([IntegerAttr(1, i64)])
            top.add_op(loop)
            block_ivs.add(loop.induction_var)
            row = arith.AddiOp(start, loop.induction_var)
            loop.block.add_op(row)
            return loop.block, [*tops[:-1], row.result]

        def block_buffer(elt: Attribute, shape: list[int], name: str) -> SSAValue:
            buf = memref.AllocaOp.get(elt, shape=shape)
            buf.memref.name_hint = name
            top.add_op(buf)
            local.add(buf.memref)
            return buf.memref

        for t, m in enumerate(group.members):
            tag = "" if t == 0 else f"_{t}"
            elt = m.result.type.get_element_type()
            name = g.ssa_name_hint(m.compute_name) or "row"
            if isinstance(m, te.ReduceOp):
                stat = block_buffer(elt, [B], name)
                raw = block_buffer(m.acc_type, [B], f"{name}_acc") if m.has_epilogue else stat
                row, ivs = rows_loop(f"b{tag}")
                acc = memref.AllocaOp.get(m.acc_type, shape=[])
                acc.memref.name_hint = "acc"
                init = init_ops(m.init_value, m.acc_type)
                row.add_ops([acc, *init, memref.StoreOp.get(init[-1], acc, [])])
                names = [f"r{n}{tag}" for n in range(len(tail))]
                inner, rivs = self.nest(kernel, tail, names, True, reduction=True, parent=row)
                value = self.inline_body(m.body.block, inner, ivs + rivs)
                old = memref.LoadOp.get(acc, [])
                combine = combiner(m.combiner_name, m.acc_type)(old, value)
                inner.add_ops([old, combine, memref.StoreOp.get(combine, acc, [])])
                final = memref.LoadOp.get(acc, [])
                b = row.parent_op().induction_var  # type: ignore[union-attr]
                row.add_ops([final, memref.StoreOp.get(final, raw, [b])])
                if m.has_epilogue:
                    post, ivs = rows_loop(f"e{tag}", vectorize=True)
                    e = post.parent_op().induction_var  # type: ignore[union-attr]
                    acc_e = memref.LoadOp.get(raw, [e])
                    post.add_op(acc_e)
                    own.add(acc_e)
                    result = self.inline_body(m.epilogue.block, post, [acc_e.res, *ivs])
                    post.add_op(memref.StoreOp.get(result, stat, [e]))
                self.buffers[m.result] = stat
                continue
            buf = out if m is last else block_buffer(elt, [B, *sizes], name)
            row, ivs = rows_loop(f"b{tag}")
            names = [f"j{n}{tag}" for n in range(len(tail))]
            inner, jivs = self.nest(kernel, tail, names, True, parent=row)
            value = self.inline_body(m.body.block, inner, ivs + jivs)
            if m is last:
                inner.add_op(memref.StoreOp.get(value, out, ivs + jivs))
                continue
            b = row.parent_op().induction_var  # type: ignore[union-attr]
            inner.add_op(memref.StoreOp.get(value, buf, [b, *jivs]))
            self.buffers[m.result] = buf
        # a member's result is read at the reader's row (checked by row_groups): row
        # `b` of the block, then the tail indices
        for load in [op for op in kernel.walk() if isinstance(op, memref.LoadOp)]:
            if load.memref not in local or load in own:
                continue
            parent = load.parent_op()
            while not (isinstance(parent, ForOp) and parent.induction_var in block_ivs):
                assert parent is not None
                parent = parent.parent_op()
            b = parent.induction_var
            new = memref.LoadOp.get(load.memref, [b, *list(load.indices)[a:]])
            new.res.name_hint = load.res.name_hint
            load.parent_block().insert_op_before(new, load)  # type: ignore[union-attr]
            load.res.replace_all_uses_with(new.res)
            load.detach()
            load.erase()
        return self.guarded(kernel)

    def copy(self, name: str, src: SSAValue, dst: SSAValue, shape) -> KernelOp:
        kernel = KernelOp(name, origin="func.return")
        block, ivs = self.nest(kernel, shape, [f"i{n}" for n in range(len(shape))], True)
        load = memref.LoadOp.get(src, ivs)
        block.add_ops([load, memref.StoreOp.get(load, dst, ivs)])
        return kernel


def init_ops(value: float, ty: Attribute) -> list[Operation]:
    """The ops giving a reduction's initial value, the last one its result: a constant, then
    for an unsigned type (arith.constant is signless) a bitcast of the same bits."""
    if isinstance(ty, IntegerType) and ty.signedness.data == Signedness.UNSIGNED:
        width = ty.width.data
        top = 2**width - 1  # the unsigned range, clamped; then as the signless bits
        unsigned = top if value >= top else 0 if value <= 0 else int(value)
        bits = unsigned - 2**width if unsigned >= 2 ** (width - 1) else unsigned
        const = arith.ConstantOp(IntegerAttr(bits, IntegerType(width)))
        return [const, arith.BitcastOp(const.result, ty)]
    return [arith.ConstantOp(init_attr(value, ty))]


def init_attr(value: float, ty: Attribute) -> IntegerAttr | FloatAttr:
    if isinstance(ty, IntegerType | IndexType):
        width = ty.width.data if isinstance(ty, IntegerType) else 64
        lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
        if width == 1:  # i1 is a bool: false < true (numpy's order), not signed -1 < 0
            lo, hi = 0, 1
        elif isinstance(ty, IntegerType) and ty.signedness.data == Signedness.UNSIGNED:
            lo, hi = 0, 2**width - 1
        # an integer min/max starts at the type's bound, which a float init value only
        # approximates (2**63 - 1 is 2**63 as a double): clamp, never wrap to the other end
        ivalue = hi if value >= hi else lo if value <= lo else int(value)
        return IntegerAttr(ivalue, ty)
    return FloatAttr(value, float_type(ty))


def combiner(name: str, ty: Attribute):
    if isinstance(ty, IntegerType) and ty.width.data == 1 and name in BOOL_COMBINE:
        return BOOL_COMBINE[name]
    table = INT_COMBINE if isinstance(ty, IntegerType | IndexType) else FLOAT_COMBINE
    return table[name]


# --------------------------------------------------------------------- row groups

ROW_BUFFER_LIMIT = 4096  # elements of a block-local buffer (16 KiB of f32: L1, the stack)
ROW_BLOCK = 16  # rows per block at most (a vector of f32 per row statistic)


@dataclass
class RowGroup:
    """te ops that become one row kernel: reductions over the trailing dims `tail` of a
    row, computes over (row, tail) read only within the group, and a last compute.
    softmax (max, exp, sum, scale) and layer norm (mean, rstd, normalise) lower so."""

    members: list[TeOp]
    rows: tuple[symdims.Dim, ...]
    tail: tuple[symdims.Dim, ...]
    block: int = 1  # rows per block: divides rows[-1] (at its maximum)


def _row_args(op: Operation, a: int) -> list[SSAValue] | None:
    """The row indices of the block that `op` (a te.read) sits in: the first `a` index
    arguments of its compute/reduce body, or of a reduce epilogue (after the acc)."""
    block = op.parent_block()
    while block is not None and not isinstance(block.parent_op(), TeOp):
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    if block is None:
        return None
    owner = block.parent_op()
    assert isinstance(owner, TeOp)
    args: list[SSAValue] = list(block.args)
    if isinstance(owner, te.ReduceOp) and owner.has_epilogue and block is owner.epilogue.block:
        args = args[1:]
    return args[:a]


def _group_ok(members: list[TeOp], rows: tuple[symdims.Dim, ...]) -> bool:
    """Every member but the last is read only by later members, at its own row."""
    a = len(rows)
    inside = set(members)
    for n, m in enumerate(members[:-1]):
        for use in m.results[0].uses:
            read = use.operation
            if not isinstance(read, te.ReadOp) or read.tensor is not m.results[0]:
                return False
            owner = read.parent_op()
            while owner is not None and not isinstance(owner, TeOp):
                owner = owner.parent_op()
            if owner not in inside or members.index(owner) <= n:  # type: ignore[arg-type]
                return False
            if list(read.indices)[:a] != _row_args(read, a):
                return False
    return isinstance(members[-1], te.ComputeOp) and len(members) > 1


def row_groups(block: Block, maxima: Maxima | None = None) -> dict[Operation, RowGroup]:
    """The row groups of a te function (keyed by their first member): from a te.reduce
    over the trailing dims of a row, the longest run of te ops (scalar arith.constants
    between them allowed) over (row) or (row, tail) that `_group_ok` accepts. With the
    `maxima` of a symbolic function, rows and tail may be symbolic (sized at them)."""
    ops = [op for op in block.ops if not isinstance(op, arith.ConstantOp)]
    groups: dict[Operation, RowGroup] = {}
    n = 0
    while n < len(ops):
        first = ops[n]
        n += 1
        if not isinstance(first, te.ReduceOp):
            continue
        rows, tail = g.shape_of(first.result), reduce_extents(first)
        try:  # (a symbolic dim at its maximum: the buffers' extent)
            top = [maxima.bound(d, "") if maxima else d for d in rows + tail]
        except DiagnosticException:
            continue
        if not all(isinstance(d, int) and d >= 0 for d in top):
            continue
        rows_max, tail_max = top[: len(rows)], top[len(rows) :]
        if not rows or not tail or math.prod(tail_max) > ROW_BUFFER_LIMIT:
            continue
        run: list[TeOp] = [first]
        for op in ops[n:]:
            shape = g.shape_of(op.results[0]) if isinstance(op, TeOp) else None
            if isinstance(op, te.ReduceOp) and shape == rows and reduce_extents(op) == tail:
                run.append(op)
            elif isinstance(op, te.ComputeOp) and shape == rows + tail:
                run.append(op)
            else:
                break
        best = next((k for k in range(len(run), 1, -1) if _group_ok(run[:k], rows)), 0)
        if best:
            per_row = (
                math.prod(tail_max)
                if any(isinstance(m, te.ComputeOp) for m in run[: best - 1])
                else 1
            )
            size = max(
                d
                for d in range(1, ROW_BLOCK + 1)
                if rows_max[-1] % d == 0 and d * per_row <= ROW_BUFFER_LIMIT or d == 1
            )
            groups[first] = RowGroup(run[:best], rows, tail, size)
            n += best - 1
    return groups


# --------------------------------------------------------------------- functions


def bufferize(
    module: ModuleOp, fn: func.FuncOp, vectorize_reductions: bool = False, fuse_rows: bool = True
) -> func.FuncOp:
    """The loop-level replacement of `fn` (globals for constants go into `module`)."""
    old = fn.body.block
    ret = old.last_op
    maxima = Maxima(fn) if DIMS_ATTR in fn.attributes else None

    def mem(ty: Attribute, what: str) -> MemRefType:
        return memref_of(ty, what, maxima)

    if not isinstance(ret, func.ReturnOp):
        raise DiagnosticException(f"te-to-loop: @{fn.sym_name.data} must end with func.return")
    for op in old.ops:
        if not isinstance(
            op, TeOp | g.ParamOp | g.ConstantOp | g.ControlOp | arith.ConstantOp | func.ReturnOp
        ):
            raise DiagnosticException(
                f"te-to-loop: unexpected op {op.name} in @{fn.sym_name.data}; run graph-to-te first"
            )
        for r in [] if isinstance(op, arith.ConstantOp) else op.results:
            what = _describe(op) if isinstance(op, g.ParamOp) else f"the result of {_describe(op)}"
            mem(r.type, what)

    params: dict[str, g.ParamOp] = {}
    for op in old.ops:
        if isinstance(op, g.ParamOp) and op.pname not in params:
            params[op.pname] = op
    returned = list(ret.operands)
    fname = fn.sym_name.data
    in_types = [mem(a.type, f"argument #{k} of @{fname}") for k, a in enumerate(old.args)]
    par_types = [mem(p.output.type, f'graph.param "{n}"') for n, p in params.items()]
    out_types = [mem(v.type, f"returned value #{k}") for k, v in enumerate(returned)]
    block = Block(arg_types=[*in_types, *par_types, *out_types])
    n_in, n_par = len(in_types), len(par_types)
    for new, arg in zip(block.args, old.args):
        new.name_hint = arg.name_hint
    for new, name in zip(block.args[n_in:], params):
        new.name_hint = g.ssa_name_hint(name)
    outs = block.args[n_in + n_par :]
    for k, new in enumerate(outs):
        new.name_hint = f"out{k}"

    buffers: dict[SSAValue, SSAValue] = dict(zip(old.args, block.args))
    # the first return position of a te value receives it directly; others are copies
    direct: dict[SSAValue, SSAValue] = {}
    for k, v in enumerate(returned):
        if isinstance(v.owner, te.ComputeOp | te.ReduceOp | g.ControlOp) and v not in direct:
            direct[v] = outs[k]
    groups = row_groups(old, maxima) if fuse_rows else {}
    grouped: dict[Operation, RowGroup] = {m: grp for grp in groups.values() for m in grp.members}
    # a value read by a row group is last read by its kernel, built at its last member
    last_use = {
        v: grouped[op].members[-1] if op in grouped else op for v, op in _last_uses(old).items()
    }
    builder = KernelBuilder(buffers, vectorize_reductions, maxima)
    if maxima is not None:  # the guards read the call's dims from the dlpc_dims input
        maxima.dims = block.args[n_in - 1]
    allocated: list[SSAValue] = []
    control = None  # graph.if / graph.loop: passes/lower/_control_to_loop.py (names if<k>, loop<k>)
    for op in old.ops:
        if op in grouped:
            grp = grouped[op]
            if op is grp.members[-1]:
                last = grp.members[-1]
                assert isinstance(last, te.ComputeOp)
                out = direct.get(last.result)
                if out is None:
                    alloc = memref.AllocOp([], [], mem(last.result.type, _describe(last)))
                    alloc.memref.name_hint = g.ssa_name_hint(last.compute_name)
                    block.add_op(alloc)
                    out = alloc.memref
                    allocated.append(last.result)
                kernel = builder.row_group(grp, out)
                buffers[last.result] = out
                for m in grp.members:
                    _check_closed(kernel, m, old)
                block.add_op(kernel)
        elif isinstance(op, g.ParamOp):
            buffers[op.output] = block.args[n_in + list(params).index(op.pname)]
        elif isinstance(op, g.ConstantOp):
            sym = _constant_global(module, op)
            get = memref.GetGlobalOp(sym, memref_of(op.output.type, "graph.constant"))
            get.memref.name_hint = sym
            block.add_op(get)
            buffers[op.output] = get.memref
        elif isinstance(op, g.ControlOp):  # host control flow around its regions' kernels
            from dlpc.passes.lower._control_to_loop import Control

            control = control or Control(module, builder, mem, _constant_global)
            given = [direct.get(r) for r in op.results]  # returned: the output itself
            for r, buf in zip(op.results, control.lower(op, block, given)):
                buffers[r] = buf
                if direct.get(r) is None:
                    allocated.append(r)
        elif isinstance(op, te.ComputeOp | te.ReduceOp):
            out = direct.get(op.result)
            if out is None:
                alloc = memref.AllocOp([], [], mem(op.result.type, _describe(op)))
                alloc.memref.name_hint = g.ssa_name_hint(op.compute_name)
                block.add_op(alloc)
                out = alloc.memref
                allocated.append(op.result)
            buffers[op.result] = out
            if isinstance(op, te.ComputeOp):
                kernel = builder.compute(op, out)
            else:
                kernel = builder.reduce(op, out)
            _check_closed(kernel, op, old)
            block.add_op(kernel)
        # free intermediates whose last reader was this op
        for v in [v for v in allocated if last_use.get(v) is op]:
            block.add_op(memref.DeallocOp.get(buffers[v]))
            allocated.remove(v)
    for k, v in enumerate(returned):
        if direct.get(v) is not outs[k]:
            shape = mem(v.type, "returned value").get_shape()
            block.add_op(builder.copy(f"copy_out{k}", buffers[v], outs[k], shape))
    for v in allocated:
        block.add_op(memref.DeallocOp.get(buffers[v]))
    block.add_op(func.ReturnOp())

    new_fn = func.FuncOp(fn.sym_name.data, ([a.type for a in block.args], []), Region(block))
    arg_attrs = list(fn.arg_attrs.data) if isinstance(fn.arg_attrs, ArrayAttr) else []
    arg_attrs = arg_attrs[:n_in] + [DictionaryAttr({})] * (n_in - len(arg_attrs))
    arg_attrs += [DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in params]
    # result attributes (e.g. `dlpc.name` of an output) move to the output arguments
    res_attrs = list(fn.res_attrs.data) if isinstance(fn.res_attrs, ArrayAttr) else []
    arg_attrs += res_attrs[: len(outs)] + [DictionaryAttr({})] * (len(outs) - len(res_attrs))
    if any(a.data for a in arg_attrs):
        new_fn.arg_attrs = ArrayAttr(arg_attrs)
    for key, value in fn.attributes.items():
        new_fn.attributes.setdefault(key, value)
    new_fn.attributes["dlpc.num_inputs"] = IntegerAttr(n_in, i64)
    new_fn.attributes["dlpc.params"] = ArrayAttr([StringAttr(n) for n in params])
    new_fn.attributes["dlpc.num_outputs"] = IntegerAttr(len(outs), i64)
    return new_fn


def _describe(op: Operation) -> str:
    if isinstance(op, te.ComputeOp | te.ReduceOp):
        return f'{op.name} "{op.compute_name}"'
    if isinstance(op, g.ParamOp):
        return f'graph.param "{op.pname}"'
    return op.name


def _check_closed(kernel: KernelOp, op: TeOp, old: Block) -> None:
    """Internal invariant: the kernel refers to nothing of the te-level function."""
    for inner in kernel.walk():
        for v in inner.operands:
            owner = v.owner
            assert owner is not old and not (
                isinstance(owner, Operation) and owner.parent_block() is old
            ), f"te-to-loop: {_describe(op)} still uses {v} of the te-level function"


def _last_uses(block: Block) -> dict[SSAValue, Operation]:
    """For each value, the top-level op of `block` that reads it last."""
    last: dict[SSAValue, Operation] = {}
    for op in block.ops:
        for inner in op.walk():
            for v in inner.operands:
                last[v] = op
    return last


def _constant_global(module: ModuleOp, op: g.ConstantOp) -> str:
    taken = {o.sym_name.data for o in module.body.block.ops if isinstance(o, memref.GlobalOp)}
    k = 0
    while f"__constant_{k}" in taken:
        k += 1
    sym = f"__constant_{k}"
    ty = memref_of(op.output.type, "graph.constant")
    glob = memref.GlobalOp.get(StringAttr(sym), ty, op.value, constant=UnitAttr())
    first = module.body.block.first_op
    assert first is not None  # the module holds the function that uses the constant
    module.body.block.insert_op_before(glob, first)
    return sym


@dataclass(frozen=True)
class TeToLoop(ModulePass):
    """Bufferise te functions into loop nests (see the module docstring)."""

    name = "te-to-loop"

    vectorize_reductions: bool = False
    """Also mark the innermost reduction loop `vectorize` (the C backend then emits an
    OpenMP simd reduction: float sums are reassociated, within rtol 1e-4)."""

    fuse_rows: bool = True
    """Lower each row group (softmax, layer norm: see `row_groups`) as one kernel."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]:
            if not any(
                isinstance(o, TeOp | g.ParamOp | g.ConstantOp) for o in fn.body.block.ops
            ) and not any(isinstance(a.type, TensorType) for a in fn.body.block.args):
                continue  # already at the loop level
            new_fn = bufferize(op, fn, self.vectorize_reductions, self.fuse_rows)
            op.body.block.insert_op_before(new_fn, fn)
            fn.detach()
            fn.erase(safe_erase=False)
