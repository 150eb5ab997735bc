"""Runtime extents below the graph: one compiled program for every value of a dim.

A function whose types have symbolic dims (`tensor<?x16xf32, ["seq"]>`, dialects/symdims)
lowers as follows.

graph-to-te (`SymbolicFunction.prepare`):
- the function gains a last input `dlpc_dims: tensor<Kxi64>`, the values of its K
  symbols in the order of its `dlpc.dims` attribute (sorted names); a caller passes them;
- te ops keep the symbolic result types; a te.reduce over a symbolic extent has -1 in
  `over` and the extent's expression in `dlpc.over` (te.SYMBOLIC_OVER);
- a symbolic dim inside a body (a reshape's stride, a concat's offset, a gather's wrap
  bound) is computed from `dlpc_dims` (te.read, index_cast, arith): the call's value.

te-to-loop (`Maxima`, `guard`):
- every buffer is allocated at the declared maximum of its dims (`dlpc.max_dims` on the
  function): element (i, j) of a tensor lives at (i, j) of its buffer whatever the
  call's dims, so strides, the memory plan and views stay static; a call reads and
  writes only the prefix its dims cover (the caller pads inputs into max-shaped
  buffers and slices outputs back: runtime/dynamic.py);
- a loop over a symbolic extent runs to the maximum with its body under
  `scf.if iv < extent`, the extent computed from `dlpc_dims` just before the loop
  (`guard`); the C printer stops such a loop at the extent (`iv < min(max, extent)`,
  backends/c.py `clamped`), so the work is the call's;
- which loops are guarded at once: every loop of a kernel whose indices read the dims
  (a reshape's `i // seq` must not run past the buffer). Every other loop over a
  symbolic extent is only marked `dlpc.extent = "<expr>"`, so the schedules see the
  plain static nest and tile it; after them, loop-runtime-extents guards what is left
  of the marks (a split keeps them on both loops; a spatial tile may compute up to a
  tile of padding nobody reads). A reduction must stop exactly: its kernel lists the
  loop in `dlpc.exact`, and loop-runtime-extents refuses the kernel if a schedule lost
  a mark there (then `dlpc.guard_reductions` guards reductions at once instead).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects import symdims, te
from dlpc.dialects.loop import ForOp

DIMS_ARG = "dlpc_dims"  # the function's input holding the symbols' values
DIMS_ATTR = "dlpc.dims"  # the function's attribute: the symbols, in that input's order
MAX_ATTR = "dlpc.max_dims"  # the function's attribute: each symbol's maximum
# a loop's attribute: the symbolic extent of the dim it runs over; the iterations at and
# past it compute nothing a result within the call's dims reads, so a backend may stop
# there (loop-runtime-extents guards the loop); a schedule's split keeps it on the outer
# loop (whose induction variable counts in the dim's own units)
EXTENT_ATTR = "dlpc.extent"
# with it, on a loop a split made: the ids (ID_ATTR) of the loops whose ivs, added to
# this loop's, give the dim's index (passes/schedule/_common.split_extent)
BASE_ATTR = "dlpc.extent_base"
ID_ATTR = "dlpc.extent_id"  # a split's outer loop: its id in the kernel
# with it, on a loop a fuse made of a marked outer loop and a static inner one of n
# iterations: the limit is n times the outer loop's (passes/schedule/fuse.py)
SCALE_ATTR = "dlpc.extent_scale"
# a kernel's attribute: it reduces over a symbolic extent, so every loop that reads its
# inputs at its own index must keep its mark and stop exactly (loop-runtime-extents)
EXACT_ATTR = "dlpc.exact"
# the function's attribute: guard reduction loops at te-to-loop instead (unscheduled)
GUARD_REDUCTIONS = "dlpc.guard_reductions"


def is_symbolic_type(ty: Attribute) -> bool:
    """A tensor type with `?` dims that its encoding names (a bare `?` is not symbolic:
    graph-to-te refuses it, asking for graph-infer-shapes)."""
    return (
        isinstance(ty, TensorType)
        and not ty.has_static_shape()
        and isinstance(ty.encoding, ArrayAttr)
    )


def function_symbols(fn: func.FuncOp) -> list[str]:
    """The symbols of `fn`'s symbolic types (arguments, results and every op), sorted."""
    found: set[str] = set()
    types = [*fn.function_type.inputs.data, *fn.function_type.outputs.data]
    types += [r.type for op in fn.walk() for r in op.results]
    for ty in types:
        if is_symbolic_type(ty):
            found |= symdims.symbols(g.shape_of(ty))
    return sorted(found)


def build_dim(
    d: symdims.Dim, symbol: Callable[[str], SSAValue], add: Callable[[Operation], SSAValue]
) -> SSAValue:
    """`d` as an index value: `symbol(name)` gives a symbol's value, `add(op)` inserts an
    arith op and returns its result."""

    def const(n: int) -> SSAValue:
        return add(arith.ConstantOp(IntegerAttr(n, IndexType())))

    def poly(p: symdims.Dim) -> SSAValue:
        if isinstance(p, int):
            return const(p)
        total: SSAValue | None = None
        for mono, coeff in p.terms.items():
            factors = [
                symbol(a)
                if isinstance(a, str)
                else add(arith.FloorDivSIOp(poly(a.num), const(a.den)))
                for a in mono
            ]
            if coeff != 1 or not factors:
                factors.append(const(coeff))
            term = factors[0]
            for f in factors[1:]:
                term = add(arith.MuliOp(term, f))
            total = term if total is None else add(arith.AddiOp(total, term))
        assert total is not None  # (a SymDim has at least one term)
        return total

    return poly(d)


class SymbolicFunction:
    """graph-to-te's view of one function with symbolic dims (see the module docstring)."""

    def __init__(self, fn: func.FuncOp, names: list[str]):
        self.fn = fn
        self.names = names
        block = fn.body.block
        self.dims = block.insert_arg(TensorType(i64, [len(names)]), len(block.args))
        self.dims.name_hint = DIMS_ARG
        inputs = [*fn.function_type.inputs.data, self.dims.type]
        fn.function_type = FunctionType.from_lists(inputs, list(fn.function_type.outputs.data))
        if isinstance(fn.arg_attrs, ArrayAttr):
            attrs = list(fn.arg_attrs.data)
            attrs += [DictionaryAttr({})] * (len(inputs) - 1 - len(attrs))
            fn.arg_attrs = ArrayAttr([*attrs, DictionaryAttr({"dlpc.name": StringAttr(DIMS_ARG)})])
        fn.attributes[DIMS_ATTR] = ArrayAttr([StringAttr(n) for n in names])

    @staticmethod
    def prepare(fn: func.FuncOp) -> SymbolicFunction | None:
        names = function_symbols(fn)
        if not names:
            return None
        if "?" in names:
            raise DiagnosticException(
                f"graph-to-te: @{fn.sym_name.data} has an anonymous symbolic dim '?': "
                f"name it (an ONNX dim_param, a .dlpc named dim) or bind it"
            )
        if DIMS_ATTR in fn.attributes:
            raise DiagnosticException(
                f"graph-to-te: @{fn.sym_name.data} already has {DIMS_ATTR}: lowered twice?"
            )
        return SymbolicFunction(fn, names)

    def materialise(self, b: te.BodyBuilder, d: symdims.SymDim) -> SSAValue:
        """The call's value of `d` inside a te body."""

        def symbol(name: str) -> SSAValue:
            k = b.index(self.names.index(name))
            return b.cast(b.emit(te.ReadOp(self.dims, [k])), IndexType())

        return build_dim(d, symbol, b.emit)


def reduce_extents(op: te.ReduceOp) -> tuple[symdims.Dim, ...]:
    """A te.reduce's extents with the symbolic ones as their expressions."""
    exprs = op.attributes.get(te.SYMBOLIC_OVER)
    ints = op.reduce_extents
    if not isinstance(exprs, ArrayAttr):
        return ints
    texts = [a.data for a in exprs.data if isinstance(a, StringAttr)]
    return tuple(symdims.parse(t) if e == -1 else e for e, t in zip(ints, texts))


def mark_extents(extents: Sequence[symdims.Dim]) -> tuple[list[int], ArrayAttr | None]:
    """`over` for a te.reduce (-1 for a symbolic extent) and its `dlpc.over` (or None)."""
    if not any(isinstance(e, symdims.SymDim) for e in extents):
        return [int(e) for e in extents], None
    ints = [-1 if isinstance(e, symdims.SymDim) else int(e) for e in extents]
    texts = [StringAttr(str(e) if isinstance(e, symdims.SymDim) else "") for e in extents]
    return ints, ArrayAttr(texts)


class Maxima:
    """te-to-loop's view of a function with symbolic dims: each symbol's maximum (its
    buffers' sizes) and the `dlpc_dims` buffer the guards read."""

    def __init__(self, fn: func.FuncOp):
        names = fn.attributes.get(DIMS_ATTR)
        self.names = [a.data for a in names.data] if isinstance(names, ArrayAttr) else []  # type: ignore[union-attr]
        given = fn.attributes.get(MAX_ATTR)
        self.max: dict[str, int] = {}
        if isinstance(given, DictionaryAttr):
            for k, v in given.data.items():
                if isinstance(v, IntegerAttr):
                    self.max[k] = v.value.data
        self.fname = fn.sym_name.data
        self.dims: SSAValue | None = None  # the loop-level buffer of dlpc_dims
        self.guard_reductions = GUARD_REDUCTIONS in fn.attributes

    def bound(self, d: symdims.Dim, what: str) -> int:
        """The largest value of `d` the program serves (its buffers' extent)."""
        if isinstance(d, int):
            return d
        missing = sorted(d.symbols() - set(self.max))
        if missing:
            raise DiagnosticException(
                f"te-to-loop: {what} has symbolic dim '{d}' but @{self.fname} declares no "
                f"maximum of '{missing[0]}' ({MAX_ATTR} = {{{missing[0]} = N}})"
            )
        n = symdims.evaluate(d, self.max)
        if n < 1 or n < symdims.evaluate(d, dict.fromkeys(d.symbols(), 1)):
            raise DiagnosticException(
                f"te-to-loop: {what}: dim '{d}' is {n} at the maxima, not its largest value"
            )
        return n

    def shape(self, ty: Attribute, what: str) -> list[int]:
        assert isinstance(ty, TensorType)
        return [self.bound(d, what) for d in g.shape_of(ty)]


def guard(
    loop: ForOp,
    extent: symdims.SymDim,
    dims: SSAValue,
    names: list[str],
    base: Sequence[SSAValue] = (),
    scale: int = 1,
) -> None:
    """Put `loop`'s body under `scf.if iv < (extent - sum(base)) * scale`, the limit
    computed from `dims` just before the loop (`base`: the ivs of the loops a split took
    the index's other parts to, all around `loop`; `scale`: the inner trip count a fuse
    folded in). The body is then the compare and the `scf.if` alone: the C printer stops
    such a loop at the limit (`iv < min(ub, limit)`)."""
    ops = list(loop.block.ops)
    then = Block()
    for op in ops:
        op.detach()
        then.add_op(op)
    then.add_op(scf.YieldOp())
    head: list[Operation] = []

    def add(op: Operation) -> SSAValue:
        head.append(op)
        return op.results[0]

    def symbol(name: str) -> SSAValue:
        from xdsl.dialects import memref

        k = add(arith.ConstantOp(IntegerAttr(names.index(name), IndexType())))
        load = memref.LoadOp.get(dims, [k])
        load.res.name_hint = name
        value = add(load)
        return add(arith.IndexCastOp(value, IndexType()))

    limit = build_dim(extent, symbol, add)
    for b in base:
        limit = add(arith.SubiOp(limit, b))
    if scale != 1:
        limit = add(arith.MuliOp(limit, add(arith.ConstantOp(IntegerAttr(scale, IndexType())))))
    parent = loop.parent_block()
    assert parent is not None  # (a loop of a kernel)
    parent.insert_ops_before(head, loop)
    cond = arith.CmpiOp(loop.induction_var, limit, "slt")
    loop.block.add_ops([cond, scf.IfOp(cond, [], Region(then))])


def guard_tile(
    loop: ForOp,
    extent: symdims.SymDim,
    dims: SSAValue,
    names: list[str],
    base: Sequence[SSAValue],
) -> None:
    """A tile loop (vector or unrolled, static bounds) that must stop exactly, in two
    versions: `scf.if sum(base) + upper <= extent` (the whole tile is inside) runs it as
    it is, else `guard`'s version runs it with a guard per iteration, so only the last
    tile of the extent pays for the guard."""
    parent = loop.parent_block()
    assert parent is not None  # (a loop of a kernel)
    whole = loop.clone()
    kernel = loop.kernel()
    for inner in [o for o in whole.walk() if isinstance(o, ForOp)]:  # (names are unique)
        inner.annotate("name", kernel.fresh_loop_name(f"{inner.loop_name or 'l'}_whole"))
    head: list[Operation] = []
    inside = tile_fits(extent, dims, names, base, loop.upper, head)
    parent.insert_ops_before(head, loop)
    loop.detach()
    fits, rest = Block([whole, scf.YieldOp()]), Block([loop, scf.YieldOp()])
    guard(loop, extent, dims, names, base)
    parent.insert_op_after(scf.IfOp(inside, [], Region(fits), Region(rest)), head[-1])


def tile_fits(
    extent: symdims.Dim,
    dims: SSAValue,
    names: list[str],
    base: Sequence[SSAValue],
    upper: int,
    head: list[Operation],
) -> SSAValue:
    """`sum(base) + upper <= extent` as an i1, its ops appended to `head`: a tile of
    `upper` iterations from the index `sum(base)` lies inside the extent."""

    def add(op: Operation) -> SSAValue:
        head.append(op)
        return op.results[0]

    def symbol(name: str) -> SSAValue:
        from xdsl.dialects import memref

        k = add(arith.ConstantOp(IntegerAttr(names.index(name), IndexType())))
        load = memref.LoadOp.get(dims, [k])
        load.res.name_hint = name
        return add(arith.IndexCastOp(add(load), IndexType()))

    n = build_dim(extent, symbol, add)
    end = add(arith.ConstantOp(IntegerAttr(upper, IndexType())))
    for b in base:
        end = add(arith.AddiOp(b, end))
    return add(arith.CmpiOp(end, n, "sle"))


def integer_maxima(values: Mapping[str, int]) -> DictionaryAttr:
    return DictionaryAttr({k: IntegerAttr(int(v), i64) for k, v in sorted(values.items())})
