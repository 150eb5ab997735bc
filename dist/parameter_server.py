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
from pathlib import Path

import numpy as np

import dlpc.train as train_module
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes.train.losses import Loss
from dlpc.passes.train.optim import SGD, Optimizer, make_optimizer
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
    correct: list[list[float]] = field(default_factory=list)  # a classifier's, per step

    @property
    def max_staleness(self) -> int:
        return max((p.clock - p.slowest for p in self.pulls), default=0)


class AsyncParameterServer:
    """A server on rank `server`, workers on the other ranks (see the module docstring)."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        lr: float = 0.1,
        batch_size: int = 32,
        staleness: int = 0,
        target: str = "numpy",
        weights=None,
        server: int = 0,
        delay: dict[int, float] | None = None,
        comm: mpi.Communicator | None = None,
        opt_level: int = 2,
        bn_momentum: float = 0.1,
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
            model,
            loss,
            SGD(),
            self.local,
            target,
            opt_level,
            weights=weights,
            return_grads=True,
            bn_momentum=bn_momentum,
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
        mine = ([], []) if run is not None else self._work(xs, ys)
        every = world.allgather(mine)
        run = world.bcast(run, root=self.server)
        run.losses = [every[self._worker_rank(w)][0] for w in range(self.workers)]
        run.correct = [every[self._worker_rank(w)][1] for w in range(self.workers)]
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

    def _work(self, xs: np.ndarray, ys: np.ndarray) -> tuple[list[float], list[float]]:
        """This worker's steps: (its losses, its correct counts, per step)."""
        world, w, b = self.comm.world, self.worker, self.local
        losses, correct = [], []
        for c in range(len(xs)):
            world.send(c, dest=self.server, tag=PULL)
            params = world.recv(source=self.server, tag=PARAMS)
            self.trainer._resident.assign(params)
            arrays = [xs[c, w * b : (w + 1) * b], ys[c, w * b : (w + 1) * b]]
            metrics = self.trainer._step(*self.trainer._cast(arrays, 0))
            losses.append(float(metrics[0]))
            correct.append(float(metrics[1]) if len(metrics) > 1 else float("nan"))
            time.sleep(self.delay.get(w, 0.0))
            world.send((c, self.trainer.grads), dest=self.server, tag=PUSH)
        return losses, correct


class AsyncParameterServerTrainer:
    """`AsyncParameterServer` behind the part of `dlpc.train.Trainer` that `dlpc-train`
    drives (`fit` by epochs, `evaluate`, `save`, `load`): `dlpc-train --ps N --ps-async
    --staleness S`. Each epoch's global batches are one device's (the permutation of
    `default_rng([seed, epoch])`, a last partial batch left out); after an epoch every
    rank holds the server's params, so `evaluate` and `predict` run anywhere. SGD only:
    the server's update is W -= lr / workers * g with a constant lr. A checkpoint is one
    device's state of the same SGD (params, `opt.step`, `trainer.epoch`): it resumes
    here on any number of workers, or in one device's Trainer."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        optimizer: Optimizer | str = "sgd",
        batch_size: int = 32,
        target: str = "numpy",
        opt_level: int = 2,
        weights=None,
        ranks: int | None = None,
        staleness: int = 0,
        comm: mpi.Communicator | None = None,
        frozen=(),
        accumulate: int = 1,
        bn_momentum: float = 0.1,
    ):
        self.comm = comm or mpi.world()
        if ranks is not None and ranks != self.comm.size:
            raise DlpcError(
                f"error: a parameter server over {ranks} ranks, but MPI started "
                f"{self.comm.size} (mpiexec -n {ranks})"
            )
        lr = _plain_sgd_lr(optimizer)
        if frozen or accumulate != 1:
            raise DlpcError(
                "error: the asynchronous parameter server trains every param, one update "
                "a batch (no frozen params, no accumulation)"
            )
        self.ps = AsyncParameterServer(
            model,
            loss,
            lr,
            batch_size,
            staleness,
            target,
            weights,
            comm=self.comm,
            opt_level=opt_level,
            bn_momentum=bn_momentum,
        )
        self.trainer = self.ps.trainer  # every rank's step (and evaluator)
        self.batch_size, self.epoch, self.steps_done = batch_size, 0, 0
        self.runs: list[Run] = []  # each epoch's run: pulls and staleness seen

    @property
    def spec(self):
        return self.trainer.spec

    @property
    def weights(self) -> dict[str, np.ndarray]:
        return self.trainer.weights

    @property
    def state(self) -> dict[str, np.ndarray]:
        """One device's SGD state: the server's params, the steps done, the epoch."""
        out = self.trainer.state
        out["opt.step"] = np.asarray(self.steps_done, out["opt.step"].dtype)
        out["trainer.epoch"] = np.asarray(self.epoch, np.int64)
        return out

    def fit(
        self, x, y, epochs=1, validation=None, seed=0, callback=None, drop_last=True
    ) -> dict[str, list[float]]:
        """`epochs` more epochs on every rank (a collective); the history as
        `Trainer.fit`'s, its loss and accuracy the workers' as their steps saw them."""
        if not drop_last:
            raise DlpcError(
                "error: the asynchronous parameter server leaves a last partial batch out"
            )
        x, y = np.asarray(x), np.asarray(y)
        history: dict[str, list[float]] = {k: [] for k in ("loss", "accuracy", "val_accuracy")}
        b = self.batch_size
        for _ in range(epochs):
            start = time.perf_counter()
            order = np.random.default_rng([seed, self.epoch]).permutation(len(x))
            steps = len(x) // b
            if steps == 0:
                raise DlpcError(f"error: {len(x)} samples are fewer than one batch of {b}")
            take = order[: steps * b]
            run = self.ps.run(
                x[take].reshape(steps, b, *x.shape[1:]), y[take].reshape(steps, b, *y.shape[1:])
            )
            self.runs.append(run)
            self.trainer._resident.assign(run.weights)
            self.epoch += 1
            self.steps_done += steps
            loss = float(np.mean(run.losses))
            accuracy = float(np.sum(run.correct)) / (steps * b)
            scores = self.evaluate(*validation) if validation is not None else {}
            history["loss"].append(loss)
            history["accuracy"].append(accuracy)
            history["val_accuracy"].append(scores.get("accuracy", float("nan")))
            if callback:
                callback(
                    "epoch",
                    {
                        "epoch": self.epoch - 1,
                        "loss": loss,
                        "accuracy": accuracy,
                        "val_accuracy": history["val_accuracy"][-1],
                        "seconds": time.perf_counter() - start,
                    },
                )
        return history

    def evaluate(self, *arrays) -> dict[str, float]:
        return self.trainer.evaluate(*arrays)

    def save(self, path) -> None:
        """Rank 0 writes the state (every rank holds the server's params after an epoch)."""
        from dlpc.diagnostics import save_npz, write_atomically

        if self.comm.rank == 0:
            if not str(path).endswith(".npz"):
                raise DlpcError(f"error: save path {path} must end in .npz")
            state = self.state
            write_atomically(Path(path), lambda f: save_npz(f, state))
        self.comm.barrier((self.comm.size, (), (), ""))

    def load(self, path_or_state) -> None:
        """A state saved here or by one device's SGD Trainer (a collective: rank 0
        reads); the server starts the next epoch from its params."""
        from dlpc.dist.data_parallel import read_state

        state = read_state(self.comm, path_or_state)
        self.trainer.load(state)
        self.epoch = self.trainer.epoch
        self.steps_done = int(state.get("opt.step", 0))


def _plain_sgd_lr(optimizer: Optimizer | str) -> float:
    """The lr of plain SGD with a constant lr (what the server applies), else one line."""
    if isinstance(optimizer, str):
        optimizer = SGD() if optimizer == "sgd" else make_optimizer(optimizer)
    plain = (
        isinstance(optimizer, SGD)
        and not optimizer.momentum
        and not optimizer.weight_decay
        and optimizer.schedule.kind == "constant"
        and optimizer.clip_norm is None
        and not optimizer.groups
    )
    if not plain:
        raise DlpcError(
            f"error: the asynchronous parameter server applies plain SGD (a constant lr, no "
            f"momentum, weight decay or clipping), not {optimizer.name}"
            + (" with those options" if isinstance(optimizer, SGD) else "")
        )
    return optimizer.lr
