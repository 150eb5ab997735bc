"""C latency with and without graph-layout{to=nhwc}: -O2 against -O3 (= -O2 with
graph-layout{where=pays} before graph-fuse: NHWC where graph-conv-layout's model says it
pays) and against -O3 with graph-layout forced on every conv (`graph_layout={"where":
"all"}`, what -O3 was until 25 Nov 2026), what `dlpc-run MODEL --target c -O2|-O3
--repeat N` measures, over several interleaved rounds so that load from other processes
hits every column alike.

    python bench/layout.py [--models resnet,mobilenet,lenet] [--repeat 50] [--rounds 5]

Each round compiles nothing new (both artifacts are built once, then cached) and times
`--repeat` calls of each artifact (median); the table shows the median over rounds, in
ms, and the speed-ups -O2 / -O3 and -O2 / forced. Outputs are checked against the NCHW numpy reference
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
        f"{'model':<10} {'-O2 ms':>8} {'-O3 ms':>8} {'forced':>8} {'O2/O3':>6} "
        f"{'O2/forced':>9}   (median of {args.rounds} rounds x {args.repeat} runs)"
    )
    levels = {"O2": (2, {}), "O3": (3, {}), "forced": (3, {"graph_layout": {"where": "all"}})}
    for name in args.models.split(","):
        model = api.load(EXAMPLES / f"{name}.dlpc", batch=1)
        inputs = api.random_inputs(model)
        expected = api.reference(model, inputs)
        compiled = {
            key: api.compile(model, target="c", opt_level=level, **options)
            for key, (level, options) in levels.items()
        }
        ok = {
            level: all(
                np.allclose(o, e, rtol=1e-4, atol=1e-4)
                for o, e in zip(c(*inputs), expected, strict=True)
            )
            for level, c in compiled.items()
        }
        times: dict[str, list[float]] = {key: [] for key in levels}
        for _ in range(args.rounds):
            for level, c in compiled.items():
                times[level].append(c.time(*inputs, repeat=args.repeat) * 1e3)
        ms = {level: statistics.median(t) for level, t in times.items()}
        cells = [f"{ms[key]:8.3f}" if ok[key] else f"{'wrong':>8}" for key in levels]
        print(
            f"{name:<10} {' '.join(cells)} {ms['O2'] / ms['O3']:6.2f} "
            f"{ms['O2'] / ms['forced']:9.2f}"
        )


if __name__ == "__main__":
    main()
