"""Optimizers on eager params, with the training step's own update rules.

    opt = dlpc.eager.optim.Adam(model_params, lr=1e-3)
    loss.backward(); opt.step(); opt.zero_grad()

Each update is the graph that `dlpc.passes.train.optim` appends to a compiled training
step (PyTorch's torch.optim formulas: SGD with momentum/Nesterov/weight decay, Adam,
AdamW, RMSprop, Adagrad, NAdam, LAMB, LARS), built here for one param: inputs the
param, its gradient, its state (`opt.step`, the slots) and the run-time hyper-parameters
(rank-0 f64, so changing `lr` does not recompile), outputs the new param and state. It
is compiled once per (optimizer options, shape, dtype, device) and run on the param's
device; the param takes the new values in place (same tensor object).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.eager.autograd import no_grad
from dlpc.eager.tensor import Tensor, from_numpy
from dlpc.frontends.builder import GraphBuilder
from dlpc.passes.train import optim as graph_optim
from dlpc.passes.train._build import Builder

_KERNELS: dict[tuple, dispatch.Kernel] = {}


class Optimizer:
    """Eager params updated by a `dlpc.passes.train.optim.Optimizer`'s rules."""

    def __init__(self, params: Iterable[Tensor], config: graph_optim.Optimizer) -> None:
        self.params = list(params)
        if not self.params:
            raise DlpcError("error: the optimizer got no params")
        if config.clip_norm is not None or config.groups:
            raise DlpcError("error: eager optimizers take no clip_norm or param groups")
        self.config = config
        self.options: dict[str, Any] = config.defaults()  # lr etc.: change between steps
        self.state: list[dict[str, Tensor] | None] = [None] * len(self.params)
        self._hyper: dict[tuple, dict[str, Tensor]] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _group(self) -> dict[str, Any]:
        return {**self.options, "params": ["p"]}

    def _names(self, p: Tensor) -> tuple[list[str], list[str]]:
        """The state's names (slots and step; inputs and outputs) and the hyper names."""
        init = self.config.initial_state({"p": (p.shape, p.dtype)}, [self._group()])
        hyper = [graph_optim.hyper_name(0, k) for k in self.config.runtime(self._group())]
        state = [n for n in init if n not in hyper]
        return state, hyper

    def _kernel(self, p: Tensor, state: list[str], hyper: list[str]) -> dispatch.Kernel:
        key = (self.config, p.shape, p.dtype, p.device.name)
        kernel = _KERNELS.get(key)
        if kernel is not None:
            return kernel
        init = self.config.initial_state({"p": (p.shape, p.dtype)}, [self._group()])
        gb = GraphBuilder(f"eager_{self.config.name}")
        values = {"p": gb.input("p", p.shape, dispatch.dtype_name(p.dtype))}
        values["g"] = gb.input("g", p.shape, dispatch.dtype_name(p.dtype))
        for n in [*state, *hyper]:
            a = init[n]
            values[n] = gb.input(n, a.shape, dispatch.dtype_name(a.dtype))
        b = Builder.at_end(gb.block)
        new_p, new_state = self.config.build(
            b,
            {"p": values["p"]},
            {"p": values["g"]},
            {n: values[n] for n in [*state, *hyper]},
            [self._group()],
        )
        gb.output(new_p["p"], *[new_state[n] for n in state])
        kernel = dispatch.compile_graph(gb, p.device, f"{self.config.name}_step")
        _KERNELS[key] = kernel
        return kernel

    def _hyper_values(self, p: Tensor, hyper: list[str]) -> list[Tensor]:
        group = self._group()
        values = tuple(self.config.hyper_value(group, n.split(".")[-1]) for n in hyper)
        key = (p.device.name, values)
        cached = self._hyper.get(key)
        if cached is None:
            self._hyper.clear()
            cached = self._hyper[key] = {
                n: from_numpy(np.asarray(v, np.float64), p.device) for n, v in zip(hyper, values)
            }
        return [cached[n] for n in hyper]

    def step(self) -> None:
        with no_grad():
            for k, p in enumerate(self.params):
                if p.grad is None:
                    continue
                state_names, hyper = self._names(p)
                state = self.state[k]
                if state is None:
                    init = self.config.initial_state({"p": (p.shape, p.dtype)}, [self._group()])
                    state = {n: from_numpy(init[n], p.device) for n in state_names}
                    self.state[k] = state
                kernel = self._kernel(p, state_names, hyper)
                inputs = [p, p.grad, *[state[n] for n in state_names]]
                outs = kernel.run([*inputs, *self._hyper_values(p, hyper)], Tensor)
                p._set_(outs[0])
                for n, v in zip(state_names, outs[1:]):
                    state[n] = v


def SGD(params, **options) -> Optimizer:  # noqa: N802 - torch's name
    return Optimizer(params, graph_optim.SGD(**options))


def Adam(params, **options) -> Optimizer:  # noqa: N802
    return Optimizer(params, graph_optim.Adam(**options))


def AdamW(params, **options) -> Optimizer:  # noqa: N802
    return Optimizer(params, graph_optim.AdamW(**options))


def make(name: str, params, **options) -> Optimizer:
    """An eager optimizer by `dlpc.passes.train.optim` name (sgd, adam, rmsprop, ...)."""
    return Optimizer(params, graph_optim.make_optimizer(name, **options))
