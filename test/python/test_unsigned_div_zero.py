"""ONNX Div and Mod of unsigned integers by zero (undefined in ONNX; onnxruntime fails the run):
x / 0 is 0, as numpy's and as dlpc's signed division gives it, and x % 0 is x, so that
a == (a / b) * b + a % b still holds; on numpy, C and OpenCL, for uint8 to uint64 (x86 traps
on an integer x / 0: the C and OpenCL builds killed the process). Other quotients as numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

TYPES = {
    "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
}


def _save(tmp_path, dtype: str) -> str:
    elem = TYPES[dtype]
    nodes = [
        helper.make_node("Div", ["a", "b"], ["q"]),
        helper.make_node("Mod", ["a", "b"], ["r"]),
    ]
    g = helper.make_graph(
        nodes,
        "udiv",
        [helper.make_tensor_value_info(n, elem, [8]) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, elem, [8]) for n in ("q", "r")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / f"{dtype}.onnx"
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
@pytest.mark.parametrize("dtype", list(TYPES))
def test_unsigned_div_by_zero_is_zero_and_mod_keeps_x(tmp_path, dtype, target):
    top = np.iinfo(dtype).max
    a = np.array([7, 0, top, top, 5, 9, 1, top], dtype)
    b = np.array([0, 0, 0, 1, 2, 9, 3, top], dtype)
    with np.errstate(divide="ignore"):
        want_q, want_r = a // b, np.where(b == 0, a, a % b)
    assert not want_q[:3].any()  # numpy's x / 0 is 0
    q, r = dlpc.compile(dlpc.load(_save(tmp_path, dtype)), target=target)(a, b)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)
