"""Compiles and latency while the sequence length sweeps, one dynamic-axes ONNX file:
symbolic (ONE program with runtime extents serves every length; at batch 1 and a length
of 1-8 it takes kernels of its own, compile(short=)), per binding (the
symbolic graph bound per length), bucketed, specialised per length (a static import
with input_shapes) and onnxruntime, side by side in one run.

    python bench/dynamic.py [--lengths 1,2,3,5,8,17,32,50,64,100,128] [--buckets 16,32,64,128]
                            [--d 64] [--heads 4] [--reps 50] [--batches 1,2,4,8,13,32,64]

A second table sweeps the batch of a small CNN: the symbolic program, one program per
batch and `tiles={"batch": 8}` (two programs serve every batch) against onnxruntime.

The model is an attention encoder block exported by PyTorch's TorchScript exporter with
dynamic batch and sequence axes (test_dynamic.SmallEncoder, wider). Compiles run against
a fresh DLPC_CACHE_DIR (a temporary folder), so each is a real C compile; "compile s" is
the wall time of the calls that compiled (import + pipeline + C compiler). Latency is the
median of `--reps` calls at batch 1 after 3 warm-up calls, in ms, per length; every
strategy's output is checked against onnxruntime first (max abs difference printed).
`--threads` (default 1) sets OMP_NUM_THREADS and onnxruntime's thread counts.
Figures taken on a loaded machine are noisy; the columns of one row are interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def export(path: str, d: int, heads: int, maxlen: int) -> None:
    import torch

    sys.path.insert(0, str(ROOT / "test" / "python"))
    from test_dynamic import SmallEncoder  # (the test's model, wider)

    torch.manual_seed(0)
    model = SmallEncoder(d=d, heads=heads, vocab=100, maxlen=maxlen).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.randint(0, 100, (1, 7)),),
            path,
            input_names=["ids"],
            output_names=["y"],
            dynamic_axes={"ids": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
            dynamo=False,
        )


def median_ms(fn, x, reps: int) -> float:
    for _ in range(3):
        fn(x)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="1,2,3,5,8,17,32,50,64,100,128")
    p.add_argument("--buckets", default="16,32,64,128")
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--threads", type=int, default=1, help="OpenMP and onnxruntime threads")
    p.add_argument(
        "--batches", default="1,2,4,8,13,32,64", help="the CNN batch sweep ('' skips it)"
    )
    args = p.parse_args()
    lengths = [int(v) for v in args.lengths.split(",")]
    buckets = [int(v) for v in args.buckets.split(",")]
    # one thread each by default: on a shared machine an OpenMP barrier waits for a
    # descheduled thread, which times the scheduler rather than the program
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    tmp = tempfile.mkdtemp(prefix="dlpc-dynamic-")
    os.environ["DLPC_CACHE_DIR"] = str(Path(tmp) / "cache")  # every compile is a real one

    import onnxruntime as ort

    import dlpc
    from dlpc.api import compile as dlpc_compile
    from dlpc.frontends.onnx import load_model

    path = str(Path(tmp) / "encoder.onnx")
    export(path, args.d, args.heads, max(max(lengths), max(buckets)))
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = args.threads
    sess = ort.InferenceSession(path, options)
    symbolic = dlpc.load(path)
    print(
        f"encoder d={args.d} heads={args.heads}: symbolic graph "
        f"{'kept' if symbolic.ir is not None else 'not kept'}; batch 1; lengths {lengths}; "
        f"buckets {buckets}"
    )
    longest = max(max(lengths), max(buckets))
    one = dlpc_compile(symbolic, target="c", max_dims={"batch": 64, "seq": longest})
    per_binding = dlpc_compile(symbolic, target="c", symbolic=False)
    bucketed = dlpc_compile(symbolic, target="c", buckets={"seq": buckets})
    compile_s = {"symbolic": 0.0, "binding": 0.0, "bucketed": 0.0, "specialised": 0.0}
    compiles = {"symbolic": 0, "binding": 0, "bucketed": 0, "specialised": 0}
    header = (
        f"{'seq':>4} | {'symbolic ms':>11} | {'per binding ms':>14} | {'bucketed ms':>11} "
        f"(bucket) | {'specialised ms':>14} | {'sym/spec':>8} | {'onnxruntime ms':>14} | "
        f"max |diff| vs ort"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for n in lengths:
        x = rng.integers(0, 100, (1, n)).astype(np.int64)
        expected = sess.run(None, {"ids": x})[0]
        row = {}
        for name, fn in (("symbolic", one), ("binding", per_binding), ("bucketed", bucketed)):
            before = fn.stats["compiles"]
            t = time.perf_counter()
            got = fn(x)[0]
            if fn.stats["compiles"] > before:
                compile_s[name] += time.perf_counter() - t
                compiles[name] += 1
            row[name] = (fn, float(np.abs(got - expected).max()))
        t = time.perf_counter()
        static = dlpc_compile(load_model(path, input_shapes={"ids": (1, n)}), target="c")
        compile_s["specialised"] += time.perf_counter() - t
        compiles["specialised"] += 1
        got = static(x)[0]
        row["specialised"] = (static, float(np.abs(got - expected).max()))
        ms = {k: median_ms(fn, x, args.reps) for k, (fn, _) in row.items()}
        ms["ort"] = median_ms(lambda a: sess.run(None, {"ids": a}), x, args.reps)
        bucket = next(b for b in buckets if b >= n)
        worst = max(err for _, err in row.values())
        ratio = ms["symbolic"] / ms["specialised"]
        print(
            f"{n:>4} | {ms['symbolic']:>11.4f} | {ms['binding']:>14.4f} | "
            f"{ms['bucketed']:>11.4f} ({bucket:>6}) | {ms['specialised']:>14.4f} | "
            f"{ratio:>8.2f} | {ms['ort']:>14.4f} | {worst:.2g}"
        )
    print()
    for name in ("symbolic", "binding", "bucketed", "specialised"):
        print(f"{name:>12}: {compiles[name]} compiles, {compile_s[name]:.1f} s compiling")
    print(
        f"symbolic: {one.stats.get('short', 0)} of {one.stats['calls']} calls took its short kernels"
    )
    if args.batches:
        print()
        batch_sweep(tmp, [int(v) for v in args.batches.split(",")], args)
    return 0


def batch_sweep(tmp: str, batches: list[int], args) -> None:
    """The CNN of test_dynamic with a dynamic batch: per binding against tiles={"batch": 8}
    (two programs, at 8 and 1, serve every batch) and onnxruntime."""
    import onnxruntime as ort
    import torch

    import dlpc
    from dlpc.api import compile as dlpc_compile

    sys.path.insert(0, str(ROOT / "test" / "python"))
    from test_dynamic import SmallCNN

    path = str(Path(tmp) / "cnn.onnx")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            SmallCNN().eval(),
            (torch.randn(2, 1, 16, 16),),
            path,
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
            dynamo=False,
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = args.threads
    sess = ort.InferenceSession(path, options)
    model = dlpc.load(path)
    one = dlpc_compile(model, target="c", max_dims={"batch": max(batches)})
    per_binding = dlpc_compile(model, target="c", symbolic=False)
    tiled = dlpc_compile(model, target="c", tiles={"batch": 8})
    header = (
        f"{'batch':>5} | {'symbolic ms':>11} | {'per binding ms':>14} | "
        f"{'tiled (8, 1) ms':>15} | {'onnxruntime ms':>14} | max |diff|"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for b in batches:
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        expected = sess.run(None, {"x": x})[0]
        fns = (one, per_binding, tiled)
        worst = max(float(np.abs(fn(x)[0] - expected).max()) for fn in fns)
        ms = [median_ms(fn, x, args.reps) for fn in fns]
        ms.append(median_ms(lambda a: sess.run(None, {"x": a}), x, args.reps))
        print(
            f"{b:>5} | {ms[0]:>11.3f} | {ms[1]:>14.3f} | {ms[2]:>15.3f} | {ms[3]:>14.3f} | "
            f"{worst:.2g}"
        )
    print()
    print(
        f"symbolic: {one.stats['compiles']} compiles; per binding: "
        f"{per_binding.stats['compiles']}; tiled: {tiled.stats['compiles']}"
    )


if __name__ == "__main__":
    sys.exit(main())
