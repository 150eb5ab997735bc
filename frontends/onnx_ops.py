"""ONNX operator handlers: one function per operator, `HANDLERS[op_type](importer)`.

Each handler reads the current node through the importer (a `NodeContext`: `imp.attrs`,
`imp.input`, `imp.const`, `imp.emit`) and returns the node's output values (graph SSA values or
import-time `Const`s). Attributes a handler does not list are rejected by `imp.attrs`;
attribute values it cannot honour are rejected by `imp.require`, so nothing is dropped.

Nodes whose inputs are all known at import time never reach a handler: the importer folds
them (see `dlpc.frontends.onnx`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_values import (
    Const,
    NodeContext,
    Value,
    onnx_dtype_to_numpy,
    onnx_type_name,
)

HANDLERS: dict[str, Callable[[NodeContext], list[Value]]] = {}


def handles(*op_types: str):
    def register(fn):
        for t in op_types:
            HANDLERS[t] = fn
        return fn

    return register


def _norm_axis(imp: NodeContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise imp.error(f"attribute '{what}' = {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


# ------------------------------------------------------------------- elementwise

UNARY = {
    "Relu": graph.ReluOp,
    "Sigmoid": graph.SigmoidOp,
    "Tanh": graph.TanhOp,
    "Exp": graph.ExpOp,
    "Log": graph.LogOp,
    "Sqrt": graph.SqrtOp,
    "Erf": graph.ErfOp,
    "Neg": graph.NegOp,
    "Abs": graph.AbsOp,
}


@handles(*UNARY)
def unary(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(UNARY[imp.node.op_type], imp.value(0))]


@handles("Identity")
def identity(imp: NodeContext):
    imp.attrs({})
    return [imp.required(0)]


@handles("Reciprocal")
def reciprocal(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    return [imp.emit(graph.DivOp, imp.scalar(1.0, x), x)]


@handles("LeakyRelu")
def leaky_relu(imp: NodeContext):
    a = imp.attrs({"alpha": 0.01})
    return [imp.emit(graph.LeakyReluOp, imp.value(0), alpha=a["alpha"])]


@handles("PRelu")
def prelu(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(graph.PReluOp, imp.value(0), imp.value(1))]


@handles("Elu", "Selu", "Celu")
def elu(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs(
        {
            "alpha": {"Elu": 1.0, "Selu": 1.67326319217681884765625, "Celu": 1.0}[op],
            **({"gamma": 1.05070102214813232421875} if op == "Selu" else {}),
        }
    )
    x = imp.required(0)
    alpha = a["alpha"]
    # x > 0 ? x : alpha * (exp(x / alpha) - 1)    (Celu divides by alpha, Elu/Selu do not)
    inner = imp.emit(graph.DivOp, x, imp.scalar(alpha, x)) if op == "Celu" else x
    neg = imp.emit(graph.SubOp, imp.emit(graph.ExpOp, inner), imp.scalar(1.0, x))
    neg = imp.emit(graph.MulOp, neg, imp.scalar(alpha, x))
    pos = imp.emit(graph.CompareOp, x, imp.scalar(0.0, x), predicate="gt")
    y = imp.emit(graph.WhereOp, pos, x, neg)
    if op == "Selu":
        y = imp.emit(graph.MulOp, y, imp.scalar(a["gamma"], x))
    return [y]


@handles("HardSigmoid", "HardSwish")
def hard_sigmoid(imp: NodeContext):
    if imp.node.op_type == "HardSigmoid":
        a = imp.attrs({"alpha": 0.2, "beta": 0.5})
    else:
        a = imp.attrs({})
        a = {"alpha": 1.0 / 6.0, "beta": 0.5}
    x = imp.required(0)
    # max(0, min(1, alpha * x + beta)), times x for HardSwish
    y = imp.emit(
        graph.AddOp, imp.emit(graph.MulOp, x, imp.scalar(a["alpha"], x)), imp.scalar(a["beta"], x)
    )
    y = imp.emit(graph.ClipOp, y, min=0.0, max=1.0)
    if imp.node.op_type == "HardSwish":
        y = imp.emit(graph.MulOp, x, y)
    return [y]


@handles("Softplus", "Softsign")
def softplus(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    if imp.node.op_type == "Softplus":  # log(exp(x) + 1)
        return [
            imp.emit(
                graph.LogOp, imp.emit(graph.AddOp, imp.emit(graph.ExpOp, x), imp.scalar(1.0, x))
            )
        ]
    den = imp.emit(graph.AddOp, imp.emit(graph.AbsOp, x), imp.scalar(1.0, x))  # x / (1 + |x|)
    return [imp.emit(graph.DivOp, x, den)]


@handles("Mish", "Swish")
def mish(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"alpha": 1.0} if op == "Swish" else {})
    x = imp.required(0)
    if op == "Swish":  # x * sigmoid(alpha * x)
        ax = x if a["alpha"] == 1.0 else imp.emit(graph.MulOp, x, imp.scalar(a["alpha"], x))
        return [imp.emit(graph.MulOp, x, imp.emit(graph.SigmoidOp, ax))]
    # x * tanh(log(1 + exp(x)))
    sp = imp.emit(graph.LogOp, imp.emit(graph.AddOp, imp.emit(graph.ExpOp, x), imp.scalar(1.0, x)))
    return [imp.emit(graph.MulOp, x, imp.emit(graph.TanhOp, sp))]


@handles("ThresholdedRelu", "Shrink", "Sign")
def piecewise(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs(
        {"ThresholdedRelu": {"alpha": 1.0}, "Shrink": {"bias": 0.0, "lambd": 0.5}, "Sign": {}}[op]
    )
    x = imp.required(0)
    zero = imp.scalar(0, x)

    def gt(v: float):
        return imp.emit(graph.CompareOp, x, imp.scalar(v, x), predicate="gt")

    def lt(v: float):
        return imp.emit(graph.CompareOp, x, imp.scalar(v, x), predicate="lt")

    zeros = imp.emit(graph.BroadcastOp, zero, shape=imp.shape(x)) if imp.shape(x) else zero
    if op == "ThresholdedRelu":  # x > alpha ? x : 0
        return [imp.emit(graph.WhereOp, gt(a["alpha"]), x, zeros)]
    if op == "Sign":  # x > 0 ? 1 : (x < 0 ? -1 : 0)
        neg = imp.emit(graph.WhereOp, lt(0), imp.scalar(-1, x), zeros)
        return [imp.emit(graph.WhereOp, gt(0), imp.scalar(1, x), neg)]
    # x < -lambd ? x + bias : (x > lambd ? x - bias : 0)
    hi = imp.emit(
        graph.WhereOp, gt(a["lambd"]), imp.emit(graph.SubOp, x, imp.scalar(a["bias"], x)), zeros
    )
    return [
        imp.emit(
            graph.WhereOp, lt(-a["lambd"]), imp.emit(graph.AddOp, x, imp.scalar(a["bias"], x)), hi
        )
    ]


@handles("IsNaN", "IsInf")
def is_special(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"detect_negative": 1, "detect_positive": 1} if op == "IsInf" else {})
    x = imp.required(0)
    if op == "IsNaN":  # x != x
        return [imp.emit(graph.CompareOp, x, x, predicate="ne")]
    pos = imp.emit(graph.CompareOp, x, imp.scalar(np.inf, x), predicate="eq")
    neg = imp.emit(graph.CompareOp, x, imp.scalar(-np.inf, x), predicate="eq")
    if a["detect_positive"] and a["detect_negative"]:
        return [
            imp.emit(
                graph.CompareOp, imp.emit(graph.AbsOp, x), imp.scalar(np.inf, x), predicate="eq"
            )
        ]
    if a["detect_positive"]:
        return [pos]
    if a["detect_negative"]:
        return [neg]
    return [Const(np.zeros(imp.shape(x), dtype=bool))]


@handles("Clip")
def clip(imp: NodeContext):
    """graph.clip when the bounds are import-time values; bounds computed at run time (or
    graph inputs) are data: max(x, min), then min(., max)."""
    imp.attrs({})
    x, lo, hi = imp.required(0), imp.input(1), imp.input(2)
    if (lo is None or isinstance(lo, Const)) and (hi is None or isinstance(hi, Const)):
        return [
            imp.emit(
                graph.ClipOp,
                imp.value(0),
                min=None if lo is None else float(lo.array.reshape(())),
                max=None if hi is None else float(hi.array.reshape(())),
            )
        ]
    y = x
    if lo is not None:
        y = imp.emit(graph.MaxOp, y, imp.reshape(lo, ()))
    if hi is not None:
        y = imp.emit(graph.MinOp, y, imp.reshape(hi, ()))
    return [y]


@handles("Gelu")
def gelu(imp: NodeContext):
    a = imp.attrs({"approximate": "none"})
    imp.require(a, "approximate", ("none", "tanh"))
    return [imp.emit(graph.GeluOp, imp.value(0), approximate=a["approximate"])]


BINARY = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
    "Pow": graph.PowOp,
}


@handles(*BINARY)
def binary(imp: NodeContext):
    imp.attrs({})
    a, b = imp.required(0), imp.required(1)
    if imp.node.op_type == "Pow" and imp.dtype(a) != imp.dtype(b):
        b = cast_to(imp, b, imp.dtype(a))
    if imp.dtype(a) != imp.dtype(b):
        raise imp.error(f"operands have element types {imp.dtype(a)} and {imp.dtype(b)}")
    return [imp.emit(BINARY[imp.node.op_type], a, b)]


@handles("Mod")
def mod(imp: NodeContext):
    """r = a - trunc(a / b) * b (fmod = 1, C's fmod); for fmod = 0 (Python's %) r then takes
    the divisor's sign: r + b when r != 0 and sign(r) != sign(b). Float trunc goes through
    i64, so float Mod needs |a / b| < 2**63."""
    a_ = imp.attrs({"fmod": 0})
    a, b = imp.required(0), imp.required(1)
    dt = imp.dtype(a)
    if dt != imp.dtype(b):
        raise imp.error(f"operands have element types {dt} and {imp.dtype(b)}")
    q = imp.emit(graph.DivOp, a, b)
    if dt.kind == "f":  # trunc(q) = float(int(q))
        q = cast_to(imp, cast_to(imp, q, np.dtype(np.int64)), dt)
    r = imp.emit(graph.SubOp, a, imp.emit(graph.MulOp, q, b))
    if a_["fmod"]:
        return [r]
    zero = imp.scalar(0, a)
    r_neg = imp.emit(graph.CompareOp, r, zero, predicate="lt")
    b_neg = imp.emit(graph.CompareOp, b, zero, predicate="lt")
    fix = imp.emit(graph.CompareOp, r_neg, b_neg, predicate="ne")
    fix = imp.emit(
        graph.WhereOp,
        imp.emit(graph.CompareOp, r, zero, predicate="ne"),
        fix,
        Const(np.asarray(False)),
    )
    return [imp.emit(graph.WhereOp, fix, imp.emit(graph.AddOp, r, b), r)]


VARIADIC = {"Max": graph.MaxOp, "Min": graph.MinOp, "Sum": graph.AddOp, "Mean": graph.AddOp}


@handles(*VARIADIC)
def variadic(imp: NodeContext):
    imp.attrs({})
    args = [imp.required(i) for i in range(len(imp.node.input))]
    y = args[0]
    for b in args[1:]:
        y = imp.emit(VARIADIC[imp.node.op_type], y, b)
    if imp.node.op_type == "Mean" and len(args) > 1:
        y = imp.emit(graph.DivOp, y, imp.scalar(len(args), y))
    elif len(args) == 1 and isinstance(y, Const):
        y = imp.value(y)
    return [y]


COMPARE = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}


@handles(*COMPARE)
def compare(imp: NodeContext):
    imp.attrs({})
    return [
        imp.emit(
            graph.CompareOp, imp.required(0), imp.required(1), predicate=COMPARE[imp.node.op_type]
        )
    ]


@handles("Not")
def logical_not(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    return [imp.emit(graph.CompareOp, x, Const(np.asarray(False)), predicate="eq")]


@handles("And", "Or", "Xor")
def logical(imp: NodeContext):
    imp.attrs({})
    a, b = imp.required(0), imp.required(1)
    op = imp.node.op_type
    if op == "Xor":  # a != b
        return [imp.emit(graph.CompareOp, a, b, predicate="ne")]
    # and: a ? b : false    or: a ? true : b  (broadcast to the common shape)
    out = graph.broadcast_shapes(imp.shape(a), imp.shape(b))
    b = imp.emit(graph.BroadcastOp, b, shape=out) if imp.shape(b) != out else b
    fixed = Const(np.full(out, op == "Or"))
    return [
        imp.emit(graph.WhereOp, a, b, fixed)
        if op == "And"
        else imp.emit(graph.WhereOp, a, fixed, b)
    ]


@handles("Where")
def where(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(graph.WhereOp, imp.required(0), imp.required(1), imp.required(2))]


def cast_to(imp: NodeContext, v: Value, dtype: np.dtype) -> Value:
    if imp.dtype(v) == dtype:
        return v
    if isinstance(v, Const):
        return Const(v.array.astype(dtype))
    return imp.emit(graph.CastOp, v, to=graph.NUMPY_TO_ELT[dtype.name])


@handles("Cast")
def cast(imp: NodeContext):
    a = imp.attrs({"to": None, "saturate": 1, "round_mode": "up"})
    dt = onnx_dtype_to_numpy(a["to"])
    if dt is None:
        raise imp.error(f"attribute 'to' = {onnx_type_name(a['to'])} is not supported")
    return [cast_to(imp, imp.required(0), dt)]


@handles("CastLike")
def cast_like(imp: NodeContext):
    imp.attrs({"saturate": 1, "round_mode": "up"})
    return [cast_to(imp, imp.required(0), imp.dtype(imp.required(1)))]


@handles("Dropout")
def dropout(imp: NodeContext):
    """Inference: y = x, mask all true. Opsets 7-11 give the ratio as an attribute (and
    are always inference); from 12 `ratio` and `training_mode` are inputs. Training with
    ratio 0 is the identity too; any other training dropout draws random numbers."""
    version = imp.op_version()
    if version < 7:
        raise imp.error(f"Dropout-{version} (with 'is_test') is not supported")
    if version < 12:
        imp.attrs({"ratio": 0.5})
        training, ratio = None, None
    else:
        imp.attrs({"seed": 0})
        training, ratio = imp.const(2, "training_mode"), imp.const(1, "ratio")
    if training is not None and bool(training.reshape(())):
        if ratio is None or float(ratio.reshape(())) != 0.0:
            raise imp.error("training_mode = true is not supported (inference only)")
    x = imp.required(0)
    mask = Const(np.ones(imp.shape(x), dtype=bool))
    return [x, mask]


# ----------------------------------------------------------------- linear algebra


@handles("MatMul")
def matmul(imp: NodeContext):
    imp.attrs({})
    return [imp.emit(graph.MatMulOp, imp.required(0), imp.required(1))]


@handles("Gemm")
def gemm(imp: NodeContext):
    a = imp.attrs({"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    x, w, c = imp.required(0), imp.required(1), imp.input(2)
    if len(imp.shape(x)) != 2 or len(imp.shape(w)) != 2:
        raise imp.error(f"A and B must be matrices, got shapes {imp.shape(x)} and {imp.shape(w)}")
    n = imp.shape(w)[0 if a["transB"] else 1]
    if (
        not a["transA"]
        and a["transB"]
        and a["alpha"] == 1.0
        and (c is None or (a["beta"] == 1.0 and imp.shape(c) in ((n,), (1, n))))
    ):
        # y = x @ w^T + c: PyTorch's nn.Linear as exported
        return [imp.emit(graph.LinearOp, x, w, *([c] if c is not None else []))]
    y = imp.emit(graph.MatMulOp, x, w, transpose_a=bool(a["transA"]), transpose_b=bool(a["transB"]))
    if a["alpha"] != 1.0:
        y = imp.emit(graph.MulOp, y, imp.scalar(a["alpha"], y))
    if c is not None:
        if a["beta"] != 1.0:
            c = imp.emit(graph.MulOp, c, imp.scalar(a["beta"], c))
        y = imp.emit(graph.AddOp, y, c)
    return [y]


# -------------------------------------------------------------- conv and pooling


def _window(imp: NodeContext, a: dict, spatial: tuple[int, ...], kernel: tuple[int, ...]):
    """(strides, dilations, pads as [begin..., end...]) with auto_pad resolved."""
    r = len(spatial)
    strides = tuple(a.get("strides") or (1,) * r)
    dil = tuple(a.get("dilations") or (1,) * r)
    pads = tuple(a.get("pads") or (0,) * (2 * r))
    if len(strides) != r or len(dil) != r or len(pads) != 2 * r:
        raise imp.error(f"strides/dilations/pads do not match {r} spatial dims")
    mode = a["auto_pad"]
    imp.require(a, "auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))
    if mode == "VALID":
        pads = (0,) * (2 * r)
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dil):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if mode == "SAME_UPPER" else big)
            end.append(big if mode == "SAME_UPPER" else small)
        pads = (*begin, *end)
    return strides, dil, pads


def _to_2d(imp: NodeContext, x: Value, what: str) -> tuple[Value, bool]:
    """Give a 1-D (N, C, W) input an H of 1; 2-D passes; other ranks are errors."""
    shape = imp.shape(x)
    if len(shape) == 3:
        return imp.reshape(x, (shape[0], shape[1], 1, shape[2])), True
    if len(shape) != 4:
        raise imp.error(f"only 1-D and 2-D {what} are supported (input has rank {len(shape)})")
    return x, False


def _pads_2d(pads, one_d: bool) -> tuple[int, int, int, int]:
    # ONNX [begin..., end...] -> graph [top, left, bottom, right]
    return (0, pads[0], 0, pads[1]) if one_d else (pads[0], pads[1], pads[2], pads[3])


def _from_2d(imp: NodeContext, y: Value, one_d: bool) -> Value:
    if not one_d:
        return y
    n, c, _, w = imp.shape(y)
    return imp.reshape(y, (n, c, w))


@handles("Conv")
def conv(imp: NodeContext):
    a = imp.attrs(
        {
            "auto_pad": "NOTSET",
            "dilations": None,
            "group": 1,
            "kernel_shape": None,
            "pads": None,
            "strides": None,
        }
    )
    x, w, b = imp.required(0), imp.required(1), imp.input(2)
    kernel = imp.shape(w)[2:]
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != kernel:
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from "
            f"the weight's {list(kernel)}"
        )
    if len(kernel) not in (1, 2, 3) or len(imp.shape(x)) != len(kernel) + 2:
        raise imp.error(
            f"only 1-D, 2-D and 3-D convolutions are supported (input has rank {len(imp.shape(x))})"
        )
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    return [_conv(imp, x, w, b, strides, dil, pads, a["group"])]


def _conv_transpose_pads(imp: NodeContext, a: dict, spatial, kernel) -> list[int]:
    """Pads from output_shape / SAME auto_pad, as the ONNX ConvTranspose spec gives them."""
    r = len(spatial)
    strides = a["strides"] or (1,) * r
    dil = a["dilations"] or (1,) * r
    outpad = a["output_padding"] or (0,) * r
    out = a["output_shape"] or [d * s for d, s in zip(spatial, strides)]
    out = list(out)[-r:]
    begin, end = [], []
    for i in range(r):
        total = strides[i] * (spatial[i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - out[i]
        # (a negative total pads the output: negative pads give extra rows/columns)
        small, big = total // 2, total - total // 2
        first_small = a["auto_pad"] == "SAME_UPPER"
        begin.append(small if first_small else big)
        end.append(big if first_small else small)
    return begin + end


@handles("ConvTranspose")
def conv_transpose(imp: NodeContext):
    """The transposed convolution as a direct one (1-D, 2-D and 3-D): zero-stuff x by the
    strides, pad it by dilation * (k - 1) - pads (+ output_padding at the end; negative
    amounts crop), and convolve with the flipped weight whose in/out channel roles are
    swapped per group. A weight computed at run time is flipped and regrouped by graph ops."""
    a = imp.attrs(
        {
            "auto_pad": "NOTSET",
            "dilations": None,
            "group": 1,
            "kernel_shape": None,
            "output_padding": None,
            "output_shape": None,
            "pads": None,
            "strides": None,
        }
    )
    imp.require(a, "auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    x, w, b = imp.required(0), imp.required(1), imp.input(2)
    wshape = imp.shape(w)
    kernel = tuple(wshape[2:])
    r = len(kernel)
    if r not in (1, 2, 3) or len(imp.shape(x)) != r + 2:
        raise imp.error(
            f"only 1-D, 2-D and 3-D convolutions are supported (weight has rank {len(wshape)})"
        )
    if a["kernel_shape"] and tuple(a["kernel_shape"]) != kernel:
        raise imp.error(
            f"attribute 'kernel_shape' = {list(a['kernel_shape'])} differs from "
            f"the weight's {list(kernel)}"
        )
    if a["output_shape"] is not None or a["auto_pad"] in ("SAME_UPPER", "SAME_LOWER"):
        a["pads"] = _conv_transpose_pads(imp, a, imp.shape(x)[2:], kernel)
    strides = tuple(a["strides"] or (1,) * r)
    dil = tuple(a["dilations"] or (1,) * r)
    pads = list(a["pads"] or (0,) * (2 * r))
    outpad = tuple(a["output_padding"] or (0,) * r)
    g = a["group"]
    cin, cout_g = wshape[:2]
    # W'[g*cout_g + o, c, k...] = W[g*cin_g + c, o, flipped k...]
    if isinstance(w, Const):
        wg = w.array.reshape(g, cin // g, cout_g, *kernel)[
            (slice(None),) * 3 + (slice(None, None, -1),) * r
        ]
        perm = (0, 2, 1, *range(3, 3 + r))
        wt: Value = Const(
            np.ascontiguousarray(wg.transpose(perm).reshape(g * cout_g, cin // g, *kernel))
        )
    else:
        wg = imp.reshape(w, (g, cin // g, cout_g, *kernel))
        wg = imp.emit(
            graph.SliceOp,
            wg,
            starts=tuple(k - 1 for k in kernel),
            ends=tuple(-k - 1 for k in kernel),
            axes=tuple(range(3, 3 + r)),
            steps=(-1,) * r,
        )
        wg = imp.emit(graph.TransposeOp, wg, perm=(0, 2, 1, *range(3, 3 + r)))
        wt = imp.reshape(wg, (g * cout_g, cin // g, *kernel))
    n, c, *sp = imp.shape(x)
    if any(st > 1 for st in strides):  # zero-stuff: [n, c, d0, 1, d1, 1, ...] padded, merged
        y = imp.reshape(x, (n, c, *[v for d in sp for v in (d, 1)]))
        stuff = [0] * (2 + 2 * r) + [0, 0] + [v for st in strides for v in (0, st - 1)]
        y = imp.emit(graph.PadOp, y, pads=tuple(stuff))
        y = imp.reshape(y, (n, c, *[d * st for d, st in zip(sp, strides)]))
        x = imp.emit(
            graph.SliceOp,
            y,
            starts=(0,) * r,
            ends=tuple((d - 1) * st + 1 for d, st in zip(sp, strides)),
            axes=tuple(range(2, 2 + r)),
        )
    lo = [dil[i] * (kernel[i] - 1) - pads[i] for i in range(r)]
    hi = [dil[i] * (kernel[i] - 1) - pads[r + i] + outpad[i] for i in range(r)]
    if any(lo + hi):
        x = imp.emit(graph.PadOp, x, pads=(0, 0, *lo, 0, 0, *hi))
    return [_conv(imp, x, wt, b, (1,) * r, dil, (0,) * (2 * r), g)]


def _conv(imp: NodeContext, x: Value, w: Value, b: Value | None, strides, dil, pads, groups):
    """A 1-D, 2-D or 3-D convolution (ONNX pads [begin..., end...]) through graph.conv2d:
    1-D with an H of 1; 3-D as the sum over the depth taps kd of 2-D convolutions of the
    strided depth slices, each slice's depths folded into the batch."""
    r = len(strides)
    if r < 3:
        x2, one_d = _to_2d(imp, x, "convolutions")
        if one_d:
            w = imp.reshape(w, (*imp.shape(w)[:2], 1, imp.shape(w)[2]))
            strides, dil = (1, strides[0]), (1, dil[0])
        y = imp.emit(
            graph.Conv2DOp,
            x2,
            w,
            *([b] if b is not None else []),
            strides=strides,
            dilations=dil,
            pads=_pads_2d(pads, one_d),
            groups=groups,
        )
        return _from_2d(imp, y, one_d)
    if any(pads):
        x = imp.emit(graph.PadOp, x, pads=(0, 0, *pads[:3], 0, 0, *pads[3:]))
    n, c, d, h, wd = imp.shape(x)
    o, cg, kd, kh, kw = imp.shape(w)
    od = (d - (kd - 1) * dil[0] - 1) // strides[0] + 1
    if od < 1:
        raise imp.error(f"the kernel does not fit depth {d}")
    acc: Value | None = None
    for t in range(kd):
        start = t * dil[0]
        xs = imp.emit(
            graph.SliceOp,
            x,
            starts=(start,),
            ends=(start + (od - 1) * strides[0] + 1,),
            axes=(2,),
            steps=(strides[0],),
        )
        xs = imp.emit(graph.TransposeOp, xs, perm=(0, 2, 1, 3, 4))
        xs = imp.reshape(xs, (n * od, c, h, wd))
        if isinstance(w, Const):
            wt: Value = Const(np.ascontiguousarray(w.array[:, :, t]))
        else:
            wt = imp.reshape(
                imp.emit(graph.SliceOp, w, starts=(t,), ends=(t + 1,), axes=(2,)), (o, cg, kh, kw)
            )
        y = imp.emit(graph.Conv2DOp, xs, wt, strides=strides[1:], dilations=dil[1:], groups=groups)
        acc = y if acc is None else imp.emit(graph.AddOp, acc, y)
    assert acc is not None
    oh, ow = imp.shape(acc)[2:]
    y = imp.emit(graph.TransposeOp, imp.reshape(acc, (n, od, o, oh, ow)), perm=(0, 2, 1, 3, 4))
    if b is not None:
        y = imp.emit(graph.AddOp, y, imp.reshape(b, (o, 1, 1, 1)))
    return y


@handles("MaxPool", "AveragePool")
def pool(imp: NodeContext):
    is_max = imp.op_type == "MaxPool"
    spec = {
        "auto_pad": "NOTSET",
        "ceil_mode": 0,
        "dilations": None,
        "kernel_shape": None,
        "pads": None,
        "strides": None,
    }
    spec.update({"storage_order": 0} if is_max else {"count_include_pad": 0})
    a = imp.attrs(spec)
    imp.no_extra_outputs(2 if is_max else 1)
    x = imp.required(0)
    kernel = tuple(int(k) for k in a["kernel_shape"] or ())
    if len(kernel) != len(imp.shape(x)) - 2:
        raise imp.error(f"attribute 'kernel_shape' = {list(kernel)} does not match the input")
    strides, dil, pads = _window(imp, a, imp.shape(x)[2:], kernel)
    indices = is_max and len(imp.node.output) > 1 and bool(imp.node.output[1])
    if len(kernel) not in (1, 2) or any(d != 1 for d in dil) or indices:
        return _pool_by_slices(imp, x, a, kernel, strides, dil, pads, is_max, indices)
    x2, one_d = _to_2d(imp, x, "pools")
    if one_d:
        kernel, strides = (1, kernel[0]), (1, strides[0])
    attrs = dict(
        kernel=kernel, strides=strides, pads=_pads_2d(pads, one_d), ceil_mode=bool(a["ceil_mode"])
    )
    if is_max:
        y = imp.emit(graph.MaxPool2DOp, x2, **attrs)
    else:
        y = imp.emit(graph.AvgPool2DOp, x2, count_include_pad=bool(a["count_include_pad"]), **attrs)
    return [_from_2d(imp, y, one_d)]


def _pool_by_slices(
    imp: NodeContext, x: Value, a: dict, kernel, strides, dil, pads, is_max, indices
):
    """Any-rank pooling with dilations (and MaxPool's Indices) as one strided slice of the
    padded input per kernel position: max pool is their running maximum (Indices: the flat
    input position of the first maximum, row-major or, storage_order 1, column-major
    within each 2-D image), average pool their sum divided by the number of positions
    each window counts (pads too with count_include_pad, never the extra cells ceil_mode
    adds)."""
    shape = imp.shape(x)
    n, c, spatial = shape[0], shape[1], shape[2:]
    r = len(spatial)
    begin, end = list(pads[:r]), list(pads[r:])
    out, extra = [], []
    for i in range(r):
        span = (kernel[i] - 1) * dil[i] + 1
        total = spatial[i] + begin[i] + end[i] - span
        o = (-(-total // strides[i]) if a["ceil_mode"] else total // strides[i]) + 1
        if a["ceil_mode"] and (o - 1) * strides[i] >= spatial[i] + begin[i]:
            o -= 1  # the last window must start inside the input or its left pad
        if o < 1:
            raise imp.error(f"the pool window does not fit spatial dim {i} ({spatial[i]})")
        out.append(o)
        extra.append(max(0, (o - 1) * strides[i] + span - (spatial[i] + begin[i] + end[i])))
    fill = -np.inf if is_max else 0.0
    full = (0, 0, *begin, 0, 0, *[e + x_ for e, x_ in zip(end, extra)])
    xp = imp.emit(graph.PadOp, x, pads=full, value=fill) if any(full) else x
    # per spatial dim: which padded positions are counted (avg) / their input index (max)
    inside = [np.zeros(spatial[i] + begin[i] + end[i] + extra[i], bool) for i in range(r)]
    for i in range(r):
        lo = 0 if a.get("count_include_pad") else begin[i]
        hi = spatial[i] + begin[i] + (end[i] if a.get("count_include_pad") else 0)
        inside[i][lo:hi] = True
    col_major = is_max and a.get("storage_order") == 1
    if col_major and r != 2:
        raise imp.error("attribute 'storage_order' = 1 needs a 2-D pool")
    if not indices:
        # max and sum over a box are separable: one axis at a time, k slices per axis
        # (sum(k) slices instead of prod(k)); the count of a box is the product of the
        # per-axis counts
        y = xp
        count1 = np.ones(out, np.float64)
        for i in range(r):
            acc_i: Value | None = None
            for o in range(kernel[i]):
                start = o * dil[i]
                v = imp.emit(
                    graph.SliceOp,
                    y,
                    starts=(start,),
                    ends=(start + (out[i] - 1) * strides[i] + 1,),
                    axes=(2 + i,),
                    steps=(strides[i],),
                )
                join = graph.MaxOp if is_max else graph.AddOp
                acc_i = v if acc_i is None else imp.emit(join, acc_i, v)
            assert acc_i is not None
            y = acc_i
            taps = [
                inside[i][np.arange(out[i]) * strides[i] + o * dil[i]] for o in range(kernel[i])
            ]
            counted = np.sum(taps, axis=0).reshape([-1 if j == i else 1 for j in range(r)])
            count1 = count1 * counted
        if is_max:
            return [y]
        return [imp.emit(graph.DivOp, y, Const(count1.astype(imp.dtype(x))))]
    acc: Value | None = None
    best: Value | None = None
    count = np.zeros(out, np.float64)
    for offs in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offs, dil)]
        ends = [st + (o - 1) * s + 1 for st, o, s in zip(starts, out, strides)]
        v = imp.emit(
            graph.SliceOp,
            xp,
            starts=starts,
            ends=ends,
            axes=tuple(range(2, 2 + r)),
            steps=tuple(strides),
        )
        pos = [np.arange(o) * s + st for o, s, st in zip(out, strides, starts)]
        if not is_max:
            mask = np.ones(out, bool)
            for i in range(r):
                mask &= inside[i][pos[i]].reshape([-1 if j == i else 1 for j in range(r)])
            count += mask
            acc = v if acc is None else imp.emit(graph.AddOp, acc, v)
            continue
        if acc is None:
            acc = v
            if indices:
                best = Const(_flat_index(pos, begin, spatial, col_major))
            continue
        if indices and best is not None:
            better = imp.emit(graph.CompareOp, v, acc, predicate="gt")
            acc = imp.emit(graph.WhereOp, better, v, acc)
            best = imp.emit(
                graph.WhereOp, better, Const(_flat_index(pos, begin, spatial, col_major)), best
            )
        else:
            acc = imp.emit(graph.MaxOp, acc, v)
    assert acc is not None  # (a kernel has at least one position)
    if not is_max:
        return [imp.emit(graph.DivOp, acc, Const(count.astype(imp.dtype(x))))]
    if best is None:
        return [acc]
    per_image = math.prod(spatial)
    base = (np.arange(n * c, dtype=np.int64) * per_image).reshape((n, c) + (1,) * r)
    return [acc, imp.emit(graph.AddOp, best, Const(base))]


def _flat_index(pos, begin, spatial, col_major: bool) -> np.ndarray:
    """The flat index within one image of the input position each output reads (padded
    positions give an index outside the image; they never hold a maximum)."""
    r = len(pos)
    coords = [
        (p - b).reshape([-1 if j == i else 1 for j in range(r)])
        for i, (p, b) in enumerate(zip(pos, begin))
    ]
    order = list(range(r))[::-1] if col_major else list(range(r))
    flat = np.zeros([len(p) for p in pos], np.int64)
    for i in order:
        flat = flat * spatial[i] + coords[i]
    return flat.astype(np.int64)


@handles("GlobalAveragePool", "GlobalMaxPool")
def global_pool(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    if imp.node.op_type == "GlobalAveragePool":
        return [imp.emit(graph.GlobalAvgPoolOp, x)]
    axes = tuple(range(2, len(imp.shape(x))))
    return [imp.emit(graph.ReduceMaxOp, x, axes=axes, keepdims=True)]


# ------------------------------------------------------------------ normalisation


@handles("BatchNormalization")
def batch_norm(imp: NodeContext):
    a = imp.attrs({"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0})
    imp.require(a, "training_mode", (0, 1))
    ins = [imp.required(i) for i in range(5)]
    if not a["training_mode"]:
        imp.no_extra_outputs(1)
        return [imp.emit(graph.BatchNormOp, *ins, epsilon=a["epsilon"])]
    # training: normalise with the batch's mean and (population) variance over all axes
    # but the channels; running stats = stats * momentum + batch stats * (1 - momentum)
    x, scale, bias, mean, var = ins
    rank = len(imp.shape(x))
    axes = (0, *range(2, rank))
    b_mean = imp.emit(graph.ReduceMeanOp, x, axes=axes, keepdims=False)
    d = imp.emit(graph.SubOp, x, _channel(imp, b_mean, rank))
    b_var = imp.emit(graph.ReduceMeanOp, imp.emit(graph.MulOp, d, d), axes=axes, keepdims=False)
    y = imp.emit(graph.BatchNormOp, x, scale, bias, b_mean, b_var, epsilon=a["epsilon"])
    m = a["momentum"]

    def running(old: Value, new: Value) -> Value:
        kept = imp.emit(graph.MulOp, old, imp.scalar(m, old))
        return imp.emit(graph.AddOp, kept, imp.emit(graph.MulOp, new, imp.scalar(1 - m, new)))

    return [y, running(mean, b_mean), running(var, b_var)]


@handles("LayerNormalization")
def layer_norm(imp: NodeContext):
    a = imp.attrs({"axis": -1, "epsilon": 1e-5, "stash_type": 1})
    imp.require(a, "stash_type", (1,))
    x, bias = imp.required(0), imp.input(2)
    ins = [x, imp.required(1)] + ([bias] if bias is not None else [])
    y = imp.emit(graph.LayerNormOp, *ins, axis=a["axis"], epsilon=a["epsilon"])
    outs = [y]
    if any(imp.node.output[1:]):  # Mean and InvStdDev over the normalised dims, kept as 1s
        rank = len(imp.shape(x))
        axes = tuple(range(_norm_axis(imp, a["axis"], rank), rank))
        mean = imp.emit(graph.ReduceMeanOp, x, axes=axes, keepdims=True)
        d = imp.emit(graph.SubOp, x, mean)
        var = imp.emit(graph.ReduceMeanOp, imp.emit(graph.MulOp, d, d), axes=axes, keepdims=True)
        var = imp.emit(graph.AddOp, var, imp.scalar(a["epsilon"], x))
        outs += [mean, imp.emit(graph.RsqrtOp, var)]
    return outs


def _moments(imp: NodeContext, x: Value, axes: tuple[int, ...]):
    """(mean, x - mean, variance) over `axes`, kept as size-1 dims."""
    mean = imp.emit(graph.ReduceMeanOp, x, axes=axes, keepdims=True)
    d = imp.emit(graph.SubOp, x, mean)
    var = imp.emit(graph.ReduceMeanOp, imp.emit(graph.MulOp, d, d), axes=axes, keepdims=True)
    return mean, d, var


def _channel(imp: NodeContext, v: Value, rank: int) -> Value:
    """A per-channel [C] vector shaped to broadcast against [N, C, ...]."""
    return imp.reshape(v, (imp.shape(v)[0],) + (1,) * (rank - 2))


@handles("InstanceNormalization")
def instance_norm(imp: NodeContext):
    a = imp.attrs({"epsilon": 1e-5})
    x, scale, bias = imp.required(0), imp.required(1), imp.required(2)
    rank = len(imp.shape(x))
    _, d, var = _moments(imp, x, tuple(range(2, rank)))
    y = imp.emit(
        graph.MulOp,
        d,
        imp.emit(graph.RsqrtOp, imp.emit(graph.AddOp, var, imp.scalar(a["epsilon"], x))),
    )
    y = imp.emit(graph.MulOp, y, _channel(imp, scale, rank))
    return [imp.emit(graph.AddOp, y, _channel(imp, bias, rank))]


@handles("GroupNormalization")
def group_norm(imp: NodeContext):
    a = imp.attrs({"epsilon": 1e-5, "num_groups": None, "stash_type": 1})
    imp.require(a, "stash_type", (1,))
    x, scale, bias = imp.required(0), imp.required(1), imp.required(2)
    s = imp.shape(x)
    g = a["num_groups"]
    if not g or s[1] % g:
        raise imp.error(f"attribute 'num_groups' = {g} must divide {s[1]} channels")
    grouped = imp.reshape(x, (s[0], g, math.prod(s[1:]) // g))
    _, d, var = _moments(imp, grouped, (2,))
    y = imp.emit(
        graph.MulOp,
        d,
        imp.emit(graph.RsqrtOp, imp.emit(graph.AddOp, var, imp.scalar(a["epsilon"], x))),
    )
    y = imp.reshape(y, s)
    y = imp.emit(graph.MulOp, y, _channel(imp, scale, len(s)))
    return [imp.emit(graph.AddOp, y, _channel(imp, bias, len(s)))]


@handles("RMSNormalization")
def rms_norm(imp: NodeContext):
    a = imp.attrs({"axis": -1, "epsilon": 1e-5, "stash_type": 1})
    imp.require(a, "stash_type", (1,))
    x, scale = imp.required(0), imp.required(1)
    rank = len(imp.shape(x))
    axes = tuple(range(_norm_axis(imp, a["axis"], rank), rank))
    ms = imp.emit(graph.ReduceMeanOp, imp.emit(graph.MulOp, x, x), axes=axes, keepdims=True)
    inv = imp.emit(graph.RsqrtOp, imp.emit(graph.AddOp, ms, imp.scalar(a["epsilon"], x)))
    return [imp.emit(graph.MulOp, imp.emit(graph.MulOp, x, inv), scale)]


@handles("LpNormalization")
def lp_norm(imp: NodeContext):
    a = imp.attrs({"axis": -1, "p": 2})
    imp.require(a, "p", (1, 2))
    x = imp.required(0)
    ax = (_norm_axis(imp, a["axis"], len(imp.shape(x))),)
    if a["p"] == 1:
        norm = imp.emit(graph.ReduceSumOp, imp.emit(graph.AbsOp, x), axes=ax, keepdims=True)
    else:
        norm = imp.emit(
            graph.SqrtOp,
            imp.emit(graph.ReduceSumOp, imp.emit(graph.MulOp, x, x), axes=ax, keepdims=True),
        )
    # a zero norm gives 0, as in onnx's reference
    zero = imp.emit(graph.CompareOp, norm, imp.scalar(0, x), predicate="eq")
    zeros = Const(np.zeros(imp.shape(x), dtype=imp.dtype(x)))
    return [imp.emit(graph.WhereOp, zero, zeros, imp.emit(graph.DivOp, x, norm))]


@handles("Softmax", "LogSoftmax")
def softmax(imp: NodeContext):
    a = imp.attrs({"axis": -1})
    op = graph.SoftmaxOp if imp.node.op_type == "Softmax" else graph.LogSoftmaxOp
    return [imp.emit(op, imp.value(0), axis=a["axis"])]


# ---------------------------------------------------------------------- reductions

REDUCE = {
    "ReduceSum": graph.ReduceSumOp,
    "ReduceMean": graph.ReduceMeanOp,
    "ReduceMax": graph.ReduceMaxOp,
    "ReduceMin": graph.ReduceMinOp,
    "ReduceProd": graph.ReduceProdOp,
    "ReduceSumSquare": graph.ReduceSumOp,
    "ReduceL1": graph.ReduceSumOp,
    "ReduceL2": graph.ReduceSumOp,
    "ReduceLogSum": graph.ReduceSumOp,
    "ReduceLogSumExp": graph.ReduceSumOp,
}


@handles(*REDUCE)
def reduce(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
    x = imp.required(0)
    axes = a["axes"]
    if axes is None:
        given = imp.const(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if not axes:
        if a["noop_with_empty_axes"]:
            return [x]
        axes = list(range(len(imp.shape(x))))
    axes = tuple(int(v) for v in axes)
    if op in ("ReduceSumSquare", "ReduceL2"):
        x = imp.emit(graph.MulOp, x, x)
    elif op == "ReduceL1":
        x = imp.emit(graph.AbsOp, x)
    elif op == "ReduceLogSumExp":
        x = imp.emit(graph.ExpOp, x)
    y = imp.emit(REDUCE[op], x, axes=axes, keepdims=bool(a["keepdims"]))
    if op == "ReduceL2":
        y = imp.emit(graph.SqrtOp, y)
    elif op in ("ReduceLogSum", "ReduceLogSumExp"):
        y = imp.emit(graph.LogOp, y)
    return [y]


# ------------------------------------------------------------------ data movement


def _resolve_shape(imp: NodeContext, in_shape, target, allowzero: bool) -> tuple[int, ...]:
    target = [int(d) for d in target]
    if allowzero and 0 in target:
        raise imp.error(
            "attribute 'allowzero' = 1 with a 0 dim gives an empty tensor, "
            "which dlpc does not support"
        )
    for i, d in enumerate(target):
        if d == 0:
            if i >= len(in_shape):  # 0 copies the input's dim i, which must exist
                raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
            target[i] = in_shape[i]
    total = math.prod(in_shape)
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        if known == 0 or total % known or target.count(-1) > 1:
            raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
        target[target.index(-1)] = total // known
    if math.prod(target) != total:
        raise imp.error(f"cannot reshape {list(in_shape)} into {target}")
    return tuple(target)


@handles("Reshape")
def reshape(imp: NodeContext):
    a = imp.attrs({"allowzero": 0})
    x = imp.required(0)
    shape = _resolve_shape(
        imp, imp.shape(x), imp.required_const(1, "shape").reshape(-1), bool(a["allowzero"])
    )
    return [imp.reshape(x, shape)]


@handles("Flatten")
def flatten(imp: NodeContext):
    a = imp.attrs({"axis": 1})
    x = imp.required(0)
    s = imp.shape(x)
    axis = a["axis"] + len(s) if a["axis"] < 0 else a["axis"]  # axis in [-r, r]
    if not 0 <= axis <= len(s):
        raise imp.error(f"attribute 'axis' = {a['axis']} is out of range for rank {len(s)}")
    return [imp.reshape(x, (math.prod(s[:axis]), math.prod(s[axis:])))]


@handles("Squeeze")
def squeeze(imp: NodeContext):
    a = imp.attrs({"axes": None})
    x = imp.required(0)
    s = imp.shape(x)
    axes = a["axes"]
    if axes is None:
        given = imp.const(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if axes is None:
        axes = [i for i, d in enumerate(s) if d == 1]
    axes = {_norm_axis(imp, int(i), len(s), "axes") for i in axes}
    for i in axes:
        if s[i] != 1:
            raise imp.error(f"cannot squeeze axis {i} of size {s[i]}")
    return [imp.reshape(x, [d for i, d in enumerate(s) if i not in axes])]


@handles("Unsqueeze")
def unsqueeze(imp: NodeContext):
    a = imp.attrs({"axes": None})
    x = imp.required(0)
    axes = a["axes"]
    if axes is None:
        axes = imp.required_const(1, "axes").reshape(-1).tolist()
    s = list(imp.shape(x))
    rank = len(s) + len(axes)
    norm = sorted(_norm_axis(imp, int(i), rank, "axes") for i in axes)
    for i in norm:
        s.insert(i, 1)
    return [imp.reshape(x, s)]


@handles("Transpose")
def transpose(imp: NodeContext):
    a = imp.attrs({"perm": None})
    x = imp.required(0)
    perm = tuple(a["perm"]) if a["perm"] is not None else None
    if perm == tuple(range(len(imp.shape(x)))):
        return [x]
    return [imp.emit(graph.TransposeOp, x, perm=perm)]


@handles("Concat")
def concat(imp: NodeContext):
    a = imp.attrs({"axis": None})
    if a["axis"] is None:
        raise imp.error("attribute 'axis' is required")
    ins = [v for i in range(len(imp.node.input)) if (v := imp.input(i)) is not None]
    ins = [v for v in ins if math.prod(imp.shape(v)) > 0]  # empty pieces add nothing
    if len(ins) == 1:
        return [ins[0]]
    return [imp.emit(graph.ConcatOp, *ins, axis=a["axis"])]


def _slice(imp: NodeContext, x: Value, axis: int, start: int, stop: int) -> Value:
    return imp.emit(graph.SliceOp, x, starts=(start,), ends=(stop,), axes=(axis,))


@handles("Split")
def split(imp: NodeContext):
    a = imp.attrs({"axis": 0, "split": None, "num_outputs": None})
    x = imp.required(0)
    s = imp.shape(x)
    axis = _norm_axis(imp, a["axis"], len(s))
    sizes = a["split"]
    if sizes is None:
        given = imp.const(1, "split")
        sizes = None if given is None else given.reshape(-1).tolist()
    n = len(imp.node.output)
    if sizes is None:
        n = a["num_outputs"] or n
        chunk = -(-s[axis] // n)
        sizes = [min(chunk, s[axis] - i * chunk) for i in range(n)]
    if sum(sizes) != s[axis] or any(v < 0 for v in sizes):
        raise imp.error(f"split sizes {list(sizes)} do not partition axis {axis} of size {s[axis]}")
    outs, start = [], 0
    for size in sizes:
        outs.append(_slice(imp, x, axis, start, start + size))
        start += size
    return outs


@handles("Slice")
def slice_(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    starts = imp.required_const(1, "starts").reshape(-1).tolist()
    ends = imp.required_const(2, "ends").reshape(-1).tolist()
    axes = imp.const(3, "axes")
    steps = imp.const(4, "steps")
    axes = list(range(len(starts))) if axes is None else axes.reshape(-1).tolist()
    steps = [1] * len(starts) if steps is None else steps.reshape(-1).tolist()
    return [imp.emit(graph.SliceOp, x, starts=starts, ends=ends, axes=axes, steps=steps)]


@handles("Gather")
def gather(imp: NodeContext):
    a = imp.attrs({"axis": 0})
    idx = imp.required(1)
    if isinstance(idx, Const) and idx.array.dtype != np.int64:
        idx = Const(idx.array.astype(np.int64))
    return [imp.emit(graph.GatherOp, imp.required(0), idx, axis=a["axis"])]


@handles("GatherElements")
def gather_elements(imp: NodeContext):
    """out[i][j][k] = data[i][idx[i][j][k]][k] (axis 1) as one graph.gather on the flattened
    data: flat = idx * stride[axis] + sum over the other axes k of i_k * stride[k] (a
    constant); negative indices count from the end."""
    a = imp.attrs({"axis": 0})
    data, idx = imp.required(0), imp.required(1)
    d, i = imp.shape(data), imp.shape(idx)
    r = len(d)
    if len(i) != r:
        raise imp.error(f"indices have rank {len(i)} but data has rank {r}")
    axis = _norm_axis(imp, a["axis"], r)
    if any(i[k] > d[k] for k in range(r) if k != axis):
        raise imp.error(f"indices shape {list(i)} exceeds data shape {list(d)} off the axis")
    cut = tuple(i[k] if k != axis else d[k] for k in range(r))
    if cut != d:
        data = imp.emit(
            graph.SliceOp, data, starts=(0,) * r, ends=cut, axes=tuple(range(r)), steps=(1,) * r
        )
    strides = [math.prod(cut[k + 1 :]) for k in range(r)]
    idx = cast_to(imp, idx, np.dtype(np.int64))
    neg = imp.emit(graph.CompareOp, idx, Const(np.asarray(0, np.int64)), predicate="lt")
    idx = imp.emit(
        graph.WhereOp, neg, imp.emit(graph.AddOp, idx, Const(np.asarray(d[axis], np.int64))), idx
    )
    grid = np.indices(i, dtype=np.int64) if i else np.zeros((0,), np.int64)
    base = sum((grid[k] * strides[k] for k in range(r) if k != axis), np.zeros(i, np.int64))
    flat = imp.emit(graph.MulOp, idx, Const(np.asarray(strides[axis], np.int64)))
    flat = imp.emit(graph.AddOp, flat, Const(np.asarray(base, np.int64)))
    return [imp.emit(graph.GatherOp, imp.reshape(data, (math.prod(cut),)), flat, axis=0)]


@handles("ArgMax", "ArgMin")
def arg_extreme(imp: NodeContext):
    """The first (or last, select_last_index) position of the extreme along the axis:
    m = reduce_max(x); where(x == m, iota, n) reduced by min (or where(.., -1) by max)."""
    a = imp.attrs({"axis": 0, "keepdims": 1, "select_last_index": 0})
    op = imp.op_type
    x = imp.required(0)
    s = imp.shape(x)
    axis = _norm_axis(imp, a["axis"], len(s))
    ext = graph.ReduceMaxOp if op == "ArgMax" else graph.ReduceMinOp
    m = imp.emit(ext, x, axes=(axis,), keepdims=True)
    hit = imp.emit(graph.CompareOp, x, m, predicate="eq")
    shape = [1] * len(s)
    shape[axis] = s[axis]
    if s[axis] > 2**24:
        raise imp.error(f"axis {axis} has {s[axis]} elements; dlpc's Arg{op[3:]} takes 2**24")
    # positions as float32 (exact below 2**24): float reductions are what every backend has
    iota = Const(np.arange(s[axis], dtype=np.float32).reshape(shape))
    last = bool(a["select_last_index"])
    other = Const(np.asarray(-1 if last else s[axis], np.float32))
    cand = imp.emit(graph.WhereOp, hit, iota, other)
    pick = graph.ReduceMaxOp if last else graph.ReduceMinOp
    y = imp.emit(pick, cand, axes=(axis,), keepdims=bool(a["keepdims"]))
    return [cast_to(imp, y, np.dtype(np.int64))]


@handles("Expand")
def expand(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    target = tuple(int(d) for d in imp.required_const(1, "shape").reshape(-1))
    try:
        out = graph.broadcast_shapes(imp.shape(x), target)
    except Exception:  # noqa: BLE001 - VerifyException with the shapes
        raise imp.error(f"cannot expand {list(imp.shape(x))} to {list(target)}") from None
    if out == imp.shape(x):
        return [x]
    return [imp.emit(graph.BroadcastOp, x, shape=out)]


@handles("Tile")
def tile(imp: NodeContext):
    imp.attrs({})
    x = imp.required(0)
    reps = [int(r) for r in imp.required_const(1, "repeats").reshape(-1)]
    s = imp.shape(x)
    # tile(x, r) = reshape(broadcast(reshape(x, [1, d0, 1, d1, ...]), [r0, d0, r1, d1, ...]))
    inter = [v for d in s for v in (1, d)]
    big = [v for r, d in zip(reps, s) for v in (r, d)]
    y = imp.emit(graph.BroadcastOp, imp.reshape(x, inter), shape=big)
    return [imp.reshape(y, [r * d for r, d in zip(reps, s)])]


@handles("DepthToSpace", "SpaceToDepth")
def depth_space(imp: NodeContext):
    op = imp.node.op_type
    a = imp.attrs({"blocksize": None, "mode": "DCR"})
    imp.require(a, "mode", ("DCR", "CRD"))
    x = imp.required(0)
    b = a["blocksize"]
    n, c, h, w = imp.shape(x)
    if op == "SpaceToDepth":  # [n, c, h/b, b, w/b, b] -> DCR [n, b, b, c, ..], CRD [n, c, b, b, ..]
        y = imp.reshape(x, (n, c, h // b, b, w // b, b))
        perm = (0, 3, 5, 1, 2, 4) if a["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
        y = imp.emit(graph.TransposeOp, y, perm=perm)
        return [imp.reshape(y, (n, c * b * b, h // b, w // b))]
    if a["mode"] == "DCR":  # [n, b, b, c', h, w] -> [n, c', h, b, w, b]
        y = imp.reshape(x, (n, b, b, c // (b * b), h, w))
        y = imp.emit(graph.TransposeOp, y, perm=(0, 3, 4, 1, 5, 2))
    else:  # CRD: [n, c', b, b, h, w] -> [n, c', h, b, w, b]
        y = imp.reshape(x, (n, c // (b * b), b, b, h, w))
        y = imp.emit(graph.TransposeOp, y, perm=(0, 1, 4, 2, 5, 3))
    return [imp.reshape(y, (n, c // (b * b), h * b, w * b))]


def _nearest_source(a: dict, size: int, out: int, scale: float) -> np.ndarray:
    """The input index each output index of a nearest Resize reads, per ONNX."""
    x = np.arange(out, dtype=np.float64)
    mode = a["coordinate_transformation_mode"]
    if mode == "asymmetric":
        v = x / scale
    elif mode == "align_corners":
        v = x * (size - 1) / (out - 1) if out > 1 else 0 * x
    elif mode == "tf_half_pixel_for_nn":
        v = (x + 0.5) / scale
    else:  # half_pixel, pytorch_half_pixel
        v = (x + 0.5) / scale - 0.5 if out > 1 or mode == "half_pixel" else 0 * x
    rounding = {
        "round_prefer_floor": lambda t: np.ceil(t - 0.5),
        "round_prefer_ceil": lambda t: np.floor(t + 0.5),
        "floor": np.floor,
        "ceil": np.ceil,
    }[a["nearest_mode"]]
    return np.clip(rounding(v), 0, size - 1).astype(np.int64)


@handles("Resize")
def resize(imp: NodeContext):
    """Nearest upsampling by whole factors (nn.Upsample(scale_factor=k) as exported) is
    out[..., i, j] = x[..., i // k, j // l]: a reshape, a broadcast and a reshape. Any other
    Resize is separable: per resized axis an (out, in) interpolation matrix M and an
    extrapolation vector c (tf_crop_and_resize) are computed at import with onnx's own 1-D
    interpolation, so y = M x + c along the axis: a gather for nearest, a matmul for
    linear and cubic (antialias too), axes applied from the last to the first as ONNX's
    recursion does."""
    a = imp.attrs(
        {
            "mode": "nearest",
            "coordinate_transformation_mode": "half_pixel",
            "nearest_mode": "round_prefer_floor",
            "cubic_coeff_a": -0.75,
            "exclude_outside": 0,
            "extrapolation_value": 0.0,
            "antialias": 0,
            "keep_aspect_ratio_policy": "stretch",
            "axes": None,
        }
    )
    imp.require(a, "mode", ("nearest", "linear", "cubic"))
    imp.require(
        a,
        "coordinate_transformation_mode",
        (
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "asymmetric",
            "align_corners",
            "tf_half_pixel_for_nn",
            "tf_crop_and_resize",
        ),
    )
    imp.require(a, "nearest_mode", ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))
    imp.require(a, "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"))
    x = imp.required(0)
    shape = imp.shape(x)
    r = len(shape)
    axes = [_norm_axis(imp, int(v), r, "axes") for v in (a["axes"] or range(r))]
    roi, scales, sizes = imp.const(1, "roi"), imp.const(2, "scales"), imp.const(3, "sizes")
    scale, out = [1.0] * r, list(shape)
    for what, given in (("sizes", sizes), ("scales", scales)):
        if given is not None and given.size and given.size != len(axes):
            raise imp.error(f"'{what}' has {given.size} values for {len(axes)} axes")
    if sizes is not None and sizes.size:
        for k, ax in enumerate(axes):
            out[ax] = int(sizes.reshape(-1)[k])
            scale[ax] = out[ax] / shape[ax]
        policy = a["keep_aspect_ratio_policy"]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(scale[ax] for ax in axes)
            for ax in axes:
                scale[ax], out[ax] = common, int(common * shape[ax] + 0.5)
    elif scales is not None and scales.size:
        for k, ax in enumerate(axes):
            scale[ax] = float(scales.reshape(-1)[k])
            out[ax] = int(shape[ax] * scale[ax])
    else:
        raise imp.error("one of the inputs 'scales' and 'sizes' is required")
    full_roi = None
    if roi is not None and roi.size:
        if roi.size != 2 * len(axes):
            raise imp.error(f"'roi' has {roi.size} values; {len(axes)} axes need {2 * len(axes)}")
        full_roi = [0.0] * r + [1.0] * r
        flat = roi.reshape(-1)
        for k, ax in enumerate(axes):
            full_roi[ax], full_roi[r + ax] = float(flat[k]), float(flat[len(axes) + k])
    whole = _whole_factor_upsampling(a, shape, out, scale)
    if whole is not None and a["coordinate_transformation_mode"] != "tf_crop_and_resize":
        if all(f == 1 for f in whole):
            return [x]
        inter = [v for d in shape for v in (d, 1)]
        big = [v for d, f in zip(shape, whole) for v in (d, f)]
        y = imp.emit(graph.BroadcastOp, imp.reshape(x, inter), shape=big)
        return [imp.reshape(y, out)]
    y = x
    for ax in reversed(range(r)):
        roi_ax = None if full_roi is None else [full_roi[ax], full_roi[r + ax]]
        m, c = _resize_matrix(imp, a, shape[ax], out[ax], scale[ax], roi_ax)
        if out[ax] == shape[ax] and np.array_equal(m, np.eye(shape[ax])) and not c.any():
            continue
        y = _apply_along(imp, y, ax, m, c, a["mode"] == "nearest")
    return [y]


def _whole_factor_upsampling(a: dict, shape, out, scale) -> list[int] | None:
    """The per-axis factors when a nearest Resize repeats every element k times."""
    if a["mode"] != "nearest":
        return None
    factors = []
    for ax, (size, o) in enumerate(zip(shape, out)):
        if a["coordinate_transformation_mode"] == "tf_crop_and_resize":
            return None
        src = _nearest_source(a, size, o, scale[ax])
        k = o // size if size and o % size == 0 else 0
        if k < 1 or not np.array_equal(src, np.arange(o) // k):
            return None
        factors.append(k)
    return factors


def _resize_matrix(imp: NodeContext, a: dict, n_in: int, n_out: int, scale: float, roi):
    """(M, c) with y[o] = sum_j M[o, j] x[j] + c[o]: onnx's 1-D interpolation of the basis
    vectors (extrapolation value 0), and of zeros (the extrapolation value alone)."""
    from onnx.reference.ops import op_resize as ref

    if n_in * n_out > 1 << 22:
        raise imp.error(f"Resize of an axis from {n_in} to {n_out} is too large for dlpc")
    mode = a["mode"]
    if mode == "nearest":

        def coeffs(ratio, scale):
            return ref._nearest_coeffs(ratio, mode=a["nearest_mode"])

    elif mode == "cubic":
        cubic = ref._cubic_coeffs_antialias if a["antialias"] else ref._cubic_coeffs

        def coeffs(ratio, scale):
            return cubic(ratio, scale, A=a["cubic_coeff_a"])

    else:
        coeffs = ref._linear_coeffs_antialias if a["antialias"] else ref._linear_coeffs

    def interp(data: np.ndarray, o: int, extrapolation: float) -> float:
        return float(
            ref._interpolate_1d_with_x(
                data,
                scale,
                n_out,
                float(o),
                coeffs,
                roi=roi,
                extrapolation_value=extrapolation,
                coordinate_transformation_mode=a["coordinate_transformation_mode"],
                exclude_outside=bool(a["exclude_outside"]),
            )
        )

    eye = np.eye(n_in)
    m = np.array([[interp(eye[j], o, 0.0) for j in range(n_in)] for o in range(n_out)])
    zeros = np.zeros(n_in)
    c = np.array([interp(zeros, o, float(a["extrapolation_value"])) for o in range(n_out)])
    return m.reshape(n_out, n_in), c


def _apply_along(imp: NodeContext, x: Value, ax: int, m: np.ndarray, c: np.ndarray, select: bool):
    """y = M x + c along axis `ax`: a gather of the selected positions when every row of M
    selects one element (nearest), else a matmul with M^T with `ax` moved last."""
    shape = imp.shape(x)
    n_out = m.shape[0]
    dt = imp.dtype(x)
    if select and np.all((m == 0) | (m == 1)) and np.all(m.sum(axis=1) <= 1):
        y = imp.emit(graph.GatherOp, x, Const(m.argmax(axis=1).astype(np.int64)), axis=ax)
        outside = m.sum(axis=1) == 0
        if outside.any():  # (tf_crop_and_resize: outside the roi, the extrapolation value)
            bshape = [1] * len(shape)
            bshape[ax] = n_out
            y = imp.emit(
                graph.WhereOp,
                Const(outside.reshape(bshape)),
                Const(c.astype(dt).reshape(bshape)),
                y,
            )
        return y
    perm = [i for i in range(len(shape)) if i != ax] + [ax]
    xt = imp.emit(graph.TransposeOp, x, perm=tuple(perm)) if ax != len(shape) - 1 else x
    rest = [shape[i] for i in perm[:-1]]
    flat = imp.reshape(xt, (math.prod(rest), shape[ax]))
    y = imp.emit(graph.MatMulOp, flat, Const(np.ascontiguousarray(m.T).astype(dt)))
    if c.any():
        y = imp.emit(graph.AddOp, y, Const(c.astype(dt)))
    y = imp.reshape(y, (*rest, n_out))
    if ax != len(shape) - 1:
        inv = [perm.index(i) for i in range(len(shape))]
        y = imp.emit(graph.TransposeOp, y, perm=tuple(inv))
    return y


@handles("Trilu")
def trilu(imp: NodeContext):
    a = imp.attrs({"upper": 1})
    x = imp.required(0)
    k = imp.const(1, "k")
    k = 0 if k is None else int(k.reshape(-1)[0])
    rows, cols = imp.shape(x)[-2:]
    mask = (
        np.triu(np.ones((rows, cols), bool), k)
        if a["upper"]
        else np.tril(np.ones((rows, cols), bool), k)
    )
    zeros = Const(np.zeros(imp.shape(x), dtype=imp.dtype(x)))
    return [imp.emit(graph.WhereOp, Const(mask), x, zeros)]


@handles("Pad")
def pad(imp: NodeContext):
    a = imp.attrs({"mode": "constant"})
    imp.require(a, "mode", ("constant", "reflect", "edge", "wrap"))
    x = imp.required(0)
    rank = len(imp.shape(x))
    pads = [int(p) for p in imp.required_const(1, "pads").reshape(-1)]
    value = imp.const(2, "constant_value")
    axes = imp.const(3, "axes")
    if len(pads) != 2 * (rank if axes is None else axes.size):
        n = rank if axes is None else axes.size
        raise imp.error(f"'pads' has {len(pads)} values; {n} axes need {2 * n}")
    if axes is not None:
        axes = [_norm_axis(imp, int(v), rank, "axes") for v in axes.reshape(-1)]
        full = [0] * (2 * rank)
        for k, ax in enumerate(axes):
            full[ax], full[ax + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if a["mode"] != "constant":
        return [_pad_from_input(imp, x, pads, a["mode"])]
    v = 0.0 if value is None or value.size == 0 else float(value.reshape(-1)[0])
    return [imp.emit(graph.PadOp, x, pads=pads, value=v)]


def _pad_from_input(imp: NodeContext, x: Value, pads: list[int], mode: str) -> Value:
    """reflect/edge/wrap padding, one axis at a time, as slices of x concatenated:
    reflect [1 2 3] by 2 -> [3 2 | 1 2 3 | 2 1], edge -> [1 1 | ... | 3 3],
    wrap -> [2 3 | ... | 1 2]."""
    rank = len(imp.shape(x))
    for ax in range(rank):
        begin, end = pads[ax], pads[ax + rank]
        if begin < 0 or end < 0:
            raise imp.error(f"negative pads {pads} with mode '{mode}' are not supported")
        n = imp.shape(x)[ax]
        if mode == "reflect" and max(begin, end) >= n:
            raise imp.error(f"reflect pads {pads} must be smaller than dim {ax} ({n})")
        pieces = []
        if begin:
            pieces.append(_pad_piece(imp, x, ax, n, begin, mode, front=True))
        pieces.append(x)
        if end:
            pieces.append(_pad_piece(imp, x, ax, n, end, mode, front=False))
        if len(pieces) > 1:
            x = imp.emit(graph.ConcatOp, *pieces, axis=ax)
    return x


def _pad_piece(imp: NodeContext, x: Value, ax: int, n: int, k: int, mode: str, front: bool):
    def cut(start: int, stop: int, step: int = 1) -> Value:
        if stop < 0:  # (a negative end would count from the back: "before index 0" is -n-1)
            stop = -n - 1
        return imp.emit(graph.SliceOp, x, starts=(start,), ends=(stop,), axes=(ax,), steps=(step,))

    if mode == "reflect":  # x[k], ..., x[1]  or  x[n-2], ..., x[n-1-k]
        return cut(k, 0, -1) if front else cut(n - 2, n - 2 - k, -1)
    if mode == "wrap":  # x[n-k:]  or  x[:k]  (k may exceed n: whole copies then a part)
        reps, rest = divmod(k, n)
        parts = [x] * reps
        if rest:
            parts.insert(0 if front else len(parts), cut(n - rest, n) if front else cut(0, rest))
        return parts[0] if len(parts) == 1 else imp.emit(graph.ConcatOp, *parts, axis=ax)
    edge = cut(0, 1) if front else cut(n - 1, n)  # edge: the end element, k times
    shape = list(imp.shape(edge))
    shape[ax] = k
    return imp.emit(graph.BroadcastOp, edge, shape=shape)


# ------------------------------------------------------------- shape arithmetic


@handles("Shape")
def shape(imp: NodeContext):
    a = imp.attrs({"start": 0, "end": None})
    s = imp.shape(imp.required(0))
    return [Const(np.asarray(s[a["start"] : a["end"]], dtype=np.int64))]


@handles("Size")
def size(imp: NodeContext):
    imp.attrs({})
    return [Const(np.asarray(math.prod(imp.shape(imp.required(0))), dtype=np.int64))]


@handles("ConstantOfShape", "Range")
def import_time_only(imp: NodeContext):
    """Their output shape depends on their input values: they only fold, so reaching this
    handler means an input is computed at run time (or is a graph input to freeze)."""
    names = {"ConstantOfShape": ["input"], "Range": ["start", "limit", "delta"]}
    for i, what in enumerate(names[imp.node.op_type]):
        imp.const(i, what)
    raise imp.error("all inputs must be known at import time")


def supported_operators() -> list[str]:
    """Operators with a handler (foldable-only operators are not listed)."""
    return sorted(HANDLERS)
