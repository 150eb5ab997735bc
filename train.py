"""dlpc's training API: compile a model's training step once, then run it on batches.

    import dlpc
    trainer = dlpc.train("examples/mlp.dlpc", loss="cross_entropy",
                         optimizer=dlpc.optim.Adam(lr=1e-3), batch_size=32, target="c")
    loss = trainer.step(x, y)                       # one update; the batch's mean loss
    history = trainer.fit(x_train, y_train, epochs=5, validation=(x_val, y_val))
    trainer.save("w.npz")                           # params + optimizer state
    fn = dlpc.compile(dlpc.load("examples/mlp.dlpc", weights=trainer.weights))

One compiled function per (model, loss, optimizer, batch size): the step module of
`dlpc.passes.train.step` compiled by `dlpc.api.compile`, its params being the model's
params and the optimizer state, its outputs the metrics and their new values. The state
stays resident between steps: on the C target, two prepared argument vectors alternate
(the outputs of one step are the params of the next, no array is converted or copied per
step, only the batch's pointers are written); on the other targets the new arrays are
passed back as they are. Every array of the state can be read (`trainer.state`) and
saved/loaded (`.npz`) at any time; a run resumed from a saved state continues bit for bit
as the uninterrupted run (same batches, same order: `fit` draws its shuffles from `seed`
and the epoch number).

Beyond the step: run-time hyper-parameters per param group (`trainer.param_groups`,
written into the step's inputs before each call; `lr_scheduler` has torch's schedulers),
freezing, gradient accumulation and gradients, any number of inputs and targets, custom
graph losses (`graph_loss`), data sets and memory-mapped files (passes/train/data.py), and
the validation loss and metric; see docs/training.md.

`dlpc.train` is this module, callable: `dlpc.train(...)` is `dlpc.train.Trainer(...)`.
"""

from __future__ import annotations

import builtins
import ctypes
import dataclasses
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dlpc import api
from dlpc.backends.runtime import cbuild
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.backends.runtime.dlp_sim import DlpFunction
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes.train import optim
from dlpc.passes.train import schedule as lr_scheduler
from dlpc.passes.train.data import (
    ArrayDataset,
    columns,
    gather,
    is_dataset,
    iterate_batches,
    load_arrays,
)
from dlpc.passes.train.losses import GraphLoss, Loss, as_loss, numpy_loss, numpy_metric
from dlpc.passes.train.optim import Optimizer, make_optimizer
from dlpc.passes.train.step import TrainStep, train_step_module
from dlpc.reference import graph as ref

__all__ = [
    "Trainer",
    "train",
    "train_step_model",
    "optim",
    "Loss",
    "GraphLoss",
    "graph_loss",
    "lr_scheduler",
]
# torch.optim.lr_scheduler's schedulers, driving a trainer's run-time hyper-parameters
from dlpc.passes.train.schedule import *  # noqa: E402, F403


def bind_batch(model: Model | str | os.PathLike, batch_size: int) -> Model:
    """`model` with its batch dim bound to `batch_size`: a `.dlpc` file (or a Model loaded
    from one, unless bound to that batch already) is read again with its named leading
    dim bound, and another named dim left unbound is a one-line error; any other model
    must already have that batch size."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise DlpcError(f"error: batch size must be a positive int, got {batch_size!r}")
    main = ref.main_func(model.module) if isinstance(model, Model) else None
    first = ref.graph.shape_of(main.args[0]) if main is not None and main.args else ()
    if isinstance(model, str | os.PathLike):
        return _static(api.load(model, batch=batch_size))
    if model.path and Path(model.path).suffix == ".dlpc" and Path(model.path).is_file():
        if first[:1] == (batch_size,) and not _unbound(model):  # (bound at load: dims= too)
            return model
        bound = api.load(model.path, weights=model.weights or None, batch=batch_size)
        bound.name = model.name
        return _static(bound)
    if not first or first[0] != batch_size:
        raise DlpcError(
            f"error: model '{model.name}' has batch size {first[0] if first else 'none'}, "
            f"not {batch_size}; load it from a .dlpc file with a named batch dim "
            f"(x: f32[B, ...])"
        )
    return model


def _unbound(model: Model) -> list[str]:
    """The symbolic dims of a model's inputs (a .dlpc model's named dims left unbound)."""
    from dlpc.dialects import symdims

    shapes = [ref.graph.shape_of(a) for a in ref.main_func(model.module).args]
    return sorted(set().union(*(symdims.symbols(s) for s in shapes)))


def _static(model: Model) -> Model:
    """`model`, refused in one line while a named dim other than the batch is unbound."""
    left = _unbound(model)
    if left:
        dims = ", ".join(f"'{n}': N" for n in left)
        raise DlpcError(
            f"error: model '{model.name}' leaves named dim(s) {', '.join(left)} unbound; "
            f"training needs static shapes: load it with dims={{{dims}}} and the batch bound"
        )
    return model


def graph_loss(source: str | os.PathLike, batch: int | None = None, predictions=None) -> GraphLoss:
    """A loss written in the model language (a `.dlpc` path or its text): `model
    name(p: f32[B, 3], y: f32[B, 3]) { return reduce_mean(abs(p - y)) }`; its arguments
    are the model's first `predictions` results (all by default), then the targets; `B`
    is bound to `batch`."""
    from dlpc.frontends.text import parse_model

    text = str(source)
    if not text.lstrip().startswith("model") and Path(text).suffix == ".dlpc":
        path = Path(text)
        if not path.is_file():
            raise DlpcError(f"error: no such file: {path}")
        loaded = parse_model(path.read_text(), str(path), dims=batch)
    else:
        loaded = parse_model(text, "<loss>", dims=batch)
    return GraphLoss(module=loaded.module, predictions=predictions, name=loaded.name)


def train_step_model(
    model: Model, loss: str | Loss | GraphLoss, optimizer: str | Optimizer, frozen=(), **options
) -> tuple[Model, TrainStep]:
    """The training step of `model` (batch dim already bound) as a Model: its weights
    are the model's plus the initial optimizer state. `options`: train_step_module's
    (accumulate, return_grads). The module is verified by api.compile's pipeline (as its
    input, or after its first pass with DLPC_VERIFY_EACH; a warm-cache hit is IR that
    compiled before), not here too."""
    options.setdefault("verify", False)
    step = train_step_module(model.module, loss, optimizer, model.weights, frozen=frozen, **options)
    weights = {**api.check_weights(model), **step.initial_state}
    return Model(step.module, weights, f"{model.name}_train", model.path), step


# ------------------------------------------------------------------------ running


class _Resident:
    """Runs a compiled step, keeping its params resident (see the module docstring)."""

    def __init__(self, compiled: api.CompiledModel, step: TrainStep, values: dict):
        self.compiled = compiled
        self.fn = compiled.artifact
        if self.fn is None:  # numpy: the generated module, called with a params dict
            namespace: dict = {"__name__": "dlpc_generated"}
            code = builtins.compile(compiled.source, "<dlpc --emit=numpy>", "exec")
            exec(code, namespace)  # noqa: S102 - dlpc's own generated code
            self.main = namespace["main"]
            self.param_names = [n for n in ref.param_names(compiled.lowered)]
        else:
            self.param_names = list(self.fn.param_names)
        missing = [n for n in self.param_names if n not in values]
        if missing:
            raise DlpcError(f"error: no value for parameter '{missing[0]}'")
        self.n_metrics = len(step.metrics)
        main = ref.main_func(step.module)
        self.num_inputs = len(main.args)  # model inputs + targets
        self.dtypes = [np.dtype(ref.result_dtype(a)) for a in main.args]
        out_index = {name: self.n_metrics + k for k, name in enumerate(step.state)}
        # the parameter slot each state output feeds next step (unused state: none)
        self.feeds = [(k, out_index[n]) for k, n in enumerate(self.param_names) if n in out_index]
        self.state_names = list(step.state)
        if self.fn is not None:
            self.params = self.fn.arguments(
                [None] * self.fn.num_inputs, [values[n] for n in self.param_names], skip_inputs=True
            )
        else:
            self.params = [np.asarray(values[n]) for n in self.param_names]
        self.outputs: list[np.ndarray] | None = None  # the last step's outputs
        self.extra = {n: np.asarray(values[n]) for n in step.state if n not in self.param_names}
        # a shared library called through one prepared pointer vector (C and DLP C)
        self._native = self.fn if isinstance(self.fn, CFunction | DlpFunction) else None
        self._c = self._native is not None
        if self._native is not None:
            self._prepare_c(self._native)

    # -- C: two prepared pointer vectors whose params are the other's outputs
    def _prepare_c(self, fn: CFunction | DlpFunction) -> None:
        n_in, n_par = fn.num_inputs, len(self.param_names)
        n = n_in + n_par + fn.num_outputs
        self._bufs = [fn.empty_outputs(), fn.empty_outputs()]
        self._argv = []
        for src, dst in ((None, 0), (0, 1), (1, 0)):
            argv = (ctypes.c_void_p * max(n, 1))()
            params = self.params if src is None else self._next_params(self._bufs[src])
            for k, a in enumerate(params, n_in):
                argv[k] = a.ctypes.data
            for k, a in enumerate(self._bufs[dst], n_in + n_par):
                argv[k] = a.ctypes.data
            self._argv.append((argv, params, dst))
        self._phase = 0  # 0: first call from the initial params; then 1, 2, 1, 2, ...

    def _next_params(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        params = list(self.params)
        for k, o in self.feeds:
            params[k] = outputs[o]
        return params

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One step on converted inputs; the metrics' arrays (valid until the next step)."""
        if self._native is not None:
            argv, params, dst = self._argv[self._phase]
            for k, a in enumerate(inputs):
                argv[k] = a.ctypes.data
            self._native.library.call_argv(argv, inputs)
            self._phase = 1 if self._phase != 1 else 2
            self.outputs = self._bufs[dst]
            self._current = self._argv[self._phase][1]
            return self._bufs[dst][: self.n_metrics]
        if self.fn is None:
            params = dict(zip(self.param_names, self.params))
            outputs = [np.asarray(o) for o in self.main(*inputs, params=params)]
        else:
            outputs = self.fn(*inputs, params=self.params)
        self.params = self._next_params(outputs)
        self.outputs = outputs
        return outputs[: self.n_metrics]

    def convert(self, inputs) -> list[np.ndarray]:
        # the C step reads the batch through raw pointers: row-major copies of any other
        # layout (digits resized for LeNet come out with transposed strides)
        return [np.ascontiguousarray(a) for a in self.compiled.check_inputs(inputs)]

    def current(self) -> dict[str, np.ndarray]:
        """The state arrays as they are now (views into the resident buffers)."""
        params = self._current if self._c and self._phase else self.params
        out = dict(self.extra)
        out.update(zip(self.param_names, params))
        if self.outputs is not None:  # state that is no param of the step (never read)
            for k, name in enumerate(self.state_names):
                if name not in out:
                    out[name] = self.outputs[self.n_metrics + k]
        return out

    def assign(self, values: dict[str, np.ndarray]) -> None:
        """Overwrite the resident state in place (the prepared pointers stay valid)."""
        current = self.current()
        for name, value in values.items():
            if name in current:
                target = current[name]
                value = np.asarray(value)
                if value.shape != target.shape:
                    raise DlpcError(
                        f"error: state '{name}' has shape {value.shape}, expected {target.shape}"
                    )
                np.copyto(target, value.astype(target.dtype, copy=False))


class _Evaluator:
    """The model's inference function at the training batch size, called with the
    current params (compiled once, weights not folded in)."""

    def __init__(self, model: Model, target: str, opt_level: int):
        self.compiled = api.compile(model, target=target, opt_level=opt_level, fold_weights=False)
        self.fn = self.compiled.artifact
        if self.fn is None:
            namespace: dict = {"__name__": "dlpc_generated"}
            exec(builtins.compile(self.compiled.source, "<dlpc>", "exec"), namespace)  # noqa: S102
            self.main = namespace["main"]
        self.batch = ref.graph.shape_of(ref.main_func(model.module).args[0])[0]

    def outputs(self, inputs: list[np.ndarray], params: dict[str, np.ndarray]) -> list:
        """Every output of one batch of exactly the batch size."""
        if self.fn is None:
            return [np.asarray(y) for y in self.main(*inputs, params=params)]
        return [np.array(y) for y in self.fn(*inputs, params=params)]

    def __call__(self, inputs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
        """The first output for every row of the inputs, batch by batch (the last one
        padded)."""
        outs = []
        for start in range(0, len(inputs[0]), self.batch):
            chunks = [np.asarray(x[start : start + self.batch]) for x in inputs]
            n = len(chunks[0])
            if n < self.batch:
                chunks = [
                    np.concatenate([c, np.zeros((self.batch - n, *c.shape[1:]), c.dtype)])
                    for c in chunks
                ]
            if self.fn is None:
                y = np.asarray(self.main(*chunks, params=params)[0])
            else:
                y = self.fn(*chunks, params=params)[0]
            outs.append(np.array(y[:n]))
        return np.concatenate(outs) if outs else np.zeros((0,))


# ------------------------------------------------------------------------ trainer


class Trainer:
    """A compiled training step with resident state; see the module docstring.

    `distribute`: applied to every step module after graph-autodiff (the partition passes'
    hook: `dlpc.dist`'s trainers pass their data/tensor/pipeline split)."""

    def __init__(
        self,
        model: Model | str | os.PathLike,
        loss: str | Loss | GraphLoss = "cross_entropy",
        optimizer: str | Optimizer = "adam",
        batch_size: int = 32,
        target: str = "c",
        opt_level: int = 2,
        weights=None,
        frozen=(),
        param_groups=None,
        lr_lambda: Callable[[int], float] | None = None,
        accumulate: int = 1,
        return_grads: bool = False,
        bn_momentum: float = 0.1,
        cycle_momentum: bool = False,
        scheduler: Callable[[Trainer], object] | None = None,
        distribute: Callable[[ModuleOp], None] | None = None,
    ):
        if isinstance(model, str | os.PathLike) and weights is not None:
            model = api.load(model, weights=weights, batch=batch_size)
        self.model = bind_batch(model, batch_size)
        if target == "c":
            _probe_compiler_early()
        if isinstance(loss, str | os.PathLike) and (
            str(loss).endswith(".dlpc") or str(loss).lstrip().startswith("model")
        ):
            loss = graph_loss(loss, batch_size)  # a loss in the model language
        self.loss = as_loss(loss)
        self.optimizer = make_optimizer(optimizer)
        if param_groups is not None:
            self.optimizer = dataclasses.replace(self.optimizer, groups=tuple(param_groups))
        # momentum a schedule cycles is a run-time input: built in even where it is 0
        declared = self.optimizer
        probe = self.optimizer.assign(list(self.model.param_names)) if scheduler else None
        if scheduler is not None and lr_scheduler.cycles_momentum(scheduler, probe):
            cycle_momentum = True
        if cycle_momentum:
            self.optimizer = _momentum_built_in(self.optimizer)
        self.batch_size = batch_size
        self.target = target
        self.opt_level = opt_level
        self.step_model, self.spec = train_step_model(
            self.model,
            self.loss,
            self.optimizer,
            frozen,
            accumulate=accumulate,
            return_grads=return_grads,
            bn_momentum=bn_momentum,
            distribute=distribute,
        )
        self.compiled = api.compile(
            self.step_model, target=target, opt_level=opt_level, fold_weights=False
        )
        self._resident = _Resident(self.compiled, self.spec, self.step_model.weights)
        self._evaluator: _Evaluator | None = None
        self._loss_module = None  # a graph loss alone (validation), built when first used
        self._frozen = frozen
        self._distribute = distribute  # (every step built later is partitioned the same way)
        self._bn_momentum = bn_momentum
        self._partial: dict[int, _Resident] = {}  # steps at a last partial batch's size
        self.epoch = 0  # completed epochs of `fit` (saved with the state)
        # torch-style param groups: options by torch's names and "params" (the names);
        # a scheduler or the user changes the run-time ones between steps
        self.param_groups: list[dict] = [
            dict(g, params=list(g["params"])) for g in self.spec.groups
        ]
        self._compiled_groups = [dict(g) for g in self.spec.groups]
        self._hyper = self._hyper_slots()
        self._written: list[float] = [float(a) for _, _, _, a in self._hyper]
        if cycle_momentum:  # the declared momenta (0 included), written before step 1
            trained = [n for g in self.spec.groups for n in g["params"]]
            for group, options in zip(self.param_groups, declared.assign(trained)):
                if "momentum" in options:
                    group["momentum"] = options["momentum"]
            self._push_hyper()
        # a scheduler factory (a scheduler class, a functools.partial of one, or any
        # callable taking the trainer) made on this trainer; stepped by the user, as torch's
        self.scheduler = scheduler(self) if scheduler is not None else None
        self._lambda = None
        if lr_lambda is not None:
            from dlpc.passes.train.schedule import LambdaLR

            self._lambda = LambdaLR(self, lr_lambda)

    # ---- state -------------------------------------------------------------------
    @property
    def weights(self) -> dict[str, np.ndarray]:
        """The model's parameters as they are now (copies): feed them to `dlpc.load` /
        `dlpc.compile` for inference. Running statistics are included."""
        state = self._resident.current()
        names = [*self.model.weights, *[n for n in self.spec.state if not n.startswith("opt.")]]
        return {n: np.array(state[n]) for n in dict.fromkeys(names) if n in state}

    @property
    def state(self) -> dict[str, np.ndarray]:
        """Everything a resumed run needs (copies): params, running stats, optimizer
        state (`opt.*`, including the step count `opt.step`) and `trainer.epoch`."""
        out = {n: np.array(v) for n, v in self._resident.current().items()}
        out.update(self.weights)
        out["trainer.epoch"] = np.asarray(self.epoch, np.int64)
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the state to an .npz (atomically: a complete file or none)."""
        from dlpc.diagnostics import save_npz, write_atomically

        path = Path(path)
        if path.suffix != ".npz":
            raise DlpcError(f"error: save path {path} must end in .npz")
        import io

        buffer = io.BytesIO()
        save_npz(buffer, self.state)
        write_atomically(path, buffer.getvalue())

    def load(self, path_or_state) -> None:
        """Restore a state saved by `save` (a path or a dict); names it does not know
        and missing names are errors."""
        state = (
            dict(api.load_weights(path_or_state))
            if isinstance(path_or_state, str | os.PathLike)
            else dict(path_or_state)
        )
        epoch = state.pop("trainer.epoch", None)
        known = self._resident.current()
        unknown = [n for n in state if n not in known]
        if unknown:
            raise DlpcError(f"error: saved state has '{unknown[0]}', which this trainer does not")
        # the hyper-parameters (opt.g<k>.*) are optional: a state saved before they were
        # run-time inputs keeps the trainer's
        hyper = {name for _, _, name, _ in self._hyper}
        missing = [n for n in known if n not in state and n not in hyper]
        if missing:
            raise DlpcError(f"error: saved state lacks '{missing[0]}'")
        self._resident.assign(state)
        self._pull_hyper(set(state))
        if epoch is not None:
            self.epoch = int(epoch)

    # ---- run-time hyper-parameters -----------------------------------------------
    def _hyper_slots(self) -> list[tuple[int, str, str, np.ndarray]]:
        """(group, graph name, param name, the resident array) of every run-time
        hyper-parameter the compiled step reads."""
        current = self._resident.current()
        out = []
        for k, group in enumerate(self.spec.groups):
            for key in self.optimizer.runtime(group):
                name = optim.hyper_name(k, key)
                if name in current:
                    out.append((k, key, name, current[name]))
        return out

    def runtime_hyper(self) -> list[list[str]]:
        """Per param group, the hyper-parameters the compiled step reads at run time."""
        return [self.optimizer.runtime(group) for group in self._compiled_groups]

    def _push_hyper(self) -> None:
        """Write the param groups' run-time hyper-parameters into the step's inputs;
        a compile-time option changed is an error."""
        for i, (k, key, _, array) in enumerate(self._hyper):
            value = optim.Optimizer.hyper_value(self.param_groups[k], key)
            if value != self._written[i]:
                array[...] = value
                self._written[i] = value
        for k, (group, built) in enumerate(zip(self.param_groups, self._compiled_groups)):
            for key, value in built.items():
                if key == "params" or group.get(key) == value:
                    continue
                runtime = self.optimizer.runtime(built)
                if key in runtime or (key == "betas" and "beta1" in runtime):
                    continue
                zero = key in ("weight_decay", "momentum") and not value
                how = "compiled out (0 when built)" if zero else "compiled in"
                if zero and key == "momentum":
                    how += "; build the trainer with cycle_momentum=True to set it"
                raise DlpcError(
                    f"error: param group {k}: '{key}' is {how}; only "
                    f"{', '.join(runtime) or 'nothing'} can change between steps"
                )

    def _pull_hyper(self, names: set[str]) -> None:
        """The param groups' run-time values `names` from the resident state (after
        `load`)."""
        for i, (k, key, name, array) in enumerate(self._hyper):
            if name not in names:
                continue
            value = float(array)
            self._written[i] = value
            group = self.param_groups[k]
            if key in ("beta1", "beta2"):
                betas = list(group["betas"])
                betas[key == "beta2"] = value
                group["betas"] = tuple(betas)
            else:
                group[key] = value

    @property
    def lr(self) -> float:
        """The learning rate of the first param group (set: of every group)."""
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = value

    # ---- training ----------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        return int(self._resident.current()["opt.step"])

    def step(self, *arrays: np.ndarray, **named: np.ndarray) -> float:
        """One update on a batch: the model's inputs then the targets, in order, or by
        name (`step(x=..., target=...)`: `input_names`, then `target_names`); returns
        its loss."""
        if named:
            arrays = (*arrays, *self._by_name(named, len(arrays)))
        return float(self._step(*self._cast(list(arrays), 0))[0])

    @property
    def input_names(self) -> list[str]:
        """The model's inputs, as the step takes them first."""
        return list(self.spec.input_names)

    @property
    def target_names(self) -> list[str]:
        """The loss's targets, as the step takes them after the inputs."""
        return list(self.spec.target_names)

    def _by_name(self, named: dict, given: int) -> list:
        order = [*self.spec.input_names, *self.spec.target_names][given:]
        unknown = [n for n in named if n not in order]
        if unknown:
            raise DlpcError(
                f"error: the step has no input '{unknown[0]}' (it takes {', '.join(order)})"
            )
        missing = [n for n in order if n not in named]
        if missing:
            raise DlpcError(f"error: no array for the step's input '{missing[0]}'")
        return [named[n] for n in order]

    def _step(self, *arrays) -> list[np.ndarray]:
        n = self._resident.num_inputs
        if len(arrays) != n:
            raise DlpcError(
                f"error: the step takes {n} arrays (the model's inputs, then the targets), "
                f"got {len(arrays)}"
            )
        self._push_hyper()
        out = self._resident.run(self._resident.convert(list(arrays)))
        if self._lambda is not None and self.update_done:
            self._lambda.step()
        return out

    @property
    def update_done(self) -> bool:
        """Whether the last step applied an update (with `accumulate` = k: every k-th)."""
        if self.spec.accumulate == 1:
            return True
        return int(self._resident.current()["opt.micro"]) == 0

    @property
    def grads(self) -> dict[str, np.ndarray]:
        """The gradients of the last step's loss (its batch; before clipping and
        accumulation) by param name (copies): Trainer(return_grads=True)."""
        if not self.spec.grads:
            raise DlpcError("error: no gradients: build the trainer with return_grads=True")
        outputs = self._resident.outputs
        if outputs is None:
            raise DlpcError("error: no gradients before the first step")
        first = self._resident.n_metrics + len(self.spec.state)
        return {
            name[len("grad.") :]: np.array(outputs[first + k])
            for k, name in enumerate(self.spec.grads)
        }

    def predict(self, *inputs: np.ndarray) -> np.ndarray:
        """The model's first output for every row of its inputs with the current weights."""
        if self._evaluator is None:
            self._evaluator = _Evaluator(self.model, self.target, self.opt_level)
        arrays = self._cast(list(inputs), 0)
        return self._evaluator(arrays, self.weights)

    def evaluate(self, *arrays) -> dict[str, float]:
        """The loss and the metric that fits it (`Loss.metric`: accuracy, else mse; a
        graph loss: its value only) of the current weights on (inputs..., targets...),
        arrays or a data set."""
        n_in = len(self.spec.input_names)
        if len(arrays) == 1 and is_dataset(arrays[0]):
            data = arrays[0]
            arrays = tuple(gather(data, np.arange(len(data))))
        if len(arrays) != n_in + len(self.spec.target_names):
            raise DlpcError(
                f"error: evaluate takes {n_in} inputs and {len(self.spec.target_names)} "
                f"targets, got {len(arrays)} arrays"
            )
        if isinstance(self.loss, GraphLoss):
            return {"loss": self._graph_loss_value(list(arrays), n_in)}
        out = self.predict(*arrays[:n_in])
        y = np.asarray(arrays[n_in])
        return {
            "loss": numpy_loss(self.loss, out, y),
            self.loss.metric: numpy_metric(self.loss, out, y),
        }

    def _graph_loss_value(self, arrays: list, n_in: int) -> float:
        """A graph loss over (inputs..., targets...): its graph run by the reference
        interpreter on the model's predictions, batch by batch of `batch_size` rows (the
        loss is built for that size; a last partial batch is completed with the first
        rows, wrapping around), the batches' values weighted by their new rows."""
        if self._evaluator is None:
            self._evaluator = _Evaluator(self.model, self.target, self.opt_level)
        if self._loss_module is None:
            assert isinstance(self.loss, GraphLoss)
            self._loss_module = _loss_module(self.model, self.loss)
        inputs = self._cast(arrays[:n_in], 0)
        targets = [np.asarray(a) for a in arrays[n_in:]]
        main = ref.main_func(self._loss_module)
        n_pred = len(main.args) - len(targets)
        dtypes = [np.dtype(ref.result_dtype(a)) for a in main.args[n_pred:]]
        rows, weights, total = len(inputs[0]), self.weights, 0.0
        if rows == 0:
            raise DlpcError("error: evaluate got no samples")
        for start in range(0, rows, self.batch_size):
            idx = (start + np.arange(self.batch_size)) % rows
            outs = self._evaluator.outputs([np.asarray(x)[idx] for x in inputs], weights)
            batch = [np.asarray(t)[idx].astype(d, copy=False) for t, d in zip(targets, dtypes)]
            (value,) = ref.run_reference(self._loss_module, [*outs[:n_pred], *batch], {})
            total += float(value) * min(self.batch_size, rows - start)
        return total / rows

    def _cast(self, arrays: list, first: int) -> list[np.ndarray]:
        """Arrays in the step's dtypes where the kind agrees (int32/uint8 labels to the
        step's int64, f64 data to f32); others are left for the call's check."""
        dtypes = self._resident.dtypes
        out = []
        for k, a in enumerate(arrays, first):
            a = np.asarray(a)
            want = dtypes[k] if k < len(dtypes) else a.dtype
            if a.dtype != want and a.dtype.kind in "iub" and want.kind in "iu":
                a = a.astype(want)
            elif a.dtype != want and a.dtype.kind in "fiu" and want.kind == "f":
                a = a.astype(want)
            out.append(a)
        return out

    def _partial_step(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """One step on a batch smaller than `batch_size` (a last partial batch): the
        step compiled at that size (once), run on the current state, which then becomes
        the trainer's."""
        n = len(arrays[0])
        resident = self._partial.get(n)
        if resident is None:
            model = bind_batch(self.model, n)
            step_model, spec = train_step_model(
                model,
                self.loss,
                self.optimizer,
                self._frozen,
                accumulate=self.spec.accumulate,
                bn_momentum=self._bn_momentum,
                distribute=self._distribute,
            )
            compiled = api.compile(
                step_model, target=self.target, opt_level=self.opt_level, fold_weights=False
            )
            resident = self._partial[n] = _Resident(compiled, spec, step_model.weights)
        self._push_hyper()
        resident.assign(self._resident.current())
        out = resident.run(resident.convert(arrays))
        self._resident.assign(resident.current())
        return [np.array(o) for o in out]

    def fit(
        self,
        data,
        targets=None,
        epochs: int = 1,
        validation=None,
        shuffle: bool = True,
        seed: int = 0,
        callback: Callable[[str, dict], None] | None = None,
        drop_last: bool = True,
    ) -> dict[str, list[float]]:
        """Train for `epochs` more epochs (continuing from `trainer.epoch`).

        `data`: inputs with `targets` (arrays, or tuples of arrays for several), a data
        set (__len__/__getitem__ -> (inputs..., targets...)), an iterable of batches, or
        a `.npy`/`.npz` path (memory-mapped; arrays named as the step's inputs and
        targets, or x and y); see passes/train/data.py. Batches of `batch_size`,
        shuffled per epoch from `seed` and the epoch number; a last partial batch is
        left out (`drop_last`) or trained on (a step compiled at its size).
        `validation`: (inputs..., targets...) or a data set, evaluated after each epoch.
        Returns the history per epoch: loss and accuracy (training, as the steps saw
        it; accuracy for class ids), val_loss, val_accuracy and val_mse (nan where they
        do not apply). `callback(event, info)` sees "batch" and "epoch" events."""
        source, batches = self._source(data, targets)
        history: dict[str, list[float]] = {
            k: [] for k in ("loss", "accuracy", "val_loss", "val_accuracy", "val_mse")
        }
        for _ in range(epochs):
            epoch = self.epoch
            if source is not None:
                n = len(source)
                order = np.arange(n)
                if shuffle:
                    order = np.random.default_rng([seed, epoch]).permutation(n)
                cut = n - n % self.batch_size if drop_last else n
                if cut == 0:
                    raise DlpcError(
                        f"error: {n} samples are fewer than one batch of {self.batch_size}"
                    )
                spans = [order[k : k + self.batch_size] for k in range(0, cut, self.batch_size)]
                stream = (gather(source, idx) for idx in spans)
                n_batches: int | None = len(spans)
            else:
                assert batches is not None
                stream = iterate_batches(batches)
                n_batches = None
            total, correct, seen = 0.0, 0.0, 0
            start = time.perf_counter()
            for k, arrays in enumerate(stream):
                size = len(arrays[0])
                arrays = self._cast(arrays, 0)
                if size == self.batch_size:
                    metrics = self._step(*arrays)
                elif size < self.batch_size and not drop_last:
                    metrics = self._partial_step(arrays)
                elif size < self.batch_size:
                    continue
                else:
                    raise DlpcError(
                        f"error: batch {k} has {size} samples, more than {self.batch_size}"
                    )
                total += float(metrics[0]) * size
                if len(metrics) > 1:
                    correct += float(metrics[1])
                seen += size
                if callback:
                    callback(
                        "batch",
                        {
                            "epoch": epoch,
                            "batch": k,
                            "batches": n_batches,
                            "loss": float(metrics[0]),
                            "mean_loss": total / seen,
                            "accuracy": correct / seen if len(metrics) > 1 else None,
                            "samples_per_s": seen / max(time.perf_counter() - start, 1e-9),
                        },
                    )
            if seen == 0:
                raise DlpcError(f"error: no batch of {self.batch_size} samples in the data")
            self.epoch += 1
            history["loss"].append(total / seen)
            accurate = self.loss.metric == "accuracy"  # class ids, or thresholded binary
            history["accuracy"].append(correct / seen if accurate else float("nan"))
            scores = self.evaluate(*_as_tuple(validation)) if validation is not None else {}
            for key in ("loss", "accuracy", "mse"):
                history[f"val_{key}"].append(scores.get(key, float("nan")))
            if callback:
                callback(
                    "epoch",
                    {
                        "epoch": epoch,
                        "loss": history["loss"][-1],
                        "accuracy": history["accuracy"][-1],
                        "val_loss": history["val_loss"][-1],
                        "val_accuracy": history["val_accuracy"][-1],
                        "val_mse": history["val_mse"][-1],
                        "seconds": time.perf_counter() - start,
                    },
                )
        return history

    def _source(self, data, targets):
        """(an indexable data set, None) or (None, an iterable of batches)."""
        if targets is not None:
            return ArrayDataset(*_as_tuple(data), *_as_tuple(targets)), None
        if isinstance(data, str | os.PathLike):
            arrays = load_arrays(data)
            names = [*self.spec.input_names, *self.spec.target_names]
            if not all(n in arrays for n in names) and len(names) == 2:
                names = ["x", "y"]
            return ArrayDataset(*columns(arrays, names, data)), None
        if is_dataset(data):
            return data, None
        if isinstance(data, Iterable):
            return None, data
        raise DlpcError(
            f"error: fit takes arrays with targets, a data set, batches or a path, got "
            f"{type(data).__name__}"
        )


def _probe_compiler_early() -> None:
    """The C compiler's optional flags and libraries (three small compiles, cached per
    process) probed on a thread while the step is built and lowered, rather than after
    it, when the build first asks for them; a failure is left for the build to report."""

    def probe() -> None:
        try:
            cbuild.flags(cbuild.compiler())
        except Exception:  # noqa: BLE001, S110 - the build says what is wrong
            pass

    threading.Thread(target=probe, name="dlpc-probe-cc", daemon=True).start()


def _momentum_built_in(optimizer: Optimizer) -> Optimizer:
    """`optimizer` with a momentum term in its step for every group (Trainer's
    `cycle_momentum`): a momentum of 0 becomes a placeholder (the trainer writes the
    declared 0 before the first step; with momentum 0 the buffer is the gradient, the
    update plain SGD's). Adam's family cycles beta1, always a run-time input."""
    defaults = optimizer.defaults()
    if "betas" in defaults:
        return optimizer
    if "momentum" not in defaults:
        raise DlpcError(
            f"error: cycle_momentum needs an optimizer with momentum or betas, not {optimizer.name}"
        )
    placeholder = 0.9  # any value > 0: the step reads the run-time one
    groups = tuple(
        {**g, "momentum": placeholder} if "momentum" in g and not g["momentum"] else g
        for g in optimizer.groups
    )
    momentum = optimizer.momentum or placeholder  # type: ignore[attr-defined]
    return dataclasses.replace(optimizer, momentum=momentum, groups=groups)  # type: ignore[call-arg]


def _loss_module(model: Model, loss: GraphLoss):
    """`loss` alone as a graph module: @main(predictions..., targets...) -> the loss."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region

    from dlpc.passes.train._build import Builder

    ret = ref.main_func(model.module).get_return_op()
    assert ret is not None  # a verified model's @main returns
    results = [v.type for v in ret.operands]
    n_pred = loss.predictions or len(results)
    types = [*results[:n_pred], *loss.target_types(n_pred)]
    block = Block(arg_types=types)
    b = Builder.at_end(block)
    value = loss.apply(b, list(block.args[:n_pred]), list(block.args[n_pred:]))
    block.add_op(func.ReturnOp(value))
    f = func.FuncOp("main", (types, [value.type]), Region(block))
    return ModuleOp([f])


def _as_tuple(value) -> tuple:
    if isinstance(value, tuple | list):
        return tuple(value)
    return (value,)


def train(model, loss="cross_entropy", optimizer="adam", batch_size=32, target="c", **options):
    """`Trainer(model, loss, optimizer, batch_size, target, ...)`: see `Trainer`."""
    return Trainer(model, loss, optimizer, batch_size, target, **options)


class _CallableModule(types.ModuleType):
    """`dlpc.train(...)` calls `train(...)`, though `dlpc.train` is this module."""

    def __call__(self, *args, **kwargs):
        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
