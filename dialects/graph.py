# pyright: strict
"""The `graph` dialect: one deep-learning operator on immutable tensors per op.

Every op takes and returns builtin `tensor` values with static shapes. Each op knows
how to infer its result type from its operands and properties (`infer_type`); the
verifier checks the declared result type against that inference, so a wrong shape
is an error that names both shapes.

An op's parameters are typed properties (`prop_def`, as in xDSL's `arith`), read in
Python through typed accessors with the defaults applied (`conv.strides -> (2, 2)`,
`softmax.axis -> -1`). Ops share one textual form, the properties in the attribute
dictionary (a property at its default value is left out):

    %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x3x3xf32>

Build ops from Python with `Op.make(*operands, **values)`: it converts Python values
to properties, infers the result type and returns the op.

The reference semantics of each op (numpy) live in `dlpc.reference.graph`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypeAlias, TypeGuard, TypeVar, cast

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I64,
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
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
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    AnyAttr,
    AttrConstraint,
    BaseAttr,
    IRDLOperation,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    VarConstraint,
    attr_def,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.traits import ConstantLike, HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa

from dlpc.dialects import symdims
from dlpc.dialects.sizes import MAX_TENSOR_BYTES as MAX_TENSOR_BYTES
from dlpc.dialects.sizes import element_bytes as element_bytes
from dlpc.dialects.sizes import size_error

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# --------------------------------------------------------------------------- types

Shape = tuple[int, ...]


def check_size(shape: Sequence[int], element_type: Attribute) -> None:
    """Raise VerifyException for a tensor over `MAX_TENSOR_BYTES`."""
    message = size_error(shape, element_type)
    if message:
        raise VerifyException(message)


def tensor_type(shape: Sequence[int], element_type: Attribute = f32) -> TensorType:
    """A tensor type; over `MAX_TENSOR_BYTES` it is a VerifyException. A symbolic dim
    (`dialects.symdims.SymDim`) becomes `?`, its expression in the encoding."""
    if symdims.is_symbolic(shape):
        dims = [DYNAMIC_INDEX if isinstance(d, symdims.SymDim) else d for d in shape]
        texts = [StringAttr(str(d)) for d in shape if isinstance(d, symdims.SymDim)]
        check_size(dims, element_type)
        return TensorType(element_type, dims, ArrayAttr(texts))
    check_size(shape, element_type)
    return TensorType(element_type, list(shape))


def shape_of(value: SSAValue | Attribute) -> Shape:
    """The shape, a symbolic dim (`?`) as the SymDim its type's encoding names (one the
    encoding does not name is the anonymous symbol `?`)."""
    ty = value.type if isinstance(value, SSAValue) else value
    if not _is_tensor(ty):
        raise VerifyException(f"expected a tensor, got {ty}")
    shape = ty.get_shape()
    if DYNAMIC_INDEX not in shape:
        return shape
    return cast(Shape, symdims.shape_from_type(shape, ty.encoding))


def _is_tensor(ty: Attribute) -> TypeGuard[TensorType[Attribute]]:
    """`isa(ty, TensorType[Attribute])`, which builds its constraint on every call: a
    third of the graph verifier's time (every tensor's element type is an Attribute)."""
    return isinstance(ty, TensorType)


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    ty = value.type if isinstance(value, SSAValue) else value
    assert _is_tensor(ty)
    return ty.get_element_type()


def is_float_type(ty: Attribute) -> bool:
    return isinstance(ty, Float16Type | Float32Type | Float64Type)


def fmt_shape(shape: Sequence[int]) -> str:
    """`2x8`; a symbolic dim in braces: `{batch}x{2*seq}x64`."""
    if not shape:
        return "scalar"
    return "x".join(f"{{{d}}}" if isinstance(d, symdims.SymDim) else str(d) for d in shape)


def ssa_name_hint(name: str) -> str | None:
    """An SSA name hint from model text (xDSL prints names of [A-Za-z0-9_$.-] only):
    `/Constant_8_output_0` -> `_Constant_8_output_0`, `ﬁ` -> `_`, `7up` -> None."""
    hint = "".join(c if c.isascii() and c.isalnum() or c in "_$.-" else "_" for c in name)
    return hint if hint and not hint[0].isdigit() else None


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy broadcasting; raises VerifyException naming the shapes."""
    rank = max(len(s) for s in shapes)
    out: list[int] = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            names = ", ".join(fmt_shape(s) for s in shapes)
            raise VerifyException(f"shapes {names} cannot be broadcast together")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise VerifyException(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


# ---------------------------------------------------------------------- properties
#
# Every op parameter is one of six kinds of property, each with its constraint and the
# Python value its accessor gives: an int (i64), ints (array<i64>), a float (f64), a bool,
# a string, an element type. `make` and the frontends convert Python values by kind.

Kind = Literal["int", "ints", "float", "bool", "str", "type"]
PropValue: TypeAlias = "int | float | bool | str | tuple[int, ...] | Attribute"

INT = IntegerAttr.constr(i64)
INTS = DenseArrayBase.constr(i64)
FLOAT: AttrConstraint[FloatAttr[AnyFloat]] = BaseAttr(FloatAttr)
BOOL = IntegerAttr.constr(i1)
STR = BaseAttr(StringAttr)
TYPE = BaseAttr(TypeAttribute)
KINDS: tuple[tuple[AttrConstraint[Any], Kind], ...] = (
    (INT, "int"),
    (INTS, "ints"),
    (FLOAT, "float"),
    (BOOL, "bool"),
    (STR, "str"),
    (TYPE, "type"),
)

# the element types an op's first operand may have: "float" (exp, softmax, ...: math
# functions of floats), "numeric" (a mean: not i1), "integer" (bit operations: i8 ... i64,
# ui8 ... ui64), or None (any)
Elements: TypeAlias = Literal["float", "numeric", "integer"] | None

# the default of a property the op cannot do without (`make` and the builder check it)
REQUIRED = object()


# what an int or bool property holds (xDSL types IntegerAttr.constr(i64) this widely)
IntProp: TypeAlias = IntegerAttr[IntegerType | IndexType]


def int_prop(name: str, default: int) -> IntProp:
    return prop_def(INT, IntegerAttr(default, i64), prop_name=name)


def ints_prop(name: str, default: Sequence[int] | None = None) -> DenseArrayBase[I64]:
    value = None if default is None else DenseArrayBase.from_list(i64, default)
    return prop_def(INTS, value, prop_name=name)


def float_prop(name: str, default: float) -> FloatAttr[AnyFloat]:
    return prop_def(FLOAT, FloatAttr(default, f64), prop_name=name)


def bool_prop(name: str, default: bool) -> IntProp:
    return prop_def(BOOL, IntegerAttr.from_bool(default), prop_name=name)


def str_prop(name: str, default: str | None = None) -> StringAttr:
    return prop_def(STR, None if default is None else StringAttr(default), prop_name=name)


def type_prop(name: str) -> TypeAttribute:
    return prop_def(TYPE, prop_name=name)


def sym_ints_attr(values: Sequence[Any]) -> tuple[list[int], ArrayAttr[StringAttr]]:
    """An ints property with symbolic entries: each is `?` (DYNAMIC_INDEX) in the property,
    its expression in order in the op's `sym_<name>` attribute, as in a tensor type's
    encoding: `{shape = array<i64: 0, ?>, sym_shape = ["seq"]}` (graph-bind-dims writes
    the values once the dims are bound)."""
    ints = [DYNAMIC_INDEX if isinstance(v, symdims.SymDim) else int(v) for v in values]
    texts = [StringAttr(str(v)) for v in values if isinstance(v, symdims.SymDim)]
    return ints, ArrayAttr(texts)


def sym_ints(op: Operation, name: str, values: tuple[int, ...]) -> tuple[int, ...]:
    """An ints property's values with its `?` entries read from `sym_<name>` (SymDims)."""
    if DYNAMIC_INDEX not in values:
        return values
    return cast(tuple[int, ...], symdims.from_marked(values, op.attributes.get(f"sym_{name}")))


def to_attr(kind: str, value: Any) -> Attribute:
    """The property of `kind` holding the Python value `value`."""
    if kind == "int":
        return IntegerAttr(int(value), i64)
    if kind == "ints":
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if kind == "float":
        return FloatAttr(float(value), f64)
    if kind == "bool":
        return IntegerAttr.from_bool(bool(value))
    if kind == "str":
        return StringAttr(str(value))
    if kind == "type":
        assert isinstance(value, Attribute)
        return value
    raise AssertionError(f"unknown property kind {kind}")


def from_attr(attr: Attribute) -> PropValue:
    """The Python value of a property (its kind follows from the attribute)."""
    if isa(attr, IntegerAttr[IntegerType]):
        return bool(attr.value.data) if attr.type == i1 else attr.value.data
    if isa(attr, DenseArrayBase[IntegerType]):
        return attr.get_values()
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    return attr


def _kind(constraint: AttrConstraint[Any]) -> Kind:
    for known, kind in KINDS:
        if constraint == known:
            return kind
    raise AssertionError(f"graph property of unknown kind {constraint}")


# ------------------------------------------------------------------------ base op


class GraphOp(IRDLOperation):
    """Common base: tensor operands, properties, one tensor result, shape inference."""

    # {property name: (kind, Python default or REQUIRED)}, derived from the properties by
    # `graph_op`: what `make` and the frontends convert Python keywords with
    ATTRS: ClassVar[Mapping[str, tuple[Kind, object]]] = {}
    # operand names for diagnostics and the builder; "*name" means variadic
    OPERANDS: ClassVar[tuple[str, ...]] = ("input",)
    # names of optional trailing operands (e.g. conv2d bias)
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    ELEMENTS: ClassVar[Elements] = None

    inputs = var_operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    # properties print in the attribute dictionary, as MLIR allows, a default left out:
    # `{strides = array<i64: 2, 2>}` (the generic form keeps them apart: `<{...}>`)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` functional-type($inputs, $output)"

    def has_default_properties(self) -> bool:
        """Whether every property holds its default (as `make` without keywords builds)."""
        defs = self.get_irdl_definition().properties
        return all(self.properties.get(n) == d.default_value for n, d in defs.items())

    def prop_values(self) -> dict[str, PropValue]:
        """Every property as its Python value (the generic face; prefer the accessors)."""
        return {name: from_attr(attr) for name, attr in self.properties.items()}

    @property
    def in_shapes(self) -> list[Shape]:
        return [shape_of(v) for v in self.operands]

    @property
    def out_shape(self) -> Shape:
        return shape_of(self.results[0])

    @property
    def out_type(self) -> TensorType[Attribute]:
        ty = self.results[0].type
        assert _is_tensor(ty)
        return ty

    # ---- inference -------------------------------------------------------------
    def infer_shape(self, shapes: list[Shape]) -> Shape:
        """Result shape from operand shapes; raise VerifyException on bad input."""
        raise NotImplementedError

    def infer_element_type(self) -> Attribute:
        return element_type_of(self.operands[0])

    def infer_type(self) -> TensorType:
        return tensor_type(self.infer_shape(self.in_shapes), self.infer_element_type())

    def verify_(self) -> None:
        self.check_arity()
        self.check_elements()
        for v in self.operands:
            ty = v.type
            if not _is_tensor(ty):
                raise VerifyException(f"{self.name} expects tensor operands, got {ty}")
            message = size_error(ty.get_shape(), ty.get_element_type())
            if message:
                raise VerifyException(f"{self.name}: operand {message}")
        try:
            expected = self.infer_type()
        except (VerifyException, symdims.SymbolicError) as e:  # (symbolic shapes it cannot take)
            if str(e).startswith(self.name):
                raise
            raise VerifyException(f"{self.name}: {e}") from e
        actual = self.results[0].type
        if not _is_tensor(actual):
            raise VerifyException(f"{self.name} must produce a tensor, got {actual}")
        if shape_of(expected) != shape_of(actual):
            raise VerifyException(
                f"{self.name}: inferred result shape {fmt_shape(shape_of(expected))} "
                f"but result type has shape {fmt_shape(shape_of(actual))}"
            )
        if expected.get_element_type() != actual.get_element_type():
            raise VerifyException(
                f"{self.name}: inferred element type {expected.get_element_type()} "
                f"but result type has {actual.get_element_type()}"
            )

    def check_elements(self) -> None:
        if self.ELEMENTS is None or not self.operands:
            return
        elt = self.operands[0].type
        elt = elt.get_element_type() if _is_tensor(elt) else elt
        if self.ELEMENTS == "float" and not is_float_type(elt):
            raise VerifyException(f"{self.name} needs a floating-point operand, got {elt}")
        if self.ELEMENTS == "numeric" and elt == i1:
            raise VerifyException(f"{self.name} needs a numeric operand, got {elt}")
        if self.ELEMENTS == "integer" and not (isa(elt, IntegerType) and elt.bitwidth > 1):
            raise VerifyException(f"{self.name} needs an integer operand, got {elt}")

    def check_arity(self) -> None:
        if self.OPERANDS and self.OPERANDS[0].startswith("*"):
            if len(self.operands) < 1:
                raise VerifyException(f"{self.name} expects at least one operand")
            return
        lo = len(self.OPERANDS) - len(self.OPTIONAL)
        hi = len(self.OPERANDS)
        n = len(self.operands)
        if not lo <= n <= hi:
            want = str(hi) if lo == hi else f"{lo} to {hi}"
            raise VerifyException(f"{self.name} expects {want} operands, got {n}")

    # ---- builder -----------------------------------------------------------------
    @classmethod
    def make(cls, *operands: SSAValue | Operation, **values: Any) -> Self:
        """Build with Python property values (None: the default); the result type is
        inferred."""
        operand_values = [SSAValue.get(o) for o in operands]
        properties: dict[str, Attribute] = {}
        attributes: dict[str, Attribute] = {}
        for name, value in values.items():
            if name not in cls.ATTRS:
                raise VerifyException(f"{cls.name} has no attribute '{name}'")
            if cls.ATTRS[name][0] == "ints" and value is not None and symdims.is_symbolic(value):
                value, attributes[f"sym_{name}"] = sym_ints_attr(value)
            if value is not None:
                properties[name] = to_attr(cls.ATTRS[name][0], value)
        for name, (_, default) in cls.ATTRS.items():
            if default is REQUIRED and name not in properties:
                raise VerifyException(f"{cls.name} requires attribute '{name}'")
        probe = cls.create(
            operands=operand_values,
            result_types=[f32],
            properties=properties,
            attributes=attributes,
        )
        try:
            probe.check_arity()
            result_type = probe.infer_type()
        finally:
            probe.drop_all_references()
        return cls.create(
            operands=operand_values,
            result_types=[result_type],
            properties=properties,
            attributes=attributes,
        )


_GraphOpT = TypeVar("_GraphOpT", bound=GraphOp)


def _parse_naming_op(op: type[_GraphOpT]) -> None:
    """The declarative format checks a property's constraint while it parses; its error
    (`"x" should be of base attribute float`) gets the op's name."""
    format_parse = op.parse

    def parse(cls: type[_GraphOpT], parser: Parser) -> _GraphOpT:
        try:
            return format_parse(parser)
        except VerifyException as e:
            raise VerifyException(f"{cls.name}: {e}") from e

    # (pyright reads a class's methods as fixed; the wrapper replaces the format's parse)
    op.parse = classmethod(parse)  # pyright: ignore[reportAttributeAccessIssue]


def graph_op(cls: type[_GraphOpT]) -> type[_GraphOpT]:
    """Register a GraphOp subclass as an op and derive its `ATTRS` from its properties."""
    op = irdl_op_definition(cls)
    _parse_naming_op(op)
    op.ATTRS = {
        name: (_kind(d.constr), REQUIRED if d.default_value is None else from_attr(d.default_value))
        for name, d in op.get_irdl_definition().properties.items()
    }
    return op


# ------------------------------------------------------------------ constants/params


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A constant tensor.

    %c = graph.constant dense<1.0> : tensor<4xf32>
    """

    name = "graph.constant"
    _T: ClassVar = VarConstraint("T", AnyAttr())
    value = prop_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (_T, AnyAttr())))
    output = result_def(_T)
    traits = traits_def(Pure(), ConstantLike())
    assembly_format = "attr-dict $value"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    @staticmethod
    def from_numpy(array: npt.ArrayLike) -> ConstantOp:
        import numpy as np

        array = np.asarray(array)
        elt = NUMPY_TO_ELT[array.dtype.name]
        check_size(array.shape, elt)
        values: list[Any] = array.reshape(-1).tolist()
        if isinstance(elt, IntegerType):  # (int and bool arrays)
            ints = [int(v) for v in values]
            int_type = TensorType(elt, array.shape)
            return ConstantOp(DenseIntOrFPElementsAttr.from_list(int_type, ints))
        floats = [float(v) for v in values]
        float_type = TensorType(elt, array.shape)
        return ConstantOp(DenseIntOrFPElementsAttr.from_list(float_type, floats))

    def to_numpy(self) -> np.ndarray[Any, Any]:
        import numpy as np

        ty = self.output.type
        assert _is_tensor(ty)
        dtype = numpy_dtype(ty.get_element_type())
        vals = self.value.get_values()
        arr = np.asarray(vals, dtype=dtype)
        if arr.size == 1 and math.prod(ty.get_shape()) != 1:
            arr = np.full(ty.get_shape(), arr.reshape(-1)[0], dtype=dtype)
        return arr.reshape(ty.get_shape())

    def verify_(self) -> None:
        # (the value's type is the result's: the constraint variable T checks it first)
        _check_result_size(self)


NUMPY_TO_ELT: dict[str, IntegerType | AnyFloat] = {
    "float32": f32,
    "float64": f64,
    "float16": Float16Type(),
    "int64": i64,
    "int32": IntegerType(32),
    "int8": IntegerType(8),
    "int16": IntegerType(16),
    "uint8": IntegerType(8, Signedness.UNSIGNED),
    "uint16": IntegerType(16, Signedness.UNSIGNED),
    "uint32": IntegerType(32, Signedness.UNSIGNED),
    "uint64": IntegerType(64, Signedness.UNSIGNED),
    "bool": i1,
}
ELT_TO_NUMPY: dict[tuple[str, int], str] = {
    ("Float32Type", 32): "float32",
    ("Float64Type", 64): "float64",
    ("Float16Type", 16): "float16",
    ("IntegerType", 64): "int64",
    ("IntegerType", 32): "int32",
    ("IntegerType", 8): "int8",
    ("IntegerType", 16): "int16",
    ("IntegerType", 1): "bool",
}


def numpy_dtype(elt: Attribute) -> str:
    """The numpy dtype name of a tensor element type."""
    if isa(elt, IntegerType):
        if elt.signedness.data == Signedness.UNSIGNED:  # ui8 ... ui64: uint8 ... uint64
            return f"uint{elt.width.data}"
        return ELT_TO_NUMPY["IntegerType", elt.width.data]
    if isinstance(elt, Float16Type | Float32Type | Float64Type):
        return ELT_TO_NUMPY[type(elt).__name__, elt.bitwidth]
    raise VerifyException(f"element type {elt} has no numpy dtype")


@irdl_op_definition
class ParamOp(IRDLOperation):
    """A named model parameter (weight) whose value is bound at compile/run time.

    %w = graph.param "fc1.weight" : tensor<256x784xf32>
    """

    name = "graph.param"
    param_name = attr_def(StringAttr, attr_name="name")
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$name attr-dict `:` type($output)"

    def __init__(self, name: str, ty: TensorType):
        super().__init__(attributes={"name": StringAttr(name)}, result_types=[ty])

    @property
    def pname(self) -> str:
        return self.param_name.data

    def verify_(self) -> None:
        _check_result_size(self)


def _check_result_size(op: Operation) -> None:
    ty = op.results[0].type
    if _is_tensor(ty):
        message = size_error(ty.get_shape(), ty.get_element_type())
        if message:
            raise VerifyException(f"{op.name}: {message}")


# ------------------------------------------------------------------- elementwise


class UnaryOp(GraphOp):
    """Elementwise op of one operand: the result has its shape."""

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        return shapes[0]


class FloatUnaryOp(UnaryOp):
    """Elementwise math function of floats (C's expf, tanhf, ...: no integer form)."""

    ELEMENTS: ClassVar[Elements] = "float"


@graph_op
class NegOp(UnaryOp):
    """Elementwise -x.

    %y = graph.neg %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.neg"


@graph_op
class AbsOp(UnaryOp):
    """Elementwise |x|.

    %y = graph.abs %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.abs"


@graph_op
class ExpOp(FloatUnaryOp):
    """Elementwise e**x.

    %y = graph.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.exp"


@graph_op
class LogOp(FloatUnaryOp):
    """Elementwise natural log.

    %y = graph.log %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.log"


@graph_op
class SqrtOp(FloatUnaryOp):
    """Elementwise square root.

    %y = graph.sqrt %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.sqrt"


@graph_op
class RsqrtOp(FloatUnaryOp):
    """Elementwise 1/sqrt(x).

    %y = graph.rsqrt %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.rsqrt"


@graph_op
class TanhOp(FloatUnaryOp):
    """Elementwise tanh.

    %y = graph.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.tanh"


@graph_op
class SigmoidOp(FloatUnaryOp):
    """Elementwise 1/(1+e**-x).

    %y = graph.sigmoid %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.sigmoid"


@graph_op
class ErfOp(FloatUnaryOp):
    """Elementwise Gauss error function.

    %y = graph.erf %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.erf"


@graph_op
class SinOp(FloatUnaryOp):
    """Elementwise sin x.

    %y = graph.sin %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.sin"


@graph_op
class CosOp(FloatUnaryOp):
    """Elementwise cos x.

    %y = graph.cos %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.cos"


@graph_op
class TanOp(FloatUnaryOp):
    """Elementwise tan x.

    %y = graph.tan %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.tan"


@graph_op
class AsinOp(FloatUnaryOp):
    """Elementwise arcsine.

    %y = graph.asin %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.asin"


@graph_op
class AcosOp(FloatUnaryOp):
    """Elementwise arccosine.

    %y = graph.acos %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.acos"


@graph_op
class AtanOp(FloatUnaryOp):
    """Elementwise arctangent.

    %y = graph.atan %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.atan"


@graph_op
class SinhOp(FloatUnaryOp):
    """Elementwise sinh x.

    %y = graph.sinh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.sinh"


@graph_op
class CoshOp(FloatUnaryOp):
    """Elementwise cosh x.

    %y = graph.cosh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.cosh"


@graph_op
class AsinhOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic sine.

    %y = graph.asinh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.asinh"


@graph_op
class AcoshOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic cosine.

    %y = graph.acosh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.acosh"


@graph_op
class AtanhOp(FloatUnaryOp):
    """Elementwise inverse hyperbolic tangent.

    %y = graph.atanh %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.atanh"


@graph_op
class FloorOp(FloatUnaryOp):
    """Elementwise floor: the largest integer <= x.

    %y = graph.floor %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.floor"


@graph_op
class CeilOp(FloatUnaryOp):
    """Elementwise ceiling: the smallest integer >= x.

    %y = graph.ceil %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.ceil"


@graph_op
class RoundOp(FloatUnaryOp):
    """Elementwise nearest integer, halves to even (ONNX Round, numpy.round).

    %y = graph.round %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.round"


@graph_op
class BitNotOp(UnaryOp):
    """Elementwise bitwise ~x, of integers.

    %y = graph.bit_not %x : (tensor<4xi32>) -> tensor<4xi32>
    """

    name = "graph.bit_not"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class ReluOp(UnaryOp):
    """Elementwise max(x, 0).

    %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.relu"


@graph_op
class GeluOp(FloatUnaryOp):
    """Elementwise GELU; approximate = "none" (erf) or "tanh".

    %y = graph.gelu %x {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.gelu"
    approximate_attr = str_prop("approximate", "none")

    @property
    def approximate(self) -> str:
        return self.approximate_attr.data


@graph_op
class LeakyReluOp(UnaryOp):
    """x if x > 0 else alpha * x.

    %y = graph.leaky_relu %x {alpha = 2.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.leaky_relu"
    alpha_attr = float_prop("alpha", 0.01)

    @property
    def alpha(self) -> float:
        return self.alpha_attr.value.data


@graph_op
class ClipOp(UnaryOp):
    """min(max(x, min), max); a missing bound is unbounded.

    %y = graph.clip %x {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.clip"
    min_attr = float_prop("min", -math.inf)
    max_attr = float_prop("max", math.inf)

    @property
    def min(self) -> float:
        return self.min_attr.value.data

    @property
    def max(self) -> float:
        return self.max_attr.value.data


@graph_op
class CastOp(UnaryOp):
    """Elementwise conversion to element type `to`.

    %y = graph.cast %x {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
    """

    name = "graph.cast"
    to_attr = type_prop("to")

    @property
    def to(self) -> Attribute:
        return self.to_attr

    def infer_element_type(self) -> Attribute:
        return self.to


@graph_op
class BitcastOp(UnaryOp):
    """Elementwise reinterpretation of the bits as element type `to`, of the same width
    (ONNX BitCast; f32 <-> i32, i8 <-> ui8, ...).

    %y = graph.bitcast %x {to = i32} : (tensor<4xf32>) -> tensor<4xi32>
    """

    name = "graph.bitcast"
    to_attr = type_prop("to")

    @property
    def to(self) -> Attribute:
        return self.to_attr

    def infer_element_type(self) -> Attribute:
        src = element_type_of(self.operands[0])
        widths = [_bit_width(t) for t in (src, self.to)]
        if None in widths or widths[0] != widths[1] or widths[0] == 1:
            raise VerifyException(
                f"{self.name} needs element types of one width (not i1), got {src} and {self.to}"
            )
        return self.to


def _bit_width(ty: Attribute) -> int | None:
    if isa(ty, IntegerType):
        return ty.bitwidth
    if isinstance(ty, Float16Type | Float32Type | Float64Type):
        return ty.bitwidth
    return None


class BinaryOp(GraphOp):
    """Elementwise binary op with numpy broadcasting; both operands of one element type."""

    OPERANDS: ClassVar[tuple[str, ...]] = ("lhs", "rhs")

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        return broadcast_shapes(*shapes)

    def verify_(self) -> None:
        if len(self.operands) == 2:
            a, b = (element_type_of(v) for v in self.operands)
            if a != b:
                raise VerifyException(f"{self.name} operands have element types {a} and {b}")
        super().verify_()


@graph_op
class AddOp(BinaryOp):
    """Elementwise lhs + rhs (broadcasting).

    %z = graph.add %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.add"


@graph_op
class SubOp(BinaryOp):
    """Elementwise lhs - rhs (broadcasting).

    %z = graph.sub %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.sub"


@graph_op
class MulOp(BinaryOp):
    """Elementwise lhs * rhs (broadcasting).

    %z = graph.mul %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.mul"


@graph_op
class DivOp(BinaryOp):
    """Elementwise lhs / rhs (broadcasting).

    %z = graph.div %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.div"


@graph_op
class MaxOp(BinaryOp):
    """Elementwise maximum (broadcasting).

    %z = graph.max %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.max"


@graph_op
class MinOp(BinaryOp):
    """Elementwise minimum (broadcasting).

    %z = graph.min %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.min"


@graph_op
class PowOp(BinaryOp):
    """Elementwise lhs ** rhs (broadcasting).

    %z = graph.pow %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    """

    name = "graph.pow"


@graph_op
class BitAndOp(BinaryOp):
    """Elementwise bitwise lhs & rhs, of integers (broadcasting).

    %z = graph.bit_and %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
    """

    name = "graph.bit_and"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class BitOrOp(BinaryOp):
    """Elementwise bitwise lhs | rhs, of integers (broadcasting).

    %z = graph.bit_or %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
    """

    name = "graph.bit_or"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class BitXorOp(BinaryOp):
    """Elementwise bitwise lhs ^ rhs, of integers (broadcasting).

    %z = graph.bit_xor %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
    """

    name = "graph.bit_xor"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class ShiftLeftOp(BinaryOp):
    """Elementwise lhs << rhs (bits shifted past the type's width are lost), of integers (broadcasting).

    %z = graph.shift_left %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
    """

    name = "graph.shift_left"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class ShiftRightOp(BinaryOp):
    """Elementwise lhs >> rhs (logical on unsigned types, arithmetic on signed ones), of integers (broadcasting).

    %z = graph.shift_right %x, %y : (tensor<2x4xui8>, tensor<4xui8>) -> tensor<2x4xui8>
    """

    name = "graph.shift_right"
    ELEMENTS: ClassVar[Elements] = "integer"


@graph_op
class PReluOp(GraphOp):
    """x if x > 0 else slope * x, slope broadcast against x.

    %y = graph.prelu %x, %slope : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
    """

    name = "graph.prelu"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "slope")

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        out = broadcast_shapes(*shapes)
        if out != shapes[0]:
            raise VerifyException(
                f"graph.prelu slope of shape {fmt_shape(shapes[1])} must broadcast to "
                f"input shape {fmt_shape(shapes[0])}"
            )
        return out


@graph_op
class WhereOp(GraphOp):
    """Elementwise select: cond ? lhs : rhs (broadcasting), cond is i1.

    %y = graph.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    """

    name = "graph.where"
    OPERANDS: ClassVar[tuple[str, ...]] = ("cond", "lhs", "rhs")

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        cond, lhs, rhs = (element_type_of(v) for v in self.operands)
        if cond != i1:
            raise VerifyException(f"graph.where condition must be i1, got {cond}")
        if lhs != rhs:
            raise VerifyException(f"graph.where branches have element types {lhs} and {rhs}")
        return broadcast_shapes(*shapes)

    def infer_element_type(self) -> Attribute:
        return element_type_of(self.operands[1])


@graph_op
class CompareOp(GraphOp):
    """Elementwise comparison producing i1; predicate is one of eq ne lt le gt ge.

    %m = graph.compare %a, %b {predicate = "gt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    """

    name = "graph.compare"
    OPERANDS: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    PREDICATES: ClassVar[tuple[str, ...]] = ("eq", "ne", "lt", "le", "gt", "ge")
    predicate_attr = str_prop("predicate")

    @property
    def predicate(self) -> str:
        return self.predicate_attr.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        if self.predicate not in self.PREDICATES:
            raise VerifyException(
                f"graph.compare predicate '{self.predicate}' is not one of "
                f"{', '.join(self.PREDICATES)}"
            )
        return broadcast_shapes(*shapes)

    def infer_element_type(self) -> Attribute:
        return i1


# ----------------------------------------------------------------- linear algebra


@graph_op
class MatMulOp(GraphOp):
    """Batched matrix product with numpy broadcasting of batch dims.

    transpose_a/transpose_b swap the last two dims of an operand first.
    1-D operands follow numpy.matmul (promoted, then the added dim removed).

    %c = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    """

    name = "graph.matmul"
    OPERANDS: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    transpose_a_attr = bool_prop("transpose_a", False)
    transpose_b_attr = bool_prop("transpose_b", False)

    @property
    def transpose_a(self) -> bool:
        return bool(self.transpose_a_attr.value.data)

    @property
    def transpose_b(self) -> bool:
        return bool(self.transpose_b_attr.value.data)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        a, b = shapes
        if not a or not b:
            raise VerifyException("graph.matmul operands must have rank >= 1")
        a_vec, b_vec = len(a) == 1, len(b) == 1
        a2 = (1, *a) if a_vec else a
        b2 = (*b, 1) if b_vec else b
        if self.transpose_a and not a_vec:
            a2 = (*a2[:-2], a2[-1], a2[-2])
        if self.transpose_b and not b_vec:
            b2 = (*b2[:-2], b2[-1], b2[-2])
        if a2[-1] != b2[-2]:
            raise VerifyException(
                f"graph.matmul contraction mismatch: lhs {fmt_shape(a)} has K={a2[-1]} "
                f"but rhs {fmt_shape(b)} has K={b2[-2]}"
            )
        batch = broadcast_shapes(a2[:-2], b2[:-2])
        out = (*batch, a2[-2], b2[-1])
        if a_vec:
            out = (*out[:-2], out[-1])
        if b_vec:
            out = out[:-1]
        return tuple(out)


@graph_op
class LinearOp(GraphOp):
    """Fully connected layer: y = x @ weight^T + bias (PyTorch convention).

    x: [..., in], weight: [out, in], bias: [out] (optional).

    %y = graph.linear %x, %w, %b : (tensor<1x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<1x256xf32>
    """

    name = "graph.linear"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "weight", "bias")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("bias",)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x, w = shapes[0], shapes[1]
        if len(w) != 2 or not x:
            raise VerifyException(
                f"graph.linear expects weight [out, in] and input [..., in], got "
                f"{fmt_shape(w)} and {fmt_shape(x)}"
            )
        if x[-1] != w[1]:
            raise VerifyException(
                f"graph.linear input {fmt_shape(x)} has {x[-1]} features but weight "
                f"{fmt_shape(w)} expects {w[1]}"
            )
        if len(shapes) == 3 and shapes[2] not in ((w[0],), (1, w[0]), ()):
            raise VerifyException(
                f"graph.linear bias {fmt_shape(shapes[2])} does not match {w[0]} outputs"
            )
        return (*x[:-1], w[0])


# ------------------------------------------------------------------- convolution


def _pair(values: Sequence[int], what: str) -> tuple[int, int]:
    if len(values) == 1:
        return values[0], values[0]
    if len(values) != 2:
        raise VerifyException(f"{what} must have 1 or 2 values, got {len(values)}")
    return values[0], values[1]


def _pads(values: Sequence[int]) -> tuple[int, int, int, int]:
    """pads as [top, left, bottom, right]; 1 or 2 values are symmetric."""
    if len(values) == 1:
        return values[0], values[0], values[0], values[0]
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    if len(values) == 4:
        return values[0], values[1], values[2], values[3]
    raise VerifyException(f"pads must have 1, 2 or 4 values, got {len(values)}")


def window_out(
    size: int, k: int, stride: int, pad: int, dilation: int = 1, ceil_mode: bool = False
) -> int:
    eff = dilation * (k - 1) + 1
    span = size + pad - eff
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + pad - (pad // 2 if pad else 0):
            out -= 1
        return out
    return span // stride + 1


LAYOUTS = ("nchw", "nhwc")


def layout_of(op: Operation) -> str:
    """Activation layout of conv2d/pools/global_avg_pool/batch_norm: "nchw" (the default)
    or "nhwc" (written by graph-layout). The weight of conv2d stays OIHW in both.

    `layout` is a discardable attribute, not a property, so consumers that only know NCHW
    see no new keyword in `op.prop_values()`; every consumer of these ops must check `layout_of(op)`
    (`dlpc.passes.graph.layout.evaluate_nhwc` gives the reference value of an NHWC op).
    """
    attr = op.attributes.get("layout")
    if attr is None:
        return "nchw"
    if not isinstance(attr, StringAttr) or attr.data not in LAYOUTS:
        raise VerifyException(f'{op.name} layout must be "nchw" or "nhwc", got {attr}')
    return attr.data


def _to_nchw(op: Operation, shape: Shape) -> Shape:
    """An NHWC shape of a layout op as its NCHW equivalent (identity for NCHW)."""
    if layout_of(op) == "nhwc" and len(shape) >= 3:
        return (shape[0], shape[-1], *shape[1:-1])
    return shape


def _from_nchw(op: Operation, shape: Shape) -> Shape:
    if layout_of(op) == "nhwc" and len(shape) >= 3:
        return (shape[0], *shape[2:], shape[1])
    return shape


class WindowOp(GraphOp):
    """A window slid over the spatial dims of NCHW (or NHWC with layout = "nhwc"): conv
    and pools. strides (and dilations) hold 1 or 2 values, pads 1, 2 or 4."""

    strides_attr = ints_prop("strides", (1, 1))
    pads_attr = ints_prop("pads", (0, 0, 0, 0))

    @property
    def strides(self) -> tuple[int, int]:
        return _pair(self.strides_attr.get_values(), "strides")

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """[top, left, bottom, right]."""
        return _pads(self.pads_attr.get_values())

    @property
    def dilations(self) -> tuple[int, int]:
        return (1, 1)

    def _spatial(
        self, h: int, w: int, kh: int, kw: int, ceil_mode: bool = False
    ) -> tuple[int, int]:
        sh, sw = self.strides
        pt, pl, pb, pr = self.pads
        dh, dw = self.dilations
        if min(sh, sw, dh, dw) < 1 or min(pt, pl, pb, pr) < 0:
            raise VerifyException(
                f"{self.name} strides/dilations must be >= 1 and pads >= 0, got strides "
                f"{list(self.strides)}, dilations {list(self.dilations)}, pads {list(self.pads)}"
            )
        oh = window_out(h, kh, sh, pt + pb, dh, ceil_mode)
        ow = window_out(w, kw, sw, pl + pr, dw, ceil_mode)
        if oh < 1 or ow < 1:
            raise VerifyException(
                f"{self.name} window {kh}x{kw} does not fit input {h}x{w} with the given padding"
            )
        return oh, ow


@graph_op
class Conv2DOp(WindowOp):
    """2-D convolution, NCHW input, OIHW weight (O, C/groups, KH, KW), optional bias [O].

    pads are [top, left, bottom, right] (or 1/2 symmetric values).

    %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x16x16xf32>
    """

    name = "graph.conv2d"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "weight", "bias")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("bias",)
    dilations_attr = ints_prop("dilations", (1, 1))
    groups_attr = int_prop("groups", 1)

    @property
    def dilations(self) -> tuple[int, int]:
        return _pair(self.dilations_attr.get_values(), "dilations")

    @property
    def groups(self) -> int:
        return self.groups_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x, w = _to_nchw(self, shapes[0]), shapes[1]
        if len(x) != 4 or len(w) != 4:
            raise VerifyException(
                f"graph.conv2d expects NCHW input and OIHW weight, got {fmt_shape(x)} "
                f"and {fmt_shape(w)}"
            )
        g = self.groups
        n, c, h, wd = x
        o, cg, kh, kw = w
        if g < 1 or c % g or o % g:
            raise VerifyException(
                f"graph.conv2d groups={g} must divide input channels {c} and output channels {o}"
            )
        if c != cg * g:
            raise VerifyException(
                f"graph.conv2d input has {c} channels but weight {fmt_shape(w)} with "
                f"groups={g} expects {cg * g}"
            )
        if len(shapes) == 3 and shapes[2] != (o,):
            raise VerifyException(
                f"graph.conv2d bias {fmt_shape(shapes[2])} does not match {o} output channels"
            )
        oh, ow = self._spatial(h, wd, kh, kw)
        return _from_nchw(self, (n, o, oh, ow))


# Winograd F(2x2, 3x3) (Lavin & Gray): a stride-1 3x3 conv as filter transform ->
# input transform -> 16 batched matmuls -> output transform (passes/graph/winograd.py).
# The 16 transform points t = 4 * a + b are the outer dim; a 4x4 input tile starts every
# 2 rows and columns of the padded input and gives a 2x2 output tile.
WINOGRAD_POINTS = 16


def winograd_tiles(out_h: int, out_w: int) -> tuple[int, int]:
    """Tiles along H and W of an out_h x out_w output (the last one cropped when odd)."""
    return (out_h + 1) // 2, (out_w + 1) // 2


@graph_op
class WinogradFilterTransformOp(GraphOp):
    """Winograd F(2x2, 3x3) filter transform U = G g G^T of an OIHW 3x3 weight, as
    [16, O, I] (point t = 4 * a + b first).

    %u = graph.winograd_filter_transform %w : (tensor<16x8x3x3xf32>) -> tensor<16x16x8xf32>
    """

    name = "graph.winograd_filter_transform"
    OPERANDS: ClassVar[tuple[str, ...]] = ("weight",)
    ELEMENTS: ClassVar[Elements] = "float"

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        (w,) = shapes
        if len(w) != 4 or tuple(w[2:]) != (3, 3):
            raise VerifyException(
                f"graph.winograd_filter_transform expects an OIHW 3x3 weight, got {fmt_shape(w)}"
            )
        return (WINOGRAD_POINTS, w[0], w[1])


@graph_op
class WinogradInputTransformOp(GraphOp):
    """Winograd F(2x2, 3x3) input transform V = B^T d B of every 4x4 tile d of the NCHW
    input padded by `pads` ([top, left, bottom, right]; reads outside are 0), as
    [16, N, C, tiles_h, tiles_w] (per image: the batched matmul's operand of one image
    stays as small as at batch 1); the output of the 3x3 conv it stands for is
    (H + top + bottom - 2) x (W + left + right - 2).

    %v = graph.winograd_input_transform %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x32x32xf32>) -> tensor<16x1x8x16x16xf32>
    """

    name = "graph.winograd_input_transform"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input",)
    ELEMENTS: ClassVar[Elements] = "float"
    pads_attr = ints_prop("pads", (0, 0, 0, 0))

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """[top, left, bottom, right]."""
        return _pads(self.pads_attr.get_values())

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        (x,) = shapes
        if len(x) != 4:
            raise VerifyException(
                f"graph.winograd_input_transform expects an NCHW input, got {fmt_shape(x)}"
            )
        pt, pl, pb, pr = self.pads
        if min(pt, pl, pb, pr) < 0:
            raise VerifyException(
                f"graph.winograd_input_transform pads must be >= 0, got {list(self.pads)}"
            )
        oh, ow = x[2] + pt + pb - 2, x[3] + pl + pr - 2
        if oh < 1 or ow < 1:
            raise VerifyException(
                f"graph.winograd_input_transform: a 3x3 window does not fit input "
                f"{x[2]}x{x[3]} with the given padding"
            )
        return (WINOGRAD_POINTS, x[0], x[1], *winograd_tiles(oh, ow))


@graph_op
class WinogradOutputTransformOp(GraphOp):
    """Winograd F(2x2, 3x3) output transform Y = A^T m A of every tile of the batched
    matmul's result [16, N, O, tiles_h, tiles_w], as the NCHW conv output
    [N, O, output[0], output[1]] (the last tile cropped when a size is odd), plus the
    conv's optional bias [O].

    %y = graph.winograd_output_transform %m, %b {output = array<i64: 32, 32>} : (tensor<16x1x16x16x16xf32>, tensor<16xf32>) -> tensor<1x16x32x32xf32>
    """

    name = "graph.winograd_output_transform"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "bias")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("bias",)
    ELEMENTS: ClassVar[Elements] = "float"
    output_size_attr = ints_prop("output")

    @property
    def output_size(self) -> tuple[int, int]:
        """The conv output's height and width (the `output` property)."""
        return _pair(self.output_size_attr.get_values(), "output")

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        m = shapes[0]
        if len(m) != 5 or m[0] != WINOGRAD_POINTS:
            raise VerifyException(
                f"graph.winograd_output_transform expects [16, N, O, tiles_h, tiles_w], "
                f"got {fmt_shape(m)}"
            )
        oh, ow = self.output_size
        if min(oh, ow) < 1 or winograd_tiles(oh, ow) != tuple(m[3:]):
            raise VerifyException(
                f"graph.winograd_output_transform output {oh}x{ow} needs "
                f"{fmt_shape(winograd_tiles(max(oh, 1), max(ow, 1)))} tiles, got "
                f"{fmt_shape(m[3:])}"
            )
        if len(shapes) == 2 and shapes[1] != (m[2],):
            raise VerifyException(
                f"graph.winograd_output_transform bias {fmt_shape(shapes[1])} does not "
                f"match {m[2]} output channels"
            )
        return (m[1], m[2], oh, ow)


class PoolOp(WindowOp):
    """Pooling over a kernel x kernel window; ceil_mode rounds the output size up."""

    kernel_attr = ints_prop("kernel")
    ceil_mode_attr = bool_prop("ceil_mode", False)

    @property
    def kernel(self) -> tuple[int, int]:
        return _pair(self.kernel_attr.get_values(), "kernel")

    @property
    def ceil_mode(self) -> bool:
        return bool(self.ceil_mode_attr.value.data)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = _to_nchw(self, shapes[0])
        if len(x) != 4:
            raise VerifyException(f"{self.name} expects NCHW input, got {fmt_shape(x)}")
        kh, kw = self.kernel
        oh, ow = self._spatial(x[2], x[3], kh, kw, self.ceil_mode)
        return _from_nchw(self, (x[0], x[1], oh, ow))


@graph_op
class MaxPool2DOp(PoolOp):
    """2-D max pooling over NCHW; padding never wins the max.

    %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x6x28x28xf32>) -> tensor<1x6x14x14xf32>
    """

    name = "graph.max_pool2d"


@graph_op
class AvgPool2DOp(PoolOp):
    """2-D average pooling over NCHW; count_include_pad selects the divisor.

    %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x6x28x28xf32>) -> tensor<1x6x14x14xf32>
    """

    name = "graph.avg_pool2d"
    ELEMENTS: ClassVar[Elements] = "numeric"  # a mean of i1 is no i1
    count_include_pad_attr = bool_prop("count_include_pad", False)

    @property
    def count_include_pad(self) -> bool:
        return bool(self.count_include_pad_attr.value.data)


@graph_op
class GlobalAvgPoolOp(GraphOp):
    """Mean over H and W of NCHW, keeping them as size 1.

    %y = graph.global_avg_pool %x : (tensor<1x64x8x8xf32>) -> tensor<1x64x1x1xf32>
    """

    name = "graph.global_avg_pool"
    ELEMENTS: ClassVar[Elements] = "numeric"

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = _to_nchw(self, shapes[0])
        if len(x) < 3:
            raise VerifyException(
                f"graph.global_avg_pool expects N, C and spatial dims, got {fmt_shape(x)}"
            )
        return _from_nchw(self, (x[0], x[1]) + (1,) * (len(x) - 2))


# ------------------------------------------------------------------------ dropout


@graph_op
class DropoutOp(GraphOp):
    """Dropout: y = x * mask / (1 - p), mask[i] = uniform(seed, step, i) >= p, where i is
    the flat (row-major) index and uniform(...) = (h >> 8) / 2**24 with the counter-based
    hash h = pcg(pcg(pcg(seed) ^ step) ^ i) (`dlpc.reference.graph.pcg_hash`, 32-bit values
    in int64 arithmetic that never overflows): the mask depends on nothing else, so every
    backend draws the same bits. `step` is the training step
    counter (rank-0 float, `opt.step`; `dlpc.passes.train.step` feeds it): without it the
    op is in inference mode, the identity.

    %y = graph.dropout %x, %step {p = 5.000000e-01 : f64, seed = 0 : i64} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    """

    name = "graph.dropout"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "step")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("step",)
    ELEMENTS: ClassVar[Elements] = "float"
    p_attr = float_prop("p", 0.5)
    seed_attr = int_prop("seed", 0)

    @property
    def p(self) -> float:
        return self.p_attr.value.data

    @property
    def seed(self) -> int:
        return self.seed_attr.value.data

    @property
    def training(self) -> bool:
        return len(self.operands) == 2

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        p = self.p
        if not 0.0 <= p < 1.0:
            raise VerifyException(f"graph.dropout p = {p} is out of range [0, 1)")
        if len(shapes) == 2:
            if shapes[1] != () or not is_float_type(element_type_of(self.operands[1])):
                got = self.operands[1].type
                raise VerifyException(
                    f"graph.dropout step must be a rank-0 float tensor, got {got}"
                )
        return shapes[0]


# ------------------------------------------------------------------ normalisation


@graph_op
class BatchNormOp(GraphOp):
    """Inference batch norm over channel axis 1 (the last axis with layout = "nhwc"):
    y = (x - mean) / sqrt(var + epsilon) * scale + bias.

    %y = graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f64} : (...) -> tensor<1x16x8x8xf32>
    """

    name = "graph.batch_norm"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "scale", "bias", "mean", "var")
    ELEMENTS: ClassVar[Elements] = "float"
    epsilon_attr = float_prop("epsilon", 1e-5)

    @property
    def epsilon(self) -> float:
        return self.epsilon_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = shapes[0]
        if len(x) < 2:
            raise VerifyException(f"graph.batch_norm expects rank >= 2, got {fmt_shape(x)}")
        channels = _to_nchw(self, x)[1]
        for name, s in zip(self.OPERANDS[1:], shapes[1:]):
            if s != (channels,):
                raise VerifyException(
                    f"graph.batch_norm {name} has shape {fmt_shape(s)} but input has "
                    f"{channels} channels"
                )
        return x


@graph_op
class LayerNormOp(GraphOp):
    """Normalise over the trailing dims from `axis`, then scale (and shift).

    y = (x - mean) / sqrt(var + epsilon) * scale + bias, statistics over x.shape[axis:].

    %y = graph.layer_norm %x, %g, %b {axis = -1 : i64} : (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
    """

    name = "graph.layer_norm"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "scale", "bias")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("bias",)
    ELEMENTS: ClassVar[Elements] = "float"
    axis_attr = int_prop("axis", -1)
    epsilon_attr = float_prop("epsilon", 1e-5)

    @property
    def axis(self) -> int:
        return self.axis_attr.value.data

    @property
    def epsilon(self) -> float:
        return self.epsilon_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = shapes[0]
        axis = normalize_axis(self.axis, len(x))
        norm = x[axis:]
        for name, s in zip(self.OPERANDS[1:], shapes[1:]):
            if broadcast_shapes(s, norm) != norm:
                raise VerifyException(
                    f"graph.layer_norm {name} has shape {fmt_shape(s)} but the normalised "
                    f"dims are {fmt_shape(norm)}"
                )
        return x


class AxisOp(GraphOp):
    """A function of floats along one axis (default the last); the result has the
    input's shape."""

    ELEMENTS: ClassVar[Elements] = "float"
    axis_attr = int_prop("axis", -1)

    @property
    def axis(self) -> int:
        return self.axis_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        normalize_axis(self.axis, len(shapes[0]))
        return shapes[0]


@graph_op
class SoftmaxOp(AxisOp):
    """exp(x - max) / sum(exp(x - max)) along `axis`.

    %y = graph.softmax %x {axis = -1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    """

    name = "graph.softmax"


@graph_op
class LogSoftmaxOp(AxisOp):
    """x - max - log(sum(exp(x - max))) along `axis`.

    %y = graph.log_softmax %x {axis = -1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    """

    name = "graph.log_softmax"


# ---------------------------------------------------------------------- reductions


class ReduceOp(GraphOp):
    """Reduce over `axes` (all axes when empty); keepdims keeps them as size 1."""

    axes_attr = ints_prop("axes", ())
    keepdims_attr = bool_prop("keepdims", False)

    @property
    def axes(self) -> tuple[int, ...]:
        """The axes as written (empty: all); `reduced_axes()` normalises them."""
        return self.axes_attr.get_values()

    @property
    def keepdims(self) -> bool:
        return bool(self.keepdims_attr.value.data)

    def reduced_axes(self) -> tuple[int, ...]:
        rank = len(shape_of(self.operands[0]))
        axes = self.axes or tuple(range(rank))
        if rank == 0 and axes:  # a scalar has no axis to reduce (numpy: out of bounds)
            raise VerifyException(f"{self.name} axis {axes[0]} is out of range for rank 0")
        norm = tuple(sorted({normalize_axis(a, rank) for a in axes}))
        if len(norm) != len(axes):
            raise VerifyException(f"{self.name} axes {list(axes)} contain duplicates")
        return norm

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = shapes[0]
        axes = self.reduced_axes()
        if self.keepdims:
            return tuple(1 if i in axes else d for i, d in enumerate(x))
        return tuple(d for i, d in enumerate(x) if i not in axes)


@graph_op
class ReduceSumOp(ReduceOp):
    """Sum over axes.

    %y = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    """

    name = "graph.reduce_sum"


@graph_op
class ReduceMeanOp(ReduceOp):
    """Mean over axes.

    %y = graph.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    """

    name = "graph.reduce_mean"
    ELEMENTS: ClassVar[Elements] = "numeric"  # a mean of i1 is no i1


@graph_op
class ReduceMaxOp(ReduceOp):
    """Maximum over axes.

    %y = graph.reduce_max %x : (tensor<4x8xf32>) -> tensor<f32>
    """

    name = "graph.reduce_max"


@graph_op
class ReduceMinOp(ReduceOp):
    """Minimum over axes.

    %y = graph.reduce_min %x : (tensor<4x8xf32>) -> tensor<f32>
    """

    name = "graph.reduce_min"


@graph_op
class ReduceProdOp(ReduceOp):
    """Product over axes.

    %y = graph.reduce_prod %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
    """

    name = "graph.reduce_prod"


# ----------------------------------------------------------------- data movement


@graph_op
class ReshapeOp(GraphOp):
    """Same elements, new shape; one -1 dim is inferred, 0 copies the input dim.

    %y = graph.reshape %x {shape = array<i64: 1, -1>} : (tensor<1x16x4x4xf32>) -> tensor<1x256xf32>
    """

    name = "graph.reshape"
    shape_attr = ints_prop("shape")

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape as written (with -1 and 0); `out_shape` is the inferred one."""
        return sym_ints(self, "shape", self.shape_attr.get_values())

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = shapes[0]
        target = list(self.shape)
        for i, d in enumerate(target):
            if d == 0:
                if i >= len(x):
                    raise VerifyException(
                        f"graph.reshape 0 refers to a missing input dim: shape "
                        f"{list(self.shape)} for input {fmt_shape(x)}"
                    )
                target[i] = x[i]
        total = math.prod(x)
        if target.count(-1) > 1:
            raise VerifyException(
                f"graph.reshape shape may contain at most one -1, got {list(self.shape)}"
            )
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            if known == 0 or total % known:
                raise VerifyException(
                    f"graph.reshape cannot reshape {fmt_shape(x)} into {list(self.shape)}"
                )
            target[target.index(-1)] = total // known
        if math.prod(target) != total or any(d < 0 for d in target):
            raise VerifyException(
                f"graph.reshape cannot reshape {fmt_shape(x)} ({total} elements) into "
                f"{fmt_shape(target)}"
            )
        return tuple(target)


@graph_op
class TransposeOp(GraphOp):
    """Permute dims: out.shape[i] = in.shape[perm[i]] (reverse when perm is empty).

    %y = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    """

    name = "graph.transpose"
    perm_attr = ints_prop("perm", ())

    @property
    def perm(self) -> tuple[int, ...]:
        """The permutation as written (empty: reverse); `permutation()` normalises it."""
        return self.perm_attr.get_values()

    def permutation(self) -> tuple[int, ...]:
        rank = len(shape_of(self.operands[0]))
        perm = self.perm or tuple(reversed(range(rank)))
        if sorted(normalize_axis(p, rank) for p in perm) != list(range(rank)):
            raise VerifyException(
                f"graph.transpose perm {list(perm)} is not a permutation of {rank} dims"
            )
        return tuple(normalize_axis(p, rank) for p in perm)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        return tuple(shapes[0][p] for p in self.permutation())


@graph_op
class ConcatOp(GraphOp):
    """Join tensors along `axis`; other dims must agree.

    %y = graph.concat %a, %b {axis = 1 : i64} : (tensor<1x4xf32>, tensor<1x6xf32>) -> tensor<1x10xf32>
    """

    name = "graph.concat"
    OPERANDS: ClassVar[tuple[str, ...]] = ("*inputs",)
    axis_attr = int_prop("axis", 0)

    @property
    def axis(self) -> int:
        return self.axis_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        first = shapes[0]
        if not first:
            raise VerifyException("graph.concat needs operands of rank 1 or more, got a scalar")
        axis = normalize_axis(self.axis, len(first))
        total = 0
        for s in shapes:
            if len(s) != len(first) or any(
                a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis
            ):
                raise VerifyException(
                    f"graph.concat operands {fmt_shape(first)} and {fmt_shape(s)} differ "
                    f"outside axis {axis}"
                )
            total += s[axis]
        return tuple(total if i == axis else d for i, d in enumerate(first))


@graph_op
class SliceOp(GraphOp):
    """Strided slice, numpy semantics: x[starts[i]:ends[i]:steps[i]] on `axes`
    (all leading axes when omitted).

    %y = graph.slice %x {starts = array<i64: 0>, ends = array<i64: 64>, axes = array<i64: 1>} : (tensor<16x192xf32>) -> tensor<16x64xf32>
    """

    name = "graph.slice"
    starts_attr = ints_prop("starts")
    ends_attr = ints_prop("ends")
    axes_attr = ints_prop("axes", ())
    steps_attr = ints_prop("steps", ())

    @property
    def starts(self) -> tuple[int, ...]:
        return sym_ints(self, "starts", self.starts_attr.get_values())

    @property
    def ends(self) -> tuple[int, ...]:
        return sym_ints(self, "ends", self.ends_attr.get_values())

    @property
    def axes(self) -> tuple[int, ...]:
        """The sliced axes as written (empty: the leading ones)."""
        return self.axes_attr.get_values()

    @property
    def steps(self) -> tuple[int, ...]:
        """The steps as written (empty: all 1)."""
        return self.steps_attr.get_values()

    def normalized(self) -> list[tuple[int, int, int]]:
        """(start, stop, step) per input dim, as Python's slice.indices gives."""
        x = shape_of(self.operands[0])
        starts, ends = self.starts, self.ends
        axes = self.axes or tuple(range(len(starts)))
        steps = self.steps or (1,) * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise VerifyException(
                f"graph.slice starts, ends, axes and steps differ in length: {list(starts)}, "
                f"{list(ends)}, {list(axes)}, {list(steps)}"
            )
        out: list[tuple[int, int, int]] = [(0, d, 1) for d in x]
        for s, e, a, st in zip(starts, ends, axes, steps):
            if st == 0:
                raise VerifyException("graph.slice step must not be 0")
            a = normalize_axis(a, len(x))
            if symdims.is_symbolic((s, e, x[a])):
                out[a] = cast(tuple[int, int, int], symdims.slice_indices(s, e, st, x[a]))
            else:
                out[a] = slice(s, e, st).indices(x[a])
        return out

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        return tuple(
            t[1] - t[0] if symdims.is_symbolic(t) else len(range(*t)) for t in self.normalized()
        )


@graph_op
class DynamicSliceOp(GraphOp):
    """A slice at run-time offsets: on axis axes[k], sizes[k] elements from starts[k] (a
    negative start counts from the end; the start is then clamped to [0, dim - size],
    so the slice stays in bounds whatever the offset).

    %y = graph.dynamic_slice %x, %s {axes = array<i64: 0>, sizes = array<i64: 1>} : (tensor<5xf32>, tensor<1xi64>) -> tensor<1xf32>
    """

    name = "graph.dynamic_slice"
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "starts")
    axes_attr = ints_prop("axes")
    sizes_attr = ints_prop("sizes")

    @property
    def axes(self) -> tuple[int, ...]:
        """The sliced axes, normalised."""
        rank = len(shape_of(self.operands[0]))
        return tuple(normalize_axis(a, rank) for a in self.axes_attr.get_values())

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.sizes_attr.get_values()

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x, starts = shapes
        axes, sizes = self.axes, self.sizes
        if not isinstance(element_type_of(self.operands[1]), IntegerType):
            raise VerifyException("graph.dynamic_slice starts must be integers")
        if len(axes) != len(sizes) or starts != (len(axes),) or len(set(axes)) != len(axes):
            raise VerifyException(
                f"graph.dynamic_slice needs distinct axes, one size and one start each: axes "
                f"{list(axes)}, sizes {list(sizes)}, starts {fmt_shape(starts)}"
            )
        out = list(x)
        for a, n in zip(axes, sizes):
            if symdims.is_symbolic((x[a],)) or not 0 <= n <= x[a]:
                raise VerifyException(
                    f"graph.dynamic_slice size {n} does not fit axis {a} of {fmt_shape(x)}"
                )
            out[a] = n
        return tuple(out)


@graph_op
class PadOp(GraphOp):
    """Constant padding: pads = [begin_0, ..., begin_n, end_0, ..., end_n] (ONNX order).

    %y = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x6x6xf32>
    """

    name = "graph.pad"
    pads_attr = ints_prop("pads")
    value_attr = float_prop("value", 0.0)

    @property
    def pads(self) -> tuple[int, ...]:
        """[begin_0, ..., begin_n, end_0, ..., end_n]."""
        return self.pads_attr.get_values()

    @property
    def value(self) -> float:
        return self.value_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x = shapes[0]
        pads = self.pads
        if len(pads) != 2 * len(x):
            raise VerifyException(
                f"graph.pad needs {2 * len(x)} pads for rank {len(x)}, got {len(pads)}"
            )
        out = tuple(d + pads[i] + pads[i + len(x)] for i, d in enumerate(x))
        if any(d < 0 for d in out):
            raise VerifyException(f"graph.pad pads {list(pads)} give a negative size")
        return out


@graph_op
class BroadcastOp(GraphOp):
    """Broadcast (numpy rules) to `shape`.

    %y = graph.broadcast %x {shape = array<i64: 4, 8>} : (tensor<8xf32>) -> tensor<4x8xf32>
    """

    name = "graph.broadcast"
    shape_attr = ints_prop("shape")

    @property
    def shape(self) -> tuple[int, ...]:
        return sym_ints(self, "shape", self.shape_attr.get_values())

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        target = self.shape
        if broadcast_shapes(shapes[0], target) != target:
            raise VerifyException(
                f"graph.broadcast cannot broadcast {fmt_shape(shapes[0])} to {fmt_shape(target)}"
            )
        return target


@graph_op
class GatherOp(GraphOp):
    """numpy.take(data, indices, axis): out = data.shape[:axis] + indices.shape + data.shape[axis+1:].
    Negative indices count from the end.

    %y = graph.gather %data, %idx {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    """

    name = "graph.gather"
    OPERANDS: ClassVar[tuple[str, ...]] = ("data", "indices")
    axis_attr = int_prop("axis", 0)

    @property
    def axis(self) -> int:
        return self.axis_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        d, idx = shapes
        axis = normalize_axis(self.axis, len(d))
        if not isinstance(element_type_of(self.operands[1]), IntegerType):
            raise VerifyException("graph.gather indices must be integers")
        return (*d[:axis], *idx, *d[axis + 1 :])


# -------------------------------------------------------------------------- fusion


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of a graph.fused body: the fused op's result.

    graph.yield %2 : tensor<1x4x6x6xf32>
    """

    name = "graph.yield"
    values = var_operand_def(TensorType)
    traits = lazy_traits_def(lambda: (IsTerminator(), Pure(), HasParent(FusedOp, IfOp, LoopOp)))
    assembly_format = "$values attr-dict `:` type($values)"


def _show_types(types: Sequence[Attribute]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


@irdl_op_definition
class FusedOp(IRDLOperation):
    """Several graph ops fused into one kernel (vertical fusion); the body is a
    graph region over the op's operands whose graph.yield gives the result.

    %y = graph.fused "conv_bias_relu" %x, %w : (tensor<..>, tensor<..>) -> tensor<..> {
    ^bb0(%a: tensor<..>, %k: tensor<..>):
      %0 = graph.conv2d %a, %k : ...
      %1 = graph.relu %0 : ...
      graph.yield %1 : tensor<..>
    }
    """

    name = "graph.fused"
    kernel = attr_def(StringAttr)
    inputs = var_operand_def(TensorType)
    output = result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure(), IsolatedFromAbove())
    assembly_format = "$kernel $inputs attr-dict `:` functional-type($inputs, $output) $body"

    def __init__(
        self, kernel: str, inputs: Sequence[SSAValue], result_type: Attribute, body: Region
    ):
        super().__init__(
            operands=[inputs],
            result_types=[result_type],
            attributes={"kernel": StringAttr(kernel)},
            regions=[body],
        )

    @property
    def kernel_name(self) -> str:
        return self.kernel.data

    @property
    def yield_op(self) -> YieldOp:
        term = self.body.block.last_op
        assert isinstance(term, YieldOp)
        return term

    def verify_(self) -> None:
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        if arg_types != in_types:
            show = _show_types
            raise VerifyException(
                f'graph.fused "{self.kernel_name}" body arguments {show(arg_types)} do not '
                f"match operand types {show(in_types)}"
            )
        term = block.last_op
        if not isinstance(term, YieldOp) or len(term.values) != 1:
            raise VerifyException(
                f'graph.fused "{self.kernel_name}" body must end in graph.yield of one value'
            )
        if term.values[0].type != self.output.type:
            raise VerifyException(
                f'graph.fused "{self.kernel_name}" yields {term.values[0].type} but '
                f"the result type is {self.output.type}"
            )


# ------------------------------------------------------------------- control flow
#
# The textbook's static-graph control flow (Switch / Merge / Enter / Exit / NextIteration)
# in its structured form: an op holding regions. Regions are isolated from above: every
# value a branch or a body reads comes in as an operand (the ONNX importer passes the
# outer values a subgraph captures explicitly), so a pass that does not look into
# regions sees an ordinary op with operands and results, and cannot mis-optimise across
# the region boundary. A graph.param inside a region is refused (pass it as an operand).


def _region_types(block_args: Sequence[SSAValue]) -> list[Attribute]:
    return [a.type for a in block_args]


def _check_region(op: Operation, what: str, region: Region, args: Sequence[Attribute]) -> Any:
    """The region's one block takes `args` and ends in graph.yield (returned)."""
    if len(region.blocks) != 1:
        raise VerifyException(f"{op.name} {what} region must have one block")
    block = region.block
    got = _region_types(block.args)
    if got != list(args):
        raise VerifyException(
            f"{op.name} {what} region arguments {_show_types(got)} do not match {_show_types(args)}"
        )
    term = block.last_op
    if not isinstance(term, YieldOp):
        raise VerifyException(f"{op.name} {what} region must end in graph.yield")
    for inner in block.walk():
        if isinstance(inner, ParamOp):
            raise VerifyException(
                f'{op.name} {what} region holds graph.param "{inner.pname}"; pass it in '
                f"as an operand"
            )
    return term


def _check_tensor_i1(op: Operation, what: str, ty: Attribute) -> None:
    if not _is_tensor(ty) or ty.get_shape() or ty.get_element_type() != i1:
        raise VerifyException(f"{op.name} {what} must be tensor<i1>, got {ty}")


class ControlOp(IRDLOperation):
    """Common base of graph.if and graph.loop: tensor operands, several results."""

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)


@irdl_op_definition
class IfOp(ControlOp):
    """Structured conditional: the `then` region when the i1 scalar `cond` is true, else
    the `else` region; both take the operands after `cond` and yield the results' types.

        %r = graph.if %c, %a : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
        ^bb0(%x: tensor<4xf32>):
          %y = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
          graph.yield %y : tensor<4xf32>
        } else {
        ^bb0(%x: tensor<4xf32>):
          graph.yield %x : tensor<4xf32>
        }
    """

    name = "graph.if"
    cond = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    then_region = region_def("single_block")
    else_region = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    assembly_format = (
        "$cond (`,` $inputs^)? attr-dict `:` `(` type($cond) (`,` type($inputs)^)? `)` "
        "`->` `(` type($outputs) `)` $then_region `else` $else_region"
    )

    def __init__(
        self,
        cond: SSAValue,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        then_region: Region,
        else_region: Region,
    ):
        super().__init__(
            operands=[cond, inputs],
            result_types=[result_types],
            regions=[then_region, else_region],
        )

    def verify_(self) -> None:
        _check_tensor_i1(self, "condition", self.cond.type)
        args = [v.type for v in self.inputs]
        outs = [r.type for r in self.outputs]
        for what, region in (("then", self.then_region), ("else", self.else_region)):
            term = _check_region(self, what, region, args)
            got = [v.type for v in term.values]
            if got != outs:
                raise VerifyException(
                    f"graph.if {what} region yields {_show_types(got)} but the results are "
                    f"{_show_types(outs)}"
                )


@irdl_op_definition
class LoopOp(ControlOp):
    """Structured loop (ONNX Loop's form, a while loop with an optional trip bound):

        i = 0; c = cond; v = inputs
        while c and (trip_count < 0 or i < trip_count):
            c, v = body(i, v); i += 1
        results = v

    The body takes the iteration number (tensor<i64>) and the loop-carried values and
    yields the next condition (tensor<i1>) and the next carried values; the results are
    the carried values after the last iteration. `trip_count` = -1: no bound.

        %r = graph.loop %c, %a {trip_count = 3} : (tensor<i1>, tensor<4xf32>) -> (tensor<4xf32>) {
        ^bb0(%i: tensor<i64>, %x: tensor<4xf32>):
          %y = graph.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
          graph.yield %t, %y : tensor<i1>, tensor<4xf32>
        }
    """

    name = "graph.loop"
    cond = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    trip_count = prop_def(INT, IntegerAttr(-1, i64))
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$cond (`,` $inputs^)? attr-dict `:` `(` type($cond) (`,` type($inputs)^)? `)` "
        "`->` `(` type($outputs) `)` $body"
    )

    def __init__(
        self,
        cond: SSAValue,
        inputs: Sequence[SSAValue],
        body: Region,
        trip_count: int = -1,
    ):
        super().__init__(
            operands=[cond, inputs],
            result_types=[[v.type for v in inputs]],
            regions=[body],
            properties={"trip_count": IntegerAttr(trip_count, i64)},
        )

    @property
    def trips(self) -> int:
        """The trip bound (-1: none)."""
        return self.trip_count.value.data

    def verify_(self) -> None:
        _check_tensor_i1(self, "condition", self.cond.type)
        if self.trips < -1:
            raise VerifyException(f"graph.loop trip_count {self.trips} must be -1 or at least 0")
        carried = [v.type for v in self.inputs]
        outs = [r.type for r in self.outputs]
        if outs != carried:
            raise VerifyException(
                f"graph.loop results {_show_types(outs)} differ from its carried operands "
                f"{_show_types(carried)}"
            )
        term = _check_region(self, "body", self.body, [TensorType(i64, []), *carried])
        got = [v.type for v in term.values]
        if not got:
            raise VerifyException("graph.loop body must yield the next condition first")
        _check_tensor_i1(self, "body's first yielded value (the condition)", got[0])
        if got[1:] != carried:
            raise VerifyException(
                f"graph.loop body yields {_show_types(got[1:])} after the condition but the "
                f"carried values are {_show_types(carried)}"
            )


def _parse_naming_loop(parser: Parser) -> LoopOp:
    """graph.loop's format parse, a property of the wrong kind named after the op."""
    try:
        return _loop_format_parse(parser)
    except VerifyException as e:
        raise VerifyException(f"graph.loop: {e}") from e


_loop_format_parse = LoopOp.parse
LoopOp.parse = staticmethod(_parse_naming_loop)  # pyright: ignore[reportAttributeAccessIssue]

CONTROL_OPS: tuple[type[ControlOp], ...] = (IfOp, LoopOp)


# ------------------------------------------------------------------ quantization
# ONNX's linear quantization: q = saturate(round_half_even(x / scale) + zero_point) and
# x = (q - zero_point) * scale, per tensor (a scale of shape [] or [1]) or per axis (a 1-D
# scale of x.shape[axis] entries); the integer products of quantized operands accumulate
# in i32 (graph.matmul_integer, graph.conv_integer).

QUANT_TYPES = ("i8", "ui8", "i16", "ui16")


def _is_quant_type(ty: Attribute) -> bool:
    return isa(ty, IntegerType) and ty.bitwidth in (8, 16)


def _check_quant_params(op: GraphOp, x: Shape, shapes: list[Shape], axis: int) -> None:
    """scale and zero point: per tensor ([] or [1]) or per axis ([x.shape[axis]])."""
    scale, zero = shapes[1], shapes[2]
    if zero != scale:
        raise VerifyException(
            f"{op.name} zero point {fmt_shape(zero)} must have the scale's shape {fmt_shape(scale)}"
        )
    if scale in ((), (1,)):
        return
    a = normalize_axis(axis, len(x))
    if len(scale) != 1 or scale[0] != x[a]:
        raise VerifyException(
            f"{op.name} scale {fmt_shape(scale)} is neither one value nor one per entry of "
            f"axis {a} of {fmt_shape(x)}"
        )


class _LinearQuantOp(GraphOp):
    OPERANDS: ClassVar[tuple[str, ...]] = ("input", "scale", "zero_point")
    axis_attr = int_prop("axis", 1)

    @property
    def axis(self) -> int:
        return self.axis_attr.value.data

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        _check_quant_params(self, shapes[0], shapes, self.axis)
        return shapes[0]


@graph_op
class QuantizeOp(_LinearQuantOp):
    """saturate(round_half_even(x / scale) + zero_point) in the zero point's element type
    (i8, ui8, i16 or ui16); ONNX QuantizeLinear.

    %q = graph.quantize %x, %s, %z : (tensor<4xf32>, tensor<f32>, tensor<i8>) -> tensor<4xi8>
    """

    name = "graph.quantize"

    def infer_element_type(self) -> Attribute:
        x, scale, zero = (element_type_of(v) for v in self.operands)
        if not is_float_type(x) or scale != x:
            raise VerifyException(
                f"{self.name} needs a float input and a scale of its type, got {x} and {scale}"
            )
        if not _is_quant_type(zero):
            raise VerifyException(
                f"{self.name} zero point must be one of {', '.join(QUANT_TYPES)}, got {zero}"
            )
        return zero


@graph_op
class DequantizeOp(_LinearQuantOp):
    """(x - zero_point) * scale in the scale's (float) element type; x and the zero point
    are i8, ui8, i16, ui16 or i32 (a quantized bias); ONNX DequantizeLinear.

    %x = graph.dequantize %q, %s, %z : (tensor<4xi8>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
    """

    name = "graph.dequantize"

    def infer_element_type(self) -> Attribute:
        x, scale, zero = (element_type_of(v) for v in self.operands)
        if not (_is_quant_type(x) or x == IntegerType(32)) or zero != x:
            raise VerifyException(
                f"{self.name} needs an input of {', '.join(QUANT_TYPES)} or i32 and a zero "
                f"point of its type, got {x} and {zero}"
            )
        if not is_float_type(scale):
            raise VerifyException(f"{self.name} needs a float scale, got {scale}")
        return scale


def _check_int8_operand(op: GraphOp, what: str, value: SSAValue, zero: SSAValue) -> None:
    ty, zt = element_type_of(value), element_type_of(zero)
    if not (isa(ty, IntegerType) and ty.bitwidth == 8) or zt != ty:
        raise VerifyException(
            f"{op.name} {what} must be i8 or ui8 with a zero point of its type, got {ty} and {zt}"
        )


@graph_op
class MatMulIntegerOp(GraphOp):
    """(a - a_zero_point) @ (b - b_zero_point), accumulated in i32 (ONNX MatMulInteger):
    a and b i8 or ui8 (numpy.matmul's shapes; transpose_b reads b as [.., N, K], the
    layout whose reduction is contiguous); a's zero point one value or one per row of a
    ([M]), b's one value or one per column of the product ([N]).

    %c = graph.matmul_integer %a, %b, %za, %zb : (tensor<4x8xui8>, tensor<8x16xi8>, tensor<ui8>, tensor<i8>) -> tensor<4x16xi32>
    """

    name = "graph.matmul_integer"
    OPERANDS: ClassVar[tuple[str, ...]] = ("lhs", "rhs", "lhs_zero_point", "rhs_zero_point")
    transpose_b_attr = bool_prop("transpose_b", False)

    @property
    def transpose_b(self) -> bool:
        return bool(self.transpose_b_attr.value.data)

    def infer_element_type(self) -> Attribute:
        _check_int8_operand(self, "lhs", self.operands[0], self.operands[2])
        _check_int8_operand(self, "rhs", self.operands[1], self.operands[3])
        return IntegerType(32)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        a, b, za, zb = shapes
        if len(a) < 2 or len(b) < 2:
            raise VerifyException(f"{self.name} operands must have rank >= 2")
        if self.transpose_b:
            b = (*b[:-2], b[-1], b[-2])
        if a[-1] != b[-2]:
            raise VerifyException(
                f"{self.name} contraction mismatch: lhs {fmt_shape(a)} has K={a[-1]} but rhs "
                f"{fmt_shape(b)} has K={b[-2]}"
            )
        if za not in ((), (1,), (a[-2],)) or zb not in ((), (1,), (b[-1],)):
            raise VerifyException(
                f"{self.name} zero points {fmt_shape(za)}, {fmt_shape(zb)} must be one value "
                f"or one per row of lhs ({a[-2]}) / column of rhs ({b[-1]})"
            )
        return (*broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])


@graph_op
class ConvIntegerOp(WindowOp):
    """conv2d of (x - x_zero_point) and (w - w_zero_point), accumulated in i32 (ONNX
    ConvInteger): NCHW x and OIHW w of i8 or ui8; padding contributes 0 (the zero point);
    x's zero point one value, w's one value or one per output channel ([O]).

    %y = graph.conv_integer %x, %w, %zx, %zw {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xui8>, tensor<4x3x3x3xi8>, tensor<ui8>, tensor<i8>) -> tensor<1x4x8x8xi32>
    """

    name = "graph.conv_integer"
    OPERANDS: ClassVar[tuple[str, ...]] = (
        "input",
        "weight",
        "input_zero_point",
        "weight_zero_point",
    )
    dilations_attr = ints_prop("dilations", (1, 1))
    groups_attr = int_prop("groups", 1)

    @property
    def dilations(self) -> tuple[int, int]:
        return _pair(self.dilations_attr.get_values(), "dilations")

    @property
    def groups(self) -> int:
        return self.groups_attr.value.data

    def infer_element_type(self) -> Attribute:
        _check_int8_operand(self, "input", self.operands[0], self.operands[2])
        _check_int8_operand(self, "weight", self.operands[1], self.operands[3])
        return IntegerType(32)

    def infer_shape(self, shapes: list[Shape]) -> Shape:
        x, w, zx, zw = shapes
        if layout_of(self) != "nchw":
            raise VerifyException(f"{self.name} takes NCHW activations only")
        if len(x) != 4 or len(w) != 4:
            raise VerifyException(
                f"{self.name} expects NCHW input and OIHW weight, got {fmt_shape(x)} and "
                f"{fmt_shape(w)}"
            )
        g = self.groups
        n, c, h, wd = x
        o, cg, kh, kw = w
        if g < 1 or c % g or o % g or c != cg * g:
            raise VerifyException(
                f"{self.name} input has {c} channels but weight {fmt_shape(w)} with "
                f"groups={g} expects {cg * g} (and groups must divide {o})"
            )
        if zx not in ((), (1,)) or zw not in ((), (1,), (o,)):
            raise VerifyException(
                f"{self.name} zero points {fmt_shape(zx)}, {fmt_shape(zw)}: the input's must be "
                f"one value, the weight's one value or one per output channel ({o})"
            )
        oh, ow = self._spatial(h, wd, kh, kw)
        return (n, o, oh, ow)


# ------------------------------------------------------------------------- dialect

GRAPH_OPS: list[type[IRDLOperation]] = [
    ConstantOp,
    ParamOp,
    NegOp,
    AbsOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    TanhOp,
    SigmoidOp,
    ErfOp,
    SinOp,
    CosOp,
    TanOp,
    AsinOp,
    AcosOp,
    AtanOp,
    SinhOp,
    CoshOp,
    AsinhOp,
    AcoshOp,
    AtanhOp,
    FloorOp,
    CeilOp,
    RoundOp,
    BitNotOp,
    ReluOp,
    GeluOp,
    LeakyReluOp,
    ClipOp,
    CastOp,
    BitcastOp,
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MaxOp,
    MinOp,
    PowOp,
    BitAndOp,
    BitOrOp,
    BitXorOp,
    ShiftLeftOp,
    ShiftRightOp,
    PReluOp,
    WhereOp,
    CompareOp,
    MatMulOp,
    LinearOp,
    Conv2DOp,
    WinogradFilterTransformOp,
    WinogradInputTransformOp,
    WinogradOutputTransformOp,
    MaxPool2DOp,
    AvgPool2DOp,
    GlobalAvgPoolOp,
    DropoutOp,
    BatchNormOp,
    LayerNormOp,
    SoftmaxOp,
    LogSoftmaxOp,
    ReduceSumOp,
    ReduceMeanOp,
    ReduceMaxOp,
    ReduceMinOp,
    ReduceProdOp,
    ReshapeOp,
    TransposeOp,
    ConcatOp,
    SliceOp,
    DynamicSliceOp,
    PadOp,
    BroadcastOp,
    GatherOp,
    QuantizeOp,
    DequantizeOp,
    MatMulIntegerOp,
    ConvIntegerOp,
    FusedOp,
    YieldOp,
    IfOp,
    LoopOp,
]

UNARY_OPS: list[type[UnaryOp]] = [
    NegOp,
    AbsOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    TanhOp,
    SigmoidOp,
    ErfOp,
    SinOp,
    CosOp,
    TanOp,
    AsinOp,
    AcosOp,
    AtanOp,
    SinhOp,
    CoshOp,
    AsinhOp,
    AcoshOp,
    AtanhOp,
    FloorOp,
    CeilOp,
    RoundOp,
    BitNotOp,
    ReluOp,
    GeluOp,
    LeakyReluOp,
    ClipOp,
    CastOp,
    BitcastOp,
]
BINARY_OPS: list[type[BinaryOp]] = [
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MaxOp,
    MinOp,
    PowOp,
    BitAndOp,
    BitOrOp,
    BitXorOp,
    ShiftLeftOp,
    ShiftRightOp,
]

Graph = Dialect("graph", [*GRAPH_OPS], [])
