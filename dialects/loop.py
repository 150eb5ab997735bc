# pyright: strict
"""The `loop` dialect: loop nests over buffers, with schedule annotations.

The loop level says *how* a tensor expression is computed: explicit loop nests over
builtin `memref`s (loads and stores with `memref.load`/`memref.store`, scalar math with
`arith`/`math`, guards with `scf.if`). It is the level schedule primitives (split,
reorder, tile, fuse, unroll, vectorize, parallel, cache_read/write, compute_at,
tensorize) transform, and the level the C / OpenCL / DLP backends read.

    func.func @main(%x: memref<4x8xf32>, %out: memref<4x8xf32>)
        attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
      loop.kernel "relu_0" attributes {origin = "graph.relu"} {
        loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
          loop.for %i1 = 0 to 8 step 1 {name = "i1", vectorize} {
            %v = memref.load %x[%i0, %i1] : memref<4x8xf32>
            %z = arith.constant 0.000000e+00 : f32
            %r = arith.maximumf %v, %z : f32
            memref.store %r, %out[%i0, %i1] : memref<4x8xf32>
          }
        }
      }
      func.return
    }

Ops:
- `loop.kernel "name" [attributes {...}] { ... }`: one kernel, i.e. one loop nest (one te
  compute); becomes one function in generated code. One region with one block; no
  terminator. Kernel names are unique among sibling kernels.
- `loop.for %i = LB to UB step S [{annotations}] { ... }`: a counted loop with static
  integer bounds; the body's one block argument is the `index` induction variable; no
  terminator, no results. Annotations (attributes):
    name = "i0"      stable loop name, unique within its kernel (`i*` spatial, `r*` reduction)
    parallel         iterations may run concurrently (OpenMP `parallel for`, cores, ...)
    vectorize        the loop should be vectorised (SIMD)
    unroll = N       unroll by N (N >= 1)
    reduction        the loop is a reduction axis (iterations carry a dependence through
                     an accumulator); a reduction loop cannot be `parallel`
  Attributes whose name contains a `.` (e.g. `dlpc.tile`) are free-form extensions.

Schedules address loops as `kernel/loop` (e.g. `matmul_0/r0`): see `find_kernel`,
`find_loop`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    I64,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, ErasedSSAValue, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_attr_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasAncestor, NoTerminator, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.mlir_lexer import MLIRTokenKind

KNOWN_ANNOTATIONS = ("name", "parallel", "vectorize", "unroll", "reduction")


# ------------------------------------------------------------------------ kernel


class NamedKernelSyntax(IRDLOperation):
    """The syntax `<op> "name" [attributes {...}] { ... }` of a kernel op with a `name`
    property (`sym`), one single-block region `body` and no terminator; shared by
    `loop.kernel` and `dlp.kernel`."""

    kernel_name = prop_def(StringAttr, prop_name="name")
    body = region_def("single_block")

    @property
    def sym(self) -> str:
        """The kernel's name (`loop.kernel "sym"`)."""
        return self.kernel_name.data

    @property
    def block(self) -> Block:
        return self.body.block

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.sym)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser):
        name = parser.parse_str_literal(" for the kernel name")
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        return cls.create(
            properties={"name": StringAttr(name)},
            regions=[body],
            attributes=attrs.data if attrs is not None else {},
        )


@irdl_op_definition
class KernelOp(NamedKernelSyntax, IRDLOperation):
    """One kernel: a loop nest computing one tensor expression.

        loop.kernel "relu_0" attributes {origin = "graph.relu"} {
          loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} { ... }
        }

    `origin` (optional) names the graph op the kernel came from, for readable output.
    """

    name = "loop.kernel"
    origin = opt_attr_def(StringAttr)
    traits = traits_def(NoTerminator(), RecursiveMemoryEffect())

    def __init__(
        self,
        name: str,
        body: Region | Block | Sequence[Operation] | None = None,
        origin: str | None = None,
    ):
        if body is None:
            body = Region(Block())
        elif isinstance(body, Block):
            body = Region(body)
        elif not isinstance(body, Region):
            body = Region(Block(body))
        attrs = {"origin": StringAttr(origin)} if origin is not None else {}
        super().__init__(properties={"name": StringAttr(name)}, regions=[body], attributes=attrs)

    def loops(self) -> Iterator[ForOp]:
        """All loops of the kernel, outermost first (pre-order). Descends only into ops
        with regions (a generic walk made a generator per op: a third of the schedule
        passes' time on resnet's fused Winograd kernels)."""
        for block in self.body.blocks:
            yield from _loops_in(block)

    def loop(self, name: str) -> ForOp:
        """The loop called `name`; KeyError naming the kernel if absent."""
        for op in self.loops():
            if op.loop_name == name:
                return op
        raise KeyError(f"kernel '{self.sym}' has no loop named '{name}'")

    def fresh_loop_name(self, base: str) -> str:
        """A loop name not yet used in this kernel: `base`, else `base.1`, `base.2`, ..."""
        used = {op.loop_name for op in self.loops()}
        if base not in used:
            return base
        k = 1
        while f"{base}.{k}" in used:
            k += 1
        return f"{base}.{k}"

    def verify_(self) -> None:
        seen: set[str] = set()
        for op in self.loops():
            name = op.loop_name
            if name is None:
                continue
            if name in seen:
                raise VerifyException(f"loop name '{name}' is used twice in kernel '{self.sym}'")
            seen.add(name)
        # the block's kernel names are checked once, by its first kernel (each kernel
        # comparing itself with all the others is quadratic in a training step's kernels)
        prev = self.prev_op
        while prev is not None and not isinstance(prev, KernelOp):
            prev = prev.prev_op
        parent = self.parent_block()
        if prev is None and parent is not None:
            names: set[str] = set()
            for other in parent.ops:
                if isinstance(other, KernelOp):
                    if other.sym in names:
                        raise VerifyException(f"kernel name '{other.sym}' is used twice")
                    names.add(other.sym)


# --------------------------------------------------------------------------- for


@irdl_op_definition
class ForOp(IRDLOperation):
    """A counted loop with static bounds and schedule annotations.

        loop.for %i0 = 0 to 128 step 1 {name = "i0", parallel, vectorize, unroll = 4} {
          ...
        }

    The body block has one `index` argument, the induction variable; no terminator.
    """

    name = "loop.for"
    lb = prop_def(IntegerAttr, prop_name="lb")
    ub = prop_def(IntegerAttr, prop_name="ub")
    step = prop_def(IntegerAttr, prop_name="step")
    loop_name_attr = opt_attr_def(StringAttr, attr_name="name")
    parallel = opt_attr_def(UnitAttr)
    vectorize = opt_attr_def(UnitAttr)
    unroll = opt_attr_def(IntegerAttr)
    reduction = opt_attr_def(UnitAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), HasAncestor(KernelOp), RecursiveMemoryEffect())

    def __init__(
        self,
        lb: int,
        ub: int,
        step: int = 1,
        body: Region | Block | None = None,
        *,
        name: str | None = None,
        parallel: bool = False,
        vectorize: bool = False,
        unroll: int | None = None,
        reduction: bool = False,
    ):
        if body is None:
            body = Block(arg_types=[IndexType()])
        if isinstance(body, Block):
            body = Region(body)
        attrs: dict[str, Attribute] = {}
        if name is not None:
            attrs["name"] = StringAttr(name)
        if parallel:
            attrs["parallel"] = UnitAttr()
        if vectorize:
            attrs["vectorize"] = UnitAttr()
        if unroll is not None:
            attrs["unroll"] = IntegerAttr(unroll, i64)
        if reduction:
            attrs["reduction"] = UnitAttr()
        super().__init__(
            properties={
                "lb": IntegerAttr(lb, i64),
                "ub": IntegerAttr(ub, i64),
                "step": IntegerAttr(step, i64),
            },
            regions=[body],
            attributes=attrs,
        )

    # ---- accessors -------------------------------------------------------------
    @property
    def lower(self) -> int:
        return self.lb.value.data

    @property
    def upper(self) -> int:
        return self.ub.value.data

    @property
    def stride(self) -> int:
        return self.step.value.data

    @property
    def trip_count(self) -> int:
        """Number of iterations."""
        return max(0, -(-(self.upper - self.lower) // self.stride))

    @property
    def loop_name(self) -> str | None:
        return self.loop_name_attr.data if self.loop_name_attr is not None else None

    @property
    def unroll_factor(self) -> int:
        return self.unroll.value.data if self.unroll is not None else 1

    @property
    def induction_var(self):
        return self.body.block.args[0]

    @property
    def block(self) -> Block:
        return self.body.block

    def annotate(self, key: str, value: bool | int | str = True) -> None:
        """Set (or with `False` clear) an annotation:
        `annotate("parallel")`, `annotate("unroll", 4)`, `annotate("vectorize", False)`."""
        if value is False:
            self.attributes.pop(key, None)
        elif value is True:
            self.attributes[key] = UnitAttr()
        elif isinstance(value, int):
            self.attributes[key] = IntegerAttr(value, i64)
        else:
            self.attributes[key] = StringAttr(value)

    def kernel(self) -> KernelOp:
        op = self.parent_op()
        while op is not None and not isinstance(op, KernelOp):
            op = op.parent_op()
        assert op is not None, "loop.for outside a loop.kernel"
        return op

    def verify_(self) -> None:
        what = f"loop '{self.loop_name}'" if self.loop_name else "loop.for"
        if self.stride <= 0:
            raise VerifyException(f"{what} has step {self.stride}, expected a positive step")
        if self.lower > self.upper:
            raise VerifyException(
                f"{what} has lower bound {self.lower} above upper bound {self.upper}"
            )
        if self.unroll is not None and self.unroll_factor < 1:
            raise VerifyException(f"{what} has unroll factor {self.unroll_factor}, expected >= 1")
        if self.parallel is not None and self.reduction is not None:
            raise VerifyException(f"{what} is a reduction loop and cannot be parallel")
        for key in self.attributes:
            if key not in KNOWN_ANNOTATIONS and "." not in key:
                raise VerifyException(
                    f"{what} has unknown annotation '{key}' (known: {', '.join(KNOWN_ANNOTATIONS)})"
                )
        block = self.body.block
        if len(block.args) != 1 or not isinstance(block.args[0].type, IndexType):
            raise VerifyException(f"{what} body must have one index block argument")

    # ---- syntax --------------------------------------------------------------
    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.induction_var)
        printer.print_string(f" = {self.lower} to {self.upper} step {self.stride}")
        if self.attributes:
            printer.print_string(" {")
            printer.print_list(self.attributes.items(), lambda kv: _print_annotation(printer, *kv))
            printer.print_string("}")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        indvar = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lb = parser.parse_integer(context_msg=" as the loop lower bound")
        parser.parse_keyword("to")
        ub = parser.parse_integer(context_msg=" as the loop upper bound")
        parser.parse_keyword("step")
        step = parser.parse_integer(context_msg=" as the loop step")
        attrs = {}
        if _attr_dict_follows(parser):
            attrs = parser.parse_optional_attr_dict()
        body = parser.parse_region([indvar.resolve(IndexType())])
        op = cls(lb, ub, step, body)
        op.attributes |= attrs
        return op


def _print_annotation(printer: Printer, key: str, value: Attribute) -> None:
    """`parallel`, `unroll = 4` (not `4 : i64`), `name = "i0"`, else `key = attr`."""
    printer.print_identifier_or_string_literal(key)
    if isinstance(value, UnitAttr):
        return
    printer.print_string(" = ")
    if isa(value, IntegerAttr[I64]):
        printer.print_string(str(value.value.data))
    else:
        printer.print_attribute(value)


def _attr_dict_follows(parser: Parser) -> bool:
    """At `{`: is it an attribute dictionary (`{name = ..`, `{parallel,`, `{x}`) rather
    than the loop body?  Looks two tokens ahead, then rewinds (xDSL's parser has no public
    lookahead or rewind: its token API is private)."""
    if _token_kind(parser) != MLIRTokenKind.L_BRACE:
        return False
    start = parser.pos
    parser._consume_token()  # pyright: ignore[reportPrivateUsage]
    first = _token_kind(parser)
    result = False
    if first in (MLIRTokenKind.BARE_IDENT, MLIRTokenKind.STRING_LIT):
        parser._consume_token()  # pyright: ignore[reportPrivateUsage]
        second = _token_kind(parser)
        result = second in (MLIRTokenKind.EQUAL, MLIRTokenKind.COMMA, MLIRTokenKind.R_BRACE)
    elif first == MLIRTokenKind.R_BRACE:
        parser._consume_token()  # pyright: ignore[reportPrivateUsage]
        result = _token_kind(parser) == MLIRTokenKind.L_BRACE
    parser._resume_from(start)  # pyright: ignore[reportPrivateUsage]
    return result


def _token_kind(parser: Parser) -> MLIRTokenKind:
    """The kind of the parser's next token, not consumed."""
    return parser._current_token.kind  # pyright: ignore[reportPrivateUsage]


# ----------------------------------------------------------------------- helpers


def _loops_in(block: Block) -> Iterator[ForOp]:
    """The loops of `block`, pre-order, descending only into ops that have regions."""
    for op in block.ops:
        if isinstance(op, ForOp):
            yield op
        if op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    yield from _loops_in(inner)


def kernels(root: Operation) -> Iterator[KernelOp]:
    """All kernels under `root`, in program order. Kernels do not nest, so the walk does
    not descend into them (their bodies are most of a module's ops)."""
    if isinstance(root, KernelOp):
        yield root
        return
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                if isinstance(op, KernelOp):
                    yield op
                elif op.regions:  # (no generator per op without regions: most of them)
                    yield from kernels(op)


def find_kernel(root: Operation, name: str) -> KernelOp:
    """The kernel called `name` under `root` (a module or function)."""
    for k in kernels(root):
        if k.sym == name:
            return k
    raise KeyError(f"no kernel named '{name}'")


def find_loop(root: Operation, path: str) -> ForOp:
    """A loop by `kernel/loop` path (`matmul_0/r0`); with `root` a kernel, by loop name."""
    if isinstance(root, KernelOp) and "/" not in path:
        return root.loop(path)
    kernel_name, sep, loop_name = path.partition("/")
    if not sep:
        raise KeyError(f"expected a 'kernel/loop' path, got '{path}'")
    return find_kernel(root, kernel_name).loop(loop_name)


def spine(parent: KernelOp | ForOp) -> list[ForOp]:
    """The perfect-nest spine below `parent`, outermost first: each loop is the only
    loop of its parent block, whose other ops are constants."""
    loops: list[ForOp] = []
    block = parent.block
    while True:
        inner = [op for op in block.ops if isinstance(op, ForOp)]
        others = [op for op in block.ops if not isinstance(op, ForOp | arith.ConstantOp)]
        if len(inner) != 1 or others:
            return loops
        loops.append(inner[0])
        block = inner[0].block


def ancestor_in(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op` itself) that sits directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None, f"{op.name} is not inside the block"
        op = parent
    return op


def defined_inside(value: SSAValue, root: Operation) -> bool:
    """Is `value` a result or block argument of an op nested in `root` (or of `root`)?"""
    owner = value.owner
    op = owner.parent_op() if isinstance(owner, Block) else owner
    while op is not None:
        if op is root:
            return True
        op = op.parent_op()
    return False


def loop_nest(
    parent: KernelOp | ForOp,
    extents: Sequence[int],
    names: Sequence[str],
    body: Callable[[Block, list[SSAValue]], None] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ForOp]:
    """Append a perfect nest of `loop.for 0 to extent` named `names` to `parent`'s block;
    `annotations[name]` gives extra ForOp keywords (`{"i0": {"parallel": True}}`).
    `body(innermost_block, induction_vars)` fills the innermost block. Returns the loops,
    outermost first.

        loop_nest(kernel, [4, 8], ["i0", "i1"],
                  lambda blk, ivs: blk.add_ops(...), {"i0": {"parallel": True}})
    """
    block = parent.block
    loops: list[ForOp] = []
    for extent, name in zip(extents, names, strict=True):
        loop = ForOp(0, extent, 1, name=name, **(annotations or {}).get(name, {}))
        loop.induction_var.name_hint = name
        block.add_op(loop)
        loops.append(loop)
        block = loop.block
    if body is not None:
        body(block, [lp.induction_var for lp in loops])
    return loops


# Ops whose own verifier reads nothing but the op: its class, operand and result types,
# properties and attributes (no regions, successors, parent, or symbol table). Two such
# ops alike in all of these verify alike, so `verify_ir` runs the verifier once per kind.
# (memref.get_global looks its symbol up: not here.)
# graph ops without regions too: their verifier infers the result type from the operand
# types and properties (graph.constant's large value would cost more to hash than to check;
# graph.yield checks its parent).
_LOCAL_VERIFY_DIALECTS = ("arith.", "math.", "graph.")
_LOCAL_VERIFY_OPS = frozenset({"memref.load", "memref.store", "memref.alloca"})
_FULL_VERIFY_OPS = frozenset({"graph.constant", "graph.yield"})


# what makes two local ops verify alike: class, operand and result types, properties, attributes
_VerifyKey = tuple[
    type[Operation],
    tuple[Attribute, ...],
    tuple[Attribute, ...],
    tuple[tuple[str, Attribute], ...],
    tuple[tuple[str, Attribute], ...],
]


def verify_ir(root: Operation) -> None:
    """`root.verify()`, cheaper on loop IR: the same checks on every op, except that the
    own verifier of the ops above (arith, math, loads and stores: 85 % of resnet's loop
    IR, 2495 of its 6129 ops constants) runs once per distinct (class, operand types,
    result types, properties, attributes) instead of once per op: less than half the
    time on resnet (docs/design/lowering.md#verify-ir).
    A failing op raises what `root.verify()` raises (a first sighting always runs the
    verifier in full, and only ops that passed are remembered)."""
    _verify_op(root, set())


def _verify_op(op: Operation, seen: set[_VerifyKey]) -> None:
    op.verify(verify_nested_ops=False)  # structure, traits and the op's own verifier
    for region in op.regions:
        for block in region.blocks:
            _verify_block(block, seen)
            if block.parent is not region:  # as Region.verify
                raise ValueError("Parent pointer of block does not refer to containing region")


def _verify_block(block: Block, seen: set[_VerifyKey]) -> None:
    last = block.last_op
    if last is None:
        block.verify()  # an empty block: whether its region needs a terminator
        return
    # the last op of a block needs no check for being a terminator where the block is the
    # one block of an op that takes none (loop.kernel, loop.for): it verifies as the others
    region = block.parent
    parent = region.parent if region is not None else None
    if region is not None and len(region.blocks) == 1 and parent is not None:
        if parent.has_trait(NoTerminator):
            last = None
    for op in block.ops:
        if op.parent is not block:  # as Block.verify
            raise ValueError("Parent pointer of operation does not refer to containing region")
        name = op.name
        local = (
            name.startswith(_LOCAL_VERIFY_DIALECTS) or name in _LOCAL_VERIFY_OPS
        ) and name not in _FULL_VERIFY_OPS
        if type(op) is ForOp and op is not last:  # the loop once per kind, its body always
            key = _loop_key(op)
            if key is None or key not in seen:
                _verify_op(op, seen)
                if key is not None:
                    seen.add(key)
                continue
            body = op.body.blocks[0]
            _verify_block(body, seen)
            if body.parent is not op.body:  # as Region.verify
                raise ValueError("Parent pointer of block does not refer to containing region")
            continue
        # a block's last op is checked for being a terminator: always in full
        if local and op is not last and not op.regions and not op.successors:
            operands = op.operands
            if not any(isinstance(v, ErasedSSAValue) for v in operands):
                key = (
                    type(op),
                    tuple(v.type for v in operands),
                    tuple(r.type for r in op.results),
                    tuple(op.properties.items()),
                    tuple(op.attributes.items()),
                )
                if key not in seen:
                    op.verify(verify_nested_ops=False)
                    seen.add(key)
                continue
        _verify_op(op, seen)


def _loop_key(op: ForOp) -> _VerifyKey | None:
    """What makes two loop.for inside kernels verify alike: body block argument types,
    properties and annotations (its one non-local trait, being inside a kernel, is
    checked per loop); None for one with operands, results or not one block."""
    if op.operands or op.results or len(op.body.blocks) != 1 or not _in_kernel(op):
        return None
    block = op.body.blocks[0]
    return (
        ForOp,
        tuple(a.type for a in block.args),
        (),
        tuple(op.properties.items()),
        tuple(op.attributes.items()),
    )


def _in_kernel(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    return parent is not None


Loop = Dialect("loop", [KernelOp, ForOp], [])
