"""dlpc: compile a model to any stage of the pipeline.

    dlpc model.dlpc --emit=graph|te|loop|dlp|numpy|c|opencl|dlp-c [-o out] [-O0..-O3]
         [--target c|opencl|dlp] [--weights w.npz] [--tuning-log tune.jsonl]
         [--no-fold-weights] [--stats] [--timing]
         [--format dlpc|onnx|mlir]

`--emit=graph|te|loop|dlp` prints the IR after that stage (re-readable by `dlpc-opt`;
`loop` with the C target's schedules and passes, or `--target`'s: the IR its printer
receives); `--emit=numpy|c|opencl|dlp-c` prints the
generated source. The model may be `-` (stdin) or a file of any name with `--format`.
The output file is written only when complete, never over a file dlpc reads.

Weights are folded by default whenever they are all known (as `dlpc.compile` and
`dlpc-run` do): static subgraphs over them are computed at compile time, so the output
has only the kernels that depend on the inputs. With `-o out.c`, when folding made new
weights, the weights the output needs are written to `out.npz` (named on stderr);
`--no-fold-weights` keeps the arithmetic on the weights in the output. `--stats` prints
to stderr a table of op and kernel counts as the model enters the pipeline and after
each stage. Errors are one line on stderr with exit code 1 (usage errors too).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

from dlpc.diagnostics import (
    DlpcError,
    ToolArgumentParser,
    run_guarded,
    save_npz,
    write_atomically,
    write_stdout,
)
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
from dlpc.tools.dlpc_run import target_desc_options

EMIT_KINDS = ("graph", "te", "loop", "dlp", "numpy", "c", "opencl", "dlp-c")
TARGETS = ("c", "opencl", "dlp")  # --target: pipeline.TARGET_PASSES' keys
TARGET_STAGES = ("graph", "te", "loop")  # the --emit kinds --target applies to
EXAMPLE = "dlpc examples/mlp.dlpc --emit=c -o mlp.c"


def parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="dlpc", description="compile a model to any stage", example=EXAMPLE)
    p.add_argument(
        "model", help="model file: .dlpc, .onnx or .mlir (graph IR); - reads stdin (--format)"
    )
    p.add_argument(
        "--emit",
        choices=EMIT_KINDS,
        default="c",
        help="the IR of a stage (graph, te, loop, dlp) or generated source (numpy, c, "
        "opencl, dlp-c); default c",
    )
    p.add_argument("-o", dest="output", help="output file (default: stdout)")
    p.add_argument(
        "-O",
        dest="opt_level",
        type=int,
        choices=range(4),
        default=2,
        metavar="{0,1,2,3}",
        help="graph optimisation level (default 2)",
    )
    p.add_argument(
        "--weights", help="weights (.npz) for the model's parameters (default: <model>.npz)"
    )
    p.add_argument("--tuning-log", help="schedules from dlpc-tune to apply")
    p.add_argument(
        "--fold-weights",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fold static subgraphs over the weights at compile time (default: whenever "
        "every weight is known); with -o the weights the output then needs are written "
        "to <output>.npz. --no-fold-weights keeps that arithmetic in the output",
    )
    p.add_argument("--stats", action="store_true", help="print op/kernel counts per stage")
    p.add_argument(
        "--timing",
        action="store_true",
        help="print the time of every pass and its share to stderr (like -mlir-timing)",
    )
    p.add_argument(
        "--check-each-pass",
        action="store_true",
        help="run the model on seeded random inputs before and after every pass and stop "
        "at the first pass that changes a result (exit 1 naming it)",
    )
    p.add_argument(
        "--target-desc",
        metavar="DESC",
        help="DLP target description for --emit=dlp|dlp-c: a .toml/.json file or "
        "a built-in name (dlp, tiny)",
    )
    p.add_argument(
        "--target",
        choices=TARGETS,
        help="with --emit=graph|te|loop: the target to lower for, so --emit=loop prints "
        "the IR that target's printer receives (default: c for loop, none above it)",
    )
    p.add_argument(
        "--train",
        action="store_true",
        help="the training step instead (as dlpc-train --emit: cross-entropy, Adam); with "
        "--dp/--tp/--pp N each rank's program with its comm ops",
    )
    for name, what in (("dp", "data"), ("tp", "tensor"), ("pp", "pipeline")):
        p.add_argument(
            f"--{name}",
            type=int,
            default=0,
            metavar="N",
            help=f"--train: {what} parallel on N ranks",
        )
    add_format_option(p)
    add_batch_option(p)
    p.add_argument(
        "--dims",
        metavar="NAME=N,...",
        help="sizes of a model's symbolic dims (dynamic axes) to emit a program for; "
        "--emit graph without it prints the symbolic graph",
    )
    return p


def stats_table(rows: list[tuple[str, Counter, int]]) -> str:
    """One column per stage: kernels, total ops, then each op's count."""
    stages = [stage for stage, _, _ in rows]
    names = sorted(set().union(*(ops for _, ops, _ in rows)))
    table = [
        ["", *stages],
        ["kernels", *(str(k) for _, _, k in rows)],
        ["ops", *(str(sum(ops.values())) for _, ops, _ in rows)],
    ]
    table += [[name, *(str(ops.get(name, 0) or "") for _, ops, _ in rows)] for name in names]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = [
        r[0].ljust(widths[0]) + "".join(f"  {c.rjust(w)}" for c, w in zip(r[1:], widths[1:]))
        for r in table
    ]
    return "\n".join(line.rstrip() for line in lines)


def weights_known(model) -> bool:
    """Whether every graph.param of the model has a value (so it can be folded)."""
    from dlpc.dialects import graph
    from dlpc.reference.graph import main_func

    names = {op.pname for op in main_func(model.module).walk() if isinstance(op, graph.ParamOp)}
    return names <= set(model.weights)


def _bind_symbolic(model, args):
    """A model with symbolic dims at --dims (the graph stage may stay symbolic); without
    --dims, a program cannot be emitted: one line naming the input and the dim."""
    from dlpc import api
    from dlpc.runtime.dynamic import is_dynamic, signature

    dims = parse_dims(args.dims, "--dims", many=False)
    if not is_dynamic(model) or (not dims and args.emit == "graph" and model.ir is not None):
        return model
    if not dims:
        sig = signature(model)
        name, axis, d = next(
            (n, a, d)
            for n, s in zip(sig.names, sig.shapes)
            for a, d in enumerate(s)
            if not isinstance(d, int)
        )
        raise DlpcError(
            f"{model.path or model.name}: error: graph input '{name}' dim {axis} is the "
            f"symbolic dim '{d}': pass --dims to emit a program for given sizes "
            f"(dlpc.compile serves every size)"
        )
    return api.bind_dims(model, dims)


def run(argv: list[str] | None) -> int:
    from dlpc import api
    from dlpc.passes import pipeline

    args = parser().parse_args(argv)
    if args.train or args.dp or args.tp or args.pp:  # the training step: dlpc-train's
        return _emit_train(args)
    if args.target and args.emit not in TARGET_STAGES:
        raise DlpcError(
            f"error: --target applies to --emit={'|'.join(TARGET_STAGES)}, not --emit={args.emit}"
        )
    # every option and file is checked before any work is done
    check_model_path(args.model, args.format)
    check_file(args.weights, "weights file")
    check_file(args.tuning_log, "tuning log")
    check_output_dir(args.output)
    extra = api.pass_options(target_desc_options(args.target_desc, args.emit))
    desc = args.target_desc if args.target_desc and Path(args.target_desc).is_file() else None
    inputs = model_inputs(args.model, args.weights, args.tuning_log, desc)
    out = Path(args.output) if args.output else None
    # a device or FIFO (-o /dev/null) gets no weights file beside it
    npz = (
        out.with_suffix(".npz") if out is not None and (out.is_file() or not out.exists()) else None
    )
    if args.output:
        refuse_overwrite(args.output, inputs, f"-o {args.output}")
        if args.fold_weights and npz is not None:
            refuse_overwrite(npz, inputs, f"-o {args.output} (its folded weights {npz})")

    model = load_model(args.model, args.format, args.weights, args.batch)
    model = _bind_symbolic(model, args)
    options = pipeline.PipelineOptions(
        opt_level=args.opt_level,
        tuning_log=args.tuning_log,
        schedule=pipeline.schedules_for(args.target or args.emit),
        extra=extra,
        target=args.target,
    )
    rows: list[tuple[str, Counter, int]] = []

    memory: list[tuple[int, int]] = []
    packs: list[int] = []  # loop-prepack-weights' resident block
    scalar: list[tuple[str, str]] = []  # dlp kernels left (partly) as scalar loops, and why

    def record(stage, module):
        if args.stats:
            rows.append((stage, *pipeline.stats(module)))
            planned = pipeline.memory_stats(module) if stage == "loop" else None
            memory.extend([planned] if planned else [])
            packed = pipeline.packed_stats(module) if stage == "loop" else None
            packs.extend([packed] if packed else [])
            if stage == "dlp":
                scalar.extend(pipeline.dlp_scalar_kernels(module))

    fold = args.fold_weights
    if fold is None:  # the default: fold whenever every weight is known
        fold = weights_known(model)
    weights = api.check_weights(model) if fold else None
    if args.check_each_pass:  # the model's weights when known, else random ones
        from dlpc.backends.runtime.evaluate import make_checker

        known = weights  # (when given, Checker.start takes the pipeline's own dict anyway)
        if known is None and weights_known(model):
            known = api.check_weights(model)
        options = dataclasses.replace(options, checker=make_checker(known, functions="main"))
    given = set(weights or ())
    with pipeline.timing() as timings:
        text = pipeline.compile_to(model.module.clone(), args.emit, options, record, weights)
    if args.timing:
        print(pipeline.format_timing(timings), file=sys.stderr)
    if args.stats:
        print(stats_table(rows), file=sys.stderr)
        for kernel, why in scalar:
            print(f"dlp: kernel '{kernel}' runs scalar loops: {why}", file=sys.stderr)
        for arena, total in memory:  # loop-memory-plan's arena against no plan at all
            print(
                f"memory plan: arena {arena} bytes for {total} bytes of intermediates "
                f"({100 * arena / max(total, 1):.0f}%)",
                file=sys.stderr,
            )
        for packed in packs:
            print(
                f"packed weights: {packed} bytes, resident, packed once per binding",
                file=sys.stderr,
            )
    folded = sorted(set(weights or ()) - given)  # weights made by folding
    if npz is not None and weights is not None and (args.fold_weights or folded):
        refuse_overwrite(npz, inputs, f"-o {args.output} (its folded weights {npz})")
        write_atomically(npz, lambda f: save_npz(f, weights))
        print(
            f"dlpc: wrote {npz}: the {len(weights)} weights {args.output} needs",
            file=sys.stderr,
        )
    elif folded:
        print(
            f"dlpc: note: the output needs {len(folded)} folded weight(s) ({folded[0]}, ...): "
            "write it with -o FILE to get them in FILE.npz, or pass --no-fold-weights",
            file=sys.stderr,
        )
    if args.output:
        write_atomically(args.output, text)
    else:
        write_stdout(text)
    return 0


def _emit_train(args) -> int:
    """`--train`: the training step at --emit, printed by dlpc-train --emit."""
    from dlpc.tools.dlpc_train import main as dlpc_train

    if not args.train:
        raise DlpcError("error: --dp/--tp/--pp apply to --train")
    if args.output:
        raise DlpcError("error: --train prints to stdout; -o is not supported with it")
    line = [args.model, f"--emit={args.emit}", "-O", str(args.opt_level)]
    line += ["--weights", args.weights] if args.weights else []
    line += ["--batch", str(args.batch)] if args.batch else []
    for name in ("dp", "tp", "pp"):
        line += [f"--{name}", str(getattr(args, name))] if getattr(args, name) else []
    return dlpc_train(line)


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: run(argv), tool="dlpc")


if __name__ == "__main__":
    sys.exit(main())
