"""Run-time hyper-parameters (passes/train/optim.py, schedule.py, train.py): every
scheduler's lr sequence against torch.optim.lr_scheduler's, and through the compiled step
(the params after the steps equal torch's with the same scheduler); param groups with their
own lr and weight decay; freezing by pattern; a user's callable; the one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_train_optim import BATCH, assert_same_params, batches, run_both, small_model, torch_small

import dlpc
from dlpc.diagnostics import DlpcError

# the repository's examples, wherever pytest runs from
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

sched = dlpc.train.lr_scheduler
tsched = torch.optim.lr_scheduler

# (name, dlpc scheduler factory, torch scheduler factory), both called with the optimizer
SCHEDULES = [
    ("step", lambda o: sched.StepLR(o, 3, 0.5), lambda o: tsched.StepLR(o, 3, 0.5)),
    (
        "multistep",
        lambda o: sched.MultiStepLR(o, [2, 5, 9], 0.3),
        lambda o: tsched.MultiStepLR(o, [2, 5, 9], 0.3),
    ),
    ("exponential", lambda o: sched.ExponentialLR(o, 0.8), lambda o: tsched.ExponentialLR(o, 0.8)),
    (
        "cosine",
        lambda o: sched.CosineAnnealingLR(o, 7, 0.001),
        lambda o: tsched.CosineAnnealingLR(o, 7, 0.001),
    ),
    (
        "warm_restarts",
        lambda o: sched.CosineAnnealingWarmRestarts(o, 3, 2, 0.002),
        lambda o: tsched.CosineAnnealingWarmRestarts(o, 3, 2, 0.002),
    ),
    (
        "onecycle",
        lambda o: sched.OneCycleLR(o, max_lr=0.2, total_steps=20),
        lambda o: tsched.OneCycleLR(o, max_lr=0.2, total_steps=20),
    ),
    (
        "onecycle_linear_3phase",
        lambda o: sched.OneCycleLR(
            o, 0.2, total_steps=20, anneal_strategy="linear", three_phase=True
        ),
        lambda o: tsched.OneCycleLR(
            o, 0.2, total_steps=20, anneal_strategy="linear", three_phase=True
        ),
    ),
    (
        "linear_warmup",
        lambda o: sched.LinearLR(o, 0.1, 1.0, 4),
        lambda o: tsched.LinearLR(o, 0.1, 1.0, 4),
    ),
    (
        "lambda",
        lambda o: sched.LambdaLR(o, lambda e: 1 / (1 + e)),
        lambda o: tsched.LambdaLR(o, lambda e: 1 / (1 + e)),
    ),
    (
        "warmup_then_cosine",
        lambda o: sched.SequentialLR(
            o, [sched.LinearLR(o, 0.25, 1.0, 3), sched.CosineAnnealingLR(o, 10)], [3]
        ),
        lambda o: tsched.SequentialLR(
            o, [tsched.LinearLR(o, 0.25, 1.0, 3), tsched.CosineAnnealingLR(o, 10)], [3]
        ),
    ),
]


class _Groups:
    """Anything with param_groups drives a scheduler."""

    def __init__(self, groups):
        self.param_groups = groups


def _torch_sgd(lr=0.1):
    ps = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    return torch.optim.SGD(
        [{"params": ps[:1]}, {"params": ps[1:], "lr": lr / 2}], lr=lr, momentum=0.9
    )


@pytest.mark.parametrize("name,ours,theirs", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_lr_sequence_matches_torch(name, ours, theirs):
    """Two groups with their own lr: lr and momentum of every group at each of 20 steps."""
    topt = _torch_sgd()
    groups = _Groups([{"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.9}])
    ts, ds = theirs(topt), ours(groups)
    for _ in range(20):
        for g, tg in zip(groups.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12, abs=1e-15)
            assert g["momentum"] == pytest.approx(tg["momentum"], rel=1e-12)
        topt.step()
        ts.step()
        ds.step()
    assert ds.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


def test_reduce_on_plateau_matches_torch():
    topt = _torch_sgd()
    groups = _Groups([{"lr": 0.1}, {"lr": 0.05}])
    options = dict(factor=0.5, patience=2, cooldown=1, min_lr=[0.01, 0.02], threshold=0.01)
    ts = tsched.ReduceLROnPlateau(topt, **options)
    ds = sched.ReduceLROnPlateau(groups, **options)
    metrics = [1.0, 0.9, 0.95, 0.93, 0.92, 0.91, 0.91, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    for m in metrics * 2:
        ts.step(m)
        ds.step(m)
        assert ds.get_last_lr() == pytest.approx([g["lr"] for g in topt.param_groups])


# ------------------------------------------------------------------------ compiled


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return small_model(tmp_path_factory.mktemp("sched"))


@pytest.fixture(scope="module")
def sgd_trainer(model):
    trainer = dlpc.train(
        model, optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.9, weight_decay=1e-3), batch_size=BATCH
    )
    return trainer, trainer.state, [dict(g) for g in trainer.param_groups]


def _reset(trainer, state, groups):
    trainer.param_groups[:] = [dict(g) for g in groups]
    trainer.load(state)


@pytest.mark.parametrize("name,ours,theirs", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_schedule_through_the_compiled_step(sgd_trainer, name, ours, theirs):
    """The lr (and OneCycle's momentum) reach the compiled step at run time: 15 steps
    with the scheduler give torch's params."""
    trainer, state, groups = sgd_trainer
    _reset(trainer, state, groups)
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    ts, ds = theirs(topt), ours(trainer)

    def after(_):
        ts.step()
        ds.step()

    ours_loss, theirs_loss = run_both(trainer, net, topt, batches(15), after)
    np.testing.assert_allclose(ours_loss, theirs_loss, rtol=1e-5, atol=1e-6)
    assert_same_params(trainer, net, names)
    assert trainer.lr == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)


def test_reduce_on_plateau_through_the_compiled_step(sgd_trainer):
    trainer, state, groups = sgd_trainer
    _reset(trainer, state, groups)
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    ts = tsched.ReduceLROnPlateau(topt, factor=0.5, patience=1)
    ds = sched.ReduceLROnPlateau(trainer, factor=0.5, patience=1)
    data = batches(12)
    data = [data[0]] * 4 + data[4:]  # a repeated batch: the loss plateaus, then jumps
    losses: list[float] = []

    def after(k):
        ts.step(losses[-1])
        ds.step(losses[-1])

    def record(k):
        losses.append(float(trainer._resident.outputs[0]))
        after(k)

    run_both(trainer, net, topt, data, record)
    assert trainer.lr < 0.1  # it was reduced
    assert trainer.lr == pytest.approx(topt.param_groups[0]["lr"])
    assert_same_params(trainer, net, names)


def test_onecycle_cycles_adam_beta1(model):
    """OneCycleLR on Adam cycles beta1, a run-time input too."""
    trainer = dlpc.train(model, optimizer=dlpc.optim.Adam(lr=0.01), batch_size=BATCH)
    net, names = torch_small(trainer.weights)
    topt = torch.optim.Adam(net.parameters(), lr=0.01)
    ts = tsched.OneCycleLR(topt, max_lr=0.05, total_steps=20)
    ds = sched.OneCycleLR(trainer, max_lr=0.05, total_steps=20)
    betas = []

    def after(_):
        ts.step()
        ds.step()
        betas.append(trainer.param_groups[0]["betas"][0])

    run_both(trainer, net, topt, batches(15), after)
    assert len(set(betas)) > 5
    assert_same_params(trainer, net, names, rtol=1e-4, atol=1e-6)


def test_param_groups_and_lambda(model):
    """Two groups (own lr and weight decay, chosen by glob) and a user's callable per
    step (lr_lambda: a factor of each group's initial lr, as LambdaLR)."""
    fn = lambda step: 0.9**step  # noqa: E731
    trainer = dlpc.train(
        model,
        optimizer=dlpc.optim.SGD(lr=0.1, momentum=0.5),
        param_groups=[{"params": "fc1.*", "lr": 0.03, "weight_decay": 0.01}],
        lr_lambda=fn,
        batch_size=BATCH,
    )
    assert [g["params"] for g in trainer.param_groups] == [
        ["fc1.weight", "fc1.bias"],
        ["fc2.weight", "fc2.bias"],
    ]
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(
        [
            {"params": net[0].parameters(), "lr": 0.03, "weight_decay": 0.01},
            {"params": net[2].parameters()},
        ],
        lr=0.1,
        momentum=0.5,
    )
    ts = tsched.LambdaLR(topt, fn)
    run_both(trainer, net, topt, batches(10), lambda _: ts.step())
    assert_same_params(trainer, net, names)
    assert trainer.param_groups[0]["lr"] == pytest.approx(0.03 * 0.9**10)


def test_frozen_by_pattern(model):
    trainer = dlpc.train(model, optimizer="sgd", frozen=["fc1.*"], batch_size=BATCH)
    before = trainer.weights
    net, names = torch_small(before)
    for p in net[0].parameters():
        p.requires_grad_(False)
    topt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.01)
    run_both(trainer, net, topt, batches(5))
    after = trainer.weights
    assert np.array_equal(after["fc1.weight"], before["fc1.weight"])
    assert not np.array_equal(after["fc2.weight"], before["fc2.weight"])
    assert_same_params(trainer, net, names)
    with pytest.raises(DlpcError, match="frozen 'conv.*' matches no parameter"):
        dlpc.train(model, optimizer="sgd", frozen=["conv.*"], batch_size=BATCH)


def test_compiled_in_options_are_one_line_errors(sgd_trainer, model):
    trainer, state, groups = sgd_trainer
    _reset(trainer, state, groups)
    trainer.param_groups[0]["dampening"] = 0.5
    x, y = batches(1)[0]
    with pytest.raises(DlpcError, match="'dampening' is compiled in"):
        trainer.step(x, y)
    adam = dlpc.train(model, optimizer=dlpc.optim.Adam(lr=0.01), batch_size=BATCH)
    adam.param_groups[0]["weight_decay"] = 0.1
    with pytest.raises(DlpcError, match="'weight_decay' is compiled out"):
        adam.step(x, y)
    with pytest.raises(DlpcError, match="param group 0: sgd has no option 'betas'"):
        dlpc.optim.SGD(groups=({"params": "fc1.*", "betas": (0.9, 0.9)},))
    with pytest.raises(DlpcError, match="step takes 2 arrays"):
        adam.step(x)


def test_dlpc_train_freeze_and_step_schedule(capsys):
    from dlpc.tools.dlpc_train import main

    args = [str(EXAMPLES / "mlp.dlpc"), "--emit", "graph", "--batch", "2", "--optimizer", "adam"]
    assert main([*args, "--freeze", "fc1.*", "--schedule", "step", "--step-size", "5"]) == 0
    out = capsys.readouterr().out
    assert "opt.exp_avg.fc2.weight" in out and "opt.exp_avg.fc1.weight" not in out
    assert main([*args, "--freeze", "nope*"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "frozen 'nope*' matches no parameter" in err


IN_GRAPH = [
    (
        dlpc.optim.Schedule("step", step_size=3, gamma=0.5),
        lambda o: tsched.StepLR(o, 3, 0.5),
    ),
    (
        dlpc.optim.Schedule("cosine", total_steps=10, min_lr=0.01),
        lambda o: tsched.CosineAnnealingLR(o, 10, eta_min=0.01),
    ),
    (
        dlpc.optim.Schedule("warmup", warmup_steps=4),
        lambda o: tsched.LambdaLR(o, lambda t: min((t + 1) / 4, 1.0)),
    ),
]


@pytest.mark.parametrize("schedule,theirs", IN_GRAPH, ids=[s.kind for s, _ in IN_GRAPH])
def test_in_graph_schedule_through_the_compiled_step(model, schedule, theirs):
    """The in-graph Schedule (a factor of the run-time lr computed from opt.step)."""
    opt = dlpc.optim.SGD(lr=0.1, momentum=0.9, schedule=schedule)
    trainer = dlpc.train(model, optimizer=opt, batch_size=BATCH)
    net, names = torch_small(trainer.weights)
    topt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    ts = theirs(topt)
    run_both(trainer, net, topt, batches(10), lambda _: ts.step())
    assert_same_params(trainer, net, names)


def test_hyper_parameters_are_saved_and_optional_on_load(sgd_trainer, tmp_path):
    trainer, state, groups = sgd_trainer
    _reset(trainer, state, groups)
    trainer.lr = 0.025
    x, y = batches(1)[0]
    trainer.step(x, y)
    trainer.save(tmp_path / "s.npz")
    trainer.lr = 0.5
    trainer.load(tmp_path / "s.npz")
    assert trainer.lr == 0.025  # restored with the state
    old = {k: v for k, v in trainer.state.items() if not k.startswith("opt.g0.")}
    trainer.lr = 0.07
    trainer.load(old)  # a state saved before hyper-parameters were inputs
    assert trainer.lr == 0.07
