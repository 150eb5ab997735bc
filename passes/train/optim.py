"""Optimizers as graph rewrites: from the loss's gradients, the new parameters and the new
optimizer state, written as graph ops appended to the training step.

    opt = Adam(lr=1e-3, groups=({"params": "fc1.*", "lr": 1e-4},), clip_norm=1.0)
    groups = opt.assign(["fc1.weight", "fc1.bias", "fc2.weight"])   # -> param groups
    state = opt.initial_state(shapes, groups)
    new_params, new_state = opt.build(b, params, grads, state_values, groups)

Optimizer state is model state: graph.params named `opt.step` (the number of updates so
far, a rank-0 f32: exact up to 2**24 steps) and `opt.<slot>.<param>` (`momentum` for SGD,
`exp_avg` / `exp_avg_sq` / `max_exp_avg_sq` for the Adam family, ...), saved with the
weights. An f16 param's state is f32 and its update computed in f32 (torch's f16 Adam
divides by an eps that rounds to 0), the new value rounded to f16; an f64 param's is f64.

Run-time hyper-parameters: each param group's `lr`, `weight_decay`, `momentum` and
`betas` (those its optimizer has) are rank-0 f64 graph.params `opt.g<k>.<name>`
(`beta1`, `beta2` for betas), read by the step but not returned: the trainer writes them
before a step, so a schedule changes them without recompiling. A weight decay or SGD
momentum that is 0 when the step is built is compiled out (no term, no buffer).

The updates follow PyTorch's `torch.optim` formulas (defaults included), so a run tracks
PyTorch's step by step; t is the 1-based step, scalars in f64 as torch's Python floats:

- SGD: g += wd p; b = mu b + (1 - dampening) g (b = g on the first step); g = g + mu b
  (Nesterov) or b; p -= lr g.
- Adam: g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2 (amsgrad: v' = max(v',
  v), used below for v); p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
- AdamW: as Adam without the g += wd p, and p *= 1 - lr wd first.
- RMSprop: g += wd p; s = alpha s + (1 - alpha) g^2; centred: a = alpha a + (1 - alpha) g,
  d = sqrt(s - a^2) + eps, else d = sqrt(s) + eps; momentum: b = mu b + g / d, p -= lr b;
  else p -= lr g / d.
- Adagrad: g += wd p; s += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps).
- NAdam: g += wd p; mu_t = b1 (1 - 0.5 * 0.96^(t psi)); P = P mu_t (a rank-0 f32 state);
  m, v as Adam; d = sqrt(v / (1 - b2^t)) + eps;
  p -= lr (1 - mu_t) / (1 - P) g / d + lr mu_{t+1} / (1 - P mu_{t+1}) m / d.
- LAMB (You et al. 2019, no clipping of the trust ratio; torch has none): m, v as Adam;
  r = m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd p; p -= lr ||p|| / ||r|| r
  (the ratio 1 where either norm is 0).
- LARS (You et al. 2017; torch has none): r = eta ||p|| / (||g|| + wd ||p|| + eps) (1
  where either norm is 0); b = mu b + lr r (g + wd p); p -= b (without momentum: p -= lr
  r (g + wd p)).

Gradient clipping by global norm (`clip_norm`, as `torch.nn.utils.clip_grad_norm_`) scales
every gradient by min(1, clip_norm / (||g||_2 + 1e-6)) before the update.

`schedule=Schedule(kind, ...)` is an in-graph learning-rate factor read from `opt.step`
(the run-time lr times it): `constant`; `step` (x gamma every `step_size` updates);
`cosine` (PyTorch's CosineAnnealingLR down to `min_lr`); `warmup` (linear from lr /
warmup_steps up to lr); `warmup_cosine` (both). Schedules set from Python per step, with
torch's semantics, are in `schedule.py`.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train import schedule as lr_scheduler  # noqa: F401 - dlpc.optim.lr_scheduler
from dlpc.passes.train._build import Builder

STEP = "opt.step"
SCHEDULES = ("constant", "step", "cosine", "warmup", "warmup_cosine")
# hyper-parameters a schedule may change: run-time inputs of the step
RUNTIME = ("lr", "weight_decay", "momentum", "betas")


@dataclass(frozen=True)
class Schedule:
    """An in-graph learning-rate schedule: the factor applied to `lr` at update t."""

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

    def build(self, b: Builder, base: float, lr: SSAValue, t: SSAValue) -> SSAValue:
        """The learning rate at update `t` as graph ops: the run-time `lr` (rank-0 f64)
        times this schedule's factor for the lr `base` it was built for."""
        if self.kind == "constant":
            return lr
        if self.kind == "step":
            epochs = b.cast(b.cast(b.div(t, float(self.step_size)), i64), graph.f64)
            return b.mul(lr, b.pow(self.gamma, epochs))
        if self.kind == "warmup":
            ramp = b.minimum(b.div(b.add(b.cast(t, graph.f64), 1.0), float(self.warmup_steps)), 1.0)
            return b.mul(lr, ramp)
        table = self.factors(base, self.total_steps + 1) / base
        index = b.cast(b.minimum(t, float(self.total_steps)), i64)
        return b.mul(lr, b.op(graph.GatherOp, b.const(table, graph.f64), index, axis=0))


Shapes = Mapping[str, tuple[tuple[int, ...], np.dtype]]


def _like(b: Builder, value, dtype):
    """`value` (a rank-0 SSA value or a Python float) in the element type `dtype`."""
    if isinstance(value, SSAValue) and graph.element_type_of(value) != dtype:
        return b.cast(value, dtype)
    return value


def _work_type(dtype):
    """The element type an update of a `dtype` param computes in (f16: f32)."""
    return graph.f32 if np.dtype(graph.numpy_dtype(dtype)) == np.float16 else dtype


def hyper_name(group: int, key: str) -> str:
    """The graph.param holding group `group`'s run-time hyper-parameter `key`."""
    return f"opt.g{group}.{key}"


def _matches(name: str, patterns) -> bool:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@dataclass(frozen=True)
class Optimizer:
    """Common options: learning rate, L2 weight decay, param groups, schedule, clipping.

    `groups`: torch-style param groups, each a dict with "params" (a name, a glob pattern
    or a list of them) and the options it overrides; a param goes to the first group that
    matches it, the others to a last group with this optimizer's own options."""

    lr: float = 1e-3
    weight_decay: float = 0.0
    schedule: Schedule = field(default_factory=Schedule)
    clip_norm: float | None = None
    groups: tuple = field(default=(), hash=False, compare=False)

    SLOTS: ClassVar[tuple[str, ...]] = ()
    name = "optimizer"
    # options that are no hyper-parameter of a group
    _NOT_HYPER: ClassVar[tuple[str, ...]] = ("schedule", "clip_norm", "groups")

    def __post_init__(self) -> None:
        self.check(self.defaults(), "")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise DlpcError(f"error: clip norm must be > 0, got {self.clip_norm}")
        for k, group in enumerate(self.groups):
            if not isinstance(group, Mapping) or "params" not in group:
                raise DlpcError(f"error: param group {k} must be a dict with 'params'")
            unknown = [o for o in group if o != "params" and o not in self.defaults()]
            if unknown:
                raise DlpcError(f"error: param group {k}: {self.name} has no option '{unknown[0]}'")
            self.check({**self.defaults(), **group}, f"param group {k}: ")

    def check(self, options: Mapping[str, Any], where: str) -> None:
        """Raise a one-line error for an option value out of its range."""
        if not options["lr"] > 0:
            raise DlpcError(f"error: {where}learning rate must be > 0, got {options['lr']}")
        if options["weight_decay"] < 0:
            raise DlpcError(
                f"error: {where}weight decay must be >= 0, got {options['weight_decay']}"
            )
        betas = options.get("betas")
        if betas is not None and not (len(betas) == 2 and all(0.0 <= beta < 1.0 for beta in betas)):
            raise DlpcError(f"error: {where}{self.name} betas must be in [0, 1), got {betas}")
        if options.get("momentum", 0.0) < 0:
            raise DlpcError(f"error: {where}momentum must be >= 0, got {options['momentum']}")

    def defaults(self) -> dict[str, Any]:
        """The hyper-parameters by torch's names (torch's `optimizer.defaults`)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in self._NOT_HYPER
        }

    def slots(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The state slots a param of a group with `options` keeps."""
        return self.SLOTS

    def slot_init(self, slot: str, shape, dtype, options: Mapping[str, Any]) -> np.ndarray:
        return np.zeros(shape, dtype)

    def runtime(self, options: Mapping[str, Any]) -> list[str]:
        """The run-time hyper-parameters of a group (by graph name)."""
        out = []
        for key in RUNTIME:
            if key not in options or (key in ("weight_decay", "momentum") and not options[key]):
                continue
            out += ["beta1", "beta2"] if key == "betas" else [key]
        return out

    def assign(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The param groups over `names`: each a dict of its options and "params" (the
        names it holds); groups that match nothing are kept (empty), as torch does."""
        groups = [{**self.defaults(), **dict(g), "params": []} for g in self.groups]
        rest = {**self.defaults(), "params": []}
        for name in names:
            for k, g in enumerate(self.groups):
                if _matches(name, g["params"]):
                    groups[k]["params"].append(name)
                    break
            else:
                rest["params"].append(name)
        if rest["params"] or not groups:
            groups.append(rest)
        return groups

    def slot(self, slot: str, param: str) -> str:
        return f"opt.{slot}.{param}"

    def initial_state(
        self, params: Shapes, groups: list[dict[str, Any]] | None = None
    ) -> dict[str, np.ndarray]:
        """The optimizer state before the first update (zeros, step 0) and the groups'
        run-time hyper-parameters."""
        groups = groups if groups is not None else self.assign(list(params))
        state: dict[str, np.ndarray] = {STEP: np.zeros((), np.float32)}
        for k, group in enumerate(groups):
            for key in self.runtime(group):
                state[hyper_name(k, key)] = np.asarray(self.hyper_value(group, key), np.float64)
            for name in group["params"]:
                shape, dtype = params[name]
                work = np.float32 if np.dtype(dtype).itemsize < 4 else np.dtype(dtype)
                for slot in self.slots(group):
                    state[self.slot(slot, name)] = self.slot_init(slot, shape, work, group)
        return state

    @staticmethod
    def hyper_value(group: Mapping[str, Any], key: str) -> float:
        if key in ("beta1", "beta2"):
            return float(group["betas"][key == "beta2"])
        return float(group[key])

    def build(
        self,
        b: Builder,
        params: Mapping[str, SSAValue],
        grads: Mapping[str, SSAValue],
        state: Mapping[str, SSAValue],
        groups: list[dict[str, Any]] | None = None,
    ) -> tuple[dict[str, SSAValue], dict[str, SSAValue]]:
        """(new params, new state) by name, as graph ops inserted by `b`; `state` holds
        the values of `initial_state`'s names."""
        groups = groups if groups is not None else self.assign(list(params))
        t = state[STEP]
        n = b.cast(b.add(t, 1.0), graph.f64)  # the 1-based step, as torch's Python float
        work = {name: _work_type(graph.element_type_of(p)) for name, p in params.items()}
        grads = self.clip(b, {name: _like(b, grads[name], work[name]) for name in params})
        new_params: dict[str, SSAValue] = {}
        new_state: dict[str, SSAValue] = {STEP: b.add(t, 1.0)}
        for k, group in enumerate(groups):
            h: dict[str, Any] = {key: state[hyper_name(k, key)] for key in self.runtime(group)}
            h["lr"] = self.schedule.build(b, group["lr"], h["lr"], t)
            cache: dict = {}  # the group's scalars, built once for all its params
            for name in group["params"]:
                p = params[name]
                dt = graph.element_type_of(p)
                slots = {s: state[self.slot(s, name)] for s in self.slots(group)}
                u = _Update(b, work[name], h, group, n, t, cache)
                new_p, new_slots = self.update(u, _like(b, p, work[name]), grads[name], slots)
                new_params[name] = _like(b, new_p, dt)
                for s, v in new_slots.items():
                    new_state[self.slot(s, name)] = v
        return new_params, new_state

    def clip(self, b: Builder, grads: Mapping[str, SSAValue]) -> Mapping[str, SSAValue]:
        if self.clip_norm is None or not grads:
            return grads
        squares = [b.cast(b.sum(b.mul(g, g)), graph.f64) for g in grads.values()]
        total = squares[0]
        for sq in squares[1:]:
            total = b.add(total, sq)
        coef = b.minimum(b.div(self.clip_norm, b.add(b.sqrt(total), 1e-6)), 1.0)
        return {
            name: b.mul(g, _like(b, coef, graph.element_type_of(g))) for name, g in grads.items()
        }

    def update(
        self, u: _Update, p: SSAValue, g: SSAValue, slots: dict[str, SSAValue]
    ) -> tuple[SSAValue, dict[str, SSAValue]]:  # pragma: no cover - abstract
        raise NotImplementedError


class _Update:
    """What one param's update reads: the builder, its work type, the group's run-time
    hyper-parameters (f64) and compile-time options, the 1-based step `n` (f64) and the
    0-based `t` (f32). Scalars that depend on the group only are built once per group
    (`cache`): the graph has no common-subexpression pass."""

    def __init__(self, b: Builder, work, h: dict, options: Mapping[str, Any], n, t, cache=None):
        self.b, self.work, self.h, self.options, self.n, self.t = b, work, h, options, n, t
        self.cache: dict = {} if cache is None else cache

    def once(self, name: str, build):
        """`build()` for this group and work type, built the first time only."""
        key = (name, self.work)
        if key not in self.cache:
            self.cache[key] = build()
        return self.cache[key]

    def __getitem__(self, key: str):
        """A hyper-parameter: the run-time value (f64) or the compiled-in float."""
        if key in self.h:
            return self.h[key]
        if key in ("beta1", "beta2"):
            return float(self.options["betas"][key == "beta2"])
        return self.options[key]

    def w(self, value):
        """`value` (f64 scalar or float) in the work type."""
        if not isinstance(value, SSAValue):
            return value
        return self.once(f"w{id(value)}", lambda: _like(self.b, value, self.work))

    def decay(self, p: SSAValue, g: SSAValue) -> SSAValue:
        """g + wd p (L2 weight decay), when the group has a weight decay."""
        if not self.options.get("weight_decay"):
            return g
        return self.b.add(g, self.b.mul(p, self.w(self["weight_decay"])))

    def decoupled(self, p: SSAValue) -> SSAValue:
        """p (1 - lr wd) (decoupled weight decay), when the group has one."""
        if not self.options.get("weight_decay"):
            return p
        b = self.b
        factor = self.once("decoupled", lambda: b.sub(1.0, b.mul(self["lr"], self["weight_decay"])))
        return b.mul(p, self.w(factor))

    def one_minus(self, key: str):
        if not isinstance(self[key], SSAValue):
            return 1.0 - self[key]
        return self.once(f"1-{key}", lambda: self.b.sub(1.0, self[key]))

    def moments(self, g, m, v):
        """Adam's first and second moments."""
        b = self.b
        m = b.add(b.mul(m, self.w(self["beta1"])), b.mul(g, self.w(self.one_minus("beta1"))))
        v = b.add(
            b.mul(v, self.w(self["beta2"])), b.mul(b.mul(g, g), self.w(self.one_minus("beta2")))
        )
        return m, v

    def correction(self, key: str) -> SSAValue:
        """1 - beta^n (f64)."""
        return self.once(
            f"correction-{key}", lambda: self.b.sub(1.0, self.b.pow(self._f64(self[key]), self.n))
        )

    def _f64(self, value):
        return value if isinstance(value, SSAValue) else self.b.const(value, graph.f64)


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
        for options in (self.defaults(), *({**self.defaults(), **g} for g in self.groups)):
            if options["nesterov"] and (options["momentum"] <= 0 or options["dampening"] != 0):
                raise DlpcError("error: nesterov momentum needs momentum > 0 and no dampening")

    def slots(self, options):
        return ("momentum",) if options["momentum"] else ()

    def update(self, u, p, g, slots):
        b = u.b
        g = u.decay(p, g)
        new_slots = {}
        if u.options["momentum"]:
            mu = u.w(u["momentum"])
            damp = u.options["dampening"]
            buf = b.add(b.mul(slots["momentum"], mu), b.mul(g, 1.0 - damp) if damp else g)
            # the first update starts the buffer at g itself (PyTorch), dampening or not
            buf = b.where(b.compare(u.t, 0.0, "eq"), g, buf) if damp else buf
            new_slots["momentum"] = buf
            g = b.add(g, b.mul(buf, mu)) if u.options["nesterov"] else buf
        return b.sub(p, b.mul(g, u.w(u["lr"]))), new_slots


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam (L2 weight decay added to the gradient, as torch.optim.Adam); amsgrad."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    amsgrad: bool = False
    name = "adam"
    decoupled = False

    def slots(self, options):
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")[: 3 if options["amsgrad"] else 2]

    def update(self, u, p, g, slots):
        b = u.b
        p = u.decoupled(p) if self.decoupled else p
        g = g if self.decoupled else u.decay(p, g)
        m, v = u.moments(g, slots["exp_avg"], slots["exp_avg_sq"])
        new_slots = {"exp_avg": m, "exp_avg_sq": v}
        if u.options["amsgrad"]:
            v = new_slots["max_exp_avg_sq"] = b.maximum(slots["max_exp_avg_sq"], v)
        # the bias corrections in f64 (torch's Python floats), cast where they meet p
        step_size = u.once("step_size", lambda: u.w(b.div(u["lr"], u.correction("beta1"))))
        root = u.once("root_c2", lambda: u.w(b.sqrt(u.correction("beta2"))))
        denom = b.add(b.div(b.sqrt(v), root), u.options["eps"])
        return b.sub(p, b.mul(b.div(m, denom), step_size)), new_slots


@dataclass(frozen=True)
class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW; default decay 0.01)."""

    weight_decay: float = 1e-2
    name = "adamw"
    decoupled = True


@dataclass(frozen=True)
class RMSprop(Optimizer):
    """RMSprop (torch.optim.RMSprop), centred or not, with momentum."""

    lr: float = 1e-2
    alpha: float = 0.99
    eps: float = 1e-8
    momentum: float = 0.0
    centered: bool = False
    name = "rmsprop"

    def slots(self, options):
        out = ("square_avg",)
        out += ("grad_avg",) if options["centered"] else ()
        return out + (("momentum",) if options["momentum"] else ())

    def update(self, u, p, g, slots):
        b = u.b
        g = u.decay(p, g)
        alpha = u.options["alpha"]
        s = b.add(b.mul(slots["square_avg"], alpha), b.mul(b.mul(g, g), 1.0 - alpha))
        new_slots = {"square_avg": s}
        if u.options["centered"]:
            a = b.add(b.mul(slots["grad_avg"], alpha), b.mul(g, 1.0 - alpha))
            new_slots["grad_avg"] = a
            s = b.sub(s, b.mul(a, a))
        avg = b.add(b.sqrt(s), u.options["eps"])
        lr = u.w(u["lr"])
        if u.options["momentum"]:
            buf = b.add(b.mul(slots["momentum"], u.w(u["momentum"])), b.div(g, avg))
            new_slots["momentum"] = buf
            return b.sub(p, b.mul(buf, lr)), new_slots
        return b.sub(p, b.mul(b.div(g, avg), lr)), new_slots


@dataclass(frozen=True)
class Adagrad(Optimizer):
    """Adagrad (torch.optim.Adagrad)."""

    lr: float = 1e-2
    lr_decay: float = 0.0
    initial_accumulator_value: float = 0.0
    eps: float = 1e-10
    name = "adagrad"
    SLOTS: ClassVar[tuple[str, ...]] = ("sum",)

    def slot_init(self, slot, shape, dtype, options):
        return np.full(shape, options["initial_accumulator_value"], dtype)

    def update(self, u, p, g, slots):
        b = u.b
        g = u.decay(p, g)
        clr = u["lr"]
        if u.options["lr_decay"]:
            decay = u.options["lr_decay"]
            clr = u.once("clr", lambda: b.div(u["lr"], b.add(b.mul(b.sub(u.n, 1.0), decay), 1.0)))
        s = b.add(slots["sum"], b.mul(g, g))
        std = b.add(b.sqrt(s), u.options["eps"])
        return b.sub(p, b.mul(b.div(g, std), u.w(clr))), {"sum": s}


@dataclass(frozen=True)
class NAdam(Optimizer):
    """NAdam (torch.optim.NAdam, L2 weight decay)."""

    lr: float = 2e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum_decay: float = 4e-3
    name = "nadam"
    SLOTS: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq", "mu_product")

    def slot_init(self, slot, shape, dtype, options):
        # torch keeps the running product of the momentum coefficients as an f32 scalar
        return np.ones((), np.float32) if slot == "mu_product" else np.zeros(shape, dtype)

    def update(self, u, p, g, slots):
        b = u.b
        g = u.decay(p, g)
        psi = u.options["momentum_decay"]
        beta1 = u["beta1"]

        def mu(step):  # beta1 (1 - 0.5 * 0.96^(step psi))
            return b.mul(b.sub(1.0, b.mul(b.pow(0.96, b.mul(step, psi)), 0.5)), beta1)

        mu_t = u.once("mu_t", lambda: mu(u.n))
        mu_next = u.once("mu_next", lambda: mu(b.add(u.n, 1.0)))
        mu32 = u.once("mu_t32", lambda: b.cast(mu_t, graph.f32))
        product = b.mul(slots["mu_product"], mu32)  # f32, as torch
        product64 = b.cast(product, graph.f64)
        m, v = u.moments(g, slots["exp_avg"], slots["exp_avg_sq"])
        denom = b.add(
            b.sqrt(b.div(v, u.once("c2", lambda: u.w(u.correction("beta2"))))), u.options["eps"]
        )
        lr = u["lr"]
        c_grad = u.w(b.div(b.mul(lr, b.sub(1.0, mu_t)), b.sub(1.0, product64)))
        c_avg = u.w(b.div(b.mul(lr, mu_next), b.sub(1.0, b.mul(product64, mu_next))))
        new_p = b.sub(b.sub(p, b.mul(b.div(g, denom), c_grad)), b.mul(b.div(m, denom), c_avg))
        return new_p, {"exp_avg": m, "exp_avg_sq": v, "mu_product": product}


@dataclass(frozen=True)
class LAMB(Optimizer):
    """LAMB (You et al. 2019, "Large batch optimization for deep learning"), layer-wise
    trust ratio ||p|| / ||r|| without clipping; weight decay inside the ratio."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6
    name = "lamb"
    SLOTS: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq")

    def update(self, u, p, g, slots):
        b = u.b
        m, v = u.moments(g, slots["exp_avg"], slots["exp_avg_sq"])
        m_hat = b.div(m, u.once("c1", lambda: u.w(u.correction("beta1"))))
        v_hat = b.div(v, u.once("c2", lambda: u.w(u.correction("beta2"))))
        r = b.div(m_hat, b.add(b.sqrt(v_hat), u.options["eps"]))
        if u.options["weight_decay"]:
            r = b.add(r, b.mul(p, u.w(u["weight_decay"])))
        p_norm, r_norm = b.sqrt(b.sum(b.mul(p, p))), b.sqrt(b.sum(b.mul(r, r)))
        both = b.mul(
            b.cast(b.compare(p_norm, 0.0, "gt"), u.work),
            b.cast(b.compare(r_norm, 0.0, "gt"), u.work),
        )
        ratio = b.div(p_norm, b.maximum(r_norm, 1e-30))
        trust = b.where(b.compare(both, 0.0, "gt"), ratio, 1.0)
        return b.sub(p, b.mul(r, b.mul(trust, u.w(u["lr"])))), {"exp_avg": m, "exp_avg_sq": v}


@dataclass(frozen=True)
class LARS(Optimizer):
    """LARS (You, Gitman, Ginsburg 2017, "Large batch training of convolutional
    networks"): a layer-wise local rate eta ||p|| / (||g|| + wd ||p|| + eps) (1 where
    either norm is 0) scales the step of SGD with momentum on g + wd p; torch has none.

    `exclude`: params left out of the layer adaptation and the weight decay (names or
    glob patterns, or a predicate on the name), as LARS users exclude biases and batch
    norm's scales and shifts (SimCLR's `exclude_from_weight_decay` and
    `exclude_from_layer_adaptation`): each group's excluded params form a group of their
    own after the others, with `adapt=False` and weight decay 0. A group's `adapt=False`
    is the same by hand: its step is SGD with momentum's, lr (g + wd p)."""

    lr: float = 0.1
    momentum: float = 0.9
    eta: float = 1e-3
    eps: float = 1e-8
    adapt: bool = True
    exclude: Any = field(default=(), hash=False, compare=False)
    name = "lars"
    _NOT_HYPER: ClassVar[tuple[str, ...]] = (*Optimizer._NOT_HYPER, "exclude")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (callable(self.exclude) or isinstance(self.exclude, str | Sequence)):
            raise DlpcError(
                f"error: lars exclude must be names, glob patterns or a predicate, "
                f"got {type(self.exclude).__name__}"
            )

    def excluded(self, name: str) -> bool:
        """Whether `exclude` leaves the param `name` out of adaptation and decay."""
        if callable(self.exclude):
            return bool(self.exclude(name))
        return _matches(name, self.exclude)

    def assign(self, names: Sequence[str]) -> list[dict[str, Any]]:
        groups = super().assign(names)
        kept: list[dict[str, Any]] = []
        split: list[dict[str, Any]] = []
        for k, group in enumerate(groups):
            out = [n for n in group["params"] if self.excluded(n)]
            if not out:
                kept.append(group)
                continue
            rest = [n for n in group["params"] if n not in out]
            if rest or k < len(self.groups):  # a declared group stays, even empty
                kept.append({**group, "params": rest})
            split.append({**group, "weight_decay": 0.0, "adapt": False, "params": out})
        return kept + split

    def slots(self, options):
        return ("momentum",) if options["momentum"] else ()

    def update(self, u, p, g, slots):
        b = u.b
        if u.options["adapt"]:
            p_norm, g_norm = b.sqrt(b.sum(b.mul(p, p))), b.sqrt(b.sum(b.mul(g, g)))
            denom = b.add(g_norm, u.options["eps"])
            if u.options["weight_decay"]:
                denom = b.add(denom, b.mul(p_norm, u.w(u["weight_decay"])))
            ratio = b.div(b.mul(p_norm, u.options["eta"]), b.maximum(denom, 1e-30))
            both = b.mul(
                b.cast(b.compare(p_norm, 0.0, "gt"), u.work),
                b.cast(b.compare(g_norm, 0.0, "gt"), u.work),
            )
            local = b.mul(b.where(b.compare(both, 0.0, "gt"), ratio, 1.0), u.w(u["lr"]))
        else:
            local = u.w(u["lr"])
        step = b.mul(u.decay(p, g), local)
        if not u.options["momentum"]:
            return b.sub(p, step), {}
        buf = b.add(b.mul(slots["momentum"], u.w(u["momentum"])), step)
        return b.sub(p, buf), {"momentum": buf}


OPTIMIZERS: dict[str, type[Optimizer]] = {
    "sgd": SGD,
    "adam": Adam,
    "adamw": AdamW,
    "rmsprop": RMSprop,
    "adagrad": Adagrad,
    "nadam": NAdam,
    "lamb": LAMB,
    "lars": LARS,
}


def make_optimizer(name: str | Optimizer, **options) -> Optimizer:
    """An optimizer by name (`sgd`, `adam`, ...) with its options, or `name` itself."""
    if isinstance(name, Optimizer):
        return name
    if name not in OPTIMIZERS:
        raise DlpcError(f"error: unknown optimizer '{name}' (expected {', '.join(OPTIMIZERS)})")
    try:
        return OPTIMIZERS[name](**options)
    except TypeError as e:
        raise DlpcError(f"error: {name}: {e}") from None
