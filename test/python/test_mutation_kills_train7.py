"""Tests for passes/train written from the whole-module coverage read before train seed 51
(issue 35, ninth round, bench/mutation.py --area train): each optimizer's update built
alone (Optimizer.build on a one-param graph run by the numpy reference) against
torch.optim or the paper's formula for a few steps, with every option; the comm ops'
gradient rules on exact IR; activation checkpointing (`recompute`) on a small hand-written
program; graph-autodiff's diagnostics. Small float64 shapes, no compiles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from dlpc.dialects import graph
from dlpc.passes.train import optim
from dlpc.passes.train._build import Builder
from dlpc.reference.graph import run_reference

F = torch.nn.functional
SHAPE = (3, 2)


def _grads(steps: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE) for _ in range(steps)]


def _p0(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE)


def _update_module(opt: optim.Optimizer, state: dict[str, np.ndarray]):
    """@main(p, g, *state) -> (new p, *new state): one update of the param "w"."""
    ty = graph.tensor_type(SHAPE, graph.f64)
    names = list(state)
    types = [ty, ty] + [
        graph.tensor_type(v.shape, graph.NUMPY_TO_ELT[str(v.dtype)]) for v in state.values()
    ]
    block = Block(arg_types=types)
    ret = func.ReturnOp()
    block.add_op(ret)
    b = Builder.before(ret)
    p, g, *rest = block.args
    new_params, new_state = opt.build(b, {"w": p}, {"w": g}, dict(zip(names, rest)))
    results = [new_params["w"]] + [new_state.get(n, v) for n, v in zip(names, rest)]
    ret.operands = results
    f = func.FuncOp("main", (types, [r.type for r in results]), Region(block))
    return ModuleOp([f]), names


def ours(opt: optim.Optimizer, grads, p0=None) -> np.ndarray:
    """The param after one update per gradient in `grads`."""
    p = _p0() if p0 is None else p0
    state = opt.initial_state({"w": (SHAPE, np.float64)})
    module, names = _update_module(opt, state)
    values = [state[n] for n in names]
    for g in grads:
        p, *values = run_reference(module, [p, g, *values], {})
    return p


def theirs(cls, grads, p0=None, **kw) -> np.ndarray:
    p = torch.tensor(_p0() if p0 is None else p0, requires_grad=True)
    opt = cls([p], **kw)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().numpy()


T = torch.optim
# (ours, torch's class, torch's options): every option of the torch-matched optimizers
TORCH_CASES = {
    "sgd": (optim.SGD(lr=0.1), T.SGD, {"lr": 0.1}),
    "sgd-momentum-wd": (
        optim.SGD(lr=0.1, momentum=0.8, weight_decay=0.05),
        T.SGD,
        {"lr": 0.1, "momentum": 0.8, "weight_decay": 0.05},
    ),
    "sgd-dampening": (
        optim.SGD(lr=0.1, momentum=0.7, dampening=0.3),
        T.SGD,
        {"lr": 0.1, "momentum": 0.7, "dampening": 0.3},
    ),
    "sgd-nesterov": (
        optim.SGD(lr=0.05, momentum=0.9, nesterov=True),
        T.SGD,
        {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    ),
    "adam": (
        optim.Adam(lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.1),
        T.Adam,
        {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-3, "weight_decay": 0.1},
    ),
    "adam-amsgrad": (
        optim.Adam(lr=0.02, amsgrad=True),
        T.Adam,
        {"lr": 0.02, "amsgrad": True},
    ),
    "adamw": (
        optim.AdamW(lr=0.01, weight_decay=0.2, eps=1e-4),
        T.AdamW,
        {"lr": 0.01, "weight_decay": 0.2, "eps": 1e-4},
    ),
    "rmsprop": (optim.RMSprop(lr=0.01, alpha=0.9), T.RMSprop, {"lr": 0.01, "alpha": 0.9}),
    "rmsprop-centered-momentum-wd": (
        optim.RMSprop(lr=0.01, alpha=0.8, eps=1e-3, momentum=0.5, centered=True, weight_decay=0.1),
        T.RMSprop,
        {
            "lr": 0.01,
            "alpha": 0.8,
            "eps": 1e-3,
            "momentum": 0.5,
            "centered": True,
            "weight_decay": 0.1,
        },
    ),
    "rmsprop-centered": (
        optim.RMSprop(lr=0.01, centered=True),
        T.RMSprop,
        {"lr": 0.01, "centered": True},
    ),
    "rmsprop-momentum": (
        optim.RMSprop(lr=0.01, momentum=0.9),
        T.RMSprop,
        {"lr": 0.01, "momentum": 0.9},
    ),
    "adagrad": (optim.Adagrad(lr=0.1), T.Adagrad, {"lr": 0.1}),
    "adagrad-options": (
        optim.Adagrad(
            lr=0.1, lr_decay=0.5, initial_accumulator_value=0.3, eps=1e-2, weight_decay=0.1
        ),
        T.Adagrad,
        {
            "lr": 0.1,
            "lr_decay": 0.5,
            "initial_accumulator_value": 0.3,
            "eps": 1e-2,
            "weight_decay": 0.1,
        },
    ),
    "nadam": (optim.NAdam(lr=0.01), T.NAdam, {"lr": 0.01}),
    "nadam-options": (
        optim.NAdam(lr=0.02, betas=(0.7, 0.9), eps=1e-3, momentum_decay=0.05, weight_decay=0.1),
        T.NAdam,
        {
            "lr": 0.02,
            "betas": (0.7, 0.9),
            "eps": 1e-3,
            "momentum_decay": 0.05,
            "weight_decay": 0.1,
        },
    ),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_update_matches_torch(case):
    """Three updates of one f64 param from the same gradients as torch.optim's."""
    ours_opt, cls, kw = TORCH_CASES[case]
    grads = _grads(3)
    np.testing.assert_allclose(ours(ours_opt, grads), theirs(cls, grads, **kw), rtol=1e-10)


def _lamb(p, grads, lr, betas, eps, wd):
    m = v = np.zeros_like(p)
    for n, g in enumerate(grads, 1):
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        r = (m / (1 - betas[0] ** n)) / (np.sqrt(v / (1 - betas[1] ** n)) + eps) + wd * p
        pn, rn = np.linalg.norm(p), np.linalg.norm(r)
        trust = pn / rn if pn > 0 and rn > 0 else 1.0
        p = p - lr * trust * r
    return p


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_lamb_update_matches_its_formula(wd):
    opt = optim.LAMB(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=wd)
    grads = _grads(3)
    want = _lamb(_p0(), grads, 0.05, (0.8, 0.9), 1e-3, wd)
    np.testing.assert_allclose(ours(opt, grads), want, rtol=1e-10)


def test_lamb_trust_is_one_for_a_zero_param():
    """||p|| = 0: the trust ratio is 1 (not 0), the step lr r."""
    opt = optim.LAMB(lr=0.05, eps=1e-3)
    g = _grads(1)
    want = _lamb(np.zeros(SHAPE), g, 0.05, (0.9, 0.999), 1e-3, 0.0)
    assert np.abs(want).max() > 0.01
    np.testing.assert_allclose(ours(opt, g, np.zeros(SHAPE)), want, rtol=1e-10)


def _lars(p, grads, lr, momentum, eta, eps, wd, adapt=True):
    buf = None
    for g in grads:
        pn, gn = np.linalg.norm(p), np.linalg.norm(g)
        local = eta * pn / (gn + wd * pn + eps) if adapt and pn > 0 and gn > 0 else 1.0
        step = (g + wd * p) * local * lr
        buf = step if buf is None or not momentum else buf * momentum + step
        p = p - buf
    return p


@pytest.mark.parametrize(
    "kw",
    [
        {"momentum": 0.0, "weight_decay": 0.0},
        {"momentum": 0.9, "weight_decay": 0.1},
        {"momentum": 0.5, "weight_decay": 0.1, "adapt": False},
    ],
)
def test_lars_update_matches_its_formula(kw):
    opt = optim.LARS(lr=0.5, eta=0.01, eps=1e-3, **kw)
    grads = _grads(3)
    want = _lars(
        _p0(), grads, 0.5, kw["momentum"], 0.01, 1e-3, kw["weight_decay"], kw.get("adapt", True)
    )
    np.testing.assert_allclose(ours(opt, grads), want, rtol=1e-10)


def test_clip_norm_scales_by_the_total_norm():
    """SGD with clip_norm: g * min(c / (||g|| + 1e-6), 1), once clipped, once not."""
    g = _grads(1)
    norm = float(np.linalg.norm(g[0]))
    for c in (norm / 4, norm * 4):
        want = _p0() - 0.1 * g[0] * min(c / (norm + 1e-6), 1.0)
        np.testing.assert_allclose(ours(optim.SGD(lr=0.1, clip_norm=c), g), want, rtol=1e-12)


@pytest.mark.parametrize(
    "schedule",
    [
        optim.Schedule("step", step_size=2, gamma=0.5),
        optim.Schedule("warmup", warmup_steps=3),
        optim.Schedule("cosine", total_steps=4, min_lr=0.01),
        optim.Schedule("warmup_cosine", total_steps=5, warmup_steps=2),
    ],
)
def test_scheduled_rate_of_each_update(schedule):
    """Plain SGD's step t moves p by lr(t) g: the graph's rate of each of 6 updates (past
    total_steps: the last) equals lr_at's, and lr_at's its formula."""
    lr, g = 0.1, np.ones(SHAPE)
    opt = optim.SGD(lr=lr, schedule=schedule)
    got = [float((_p0() - ours(opt, [g] * (t + 1), _p0()))[0, 0]) for t in range(0, 6)]
    steps = np.diff([0.0, *got])
    np.testing.assert_allclose(steps, [schedule.lr_at(lr, t) for t in range(6)], rtol=1e-12)
    k = schedule.kind
    want = {
        "step": [0.1, 0.1, 0.05, 0.05, 0.025, 0.025],
        "warmup": [lr / 3, 2 * lr / 3, lr, lr, lr, lr],
        "cosine": [0.01 + 0.09 * (1 + np.cos(np.pi * min(t, 4) / 4)) / 2 for t in range(6)],
        "warmup_cosine": [0.05, 0.1]
        + [0.1 * (1 + np.cos(np.pi * min(t - 2, 3) / 3)) / 2 for t in range(2, 6)],
    }[k]
    np.testing.assert_allclose(schedule.factors(lr, 6), want, rtol=1e-12)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: optim.Schedule("linear"), "error: unknown schedule 'linear' (expected "),
        (
            lambda: optim.Schedule("step", step_size=0),
            "error: a step schedule needs step_size >= 1",
        ),
        (lambda: optim.Schedule("cosine"), "error: a cosine schedule needs total_steps >= 1"),
        (
            lambda: optim.Schedule("warmup_cosine", total_steps=3),
            "error: a warmup schedule needs warmup_steps >= 1",
        ),
        (lambda: optim.Schedule("warmup"), "error: a warmup schedule needs warmup_steps >= 1"),
        (lambda: optim.SGD(clip_norm=0.0), "error: clip norm must be > 0, got 0.0"),
        (
            lambda: optim.SGD(groups=({"lr": 1.0},)),
            "error: param group 0 must be a dict with 'params'",
        ),
        (lambda: optim.SGD(groups=(["w"],)), "error: param group 0 must be a dict with 'params'"),
        (
            lambda: optim.SGD(groups=({"params": "a"}, {"params": "b", "betas": (0.9, 0.9)})),
            "error: param group 1: sgd has no option 'betas'",
        ),
        (
            lambda: optim.SGD(groups=({"params": "a", "lr": -1.0},)),
            "error: param group 0: learning rate must be > 0, got -1.0",
        ),
        (lambda: optim.SGD(lr=0.0), "error: learning rate must be > 0, got 0.0"),
        (lambda: optim.SGD(weight_decay=-0.1), "error: weight decay must be >= 0, got -0.1"),
        (lambda: optim.SGD(weight_decay=0.0), None),
        (lambda: optim.Adam(betas=(0.9,)), "error: adam betas must be in [0, 1), got (0.9,)"),
        (
            lambda: optim.Adam(betas=(0.9, 1.0)),
            "error: adam betas must be in [0, 1), got (0.9, 1.0)",
        ),
        (
            lambda: optim.Adam(betas=(-0.1, 0.9)),
            "error: adam betas must be in [0, 1), got (-0.1, 0.9)",
        ),
        (lambda: optim.Adam(betas=(0.0, 0.0)), None),
        (lambda: optim.SGD(momentum=-0.5), "error: momentum must be >= 0, got -0.5"),
        (
            lambda: optim.SGD(momentum=0.9, dampening=0.1, nesterov=True),
            "error: nesterov momentum needs momentum > 0 and no dampening",
        ),
        (
            lambda: optim.SGD(groups=({"params": "a", "momentum": 0.0, "nesterov": True},)),
            "error: nesterov momentum needs momentum > 0 and no dampening",
        ),
        (
            lambda: optim.LARS(exclude=3),
            "error: lars exclude must be names, glob patterns or a predicate, got int",
        ),
        (
            lambda: optim.make_optimizer("sgdd"),
            "error: unknown optimizer 'sgdd' (expected sgd, adam, adamw, rmsprop, adagrad, nadam, lamb, lars)",
        ),
        (lambda: optim.make_optimizer("sgd", betas=(0.9, 0.9)), "error: sgd: "),
    ],
)
def test_option_diagnostics(make, message):
    from dlpc.diagnostics import DlpcError

    if message is None:
        make()
        return
    with pytest.raises(DlpcError) as e:
        make()
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_make_optimizer_passes_an_instance_and_options():
    sgd = optim.SGD(lr=0.5)
    assert optim.make_optimizer(sgd) is sgd
    assert optim.make_optimizer("adamw", lr=0.25) == optim.AdamW(lr=0.25)


def test_groups_assign_and_runtime_hyper_parameters():
    """The first matching group takes a param; the rest get the defaults; an unmatched
    declared group stays (empty); only non-zero decay and momentum are run-time."""
    opt = optim.SGD(lr=0.1, groups=({"params": "*.bias", "weight_decay": 0.5}, {"params": ["x"]}))
    groups = opt.assign(["a.weight", "a.bias", "b.bias"])
    assert [g["params"] for g in groups] == [["a.bias", "b.bias"], [], ["a.weight"]]
    assert groups[0]["weight_decay"] == 0.5 and groups[2]["weight_decay"] == 0.0
    assert opt.runtime(groups[0]) == ["lr", "weight_decay"]
    assert opt.runtime(groups[2]) == ["lr"]
    assert optim.SGD(groups=({"params": "*"},)).assign(["a"]) == [
        {**optim.SGD().defaults(), "params": ["a"]}
    ]
    assert len(optim.SGD().assign([])) == 1
    adam = optim.Adam(weight_decay=0.1)
    assert adam.runtime(adam.assign(["w"])[0]) == ["lr", "weight_decay", "beta1", "beta2"]
    state = adam.initial_state({"w": ((2,), np.float16)})
    assert state["opt.g0.beta2"] == 0.999 and state["opt.g0.beta2"].dtype == np.float64
    assert state["opt.exp_avg.w"].dtype == np.float32
    assert sorted(state) == sorted(
        [
            "opt.step",
            "opt.g0.lr",
            "opt.g0.weight_decay",
            "opt.g0.beta1",
            "opt.g0.beta2",
            "opt.exp_avg.w",
            "opt.exp_avg_sq.w",
        ]
    )


# ---- the comm ops' gradient rules (_comm_grad.py) on exact IR


def _printed(module) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def _backward(text: str) -> list[str]:
    """The lines graph-autodiff appends after the loss's seed (broadcast to its shape)."""
    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.train.autodiff import differentiate

    module = parse_module(text)
    differentiate(module)
    lines = [line.strip() for line in _printed(module).splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("%d_l = "))
    return lines[start + 3 : -3]


COMM_CHAIN = """func.func @main(%x: tensor<4x2xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4x2xf32>
  %a = graph.mul %x, %w : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %g = comm.all_gather %a dim 0 group <world 2> : tensor<4x2xf32> -> tensor<8x2xf32>
  %s = comm.reduce_scatter sum %g dim 1 group <world 2> : tensor<8x2xf32> -> tensor<8x1xf32>
  %b = comm.broadcast %s root 0 group <world 2> : tensor<8x1xf32>
  %r = comm.reduce sum %b root 1 group <world 2> : tensor<8x1xf32>
  %c = comm.scatter %r dim 0 root 0 group <world 2> : tensor<8x1xf32> -> tensor<4x1xf32>
  %d = comm.gather %c dim 1 root 1 group <world 2> : tensor<4x1xf32> -> tensor<4x2xf32>
  %e = comm.all_to_all %d split 0 concat 1 group <world 2> : tensor<4x2xf32> -> tensor<2x4xf32>
  %f = comm.all_reduce avg %e group <world 2> : tensor<2x4xf32>
  %h = comm.all_reduce sum %f group <world 2> : tensor<2x4xf32>
  %l = graph.reduce_sum %h : (tensor<2x4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""


def test_comm_rules_transpose_each_communication():
    """Each comm op's adjoint: the transposed communication with its own dims, roots,
    kinds and group (scatter <-> gather keep dim and root; all_to_all swaps split and
    concat; all_gather's is a sum reduce_scatter; reduce's a broadcast from its root)."""
    g = "group <world 2>"
    assert _backward(COMM_CHAIN) == [
        f"%d_f = comm.all_reduce sum %d_h {g} : tensor<2x4xf32>",
        f"%d_e = comm.all_reduce avg %d_f {g} : tensor<2x4xf32>",
        f"%d_d = comm.all_to_all %d_e split 1 concat 0 {g} : tensor<2x4xf32> -> tensor<4x2xf32>",
        f"%d_c = comm.scatter %d_d dim 1 root 1 {g} : tensor<4x2xf32> -> tensor<4x1xf32>",
        f"%d_r = comm.gather %d_c dim 0 root 0 {g} : tensor<4x1xf32> -> tensor<8x1xf32>",
        f"%d_b = comm.broadcast %d_r root 1 {g} : tensor<8x1xf32>",
        f"%d_s = comm.reduce sum %d_b root 0 {g} : tensor<8x1xf32>",
        f"%d_g = comm.all_gather %d_s dim 1 {g} : tensor<8x1xf32> -> tensor<8x2xf32>",
        f"%d_a = comm.reduce_scatter sum %d_g dim 0 {g} : tensor<8x2xf32> -> tensor<4x2xf32>",
        "%grad.w = graph.mul %d_a, %x : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>",
    ]


SCATTER = """func.func @main(%x: tensor<8x2xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<8x2xf32>
  %a = graph.mul %x, %w : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  %s = comm.reduce_scatter KIND %a dim 0 group <world 4> : tensor<8x2xf32> -> tensor<2x2xf32>
  %l = graph.reduce_sum %s : (tensor<2x2xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""


def test_reduce_scatter_avg_divides_by_the_group_size():
    gather = "comm.all_gather %d_s dim 0 group <world 4> : tensor<2x2xf32> -> tensor<8x2xf32>"
    mul = "%grad.w = graph.mul %d_a, %x : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>"
    assert _backward(SCATTER.replace("KIND", "avg")) == [
        f"%1 = {gather}",
        "%2 = graph.constant dense<4.000000e+00> : tensor<f32>",
        "%d_a = graph.div %1, %2 : (tensor<8x2xf32>, tensor<f32>) -> tensor<8x2xf32>",
        mul,
    ]
    assert _backward(SCATTER.replace("KIND", "sum")) == [f"%d_a = {gather}", mul]


def _autodiff_error(text: str, **options) -> str:
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.train.autodiff import differentiate

    with pytest.raises(DiagnosticException) as e:
        differentiate(parse_module(text), **options)
    return str(e.value)


REDUCE = """func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4xf32>
  %a = graph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = OP
  %l = graph.reduce_sum %m : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""


@pytest.mark.parametrize(
    "op, message",
    [
        (
            "comm.all_reduce max %a group <world 2> : tensor<4xf32>",
            "comm.all_reduce max of 1 operands (sum or avg of one)",
        ),
        (
            "comm.all_reduce prod %a group <world 2> : tensor<4xf32>",
            "comm.all_reduce prod of 1 operands (sum or avg of one)",
        ),
        ("comm.reduce max %a root 0 group <world 2> : tensor<4xf32>", "comm.reduce max"),
        ("comm.reduce avg %a root 0 group <world 2> : tensor<4xf32>", "comm.reduce avg"),
    ],
)
def test_comm_reductions_without_a_rule(op, message):
    text = REDUCE.replace("OP", op)
    assert _autodiff_error(text) == f"graph-autodiff has no gradient rule for {message}"


def test_reduce_scatter_max_has_no_rule():
    text = SCATTER.replace("KIND", "max")
    want = "graph-autodiff has no gradient rule for comm.reduce_scatter max"
    assert _autodiff_error(text) == want


def test_all_reduce_rule_refuses_two_operands():
    """The rule itself refuses an all_reduce of several operands (graph-autodiff names a
    multi-result op before calling any rule)."""
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.dialects import comm
    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.train import _grad, autodiff  # noqa: F401 - registers the comm rules

    module = parse_module(
        """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a, %b = comm.all_reduce sum %x, %y group <world 2> : tensor<4xf32>, tensor<4xf32>
  func.return %a : tensor<4xf32>
}"""
    )
    op = next(o for o in module.walk() if isinstance(o, comm.AllReduceOp))
    ret = module.body.block.first_op.body.block.last_op
    with pytest.raises(DiagnosticException) as e:
        _grad.RULES["comm.all_reduce"](Builder.before(ret), op, op.results[0], [True, True])
    assert str(e.value) == (
        "graph-autodiff has no gradient rule for comm.all_reduce sum of 2 operands (sum or avg of one)"
    )


# ---- graph-autodiff (autodiff.py): diagnostics, names, activation checkpointing


def _parse(text: str):
    from xdsl.parser import Parser

    from dlpc.passes.pipeline import context

    ctx = context()
    ctx.allow_unregistered = True
    return Parser(ctx, text).parse_module()


def _differentiate_error(text: str, **options) -> str:
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.passes.train.autodiff import differentiate

    with pytest.raises(DiagnosticException) as e:
        differentiate(_parse(text), **options)
    return str(e.value)


UNARY = """func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<4xf32>
  %a = graph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  OP
  %l = graph.reduce_sum %m : (tensor<4xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""


@pytest.mark.parametrize(
    "op, where",
    [
        (
            '%m = "graph.frob"(%a) : (tensor<4xf32>) -> tensor<4xf32>',
            "graph.frob (%m, op 2 of @main)",
        ),
        (
            "%m, %n = comm.all_reduce sum %a, %a group <world 2> : tensor<4xf32>, tensor<4xf32>",
            "comm.all_reduce (%m, op 2 of @main)",
        ),
    ],
)
def test_an_op_without_a_rule_is_named_with_its_place(op, where):
    text = UNARY.replace("OP", op)
    assert _differentiate_error(text) == f"graph-autodiff has no gradient rule for {where}"


def test_an_unnamed_op_without_a_rule():
    text = UNARY.replace("OP", '%0 = "graph.frob"(%a) : (tensor<4xf32>) -> tensor<4xf32>')
    text = text.replace("reduce_sum %m", "reduce_sum %0")
    assert (
        _differentiate_error(text)
        == "graph-autodiff has no gradient rule for graph.frob (op 2 of @main)"
    )


def test_an_inactive_op_without_a_rule_is_not_differentiated():
    """An op no param reaches needs no rule (nor does one whose result nothing reads)."""
    from dlpc.passes.train.autodiff import differentiate

    text = UNARY.replace("OP", '%m = "graph.frob"(%x) : (tensor<4xf32>) -> tensor<4xf32>')
    module = _parse(text)
    differentiate(module)
    assert "%grad.w = graph.broadcast" in _printed(module)


@pytest.mark.parametrize(
    "text, options, message",
    [
        (
            "func.func @other() -> () {\n  func.return\n}",
            {},
            "graph-autodiff needs a func.func @main",
        ),
        (
            UNARY.replace("OP", "%m = graph.exp %a : (tensor<4xf32>) -> tensor<4xf32>"),
            {"result": 1},
            "graph-autodiff: result 1 does not exist (@main returns 1)",
        ),
        (
            UNARY.replace("OP", "%m = graph.exp %a : (tensor<4xf32>) -> tensor<4xf32>"),
            {"result": -1},
            "graph-autodiff: result -1 does not exist (@main returns 1)",
        ),
    ],
)
def test_autodiff_diagnostics(text, options, message):
    assert _differentiate_error(text, **options) == message


def test_main_found_after_other_functions_and_one_element_loss():
    """@main after another func; a loss of shape 1x1 (one element) is a scalar loss; a
    result named by `dlpc.name` keeps its name; a loss no param reaches gets zero grads."""
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(
        """func.func @other() -> () {
  func.return
}
func.func @main(%x: tensor<1x1xf32>) -> (tensor<1x1xf32> {dlpc.name = "cost"}) {
  %w = graph.param "w" : tensor<1x1xf32>
  %l = graph.mul %x, %x : (tensor<1x1xf32>, tensor<1x1xf32>) -> tensor<1x1xf32>
  func.return %l : tensor<1x1xf32>
}"""
    )
    differentiate(module)
    text = _printed(module)
    assert '(tensor<1x1xf32> {dlpc.name = "cost"}, tensor<1x1xf32> {dlpc.name = "grad.w"})' in text
    from dlpc.reference.graph import run_reference as run

    loss, grad = run(module, [np.full((1, 1), 3.0, np.float32)], {"w": np.ones((1, 1), np.float32)})
    assert loss[0, 0] == 9.0 and grad.tolist() == [[0.0]]


T48 = "tensor<4x8xf32>"
HEAD = f"""func.func @main(%x: {T48}) -> tensor<f32> {{
  %w1 = graph.param "w1" : tensor<8x8xf32>
  %w2 = graph.param "w2" : tensor<8x8xf32>
  %r = graph.matmul %x, %w1 : ({T48}, tensor<8x8xf32>) -> {T48}
  %s = graph.matmul %x, %w2 : ({T48}, tensor<8x8xf32>) -> {T48}
"""
TAIL = """  %l = graph.reduce_sum %z : (tensor<4x8xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""
RECOMPUTE = {
    # a chain of three cheap ops from two matmuls: all recomputed, the matmuls kept (a tie)
    "chain": HEAD
    + f"""  %v = graph.add %r, %s : ({T48}, {T48}) -> {T48}
  %y = graph.relu %v : ({T48}) -> {T48}
  %e = graph.exp %y : ({T48}) -> {T48}
  %z = graph.mul %e, %e : ({T48}, {T48}) -> {T48}
"""
    + TAIL,
    # add(r, s) read by the backward: recomputing it would keep r and s, so it is kept
    "sum": HEAD
    + f"""  %v = graph.add %r, %s : ({T48}, {T48}) -> {T48}
  %z = graph.mul %v, %v : ({T48}, {T48}) -> {T48}
"""
    + TAIL,
    # exp(r), exp(exp(r)): both rebuilt from r
    "exp": HEAD
    + f"""  %v = graph.exp %r : ({T48}) -> {T48}
  %y = graph.exp %v : ({T48}) -> {T48}
  %u = graph.mul %y, %v : ({T48}, {T48}) -> {T48}
  %z = graph.add %u, %s : ({T48}, {T48}) -> {T48}
"""
    + TAIL,
    # a broadcast of a row sum: rebuilt from the small sum
    "broadcast": HEAD
    + f"""  %m = graph.reduce_sum %r {{axes = array<i64: 1>, keepdims = true}} : ({T48}) -> tensor<4x1xf32>
  %b = graph.broadcast %m {{shape = array<i64: 4, 8>}} : (tensor<4x1xf32>) -> {T48}
  %z = graph.mul %b, %s : ({T48}, {T48}) -> {T48}
"""
    + TAIL,
}
# (kept names, kept bytes, recomputed ops) without and with recompute
KEPT = {
    "chain": ((["e", "y"], 256, 0), (["r", "s"], 256, 3)),
    "sum": ((["v"], 128, 0), (["v"], 128, 0)),
    "exp": ((["v", "y"], 256, 0), (["r"], 128, 2)),
    "broadcast": ((["s", "b"], 256, 0), (["s", "m"], 144, 1)),
}


@pytest.mark.parametrize("name", list(RECOMPUTE))
def test_recompute_keeps_what_its_plan_says_and_the_same_gradients(name):
    from dlpc.passes.train.autodiff import differentiate, saved_bytes

    forward = _parse(RECOMPUTE[name])
    before = _printed(forward)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    weights = {k: rng.standard_normal((8, 8)).astype(np.float32) for k in ("w1", "w2")}
    results = []
    for recompute, (names, kept, ops) in zip((False, True), KEPT[name]):
        stats = saved_bytes(forward, recompute=recompute)
        assert (stats.names, stats.kept_bytes, stats.recomputed_ops) == (names, kept, ops)
        assert stats.kept_values == len(names) and sum(stats.sizes) == kept
        module = forward.clone()
        assert differentiate(module, recompute=recompute) == stats
        results.append(run_reference(module, [x], weights))
    assert _printed(forward) == before  # (saved_bytes differentiates a copy)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_recompute_copies_each_value_once_before_its_first_reader():
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(RECOMPUTE["chain"])
    differentiate(module, recompute=True)
    lines = [line.strip() for line in _printed(module).splitlines()]
    start = lines.index(
        f"%d_z = graph.broadcast %0 {{shape = array<i64: 4, 8>}} : (tensor<1x1xf32>) -> {T48}"
    )
    assert lines[start + 1 : start + 5] == [
        f"%v_1 = graph.add %r, %s : ({T48}, {T48}) -> {T48}",
        f"%y_1 = graph.relu %v_1 : ({T48}) -> {T48}",
        f"%e_1 = graph.exp %y_1 : ({T48}) -> {T48}",
        f"%1 = graph.mul %d_z, %e_1 : ({T48}, {T48}) -> {T48}",
    ]
    assert sum(" = graph.exp " in line for line in lines) == 2


# ---- the training step (step.py): diagnostics, accumulation, dropout, kept bytes

LINEAR = """func.func @main(%x: tensor<4x3xf64>) -> tensor<4x2xf64> {
  %w = graph.param "w" : tensor<3x2xf64>
  %y = graph.matmul %x, %w : (tensor<4x3xf64>, tensor<3x2xf64>) -> tensor<4x2xf64>
  func.return %y : tensor<4x2xf64>
}"""


def _linear_data(seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 3)), rng.standard_normal((4, 2))


def _run_step(step, state: dict[str, np.ndarray], x, t):
    """One call of the step on the reference: (metrics, the new state by name)."""
    out = run_reference(step.module, [x, t], state)
    n = len(step.metrics)
    return out[:n], {**state, **dict(zip(step.state, out[n:]))}


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_accumulated_update_applies_every_kth_call(reduction):
    """accumulate=2: the first call returns w and the optimizer state unchanged (bit for
    bit) and keeps the gradient; the second applies SGD with momentum to their mean (a
    'sum' loss: their sum) and resets the accumulator."""
    from dlpc.passes.train.losses import Loss
    from dlpc.passes.train.step import train_step_module

    loss = Loss("mse", reduction=reduction)
    opt = optim.SGD(lr=0.1, momentum=0.5)
    step = train_step_module(_parse(LINEAR), loss, opt, accumulate=2)
    w0 = _p0()
    state = {**step.initial_state, "w": w0}
    assert state["opt.micro"] == 0.0 and state["opt.grad_acc.w"].shape == (3, 2)
    grads = []
    for call in range(4):
        x, t = _linear_data(call)
        w = state["w"]
        d = 2 * (x @ w - t) / (8 if reduction == "mean" else 1)
        grads.append(x.T @ d)
        _, new = _run_step(step, state, x, t)
        if call % 2 == 0:
            np.testing.assert_array_equal(new["w"], w)
            np.testing.assert_array_equal(new["opt.momentum.w"], state["opt.momentum.w"])
            assert new["opt.step"] == state["opt.step"] and new["opt.micro"] == 1.0
            np.testing.assert_allclose(new["opt.grad_acc.w"], grads[-1], rtol=1e-12)
        else:
            g = grads[-2] + grads[-1]
            g = g / 2 if reduction == "mean" else g
            buf = g if call == 1 else state["opt.momentum.w"] * 0.5 + g
            np.testing.assert_allclose(new["opt.momentum.w"], buf, rtol=1e-12)
            np.testing.assert_allclose(new["w"], w - 0.1 * buf, rtol=1e-12)
            assert new["opt.micro"] == 0.0 and new["opt.step"] == (call + 1) // 2
            assert not new["opt.grad_acc.w"].any()
        state = new


def test_plain_step_returns_grads_and_names_the_target():
    """An SGD step: w - lr g; return_grads adds this call's gradient after the state; an
    input already named `target` makes the step's target `target_`."""
    from dlpc.passes.train.step import train_step_module

    text = LINEAR.replace("%x: tensor<4x3xf64>", '%x: tensor<4x3xf64> {dlpc.name = "target"}')
    step = train_step_module(_parse(text), "mse", optim.SGD(lr=0.1), return_grads=True)
    assert step.target_name == "target_" and step.input_names == ["target"]
    assert step.grads == ["grad.w"] and step.state == ["w", "opt.step"]
    x, t = _linear_data(0)
    out = run_reference(step.module, [x, t], {**step.initial_state, "w": _p0()})
    g = x.T @ (2 * (x @ _p0() - t) / 8)
    np.testing.assert_allclose(out[0], np.mean((x @ _p0() - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(out[1], _p0() - 0.1 * g, rtol=1e-12)
    np.testing.assert_allclose(out[3], g, rtol=1e-12)
    assert len(out) == 4


def test_weights_give_the_optimizer_state_shapes():
    from dlpc.passes.train.step import train_step_module

    step = train_step_module(
        _parse(LINEAR), "mse", optim.Adam(), weights={"w": np.zeros((3, 2), np.float64)}
    )
    assert step.initial_state["opt.exp_avg.w"].shape == (3, 2)
    assert step.initial_state["opt.exp_avg.w"].dtype == np.float64


def test_training_dropout_reads_the_step_counter():
    from dlpc.passes.train.step import train_step_module

    text = LINEAR.replace(
        "func.return %y",
        "%d = graph.dropout %y {p = 0.5 : f32, seed = 7 : i64} : (tensor<4x2xf64>) -> tensor<4x2xf64>\n"
        "  func.return %d",
    )
    module = _parse(text)
    step = train_step_module(module, "mse", "sgd")
    drops = [op for op in step.module.walk() if isinstance(op, graph.DropoutOp)]
    assert len(drops) == 2  # the forward's and its gradient's (the same mask)
    for op in drops:
        counter = op.operands[1].owner
        assert op.training and isinstance(counter, graph.ParamOp) and counter.pname == "opt.step"
    assert "w" in step.params and "opt.step" not in step.params
    x, t = _linear_data(0)
    state = {**step.initial_state, "w": _p0()}
    first, _ = _run_step(step, state, x, t)
    second, _ = _run_step(step, {**state, "opt.step": np.ones((), np.float32)}, x, t)
    assert first[0] != second[0]  # a fresh mask per step


def test_kept_bytes_other_is_the_other_recompute_setting():
    from dlpc.passes.train.autodiff import saved_bytes
    from dlpc.passes.train.step import train_step_module

    module = _parse(
        RECOMPUTE["exp"]
        .replace(
            "%l = graph.reduce_sum %z : (tensor<4x8xf32>) -> tensor<f32>\n  func.return %l : tensor<f32>",
            "func.return %z : tensor<4x8xf32>",
        )
        .replace("-> tensor<f32> {", "-> tensor<4x8xf32> {")
    )
    plain = train_step_module(module, "mse", "sgd")
    checkpointed = train_step_module(module, "mse", "sgd", recompute=True)
    assert plain.kept_bytes_other == checkpointed.kept_bytes
    assert checkpointed.kept_bytes_other == plain.kept_bytes
    assert checkpointed.kept_bytes < plain.kept_bytes
    assert plain.kept_bytes == saved_bytes(plain.forward, aux=True).kept_bytes
    from dlpc.passes.train.step import TrainStep

    assert TrainStep(module, [], [], []).kept_bytes_other == 0


BN = """func.func @main(%x: tensor<4x3xf64>) -> tensor<4x3xf64> {
  %s = graph.param "s" : tensor<3xf64>
  %b = graph.param "b" : tensor<3xf64>
  %m = MEAN
  %v = graph.param "v" : tensor<3xf64>
  %y = graph.batch_norm %x, %s, %b, %m, %v {epsilon = 1.000000e-05 : f64} : (tensor<4x3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) -> tensor<4x3xf64>
  func.return %y : tensor<4x3xf64>
}"""


@pytest.mark.parametrize(
    "text, kw, message",
    [
        (LINEAR, {"bn_momentum": -0.1}, "error: batch-norm momentum must be in [0, 1], got -0.1"),
        (LINEAR, {"bn_momentum": 1.5}, "error: batch-norm momentum must be in [0, 1], got 1.5"),
        (LINEAR, {"accumulate": 0}, "error: accumulate must be a positive int, got 0"),
        (LINEAR, {"accumulate": True}, "error: accumulate must be a positive int, got True"),
        (LINEAR, {"accumulate": 2.0}, "error: accumulate must be a positive int, got 2.0"),
        (
            LINEAR,
            {"loss": "mse-none"},
            "error: a training loss needs reduction 'mean' or 'sum', not 'none'",
        ),
        (
            "func.func @f() -> () {\n  func.return\n}",
            {},
            "error: the model has no func.func @main",
        ),
        (
            "func.func @main(%x: tensor<4xf64>) -> () {\n  func.return\n}",
            {},
            "error: @main returns nothing to train on",
        ),
        (
            "func.func @main(%x: tensor<4x2xf64>) -> tensor<4x2xf64> {\n  func.return %x : tensor<4x2xf64>\n}",
            {},
            "error: @main returns an input unchanged; there is nothing to train",
        ),
        (
            LINEAR.replace("-> tensor<4x2xf64> {", "-> tensor<4x2xi64> {").replace(
                "func.return %y : tensor<4x2xf64>",
                "%i = graph.cast %y {to = i64} : (tensor<4x2xf64>) -> tensor<4x2xi64>\n"
                "  func.return %i : tensor<4x2xi64>",
            ),
            {},
            "error: @main's result 0 must be a float tensor, got tensor<4x2xi64>",
        ),
        (LINEAR, {"frozen": ("w", "fc*")}, "error: frozen 'fc*' matches no parameter of the model"),
        (LINEAR, {"frozen": "v"}, "error: frozen 'v' matches no parameter of the model"),
        (
            LINEAR.replace(
                "func.return %y",
                '%z = "graph.frob"(%y) : (tensor<4x2xf64>) -> tensor<4x2xf64>\n  func.return %z',
            ),
            {},
            "error: graph-autodiff has no gradient rule for graph.frob (%z, op 2 of @main)",
        ),
        (
            BN.replace(
                "MEAN",
                "graph.constant dense<0.000000e+00> : tensor<3xf64>",
            ),
            {},
            "error: graph.batch_norm: training needs its running statistics to be graph.params",
        ),
    ],
)
def test_step_diagnostics(text, kw, message):
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.losses import Loss
    from dlpc.passes.train.step import train_step_module

    loss = kw.pop("loss", "mse")
    loss = Loss("mse", reduction="none") if loss == "mse-none" else loss
    with pytest.raises(DlpcError) as e:
        train_step_module(_parse(text), loss, "sgd", **kw)
    assert str(e.value) == message


@pytest.mark.parametrize("momentum", [0.1, 0.25])
def test_f64_batch_norm_prediction_step_matches_torch(momentum):
    """A model whose prediction is a training batch norm, in f64 (cc4435c): the loss, the
    SGD update of scale and shift and the running statistics against torch.nn.BatchNorm1d."""
    from dlpc.passes.train.step import train_step_module

    text = BN.replace("MEAN", 'graph.param "m" : tensor<3xf64>')
    step = train_step_module(_parse(text), "mse", optim.SGD(lr=0.1), bn_momentum=momentum)
    assert step.params == ["s", "b"] and step.state == ["s", "b", "m", "v", "opt.step"]
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    w = {"s": rng.standard_normal(3), "b": rng.standard_normal(3)}
    w.update(m=rng.standard_normal(3), v=rng.uniform(0.5, 2.0, 3))
    (loss,), new = _run_step(step, {**step.initial_state, **w}, x, t)
    bn = torch.nn.BatchNorm1d(3, momentum=momentum, dtype=torch.float64)
    bn.weight.data, bn.bias.data = torch.tensor(w["s"]), torch.tensor(w["b"])
    bn.running_mean.data, bn.running_var.data = torch.tensor(w["m"]), torch.tensor(w["v"])
    want = ((bn(torch.tensor(x)) - torch.tensor(t)) ** 2).mean()
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    assert bn.weight.grad is not None and bn.bias.grad is not None
    np.testing.assert_allclose(new["s"], w["s"] - 0.1 * bn.weight.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new["b"], w["b"] - 0.1 * bn.bias.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new["m"], bn.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new["v"], bn.running_var.numpy(), rtol=1e-12)
    assert new["m"].dtype == new["v"].dtype == np.float64


def test_frozen_patterns_leave_params_untrained():
    from dlpc.passes.train.step import train_step_module

    text = BN.replace("MEAN", 'graph.param "m" : tensor<3xf64>')
    step = train_step_module(_parse(text), "mse", "sgd", frozen="[sb]")
    assert step.params == [] and step.state == ["m", "v", "opt.step"]
    step = train_step_module(_parse(text), "mse", "sgd", frozen=["s"])
    assert step.params == ["b"]


# ---- the lr schedulers (schedule.py): diagnostics, resuming, OneCycleLR's options

S = torch.optim.lr_scheduler


class _Groups:
    def __init__(self, groups, runtime=None):
        self.param_groups = groups
        if runtime is not None:
            self.runtime_hyper = lambda: runtime


def _sgd_groups():
    return _Groups([{"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.9}])


def _torch_groups(**kw):
    ps = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    groups = [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}]
    if "betas" in kw:
        return torch.optim.Adam(groups, lr=0.1, betas=kw["betas"])
    return torch.optim.SGD(groups, lr=0.1, momentum=0.9)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda s: s.StepLR(_sgd_groups(), 0), "error: StepLR step_size must be >= 1, got 0"),
        (
            lambda s: s.CosineAnnealingWarmRestarts(_sgd_groups(), 0),
            "error: CosineAnnealingWarmRestarts needs T_0, T_mult >= 1",
        ),
        (
            lambda s: s.CosineAnnealingWarmRestarts(_sgd_groups(), 2, T_mult=0),
            "error: CosineAnnealingWarmRestarts needs T_0, T_mult >= 1",
        ),
        (
            lambda s: s.LinearLR(_sgd_groups(), 0.0),
            "error: LinearLR factors must be in (0, 1] and [0, 1]",
        ),
        (
            lambda s: s.LinearLR(_sgd_groups(), 1.5),
            "error: LinearLR factors must be in (0, 1] and [0, 1]",
        ),
        (
            lambda s: s.LinearLR(_sgd_groups(), 0.5, end_factor=-0.1),
            "error: LinearLR factors must be in (0, 1] and [0, 1]",
        ),
        (
            lambda s: s.LinearLR(_sgd_groups(), 0.5, end_factor=1.1),
            "error: LinearLR factors must be in (0, 1] and [0, 1]",
        ),
        (
            lambda s: s.LambdaLR(_sgd_groups(), [lambda e: 1.0]),
            "error: 1 values of lr_lambda for 2 param groups",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1),
            "error: OneCycleLR needs total_steps or epochs and steps_per_epoch",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, epochs=2),
            "error: OneCycleLR needs total_steps or epochs and steps_per_epoch",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, steps_per_epoch=2),
            "error: OneCycleLR needs total_steps or epochs and steps_per_epoch",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, total_steps=0),
            "error: OneCycleLR total_steps must be >= 1, got 0",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, epochs=0, steps_per_epoch=3),
            "error: OneCycleLR total_steps must be >= 1, got 0",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, 10, anneal_strategy="exp"),
            "error: OneCycleLR anneal_strategy 'exp'",
        ),
        (
            lambda s: s.OneCycleLR(_Groups([{"lr": 0.1}]), 0.1, 10),
            "error: OneCycleLR cycle_momentum needs an optimizer with momentum or betas",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), [0.1, 0.2, 0.3], 10),
            "error: 3 values of max_lr for 2 param groups",
        ),
        (
            lambda s: s.OneCycleLR(_sgd_groups(), 0.1, 10, max_momentum=[0.9]),
            "error: 1 values of max_momentum for 2 param groups",
        ),
        (
            lambda s: s.OneCycleLR(
                _Groups([{"lr": 0.1, "momentum": 0.9}] * 2, [["lr", "momentum"], ["lr"]]), 0.1, 10
            ),
            "error: OneCycleLR cycles the momentum, but param group 1 was built with momentum 0 "
            "(compiled out); build the trainer with cycle_momentum=True",
        ),
        (
            lambda s: s.SequentialLR(_sgd_groups(), [s.StepLR(_sgd_groups(), 2)], [3]),
            "error: SequentialLR needs one milestone fewer than schedulers",
        ),
        (
            lambda s: s.ReduceLROnPlateau(_sgd_groups(), factor=1.0),
            "error: ReduceLROnPlateau factor must be < 1.0",
        ),
        (
            lambda s: s.ReduceLROnPlateau(_sgd_groups(), mode="avg"),
            "error: ReduceLROnPlateau mode 'avg' / 'rel'",
        ),
        (
            lambda s: s.ReduceLROnPlateau(_sgd_groups(), threshold_mode="x"),
            "error: ReduceLROnPlateau mode 'min' / 'x'",
        ),
        (
            lambda s: s.ReduceLROnPlateau(_sgd_groups(), min_lr=[0.0]),
            "error: 1 values of min_lr for 2 param groups",
        ),
        (
            lambda s: s.StepLR(object(), 2),
            "error: a scheduler needs a trainer (param_groups), got object",
        ),
    ],
)
def test_scheduler_diagnostics(make, message):
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train import schedule

    with pytest.raises(DlpcError) as e:
        make(schedule)
    assert str(e.value) == message


def test_onecycle_momentum_compiled_in_passes_the_check():
    from dlpc.passes.train import schedule

    groups = _Groups([{"lr": 0.1, "momentum": 0.9}] * 2, [["lr", "momentum"]] * 2)
    schedule.OneCycleLR(groups, 0.1, 10)
    assert groups.param_groups[0]["momentum"] == 0.95


@pytest.mark.parametrize(
    "kw",
    [
        {"total_steps": 12, "cycle_momentum": False},
        {"epochs": 3, "steps_per_epoch": 4, "anneal_strategy": "linear"},
        {"total_steps": 12, "three_phase": True, "pct_start": 0.25, "div_factor": 5.0},
        {"total_steps": 12, "base_momentum": 0.7, "max_momentum": 0.8, "final_div_factor": 10.0},
    ],
)
@pytest.mark.parametrize("betas", [None, (0.9, 0.99)])
def test_onecycle_options_match_torch(kw, betas):
    """lr and momentum (SGD's, or Adam's beta1) of both groups at each of the 12 steps."""
    from dlpc.passes.train import schedule

    topt = _torch_groups(**({"betas": betas} if betas else {}))
    key = "betas" if betas else "momentum"
    value = betas if betas else 0.9
    groups = _Groups([{"lr": 0.1, key: value}, {"lr": 0.05, key: value}])
    ours = schedule.OneCycleLR(groups, [0.2, 0.1], **kw)
    theirs = S.OneCycleLR(topt, [0.2, 0.1], **kw)
    for _ in range(12):
        for g, tg in zip(groups.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12, abs=1e-15)
            assert g[key] == pytest.approx(tg[key], rel=1e-12)
        topt.step()
        theirs.step()
        ours.step()
    from dlpc.diagnostics import DlpcError

    with pytest.raises(DlpcError) as e:
        ours.step()
    assert str(e.value) == "error: OneCycleLR stepped 13 times; total_steps is 12"


def test_resumed_schedulers_continue_where_they_stopped():
    """state_dict / load_state_dict, and OneCycleLR made with last_epoch (its groups kept):
    the next lrs equal an uninterrupted run's."""
    from dlpc.passes.train import schedule

    def cosine(g):
        return schedule.CosineAnnealingWarmRestarts(g, 3, 2, 0.01)

    a = _sgd_groups()
    first = cosine(a)
    for _ in range(4):
        first.step()
    state = first.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4
    b = _sgd_groups()
    second = cosine(b)
    second.load_state_dict(state)
    for _ in range(5):
        first.step()
        second.step()
        assert b.param_groups == a.param_groups
    lam = schedule.LambdaLR(_sgd_groups(), [lambda e: 0.5**e, lambda e: 1.0 / (e + 1)])
    lam.step()
    assert lam.get_last_lr() == [0.05, 0.025]
    assert set(lam.state_dict()) == {"base_lrs", "last_epoch"}
    a = _sgd_groups()
    cycle = schedule.OneCycleLR(a, 0.2, 10)
    for _ in range(4):
        cycle.step()
    b = _Groups([dict(g) for g in a.param_groups])
    resumed = schedule.OneCycleLR(b, 0.2, 10, last_epoch=3)
    assert b.param_groups == a.param_groups
    for _ in range(5):
        cycle.step()
        resumed.step()
        assert b.param_groups == a.param_groups


def test_cycles_momentum_of_each_factory():
    import functools

    from dlpc.passes.train import schedule

    groups = [{"lr": 0.1, "momentum": 0.0}]
    cycles = schedule.cycles_momentum
    assert cycles(schedule.OneCycleLR) and not cycles(schedule.StepLR)
    assert cycles(functools.partial(schedule.OneCycleLR, max_lr=0.1, total_steps=5))
    assert not cycles(functools.partial(schedule.OneCycleLR, cycle_momentum=False))
    assert cycles(lambda t: schedule.OneCycleLR(t, 0.1, 5), groups)
    assert not cycles(lambda t: schedule.OneCycleLR(t, 0.1, 5), None)
    assert not cycles(lambda t: schedule.OneCycleLR(t, 0.1, 5, cycle_momentum=False), groups)
    assert not cycles(lambda t: schedule.StepLR(t, 0), groups)  # another error: no
    assert not cycles(lambda t: 1 / 0, groups)
    assert groups == [{"lr": 0.1, "momentum": 0.0}]  # (made on copies)


DEQUANTIZE = """func.func @main(%xq: tensor<2x8xi8>, %z: tensor<i8>) -> tensor<f32> {
  %s = graph.param "s" : tensor<f32>
  %w = graph.param "w" : tensor<2x8xf32>
  %x = graph.dequantize %xq, %s, %z : (tensor<2x8xi8>, tensor<f32>, tensor<i8>) -> tensor<2x8xf32>
  %y = graph.mul %x, %w : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = graph.reduce_sum %y : (tensor<2x8xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""


def test_dequantize_scale_gets_no_gradient():
    want = "graph-autodiff: no gradient with respect to the scale of graph.dequantize"
    assert _differentiate_error(DEQUANTIZE) == want


def test_a_bitcast_round_trip_cuts_the_gradient():
    """Bits reread as an integer take no adjoint: the param's gradient is 0."""
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(
        UNARY.replace(
            "OP",
            "%i = graph.bitcast %a : (tensor<4xf32>) -> tensor<4xi32>\n"
            "  %m = graph.bitcast %i : (tensor<4xi32>) -> tensor<4xf32>",
        )
    )
    differentiate(module)
    lines = [line.strip() for line in _printed(module).splitlines()]
    assert lines[-5:-3] == [
        "%0 = graph.constant dense<0.000000e+00> : tensor<f32>",
        "%grad.w = graph.broadcast %0 {shape = array<i64: 4>} : (tensor<f32>) -> tensor<4xf32>",
    ]


LOOP = """func.func @main(%a: tensor<4xf64>, %n: tensor<i64>) -> tensor<f64> {
  %t = graph.constant dense<true> : tensor<i1>
  %r, %m = graph.loop %t, %a, %n {trip_count = 3 : i64} : (tensor<i1>, tensor<4xf64>, tensor<i64>) -> (tensor<4xf64>, tensor<i64>) {
  ^bb0(%i: tensor<i64>, %x: tensor<4xf64>, %k: tensor<i64>):
    %kf = graph.cast %k {to = f64} : (tensor<i64>) -> tensor<f64>
    %s = graph.mul %x, %kf : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
    %y = graph.tanh %s : (tensor<4xf64>) -> tensor<4xf64>
    %one = graph.constant dense<1> : tensor<i64>
    %k2 = graph.add %k, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %c = graph.constant dense<true> : tensor<i1>
    graph.yield %c, %y, %k2 : tensor<i1>, tensor<4xf64>, tensor<i64>
  }
  %l = graph.reduce_sum %r : (tensor<4xf64>) -> tensor<f64>
  func.return %l : tensor<f64>
}"""


def test_loop_carrying_an_integer_reverses_against_torch():
    """A loop carrying a float and an integer counter: the reverse replays the counter
    from its own (integer) stack; the float input's gradient against torch."""
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(LOOP)
    differentiate(module, wrt_inputs=True)
    a = np.array([0.1, -0.2, 0.3, 0.4])
    loss, grad = run_reference(module, [a, np.array(2)], {})
    ta = torch.tensor(a, requires_grad=True)
    x = ta
    for k in (2, 3, 4):
        x = torch.tanh(x * k)
    x.sum().backward()
    assert ta.grad is not None
    assert float(loss) == pytest.approx(x.sum().item(), rel=1e-12)
    np.testing.assert_allclose(grad, ta.grad.numpy(), rtol=1e-12)
    assert "dense<0> : tensor<3xi64>" in _printed(module)  # the counter's stack


TWO = """func.func @main(%x: tensor<4x3xf64>) -> (tensor<4x2xf64>, tensor<4x2xf64>) {
  %w = graph.param "w" : tensor<3x2xf64>
  %v = graph.param "v" : tensor<4x2xf64>
  %y = graph.matmul %x, %w : (tensor<4x3xf64>, tensor<3x2xf64>) -> tensor<4x2xf64>
  %z = graph.add %y, %v : (tensor<4x2xf64>, tensor<4x2xf64>) -> tensor<4x2xf64>
  func.return %y, %z : tensor<4x2xf64>, tensor<4x2xf64>
}"""


def _l1_of_both(predictions=None):
    from dlpc.passes.train.losses import GraphLoss

    def build(b, p, t):
        return b.add(b.sum(b.abs(b.sub(p[0], t[0]))), b.sum(b.abs(b.sub(p[1], t[1]))))

    targets = [((4, 2), "float64"), ((4, 2), "float64")]
    return GraphLoss(build, targets=targets, predictions=predictions)


def test_graph_loss_of_two_results_and_clipping_over_two_params():
    """A graph loss reads both results (two targets, `target0`, `target1`); SGD with
    clip_norm scales both params' gradients by one factor of their joint norm; a
    `distribute` callback sees the differentiated module."""
    from dlpc.passes.train.step import train_step_module

    seen = []
    opt = optim.SGD(lr=0.1, clip_norm=0.5)
    step = train_step_module(_parse(TWO), _l1_of_both(), opt, distribute=seen.append)
    assert len(seen) == 1 and "grad.w" in _printed(seen[0])
    assert step.target_names == ["target0", "target1"] and step.metrics == ["loss"]
    rng = np.random.default_rng(4)
    x, t0, t1 = (
        rng.standard_normal((4, 3)),
        rng.standard_normal((4, 2)),
        rng.standard_normal((4, 2)),
    )
    w, v = rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    out = run_reference(step.module, [x, t0, t1], {**step.initial_state, "w": w, "v": v})
    y = x @ w
    z = y + v
    assert float(out[0]) == pytest.approx(np.abs(y - t0).sum() + np.abs(z - t1).sum(), rel=1e-12)
    gv = np.sign(z - t1)
    gw = x.T @ (np.sign(y - t0) + gv)
    coef = min(0.5 / (np.sqrt((gw**2).sum() + (gv**2).sum()) + 1e-6), 1.0)
    assert coef < 0.2
    new = dict(zip(step.state, out[1:]))
    np.testing.assert_allclose(new["w"], w - 0.1 * coef * gw, rtol=1e-12)
    np.testing.assert_allclose(new["v"], v - 0.1 * coef * gv, rtol=1e-12)


def test_a_graph_loss_reading_more_results_than_main_has():
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.step import train_step_module

    with pytest.raises(DlpcError) as e:
        train_step_module(_parse(LINEAR), _l1_of_both(predictions=2), "sgd")
    assert str(e.value) == "error: the loss reads 2 results; @main has 1"


def test_adamw_without_decay_and_constant_schedule():
    grads = _grads(3)
    want = theirs(T.AdamW, grads, lr=0.01, weight_decay=0.0)
    np.testing.assert_allclose(
        ours(optim.AdamW(lr=0.01, weight_decay=0.0), grads), want, rtol=1e-10
    )
    assert optim.Schedule().factors(0.25, 3).tolist() == [0.25, 0.25, 0.25]


NAMED = """func.func @main(%a: tensor<2xf32> {dlpc.name = "img"}, %x: tensor<2xf32>, %0: tensor<2xf32>, %n: tensor<2xi64>) -> (tensor<2xf32> {dlpc.name = "out"}, tensor<f32>, tensor<2xf32>) {
  %w = graph.param "w" : tensor<2xf32>
  %p = graph.mul %a, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %q = graph.mul %p, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %w2 = graph.param "w" : tensor<2xf32>
  %s = graph.mul %w2, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %u = graph.add %q, %s : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %l = graph.reduce_sum %u : (tensor<2xf32>) -> tensor<f32>
  %r = graph.add %w2, %0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %p, %l, %r : tensor<2xf32>, tensor<f32>, tensor<2xf32>
}"""


def test_gradient_and_aux_result_names_and_values():
    """result=1 with wrt-inputs and aux: the loss keeps no name ("loss"), a param read twice
    sums both uses, inputs are named by dlpc.name, then their SSA name, then arg<i>
    (integers get none; an input off the loss's path gets 0), the other results keep their
    dlpc.name or become result<i>."""
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(NAMED)
    differentiate(module, result=1, wrt_inputs=True, aux=True)
    f = module.body.block.first_op
    assert isinstance(f, func.FuncOp) and f.res_attrs is not None
    names = [a.data["dlpc.name"].data for a in f.res_attrs.data]  # type: ignore[attr-defined]
    assert names == ["loss", "grad.w", "grad.img", "grad.x", "grad.arg2", "out", "result2"]
    a, x, z = (np.array(v, np.float32) for v in ([1.0, 2.0], [3.0, -1.0], [5.0, 6.0]))
    w = np.array([0.5, -2.0], np.float32)
    out = run_reference(module, [a, x, z, np.zeros(2, np.int64)], {"w": w})
    want = [(a * w * x + w * x).sum(), a * x + x, w * x, a * w + w, [0.0, 0.0], a * w, w + z]
    for got, expected in zip(out, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_unknown_loss_kind_and_reduction():
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.losses import KINDS, REDUCTIONS, Loss

    with pytest.raises(DlpcError) as e:
        Loss("hinge")
    assert str(e.value) == f"error: unknown loss 'hinge' (expected {', '.join(KINDS)})"
    with pytest.raises(DlpcError) as e:
        Loss("mse", reduction="max")
    assert str(e.value) == f"error: unknown reduction 'max' (expected {', '.join(REDUCTIONS)})"


def test_unreadable_data_files_and_a_version_2_npz_member(tmp_path):
    """A corrupt .npz or .npy is a one-line error naming the file; an uncompressed .npz
    member written with .npy format 2.0 (a header over 64 KiB) is read in place."""
    import zipfile

    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train.data import load_arrays

    for name in ("bad.npz", "bad.npy"):
        path = tmp_path / name
        path.write_bytes(b"not an array file at all")
        with pytest.raises(DlpcError) as e:
            load_arrays(path)
        assert str(e.value).startswith(f"error: cannot read data {path}: ")
        assert "\n" not in str(e.value)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    member = tmp_path / "x.npy"
    with open(member, "wb") as f:
        np.lib.format.write_array_header_2_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (3, 4)}
        )
        f.write(x.tobytes())
    path = tmp_path / "v2.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.write(member, "x.npy")
    got = load_arrays(path)["x"]
    np.testing.assert_array_equal(got, x)


# ---- gradient rules on the paths the rule table's cases miss (test_autodiff's harness:
# finite differences and torch.autograd on loss = sum(y * r))


def _const(b, shape, seed, low=None):
    rng = np.random.default_rng(seed)
    value = rng.standard_normal(shape) if low is None else rng.uniform(low, 2.0, shape)
    return b.const(value, graph.f64)


def _rule_cases():
    from test_autodiff import Case, op

    return [
        Case("conv2d_1x1", op(graph.Conv2DOp), [((2, 3, 4, 4), "f"), ((5, 3, 1, 1), "f")]),
        Case(
            "conv2d_weight_only",
            lambda b, w: b.op(graph.Conv2DOp, _const(b, (2, 3, 5, 4), 1), w, pads=[1, 1, 1, 1]),
            [((4, 3, 3, 3), "f")],
        ),
        Case(
            "conv2d_input_only",
            lambda b, x: b.op(graph.Conv2DOp, x, _const(b, (4, 3, 2, 2), 2), strides=[2, 1]),
            [((2, 3, 5, 4), "f")],
        ),
        Case("linear_scalar_bias", op(graph.LinearOp), [((3, 5), "f"), ((4, 5), "f"), ((), "f")]),
        Case(
            "linear_weight_only",
            lambda b, w: b.op(graph.LinearOp, _const(b, (3, 5), 3), w),
            [((4, 5), "f")],
        ),
        Case(
            "pow_exponent_only",
            lambda b, p: b.pow(b.const(np.array([0.0, 0.5, 1.5, 2.0]), graph.f64), p),
            [((3, 4), "pos")],
        ),
        Case("clip_max_only", op(graph.ClipOp, max=0.3), [((4, 5), "f")]),
        Case("transpose_identity", op(graph.TransposeOp, perm=[0, 1]), [((2, 3), "f")]),
        Case(
            "slice_one_axis",
            op(graph.SliceOp, starts=[1], ends=[3], axes=[0], steps=[1]),
            [((4, 3), "f")],
        ),
        Case(
            "batch_norm_input_only",
            lambda b, x: b.op(
                graph.BatchNormOp,
                x,
                _const(b, (3,), 4),
                _const(b, (3,), 5),
                _const(b, (3,), 6),
                _const(b, (3,), 7, low=0.5),
            ),
            [((2, 3, 2, 2), "f")],
        ),
        Case(
            "batch_norm_statistics_only",
            lambda b, m, v: b.op(
                graph.BatchNormOp,
                _const(b, (2, 3, 2), 8),
                _const(b, (3,), 9),
                _const(b, (3,), 10),
                m,
                v,
            ),
            [((3,), "f"), ((3,), "pos")],
        ),
        Case(
            "batch_norm_scale_and_bias_only",
            lambda b, s, c: b.op(
                graph.BatchNormOp,
                _const(b, (2, 3, 2), 11),
                s,
                c,
                _const(b, (3,), 12),
                _const(b, (3,), 13, low=0.5),
            ),
            [((3,), "f"), ((3,), "f")],
        ),
        Case(
            "layer_norm_scale_only",
            lambda b, s: b.op(graph.LayerNormOp, _const(b, (3, 7), 14), s),
            [((7,), "f")],
        ),
        # (train seed 51's survivors) a left pad: the tiles' adjoint placed at j - left
        Case(
            "winograd_input_left_pad",
            op(graph.WinogradInputTransformOp, pads=[1, 1, 0, 1]),
            [((1, 2, 5, 5), "f")],
        ),
        Case(
            "winograd_input_left_pad_only",
            op(graph.WinogradInputTransformOp, pads=[0, 3, 0, 0]),
            [((1, 1, 4, 3), "f")],
        ),
        # ... and a winograd output transform without a bias
        Case(
            "winograd_output_no_bias",
            op(graph.WinogradOutputTransformOp, output=[5, 3]),
            [((16, 2, 3, 3, 2), "f")],
        ),
        # (train seed 53's survivor) a stride in the columns only: g dilated along W alone
        Case(
            "conv2d_column_stride",
            op(graph.Conv2DOp, strides=[1, 2], pads=[1, 0, 0, 1]),
            [((1, 2, 4, 5), "f"), ((3, 2, 2, 3), "f")],
        ),
        # column-only and left/top-only variants of the windowed ops (after seed 53)
        Case(
            "conv2d_column_dilation_left_pad",
            op(graph.Conv2DOp, pads=[0, 2, 0, 0], dilations=[1, 2]),
            [((1, 2, 4, 5), "f"), ((2, 2, 2, 2), "f")],
        ),
        Case(
            "max_pool_column_stride_left_pad",
            op(graph.MaxPool2DOp, kernel=[2, 2], strides=[1, 2], pads=[0, 1, 0, 0]),
            [((1, 2, 4, 5), "f")],
        ),
        Case(
            "avg_pool_column_stride_top_pad",
            op(graph.AvgPool2DOp, kernel=[2, 3], strides=[1, 2], pads=[1, 0, 0, 0]),
            [((1, 2, 4, 7), "f")],
        ),
        Case(
            "winograd_input_right_pad",
            op(graph.WinogradInputTransformOp, pads=[0, 0, 1, 2]),
            [((1, 1, 5, 4), "f")],
        ),
        # negative and leading axes
        Case("concat_last_axis", op(graph.ConcatOp, axis=-1), [((2, 3), "f"), ((2, 1), "f")]),
        Case("gather_axis0", op(graph.GatherOp, axis=0), [((4, 3), "f"), ((5,), "int4")]),
        Case("gather_last_axis", op(graph.GatherOp, axis=-1), [((2, 5), "f"), ((3,), "int5")]),
        Case("softmax_last_axis", op(graph.SoftmaxOp, axis=-1), [((3, 4), "f")]),
        Case(
            "reduce_sum_negative_axes",
            op(graph.ReduceSumOp, axes=[-1, 0], keepdims=True),
            [((2, 3, 4), "f")],
        ),
    ]


@pytest.mark.parametrize("index", range(26))
def test_partial_rule_paths_match_finite_differences_and_torch(index):
    from test_autodiff import test_rule_matches_finite_differences_and_torch

    cases = _rule_cases()
    assert len(cases) == 26
    test_rule_matches_finite_differences_and_torch(cases[index])


def _sequential_groups():
    return _Groups([{"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.9}])


def test_sequential_of_three_schedulers_matches_torch():
    """Three schedulers, two milestones (train seed 51's survivor schedule.py:362): each
    later one restarts at its own step 0 at its milestone, as torch's."""
    from dlpc.passes.train import schedule

    topt = _torch_groups()
    groups = _sequential_groups()
    ours = schedule.SequentialLR(
        groups,
        [
            schedule.LinearLR(groups, 0.25, 1.0, 3),
            schedule.StepLR(groups, 2, 0.5),
            schedule.ExponentialLR(groups, 0.8),
        ],
        [3, 7],
    )
    theirs = S.SequentialLR(
        topt,
        [S.LinearLR(topt, 0.25, 1.0, 3), S.StepLR(topt, 2, 0.5), S.ExponentialLR(topt, 0.8)],
        [3, 7],
    )
    for _ in range(12):
        for g, tg in zip(groups.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12)
        topt.step()
        theirs.step()
        ours.step()


def test_sequential_reusing_a_scheduler_restarts_it():
    """A scheduler listed twice (after the first) restarts at its own step 0 at each of
    its milestones, as torch's (train seed 51's survivor schedule.py:362: `milestones[k - 1]` -> `[k - 2]`
    never matched, so the second run continued the first's steps)."""
    from dlpc.passes.train import schedule

    topt = _torch_groups()
    groups = _sequential_groups()
    decay, step = schedule.ExponentialLR(groups, 0.5), schedule.StepLR(groups, 1, 0.9)
    ours = schedule.SequentialLR(groups, [decay, step, step], [3, 5])
    t_decay, t_step = S.ExponentialLR(topt, 0.5), S.StepLR(topt, 1, 0.9)
    theirs = S.SequentialLR(topt, [t_decay, t_step, t_step], [3, 5])
    lrs = []
    for _ in range(9):
        for g, tg in zip(groups.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12)
        lrs.append(groups.param_groups[0]["lr"])
        topt.step()
        theirs.step()
        ours.step()
    assert lrs[3] == lrs[5] == pytest.approx(0.1)  # the reused one back at its step 0


def test_sequential_of_three_hundred_schedulers():
    """Past CPython's small-int cache (train seed 51's survivor schedule.py:346, `!=` ->
    `is not`): 300 schedulers and 299 milestones are accepted, one fewer milestone refused."""
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.train import schedule

    groups = _sequential_groups()
    scheds = [schedule.ExponentialLR(groups, 0.5) for _ in range(300)]
    seq = schedule.SequentialLR(groups, scheds, list(range(1, 300)))
    seq.step()
    assert groups.param_groups[0]["lr"] == pytest.approx(0.1)  # the second, at its step 0
    with pytest.raises(DlpcError) as e:
        schedule.SequentialLR(_sequential_groups(), scheds, list(range(1, 299)))
    assert str(e.value) == "error: SequentialLR needs one milestone fewer than schedulers"


@pytest.mark.parametrize("order", [[0, 1, 0], [0, 0, 1], [0, 1, 1]])
def test_sequential_with_the_first_scheduler_listed_again_matches_torch(order):
    """The first scheduler listed again later starts at its own step 0, not above its
    base lr (7b9e8fb: its construction step was undone once per entry)."""
    from dlpc.passes.train import schedule

    topt = _torch_groups()
    groups = _sequential_groups()
    ours_s = [schedule.ExponentialLR(groups, 0.5), schedule.StepLR(groups, 1, 0.9)]
    their_s = [S.ExponentialLR(topt, 0.5), S.StepLR(topt, 1, 0.9)]
    ours = schedule.SequentialLR(groups, [ours_s[k] for k in order], [3, 5])
    theirs = S.SequentialLR(topt, [their_s[k] for k in order], [3, 5])
    assert groups.param_groups[0]["lr"] == pytest.approx(0.1)
    for _ in range(10):
        for g, tg in zip(groups.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12)
        topt.step()
        theirs.step()
        ours.step()


# ---- train seed 52's killable survivors


def test_depthwise_weight_gradient_takes_the_per_channel_path():
    """A depthwise conv's weight gradient is one batched matmul per (sample, channel):
    cols [N, C, kk, P] times g [N, C, 1, P] (train seed 52's `_grad.py:466`, `cg == 1` ->
    `cg < 1`, sent it down the grouped path, a [N, G, 1, P] x [N, G, kk, P] matmul)."""
    from dlpc.passes.train.autodiff import differentiate

    module = _parse(
        """func.func @main(%x: tensor<1x2x4x4xf32>) -> tensor<f32> {
  %w = graph.param "w" : tensor<2x1x3x3xf32>
  %y = graph.conv2d %x, %w {groups = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32>
  %l = graph.reduce_sum %y : (tensor<1x2x2x2xf32>) -> tensor<f32>
  func.return %l : tensor<f32>
}"""
    )
    differentiate(module)
    matmuls = [
        line.split(" : ", 1)[1] for line in _printed(module).splitlines() if "graph.matmul" in line
    ]
    assert matmuls == ["(tensor<1x2x9x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x9x1xf32>"]


def test_running_statistics_of_params_named_with_colons():
    """Running statistics whose names hold ':' (as ONNX initializers' "bn:0" may): the
    step updates them (train seed 52's `step.py:201`, `split(":", 1)` -> `split(":", 2)`,
    could not unpack the mark)."""
    from dlpc.passes.train.step import train_step_module

    text = BN.replace("MEAN", 'graph.param "bn:mean:0" : tensor<3xf64>')
    text = text.replace('graph.param "v"', 'graph.param "bn:var:0"')
    step = train_step_module(_parse(text), "mse", optim.SGD(lr=0.1))
    assert step.state == ["s", "b", "bn:mean:0", "bn:var:0", "opt.step"]
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    w = {"s": np.ones(3), "b": np.zeros(3), "bn:mean:0": np.zeros(3), "bn:var:0": np.ones(3)}
    _, new = _run_step(step, {**step.initial_state, **w}, x, t)
    np.testing.assert_allclose(new["bn:mean:0"], 0.1 * x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(new["bn:var:0"], 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-12)


def test_bce_with_logits_named_by_a_runtime_string():
    """A loss kind built at run time (not an interned literal: read from a command line or
    a file) still takes the stable bce_with_logits form (train seed 52's `losses.py:289`,
    `==` -> `is`); large logits, against torch."""
    from dlpc.passes.train.losses import Loss, build_loss

    kind = "".join(["bce_with", "_logits"])
    loss = Loss(kind)
    assert loss.kind == "bce_with_logits" and loss.kind is not "bce_with_logits"  # noqa: F632
    ty = graph.tensor_type((4,), graph.f64)
    block = Block(arg_types=[ty, ty])
    b = Builder.at_end(block)
    value = build_loss(b, loss, block.args[0], block.args[1])
    block.add_op(func.ReturnOp(value))
    module = ModuleOp([func.FuncOp("main", ([ty, ty], [value.type]), Region(block))])
    x, y = np.array([-60.0, -0.5, 2.0, 80.0]), np.array([1.0, 0.0, 1.0, 0.0])
    want = F.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(y))
    got = run_reference(module, [x, y], {})[0]
    assert float(got) == pytest.approx(want.item(), rel=1e-12)


def test_a_user_scheduler_overriding_only_lr_at_starts_at_step_0():
    """LRScheduler's own constructor (a user's subclass that overrides lr_at only) sets the
    lr of step 0 (train seed 53's `schedule.py:107`, default `last_epoch=-1` -> `-2`)."""
    from dlpc.passes.train import schedule

    class Halving(schedule.LRScheduler):
        def lr_at(self, epoch, base_lr, group):
            return base_lr / 2**epoch

    groups = _sequential_groups()
    sched = Halving(groups)
    assert sched.last_epoch == 0 and sched.get_last_lr() == [0.1, 0.05]
    sched.step()
    assert sched.get_last_lr() == [0.05, 0.025]


def test_batch_norm_momentum_one_takes_the_batch_statistics():
    """bn_momentum=1.0 is accepted (train seed 53's `step.py:240`, `<= 1.0` -> `< 1.0`):
    the running statistics become the batch's (the variance unbiased)."""
    from dlpc.passes.train.step import train_step_module

    text = BN.replace("MEAN", 'graph.param "m" : tensor<3xf64>')
    step = train_step_module(_parse(text), "mse", "sgd", bn_momentum=1.0)
    x, t = _linear_data(2)[0], np.zeros((4, 3))
    w = {"s": np.ones(3), "b": np.zeros(3), "m": np.full(3, 5.0), "v": np.full(3, 5.0)}
    _, new = _run_step(step, {**step.initial_state, **w}, x, t)
    np.testing.assert_allclose(new["m"], x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(new["v"], x.var(0, ddof=1), rtol=1e-12)
