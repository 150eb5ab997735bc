"""Host <-> device copy rates of the default OpenCL device: into and out of pageable
numpy arrays (what `OpenCLFunction` does with a call's inputs and outputs today) against
pinned host memory (a `CL_MEM_ALLOC_HOST_PTR` buffer mapped once: what a pinned output
pool would hand back), per size; torch's pinned and pageable CUDA copies beside them
when torch with CUDA is there.

    python bench/opencl_transfer.py [--sizes-mb 0.25,1,4,8,32] [--repeat 30]

Made to decide whether a call's outputs should be read into pinned memory (issue 33: on an
H200, mobilenet at batch 32 spends 1.1 ms of a 1.14 ms call moving its 4 MB input and
8 MB output); run it with bench/opencl_gpu.py's wheels (and its NVIDIA ICD registration).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _median_us(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _opencl_row(cl, ctx, queue, n: int, repeat: int) -> list[float]:
    """us to copy `n` floats: in from pageable, in from pinned, out to pageable, out to
    pinned, out to pinned and then into a pageable array."""
    mf = cl.mem_flags
    dev = cl.Buffer(ctx, mf.READ_WRITE, size=n * 4)
    host = np.random.default_rng(0).random(n, dtype=np.float32)
    pinned_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size=n * 4)
    pinned, _ = cl.enqueue_map_buffer(
        queue, pinned_buf, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.float32
    )
    pinned[:] = host
    out = np.empty_like(host)

    def d2h_copy():
        cl.enqueue_copy(queue, pinned, dev, is_blocking=True)
        np.copyto(out, pinned)

    calls = [
        lambda: cl.enqueue_copy(queue, dev, host, is_blocking=True),
        lambda: cl.enqueue_copy(queue, dev, pinned, is_blocking=True),
        lambda: cl.enqueue_copy(queue, out, dev, is_blocking=True),
        lambda: cl.enqueue_copy(queue, pinned, dev, is_blocking=True),
        d2h_copy,
    ]
    row = [_median_us(f, repeat) for f in calls]
    assert np.array_equal(out, host)
    return row


def _torch_row(n: int, repeat: int) -> list[float]:
    """us for torch's copies of `n` floats: in from pageable, out to pageable, out to
    pinned; none without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    t = torch.from_numpy(np.zeros(n, np.float32))
    tp, g = t.pin_memory(), t.cuda()

    def h2d():
        t.cuda()
        torch.cuda.synchronize()

    def d2h_pinned():
        tp.copy_(g)
        torch.cuda.synchronize()

    return [_median_us(f, repeat) for f in (h2d, g.cpu, d2h_pinned)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes-mb", default="0.25,1,4,8,32")
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args(argv)
    from opencl_gpu import register_nvidia_icd

    register_nvidia_icd()
    import pyopencl as cl

    from dlpc.backends.runtime import opencl_rt

    device = opencl_rt.default_device()
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, device)
    print(f"OpenCL device: {device.name}; median of {args.repeat}, GB/s (us)")
    print(
        "| MB | H2D pageable | H2D pinned | D2H pageable | D2H pinned | D2H pinned + copy out |"
        " torch H2D pageable | torch D2H pageable | torch D2H pinned |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mb in (float(s) for s in args.sizes_mb.split(",")):
        n = int(mb * (1 << 20)) // 4
        row = _opencl_row(cl, ctx, queue, n, args.repeat) + _torch_row(n, args.repeat)
        cells = [f"{n * 4 / us / 1e3:.1f} ({us:.0f})" for us in row]
        cells += ["n/a"] * (8 - len(cells))
        print(f"| {mb:g} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
