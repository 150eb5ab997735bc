"""dlpc: compile a model to any stage of the pipeline.

    dlpc model.dlpc --emit=graph|te|loop|dlp|numpy|c|opencl|dlp-c [-o out] [-O0..-O3]
         [--weights w.npz] [--tuning-log tune.jsonl] [--fold-weights] [--stats]

`--emit=graph|te|loop|dlp` prints the IR after that stage (re-readable by `dlpc-opt`;
`loop` with the C target's schedules); `--emit=numpy|c|opencl|dlp-c` prints the
generated source. The output file is written only when
complete. The output takes the model's weights at run time; `--fold-weights` folds
static subgraphs over them at compile time (as `dlpc.compile` and `dlpc-run` do) and,
with `-o out.py`, writes the weights the output then needs to `out.npz`. `--stats` prints to stderr a table of op and kernel counts as the model enters
the pipeline and after each stage. Errors are one line on stderr with exit code 1.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from dlpc.diagnostics import DlpcError, ToolArgumentParser, run_guarded, write_atomically
from dlpc.tools.dlpc_run import target_desc_options

EMIT_KINDS = ("graph", "te", "loop", "dlp", "numpy", "c", "opencl", "dlp-c")


def parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="dlpc", description="compile a model to any stage")
    p.add_argument("model", help="model file: .dlpc, .onnx or .mlir (graph IR)")
    p.add_argument("--emit", choices=EMIT_KINDS, default="c", help="what to produce")
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
    p.add_argument("--weights", help="weights (.npz) for the model's parameters")
    p.add_argument("--tuning-log", help="schedules from dlpc-tune to apply")
    p.add_argument(
        "--fold-weights",
        action="store_true",
        help="fold the bound weights into the model as dlpc.compile does; with -o "
        "the weights the output needs are written to <output>.npz",
    )
    p.add_argument("--stats", action="store_true", help="print op/kernel counts per stage")
    p.add_argument(
        "--target-desc",
        metavar="DESC",
        help="DLP target description for --emit=dlp|dlp-c: a .toml/.json file or "
        "a built-in name (dlp, tiny)",
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


def write_npz_atomically(path: Path, arrays: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npz", dir=path.parent)
    os.close(fd)
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run(argv: list[str] | None) -> int:
    from dlpc import api
    from dlpc.passes import pipeline

    args = parser().parse_args(argv)
    if args.output and not Path(args.output).parent.is_dir():  # before any work is done
        raise DlpcError(
            f"error: cannot write {args.output}: no such directory {Path(args.output).parent}"
        )
    extra = api.pass_options(target_desc_options(args.target_desc, args.emit))
    model = api.load(args.model, weights=args.weights)
    options = pipeline.PipelineOptions(
        opt_level=args.opt_level,
        tuning_log=args.tuning_log,
        schedule=pipeline.schedules_for(args.emit),
        extra=extra,
    )
    rows: list[tuple[str, Counter, int]] = []

    def record(stage, module):
        if args.stats:
            rows.append((stage, *pipeline.stats(module)))

    weights = api.check_weights(model) if args.fold_weights else None
    text = pipeline.compile_to(model.module.clone(), args.emit, options, record, weights)
    if args.stats:
        print(stats_table(rows), file=sys.stderr)
    if args.output and weights is not None:
        write_npz_atomically(Path(args.output).with_suffix(".npz"), weights)
    if args.output:
        write_atomically(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: run(argv), tool="dlpc")


if __name__ == "__main__":
    sys.exit(main())
