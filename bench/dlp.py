"""DLP simulator figures: per example, the simulated time, bytes moved per memory level
and utilisation of the simulated peak; for the ResNet convolutions, utilisation with and
without double buffering and multi-core split.

    python bench/dlp.py [--target-desc FILE|tiny|dlp] [--examples mlp,resnet]

Each example goes through the whole pipeline (`dlpc.compile(model, target="dlp")`: -O2
graph rewrites with weights folded, te, loop, loop-to-dlp). Times come from the
simulator's model (see backends/runtime/dlp_sim.py), not from the host clock; the
numerics of every run are checked against the numpy reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import dlpc
from dlpc.targets.dlp import resolve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]


def run(name: str, desc, **options):
    """Compile an example through the whole pipeline (`dlpc.compile(target="dlp")`), run
    it on the simulator, check it, and return the per-kernel reports."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc")
    inputs = dlpc.api.random_inputs(model)
    if desc:
        options["target_desc"] = desc
    compiled = dlpc.compile(model, target="dlp", loop_to_dlp=options)
    outs = compiled(*inputs)
    for out, ref in zip(outs, dlpc.api.reference(model, inputs)):
        if not np.allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))):
            raise SystemExit(f"{name}: DLP output differs from the numpy reference")
    return compiled.artifact.report


def summary(reports, peak: float) -> tuple[float, dict[str, float], float]:
    seconds = sum(r.seconds for r in reports)
    levels = dict.fromkeys(("gdram", "sram", "nram", "wram"), 0.0)
    for r in reports:
        for k, v in r.level_bytes().items():
            levels[k] += v
    ops = sum(r.ops for r in reports)
    return seconds, levels, ops / (seconds * peak) if seconds else 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target-desc", default=None)
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    args = ap.parse_args(argv)
    desc = resolve(args.target_desc)
    peak = desc.peak_ops_per_second()
    print(
        f"target {desc.name}: {desc.clusters} clusters x {desc.cores_per_cluster} cores, "
        f"peak {peak / 1e12:.2f} Tflop/s, GDRAM {desc.gdram_bandwidth_gbs} GB/s\n"
    )
    print(
        f"{'example':<12} {'kernels':>7} {'time us':>9} {'GDRAM KiB':>10} {'SRAM KiB':>9} "
        f"{'NRAM KiB':>9} {'WRAM KiB':>9} {'util %':>7}"
    )
    names = [n for n in args.examples.split(",") if n]
    for name in names:
        reps = run(name, args.target_desc)
        seconds, lv, util = summary(reps, peak)
        print(
            f"{name:<12} {len(reps):>7} {seconds * 1e6:>9.1f} {lv['gdram'] / 1024:>10.1f} "
            f"{lv['sram'] / 1024:>9.1f} {lv['nram'] / 1024:>9.1f} {lv['wram'] / 1024:>9.1f} {100 * util:>7.2f}"
        )
    if "resnet" in names:
        print("\nResNet convolutions: utilisation % (time us) by lowering option")
        variants = {
            "single core, single buffer": dict(multicore=False, double_buffer=False),
            "single core, double buffer": dict(multicore=False, double_buffer=True),
            "multi-core, single buffer": dict(multicore=True, double_buffer=False),
            "multi-core, double buffer": dict(multicore=True, double_buffer=True),
        }
        results = {
            label: run("resnet", args.target_desc, **opts) for label, opts in variants.items()
        }
        convs = [r.name for r in results["multi-core, double buffer"] if "conv" in r.name]
        print(f"{'kernel':<22}" + "".join(f" {label:>28}" for label in variants))
        for conv in convs:
            cells = []
            for label in variants:
                rep = next(r for r in results[label] if r.name == conv)
                cells.append(f"{100 * rep.utilisation:.2f} ({rep.seconds * 1e6:.1f})")
            print(f"{conv:<22}" + "".join(f" {c:>28}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
