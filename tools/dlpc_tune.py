"""dlpc-tune: search loop schedules for the kernels of a model and log the best ones.

    dlpc-tune model.dlpc --trials 64 --time-budget 600 --log tune.jsonl --plot best.png
    dlpc model.dlpc --tuning-log tune.jsonl ...       # compile with the tuned schedules

The model is lowered to the loop level (as `dlpc` would, at `-O`), every kernel with a
template (matmul-shaped nests, convolutions, pooling, reductions) is tuned (identical
kernels once), each measurement is appended to the log as it arrives, and running again
with the same log resumes: logged schedules are not measured twice. A progress bar goes
to stderr; a summary table (default vs best time per kernel) to stdout; `--plot` writes a
PNG of each kernel's best time against the trial count (needs matplotlib: the `tune`
extra).
"""

from __future__ import annotations

import argparse
import sys
import time

from dlpc.diagnostics import DlpcError, run_guarded


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * min(done, total) / max(total, 1))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def plot(history: list[tuple[int, str, float]], path: str, title: str) -> None:
    """One step line per kernel: its best time found against the trial number."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DlpcError("error: --plot needs matplotlib (pip install 'dlpc[tune]')") from None
    fig, ax = plt.subplots(figsize=(6, 4))
    kernels = list(dict.fromkeys(k for _, k, _ in history))
    for name in kernels:
        pts = [(t, b) for t, k, b in history if k == name]
        ax.plot(
            [t for t, _ in pts],
            [b * 1e3 for _, b in pts],
            drawstyle="steps-post",
            marker=".",
            label=name,
        )
    ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel("best time found (ms)")
    if len(kernels) <= 12:
        ax.legend(fontsize=7)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="dlpc-tune", description=__doc__.split("\n")[0])
    ap.add_argument("model", help="model file (.dlpc, .onnx)")
    ap.add_argument("--trials", type=int, default=32, help="measurements in all (default 32)")
    ap.add_argument(
        "--time-budget", type=float, default=None, metavar="S", help="stop after S seconds"
    )
    ap.add_argument("--log", default="tune.jsonl", help="tuning log (JSON lines), appended")
    ap.add_argument("--plot", default=None, metavar="PNG", help="plot best time vs trials")
    ap.add_argument(
        "--strategy", default="evolutionary", choices=("evolutionary", "random", "grid")
    )
    ap.add_argument("--threads", type=int, default=1, help="OpenMP threads while measuring")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    ap.add_argument("-O", dest="opt_level", type=int, default=2, choices=(0, 1, 2, 3))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--verify",
        type=int,
        default=2,
        metavar="N",
        help="re-measure the default and 3 best schedules N times (default 2)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    def body() -> int:
        import dlpc
        from dlpc.passes.pipeline import PipelineOptions, lower
        from dlpc.tune.search import Tuner

        model = dlpc.load(args.model)
        module = model.module.clone()
        lower(module, "loop", PipelineOptions(opt_level=args.opt_level))
        tuner = Tuner(
            module,
            log=args.log,
            strategy=args.strategy,
            seed=args.seed,
            threads=args.threads,
            timeout=args.timeout,
            verify=args.verify,
        )
        if not tuner.tasks:
            print("dlpc-tune: no tunable kernels in the model", file=sys.stderr)
            return 0
        start = time.monotonic()
        first: dict[str, float] = {}
        best: dict[str, float] = {}
        failed = 0
        for ev in tuner.run(trials=args.trials, time_budget=args.time_budget):
            if ev.trial < 0:  # a re-measurement of a top candidate
                continue
            if ev.ok:
                first.setdefault(ev.kernel, ev.time)
                best[ev.kernel] = min(best.get(ev.kernel, ev.time), ev.time)
            else:
                failed += 1
            if not args.quiet:
                shown = f"{ev.best * 1e3:.3f} ms" if ev.best else "n/a"
                print(
                    f"\r{_bar(ev.trial, args.trials)} {ev.trial}/{args.trials} "
                    f"{ev.kernel[:24]:24s} best {shown:>12s} failed {failed} "
                    f"{time.monotonic() - start:6.0f} s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        if not args.quiet:
            print(file=sys.stderr)
        print(f"{'kernel':32s} {'first (ms)':>12s} {'best (ms)':>12s} {'speedup':>8s}")
        for task in tuner.tasks:
            rec = tuner.log.best(task.sig, "c")
            b = rec.time if rec else None
            f = first.get(task.kernel)
            speed = f"{f / b:.2f}x" if f and b else "-"
            shown = [f"{x * 1e3:12.4f}" if x else f"{'not tuned':>12s}" for x in (f, b)]
            print(f"{task.kernel:32s} {shown[0]} {shown[1]} {speed:>8s}")
        print(f"log: {args.log} ({len(tuner.log.records)} records, {failed} failed this run)")
        if args.plot:
            plot(tuner.history, args.plot, f"dlpc-tune {args.model}")
            print(f"plot: {args.plot}")
        return 0

    return run_guarded(body, tool="dlpc-tune")


if __name__ == "__main__":
    sys.exit(main())
