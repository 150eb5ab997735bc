"""Linear quantization: QuantizeLinear / DequantizeLinear onto graph.quantize /
graph.dequantize (per tensor or per axis, 8- and 16-bit integer types), MatMulInteger /
ConvInteger onto graph.matmul_integer / graph.conv_integer (i32 accumulation), and
QLinearMatMul / QLinearConv as the integer product followed by its requantization
`quantize(f32(acc) * (scale_a * scale_b / scale_y), 1, zero_y)` (one kernel after
graph-fuse: the requantization is the reduction's epilogue). DynamicQuantizeLinear
imports through its ONNX function body. Blocked quantization, float8/int4 types and
`precision` are refused by name."""

from __future__ import annotations

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.nn import _window
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value, onnx_dtype_to_numpy

QUANT_DTYPES = ("int8", "uint8", "int16", "uint16")


def _check_scale(imp: NodeContext, scale: Value, what: str) -> None:
    if imp.dtype(scale).kind != "f":
        raise imp.error(f"{what} must be floating-point, got {imp.dtype(scale)}")
    if len(imp.shape(scale)) > 1:
        raise imp.error(
            f"{what} of shape {list(imp.shape(scale))}: blocked quantization is not supported"
        )


def _zero(imp: NodeContext, i: int, like: Value, dtype: np.dtype) -> Value:
    """Input i (a zero point), or zeros of `dtype` in `like`'s shape when it is absent."""
    z = imp.input(i)
    if z is None:
        return Const(np.zeros(imp.shape(like), dtype=dtype))
    if imp.dtype(z) != dtype:
        raise imp.error(f"zero point of type {imp.dtype(z)} where {dtype} is expected")
    return z


def _block_size(imp: NodeContext, a: dict) -> None:
    if a.get("block_size"):
        raise imp.error(f"blocked quantization (block_size = {a['block_size']}) is not supported")


def _axis(imp: NodeContext, axis: int, x: Value, scale: Value) -> int:
    """The quantization axis (checked only for a per-axis scale; else 0)."""
    if len(imp.shape(scale)) == 1 and imp.shape(scale)[0] > 1:
        return norm_axis(imp, axis, len(imp.shape(x)))
    return 0


def _same_float(imp: NodeContext, x: Value, scale: Value) -> tuple[Value, Value]:
    """x and scale in one float type (the wider: numpy's x / scale)."""
    tx, ts = imp.dtype(x), imp.dtype(scale)
    if tx == ts:
        return x, scale
    wide = np.promote_types(tx, ts)
    elt = graph.NUMPY_TO_ELT[wide.name]
    if tx != wide:
        x = imp.emit(graph.CastOp, x, to=elt)
    if ts != wide:
        scale = imp.emit(graph.CastOp, scale, to=elt)
    return x, scale


@handles("QuantizeLinear")
def quantize_linear(imp: NodeContext):
    a = imp.attrs({"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": 0, "precision": 0})
    _block_size(imp, a)
    x, scale = imp.required(0), imp.required(1)
    _check_scale(imp, scale, "y_scale")
    if imp.dtype(x).kind != "f":
        raise imp.error(f"input 0 must be floating-point, got {imp.dtype(x)}")
    if a["precision"] and onnx_dtype_to_numpy(a["precision"]) != np.promote_types(
        imp.dtype(x), imp.dtype(scale)
    ):
        raise imp.error(f"attribute 'precision' = {a['precision']} is not supported")
    z = imp.input(2)
    if z is not None:
        dtype = imp.dtype(z)
    elif a["output_dtype"]:
        dtype = onnx_dtype_to_numpy(a["output_dtype"])
    else:
        dtype = np.dtype("uint8")
    if dtype is None or dtype.name not in QUANT_DTYPES:
        raise imp.error(
            f"quantization to {dtype if dtype is not None else a['output_dtype']} is not "
            f"supported (dlpc quantizes to {', '.join(QUANT_DTYPES)})"
        )
    axis = _axis(imp, a["axis"], x, scale)
    x, scale = _same_float(imp, x, scale)
    return [imp.emit(graph.QuantizeOp, x, scale, _zero(imp, 2, scale, dtype), axis=axis)]


@handles("DequantizeLinear")
def dequantize_linear(imp: NodeContext):
    a = imp.attrs({"axis": 1, "block_size": 0, "output_dtype": 0})
    _block_size(imp, a)
    x, scale = imp.required(0), imp.required(1)
    _check_scale(imp, scale, "x_scale")
    dtype = imp.dtype(x)
    if dtype.name not in (*QUANT_DTYPES, "int32"):
        raise imp.error(
            f"dequantization of {dtype} is not supported (dlpc dequantizes "
            f"{', '.join(QUANT_DTYPES)} and int32)"
        )
    if a["output_dtype"] and onnx_dtype_to_numpy(a["output_dtype"]) != imp.dtype(scale):
        raise imp.error(f"attribute 'output_dtype' = {a['output_dtype']} is not supported")
    axis = _axis(imp, a["axis"], x, scale)
    return [imp.emit(graph.DequantizeOp, x, scale, _zero(imp, 2, scale, dtype), axis=axis)]


def _int8(imp: NodeContext, v: Value, what: str) -> np.dtype:
    dtype = imp.dtype(v)
    if dtype.name not in ("int8", "uint8"):
        raise imp.error(f"{what} must be int8 or uint8, got {dtype}")
    return dtype


def _matmul_integer(imp: NodeContext, a: Value, b: Value, za: Value | None, zb: Value | None):
    """graph.matmul_integer of a [.., M, K] and b [.., K, N] (1-D operands as numpy.matmul)."""
    ta, tb = _int8(imp, a, "A"), _int8(imp, b, "B")
    za = Const(np.zeros((), ta)) if za is None else za
    zb = Const(np.zeros((), tb)) if zb is None else zb
    sa, sb = imp.shape(a), imp.shape(b)
    if not sa or not sb:
        raise imp.error("MatMulInteger operands must have rank >= 1")
    a2 = imp.reshape(a, (1, *sa)) if len(sa) == 1 else a
    b2 = imp.reshape(b, (*sb, 1)) if len(sb) == 1 else b
    for z, t in ((za, ta), (zb, tb)):
        if imp.dtype(z) != t:
            raise imp.error(f"zero point of type {imp.dtype(z)} where {t} is expected")
    y = imp.emit(graph.MatMulIntegerOp, a2, b2, za, zb)
    out = graph.shape_of(y)
    if len(sa) == 1:
        out = (*out[:-2], out[-1])
    if len(sb) == 1:
        out = out[:-1]
    return imp.reshape(y, out)


def _flat(imp: NodeContext, v: Value) -> Value:
    """A [1, n] / [n, 1] zero point or scale as [n] (one value stays as it is)."""
    s = imp.shape(v)
    return imp.reshape(v, (int(np.prod(s)),)) if len(s) > 1 else v


@handles("MatMulInteger")
def matmul_integer(imp: NodeContext):
    imp.attrs({})
    za, zb = imp.input(2), imp.input(3)
    za = None if za is None else _flat(imp, za)
    zb = None if zb is None else _flat(imp, zb)
    return [_matmul_integer(imp, imp.required(0), imp.required(1), za, zb)]


def _conv_integer(imp: NodeContext, a: dict, x: Value, w: Value, zx, zw) -> Value:
    tx, tw = _int8(imp, x, "x"), _int8(imp, w, "w")
    kernel = imp.shape(w)[2:]
    if len(kernel) != 2 or len(imp.shape(x)) != 4:
        raise imp.error(
            f"only 2-D integer convolutions are supported (input has rank {len(imp.shape(x))})"
        )
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != kernel:
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from the weight's "
            f"{list(kernel)}"
        )
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    zx = Const(np.zeros((), tx)) if zx is None else _flat(imp, zx)
    zw = Const(np.zeros((), tw)) if zw is None else _flat(imp, zw)
    return imp.emit(
        graph.ConvIntegerOp,
        x,
        w,
        zx,
        zw,
        strides=strides,
        dilations=dil,
        pads=(pads[0], pads[1], pads[2], pads[3]),
        groups=a["group"],
    )


CONV_ATTRS = {
    "auto_pad": "NOTSET",
    "dilations": None,
    "group": 1,
    "kernel_shape": None,
    "pads": None,
    "strides": None,
}


@handles("ConvInteger")
def conv_integer(imp: NodeContext):
    a = imp.attrs(CONV_ATTRS)
    x, w = imp.required(0), imp.required(1)
    return [_conv_integer(imp, a, x, w, imp.input(2), imp.input(3))]


def _requantize(imp: NodeContext, acc: Value, multiplier: Value, zy: Value) -> Value:
    """quantize(f32(acc) * multiplier, 1, zy): ONNX's `rint(acc * (sa * sb / sy)) + zy`,
    saturated."""
    if imp.dtype(zy).name not in ("int8", "uint8") or len(imp.shape(zy)) > 1:
        raise imp.error(f"y_zero_point must be one int8 or uint8 value, got {imp.dtype(zy)}")
    if imp.dtype(multiplier) != np.float32:
        multiplier = imp.emit(graph.CastOp, multiplier, to=graph.NUMPY_TO_ELT["float32"])
    f = imp.emit(graph.CastOp, acc, to=graph.NUMPY_TO_ELT["float32"])
    f = imp.emit(graph.MulOp, f, multiplier)
    one = Const(np.ones(imp.shape(zy), np.float32))
    return imp.emit(graph.QuantizeOp, f, one, zy, axis=0)


def _scales(imp: NodeContext, *indices: int) -> list[Value]:
    out = []
    for i in indices:
        s = imp.required(i)
        _check_scale(imp, s, f"input {i} (a scale)")
        out.append(s)
    return out


@handles("QLinearMatMul")
def qlinear_matmul(imp: NodeContext):
    imp.attrs({})
    a, b = imp.required(0), imp.required(3)
    sa, sb, sy = _scales(imp, 1, 4, 6)
    za, zb = _flat(imp, imp.required(2)), _flat(imp, imp.required(5))
    acc = _matmul_integer(imp, a, b, za, zb)
    if len(imp.shape(sa)) == 1 and imp.shape(sa)[0] > 1:  # one per row of a
        sa = imp.reshape(sa, (imp.shape(sa)[0], 1))
    m = imp.emit(graph.DivOp, imp.emit(graph.MulOp, sa, sb), sy)
    return [_requantize(imp, acc, m, imp.required(7))]


@handles("QLinearConv")
def qlinear_conv(imp: NodeContext):
    a = imp.attrs(CONV_ATTRS)
    x, w = imp.required(0), imp.required(3)
    sx, sw, sy = _scales(imp, 1, 4, 6)
    acc = _conv_integer(imp, a, x, w, imp.required(2), imp.required(5))
    o = imp.shape(w)[0]
    bias = imp.input(8)
    if bias is not None:
        if imp.dtype(bias) != np.int32 or imp.shape(bias) != (o,):
            raise imp.error(
                f"B must be int32 of shape [{o}], got {imp.dtype(bias)} {list(imp.shape(bias))}"
            )
        acc = imp.emit(graph.AddOp, acc, imp.reshape(bias, (o, 1, 1)))
    if len(imp.shape(sw)) == 1 and imp.shape(sw)[0] > 1:  # one per output channel
        sw = imp.reshape(sw, (imp.shape(sw)[0], 1, 1))
    m = imp.emit(graph.DivOp, imp.emit(graph.MulOp, sx, sw), sy)
    return [_requantize(imp, acc, m, imp.required(7))]
