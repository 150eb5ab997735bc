"""An asynchronous parameter server with bounded staleness (stale synchronous parallel).

    # mpiexec -n 3 python train.py      (rank 0 the server, ranks 1-2 the workers)
    ps = AsyncParameterServer("examples/mlp.dlpc", lr=0.1, batch_size=32, staleness=1)
    run = ps.run(xs, ys)                 # every rank: the same global batches, per step
    run.weights, run.pulls, run.history  # the server's params, its pull log, snapshots

Rank `server` holds the params and applies the pushed gradients (SGD: W -= lr / workers
* g, so a round of every worker's push is one synchronous step on the global batch); it
runs no model. Worker w (the other ranks, in order) takes rows
[w * b, (w + 1) * b) of each global batch: it pulls the params, computes its gradient
(a Trainer built with return_grads; its own update is overwritten by the next pull) and pushes it.
Staleness bound s (stale synchronous parallel, Ho et al. 2013): a worker pulls for its
step c only once every worker has pushed at least c - s steps (the server holds the
reply until then), so the params it computes on hold every worker's updates of steps
< c - s; and they hold none of steps >= c + s (the server applies a step-k gradient once
k < the slowest worker's clock + s). s = 0 is the synchronous parameter server (each
step's pull sees exactly the previous steps' updates, all of them); a large s lets the
fast workers run ahead on params missing the slow ones' updates. The server logs every pull: (worker, clock c,
the slowest worker's clock, the updates applied), the bound's evidence.

The synchronous, compiled form (pull and push as comm ops in each rank's program) is
graph-parameter-server / `ParameterServerTrainer`; here the server's event loop decides
the order of pushes and pulls at run time, which no static program expresses.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

import dlpc.train as train_module
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes.train.optim import SGD
from dlpc.runtime import mpi

PULL, PARAMS, PUSH = 11, 12, 13  # the message tags


@dataclass
class Pull:
    """One served pull: worker `worker` at its step `clock`, when the slowest worker had
    pushed `slowest` steps and the server had applied `updates` gradients."""

    worker: int
    clock: int
    slowest: int
    updates: int


@dataclass
class Run:
    """A run's result, on every rank: the server's final params, its pulls in the order
    served, its params after every `workers` updates (a round), each worker's losses."""

    weights: dict[str, np.ndarray]
    pulls: list[Pull] = field(default_factory=list)
    history: list[dict[str, np.ndarray]] = field(default_factory=list)
    losses: list[list[float]] = field(default_factory=list)

    @property
    def max_staleness(self) -> int:
        return max((p.clock - p.slowest for p in self.pulls), default=0)


class AsyncParameterServer:
    """A server on rank `server`, workers on the other ranks (see the module docstring)."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str = "cross_entropy",
        lr: float = 0.1,
        batch_size: int = 32,
        staleness: int = 0,
        target: str = "numpy",
        weights=None,
        server: int = 0,
        delay: dict[int, float] | None = None,
        comm: mpi.Communicator | None = None,
    ):
        self.comm = comm or mpi.world()
        if self.comm.size < 2:
            raise DlpcError("error: a parameter server needs at least 2 ranks (1 server)")
        if not 0 <= server < self.comm.size:
            raise DlpcError(f"error: server {server} is not a rank of {self.comm.size}")
        if staleness < 0:
            raise DlpcError(f"error: staleness must be >= 0, got {staleness}")
        self.workers = self.comm.size - 1
        if batch_size % self.workers:
            raise DlpcError(
                f"error: batch size {batch_size} does not divide by {self.workers} workers"
            )
        self.server, self.lr, self.staleness = server, lr, staleness
        self.batch_size, self.local = batch_size, batch_size // self.workers
        self.delay = delay or {}  # seconds a worker sleeps per step (a slow worker)
        rank = self.comm.rank
        self.worker = rank - (rank > server) if rank != server else -1
        # every rank builds the step (the server for the initial params): the same seeded
        # weights everywhere
        self.trainer = train_module.Trainer(
            model, loss, SGD(), self.local, target, weights=weights, return_grads=True
        )

    def _worker_rank(self, w: int) -> int:
        return w + (w >= self.server)

    def run(self, xs: np.ndarray, ys: np.ndarray) -> Run:
        """len(xs) steps on the global batches xs[k], ys[k] (a collective)."""
        if xs.shape[1] != self.batch_size:
            raise DlpcError(
                f"error: a global batch has {self.batch_size} samples, got {xs.shape[1]}"
            )
        world = self.comm.world
        run = self._serve(len(xs)) if self.worker < 0 else None
        losses = [] if run is not None else self._work(xs, ys)
        all_losses = world.allgather(losses)
        run = world.bcast(run, root=self.server)
        run.losses = [all_losses[self._worker_rank(w)] for w in range(self.workers)]
        return run

    def _serve(self, steps: int) -> Run:
        MPI, world = self.comm.MPI, self.comm.world
        params = {n: np.array(v, np.float32) for n, v in self.trainer.weights.items()}
        clocks = [0] * self.workers  # steps pushed by each worker
        waiting: list[tuple[int, int]] = []  # (worker, clock) pulls held back
        pending: list[tuple[int, dict[str, np.ndarray]]] = []  # (clock, gradient) not applied
        run = Run(weights=params)
        updates = 0
        status = MPI.Status()
        while min(clocks) < steps or pending or waiting:
            message = world.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            source = status.Get_source()
            w = source - (source > self.server)
            if status.Get_tag() == PULL:
                waiting.append((w, int(message)))
            else:
                pending.append(message)
                clocks[w] += 1
            slowest = min(clocks)
            # visible: the gradients of steps k < slowest + s (every later pull is at a
            # clock c >= slowest, and may see steps up to c + s - 1; with s = 0 a step's
            # gradients appear once every worker has pushed it, synchronous)
            for k, grads in [u for u in pending if u[0] < slowest + self.staleness]:
                pending.remove((k, grads))
                for name, g in grads.items():
                    params[name] -= np.float32(self.lr / self.workers) * g
                updates += 1
                if updates % self.workers == 0:
                    run.history.append({n: v.copy() for n, v in params.items()})
            for w, c in [p for p in waiting if p[1] - slowest <= self.staleness]:
                waiting.remove((w, c))
                run.pulls.append(Pull(w, c, slowest, updates))
                world.send(params, dest=self._worker_rank(w), tag=PARAMS)
        return run

    def _work(self, xs: np.ndarray, ys: np.ndarray) -> list[float]:
        world, w, b = self.comm.world, self.worker, self.local
        losses = []
        for c in range(len(xs)):
            world.send(c, dest=self.server, tag=PULL)
            params = world.recv(source=self.server, tag=PARAMS)
            self.trainer._resident.assign(params)
            losses.append(self.trainer.step(xs[c, w * b : (w + 1) * b], ys[c, w * b : (w + 1) * b]))
            time.sleep(self.delay.get(w, 0.0))
            world.send((c, self.trainer.grads), dest=self.server, tag=PUSH)
        return losses
