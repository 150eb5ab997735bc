"""What the ONNX importer (`onnx.py`) and its operator handlers (`onnx_ops/`) share:
import-time constants, the element-type mapping, and `NodeContext`, what a handler reads
of the importer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from xdsl.ir import SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph

if TYPE_CHECKING:
    from onnx import NodeProto


@dataclass(eq=False)
class Const:
    """A value known at import time; `name` is its initializer/ONNX value name."""

    array: np.ndarray
    name: str | None = None


Value = Const | SSAValue


class NodeContext(Protocol):
    """The importer as an operator handler sees it, while it imports one node
    (`dlpc.frontends.onnx.Importer` is the implementation; the handlers depend on this
    interface only, so `onnx_ops` does not import `onnx`)."""

    @property
    def node(self) -> NodeProto: ...
    @property
    def op_type(self) -> str: ...
    def op_version(self) -> int: ...
    def error(self, message: str) -> DlpcError: ...
    def input(self, i: int) -> Value | None: ...
    def required(self, i: int) -> Value: ...
    def value(self, i: int | Value) -> SSAValue: ...
    def const(self, i: int, what: str) -> np.ndarray | None: ...
    def required_const(self, i: int, what: str) -> np.ndarray: ...
    def shape(self, v: Value) -> tuple[int, ...]: ...
    def dtype(self, v: Value) -> np.dtype: ...
    def emit(self, op_cls: type[graph.GraphOp], *operands: Value, **attrs: Any) -> SSAValue: ...
    def scalar(self, value: float, like: Value) -> Const: ...
    def reshape(self, v: Value, shape: Sequence[int]) -> Value: ...
    def attrs(self, spec: dict[str, Any]) -> dict[str, Any]: ...
    def require(self, attrs: dict, name: str, allowed: Sequence[Any]) -> None: ...
    def no_extra_outputs(self, keep: int) -> None: ...


def onnx_dtype_to_numpy(onnx_type: int) -> np.dtype | None:
    """numpy dtype for an ONNX TensorProto element type, None when dlpc has no such type."""
    from onnx import helper

    try:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, TypeError, ValueError):
        return None
    return dt if dt.name in graph.NUMPY_TO_ELT else None


def onnx_type_name(onnx_type: object) -> str:
    """ONNX's name of an element type code, for messages; a value that is no type code
    (a mutated model's float or string) is shown as it is."""
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(onnx_type).lower()  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        return f"{onnx_type!r} (not an element type)"
