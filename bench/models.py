"""Latency of the example models on every backend; one run prints one table.

    python bench/models.py [--repeat 20] [--warmup 3] [--models mlp,lenet] [-O 0,2] [--threads N]
    python bench/models.py --batches 1,4,32 [--thread-counts 1,2]   # issue #11's table

Columns: dlpc's numpy reference (the emitted module), dlpc's C backend at each -O level
given (and its loop.kernel count there, the last columns), PyTorch (the
graph IR run op by op with torch.nn.functional) and onnxruntime. The onnxruntime model
is the torch model exported with torch.onnx when torch is installed, else (or with
`--onnx-from graph`) the graph IR exported op by op with onnx.helper. A backend that is not installed prints "n/a"; one
whose outputs differ from the numpy reference (rtol 1e-3, atol 1e-4) prints "wrong".
Each figure is the median wall time of `--repeat` calls after `--warmup` calls, in ms.
Inputs are drawn from seed 0; weights are the models' own. Nothing here gates CI.

On a shared or busy machine, thread pools waiting at barriers dominate the medians (tens
of ms for sub-ms models); single-threaded figures are the stable ones:

    OPENBLAS_NUM_THREADS=1 python bench/models.py --threads 1
"""

from __future__ import annotations

import argparse
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
from dlpc.diagnostics import progress
from dlpc.dialects import graph as g
from dlpc.passes import pipeline
from dlpc.reference import graph as ref

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


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


def torch_model(module, weights):
    """An nn.Module running @main op by op with torch / torch.nn.functional."""
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
        ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
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
        dims = tuple(range(axis % x.dim(), x.dim()))
        d = x - x.mean(dim=dims, keepdim=True)
        y = d / torch.sqrt((d * d).mean(dim=dims, keepdim=True) + epsilon) * scale
        return y if bias is None else y + bias

    def strided_slice(x, index):
        for dim, (start, stop, step) in enumerate(index):
            picks = list(range(start, -1 if stop is None else stop, step))
            x = torch.index_select(x, dim, torch.tensor(picks, dtype=torch.long))
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
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
        return F.conv2d(x, w, b, stride=strides, dilation=dilations, groups=groups)

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
            elif isinstance(op, g.ConstantOp):
                out = torch.from_numpy(op.to_numpy().copy())
            elif isinstance(op, g.FusedOp):
                (out,) = run_block(op.body.block, dict(zip(op.body.block.args, args)))
            else:
                out = fns[op.name](*args, **ref.kernel_args(op))
            env[op.results[0]] = out
        raise AssertionError("block without terminator")

    func = ref.main_func(module)
    params = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}

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
    models = [api.load(path) for path in paths]
    inputs = [api.random_inputs(model, seed=0) for model in models]
    expected = [api.reference(model, xs) for model, xs in zip(models, inputs)]

    kernels: dict[tuple[str, int], int] = {}

    def dlpc_target(target, opt_level):
        def make(model, xs):
            compiled = api.compile(model, target=target, opt_level=opt_level)
            kernels[model.name, opt_level] = pipeline.stats(compiled.lowered)[1]
            return compiled.runner

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


# ------------------------------------------------- batches x threads (issue #11)


def set_omp_threads(n: int) -> None:
    """The thread count of the C backend's OpenMP parallel loops from now on (libgomp's
    `omp_set_num_threads` for the calling thread, which is the one that calls dlpc_main)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("gomp") or "libgomp.so.1"
    ctypes.CDLL(name).omp_set_num_threads(n)


def ort_session(model: api.Model, inputs, tmp: Path, export: str, threads: int):
    import onnxruntime as ort

    path = tmp / f"{model.name}-{inputs[0].shape[0]}.onnx"
    if not path.exists():
        if export == "torch":
            onnx_from_torch(model, inputs, path)
        else:
            onnx_from_graph(model, path)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda xs: session.run(None, dict(zip(names, xs)))


def bench_batches(
    names: list[str],
    batches: list[int],
    threads: list[int],
    repeat: int,
    warmup: int,
    tmp: Path,
    export: str,
) -> list[list[str]]:
    """One row per (model, batch, threads): dlpc C, onnxruntime (same thread count),
    torch eager (same), dlpc/onnxruntime, and the C memory plan (arena and the sum of the
    intermediates, KB). Backend by backend over all rows, dlpc's first (torch's OpenMP
    runtime loads with torch)."""
    cases = [(name, b) for name in names for b in batches]
    models = {c: api.load(EXAMPLES / f"{c[0]}.dlpc", batch=c[1]) for c in cases}
    inputs = {c: api.random_inputs(m, seed=0) for c, m in models.items()}
    expected = {c: api.reference(m, inputs[c]) for c, m in models.items()}
    table: dict[tuple[str, int, int], dict[str, str]] = {
        (n, b, t): {} for n, b in cases for t in threads
    }
    bar = progress(total=3 * len(table), desc="bench", unit="run")
    with bar:
        compiled = {}
        for c, m in models.items():
            compiled[c] = api.compile(m, target="c")
            arena, total = pipeline.memory_stats(compiled[c].lowered) or (0, 0)
            for t in threads:
                table[(*c, t)]["arena"] = f"{arena / 1024:.1f}"
                table[(*c, t)]["sum"] = f"{total / 1024:.1f}"
        for t in threads:
            set_omp_threads(t)
            for c in cases:
                run = compiled[c].runner
                table[(*c, t)]["dlpc"] = measure(
                    lambda run=run: run, inputs[c], expected[c], repeat, warmup
                )
                bar.update()
        for t in threads:
            for c in cases:
                make = lambda c=c, t=t: ort_session(models[c], inputs[c], tmp, export, t)
                table[(*c, t)]["ort"] = measure(make, inputs[c], expected[c], repeat, warmup)
                bar.update()
        for t in threads:
            if have("torch"):
                import torch

                torch.set_num_threads(t)
            for c in cases:
                make = lambda c=c: torch_runner(models[c])[1]
                table[(*c, t)]["torch"] = measure(make, inputs[c], expected[c], repeat, warmup)
                bar.update()
    rows = []
    for (name, b, t), r in table.items():
        try:
            ratio = f"{float(r['dlpc']) / float(r['ort']):.2f}"
        except (ValueError, ZeroDivisionError):
            ratio = "-"
        rows.append(
            [name, str(b), str(t), r["dlpc"], r["ort"], r["torch"], ratio, r["arena"], r["sum"]]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
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
    args = p.parse_args(argv)
    if args.batches:
        return batches_table(args)
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    export = args.onnx_from or ("torch" if have("torch") else "graph")
    paths = sorted(EXAMPLES.glob("*.dlpc"))
    if args.models:
        wanted = set(args.models.split(","))
        paths = [q for q in paths if q.stem in wanted]
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
        rows = [header, *bench_models(paths, levels, args.repeat, args.warmup, Path(tmp), export)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(
        f"latency in ms, median of {args.repeat} runs after {args.warmup} warm-up runs; "
        f"onnxruntime runs the ONNX export of the {export} model"
    )
    for r in rows:
        print(r[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(r[1:], widths[1:])))
    return 0


def batches_table(args) -> int:
    import importlib.util

    # torch is imported only after dlpc's rows: its own OpenMP runtime, loaded first, kept
    # threads spinning that dlpc's 2-thread parallel loops then waited behind (medians in
    # multiples of the 4 ms scheduler tick); and every pool sleeps when idle
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    found = importlib.util.find_spec("torch") is not None
    export = args.onnx_from or ("torch" if found else "graph")
    names = (
        args.models.split(",") if args.models else sorted(q.stem for q in EXAMPLES.glob("*.dlpc"))
    )
    batches = [int(b) for b in args.batches.split(",")]
    threads = [int(t) for t in args.thread_counts.split(",")]
    header = ["model", "batch", "threads", "dlpc C", "onnxruntime", "torch", "dlpc/ort"]
    header += ["arena KB", "intermediates KB"]
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_batches(names, batches, threads, args.repeat, args.warmup, Path(tmp), export)
    rows = [header, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(
        f"latency in ms, median of {args.repeat} runs after {args.warmup} warm-up runs; "
        f"onnxruntime runs the ONNX export of the {export} model with intra_op threads = "
        f"threads; torch eager with torch.set_num_threads; dlpc C with omp_set_num_threads; "
        f"memory: dlpc's arena against the sum of its intermediates"
    )
    for r in rows:
        print(r[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(r[1:], widths[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
