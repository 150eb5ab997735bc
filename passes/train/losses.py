"""Loss functions as compositions of graph ops, so `graph-autodiff` differentiates them with
the rules it already has and every backend runs them with the kernels it already has.

    b = Builder.before(return_op)
    loss = build_loss(b, Loss("cross_entropy", label_smoothing=0.1), logits, labels)

| kind              | prediction         | target                      | per element                          |
|-------------------|--------------------|-----------------------------|--------------------------------------|
| `cross_entropy`   | logits [N, C, ...] | class ids, int [N, ...]     | -sum_c t_c log_softmax(x)_c          |
| `nll`             | log-probs [N, C, ...] | class ids, int [N, ...]  | -x[label]                            |
| `mse`             | any                | same shape, float           | (x - y)^2                            |
| `bce_with_logits` | logits, any        | same shape, float in [0, 1] | max(x,0) - x y + log(1 + e^-abs(x))  |
| `bce`             | probabilities, any | same shape, float in [0, 1] | -(y log x + (1 - y) log(1 - x)), logs >= -100 |
| `l1`              | any                | same shape, float           | abs(x - y)                           |
| `smooth_l1`       | any                | same shape, float           | 0.5 d^2 / beta if abs(d) < beta, else abs(d) - 0.5 beta |
| `huber`           | any                | same shape, float           | 0.5 d^2 if abs(d) <= delta, else delta (abs(d) - 0.5 delta) |
| `kl_div`          | log-probs, any     | same shape, probabilities (log-probs with log_target) | y (log y - x), 0 where y = 0 |

The class axis is 1 (PyTorch's and ONNX's convention). For the class-id losses, `t` is the
one-hot of the label (an `eq` compare of the labels with an iota, cast to float), blended
with the uniform distribution by `label_smoothing`; a sample whose label is `ignore_index`
counts zero and is left out of the mean. `reduction` is `mean` (the default), `sum` or
`none` (the per-sample losses); `kl_div` also takes `batchmean` (the sum over the batch
size). `weight` (class-id losses) weighs each sample by its label's weight and the mean
divides by the sum of those weights. These are PyTorch's `cross_entropy`, `nll_loss`,
`mse_loss`, `binary_cross_entropy_with_logits`, `binary_cross_entropy`, `l1_loss`,
`smooth_l1_loss`, `huber_loss` and `kl_div`, and ONNX's SoftmaxCrossEntropyLoss and
NegativeLogLikelihoodLoss. smooth L1 and Huber are written with `min` (m = min(abs(d),
beta): 0.5 m^2 / beta + abs(d) - m), which needs no select.

`GraphLoss` is a user's loss: a graph function of the model's results and its own target
arguments, given as a Python builder callable or as the @main of a module (a `.dlpc` loss
read by `dlpc.train.graph_loss`), inlined into the step and differentiated by
`graph-autodiff` like the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder

KINDS = (
    "cross_entropy",
    "nll",
    "mse",
    "bce_with_logits",
    "bce",
    "l1",
    "smooth_l1",
    "huber",
    "kl_div",
)
CLASS_ID_KINDS = ("cross_entropy", "nll")
BINARY_KINDS = ("bce_with_logits", "bce")
REDUCTIONS = ("mean", "sum", "none", "batchmean")


@dataclass(frozen=True)
class Loss:
    """A loss function and its options (see the module docstring)."""

    kind: str = "cross_entropy"
    reduction: str = "mean"
    ignore_index: int | None = None
    label_smoothing: float = 0.0
    weight: tuple[float, ...] | None = None  # per class (class-id losses)
    beta: float = 1.0  # smooth_l1
    delta: float = 1.0  # huber
    log_target: bool = False  # kl_div

    def __post_init__(self) -> None:
        if self.weight is not None:
            object.__setattr__(self, "weight", tuple(float(w) for w in self.weight))
            if self.kind not in CLASS_ID_KINDS:
                raise DlpcError(f"error: class weights apply to class-id losses, not {self.kind}")
            if self.label_smoothing:
                raise DlpcError("error: class weights with label smoothing are not supported")
        if self.reduction == "batchmean" and self.kind != "kl_div":
            raise DlpcError(f"error: reduction 'batchmean' applies to kl_div, not {self.kind}")
        if not self.beta > 0 or not self.delta > 0:
            raise DlpcError("error: smooth_l1 beta and huber delta must be > 0")
        if self.kind not in KINDS:
            raise DlpcError(f"error: unknown loss '{self.kind}' (expected {', '.join(KINDS)})")
        if self.reduction not in REDUCTIONS:
            raise DlpcError(
                f"error: unknown reduction '{self.reduction}' (expected {', '.join(REDUCTIONS)})"
            )
        if not 0.0 <= self.label_smoothing <= 1.0:
            raise DlpcError(f"error: label smoothing {self.label_smoothing} is not in [0, 1]")
        if self.label_smoothing and self.kind != "cross_entropy":
            raise DlpcError(f"error: label smoothing applies to cross_entropy, not {self.kind}")
        if self.ignore_index is not None and self.kind not in CLASS_ID_KINDS:
            raise DlpcError(f"error: ignore_index applies to class-id losses, not {self.kind}")

    @property
    def classifies(self) -> bool:
        """Whether the targets are class ids (and accuracy is defined)."""
        return self.kind in CLASS_ID_KINDS

    @property
    def metric(self) -> str:
        """The evaluation metric that fits: accuracy (class ids; 0/1 targets of a binary
        loss, thresholded), else the mean squared error."""
        return "accuracy" if self.kind in CLASS_ID_KINDS + BINARY_KINDS else "mse"


@dataclass(frozen=True)
class GraphLoss:
    """A user's loss as a graph function: its arguments are the model's first
    `predictions` results (all of them by default), then its targets; it returns the
    rank-0 loss. Either `build(b, predictions, targets) -> value` with the targets'
    `(shape, numpy dtype)` in `targets`, or `module`, whose @main is inlined (its args:
    the predictions, then the targets; no graph.params)."""

    build: Callable[[Builder, list[SSAValue], list[SSAValue]], SSAValue] | None = None
    targets: Sequence[tuple[Sequence[int], str]] = ()
    module: ModuleOp | None = field(default=None, hash=False, compare=False)
    predictions: int | None = None
    name: str = "custom"
    kind = "custom"
    reduction = "mean"
    classifies = False
    metric = "loss"

    def __post_init__(self) -> None:
        if (self.build is None) == (self.module is None):
            raise DlpcError("error: a graph loss needs a builder callable or a module, one")

    def target_types(self, n_predictions: int) -> list[TensorType]:
        if self.module is None:
            return [
                graph.tensor_type(tuple(s), graph.NUMPY_TO_ELT[np.dtype(d).name])
                for s, d in self.targets
            ]
        args = _loss_main(self.module).args
        if len(args) <= n_predictions:
            raise DlpcError(
                f"error: loss '{self.name}' takes {len(args)} arguments; the model gives "
                f"{n_predictions} predictions and it needs at least one target"
            )
        return [a.type for a in args[n_predictions:]]  # type: ignore[misc]

    def apply(self, b: Builder, predictions: list[SSAValue], targets: list[SSAValue]) -> SSAValue:
        if self.build is not None:
            value = self.build(b, predictions, targets)
        else:
            value = _inline(b, _loss_main(self.module), [*predictions, *targets], self.name)
        if not isinstance(value, SSAValue) or graph.shape_of(value) != ():
            raise DlpcError(f"error: loss '{self.name}' must return a rank-0 value")
        return value


def _loss_main(module: ModuleOp | None) -> func.FuncOp:
    assert module is not None
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            return op
    raise DlpcError("error: the loss module has no func.func @main")


def _inline(b: Builder, f: func.FuncOp, args: list[SSAValue], name: str) -> SSAValue:
    """Clone `f`'s body at `b` with its arguments bound to `args`; its returned value."""
    block = f.body.block
    if len(block.args) != len(args):
        raise DlpcError(
            f"error: loss '{name}' takes {len(block.args)} arguments, given {len(args)}"
        )
    mapping: dict[SSAValue, SSAValue] = {}
    for formal, actual in zip(block.args, args):
        if formal.type != actual.type:
            raise DlpcError(
                f"error: loss '{name}' argument {formal.index} has type {formal.type}, "
                f"given {actual.type}"
            )
        mapping[formal] = actual
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            if len(op.operands) != 1:
                raise DlpcError(f"error: loss '{name}' must return one value")
            return mapping[op.operands[0]]
        if isinstance(op, graph.ParamOp):
            raise DlpcError(
                f"error: loss '{name}' has a graph.param ('{op.pname}'); losses have none"
            )
        clone = op.clone(value_mapper=mapping)
        Rewriter.insert_op(clone, b.point)
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    raise DlpcError(f"error: loss '{name}' does not return")


def as_loss(loss: str | Loss | GraphLoss) -> Loss | GraphLoss:
    return loss if isinstance(loss, Loss | GraphLoss) else Loss(str(loss))


def target_type(loss: Loss, prediction: TensorType) -> TensorType:
    """The type of the targets `loss` expects next to a prediction of type `prediction`."""
    shape = prediction.get_shape()
    if not loss.classifies:
        return prediction
    if len(shape) < 2:
        raise DlpcError(
            f"error: {loss.kind} needs a prediction [N, C, ...], got {graph.fmt_shape(shape)}"
        )
    return graph.tensor_type((shape[0], *shape[2:]), i64)


def _check(loss: Loss, prediction: SSAValue, target: SSAValue) -> None:
    want = target_type(loss, prediction.type)  # type: ignore[arg-type]
    if graph.shape_of(target) != want.get_shape():
        raise DlpcError(
            f"error: {loss.kind} targets have shape {graph.fmt_shape(graph.shape_of(target))}, "
            f"expected {graph.fmt_shape(want.get_shape())} for predictions of shape "
            f"{graph.fmt_shape(graph.shape_of(prediction))}"
        )
    if not graph.is_float_type(graph.element_type_of(prediction)):
        raise DlpcError(f"error: {loss.kind} needs float predictions")


def _class_one_hot(b: Builder, target: SSAValue, classes: int, dtype) -> SSAValue:
    """int targets [N, d...] -> 0/1 of [N, C, d...] (the class axis is 1)."""
    shape = graph.shape_of(target)
    column = b.reshape(target, (shape[0], 1, *shape[1:]))
    iota = b.reshape(
        b.const(list(range(classes)), graph.element_type_of(target)),
        (1, classes, *([1] * (len(shape) - 1))),
    )
    return b.cast(b.compare(column, iota, "eq"), dtype)


def _valid(b: Builder, loss: Loss, target: SSAValue, dtype) -> SSAValue | None:
    """1 for samples whose label is not `ignore_index`, else 0 (None: all count)."""
    if loss.ignore_index is None:
        return None
    ignore = b.const(loss.ignore_index, graph.element_type_of(target))
    return b.cast(b.compare(target, ignore, "ne"), dtype)


def build_loss(b: Builder, loss: Loss, prediction: SSAValue, target: SSAValue) -> SSAValue:
    """The loss of `prediction` against `target` (rank 0 unless reduction is 'none')."""
    _check(loss, prediction, target)
    dtype = graph.element_type_of(prediction)
    valid: SSAValue | None = None
    if loss.classifies:
        classes = graph.shape_of(prediction)[1]
        if loss.weight is not None and len(loss.weight) != classes:
            raise DlpcError(f"error: {len(loss.weight)} class weights for {classes} classes")
        logp = b.log_softmax(prediction, axis=1) if loss.kind == "cross_entropy" else prediction
        weight = _class_one_hot(b, target, classes, dtype)
        if loss.label_smoothing:
            eps = loss.label_smoothing
            weight = b.add(b.mul(weight, 1.0 - eps), eps / classes)
        if loss.weight is not None:  # each sample weighs its label's weight
            rank = len(graph.shape_of(prediction))
            w = b.reshape(b.const(np.array(loss.weight), dtype), (1, classes, *[1] * (rank - 2)))
            weight = b.mul(weight, w)
            valid = b.sum(weight, axes=[1])  # w[label]: the mean divides by their sum
        each = b.neg(b.sum(b.mul(logp, weight), axes=[1]))  # [N, d...]
        counted = _valid(b, loss, target, dtype)
        if counted is not None:
            each = b.mul(each, counted)
            valid = counted if valid is None else b.mul(valid, counted)
    else:
        each = _pointwise(b, loss, prediction, target)
    if loss.reduction == "none":
        return each
    total = b.sum(each)
    if loss.reduction == "sum":
        return total
    if loss.reduction == "batchmean":
        return b.div(total, float(graph.shape_of(prediction)[0]))
    if valid is not None:  # the mean over the samples that count
        return b.div(total, b.sum(valid))
    return b.div(total, float(max(1, _count(each))))


def _pointwise(b: Builder, loss: Loss, x: SSAValue, y: SSAValue) -> SSAValue:
    """The per-element loss of the losses that compare values."""
    if loss.kind == "bce_with_logits":  # the form that neither overflows nor loses precision
        softplus = b.log(b.add(b.exp(b.neg(b.abs(x))), 1.0))
        return b.add(b.sub(b.relu(x), b.mul(x, y)), softplus)
    if loss.kind == "bce":  # torch clamps each log at -100
        log_x = b.maximum(b.log(x), -100.0)
        log_1mx = b.maximum(b.log(b.sub(1.0, x)), -100.0)
        return b.neg(b.add(b.mul(y, log_x), b.mul(b.sub(1.0, y), log_1mx)))
    if loss.kind == "kl_div":
        if loss.log_target:
            return b.mul(b.exp(y), b.sub(y, x))
        # y log y is 0 where y is 0 (torch's xlogy): log of max(y, tiny) times y
        return b.mul(y, b.sub(b.log(b.maximum(y, 1e-30)), x))
    d = b.sub(x, y)
    if loss.kind == "mse":
        return b.mul(d, d)
    a = b.abs(d)
    if loss.kind == "l1":
        return a
    limit = loss.beta if loss.kind == "smooth_l1" else loss.delta
    m = b.minimum(a, limit)
    quadratic = b.mul(b.mul(m, m), 0.5 / limit if loss.kind == "smooth_l1" else 0.5)
    linear = b.sub(a, m) if loss.kind == "smooth_l1" else b.mul(b.sub(a, m), limit)
    return b.add(quadratic, linear)


def _count(value: SSAValue) -> int:
    n = 1
    for d in graph.shape_of(value):
        n *= d
    return n


def build_correct(b: Builder, loss: Loss, prediction: SSAValue, target: SSAValue) -> SSAValue:
    """How many samples the prediction classifies right (rank 0, float): the label's
    score equals the row's maximum (a tie counts as right; no argmax is needed). Binary
    losses: the outputs thresholded (logit 0, probability 0.5) that agree with the 0/1
    targets, over the elements of a sample (an [N, k] output's sample counts 1/k each)."""
    dtype = graph.element_type_of(prediction)
    if loss.kind in BINARY_KINDS:
        threshold = 0.0 if loss.kind == "bce_with_logits" else 0.5
        said = b.compare(prediction, threshold, "gt")
        truth = b.compare(target, 0.5, "gt")
        agree = b.cast(b.compare(b.cast(said, dtype), b.cast(truth, dtype), "eq"), dtype)
        per_sample = _count(prediction) // max(1, graph.shape_of(prediction)[0])
        return b.div(b.sum(agree), float(per_sample))
    classes = graph.shape_of(prediction)[1]
    is_max = b.compare(prediction, b.max(prediction, axes=[1], keepdims=True), "eq")
    hit = b.sum(b.mul(b.cast(is_max, dtype), _class_one_hot(b, target, classes, dtype)), [1])
    valid = _valid(b, loss, target, dtype)
    if valid is not None:
        hit = b.mul(hit, valid)
    return b.sum(b.minimum(hit, 1.0))


def numpy_loss(loss: Loss, x: np.ndarray, y: np.ndarray) -> float:
    """The loss of predictions `x` against targets `y` in float64 numpy (the validation
    loss): the same formulas as `build_loss`."""
    x = np.asarray(x, np.float64)
    valid = None
    if loss.classifies:
        classes = x.shape[1]
        y = np.asarray(y).astype(np.int64)
        if loss.kind == "cross_entropy":
            shifted = x - x.max(axis=1, keepdims=True)
            logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        else:
            logp = x
        shape = (1, classes, *[1] * (x.ndim - 2))
        weight = (y[:, None] == np.arange(classes).reshape(shape)).astype(np.float64)
        if loss.label_smoothing:
            eps = loss.label_smoothing
            weight = weight * (1 - eps) + eps / classes
        if loss.weight is not None:
            weight = weight * np.array(loss.weight).reshape(shape)
            valid = weight.sum(axis=1)
        each = -(logp * weight).sum(axis=1)
        if loss.ignore_index is not None:
            counted = (y != loss.ignore_index).astype(np.float64)
            each = each * counted
            valid = counted if valid is None else valid * counted
    else:
        y = np.asarray(y, np.float64)
        each = _numpy_pointwise(loss, x, y)
    if loss.reduction == "none":
        return float(each.mean())
    total = float(each.sum())
    if loss.reduction == "sum":
        return total
    if loss.reduction == "batchmean":
        return total / x.shape[0]
    if valid is not None:
        return total / float(valid.sum())
    return total / max(1, each.size)


def _numpy_pointwise(loss: Loss, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if loss.kind == "bce_with_logits":
        return np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    if loss.kind == "bce":
        with np.errstate(divide="ignore"):
            lx, l1x = np.maximum(np.log(x), -100), np.maximum(np.log(1 - x), -100)
        return -(y * lx + (1 - y) * l1x)
    if loss.kind == "kl_div":
        if loss.log_target:
            return np.exp(y) * (y - x)
        return y * (np.log(np.maximum(y, 1e-30)) - x)
    d = x - y
    if loss.kind == "mse":
        return d * d
    a = np.abs(d)
    if loss.kind == "l1":
        return a
    limit = loss.beta if loss.kind == "smooth_l1" else loss.delta
    m = np.minimum(a, limit)
    if loss.kind == "smooth_l1":
        return 0.5 * m * m / limit + (a - m)
    return 0.5 * m * m + limit * (a - m)


def numpy_metric(loss: Loss, x: np.ndarray, y: np.ndarray) -> float:
    """The metric that fits `loss` (`Loss.metric`): accuracy of the arg-max class; of
    the thresholded output for binary losses (logit 0, probability 0.5); else the MSE."""
    if loss.classifies:
        y = np.asarray(y).astype(np.int64)
        hit = x.argmax(axis=1) == y
        if loss.ignore_index is not None:
            keep = y != loss.ignore_index
            return float(hit[keep].mean()) if keep.any() else float("nan")
        return float(hit.mean())
    if loss.kind in BINARY_KINDS:
        threshold = 0.0 if loss.kind == "bce_with_logits" else 0.5
        return float(((x > threshold) == (np.asarray(y) > 0.5)).mean())
    return float(np.mean((np.asarray(x, np.float64) - np.asarray(y, np.float64)) ** 2))
