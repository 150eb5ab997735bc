"""Hybrid parallelism on a device mesh dp x tp x pp: data x tensor (`HybridTrainer`,
pp = 1) and data x pipeline (`HybridPipelineTrainer`, tp = 1).

    # mpiexec -n 4 python train.py
    trainer = HybridTrainer("examples/mlp.dlpc", batch_size=32, dp=2, tp=2)

Rank r sits at mesh coordinates (d, t) = (r // tp, r % tp). The ranks of one dp row hold
the tensor-parallel shards t of the model (graph-tensor-parallel over the mesh's tp axis)
and see the same batch share d; the ranks of one tp column hold the same shard and
average its gradients (graph-data-parallel over the mesh's dp axis). The comm ops name
their group as a mesh axis (`<world 4, mesh [2, 2, 1], axis "tp">`), which each rank
resolves to its own row or column. After k steps the gathered params are one device's
on the same global batches.

    # mpiexec -n 4 python train.py
    trainer = HybridPipelineTrainer("examples/mlp.dlpc", batch_size=32, dp=2, pp=2)

Data x pipeline: rank r sits at (d, s) = (r // pp, r % pp) of the mesh [dp, 1, pp]. The
ranks of one dp row are a pipeline (graph-pipeline over the mesh's pp axis: stage s,
its micro-batches' activations and gradients sent along the row) on the row's batch
share d; the ranks of one pp column run the same stage and average its gradients
(graph-data-parallel over the dp axis, after the pipeline's gradient mean).
"""

from __future__ import annotations

import os

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import dlpc.train as train_module
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.dialects import comm
from dlpc.dist.data_parallel import check_divides
from dlpc.dist.pipeline import stage_hook
from dlpc.model import Model
from dlpc.passes.dist.data_parallel import data_parallel
from dlpc.passes.dist.tensor_parallel import (
    shard_weights,
    tensor_parallel,
    tensor_parallel_grads,
)
from dlpc.passes.train.losses import Loss, as_loss
from dlpc.passes.train.optim import Optimizer
from dlpc.runtime import mpi


class _DataRows(train_module.Trainer):
    """What both hybrids share: `dp` rows, each the data-parallel share of a global batch."""

    d: int
    dp_group: tuple
    comm: mpi.Communicator

    def _rows_share(self, local: int, batch_size: int) -> None:
        """After the step is built: batch sizes, and the first dp row's initial state
        (params and optimizer state) down every column."""
        self.local_batch = local
        self.global_batch = self.batch_size = batch_size
        state = self._resident.current()
        self._resident.assign(
            {name: self.comm.broadcast(v, 0, self.dp_group) for name, v in state.items()}
        )

    def _step(self, x, y) -> list[np.ndarray]:
        """One step on a global batch: this rank's row takes its share."""
        if len(x) != self.global_batch:
            raise DlpcError(f"error: a global batch has {self.global_batch} samples, got {len(x)}")
        d, b = self.d, self.local_batch
        return super()._step(x[d * b : (d + 1) * b], y[d * b : (d + 1) * b])


class HybridTrainer(_DataRows):
    """Data parallel over `dp` rows of `tp` tensor-parallel ranks each (see above)."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        optimizer: str | Optimizer = "adam",
        batch_size: int = 32,
        target: str = "numpy",
        opt_level: int = 2,
        weights=None,
        dp: int = 2,
        tp: int = 2,
        bucket_mb: float = 25.0,
        comm_world: mpi.Communicator | None = None,
        **options,
    ):
        self.comm = comm_world or mpi.world()
        world = dp * tp
        if world != self.comm.size:
            raise DlpcError(
                f"error: a mesh of dp {dp} x tp {tp} needs {world} ranks, but MPI started "
                f"{self.comm.size}"
            )
        check_divides(batch_size, dp)
        if target not in ("numpy", "c"):
            raise DlpcError(f"error: hybrid steps run on targets numpy and c, not '{target}'")
        self.dp, self.tp = dp, tp
        self.d, self.t = divmod(self.comm.rank, tp)
        mesh = (dp, tp, 1)
        tp_group = comm.GroupAttr.of(world, mesh=mesh, axis="tp")
        dp_group = comm.GroupAttr.of(world, mesh=mesh, axis="dp")
        self.tp_group = (world, (), mesh, "tp")
        self.dp_group = (world, (), mesh, "dp")
        local = batch_size // dp
        if isinstance(model, str | os.PathLike):
            model = api.load(model, weights=weights, batch=local)
        whole = train_module.bind_batch(model, local)
        module = whole.module.clone()
        self.sharded = tensor_parallel(module, tp, tp_group)
        mine = shard_weights(api.check_weights(whole), self.sharded, self.t, tp)
        split = Model(module, mine, whole.name, None)

        def distribute(m: ModuleOp) -> None:
            tensor_parallel_grads(m, tp, tp_group)
            data_parallel(m, dp, bucket_mb, batch_size, dp_group)

        super().__init__(
            split, loss, optimizer, local, target, opt_level, distribute=distribute, **options
        )
        self._rows_share(local, batch_size)

    def full_weights(self) -> dict[str, np.ndarray]:
        """The params, the sharded ones gathered along the tp axis (a collective)."""
        out = {}
        for name, value in self.weights.items():
            if name in self.sharded:
                value = self.comm.all_gather(value, self.sharded[name], self.tp_group)
            out[name] = value
        return out


class HybridPipelineTrainer(_DataRows):
    """Data parallel over `dp` rows, each a pipeline of `pp` stages (see above)."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        optimizer: str | Optimizer = "adam",
        batch_size: int = 32,
        target: str = "numpy",
        opt_level: int = 2,
        weights=None,
        dp: int = 2,
        pp: int = 2,
        microbatches: int = 2,
        schedule: str = "1f1b",
        bucket_mb: float = 25.0,
        comm_world: mpi.Communicator | None = None,
        **options,
    ):
        self.comm = comm_world or mpi.world()
        world = dp * pp
        if world != self.comm.size:
            raise DlpcError(
                f"error: a mesh of dp {dp} x pp {pp} needs {world} ranks, but MPI started "
                f"{self.comm.size}"
            )
        check_divides(batch_size, dp)
        if target not in ("numpy", "c"):
            raise DlpcError(f"error: hybrid steps run on targets numpy and c, not '{target}'")
        if schedule not in ("gpipe", "1f1b"):
            raise DlpcError(f"error: hybrid pipelines run gpipe and 1f1b, not '{schedule}'")
        local = batch_size // dp
        if local % microbatches:
            raise DlpcError(
                f"error: a row's batch {local} does not divide into {microbatches} micro-batches"
            )
        checked = as_loss(loss)
        if not isinstance(checked, Loss) or checked.reduction != "mean":
            raise DlpcError("error: a pipeline needs a loss with reduction 'mean'")
        self.dp, self.pp = dp, pp
        self.d, self.s = divmod(self.comm.rank, pp)
        mesh = (dp, 1, pp)
        pp_group = comm.GroupAttr.of(world, mesh=mesh, axis="pp")
        dp_group = comm.GroupAttr.of(world, mesh=mesh, axis="dp")
        self.group = self.pp_group = (world, (), mesh, "pp")
        self.dp_group = (world, (), mesh, "dp")
        micro = model
        if isinstance(model, str | os.PathLike):
            micro = api.load(model, weights=weights, batch=local // microbatches)
        micro = train_module.bind_batch(micro, local // microbatches)  # type: ignore[arg-type]
        stage, self.owner = stage_hook(
            micro.module, checked, pp, microbatches, schedule, self.s, pp_group
        )

        def distribute(m: ModuleOp) -> None:
            stage(m)
            data_parallel(m, dp, bucket_mb, batch_size, dp_group)

        super().__init__(
            model,
            checked,
            optimizer,
            local,
            target,
            opt_level,
            weights,
            distribute=distribute,
            **options,
        )
        self._rows_share(local, batch_size)

    def full_weights(self) -> dict[str, np.ndarray]:
        """Each param from the rank of its stage in this rank's row (a collective)."""
        return {
            name: self.comm.broadcast(value, self.owner.get(name, 0), self.pp_group)
            for name, value in self.weights.items()
        }
