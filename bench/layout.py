"""C latency with and without graph-layout{to=nhwc}: -O2 against -O3 (= -O2 plus
graph-layout before graph-fuse), what `dlpc-run MODEL --target c -O2|-O3 --repeat N`
measures, over several interleaved rounds so that load from other processes hits
both columns alike.

    python bench/layout.py [--models resnet,mobilenet,lenet] [--repeat 50] [--rounds 5]

Each round compiles nothing new (both artifacts are built once, then cached) and times
`--repeat` calls of each artifact (median); the table shows the median over rounds, in
ms, and the speed-up -O2 / -O3. Outputs are checked against the NCHW numpy reference
(rtol/atol 1e-4) first; a wrong artifact prints "wrong". Nothing here gates CI.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from dlpc import api

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet,mobilenet,lenet")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    print(
        f"{'model':<10} {'-O2 ms':>8} {'-O3 ms':>8} {'O2/O3':>6}   (median of {args.rounds} "
        f"rounds x {args.repeat} runs)"
    )
    for name in args.models.split(","):
        model = api.load(EXAMPLES / f"{name}.dlpc")
        inputs = api.random_inputs(model)
        expected = api.reference(model, inputs)
        compiled = {level: api.compile(model, target="c", opt_level=level) for level in (2, 3)}
        ok = {
            level: all(
                np.allclose(o, e, rtol=1e-4, atol=1e-4)
                for o, e in zip(c(*inputs), expected, strict=True)
            )
            for level, c in compiled.items()
        }
        times: dict[int, list[float]] = {2: [], 3: []}
        for _ in range(args.rounds):
            for level, c in compiled.items():
                times[level].append(c.time(*inputs, repeat=args.repeat) * 1e3)
        ms = {level: statistics.median(t) for level, t in times.items()}
        cells = [f"{ms[lv]:8.3f}" if ok[lv] else f"{'wrong':>8}" for lv in (2, 3)]
        print(f"{name:<10} {cells[0]} {cells[1]} {ms[2] / ms[3]:6.2f}")


if __name__ == "__main__":
    main()
