"""Learning-rate schedulers with `torch.optim.lr_scheduler`'s semantics, driving a
trainer's run-time hyper-parameters (optim.py: each param group's lr, momentum, betas and
weight decay are inputs of the compiled step, so nothing is recompiled).

    trainer = dlpc.train(model, optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.9))
    sched = dlpc.train.lr_scheduler.OneCycleLR(trainer, max_lr=0.1, total_steps=100)
    for x, y in batches:
        trainer.step(x, y)
        sched.step()

A scheduler takes anything with `param_groups` (a list of dicts with "lr", ... as torch's
optimizer has: `Trainer.param_groups`), sets "initial_lr" in each group and the lr of step
0 on construction, and the lr of the next step on each `step()` (ReduceLROnPlateau:
`step(metric)`). The lr of step e is computed in closed form where torch's chained update
has one (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, LambdaLR),
which equals torch's up to rounding of the last place; CosineAnnealingWarmRestarts,
OneCycleLR, ReduceLROnPlateau and SequentialLR follow torch's code.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from dlpc.diagnostics import DlpcError

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "LinearLR",
    "LambdaLR",
    "OneCycleLR",
    "SequentialLR",
    "ReduceLROnPlateau",
]


def _per_group(value, groups: list, what: str) -> list:
    if isinstance(value, list | tuple):
        if len(value) != len(groups):
            raise DlpcError(f"error: {len(value)} values of {what} for {len(groups)} param groups")
        return list(value)
    return [value] * len(groups)


def cycles_momentum(factory: Any, groups: list[dict[str, Any]] | None = None) -> bool:
    """Whether a scheduler factory given to a Trainer will cycle the momentum: a
    scheduler class or a functools.partial of one (OneCycleLR, unless its cycle_momentum
    is False), or any callable taking the trainer (a lambda, a SequentialLR of a
    OneCycleLR): that one is made on a stand-in trainer with `groups` (the optimizer's
    declared groups) whose momentum is compiled out, and cycles the momentum if it says
    so. (Any other error it raises is left to its construction on the real trainer.)"""
    func, keywords = factory, {}
    if isinstance(factory, functools.partial):
        func, keywords = factory.func, factory.keywords
    if isinstance(func, type):
        return func is OneCycleLR and bool(keywords.get("cycle_momentum", True))
    if groups is None:
        return False
    try:
        factory(_StandIn(groups))
    except DlpcError as e:
        return MOMENTUM_COMPILED_OUT in str(e)
    except Exception:  # noqa: BLE001 - reported when made on the real trainer
        return False
    return False


MOMENTUM_COMPILED_OUT = "was built with momentum 0 (compiled out)"


class _StandIn:
    """A trainer as a scheduler sees it at construction: param groups (copies) and no
    run-time momentum."""

    def __init__(self, groups: list[dict[str, Any]]):
        self.param_groups = [dict(g) for g in groups]

    def runtime_hyper(self) -> list[list[str]]:
        return [["lr"] for _ in self.param_groups]


def _check_momentum_runtime(trainer: Any, who: str) -> None:
    """A one-line error where `trainer`'s step was built without the momentum term (the
    momentum was 0 at construction), so a schedule cannot set it."""
    runtime = getattr(trainer, "runtime_hyper", None)
    if runtime is None:
        return
    for k, keys in enumerate(runtime()):
        if "momentum" not in keys:
            raise DlpcError(
                f"error: {who} cycles the momentum, but param group {k} "
                f"{MOMENTUM_COMPILED_OUT}; build the trainer with cycle_momentum=True"
            )


class LRScheduler:
    """The base: `lr_at(e, base_lr)` gives a group's lr at step e (override it)."""

    def __init__(self, optimizer: Any, last_epoch: int = -1):
        if not hasattr(optimizer, "param_groups"):
            raise DlpcError(
                f"error: a scheduler needs a trainer (param_groups), got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, epoch: int, base_lr: float, group: dict) -> float:  # pragma: no cover
        raise NotImplementedError

    def step(self) -> None:
        self.last_epoch += 1
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = self.lr_at(self.last_epoch, base, group)

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class StepLR(LRScheduler):
    """lr = base * gamma^(e // step_size)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if step_size < 1:
            raise DlpcError(f"error: StepLR step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch, base_lr, group):
        return base_lr * self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base * gamma^(number of milestones <= e)."""

    def __init__(self, optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch, base_lr, group):
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, epoch)


class ExponentialLR(LRScheduler):
    """lr = base * gamma^e."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch, base_lr, group):
        return base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) (1 + cos(pi e / T_max)) / 2."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch, base_lr, group):
        cos = 1 + math.cos(math.pi * epoch / self.T_max)
        return self.eta_min + (base_lr - self.eta_min) * cos / 2


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing over T_i steps, restarting with T_i *= T_mult (SGDR)."""

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch=-1):  # noqa: N803
        if T_0 < 1 or T_mult < 1:
            raise DlpcError("error: CosineAnnealingWarmRestarts needs T_0, T_mult >= 1")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def step(self) -> None:
        self.T_cur += 1
        if self.T_cur >= self.T_i:
            self.T_cur -= self.T_i
            self.T_i *= self.T_mult
        super().step()

    def lr_at(self, epoch, base_lr, group):
        cos = 1 + math.cos(math.pi * self.T_cur / self.T_i)
        return self.eta_min + (base_lr - self.eta_min) * cos / 2


class LinearLR(LRScheduler):
    """lr = base * (start + (end - start) min(e, total_iters) / total_iters): linear
    warm-up with the defaults' start_factor < 1."""

    def __init__(
        self,
        optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise DlpcError("error: LinearLR factors must be in (0, 1] and [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch, base_lr, group):
        span = self.end_factor - self.start_factor
        return base_lr * (
            self.start_factor + span * min(epoch, self.total_iters) / self.total_iters
        )


class LambdaLR(LRScheduler):
    """lr = base * lr_lambda(e): a user's callable (one, or one per group)."""

    def __init__(self, optimizer, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1):
        self.lr_lambdas = _per_group(lr_lambda, optimizer.param_groups, "lr_lambda")
        super().__init__(optimizer, last_epoch)

    def step(self) -> None:
        self.last_epoch += 1
        for k, group in enumerate(self.optimizer.param_groups):
            group["lr"] = self.base_lrs[k] * self.lr_lambdas[k](self.last_epoch)

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith 2018), torch's phases: lr from max_lr / div_factor up to
    max_lr over pct_start of the steps, then down to initial / final_div_factor; momentum
    (SGD's, or beta1) cycled inversely between max_momentum and base_momentum."""

    def __init__(
        self,
        optimizer,
        max_lr,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise DlpcError("error: OneCycleLR needs total_steps or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps < 1:
            raise DlpcError(f"error: OneCycleLR total_steps must be >= 1, got {total_steps}")
        if anneal_strategy not in ("cos", "linear"):
            raise DlpcError(f"error: OneCycleLR anneal_strategy '{anneal_strategy}'")
        self.total_steps = total_steps
        self.anneal = anneal_strategy
        n = float(pct_start * total_steps)
        if three_phase:
            self.phases = [
                (n - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * n - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self.phases = [
                (n - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, top in zip(groups, _per_group(max_lr, groups, "max_lr")):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = "betas" in groups[0]
            if not self.use_beta1 and "momentum" not in groups[0]:
                raise DlpcError(
                    "error: OneCycleLR cycle_momentum needs an optimizer with momentum or betas"
                )
            if not self.use_beta1:
                _check_momentum_runtime(optimizer, "OneCycleLR")
            tops = _per_group(max_momentum, groups, "max_momentum")
            bases = _per_group(base_momentum, groups, "base_momentum")
            if last_epoch == -1:
                for group, top, base in zip(groups, tops, bases):
                    if self.use_beta1:
                        group["betas"] = (top, *group["betas"][1:])
                    else:
                        group["momentum"] = top
                    group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)

    def _interpolate(self, start, end, pct):
        if self.anneal == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def lr_at(self, epoch, base_lr, group):
        if epoch > self.total_steps:
            raise DlpcError(
                f"error: OneCycleLR stepped {epoch} times; total_steps is {self.total_steps}"
            )
        start_step = 0.0
        for k, (end_step, lr0, lr1, m0, m1) in enumerate(self.phases):
            if epoch <= end_step or k == len(self.phases) - 1:
                pct = (epoch - start_step) / (end_step - start_step)
                if self.cycle_momentum:
                    momentum = self._interpolate(group[m0], group[m1], pct)
                    if self.use_beta1:
                        group["betas"] = (momentum, *group["betas"][1:])
                    else:
                        group["momentum"] = momentum
                return self._interpolate(group[lr0], group[lr1], pct)
            start_step = end_step
        raise AssertionError("unreachable: the last phase always matches")


class SequentialLR(LRScheduler):
    """Schedulers one after another, switching at `milestones` (e.g. LinearLR warm-up,
    then cosine); each later one starts at its own step 0, as torch's."""

    def __init__(self, optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int]):
        if len(milestones) != len(schedulers) - 1:
            raise DlpcError("error: SequentialLR needs one milestone fewer than schedulers")
        self.optimizer = optimizer
        self.schedulers, self.milestones = list(schedulers), list(milestones)
        self.last_epoch = 0
        for group, base in zip(optimizer.param_groups, self.schedulers[0].base_lrs):
            group["lr"] = base
        # undo the construction step of each scheduler (once, if listed twice), then start
        # the first
        for sched in {id(s): s for s in self.schedulers}.values():
            sched.last_epoch -= 1
        self.schedulers[0].step()

    def step(self) -> None:
        self.last_epoch += 1
        k = bisect.bisect_right(self.milestones, self.last_epoch)
        sched = self.schedulers[k]
        if k > 0 and self.milestones[k - 1] == self.last_epoch:
            sched.last_epoch = -1
        sched.step()


class ReduceLROnPlateau:
    """Divide the lr by 1 / factor when a metric has stopped improving for `patience`
    steps (torch's rules: rel/abs threshold, cooldown, min_lr, eps)."""

    def __init__(
        self,
        optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr=0.0,
        eps: float = 1e-8,
    ):
        if factor >= 1.0:
            raise DlpcError("error: ReduceLROnPlateau factor must be < 1.0")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise DlpcError(f"error: ReduceLROnPlateau mode '{mode}' / '{threshold_mode}'")
        self.optimizer = optimizer
        self.min_lrs = _per_group(min_lr, optimizer.param_groups, "min_lr")
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (
                best * (1 - self.threshold)
                if self.threshold_mode == "rel"
                else best - self.threshold
            )
        return a > (
            best * (1 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold
        )

    def step(self, metric: float) -> None:
        current = float(metric)
        self.last_epoch += 1
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]
