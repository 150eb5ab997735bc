"""What the ONNX importer (`onnx.py`) and its operator handlers (`onnx_ops.py`) share:
import-time constants and the element-type mapping."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue

from dlpc.dialects import graph


@dataclass(eq=False)
class Const:
    """A value known at import time; `name` is its initializer/ONNX value name."""

    array: np.ndarray
    name: str | None = None


Value = Const | SSAValue


def onnx_dtype_to_numpy(onnx_type: int) -> np.dtype | None:
    """numpy dtype for an ONNX TensorProto element type, None when dlpc has no such type."""
    from onnx import helper

    try:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, TypeError, ValueError):
        return None
    return dt if dt.name in graph.NUMPY_TO_ELT else None


def onnx_type_name(onnx_type: int) -> str:
    from onnx import TensorProto

    return TensorProto.DataType.Name(onnx_type).lower()
