"""dlpc eager mode against torch eager, and dlpc.jit against eager; one run.

    OPENBLAS_NUM_THREADS=1 python bench/eager.py [--repeat 2000] [--device opencl:0]

1. Per-op overhead: microseconds per call of small ops (16x16), dlpc eager on `cpu` (and
   on the OpenCL device) against torch eager (1 thread), interleaved rounds, the fastest
   round of each (the overhead itself; on a loaded machine a median measures the load).
2. Per model: a forward pass of examples/mlp.dlpc (batch 32) and examples/lenet.dlpc
   (batch 8) written with dlpc ops: torch eager, dlpc eager, dlpc.jit.
3. A training step of the MLP (forward, backward, Adam): dlpc eager and dlpc.jit against
   torch; on the OpenCL device also with every op copying through its kernel's own
   argument buffers (`runtime/device_call.BIND = False`: how eager OpenCL ran before).
4. Device allocations per training step on the OpenCL device, with the caching allocator
   and without it (every block a device allocation).

Prints markdown tables; docs/runtime.md holds a run. Timings on a shared machine are
noisy: each table compares peers measured in the same rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import dlpc
from dlpc.eager import optim as eager_optim
from dlpc.runtime import device_call

ROOT = Path(__file__).resolve().parents[1]


def per_call(fn, n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def interleaved(fns: dict, n: int, rounds: int = 5, stat=statistics.median) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(per_call(fn, n))
    return {k: stat(v) for k, v in times.items()}


def op_table(torch, devices: list[str], n: int) -> None:
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    t = torch.tensor(a)
    ops = {
        "add": (lambda x: x + x, lambda x: x + x),
        "mul by 2": (lambda x: x * 2.0, lambda x: x * 2.0),
        "relu": (lambda x: x.relu(), lambda x: x.relu()),
        "matmul": (lambda x: x @ x, lambda x: x @ x),
        "sum": (lambda x: x.sum(), lambda x: x.sum()),
        "transpose (view)": (lambda x: x.T, lambda x: x.T),
    }
    head = " | ".join(f"dlpc {d}" for d in devices)
    print(f"| op (16x16 f32) | torch eager | {head} | dlpc cpu / torch |")
    print("|---|---|" + "---|" * len(devices) + "---|")
    for name, (dl, tf) in ops.items():
        fns = {"torch": lambda tf=tf: tf(t)}
        for d in devices:
            x = dlpc.tensor(a, device=d)
            fns[d] = lambda x=x, dl=dl: dl(x)
        r = interleaved(fns, max(n // 5, 20), rounds=15, stat=min)
        cells = " | ".join(f"{r[d]:.1f}" for d in devices)
        print(f"| {name} | {r['torch']:.1f} | {cells} | {r['cpu'] / r['torch']:.2f} |")


def mlp(p, x, ops):
    h = ops.linear(x, p["fc1.weight"], p["fc1.bias"]).relu()
    h = ops.linear(h, p["fc2.weight"], p["fc2.bias"]).relu()
    return ops.linear(h, p["fc3.weight"], p["fc3.bias"])


def lenet(p, x, ops, torch=None):
    if torch is not None:
        F = torch.nn.functional
        h = F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=2).relu()
        h = F.max_pool2d(h, 2, 2)
        h = F.conv2d(h, p["conv2.weight"], p["conv2.bias"]).relu()
        h = F.max_pool2d(h, 2, 2).reshape(x.shape[0], 400)
        h = F.linear(h, p["fc1.weight"], p["fc1.bias"]).relu()
        h = F.linear(h, p["fc2.weight"], p["fc2.bias"]).relu()
        return F.linear(h, p["fc3.weight"], p["fc3.bias"])
    h = ops.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=2).relu()
    h = ops.max_pool2d(h, kernel_size=2, stride=2)
    h = ops.conv2d(h, p["conv2.weight"], p["conv2.bias"]).relu()
    h = ops.max_pool2d(h, kernel_size=2, stride=2).reshape(x.shape[0], 400)
    h = ops.linear(h, p["fc1.weight"], p["fc1.bias"]).relu()
    h = ops.linear(h, p["fc2.weight"], p["fc2.bias"]).relu()
    return ops.linear(h, p["fc3.weight"], p["fc3.bias"])


def model_table(torch, n: int) -> None:
    print("\n| model forward | torch eager (us) | dlpc eager (us) | dlpc.jit (us) | eager / jit |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, batch, shape, fn in (
        ("mlp", 32, (784,), mlp),
        ("lenet", 8, (1, 28, 28), lenet),
    ):
        w = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch).weights
        x = rng.standard_normal((batch, *shape)).astype(np.float32)
        tp = {k: torch.tensor(v) for k, v in w.items()}
        dp = {k: dlpc.tensor(v) for k, v in w.items()}
        tx, dx = torch.tensor(x), dlpc.tensor(x)
        F = torch.nn.functional
        tops = type("T", (), {"linear": staticmethod(F.linear)})
        if fn is mlp:
            tfn = lambda tp=tp, tx=tx, tops=tops: mlp(tp, tx, tops)  # noqa: E731
        else:
            tfn = lambda tp=tp, tx=tx: lenet(tp, tx, None, torch)  # noqa: E731
        eager = lambda x, fn=fn, dp=dp: fn(dp, x, dlpc.ops)  # noqa: E731
        fast = dlpc.jit(eager)
        with dlpc.no_grad():
            np.testing.assert_allclose(
                np.asarray(fast(dx)), np.asarray(eager(dx)), rtol=1e-3, atol=1e-4
            )
            r = interleaved(
                {"torch": tfn, "eager": lambda: eager(dx), "jit": lambda: fast(dx)},  # noqa: B023
                max(n // 20, 20),
            )
        print(
            f"| {name} (batch {batch}) | {r['torch']:.0f} | {r['eager']:.0f} | {r['jit']:.0f} "
            f"| {r['eager'] / r['jit']:.2f} |"
        )


def train_setup(device: str, batch: int = 32, jit: bool = False):
    w = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=batch).weights
    p = {k: dlpc.tensor(v, device=device, requires_grad=True) for k, v in w.items()}
    opt = eager_optim.Adam(list(p.values()), lr=1e-3)
    rng = np.random.default_rng(0)
    x = dlpc.tensor(rng.standard_normal((batch, 784)).astype(np.float32), device=device)
    y = dlpc.tensor(rng.integers(0, 10, batch), device=device)

    def loss_of(x, y):
        return dlpc.ops.cross_entropy(mlp(p, x, dlpc.ops), y)

    forward = dlpc.jit(loss_of) if jit else loss_of

    def step():
        loss = forward(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step, w


def train_table(torch, devices: list[str], n: int) -> None:
    print("\n| MLP training step (batch 32, Adam) | us per step |")
    print("|---|---|")
    _, w = train_setup("cpu")
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    topt = torch.optim.Adam(list(tp.values()), lr=1e-3)
    rng = np.random.default_rng(0)
    tx = torch.tensor(rng.standard_normal((32, 784)).astype(np.float32))
    ty = torch.tensor(rng.integers(0, 10, 32))
    F = torch.nn.functional
    tops = type("T", (), {"linear": staticmethod(F.linear)})

    def tstep():
        loss = F.cross_entropy(mlp(tp, tx, tops), ty)
        topt.zero_grad()
        loss.backward()
        topt.step()

    fns = {"torch eager": tstep}
    for d in devices:
        step, _ = train_setup(d)
        fns[f"dlpc eager {d}"] = step
        if d != "cpu":
            fns[f"dlpc eager {d}, copied through argument buffers"] = _copying(train_setup(d)[0])
        fns[f"dlpc.jit {d}"] = train_setup(d, jit=True)[0]
    synced = {k: _synced(fn, devices) for k, fn in fns.items()}
    r = interleaved(synced, max(n // 100, 5), rounds=3)
    for k, v in r.items():
        print(f"| {k} | {v:.0f} |")


def _copying(step):
    """`step` with every OpenCL op copying in and out of its kernel's own buffers."""

    def run():
        device_call.BIND = False
        try:
            step()
        finally:
            device_call.BIND = True

    return run


def _synced(step, devices: list[str]):
    """`step`, then a wait for every device (a step's time includes its device work)."""

    def run():
        step()
        for d in devices:
            dlpc.synchronize(d)

    return run


def alloc_table(device: str, steps: int = 20) -> None:
    dev = dlpc.device(device)
    allocator = dev.allocator
    print(f"\n| {device}: per MLP training step | caching allocator | no cache |")
    print("|---|---|---|")
    rows = {}
    for caching in (True, False):
        dlpc.synchronize(device)
        dlpc.empty_cache(device)
        allocator.caching = caching
        try:
            step, _ = train_setup(device)
            step()
            step()
            dlpc.synchronize(device)
            before = allocator.stats()
            start = time.perf_counter()
            for _ in range(steps):
                step()
            dlpc.synchronize(device)
            seconds = (time.perf_counter() - start) / steps
            after = allocator.stats()
        finally:
            allocator.caching = True
        rows[caching] = {
            "device allocations": (after["device_allocs"] - before["device_allocs"]) / steps,
            "device frees": (after["device_frees"] - before["device_frees"]) / steps,
            "blocks requested": (after["allocs"] - before["allocs"]) / steps,
            "reserved MiB (end)": after["reserved_bytes"] / 2**20,
            "ms per step": seconds * 1e3,
        }
    for key in rows[True]:
        print(f"| {key} | {rows[True][key]:.1f} | {rows[False][key]:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--device", default=None, help="an OpenCL device (default opencl:0)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench/eager.py needs torch", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    ocl = args.device or ("opencl:0" if dlpc.device_count("opencl") else None)
    devices = ["cpu", *([ocl] if ocl else [])]
    print(f"devices: {', '.join(f'{d} ({dlpc.device(d).backend.label})' for d in devices)}\n")
    op_table(torch, devices, args.repeat)
    model_table(torch, args.repeat)
    train_table(torch, devices, args.repeat)
    if ocl:
        alloc_table(ocl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
