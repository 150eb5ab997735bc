"""graph-autodiff (passes/train/autodiff.py, rules in passes/train/_grad.py): every gradient
rule against central finite differences in float64 on the numpy reference and against
torch.autograd; the textbook example; whole-model gradients of the five examples against
torch on numpy and C (OpenCL and DLP on one model); activation checkpointing.

torch's side is an interpreter of the same graph IR in torch ops (`torch_run`): its forward
must equal the reference's (checked), its gradients come from torch.autograd, so the rules
are checked against an independent differentiation of the same function. For the fp32
examples it runs in float64 (`promote`), the reference for fp32 results."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, i1, i64
from xdsl.ir import Block, Region, SSAValue

import dlpc
from dlpc import api
from dlpc.dialects import graph
from dlpc.model import Model
from dlpc.passes.train import _control_grad, _grad
from dlpc.passes.train._build import Builder
from dlpc.passes.train.autodiff import differentiate, saved_bytes
from dlpc.reference.graph import main_func, param_names, run_reference

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
F64 = graph.f64

# ------------------------------------------------------------------ torch interpreter


def _pads4(op):
    return op.pads  # top, left, bottom, right


def _t_pad(x, pads, value=0.0):
    """graph.pad semantics (negative pads crop) on a torch tensor."""
    rank = x.dim()
    for axis in range(rank):
        lo, hi = pads[axis], pads[axis + rank]
        start, stop = max(-lo, 0), x.shape[axis] - max(-hi, 0)
        x = x.narrow(axis, start, stop - start)
    widths = []
    for axis in reversed(range(rank)):
        widths += [max(pads[axis], 0), max(pads[axis + rank], 0)]
    return F.pad(x, widths, value=value) if any(widths) else x


def _t_conv2d(op, x, w, b=None):
    t, l, bo, r = _pads4(op)
    return F.conv2d(
        F.pad(x, (l, r, t, bo)),
        w,
        b,
        stride=op.strides,
        dilation=op.dilations,
        groups=op.groups,
    )


_WG = torch.tensor([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=torch.float64)
_WBT = torch.tensor(
    [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=torch.float64
)
_WAT = torch.tensor([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=torch.float64)


def _t_winograd_filter(op, w):
    return torch.einsum("ai,ocij,bj->aboc", _WG, w, _WG).reshape(16, *w.shape[:2])


def _t_winograd_input(op, x):
    top, left, bottom, right = op.pads
    th, tw = graph.shape_of(op.results[0])[3:]
    xp = F.pad(x, (left, 2 * tw + 2 - x.shape[3] - left, top, 2 * th + 2 - x.shape[2] - top))
    d = xp.unfold(2, 4, 2).unfold(3, 4, 2)  # [N, C, th, tw, 4, 4]
    return torch.einsum("ai,ncstij,bj->abncst", _WBT, d, _WBT).reshape(16, *d.shape[:4])


def _t_winograd_output(op, m, b=None):
    _, n, o, th, tw = m.shape
    oh, ow = op.output_size
    y = torch.einsum("ai,ijnost,bj->nosatb", _WAT, m.reshape(4, 4, n, o, th, tw), _WAT)
    y = y.reshape(n, o, 2 * th, 2 * tw)[:, :, :oh, :ow]
    return y if b is None else y + b.reshape(1, o, 1, 1)


def _t_pool_input(op, x, value):
    """x padded by the pads plus what the last (ceil-mode) window reads."""
    (kh, kw), (sh, sw) = op.kernel, op.strides
    t, l, _, _ = _pads4(op)
    oh, ow = graph.shape_of(op.results[0])[2:]
    bottom = (oh - 1) * sh + kh - x.shape[2] - t
    right = (ow - 1) * sw + kw - x.shape[3] - l
    return _t_pad(x, [0, 0, t, l, 0, 0, bottom, right], value), (kh, kw), (sh, sw)


def _t_max_pool(op, x):
    xp, k, s = _t_pool_input(op, x, -math.inf)
    return F.max_pool2d(xp, k, s)


def _t_avg_pool(op, x):
    xp, k, s = _t_pool_input(op, x, 0.0)
    total = F.avg_pool2d(xp, k, s, divisor_override=1)
    return total / torch.tensor(_grad.pool_counts(op), dtype=x.dtype)


def _t_layer_norm(op, x, scale, bias=None):
    axes = tuple(range(graph.normalize_axis(op.axis, x.dim()), x.dim()))
    mean = x.mean(axes, keepdim=True)
    var = ((x - mean) ** 2).mean(axes, keepdim=True)
    y = (x - mean) / torch.sqrt(var + op.epsilon) * scale
    return y if bias is None else y + bias


def _t_batch_norm(op, x, scale, bias, mean, var):
    col = (1, -1) + (1,) * (x.dim() - 2)
    inv = 1 / torch.sqrt(var + op.epsilon)
    return (x - mean.reshape(col)) * (inv * scale).reshape(col) + bias.reshape(col)


def _t_reduce(fn):
    def run(op, x):
        axes, keep = op.reduced_axes(), op.keepdims
        if fn == "prod":
            for a in sorted(axes, reverse=True):
                x = torch.prod(x, a, keepdim=keep)
            return x
        return getattr(torch, fn)(x, dim=axes, keepdim=keep)

    return run


def _t_slice(op, x):
    for axis, (start, stop, step) in enumerate(op.normalized()):
        idx = torch.tensor(list(range(start, stop, step)), dtype=torch.long)
        x = x.index_select(axis, idx)
    return x


def _t_gather(op, data, idx):
    axis = graph.normalize_axis(op.axis, data.dim())
    flat = idx.reshape(-1) % data.shape[axis]
    return data.index_select(axis, flat).reshape(graph.shape_of(op.results[0]))


def _t_matmul(op, a, b):
    if op.transpose_a and a.dim() >= 2:
        a = a.transpose(-1, -2)
    if op.transpose_b and b.dim() >= 2:
        b = b.transpose(-1, -2)
    return torch.matmul(a, b)


def _t_clip(op, x):
    lo, hi = op.min, op.max
    return torch.clamp(x, None if lo == -math.inf else lo, None if hi == math.inf else hi)


COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt}
TORCH_DTYPE = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}

TORCH: dict[str, Callable] = {
    "graph.neg": lambda op, x: -x,
    "graph.abs": lambda op, x: torch.abs(x),
    "graph.exp": lambda op, x: torch.exp(x),
    "graph.log": lambda op, x: torch.log(x),
    "graph.sqrt": lambda op, x: torch.sqrt(x),
    "graph.rsqrt": lambda op, x: torch.rsqrt(x),
    "graph.tanh": lambda op, x: torch.tanh(x),
    "graph.sigmoid": lambda op, x: torch.sigmoid(x),
    "graph.erf": lambda op, x: torch.erf(x),
    "graph.relu": lambda op, x: torch.relu(x),
    "graph.gelu": lambda op, x: F.gelu(x, approximate=op.approximate),
    "graph.leaky_relu": lambda op, x: F.leaky_relu(x, op.alpha),
    "graph.clip": _t_clip,
    "graph.cast": lambda op, x: x.to(TORCH_DTYPE[graph.numpy_dtype(op.to)]),
    "graph.add": lambda op, a, b: a + b,
    "graph.sub": lambda op, a, b: a - b,
    "graph.mul": lambda op, a, b: a * b,
    "graph.div": lambda op, a, b: a / b,
    "graph.max": lambda op, a, b: torch.maximum(a, b),
    "graph.min": lambda op, a, b: torch.minimum(a, b),
    "graph.pow": lambda op, a, b: torch.pow(a, b),
    "graph.prelu": lambda op, x, s: torch.where(x > 0, x, s * x),
    "graph.where": lambda op, c, a, b: torch.where(c, a, b),
    "graph.compare": lambda op, a, b: COMPARE[op.predicate](a, b),
    "graph.matmul": _t_matmul,
    "graph.linear": lambda op, x, w, b=None: F.linear(x, w, None if b is None else b.reshape(-1)),
    "graph.conv2d": _t_conv2d,
    "graph.winograd_filter_transform": _t_winograd_filter,
    "graph.winograd_input_transform": _t_winograd_input,
    "graph.winograd_output_transform": _t_winograd_output,
    "graph.max_pool2d": _t_max_pool,
    "graph.avg_pool2d": _t_avg_pool,
    "graph.global_avg_pool": lambda op, x: x.mean((2, 3), keepdim=True),
    "graph.batch_norm": _t_batch_norm,
    "graph.layer_norm": _t_layer_norm,
    "graph.softmax": lambda op, x: torch.softmax(x, op.axis),
    "graph.log_softmax": lambda op, x: torch.log_softmax(x, op.axis),
    "graph.reduce_sum": _t_reduce("sum"),
    "graph.reduce_mean": _t_reduce("mean"),
    "graph.reduce_max": _t_reduce("amax"),
    "graph.reduce_min": _t_reduce("amin"),
    "graph.reduce_prod": _t_reduce("prod"),
    "graph.reshape": lambda op, x: x.reshape(graph.shape_of(op.results[0])),
    "graph.transpose": lambda op, x: x.permute(op.permutation()),
    "graph.concat": lambda op, *xs: torch.cat(xs, op.axis),
    "graph.slice": _t_slice,
    "graph.pad": lambda op, x: _t_pad(x, op.pads, op.value),
    "graph.broadcast": lambda op, x: torch.broadcast_to(x, graph.shape_of(op.results[0])),
    "graph.gather": _t_gather,
}


def torch_run(module: ModuleOp, inputs, weights, promote: bool = False):
    """@main's results evaluated with torch ops; returns (results, leaf tensors by name:
    the inputs as arg0.. and the params by name). `promote`: float constants and float
    casts in float64 (an f32 model run in float64)."""
    f = main_func(module)
    leaves: dict[str, torch.Tensor] = {}
    env: dict[SSAValue, torch.Tensor] = {}
    for i, (arg, x) in enumerate(zip(f.args, inputs)):
        t = torch.tensor(x)
        if t.is_floating_point():
            t.requires_grad_(True)
        env[arg] = leaves[f"arg{i}"] = t
    for op in f.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return [env[v] for v in op.operands], leaves
        if isinstance(op, graph.ParamOp):
            if op.pname not in leaves:
                leaves[op.pname] = torch.tensor(weights[op.pname], requires_grad=True)
            env[op.output] = leaves[op.pname]
        else:
            env[op.results[0]] = _torch_op(op, [env[v] for v in op.operands], promote)
    raise AssertionError("no func.return")


def _torch_op(op, args, promote):
    if isinstance(op, graph.ConstantOp):
        t = torch.tensor(op.to_numpy())
        return t.double() if promote and t.is_floating_point() else t
    if promote and isinstance(op, graph.CastOp) and graph.is_float_type(op.to):
        return args[0].double()
    if isinstance(op, graph.FusedOp):
        inner = dict(zip(op.body.block.args, args))
        for o in op.body.block.ops:
            if isinstance(o, graph.YieldOp):
                return inner[o.values[0]]
            inner[o.results[0]] = _torch_op(o, [inner[v] for v in o.operands], promote)
    return TORCH[op.name](op, *args)


# ------------------------------------------------------------------------ one rule


@dataclass
class Case:
    """`build(b, *args) -> y` on inputs of `specs`: (shape, kind) with kind "f" (normal),
    "pos" (in [0.5, 2]), "int<n>" (ints in [-n, n)), "bool"."""

    name: str
    build: Callable
    specs: list = field(default_factory=list)
    fd_tol: float = 1e-6


def _types(specs):
    elt = {"f": F64, "pos": F64, "bool": i1}
    return [graph.tensor_type(s, elt.get(k, i64)) for s, k in specs]


def _arrays(specs, rng):
    out = []
    for shape, kind in specs:
        if kind == "f":
            out.append(rng.standard_normal(shape))
        elif kind == "pos":
            out.append(rng.uniform(0.5, 2.0, shape))
        elif kind == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            n = int(kind[3:])
            out.append(rng.integers(-n, n, shape).astype(np.int64))
    return out


def _weighted_sum_module(case: Case, rng) -> ModuleOp:
    """loss = sum(y * r) for a fixed random r, so every element's adjoint differs."""
    block = Block(arg_types=_types(case.specs))
    b = Builder.at_end(block)
    y = case.build(b, *block.args)
    r = b.const(rng.standard_normal(graph.shape_of(y)), F64)
    loss = b.sum(b.mul(y, r))
    block.add_op(func.ReturnOp(loss))
    f = func.FuncOp("main", ([a.type for a in block.args], [loss.type]), Region(block))
    return ModuleOp([f])


def op(cls, **attrs):
    return lambda b, *xs: b.op(cls, *xs, **attrs)


S = [((2, 3), "f")]
X4 = [((2, 3, 4, 5), "f")]
CASES = [
    *(
        Case(cls.name, op(cls), [((2, 3, 5), "f")])
        for cls in (graph.NegOp, graph.TanhOp, graph.SigmoidOp, graph.ErfOp, graph.ExpOp)
    ),
    *(
        Case(cls.name, op(cls), [((3, 5), "pos")])
        for cls in (graph.LogOp, graph.SqrtOp, graph.RsqrtOp)
    ),
    Case("abs", op(graph.AbsOp), [((4, 5), "f")]),
    Case("relu", op(graph.ReluOp), [((4, 7), "f")]),
    Case("gelu", op(graph.GeluOp), [((4, 5), "f")]),
    Case("gelu_tanh", op(graph.GeluOp, approximate="tanh"), [((4, 5), "f")]),
    Case("leaky_relu", op(graph.LeakyReluOp, alpha=0.1), [((4, 5), "f")]),
    Case("clip", op(graph.ClipOp, min=-0.5, max=0.7), [((4, 5), "f")]),
    Case("clip_min_only", op(graph.ClipOp, min=0.0), [((4, 5), "f")]),
    Case(
        "cast",
        lambda b, x: b.cast(b.mul(b.cast(x, graph.f32), 2.0), F64),
        [((3, 4), "f")],
        fd_tol=1e-3,
    ),
    *(
        Case(f"{cls.name}{i}", op(cls), specs)
        for cls in (graph.AddOp, graph.SubOp, graph.MulOp, graph.MaxOp, graph.MinOp)
        for i, specs in enumerate(
            [
                [((3, 4), "f"), ((4,), "f")],
                [((2, 1, 5), "f"), ((3, 1), "f")],
                [((), "f"), ((2, 3), "f")],
            ]
        )
    ),
    Case("mul_self", lambda b, x: b.mul(x, x), [((3, 4), "f")]),
    Case("square_fan_out", lambda b, x: b.mul(b.exp(x), x), [((3, 4), "f")]),
    Case("div", op(graph.DivOp), [((2, 1, 5), "f"), ((3, 1), "pos")]),
    Case("pow", op(graph.PowOp), [((3, 4), "pos"), ((4,), "f")]),
    Case("pow_const", lambda b, x: b.pow(x, 3.0), [((3, 4), "f")]),
    Case("prelu", op(graph.PReluOp), [((2, 3, 4, 5), "f"), ((3, 1, 1), "f")]),
    Case("where", op(graph.WhereOp), [((3, 4), "bool"), ((3, 4), "f"), ((4,), "f")]),
    Case("matmul", op(graph.MatMulOp), [((3, 4), "f"), ((4, 5), "f")]),
    Case("matmul_batched", op(graph.MatMulOp), [((2, 1, 3, 4), "f"), ((5, 4, 6), "f")]),
    Case(
        "matmul_transposed",
        op(graph.MatMulOp, transpose_a=True, transpose_b=True),
        [((2, 4, 3), "f"), ((5, 4), "f")],
    ),
    Case("matmul_ta", op(graph.MatMulOp, transpose_a=True), [((4, 3), "f"), ((2, 4, 5), "f")]),
    Case("matmul_vec_mat", op(graph.MatMulOp), [((4,), "f"), ((2, 4, 5), "f")]),
    Case("matmul_mat_vec", op(graph.MatMulOp, transpose_a=True), [((2, 4, 3), "f"), ((4,), "f")]),
    Case("matmul_dot", op(graph.MatMulOp), [((4,), "f"), ((4,), "f")]),
    Case("linear", op(graph.LinearOp), [((2, 3, 5), "f"), ((4, 5), "f"), ((4,), "f")]),
    Case("linear_nobias_1d", op(graph.LinearOp), [((5,), "f"), ((4, 5), "f")]),
    Case("linear_bias_1xN", op(graph.LinearOp), [((3, 5), "f"), ((4, 5), "f"), ((1, 4), "f")]),
    Case("conv2d", op(graph.Conv2DOp), [((2, 3, 6, 5), "f"), ((4, 3, 3, 3), "f"), ((4,), "f")]),
    Case("winograd_filter", op(graph.WinogradFilterTransformOp), [((4, 3, 3, 3), "f")]),
    Case(
        "winograd_input_pad",  # odd output (5x4): rows/columns beyond the input dropped
        op(graph.WinogradInputTransformOp, pads=[1, 0, 1, 1]),
        [((2, 3, 5, 5), "f")],
    ),
    Case("winograd_input", op(graph.WinogradInputTransformOp), [((1, 2, 6, 8), "f")]),
    Case(
        "winograd_output_crop",
        op(graph.WinogradOutputTransformOp, output=[5, 3]),
        [((16, 2, 3, 3, 2), "f"), ((3,), "f")],
    ),
    Case(
        "conv2d_stride_pad_dilation",
        op(graph.Conv2DOp, strides=[2, 3], pads=[1, 0, 2, 1], dilations=[2, 1]),
        [((2, 3, 9, 8), "f"), ((4, 3, 3, 2), "f")],
    ),
    Case(
        "conv2d_groups",
        op(graph.Conv2DOp, strides=[2, 2], pads=[1, 1, 1, 1], groups=2),
        [((1, 4, 7, 7), "f"), ((6, 2, 3, 3), "f"), ((6,), "f")],
    ),
    Case(
        "conv2d_depthwise",
        op(graph.Conv2DOp, pads=[2, 2, 2, 2], groups=3, dilations=[2, 2]),
        [((2, 3, 5, 6), "f"), ((3, 1, 3, 3), "f")],
    ),
    Case(
        "conv2d_big_pad_stride3",
        op(graph.Conv2DOp, strides=[3, 3], pads=[3, 0, 0, 3]),
        [((1, 2, 7, 7), "f"), ((2, 2, 2, 2), "f")],
    ),
    Case("max_pool", op(graph.MaxPool2DOp, kernel=[2, 2], strides=[2, 2]), X4),
    Case(
        "max_pool_overlap_pad",
        op(graph.MaxPool2DOp, kernel=[3, 3], strides=[2, 1], pads=[1, 1, 1, 1]),
        [((2, 3, 7, 6), "f")],
    ),
    Case(
        "max_pool_ceil",
        op(graph.MaxPool2DOp, kernel=[2, 3], strides=[2, 2], ceil_mode=True),
        [((1, 2, 7, 8), "f")],
    ),
    Case("avg_pool", op(graph.AvgPool2DOp, kernel=[2, 2], strides=[2, 2]), X4),
    Case(
        "avg_pool_pad",
        op(graph.AvgPool2DOp, kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        [((2, 3, 7, 6), "f")],
    ),
    Case(
        "avg_pool_pad_count",
        op(
            graph.AvgPool2DOp,
            kernel=[3, 2],
            strides=[2, 1],
            pads=[1, 0, 1, 1],
            count_include_pad=True,
            ceil_mode=True,
        ),
        [((1, 2, 6, 5), "f")],
    ),
    Case("global_avg_pool", op(graph.GlobalAvgPoolOp), X4),
    Case(
        "batch_norm",
        op(graph.BatchNormOp, epsilon=1e-3),
        [((2, 3, 4, 5), "f"), ((3,), "f"), ((3,), "f"), ((3,), "f"), ((3,), "pos")],
    ),
    Case("layer_norm", op(graph.LayerNormOp), [((3, 7), "f"), ((7,), "f"), ((7,), "f")]),
    Case(
        "layer_norm_axis1",
        op(graph.LayerNormOp, axis=1, epsilon=1e-3),
        [((2, 3, 4), "f"), ((4,), "f")],
    ),
    Case("softmax", op(graph.SoftmaxOp, axis=1), [((3, 5, 2), "f")]),
    Case("log_softmax", op(graph.LogSoftmaxOp, axis=-1), [((3, 5), "f")]),
    Case("reduce_sum", op(graph.ReduceSumOp, axes=[0, 2]), [((2, 3, 4), "f")]),
    Case("reduce_mean_keep", op(graph.ReduceMeanOp, axes=[1], keepdims=True), [((2, 3, 4), "f")]),
    Case("reduce_mean_all", op(graph.ReduceMeanOp), [((2, 3), "f")]),
    Case("reduce_max", op(graph.ReduceMaxOp, axes=[-1]), [((3, 5), "f")]),
    Case("reduce_min", op(graph.ReduceMinOp, axes=[0, 1], keepdims=True), [((3, 4, 2), "f")]),
    Case("reduce_prod", op(graph.ReduceProdOp, axes=[1]), [((3, 4), "pos")]),
    Case(
        "reduce_prod_zeros",
        lambda b, x: b.op(graph.ReduceProdOp, b.relu(x), axes=[1]),
        [((6, 3), "f")],
    ),
    Case("reshape", op(graph.ReshapeOp, shape=[4, -1]), [((2, 3, 2), "f")]),
    Case("transpose", op(graph.TransposeOp, perm=[2, 0, 1]), [((2, 3, 4), "f")]),
    Case(
        "concat",
        op(graph.ConcatOp, axis=1),
        [((2, 1, 3), "f"), ((2, 3, 3), "f"), ((2, 2, 3), "f")],
    ),
    Case(
        "slice_steps",
        op(graph.SliceOp, starts=[1, 0], ends=[7, 5], axes=[0, 1], steps=[3, 2]),
        [((8, 5), "f")],
    ),
    Case(
        "slice_negative_step",
        op(graph.SliceOp, starts=[-1, 3], ends=[-9, 0], axes=[0, 1], steps=[-2, -1]),
        [((7, 5), "f")],
    ),
    Case("pad", op(graph.PadOp, pads=[1, -1, 0, 2], value=0.5), [((3, 4), "f")]),
    Case("broadcast", op(graph.BroadcastOp, shape=[2, 3, 4]), [((3, 1), "f")]),
    Case("gather", op(graph.GatherOp, axis=1), [((3, 5, 2), "f"), ((2, 4), "int5")]),
]


def _fd_gradient(module, arrays, index, eps=1e-6, limit=24, rng=None):
    """Central differences of the loss in input `index` (at most `limit` elements)."""
    x = arrays[index]
    flat = np.arange(x.size)
    if x.size > limit:
        flat = rng.choice(x.size, limit, replace=False)
    grads = {}
    for k in flat:
        values = []
        for sign in (1, -1):
            moved = x.copy().reshape(-1)
            moved[k] += sign * eps
            args = [*arrays[:index], moved.reshape(x.shape), *arrays[index + 1 :]]
            values.append(float(run_reference(module, args, {})[0]))
        grads[int(k)] = (values[0] - values[1]) / (2 * eps)
    return grads


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name.removeprefix("graph."))
def test_rule_matches_finite_differences_and_torch(case):
    rng = np.random.default_rng(abs(hash(case.name)) % 2**32)
    module = _weighted_sum_module(case, rng)
    arrays = _arrays(case.specs, rng)
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    grad_module.verify()
    loss, *grads = run_reference(grad_module, arrays, {})
    floats = [i for i, (_, k) in enumerate(case.specs) if k in ("f", "pos")]
    assert len(grads) == len(floats)

    # central finite differences, float64
    for i, grad in zip(floats, grads):
        assert grad.shape == arrays[i].shape and grad.dtype == np.float64
        eps = 1e-3 if case.fd_tol > 1e-5 else 1e-6
        for k, want in _fd_gradient(module, arrays, i, eps, rng=rng).items():
            assert grad.reshape(-1)[k] == pytest.approx(want, rel=case.fd_tol, abs=case.fd_tol), (
                f"input {i} element {k}"
            )

    # torch.autograd on the same function
    (t_loss,), leaves = torch_run(module, arrays, {})
    assert float(t_loss.detach()) == pytest.approx(float(loss), rel=1e-12, abs=1e-12)
    t_loss.backward()
    for i, grad in zip(floats, grads):
        want = leaves[f"arg{i}"].grad
        want = np.zeros_like(grad) if want is None else want.numpy()
        np.testing.assert_allclose(grad, want, rtol=1e-9, atol=1e-12)


def test_every_differentiable_op_has_a_rule():
    """Every graph op with a float result has a rule, except the leaves and fusion's
    plumbing (graph.fused is inlined, compare yields booleans)."""
    leaves = {"graph.constant", "graph.param", "graph.fused", "graph.yield", "graph.compare"}
    names = {op.name for op in graph.GRAPH_OPS} - leaves
    rules = set(_grad.RULES) | set(_control_grad.RULES)  # (if / loop: several results)
    assert names <= rules, sorted(names - rules)


def test_max_pool_ties_go_to_the_first_maximum_as_in_torch():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = x[0, 0, 0, 1] = 1.0  # a tie in the first window
    case = Case("tie", op(graph.MaxPool2DOp, kernel=[2, 2], strides=[2, 2]), [((1, 1, 4, 4), "f")])
    module = _weighted_sum_module(case, np.random.default_rng(0))
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    (t_loss,), leaves = torch_run(module, [x], {})
    t_loss.backward()
    got = run_reference(grad_module, [x], {})[1]
    np.testing.assert_allclose(got, leaves["arg0"].grad.numpy(), rtol=1e-12)
    assert got[0, 0, 0, 1] != 0 and got[0, 0, 1, 1] == 0


def test_graph_fused_body_is_differentiated():
    block = Block(arg_types=[graph.tensor_type((3, 4), F64), graph.tensor_type((4,), F64)])
    body = Block(arg_types=[a.type for a in block.args])
    bb = Builder.at_end(body)
    y = bb.op(graph.TanhOp, bb.add(bb.mul(body.args[0], body.args[1]), 1.0))
    body.add_op(graph.YieldOp.create(operands=[y]))
    b = Builder.at_end(block)
    fused = b.insert(graph.FusedOp("mul_add_tanh", list(block.args), y.type, Region(body)))
    loss = b.sum(b.mul(fused, fused))
    block.add_op(func.ReturnOp(loss))
    module = ModuleOp(
        [func.FuncOp("main", ([a.type for a in block.args], [loss.type]), Region(block))]
    )
    arrays = _arrays([((3, 4), "f"), ((4,), "f")], np.random.default_rng(5))
    grad_module = module.clone()
    differentiate(grad_module, wrt_inputs=True)
    assert not any(isinstance(o, graph.FusedOp) for o in grad_module.walk())
    _, *grads = run_reference(grad_module, arrays, {})
    (t_loss,), leaves = torch_run(module, arrays, {})
    t_loss.backward()
    for i, grad in enumerate(grads):
        np.testing.assert_allclose(grad, leaves[f"arg{i}"].grad.numpy(), rtol=1e-10)


# ------------------------------------------------------------------ the textbook


TEXTBOOK = """
func.func @main(%x1: tensor<f64>, %x2: tensor<f64>) -> tensor<f64> {
  %x3 = graph.exp %x1 : (tensor<f64>) -> tensor<f64>
  %x5 = graph.add %x3, %x2 : (tensor<f64>, tensor<f64>) -> tensor<f64>
  %one = graph.constant dense<1.0> : tensor<f64>
  %x4 = graph.add %x2, %one : (tensor<f64>, tensor<f64>) -> tensor<f64>
  %x6 = graph.mul %x5, %x4 : (tensor<f64>, tensor<f64>) -> tensor<f64>
  func.return %x6 : tensor<f64>
}
"""


@pytest.mark.parametrize("target", ["numpy", "c"])
def test_textbook_example_values(target):
    """f(x1, x2) = (e^x1 + x2)(x2 + 1) at (3, 2): y = 66.258, dy/dx1 = 60.258,
    dy/dx2 = 25.086 (the textbook's figures), exactly 3 (e^3 + 2), 3 e^3 and e^3 + 5."""
    from dlpc.passes.pipeline import parse_module

    module = parse_module(TEXTBOOK)
    differentiate(module, wrt_inputs=True)
    names = [a.data["dlpc.name"].data for a in main_func(module).res_attrs.data]
    assert names == ["loss", "grad.x1", "grad.x2"]
    fn = api.compile(Model(module, {}, "textbook"), target=target)
    y, dx1, dx2 = (float(v) for v in fn(np.float64(3.0), np.float64(2.0)))
    # the textbook rounds e^3 to 20.086 before multiplying by 3: 66.2566 -> "66.258"
    assert (y, dx1, dx2) == pytest.approx((66.258, 60.258, 25.086), abs=2e-3)
    e3 = math.exp(3.0)
    assert (y, dx1, dx2) == pytest.approx((3 * (e3 + 2), 3 * e3, e3 + 2 + 3), rel=1e-12)


# ------------------------------------------------------------------ whole models


def _model_loss_module(model: Model, seed: int):
    """The example with loss = sum(output * r) appended (float32), differentiated."""
    module = model.module.clone()
    f = main_func(module)
    ret = f.body.block.last_op
    out = ret.operands[0]
    b = Builder.before(ret)
    r = b.const(np.random.default_rng(seed).standard_normal(graph.shape_of(out)), graph.f32)
    loss = b.sum(b.mul(out, r))
    ret.operands = [loss]
    f.res_attrs = None
    f.update_function_type()
    forward = module.clone()
    differentiate(module)
    return forward, module


def _torch_grads(forward, inputs, weights):
    w64 = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    x64 = [np.asarray(x, np.float64) for x in inputs]
    (loss,), leaves = torch_run(forward, x64, w64, promote=True)  # float64 throughout
    loss.backward()
    return float(loss.detach()), leaves


def _check_model_grads(name, targets, batch=None):
    model = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=batch or 1)
    weights = api.check_weights(model)
    forward, grad_module = _model_loss_module(model, seed=7)
    inputs = api.random_inputs(model, seed=2)
    loss, leaves = _torch_grads(forward, inputs, weights)
    names = param_names(forward)
    for target in targets:
        fn = api.compile(Model(grad_module, weights, f"{name}_grad"), target, fold_weights=False)
        out = fn(*inputs)
        assert float(out[0]) == pytest.approx(loss, rel=1e-4, abs=1e-4), target
        assert len(out) == 1 + len(names)
        # fp32 tolerance: relative, and absolute against the model's largest gradient
        # (a gradient that is 0 in exact arithmetic, e.g. a key bias under softmax, is
        # rounding noise of the others' size in fp32)
        scale = max(float(np.abs(leaves[p].grad.numpy()).max()) for p in names)
        for pname, grad in zip(names, out[1:]):
            want = leaves[pname].grad.numpy()
            np.testing.assert_allclose(
                grad, want, rtol=2e-3, atol=1e-5 * scale, err_msg=f"{name} {pname} on {target}"
            )


@pytest.mark.parametrize(
    "name,batch",
    [("mlp", 3), ("lenet", 2), ("resnet", None), ("mobilenet", None), ("transformer", None)],
)
def test_example_gradients_match_torch(name, batch):
    _check_model_grads(name, ["numpy", "c"], batch)


@pytest.mark.parametrize("target", ["opencl", "dlp"])
def test_example_gradients_on_other_targets(target, tmp_path, monkeypatch):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "cache"))
    _check_model_grads("lenet", [target], batch=2)


# ------------------------------------------------------------------ options


def test_unused_param_gets_zero_gradient_and_params_are_summed():
    from dlpc.passes.pipeline import parse_module

    module = parse_module(
        """
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<3xf32>
  %u = graph.param "unused" : tensor<2x2xf32>
  %a = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %w2 = graph.param "w" : tensor<3xf32>
  %b = graph.mul %a, %w2 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %b : (tensor<3xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""
    )
    differentiate(module)
    x, w = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 2.0], np.float32)
    loss, gw, gu = run_reference(module, [x], {"w": w, "unused": np.ones((2, 2), np.float32)})
    np.testing.assert_allclose(gw, 2 * x * w)  # d/dw sum(x w^2)
    assert gu.shape == (2, 2) and not gu.any()


def test_result_and_aux_options():
    from xdsl.context import Context

    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.train.autodiff import GraphAutodiff

    module = parse_module(
        """
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %w = graph.param "w" : tensor<3xf32>
  %a = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %a : (tensor<3xf32>) -> tensor<f32>
  func.return %a, %l : tensor<3xf32>, tensor<f32>
}"""
    )
    GraphAutodiff(result=1, aux=True).apply(Context(), module)
    f = main_func(module)
    assert [a.data["dlpc.name"].data for a in f.res_attrs.data] == ["loss", "grad.w", "result0"]
    x, w = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    loss, gw, a = run_reference(module, [x], {"w": w})
    assert loss == 32 and np.array_equal(gw, x) and np.array_equal(a, x * w)


def _training_loss_module(name: str) -> ModuleOp:
    """The example's output with an MSE loss against an input, batch norm in training
    mode (batch statistics: elementwise chains), before autodiff."""
    from dlpc.passes.train.step import _training_batch_norm

    module = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=1).module.clone()
    f = main_func(module)
    ret = f.body.block.last_op
    out = ret.operands[0]
    target = f.body.block.insert_arg(out.type, len(f.body.block.args))
    _training_batch_norm(f)
    b = Builder.before(ret)
    d = b.sub(out, target)
    ret.operands = [b.mean(b.mul(d, d))]
    f.arg_attrs = f.res_attrs = None
    f.update_function_type()
    return module


@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_recompute_keeps_fewer_bytes_and_the_same_gradients(name):
    """Checkpointing the elementwise chains of training-mode batch norm: less kept alive
    for the backward, bit-identical gradients."""
    from xdsl.context import Context

    from dlpc.passes.train.autodiff import GraphAutodiff

    model = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=1)
    weights = api.check_weights(model)
    forward = _training_loss_module(name)
    plain, checkpointed = saved_bytes(forward), saved_bytes(forward, recompute=True)
    assert checkpointed.recomputed_ops > 0
    assert checkpointed.kept_bytes < plain.kept_bytes  # (the half: the test below)
    x = api.random_inputs(model, seed=4)[0]
    target_shape = graph.shape_of(main_func(forward).args[1])
    inputs = [x, np.random.default_rng(5).standard_normal(target_shape).astype(np.float32)]
    results = []
    for recompute in (False, True):
        module = forward.clone()
        GraphAutodiff(recompute=recompute).apply(Context(), module)
        results.append(run_reference(module, inputs, weights))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_recompute_keeps_one_activation_per_batch_norm(name):
    """Checkpointing training-mode batch norm's elementwise chains keeps, per batch norm,
    one activation the size of its input (nothing cheap rebuilds a conv's output, so
    that is the least a cheap-op recompute can keep) and otherwise only smaller values
    (per-channel statistics, the pooled features, the loss's difference); without
    recompute the backward keeps more large activations than there are batch norms."""
    from dlpc.dialects import graph as G

    model = dlpc.load(EXAMPLES / f"{name}.dlpc", batch=1)
    bn_inputs = sorted(
        _bytes_of(op.operands[0]) for op in model.module.walk() if isinstance(op, G.BatchNormOp)
    )
    forward = _training_loss_module(name)
    plain, checkpointed = saved_bytes(forward), saved_bytes(forward, recompute=True)
    large = sorted(n for n in checkpointed.sizes if n >= bn_inputs[0])
    assert large == bn_inputs
    assert len([n for n in plain.sizes if n >= bn_inputs[0]]) > len(bn_inputs)
    assert checkpointed.kept_bytes < plain.kept_bytes
    assert checkpointed.kept_bytes - sum(large) < bn_inputs[0]


def _bytes_of(v) -> int:
    from dlpc.passes.train.autodiff import _bytes

    return _bytes(v)


def test_recompute_never_keeps_more():
    """Where recomputing would keep bigger operands alive (relu(r + s) of two inference
    batch norms) the value itself is kept."""
    model = dlpc.load(EXAMPLES / "resnet.dlpc", batch=1)
    forward, _ = _model_loss_module(model, seed=3)
    assert saved_bytes(forward, recompute=True).kept_bytes <= saved_bytes(forward).kept_bytes


def test_train_step_reports_what_the_backward_keeps():
    """The train step records the kept bytes with and without recompute; `dlpc-train
    --stats` says them."""
    from dlpc.passes.train.step import train_step_module
    from dlpc.tools.dlpc_train import activation_stats

    module = _training_loss_module("mobilenet")  # only for its shapes: (x, target) -> loss
    model = dlpc.load(EXAMPLES / "mobilenet.dlpc", batch=1)
    step = train_step_module(model.module, "mse", "sgd", api.check_weights(model))
    assert step.kept_bytes == saved_bytes(module).kept_bytes
    assert step.kept_bytes_other == saved_bytes(module, recompute=True).kept_bytes
    assert step.kept_bytes_other < step.kept_bytes
    line = activation_stats(step)
    assert f"{step.kept_bytes / 1024:.1f} KiB" in line and "with graph-autodiff recompute" in line
    checkpointed = train_step_module(model.module, "mse", "sgd", recompute=True)
    assert checkpointed.kept_bytes == step.kept_bytes_other


def test_loss_made_by_graph_fused():
    """The loss itself is the result of a graph.fused (inlined before it is read)."""
    from dlpc.passes.pipeline import parse_module

    module = parse_module(
        """
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<3xf32>
  %l = graph.fused "mul_sum" %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<3xf32>, %b: tensor<3xf32>):
    %0 = graph.mul %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = graph.reduce_sum %0 : (tensor<3xf32>) -> tensor<f32>
    graph.yield %1 : tensor<f32>
  }
  func.return %l : tensor<f32>
}"""
    )
    differentiate(module)
    module.verify()
    x, w = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    loss, gw = run_reference(module, [x], {"w": w})
    assert loss == 32 and np.array_equal(gw, x)
