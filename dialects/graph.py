"""The `graph` dialect: one deep-learning operator on immutable tensors per op.

Every op takes and returns builtin `tensor` values with static shapes. Each op knows
how to infer its result type from its operands and attributes (`infer_type`); the
verifier checks the declared result type against that inference, so a wrong shape
is an error that names both shapes.

Ops share one textual form:

    %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x3x3xf32>

Build ops from Python with `Op.make(*operands, **attrs)`: it converts Python values
to attributes, infers the result type and returns the op.

The reference semantics of each op (numpy) live in `dlpc.backends.numpy`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    attr_def,
    irdl_op_definition,
    lazy_traits_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import ConstantLike, HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.sizes import MAX_TENSOR_BYTES, element_bytes, size_error  # noqa: F401

# --------------------------------------------------------------------------- types

Shape = tuple[int, ...]


def check_size(shape: Sequence[int], element_type: Attribute) -> None:
    """Raise VerifyException for a tensor over `MAX_TENSOR_BYTES`."""
    message = size_error(shape, element_type)
    if message:
        raise VerifyException(message)


def tensor_type(shape: Sequence[int], element_type: Attribute = f32) -> TensorType:
    """A static tensor type; over `MAX_TENSOR_BYTES` it is a VerifyException."""
    check_size(shape, element_type)
    return TensorType(element_type, list(shape))


def shape_of(value: SSAValue | Attribute) -> Shape:
    ty = value.type if isinstance(value, SSAValue) else value
    if not isinstance(ty, TensorType):
        raise VerifyException(f"expected a tensor, got {ty}")
    return ty.get_shape()


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    ty = value.type if isinstance(value, SSAValue) else value
    assert isinstance(ty, TensorType)
    return ty.get_element_type()


def is_float_type(ty: Attribute) -> bool:
    return isinstance(ty, Float16Type | Float32Type | Float64Type)


def fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


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


# ---------------------------------------------------------------- attribute helpers
#
# An op declares its attributes as {name: (kind, default)}; kinds are
# "int", "ints", "float", "bool", "str", "type".  `to_attr` / `from_attr` convert.

REQUIRED = object()


def to_attr(kind: str, value: Any) -> Attribute:
    if kind == "int":
        return IntegerAttr(int(value), i64)
    if kind == "ints":
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if kind == "float":
        return FloatAttr(float(value), f64)
    if kind == "bool":
        return BoolAttr.from_bool(bool(value))
    if kind == "str":
        return StringAttr(str(value))
    if kind == "type":
        assert isinstance(value, Attribute)
        return value
    raise AssertionError(f"unknown attribute kind {kind}")


def from_attr(kind: str, attr: Attribute) -> Any:
    if kind == "int" and isinstance(attr, IntegerAttr):
        return attr.value.data
    if kind == "ints" and isinstance(attr, DenseArrayBase):
        return tuple(int(v) for v in attr.iter_values())
    if kind == "ints" and isinstance(attr, ArrayAttr):
        return tuple(a.value.data for a in attr.data)  # type: ignore[attr-defined]
    if kind == "float" and isinstance(attr, FloatAttr | IntegerAttr):
        return float(attr.value.data)
    if kind == "bool" and isinstance(attr, IntegerAttr):
        return bool(attr.value.data)
    if kind == "str" and isinstance(attr, StringAttr):
        return attr.data
    if kind == "type":
        return attr
    raise VerifyException(f"attribute of kind {kind} has unexpected value {attr}")


# ------------------------------------------------------------------------ base op


class GraphOp(IRDLOperation):
    """Common base: operands, attributes, one tensor result, shape inference."""

    # {attribute name: (kind, default or REQUIRED)}
    ATTRS: ClassVar[dict[str, tuple[str, Any]]] = {}
    # operand names for diagnostics and the builder; "*name" means variadic
    OPERANDS: ClassVar[tuple[str, ...]] = ("input",)
    # names of optional trailing operands (e.g. conv2d bias)
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    # the element types the first operand may have: "float" (exp, softmax, ...: math
    # functions of floats), "numeric" (a mean: not i1), or None (any)
    ELEMENTS: ClassVar[str | None] = None

    assembly_format = "$inputs attr-dict `:` functional-type($inputs, $output)"

    # ---- attribute access ----------------------------------------------------------
    def attr(self, name: str) -> Any:
        kind, default = self.ATTRS[name]
        if name in self.attributes:
            return from_attr(kind, self.attributes[name])
        if default is REQUIRED:
            raise VerifyException(f"{self.name} requires attribute '{name}'")
        return default

    def attrs(self) -> dict[str, Any]:
        return {k: self.attr(k) for k in self.ATTRS}

    @property
    def in_shapes(self) -> list[Shape]:
        return [shape_of(v) for v in self.operands]

    @property
    def out_shape(self) -> Shape:
        return shape_of(self.results[0])

    @property
    def out_type(self) -> TensorType:
        ty = self.results[0].type
        assert isinstance(ty, TensorType)
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
        for name, (kind, default) in self.ATTRS.items():
            if default is REQUIRED and name not in self.attributes:
                raise VerifyException(f"{self.name} requires attribute '{name}'")
            if name in self.attributes:
                from_attr(kind, self.attributes[name])
        self.check_arity()
        self.check_elements()
        for v in self.operands:
            if not isinstance(v.type, TensorType):
                raise VerifyException(f"{self.name} expects tensor operands, got {v.type}")
            message = size_error(v.type.get_shape(), v.type.get_element_type())
            if message:
                raise VerifyException(f"{self.name}: operand {message}")
        try:
            expected = self.infer_type()
        except VerifyException as e:
            if str(e).startswith(self.name):
                raise
            raise VerifyException(f"{self.name}: {e}") from e
        actual = self.results[0].type
        if not isinstance(actual, TensorType):
            raise VerifyException(f"{self.name} must produce a tensor, got {actual}")
        if expected.get_shape() != actual.get_shape():
            raise VerifyException(
                f"{self.name}: inferred result shape {fmt_shape(expected.get_shape())} "
                f"but result type has shape {fmt_shape(actual.get_shape())}"
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
        elt = elt.get_element_type() if isinstance(elt, TensorType) else elt
        if self.ELEMENTS == "float" and not is_float_type(elt):
            raise VerifyException(f"{self.name} needs a floating-point operand, got {elt}")
        if self.ELEMENTS == "numeric" and elt == i1:
            raise VerifyException(f"{self.name} needs a numeric operand, got {elt}")

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
    def make(cls, *operands: SSAValue | Operation, **attrs: Any):
        """Build with Python attribute values; the result type is inferred."""
        values = [SSAValue.get(o) for o in operands]
        attributes: dict[str, Attribute] = {}
        for name, value in attrs.items():
            if name not in cls.ATTRS:
                raise VerifyException(f"{cls.name} has no attribute '{name}'")
            if value is None:
                continue
            attributes[name] = to_attr(cls.ATTRS[name][0], value)
        probe = cls.create(operands=values, result_types=[f32], attributes=attributes)
        try:
            probe.check_arity()
            result_type = probe.infer_type()
        finally:
            probe.drop_all_references()
        return cls.create(operands=values, result_types=[result_type], attributes=attributes)


def _ops_fields():
    return {"inputs": var_operand_def(TensorType), "output": result_def(TensorType)}


def graph_op(cls):
    """Give a GraphOp subclass its IRDL fields and register it as an op."""
    for k, v in _ops_fields().items():
        setattr(cls, k, v)
    # class constants (ATTRS, OPERANDS, ...) are ClassVars for IRDL
    for klass in cls.__mro__:
        if not issubclass(klass, GraphOp):
            continue
        annotations = dict(klass.__dict__.get("__annotations__", {}))
        for k in list(klass.__dict__):
            if k.isupper() and k not in annotations:
                annotations[k] = ClassVar
        klass.__annotations__ = annotations
    if not hasattr(cls, "traits") or "traits" not in cls.__dict__:
        cls.traits = traits_def(Pure())
    return irdl_op_definition(cls)


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
    def from_numpy(array) -> ConstantOp:
        import numpy as np

        array = np.asarray(array)
        elt = NUMPY_TO_ELT[array.dtype.name]
        check_size(array.shape, elt)
        values = array.reshape(-1).tolist()
        if isinstance(elt, IntegerType):  # (int and bool arrays)
            ints = [int(v) for v in values]
            return ConstantOp(
                DenseIntOrFPElementsAttr.from_list(TensorType(elt, array.shape), ints)
            )
        assert isinstance(elt, Float16Type | Float32Type | Float64Type)  # (the rest)
        floats = [float(v) for v in values]
        return ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(elt, array.shape), floats))

    def to_numpy(self):
        import numpy as np

        ty = self.output.type
        assert isinstance(ty, TensorType)
        dtype = ELT_TO_NUMPY[ty.get_element_type().__class__.__name__, _width(ty)]
        vals = self.value.get_values()
        arr = np.asarray(vals, dtype=dtype)
        if arr.size == 1 and math.prod(ty.get_shape()) != 1:
            arr = np.full(ty.get_shape(), arr.reshape(-1)[0], dtype=dtype)
        return arr.reshape(ty.get_shape())

    def verify_(self) -> None:
        if self.value.type != self.output.type:
            raise VerifyException(
                f"graph.constant value type {self.value.type} differs from result "
                f"type {self.output.type}"
            )
        _check_result_size(self)


def _width(ty: TensorType) -> int:
    elt = ty.get_element_type()
    return elt.width.data if isinstance(elt, IntegerType) else elt.bitwidth  # type: ignore


NUMPY_TO_ELT: dict[str, Attribute] = {
    "float32": f32,
    "float64": f64,
    "float16": Float16Type(),
    "int64": i64,
    "int32": IntegerType(32),
    "int8": IntegerType(8),
    "bool": i1,
}
ELT_TO_NUMPY: dict[tuple[str, int], str] = {
    ("Float32Type", 32): "float32",
    ("Float64Type", 64): "float64",
    ("Float16Type", 16): "float16",
    ("IntegerType", 64): "int64",
    ("IntegerType", 32): "int32",
    ("IntegerType", 8): "int8",
    ("IntegerType", 1): "bool",
}


def numpy_dtype(elt: Attribute) -> str:
    width = elt.width.data if isinstance(elt, IntegerType) else elt.bitwidth  # type: ignore
    return ELT_TO_NUMPY[elt.__class__.__name__, width]


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
    if isinstance(ty, TensorType):
        message = size_error(ty.get_shape(), ty.get_element_type())
        if message:
            raise VerifyException(f"{op.name}: {message}")


# ------------------------------------------------------------------- elementwise


class UnaryOp(GraphOp):
    OPERANDS = ("input",)

    def infer_shape(self, shapes):
        return shapes[0]


def _unary(cls_name: str, mnemonic: str, doc: str, attrs=None):
    cls = type(
        cls_name,
        (UnaryOp,),
        {"name": f"graph.{mnemonic}", "__doc__": doc, "ATTRS": attrs or {}},
    )
    return graph_op(cls)


NegOp = _unary("NegOp", "neg", "Elementwise -x.")
AbsOp = _unary("AbsOp", "abs", "Elementwise |x|.")
ExpOp = _unary("ExpOp", "exp", "Elementwise e**x.")
LogOp = _unary("LogOp", "log", "Elementwise natural log.")
SqrtOp = _unary("SqrtOp", "sqrt", "Elementwise square root.")
RsqrtOp = _unary("RsqrtOp", "rsqrt", "Elementwise 1/sqrt(x).")
TanhOp = _unary("TanhOp", "tanh", "Elementwise tanh.")
SigmoidOp = _unary("SigmoidOp", "sigmoid", "Elementwise 1/(1+e**-x).")
ErfOp = _unary("ErfOp", "erf", "Elementwise Gauss error function.")
ReluOp = _unary("ReluOp", "relu", "Elementwise max(x, 0).")
GeluOp = _unary(
    "GeluOp",
    "gelu",
    'Elementwise GELU; approximate = "none" (erf) or "tanh".',
    {"approximate": ("str", "none")},
)
LeakyReluOp = _unary(
    "LeakyReluOp", "leaky_relu", "x if x > 0 else alpha * x.", {"alpha": ("float", 0.01)}
)
ClipOp = _unary(
    "ClipOp",
    "clip",
    "min(max(x, min), max); a missing bound is unbounded.",
    {"min": ("float", -math.inf), "max": ("float", math.inf)},
)


@graph_op
class CastOp(UnaryOp):
    """Elementwise conversion to element type `to`.

    %y = graph.cast %x {to = i64} : (tensor<4xf32>) -> tensor<4xi64>
    """

    name = "graph.cast"
    ATTRS = {"to": ("type", REQUIRED)}

    def infer_element_type(self):
        return self.attr("to")


class BinaryOp(GraphOp):
    """Elementwise binary op with numpy broadcasting."""

    OPERANDS = ("lhs", "rhs")

    def infer_shape(self, shapes):
        return broadcast_shapes(*shapes)

    def verify_(self) -> None:
        if len(self.operands) == 2:
            a, b = (element_type_of(v) for v in self.operands)
            if a != b:
                raise VerifyException(f"{self.name} operands have element types {a} and {b}")
        super().verify_()


def _binary(cls_name: str, mnemonic: str, doc: str):
    cls = type(cls_name, (BinaryOp,), {"name": f"graph.{mnemonic}", "__doc__": doc})
    return graph_op(cls)


AddOp = _binary("AddOp", "add", "Elementwise lhs + rhs (broadcasting).")
SubOp = _binary("SubOp", "sub", "Elementwise lhs - rhs (broadcasting).")
MulOp = _binary("MulOp", "mul", "Elementwise lhs * rhs (broadcasting).")
DivOp = _binary("DivOp", "div", "Elementwise lhs / rhs (broadcasting).")
MaxOp = _binary("MaxOp", "max", "Elementwise maximum (broadcasting).")
MinOp = _binary("MinOp", "min", "Elementwise minimum (broadcasting).")
PowOp = _binary("PowOp", "pow", "Elementwise lhs ** rhs (broadcasting).")


@graph_op
class PReluOp(GraphOp):
    """x if x > 0 else slope * x, slope broadcast against x.

    %y = graph.prelu %x, %slope : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
    """

    name = "graph.prelu"
    OPERANDS = ("input", "slope")

    def infer_shape(self, shapes):
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
    OPERANDS = ("cond", "lhs", "rhs")

    def infer_shape(self, shapes):
        cond, lhs, rhs = (element_type_of(v) for v in self.operands)
        if cond != i1:
            raise VerifyException(f"graph.where condition must be i1, got {cond}")
        if lhs != rhs:
            raise VerifyException(f"graph.where branches have element types {lhs} and {rhs}")
        return broadcast_shapes(*shapes)

    def infer_element_type(self):
        return element_type_of(self.operands[1])


@graph_op
class CompareOp(GraphOp):
    """Elementwise comparison producing i1; predicate is one of eq ne lt le gt ge.

    %m = graph.compare %a, %b {predicate = "gt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    """

    name = "graph.compare"
    OPERANDS = ("lhs", "rhs")
    ATTRS = {"predicate": ("str", REQUIRED)}
    PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")

    def infer_shape(self, shapes):
        if self.attr("predicate") not in self.PREDICATES:
            raise VerifyException(
                f"graph.compare predicate '{self.attr('predicate')}' is not one of "
                f"{', '.join(self.PREDICATES)}"
            )
        return broadcast_shapes(*shapes)

    def infer_element_type(self):
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
    OPERANDS = ("lhs", "rhs")
    ATTRS = {"transpose_a": ("bool", False), "transpose_b": ("bool", False)}

    def infer_shape(self, shapes):
        a, b = shapes
        if not a or not b:
            raise VerifyException("graph.matmul operands must have rank >= 1")
        a_vec, b_vec = len(a) == 1, len(b) == 1
        a2 = (1, *a) if a_vec else a
        b2 = (*b, 1) if b_vec else b
        if self.attr("transpose_a") and not a_vec:
            a2 = (*a2[:-2], a2[-1], a2[-2])
        if self.attr("transpose_b") and not b_vec:
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
    OPERANDS = ("input", "weight", "bias")
    OPTIONAL = ("bias",)

    def infer_shape(self, shapes):
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
        return (values[0],) * 4  # type: ignore[return-value]
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    if len(values) == 4:
        return tuple(values)  # type: ignore[return-value]
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

    `layout` is deliberately not in ATTRS, so consumers that only know NCHW see no new
    keyword in `op.attrs()`; every consumer of these ops must check `layout_of(op)`
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
    """Shared attribute decoding for conv/pool (NCHW, or NHWC with layout = "nhwc")."""

    def strides(self):
        return _pair(self.attr("strides"), "strides")

    def pads(self):
        return _pads(self.attr("pads"))

    def dilations(self):
        return _pair(self.attr("dilations"), "dilations") if "dilations" in self.ATTRS else (1, 1)

    def _spatial(self, h: int, w: int, kh: int, kw: int, ceil_mode: bool = False):
        sh, sw = self.strides()
        pt, pl, pb, pr = self.pads()
        dh, dw = self.dilations()
        if min(sh, sw, dh, dw) < 1 or min(pt, pl, pb, pr) < 0:
            raise VerifyException(f"{self.name} strides/dilations must be >= 1 and pads >= 0")
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
    OPERANDS = ("input", "weight", "bias")
    OPTIONAL = ("bias",)
    ATTRS = {
        "strides": ("ints", (1, 1)),
        "pads": ("ints", (0, 0, 0, 0)),
        "dilations": ("ints", (1, 1)),
        "groups": ("int", 1),
    }

    def infer_shape(self, shapes):
        x, w = _to_nchw(self, shapes[0]), shapes[1]
        if len(x) != 4 or len(w) != 4:
            raise VerifyException(
                f"graph.conv2d expects NCHW input and OIHW weight, got {fmt_shape(x)} "
                f"and {fmt_shape(w)}"
            )
        g = self.attr("groups")
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
    OPERANDS = ("weight",)
    ELEMENTS = "float"

    def infer_shape(self, shapes):
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
    OPERANDS = ("input",)
    ELEMENTS = "float"
    ATTRS = {"pads": ("ints", (0, 0, 0, 0))}

    def infer_shape(self, shapes):
        (x,) = shapes
        if len(x) != 4:
            raise VerifyException(
                f"graph.winograd_input_transform expects an NCHW input, got {fmt_shape(x)}"
            )
        pt, pl, pb, pr = _pads(self.attr("pads"))
        if min(pt, pl, pb, pr) < 0:
            raise VerifyException("graph.winograd_input_transform pads must be >= 0")
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
    OPERANDS = ("input", "bias")
    OPTIONAL = ("bias",)
    ELEMENTS = "float"
    ATTRS = {"output": ("ints", REQUIRED)}

    def infer_shape(self, shapes):
        m = shapes[0]
        if len(m) != 5 or m[0] != WINOGRAD_POINTS:
            raise VerifyException(
                f"graph.winograd_output_transform expects [16, N, O, tiles_h, tiles_w], "
                f"got {fmt_shape(m)}"
            )
        oh, ow = _pair(self.attr("output"), "output")
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
    OPERANDS = ("input",)
    ATTRS = {
        "kernel": ("ints", REQUIRED),
        "strides": ("ints", (1, 1)),
        "pads": ("ints", (0, 0, 0, 0)),
        "ceil_mode": ("bool", False),
    }

    def infer_shape(self, shapes):
        x = _to_nchw(self, shapes[0])
        if len(x) != 4:
            raise VerifyException(f"{self.name} expects NCHW input, got {fmt_shape(x)}")
        kh, kw = _pair(self.attr("kernel"), "kernel")
        oh, ow = self._spatial(x[2], x[3], kh, kw, self.attr("ceil_mode"))
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
    ATTRS = {**PoolOp.ATTRS, "count_include_pad": ("bool", False)}


@graph_op
class GlobalAvgPoolOp(GraphOp):
    """Mean over H and W of NCHW, keeping them as size 1.

    %y = graph.global_avg_pool %x : (tensor<1x64x8x8xf32>) -> tensor<1x64x1x1xf32>
    """

    name = "graph.global_avg_pool"

    def infer_shape(self, shapes):
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
    OPERANDS = ("input", "step")
    OPTIONAL = ("step",)
    ELEMENTS = "float"
    ATTRS = {"p": ("float", 0.5), "seed": ("int", 0)}

    @property
    def training(self) -> bool:
        return len(self.operands) == 2

    def infer_shape(self, shapes):
        p = self.attr("p")
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
    OPERANDS = ("input", "scale", "bias", "mean", "var")
    ATTRS = {"epsilon": ("float", 1e-5)}

    def infer_shape(self, shapes):
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
    OPERANDS = ("input", "scale", "bias")
    OPTIONAL = ("bias",)
    ATTRS = {"axis": ("int", -1), "epsilon": ("float", 1e-5)}

    def infer_shape(self, shapes):
        x = shapes[0]
        axis = normalize_axis(self.attr("axis"), len(x))
        norm = x[axis:]
        for name, s in zip(self.OPERANDS[1:], shapes[1:]):
            if broadcast_shapes(s, norm) != norm:
                raise VerifyException(
                    f"graph.layer_norm {name} has shape {fmt_shape(s)} but the normalised "
                    f"dims are {fmt_shape(norm)}"
                )
        return x


class AxisOp(GraphOp):
    ATTRS = {"axis": ("int", -1)}

    def infer_shape(self, shapes):
        normalize_axis(self.attr("axis"), len(shapes[0]))
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

    ATTRS = {"axes": ("ints", ()), "keepdims": ("bool", False)}

    def reduced_axes(self) -> tuple[int, ...]:
        rank = len(shape_of(self.operands[0]))
        axes = self.attr("axes") or tuple(range(rank))
        if rank == 0 and axes:  # a scalar has no axis to reduce (numpy: out of bounds)
            raise VerifyException(f"{self.name} axis {axes[0]} is out of range for rank 0")
        norm = tuple(sorted({normalize_axis(a, rank) for a in axes}))
        if len(norm) != len(axes):
            raise VerifyException(f"{self.name} axes {list(axes)} contain duplicates")
        return norm

    def infer_shape(self, shapes):
        x = shapes[0]
        axes = self.reduced_axes()
        if self.attr("keepdims"):
            return tuple(1 if i in axes else d for i, d in enumerate(x))
        return tuple(d for i, d in enumerate(x) if i not in axes)


def _reduce(cls_name: str, mnemonic: str, doc: str):
    cls = type(cls_name, (ReduceOp,), {"name": f"graph.{mnemonic}", "__doc__": doc})
    return graph_op(cls)


ReduceSumOp = _reduce("ReduceSumOp", "reduce_sum", "Sum over axes.")
ReduceMeanOp = _reduce("ReduceMeanOp", "reduce_mean", "Mean over axes.")
ReduceMaxOp = _reduce("ReduceMaxOp", "reduce_max", "Maximum over axes.")
ReduceMinOp = _reduce("ReduceMinOp", "reduce_min", "Minimum over axes.")
ReduceProdOp = _reduce("ReduceProdOp", "reduce_prod", "Product over axes.")


# ----------------------------------------------------------------- data movement


@graph_op
class ReshapeOp(GraphOp):
    """Same elements, new shape; one -1 dim is inferred, 0 copies the input dim.

    %y = graph.reshape %x {shape = array<i64: 1, -1>} : (tensor<1x16x4x4xf32>) -> tensor<1x256xf32>
    """

    name = "graph.reshape"
    ATTRS = {"shape": ("ints", REQUIRED)}

    def infer_shape(self, shapes):
        x = shapes[0]
        target = list(self.attr("shape"))
        for i, d in enumerate(target):
            if d == 0:
                if i >= len(x):
                    raise VerifyException("graph.reshape 0 refers to a missing input dim")
                target[i] = x[i]
        total = math.prod(x)
        if target.count(-1) > 1:
            raise VerifyException("graph.reshape shape may contain at most one -1")
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            if known == 0 or total % known:
                raise VerifyException(
                    f"graph.reshape cannot reshape {fmt_shape(x)} into {list(self.attr('shape'))}"
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
    ATTRS = {"perm": ("ints", ())}

    def permutation(self) -> tuple[int, ...]:
        rank = len(shape_of(self.operands[0]))
        perm = self.attr("perm") or tuple(reversed(range(rank)))
        if sorted(normalize_axis(p, rank) for p in perm) != list(range(rank)):
            raise VerifyException(
                f"graph.transpose perm {list(perm)} is not a permutation of {rank} dims"
            )
        return tuple(normalize_axis(p, rank) for p in perm)

    def infer_shape(self, shapes):
        return tuple(shapes[0][p] for p in self.permutation())


@graph_op
class ConcatOp(GraphOp):
    """Join tensors along `axis`; other dims must agree.

    %y = graph.concat %a, %b {axis = 1 : i64} : (tensor<1x4xf32>, tensor<1x6xf32>) -> tensor<1x10xf32>
    """

    name = "graph.concat"
    OPERANDS = ("*inputs",)
    ATTRS = {"axis": ("int", 0)}

    def infer_shape(self, shapes):
        first = shapes[0]
        if not first:
            raise VerifyException("graph.concat needs operands of rank 1 or more, got a scalar")
        axis = normalize_axis(self.attr("axis"), len(first))
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
    ATTRS = {
        "starts": ("ints", REQUIRED),
        "ends": ("ints", REQUIRED),
        "axes": ("ints", ()),
        "steps": ("ints", ()),
    }

    def normalized(self) -> list[tuple[int, int, int]]:
        """(start, stop, step) per input dim, as Python's slice.indices gives."""
        x = shape_of(self.operands[0])
        starts, ends = self.attr("starts"), self.attr("ends")
        axes = self.attr("axes") or tuple(range(len(starts)))
        steps = self.attr("steps") or (1,) * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise VerifyException("graph.slice starts, ends, axes and steps differ in length")
        out = [(0, d, 1) for d in x]
        for s, e, a, st in zip(starts, ends, axes, steps):
            if st == 0:
                raise VerifyException("graph.slice step must not be 0")
            a = normalize_axis(a, len(x))
            out[a] = slice(s, e, st).indices(x[a])
        return out

    def infer_shape(self, shapes):
        return tuple(len(range(*t)) for t in self.normalized())


@graph_op
class PadOp(GraphOp):
    """Constant padding: pads = [begin_0, ..., begin_n, end_0, ..., end_n] (ONNX order).

    %y = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x6x6xf32>
    """

    name = "graph.pad"
    ATTRS = {"pads": ("ints", REQUIRED), "value": ("float", 0.0)}

    def infer_shape(self, shapes):
        x = shapes[0]
        pads = self.attr("pads")
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
    ATTRS = {"shape": ("ints", REQUIRED)}

    def infer_shape(self, shapes):
        target = tuple(self.attr("shape"))
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
    OPERANDS = ("data", "indices")
    ATTRS = {"axis": ("int", 0)}

    def infer_shape(self, shapes):
        d, idx = shapes
        axis = normalize_axis(self.attr("axis"), len(d))
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
    traits = lazy_traits_def(lambda: (IsTerminator(), Pure(), HasParent(FusedOp)))
    assembly_format = "$values attr-dict `:` type($values)"


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
            show = lambda types: "(" + ", ".join(str(t) for t in types) + ")"
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


# ------------------------------------------------------------------------- dialect

# math functions of floats (C's expf, tanhf, ...; no integer form)
for _op in (ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp, ErfOp, GeluOp, SoftmaxOp,
            LogSoftmaxOp, LayerNormOp, BatchNormOp):  # fmt: skip
    _op.ELEMENTS = "float"
for _op in (ReduceMeanOp, GlobalAvgPoolOp, AvgPool2DOp):  # a mean of i1 is no i1
    _op.ELEMENTS = "numeric"

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
    ReluOp,
    GeluOp,
    LeakyReluOp,
    ClipOp,
    CastOp,
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MaxOp,
    MinOp,
    PowOp,
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
    PadOp,
    BroadcastOp,
    GatherOp,
    FusedOp,
    YieldOp,
]

UNARY_OPS = [
    NegOp,
    AbsOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    TanhOp,
    SigmoidOp,
    ErfOp,
    ReluOp,
    GeluOp,
    LeakyReluOp,
    ClipOp,
    CastOp,
]
BINARY_OPS = [AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp]

Graph = Dialect("graph", [*GRAPH_OPS], [])
