"""Distributed figures in one run: all-reduce latency and bandwidth through dlpc against
raw mpi4py on the same buffers (2 ranks), the data-parallel training step on 1 and 2
ranks, and pipeline step times against the bubble's (p - 1) / (m + p - 1).

    python bench/distributed.py [--repeat 30]        # starts its own mpiexec runs
    python bench/distributed.py --allreduce          # that section alone (also --overlap,
                                                     # --pipeline, --ps-staleness)

Rows:
- all_reduce (float32 sum, 2 ranks, 8 B to 16 MiB): seconds per call of
  `comm.Allreduce(x, out)` on preallocated buffers (raw), of dlpc's communicator (what a
  compiled numpy program's comm op calls: `COMM.all_reduce`), of a compiled numpy
  program holding one `comm.all_reduce`, and of the same program compiled for C (the MPI
  C driver, dlpc.runtime.comm_native), all on the same input array. The four are timed
  in turns (each turn a barrier then a run of calls of each, in a random order), so
  that they share the load; the median and the minimum over the turns, the ratio
  raw / dlpc time (1.0: no overhead), and the bandwidth (the buffer's size over the time).
- dp step: examples/mlp.dlpc, Adam, global batch 32, median seconds per step: numpy on
  1 rank (1 and 2 BLAS threads) and 2 ranks (1 thread each: the 2 cores); C (the driver)
  on 1 and 2 ranks.
- dp overlap (`--overlap`, or within the full run): the same step on the C target on 2
  ranks, its gradient all-reduce blocking against overlapped (MPI_Iallreduce started after
  the segment that computes a bucket, waited for before the update, all inside the C
  driver), with 0.25 MiB buckets (several) and 25 MiB (one).
- pipeline: examples/mlp.dlpc's forward and loss, PIPELINE_ROWS rows per micro-batch,
  p = 2, 3, 4 stages (the stage programs of graph-pipeline, gradients only, numpy):
  step seconds for m = 1, 2, 4, 8 micro-batches under gpipe and 1f1b (and 2bw on 2);
  each stage's idle fraction (its time waiting in recv over its step) and their mean,
  beside the bubble (p - 1) / (m + p - 1) of the schedules' idealised cost model;
  stage 0's peak traced memory (numpy's allocations, tracemalloc) in one step: GPipe
  keeps every micro-batch's activations until its backward, 1F1B at most p.
- ps staleness (`--ps-staleness`, this section alone): dlpc.dist.parameter_server on 3
  ranks (a server, 2 workers, worker 1 slowed by 5 ms a step) training a 64-32-10 MLP
  on scikit-learn's digits with SGD (lr 0.5 and 1.0, global batch 32, 112 steps, 2 epochs)
  for staleness s = 0, 1, 4: the loss on all 1797 digits of the server's params after every
  round of 2 updates (numpy, in float64), and the staleness the pulls saw (the pulling
  worker's clock minus the slowest's). Which updates a pull sees depends on timing: the
  curves vary from run to run for s > 0.
The machine is shared: figures vary from run to run; the ratios are the point.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_ROWS = 128  # rows per micro-batch: stage work well above the per-op overheads
SIZES = [8, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]
PROGRAM = """
func.func @main(%x: tensor<Nxf32>) -> tensor<Nxf32> {
  %y = comm.all_reduce sum %x group <world 2> : tensor<Nxf32>
  func.return %y : tensor<Nxf32>
}
"""


def _median(fn, repeat: int, barrier) -> float:
    fn()
    times = []
    for _ in range(repeat):
        barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _interleaved(fns: dict, repeat: int, barrier, calls: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each of `fns`, measured in turns: every turn runs `calls`
    calls of each in a row (after a barrier), in a new random order each turn, so that
    all of them see the same load and none always follows the same one; one figure per
    turn and name."""
    names = list(fns)
    for name in names:
        fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(0)  # (the same order on every rank)
    for _ in range(repeat):
        order.shuffle(names)
        for name in names:
            fn = fns[name]
            barrier()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
    return times


def worker_allreduce(repeat: int) -> None:
    """raw mpi4py, dlpc's communicator, a compiled numpy program and a compiled C program
    (the MPI C driver: dlpc.runtime.comm_native) on the same input buffer each size."""
    import dlpc
    from dlpc.runtime.mpi import world

    C = world()
    raw = C.world
    group = (C.size, (), (), "")
    rows = []
    for size in SIZES:
        n = max(size // 4, 2)
        x = np.ones(n, np.float32)
        out = np.empty_like(x)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ar.mlir"
            path.write_text(PROGRAM.replace("N", str(n)))
            model = dlpc.load(path)
        on_numpy = dlpc.compile(model, target="numpy")
        on_c = dlpc.compile(model, target="c")
        assert on_c.artifact.native is not None, on_c.artifact.native_reason
        fns = {
            "raw": lambda x=x, out=out: raw.Allreduce(x, out),
            "dlpc": lambda x=x: C.all_reduce([x], "sum", group),
            "program": lambda fn=on_numpy, x=x: fn(x),
            "c": lambda fn=on_c, x=x: fn(x),
        }
        # calls in a row per turn: a turn of at least ~1 MiB moved (fewer timer and
        # barrier effects on the small sizes)
        calls = max(1, min(100, (1 << 20) // (n * 4)))
        times = _interleaved(fns, repeat, raw.Barrier, calls)
        row = {"bytes": n * 4}
        for name, ts in times.items():
            row[name] = statistics.median(ts)
            row[f"{name}_min"] = min(ts)
        rows.append(row)
    if C.rank == 0:
        print(json.dumps(rows))


def worker_dp(repeat: int, target: str = "numpy") -> None:
    from dlpc.dist import DataParallelTrainer
    from dlpc.runtime.mpi import world

    C = world()
    trainer = DataParallelTrainer(
        ROOT / "examples" / "mlp.dlpc", "cross_entropy", "adam", 32, target=target
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 784)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int64)
    t = _median(lambda: trainer.step(x, y), repeat, C.world.Barrier)
    if C.rank == 0:
        print(json.dumps({"ranks": C.size, "step": t}))


def worker_overlap(repeat: int) -> None:
    """The data-parallel step on C: in the MPI C driver with its gradient all-reduce
    overlapped and blocking (SplitFunction.overlap), and its segments run from Python
    between mpi4py calls (the fallback, overlapped), in turns so that all see the same
    load."""
    from dlpc.dist import DataParallelTrainer
    from dlpc.runtime.mpi import world

    C = world()
    out = {}
    for bucket in (0.25, 25.0):
        trainer = DataParallelTrainer(
            ROOT / "examples" / "mlp.dlpc", "cross_entropy", "adam", 32, target="c",
            bucket_mb=bucket,
        )  # fmt: skip
        fn = trainer.compiled.artifact
        native = fn.native
        assert native is not None, fn.native_reason
        rng = np.random.default_rng(0)
        x = rng.standard_normal((32, 784)).astype(np.float32)
        y = rng.integers(0, 10, 32).astype(np.int64)

        def variant(driver: bool, overlap: bool, fn=fn, native=native, t=trainer, x=x, y=y):
            def step():
                fn.native, fn.overlap = (native if driver else None), overlap
                t.step(x, y)

            return step

        fns = {
            "overlap": variant(True, True),
            "blocking": variant(True, False),
            "python": variant(False, True),
        }
        times = _interleaved(fns, repeat, C.world.Barrier)
        fn.native, fn.overlap = native, True
        buckets = sum(1 for s in fn.steps if getattr(s, "name", "") == "comm.all_reduce") - 2
        out[bucket] = {"buckets": buckets, **{k: statistics.median(v) for k, v in times.items()}}
    if C.rank == 0:
        print(json.dumps(out))


def worker_pipeline(repeat: int, opt_level: int = 0) -> None:
    import tracemalloc

    from xdsl.dialects.builtin import ModuleOp, StringAttr

    from dlpc import api
    from dlpc.dist.pipeline import forward_and_loss
    from dlpc.model import Model
    from dlpc.passes.dist.pipeline import pipeline
    from dlpc.passes.train.losses import Loss
    from dlpc.runtime.mpi import world

    C = world()
    rows = PIPELINE_ROWS
    micro = api.load(ROOT / "examples" / "mlp.dlpc", batch=rows)
    one = forward_and_loss(micro.module, Loss("cross_entropy"))
    rng = np.random.default_rng(0)
    out = []
    repeat = max(repeat // 3, 5)  # (a step of 8 micro-batches takes tens of ms)
    for schedule in ("gpipe", "1f1b", "2bw") if C.size == 2 else ("gpipe", "1f1b"):
        for m in (1, 2, 4, 8):
            # -O0 by default: the stage program as graph-pipeline wrote it, each value
            # alive from its op to its last reader (what the schedule decides)
            programs = pipeline(one.clone(), C.size, m, schedule)
            mine = programs[C.rank]
            mine.sym_name = StringAttr("main")
            mine.detach()
            weights = dict(micro.weights)
            if schedule == "2bw":  # the stashed version W(t-1): W(0) at the first step
                weights.update({f"pipeline.stash.{n}": v for n, v in micro.weights.items()})
            stage = Model(ModuleOp([mine]), weights, "stage")
            names = api.check_weights(stage)
            fn = api.compile(stage, target="numpy", fold_weights=False, opt_level=opt_level)
            x = rng.standard_normal((m * rows, 784)).astype(np.float32)
            t = rng.integers(0, 10, m * rows).astype(np.int64)
            fn(x, t)
            step = _median(lambda fn=fn, x=x, t=t: fn(x, t), repeat, C.world.Barrier)
            # idle: the time in recv over the time in the step, summed over the same calls
            C.recv_seconds, busy = 0.0, 0.0
            for _ in range(repeat):
                C.world.Barrier()
                start = time.perf_counter()
                fn(x, t)
                busy += time.perf_counter() - start
            idle = C.recv_seconds / busy * step  # (as seconds of the median step)
            tracemalloc.start()
            fn(x, t)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            del names
            rows_out = C.world.gather((step, idle, peak), root=0)
            if C.rank == 0:
                p = C.size
                out.append(
                    {
                        "schedule": schedule,
                        "p": p,
                        "m": m,
                        "step": max(r[0] for r in rows_out),
                        "idle": sum(r[1] / r[0] for r in rows_out) / p,
                        "stages": [r[1] / r[0] for r in rows_out],
                        "peak0": rows_out[0][2],
                        "bubble": (p - 1) / (m + p - 1),
                    }
                )
    if C.rank == 0:
        print(json.dumps(out))


PS_MODEL = """model digits_mlp(x: f32[B, 64]) {
  param fc1.weight: f32[32, 64] = kaiming(seed=1)
  param fc1.bias: f32[32] = zeros()
  param fc2.weight: f32[10, 32] = kaiming(seed=2, gain=1.0)
  param fc2.bias: f32[10] = zeros()
  return linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
}
"""
PS_STALENESS, PS_STEPS, PS_BATCH, PS_LRS = (0, 1, 4), 112, 32, (0.5, 1.0)


def _digits_loss(w: dict, x: np.ndarray, y: np.ndarray) -> float:
    """The mean cross-entropy of PS_MODEL with weights w on (x, y)."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    z = h @ w["fc2.weight"].T + w["fc2.bias"]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def worker_ps(repeat: int) -> None:
    """Each staleness of PS_STALENESS on the same batches (`repeat` unused)."""
    from sklearn.datasets import load_digits

    from dlpc.dist.parameter_server import AsyncParameterServer
    from dlpc.runtime.mpi import world

    C = world()
    digits = load_digits()
    x = (np.asarray(digits.data) / 16.0).astype(np.float32)  # type: ignore[union-attr]
    y = np.asarray(digits.target, np.int64)  # type: ignore[union-attr]
    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(len(x)) for _ in range(2)])[: PS_STEPS * PS_BATCH]
    xs = x[order].reshape(PS_STEPS, PS_BATCH, 64)
    ys = y[order].reshape(PS_STEPS, PS_BATCH)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "digits_mlp.dlpc"
        model.write_text(PS_MODEL)
        out = []
        for lr, s in [(lr, s) for lr in PS_LRS for s in PS_STALENESS]:
            ps = AsyncParameterServer(
                model, lr=lr, batch_size=PS_BATCH, staleness=s, delay={1: 0.005}
            )
            run = ps.run(xs, ys)
            seen = [p.clock - p.slowest for p in run.pulls]
            out.append(
                {
                    "lr": lr,
                    "s": s,
                    "curve": [_digits_loss(h, x, y) for h in run.history],
                    "max": max(seen),
                    "mean": float(np.mean(seen)),
                }
            )
    if C.rank == 0:
        print(json.dumps(out))


def ps_staleness_table() -> None:
    rows = mpirun(3, "ps", 1)
    marks = [1, 7, 14, 28, 56, 84, 112]
    print("parameter server, digits MLP, SGD, 2 workers (worker 1 +5 ms a step)\n")
    print("loss on all digits after round k (2 updates a round)\n")
    print("| lr | s | staleness seen (max / mean) | " + " | ".join(f"k={k}" for k in marks) + " |")
    print("|---|---|---|" + "---|" * len(marks))
    for r in rows:
        curve = r["curve"]
        cells = " | ".join(f"{curve[k - 1]:.3f}" for k in marks if k <= len(curve))
        print(f"| {r['lr']} | {r['s']} | {r['max']} / {r['mean']:.2f} | {cells} |")


def overlap_table(repeat: int) -> None:
    print(
        "data-parallel step on C, mlp, Adam, global batch 32, 2 ranks (median per step, in turns)\n"
    )
    print(
        "| bucket MiB | gradient buckets | C driver, blocking | C driver, overlapped "
        "| segments from Python, overlapped | blocking / overlapped | Python / driver |"
    )
    print("|---|---|---|---|---|---|---|")
    for bucket, r in mpirun(2, "overlap", repeat).items():
        print(
            f"| {bucket} | {r['buckets']} | {r['blocking'] * 1e3:.2f} ms | "
            f"{r['overlap'] * 1e3:.2f} ms | {r['python'] * 1e3:.2f} ms | "
            f"{r['blocking'] / r['overlap']:.2f} | {r['python'] / r['overlap']:.2f} |"
        )


def mpirun(n: int, what: str, repeat: int, threads: int = 1):
    """The worker on n ranks, each with `threads` BLAS threads (one per core: more
    ranks x threads than cores and the spinning threads starve the computing ones)."""
    command = ["mpiexec", "-n", str(n), sys.executable, __file__, "--worker", what]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    result = subprocess.run(
        [*command, "--repeat", str(repeat)], capture_output=True, text=True, timeout=600, env=env
    )
    if result.returncode:
        sys.exit(f"bench/distributed.py: {what} on {n} ranks failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--worker", choices=("allreduce", "dp", "dp-c", "overlap", "pipeline", "ps")
    )
    parser.add_argument(
        "--pipeline", action="store_true", help="only the pipeline's step, idle and bubble"
    )
    parser.add_argument(
        "--allreduce", action="store_true", help="only all_reduce through dlpc vs raw mpi4py"
    )
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="only the data-parallel step on C with blocking vs overlapped all-reduce",
    )
    parser.add_argument(
        "--ps-staleness",
        action="store_true",
        help="only the parameter server's convergence for staleness 0, 1, 4",
    )
    args = parser.parse_args()
    if args.worker:
        workers = {
            "allreduce": worker_allreduce,
            "dp": worker_dp,
            "dp-c": lambda repeat: worker_dp(repeat, "c"),
            "overlap": worker_overlap,
            "pipeline": worker_pipeline,
            "ps": worker_ps,
        }
        workers[args.worker](args.repeat)
        return
    if args.ps_staleness:
        ps_staleness_table()
        return
    if args.overlap:
        overlap_table(args.repeat)
        return
    if args.pipeline:
        pipeline_table(args.repeat)
        return
    if args.allreduce:
        allreduce_table(args.repeat)
        return
    allreduce_table(args.repeat)
    print("\ndata-parallel step, mlp, Adam, global batch 32 (median per step)\n")
    print("| target | ranks | BLAS threads per rank | step | samples/s |")
    print("|---|---|---|---|---|")
    for what, n, threads in (
        ("dp", 1, 1),
        ("dp", 1, 2),
        ("dp", 2, 1),
        ("dp-c", 1, 1),
        ("dp-c", 2, 1),
    ):
        r = mpirun(n, what, args.repeat, threads)
        target = "c" if what == "dp-c" else "numpy"
        print(f"| {target} | {n} | {threads} | {r['step'] * 1e3:.2f} ms | {32 / r['step']:.0f} |")
    print()
    overlap_table(args.repeat)
    print()
    pipeline_table(args.repeat)


def allreduce_table(repeat: int) -> None:
    print("all_reduce sum of float32, 2 ranks, seconds per call interleaved in turns:")
    print("median over the turns; the ratios raw/dlpc of the medians, and of the")
    print("minima in brackets (the least loaded turn of each)\n")
    print(
        "| bytes | raw mpi4py | dlpc COMM | numpy program | C program | raw/COMM | raw/numpy "
        "| raw/C | GB/s raw | GB/s C |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in mpirun(2, "allreduce", repeat):
        gb = lambda t, r=r: r["bytes"] / t / 1e9  # noqa: E731
        us = lambda t: f"{t * 1e6:.1f} us"  # noqa: E731
        ratio = lambda k, r=r: (  # noqa: E731
            f"{r['raw'] / r[k]:.2f} ({r['raw_min'] / r[k + '_min']:.2f})"
        )
        print(
            f"| {r['bytes']} | {us(r['raw'])} | {us(r['dlpc'])} | {us(r['program'])} | "
            f"{us(r['c'])} | {ratio('dlpc')} | {ratio('program')} | {ratio('c')} | "
            f"{gb(r['raw']):.2f} | {gb(r['c']):.2f} |"
        )


def pipeline_table(repeat: int) -> None:
    print(
        f"pipeline, mlp, p stages, {PIPELINE_ROWS} rows per micro-batch (median per step); "
        "idle: each stage's time in recv over its step\n"
    )
    print(
        "| p | schedule | m | step | idle per stage | idle (mean) | (p-1)/(m+p-1) "
        "| stage 0 peak MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for p in (2, 3, 4):
        for r in mpirun(p, "pipeline", repeat):
            idle = " / ".join(f"{i:.2f}" for i in r["stages"])
            print(
                f"| {r['p']} | {r['schedule']} | {r['m']} | {r['step'] * 1e3:.2f} ms | {idle} | "
                f"{r['idle']:.2f} | {r['bubble']:.2f} | {r['peak0'] / 2**20:.2f} |"
            )


if __name__ == "__main__":
    main()
