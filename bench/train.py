"""Training-step time per example at batch 32: numpy reference, dlpc C (1 and 2 threads)
and torch eager, in one run, with the ratio dlpc C / torch; and the time to build the
training step (dlpc.train: step builder, graph-autodiff, lowering, C compile), cold (an
empty DLPC_CACHE_DIR) and warm (the same cache again), wall and CPU (this process's and
the C compilers').

    OPENBLAS_NUM_THREADS=1 python bench/train.py [--models mlp,lenet,...] [--repeat 20]
        [--no-numpy] [--compile-only] [--profile resnet] [--clock cpu]

Each row: one optimizer step (forward, loss, backward, Adam update) on a fixed batch, the
median of `--repeat` steps after a warm-up, divided by the batch size. The examples'
losses: cross-entropy on class labels (mlp, lenet, resnet), MSE against a target of the
output's shape (mobilenet and transformer end in features); torch runs the same layers
(batch norm in training mode, as the step's). The C threads are set through
OMP_NUM_THREADS in a subprocess per setting (OpenMP reads it once); the compile times are
measured in a subprocess each, so nothing is cached in memory. `--profile M`: the
per-kernel profile of M's step on one thread (backends/runtime/profile.py), slowest first.
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


def _clock():
    """The step clock: wall time, or with DLPC_BENCH_CLOCK=cpu (`--clock cpu`) this
    process's CPU time, which on a loaded machine leaves out the time other processes
    held the core (one thread only: with more it sums their CPU)."""
    return time.process_time if os.environ.get("DLPC_BENCH_CLOCK") == "cpu" else time.perf_counter


def _median_step(step, repeat: int) -> float:
    clock = _clock()
    step()
    times = []
    for _ in range(repeat):
        start = clock()
        step()
        times.append(clock() - start)
    return statistics.median(times)


# example -> (input shape without the batch, the target: "labels" (10 classes) or the
# shape of an MSE target)
EXAMPLES = {
    "mlp": ((784,), "labels"),
    "lenet": ((1, 28, 28), "labels"),
    "resnet": ((3, 32, 32), "labels"),
    "mobilenet": ((32, 32, 32), (64, 32, 32)),
    "transformer": ((16, 64), (16, 64)),
}


def _loss(example: str) -> str:
    return "cross_entropy" if EXAMPLES[example][1] == "labels" else "mse"


def _batch(example: str):
    rng = np.random.default_rng(0)
    shape, target = EXAMPLES[example]
    x = rng.standard_normal((BATCH, *shape)).astype(np.float32)
    if target == "labels":
        return x, rng.integers(0, 10, BATCH)
    return x, rng.standard_normal((BATCH, *target)).astype(np.float32)


def _trainer(example: str, target: str):
    import dlpc

    return dlpc.train(
        f"examples/{example}.dlpc",
        loss=_loss(example),
        optimizer=dlpc.optim.Adam(lr=1e-3),
        batch_size=BATCH,
        target=target,
    )


def dlpc_time(example: str, target: str, repeat: int) -> float:
    trainer = _trainer(example, target)
    x, y = _batch(example)
    return _median_step(lambda: trainer.step(x, y), repeat) / BATCH


def dlpc_profile(example: str, repeat: int) -> str:
    """The per-kernel profile of `example`'s C step (its kernels, slowest first)."""
    from dlpc.backends.runtime import cbuild
    from dlpc.backends.runtime.profile import format_profile, profile

    if os.environ.get("DLPC_BENCH_CLOCK") == "cpu":
        # the kernel timers read the thread's CPU clock instead of the monotonic one
        build = cbuild.build

        def cpu_build(source: str, *args, **kwargs):
            if source.startswith("#define DLPC_PROFILE"):
                source = source.replace("CLOCK_MONOTONIC", "CLOCK_THREAD_CPUTIME_ID")
            return build(source, *args, **kwargs)

        cbuild.build = cpu_build
    trainer = _trainer(example, "c")
    fn = trainer.compiled.artifact
    fn.bind_params(trainer._resident.params)  # (this trainer is only profiled)
    x, y = _batch(example)
    rows, call = profile(fn, trainer.compiled.lowered, [x, y], repeat=repeat, name=example)
    text = format_profile(rows, call).splitlines()
    return "\n".join([*text[:26], *text[-2:]])


def _torch_net(example: str):
    import torch

    nn = torch.nn
    if example == "mlp":
        return nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )
    if example == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, 10),
        )
    if example == "mobilenet":
        return nn.Sequential(
            nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU6(),
            nn.Conv2d(32, 64, 1, bias=False),
            nn.BatchNorm2d(64),
            nn.Hardtanh(0.0, 6.0),
        )
    if example == "resnet":
        return _TorchResNet()
    return _TorchBlock()


def _torch_classes():
    import torch

    nn = torch.nn

    def conv_bn(cin, cout, stride=1, k=3):
        return nn.Sequential(
            nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False),
            nn.BatchNorm2d(cout),
        )

    class ResNet(nn.Module):
        """examples/resnet.dlpc: stem, an identity block, a strided block, pool, linear."""

        def __init__(self):
            super().__init__()
            self.stem = conv_bn(3, 16)
            self.b1 = nn.ModuleList([conv_bn(16, 16), conv_bn(16, 16)])
            self.b2 = nn.ModuleList([conv_bn(16, 32, 2), conv_bn(32, 32), conv_bn(16, 32, 2, 1)])
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            h = torch.relu(self.stem(x))
            h = torch.relu(self.b1[1](torch.relu(self.b1[0](h))) + h)
            r = self.b2[1](torch.relu(self.b2[0](h)))
            h = torch.relu(r + self.b2[2](h))
            return self.fc(h.mean(dim=(2, 3)))

    class Block(nn.Module):
        """examples/transformer.dlpc: 4-head self-attention and a GELU FFN, post-norm."""

        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(64, 64) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(64), nn.LayerNorm(64)
            self.ffn = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))

        def forward(self, x):
            b = x.shape[0]

            def heads(t):
                return t.reshape(b, 16, 4, 16).transpose(1, 2)

            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            a = torch.softmax(q @ k.transpose(-1, -2) / 4, dim=-1) @ v
            h = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, 16, 64)))
            return self.ln2(h + self.ffn(h))

    return ResNet, Block


def _TorchResNet():
    return _torch_classes()[0]()


def _TorchBlock():
    return _torch_classes()[1]()


def torch_time(example: str, threads: int, repeat: int) -> float:
    import torch

    torch.set_num_threads(threads)
    net = _torch_net(example)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = (torch.tensor(a) for a in _batch(example))
    loss = (
        torch.nn.functional.cross_entropy
        if _loss(example) != "mse"
        else torch.nn.functional.mse_loss
    )

    def step():
        opt.zero_grad()
        loss(net(x), y).backward()
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
    """Seconds to build the C training step (in this process): [wall, of which the
    compiler's passes (pipeline.timing; the rest is the step builder, C emission and
    the C compile, or on a cache hit the artifact's load), this process's CPU, the C
    compilers' CPU]."""
    import resource

    from dlpc.passes import pipeline

    start, cpu = time.perf_counter(), time.process_time()
    with pipeline.timing() as rows:
        trainer = _trainer(example, "c")
    total = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert trainer.compiled is not None
    return [
        total,
        sum(t for _, t in rows),
        time.process_time() - cpu,
        children.ru_utime + children.ru_stime,
    ]


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


def _profile_child(example: str, repeat: int) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    code = (
        "import sys; sys.path.insert(0, 'bench'); import train as t; "
        f"print(t.dlpc_profile({example!r}, {repeat}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.rstrip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(EXAMPLES), help="comma-separated examples")
    p.add_argument("--repeat", type=int, default=20, help="timed steps per setting")
    p.add_argument("--no-numpy", action="store_true", help="skip the numpy reference column")
    p.add_argument("--compile-only", action="store_true", help="only the compile times")
    p.add_argument("--profile", default="", help="examples whose step to profile per kernel")
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time steps and kernels by wall clock or by CPU time (a loaded machine; "
        "the 2-thread columns then sum both threads' CPU)",
    )
    args = p.parse_args()
    os.environ["DLPC_BENCH_CLOCK"] = args.clock
    examples = [e for e in args.models.split(",") if e]
    unknown = [e for e in examples + args.profile.split(",") if e and e not in EXAMPLES]
    if unknown:
        p.error(f"unknown example '{unknown[0]}' (known: {', '.join(EXAMPLES)})")
    print(f"building the C training step (Adam), batch {BATCH}: seconds (wall; CPU)")
    print("| model | cold | cold: passes | cold CPU: python | cold CPU: cc | warm |")
    print("|---|---|---|---|---|---|")
    for example in examples:
        (cold, passes, cpu, cc), (warm, *_) = compile_times(example)
        print(
            f"| {example} | {cold:.1f} | {passes:.1f} | {cpu:.1f} | {cc:.1f} | {warm:.1f} |",
            flush=True,
        )
    if not args.compile_only:
        _steps(examples, args)
    for example in (e for e in args.profile.split(",") if e):
        print(f"\nper-kernel profile of {example}'s step, 1 thread (median of {args.repeat}):")
        print(_profile_child(example, args.repeat), flush=True)
    return 0


def _steps(examples: list[str], args) -> None:
    print(f"training step (Adam), batch {BATCH}: microseconds per example")
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


if __name__ == "__main__":
    sys.exit(main())
