"""The train-step builder (passes/train/step.py): what the step function takes and returns,
which params it trains, and that the model it starts from is left as it was. Its numbers
against torch are in test_train.py."""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, StringAttr

import dlpc
from dlpc.passes.train.optim import Adam
from dlpc.passes.train.step import train_step_module

ROOT = Path(__file__).resolve().parents[2]


def _main(module) -> func.FuncOp:
    return next(
        op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"
    )


def _names(attrs) -> list[str]:
    out = []
    for a in attrs.data:
        assert isinstance(a, DictionaryAttr)
        name = a.data["dlpc.name"]
        assert isinstance(name, StringAttr)
        out.append(name.data)
    return out


def test_step_signature_and_state():
    model = dlpc.load(str(ROOT / "examples" / "mlp.dlpc"), batch=4)
    before = str(model.module)
    params = [op.param_name.data for op in model.module.walk() if op.name == "graph.param"]
    step = train_step_module(model.module, "cross_entropy", Adam(lr=1e-3))
    assert str(model.module) == before  # the model is not modified
    step.module.verify()
    main = _main(step.module)
    assert step.metrics == ["loss", "correct"]
    assert sorted(step.params) == sorted(params)
    # results: the metrics, then every piece of state in `state`'s order
    assert main.res_attrs is not None
    assert _names(main.res_attrs) == [*step.metrics, *step.state]
    assert step.state[: len(step.params)] == step.params
    assert set(step.buffers) == {s for s in step.state if s.startswith("opt.")}
    assert "opt.step" in step.buffers
    # inputs: the model's, then the target
    assert main.arg_attrs is not None
    assert _names(main.arg_attrs)[-1] == step.target_name == "target"
    # the initial state: the buffers, and the run-time hyper-parameters (read, not returned)
    hyper = {"opt.g0.lr", "opt.g0.beta1", "opt.g0.beta2"}
    assert set(step.initial_state) == set(step.buffers) | hyper
    read = {op.param_name.data for op in step.module.walk() if op.name == "graph.param"}
    assert hyper <= read and not hyper & set(step.state)


def test_frozen_params_are_read_but_not_trained():
    model = dlpc.load(str(ROOT / "examples" / "mlp.dlpc"), batch=4)
    params = [op.param_name.data for op in model.module.walk() if op.name == "graph.param"]
    frozen = params[0]
    step = train_step_module(model.module, "cross_entropy", "sgd", frozen=(frozen,))
    assert frozen not in step.params and frozen not in step.state
    read = [op.param_name.data for op in step.module.walk() if op.name == "graph.param"]
    assert frozen in read
