"""Search: for each tunable kernel of a model, propose candidates (random, grid or
evolutionary), rank them with the cost model, measure the best-ranked ones in isolation,
log every measurement, and keep the best schedule.

    tuner = Tuner(module, log="tune.jsonl", strategy="evolutionary")
    for event in tuner.run(trials=64, time_budget=600):
        print(event)            # Progress(kernel, trial, total, time, best, ok, error)

A resumed run skips scripts the log already holds for a kernel (success or failure)
and starts from the logged best: records measured on this machine
(`tuning_log.machine_fingerprint`) and against today's default schedule; another
machine's records (or a record without a machine) are not skipped, not reported as the
best, and do not train the cost model or seed the search: their times are another CPU's. Kernels with the same signature are tuned once. With
`verify=n`, the default and the three best schedules of each kernel are measured n
more times at the end (events with `trial == -1`); the log ranks scripts by median.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from dlpc.dialects.loop import kernels
from dlpc.passes.schedule.default import default_scripts
from dlpc.passes.schedule.tuning_log import (
    Record,
    TuningLog,
    kernel_signature,
    machine_fingerprint,
    schedule_digest,
)
from dlpc.passes.schedule.winograd import fused_into
from dlpc.tune.measure import extract_kernel, flops, measure
from dlpc.tune.model import RidgeCostModel
from dlpc.tune.space import Space, consistent, space_for

STRATEGIES = ("evolutionary", "random", "grid")


@dataclass
class Task:
    kernel: str
    sig: str
    ir: str
    space: Space
    flops: int
    default: str = ""  # digest of the kernel's default schedules (tuning_log.schedule_digest)


@dataclass
class Progress:
    kernel: str
    trial: int
    total: int
    time: float | None
    best: float | None
    ok: bool
    error: str | None
    script: str


def tasks_of(module: ModuleOp) -> list[Task]:
    """One task per distinct tunable kernel signature, biggest work first. A kernel the
    default schedule computes inside another (graph-winograd's matmul and input transform,
    fused into their output transform) is not one: it never runs on its own."""
    seen: set[str] = set()
    out = []
    for k in kernels(module):
        if fused_into(module, k.sym) is not None:
            continue
        sig = kernel_signature(k)
        if sig in seen:
            continue
        seen.add(sig)
        small = extract_kernel(module, k.sym)
        space = space_for(small, k.sym)
        if space is not None:
            digest = schedule_digest(default_scripts(module, k.sym), k.sym)
            out.append(Task(k.sym, sig, str(small), space, flops(k), digest))
    return sorted(out, key=lambda t: -t.flops)


class Tuner:
    def __init__(
        self,
        module: ModuleOp,
        log: str | None = None,
        target: str = "c",
        strategy: str = "evolutionary",
        seed: int = 0,
        threads: int = 1,
        timeout: float = 60.0,
        repeat: int = 5,
        pool: int = 64,
        batch: int = 4,
        tasks: list[Task] | None = None,
        measure_fn=measure,
        verify: int = 0,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown search strategy '{strategy}' (expected {', '.join(STRATEGIES)})"
            )
        self.module = module
        self.log = TuningLog(log)
        self.machine = machine_fingerprint()  # what its records say, what it resumes from
        self.target = target
        self.strategy = strategy
        self.rng = random.Random(seed)
        self.threads = threads
        self.timeout = timeout
        self.repeat = repeat
        self.pool = pool
        self.batch = batch
        self.tasks = tasks if tasks is not None else tasks_of(module)
        self.measure_fn = measure_fn  # injectable (tests make a candidate crash)
        self.verify = verify  # re-measurements of the top candidates after each task
        self.history: list[tuple[int, str, float]] = []  # (trial, kernel, its best time)

    # ---------------------------------------------------------------- proposals
    def _proposals(self, task: Task, measured: list[tuple[dict, float]], grid_iter) -> list[dict]:
        space = task.space
        if self.strategy == "grid":
            out = []
            for p in grid_iter:
                if consistent(space, p):
                    out.append(p)
                if len(out) >= self.pool:
                    break
            return out
        out = []
        good = sorted(measured, key=lambda pt: pt[1])[:4]
        for _ in range(self.pool * 4):
            if len(out) >= self.pool:
                break
            if self.strategy == "evolutionary" and good and self.rng.random() < 0.7:
                a = self.rng.choice(good)[0]
                if len(good) > 1 and self.rng.random() < 0.3:
                    a = space.crossover(a, self.rng.choice(good)[0], self.rng)
                p = space.mutate(a, self.rng)
            else:
                p = space.sample(self.rng)
            if consistent(space, p):
                out.append(p)
        return out

    # --------------------------------------------------------------------- run
    def run(self, trials: int = 32, time_budget: float | None = None) -> Iterator[Progress]:
        """Tune every task; `trials` measurements in all (split over the tasks by their
        work), stopping early when `time_budget` seconds have passed."""
        start = time.monotonic()
        total_work = sum(max(t.flops, 1) for t in self.tasks) or 1
        share = {t.sig: max(1, round(trials * max(t.flops, 1) / total_work)) for t in self.tasks}
        done = 0
        best_time: dict[str, float] = {}
        for task in self.tasks:
            b = self.log.best(task.sig, self.target, task.default, self.machine)
            if b is not None and b.time is not None:
                best_time[task.sig] = b.time
        for task in self.tasks:
            model = RidgeCostModel()
            space = task.space
            seen = self.log.seen(task.sig, self.target, task.default, self.machine)
            measured: list[tuple[dict, float]] = []
            for r in self.log.for_kernel(task.sig, self.target, self.machine):
                if r.ok and r.params and r.time is not None:  # the log checks ok => time > 0
                    measured.append((r.params, r.time))
                    model.xs.append(space.features(r.params))
                    model.ys.append(math.log(r.time))
            model.fit()
            queue = [space.default()]
            grid_iter = iter(space.grid())
            budget = share[task.sig]
            n = 0
            stale = 0
            while n < budget and stale < 3 and done < trials:
                if time_budget is not None and time.monotonic() - start > time_budget:
                    return
                if not queue:
                    props = self._proposals(task, measured, grid_iter)
                    if model.trained and self.strategy != "grid":
                        props.sort(key=lambda p: model.predict(space.features(p)))
                        explore = [self.rng.choice(props)] if props else []
                        queue = props[: self.batch - 1] + explore
                    else:
                        queue = props[: self.batch]
                    if not queue:
                        break
                point = queue.pop(0)
                try:
                    script = space.script(_parse(task.ir), point)
                except Exception:  # noqa: BLE001 - an unrenderable point is skipped
                    continue
                if script in seen:
                    stale += 1 if not queue else 0
                    continue
                stale = 0
                seen.add(script)
                res = self.measure_fn(
                    task.ir, script, timeout=self.timeout, repeat=self.repeat, threads=self.threads
                )
                self.log.append(
                    Record(
                        task.sig,
                        task.kernel,
                        self.target,
                        script,
                        res.time,
                        res.ok,
                        res.error,
                        point,
                        space.template,
                        task.flops,
                        default=task.default,
                        machine=self.machine,
                    )
                )
                if res.ok:
                    measured.append((point, res.time))
                    model.update(space.features(point), res.time)
                    if res.time < best_time.get(task.sig, float("inf")):
                        best_time[task.sig] = res.time
                n += 1
                done += 1
                if task.sig in best_time:
                    self.history.append((done, task.kernel, best_time[task.sig]))
                yield Progress(
                    task.kernel,
                    done,
                    trials,
                    res.time,
                    best_time.get(task.sig),
                    res.ok,
                    res.error,
                    script,
                )
            yield from self._verify(task)

    def _verify(self, task: Task) -> Iterator[Progress]:
        """Re-measure the default and the three best schedules `verify` times each, so
        the log ranks them by a median rather than by one (possibly lucky) time."""
        if not self.verify:
            return
        ok = [
            r
            for r in self.log.for_kernel(task.sig, self.target, self.machine)
            if r.ok and r.default == task.default
        ]
        if not ok:
            return
        last = {r.script: (r.time, r) for r in ok if r.time is not None}  # ok => timed
        ranked = [r for _, r in sorted(last.values(), key=lambda tr: tr[0])[:3]]
        default = next((r for r in ok if r.params == task.space.default()), None)
        picks = ranked + ([default] if default is not None and default not in ranked else [])
        for _ in range(self.verify):
            for rec in picks:
                res = self.measure_fn(
                    task.ir,
                    rec.script,
                    timeout=self.timeout,
                    repeat=self.repeat,
                    threads=self.threads,
                )
                self.log.append(
                    Record(
                        task.sig,
                        task.kernel,
                        self.target,
                        rec.script,
                        res.time,
                        res.ok,
                        res.error,
                        rec.params,
                        task.space.template,
                        task.flops,
                        default=task.default,
                        machine=self.machine,
                    )
                )
                best = self.log.best(task.sig, self.target, task.default, self.machine)
                yield Progress(
                    task.kernel,
                    -1,
                    0,
                    res.time,
                    best.time if best else None,
                    res.ok,
                    res.error,
                    rec.script,
                )


def _parse(text: str) -> ModuleOp:
    from dlpc.passes.pipeline import parse_module

    return parse_module(text)
