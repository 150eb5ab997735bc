"""dlpc's OpenCL backend against dlpc's C on the same CPU; one run prints one table.

    python bench/opencl.py [--repeat 50] [--warmup 5] [--models mlp,resnet] [--batches 1,32]
                           [--profile NAME]

Per example: dlpc C and dlpc OpenCL (on the first OpenCL platform, PoCL on a CPU-only
machine; `DLPC_OPENCL_PLATFORM` picks another) wall time per call in ms, each the median
of `--repeat` calls after `--warmup`, both through `dlpc.compile` with the model's own
weights bound (resident), the ratio OpenCL / C, and the OpenCL kernels launched per call;
one row per batch size of `--batches` (the examples' batch dimension bound at load time).
Timed two ways in one run, both sharing the machine's load between the two runtimes:
"each call alone" calls the two in turn, one call each (a team helper asleep when a call
starts, see `quiesce`: the conservative figure for OpenCL, while the C's OpenMP workers
may still spin from its call before); "back to back" times blocks of 10 calls of one
runtime, then of the other (`block_medians`): what a user calling one model in a loop
gets, each runtime in its steady state.
Then, for the example and batch with the worst ratio (or `--profile NAME`), the time of every
OpenCL kernel (profiling events, median over the calls) beside the C kernel of the same
name (`dlpc-run --target c --profile`'s timers). A backend whose outputs differ from the
numpy reference (rtol 1e-3, atol 1e-4) prints "wrong". `uptime` is printed first: the
figures are only comparable on a quiet machine. Nothing here gates CI.

With PoCL, the run is repeated for each entry of `--pocl-devices` (a child process each):
`auto` (the default: what a user gets, PoCL's CPU drivers enumerated and each model on
the device the runtime chooses, `opencl_rt.choose_device`, or on a team of two basic
devices, `opencl_rt.Team`; the "device" column names it, "2 x basic-..." for a team), or
one driver forced through `POCL_DEVICES`: `pthread` (work-groups on worker threads, one
per core) or `basic` (one thread: the kernels run in the thread that waits for them). The
hand-offs to and from pthread's workers dominate small models; see docs/opencl.md. Before
each timed call no team helper is left spinning (`quiesce`): the C gets both cores, and
every team call starts with its helper asleep (woken by the call, the slower case).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from dlpc import api
from dlpc.backends.runtime.opencl_rt import devices, opencl_profile
from dlpc.backends.runtime.profile import format_profile, profile

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]


def quiesce(runs) -> None:
    """Wait until no OpenCL team's helper (`opencl_rt.Team`) spins after its call: the
    next runtime timed gets both cores, and the next team call starts with its helper
    asleep (woken by the call: the conservative figure for OpenCL)."""
    for run in runs:
        team = getattr(getattr(run, "artifact", None), "team", None)
        if team is not None:
            team.wait_idle()


def interleaved_medians(runs, inputs, repeat: int, warmup: int, settle: bool = True) -> list[float]:
    """Median seconds per call of each compiled model in `runs`, timed in turn within each
    repetition so that all of them see the same load on a shared machine (with no team
    helper spinning when a call starts, `quiesce`)."""
    for _ in range(warmup):
        for run in runs:
            run(*inputs)
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for run, t in zip(runs, times):
            if settle:
                quiesce(runs)
            start = time.perf_counter()
            run(*inputs)
            t.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def block_medians(runs, inputs, repeat: int, warmup: int, block: int = 10) -> list[float]:
    """Median seconds per call of each compiled model in `runs` back to back, its steady
    state (a team helper still armed, OpenMP's workers still spinning from the call
    before): `block` calls of one runtime, then `block` of the next, in turn until each
    has `repeat` timed calls; the first 2 calls of a block (the hand-over from the other
    runtime) are not counted."""
    for _ in range(warmup):
        for run in runs:
            run(*inputs)
    times: list[list[float]] = [[] for _ in runs]
    while len(times[0]) < repeat:
        for run, t in zip(runs, times):
            for i in range(block + 2):
                start = time.perf_counter()
                run(*inputs)
                if i >= 2:
                    t.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def matches(outputs, expected) -> bool:
    return all(np.allclose(y, r, rtol=1e-3, atol=1e-4) for y, r in zip(outputs, expected))


def kernel_table(ocl_rows, c_rows, limit: int) -> str:
    """OpenCL kernels slowest first, each beside the C kernel of the same name."""
    c_time = {r.name: r.seconds for r in c_rows}
    total = sum(r.seconds for r in ocl_rows) or 1e-12
    lines = [
        f"{'kernel':32} {'origin':36} {'opencl us':>10} {'share':>6} {'c us':>9} "
        f"{'ratio':>6} {'GFLOP/s':>8}"
    ]
    for r in sorted(ocl_rows, key=lambda r: -r.seconds)[:limit]:
        c = c_time.get(r.name)
        lines.append(
            f"{r.name[:32]:32} {r.origin[:36]:36} {r.seconds * 1e6:10.1f} "
            f"{100 * r.seconds / total:5.1f}% "
            + (f"{c * 1e6:9.1f} {r.seconds / max(c, 1e-12):6.1f}" if c else f"{'-':>9} {'-':>6}")
            + f" {r.flops / max(r.seconds, 1e-12) / 1e9:8.2f}"
        )
    c_total = sum(r.seconds for r in c_rows)
    lines.append(
        f"{'total (' + str(len(ocl_rows)) + ' opencl, ' + str(len(c_rows)) + ' c kernels)':69} "
        f"{total * 1e6:10.1f} 100.0% {c_total * 1e6:9.1f} {total / max(c_total, 1e-12):6.1f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--models", default=",".join(NAMES))
    ap.add_argument("--batches", default="1", help="batch sizes, e.g. 1,32")
    ap.add_argument("--profile", default=None, help="the example whose kernels to list")
    ap.add_argument("--kernels", type=int, default=15, help="kernels listed (slowest first)")
    ap.add_argument(
        "--pocl-devices",
        default="auto",
        help="PoCL CPU drivers to measure, one child process each: auto (the runtime's "
        "choice per model), pthread or basic (forced through POCL_DEVICES); '' for the "
        "OpenCL platform as the environment gives it",
    )
    ap.add_argument(
        "--no-quiesce",
        action="store_true",
        help="time each call right after the other runtime's, a team helper still "
        "spinning from its last call (what back-to-back calls of one model get; it takes "
        "a core from a C call timed meanwhile)",
    )
    args = ap.parse_args(argv)
    if args.pocl_devices and "DLPC_BENCH_OPENCL_CHILD" not in os.environ:
        for device in args.pocl_devices.split(","):
            env = {**os.environ, "POCL_DEVICES": device, "DLPC_BENCH_OPENCL_CHILD": "1"}
            if device == "auto":
                del env["POCL_DEVICES"]
            sys.stdout.flush()
            child = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])]
            subprocess.run(child, env=env, check=True)
            print(flush=True)
        return 0
    print(f"uptime: {os.popen('uptime').read().strip()}")  # noqa: S605, S607
    found = ", ".join(f"{d.name} ({d.max_compute_units} compute units)" for d in devices())
    print(f"opencl devices: {found}")
    print(f"median of {args.repeat} calls after {args.warmup} each way, weights resident")
    print(
        f"{'':18} {'each call alone':^28} {'back to back':^28}\n"
        f"{'model':12} {'batch':>5} {'c ms':>9} {'opencl ms':>10} {'ratio':>7} "
        f"{'c ms':>9} {'opencl ms':>10} {'ratio':>7} {'launches':>9}  device"
    )
    compiled: dict[tuple[str, int], tuple] = {}
    ratios: dict[tuple[str, int], float] = {}
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            model = api.load(EXAMPLES / f"{name}.dlpc", batch=batch)
            inputs = api.random_inputs(model)
            expected = api.reference(model, inputs)
            c = api.compile(model, target="c")
            ocl = api.compile(model, target="opencl")
            compiled[name, batch] = (model, inputs, c, ocl)
            good = [matches(one(*inputs), expected) for one in (c, ocl)]
            seconds = interleaved_medians(
                [c, ocl], inputs, args.repeat, args.warmup, settle=not args.no_quiesce
            )
            steady = block_medians([c, ocl], inputs, args.repeat, args.warmup)
            cells = [
                f"{t * 1e3:.3f}" if ok else "wrong" for t, ok in zip(seconds + steady, good * 2)
            ]
            ratio = seconds[1] / seconds[0] if all(good) else float("nan")
            ratio_steady = steady[1] / steady[0] if all(good) else float("nan")
            ratios[name, batch] = ratio
            launches = ocl.artifact.num_launches
            print(
                f"{name:12} {batch:5d} {cells[0]:>9} {cells[1]:>10} {ratio:7.2f} "
                f"{cells[2]:>9} {cells[3]:>10} {ratio_steady:7.2f} {launches:9d}"
                f"  {ocl.artifact.device_name}",
                flush=True,
            )
    if args.profile:
        worst = next(key for key in compiled if key[0] == args.profile)
    else:
        worst = max(ratios, key=lambda key: ratios[key])
    model, inputs, c, ocl = compiled[worst]
    ocl_rows, ocl_call = opencl_profile(ocl.artifact, ocl.lowered, inputs, args.repeat)
    name, batch = worst
    c_rows, c_call = profile(c.artifact, c.lowered, inputs, repeat=args.repeat, name=name)
    print(
        f"\nper kernel, {name} batch {batch} "
        "(OpenCL: profiling events; C: dlpc-run --profile's timers):"
    )
    print(kernel_table(ocl_rows, c_rows, args.kernels))
    print(f"whole call: opencl {ocl_call * 1e3:.3f} ms, c {c_call * 1e3:.3f} ms (profiled builds)")
    print(f"\nopencl profile of {name} batch {batch}:")
    print(format_profile(ocl_rows, ocl_call))
    return 0


if __name__ == "__main__":
    sys.exit(main())
