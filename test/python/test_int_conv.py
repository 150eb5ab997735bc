"""The integer conv template (passes/schedule/int_conv.py) on graph IR a user can load
(`.mlir`): a QDQ conv (dequantize -> conv2d -> relu -> quantize) that graph-fold-qdq makes one
int8 kernel takes the template (an i32 tile `_acc`, no kernel-local `sums` left) and gives
the numpy target's answers; a strided conv, which the template refuses (stride 1 only),
keeps another schedule and the same answers."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc


def _dense(a: np.ndarray) -> str:
    return "[" + ", ".join(_dense(x) if isinstance(x, np.ndarray) else str(int(x)) for x in a) + "]"


def _model(tmp_path, n, c, h, w, o, strides, pads) -> str:
    rng = np.random.default_rng(o + strides[0])
    wq = rng.integers(-20, 21, (o, c, 3, 3)).astype(np.int8)
    oh = (h + pads[0] + pads[2] - 3) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - 3) // strides[1] + 1
    x, wt, y = f"{n}x{c}x{h}x{w}", f"{o}x{c}x3x3", f"{n}x{o}x{oh}x{ow}"
    text = f"""
func.func @main(%xq: tensor<{x}xi8>) -> tensor<{y}xi8> {{
  %sx = graph.constant dense<0.05> : tensor<f32>
  %zx = graph.constant dense<2> : tensor<i8>
  %wq = graph.constant dense<{_dense(wq)}> : tensor<{wt}xi8>
  %sw = graph.constant dense<0.02> : tensor<f32>
  %zw = graph.constant dense<0> : tensor<i8>
  %sy = graph.constant dense<0.1> : tensor<f32>
  %zy = graph.constant dense<-3> : tensor<i8>
  %x = graph.dequantize %xq, %sx, %zx : (tensor<{x}xi8>, tensor<f32>, tensor<i8>) -> tensor<{x}xf32>
  %w = graph.dequantize %wq, %sw, %zw : (tensor<{wt}xi8>, tensor<f32>, tensor<i8>) -> tensor<{wt}xf32>
  %c = graph.conv2d %x, %w {{strides = array<i64: {strides[0]}, {strides[1]}>, pads = array<i64: {", ".join(map(str, pads))}>}} : (tensor<{x}xf32>, tensor<{wt}xf32>) -> tensor<{y}xf32>
  %r = graph.relu %c : (tensor<{y}xf32>) -> tensor<{y}xf32>
  %q = graph.quantize %r, %sy, %zy : (tensor<{y}xf32>, tensor<f32>, tensor<i8>) -> tensor<{y}xi8>
  func.return %q : tensor<{y}xi8>
}}
"""
    path = tmp_path / "conv.mlir"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("shape", "strides", "templated"),
    [((2, 3, 9, 10, 8), (1, 1), True), ((1, 4, 9, 9, 4), (2, 2), False)],
    ids=["stride1", "stride2"],
)
def test_int_conv_template(tmp_path, shape, strides, templated):
    model = dlpc.load(_model(tmp_path, *shape, strides=strides, pads=(1, 1, 1, 1)))
    compiled = dlpc.compile(model, target="c")
    kernels = [
        op
        for op in compiled.lowered.walk()
        if op.name == "loop.kernel" and "graph.conv_integer" in op.attributes["origin"].data
    ]
    assert len(kernels) == 1  # graph-fold-qdq made the conv an integer kernel
    text = str(kernels[0])
    assert ("_acc = memref.alloca()" in text and "%sums" not in text) == templated
    x = np.random.default_rng(5).integers(-128, 128, shape[:4]).astype(np.int8)
    got = compiled(x)[0]
    want = dlpc.compile(model, target="numpy")(x)[0]
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.98  # a tie rescaled in f32: one quantum
