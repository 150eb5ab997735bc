"""dlpc-run: compile a model, run it on a target, compare with the numpy reference, time it.

    dlpc-run model.dlpc --target numpy|c|opencl|dlp [--weights w.npz] [--input x.npy ...]
             [--seed N] [--check] [--rtol 1e-4] [--atol 1e-5] [--repeat N] [-O0..-O3]
             [--format dlpc|onnx|mlir] [--profile]

Inputs come from `--input` files (one .npy per model input, in order) or are drawn
from `--seed`. For each output it prints shape, dtype, the first values, mean and std,
and the max abs / max rel difference from the numpy reference (the unoptimised graph
run by `dlpc.backends.numpy`) with the verdict: which bound holds (atol alone, rtol
alone, or only their sum) and the worst element (its index, the value and the
reference's); then the median time per run (host wall time; for `--target dlp` also the
simulator's per-kernel report: bytes per memory level, DMAs, intrinsic cycles, simulated
time; for `--target c --profile` the time of every kernel, its share, GFLOP/s and bytes
moved, from a build of the same C with timers around each kernel call; for `--target
opencl --profile` the same table from OpenCL profiling events). With `--check` the exit code is 1 unless every element satisfies
|out - ref| <= atol + rtol * |ref|. The model may be `-` (stdin, with `--format`).

Memory: before any input is made, the least the run needs (the reference's live tensors
at its peak plus the outputs it is compared with) is compared with the memory available
(MemAvailable + SwapFree, `ulimit -v`); a run that cannot fit is one error line. The
reference frees each value after its last reader, and comparisons go a chunk at a time.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np

from dlpc.diagnostics import DlpcError, ToolArgumentParser, require, run_guarded
from dlpc.tools.common import (
    add_batch_option,
    add_format_option,
    check_file,
    check_memory,
    check_model_path,
    load_model,
    parse_dims,
)

EXAMPLE = "dlpc-run examples/mlp.dlpc --target c --check"


def parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="dlpc-run", description="compile, run, check and time a model", example=EXAMPLE
    )
    p.add_argument(
        "model", help="model file: .dlpc, .onnx or .mlir (graph IR); - reads stdin (--format)"
    )
    p.add_argument(
        "--target", default="c", help="numpy, c, opencl or dlp (the DLP simulator); default c"
    )
    p.add_argument(
        "--weights", help="weights (.npz) for the model's parameters (default: <model>.npz)"
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="X.npy",
        help="an input array, once per model input, in order",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless |out - ref| <= atol + rtol * |ref| for every element",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=1e-4,
        help="relative tolerance against the numpy reference (default 1e-4)",
    )
    p.add_argument(
        "--atol",
        type=float,
        default=1e-5,
        help="absolute tolerance against the numpy reference (default 1e-5)",
    )
    p.add_argument(
        "--repeat", type=int, default=10, help="timed runs, the median is reported (default 10)"
    )
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
        "--profile",
        action="store_true",
        help="targets c and opencl: time every kernel (c: a build with timers; opencl: "
        "profiling events; median of --repeat calls) and print its share, GFLOP/s and "
        "bytes moved",
    )
    p.add_argument(
        "--opencl-profile",
        choices=("cpu", "gpu"),
        help="target opencl: the launch plans (default: gpu on a GPU device, else cpu; "
        "DLPC_OPENCL_PROFILE)",
    )
    p.add_argument(
        "--target-desc",
        metavar="DESC",
        help="DLP target description for --target dlp: a .toml/.json file or a "
        "built-in name (dlp, tiny)",
    )
    p.add_argument(
        "--dims",
        metavar="NAME=N,...",
        help="sizes of a model's symbolic dims for the random inputs (unbound ones are 1; "
        "with --input the files' shapes give them)",
    )
    p.add_argument(
        "--buckets",
        metavar="NAME=N:N:...,...",
        help="pad a symbolic dim up to the nearest of these sizes (seq=8:16:32): one "
        "compile per bucket, padding masked, outputs sliced back",
    )
    add_format_option(p)
    add_batch_option(p)
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
        try:  # (an empty file is an EOFError, a damaged archive a BadZipFile)
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise DlpcError(f"error: cannot read input {path}: {e}") from None
        if not isinstance(array, np.ndarray):  # an .npz archive of named arrays
            array.close()
            raise DlpcError(f"error: input {path} is an .npz archive: --input takes .npy files")
        arrays.append(array)
    return arrays


# elements compared at a time: the float64 temporaries of a comparison stay a few MiB
# instead of several copies of the whole output (a 1x8x4096x4096 output needed 6.4 GiB)
CHUNK = 1 << 20


def _chunks(out: np.ndarray, ref: np.ndarray):
    """(first flat index, out chunk, ref chunk) as float64, CHUNK elements at a time."""
    a, b = out.reshape(-1), ref.reshape(-1)
    for start in range(0, a.size, CHUNK):
        stop = start + CHUNK
        yield start, a[start:stop].astype(np.float64), b[start:stop].astype(np.float64)


def difference(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max |out - ref|, max |out - ref| / |ref|); NaNs agree only with NaNs, a shape
    mismatch is an infinite difference."""
    if out.shape != ref.shape:
        return np.inf, np.inf
    abs_max, rel_max = np.float64(0), np.float64(0)
    for _, a, b in _chunks(out, ref):
        same = (a == b) | (np.isnan(a) & np.isnan(b))  # equal infinities agree too
        with np.errstate(divide="ignore", invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(a - b))
            diff = np.where(np.isnan(diff), np.inf, diff)
            rel = np.where(diff == 0, 0.0, diff / np.abs(b))
        abs_max = np.maximum(abs_max, diff.max(initial=0))  # (np.maximum keeps a NaN)
        rel_max = np.maximum(rel_max, rel.max(initial=0))
    return float(abs_max), float(rel_max)


def within(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> bool:
    if out.shape != ref.shape:
        return False
    return all(
        np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
        for _, a, b in _chunks(out, ref)
    )


def verdict(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> tuple[bool, str, str]:
    """(ok, verdict, worst): whether |out - ref| <= atol + rtol * |ref| everywhere; the
    verdict says which bound holds by itself (atol alone, rtol alone, both, or only their
    sum) or how many elements are beyond it; `worst` names the element with the largest
    excess over its bound (index, value, reference value; the one closest to failing
    when all pass), '' when out equals ref."""
    if out.shape != ref.shape:
        shape = lambda a: "x".join(map(str, a.shape)) or "scalar"
        return False, f"MISMATCH (shape {shape(out)}, reference {shape(ref)})", ""
    n, by_atol, by_rtol, differs = 0, True, True, False
    worst_at = None  # (excess, flat index, |diff|, allowed) of the first largest excess
    for start, a, b in _chunks(out, ref):
        with np.errstate(invalid="ignore"):
            same = (a == b) | (np.isnan(a) & np.isnan(b))  # equal infinities, NaN with NaN
            diff = np.where(same, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(np.where(np.isfinite(b), b, 0.0))
        with np.errstate(invalid="ignore"):
            n += int(np.count_nonzero(~(diff <= atol + rtol * scale)))
            by_atol &= bool(np.all(diff <= atol))
            by_rtol &= bool(np.all(diff <= rtol * scale))
            excess = np.nan_to_num(diff - (atol + rtol * scale), nan=np.inf)
        differs |= bool(diff.any())
        k = int(np.argmax(excess))
        if worst_at is None or excess[k] > worst_at[0]:
            worst_at = (excess[k], start + k, diff[k], atol + rtol * scale[k])
    if not differs:
        return True, "ok (identical)", ""
    assert worst_at is not None
    _, flat, d, allowed = worst_at
    i = np.unravel_index(flat, out.shape)
    fmt = lambda v: f"{v:.9g}" if np.issubdtype(np.asarray(v).dtype, np.floating) else str(v)
    index = "[" + ", ".join(map(str, i)) + "]"
    worst = (
        f"worst against its bound: {index} = {fmt(out[i])} vs reference {fmt(ref[i])} "
        f"(|diff| {d:.3g}, allowed {allowed:.3g})"
    )
    if n:
        return False, f"MISMATCH ({n} of {out.size} elements beyond atol + rtol*|ref|)", worst
    if by_atol and by_rtol:
        return True, "ok (atol and rtol each hold alone)", worst
    if by_atol:
        return True, "ok (atol holds alone; rtol alone would not)", worst
    if by_rtol:
        return True, "ok (rtol holds alone; atol alone would not)", worst
    return True, "ok (only atol + rtol*|ref| together hold)", worst


def mean_std(flat: np.ndarray) -> tuple[float, float]:
    """Mean and (population) standard deviation in float64, two passes over CHUNK-sized
    pieces (`np.std(dtype=float64)` makes a float64 copy of the whole array)."""
    pieces = [flat[k : k + CHUNK] for k in range(0, flat.size, CHUNK)]
    mean = sum(float(p.sum(dtype=np.float64)) for p in pieces) / flat.size
    var = sum(float(np.square(p.astype(np.float64) - mean).sum()) for p in pieces) / flat.size
    return mean, var**0.5


def summary(y: np.ndarray, count: int = 5) -> str:
    flat = y.reshape(-1)
    first = ", ".join(
        f"{v:.6g}" if np.issubdtype(y.dtype, np.floating) else str(v) for v in flat[:count].tolist()
    )
    more = ", ..." if flat.size > count else ""
    stats = ""
    if flat.size and np.issubdtype(y.dtype, np.number):
        mean, std = mean_std(flat)
        stats = f"  mean {mean:.6g}  std {std:.6g}"
    shape = "x".join(map(str, y.shape)) or "scalar"
    return f"{shape} {y.dtype}  [{first}{more}]{stats}"


def run(argv: list[str] | None) -> int:
    from dlpc import api

    args = parser().parse_args(argv)
    # every option, file and optional dependency is checked before any work is done
    if args.target not in api.TARGETS:
        raise DlpcError(
            f"dlpc-run: error: unsupported target '{args.target}' (expected "
            f"{', '.join(api.TARGETS)})"
        )
    if args.repeat < 1:
        raise DlpcError(f"dlpc-run: error: --repeat must be >= 1, got {args.repeat}")
    if args.profile and args.target not in ("c", "opencl"):
        raise DlpcError(
            f"dlpc-run: error: --profile needs --target c or opencl, not '{args.target}'"
        )
    if args.target == "opencl":
        require("pyopencl", "opencl", "target 'opencl'")
    check_model_path(args.model, args.format)
    check_file(args.weights, "weights file")
    check_file(args.tuning_log, "tuning log")
    dlp_options = target_desc_options(args.target_desc, args.target)
    dims = parse_dims(args.dims, "--dims", many=False)
    buckets = parse_dims(args.buckets, "--buckets", many=True)
    files = load_inputs(args.input)
    # a .dlpc model's named dims stay symbolic unless --batch binds them (as dlpc.load)
    model = load_model(args.model, args.format, args.weights, args.batch, unbound=None)
    # a model with symbolic dims: its static graph at --dims (or the files' shapes) for
    # the memory check, the random inputs and the reference; the compiled one stays dynamic
    static = api.bind_dims(model, dims, files if args.input else None)
    check_memory(static, f"running {model.name}")  # before any input or buffer is made
    inputs = files if args.input else api.random_inputs(static, args.seed)
    extra: dict = {"buckets": buckets} if buckets else {}
    if args.opencl_profile and args.target != "opencl":
        raise DlpcError(
            f"dlpc-run: error: --opencl-profile needs --target opencl, not '{args.target}'"
        )
    if args.opencl_profile:
        extra["profile"] = args.opencl_profile
    compiled = api.compile(
        model,
        target=args.target,
        opt_level=args.opt_level,
        tuning_log=args.tuning_log,
        **extra,
        **dlp_options,
    )
    outputs = compiled(*inputs)
    expected = api.reference(static, inputs)
    ok = True
    print(
        f"{model.name}: target {args.target}, -O{args.opt_level}, "
        f"{len(inputs)} input(s) {'from files' if args.input else f'seed {args.seed}'}"
    )
    if args.target == "opencl":  # the device it ran on, and its launch plans
        function = _opencl_function(compiled)
        if hasattr(function, "plans"):  # (a split model's parts: none to name)
            name, plans = getattr(function, "device_name", "?"), getattr(function, "plans", "?")
            print(f"device: {name} ({plans} launch plans)")
    for i, (y, r) in enumerate(zip(outputs, expected)):
        abs_diff, rel_diff = difference(y, r)
        good, said, worst = verdict(y, r, args.rtol, args.atol)
        ok &= good
        print(f"output {i}: {summary(y)}")
        print(
            f"  vs reference: max abs diff {abs_diff:.3g}, max rel diff {rel_diff:.3g} "
            f"(rtol {args.rtol:g}, atol {args.atol:g}): {said}"
        )
        if worst:
            print(f"  {worst}")
    # compared: dropped (with the loop's last pair) before the timed runs make their own
    outputs = expected = y = r = None
    seconds = compiled.time(*inputs, repeat=args.repeat)
    print(f"time: {seconds * 1e3:.4g} ms per run (median of {args.repeat})")
    if isinstance(compiled, api.DynamicCompiledModel):
        stats = compiled.stats
        short = f", {stats['short']} at its short kernels" if stats.get("short") else ""
        print(f"dims: {stats['calls']} guarded calls, {stats['compiles']} compile(s){short}")
        last = compiled.function.last
        assert isinstance(last, api.CompiledModel)  # (the program these inputs ran)
        if args.profile:  # (of the program that ran: the one program takes padded inputs)
            given, inputs = inputs, generic_arguments(compiled, inputs)
            if inputs is not given:
                generic = compiled.function.generic
                assert generic is not None  # (generic_arguments padded for it)
                sizes = ", ".join(f"{k}={v}" for k, v in generic.max.items())
                print(
                    f"note: the one program for every value of the dims: the profile's "
                    f"FLOPs and bytes are counted at its maxima ({sizes})"
                )
        compiled = last
        if buckets:  # (its inputs are padded: the profile below would need them too)
            args.profile = False
    if args.profile and args.target == "opencl":  # OpenCL profiling events per kernel
        from dlpc.backends.runtime.opencl_rt import OpenCLFunction, opencl_profile
        from dlpc.backends.runtime.profile import format_profile

        assert isinstance(compiled.artifact, OpenCLFunction)
        rows, call = opencl_profile(compiled.artifact, compiled.lowered, inputs, args.repeat)
        print(f"profile (median of {args.repeat} calls, static FLOPs and compulsory bytes):")
        print(format_profile(rows, call))
    elif args.profile:  # the same C with a timer around every kernel call
        from dlpc.backends.runtime.cbuild import CFunction
        from dlpc.backends.runtime.chunks import BatchChunks
        from dlpc.backends.runtime.profile import format_profile, profile

        assert isinstance(compiled.artifact, CFunction)  # (--profile is c or opencl, checked)
        run = compiled._direct
        if isinstance(run, BatchChunks):  # (the program of one chunk, on the first one)
            print(f"note: the batch runs in chunks of {run.chunk}: the profile is one chunk's")
            inputs = [x[: run.chunk] for x in inputs]
        rows, call = profile(
            compiled.artifact, compiled.lowered, inputs, repeat=args.repeat, name=model.name
        )
        print(f"profile (median of {args.repeat} calls, static FLOPs and compulsory bytes):")
        print(format_profile(rows, call))
    if args.target == "dlp":  # what the simulator counted on the last run
        from dlpc.backends.runtime.dlp_sim import DlpFunction, format_report

        assert isinstance(compiled.artifact, DlpFunction)
        print(format_report(compiled.artifact.report))
    if args.check and not ok:
        print(
            "dlpc-run: error: output differs from the numpy reference beyond tolerance",
            file=sys.stderr,
        )
        return 1
    return 0


def generic_arguments(compiled, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The arguments the one program of a model with symbolic dims (runtime/dynamic.py
    Generic) takes for `inputs`: each input at the top-left of a buffer of its maximum
    shape, then the dims; `inputs` themselves for a program of one binding."""
    function = compiled.function
    generic = getattr(function, "generic", None)
    if generic is None or generic.fn is None or not generic.full:
        return inputs
    bound = function.bind(inputs)
    out = []
    for x, full in zip(inputs, generic.full):
        buf = np.zeros(full, x.dtype)
        buf[tuple(slice(0, n) for n in x.shape)] = x
        out.append(buf)
    return [*out, np.array([bound[n] for n in generic.names], np.int64)]


def _opencl_function(compiled):
    """The OpenCL function a compiled model ran (a dynamic model's last), or None."""
    from dlpc import api

    if isinstance(compiled, api.DynamicCompiledModel):
        compiled = compiled.function.last
    return getattr(compiled, "artifact", None)


def main(argv: list[str] | None = None) -> int:
    return run_guarded(lambda: run(argv), tool="dlpc-run")


if __name__ == "__main__":
    sys.exit(main())
