"""ONNX normalisations: BatchNormalization (inference and training mode), Layer, Instance,
Group, RMS and Lp normalisation, Softmax / LogSoftmax."""

from __future__ import annotations

import math

import numpy as np

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value


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
        axes = tuple(range(norm_axis(imp, a["axis"], rank), rank))
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
    axes = tuple(range(norm_axis(imp, a["axis"], rank), rank))
    ms = imp.emit(graph.ReduceMeanOp, imp.emit(graph.MulOp, x, x), axes=axes, keepdims=True)
    inv = imp.emit(graph.RsqrtOp, imp.emit(graph.AddOp, ms, imp.scalar(a["epsilon"], x)))
    return [imp.emit(graph.MulOp, imp.emit(graph.MulOp, x, inv), scale)]


@handles("LpNormalization")
def lp_norm(imp: NodeContext):
    a = imp.attrs({"axis": -1, "p": 2})
    imp.require(a, "p", (1, 2))
    x = imp.required(0)
    ax = (norm_axis(imp, a["axis"], len(imp.shape(x))),)
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
