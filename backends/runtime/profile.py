"""Per-kernel profile of a compiled C model: time per kernel, its share, GFLOP/s, bytes.

    rows = profile(compiled.artifact, compiled.lowered, inputs, repeat=50)
    print(format_profile(rows))

The generated C brackets every kernel call of `dlpc_main` with `DLPC_PROF_BEGIN(k)` /
`DLPC_PROF_END(k)`, which are empty unless `DLPC_PROFILE` is defined: the normal build
has no timers. `profile` builds the same source with `#define DLPC_PROFILE 1` in front
(a separate cached library), binds the model's resident parameters, calls it `repeat`
times and reads the accumulated seconds per kernel (`dlpc_kernel_seconds`) after each
call; a kernel's time is the median over the calls.

FLOPs and bytes are static counts from the loop IR (`kernel_costs`): every floating-point
`arith`/`math` op in a kernel (fma counts 2; both branches of an `scf.if` count), times
the trip counts of its enclosing loops; bytes are the sizes of the buffers the kernel
reads or writes from outside it, each counted once (the compulsory traffic, not what the
caches see).
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp, VectorType
from xdsl.ir import Block, Operation

from dlpc.backends.c import find_main, is_prepare, kernel_uses, memref_info, size_of
from dlpc.backends.runtime import cbuild
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp

# float ops that count as one flop each (math.fma: two)
FLOAT_OPS = {
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.negf",
    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf",
}  # fmt: skip


@dataclass
class KernelCost:
    name: str
    origin: str
    flops: int
    bytes: int


@dataclass
class ProfileRow:
    name: str
    origin: str
    seconds: float  # median per call
    flops: int
    bytes: int


def _flops(block: Block, times: int) -> int:
    total = 0
    for op in block.ops:
        if isinstance(op, ForOp):
            total += _flops(op.block, times * op.trip_count)
            continue
        if op.name in FLOAT_OPS or op.name.startswith("math."):
            ty = op.results[0].type if op.results else None  # (a vector op: one per lane)
            lanes = math.prod(ty.get_shape()) if isinstance(ty, VectorType) else 1
            total += times * lanes * (2 if op.name == "math.fma" else 1)
        for region in op.regions:
            for inner in region.blocks:
                total += _flops(inner, times)
    return total


def _bytes(k: Operation) -> int:
    free, _ = kernel_uses(k)
    total = 0
    for v in free:
        if isinstance(v.type, MemRefType):
            shape, elt = memref_info(v.type)
            total += math.prod(shape) * size_of(elt)
    return total


def kernel_costs(module: ModuleOp) -> list[KernelCost]:
    """Static FLOPs and bytes of every `loop.kernel` of @main, in call order (not the
    `dlpc.prepare` kernels that pack weights once, outside the call)."""
    costs = []
    for k in find_main(module).walk():
        if isinstance(k, KernelOp) and not is_prepare(k):
            origin = k.origin.data if k.origin is not None else ""
            costs.append(KernelCost(k.sym, origin, _flops(k.block, 1), _bytes(k)))
    return costs


def profile_library(function: cbuild.CFunction, name: str = "module") -> cbuild.CFunction:
    """The model's C built with DLPC_PROFILE (cached like any library), its parameters
    bound as the normal build's are."""
    source = "#define DLPC_PROFILE 1\n" + function.source
    library = cbuild.build(source, name=f"{name}_profile")
    profiled = cbuild.CFunction.restore(source, function.signature(), library)
    profiled.bind_params(function.bound_params or [])
    return profiled


def profile(
    function: cbuild.CFunction,
    module: ModuleOp,
    inputs: list[np.ndarray],
    repeat: int = 20,
    warmup: int = 2,
    name: str = "module",
) -> tuple[list[ProfileRow], float]:
    """(one row per kernel in call order, median seconds of a whole profiled call)."""
    profiled = profile_library(function, name)
    handle = profiled.library.handle
    n = ctypes.c_int.in_dll(handle, "dlpc_num_kernels").value
    seconds = (ctypes.c_double * max(n, 1)).in_dll(handle, "dlpc_kernel_seconds")
    names = (ctypes.c_char_p * max(n, 1)).in_dll(handle, "dlpc_kernel_names")
    costs = kernel_costs(module)
    if [c.name for c in costs] != [names[k].decode() for k in range(n)]:
        raise DlpcError("error: profile: the kernels of the C and of the loop IR differ")
    for _ in range(warmup):
        profiled(*inputs)
    per_kernel: list[list[float]] = [[] for _ in range(n)]
    calls = []
    for _ in range(max(repeat, 1)):
        before = list(seconds[:n])
        start = time.perf_counter()
        profiled(*inputs)
        calls.append(time.perf_counter() - start)
        for k in range(n):
            per_kernel[k].append(seconds[k] - before[k])
    rows = [
        ProfileRow(c.name, c.origin, statistics.median(t), c.flops, c.bytes)
        for c, t in zip(costs, per_kernel)
    ]
    return rows, statistics.median(calls)


def format_profile(rows: list[ProfileRow], call_seconds: float | None = None) -> str:
    """The profile as a table, slowest kernel first, with a total line."""
    total = sum(r.seconds for r in rows) or 1e-12
    lines = [
        f"{'kernel':32} {'origin':28} {'time us':>9} {'share':>6} {'GFLOP/s':>8} "
        f"{'MFLOP':>8} {'KB moved':>9} {'GB/s':>7}"
    ]
    for r in sorted(rows, key=lambda r: -r.seconds):
        s = max(r.seconds, 1e-12)
        lines.append(
            f"{r.name[:32]:32} {r.origin[:28]:28} {r.seconds * 1e6:9.2f} "
            f"{100 * r.seconds / total:5.1f}% {r.flops / s / 1e9:8.2f} {r.flops / 1e6:8.3f} "
            f"{r.bytes / 1e3:9.1f} {r.bytes / s / 1e9:7.2f}"
        )
    flops = sum(r.flops for r in rows)
    lines.append(
        f"{'total (' + str(len(rows)) + ' kernels)':61} {total * 1e6:9.2f} 100.0% "
        f"{flops / total / 1e9:8.2f} {flops / 1e6:8.3f}"
    )
    if call_seconds is not None:
        lines.append(
            f"whole call {call_seconds * 1e6:.2f} us (median): kernels "
            f"{100 * total / max(call_seconds, 1e-12):.0f}%, the rest is the Python call, "
            f"allocation and timers"
        )
    return "\n".join(lines)
