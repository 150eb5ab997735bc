"""Build the training step of a model as one graph function: forward, loss, backward
(`graph-autodiff`), optimizer update.

    step = train_step_module(model.module, "cross_entropy", Adam(lr=1e-3))
    step.module      # @main(x, target) -> (loss, [correct], new params..., new opt state...)
    step.state       # the names of the state outputs, in order: the params, then opt.*

Input: graph IR whose `@main` returns the prediction first (further results are ignored),
with static shapes (the batch dim bound). Output: graph IR that every stage of the
pipeline lowers like any model. The params and the optimizer state are `graph.param`s of
the step, read by it and returned updated (the caller keeps them resident and feeds the
returned values to the next call); the `target` argument is appended to @main's inputs.

Training mode: each `graph.batch_norm` normalises with the batch's statistics (mean and
biased variance over every axis but the channel) and returns its running statistics updated
with `bn_momentum` (PyTorch's: r = (1 - m) r + m s, the variance unbiased); each
`graph.dropout` gets the step counter, so it draws a fresh mask per step (see the op).
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Operation, SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder
from dlpc.passes.train._grad import BN_TRAIN
from dlpc.passes.train.losses import (
    GraphLoss,
    Loss,
    as_loss,
    build_correct,
    build_loss,
    target_type,
)
from dlpc.passes.train.optim import STEP, Optimizer, make_optimizer

BN_STAT = "dlpc.train.bn_stat"  # marks a batch statistic: "<running param name>"
BN_MOMENTUM = 0.1


@dataclass
class TrainStep:
    """A training step: the module and what its results and params are."""

    module: ModuleOp
    params: list[str]  # the trained parameters, in output order
    state: list[str]  # every state output, in order: params, running stats, opt.*
    metrics: list[str]  # the leading outputs: "loss", and "correct" for class ids
    initial_state: dict[str, np.ndarray] = field(default_factory=dict)  # opt.* and friends
    target_name: str = "target"
    # bytes of forward activations the backward keeps alive, as built, and (the property
    # `kept_bytes_other`) with the other `recompute` setting (graph-autodiff's activation
    # checkpointing), differentiated from `forward` when first asked
    kept_bytes: int = 0
    forward: ModuleOp | None = field(default=None, repr=False)  # the module before autodiff
    recompute: bool = False
    # the optimizer's param groups: options and "params" (names); their run-time
    # hyper-parameters are the step's params `opt.g<k>.<name>` (optim.hyper_name)
    groups: list[dict] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)  # the model's inputs
    target_names: list[str] = field(default_factory=list)  # the step's inputs after them
    # `grad.<param>` results after the state (return_grads): this call's gradients
    grads: list[str] = field(default_factory=list)
    accumulate: int = 1  # micro-batches per update

    @functools.cached_property
    def kept_bytes_other(self) -> int:
        """Bytes the backward keeps alive with the other `recompute` setting (a second
        autodiff of the whole step, so only when asked: dlpc-train's report, the tests)."""
        if self.forward is None:
            return 0
        from xdsl.utils.exceptions import DiagnosticException

        from dlpc.passes.train.autodiff import saved_bytes

        try:
            return saved_bytes(self.forward, recompute=not self.recompute, aux=True).kept_bytes
        except DiagnosticException as e:
            raise DlpcError(f"error: {e}") from None

    @property
    def buffers(self) -> list[str]:
        """State that is not a trained parameter (running statistics, optimizer state)."""
        return [n for n in self.state if n not in self.params]


def _main(module: ModuleOp) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            return op
    raise DlpcError("error: the model has no func.func @main")


def _return(f: func.FuncOp) -> func.ReturnOp:
    last = f.body.block.last_op
    assert isinstance(last, func.ReturnOp)
    return last


def _params(f: func.FuncOp) -> dict[str, SSAValue]:
    out: dict[str, SSAValue] = {}
    for op in f.body.block.ops:
        if isinstance(op, graph.ParamOp) and op.pname not in out:
            out[op.pname] = op.output
    return out


def _set_results(f: func.FuncOp, values: list[SSAValue]) -> None:
    ret = _return(f)
    ret.operands = values
    f.res_attrs = None
    f.update_function_type()


def _erase_dead(f: func.FuncOp) -> None:
    """Remove ops whose results are unused (repeat until none), e.g. inference-only params."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(f.body.block.ops)):
            if op.results and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True


def _training_dropout(f: func.FuncOp) -> None:
    """Give each inference-mode graph.dropout the step counter `opt.step` (the optimizer's
    count of updates so far, a rank-0 f32 param): it draws a fresh mask per step."""
    drops = [op for op in f.body.block.ops if isinstance(op, graph.DropoutOp) and not op.training]
    if not drops:
        return
    first = f.body.block.first_op
    assert first is not None  # the block holds the dropouts found above
    b = Builder.before(first)
    step = b.param(STEP, (), graph.f32)
    for op in drops:
        new = Builder.before(op).op(graph.DropoutOp, op.operands[0], step, p=op.p, seed=op.seed)
        op.results[0].replace_all_uses_with(new)
        f.body.block.erase_op(op)


def _training_batch_norm(f: func.FuncOp) -> dict[str, tuple[int, ...]]:
    """graph.batch_norm -> batch statistics (see the module docstring). The batch mean and
    variance ops are marked `mean:<running mean>` / `var:<running var>`; returns the
    running statistics' shapes by name."""
    shapes: dict[str, tuple[int, ...]] = {}
    for op in list(f.body.block.ops):
        if not isinstance(op, graph.BatchNormOp):
            continue
        x, scale, bias, mean, var = op.operands
        names = []
        for v in (mean, var):
            if not isinstance(v.owner, graph.ParamOp):
                raise DlpcError(
                    "error: graph.batch_norm: training needs its running statistics to be "
                    "graph.params"
                )
            names.append(v.owner.pname)
            shapes[v.owner.pname] = graph.shape_of(v)
        rank = len(graph.shape_of(x))
        channel = rank - 1 if graph.layout_of(op) == "nhwc" else 1
        axes = [a for a in range(rank) if a != channel]
        shape = [1] * rank
        shape[channel] = graph.shape_of(x)[channel]
        b = Builder.before(op)
        mu = b.mean(x, axes, keepdims=True)
        centred = b.sub(x, mu)
        sigma2 = b.mean(b.mul(centred, centred), axes, keepdims=True)
        y = b.mul(centred, b.op(graph.RsqrtOp, b.add(sigma2, op.epsilon)))
        y = b.add(b.mul(y, b.reshape(scale, shape)), b.reshape(bias, shape))
        y.owner.attributes[BN_TRAIN] = UnitAttr()  # type: ignore[union-attr]
        mu.owner.attributes[BN_STAT] = StringAttr(f"mean:{names[0]}")  # type: ignore[union-attr]
        sigma2.owner.attributes[BN_STAT] = StringAttr(f"var:{names[1]}")  # type: ignore[union-attr]
        op.results[0].replace_all_uses_with(y)
        op.detach()
        op.erase()
    return shapes


def _running_updates(
    f: func.FuncOp, b: Builder, shapes: dict[str, tuple[int, ...]], momentum: float = BN_MOMENTUM
) -> dict[str, SSAValue]:
    """New running statistics from the marked batch statistics (`momentum`, torch's
    default 0.1; the variance kept unbiased, as PyTorch does)."""
    updates: dict[str, SSAValue] = {}
    for op in list(f.body.block.ops):
        attr = op.attributes.pop(BN_STAT, None)
        if not isinstance(attr, StringAttr) or attr.data.split(":", 1)[1] in updates:
            continue
        kind, name = attr.data.split(":", 1)
        stat = op.results[0]
        count = int(np.prod(graph.shape_of(op.operands[0]))) // int(np.prod(graph.shape_of(stat)))
        old = b.param(name, shapes[name], graph.element_type_of(stat))  # (the model's type)
        stat = b.reshape(stat, shapes[name])
        if kind == "var":
            stat = b.mul(stat, count / max(count - 1, 1))
        updates[name] = b.add(b.mul(old, 1.0 - momentum), b.mul(stat, momentum))
    return updates


def train_step_module(
    module: ModuleOp,
    loss: str | Loss | GraphLoss = "cross_entropy",
    optimizer: str | Optimizer = "sgd",
    weights: dict[str, np.ndarray] | None = None,
    frozen: tuple[str, ...] = (),
    recompute: bool = False,
    accumulate: int = 1,
    return_grads: bool = False,
    bn_momentum: float = BN_MOMENTUM,
    distribute: Callable[[ModuleOp], None] | None = None,
    verify: bool = True,
) -> TrainStep:
    """The training step of `module` (not modified) for `loss` and `optimizer`.

    `weights` (name -> array) give the params' shapes and dtypes for the optimizer state;
    without them the param ops' types do. `frozen` params (names or glob patterns) are
    read but not trained.
    `recompute`: graph-autodiff's activation checkpointing. `accumulate` > 1: the update
    applies every `accumulate`-th call, on the mean of the calls' gradients (`_accumulated`).
    `return_grads`: the step also returns this call's gradients (`grad.<param>`, after
    the state). `bn_momentum`: the running statistics' momentum (torch's BatchNorm's). `distribute` rewrites the
    differentiated module before the update (graph-data-parallel: gradients across ranks).
    `verify=False` skips verifying the built module (half of the step build on resnet),
    for a caller that compiles it: the pipeline verifies it after its first pass.
    """
    loss = as_loss(loss)
    optimizer = make_optimizer(optimizer)
    if not 0.0 <= bn_momentum <= 1.0:
        raise DlpcError(f"error: batch-norm momentum must be in [0, 1], got {bn_momentum}")
    if not isinstance(accumulate, int) or isinstance(accumulate, bool) or accumulate < 1:
        raise DlpcError(f"error: accumulate must be a positive int, got {accumulate!r}")
    if loss.reduction == "none":
        raise DlpcError("error: a training loss needs reduction 'mean' or 'sum', not 'none'")
    module = module.clone()
    f = _main(module)
    ret = _return(f)
    if not ret.operands:
        raise DlpcError("error: @main returns nothing to train on")
    # a built-in loss reads the first result, a graph loss its first `predictions`
    n_pred = (loss.predictions or len(ret.operands)) if isinstance(loss, GraphLoss) else 1
    if n_pred > len(ret.operands):
        raise DlpcError(f"error: the loss reads {n_pred} results; @main has {len(ret.operands)}")
    predictions = list(ret.operands[:n_pred])
    prediction = predictions[0]
    for k, value in enumerate(predictions):
        if not isinstance(value.owner, Operation):
            raise DlpcError("error: @main returns an input unchanged; there is nothing to train")
        if not isinstance(value.type, graph.TensorType) or not graph.is_float_type(
            graph.element_type_of(value)
        ):
            raise DlpcError(f"error: @main's result {k} must be a float tensor, got {value.type}")

    # forward: the loss of the predictions against new target arguments
    block = f.body.block
    types = (
        loss.target_types(n_pred)
        if isinstance(loss, GraphLoss)
        else [target_type(loss, cast(graph.TensorType, prediction.type))]
    )
    n_args = len(block.args)
    targets: list[SSAValue] = [block.insert_arg(t, len(block.args)) for t in types]
    names = [
        (a.data.get("dlpc.name") if isinstance(a, DictionaryAttr) else None)
        for a in (f.arg_attrs.data if f.arg_attrs is not None else ())
    ]
    names = [n.data if isinstance(n, StringAttr) else f"arg{i}" for i, n in enumerate(names)]
    names += [f"arg{i}" for i in range(len(names), n_args)]
    target_names = ["target"] if len(targets) == 1 else [f"target{k}" for k in range(len(targets))]
    target_names = [n if n not in names else f"{n}_" for n in target_names]
    f.arg_attrs = ArrayAttr(
        [DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in [*names, *target_names]]
    )
    running_shapes = _training_batch_norm(f)
    # (a prediction made by a batch norm is now its training form's result)
    predictions = list(ret.operands[:n_pred])
    prediction = predictions[0]
    b = Builder.before(ret)
    # the metrics: the loss, and for class ids the hits (autodiff keeps them as aux results)
    if isinstance(loss, GraphLoss):
        metrics, metric_values = ["loss"], [loss.apply(b, predictions, targets)]
    else:
        metrics, metric_values = ["loss"], [build_loss(b, loss, prediction, targets[0])]
    if isinstance(loss, Loss) and loss.metric == "accuracy":  # class ids, or binary 0/1
        metrics.append("correct")
        metric_values.append(build_correct(b, loss, prediction, targets[0]))
    _set_results(f, metric_values)
    _erase_dead(f)  # inference-only values (running statistics, other results)
    # the running stats, optimizer state and the step counter as params, made before
    # autodiff would see them: autodiff differentiates every param, so the non-trained
    # ones are added afterwards
    trained = _trained(list(_params(f)), frozen)
    _training_dropout(f)  # after `trained`: the step counter is not trained

    # backward: (loss, grad.<param>..., correct)
    kept, forward = _autodiff(module, recompute)
    if distribute is not None:
        distribute(module)
    f = _main(module)
    ret = _return(f)
    results = list(ret.operands)
    n_aux = len(metric_values) - 1
    all_params = list(_params(f))
    grads = dict(zip(_grad_names(f, all_params), results[1 : len(results) - n_aux]))
    b = Builder.before(ret)
    metric_values = [results[0], *results[len(results) - n_aux :]]

    # optimizer
    params = _params(f)
    shapes = {
        n: (
            tuple(np.shape(weights[n])) if weights and n in weights else graph.shape_of(params[n]),
            np.dtype(graph.numpy_dtype(graph.element_type_of(params[n]))),
        )
        for n in trained
    }
    groups = optimizer.assign(trained)
    initial = optimizer.initial_state(shapes, groups)
    running = _running_updates(f, b, running_shapes, bn_momentum)
    state_values = {
        name: b.param(name, np.shape(v), graph.NUMPY_TO_ELT[v.dtype.name])
        for name, v in initial.items()
    }
    step_grads = {n: grads[f"grad.{n}"] for n in trained}
    if accumulate > 1:
        new_params, new_state = _accumulated(
            b, optimizer, loss, accumulate, params, step_grads, state_values, groups, initial
        )
    else:
        new_params, new_state = optimizer.build(
            b, {n: params[n] for n in trained}, step_grads, state_values, groups
        )
    order = [*trained, *running, *new_state]
    values = [*(new_params[n] for n in trained), *running.values(), *new_state.values()]
    grad_names = [f"grad.{n}" for n in trained] if return_grads else []
    _set_results(f, [*metric_values, *values, *(step_grads[n] for n in trained if return_grads)])
    f.res_attrs = ArrayAttr(
        [DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in [*metrics, *order, *grad_names]]
    )
    _erase_dead(f)
    if verify:
        module.verify()
    return TrainStep(
        module,
        trained,
        order,
        metrics,
        initial,
        target_names[0],
        kept,
        forward,
        recompute,
        groups,
        names,
        target_names,
        grad_names,
        accumulate,
    )


MICRO = "opt.micro"  # micro-batches accumulated so far in this step (accumulate > 1)


def _accumulated(b, optimizer, loss, k, params, grads, state, groups, initial):
    """The update every k-th call on the mean of k micro-batches' gradients (the sum for
    a 'sum' loss): each call adds its gradients to `opt.grad_acc.<p>`; the k-th applies
    the optimizer to them and resets them, the others return params and optimizer state
    unchanged (selected, so they are bit for bit the old values)."""
    names = list(grads)
    micro = b.param(MICRO, (), graph.f32)
    initial[MICRO] = np.zeros((), np.float32)
    acc = {}
    for n in names:
        shape, dtype = graph.shape_of(params[n]), graph.element_type_of(grads[n])
        acc[n] = b.param(f"opt.grad_acc.{n}", shape, dtype)
        initial[f"opt.grad_acc.{n}"] = np.zeros(shape, graph.numpy_dtype(dtype))
    summed = {n: b.add(acc[n], grads[n]) for n in names}
    mean = getattr(loss, "reduction", "mean") != "sum"
    total = {n: b.mul(summed[n], 1.0 / k) if mean else summed[n] for n in names}
    new_params, new_state = optimizer.build(b, {n: params[n] for n in names}, total, state, groups)
    last = b.compare(micro, float(k - 1), "ge")
    chosen = {n: b.where(last, new_params[n], params[n]) for n in names}
    kept = {s: b.where(last, v, state[s]) for s, v in new_state.items()}
    for n in names:
        kept[f"opt.grad_acc.{n}"] = b.where(last, 0.0, summed[n])
    kept[MICRO] = b.where(last, 0.0, b.add(micro, 1.0))
    return chosen, kept


def _trained(names: list[str], frozen) -> list[str]:
    """The params not frozen: `frozen` holds names or glob patterns (fnmatch), each of
    which must match a param."""
    frozen = [frozen] if isinstance(frozen, str) else list(frozen)
    for pattern in frozen:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            raise DlpcError(f"error: frozen '{pattern}' matches no parameter of the model")
    return [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in frozen)]


def _autodiff(module: ModuleOp, recompute: bool) -> tuple[int, ModuleOp]:
    """Run `graph-autodiff`, keeping the results after the loss (the metrics) as aux
    results; the bytes its backward keeps alive, and the module as it was before (for
    `TrainStep.kept_bytes_other`)."""
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.passes.train.autodiff import differentiate

    forward = module.clone()
    try:
        kept = differentiate(module, aux=True, recompute=recompute)
    except DiagnosticException as e:
        raise DlpcError(f"error: {e}") from None
    return kept.kept_bytes, forward


def _grad_names(f: func.FuncOp, params: list[str]) -> list[str]:
    """The names of @main's gradient results: their `dlpc.name` result attributes when
    graph-autodiff writes them, else `grad.<param>` in the params' order."""
    attrs = f.res_attrs.data if f.res_attrs is not None else ()
    names = []
    for a in list(attrs)[1:]:
        name = a.data.get("dlpc.name") if isinstance(a, DictionaryAttr) else None
        if not isinstance(name, StringAttr):
            return [f"grad.{p}" for p in params]
        names.append(name.data)
    return names or [f"grad.{p}" for p in params]
