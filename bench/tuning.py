"""End-to-end latency of every example: dlpc's numpy reference, dlpc -O2 with default
schedules ("untuned"), dlpc -O2 with the schedules of a tuning log ("tuned"),
onnxruntime and torch eager. One run, one table, ms (median of `--repeat` calls).

    python bench/tuning.py [--tune-trials 40] [--log bench/tune.jsonl] [--models mlp,resnet]
                           [--threads 1]

`--tune-trials N` first runs the tuner on each model (N measurements per model, appended
to the log), as `dlpc-tune model --trials N --log LOG` would. Backends that are not
installed print n/a; outputs are checked against the reference (a mismatch prints
"wrong"). torch and onnxruntime come from bench/models.py (the graph IR run op by op
with torch.nn.functional; its ONNX export for onnxruntime). Threads: OMP_NUM_THREADS,
torch.set_num_threads and the onnxruntime intra-op pool are set to `--threads`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _models_bench():
    spec = importlib.util.spec_from_file_location("dlpc_bench_models", ROOT / "bench" / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tune_model(path: Path, log: str, trials: int) -> None:
    from dlpc import api
    from dlpc.diagnostics import progress
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune.search import Tuner

    model = api.load(path)
    module = model.module.clone()
    weights = dict(api.check_weights(model))
    lower(module, "loop", PipelineOptions(opt_level=2), weights=weights)
    tuner = Tuner(module, log=log, threads=1, repeat=3, verify=2)
    with progress(total=trials, desc=f"tune {path.stem}", unit="trial") as bar:
        for ev in tuner.run(trials=trials):
            if ev.trial < 0:
                continue
            bar.update(ev.trial - bar.n)
            state = f"{ev.time * 1e3:.3f} ms" if ev.ok else f"failed: {(ev.error or '')[:40]}"
            bar.set_postfix_str(f"{ev.kernel[:24]} {state}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp,lenet,resnet,mobilenet,transformer")
    ap.add_argument("--log", default=str(ROOT / "bench" / "tune.jsonl"))
    ap.add_argument("--tune-trials", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    from dlpc import api

    mb = _models_bench()
    paths = [ROOT / "examples" / f"{m}.dlpc" for m in args.models.split(",")]
    if args.tune_trials:
        for p in paths:
            tune_model(p, args.log, args.tune_trials)
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass
    cols = ["numpy ref", "dlpc -O2", "dlpc tuned", "onnxruntime", "torch", "tuned/torch"]
    print(f"{'model (ms)':14s}" + "".join(f"{c:>13s}" for c in cols))
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            model = api.load(path)
            inputs = api.random_inputs(model, seed=0)
            expected = api.reference(model, inputs)

            def dlpc(target, log=None):
                def make():
                    compiled = api.compile(model, target=target, opt_level=2, tuning_log=log)
                    return lambda xs: compiled(*xs)

                return make

            def ort():
                run = mb.ort_runner(
                    model, inputs, Path(tmp), "torch" if mb.have("torch") else "graph"
                )
                return run

            makers = [
                dlpc("numpy"),
                dlpc("c"),
                dlpc("c", args.log if Path(args.log).exists() else None),
                ort,
                lambda: mb.torch_runner(model)[1],
            ]
            row = []
            for make in makers:
                try:
                    row.append(mb.measure(make, inputs, expected, args.repeat, args.warmup))
                except Exception as e:  # noqa: BLE001 - a backend failing prints its error
                    row.append("error")
                    print(f"{path.stem}: {type(e).__name__}: {e}", file=sys.stderr)
            try:
                ratio = f"{float(row[4]) / float(row[2]):.2f}x"
            except ValueError:
                ratio = "n/a"
            print(f"{path.stem:14s}" + "".join(f"{c:>13s}" for c in row + [ratio]), flush=True)
    print("tuned/torch > 1x: dlpc tuned is faster than torch eager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
