"""Run DLP C on the host simulator and report what the accelerator would have done.

    f = DlpFunction(dlp_module, desc)            # emit_dlp_c + compile (cached) + load
    (y,) = f(x, params={"fc1.weight": w, ...})   # runs every task of every kernel
    print(format_report(f.report))               # per kernel: bytes per level, DMAs, time

The C side (`dlp_sim.h`, inlined into the source before compiling) runs each task on a
thread with its core's NRAM/WRAM arena and its cluster's SRAM, checks capacities,
ranges, copy directions and alignment, and counts per task the bytes per copy
direction, DMA count, intrinsic cycles and work, and scalar operations. A violated
check becomes a `DlpcError` naming the kernel, task and op.

Time model, per kernel (cycles at the description's clock):
- compute(task) = intrinsic cycles + scalar ops / scalar_ops_per_cycle
- transfer(task) = (DMA count - hidden DMAs) * dma_latency + GDRAM bytes / GDRAM bandwidth
                   (a GDRAM2GDRAM copy moves its bytes twice: read and write); the n
                   asynchronous copies a task issues between two waits take
                   ceil(n / dma_queue_depth) latencies, the rest are hidden
                   + on-chip bytes (SRAM, NRAM<->WRAM) / SRAM bandwidth
- task time = compute + transfer - overlap, overlap = min(compute, transfer) when the
  kernel is double-buffered (loads of tile k+1 run under compute of tile k), else 0
- kernel time = max(slowest task, all tasks' GDRAM bytes / GDRAM bandwidth): the
  critical path of one core, or the shared GDRAM port, whichever binds;
  utilisation = work (2 flops per MAC, 1 per vector or scalar op) / (time * peak),
  peak = every core's matrix unit busy.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.backends.runtime.cbuild import build
from dlpc.diagnostics import DlpcError
from dlpc.targets.dlp import DlpTarget, resolve

HEADER = Path(__file__).with_name("dlp_sim.h")
SPACES = ("gdram", "sram", "nram", "wram")
NUM_COUNTERS = 21  # bytes[16], dma_count, intrinsic_cycles, intrinsic_ops, scalar_ops, dma_hidden


@dataclass
class KernelReport:
    """What one kernel launch did on the simulated machine."""

    name: str
    origin: str
    tasks: int
    double_buffered: bool
    bytes: dict[str, float] = field(default_factory=dict)  # "gdram->nram": bytes
    dma_count: int = 0
    dma_hidden: int = 0  # of which their latency ran under an earlier copy's (async)
    intrinsic_cycles: float = 0.0  # summed over tasks
    ops: float = 0.0  # flops done (intrinsics + scalar)
    intrinsic_ops: float = 0.0  # of which by intrinsics (scalar ops count index arithmetic too)
    compute_cycles: float = 0.0  # slowest task
    transfer_cycles: float = 0.0  # slowest task
    cycles: float = 0.0  # estimated kernel time in cycles
    seconds: float = 0.0
    utilisation: float = 0.0

    def level_bytes(self) -> dict[str, float]:
        """Bytes moved in or out of each memory level."""
        out: dict[str, float] = dict.fromkeys(SPACES, 0.0)
        for key, n in self.bytes.items():
            src, dst = key.split("->")
            out[src] += n
            if dst != src or src == "gdram":  # a GDRAM2GDRAM copy reads and writes GDRAM
                out[dst] += n
        return out


def model_kernel(
    name: str, origin: str, tasks: int, double: bool, counters: list[list[float]], desc: DlpTarget
) -> KernelReport:
    rep = KernelReport(name, origin, tasks, double)
    gdram_per_cycle = desc.gdram_bandwidth_gbs / desc.clock_ghz
    sram_per_cycle = desc.sram_bandwidth_gbs / desc.clock_ghz
    worst = total_gdram = 0.0
    for c in counters:
        gdram_bytes = onchip_bytes = 0.0
        for d in range(16):
            n = c[d]
            if not n:
                continue
            src, dst = SPACES[d // 4], SPACES[d % 4]
            key = f"{src}->{dst}"
            rep.bytes[key] = rep.bytes.get(key, 0.0) + n
            if "gdram" in (src, dst):
                gdram_bytes += 2 * n if src == dst else n  # GDRAM2GDRAM: read and write
            else:
                onchip_bytes += n
        total_gdram += gdram_bytes
        dma, icycles, iops, sops = c[16], c[17], c[18], c[19]
        hidden = c[20]
        rep.dma_count += int(dma)
        rep.dma_hidden += int(hidden)
        rep.intrinsic_cycles += icycles
        rep.ops += iops + sops
        rep.intrinsic_ops += iops
        compute = icycles + sops / desc.scalar_ops_per_cycle
        transfer = (
            (dma - hidden) * desc.dma_latency_cycles
            + gdram_bytes / gdram_per_cycle
            + onchip_bytes / sram_per_cycle
        )
        overlap = min(compute, transfer) if double else 0.0
        t = compute + transfer - overlap
        if t >= worst:
            worst, rep.compute_cycles, rep.transfer_cycles = t, compute, transfer
    rep.cycles = max(worst, total_gdram / gdram_per_cycle)
    rep.seconds = rep.cycles / (desc.clock_ghz * 1e9)
    rep.utilisation = rep.ops / (rep.seconds * desc.peak_ops_per_second()) if rep.seconds else 0.0
    return rep


def format_report(reports: list[KernelReport]) -> str:
    """A table: one line per kernel, then the total."""
    head = (
        f"{'kernel':<28} {'tasks':>5} {'db':>2} {'GDRAM B':>10} {'SRAM B':>9} {'NRAM B':>10} "
        f"{'WRAM B':>9} {'DMAs':>6} {'icycles':>9} {'time us':>9} {'util %':>7}"
    )
    lines = [head, "-" * len(head)]
    total_t = total_ops = 0.0
    for r in reports:
        lv = r.level_bytes()
        lines.append(
            f"{r.name[:28]:<28} {r.tasks:>5} {'y' if r.double_buffered else 'n':>2} {lv['gdram']:>10.0f} "
            f"{lv['sram']:>9.0f} {lv['nram']:>10.0f} {lv['wram']:>9.0f} {r.dma_count:>6} "
            f"{r.intrinsic_cycles:>9.0f} {r.seconds * 1e6:>9.2f} {100 * r.utilisation:>7.2f}"
        )
        total_t += r.seconds
        total_ops += r.ops
    lines.append(
        f"total: {len(reports)} kernels, {total_t * 1e6:.2f} us simulated, {total_ops:.0f} flops"
    )
    return "\n".join(lines)


def total_seconds(reports: list[KernelReport]) -> float:
    return sum(r.seconds for r in reports)


class DlpFunction(ModuleFunction):
    """A dlp-level module compiled to DLP C, run on the simulator, callable on numpy arrays."""

    def __init__(self, module, desc: DlpTarget | str | None = None, *, name: str = "module"):
        from dlpc.backends.c import find_main
        from dlpc.backends.dlp_c import emit_dlp_c

        target = resolve(desc) if desc is not None else None
        self.bind_signature(find_main(module))
        self.source = emit_dlp_c(module, target)
        if target is None:
            from dlpc.backends.dlp_c import module_target

            target = module_target(module)
        self.desc: DlpTarget = target
        runnable = self.source.replace('#include "dlp_sim.h"', HEADER.read_text(), 1)
        self.library = build(runnable, name=f"dlp_{name}")
        lib = self.library.handle
        for fname, restype, argtypes in (
            ("dlp_error", ctypes.c_char_p, []),
            ("dlp_record_count", ctypes.c_int, []),
            ("dlp_record_tasks", ctypes.c_int, [ctypes.c_int]),
            ("dlp_record_double", ctypes.c_int, [ctypes.c_int]),
            ("dlp_record_name", ctypes.c_char_p, [ctypes.c_int]),
            ("dlp_record_origin", ctypes.c_char_p, [ctypes.c_int]),
            ("dlp_record_counters", ctypes.POINTER(ctypes.c_double), [ctypes.c_int, ctypes.c_int]),
        ):
            f = getattr(lib, fname)
            f.restype, f.argtypes = restype, argtypes
        self.report: list[KernelReport] = []

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        arrays, outputs = self.arguments(inputs, params), self.empty_outputs()
        status = self.library.run(arrays + outputs)
        lib = self.library.handle
        if status != 0:
            message = lib.dlp_error().decode(errors="replace")
            raise DlpcError(f"error: dlp simulator: {message or self.library.failure(status)}")
        self.report = self._collect()
        return outputs

    def _collect(self) -> list[KernelReport]:
        lib = self.library.handle
        reports = []
        for i in range(lib.dlp_record_count()):
            tasks = lib.dlp_record_tasks(i)
            counters = []
            for t in range(tasks):
                ptr = lib.dlp_record_counters(i, t)
                counters.append([ptr[k] for k in range(NUM_COUNTERS)])
            reports.append(
                model_kernel(
                    lib.dlp_record_name(i).decode(errors="replace"),
                    lib.dlp_record_origin(i).decode(errors="replace"),
                    tasks,
                    bool(lib.dlp_record_double(i)),
                    counters,
                    self.desc,
                )
            )
        return reports


def compile_dlp(
    loop_module, desc: DlpTarget | str | None = None, *, name: str = "module", **options
) -> DlpFunction:
    """Lower a loop-level module with `loop-to-dlp` (options: double_buffer, multicore,
    intrinsics), emit DLP C, build it against the simulator; call the result on
    `(*inputs, params=...)`; after a call, `.report` holds the per-kernel reports."""
    from dlpc.backends.dlp_c import lower_to_dlp

    return DlpFunction(lower_to_dlp(loop_module, desc, **options), desc, name=name)
