"""The numpy reference: the definition of every graph op's semantics.

Every other backend and every lowering is checked against this module.

- `KERNELS`: op name -> a plain numpy function `kernel(*arrays, **attrs)`. Kernels are
  self-contained (they use only `np`, `math` and each other), so `emit_numpy` copies
  their source into the generated module: the emitted code and the reference are the
  same code.
- `kernel_args(op)`: the keyword arguments of an op's kernel, in canonical form
  (pads as [top, left, bottom, right], reshape target resolved, slice bounds resolved).
- `REFERENCE`: op name -> `fn(op, *arrays) -> np.ndarray` (a tuple for a multi-result
  graph.fused) for every graph op,
  including `graph.param` (its one array is the bound weight, checked against the
  declared type), `graph.fused` (its region is evaluated) and the control flow,
  `graph.if` and `graph.loop` (`run_region` evaluates a branch or one iteration).
- `evaluate_op(op, arrays)` (`evaluate_results` for several results),
  `run_reference(module, inputs, weights)`,
  (`dlpc.backends.numpy.emit_numpy` turns a module into Python source from these kernels).

Arithmetic is float32 like the compiled backends; float64 is used inside a kernel
only where accuracy needs it (erf).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph

# ------------------------------------------------------------------ elementwise


def neg(x):
    return np.negative(x)


def absolute(x):
    return np.abs(x)


def exp(x):
    return np.exp(x)


def log(x):
    return np.log(x)


def sqrt(x):
    return np.sqrt(x)


def rsqrt(x):
    return (1 / np.sqrt(x)).astype(x.dtype)


def tanh(x):
    return np.tanh(x)


def sin(x):
    return np.sin(x)


def cos(x):
    return np.cos(x)


def tan(x):
    return np.tan(x)


def asin(x):
    return np.arcsin(x)


def acos(x):
    return np.arccos(x)


def atan(x):
    return np.arctan(x)


def sinh(x):
    return np.sinh(x)


def cosh(x):
    return np.cosh(x)


def asinh(x):
    return np.arcsinh(x)


def acosh(x):
    return np.arccosh(x)


def atanh(x):
    return np.arctanh(x)


def floor(x):
    return np.floor(x)


def ceil(x):
    return np.ceil(x)


def round_even(x):
    # halves to even, as ONNX Round
    return np.round(x)


def sigmoid(x):
    # 1 / (1 + e^-x), written so that neither branch overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def erf(x):
    # math.erf in float64, element by element: exact to float32 rounding
    y = np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64))
    return np.asarray(y, dtype=np.float64).astype(x.dtype)


def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


def gelu(x, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype)


def leaky_relu(x, alpha):
    return np.where(x > 0, x, alpha * x).astype(x.dtype)


def clip(x, min, max):  # noqa: A002 - the op's attribute names
    return np.minimum(np.maximum(x, min), max).astype(x.dtype)


def cast(x, to):
    return x.astype(to)


def bitcast(x, to):
    # the same bits read as `to` (of the same width)
    return np.asarray(x).view(to)


def add(a, b):
    return np.add(a, b)


def sub(a, b):
    return np.subtract(a, b)


def mul(a, b):
    return np.multiply(a, b)


def div(a, b):
    if np.issubdtype(a.dtype, np.unsignedinteger):
        with np.errstate(divide="ignore"):  # x / 0 is 0, as the C backend's
            return np.floor_divide(a, b)
    if np.issubdtype(a.dtype, np.integer):
        # integer division truncates toward zero, as in C: the floor, plus 1 where inexact
        # with the signs apart (no |x|: |int64 min| overflows); in int64, so int8 -128 / -1
        # wraps to -128 as C's conversion back does; x / 0 is 0, as the C backend's
        x, y = a.astype(np.int64), b.astype(np.int64)
        with np.errstate(divide="ignore", over="ignore"):
            q = x // y + ((x % y != 0) & ((x < 0) != (y < 0)))
        return q.astype(a.dtype)
    return np.divide(a, b)


def maximum(a, b):
    return np.maximum(a, b)


def minimum(a, b):
    return np.minimum(a, b)


def power(a, b):
    return np.power(a, b)


def bit_and(a, b):
    return np.bitwise_and(a, b)


def bit_or(a, b):
    return np.bitwise_or(a, b)


def bit_xor(a, b):
    return np.bitwise_xor(a, b)


def bit_not(x):
    return np.invert(x)


def shift_left(a, b):
    # a shift by < 0 or >= the width gives 0 (ONNX BitShift)
    ok = (b >= 0) & (b < a.dtype.itemsize * 8)
    return np.where(ok, np.left_shift(a, np.where(ok, b, 0)), 0).astype(a.dtype)


def shift_right(a, b):
    # logical on unsigned types, arithmetic on signed ones; a shift by < 0 or >= the width
    # gives the sign fill alone (-1 for a negative signed a, else 0)
    ok = (b >= 0) & (b < a.dtype.itemsize * 8)
    fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
    return np.where(ok, np.right_shift(a, np.where(ok, b, 0)), fill).astype(a.dtype)


def prelu(x, slope):
    return np.where(x > 0, x, slope * x).astype(x.dtype)


def where(cond, a, b):
    return np.where(cond, a, b)


def compare(a, b, predicate):
    fns = {
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
    }
    return fns[predicate](a, b)


# --------------------------------------------------------------- linear algebra


def matmul(a, b, transpose_a, transpose_b):
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def linear(x, w, b=None):
    y = np.matmul(x, w.T)
    return y if b is None else y + b.reshape(-1)


def _windows(x, kh, kw, strides, dilations, out_hw):
    """Yield (i, j, view): view[n, c, oh, ow] = x[n, c, oh*sh + i*dh, ow*sw + j*dw]."""
    (sh, sw), (dh, dw), (oh, ow) = strides, dilations, out_hw
    for i in range(kh):
        for j in range(kw):
            top, left = i * dh, j * dw
            yield (
                i,
                j,
                x[:, :, top : top + sh * (oh - 1) + 1 : sh, left : left + sw * (ow - 1) + 1 : sw],
            )


def _pad_hw(x, pads, value, out_hw=None, kernel=(1, 1), strides=(1, 1), dilations=(1, 1)):
    """Pad H and W by pads [top, left, bottom, right] plus, for ceil_mode, whatever
    the last window needs beyond the bottom/right edge."""
    top, left, bottom, right = pads
    if out_hw is not None:
        for axis, (o, k, s, d) in enumerate(zip(out_hw, kernel, strides, dilations)):
            need = (o - 1) * s + d * (k - 1) + 1
            have = x.shape[2 + axis] + pads[axis] + pads[axis + 2]
            if axis == 0:
                bottom += max(0, need - have)
            else:
                right += max(0, need - have)
    width = ((0, 0), (0, 0), (top, bottom), (left, right))
    return np.pad(x, width, mode="constant", constant_values=value)


def _channels_first(x):
    """NHWC -> NCHW: the last axis becomes axis 1."""
    return np.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


def _channels_last(y):
    """NCHW -> NHWC (contiguous): axis 1 becomes the last axis."""
    return np.ascontiguousarray(np.transpose(y, (0, *range(2, y.ndim), 1)))


def conv2d(x, w, b=None, *, strides, pads, dilations, groups, layout="nchw"):
    if layout == "nhwc":  # NHWC input and result, OIHW weight
        y = conv2d(
            _channels_first(x), w, b, strides=strides, pads=pads, dilations=dilations, groups=groups
        )
        return _channels_last(y)
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    dh, dw = dilations
    hp, wp = x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]
    oh = (hp - dh * (kh - 1) - 1) // strides[0] + 1
    ow = (wp - dw * (kw - 1) - 1) // strides[1] + 1
    xp = _pad_hw(x, pads, 0)
    wg = w.reshape(groups, o // groups, cg * kh * kw)
    y = np.empty((n, o, oh, ow), dtype=np.result_type(w.dtype, x.dtype))
    # im2col a band of output rows at a time: cols[n, c, i, j, rows, ow] (at most 2^22
    # elements, so the copy stays small next to the input), then one batched matmul per group
    rows = max(1, (1 << 22) // max(1, n * c * kh * kw * ow))
    for r0 in range(0, oh, rows):
        r1 = min(oh, r0 + rows)
        cols = np.empty((n, c, kh, kw, r1 - r0, ow), dtype=x.dtype)
        for i, j, view in _windows(xp, kh, kw, strides, dilations, (oh, ow)):
            cols[:, :, i, j] = view[:, :, r0:r1]
        cols = cols.reshape(n, groups, cg * kh * kw, (r1 - r0) * ow)
        y[:, :, r0:r1] = np.matmul(wg[None], cols).reshape(n, o, r1 - r0, ow)
    if b is None:
        return y
    bias = b.reshape(1, o, 1, 1)
    if np.result_type(y.dtype, bias.dtype) == y.dtype:
        return np.add(y, bias, out=y)  # in place: no second output-sized array
    return y + bias


# Winograd F(2x2, 3x3) (Lavin & Gray); the point t = 4 * a + b of a 4x4 tile is dim 0
def winograd_filter_transform(w):
    """U[4a+b, o, i] = (G g[o, i] G^T)[a, b] of an OIHW 3x3 weight."""
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=w.dtype)
    u = np.einsum("ai,ocij,bj->aboc", g, w, g)
    return u.reshape(16, w.shape[0], w.shape[1])


def winograd_input_transform(x, pads):
    """V[4a+b, n, c, th, tw] = (B^T d B)[a, b] of the 4x4 tile d at (2 th, 2 tw) of x
    padded by pads [top, left, bottom, right] (zeros beyond the padding too)."""
    n, c, h, w = x.shape
    top, left, bottom, right = pads
    th, tw = (h + top + bottom - 1) // 2, (w + left + right - 1) // 2
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=x.dtype)
    xp[:, :, top : top + h, left : left + w] = x
    d = np.empty((4, 4, n, c, th, tw), dtype=x.dtype)
    for i in range(4):
        for j in range(4):
            d[i, j] = xp[:, :, i : i + 2 * th : 2, j : j + 2 * tw : 2]
    bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=x.dtype)
    v = np.einsum("ai,ijncst,bj->abncst", bt, d, bt)
    return v.reshape(16, n, c, th, tw)


def winograd_output_transform(m, b=None, *, output):
    """y[n, o, 2 th + a, 2 tw + b] = (A^T m[:, n, o, th, tw] A)[a, b] (+ bias[o]), cropped
    to `output` (H, W)."""
    _, n, o, th, tw = m.shape
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=m.dtype)
    y = np.einsum("ai,ijnost,bj->nosatb", at, m.reshape(4, 4, n, o, th, tw), at)
    y = y.reshape(n, o, 2 * th, 2 * tw)[:, :, : output[0], : output[1]]
    y = np.ascontiguousarray(y)
    return y if b is None else y + b.reshape(1, o, 1, 1)


def max_pool2d(x, *, kernel, strides, pads, ceil_mode, out_hw, layout="nchw"):
    if layout == "nhwc":
        return _channels_last(
            max_pool2d(
                _channels_first(x),
                kernel=kernel,
                strides=strides,
                pads=pads,
                ceil_mode=ceil_mode,
                out_hw=out_hw,
            )
        )
    # padding is -inf (an integer type's minimum) so it never wins the max
    low = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    xp = _pad_hw(x, pads, low, out_hw, kernel, strides)
    y = np.full(x.shape[:2] + tuple(out_hw), low, dtype=x.dtype)
    for _, _, view in _windows(xp, kernel[0], kernel[1], strides, (1, 1), out_hw):
        np.maximum(y, view, out=y)
    return y


def avg_pool2d(x, *, kernel, strides, pads, ceil_mode, count_include_pad, out_hw, layout="nchw"):
    if layout == "nhwc":
        y = avg_pool2d(
            _channels_first(x),
            kernel=kernel,
            strides=strides,
            pads=pads,
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
            out_hw=out_hw,
        )
        return _channels_last(y)
    xp = _pad_hw(x, pads, 0, out_hw, kernel, strides)
    # divisor: window cells inside the input (or inside input + explicit pads)
    ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    if count_include_pad:
        mask = _pad_hw(_pad_hw(ones, pads, 1), (0, 0, 0, 0), 0, out_hw, kernel, strides)
    else:
        mask = _pad_hw(ones, pads, 0, out_hw, kernel, strides)
    total = np.zeros(x.shape[:2] + tuple(out_hw), dtype=x.dtype)
    count = np.zeros((1, 1) + tuple(out_hw), dtype=x.dtype)
    windows = zip(
        _windows(xp, kernel[0], kernel[1], strides, (1, 1), out_hw),
        _windows(mask, kernel[0], kernel[1], strides, (1, 1), out_hw),
    )
    for (_, _, view), (_, _, m) in windows:
        total += view
        count += m
    return total / count


def global_avg_pool(x, layout="nchw"):
    spatial = range(1, x.ndim - 1) if layout == "nhwc" else range(2, x.ndim)
    return np.mean(x, axis=tuple(spatial), keepdims=True)


# ---------------------------------------------------------------- normalisation


def batch_norm(x, scale, bias, mean, var, *, epsilon, layout="nchw"):
    # statistics per channel: axis 1, or the last axis with layout "nhwc"
    shape = (1,) * (x.ndim - 1) + (-1,) if layout == "nhwc" else (1, -1) + (1,) * (x.ndim - 2)
    inv = 1 / np.sqrt(var + np.asarray(epsilon, dtype=x.dtype))
    y = (x - mean.reshape(shape)) * (inv * scale).reshape(shape)
    return y + bias.reshape(shape)


def layer_norm(x, scale, bias=None, *, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=axes, keepdims=True)
    y = centred / np.sqrt(var + np.asarray(epsilon, dtype=x.dtype)) * scale
    return y if bias is None else y + bias


def _sum_f32(e, axis):
    """Sum over `axis` (kept); f16 terms are summed in f32 and rounded once, as numpy does
    along a contiguous axis (whatever the axis, so the definition is layout-free)."""
    if e.dtype == np.float16:
        return np.sum(e.astype(np.float32), axis=axis, keepdims=True).astype(np.float16)
    return np.sum(e, axis=axis, keepdims=True)


def softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / _sum_f32(e, axis)


def log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(_sum_f32(np.exp(shifted), axis))


# ------------------------------------------------------------------- reductions


def reduce_sum(x, axes, keepdims):
    # integers sum in their own type (numpy would widen int32 to int64), wrapping as C does
    dtype = x.dtype if x.dtype.kind in "iu" else None
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=dtype)


def reduce_mean(x, axes, keepdims):
    return np.mean(x, axis=axes, keepdims=keepdims)


def reduce_max(x, axes, keepdims):
    return np.max(x, axis=axes, keepdims=keepdims)


def reduce_min(x, axes, keepdims):
    return np.min(x, axis=axes, keepdims=keepdims)


def reduce_prod(x, axes, keepdims):
    dtype = x.dtype if x.dtype.kind in "iu" else None  # (as reduce_sum)
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=dtype)


# ---------------------------------------------------------------- data movement


def reshape(x, shape):
    return np.reshape(x, shape)


def transpose(x, perm):
    return np.transpose(x, perm)


def concat(*xs, axis):
    return np.concatenate(xs, axis=axis)


def strided_slice(x, index):
    # index: one (start, stop, step) per dim; stop None runs to the end
    return x[tuple(slice(*t) for t in index)]


def dynamic_slice(x, starts, axes, sizes):
    # sizes[k] elements from starts[k] on axes[k]: a negative start counts from the end,
    # then the start is clamped to [0, dim - size]
    index = [slice(None)] * x.ndim
    for k, (a, n) in enumerate(zip(axes, sizes)):
        a = a + x.ndim if a < 0 else a
        s = int(starts[k])
        s = s + x.shape[a] if s < 0 else s
        s = min(max(s, 0), x.shape[a] - n)
        index[a] = slice(s, s + n)
    return x[tuple(index)]


def pad(x, pads, value):
    rank = x.ndim
    begin, end = pads[:rank], pads[rank:]
    # negative pads crop, positive pads add `value`
    x = x[
        tuple(
            slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end))
        )
    ]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    return np.pad(x, width, mode="constant", constant_values=value)


def broadcast(x, shape):
    return np.broadcast_to(x, shape).copy()


def gather(data, indices, axis):
    return np.take(data, indices, axis=axis)


def pcg_hash(v):
    """The PCG hash (Jarzynski & Olano, "Hash Functions for GPU Rendering", 2020) of
    32-bit values held in int64: a Python int or an int64 numpy array, the same code. Every
    product is of a value < 2**32 and a constant < 2**31, so nothing overflows int64: C,
    OpenCL, DLP C and numpy compute the same bits with signed 64-bit arithmetic
    (graph-to-te lowers `graph.dropout` to exactly these operations)."""
    s = (v * 747796405 + 2891336453) & 0xFFFFFFFF
    w = (((s >> ((s >> 28) + 4)) ^ s) * 277803737) & 0xFFFFFFFF
    return (w >> 22) ^ w


def dropout_threshold(p):
    """An element is kept when (hash >> 8) >= this: u = (hash >> 8) / 2**24 >= p."""
    return math.ceil(p * (1 << 24))


def dropout_keep(shape, step, seed, p):
    """graph.dropout's mask (bool): (pcg(pcg(pcg(seed) ^ step) ^ i) >> 8) >= threshold(p)
    for the flat index i, all 32-bit values in int64."""
    i = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    s = np.int64(int(step) & 0xFFFFFFFF)
    h = pcg_hash(pcg_hash(np.int64(pcg_hash(seed & 0xFFFFFFFF)) ^ s) ^ i)
    return (h >> 8) >= dropout_threshold(p)


def dropout(x, step=None, *, p, seed):
    """graph.dropout: x * mask / (1 - p); without a step (inference) the identity."""
    if step is None:
        return x.copy()
    keep = dropout_keep(x.shape, step, seed, p)
    return np.where(keep, x * x.dtype.type(1.0 / (1.0 - p)), x.dtype.type(0))


# ---------------------------------------------------------------- quantization


def quantize(x, scale, zero_point, axis):
    # saturate(round_half_even(x / scale) + zero_point), x / scale in x's float type; a
    # parameter is one value ([] or [1]) or one per entry of `axis`
    shape = [1] * x.ndim
    if scale.size > 1:
        shape[axis % x.ndim] = scale.size
    q = np.rint(x / scale.reshape(shape)) + zero_point.reshape(shape).astype(x.dtype)
    info = np.iinfo(zero_point.dtype)  # saturated; nan gives the minimum
    q = np.where(q > info.min, q, info.min)
    return np.where(q < info.max, q, info.max).astype(zero_point.dtype)


def dequantize(x, scale, zero_point, axis):
    # (x - zero_point) * scale, in f32 (then the scale's type)
    shape = [1] * x.ndim
    if scale.size > 1:
        shape[axis % x.ndim] = scale.size
    d = x.astype(np.float32) - zero_point.reshape(shape).astype(np.float32)
    return (d * scale.reshape(shape).astype(np.float32)).astype(scale.dtype)


def matmul_integer(a, b, a_zero_point, b_zero_point, transpose_b):
    # (a - za) @ (b - zb) in int32: za one per row of a (or one), zb one per column of b
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    za = a_zero_point.astype(np.int32)
    za = za.reshape(-1, 1) if za.size > 1 else za.reshape(())
    zb = b_zero_point.astype(np.int32)
    zb = zb.reshape(-1) if zb.size > 1 else zb.reshape(())
    return np.matmul(a.astype(np.int32) - za, b.astype(np.int32) - zb)


def conv_integer(x, w, x_zero_point, w_zero_point, *, strides, pads, dilations, groups):
    # conv2d of (x - zx) and (w - zw) in int64 (exact) then int32: padding adds 0
    zw = w_zero_point.astype(np.int64)
    zw = zw.reshape(-1, 1, 1, 1) if zw.size > 1 else zw.reshape(())
    xi = x.astype(np.int64) - x_zero_point.astype(np.int64).reshape(())
    y = conv2d(
        xi, w.astype(np.int64) - zw, strides=strides, pads=pads, dilations=dilations, groups=groups
    )
    return y.astype(np.int32)


KERNELS: dict[str, Callable] = {
    "graph.neg": neg,
    "graph.abs": absolute,
    "graph.exp": exp,
    "graph.log": log,
    "graph.sqrt": sqrt,
    "graph.rsqrt": rsqrt,
    "graph.tanh": tanh,
    "graph.sigmoid": sigmoid,
    "graph.erf": erf,
    "graph.sin": sin,
    "graph.cos": cos,
    "graph.tan": tan,
    "graph.asin": asin,
    "graph.acos": acos,
    "graph.atan": atan,
    "graph.sinh": sinh,
    "graph.cosh": cosh,
    "graph.asinh": asinh,
    "graph.acosh": acosh,
    "graph.atanh": atanh,
    "graph.floor": floor,
    "graph.ceil": ceil,
    "graph.round": round_even,
    "graph.relu": relu,
    "graph.gelu": gelu,
    "graph.leaky_relu": leaky_relu,
    "graph.clip": clip,
    "graph.cast": cast,
    "graph.bitcast": bitcast,
    "graph.add": add,
    "graph.sub": sub,
    "graph.mul": mul,
    "graph.div": div,
    "graph.max": maximum,
    "graph.min": minimum,
    "graph.pow": power,
    "graph.prelu": prelu,
    "graph.bit_and": bit_and,
    "graph.bit_or": bit_or,
    "graph.bit_xor": bit_xor,
    "graph.bit_not": bit_not,
    "graph.shift_left": shift_left,
    "graph.shift_right": shift_right,
    "graph.where": where,
    "graph.compare": compare,
    "graph.matmul": matmul,
    "graph.linear": linear,
    "graph.conv2d": conv2d,
    "graph.winograd_filter_transform": winograd_filter_transform,
    "graph.winograd_input_transform": winograd_input_transform,
    "graph.winograd_output_transform": winograd_output_transform,
    "graph.max_pool2d": max_pool2d,
    "graph.avg_pool2d": avg_pool2d,
    "graph.global_avg_pool": global_avg_pool,
    "graph.batch_norm": batch_norm,
    "graph.layer_norm": layer_norm,
    "graph.dropout": dropout,
    "graph.softmax": softmax,
    "graph.log_softmax": log_softmax,
    "graph.reduce_sum": reduce_sum,
    "graph.reduce_mean": reduce_mean,
    "graph.reduce_max": reduce_max,
    "graph.reduce_min": reduce_min,
    "graph.reduce_prod": reduce_prod,
    "graph.reshape": reshape,
    "graph.transpose": transpose,
    "graph.concat": concat,
    "graph.slice": strided_slice,
    "graph.dynamic_slice": dynamic_slice,
    "graph.pad": pad,
    "graph.broadcast": broadcast,
    "graph.gather": gather,
    "graph.quantize": quantize,
    "graph.dequantize": dequantize,
    "graph.matmul_integer": matmul_integer,
    "graph.conv_integer": conv_integer,
}


def kernel_args(op: Operation) -> dict:
    """Keyword arguments of `KERNELS[op.name]` for `op`, in canonical form; an op with
    `layout = "nhwc"` (`graph.layout_of`) gets `layout="nhwc"` (NCHW, the default, none)."""
    args = _layout_free_args(op)
    layout_ops = graph.WindowOp | graph.GlobalAvgPoolOp | graph.BatchNormOp
    if isinstance(op, layout_ops) and graph.layout_of(op) == "nhwc":
        args["layout"] = "nhwc"
    return args


def _layout_free_args(op: Operation) -> dict:
    assert isinstance(op, graph.GraphOp)
    if isinstance(op, graph.WindowOp):
        args = {"strides": op.strides, "pads": op.pads}
        if isinstance(op, graph.Conv2DOp | graph.ConvIntegerOp):
            return {**args, "dilations": op.dilations, "groups": op.groups}
        assert isinstance(op, graph.PoolOp)
        args["kernel"] = op.kernel
        args["ceil_mode"] = op.ceil_mode
        if isinstance(op, graph.AvgPool2DOp):
            args["count_include_pad"] = op.count_include_pad
        return {**args, "out_hw": graph._to_nchw(op, op.out_shape)[2:]}
    if isinstance(op, graph.WinogradInputTransformOp):
        return {"pads": op.pads}
    if isinstance(op, graph.WinogradOutputTransformOp):
        return {"output": op.output_size}
    if isinstance(op, graph.ReduceOp):
        return {"axes": op.reduced_axes(), "keepdims": op.keepdims}
    if isinstance(op, graph.ReshapeOp):
        return {"shape": op.out_shape}
    if isinstance(op, graph.BroadcastOp):  # (its symbolic dims, not the property's `?`)
        return {"shape": op.shape}
    if isinstance(op, graph.TransposeOp):
        return {"perm": op.permutation()}
    if isinstance(op, graph.SliceOp):
        # slice.indices gives stop -1 for a full negative-step slice; None says "to the end"
        return {"index": tuple((a, b if b >= 0 else None, s) for a, b, s in op.normalized())}
    if isinstance(op, graph.CastOp | graph.BitcastOp):
        return {"to": graph.numpy_dtype(op.to)}
    if isinstance(op, graph.SoftmaxOp | graph.LogSoftmaxOp | graph.ConcatOp | graph.GatherOp):
        return {"axis": graph.normalize_axis(op.axis, len(op.in_shapes[0]))}
    return op.prop_values()


# -------------------------------------------------------------------- REFERENCE


def result_dtype(value: SSAValue) -> np.dtype:
    ty = value.type
    assert isinstance(ty, TensorType)
    return np.dtype(graph.numpy_dtype(ty.get_element_type()))


def _run_kernel(op: Operation, *arrays: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return KERNELS[op.name](*arrays, **kernel_args(op))


def _constant(op: Operation) -> np.ndarray:
    assert isinstance(op, graph.ConstantOp)
    return op.to_numpy()


def _param(op: Operation, value: np.ndarray) -> np.ndarray:
    """A bound weight, checked against the declared type."""
    assert isinstance(op, graph.ParamOp)
    shape, dtype = graph.shape_of(op.output), result_dtype(op.output)
    value = np.asarray(value)
    if value.shape != shape:
        raise DlpcError(
            f"error: weight '{op.pname}' has shape {graph.fmt_shape(value.shape)} but "
            f"graph.param declares {graph.fmt_shape(shape)}"
        )
    if value.dtype != dtype and not np.can_cast(value.dtype, dtype, "same_kind"):
        raise DlpcError(
            f"error: weight '{op.pname}' has dtype {value.dtype} but graph.param declares {dtype}"
        )
    return value.astype(dtype, copy=False)


def _fused(op: Operation, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    """Evaluate the region of graph.fused on its operands."""
    block = op.regions[0].blocks[0]
    env: dict[SSAValue, np.ndarray] = dict(zip(block.args, arrays))
    for inner in block.ops:
        if inner.name == "graph.yield":
            outs = [env[v] for v in inner.operands]
            return outs[0] if len(outs) == 1 else tuple(outs)
        env.update(zip(inner.results, evaluate_results(inner, [env[v] for v in inner.operands])))
    raise DlpcError(f"error: graph.fused '{_fused_name(op)}' has no graph.yield")


def _fused_name(op: Operation) -> str:
    return getattr(op.attributes.get("kernel"), "data", "fused")


REFERENCE: dict[str, Callable[..., np.ndarray | tuple[np.ndarray, ...]]] = {
    name: _run_kernel for name in KERNELS
}
REFERENCE["graph.constant"] = _constant
REFERENCE["graph.param"] = _param
REFERENCE["graph.fused"] = _fused


def run_region(block, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The values a region's graph.yield gives for `arrays` on its block arguments."""
    env: dict[SSAValue, np.ndarray] = dict(zip(block.args, arrays))
    for inner in block.ops:
        if inner.name == "graph.yield":
            return tuple(env[v] for v in inner.operands)
        env.update(zip(inner.results, evaluate_results(inner, [env[v] for v in inner.operands])))
    raise DlpcError(f"error: a {block.parent_op().name} region has no graph.yield")


def control(op: Operation, arrays: Sequence[np.ndarray], run=None) -> tuple[np.ndarray, ...]:
    """graph.if: the then region's values when the condition is true, else the else
    region's; graph.loop: the body while the condition holds and fewer than trip_count
    (when not -1) iterations ran, the carried values after the last one. `run(block,
    arrays)` evaluates a region (`run_region`; the te evaluator passes its own)."""
    run = run or run_region
    cond, *values = arrays
    if isinstance(op, graph.IfOp):
        return run((op.then_region if bool(cond) else op.else_region).block, values)
    assert isinstance(op, graph.LoopOp)
    go, i = bool(cond), 0
    while go and (op.trips < 0 or i < op.trips):
        out = run(op.body.block, (np.asarray(i, dtype=np.int64), *values))
        go, values, i = bool(out[0]), list(out[1:]), i + 1
    return tuple(values)


def _if(op: Operation, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    return control(op, arrays)


def _loop(op: Operation, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    return control(op, arrays)


REFERENCE["graph.if"] = _if
REFERENCE["graph.loop"] = _loop


def evaluate_results(op: Operation, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The values of `op`'s results on `arrays` (one per operand), with the results' dtypes
    (a graph.fused may have several)."""
    fn = REFERENCE.get(op.name)
    if fn is None:
        raise DlpcError(f"error: the numpy reference has no definition of '{op.name}'")
    out = fn(op, *arrays)
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(np.asarray(o, dtype=result_dtype(r)) for o, r in zip(outs, op.results))


def evaluate_op(op: Operation, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The value of one-result `op` on `arrays` (one per operand), with the result's dtype."""
    assert len(op.results) == 1, f"{op.name} has {len(op.results)} results: evaluate_results"
    (value,) = evaluate_results(op, arrays)
    return value


# ------------------------------------------------------------------ interpreter


def main_func(module: ModuleOp) -> FuncOp:
    for op in module.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == "main":
            return op
    raise DlpcError("error: the module has no func.func @main")


def input_names(func: FuncOp) -> list[str]:
    """Source names of @main's arguments (`dlpc.name`), else arg0, arg1, ..."""
    names = []
    attrs = func.arg_attrs.data if func.arg_attrs is not None else ()
    for i, arg in enumerate(func.args):
        attr = attrs[i].data.get("dlpc.name") if i < len(attrs) else None
        names.append(getattr(attr, "data", None) or arg.name_hint or f"arg{i}")
    return names


def param_names(module: ModuleOp) -> list[str]:
    """Names of the graph.param ops in @main, in order of first use, without repeats."""
    names: list[str] = []
    for op in main_func(module).walk():
        if isinstance(op, graph.ParamOp) and op.pname not in names:
            names.append(op.pname)
    return names


def check_inputs(func: FuncOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs as arrays; a wrong count, shape or dtype is a DlpcError naming the input."""
    names = input_names(func)
    if len(inputs) != len(func.args):
        raise DlpcError(
            f"error: the model takes {len(func.args)} inputs "
            f"({', '.join(names)}) but {len(inputs)} were given"
        )
    arrays = []
    for name, arg, x in zip(names, func.args, inputs):
        x = np.asarray(x)
        shape, dtype = graph.shape_of(arg), result_dtype(arg)
        if x.shape != shape:
            raise DlpcError(
                f"error: input '{name}' has shape {graph.fmt_shape(x.shape)} "
                f"but the model expects {graph.fmt_shape(shape)}"
            )
        if x.dtype != dtype:
            raise DlpcError(
                f"error: input '{name}' has dtype {x.dtype} but the model expects {dtype}"
            )
        arrays.append(x)
    return arrays


def run_reference(
    module: ModuleOp, inputs: Sequence[np.ndarray], weights: dict[str, np.ndarray]
) -> list[np.ndarray]:
    """Interpret @main op by op with the reference kernels."""
    func = main_func(module)
    env: dict[SSAValue, np.ndarray] = dict(zip(func.args, check_inputs(func, inputs)))
    dead = dead_after(func)
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            return [env[v] for v in op.operands]
        if isinstance(op, graph.ParamOp):
            if op.pname not in weights:
                raise DlpcError(f"error: no value for weight '{op.pname}' (graph.param)")
            env[op.output] = evaluate_op(op, [weights[op.pname]])
            continue
        env.update(zip(op.results, evaluate_results(op, [env[v] for v in op.operands])))
        for v in dead.get(op, ()):  # values no later op reads: their memory goes now
            env.pop(v, None)
    raise DlpcError("error: @main has no func.return")


def dead_after(func: FuncOp) -> dict[Operation, list[SSAValue]]:
    """For each op of @main, the values whose last reader it is (the returned values and
    unread results of the op itself are listed where they die: never / right away)."""
    last: dict[SSAValue, Operation] = {}
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            for v in op.operands:
                last.pop(v, None)  # returned: alive to the end
            continue
        for v in op.operands:
            last[v] = op
        for r in op.results:
            last.setdefault(r, op)  # an unread result dies where it is made
    dead: dict[Operation, list[SSAValue]] = {}
    for v, op in last.items():
        dead.setdefault(op, []).append(v)
    return dead


def peak_bytes(module: ModuleOp) -> int:
    """A lower bound of the memory a run of `run_reference` holds at once: the largest
    total of the values alive around one op (its operands and results included). The
    inputs stay alive throughout (the caller holds them), weights from where they are
    read, returned values to the end."""
    func = main_func(module)
    dead = dead_after(func)
    size = lambda v: 0 if v in func.args else value_bytes(v.type)
    live = sum(value_bytes(a.type) for a in func.args)
    peak = live
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            break
        live += sum(size(r) for r in op.results)
        peak = max(peak, live)
        live -= sum(size(v) for v in dead.get(op, ()))
    return peak


def value_bytes(ty) -> int:
    """The bytes a value of type `ty` takes (0 for a symbolic shape or a non-tensor)."""
    if not isinstance(ty, TensorType) or any(d < 0 for d in ty.get_shape()):
        return 0
    return math.prod(ty.get_shape()) * graph.element_bytes(ty.get_element_type())
