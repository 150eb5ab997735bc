"""This CPU's floating-point peak, and the fastest a model could run at it (issue 31).

    python bench/peak.py [--threads 1,2] [--seconds 0.05] [--json]
    python bench/peak.py --model examples/mlp.dlpc --batch 32   # + the model's bound

`measure(threads)` times a loop of independent fused multiply-adds on the widest float
vectors the compiler targets (`a = a * b + c` on GCC vector types: 16 lanes under
AVX-512, 8 under AVX, else 4; GCC's default -ffp-contract=fast makes each one FMA), enough
independent chains to cover the FMA latency on every port, in every thread of an OpenMP
team of `threads`. It is built by the project's own C toolchain (`cbuild.build`: `$CC`,
`-O3 -march=native -fopenmp`, `$DLPC_CFLAGS`, the library cache) and loaded the way a
compiled model is, so it measures what dlpc's kernels could reach with the same compiler
and flags. The figure is total GFLOP/s of the team (an FMA counts 2 FLOPs), the best of
`reps` timings; load from elsewhere only ever lowers it.

`graph_flops(module)` counts a graph's multiply-add FLOPs per call: 2 x the MACs of every
graph.conv2d (output elements x C/groups x KH x KW, i.e. the weight's size past its
first dim), graph.linear (output elements x in) and graph.matmul (output elements x K).
Everything else (bias, activations, norms, pooling, softmax) is left out: it is what the
bound ignores, so `flops / peak` is a lower bound on the time of a call, and a kernel
that reaches it runs every FMA port full.

Nothing here gates CI; bench/models.py --batches prints the bound beside each row.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import math
import sys
from typing import NamedTuple

from xdsl.dialects.builtin import ModuleOp

from dlpc.backends.runtime import cbuild
from dlpc.dialects import graph as g

# Chains per thread: 12 on <= 16 vector registers (AVX2: 12 accumulators, b, c), 16 on
# AVX-512's 32; either covers 2 FMA ports x 4-5 cycles of latency.
SOURCE = r"""
#include <time.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__AVX512F__)
#define PEAK_BYTES 64
#define PEAK_CHAINS 16
#elif defined(__AVX__)
#define PEAK_BYTES 32
#define PEAK_CHAINS 12
#else
#define PEAK_BYTES 16
#define PEAK_CHAINS 12
#endif
typedef float peak_vf __attribute__((vector_size(PEAK_BYTES)));

int dlpc_peak_flops_per_step(void) { return 2 * PEAK_CHAINS * PEAK_BYTES / 4; }

__attribute__((noinline)) static float peak_chains(long steps) {
  peak_vf a[PEAK_CHAINS];
  peak_vf b = (peak_vf){0} + 0.999f, c = (peak_vf){0} + 1e-4f;
  for (int i = 0; i < PEAK_CHAINS; i++) a[i] = (peak_vf){0} + (float)i * 1e-3f;
  for (long k = 0; k < steps; k++) {
#pragma GCC unroll 16
    for (int i = 0; i < PEAK_CHAINS; i++) a[i] = a[i] * b + c;
  }
  peak_vf s = a[0];
  for (int i = 1; i < PEAK_CHAINS; i++) s += a[i];
  float r = 0;
  for (int i = 0; i < PEAK_BYTES / 4; i++) r += s[i];
  return r;
}

static double peak_clock(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

volatile float dlpc_peak_sink;

/* `steps` steps in each of `threads` threads (one team): the wall seconds, and the sum
   over the threads of 1 / (the thread's CPU seconds) */
static double peak_seconds(long steps, int threads, double *inverse_cpu) {
  double t0 = peak_clock(CLOCK_MONOTONIC), inv = 0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads) reduction(+ : inv)
#endif
  {
    double c0 = peak_clock(CLOCK_THREAD_CPUTIME_ID);
    float r = peak_chains(steps);
    inv += 1 / (peak_clock(CLOCK_THREAD_CPUTIME_ID) - c0);
    if (r == 1234.5f) dlpc_peak_sink = r; /* (never: keeps the chains alive) */
  }
  *inverse_cpu = inv;
  return peak_clock(CLOCK_MONOTONIC) - t0;
}

/* the library entry (cbuild's convention):
   args = {long *steps, int *threads, double *wall_seconds, double *inverse_cpu} */
int dlpc_main(void **args) {
  *(double *)args[2] = peak_seconds(*(long *)args[0], *(int *)args[1], (double *)args[3]);
  return 0;
}

int dlpc_peak_openmp(void) {
#if defined(_OPENMP)
  return 1;
#else
  return 0;
#endif
}
"""


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    handle = cbuild.build(SOURCE, name="dlpc_peak").handle
    handle.dlpc_peak_flops_per_step.restype = ctypes.c_int
    handle.dlpc_peak_openmp.restype = ctypes.c_int
    return handle


def _timing(lib: ctypes.CDLL, steps: int, threads: int) -> tuple[float, float]:
    """(wall seconds, sum over the threads of 1 / their CPU seconds) of one timing."""
    n, t, wall, inverse = (
        ctypes.c_long(steps),
        ctypes.c_int(threads),
        ctypes.c_double(),
        ctypes.c_double(),
    )
    args = (ctypes.c_void_p * 4)(*(ctypes.addressof(v) for v in (n, t, wall, inverse)))
    lib.dlpc_main(args)
    return wall.value, inverse.value


class Peak(NamedTuple):
    """A team's FMA peak, GFLOP/s in all: `wall` from the team's wall time (on a quiet
    machine, what the team does), `on_core` from each thread's own CPU time (what each
    core does while the thread runs on it: time another process takes from a core does
    not count, so it is the steadier figure on a loaded machine)."""

    threads: int
    wall: float
    on_core: float


def measure(threads: int = 1, seconds: float = 0.03, reps: int = 10) -> Peak:
    """The FMA peak of a team of `threads` (one thread without OpenMP), each thread
    running FMA chains for about `seconds`; each figure the best of `reps` timings."""
    lib = _library()
    if not lib.dlpc_peak_openmp():
        threads = 1
    per_step = lib.dlpc_peak_flops_per_step()
    steps = 100_000
    took = _timing(lib, steps, threads)[0]  # (also starts the team)
    while took < seconds / 10:  # calibrate: about `seconds` a timing
        steps *= 4
        took = _timing(lib, steps, threads)[0]
    steps = max(1, int(steps * seconds / took))
    timings = [_timing(lib, steps, threads) for _ in range(reps)]
    flops = steps * per_step / 1e9
    wall = flops * threads / min(w for w, _ in timings)
    return Peak(threads, wall, flops * max(inverse for _, inverse in timings))


def graph_flops(module: ModuleOp) -> int | None:
    """2 x the multiply-adds of every conv2d, linear and matmul in `module` (graph IR,
    every region walked once), per call; None when a shape is symbolic."""
    macs = 0
    for op in module.walk():
        if not isinstance(op, g.Conv2DOp | g.LinearOp | g.MatMulOp):
            continue
        out, lhs, rhs = (g.shape_of(v) for v in (op.results[0], op.operands[0], op.operands[1]))
        if not all(isinstance(d, int) for d in (*out, *lhs, *rhs)):
            return None
        if isinstance(op, g.Conv2DOp):
            depth = math.prod(rhs[1:])  # C/groups x KH x KW
        elif isinstance(op, g.LinearOp):
            depth = lhs[-1]
        else:
            depth = lhs[0] if len(lhs) == 1 else lhs[-2] if op.transpose_a else lhs[-1]
        macs += math.prod(out) * depth
    return 2 * macs


def program_flops(model) -> tuple[int | None, int | None]:
    """An `api.Model`'s FLOPs per call: the model's own graph (`graph_flops` of what
    `dlpc.load` gives), and the graph dlpc runs, after the graph passes of -O2 for the C
    target: there a 3x3 stride-1 conv may have become Winograd's 16 batched matmuls,
    which multiply 2.25x less (resnet)."""
    from dlpc import api
    from dlpc.passes import pipeline

    options = pipeline.PipelineOptions(opt_level=2, schedule=False, target="c")
    weights = dict(api.check_weights(model))
    graph = pipeline.lower(model.module.clone(), "graph", options, weights=weights)
    return graph_flops(model.module), graph_flops(graph)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="team sizes, comma-separated (default 1,2)")
    p.add_argument("--seconds", type=float, default=0.03, help="length of one timing")
    p.add_argument("--reps", type=int, default=10, help="timings per team size (the best)")
    p.add_argument("--model", help="a model file (.dlpc, .onnx): also print its FLOPs and bound")
    p.add_argument("--batch", type=int, help="with --model (.dlpc): bind the batch")
    p.add_argument(
        "--json", action="store_true", help="one JSON line: {threads: [wall, on core]}, GFLOP/s"
    )
    args = p.parse_args(argv)
    try:
        teams = list(dict.fromkeys(int(t) for t in args.threads.split(",")))
        assert teams and all(t > 0 for t in teams)
    except (ValueError, AssertionError):
        p.error(f"--threads expects positive integers separated by commas, got '{args.threads}'")
    if args.seconds <= 0 or args.reps < 1:
        p.error("--seconds must be positive and --reps at least 1")
    flops = None
    if args.model and not args.json:
        from dlpc import api
        from dlpc.diagnostics import DlpcError

        try:
            direct, flops = program_flops(api.load(args.model, batch=args.batch))
        except DlpcError as e:
            print(e, file=sys.stderr)
            return 1
        if direct is None or flops is None:
            print(f"{args.model}: symbolic shapes (bind them with --batch)")
        else:
            print(
                f"{args.model}: {direct / 1e6:.3f} MFLOP per call in its graph, "
                f"{flops / 1e6:.3f} in the graph dlpc runs at -O2"
            )
    peaks = {t: measure(t, args.seconds, args.reps) for t in teams}
    if args.json:
        print(json.dumps({str(t): [v.wall, v.on_core] for t, v in peaks.items()}))
        return 0
    lanes = _library().dlpc_peak_flops_per_step()
    print(
        f"FMA peak, GFLOP/s ({lanes} FLOPs a step; the best of {args.reps} timings of "
        f"~{args.seconds} s): 'wall' from the team's wall time, 'on core' from each "
        f"thread's CPU time (the steadier on a loaded machine)"
    )
    for t, v in peaks.items():
        bound = f"; bound {flops / v.on_core / 1e6:.4f} ms a call" if flops else ""
        print(
            f"  {t} thread(s): wall {v.wall:.1f}, on core {v.on_core:.1f} "
            f"({v.on_core / t:.1f} a thread){bound}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
