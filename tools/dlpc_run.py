"""dlpc-run: compile a model, run it on a target, compare with the numpy reference, time it.

    dlpc-run model.dlpc --target numpy|c|opencl|dlp [--weights w.npz] [--input x.npy ...] [--seed N]
             [--check] [--rtol 1e-4] [--atol 1e-5] [--repeat N] [-O0..-O3]

Inputs come from `--input` files (one .npy per model input, in order) or are drawn
from `--seed`. For each output it prints shape, dtype, the first values, mean and std,
and the max abs / max rel difference from the numpy reference (the unoptimised graph
run by `dlpc.backends.numpy`); then the median time per run (host wall time; for
`--target dlp` also the simulator's per-kernel report: bytes per memory level, DMAs,
intrinsic cycles, simulated time). With `--check` the exit
code is 1 unless every element satisfies |out - ref| <= atol + rtol * |ref|.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from dlpc.diagnostics import DlpcError, ToolArgumentParser, run_guarded


def parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="dlpc-run", description="compile, run, check and time a model")
    p.add_argument("model", help="model file: .dlpc, .onnx or .mlir (graph IR)")
    p.add_argument(
        "--target", default="c", help="numpy, c, opencl or dlp (the DLP simulator); default c"
    )
    p.add_argument("--weights", help="weights (.npz) for the model's parameters")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="X.npy",
        help="an input array, once per model input, in order",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    p.add_argument("--check", action="store_true", help="exit 1 if outside tolerance")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--repeat", type=int, default=10, help="timed runs (median reported)")
    p.add_argument(
        "-O",
        dest="opt_level",
        type=int,
        choices=range(4),
        default=2,
        metavar="{0,1,2,3}",
        help="graph optimisation level (default 2)",
    )
    p.add_argument("--tuning-log", help="schedules from dlpc-tune to apply")
    p.add_argument(
        "--target-desc",
        metavar="DESC",
        help="DLP target description for --target dlp: a .toml/.json file or a "
        "built-in name (dlp, tiny)",
    )
    return p


def target_desc_options(desc: str | None, target: str) -> dict:
    """`--target-desc` as compile options of loop-to-dlp; the file is read (and any
    error reported) before the model is compiled."""
    if desc is None:
        return {}
    if target not in ("dlp", "dlp-c"):
        raise DlpcError(f"error: --target-desc applies to the dlp target, not '{target}'")
    from dlpc.targets.dlp import resolve

    resolve(desc)
    return {"loop_to_dlp": {"target_desc": desc}}


def load_inputs(paths: list[str]) -> list[np.ndarray]:
    arrays = []
    for path in paths:
        if not Path(path).is_file():
            raise DlpcError(f"error: no such input file: {path}")
        try:
            arrays.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as e:
            raise DlpcError(f"error: cannot read input {path}: {e}") from None
    return arrays


def difference(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max |out - ref|, max |out - ref| / |ref|); NaNs agree only with NaNs, a shape
    mismatch is an infinite difference."""
    if out.shape != ref.shape:
        return np.inf, np.inf
    a, b = out.astype(np.float64), ref.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.abs(b))
    return float(diff.max(initial=0)), float(rel.max(initial=0))


def within(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> bool:
    if out.shape != ref.shape:
        return False
    return bool(
        np.all(
            np.isclose(
                out.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            )
        )
    )


def summary(y: np.ndarray, count: int = 5) -> str:
    flat = y.reshape(-1)
    first = ", ".join(
        f"{v:.6g}" if np.issubdtype(y.dtype, np.floating) else str(v) for v in flat[:count].tolist()
    )
    more = ", ..." if flat.size > count else ""
    stats = ""
    if flat.size and np.issubdtype(y.dtype, np.number):
        stats = f"  mean {flat.mean(dtype=np.float64):.6g}  std {flat.std(dtype=np.float64):.6g}"
    shape = "x".join(map(str, y.shape)) or "scalar"
    return f"{shape} {y.dtype}  [{first}{more}]{stats}"


def run(argv: list[str] | None) -> int:
    from dlpc import api

    args = parser().parse_args(argv)
    if args.target not in api.TARGETS:
        raise DlpcError(
            f"dlpc-run: error: unsupported target '{args.target}' (expected "
            f"{', '.join(api.TARGETS)})"
        )
    if args.repeat < 1:
        raise DlpcError(f"dlpc-run: error: --repeat must be >= 1, got {args.repeat}")
    dlp_options = target_desc_options(args.target_desc, args.target)
    model = api.load(args.model, weights=args.weights)
    inputs = load_inputs(args.input) if args.input else api.random_inputs(model, args.seed)
    compiled = api.compile(
        model,
        target=args.target,
        opt_level=args.opt_level,
        tuning_log=args.tuning_log,
        **dlp_options,
    )
    outputs = compiled(*inputs)
    expected = api.reference(model, inputs)
    ok = True
    print(
        f"{model.name}: target {args.target}, -O{args.opt_level}, "
        f"{len(inputs)} input(s) {'from files' if args.input else f'seed {args.seed}'}"
    )
    for i, (y, r) in enumerate(zip(outputs, expected)):
        abs_diff, rel_diff = difference(y, r)
        good = within(y, r, args.rtol, args.atol)
        ok &= good
        print(f"output {i}: {summary(y)}")
        verdict = "ok" if good else "MISMATCH"
        print(
            f"  vs reference: max abs diff {abs_diff:.3g}, max rel diff {rel_diff:.3g} "
            f"(rtol {args.rtol:g}, atol {args.atol:g}): {verdict}"
        )
    seconds = compiled.time(*inputs, repeat=args.repeat)
    print(f"time: {seconds * 1e3:.4g} ms per run (median of {args.repeat})")
    if args.target == "dlp":  # what the simulator counted on the last run
        from dlpc.backends.runtime.dlp_sim import format_report

        print(format_report(compiled.artifact.report))
    if args.check and not ok:
        print(
            "dlpc-run: error: output differs from the numpy reference beyond tolerance",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: run(argv), tool="dlpc-run")


if __name__ == "__main__":
    sys.exit(main())
