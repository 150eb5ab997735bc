"""Optimizers (passes/train/optim.py): learning-rate schedules against torch.optim's; the
updates themselves are checked step by step against torch in test_train.py."""

from __future__ import annotations

import pytest
import torch

from dlpc.passes.train import optim

# ------------------------------------------------------------------------ schedules


def test_schedules_match_torch():
    p = torch.nn.Parameter(torch.zeros(1))
    cases = [
        (
            optim.Schedule("step", step_size=3, gamma=0.5),
            lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5),
        ),
        (
            optim.Schedule("cosine", total_steps=10, min_lr=0.01),
            lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, eta_min=0.01),
        ),
    ]
    for schedule, make in cases:
        opt = torch.optim.SGD([p], lr=0.1)
        sched = make(opt)
        for t in range(11):  # (torch's cosine rises again past T_max; ours stays at min_lr)
            assert schedule.lr_at(0.1, t) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-9)
            opt.step()
            sched.step()
    warm = optim.Schedule("warmup", warmup_steps=4)
    assert [warm.lr_at(1.0, t) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
