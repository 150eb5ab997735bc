"""Compile time per example, cold and warm, split into dlpc's passes and the C compiler.

    python bench/compile.py [--examples mlp,lenet,...] [--batch N] [--passes] [--repeat N]

For each example (target c, -O2):

- cold: a fresh cache directory, so the whole pipeline runs and the C compiler builds the
  library; split into the pipeline's passes (`pipeline.timing()`, as `dlpc --timing`
  prints them), the C emitter, the C compiler (`cbuild.build`) and the rest (weight
  checks, binding, the warm-cache key and entry);
- warm: `dlpc.compile` again in the same process (the whole artifact from the cache,
  no pass runs), and in a new process (the time of the `dlpc.compile` call, after the
  imports, which are shown apart; if dlpc's own sources changed since the parent read
  them (they are part of the key) the first new process misses and a second is timed).

Times are medians over `--repeat` rounds (each cold round in a new cache directory).
`--passes` also prints every pass of the last cold compile of each example.
Benchmarks print figures; nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("mlp", "lenet", "mobilenet", "resnet", "transformer")

NEW_PROCESS = """
import time, sys
t0 = time.perf_counter()
import dlpc
from dlpc import api
t1 = time.perf_counter()
model = dlpc.load(sys.argv[1], batch=int(sys.argv[2]))
t2 = time.perf_counter()
compiled = api.compile(model)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2, int(compiled.cached))
"""


def cold_compile(path: Path, batch: int) -> dict:
    """One cold compile in a fresh cache directory, split into its parts."""
    import dlpc
    from dlpc import api
    from dlpc.backends import c as c_backend
    from dlpc.backends.runtime import cbuild
    from dlpc.passes import pipeline

    parts = {"emit": 0.0, "cc": 0.0}
    real_emit, real_units, real_build = c_backend.emit_c, c_backend.emit_c_units, cbuild.build

    def emit_c(module):
        start = time.perf_counter()
        try:
            return real_emit(module)
        finally:
            parts["emit"] += time.perf_counter() - start

    def emit_c_units(module, *args, **kwargs):
        start = time.perf_counter()
        try:
            return real_units(module, *args, **kwargs)
        finally:
            parts["emit"] += time.perf_counter() - start

    def build(source, **kwargs):
        start = time.perf_counter()
        try:
            return real_build(source, **kwargs)
        finally:
            parts["cc"] += time.perf_counter() - start

    with tempfile.TemporaryDirectory() as cache:
        os.environ["DLPC_CACHE_DIR"] = cache
        model = dlpc.load(path, batch=batch)
        c_backend.emit_c, c_backend.emit_c_units, cbuild.build = emit_c, emit_c_units, build
        try:
            start = time.perf_counter()
            with pipeline.timing() as passes:
                compiled = api.compile(model)
            total = time.perf_counter() - start
            assert not compiled.cached
            again = dlpc.load(path, batch=batch)  # another Model: same IR and weights
            start = time.perf_counter()
            warm = api.compile(again)
            warm_seconds = time.perf_counter() - start
            assert warm.cached
            for _ in range(2):  # a miss when dlpc's sources changed meanwhile (its key)
                proc = subprocess.run(
                    [sys.executable, "-c", NEW_PROCESS, str(path), str(batch)],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "DLPC_CACHE_DIR": cache},
                    check=True,
                )
                imports, new_process, cached = proc.stdout.split()
                if cached == "1":
                    break
            else:
                new_process = "nan"
        finally:
            c_backend.emit_c, c_backend.emit_c_units, cbuild.build = (
                real_emit,
                real_units,
                real_build,
            )
    pass_seconds = sum(t for _, t in passes)
    return {
        "total": total,
        "passes": pass_seconds,
        "emit": parts["emit"],
        "cc": parts["cc"],
        "other": total - pass_seconds - parts["emit"] - parts["cc"],
        "warm": warm_seconds,
        "warm_new": float(new_process),
        "imports": float(imports),
        "pass_rows": passes,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", default=",".join(EXAMPLES))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3, help="rounds per example (median)")
    p.add_argument("--passes", action="store_true", help="print each example's pass timings")
    args = p.parse_args(argv)
    from dlpc.passes import pipeline

    cols = ("cold s", "passes", "emit", "cc", "other", "warm ms", "warm new-proc ms", "import s")
    print(f"compile time, target c, -O2, batch {args.batch}, median of {args.repeat}")
    print(f"{'example':12}" + "".join(f"{c:>17}" for c in cols))
    details = {}
    for name in args.examples.split(","):
        runs = [
            cold_compile(ROOT / "examples" / f"{name}.dlpc", args.batch) for _ in range(args.repeat)
        ]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "pass_rows"}
        details[name] = runs[-1]["pass_rows"]
        row = [
            f"{med['total']:.3f}",
            f"{med['passes']:.3f}",
            f"{med['emit']:.3f}",
            f"{med['cc']:.3f}",
            f"{med['other']:.3f}",
            f"{med['warm'] * 1e3:.1f}",
            f"{med['warm_new'] * 1e3:.1f}",
            f"{med['imports']:.2f}",
        ]
        print(f"{name:12}" + "".join(f"{c:>17}" for c in row), flush=True)
    if args.passes:
        for name, rows in details.items():
            print(f"\n{name}: passes of the last cold compile")
            print(pipeline.format_timing(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
