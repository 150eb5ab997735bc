"""Optimizers as graph rewrites: from the loss's gradients, the new parameters and the new
optimizer state, written as graph ops appended to the training step.

    opt = Adam(lr=1e-3, schedule=Schedule("cosine", total_steps=450), clip_norm=1.0)
    state = opt.initial_state({"fc1.weight": ((256, 784), np.float32), ...})
    new_params, new_state = opt.build(b, params, grads, state_values)

Optimizer state is model state: graph.params named `opt.step` (the number of updates so
far, a rank-0 float: exact up to 2**24 steps) and `opt.<slot>.<param>` (`momentum` for SGD,
`exp_avg` / `exp_avg_sq` for Adam and AdamW), saved with the weights. The update follows
PyTorch's `torch.optim` formulas (defaults included) so a run tracks PyTorch's step by step:

- SGD: g += wd p; b = mu b + (1 - dampening) g (b = g on the first step); g = g + mu b
  (Nesterov) or b; p -= lr g.
- Adam: g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
- AdamW: as Adam without the g += wd p, and p *= 1 - lr wd first.

Gradient clipping by global norm (`clip_norm`, as `torch.nn.utils.clip_grad_norm_`) scales
every gradient by min(1, clip_norm / (||g||_2 + 1e-6)) before the update.

The learning rate at update t (0-based, read from `opt.step`) is `lr * factor(t)`:
`constant`; `step` (x gamma every `step_size` updates); `cosine` (from lr down to `min_lr`
over `total_steps`, PyTorch's CosineAnnealingLR); `warmup` (linear from lr / warmup_steps
up to lr over `warmup_steps`, then constant); `warmup_cosine` (both). Closed forms are graph
ops; the cosine factors, which need a function the graph has no op for, are a constant
table indexed by t (clamped to the last entry).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder

STEP = "opt.step"
SCHEDULES = ("constant", "step", "cosine", "warmup", "warmup_cosine")


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule: the factor applied to `lr` at update t (see above)."""

    kind: str = "constant"
    step_size: int = 1
    gamma: float = 0.1
    total_steps: int = 0
    warmup_steps: int = 0
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise DlpcError(
                f"error: unknown schedule '{self.kind}' (expected {', '.join(SCHEDULES)})"
            )
        if self.kind == "step" and self.step_size < 1:
            raise DlpcError("error: a step schedule needs step_size >= 1")
        if "cosine" in self.kind and self.total_steps < 1:
            raise DlpcError("error: a cosine schedule needs total_steps >= 1")
        if "warmup" in self.kind and self.warmup_steps < 1:
            raise DlpcError("error: a warmup schedule needs warmup_steps >= 1")

    def factors(self, lr: float, steps: int) -> np.ndarray:
        """lr(t) for t = 0 .. steps-1, in float64 (the reference the graph is tested on)."""
        return np.array([self.lr_at(lr, t) for t in range(steps)])

    def lr_at(self, lr: float, t: int) -> float:
        if self.kind == "constant":
            return lr
        if self.kind == "step":
            return lr * self.gamma ** (t // self.step_size)
        value = lr
        if "cosine" in self.kind:
            start = self.warmup_steps if self.kind == "warmup_cosine" else 0
            span = max(self.total_steps - start, 1)
            k = min(max(t - start, 0), span)
            value = self.min_lr + (lr - self.min_lr) * (1 + math.cos(math.pi * k / span)) / 2
        if "warmup" in self.kind and t < self.warmup_steps:
            value = lr * (t + 1) / self.warmup_steps
        return value

    def build(self, b: Builder, lr: float, t: SSAValue) -> SSAValue | float:
        """The learning rate at update `t` (a rank-0 float) as graph ops."""
        if self.kind == "constant":
            return lr
        if self.kind == "step":
            epochs = b.cast(b.cast(b.div(t, float(self.step_size)), i64), graph.f32)
            return b.mul(b.pow(self.gamma, epochs), lr)
        if self.kind == "warmup":
            return b.mul(b.minimum(b.div(b.add(t, 1.0), float(self.warmup_steps)), 1.0), lr)
        table = self.factors(lr, self.total_steps + 1).astype(np.float32)
        index = b.cast(b.minimum(t, float(self.total_steps)), i64)
        return b.op(graph.GatherOp, b.const(table), index, axis=0)


def _like(b: Builder, value, dtype):
    """`value` (a rank-0 f32 or a Python float) in the element type `dtype`."""
    if isinstance(value, SSAValue) and graph.element_type_of(value) != dtype:
        return b.cast(value, dtype)
    return value


def _work_type(dtype):
    """The element type an update of a `dtype` param computes in (f16: f32)."""
    return graph.f32 if np.dtype(graph.numpy_dtype(dtype)) == np.float16 else dtype


Shapes = Mapping[str, tuple[tuple[int, ...], np.dtype]]


@dataclass(frozen=True)
class Optimizer:
    """Common options: learning rate, L2 weight decay, schedule and clipping."""

    lr: float = 1e-3
    weight_decay: float = 0.0
    schedule: Schedule = field(default_factory=Schedule)
    clip_norm: float | None = None

    SLOTS: ClassVar[tuple[str, ...]] = ()
    name = "optimizer"

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise DlpcError(f"error: learning rate must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise DlpcError(f"error: weight decay must be >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise DlpcError(f"error: clip norm must be > 0, got {self.clip_norm}")

    def slot(self, slot: str, param: str) -> str:
        return f"opt.{slot}.{param}"

    def initial_state(self, params: Shapes) -> dict[str, np.ndarray]:
        """The optimizer state before the first update: zeros, and step 0."""
        state: dict[str, np.ndarray] = {STEP: np.zeros((), np.float32)}
        for name, (shape, dtype) in params.items():
            work = np.float32 if np.dtype(dtype).itemsize < 4 else dtype
            for slot in self.SLOTS:
                state[self.slot(slot, name)] = np.zeros(shape, work)
        return state

    def build(
        self,
        b: Builder,
        params: Mapping[str, SSAValue],
        grads: Mapping[str, SSAValue],
        state: Mapping[str, SSAValue],
    ) -> tuple[dict[str, SSAValue], dict[str, SSAValue]]:
        """(new params, new state) by name, as graph ops inserted by `b`."""
        t = state[STEP]
        lr = self.schedule.build(b, self.lr, t)
        grads = self.clip(b, grads)
        new_params: dict[str, SSAValue] = {}
        new_state: dict[str, SSAValue] = {STEP: b.add(t, 1.0)}
        for name, p in params.items():
            slots = {s: state[self.slot(s, name)] for s in self.SLOTS}
            # the step counter and the schedule are f32 and meet an f64 param cast; an f16
            # param is updated in f32 (its state is f32: torch's f16 Adam divides by an eps
            # that rounds to 0) and the new value rounded to f16
            dt = graph.element_type_of(p)
            work = _work_type(dt)
            pw, gw = _like(b, p, work), _like(b, grads[name], work)
            new_p, new_slots = self.update(b, pw, gw, slots, t, _like(b, lr, work))
            new_params[name] = _like(b, new_p, dt)
            for s, v in new_slots.items():
                new_state[self.slot(s, name)] = v
        return new_params, new_state

    def clip(self, b: Builder, grads: Mapping[str, SSAValue]) -> Mapping[str, SSAValue]:
        if self.clip_norm is None or not grads:
            return grads
        squares = [b.sum(b.mul(g, g)) for g in grads.values()]
        total = squares[0]
        for sq in squares[1:]:
            total = b.add(total, sq)
        coef = b.minimum(b.div(self.clip_norm, b.add(b.sqrt(total), 1e-6)), 1.0)
        return {name: b.mul(g, coef) for name, g in grads.items()}

    def update(self, b, p, g, slots, t, lr):  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class SGD(Optimizer):
    """Stochastic gradient descent, with momentum, Nesterov momentum and weight decay."""

    lr: float = 0.01
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    name = "sgd"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise DlpcError("error: nesterov momentum needs momentum > 0 and no dampening")

    @property
    def SLOTS(self) -> tuple[str, ...]:  # type: ignore[override]  # noqa: N802
        return ("momentum",) if self.momentum else ()

    def update(self, b, p, g, slots, t, lr):
        if self.weight_decay:
            g = b.add(g, b.mul(p, self.weight_decay))
        new_slots = {}
        if self.momentum:
            buf = b.add(b.mul(slots["momentum"], self.momentum), b.mul(g, 1.0 - self.dampening))
            # the first update starts the buffer at g itself (PyTorch), dampening or not
            buf = b.where(b.compare(t, 0.0, "eq"), g, buf) if self.dampening else buf
            new_slots["momentum"] = buf
            g = b.add(g, b.mul(buf, self.momentum)) if self.nesterov else buf
        return b.sub(p, b.mul(g, lr)), new_slots


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam (L2 weight decay added to the gradient, as torch.optim.Adam)."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    SLOTS: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq")
    name = "adam"
    decoupled = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not all(0.0 <= beta < 1.0 for beta in self.betas):
            raise DlpcError(f"error: adam betas must be in [0, 1), got {self.betas}")

    def update(self, b, p, g, slots, t, lr):
        b1, b2 = self.betas
        dt = graph.element_type_of(p)
        if self.weight_decay and self.decoupled:
            p = b.mul(p, _like(b, b.sub(1.0, b.mul(lr, self.weight_decay)), dt))
        elif self.weight_decay:
            g = b.add(g, b.mul(p, self.weight_decay))
        m = b.add(b.mul(slots["exp_avg"], b1), b.mul(g, 1.0 - b1))
        v = b.add(b.mul(slots["exp_avg_sq"], b2), b.mul(b.mul(g, g), 1.0 - b2))
        n = b.cast(b.add(t, 1.0), graph.f64)
        # the bias corrections in f64 (torch's Python floats), cast where they meet p
        step_size = b.div(lr, _like(b, b.sub(1.0, b.pow(b1, n)), dt))
        correction = _like(b, b.sqrt(b.sub(1.0, b.pow(b2, n))), dt)
        denom = b.add(b.div(b.sqrt(v), correction), self.eps)
        new_p = b.sub(p, b.mul(b.div(m, denom), step_size))
        return new_p, {"exp_avg": m, "exp_avg_sq": v}


@dataclass(frozen=True)
class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW; default decay 0.01)."""

    weight_decay: float = 1e-2
    name = "adamw"
    decoupled = True


OPTIMIZERS: dict[str, type[Optimizer]] = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


def make_optimizer(name: str | Optimizer, **options) -> Optimizer:
    """An optimizer by name (`sgd`, `adam`, `adamw`) with its options, or `name` itself."""
    if isinstance(name, Optimizer):
        return name
    if name not in OPTIMIZERS:
        raise DlpcError(f"error: unknown optimizer '{name}' (expected {', '.join(OPTIMIZERS)})")
    return OPTIMIZERS[name](**options)
