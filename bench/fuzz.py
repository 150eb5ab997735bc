"""The long fuzz run of issue #9: mutated models and IR through dlpc's tools.

    python bench/fuzz.py --cases 10000 [--seed 0] [--kinds text,mlir,onnx] [--timeout 20]
                         [--subprocess-every 100] [--keep DIR] [--jobs 2]

Cases come round robin from the kinds (`test/python/fuzzing.py`): mutated examples and
frontend tests through `dlpc --emit=...`, mutated lit inputs through `dlpc-opt -p <their
pipeline>`, mutated small ONNX models through `dlpc --emit=...`. A case passes with exit
0, or exit 1 and one located diagnostic on stderr; a traceback, an internal error, a
multi-line or empty diagnostic, another exit code or a timeout (a hang) is a finding.
`--keep DIR` saves each finding's input and stderr; `--jobs N` runs N seeds
(seed, seed+1, ...) in parallel, each its share of the cases.

Prints one summary: cases, seconds, findings, the outcome counts per kind and one line
per distinct finding. Exit status 1 when there is a finding. Nothing here gates CI
(`test/python/test_fuzz.py` runs a bounded number of cases there).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "python"))

from fuzzing import KINDS, Report, fuzz  # noqa: E402


def _run(args: tuple) -> Report:
    cases, seed, kinds, timeout, every, keep = args
    keep = f"{keep}/seed{seed}" if keep else None
    return fuzz(cases, seed, kinds, timeout, subprocess_every=every, keep=keep)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", default=",".join(KINDS), help="text,mlir,onnx")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    p.add_argument("--subprocess-every", type=int, default=100, help="0: none")
    p.add_argument("--keep", help="directory for the inputs of findings")
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        p.error(f"unknown kinds {sorted(unknown)} (expected {', '.join(KINDS)})")

    started = time.perf_counter()
    shares = [args.cases // args.jobs + (i < args.cases % args.jobs) for i in range(args.jobs)]
    work = [
        (n, args.seed + i, kinds, args.timeout, args.subprocess_every, args.keep)
        for i, n in enumerate(shares)
    ]
    if args.jobs == 1:
        reports = [_run(work[0])]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            reports = list(pool.map(_run, work))
    total = Report()
    for r in reports:
        total.cases += r.cases
        total.findings += r.findings
        total.outcomes.update(r.outcomes)
    total.seconds = time.perf_counter() - started
    print(total.summary())
    return 1 if total.findings else 0


if __name__ == "__main__":
    sys.exit(main())
