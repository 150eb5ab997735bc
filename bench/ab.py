"""Latency of the five examples through the public API, one commit against the checkout,
interleaved in one run: the "within noise" check of a refactor.

    python bench/ab.py 654a6ad [--rounds 2] [--threads 1]

The other commit is checked out as a git worktree under a temporary folder and imported
through PYTHONPATH (a folder whose `dlpc` links to it); the checkout is the installed
`dlpc`. Each figure comes from a fresh process: `dlpc.load` + `dlpc.compile(target="c")`,
5 warm-up calls, then the median of 200 calls (batch 1) or 30 (batch 32); the smallest of
the rounds' medians is printed, in ms.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("mlp", "lenet", "transformer", "mobilenet", "resnet")
WORKER = r"""
import sys, time, numpy as np, dlpc
from dlpc.api import random_inputs
path, batch, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = dlpc.load(path, batch=batch)
c = dlpc.compile(m, target="c")
xs = random_inputs(m)
for _ in range(5):
    c(*xs)
ts = []
for _ in range(reps):
    t = time.perf_counter(); c(*xs); ts.append(time.perf_counter() - t)
print(sorted(ts)[len(ts) // 2] * 1e3)
"""


def median_ms(example: str, batch: int, pythonpath: str | None, threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    path = str(ROOT / "examples" / f"{example}.dlpc")
    reps = "200" if batch == 1 else "30"
    out = subprocess.run(
        [sys.executable, "-c", WORKER, path, str(batch), reps],
        env=env,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    if out.returncode:
        sys.exit(f"{example} batch {batch}: {out.stderr.strip().splitlines()[-1]}")
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the commit to compare the checkout with")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp, "tree")
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(tree), args.rev],
            check=True,
            capture_output=True,
        )
        Path(tmp, "root").mkdir()
        Path(tmp, "root", "dlpc").symlink_to(tree)
        try:
            print(f"{'example':12s} batch  {args.rev[:10]:>10s}  checkout  ratio")
            for example in EXAMPLES:
                for batch in (1, 32):
                    before, after = [], []
                    for _ in range(args.rounds):
                        before.append(
                            median_ms(example, batch, str(Path(tmp, "root")), args.threads)
                        )
                        after.append(median_ms(example, batch, None, args.threads))
                    b, a = min(before), min(after)
                    print(
                        f"{example:12s} {batch:5d}  {b:10.3f}  {a:8.3f}  {a / b:5.2f}", flush=True
                    )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                check=False,
                capture_output=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
