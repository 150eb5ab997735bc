"""Latency of the example models on every backend; one run prints one table.

    python bench/models.py [--repeat 20] [--warmup 3] [--models mlp,lenet] [-O 0,2] [--threads N]
    python bench/models.py --batches 1,4,32 [--thread-counts 1,2] [--memory]   # issue #11

Columns: dlpc's numpy reference (the emitted module), dlpc's C backend at each -O level
given (and its loop.kernel count there, the last columns), PyTorch (the
graph IR run op by op with torch.nn.functional) and onnxruntime. The onnxruntime model
is the torch model exported with torch.onnx when torch is installed, else (or with
`--onnx-from graph`) the graph IR exported op by op with onnx.helper. A backend that is not installed prints "n/a"; one
whose outputs differ from the numpy reference (rtol 1e-3, atol 1e-4) prints "wrong".
Each figure is the median wall time of `--repeat` calls after `--warmup` calls, in ms.
Inputs are drawn from seed 0; weights are the models' own. Nothing here gates CI.
The rows "mlp int8" and "lenet int8" (issue 34; with onnxruntime installed) run one file,
the example quantized by onnxruntime's `quantize_static` (QDQ, int8, per-channel
weights: bench/int8_models.py), in dlpc (`dlpc.load` + `dlpc.compile`) and in
onnxruntime; "wrong" there means more than one quantum from onnxruntime's outputs.
`--int8-batch N` exports those files at batch N; onnxruntime then runs with `--threads`
intra-op threads (with 2 or more its pool does not spin between calls: it took the
cores from dlpc's team), and the int8 rows' runners are timed in turn, in blocks of
calls (each after `--warmup` calls; each runner's thread team stays awake in its block).

`--batches` (issue #11's table): per example, batch and thread count, dlpc C on the .dlpc
example, onnxruntime, torch eager and their ratio; then the same model exported from
PyTorch to ONNX by both torch.onnx exporters (TorchScript `dynamo=False`, and
`dynamo=True`), each file run by dlpc (`dlpc.load(path)` + `dlpc.compile(target="c")`, the
public API) and by onnxruntime, with their ratio; and the kernel counts of the three dlpc
paths. Every figure comes from a fresh worker process that loads only its own runtime, so
no other thread pool is alive beside the one being timed (on a 2-core machine an idle
spinning pool of another library halves a 2-thread figure): dlpc's libgomp with
OMP_NUM_THREADS, onnxruntime's intra-op pool with intra_op_num_threads (inter-op 1),
torch's with set_num_threads (interop 1); one OpenBLAS/MKL thread in every worker, and
OMP_WAIT_POLICY as each library sets it (dlpc's runtime: a short spin, GOMP_SPINCOUNT
10000, then sleep, unless the user chose; PASSIVE, its earlier default, cost a 2-thread
call the wake-up of its sleeping thread per parallel loop: lenet batch 1, 2 threads, 0.038
ms PASSIVE against 0.027 ms ACTIVE or libgomp's default; onnxruntime's pool spins) or as `--omp-wait-policy` sets it for all. Workers run one at a
time.
The last columns set each row against this CPU's FMA peak (bench/peak.py, measured in a
worker per thread count, the best on-core figure of the rounds): the model's MFLOP per
call (2 x the conv2d/linear/matmul multiply-adds; "model/dlpc" where dlpc's -O2 graph
multiplies less, Winograd), the bound (dlpc's FLOPs at the peak, ms: the least time a
call can take) and the share of the peak dlpc on the .dlpc and onnxruntime on the first
export reach (docs/design/schedules.md#peak-bound).

`--memory` adds a table per example and batch: dlpc's arena (the memory plan's peak) and
the sum of its intermediates, and for each runner the peak and the held resident memory
as a user sees it, measured in its worker: the baseline is the process after importing
the runner's library and loading the inputs (its peak resident set is reset there through
/proc/self/clear_refs); peak = the highest resident set (VmHWM) while loading the model,
compiling it (dlpc; a warm compile when dlpc's sources did not change since the parent
compiled it, else marked *) or creating the session (onnxruntime) and running once,
minus the baseline; held = the resident set after that run minus the baseline.
onnxruntime's Python API exposes no arena statistics (OrtAllocator::GetStats is in the
C API only), so both are measured this way.

On a shared or busy machine, thread pools waiting at barriers dominate the medians (tens
of ms for sub-ms models); single-threaded figures are the stable ones:

    OPENBLAS_NUM_THREADS=1 python bench/models.py --threads 1
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dlpc import api
from dlpc.diagnostics import DlpcError, progress
from dlpc.dialects import graph as g
from dlpc.passes import pipeline
from dlpc.reference import graph as ref

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def mobilenetv2_text(expand: int = 6) -> str:
    """A MobileNetV2-style network as .dlpc text (issue 31): a 3x3 stem (3 -> 16, stride 2),
    three inverted residual blocks (1x1 expand, batch norm, ReLU6; depthwise 3x3 of stride
    1 or 2, batch norm, ReLU6; 1x1 project, batch norm; the residual add where stride 1
    keeps the shape) and a pooled linear head, on a B x 3 x 64 x 64 image."""
    params, body, seed = [], [], [100]

    def conv_bn(name: str, x: str, cin: int, cout: int, k: int, stride: int, groups: int) -> str:
        seed[0] += 10
        s = seed[0]
        params.append(
            f"  param {name}.w: f32[{cout}, {cin // groups}, {k}, {k}] = kaiming(seed={s})"
        )
        for i, (field, init) in enumerate(
            [
                ("scale", "uniform(seed={}, low=0.8, high=1.2)"),
                ("bias", "normal(seed={}, std=0.1)"),
                ("mean", "normal(seed={}, std=0.1)"),
                ("var", "uniform(seed={}, low=0.5, high=1.5)"),
            ]
        ):
            params.append(f"  param {name}.bn.{field}: f32[{cout}] = {init.format(s + 1 + i)}")
        opts = "".join(
            [f", stride={stride}" if stride > 1 else "", f", padding={k // 2}" if k > 1 else ""]
        )
        opts += f", groups={groups}" if groups > 1 else ""
        bn = ", ".join(f"{name}.bn.{f}" for f in ("scale", "bias", "mean", "var"))
        body.append(f"  let {name} = batch_norm(conv2d({x}, {name}.w{opts}), {bn})")
        return name

    h = conv_bn("stem", "x", 3, 16, 3, 2, 1)
    body.append("  let stem = clip(stem, min=0, max=6)")
    cin = 16
    for i, (cout, stride) in enumerate([(16, 1), (24, 2), (24, 1)]):
        hidden = cin * expand
        e = conv_bn(f"b{i}e", h, cin, hidden, 1, 1, 1)
        body.append(f"  let {e} = clip({e}, min=0, max=6)")
        d = conv_bn(f"b{i}d", e, hidden, hidden, 3, stride, hidden)
        body.append(f"  let {d} = clip({d}, min=0, max=6)")
        p = conv_bn(f"b{i}p", d, hidden, cout, 1, 1, 1)
        if stride == 1 and cin == cout:
            body.append(f"  let {p} = {p} + {h}")
        h, cin = p, cout
    params.append(f"  param fc.weight: f32[10, {cin}] = kaiming(seed=199, gain=1.0)")
    params.append("  param fc.bias: f32[10] = normal(seed=198, std=0.1)")
    body.append(f"  let h = reshape(global_avg_pool({h}), shape=[B, {cin}])")
    body.append("  return linear(h, fc.weight, fc.bias)")
    lines = ["model mobilenetv2(x: f32[B, 3, 64, 64]) {", *params, "", *body, "}", ""]
    return "\n".join(lines)


# models bench/models.py writes itself (not in examples/): name -> .dlpc text
GENERATED: dict[str, Callable[[], str]] = {"mobilenetv2": mobilenetv2_text}


def example_path(name: str, where: Path) -> Path:
    """examples/<name>.dlpc, or a GENERATED model's text written into `where`."""
    if name not in GENERATED:
        return EXAMPLES / f"{name}.dlpc"
    path = where / f"{name}.dlpc"
    if not path.exists():
        path.write_text(GENERATED[name]())
    return path


def example_names() -> list[str]:
    return sorted(q.stem for q in EXAMPLES.glob("*.dlpc")) + sorted(GENERATED)


def median_ms(fn: Callable[[], object], repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


# ------------------------------------------------------------ torch interpreter


def torch_model(module, weights, device="cpu"):
    """An nn.Module running @main op by op with torch / torch.nn.functional, its weights
    and constants on `device` (bench/opencl_gpu.py: "cuda")."""
    import torch
    import torch.nn.functional as F

    def windows_padded(x, a, value):
        """Pad like the numpy reference: explicit pads plus what ceil_mode needs."""
        top, left, bottom, right = a["pads"]
        (kh, kw), (sh, sw), (oh, ow) = a["kernel"], a["strides"], a["out_hw"]
        bottom += max(0, (oh - 1) * sh + kh - (x.shape[2] + top + bottom))
        right += max(0, (ow - 1) * sw + kw - (x.shape[3] + left + right))
        return F.pad(x, (left, right, top, bottom), value=value)

    def avg_pool(x, a):
        ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype, device=x.device)
        if a["count_include_pad"]:
            top, left, bottom, right = a["pads"]
            ones = F.pad(ones, (left, right, top, bottom), value=1.0)
            mask = windows_padded(ones, {**a, "pads": (0, 0, 0, 0)}, 0.0)
        else:
            mask = windows_padded(ones, a, 0.0)
        k, s = a["kernel"], a["strides"]
        total = F.avg_pool2d(windows_padded(x, a, 0.0), k, s, divisor_override=1)
        return total / F.avg_pool2d(mask, k, s, divisor_override=1)

    def layer_norm(x, scale, bias=None, *, axis, epsilon):
        # F.layer_norm, as nn.LayerNorm calls it (its ONNX export is LayerNormalization)
        norm = tuple(x.shape[axis % x.dim() :])
        scale = scale.expand(norm)
        return F.layer_norm(x, norm, scale, None if bias is None else bias.expand(norm), epsilon)

    def strided_slice(x, index):
        for dim, (start, stop, step) in enumerate(index):
            picks = list(range(start, -1 if stop is None else stop, step))
            picked = torch.tensor(picks, dtype=torch.long, device=x.device)
            x = torch.index_select(x, dim, picked)
        return x

    def gather(data, idx, axis):
        flat = torch.remainder(idx.reshape(-1), data.shape[axis])
        out = torch.index_select(data, axis, flat)
        return out.reshape(*data.shape[:axis], *idx.shape, *data.shape[axis + 1 :])

    def reduce(fn):
        return lambda x, axes, keepdims: fn(x, dim=axes, keepdim=keepdims) if axes else x

    def prod(x, axes, keepdims):
        for axis in sorted(axes, reverse=True):
            x = torch.prod(x, dim=axis, keepdim=keepdims)
        return x

    def matmul(a, b, transpose_a, transpose_b):
        a = a.transpose(-1, -2) if transpose_a and a.dim() >= 2 else a
        b = b.transpose(-1, -2) if transpose_b and b.dim() >= 2 else b
        return torch.matmul(a, b)

    def conv2d(x, w, b=None, *, strides, pads, dilations, groups):
        # symmetric pads as the conv's own (exported as Conv pads, as a torch model writes
        # it); an explicit F.pad exports through TorchScript as a shape-computing Pad chain
        # that onnxruntime runs on every call (the dynamo exporter folds it), which made the
        # TorchScript file's onnxruntime figure unfairly slow (commit 18f0956)
        top, left, bottom, right = pads
        if (top, left) != (bottom, right):
            x, (top, left) = F.pad(x, (left, right, top, bottom)), (0, 0)
        return F.conv2d(
            x, w, b, stride=strides, padding=(top, left), dilation=dilations, groups=groups
        )

    def div(a, b):
        return torch.div(a, b, rounding_mode=None if a.is_floating_point() else "trunc")

    def pad(x, pads, value):
        rank = x.dim()
        flat = [p for i in reversed(range(rank)) for p in (pads[i], pads[i + rank])]
        return F.pad(x, flat, value=value)

    dtype_of = {
        "float32": torch.float32,
        "float64": torch.float64,
        "int64": torch.int64,
        "int32": torch.int32,
        "int8": torch.int8,
        "bool": torch.bool,
    }
    compares = {
        "eq": torch.eq,
        "ne": torch.ne,
        "lt": torch.lt,
        "le": torch.le,
        "gt": torch.gt,
        "ge": torch.ge,
    }
    fns: dict[str, Callable] = {
        "graph.neg": torch.neg,
        "graph.abs": torch.abs,
        "graph.exp": torch.exp,
        "graph.log": torch.log,
        "graph.sqrt": torch.sqrt,
        "graph.rsqrt": torch.rsqrt,
        "graph.tanh": torch.tanh,
        "graph.sigmoid": torch.sigmoid,
        "graph.erf": torch.erf,
        "graph.relu": F.relu,
        "graph.gelu": lambda x, approximate: F.gelu(x, approximate=approximate),
        "graph.leaky_relu": lambda x, alpha: F.leaky_relu(x, alpha),
        "graph.clip": lambda x, min, max: torch.clamp(  # noqa: A006
            x, None if math.isinf(min) else min, None if math.isinf(max) else max
        ),
        "graph.cast": lambda x, to: x.to(dtype_of[to]),
        "graph.add": torch.add,
        "graph.sub": torch.sub,
        "graph.mul": torch.mul,
        "graph.div": div,
        "graph.max": torch.maximum,
        "graph.min": torch.minimum,
        "graph.pow": torch.pow,
        "graph.prelu": lambda x, s: torch.where(x > 0, x, s * x),
        "graph.where": torch.where,
        "graph.compare": lambda a, b, predicate: compares[predicate](a, b),
        "graph.matmul": matmul,
        "graph.linear": lambda x, w, b=None: F.linear(x, w, None if b is None else b.reshape(-1)),
        "graph.conv2d": conv2d,
        "graph.max_pool2d": lambda x, **a: F.max_pool2d(
            windows_padded(x, a, -math.inf), a["kernel"], a["strides"]
        ),
        "graph.avg_pool2d": lambda x, **a: avg_pool(x, a),
        "graph.global_avg_pool": lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True),
        "graph.batch_norm": lambda x, s, b, m, v, epsilon: F.batch_norm(
            x, m, v, s, b, training=False, eps=epsilon
        ),
        "graph.layer_norm": layer_norm,
        "graph.softmax": lambda x, axis: F.softmax(x, dim=axis),
        "graph.log_softmax": lambda x, axis: F.log_softmax(x, dim=axis),
        "graph.reduce_sum": reduce(torch.sum),
        "graph.reduce_mean": reduce(torch.mean),
        "graph.reduce_max": reduce(torch.amax),
        "graph.reduce_min": reduce(torch.amin),
        "graph.reduce_prod": prod,
        "graph.reshape": lambda x, shape: x.reshape(shape),
        "graph.transpose": lambda x, perm: x.permute(perm),
        "graph.concat": lambda *xs, axis: torch.cat(xs, dim=axis),
        "graph.slice": strided_slice,
        "graph.pad": pad,
        "graph.broadcast": lambda x, shape: x.expand(shape).contiguous(),
        "graph.gather": gather,
    }

    def run_block(block, env):
        for op in block.ops:
            if op.name in ("func.return", "graph.yield"):
                return [env[v] for v in op.operands]
            args = [env[v] for v in op.operands]
            if isinstance(op, g.ParamOp):
                out = params[op.pname]
            elif isinstance(op, g.ConstantOp):  # (made on the device once)
                if op not in constants:
                    constants[op] = torch.from_numpy(op.to_numpy().copy()).to(device)
                out = constants[op]
            elif isinstance(op, g.FusedOp):
                (out,) = run_block(op.body.block, dict(zip(op.body.block.args, args)))
            else:
                out = fns[op.name](*args, **ref.kernel_args(op))
            env[op.results[0]] = out
        raise AssertionError("block without terminator")

    func = ref.main_func(module)
    params = {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in weights.items()}
    constants: dict = {}

    class Interpreted(torch.nn.Module):
        def forward(self, *inputs):
            outs = run_block(func.body.block, dict(zip(func.args, inputs)))
            return outs[0] if len(outs) == 1 else tuple(outs)

    return Interpreted().eval()


def torch_runner(model: api.Model):
    import torch

    net = torch_model(model.module, api.check_weights(model))

    def run(inputs):
        with torch.no_grad():
            out = net(*(torch.from_numpy(x) for x in inputs))
        return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]

    return net, run


# ---------------------------------------------------------------- ONNX export


def onnx_from_torch(model: api.Model, inputs, path: Path):
    """The torch interpreter traced and exported (TorchScript exporter: the dynamo one
    needs onnxscript)."""
    import warnings

    import torch

    net, _ = torch_runner(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and exporter deprecation chatter
        torch.onnx.export(
            net,
            tuple(torch.from_numpy(x) for x in inputs),
            str(path),
            opset_version=18,
            dynamo=False,
        )


def pool_divisor(a: dict) -> np.ndarray:
    """Per output cell, how many window cells avg_pool2d divides by (as the reference)."""
    ones = np.ones((1, 1, *a["in_shape"][2:]), np.float32)
    k, s, out_hw = a["kernel"], a["strides"], a["out_hw"]
    if a["count_include_pad"]:
        mask = ref._pad_hw(ref._pad_hw(ones, a["pads"], 1), (0, 0, 0, 0), 0, out_hw, k, s)
    else:
        mask = ref._pad_hw(ones, a["pads"], 0, out_hw, k, s)
    count = np.zeros((1, 1, *out_hw), np.float32)
    for _, _, window in ref._windows(mask, k[0], k[1], s, (1, 1), out_hw):
        count += window
    return count


def onnx_from_graph(model: api.Model, path: Path) -> None:
    """Export graph IR op by op with onnx.helper (opset 20)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, names, counter = [], [], {}, [0]

    def fresh(hint="t"):
        counter[0] += 1
        return f"{hint}_{counter[0]}"

    def const(array, hint="c"):
        name = fresh(hint)
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(kind, inputs, **attrs):
        out = fresh(kind.lower())
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def pool_input(x, a, value):
        top, left, bottom, right = a["pads"]
        (kh, kw), (sh, sw), (oh, ow) = a["kernel"], a["strides"], a["out_hw"]
        shape = a["in_shape"]
        bottom += max(0, (oh - 1) * sh + kh - (shape[2] + top + bottom))
        right += max(0, (ow - 1) * sw + kw - (shape[3] + left + right))
        return node(
            "Pad",
            [
                x,
                const(np.array([0, 0, top, left, 0, 0, bottom, right])),
                const(np.array(value, np.float32)),
            ],
        )

    onnx_dtype = {
        "float32": TensorProto.FLOAT,
        "float64": TensorProto.DOUBLE,
        "int64": TensorProto.INT64,
        "int32": TensorProto.INT32,
        "int8": TensorProto.INT8,
        "bool": TensorProto.BOOL,
    }
    unary = {
        "graph.neg": "Neg",
        "graph.abs": "Abs",
        "graph.exp": "Exp",
        "graph.log": "Log",
        "graph.sqrt": "Sqrt",
        "graph.tanh": "Tanh",
        "graph.sigmoid": "Sigmoid",
        "graph.erf": "Erf",
        "graph.relu": "Relu",
        "graph.global_avg_pool": "GlobalAveragePool",
    }
    binary = {
        "graph.add": "Add",
        "graph.sub": "Sub",
        "graph.mul": "Mul",
        "graph.div": "Div",
        "graph.max": "Max",
        "graph.min": "Min",
        "graph.pow": "Pow",
        "graph.where": "Where",
    }
    compares = {
        "eq": "Equal",
        "lt": "Less",
        "le": "LessOrEqual",
        "gt": "Greater",
        "ge": "GreaterOrEqual",
    }
    reduces = {
        "graph.reduce_sum": "ReduceSum",
        "graph.reduce_mean": "ReduceMean",
        "graph.reduce_max": "ReduceMax",
        "graph.reduce_min": "ReduceMin",
        "graph.reduce_prod": "ReduceProd",
    }

    def lower(op, x: list[str]) -> str:
        a = ref.kernel_args(op) if isinstance(op, g.GraphOp) else {}
        kind = op.name
        if kind in unary:
            return node(unary[kind], x)
        if kind in binary:
            return node(binary[kind], x)
        if kind == "graph.rsqrt":
            return node("Reciprocal", [node("Sqrt", x)])
        if kind == "graph.gelu":
            return node("Gelu", x, approximate=a["approximate"])
        if kind == "graph.leaky_relu":
            return node("LeakyRelu", x, alpha=a["alpha"])
        if kind == "graph.clip":
            lo, hi = (np.array(a[k], np.float32) for k in ("min", "max"))
            return node("Clip", [x[0], const(lo), const(hi)])
        if kind == "graph.cast":
            return node("Cast", x, to=onnx_dtype[a["to"]])
        if kind == "graph.prelu":
            zero = const(np.array(0, np.float32))
            return node("Where", [node("Greater", [x[0], zero]), x[0], node("Mul", x[::-1])])
        if kind == "graph.compare":
            if a["predicate"] == "ne":
                return node("Not", [node("Equal", x)])
            return node(compares[a["predicate"]], x)
        if kind == "graph.matmul":
            lhs, rhs = x
            ranks = [len(s) for s in op.in_shapes]
            if a["transpose_a"] and ranks[0] >= 2:
                lhs = node(
                    "Transpose", [lhs], perm=[*range(ranks[0] - 2), ranks[0] - 1, ranks[0] - 2]
                )
            if a["transpose_b"] and ranks[1] >= 2:
                rhs = node(
                    "Transpose", [rhs], perm=[*range(ranks[1] - 2), ranks[1] - 1, ranks[1] - 2]
                )
            return node("MatMul", [lhs, rhs])
        if kind == "graph.linear":
            y = node("MatMul", [x[0], node("Transpose", [x[1]], perm=[1, 0])])
            return (
                y
                if len(x) == 2
                else node("Add", [y, node("Reshape", [x[2], const(np.array([-1]))])])
            )
        if kind == "graph.conv2d":
            return node(
                "Conv",
                x,
                strides=list(a["strides"]),
                pads=list(a["pads"]),
                dilations=list(a["dilations"]),
                group=a["groups"],
            )
        if kind == "graph.max_pool2d":
            a["in_shape"] = op.in_shapes[0]
            return node(
                "MaxPool",
                [pool_input(x[0], a, -np.inf)],
                kernel_shape=list(a["kernel"]),
                strides=list(a["strides"]),
            )
        if kind == "graph.avg_pool2d":
            a["in_shape"] = op.in_shapes[0]
            # AveragePool over the explicitly padded input divides by kh * kw; the
            # reference's divisor (cells in the input, or in input + pads) is static
            total = node(
                "AveragePool",
                [pool_input(x[0], a, 0.0)],
                kernel_shape=list(a["kernel"]),
                strides=list(a["strides"]),
            )
            area = np.float32(a["kernel"][0] * a["kernel"][1])
            return node("Div", [node("Mul", [total, const(area)]), const(pool_divisor(a))])
        if kind == "graph.batch_norm":
            return node("BatchNormalization", x, epsilon=a["epsilon"])
        if kind == "graph.layer_norm":
            axes = const(
                np.array(list(range(a["axis"] % len(op.in_shapes[0]), len(op.in_shapes[0]))))
            )
            d = node("Sub", [x[0], node("ReduceMean", [x[0], axes])])
            var = node("ReduceMean", [node("Mul", [d, d]), axes])
            eps = const(np.array(a["epsilon"], np.float32))
            y = node("Mul", [node("Div", [d, node("Sqrt", [node("Add", [var, eps])])]), x[1]])
            return y if len(x) == 2 else node("Add", [y, x[2]])
        if kind in ("graph.softmax", "graph.log_softmax"):
            return node("Softmax" if kind == "graph.softmax" else "LogSoftmax", x, axis=a["axis"])
        if kind in reduces:
            return node(
                reduces[kind],
                [x[0], const(np.array(a["axes"], np.int64))],
                keepdims=int(a["keepdims"]),
            )
        if kind == "graph.reshape":
            return node("Reshape", [x[0], const(np.array(a["shape"], np.int64))])
        if kind == "graph.transpose":
            return node("Transpose", x, perm=list(a["perm"]))
        if kind == "graph.concat":
            return node("Concat", x, axis=a["axis"])
        if kind == "graph.slice":
            index = a["index"]
            starts = [s for s, _, _ in index]
            ends = [np.iinfo(np.int64).min if e is None else e for _, e, _ in index]
            steps = [st for _, _, st in index]
            return node(
                "Slice",
                [
                    x[0],
                    const(np.array(starts)),
                    const(np.array(ends)),
                    const(np.arange(len(index))),
                    const(np.array(steps)),
                ],
            )
        if kind == "graph.pad":
            return node(
                "Pad",
                [
                    x[0],
                    const(np.array(a["pads"], np.int64)),
                    const(np.array(a["value"], np.float32)),
                ],
            )
        if kind == "graph.broadcast":
            return node("Expand", [x[0], const(np.array(a["shape"], np.int64))])
        if kind == "graph.gather":
            return node("Gather", x, axis=a["axis"])
        raise NotImplementedError(kind)

    def run_block(block, env):
        for op in block.ops:
            if op.name in ("func.return", "graph.yield"):
                return [env[v] for v in op.operands]
            x = [env[v] for v in op.operands]
            if isinstance(op, g.ParamOp):
                out = const(weights[op.pname], "param")
            elif isinstance(op, g.ConstantOp):
                out = const(op.to_numpy(), "const")
            elif isinstance(op, g.FusedOp):
                (out,) = run_block(op.body.block, dict(zip(op.body.block.args, x)))
            else:
                out = lower(op, x)
            env[op.results[0]] = out
        raise AssertionError("block without terminator")

    weights = api.check_weights(model)
    func = ref.main_func(model.module)
    value_info = []
    for i, arg in enumerate(func.args):
        names[arg] = f"input_{i}"
        dtype = onnx_dtype[ref.result_dtype(arg).name]
        value_info.append(helper.make_tensor_value_info(names[arg], dtype, g.shape_of(arg)))
    outs = run_block(func.body.block, dict(names))
    outputs = []
    for i, (name, value) in enumerate(zip(outs, func.body.block.last_op.operands)):
        final = f"output_{i}"
        nodes.append(helper.make_node("Identity", [name], [final]))
        dtype = onnx_dtype[ref.result_dtype(value).name]
        outputs.append(helper.make_tensor_value_info(final, dtype, g.shape_of(value)))
    graph_proto = helper.make_graph(nodes, model.name, value_info, outputs, inits)
    proto = helper.make_model(
        graph_proto, opset_imports=[helper.make_opsetid("", 20)], ir_version=10
    )
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))


def ort_runner(model: api.Model, inputs, tmp: Path, export: str):
    import onnxruntime as ort

    path = tmp / f"{model.name}.onnx"
    if export == "torch":
        onnx_from_torch(model, inputs, path)
    else:
        onnx_from_graph(model, path)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda xs: session.run(None, dict(zip(names, xs)))


# ------------------------------------------------------------------------- main


def have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def measure(make: Callable, inputs, expected, repeat: int, warmup: int) -> str:
    """Median ms of one backend, "n/a" when it is not installed, "wrong" when its
    outputs differ from the reference."""
    try:
        run = make()
    except ImportError:
        return "n/a"
    outs = run(inputs)
    for out, want in zip(outs, expected):
        if not np.allclose(np.asarray(out, np.float64), want, rtol=1e-3, atol=1e-4):
            return "wrong"
    return f"{median_ms(lambda: run(inputs), repeat, warmup):.3f}"


def bench_models(
    paths: list[Path], levels: list[int], repeat: int, warmup: int, tmp: Path, export: str
) -> list[list[str]]:
    """One row per model. Backend by backend over all models, dlpc's first: importing
    torch loads its own OpenMP runtime, which then competes with the C backend's."""
    models = [api.load(path, batch=1) for path in paths]  # (.dlpc: static, at batch 1)
    inputs = [api.random_inputs(model, seed=0) for model in models]
    expected = [api.reference(model, xs) for model, xs in zip(models, inputs)]

    kernels: dict[tuple[str, int], int] = {}

    def dlpc_target(target, opt_level):
        def make(model, xs):
            compiled = api.compile(model, target=target, opt_level=opt_level)
            kernels[model.name, opt_level] = pipeline.stats(compiled.lowered)[1]
            return lambda xs: compiled(*xs)  # the call a user makes (inputs checked)

        return make

    backends = [
        dlpc_target("numpy", max(levels)),
        *(dlpc_target("c", level) for level in levels),
        lambda model, xs: torch_runner(model)[1],
        lambda model, xs: ort_runner(model, xs, tmp, export),
    ]
    rows = [[model.name] for model in models]
    bar = progress(total=len(backends) * len(models), desc="bench", unit="run")
    with bar:
        for make in backends:
            for row, model, xs, want in zip(rows, models, inputs, expected):
                row.append(
                    measure(
                        lambda make=make, model=model, xs=xs: make(model, xs),
                        xs,
                        want,
                        repeat,
                        warmup,
                    )
                )
                bar.update()
    for row, model in zip(rows, models):  # C kernels (loop.kernel count) per level
        row.extend(str(kernels.get((model.name, level), "?")) for level in levels)
    return rows


INT8_EXAMPLES = ("mlp", "lenet")


def bench_int8(
    names: list[str],
    levels: list[int],
    repeat: int,
    warmup: int,
    tmp: Path,
    batch: int = 1,
    threads: int | None = None,
) -> list[list[str]]:
    """A row "<name> int8" per example of INT8_EXAMPLES in `names`: its int8 QDQ file
    (int8_models.py, exported at `batch`) run by dlpc (numpy, C at each level) and
    onnxruntime (`threads` intra-op threads, as OMP_NUM_THREADS for dlpc; inter-op 1);
    torch n/a. The runners are timed in turn, in blocks of calls (`_int8_ms`)."""
    names = [n for n in names if n in INT8_EXAMPLES]
    if not names or not have("onnxruntime"):
        return []
    import onnxruntime as ort

    int8_model = bench_module("int8_models").int8_model

    rows = []
    for name in names:
        where = tmp / f"int8_b{batch}"
        where.mkdir(exist_ok=True)
        path = int8_model(name, where, batch=batch)
        model = api.load(path)
        inputs = api.random_inputs(model, seed=0)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        if threads and threads > 1:
            # its pool would spin between calls and keep the cores from dlpc's team in the
            # same process
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feed = dict(zip([i.name for i in session.get_inputs()], inputs))
        want = session.run(None, feed)
        runs, kernels = [], []
        for target, level in [("numpy", max(levels)), *(("c", lv) for lv in levels)]:
            compiled = api.compile(model, target=target, opt_level=level)
            runs.append(lambda c=compiled, xs=inputs: c(*xs))
            if target == "c":
                kernels.append(str(pipeline.stats(compiled.lowered)[1]))
        runs.append(lambda s=session, f=feed: s.run(None, f))
        times = _int8_ms(runs, want, repeat, warmup)
        rows.append([f"{name} int8", *times[:-1], "n/a", times[-1], *kernels])
    return rows


def _int8_ms(runs: list[Callable[[], object]], want: list, repeat: int, warmup: int) -> list[str]:
    """Median ms of each of `runs`, timed in turn in blocks of calls (all see the same
    load), or "wrong" for one whose output is more than one quantum (the smallest step
    between onnxruntime's output values) from onnxruntime's."""
    ok = []
    for run in runs:
        outs = run()
        assert isinstance(outs, list | tuple)
        ok.append(
            all(
                np.abs(np.asarray(out) - w).max()
                <= np.min(np.diff(np.unique(w)), initial=np.inf) * 1.001
                for out, w in zip(outs, want)
            )
        )
    times: list[list[float]] = [[] for _ in runs]
    blocks = max(1, min(10, repeat // 5))
    for b in range(blocks):  # blocks of calls in turn: a thread team stays awake in its
        # block (one woken after another runner's calls waited for a loaded core: ms)
        for run, t in zip(runs, times):
            for _ in range(max(1, warmup)):
                run()
            for _ in range(repeat // blocks + (b < repeat % blocks)):
                start = time.perf_counter()
                run()
                t.append(time.perf_counter() - start)
    return [f"{np.median(t) * 1e3:.3f}" if good else "wrong" for good, t in zip(ok, times)]


# ------------------------------------------------- batches x threads (issue #11)
#
# Every figure of the --batches table comes from its own fresh Python process (a
# "worker": `python bench/models.py --worker RUNNER CASE_DIR NAME BATCH THREADS ...`),
# started by the parent one after the other, never two at once. A worker imports only its
# runner's library, so exactly one thread pool exists in it: libgomp's for dlpc C
# (OMP_NUM_THREADS = threads), onnxruntime's intra-op pool (intra_op_num_threads =
# threads, inter_op 1) or torch's (set_num_threads(threads), set_num_interop_threads(1)).
# Before, all runners shared one process: torch's OpenMP runtime and onnxruntime's
# spinning pool stayed alive next to dlpc's libgomp and the 2-thread medians of whoever
# ran later waited behind their threads on this 2-core machine.

RUNNERS = ("dlpc", "ort", "torch")


def onnx_exports(model: api.Model, inputs, case: Path, kinds: list[str]) -> dict[str, Path]:
    """The model as ONNX files in `case`: "ts" (torch.onnx, TorchScript exporter,
    dynamo=False), "dyn" (torch.onnx with dynamo=True, opset 18) and "graph" (onnx.helper,
    op by op); a kind whose exporter fails is left out (its columns print "-")."""
    import contextlib
    import io
    import logging
    import warnings

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # (torchvision not installed)
    paths = {}
    for kind in kinds:
        path = case / f"{model.name}-{kind}.onnx"
        try:
            if kind == "graph":
                onnx_from_graph(model, path)
            else:
                import torch

                net, _ = torch_runner(model)
                args = tuple(torch.from_numpy(x) for x in inputs)
                with (
                    warnings.catch_warnings(),
                    contextlib.redirect_stdout(io.StringIO()),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    warnings.simplefilter("ignore")  # tracer and exporter chatter
                    torch.onnx.export(net, args, str(path), opset_version=18, dynamo=kind == "dyn")
        except Exception as e:  # noqa: BLE001 (an exporter's failure is a table cell)
            print(f"note: {kind} export of {model.name} failed: {type(e).__name__}: {e}")
            continue
        paths[kind] = path
    return paths


def _memory_baseline() -> int:
    """Reset this process's peak resident set to its current one (Linux: "5" to
    /proc/self/clear_refs) and return the current one, KB. (Not ru_maxrss: a process
    started by exec inherits its parent's high-water mark there.)"""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_kb("VmRSS")


def _status_kb(key: str) -> int:
    """A field of /proc/self/status in KB (VmRSS: resident now, VmHWM: its peak); 0
    where there is no /proc."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def worker(argv: list[str]) -> int:
    """One runner on one case in this fresh process; prints one JSON line:
    {"ms": median ms | "wrong" | "n/a", "peak_kb", "held_kb", "kernels"}.

    Memory, as a user sees it: the process first imports the runner's library (dlpc's
    runtime modules; onnxruntime; torch) and loads the inputs: that is the baseline. Then
    it loads the model, compiles it or creates the session, and runs it once. `peak_kb`
    is the peak resident set since the baseline (VmHWM, reset at the baseline) minus the
    baseline's resident set: the high-water mark of loading, compiling and the first run;
    `held_kb` is the resident set after the first run minus the baseline's (what stays:
    weights, code, arenas)."""
    import gc
    import json

    runner, case_dir, name, batch, threads, source = argv[:6]
    cold = False
    repeat, warmup = int(argv[6]), int(argv[7])
    case = Path(case_dir)
    data = np.load(case / "io.npz")
    inputs = [data[k] for k in sorted(data.files) if k.startswith("x")]
    expected = [data[k] for k in sorted(data.files) if k.startswith("y")]
    if runner == "dlpc":
        from dlpc.backends.runtime import artifact, cbuild  # noqa: F401 (the baseline)

        base = _memory_baseline()
        if source == "dlpc":
            model = api.load(example_path(name, case.parent), batch=int(batch))
        else:
            model = api.load(case / f"{name}-{source}.onnx")
        compiled = api.compile(model, target="c")
        cold = not compiled.cached  # the parent's compile left no warm entry: files changed
        run = lambda xs: compiled(*xs)  # noqa: E731 - the call a user makes (inputs checked)
    elif runner == "ort":
        import onnxruntime as ort

        base = _memory_baseline()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        path = str(case / f"{name}-{source}.onnx")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        run = lambda xs: session.run(None, dict(zip(names, xs)))  # noqa: E731
    else:
        import torch

        torch.set_num_threads(int(threads))
        torch.set_num_interop_threads(1)
        model = api.load(example_path(name, case.parent), batch=int(batch))
        base = _memory_baseline()  # (after the weights are loaded: the figure is torch's own)
        run = torch_runner(model)[1]
    outs = run(inputs)
    gc.collect()
    peak, held = _status_kb("VmHWM"), _status_kb("VmRSS")
    result = {"peak_kb": peak - base, "held_kb": held - base, "cold": cold}
    ok = all(
        np.allclose(np.asarray(o, np.float64), w, rtol=1e-3, atol=1e-4)
        for o, w in zip(outs, expected)
    )
    result["ms"] = median_ms(lambda: run(inputs), repeat, warmup) if ok else "wrong"
    print(json.dumps(result))
    return 0


@functools.cache
def bench_module(name: str):
    """bench/<name>.py loaded by path: this file also runs as a module of another name
    (the tests load it by path), where bench/ need not be on sys.path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", Path(__file__).with_name(f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_module():
    """bench/peak.py: the FMA peak, a graph's FLOPs."""
    return bench_module("peak")


def peak_worker(argv: list[str]) -> int:
    """The FMA peak of a team of argv[0] threads in this fresh process (as a dlpc worker
    runs: libgomp loaded the way dlpc loads it); prints {"on_core", "wall"} in GFLOP/s."""
    import json

    result = peak_module().measure(int(argv[0]))
    print(json.dumps({"on_core": result.on_core, "wall": result.wall}))
    return 0


def run_worker(
    args: list[str], threads: int, wait_policy: str | None = None, mode: str = "--worker"
) -> dict:
    """A worker's JSON result; {"ms": "fail"} (and its last stderr line) when it failed.
    `mode` "--peak-worker": the FMA peak of a team of `threads` (`peak_worker`)."""
    import json
    import subprocess

    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # each library's own default (dlpc's runtime a short spin unless the user chose; torch's
    # libgomp spins a while, then sleeps), unless --omp-wait-policy chooses for all
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)  # (this process's dlpc runtime set it: it overrides a policy)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    cmd = [sys.executable, str(Path(__file__).resolve()), mode, *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    err = (done.stderr.strip().splitlines() or ["?"])[-1]
    print(f"note: worker {' '.join(args[:6])} failed: {err}", file=sys.stderr)
    return {"ms": "fail"}


def merge_round(into: dict, result: dict) -> None:
    """Fold one round's worker result into a runner's: "ms" becomes the smallest of the
    rounds' medians (load from elsewhere on a shared machine only ever adds time: a
    spinning pool of someone else's job turned one 2-thread median of torch from 0.5 ms
    into 54 ms; the least disturbed round is the runner's own figure); a round that
    failed or was wrong wins (it is shown); memory is the first round's."""
    times = into.setdefault("rounds", [])
    if isinstance(result["ms"], float):
        times.append(result["ms"])
    if not isinstance(into.get("ms"), str):
        into["ms"] = min(times) if times else result["ms"]
    for key in ("peak_kb", "held_kb", "cold"):
        if key in result and key not in into:
            into[key] = result[key]


def case_rows(
    name: str,
    b: int,
    threads: list[int],
    kinds: list[str],
    plan: list[tuple[str, str]],
    got: dict[tuple[str, str, int], dict],
    stats: dict[str, tuple[str, str, str]],
    flops: tuple[int | None, int | None] = (None, None),
    peaks: dict[int, float] | None = None,
) -> tuple[list[list[str]], list[str]]:
    """One case's latency rows (one per thread count) and its memory row. `flops`: the
    model's FLOPs per call and those of the graph dlpc runs (bench/peak.py's
    program_flops); `peaks`: the FMA peak per thread count, GFLOP/s. They give the last
    columns: the FLOPs, the bound (dlpc's FLOPs at the peak, ms) and the share of the
    peak that dlpc on the .dlpc and onnxruntime on the first export reach."""

    def ms(runner, src, t):
        value = got.get((runner, src, t), {"ms": "n/a"})["ms"]
        return f"{value:.3f}" if isinstance(value, float) else value

    def ratio(a, b):
        try:
            return f"{float(a) / float(b):.2f}"
        except (ValueError, ZeroDivisionError):
            return "-"

    rows = []
    for t in threads:
        ort0 = ms("ort", kinds[0], t)
        row = [name, str(b), str(t), ms("dlpc", "dlpc", t), ort0, ms("torch", "dlpc", t)]
        row.append(ratio(row[3], ort0))
        for k in kinds:
            d, o = ms("dlpc", k, t), ms("ort", k, t)
            row += [d, o, ratio(d, o)]
        row.append("/".join(stats.get(s, ("-",))[0] for s in ["dlpc", *kinds]))
        row += peak_columns(flops, (peaks or {}).get(t), row[3], ort0)
        rows.append(row)

    def mb(result, key):
        value = result.get(key)
        return "-" if value is None else f"{value / 1024:.1f}"

    mem = [name, str(b), *stats.get("dlpc", ("", "-", "-"))[1:]]
    for runner, src in plan:
        if runner != "torch":
            result = got[runner, src, threads[0]]
            cold = "*" if result.get("cold") else ""
            mem.append(f"{mb(result, 'peak_kb')}/{mb(result, 'held_kb')}{cold}")
    return rows, mem


def peak_columns(
    flops: tuple[int | None, int | None], peak: float | None, dlpc_ms: str, ort_ms: str
) -> list[str]:
    """[MFLOP, bound ms, dlpc % of peak, onnxruntime % of peak] of one row: the model's
    MFLOP per call ("model/dlpc" where the -O2 graph multiplies less: Winograd); the
    bound, dlpc's FLOPs at the FMA `peak` (GFLOP/s); each runner's FLOPs (dlpc: its -O2
    graph's, onnxruntime: the model's) over its time, as a share of the peak."""
    model, ran = flops
    if model is None or ran is None:
        return ["-", "-", "-", "-"]
    mflop = f"{model / 1e6:.2f}" + ("" if ran == model else f"/{ran / 1e6:.2f}")
    if not peak:
        return [mflop, "-", "-", "-"]

    def share(count: int, ms: str) -> str:
        try:
            return f"{100 * count / peak / 1e6 / float(ms):.0f}"
        except (ValueError, ZeroDivisionError):
            return "-"

    return [mflop, f"{ran / peak / 1e6:.3f}", share(ran, dlpc_ms), share(model, ort_ms)]


def bench_batches(
    names: list[str],
    batches: list[int],
    threads: list[int],
    repeat: int,
    warmup: int,
    tmp: Path,
    kinds: list[str],
    with_torch: bool,
    rounds: int = 1,
    wait_policy: str | None = None,
) -> tuple[list[list[str]], list[list[str]]]:
    """The latency rows, one per (model, batch, threads), and the memory rows, one per
    (model, batch) (at the first thread count).

    For each case this process draws the inputs (seed 0), computes the reference outputs,
    writes the ONNX exports (`kinds`) and compiles the .dlpc model and every export with
    dlpc.compile(target="c"): that prints the kernel counts and memory plans, and leaves
    the compiled artifacts in dlpc's warm cache, so the workers time (and measure the
    memory of) what a warm `dlpc.load` + `dlpc.compile` gives a user. Then the workers
    run, for one case after the other: dlpc on the .dlpc, dlpc and onnxruntime on each
    export, torch eager; at each thread count; `rounds` times over (a figure is the
    smallest of its rounds' medians, so a burst of load from elsewhere that hits one
    runner's round does not decide its figure)."""
    cases = [(name, b) for name in names for b in batches]
    # the FMA peak per thread count: each worker's best on-core figure (bench/peak.py)
    peaks: dict[int, float] = {}
    for _ in range(rounds):
        for t in threads:
            value = run_worker([str(t)], t, wait_policy, "--peak-worker").get("on_core")
            if isinstance(value, float):
                peaks[t] = max(peaks.get(t, 0.0), value)
    sources = ["dlpc", *kinds]
    plan: list[tuple[str, str]] = [("dlpc", s) for s in sources]
    plan += [("ort", k) for k in kinds] + ([("torch", "dlpc")] if with_torch else [])
    latency, memory = [], []
    steps = len(cases) * (1 + rounds * len(threads) * len(plan))
    bar = progress(total=steps, desc="bench", unit="run")
    with bar:
        for name, b in cases:
            case = tmp / f"{name}-{b}"
            case.mkdir()
            model = api.load(example_path(name, tmp), batch=b)
            xs = api.random_inputs(model, seed=0)
            ys = api.reference(model, xs)
            np.savez(
                case / "io.npz",
                **{f"x{i:02d}": x for i, x in enumerate(xs)},
                **{f"y{i:02d}": y for i, y in enumerate(ys)},
            )
            paths = onnx_exports(model, xs, case, kinds)
            flops = peak_module().program_flops(model)
            stats: dict[str, tuple[str, str, str]] = {}
            for src in sources:
                if src != "dlpc" and src not in paths:
                    continue
                try:
                    m = model if src == "dlpc" else api.load(paths[src])
                    lowered = api.compile(m, target="c").lowered
                except DlpcError as e:  # (its workers fail too: their cells say so)
                    print(f"note: dlpc on {name} batch {b} ({src}): {e}", file=sys.stderr)
                    stats[src] = ("fail", "-", "-")
                    continue
                arena, total = pipeline.memory_stats(lowered) or (0, 0)
                n = str(pipeline.stats(lowered)[1])
                stats[src] = (n, f"{arena / 1024:.1f}", f"{total / 1024:.1f}")
            bar.update()
            got: dict[tuple[str, str, int], dict] = {}
            for _ in range(rounds):  # interleaved: every runner once per round
                for t in threads:
                    for runner, src in plan:
                        if src != "dlpc" and src not in paths:
                            result = {"ms": "-"}
                        else:
                            args = [runner, str(case), name, str(b), str(t), src]
                            argv = [*args, str(repeat), str(warmup)]
                            result = run_worker(argv, t, wait_policy)
                        merge_round(got.setdefault((runner, src, t), {}), result)
                        bar.update()

            rows, mem = case_rows(name, b, threads, kinds, plan, got, stats, flops, peaks)
            latency += rows
            memory.append(mem)
    return latency, memory


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    if argv[:1] == ["--peak-worker"]:
        return peak_worker(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", help="comma-separated example names (default: all)")
    p.add_argument(
        "-O",
        dest="levels",
        default="2",
        help="optimisation levels for the C backend, comma-separated (e.g. 0,2)",
    )
    p.add_argument(
        "--threads", type=int, help="OMP_NUM_THREADS for the C backend (set before it loads)"
    )
    p.add_argument(
        "--onnx-from",
        choices=("torch", "graph"),
        help="how to make the ONNX model (default: torch if installed, else graph)",
    )
    p.add_argument(
        "--batches",
        help="the table of issue #11: every example at these batch sizes (e.g. 1,4,32) "
        "and --thread-counts, dlpc C against onnxruntime and torch with matching threads",
    )
    p.add_argument("--thread-counts", default="1,2", help="with --batches (default 1,2)")
    p.add_argument(
        "--int8-batch",
        type=int,
        default=1,
        help="batch of the int8 rows' files (default 1); onnxruntime gets --threads",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --batches: run every worker this many times, interleaved; print the "
        "smallest of the rounds' medians (default 1)",
    )
    p.add_argument(
        "--omp-wait-policy",
        choices=("ACTIVE", "PASSIVE"),
        help="with --batches: OMP_WAIT_POLICY for every worker (default: unset, each "
        "library's own: dlpc's runtime and torch's libgomp spin-then-sleep)",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="with --batches: also the memory table (arena, intermediates, each runner's "
        "peak and held resident memory)",
    )
    args = p.parse_args(argv)
    if args.batches:
        return batches_table(args)
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    export = args.onnx_from or ("torch" if have("torch") else "graph")
    names = example_names()
    if args.models:
        wanted = set(args.models.split(","))
        names = [n for n in names if n in wanted]
    try:
        levels = [int(level) for level in args.levels.split(",")]
        assert all(0 <= level <= 3 for level in levels)
    except (ValueError, AssertionError):
        p.error(f"-O expects levels 0-3 separated by commas, got '{args.levels}'")
    header = [
        "model",
        "numpy ref",
        *(f"dlpc C -O{level}" for level in levels),
        "torch",
        "onnxruntime",
        *(f"kernels -O{level}" for level in levels),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        paths = [example_path(n, Path(tmp)) for n in names]
        # the int8 rows first: bench_models imports torch, whose OpenMP threads would then
        # keep the cores from a 2-thread dlpc call
        int8 = bench_int8(
            names, levels, args.repeat, args.warmup, Path(tmp), args.int8_batch, args.threads
        )
        rows = [header, *bench_models(paths, levels, args.repeat, args.warmup, Path(tmp), export)]
        rows += int8
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(
        f"latency in ms, median of {args.repeat} runs after {args.warmup} warm-up runs; "
        f"onnxruntime runs the ONNX export of the {export} model"
    )
    for r in rows:
        print(r[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(r[1:], widths[1:])))
    return 0


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(r[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(r[1:], widths[1:])))


def batches_table(args) -> int:
    import importlib.util

    def found(module: str) -> bool:
        return importlib.util.find_spec(module) is not None

    if args.onnx_from == "graph" or not found("torch"):
        kinds = ["graph"]
    else:
        kinds = ["ts", "dyn"] if found("onnxscript") else ["ts"]
    if not found("onnxruntime"):
        print("note: onnxruntime is not installed: its columns print 'fail'")
    names = args.models.split(",") if args.models else example_names()
    batches = [int(b) for b in args.batches.split(",")]
    threads = [int(t) for t in args.thread_counts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        latency, memory = bench_batches(
            names,
            batches,
            threads,
            args.repeat,
            args.warmup,
            Path(tmp),
            kinds,
            found("torch"),
            args.rounds,
            args.omp_wait_policy,
        )
    label = {"ts": "ONNX ts", "dyn": "ONNX dyn", "graph": "ONNX graph"}
    header = ["model", "batch", "thr", "dlpc C", f"ort({kinds[0]})", "torch", "dlpc/ort"]
    for k in kinds:
        header += [f"{label[k]}: dlpc", "ort", "dlpc/ort"]
    header.append("kernels " + "/".join(["dlpc", *kinds]))
    header += ["MFLOP", "bound", "dlpc %pk", "ort %pk"]
    print(
        f"latency in ms, median of {args.repeat} runs after {args.warmup} warm-up runs "
        f"(the smallest of {args.rounds} interleaved rounds' medians), each runner in its own process "
        f"with `thr` threads (dlpc C: OMP_NUM_THREADS, OMP_WAIT_POLICY "
        f"{args.omp_wait_policy or 'as dlpc sets it: unset, GOMP_SPINCOUNT=10000'}; "
        f"onnxruntime: intra_op_num_threads, inter_op 1; torch eager: set_num_threads).\n"
        f"dlpc C runs the .dlpc example; 'ONNX ts'/'ONNX dyn': dlpc.load + dlpc.compile "
        f"(target c) of the torch.onnx export of the same model (TorchScript exporter "
        f"dynamo=False / dynamo=True, opset 18) and onnxruntime on that same file; the "
        f"first dlpc/ort divides dlpc C on the .dlpc by onnxruntime on the ts export. "
        f"dlpc.compile runs a per-sample batch whose intermediates outgrow 512 KB per "
        f"thread chunk after chunk (its batch_chunks; the kernels and the arena are one "
        f"chunk's).\n"
        f"MFLOP: 2 x the multiply-adds of the model's conv2d/linear/matmul per call "
        f"('model/dlpc' where dlpc's -O2 graph multiplies less: Winograd); bound: dlpc's "
        f"FLOPs at this CPU's FMA peak with `thr` threads (bench/peak.py, in a worker like "
        f"the others, best on-core figure of the rounds), ms, the least time a call can "
        f"take; %pk: the share of that peak a runner reaches (dlpc C on the .dlpc with "
        f"its -O2 FLOPs, onnxruntime on the {kinds[0]} export with the model's)"
    )
    print_table([header, *latency])
    if args.memory:
        header = ["model", "batch", "arena KB", "intermediates KB", "dlpc C"]
        header += [f"dlpc {k}" for k in kinds] + [f"ort {k}" for k in kinds]
        print(
            f"\nmemory at {threads[0]} thread(s): dlpc's arena (planned peak of the "
            f"intermediates) against the sum of its intermediates, KB; then per runner "
            f"'peak/held' in MB over a baseline of the same fresh process having imported "
            f"the runner's library and loaded the inputs: peak = the peak resident set "
            f"(VmHWM, reset at the baseline) of loading the model, compiling it (dlpc: a "
            f"warm compile) or creating the session and running once, minus the "
            f"baseline's resident set; held = resident set after "
            f"that run minus the baseline's (onnxruntime's Python API has no arena "
            f"statistics: OrtAllocator::GetStats is C API only); * marks a cold dlpc "
            f"compile (dlpc's sources changed after the parent compiled: the whole pipeline "
            f"ran in the worker and its peak counts it)"
        )
        print_table([header, *memory])
    return 0


if __name__ == "__main__":
    sys.exit(main())
