"""Measure one schedule of one kernel, isolated in a subprocess.

`extract_kernel(module, name)` cuts a kernel out of a model into a module of its own
(`@main` takes every buffer the kernel touches; globals it reads come along), so a
candidate compiles in well under a second. `measure(kernel_ir, script, ...)` runs

    python -m dlpc.tune.measure  < job.json  > result.json

with a timeout: the child applies the script, compiles with the C backend, checks the
result against the unscheduled kernel on the same random inputs (so a wrong schedule is
a failure, not a fast time), warms up, and reports the best of `repeat` timed calls. A
crash (signal), a hang (timeout), a compile error or a numerical mismatch is a failed
measurement with a one-line reason; the tuner records it and carries on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from dlpc.dialects.loop import KernelOp
from dlpc.passes.schedule._common import get_kernel


@dataclass
class Result:
    ok: bool
    time: float | None = None
    error: str | None = None


def extract_kernel(module: ModuleOp, name: str) -> ModuleOp:
    """A module whose `@main(buffers...)` runs only kernel `name` (all arguments inputs,
    so the caller owns every buffer)."""
    kernel = get_kernel(module, name)
    external: list[SSAValue] = []
    globals_used: list[memref.GetGlobalOp] = []
    for op in kernel.walk():
        for v in op.operands:
            owner = v.owner
            where = owner if isinstance(owner, Operation) else owner.parent_op()
            if where is not None and kernel.is_ancestor(where):
                continue  # defined inside the kernel
            if isinstance(owner, memref.GetGlobalOp):
                if owner not in globals_used:
                    globals_used.append(owner)
            elif v not in external:
                external.append(v)
    block = Block(arg_types=[v.type for v in external])
    mapper: dict[SSAValue, SSAValue] = {old: new for old, new in zip(external, block.args)}
    for old, new in zip(external, block.args):
        new.name_hint = old.name_hint
    new_module = ModuleOp([])
    for g in globals_used:
        sym = g.name_.root_reference.data
        for op in module.walk():
            if isinstance(op, memref.GlobalOp) and op.sym_name.data == sym:
                new_module.body.block.add_op(op.clone())
        clone = g.clone()
        block.add_op(clone)
        mapper[g.results[0]] = clone.results[0]
    block.add_op(kernel.clone(value_mapper=mapper))
    block.add_op(func.ReturnOp())
    fn = func.FuncOp("main", ([v.type for v in external], []), Region(block))
    fn.attributes["dlpc.num_inputs"] = IntegerAttr(len(external), i64)
    fn.attributes["dlpc.params"] = ArrayAttr([])
    fn.attributes["dlpc.num_outputs"] = IntegerAttr(0, i64)
    new_module.body.block.add_op(fn)
    return new_module


def flops(kernel: KernelOp) -> int:
    """Iterations of the innermost bodies x float ops in them (a work estimate)."""
    from dlpc.dialects.loop import ForOp

    def count(loop) -> int:
        inner = [op for op in loop.block.ops if isinstance(op, ForOp)]
        own = sum(
            1 for op in loop.block.ops if op.name.endswith("f") and op.name.startswith("arith.")
        )
        return loop.trip_count * (own + sum(count(lp) for lp in inner))

    return sum(count(op) for op in kernel.block.ops if isinstance(op, ForOp))


# ------------------------------------------------------------------ the child


def _child(job: dict) -> dict:
    import numpy as np

    from dlpc.backends.c import emit_c, find_main, memref_info
    from dlpc.backends.runtime.cbuild import build
    from dlpc.dialects.graph import numpy_dtype
    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.schedule.default import finish_kernel
    from dlpc.passes.schedule.script import apply_script

    if job.get("crash"):  # test hook: a candidate that kills its process
        os.abort()
    base = parse_module(job["ir"])
    sched = parse_module(job["ir"])
    apply_script(sched, job["script"])
    for k in sched.walk():
        if isinstance(k, KernelOp):
            finish_kernel(k)
    sched.verify()
    rng = np.random.default_rng(0)
    specs = [memref_info(a.type) for a in find_main(base).body.block.args]
    arrays = [rng.standard_normal(s).astype(numpy_dtype(e)) for s, e in specs]
    ref = _reference(base, arrays)
    lib = build(emit_c(sched), name="tune")
    out = [a.copy() for a in arrays]
    lib.call(out)
    for a, b in zip(out, ref):
        if not np.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True):
            return {"ok": False, "error": "wrong result: differs from the unscheduled kernel"}
    for _ in range(job["warmup"]):
        lib.call(out)
    best = float("inf")
    deadline = time.perf_counter() + job.get("max_seconds", 2.0)
    for _ in range(job["repeat"]):
        t0 = time.perf_counter()
        lib.call(out)
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() > deadline:
            break
    return {"ok": True, "time": best}


def _reference(base: ModuleOp, arrays) -> list:
    """The unscheduled kernel's result on `arrays`, cached on disk by IR hash (a naive
    big kernel takes seconds; every candidate of a tuning run compares against it)."""
    import hashlib

    import numpy as np

    from dlpc.backends.c import emit_c
    from dlpc.backends.runtime.cbuild import build, cache_dir

    source = emit_c(base)
    path = cache_dir() / f"tune-ref-{hashlib.sha256(source.encode()).hexdigest()[:20]}.npz"
    if path.exists():
        try:
            with np.load(path) as data:
                return [data[f"a{n}"] for n in range(len(arrays))]
        except Exception as e:  # noqa: BLE001 - a damaged cache entry is recomputed
            print(
                f"dlpc: warning: cached reference {path} is damaged ({e}); recomputing it",
                file=sys.stderr,
            )
    ref = [a.copy() for a in arrays]
    build(source, name="tune_ref").call(ref)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, **{f"a{n}": a for n, a in enumerate(ref)})
    os.replace(tmp, path)
    return ref


def measure(
    kernel_ir: str,
    script: str,
    *,
    timeout: float = 60.0,
    repeat: int = 5,
    warmup: int = 2,
    threads: int = 1,
    crash: bool = False,
) -> Result:
    job = {
        "ir": kernel_ir,
        "script": script,
        "repeat": repeat,
        "warmup": warmup,
        "crash": crash,
    }
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}  # the child's thread count
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dlpc.tune.measure"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return Result(False, error=f"timed out after {timeout:g} s")
    if proc.returncode < 0:
        return Result(False, error=f"crashed (signal {-proc.returncode})")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Result(False, error=f"failed (exit {proc.returncode}): {last[:300]}")
    data = json.loads(lines[-1])
    return Result(data["ok"], data.get("time"), data.get("error"))


def main() -> int:
    job = json.loads(sys.stdin.read())
    try:
        result = _child(job)
    except Exception as e:  # noqa: BLE001 - reported to the parent as a failed candidate
        result = {"ok": False, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
