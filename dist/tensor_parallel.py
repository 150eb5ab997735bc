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
params are one device's (up to the order of the sums). Target numpy.
"""

from __future__ import annotations

import os

import numpy as np

import dlpc.train as train_module
from dlpc import api
from dlpc.diagnostics import DlpcError
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
