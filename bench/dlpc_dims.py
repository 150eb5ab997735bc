"""A `.dlpc` example's one program for every batch against the program bound to the batch.

    python bench/dlpc_dims.py mlp 1,3,64         # OMP_NUM_THREADS=1 for one core

Both are compiled first (the one program: `dlpc.load(path, batch="symbolic")`, the
bound one: `batch=N`); then 30 blocks of calls per batch, the two interleaved block by
block; a row gives the least block mean (us per call, the figure least disturbed by other
jobs on a shared machine), the median block mean, and the largest difference from the
reference of either output (docs/dynamic.md, `.dlpc` named dims).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import dlpc
from dlpc import api

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def main(name: str, batches: list[int], blocks: int = 30) -> None:
    path = EXAMPLES / f"{name}.dlpc"
    start = time.perf_counter()
    one = dlpc.compile(dlpc.load(path, batch="symbolic"))
    rng = np.random.default_rng(0)
    shapes = [x.shape[1:] for x in api.random_inputs(dlpc.load(path, batch=1))]
    xs = {b: [rng.standard_normal((b, *s)).astype(np.float32) for s in shapes] for b in batches}
    for b in batches:
        one(*xs[b])
    print(f"{name}: one program, {time.perf_counter() - start:.1f} s, {one.stats}")
    bound = {}
    for b in batches:
        start = time.perf_counter()
        bound[b] = dlpc.compile(dlpc.load(path, batch=b))
        bound[b](*xs[b])
        print(f"  bound to batch {b}: {time.perf_counter() - start:.1f} s")
    print(
        f"{'batch':>5} {'one (us)':>10} {'bound (us)':>10} {'ratio':>6} {'median ratio':>12} diff"
    )
    for b in batches:
        n = max(1, 20000 // (b * int(np.prod(shapes[0]))) + 1)
        means: dict[str, list[float]] = {"one": [], "bound": []}
        for _ in range(blocks):
            for key, fn in (("one", one), ("bound", bound[b])):
                start = time.perf_counter()
                for _ in range(n):
                    fn(*xs[b])
                means[key].append((time.perf_counter() - start) / n * 1e6)
        want = api.reference(dlpc.load(path, batch=b), xs[b])[0]
        diff = max(float(np.abs(f(*xs[b])[0] - want).max()) for f in (one, bound[b]))
        least = {k: min(v) for k, v in means.items()}
        median = {k: float(np.median(v)) for k, v in means.items()}
        print(
            f"{b:>5} {least['one']:>10.1f} {least['bound']:>10.1f} "
            f"{least['one'] / least['bound']:>5.2f}x {median['one'] / median['bound']:>11.2f}x "
            f"{diff:.1e}"
        )


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "mlp",
        [int(b) for b in (sys.argv[2:3] or ["1,3,64"])[0].split(",")],
    )
