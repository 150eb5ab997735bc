"""Data-parallel training (PyTorch DDP) on MPI ranks.

    # mpiexec -n 2 python train.py
    trainer = DataParallelTrainer("examples/mlp.dlpc", batch_size=32)   # 16 per rank
    trainer.fit(x, y, epochs=5)          # every rank passes the same x, y

Every rank compiles the step at its share of the global batch with
`graph-data-parallel` (gradients averaged by bucketed all-reduce, loss averaged, counts
summed), starts from rank 0's params and optimizer state (broadcast once), and takes
its slice of each global batch (`shard`): disjoint per rank, reshuffled per epoch by the
epoch's seed exactly as one device's `fit` shuffles. So the ranks stay identical, and
after k steps they hold the params one device reaches on the same global batches (up to
the order of the sums). The step runs on the numpy or the C target (its comm ops call
mpi4py; on C between compiled segments, dlpc.runtime.comm_split).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import dlpc.train as train_module
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes.dist.data_parallel import GraphDataParallel
from dlpc.passes.train.losses import Loss, as_loss
from dlpc.passes.train.optim import Optimizer
from dlpc.runtime import mpi


def shard(
    n: int, global_batch: int, ranks: int, rank: int, seed: int, epoch: int, shuffle=True
) -> Iterator[np.ndarray]:
    """The sample indices of `rank` for each global batch of an epoch: the epoch's
    permutation (`default_rng([seed, epoch])`, as `Trainer.fit`), cut into global
    batches (a last incomplete one left out), of which the rank takes slice `rank` of
    `ranks` equal slices."""
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    local = global_batch // ranks
    for k in range(n // global_batch):
        batch = order[k * global_batch : (k + 1) * global_batch]
        yield batch[rank * local : (rank + 1) * local]


def check_divides(batch: int, ranks: int) -> None:
    """A rank count that does not divide the batch: one line naming both."""
    if ranks < 1:
        raise DlpcError(f"error: the number of ranks must be >= 1, got {ranks}")
    if batch % ranks:
        raise DlpcError(
            f"error: batch size {batch} does not divide by {ranks} ranks (data parallel "
            f"needs equal shares)"
        )


def read_state(comm: mpi.Communicator, path_or_state) -> dict[str, np.ndarray]:
    """A checkpoint (a path or a dict) read on rank 0 and broadcast to every rank (a
    collective); a read error is raised on every rank."""
    state, error = None, None
    if comm.rank == 0:
        try:
            if isinstance(path_or_state, str | os.PathLike):
                state = dict(api.load_weights(path_or_state))
            else:
                state = dict(path_or_state)
        except DlpcError as e:
            error = str(e)
    state, error = comm.world.bcast((state, error), root=0)
    if error is not None:
        raise DlpcError(error)
    assert state is not None
    return state


class DataParallelTrainer(train_module.Trainer):
    """`dlpc.train.Trainer` on every rank of MPI_COMM_WORLD (see the module docstring):
    `batch_size` is the global batch; `step(x, y)` and `fit` take global batches."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        optimizer: str | Optimizer = "adam",
        batch_size: int = 32,
        target: str = "numpy",
        opt_level: int = 2,
        weights=None,
        ranks: int | None = None,
        bucket_mb: float = 25.0,
        comm: mpi.Communicator | None = None,
        **options,
    ):
        self.comm = comm or mpi.world()
        self.ranks = ranks or self.comm.size
        if self.ranks != self.comm.size:
            raise DlpcError(
                f"error: data parallel over {self.ranks} ranks, but MPI started "
                f"{self.comm.size} (mpiexec -n {self.ranks})"
            )
        check_divides(batch_size, self.ranks)
        if target not in ("numpy", "c"):
            raise DlpcError(
                f"error: data-parallel steps run on targets numpy and c (comm ops through "
                f"mpi4py), not '{target}'"
            )
        reduction = getattr(as_loss(loss), "reduction", "mean")
        if reduction != "mean":
            raise DlpcError(
                f"error: data parallel averages the ranks' gradients: the loss reduction "
                f"must be 'mean', not '{reduction}'"
            )
        self.global_batch = batch_size
        self.group = (self.ranks, (), (), "")
        self.bucket_mb = bucket_mb
        super().__init__(
            model,
            loss,
            optimizer,
            batch_size // self.ranks,
            target,
            opt_level,
            weights,
            distribute=self._partition(batch_size),
            **options,
        )
        self.local_batch = self.batch_size
        self.batch_size = batch_size  # `fit` cuts global batches; `_step` takes its share
        # rank 0's initial params and optimizer state on every rank
        state = self._resident.current()
        self._resident.assign(
            {name: self.comm.broadcast(v, 0, self.group) for name, v in state.items()}
        )

    def _partition(self, batch_size: int) -> Callable[[ModuleOp], None]:
        """The rewrite of the differentiated step: graph-data-parallel."""
        dp = GraphDataParallel(ranks=self.ranks, bucket_mb=self.bucket_mb, batch=batch_size)
        return lambda module: dp.apply(Context(), module)

    def _step(self, x, y) -> list[np.ndarray]:
        """One step on a global batch: this rank's slice of it."""
        if len(x) != self.global_batch:
            raise DlpcError(f"error: a global batch has {self.global_batch} samples, got {len(x)}")
        r, b = self.comm.rank, self.local_batch
        return super()._step(x[r * b : (r + 1) * b], y[r * b : (r + 1) * b])

    def save(self, path) -> None:
        """Rank 0 writes (every rank holds the same state); the others wait for it."""
        if self.comm.rank == 0:
            super().save(path)
        self.comm.barrier(self.group)

    def load(self, path_or_state) -> None:
        """Rank 0 reads the state and every rank takes it (a collective). The state does
        not depend on the rank count (params and optimizer state are replicated, the
        sampler is the epoch's global permutation): a run saved on any number of ranks,
        or by one device's Trainer, resumes on this one. A read error is raised on every
        rank."""
        super().load(read_state(self.comm, path_or_state))


class ParameterServerTrainer(DataParallelTrainer):
    """A synchronous parameter server on rank `server` (graph-parameter-server): every
    rank pulls the params at the start of a step and pushes its gradients' share; the
    server alone updates. `weights` are the server's (a collective)."""

    def __init__(self, *args, server: int = 0, **kwargs):
        self.server = server
        super().__init__(*args, **kwargs)

    def _partition(self, batch_size: int) -> Callable[[ModuleOp], None]:
        from dlpc.passes.dist.parameter_server import parameter_server

        return lambda module: parameter_server(module, self.ranks, batch_size, self.server)

    @property
    def weights(self) -> dict[str, np.ndarray]:
        local = train_module.Trainer.weights.fget(self)  # type: ignore[attr-defined]
        return {n: self.comm.broadcast(v, self.server, self.group) for n, v in local.items()}

    @property
    def state(self) -> dict[str, np.ndarray]:
        """The server's state: its params and optimizer state (a collective)."""
        local = train_module.Trainer.state.fget(self)  # type: ignore[attr-defined]
        return {n: self.comm.broadcast(v, self.server, self.group) for n, v in local.items()}

    def save(self, path) -> None:
        """Every rank gathers the server's state (a collective), rank 0 writes it."""
        from dlpc.diagnostics import save_npz, write_atomically

        state = self.state
        if self.comm.rank == 0:
            if not str(path).endswith(".npz"):
                raise DlpcError(f"error: save path {path} must end in .npz")
            buffer = io.BytesIO()
            save_npz(buffer, state)
            write_atomically(Path(path), buffer.getvalue())
        self.comm.barrier(self.group)
