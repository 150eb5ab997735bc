"""Pipeline-parallel training (GPipe, 1F1B) on MPI ranks, one stage a rank.

    # mpiexec -n 2 python train.py
    trainer = PipelineTrainer("examples/mlp.dlpc", batch_size=32, microbatches=4)
    trainer.step(x, y)                   # every rank passes the same global batch
    trainer.full_weights()               # each param from the rank of its stage

Every rank compiles the training step with its stage's program in place of the
backward (graph-pipeline: the micro-batches' forwards and backwards in the schedule's
order, activations and gradients sent between stages, the gradients' mean); the optimizer
then updates every param, those of other stages by a zero gradient (unchanged under
SGD and Adam without weight decay), so rank s holds stage s's params. The loss and the
metrics are the last stage's, broadcast. Targets numpy and c.

A checkpoint is one device's state: `state` takes each param and its optimizer slots
from the rank of its stage, so a run saved on S stages resumes on another number of
stages (the stages are cut again from the whole model) or on one device's `Trainer`.

schedule="2bw" (PipeDream-2BW) keeps the two weight versions on the host: each step runs
1F1B's program on the stashed version W(t-1) (the optimizer's update lands on it), then
moves the newest version W(t) by that update, W(t+1) = W(t) + (U(W(t-1)) - W(t-1)), and
stashes W(t): for SGD, W(t) - lr * grad f(W(t-1)); for Adam, its step from the gradient
at W(t-1) (an update that does not read W itself: no weight decay). graph-pipeline's
2bw program reads both versions as params; the Trainer's step has no slot for a second
version, so here it is the host's. `state` carries the stash (`pipeline.stash.<p>`,
whole params like the others), so a resumed 2bw run continues on W(t-1) as the
uninterrupted one; only a PipelineTrainer under 2bw loads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

import dlpc.train as train_module
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.dialects import comm, graph
from dlpc.dist.data_parallel import read_state
from dlpc.model import Model
from dlpc.passes.dist.data_parallel import result_names
from dlpc.passes.dist.pipeline import STASH, build_stage, partition, pipeline, stage_function
from dlpc.passes.train._build import Builder
from dlpc.passes.train.losses import Loss, as_loss, build_correct, build_loss, target_type
from dlpc.passes.train.optim import Optimizer
from dlpc.runtime import mpi


def forward_and_loss(module: ModuleOp, loss: Loss) -> ModuleOp:
    """@main(x, target) -> (loss, correct) of one micro-batch (as dlpc.passes.train.step
    builds the step's forward)."""
    module = module.clone()
    f = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main")
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    prediction = ret.operands[0]
    assert isinstance(prediction.type, graph.TensorType)
    target = f.body.block.insert_arg(target_type(loss, prediction.type), len(f.body.block.args))
    b = Builder.before(ret)
    values = [build_loss(b, loss, prediction, target)]
    if loss.classifies:
        values.append(build_correct(b, loss, prediction, target))
    ret.operands = values
    f.arg_attrs = None
    f.res_attrs = None
    f.update_function_type()
    for op in reversed(list(f.body.block.ops)):
        if op.results and all(not r.uses for r in op.results):
            op.detach()
            op.erase()
    return module


def stage_hook(
    micro: ModuleOp,
    loss: Loss,
    stages: int,
    microbatches: int,
    schedule: str,
    rank: int,
    group: comm.GroupAttr | None = None,
) -> tuple[Callable[[ModuleOp], None], dict[str, int]]:
    """The distribute hook that makes a training step rank `rank`'s stage program, and
    the stage of every param. `micro`: the model at the micro-batch size; `group`: the
    stages' group (default the world), `rank` the index in it."""
    one = forward_and_loss(micro, loss)
    if schedule == "2bw":  # the same program; the two versions are the trainer's
        schedule = "1f1b"
    pipeline(one.clone(), stages, microbatches, schedule)  # checks the schedule
    main = next(op for op in one.ops if isinstance(op, func.FuncOp))
    parts = partition(list(main.body.block.ops)[:-1], stages)
    fns = [stage_function(main, p, s == 0, s == stages - 1) for s, p in enumerate(parts)]
    owner = {p: s for s, fn in enumerate(fns) for p in fn.params}
    n_metrics = len(main.function_type.outputs) - 1

    def stage(module: ModuleOp) -> None:
        f = next(op for op in module.ops if isinstance(op, func.FuncOp))
        names = result_names(f)
        types = dict(zip(names, f.function_type.outputs))
        grads = {n[5:]: types[n] for n in names if n.startswith("grad.")}
        build_stage(f, fns[rank], rank, stages, microbatches, schedule, n_metrics, grads, group)  # type: ignore[arg-type]

    return stage, owner


class PipelineTrainer(train_module.Trainer):
    """`dlpc.train.Trainer` with the model's layers in stages over MPI_COMM_WORLD."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss = "cross_entropy",
        optimizer: str | Optimizer = "adam",
        batch_size: int = 32,
        target: str = "numpy",
        opt_level: int = 2,
        weights=None,
        microbatches: int = 2,
        schedule: str = "1f1b",
        stages: int | None = None,
        comm: mpi.Communicator | None = None,
        **options,
    ):
        self.comm = comm or mpi.world()
        self.stages = stages or self.comm.size
        if self.stages != self.comm.size:
            raise DlpcError(
                f"error: {self.stages} pipeline stages, but MPI started {self.comm.size} "
                f"ranks (mpiexec -n {self.stages})"
            )
        if target not in ("numpy", "c"):
            raise DlpcError(f"error: pipeline steps run on targets numpy and c, not '{target}'")
        if batch_size % microbatches:
            raise DlpcError(
                f"error: batch size {batch_size} does not divide into {microbatches} micro-batches"
            )
        checked = as_loss(loss)
        if not isinstance(checked, Loss) or checked.reduction != "mean":
            raise DlpcError("error: a pipeline needs a loss with reduction 'mean'")
        micro = model
        if isinstance(model, str | os.PathLike):
            micro = api.load(model, weights=weights, batch=batch_size // microbatches)
        micro = train_module.bind_batch(micro, batch_size // microbatches)  # type: ignore[arg-type]
        stage, self.owner = stage_hook(
            micro.module, checked, self.stages, microbatches, schedule, self.comm.rank
        )
        self.group = (self.stages, (), (), "")
        self.schedule = schedule
        self._stash: dict[str, np.ndarray] | None = None  # 2bw: W(t-1)
        super().__init__(
            model,
            checked,
            optimizer,
            batch_size,
            target,
            opt_level,
            weights,
            distribute=stage,
            **options,
        )

    def _step(self, *arrays) -> list[np.ndarray]:
        """One step; under 2bw on the stashed version, its update moved to the newest."""
        if self.schedule != "2bw":
            return super()._step(*arrays)
        current = self._resident.current()
        newest = {n: np.array(current[n]) for n in self.owner}
        stash = self._stash if self._stash is not None else newest
        self._resident.assign(stash)
        out = super()._step(*arrays)
        after = self._resident.current()
        self._resident.assign({n: newest[n] + (after[n] - stash[n]) for n in newest})
        self._stash = newest
        return out

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """Each param as the rank of its stage holds it (a collective: every rank reads
        it, as `evaluate`, `predict` and `save` do on every rank)."""
        local = train_module.Trainer.weights.fget(self)  # type: ignore[attr-defined]
        return {
            name: self.comm.broadcast(value, self.owner.get(name, 0), self.group)
            for name, value in local.items()
        }

    def full_weights(self) -> dict[str, np.ndarray]:
        return self.weights

    @property
    def state(self) -> dict[str, np.ndarray]:
        """The state with each param's optimizer state from its stage (a collective)."""
        out = train_module.Trainer.state.fget(self)  # type: ignore[attr-defined]
        for name, value in list(out.items()):
            param = next((p for p in self.owner if name.endswith("." + p)), None)
            if name.startswith("opt.") and param is not None:
                out[name] = self.comm.broadcast(value, self.owner[param], self.group)
        if self._stash is not None:  # 2bw: W(t-1), which the next step runs on
            for name, value in self._stash.items():
                out[STASH + name] = self.comm.broadcast(value, self.owner[name], self.group)
        return out

    def load(self, path_or_state) -> None:
        """`Trainer.load`, and under 2bw the stashed version W(t-1) saved beside the
        params (`pipeline.stash.<param>`; without it the next step runs on W(t))."""
        state = read_state(self.comm, path_or_state)
        stash = {n[len(STASH) :]: v for n, v in state.items() if n.startswith(STASH)}
        super().load({n: v for n, v in state.items() if not n.startswith(STASH)})
        if self.schedule == "2bw":
            self._stash = {n: np.array(v) for n, v in stash.items()} or None

    def save(self, path) -> None:
        """Rank 0 writes the gathered state; every rank takes part in gathering it."""
        if self.comm.rank == 0:
            super().save(path)
        else:
            self.state  # noqa: B018 - the collective rank 0's save runs
        self.comm.barrier(self.group)
