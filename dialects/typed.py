# pyright: strict
"""Typed readers at the xDSL boundary.

xDSL types an op's operands and results as plain `SSAValue`s (their `.type` is an
`Attribute`, whatever `operand_def(MemRefType)` promises), an `IntegerAttr`'s payload as a
generic data attribute, and a `DenseArrayBase`'s values by overloads on its type
parameter, which a value read from IR never has. These helpers check the one thing the
caller relies on with `isinstance` and return it with its real type, so the code that
uses them needs no cast. A failed check raises `VerifyException` naming the value: on
verified IR it cannot happen (it is a dlpc invariant), on IR that skipped the verifier
it is a one-line diagnostic rather than an `AttributeError`.

`isinstance` cannot bind a generic attribute's parameters (pyright leaves them unknown):
after the check, a `cast` to the class over `Attribute`, the bound of every parameter,
states what always holds.
"""

from __future__ import annotations

from typing import TypeGuard, cast

from xdsl.dialects.builtin import (
    AnyFloat,
    ContainerType,
    DenseArrayBase,
    FixedBitwidthType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ShapedType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

__all__ = [
    "bitwidth",
    "dense_ints",
    "element_type",
    "float_type",
    "int_value",
    "is_integer_type",
    "memref_type",
    "shape_of",
    "tensor_type",
]


def memref_type(value: SSAValue | Attribute) -> MemRefType[Attribute]:
    """The `memref` type of a value (or the type itself)."""
    ty = value.type if isinstance(value, SSAValue) else value
    if not isinstance(ty, MemRefType):
        raise VerifyException(f"expected a memref, got {ty}")
    return cast(MemRefType[Attribute], ty)


def tensor_type(value: SSAValue | Attribute) -> TensorType[Attribute]:
    """The `tensor` type of a value (or the type itself)."""
    ty = value.type if isinstance(value, SSAValue) else value
    if not isinstance(ty, TensorType):
        raise VerifyException(f"expected a tensor, got {ty}")
    return cast(TensorType[Attribute], ty)


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    """The shape of a shaped (tensor, memref, vector) value or type."""
    ty = value.type if isinstance(value, SSAValue) else value
    if not isinstance(ty, ShapedType):
        raise VerifyException(f"expected a shaped type, got {ty}")
    return ty.get_shape()


def element_type(value: SSAValue | Attribute) -> Attribute:
    """The element type of a container (tensor, memref, vector) value or type."""
    ty = value.type if isinstance(value, SSAValue) else value
    if not isinstance(ty, ContainerType):
        raise VerifyException(f"expected a container type, got {ty}")
    return cast(ContainerType[Attribute], ty).get_element_type()


def float_type(ty: Attribute) -> AnyFloat:
    """`ty` as a floating-point type."""
    if not isinstance(ty, AnyFloat):
        raise VerifyException(f"expected a float type, got {ty}")
    return ty


def is_integer_type(ty: Attribute) -> TypeGuard[IntegerType[int, Signedness]]:
    """Whether `ty` is an integer type (`i1`, `i32`, `ui8`; not `index`): `isinstance`
    with the parameters bound."""
    return isinstance(ty, IntegerType)


def bitwidth(ty: Attribute) -> int:
    """Bits of a scalar type (integer, float; `index` has no fixed width)."""
    if not isinstance(ty, FixedBitwidthType):
        raise VerifyException(f"expected a scalar type with a fixed bit width, got {ty}")
    return ty.bitwidth


def int_value(attr: Attribute) -> int:
    """The value of an `IntegerAttr` (`4 : i64`, `4 : index`)."""
    if not isinstance(attr, IntegerAttr):
        raise VerifyException(f"expected an integer attribute, got {attr}")
    return attr.value.data


def dense_ints(attr: Attribute) -> tuple[int, ...]:
    """The values of an integer dense array (`array<i64: 1, 2>`)."""
    if isinstance(attr, DenseArrayBase):
        array = cast(DenseArrayBase[IntegerType[int, Signedness] | AnyFloat], attr)
        elt = array.elt_type
        if isinstance(elt, IntegerType):
            return elt.unpack(array.data.data, len(array))
    raise VerifyException(f"expected an integer dense array, got {attr}")
