"""Tuning the GPU launch plans (`dlpc-tune --target opencl`, issue 33): per kernel of a
model's GPU-plan program, a search over its plan params (`gpu_launch.GpuParams`) on the
OpenCL device; the records' replay is `gpu_launch.logged_params`.

    tuner = GpuTuner(gpu_subject(model), log="gpu.jsonl")  # (tools/dlpc_tune.py)
    for event in tuner.run(trials=12):                      # one program built per trial
        print(event)

The space (`space`): work-groups of 32 up to 1024 work-items (powers of two, capped by the
device's largest group), row lanes 1/2/4/8, split reductions off or over 32-256
work-items. Points that plan a kernel's launch alike (a kernel without a reduction has no
lanes to choose) are one candidate (`candidates`), the default's first. A trial gives
every kernel its next candidate in one program, built, run once against the numpy
reference (the `Subject`'s expected outputs: a wrong program's candidates are measured
again one kernel at a time, so only the wrong ones are rejected, and a wrong candidate is logged
failed, never best), then timed by OpenCL profiling events (`profile_kernels`: each
kernel's device seconds, median of `repeat` calls). Records (`tuning_log.Record`, target
"opencl-gpu") carry the kernel's signature (`kernel_signature`, as the C records) and the
device's name as their `machine` (`opencl_rt.device_key`): a log from an H200 never
applies on PoCL, and the other way round. Kernels that share a signature are one task.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from dlpc.backends.opencl.gpu_launch import (
    DEFAULT_DIGEST,
    DEFAULT_PARAMS,
    TUNING_TARGET,
    GpuParams,
    GpuProfile,
    tile_local_bytes,
)
from dlpc.backends.opencl.launch import TileParams
from dlpc.diagnostics import DlpcError
from dlpc.passes.schedule.tuning_log import Record, TuningLog, kernel_signature

TEMPLATE = "gpu-plan"  # (the records' template; their target: `gpu_launch.TUNING_TARGET`)
TARGET = TUNING_TARGET
GROUPS = (32, 64, 128, 256, 512, 1024)
#: the tiles a matrix product is tried with, whatever the rule (`gpu_tile`'s square ones,
#: and the narrow ones of a conv with 16 or 32 output channels)
TILES = (
    TileParams(64, 64, 16, 4, 4),
    TileParams(32, 32, 16, 2, 2),
    TileParams(32, 64, 16, 2, 4),
    TileParams(16, 128, 16, 2, 4),
    TileParams(32, 128, 16, 4, 4),
)
LANES = (1, 2, 4, 8)
SPLITS = (0, 32, 64, 128, 256)


def space(profile: GpuProfile) -> list[GpuParams]:
    """Every point of the search, the defaults first: groups capped by the device's
    largest, `min_group_items` the default's (64) or the group's when smaller; each with
    the tiled products' rule (`tile` "") and untiled ("off"); then the defaults with each
    tile of `TILES` that fits the device (its work-group and its `__local` tiles,
    `tile_local_bytes`, within the profile's: a product tiled with it whatever the rule)."""
    cap = profile.max_group
    points = [DEFAULT_PARAMS]
    for tile in ("", "off"):
        for group in (g for g in GROUPS if g <= cap):
            for lanes in LANES:
                for split in (s for s in SPLITS if s <= cap):
                    min_group = min(DEFAULT_PARAMS.min_group_items, group)
                    p = GpuParams(group, min_group, lanes, split, tile)
                    if p != DEFAULT_PARAMS:
                        points.append(p)
    for t in TILES:
        gx, gy = t.group
        if gx * gy <= cap and tile_local_bytes(t) <= profile.local_mem_size:
            points.append(replace(DEFAULT_PARAMS, tile=str(t)))
    return points


def launch_key(launch) -> tuple:
    """What a GPU plan's launch looks like to the device: its sizes, lanes, split and
    tile."""
    lanes = tuple(sorted(launch.lanes.values())) if launch.lanes else ()
    tile = str(launch.tile.params) if launch.tile is not None else ""
    return (launch.global_size, launch.local_size, lanes, launch.split is not None, tile)


@dataclass
class GpuTask:
    """The kernels of one signature, and the distinct plans the space gives them."""

    sig: str
    kernels: list[str]
    candidates: list[GpuParams]
    flops: int = 0
    times: dict[GpuParams, float] = field(default_factory=dict)  # this run's and the log's


@dataclass
class GpuProgress:
    kernel: str
    trial: int
    params: GpuParams
    time: float | None
    best: float | None
    ok: bool
    error: str | None


def _launches(module, profile: GpuProfile, params: dict[str, GpuParams]) -> dict[str, object]:
    """Kernel name -> its launch in the GPU-plan program with `params`."""
    from dlpc.backends.opencl import OpenCLEmitter

    emitter = OpenCLEmitter(module, gpu=profile, gpu_params=params)
    emitter.emit()
    return {k.sym: launch for k, launch in emitter.launches.items()}


def tasks_of(module, profile: GpuProfile) -> list[GpuTask]:
    """One task per kernel signature whose plan the params change, biggest work first;
    its candidates: the points of `space` whose launches differ, the defaults first. A
    kernel whose launch no point changes (an elementwise one of a single work-group, a
    plan not made by `plan_gpu_launch`) is no task."""
    from dlpc.dialects.loop import kernels
    from dlpc.tune.measure import flops

    ks = list(kernels(module))
    by_sig: dict[str, GpuTask] = {}
    for k in ks:
        sig = kernel_signature(k)
        if sig in by_sig:
            by_sig[sig].kernels.append(k.sym)
        else:
            by_sig[sig] = GpuTask(sig, [k.sym], [], flops(k))
    points = space(profile)
    seen: dict[str, set[tuple]] = {t.sig: set() for t in by_sig.values()}
    for p in points:  # (one program per point: every kernel's launch with it)
        launches = _launches(module, profile, {k.sym: p for k in ks})
        for task in by_sig.values():
            key = launch_key(launches[task.kernels[0]])
            if key not in seen[task.sig]:
                seen[task.sig].add(key)
                task.candidates.append(p)
    tasks = [t for t in by_sig.values() if len(t.candidates) > 1]
    return sorted(tasks, key=lambda t: -t.flops)


def close(out: np.ndarray, ref: np.ndarray) -> bool:
    """Whether a candidate's output is the reference's (the GPU plan tests' tolerance:
    a split sum's order differs from the reference's)."""
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    return out.shape == ref.shape and bool(
        np.allclose(out, ref, rtol=1e-4, atol=1e-5 * scale, equal_nan=True)
    )


@dataclass
class Subject:
    """What a search measures: a model's program lowered for the GPU plans (as
    `dlpc.compile(model, target="opencl", profile="gpu")` lowers it), its bound weights,
    inputs and their reference outputs (`tools/dlpc_tune.gpu_subject` makes one)."""

    name: str
    lowered: object
    weights: dict[str, np.ndarray]
    inputs: list[np.ndarray]
    expected: list[np.ndarray]


class GpuTuner:
    """The search (module docstring) for `subject` on the default OpenCL device, logging
    to `log`."""

    def __init__(
        self,
        subject: Subject,
        log: str | None = None,
        strategy: str = "random",
        seed: int = 0,
        repeat: int = 10,
        verify: int = 2,
    ):
        from dlpc.backends.runtime.opencl_rt import default_device, device_key

        self.subject = subject
        self.log = TuningLog(log)
        self.rng = random.Random(seed)
        self.strategy = strategy
        self.repeat = repeat
        self.verify = verify
        device = default_device()
        self.device = device
        self.machine = device_key(device)
        self.profile = GpuProfile.of_device(device)
        self.lowered = subject.lowered
        self.tasks = tasks_of(self.lowered, self.profile)
        for task in self.tasks:  # the log's times of this device (a resumed run)
            for r in self.log.for_kernel(task.sig, TARGET, self.machine):
                if r.default == DEFAULT_DIGEST and r.ok and r.time is not None:
                    p = GpuParams.from_dict(r.params)
                    task.times[p] = min(task.times.get(p, r.time), r.time)
        self.failed: set[tuple[str, GpuParams]] = {
            (r.sig, GpuParams.from_dict(r.params))
            for r in self.log.records
            if r.target == TARGET and r.machine == self.machine and not r.ok
        }

    # ------------------------------------------------------------- measuring
    def measure(self, params: dict[str, GpuParams]) -> tuple[str | None, dict[str, float]]:
        """(None, kernel name -> device seconds) of the program with `params`, or (the
        one-line reason, {}) when it does not build, does not run (the driver refuses a
        launch) or differs from the reference."""
        from dlpc.backends.runtime.opencl_rt import OpenCLFunction

        try:
            s = self.subject
            f = OpenCLFunction(s.lowered, name=s.name, profile="gpu", gpu_params=params)
            f.bind_params(s.weights)
            outputs = f(*s.inputs)
            if not all(close(o, e) for o, e in zip(outputs, s.expected)):
                return "wrong result: differs from the numpy reference", {}
            seconds, _ = f.profile_kernels(s.inputs, repeat=self.repeat, warmup=2)
        except DlpcError as e:
            return " ".join(str(e).split())[:300], {}
        except Exception as e:  # noqa: BLE001 - a driver's refusal (a group too big for
            # the kernel's registers: CL_INVALID_WORK_GROUP_SIZE) fails this candidate only
            return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}", {}
        return None, {k.sym: t for k, t in zip(f.kernel_ops, seconds)}

    def _record(self, task: GpuTask, p: GpuParams, t: float | None, error: str | None) -> None:
        self.log.append(
            Record(
                task.sig,
                task.kernels[0],
                TARGET,
                str(p),
                t,
                error is None,
                error,
                p.to_dict(),
                TEMPLATE,
                task.flops,
                default=DEFAULT_DIGEST,
                machine=self.machine,
            )
        )

    def _time(self, task: GpuTask, seconds: dict[str, float]) -> float:
        return statistics.mean(seconds[k] for k in task.kernels)

    def median(self, task: GpuTask, p: GpuParams) -> float | None:
        """The median of the logged times of `p` for `task` on this device."""
        times = [
            r.time
            for r in self.log.for_kernel(task.sig, TARGET, self.machine)
            if r.ok and r.time is not None and r.default == DEFAULT_DIGEST and r.script == str(p)
        ]
        return statistics.median(times) if times else None

    def best(self, task: GpuTask) -> GpuParams | None:
        rec = self.log.best(task.sig, TARGET, DEFAULT_DIGEST, self.machine)
        return GpuParams.from_dict(rec.params) if rec is not None else None

    # --------------------------------------------------------------- search
    def _queue(self, task: GpuTask) -> list[GpuParams]:
        """The task's candidates not measured yet on this device, in the order tried:
        the defaults first, then in order (grid) or shuffled (random)."""
        todo = [
            p for p in task.candidates if p not in task.times and (task.sig, p) not in self.failed
        ]
        head = todo[:1] if todo and todo[0] == DEFAULT_PARAMS else []
        rest = todo[len(head) :]
        if self.strategy != "grid":
            self.rng.shuffle(rest)
        return head + rest

    def run(self, trials: int = 8, time_budget: float | None = None) -> Iterator[GpuProgress]:
        """`trials` programs, each with every task's next candidate (a task out of them
        keeps its defaults), then `verify` re-measurements of the defaults and the best."""
        start = time.monotonic()
        queues = {t.sig: self._queue(t) for t in self.tasks}
        for trial in range(1, trials + 1):
            if time_budget is not None and time.monotonic() - start > time_budget:
                break
            chosen = {t.sig: queues[t.sig].pop(0) for t in self.tasks if queues[t.sig]}
            if not chosen:
                break
            params = {k: chosen[t.sig] for t in self.tasks if t.sig in chosen for k in t.kernels}
            error, seconds = self.measure(params)
            if error is not None and len(chosen) > 1:  # which candidate is wrong: one by one
                results = {}
                for t in self.tasks:
                    if t.sig in chosen:
                        alone = {k: chosen[t.sig] for k in t.kernels}
                        results[t.sig] = self.measure(alone)
            else:
                results = {sig: (error, seconds) for sig in chosen}
            for task in self.tasks:
                if task.sig not in chosen:
                    continue
                p = chosen[task.sig]
                err, secs = results[task.sig]
                t = self._time(task, secs) if err is None else None
                self._record(task, p, t, err)
                if t is not None:
                    task.times[p] = t
                else:
                    self.failed.add((task.sig, p))
                best = min(task.times.values()) if task.times else None
                yield GpuProgress(task.kernels[0], trial, p, t, best, err is None, err)
        yield from self._verify()

    def _verify(self) -> Iterator[GpuProgress]:
        """The defaults' program and the best's, `verify` times each, logged: the log
        ranks a task's params by their median time."""
        if not self.tasks:
            return
        for _ in range(self.verify):
            best = {t.sig: self.best(t) or DEFAULT_PARAMS for t in self.tasks}
            for pick in ({t.sig: DEFAULT_PARAMS for t in self.tasks}, best):
                params = {k: pick[t.sig] for t in self.tasks for k in t.kernels}
                error, seconds = self.measure(params)
                for task in self.tasks:
                    p = pick[task.sig]
                    t = self._time(task, seconds) if error is None else None
                    self._record(task, p, t, error)
                    now = self.best(task)
                    shown = task.times.get(now) if now is not None else None
                    yield GpuProgress(task.kernels[0], -1, p, t, shown, error is None, error)


def compare(subject: Subject, log: str, repeat: int = 30) -> str:
    """Default vs tuned GPU plans of `subject` on the default device: each checked
    against the reference, then its kernels' device times and whole calls (medians): a
    table."""
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction, default_device, device_key

    rows = {}
    for which, tuned in (("default", None), ("tuned", log)):
        f = OpenCLFunction(subject.lowered, name=subject.name, profile="gpu", tuning_log=tuned)
        f.bind_params(subject.weights)
        ok = all(close(o, e) for o, e in zip(f(*subject.inputs), subject.expected))
        seconds, call = f.profile_kernels(subject.inputs, repeat=repeat)
        rows[which] = (ok, [k.sym for k in f.kernel_ops], seconds, call)
    names = rows["default"][1]
    lines = [f"{subject.name} on {device_key(default_device())} (ms, median of {repeat})"]
    lines.append(f"{'kernel':32s} {'default':>10s} {'tuned':>10s}")
    for n, name in enumerate(names):
        d, t = rows["default"][2][n], rows["tuned"][2][n]
        lines.append(f"{name:32s} {d * 1e3:10.4f} {t * 1e3:10.4f}")
    d_sum, t_sum = sum(rows["default"][2]), sum(rows["tuned"][2])
    lines.append(f"{'kernels (sum)':32s} {d_sum * 1e3:10.4f} {t_sum * 1e3:10.4f}")
    lines.append(
        f"{'whole call':32s} {rows['default'][3] * 1e3:10.4f} {rows['tuned'][3] * 1e3:10.4f}"
    )
    checks = ", ".join(f"{w} {'ok' if rows[w][0] else 'WRONG'}" for w in rows)
    lines.append(f"vs reference: {checks}")
    return "\n".join(lines)
