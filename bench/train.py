"""Training-step time per example at batch 32: numpy reference, dlpc C (1 and 2 threads)
and torch eager, in one run, with the ratio dlpc C / torch; and the time to build the
training step (dlpc.train: step builder, graph-autodiff, lowering, C compile), cold (an
empty DLPC_CACHE_DIR) and warm (the same cache again).

    OPENBLAS_NUM_THREADS=1 python bench/train.py [--models mlp,lenet] [--repeat 20]
        [--no-numpy] [--compile-only]

Each row: one optimizer step (forward, loss, backward, Adam update) on a fixed batch, the
median of `--repeat` steps after a warm-up, divided by the batch size. The C threads are
set through OMP_NUM_THREADS in a subprocess per setting (OpenMP reads it once); the
compile times are measured in a subprocess each, so nothing is cached in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 32


def _median_step(step, repeat: int) -> float:
    step()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _batch(example: str):
    rng = np.random.default_rng(0)
    shape = (BATCH, 784) if example == "mlp" else (BATCH, 1, 28, 28)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, BATCH)


def dlpc_time(example: str, target: str, repeat: int) -> float:
    import dlpc

    trainer = dlpc.train(
        f"examples/{example}.dlpc",
        optimizer=dlpc.optim.Adam(lr=1e-3),
        batch_size=BATCH,
        target=target,
    )
    x, y = _batch(example)
    return _median_step(lambda: trainer.step(x, y), repeat) / BATCH


def torch_time(example: str, threads: int, repeat: int) -> float:
    import torch

    torch.set_num_threads(threads)
    if example == "mlp":
        net = torch.nn.Sequential(
            torch.nn.Linear(784, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
        )
    else:
        net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 6, 5, padding=2),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(6, 16, 5),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(400, 120),
            torch.nn.ReLU(),
            torch.nn.Linear(120, 84),
            torch.nn.ReLU(),
            torch.nn.Linear(84, 10),
        )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = (torch.tensor(a) for a in _batch(example))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    return _median_step(step, repeat) / BATCH


def _child(example: str, threads: int, repeat: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    code = (
        "import json, sys; sys.path.insert(0, 'bench'); import train as t; "
        f"print(json.dumps(t.dlpc_time({example!r}, 'c', {repeat})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def compile_time(example: str) -> list[float]:
    """Seconds to build the C training step (in this process): [total, of which the
    compiler's passes (pipeline.timing; the rest is the step builder, C emission and
    the C compile, or on a cache hit the artifact's load)]."""
    import dlpc
    from dlpc.passes import pipeline

    start = time.perf_counter()
    with pipeline.timing() as rows:
        trainer = dlpc.train(
            f"examples/{example}.dlpc",
            optimizer=dlpc.optim.Adam(lr=1e-3),
            batch_size=BATCH,
            target="c",
        )
    total = time.perf_counter() - start
    assert trainer.compiled is not None
    return [total, sum(t for _, t in rows)]


def _compile_child(example: str, cache: str) -> list[float]:
    env = dict(os.environ, DLPC_CACHE_DIR=cache, OMP_NUM_THREADS="1")
    code = (
        "import json, sys; sys.path.insert(0, 'bench'); import train as t; "
        f"print(json.dumps(t.compile_time({example!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def compile_times(example: str) -> tuple[list[float], list[float]]:
    """(cold, warm) `compile_time`s, each in a fresh process. Warm hits the artifact cache
    only when no source of dlpc changed in between (its key hashes them: in a working
    tree others are editing, 'warm' recompiles)."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        return _compile_child(example, cache), _compile_child(example, cache)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,lenet", help="comma-separated examples")
    p.add_argument("--repeat", type=int, default=20, help="timed steps per setting")
    p.add_argument("--no-numpy", action="store_true", help="skip the numpy reference column")
    p.add_argument("--compile-only", action="store_true", help="only the compile times")
    args = p.parse_args()
    examples = args.models.split(",")
    print(f"building the C training step (Adam, cross-entropy), batch {BATCH}: seconds")
    print("| model | cold | cold: passes | cold: the rest (step builder, C) | warm |")
    print("|---|---|---|---|---|")
    for example in examples:
        (cold, passes), (warm, _) = compile_times(example)
        print(
            f"| {example} | {cold:.1f} | {passes:.1f} | {cold - passes:.1f} | {warm:.1f} |",
            flush=True,
        )
    if args.compile_only:
        return 0
    print(f"training step (Adam, cross-entropy), batch {BATCH}: microseconds per example")
    head = [
        "model",
        "numpy",
        "dlpc C 1t",
        "dlpc C 2t",
        "torch 1t",
        "torch 2t",
        "C/torch 1t",
        "C/torch 2t",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for example in examples:
        ref = (
            float("nan") if args.no_numpy else dlpc_time(example, "numpy", max(args.repeat // 4, 3))
        )
        c1, c2 = (_child(example, t, args.repeat) for t in (1, 2))
        t1, t2 = (torch_time(example, t, args.repeat) for t in (1, 2))
        us = [f"{v * 1e6:.1f}" for v in (ref, c1, c2, t1, t2)]
        print(
            f"| {example} | " + " | ".join(us) + f" | {c1 / t1:.2f} | {c2 / t2:.2f} |", flush=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
