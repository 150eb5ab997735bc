"""GFLOP/s of fp32 matmul and of the ResNet example's conv layers: dlpc untuned (default
schedule), dlpc tuned (best schedule of a tuning log), numpy/OpenBLAS, on 1 and 2
threads, next to the machine's measured peak. One run, side by side.

    python bench/matmul.py [--sizes 256,512,1024] [--shapes 101x256x256,...] [--log bench/tune.jsonl]
                           [--tune-trials 24] [--threads 1,2] [--repeat 7]

`--sizes ''` and `--shapes ''` measure no square / no extra matmuls (`--no-conv`: no conv
layers); a bad value is a one-line argparse error (exit 2). `--tune-trials N` first tunes each kernel (N measurements, single-threaded, appended to
the log); without it the log is only read (a kernel without a record shows the default
schedule's figure in the "tuned" column, marked `*`). Each thread count runs in a child
process with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set. The peak is bench/peak.py's:
independent FMA chains on the widest vectors the compiler targets, i.e. what the core can
do, not a vendor figure. Conv layers for numpy are im2col + one OpenBLAS GEMM. Best of `--repeat`
calls after a warm-up; dlpc's two columns are measured round-robin in one process,
OpenBLAS in another (OpenMP's and OpenBLAS's spinning worker threads starve each other in
one process), the two processes alternating twice, best of both; nothing here gates CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _positive(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid {what} {text.strip()!r}: not a positive integer")
    return value


def size_list(text: str) -> list[int]:
    """`--sizes`: comma-separated positive integers; empty items are skipped, so '' is
    none (as `--shapes ''` is)."""
    return [_positive(s, "size") for s in text.split(",") if s.strip()]


def shape_list(text: str) -> list[tuple[int, int, int]]:
    """`--shapes`: comma-separated MxNxK of positive integers; '' is none."""
    shapes = []
    for spec in filter(None, (s.strip() for s in text.split(","))):
        dims = spec.split("x")
        if len(dims) != 3:
            raise argparse.ArgumentTypeError(f"invalid shape {spec!r}: expected MxNxK")
        m, n, k = (_positive(d, f"dimension in shape {spec!r}:") for d in dims)
        shapes.append((m, n, k))
    return shapes


def thread_list(text: str) -> list[int]:
    """`--threads`: comma-separated positive thread counts, at least one."""
    threads = [_positive(s, "thread count") for s in text.split(",") if s.strip()]
    if not threads:
        raise argparse.ArgumentTypeError("expected at least one thread count")
    return threads


def count(minimum: int):
    """An integer option's type: at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum, {minimum}")
        return value

    return parse


def shape_label(shape: tuple[int, int, int]) -> str:
    return "x".join(str(d) for d in shape)


def best_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def race(fns: dict, repeat: int) -> dict:
    """Best time of each callable, measured round-robin (one call of each per round) so a
    change of machine load hits every column alike."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def peak_gflops(threads: int) -> float:
    """This CPU's FMA peak for a team of `threads` (bench/peak.py, loaded by path: bench/
    is not a package), GFLOP/s from the team's wall time."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_peak", Path(__file__).with_name("peak.py"))
    assert spec is not None and spec.loader is not None
    peak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peak)
    return peak.measure(threads).wall


def matmul_module(n: int, shape: tuple[int, int, int] | None = None):
    """C[M, N] = A[M, K] @ B[K, N] as one kernel (`matmul_<n>` for the square n x n x n,
    `matmul_<M>x<N>x<K>` for `shape`)."""
    from dlpc.passes.pipeline import parse_module

    m, nn, k = shape or (n, n, n)
    name = f"matmul_{m}x{nn}x{k}" if shape else f"matmul_{n}"
    text = f"""
func.func @main(%a: memref<{m}x{k}xf32>, %b: memref<{k}x{nn}xf32>, %c: memref<{m}x{nn}xf32>)
    attributes {{dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "{name}" {{
    loop.for %i0 = 0 to {m} step 1 {{name = "i0", parallel}} {{
      loop.for %i1 = 0 to {nn} step 1 {{name = "i1"}} {{
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to {k} step 1 {{name = "r0", reduction}} {{
          %x = memref.load %a[%i0, %r0] : memref<{m}x{k}xf32>
          %y = memref.load %b[%r0, %i1] : memref<{k}x{nn}xf32>
          %p = arith.mulf %x, %y : f32
          %s0 = memref.load %acc[] : memref<f32>
          %s = arith.addf %s0, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }}
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %c[%i0, %i1] : memref<{m}x{nn}xf32>
      }}
    }}
  }}
  func.return
}}
"""
    return parse_module(text)


def resnet_convs():
    """(name, single-kernel module, flops, numpy im2col function) per conv layer."""
    import dlpc
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.nest import analyse
    from dlpc.tune.measure import extract_kernel

    m = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=1).module.clone()
    lower(m, "loop", PipelineOptions(opt_level=2))
    out = []
    for k in kernels(m):
        if not k.sym.startswith("conv2d"):
            continue
        nest = analyse(k)
        t = nest.trips
        n, co, ho, wo = (t[x] for x in nest.spatial)
        ci, kh, kw = (t[x] for x in nest.reduce)
        out.append(
            (
                k.sym,
                extract_kernel(m, k.sym),
                2 * n * co * ho * wo * ci * kh * kw,
                (n, co, ho, wo, ci, kh, kw),
            )
        )
    return out


def numpy_conv(dims):
    """im2col (strided view, stride 1, same padding) + one OpenBLAS GEMM."""
    n, co, ho, wo, ci, kh, kw = dims
    x = np.random.rand(n, ci, ho + kh - 1, wo + kw - 1).astype(np.float32)
    w = np.random.rand(co, ci * kh * kw).astype(np.float32)

    def run():
        cols = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
        cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(n, ci * kh * kw, ho * wo)
        return w @ cols[0]

    return run


def dlpc_runner(module, schedule: str, log: str | None):
    """(call, how) for the module's C code with the default or the tuned schedule."""
    from dlpc.backends.c import find_main, memref_info
    from dlpc.backends.runtime.cbuild import CFunction
    from dlpc.passes.schedule.default import apply_default, apply_tuned_or_default

    m = module.clone()
    how = "default"
    if schedule == "tuned":
        how = "tuned" if "tuned" in apply_tuned_or_default(m, log).values() else "default*"
    else:
        apply_default(m)
    f = CFunction(m, name="bench")
    rng = np.random.default_rng(0)
    arrays = [
        rng.random(memref_info(a.type)[0], dtype=np.float32) for a in find_main(m).body.block.args
    ]
    return (lambda: f.library.call(arrays)), how


def child(args) -> dict:
    """Measure everything at one thread count (this process has the env set)."""
    cases = []
    for n in args.sizes:
        a = np.random.rand(n, n).astype(np.float32)
        b = np.random.rand(n, n).astype(np.float32)
        cases.append((f"matmul {n}", matmul_module(n), 2 * n**3, lambda a=a, b=b: a @ b))
    for m, n, k in args.shapes:
        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        mod = matmul_module(0, (m, n, k))
        label = f"matmul {shape_label((m, n, k))}"
        cases.append((label, mod, 2 * m * n * k, lambda a=a, b=b: a @ b))
    if not args.no_conv:
        for name, mod, flop, dims in resnet_convs():
            cases.append((f"resnet {name}", mod, flop, numpy_conv(dims)))
    rows = []
    for label, mod, flop, blas in cases:
        if args.what == "blas":
            t = race({"blas": blas}, args.repeat)
            rows.append((label, flop / t["blas"] / 1e9))
            continue
        untuned, _ = dlpc_runner(mod, "default", None)
        tuned, how = dlpc_runner(mod, "tuned", args.log)
        t = race({"untuned": untuned, "tuned": tuned}, args.repeat)
        rows.append((label, flop / t["untuned"] / 1e9, flop / t["tuned"] / 1e9, how))
    peak = peak_gflops(int(os.environ["OMP_NUM_THREADS"])) if args.what == "dlpc" else 0.0
    return {"rows": rows, "peak": peak}


def tune(args) -> None:
    from dlpc.tune.search import Task, Tuner, tasks_of

    modules = [matmul_module(n) for n in args.sizes]
    modules += [matmul_module(0, shape) for shape in args.shapes]
    if not args.no_conv:
        modules += [mod for _, mod, _, _ in resnet_convs()]
    for mod in modules:
        tasks: list[Task] = tasks_of(mod)
        tuner = Tuner(mod, log=args.log, tasks=tasks, threads=1, repeat=3, verify=2)
        for ev in tuner.run(trials=args.tune_trials):
            if ev.trial < 0:
                continue
            state = f"{ev.time * 1e3:9.3f} ms" if ev.ok else f"failed: {ev.error[:60]}"
            print(
                f"  tune {ev.kernel:24s} {ev.trial:3d}/{args.tune_trials} {state}",
                file=sys.stderr,
                flush=True,
            )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--sizes",
        type=size_list,
        default="256,512,1024",
        help="square matmuls N x N x N, comma-separated ('' for none)",
    )
    ap.add_argument(
        "--shapes",
        type=shape_list,
        default="",
        help="also these MxNxK matmuls, comma-separated (e.g. 101x256x256,128x131x128: "
        "shapes without a tile that divides them)",
    )
    ap.add_argument("--threads", type=thread_list, default="1,2")
    ap.add_argument("--log", default=str(ROOT / "bench" / "tune.jsonl"))
    ap.add_argument("--tune-trials", type=count(0), default=0)
    ap.add_argument("--repeat", type=count(1), default=7)
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--what", choices=("dlpc", "blas"), default="dlpc", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.sizes and not args.shapes and args.no_conv:
        ap.error("nothing to measure: --sizes and --shapes are empty and --no-conv is given")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    if args.tune_trials:
        tune(args)
    results = {}
    for t in args.threads:
        # OpenMP and OpenBLAS worker threads spin after their work; sharing a process
        # they starve each other, so each library runs in its own process, and the
        # processes alternate twice (best of both) so load drift hits both alike
        env = {**os.environ, "OMP_NUM_THREADS": str(t), "OPENBLAS_NUM_THREADS": str(t)}
        best: dict = {}
        for _ in range(2):
            for what in ("blas", "dlpc"):
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    "--what",
                    what,
                    "--sizes",
                    ",".join(map(str, args.sizes)),
                    "--shapes",
                    ",".join(map(shape_label, args.shapes)),
                    "--log",
                    args.log,
                    "--repeat",
                    str(args.repeat),
                ]
                cmd += ["--no-conv"] if args.no_conv else []
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return 1
                res = json.loads(out.stdout.strip().splitlines()[-1])
                for row in res["rows"]:
                    key = (what, row[0])
                    old = best.get(key)
                    best[key] = (
                        row
                        if old is None
                        else tuple(
                            max(a, b) if isinstance(a, float) else a for a, b in zip(old, row)
                        )
                    )
                best[("peak",)] = max(best.get(("peak",), 0.0), res["peak"])
        labels = [k[1] for k in best if k[0] == "dlpc"]
        results[t] = {
            "rows": [(*best[("dlpc", lb)], best[("blas", lb)][1]) for lb in labels],
            "peak": best[("peak",)],
        }
    threads = list(results)
    head = f"{'GFLOP/s':24s}" + "".join(
        f"{'untuned':>9s}{'tuned':>9s}{'OpenBLAS':>10s}{'tuned/BLAS':>11s} |" for _ in threads
    )
    print(" " * 24 + "".join(f"{f'{t} thread' + ('s' if t > 1 else ''):^40s}|" for t in threads))
    print(head)
    names = [r[0] for r in results[threads[0]]["rows"]]
    for i, name in enumerate(names):
        line = f"{name:24s}"
        for t in threads:
            _, d, tu, how, bl = results[t]["rows"][i]
            mark = "*" if how != "tuned" else " "
            line += f"{d:9.1f}{tu:8.1f}{mark}{bl:10.1f}{tu / bl:10.0%}  |"
        print(line)
    print(f"{'peak (FMA loop)':24s}" + "".join(f"{results[t]['peak']:36.1f}    |" for t in threads))
    print("* no tuning record for this kernel: the default schedule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
