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

The class axis is 1 (PyTorch's and ONNX's convention). For the class-id losses, `t` is the
one-hot of the label (an `eq` compare of the labels with an iota, cast to float), blended
with the uniform distribution by `label_smoothing`; a sample whose label is `ignore_index`
counts zero and is left out of the mean. `reduction` is `mean` (the default), `sum` or
`none` (the per-sample losses). These are PyTorch's `cross_entropy`, `nll_loss`,
`mse_loss` and `binary_cross_entropy_with_logits`, and ONNX's SoftmaxCrossEntropyLoss and
NegativeLogLikelihoodLoss (unweighted).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.passes.train._build import Builder

KINDS = ("cross_entropy", "nll", "mse", "bce_with_logits")
CLASS_ID_KINDS = ("cross_entropy", "nll")
REDUCTIONS = ("mean", "sum", "none")


@dataclass(frozen=True)
class Loss:
    """A loss function and its options (see the module docstring)."""

    kind: str = "cross_entropy"
    reduction: str = "mean"
    ignore_index: int | None = None
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
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


def as_loss(loss: str | Loss) -> Loss:
    return loss if isinstance(loss, Loss) else Loss(str(loss))


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
    valid = None
    if loss.classifies:
        classes = graph.shape_of(prediction)[1]
        logp = b.log_softmax(prediction, axis=1) if loss.kind == "cross_entropy" else prediction
        weight = _class_one_hot(b, target, classes, dtype)
        if loss.label_smoothing:
            eps = loss.label_smoothing
            weight = b.add(b.mul(weight, 1.0 - eps), eps / classes)
        each = b.neg(b.sum(b.mul(logp, weight), axes=[1]))  # [N, d...]
        valid = _valid(b, loss, target, dtype)
        if valid is not None:
            each = b.mul(each, valid)
    elif loss.kind == "mse":
        diff = b.sub(prediction, target)
        each = b.mul(diff, diff)
    else:  # bce_with_logits, in the form that neither overflows nor loses precision
        softplus = b.log(b.add(b.exp(b.neg(b.abs(prediction))), 1.0))
        each = b.add(b.sub(b.relu(prediction), b.mul(prediction, target)), softplus)
    if loss.reduction == "none":
        return each
    total = b.sum(each)
    if loss.reduction == "sum":
        return total
    if valid is not None:  # the mean over the samples that count
        return b.div(total, b.sum(valid))
    return b.div(total, float(max(1, _count(each))))


def _count(value: SSAValue) -> int:
    n = 1
    for d in graph.shape_of(value):
        n *= d
    return n


def build_correct(b: Builder, loss: Loss, prediction: SSAValue, target: SSAValue) -> SSAValue:
    """How many samples the prediction classifies right (rank 0, float): the label's
    score equals the row's maximum (a tie counts as right; no argmax is needed)."""
    dtype = graph.element_type_of(prediction)
    classes = graph.shape_of(prediction)[1]
    is_max = b.compare(prediction, b.max(prediction, axes=[1], keepdims=True), "eq")
    hit = b.sum(b.mul(b.cast(is_max, dtype), _class_one_hot(b, target, classes, dtype)), [1])
    valid = _valid(b, loss, target, dtype)
    if valid is not None:
        hit = b.mul(hit, valid)
    return b.sum(b.minimum(hit, 1.0))
