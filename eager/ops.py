"""`dlpc.ops`: every graph op as an eager function, plus composite functions.

    dlpc.ops.conv2d(x, w, stride=2)     # any op of frontends/builder.OPS, by its name
    dlpc.ops.linear(x, w, bias=b)
    dlpc.ops.cross_entropy(logits, labels)

Arguments are as the Python builder takes them (operands positionally or by name,
attributes as keywords with the builder's spellings: `stride`, `padding`, `axis`, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlpc.eager.tensor import Tensor, call, from_numpy
from dlpc.frontends.builder import OPS, SUGAR

_FUNCTIONS: dict = {}


def op(name: str):
    """The eager function of graph op `name`."""
    found = _FUNCTIONS.get(name)
    if found is not None:
        return found
    if name not in OPS and name not in SUGAR:
        raise AttributeError(f"dlpc.ops has no op '{name}'")

    variadic = name in OPS and OPS[name].OPERANDS[0].startswith("*")

    def fn(*args, **kwargs):
        if variadic and len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])  # concat([a, b]): the builder's (and torch.cat's) form
        return call(name, args, kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"graph.{name}, run eagerly (its semantics: reference/graph.py)."
    _FUNCTIONS[name] = fn
    return fn


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return op(name)


def one_hot(labels: Tensor, classes: int, dtype: Any = np.float32) -> Tensor:
    """labels [N] (integers) -> [N, classes] of 0/1, as graph-autodiff's losses build it:
    compare with an iota, then cast."""
    iota = from_numpy(np.arange(classes, dtype=labels.dtype), labels.device)
    column = labels.reshape(*labels.shape, 1)
    hot: Any = call("compare", (column, iota), {"predicate": "eq"})
    return hot.astype(dtype)


def cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """The mean over the batch of -log_softmax(logits)[label] (torch's cross_entropy;
    dlpc-train's `cross_entropy` loss)."""
    picked: Any = logits.log_softmax(1) * one_hot(labels, logits.shape[1], logits.dtype)
    return -(picked.sum(1).mean())


def mse_loss(prediction: Tensor, target: Tensor) -> Tensor:
    d: Any = prediction - target
    return (d * d).mean()
