"""graph-winograd's cost rule, measured: every stride-1 3x3 conv of a model compiled at
-O3 direct (`graph_winograd={"where": "none"}`), as Winograd F(2x2, 3x3) (`"all"`, three
kernels) and fused per tile row (`"all"` with `loop_default_schedule={"winograd_fuse":
True}`: one kernel, shown as `fused`), per kernel (the C build with timers, `dlpc-run --profile`'s) and per whole call,
interleaved A, B, A, B, medians of the rounds.

    python bench/winograd.py --threads 1 --batches 1,32            # resnet + 32/64-ch convs
    python bench/winograd.py --threads 2 --models resnet --rounds 5

--threads sets OMP_NUM_THREADS before the C runtime loads (run once per thread count).
The figures behind passes/graph/winograd.py's constants and docs/graph-passes.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# synthetic convs: (name, channels, size); each is relu(conv2d(x, w, padding=1))
CONVS = [("conv32_32x32", 32, 32), ("conv64_32x32", 64, 32), ("conv64_16x16", 64, 16)]


def conv_model(dirname: Path, name: str, channels: int, size: int) -> Path:
    path = dirname / f"{name}.dlpc"
    path.write_text(
        f"model {name}(x: f32[B, {channels}, {size}, {size}]) {{\n"
        f"  param w: f32[{channels}, {channels}, 3, 3] = kaiming(seed=1)\n"
        f"  return relu(conv2d(x, w, padding=1))\n}}\n"
    )
    return path


def measure(path: Path, batch: int, rounds: int, repeat: int) -> None:
    import dlpc
    from dlpc import api
    from dlpc.backends.runtime.profile import profile

    model = dlpc.load(str(path), batch=batch)
    inputs = api.random_inputs(model)
    built = {
        where: dlpc.compile(model, target="c", opt_level=3, graph_winograd={"where": where})
        for where in ("none", "all")
    }
    # the chain fused per tile row (loop-default-schedule{winograd_fuse=true})
    built["fused"] = dlpc.compile(
        model,
        target="c",
        opt_level=3,
        graph_winograd={"where": "all"},
        loop_default_schedule={"winograd_fuse": True},
    )
    kernels: dict[str, list[dict[str, float]]] = {w: [] for w in built}
    calls: dict[str, list[float]] = {w: [] for w in built}
    for _ in range(rounds):
        for where, compiled in built.items():
            rows, _ = profile(compiled.artifact, compiled.lowered, inputs, repeat=repeat)
            kernels[where].append({r.name: r.seconds * 1e6 for r in rows})
            calls[where].append(compiled.time(*inputs, repeat=repeat) * 1e6)
    for where in built:
        times = {k: statistics.median(d[k] for d in kernels[where]) for k in kernels[where][0]}
        shown = {k: v for k, v in times.items() if k.startswith(("conv2d", "winograd", "matmul"))}
        print(
            f"{path.stem} batch {batch} {where}: call {statistics.median(calls[where]):.1f} us, "
            f"kernels {sum(times.values()):.1f} us: "
            + " ".join(f"{k}={v:.1f}" for k, v in shown.items())
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", default="1")
    p.add_argument("--models", default="resnet," + ",".join(n for n, _, _ in CONVS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    convs = {n: (c, s) for n, c, s in CONVS}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name in convs:
                path = conv_model(Path(tmp), name, *convs[name])
            else:
                path = ROOT / "examples" / f"{name}.dlpc"
            for batch in (int(b) for b in args.batches.split(",")):
                measure(path, batch, args.rounds, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
