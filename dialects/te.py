# pyright: strict
"""The `te` dialect: tensor expressions (TVM's TE written as IR).

*What* to compute, element by element; no loop order, no memory. Values are immutable
tensors, and every op is pure.

    %y = te.compute "relu_0" (%i0, %i1) : tensor<4x8xf32> {
      %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
      %z = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %v, %z : f32
      te.yield %r : f32
    }
    %m = te.reduce "matmul_0" (%i0, %i1) reduce (%r0) over [784] combiner "add" init 0.000000e+00 : tensor<1x256xf32> {
      %a = te.read %x[%i0, %r0] : tensor<1x784xf32>
      %b = te.read %w[%i1, %r0] : tensor<256x784xf32>
      %p = arith.mulf %a, %b : f32
      te.yield %p : f32
    } epilogue (%acc: f32, %j0: index, %j1: index) {
      %c = te.read %bias[%j1] : tensor<256xf32>
      %s = arith.addf %acc, %c : f32
      te.yield %s : f32
    }

- `te.compute`: one `index` block argument per output dim; the body yields the element.
- `te.reduce`: block arguments are the output dims then the reduction dims (extents in
  `over`); `out[i] = init; out[i] = combiner(out[i], body(i, r))` for every `r`.
  The optional epilogue receives the accumulated value and the output dims and yields
  the element actually stored: `out[i] = epilogue(acc(i), i)`.
- `te.read %t[...]`: one element of a tensor (the result is its element type).
- Bodies use `arith`, `math`, `te.read` and `scf.if` (guarded reads for padding).

Python builders keep lowering code short:

    relu = ComputeOp.from_fn("relu_0", x.type, lambda b, i: b.max(b.read(x, i), 0.0))
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from xdsl.dialects import arith, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

from dlpc.dialects.symdims import SymDim
from dlpc.dialects.typed import dense_ints, float_type, is_integer_type, tensor_type

index = IndexType()
# a te.reduce's attribute: the expressions of its symbolic reduction extents (`-1` in
# `over`), "" for a static one: `over [-1, 16] ... attributes {dlpc.over = ["seq", ""]}`
SYMBOLIC_OVER = "dlpc.over"
# a unit attribute on an i32 `add` te.reduce whose producer bounds every partial sum
# within the accumulator (quant_to_te's 8-bit products): its combining add is
# `overflow<nsw>`, which C prints in signed arithmetic (the dot-product pattern of GCC)
NSW_SUM = "dlpc.nsw_sum"

# ------------------------------------------------------------------- attributes


class Combiner(StrEnum):
    """How `te.reduce` folds its values into the accumulator."""

    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"


COMBINERS = tuple(c.value for c in Combiner)


@irdl_attr_definition
class CombinerAttr(EnumAttribute[Combiner], SpacedOpaqueSyntaxAttribute):
    """A reduction's combiner: `#te<combiner "add">`, a bare `"add"` in `te.reduce`."""

    name = "te.combiner"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Combiner:
        return _parse_combiner(parser, "te.combiner")

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string_literal(self.data.value)


def _parse_combiner(parser: AttrParser, what: str) -> Combiner:
    start = parser.pos
    combiner = parser.parse_str_literal(" for the combiner")
    if combiner not in COMBINERS:
        parser.raise_error(
            f"{what} '{combiner}' is not one of {', '.join(COMBINERS)}", start, parser.pos
        )
    return Combiner(combiner)


# ------------------------------------------------------------------ shared syntax


def _print_args(printer: Printer, args: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    printer.print_list(args, printer.print_ssa_value)
    printer.print_string(")")


def _parse_args(parser: Parser) -> list[Parser.Argument]:
    args = parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
    )
    return [a.resolve(index) for a in args]


def _print_float(printer: Printer, value: float) -> None:
    if pymath.isinf(value):
        printer.print_string("inf" if value > 0 else "-inf")
    else:
        printer.print_float(value, f64)


def _parse_float(parser: Parser) -> float:
    negative = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf") is not None:
        value = pymath.inf
    else:
        value = float(parser.parse_number())
    return -value if negative else value


def _print_extra_attrs(printer: Printer, op: Operation) -> None:
    if op.attributes:
        printer.print_op_attributes(op.attributes, print_keyword=True)


def _parse_extra_attrs(parser: Parser, op: Operation) -> None:
    attrs = parser.parse_optional_attr_dict_with_keyword()
    if attrs is not None:
        op.attributes |= attrs.data


def _yield_of(region: Region, op: Operation, what: str) -> YieldOp:
    block = region.block
    last = block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f'{op.name} "{_name_of(op)}" {what} must end with te.yield')
    return last


def _name_of(op: Operation) -> str:
    name = op.properties.get("name")
    return name.data if isinstance(name, StringAttr) else "?"


def _check_static(op: _TensorExprOp) -> None:
    # a symbolic dim (`?` named by the type's encoding: dialects/symdims.py) is allowed;
    # its value is the call's (graph-to-te reads it from the function's dlpc_dims)
    ty = op.result_type
    if not ty.has_static_shape() and not isinstance(ty.encoding, ArrayAttr):
        raise VerifyException(
            f'{op.name} "{op.compute_name}" result {op.result_type} must have a static shape'
        )


def _check_index_args(op: Operation, block: Block, start: int = 0) -> None:
    for n, arg in enumerate(block.args[start:], start):
        if not isinstance(arg.type, IndexType):
            raise VerifyException(
                f'{op.name} "{_name_of(op)}" block argument #{n} must be index, got {arg.type}'
            )


# ---------------------------------------------------------------------------- ops


class _TensorExprOp(IRDLOperation):
    """Shared parts of te.compute and te.reduce."""

    if TYPE_CHECKING:  # both ops declare `sym = prop_def(StringAttr, prop_name="name")`
        sym: StringAttr

    @property
    def compute_name(self) -> str:
        return self.sym.data

    @property
    def result_type(self) -> TensorType[Attribute]:
        return tensor_type(self.results[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.result_type.get_shape())

    @property
    def element_type(self) -> Attribute:
        return self.result_type.get_element_type()

    @property
    def yield_op(self) -> YieldOp:
        return _yield_of(self.regions[0], self, "body")

    @property
    def index_args(self) -> tuple[SSAValue, ...]:
        """The body's block arguments for the output dims."""
        return tuple(self.regions[0].block.args[: len(self.shape)])


@irdl_op_definition
class ComputeOp(_TensorExprOp):
    """One tensor defined element by element: out[i] = body(i).

    %y = te.compute "exp_0" (%i0) : tensor<8xf32> {
      %v = te.read %x[%i0] : tensor<8xf32>
      %e = math.exp %v : f32
      te.yield %e : f32
    }
    """

    name = "te.compute"
    sym = prop_def(StringAttr, prop_name="name")
    result = result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, name: str, result_type: TensorType, body: Region):
        super().__init__(
            properties={"name": StringAttr(name)}, result_types=[result_type], regions=[body]
        )

    @staticmethod
    def from_fn(
        name: str,
        result_type: TensorType,
        fn: Callable[[BodyBuilder, list[SSAValue]], SSAValue | float | int],
    ) -> ComputeOp:
        """`fn(b, idx)` emits the body through `b` and returns the element."""
        block = _index_block(len(result_type.get_shape()), "i")
        b = BodyBuilder(block)
        value = b.as_value(fn(b, list(block.args)), result_type.get_element_type())
        block.add_op(YieldOp(value))
        return ComputeOp(name, result_type, Region(block))

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_string_literal(self.compute_name)
        printer.print_string(" ")
        _print_args(printer, self.body.block.args)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        name = parser.parse_str_literal()
        args = _parse_args(parser)
        parser.parse_punctuation(":")
        ty = parser.parse_type()
        body = parser.parse_region(args)
        op = cls.create(properties={"name": StringAttr(name)}, result_types=[ty], regions=[body])
        _parse_extra_attrs(parser, op)
        return op

    def verify_(self) -> None:
        _check_static(self)
        block = self.body.block
        rank = len(self.shape)
        if len(block.args) != rank:
            raise VerifyException(
                f'te.compute "{self.compute_name}" has {len(block.args)} index arguments '
                f"but its result has rank {rank}"
            )
        _check_index_args(self, block)
        _check_yield(self, self.yield_op, self.element_type, "body")


@irdl_op_definition
class ReduceOp(_TensorExprOp):
    """A reduction: out[i] = epilogue(combiner over r of body(i, r), i).

    %s = te.reduce "sum_0" (%i0) reduce (%r0) over [16] combiner "add" init 0.000000e+00 : tensor<4xf32> {
      %v = te.read %x[%i0, %r0] : tensor<4x16xf32>
      te.yield %v : f32
    }
    """

    name = "te.reduce"
    sym = prop_def(StringAttr, prop_name="name")
    extents = prop_def(DenseArrayBase, prop_name="over")
    combiner = prop_def(CombinerAttr)
    init = prop_def(FloatAttr)
    result = result_def(TensorType)
    body = region_def("single_block")
    epilogue = region_def()  # empty, or one block
    traits = traits_def(Pure())

    def __init__(
        self,
        name: str,
        result_type: TensorType,
        extents: Sequence[int],
        combiner: str,
        init: float,
        body: Region,
        epilogue: Region | None = None,
    ):
        super().__init__(
            properties={
                "name": StringAttr(name),
                "over": DenseArrayBase.from_list(i64, list(extents)),
                "combiner": CombinerAttr(Combiner(combiner)),
                "init": FloatAttr(float(init), f64),
            },
            result_types=[result_type],
            regions=[body, epilogue if epilogue is not None else Region()],
        )

    @staticmethod
    def from_fn(
        name: str,
        result_type: TensorType,
        extents: Sequence[int],
        combiner: str,
        fn: Callable[[BodyBuilder, list[SSAValue], list[SSAValue]], Any],
        init: float | None = None,
        epilogue: Callable[[BodyBuilder, SSAValue, list[SSAValue]], Any] | None = None,
        acc_type: Attribute | None = None,
    ) -> ReduceOp:
        """`fn(b, idx, r)` returns the value combined; `epilogue(b, acc, idx)` (optional)
        maps the accumulated value to the stored one. `init` defaults to the combiner's
        identity; `acc_type` (the body's value type) defaults to the element type."""
        rank = len(result_type.get_shape())
        elt = result_type.get_element_type()
        acc_type = acc_type or elt
        block = _index_block(rank, "i")
        for n in range(len(extents)):
            block.insert_arg(index, rank + n).name_hint = f"r{n}"
        b = BodyBuilder(block)
        value = fn(b, list(block.args[:rank]), list(block.args[rank:]))
        block.add_op(YieldOp(b.as_value(value, acc_type)))
        epi = None
        if epilogue is not None:
            eblock = _index_block(rank, "j")
            eblock.insert_arg(acc_type, 0).name_hint = "acc"
            eb = BodyBuilder(eblock)
            out = epilogue(eb, eblock.args[0], list(eblock.args[1:]))
            eblock.add_op(YieldOp(eb.as_value(out, elt)))
            epi = Region(eblock)
        if init is None:
            init = IDENTITY[combiner]
        return ReduceOp(name, result_type, extents, combiner, init, Region(block), epi)

    @property
    def reduce_extents(self) -> tuple[int, ...]:
        return dense_ints(self.extents)

    @property
    def combiner_name(self) -> str:
        return self.combiner.data.value

    @property
    def init_value(self) -> float:
        return self.init.value.data

    @property
    def reduce_args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[len(self.shape) :])

    @property
    def has_epilogue(self) -> bool:
        return bool(self.epilogue.blocks)

    @property
    def acc_type(self) -> Attribute:
        return self.yield_op.value.type

    def print(self, printer: Printer):
        rank = len(self.shape)
        args = self.body.block.args
        printer.print_string(" ")
        printer.print_string_literal(self.compute_name)
        printer.print_string(" ")
        _print_args(printer, args[:rank])
        printer.print_string(" reduce ")
        _print_args(printer, args[rank:])
        printer.print_string(" over [")
        printer.print_list(self.reduce_extents, lambda e: printer.print_string(str(e)))
        printer.print_string("] combiner ")
        printer.print_string_literal(self.combiner_name)
        printer.print_string(" init ")
        _print_float(printer, self.init_value)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        if self.has_epilogue:
            printer.print_string(" epilogue (")
            printer.print_list(self.epilogue.block.args, printer.print_block_argument)
            printer.print_string(") ")
            printer.print_region(self.epilogue, print_entry_block_args=False)
        _print_extra_attrs(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        name = parser.parse_str_literal()
        out_args = _parse_args(parser)
        parser.parse_keyword("reduce")
        red_args = _parse_args(parser)
        parser.parse_keyword("over")
        extents = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
        parser.parse_keyword("combiner")
        combiner = _parse_combiner(parser, f'te.reduce "{name}" combiner')
        parser.parse_keyword("init")
        init = _parse_float(parser)
        parser.parse_punctuation(":")
        ty = parser.parse_type()
        body = parser.parse_region(out_args + red_args)
        epi = Region()
        if parser.parse_optional_keyword("epilogue") is not None:
            eargs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
            epi = parser.parse_region(eargs)
        op = cls.create(
            properties={
                "name": StringAttr(name),
                "over": DenseArrayBase.from_list(i64, extents),
                "combiner": CombinerAttr(combiner),
                "init": FloatAttr(init, f64),
            },
            result_types=[ty],
            regions=[body, epi],
        )
        _parse_extra_attrs(parser, op)
        return op

    def verify_(self) -> None:
        _check_static(self)
        block = self.body.block
        rank, nred = len(self.shape), len(self.reduce_extents)
        what = f'te.reduce "{self.compute_name}"'
        if len(block.args) != rank + nred:
            raise VerifyException(
                f"{what} has {len(block.args)} block arguments but expects {rank} output "
                f"dims + {nred} reduction dims"
            )
        _check_index_args(self, block)
        symbolic = isinstance(self.attributes.get(SYMBOLIC_OVER), ArrayAttr)
        if any(e < 1 and not (symbolic and e == -1) for e in self.reduce_extents):
            raise VerifyException(
                f"{what} reduction extents {list(self.reduce_extents)} must be >= 1"
            )
        if len(self.epilogue.blocks) > 1:
            raise VerifyException(f"{what} epilogue must have at most one block")
        if not self.has_epilogue:
            _check_yield(self, self.yield_op, self.element_type, "body")
            return
        eargs = self.epilogue.block.args
        if len(eargs) != 1 + rank:
            raise VerifyException(
                f"{what} epilogue has {len(eargs)} arguments but expects the accumulator "
                f"and {rank} output dims"
            )
        if eargs[0].type != self.acc_type:
            raise VerifyException(
                f"{what} epilogue accumulator has type {eargs[0].type} but the body "
                f"yields {self.acc_type}"
            )
        _check_index_args(self, self.epilogue.block, 1)
        _check_yield(
            self, _yield_of(self.epilogue, self, "epilogue"), self.element_type, "epilogue"
        )


def _check_yield(op: _TensorExprOp, y: YieldOp, elt: Attribute, what: str) -> None:
    if y.value.type != elt:
        raise VerifyException(
            f'{op.name} "{op.compute_name}" {what} yields {y.value.type} but the result '
            f"element type is {elt}"
        )


@irdl_op_definition
class ReadOp(IRDLOperation):
    """One element of a tensor.

    %v = te.read %x[%i0, %i1] : tensor<4x8xf32>
    """

    name = "te.read"
    tensor = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tensor: SSAValue | Operation, indices: Sequence[SSAValue]):
        tensor = SSAValue.get(tensor)
        element = tensor_type(tensor).get_element_type()
        super().__init__(operands=[tensor, list(indices)], result_types=[element])

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.tensor)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_ssa_value)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)

    @classmethod
    def parse(cls, parser: Parser) -> ReadOp:
        tensor = parser.parse_unresolved_operand()
        idx = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        parsed = parser.parse_type()
        if not isinstance(parsed, TensorType):
            parser.raise_error(f"te.read expects a tensor type, got {parsed}")
        ty = cast(TensorType[Attribute], parsed)  # (isinstance leaves its parameter unknown)
        op = cls.create(
            operands=[parser.resolve_operand(tensor, ty)]
            + [parser.resolve_operand(i, index) for i in idx],
            result_types=[ty.get_element_type()],
            attributes=attrs,
        )
        return op

    def verify_(self) -> None:
        ty = self.tensor.type
        assert isinstance(ty, TensorType)
        rank = len(ty.get_shape())
        if len(self.indices) != rank:
            raise VerifyException(
                f"te.read of {ty} has {len(self.indices)} indices but the tensor has rank {rank}"
            )
        if self.result.type != ty.get_element_type():
            raise VerifyException(
                f"te.read result type {self.result.type} differs from the element type "
                f"{ty.get_element_type()}"
            )
        owner = self.tensor.owner
        if isinstance(owner, _TensorExprOp) and owner.is_ancestor(self):
            # the value is not defined yet where it is read (te-inline crashed on this)
            raise VerifyException(
                f'te.read inside "{owner.compute_name}" reads that compute\'s own result'
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The element a te.compute/te.reduce body (or epilogue) produces.

    te.yield %v : f32
    """

    name = "te.yield"
    value = operand_def()
    traits = traits_def(IsTerminator(), HasParent(ComputeOp, ReduceOp), Pure())
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue | Operation):
        super().__init__(operands=[value])


# ------------------------------------------------------------------------ builders

IDENTITY = {"add": 0.0, "mul": 1.0, "max": -pymath.inf, "min": pymath.inf}

_FLOAT_CMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_INT_CMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}


def is_unsigned(ty: Attribute) -> bool:
    """Whether `ty` is an unsigned integer type (ui8 ... ui64: ONNX's uint types)."""
    return isa(ty, IntegerType) and ty.signedness.data == Signedness.UNSIGNED


def int_limit(ty: Attribute, upper: bool) -> int:
    """The largest (`upper`) or smallest value of an integer type (ui8: 255 / 0)."""
    assert isa(ty, IntegerType)
    width = ty.bitwidth
    if width == 1:
        return int(upper)
    if is_unsigned(ty):
        return 2**width - 1 if upper else 0
    return 2 ** (width - 1) - 1 if upper else -(2 ** (width - 1))


# the float functions of one operand `BodyBuilder.math` emits, by name
MATH_FUNCTIONS: dict[str, Callable[[SSAValue], Operation]] = {
    "sin": xmath.SinOp,
    "cos": xmath.CosOp,
    "tan": xmath.TanOp,
    "asin": xmath.AsinOp,
    "acos": xmath.AcosOp,
    "atan": xmath.AtanOp,
    "sinh": xmath.SinhOp,
    "cosh": xmath.CoshOp,
    "asinh": xmath.AsinhOp,
    "acosh": xmath.AcoshOp,
    "atanh": xmath.AtanhOp,
    "floor": xmath.FloorOp,
    "ceil": xmath.CeilOp,
    "roundeven": xmath.RoundEvenOp,
}

Value = SSAValue | float | int


def _index_block(rank: int, prefix: str) -> Block:
    block = Block(arg_types=[index] * rank)
    for n, arg in enumerate(block.args):
        arg.name_hint = f"{prefix}{n}"
    return block


# an arith binary op class, float or integer (`arith.AddfOp`, `arith.AddiOp`)
_BinaryOpType = Callable[[SSAValue, SSAValue], Operation]


def is_float(ty: Attribute) -> bool:
    return not isinstance(ty, IntegerType | IndexType)


class BodyBuilder:
    """Appends arith/math/te ops to a body block; each method returns the new value.

    Operands may be Python numbers: they become constants of the other operand's type.
    Arithmetic on `index` values folds Python-int operands (`b.mul(i, 1)` is `i`), so
    index expressions stay as short as the lowering that wrote them.
    """

    def __init__(self, block: Block):
        self.block = block

    def emit(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    # ---- constants and conversion ------------------------------------------------
    # set by a lowering over symbolic shapes (graph-to-te): materialises a SymDim operand
    # (a stride or bound that is a dim of the call) as an index value in the body
    symbolic: ClassVar[Callable[[BodyBuilder, SymDim], SSAValue] | None] = None

    def const(self, value: float | int | bool, ty: Attribute = f32) -> SSAValue:
        if isinstance(value, SymDim) and BodyBuilder.symbolic is not None:
            return self.cast(BodyBuilder.symbolic(self, value), ty)
        if isinstance(ty, IndexType):
            return self.emit(arith.ConstantOp(IntegerAttr(int(value), ty)))
        if is_integer_type(ty):
            if isinstance(value, float) and pymath.isinf(value):  # (max-pool's padding)
                value = int_limit(ty, value > 0)
            if isa(ty, IntegerType) and is_unsigned(ty):
                # arith.constant is signless: the same bits, bitcast to the unsigned type
                width = ty.bitwidth
                bits = (int(value) + 2 ** (width - 1)) % 2**width - 2 ** (width - 1)
                signless = self.emit(arith.ConstantOp(IntegerAttr(bits, IntegerType(width))))
                return self.emit(arith.BitcastOp(signless, ty))
            return self.emit(arith.ConstantOp(IntegerAttr(int(value), ty)))
        return self.emit(arith.ConstantOp(FloatAttr(float(value), float_type(ty))))

    def index(self, value: int) -> SSAValue:
        return self.const(value, index)

    def as_value(self, v: Value, ty: Attribute) -> SSAValue:
        return v if isinstance(v, SSAValue) else self.const(v, ty)

    def _pair(self, a: Value, b: Value) -> tuple[SSAValue, SSAValue]:
        ty = a.type if isinstance(a, SSAValue) else b.type if isinstance(b, SSAValue) else index
        return self.as_value(a, ty), self.as_value(b, ty)

    def cast(self, v: SSAValue, to: Attribute) -> SSAValue:
        """Numeric conversion (fp<->fp, int<->fp, int<->int, int<->index; i1 is unsigned)."""
        src = v.type
        if src == to:
            return v
        if isinstance(src, IndexType) and is_float(to):
            return self.cast(self.cast(v, i64), to)
        if isinstance(to, IndexType) and is_float(src):
            return self.cast(self.cast(v, i64), to)
        if isinstance(src, IndexType) or isinstance(to, IndexType):
            return self.emit(arith.IndexCastOp(v, to))
        if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
            if src.bitwidth < to.bitwidth:
                return self.emit(arith.ExtFOp(v, to))
            return self.emit(arith.TruncFOp(v, to))
        if isinstance(src, AnyFloat) and is_integer_type(to):
            if to == i1:
                return self.cmp("ne", v, 0.0)
            return self.emit((arith.FPToUIOp if is_unsigned(to) else arith.FPToSIOp)(v, to))
        if is_integer_type(src) and isinstance(to, AnyFloat):
            if src == i1 or is_unsigned(src):
                return self.emit(arith.UIToFPOp(v, to))
            return self.emit(arith.SIToFPOp(v, to))
        if is_integer_type(src) and is_integer_type(to):
            if to == i1:
                return self.cmp("ne", v, 0)
            if src.bitwidth < to.bitwidth:
                op = arith.ExtUIOp if src == i1 or is_unsigned(src) else arith.ExtSIOp
                return self.emit(op(v, to))
            if src.bitwidth == to.bitwidth:  # i8 <-> ui8: the same bits
                return self.emit(arith.BitcastOp(v, to))
            return self.emit(arith.TruncIOp(v, to))
        raise VerifyException(f"cannot convert {src} to {to}")

    # ---- tensor access -------------------------------------------------------------
    def read(self, t: SSAValue | Operation, idx: Sequence[Value]) -> SSAValue:
        return self.emit(ReadOp(t, [self.as_value(i, index) for i in idx]))

    # ---- arithmetic (float, integer, index) ---------------------------------------
    def _binary(self, a: Value, b: Value, fop: _BinaryOpType, iop: _BinaryOpType) -> SSAValue:
        x, y = self._pair(a, b)
        return self.emit((fop if is_float(x.type) else iop)(x, y))

    def add(self, a: Value, b: Value) -> SSAValue:
        if b == 0 and isinstance(a, SSAValue) and not is_float(a.type):
            return a
        if a == 0 and isinstance(b, SSAValue) and not is_float(b.type):
            return b
        return self._binary(a, b, arith.AddfOp, arith.AddiOp)

    def sub(self, a: Value, b: Value) -> SSAValue:
        if b == 0 and isinstance(a, SSAValue) and not is_float(a.type):
            return a
        return self._binary(a, b, arith.SubfOp, arith.SubiOp)

    def mul(self, a: Value, b: Value) -> SSAValue:
        if b == 1 and isinstance(a, SSAValue) and not is_float(a.type):
            return a
        if a == 1 and isinstance(b, SSAValue) and not is_float(b.type):
            return b
        return self._binary(a, b, arith.MulfOp, arith.MuliOp)

    def div(self, a: Value, b: Value) -> SSAValue:
        """Float division, or signed integer division truncating toward zero (as C)."""
        if b == 1 and isinstance(a, SSAValue) and not is_float(a.type):
            return a
        return self._binary(a, b, arith.DivfOp, arith.DivSIOp)

    def rem(self, a: Value, b: Value) -> SSAValue:
        """Integer remainder with the sign of the dividend (as C's %)."""
        return self.emit(arith.RemSIOp(*self._pair(a, b)))

    def max(self, a: Value, b: Value) -> SSAValue:
        return self._binary(a, b, arith.MaximumfOp, arith.MaxSIOp)

    def min(self, a: Value, b: Value) -> SSAValue:
        return self._binary(a, b, arith.MinimumfOp, arith.MinSIOp)

    def neg(self, a: SSAValue) -> SSAValue:
        if is_float(a.type):
            return self.emit(arith.NegfOp(a))
        return self.sub(self.const(0, a.type), a)

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.AndIOp(a, b))

    def or_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.OrIOp(a, b))

    def combine(self, combiner: str, a: Value, b: Value) -> SSAValue:
        return getattr(self, combiner)(a, b)

    # ---- math -----------------------------------------------------------------------
    def exp(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.ExpOp(a))

    def log(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.LogOp(a))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.SqrtOp(a))

    def rsqrt(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.RsqrtOp(a))

    def tanh(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.TanhOp(a))

    def erf(self, a: SSAValue) -> SSAValue:
        return self.emit(xmath.ErfOp(a))

    def math(self, fn: str, a: SSAValue) -> SSAValue:
        """A one-operand `math` dialect function of a float: sin, cos, ..., floor, ceil,
        roundeven (`MATH_FUNCTIONS`)."""
        return self.emit(MATH_FUNCTIONS[fn](a))

    def abs(self, a: SSAValue) -> SSAValue:
        if is_float(a.type):
            return self.emit(xmath.AbsFOp(a))
        return self.emit(xmath.AbsIOp(a))

    def pow(self, a: SSAValue, b: Value) -> SSAValue:
        x, y = self._pair(a, b)
        if is_float(x.type):
            return self.emit(xmath.PowFOp(x, y))
        return self.emit(xmath.IPowIOp(x, y))

    # ---- predicates and selection ---------------------------------------------------
    def cmp(self, pred: str, a: Value, b: Value) -> SSAValue:
        """pred is one of eq ne lt le gt ge (ordered for floats, signed for integers)."""
        x, y = self._pair(a, b)
        if is_float(x.type):
            return self.emit(arith.CmpfOp(x, y, _FLOAT_CMP[pred]))
        return self.emit(arith.CmpiOp(x, y, _INT_CMP[pred]))

    def select(self, cond: SSAValue, a: Value, b: Value) -> SSAValue:
        x, y = self._pair(a, b)
        return self.emit(arith.SelectOp(cond, x, y))

    def in_bounds(self, i: SSAValue, size: int) -> SSAValue:
        """0 <= i < size, on a signed index."""
        return self.and_(self.cmp("ge", i, 0), self.cmp("lt", i, size))

    def if_(
        self,
        cond: SSAValue,
        then: Callable[[BodyBuilder], Value],
        otherwise: Callable[[BodyBuilder], Value],
        ty: Attribute,
    ) -> SSAValue:
        """scf.if yielding one value of type `ty`: only the taken branch is evaluated
        (a read under a bounds check never goes out of bounds)."""
        blocks: list[Region] = []
        for fn in (then, otherwise):
            block = Block()
            sub = BodyBuilder(block)
            block.add_op(scf.YieldOp(sub.as_value(fn(sub), ty)))
            blocks.append(Region(block))
        return self.emit(scf.IfOp(cond, [ty], blocks[0], blocks[1]))


Te = Dialect("te", [ComputeOp, ReduceOp, ReadOp, YieldOp], [CombinerAttr])
