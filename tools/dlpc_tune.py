"""dlpc-tune: search loop schedules for the kernels of a model and log the best ones.

    dlpc-tune model.dlpc --trials 64 --time-budget 600 --log tune.jsonl --plot best.png
    dlpc model.dlpc --tuning-log tune.jsonl ...       # compile with the tuned schedules

The model is lowered to the loop level as `dlpc --target c` would at `-O` (with its
weights bound: the subgraphs over them folded and graph-winograd's rewrites made, so the
kernels tuned are the ones a compile runs; `--batch` binds the batch dim), every kernel with a
template (matmul-shaped nests, convolutions, pooling, reductions) is tuned (identical
kernels once), each measurement is appended to the log as it arrives, and running again
with the same log resumes: logged schedules are not measured twice, and the tool says how
many logged measurements it replayed and the best time so far of each kernel. Records
name the machine that measured them (`tuning_log.machine_fingerprint`): another
machine's are not replayed, and its schedules are measured again here. A progress
bar (tqdm: rate, ETA) goes to stderr when it is a terminal; a summary table (default vs
best time per kernel) to stdout; `--plot` writes a PNG of each kernel's best time against
the trial count over the whole history in the log (needs matplotlib: the `tune` extra).
Every option, the log and matplotlib are checked before any work is done.

`--target opencl` tunes the GPU launch plans instead (`tune/gpu.py`, docs/opencl.md
"Tuning the GPU plans"): per kernel of the model's GPU-plan program, its work-group size,
row lanes and split reductions, measured on the default OpenCL device by profiling
events after checking the result against the numpy reference; its records are keyed by
the device's name and apply to `dlpc.compile(model, target="opencl", profile="gpu",
tuning_log=...)` and `dlpc-run --target opencl --tuning-log` on that device.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dlpc.diagnostics import (
    DlpcError,
    ToolArgumentParser,
    progress,
    require,
    run_guarded,
    write_atomically,
)
from dlpc.model import Model
from dlpc.tools.common import (
    add_batch_option,
    add_format_option,
    check_file,
    check_model_path,
    check_output_dir,
    load_model,
    model_inputs,
    parse_dims,
    refuse_overwrite,
)

EXAMPLE = "dlpc-tune examples/mlp.dlpc --trials 16 --log tune.jsonl"
TARGET = "c"
TARGETS = ("c", "opencl")


def parser() -> ToolArgumentParser:
    assert __doc__ is not None  # (the module docstring opens with the one-line description)
    p = ToolArgumentParser(
        prog="dlpc-tune", description=__doc__.split("\n")[0].split(": ", 1)[1], example=EXAMPLE
    )
    p.add_argument(
        "model", help="model file: .dlpc, .onnx or .mlir (graph IR); - reads stdin (--format)"
    )
    p.add_argument(
        "--target",
        default="c",
        choices=TARGETS,
        help="c: the C loop schedules (default); opencl: the GPU launch plans' params on "
        "the default OpenCL device",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=32,
        help="new measurements in all (default 32); --target opencl: programs, each "
        "trying a candidate for every kernel",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds (default: no limit)",
    )
    p.add_argument(
        "--log",
        default="tune.jsonl",
        help="tuning log (JSON lines): replayed if it exists, appended to (default tune.jsonl)",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="write a PNG of each kernel's best time against the trial count (needs matplotlib)",
    )
    p.add_argument(
        "--strategy",
        default="evolutionary",
        choices=("evolutionary", "random", "grid"),
        help="how candidates are proposed (default evolutionary, ranked by a cost model)",
    )
    p.add_argument(
        "--threads", type=int, default=1, help="OpenMP threads while measuring (default 1)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds before a candidate's measurement is abandoned (default 60)",
    )
    p.add_argument(
        "-O",
        dest="opt_level",
        type=int,
        default=2,
        choices=(0, 1, 2, 3),
        help="graph optimisation level of the lowering (default 2)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    p.add_argument(
        "--verify",
        type=int,
        default=2,
        metavar="N",
        help="re-measure the default and 3 best schedules N times (default 2)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--compare",
        action="store_true",
        help="--target opencl: no search; the kernels' device times under the default GPU "
        "plans and under --log's, side by side, both checked against the reference",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=30,
        metavar="N",
        help="--compare: the calls each time is the median of (default 30)",
    )
    p.add_argument(
        "--weights", help="weights (.npz) for the model's parameters (default: <model>.npz)"
    )
    p.add_argument(
        "--dims",
        metavar="NAME=N,...",
        help="a model with symbolic dims (ONNX dim_params; a .dlpc model's named dims with "
        "this option): tune the kernels of its one program for every value of them, their "
        "buffers at these sizes (its maxima; a dim not given: the default maximum); the "
        "records apply to dlpc.compile(model, max_dims=<the same sizes>, tuning_log=...)",
    )
    add_batch_option(p)
    add_format_option(p)
    return p


def check_options(args) -> None:
    """Every option, file and optional dependency, before any work is done."""
    positive = [("--trials", args.trials, 1), ("--threads", args.threads, 1)]
    for flag, value, least in positive:
        if value < least:
            raise DlpcError(f"dlpc-tune: error: {flag} must be >= {least}, got {value}")
    if args.verify < 0:
        raise DlpcError(f"dlpc-tune: error: --verify must be >= 0, got {args.verify}")
    for flag, value in (("--timeout", args.timeout), ("--time-budget", args.time_budget)):
        if value is not None and not value > 0:
            raise DlpcError(f"dlpc-tune: error: {flag} must be > 0 seconds, got {value}")
    if args.target == "opencl":
        require("pyopencl", "opencl", "dlpc-tune --target opencl")
        for flag, given in (("--dims", args.dims), ("--plot", args.plot)):
            if given:
                raise DlpcError(f"dlpc-tune: error: {flag} applies to --target c, not opencl")
        if args.compare and not Path(args.log).is_file():
            raise DlpcError(f"dlpc-tune: error: --compare reads --log: no file {args.log}")
    elif args.compare:
        raise DlpcError("dlpc-tune: error: --compare applies to --target opencl, not c")
    if args.repeat < 1:
        raise DlpcError(f"dlpc-tune: error: --repeat must be >= 1, got {args.repeat}")
    check_model_path(args.model, args.format)
    args.dims = parse_dims(args.dims, "--dims", many=False)
    check_file(args.weights, "weights file")
    if Path(args.log).exists() and not Path(args.log).is_file():
        raise DlpcError(f"error: tuning log {args.log} is not a file")
    check_output_dir(args.log)
    if args.plot:
        require("matplotlib", "tune", "--plot")
        check_output_dir(args.plot)
        inputs = model_inputs(args.model, args.weights, args.log)
        refuse_overwrite(args.plot, inputs, f"--plot {args.plot}")


def history_of(
    log, tasks, target: str = TARGET, machine: str | None = None
) -> list[tuple[int, str, float]]:
    """(trial, kernel, best time so far) over the log's measurements on this machine
    (`machine`, default `machine_fingerprint()`) for the tasks' kernels: each distinct
    schedule measured is a trial, in log order (the re-measurements of top candidates are
    not trials), so a resumed run continues the curve of the earlier ones. Another
    machine's times are not on the curve."""
    from dlpc.passes.schedule.tuning_log import machine_fingerprint

    machine = machine or machine_fingerprint()
    kernel_of = {t.sig: t.kernel for t in tasks}
    seen: set[tuple[str, str]] = set()
    best: dict[str, float] = {}
    out = []
    for r in log.records:
        if r.sig not in kernel_of or r.target != target or r.machine != machine:
            continue
        if (r.sig, r.script) in seen:
            continue
        seen.add((r.sig, r.script))
        t = r.time
        if r.ok and t is not None:
            best[r.sig] = min(best[r.sig], t) if r.sig in best else t
        if r.sig in best:
            out.append((len(seen), kernel_of[r.sig], best[r.sig]))
    return out


def replay_note(log, tasks, path: str, machine: str | None = None) -> str | None:
    """What resuming from an existing log replays: this machine's measurements
    (`machine`, default `machine_fingerprint()`) and best so far; another machine's
    measurements are counted, not replayed (they are measured again here)."""
    from dlpc.passes.schedule.tuning_log import machine_fingerprint

    if not Path(path).exists():
        return None
    machine = machine or machine_fingerprint()
    sigs = {t.sig for t in tasks}
    records = [r for r in log.records if r.sig in sigs and r.target == TARGET]
    if not records:
        return f"dlpc-tune: {path} has no measurements of this model's kernels yet"
    mine = [r for r in records if r.machine == machine]
    if mine:
        schedules = len({(r.sig, r.script) for r in mine})
        head = (
            f"dlpc-tune: resuming from {path}: replayed {len(mine)} logged measurements "
            f"({schedules} schedules, not measured again)"
        )
    else:
        head = f"dlpc-tune: {path} has no measurements of this model's kernels on this machine"
    lines = [head]
    if len(mine) < len(records):
        lines.append(
            f"  {len(records) - len(mine)} logged measurements were made on other machines: "
            f"not replayed (this machine is '{machine}'; their schedules are measured again)"
        )
    for task in tasks:
        rec = log.best(task.sig, TARGET, task.default, machine)
        if rec is not None:
            shown = f"{rec.time * 1e3:.4f} ms"
        elif log.best(task.sig, TARGET, machine=machine) is not None:
            shown = "none yet (its records were tuned against an older default schedule)"
        elif log.best(task.sig, TARGET) is not None:
            shown = "none yet (its records were measured on other machines)"
        else:
            shown = "none yet"
        lines.append(f"  {task.kernel}: best so far {shown}")
    return "\n".join(lines)


def plot(history: list[tuple[int, str, float]], path: str, title: str) -> None:
    """One step line per kernel: its best time found against the trial number."""
    matplotlib = require("matplotlib", "tune", "--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    ax.set_xlabel("trial (whole log)")
    ax.set_ylabel("best time found (ms)")
    if len(kernels) <= 12:
        ax.legend(fontsize=7)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    write_atomically(path, lambda f: fig.savefig(f, format="png", dpi=100))
    plt.close(fig)


def bound_weights(model) -> dict | None:
    """The model's weights, checked as `dlpc.compile` checks them, or None (with a note)
    when some are not bound: the kernels are then tuned as a training step lowers them,
    without folding."""
    from dlpc import api

    try:
        return api.check_weights(model)
    except DlpcError as e:
        print(f"dlpc-tune: note: {e}; tuning the model without its weights folded", file=sys.stderr)
        return None


def symbolic_maxima(model: Model, dims: dict[str, int]) -> dict[str, int] | None:
    """The maxima at which the one program of a model with symbolic dims is tuned: `dims`
    (--dims), else each dim's default maximum, capped as a compile caps it (a dim that
    slices a static table); None for a static model (--dims then is one line)."""
    from dlpc.dialects import symdims
    from dlpc.reference import graph as ref
    from dlpc.runtime.dynamic import DEFAULT_MAX, is_dynamic, slice_caps

    if not is_dynamic(model):
        if dims:
            raise DlpcError("dlpc-tune: error: --dims names symbolic dims; this model has none")
        return None
    shapes = [ref.graph.shape_of(a) for a in ref.main_func(model.module).args]
    names = sorted(set().union(*(symdims.symbols(s) for s in shapes)))
    for name in dims:
        if name not in names:
            raise DlpcError(
                f"dlpc-tune: error: --dims {name}: the model has no symbolic dim '{name}' "
                f"(its symbolic dims: {', '.join(names)})"
            )
    maxima = {n: dims.get(n, DEFAULT_MAX) for n in names}
    for name, cap in slice_caps(model.module).items():
        if name in maxima and cap < maxima[name]:
            maxima[name] = cap
    return maxima


def gpu_subject(model: Model, opt_level: int = 2, seed: int = 0):
    """What `tune.gpu` measures for `model`: its program lowered as
    `dlpc.compile(model, target="opencl", profile="gpu")` lowers it, its weights, random
    inputs (`seed`) and their numpy reference."""
    from dlpc import api
    from dlpc.tune.gpu import Subject

    compiled = api.compile(model, target="opencl", opt_level=opt_level, profile="gpu")
    inputs = api.random_inputs(model, seed=seed)
    expected = api.reference(model, inputs)
    f = compiled.artifact  # (its bound params hold the folded ones: batch norms in convs)
    assert f is not None and f.bound_params is not None
    weights = dict(zip(f.param_names, f.bound_params))
    return Subject(model.name, compiled.lowered, weights, inputs, expected)


def run_opencl(args) -> int:
    """`--target opencl`: the GPU plans' search (`tune.gpu.GpuTuner`) and its table;
    with `--compare`, no search: the default and the log's plans side by side."""
    from dlpc.passes.schedule.tuning_log import TuningLog
    from dlpc.tune.gpu import DEFAULT_PARAMS, GpuTuner, compare

    TuningLog(args.log)  # a malformed log is an error now, not after the lowering
    model = load_model(args.model, args.format, args.weights, args.batch)
    if args.compare:  # (other inputs than the search's: seed 1)
        print(compare(gpu_subject(model, args.opt_level, seed=1), args.log, args.repeat))
        return 0
    strategy = "grid" if args.strategy == "grid" else "random"
    tuner = GpuTuner(
        gpu_subject(model, args.opt_level), log=args.log, strategy=strategy, seed=args.seed,
        verify=args.verify,
    )  # fmt: skip
    if not tuner.tasks:
        print("dlpc-tune: no kernels whose GPU plan has choices in the model", file=sys.stderr)
        return 0
    print(
        f"dlpc-tune: GPU plans of {len(tuner.tasks)} kernel(s) on '{tuner.machine}' "
        f"({tuner.profile.units} compute units, work-groups up to {tuner.profile.max_group})",
        file=sys.stderr,
    )
    failed = 0
    bar = progress(total=args.trials, desc="tuning", unit="trial", disable=args.quiet or None)
    with bar:
        for ev in tuner.run(trials=args.trials, time_budget=args.time_budget):
            if ev.trial < 0:
                continue
            failed += not ev.ok
            bar.update(ev.trial - bar.n)
    print(f"{'kernel':32s} {'default (ms)':>12s} {'best (ms)':>12s} {'speedup':>8s}  best params")
    for task in tuner.tasks:
        best = tuner.best(task)
        d = tuner.median(task, DEFAULT_PARAMS)
        b = tuner.median(task, best) if best is not None else None
        speed = f"{d / b:.2f}x" if d and b else "-"
        shown = [f"{x * 1e3:12.4f}" if x else f"{'-':>12s}" for x in (d, b)]
        print(f"{task.kernels[0]:32s} {shown[0]} {shown[1]} {speed:>8s}  {best or '-'}")
    print(f"log: {args.log} ({len(tuner.log.records)} records, {failed} failed this run)")
    return 0


def run(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    check_options(args)
    if args.target == "opencl":
        return run_opencl(args)
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.tuning_log import TuningLog
    from dlpc.tune.search import Tuner

    TuningLog(args.log)  # a malformed log is an error now, not after the lowering
    # (positional: tests stand in a model for load_model) a .dlpc model's named dims stay
    # symbolic with --dims, else they are bound (--batch, 1 unbound): the static program
    unbound = None if args.dims else 1
    model = load_model(args.model, args.format, args.weights, args.batch, None, unbound)
    module = model.module.clone()
    maxima = symbolic_maxima(model, args.dims) if isinstance(model, Model) else None
    if maxima is not None:  # the one program (runtime/dynamic.Generic): buffers at maxima
        from dlpc.passes.lower._symbolic import MAX_ATTR, integer_maxima
        from dlpc.reference.graph import main_func

        main_func(module).attributes[MAX_ATTR] = integer_maxima(maxima)
        sizes = ", ".join(f"'{k}': {v}" for k, v in maxima.items())
        print(
            f"dlpc-tune: note: tuning the one program for every value of the model's "
            f"symbolic dims at the maxima {{{sizes}}}; its records apply to "
            f"dlpc.compile(model, max_dims={{{sizes}}}, tuning_log=...)",
            file=sys.stderr,
        )
    # as dlpc.compile lowers for the C target: with the weights bound (folded subgraphs,
    # graph-winograd), so a record's kernel is one the compiled model runs
    options = PipelineOptions(opt_level=args.opt_level, schedule=True)
    lower(module, "loop", options, weights=bound_weights(model), unscheduled=True)
    tuner = Tuner(
        module,
        log=args.log,
        target=TARGET,
        strategy=args.strategy,
        seed=args.seed,
        threads=args.threads,
        timeout=args.timeout,
        verify=args.verify,
    )
    if not tuner.tasks:
        print("dlpc-tune: no tunable kernels in the model", file=sys.stderr)
        return 0
    note = replay_note(tuner.log, tuner.tasks, args.log, tuner.machine)
    if note:
        print(note, file=sys.stderr)
    first: dict[str, float] = {}
    failed = 0
    bar = progress(total=args.trials, desc="tuning", unit="trial", disable=args.quiet or None)
    with bar:
        for ev in tuner.run(trials=args.trials, time_budget=args.time_budget):
            if ev.trial < 0:  # a re-measurement of a top candidate
                continue
            if ev.ok and ev.time is not None:  # (an ok trial has its time)
                first.setdefault(ev.kernel, ev.time)
            else:
                failed += 1
            bar.update(ev.trial - bar.n)
            shown = f"{ev.best * 1e3:.3f} ms" if ev.best else "n/a"
            bar.set_postfix_str(f"{ev.kernel[:24]} best {shown} failed {failed}")
    print(f"{'kernel':32s} {'first (ms)':>12s} {'best (ms)':>12s} {'speedup':>8s}")
    for task in tuner.tasks:
        rec = tuner.log.best(task.sig, TARGET, task.default, tuner.machine)
        b = rec.time if rec else None
        f = first.get(task.kernel)
        speed = f"{f / b:.2f}x" if f and b else "-"
        shown = [f"{x * 1e3:12.4f}" if x else f"{'not tuned':>12s}" for x in (f, b)]
        print(f"{task.kernel:32s} {shown[0]} {shown[1]} {speed:>8s}")
    print(f"log: {args.log} ({len(tuner.log.records)} records, {failed} failed this run)")
    if args.plot:
        history = history_of(tuner.log, tuner.tasks, machine=tuner.machine)
        plot(history, args.plot, f"dlpc-tune {args.model}")
        print(f"plot: {args.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: run(argv), tool="dlpc-tune")


if __name__ == "__main__":
    sys.exit(main())
