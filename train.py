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

`dlpc.train` is this module, callable: `dlpc.train(...)` is `dlpc.train.Trainer(...)`.
"""

from __future__ import annotations

import builtins
import ctypes
import dataclasses
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dlpc import api
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.backends.runtime.dlp_sim import DlpFunction
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes.train import optim
from dlpc.passes.train import schedule as lr_scheduler
from dlpc.passes.train.losses import GraphLoss, Loss, as_loss
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
    from one) is read again with its named dim bound; any other model must already have
    that batch size."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise DlpcError(f"error: batch size must be a positive int, got {batch_size!r}")
    if isinstance(model, str | os.PathLike):
        return api.load(model, batch=batch_size)
    if model.path and Path(model.path).suffix == ".dlpc" and Path(model.path).is_file():
        bound = api.load(model.path, weights=model.weights or None, batch=batch_size)
        bound.name = model.name
        return bound
    main = ref.main_func(model.module)
    first = ref.graph.shape_of(main.args[0]) if main.args else ()
    if not first or first[0] != batch_size:
        raise DlpcError(
            f"error: model '{model.name}' has batch size {first[0] if first else 'none'}, "
            f"not {batch_size}; load it from a .dlpc file with a named batch dim "
            f"(x: f32[B, ...])"
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
    (accumulate, return_grads)."""
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
        self.num_inputs = len(ref.main_func(step.module).args)  # model inputs + targets
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

    def __call__(self, x: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
        """The first output for every row of `x`, batch by batch (the last one padded)."""
        outs = []
        for start in range(0, len(x), self.batch):
            chunk = x[start : start + self.batch]
            n = len(chunk)
            if n < self.batch:
                pad = np.zeros((self.batch - n, *chunk.shape[1:]), chunk.dtype)
                chunk = np.concatenate([chunk, pad])
            if self.fn is None:
                y = np.asarray(self.main(chunk, params=params)[0])
            else:
                y = self.fn(chunk, params=params)[0]
            outs.append(np.array(y[:n]))
        return np.concatenate(outs) if outs else np.zeros((0,))


# ------------------------------------------------------------------------ trainer


class Trainer:
    """A compiled training step with resident state; see the module docstring."""

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
    ):
        if isinstance(model, str | os.PathLike) and weights is not None:
            model = api.load(model, weights=weights, batch=batch_size)
        self.model = bind_batch(model, batch_size)
        if isinstance(loss, str | os.PathLike) and (
            str(loss).endswith(".dlpc") or str(loss).lstrip().startswith("model")
        ):
            loss = graph_loss(loss, batch_size)  # a loss in the model language
        self.loss = as_loss(loss)
        self.optimizer = make_optimizer(optimizer)
        if param_groups is not None:
            self.optimizer = dataclasses.replace(self.optimizer, groups=tuple(param_groups))
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
        )
        self.compiled = api.compile(
            self.step_model, target=target, opt_level=opt_level, fold_weights=False
        )
        self._resident = _Resident(self.compiled, self.spec, self.step_model.weights)
        self._evaluator: _Evaluator | None = None
        self.epoch = 0  # completed epochs of `fit` (saved with the state)
        # torch-style param groups: options by torch's names and "params" (the names);
        # a scheduler or the user changes the run-time ones between steps
        self.param_groups: list[dict] = [
            dict(g, params=list(g["params"])) for g in self.spec.groups
        ]
        self._compiled_groups = [dict(g) for g in self.spec.groups]
        self._hyper = self._hyper_slots()
        self._written: list[float] = [float(a) for _, _, _, a in self._hyper]
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
        missing = [n for n in known if n not in state]
        if missing:
            raise DlpcError(f"error: saved state lacks '{missing[0]}'")
        self._resident.assign(state)
        self._pull_hyper()
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
                raise DlpcError(
                    f"error: param group {k}: '{key}' is {how}; only "
                    f"{', '.join(runtime) or 'nothing'} can change between steps"
                )

    def _pull_hyper(self) -> None:
        """The param groups' run-time values from the resident state (after `load`)."""
        for i, (k, key, _, array) in enumerate(self._hyper):
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
        return float(self._step(*arrays)[0])

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

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The model's output for every row of `x` with the current weights."""
        if self._evaluator is None:
            self._evaluator = _Evaluator(self.model, self.target, self.opt_level)
        return self._evaluator(np.asarray(x, dtype=self._input_dtype()), self.weights)

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """Accuracy (class-id losses) of the current weights on (x, y)."""
        out = self.predict(x)
        result = {}
        if self.loss.classifies:
            result["accuracy"] = float(np.mean(out.argmax(axis=1) == np.asarray(y)))
        else:
            result["mse"] = float(np.mean((out - np.asarray(y)) ** 2))
        return result

    def _input_dtype(self):
        return ref.result_dtype(ref.main_func(self.model.module).args[0])

    def fit(
        self,
        x: np.ndarray,
        y: np.ndarray,
        epochs: int = 1,
        validation: tuple[np.ndarray, np.ndarray] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        callback: Callable[[str, dict], None] | None = None,
    ) -> dict[str, list[float]]:
        """Train for `epochs` more epochs (continuing from `trainer.epoch`) on (x, y) in
        batches of `batch_size` (a last incomplete batch is left out: the step's batch size
        is compiled in), shuffled per epoch from `seed` and the epoch number. Returns the
        history per epoch: loss, accuracy (training, as the steps saw it), val_accuracy.
        `callback(event, info)` sees "batch" (loss, correct, seen) and "epoch" events."""
        x = np.asarray(x, dtype=self._input_dtype())
        y = np.asarray(y)
        if len(x) != len(y):
            raise DlpcError(f"error: {len(x)} samples but {len(y)} targets")
        n_batches = len(x) // self.batch_size
        if n_batches == 0:
            raise DlpcError(
                f"error: {len(x)} samples are fewer than one batch of {self.batch_size}"
            )
        history: dict[str, list[float]] = {"loss": [], "accuracy": [], "val_accuracy": []}
        for _ in range(epochs):
            epoch = self.epoch
            order = np.arange(len(x))
            if shuffle:
                order = np.random.default_rng([seed, epoch]).permutation(len(x))
            total, correct, seen = 0.0, 0.0, 0
            start = time.perf_counter()
            for k in range(n_batches):
                idx = order[k * self.batch_size : (k + 1) * self.batch_size]
                metrics = self._step(x[idx], y[idx])
                total += float(metrics[0]) * self.batch_size
                if len(metrics) > 1:
                    correct += float(metrics[1])
                seen += self.batch_size
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
            self.epoch += 1
            history["loss"].append(total / seen)
            history["accuracy"].append(correct / seen if self.loss.classifies else float("nan"))
            val = float("nan")
            if validation is not None and self.loss.classifies:
                val = self.evaluate(*validation)["accuracy"]
            history["val_accuracy"].append(val)
            if callback:
                callback(
                    "epoch",
                    {
                        "epoch": epoch,
                        "loss": history["loss"][-1],
                        "accuracy": history["accuracy"][-1],
                        "val_accuracy": val,
                        "seconds": time.perf_counter() - start,
                    },
                )
        return history


def train(model, loss="cross_entropy", optimizer="adam", batch_size=32, target="c", **options):
    """`Trainer(model, loss, optimizer, batch_size, target, ...)`: see `Trainer`."""
    return Trainer(model, loss, optimizer, batch_size, target, **options)


class _CallableModule(types.ModuleType):
    """`dlpc.train(...)` calls `train(...)`, though `dlpc.train` is this module."""

    def __call__(self, *args, **kwargs):
        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
