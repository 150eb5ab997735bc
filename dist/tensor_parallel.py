"""Tensor-parallel training (Megatron-LM) on MPI ranks.

    # mpiexec -n 2 python train.py
    trainer = TensorParallelTrainer("examples/mlp.dlpc", batch_size=32)
    trainer.fit(x, y)                    # every rank passes the same batches
    trainer.full_weights()               # the sharded params gathered (every rank)

Every rank compiles the model through `graph-tensor-parallel` (its MLP linear pairs split
column- then row-parallel, one all-reduce forward and one backward per pair; attention
split by heads, with one all-reduce each way; convs split by output channels, with an
all-gather forward and a reduce-scatter backward) with its
part of each sharded param; the step's gradients are restored to the loss's by
`tensor_parallel_grads`. Every rank sees the whole batch; so after k steps the gathered
params are one device's (up to the order of the sums). Targets numpy and c.

A checkpoint is one device's state: `state` gathers each sharded param and its optimizer
slots (`opt.<slot>.<param>`, elementwise in the param, so sharded as it is), `save`
writes it on rank 0, and `load` cuts it again into this run's shards. So a run saved on
n ranks resumes on m ranks (the hidden sizes dividing by m), on one device's `Trainer`,
or under data parallel, and the other way round.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import dlpc.train as train_module
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.dist.data_parallel import read_state
from dlpc.model import Model
from dlpc.passes.dist.tensor_parallel import (
    shard_weights,
    tensor_parallel,
    tensor_parallel_grads,
)
from dlpc.passes.train.losses import Loss
from dlpc.passes.train.optim import Optimizer
from dlpc.runtime import mpi


class TensorParallelTrainer(train_module.Trainer):
    """`dlpc.train.Trainer` with the model split over the ranks of MPI_COMM_WORLD."""

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
        comm: mpi.Communicator | None = None,
        **options,
    ):
        self.comm = comm or mpi.world()
        self.ranks = ranks or self.comm.size
        if self.ranks != self.comm.size:
            raise DlpcError(
                f"error: tensor parallel over {self.ranks} ranks, but MPI started "
                f"{self.comm.size} (mpiexec -n {self.ranks})"
            )
        if target not in ("numpy", "c"):
            raise DlpcError(
                f"error: tensor-parallel steps run on targets numpy and c (comm ops through "
                f"mpi4py), not '{target}'"
            )
        if isinstance(model, str | os.PathLike):
            model = api.load(model, weights=weights, batch=batch_size)
        whole = train_module.bind_batch(model, batch_size)
        module = whole.module.clone()
        self.sharded = tensor_parallel(module, self.ranks)
        if not self.sharded:
            raise DlpcError(
                f"error: {whole.name} has no linear pair (linear, elementwise, linear), "
                f"attention or conv to split over ranks"
            )
        full = api.check_weights(whole)
        mine = shard_weights(full, self.sharded, self.comm.rank, self.ranks)
        split = Model(module, mine, whole.name, None)
        self.group = (self.ranks, (), (), "")
        super().__init__(
            split,
            loss,
            optimizer,
            batch_size,
            target,
            opt_level,
            distribute=lambda m: tensor_parallel_grads(m, self.ranks),
            **options,
        )

    def full_weights(self) -> dict[str, np.ndarray]:
        """The params with the sharded ones gathered from every rank (a collective: every
        rank calls it)."""
        out = {}
        for name, value in self.weights.items():
            if name in self.sharded:
                value = self.comm.all_gather(value, self.sharded[name], self.group)
            out[name] = value
        return out

    def _sharded_dim(self, name: str) -> int | None:
        """The dim along which state entry `name` is cut: a sharded param's, or that of
        the param whose optimizer slot it is (`opt.<slot>.<param>`, the longest param
        name it ends with); None for a whole entry."""
        if name.startswith("opt."):
            params = [p for p in self.model.weights if name.endswith("." + p)]
            name = max(params, key=len) if params else name
        return self.sharded.get(name)

    @property
    def state(self) -> dict[str, np.ndarray]:
        """One device's state: the sharded entries gathered from every rank (a
        collective: every rank calls it)."""
        local = train_module.Trainer.state.fget(self)  # type: ignore[attr-defined]
        out = {}
        for name, value in local.items():
            dim = self._sharded_dim(name)
            if dim is not None:
                value = self.comm.all_gather(value, dim, self.group)
            out[name] = value
        return out

    def save(self, path) -> None:
        """Rank 0 writes the gathered state; every rank takes part in gathering it."""
        state = self.state
        if self.comm.rank == 0:
            from dlpc.diagnostics import save_npz, write_atomically

            if not str(path).endswith(".npz"):
                raise DlpcError(f"error: save path {path} must end in .npz")
            write_atomically(Path(path), lambda f: save_npz(f, state))
        self.comm.barrier(self.group)

    def load(self, path_or_state) -> None:
        """A whole state (saved on any rank count, or by one device) cut into this rank's
        shards (a collective: rank 0 reads, every rank takes its part)."""
        state = read_state(self.comm, path_or_state)
        mine = {}
        for name, value in state.items():
            dim = self._sharded_dim(name)
            if dim is not None:
                value = np.asarray(value)
                if value.ndim <= dim or value.shape[dim] % self.ranks:
                    raise DlpcError(
                        f"error: saved state '{name}' of shape {value.shape} does not split "
                        f"into {self.ranks} shards along dim {dim}"
                    )
                value = np.ascontiguousarray(np.split(value, self.ranks, axis=dim)[self.comm.rank])
            mine[name] = value
        super().load(mine)
