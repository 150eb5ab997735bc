"""Elementwise ONNX operators: activations (Relu ... Gelu), arithmetic (Add ... Mod,
Max/Min/Sum/Mean), comparisons and logic, Where, Cast / CastLike, and Dropout at
inference (the identity, with an all-true mask)."""

from __future__ import annotations

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles
from dlpc.frontends.onnx_values import (
    Const,
    NodeContext,
    Value,
    onnx_dtype_to_numpy,
    onnx_type_name,
)

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
    i64 only where |a / b| < 2**mantissa bits (beyond, a float is already an integer; inf
    and nan never reach the cast), and fmod(x, ±inf) is x for a finite x, as np.fmod; a
    quotient past 2**mantissa bits leaves r inexact (C's fmod is exact)."""
    a_ = imp.attrs({"fmod": 0})
    a, b = imp.required(0), imp.required(1)
    dt = imp.dtype(a)
    if dt != imp.dtype(b):
        raise imp.error(f"operands have element types {dt} and {imp.dtype(b)}")
    q = imp.emit(graph.DivOp, a, b)
    if dt.kind == "f":  # trunc(q) = float(int(q)) where q is small, else q itself
        big = imp.scalar(2.0 ** np.finfo(dt).nmant, a)
        small = imp.emit(graph.CompareOp, imp.emit(graph.AbsOp, q), big, predicate="lt")
        cut = imp.emit(graph.WhereOp, small, q, imp.scalar(0, a))
        cut = cast_to(imp, cast_to(imp, cut, np.dtype(np.int64)), dt)
        q = imp.emit(graph.WhereOp, small, cut, q)
    r = imp.emit(graph.SubOp, a, imp.emit(graph.MulOp, q, b))
    if dt.kind == "f":  # (a - 0 * inf would be nan)
        inf = imp.scalar(np.inf, a)
        b_inf = imp.emit(graph.CompareOp, imp.emit(graph.AbsOp, b), inf, predicate="eq")
        a_finite = imp.emit(graph.CompareOp, imp.emit(graph.AbsOp, a), inf, predicate="lt")
        keep = imp.emit(graph.WhereOp, b_inf, a_finite, Const(np.asarray(False)))
        r = imp.emit(graph.WhereOp, keep, a, r)
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
    return [y]  # (one import-time input: the node was folded, it never gets here)


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
    # and: a ? b : false    or: a ? true : b  (graph.where broadcasts its three operands)
    out = graph.broadcast_shapes(imp.shape(a), imp.shape(b))
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
