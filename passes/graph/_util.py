"""Helpers shared by the graph-level passes: constants, static values, numpy evaluation.

A value is *constant* when a `graph.constant` defines it, and *static* when it depends
only on `graph.constant` and `graph.param` ops (it is known once the weights are bound).
Rewrites that move work onto static values (batch-norm folding, per-channel scales,
horizontal fusion) emit ordinary graph ops on them; `graph-fold-constants` then folds the
constant ones and `fold_params` (fold_constants.py) the ones that read weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from dlpc.dialects import graph as g
from dlpc.dialects.typed import float_type


def numel(shape) -> int:
    return math.prod(shape)


def funcs(module: ModuleOp) -> Iterator[func.FuncOp]:
    for op in module.walk():
        if isinstance(op, func.FuncOp):
            yield op


def producer(value: SSAValue) -> Operation | None:
    return value.op if isinstance(value, OpResult) else None


def const_array(value: SSAValue) -> np.ndarray | None:
    """The numpy value of a `graph.constant` result, else None."""
    op = producer(value)
    return op.to_numpy() if isinstance(op, g.ConstantOp) else None


def splat_value(value: SSAValue) -> float | None:
    """The one value every element of a constant holds, else None."""
    arr = const_array(value)
    if arr is None or arr.size == 0:
        return None
    first = arr.reshape(-1)[0]
    return float(first) if np.all(arr == first) else None


def is_static(value: SSAValue, memo: dict[SSAValue, bool] | None = None) -> bool:
    """Does `value` depend only on graph.constant / graph.param (no model input)?

    Iterative (models can be deeper than Python's recursion limit); stops at the first
    non-static leaf. `memo` may be shared by queries on an unchanged block.
    """
    memo = {} if memo is None else memo
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v in seen or memo.get(v) is True:
            continue
        seen.add(v)
        op = producer(v)
        if (
            memo.get(v) is False
            or op is None
            or op.regions
            or not isinstance(op, g.GraphOp | g.ConstantOp | g.ParamOp)
        ):
            memo[value] = False
            return False
        stack.extend(op.operands)
    for v in seen:
        memo[v] = True
    return True


def constant_like(array: np.ndarray, like: SSAValue | TensorType) -> g.ConstantOp:
    """A graph.constant holding `array` converted to the element type of `like`."""
    ty = like.type if isinstance(like, SSAValue) else like
    assert isinstance(ty, TensorType)
    dtype = g.numpy_dtype(ty.get_element_type())
    array = np.asarray(array, dtype=dtype)
    if is_splat(array):  # one value: a compact `dense<v>` whatever the size
        elt = ty.get_element_type()
        g.check_size(array.shape, elt)
        first = array.reshape(-1)[0].item()
        if isinstance(elt, IntegerType):
            splat = DenseIntOrFPElementsAttr.from_list(TensorType(elt, array.shape), [int(first)])
        else:
            splat = DenseIntOrFPElementsAttr.from_list(
                TensorType(float_type(elt), array.shape), [float(first)]
            )
        return g.ConstantOp(splat)
    return g.ConstantOp.from_numpy(array)


def is_splat(array: np.ndarray) -> bool:
    flat = array.reshape(-1)
    return flat.size > 1 and bool(np.all(flat == flat[0]))


def scalar_const(x: float, like: SSAValue, shape=()) -> g.ConstantOp:
    """A constant of `like`'s element type with `shape`, every element `x`."""
    ty = like.type
    assert isinstance(ty, TensorType)
    return constant_like(np.full(shape, x), ty)


def result_dtype(value: SSAValue) -> np.dtype:
    ty = value.type
    assert isinstance(ty, TensorType)
    return np.dtype(g.numpy_dtype(ty.get_element_type()))


def evaluate(op: Operation, arrays: list[np.ndarray]) -> np.ndarray:
    """The numpy reference value of `op` applied to `arrays`."""
    from dlpc.reference.graph import evaluate_op

    return np.asarray(evaluate_op(op, arrays))


def rebuild(op: Operation, operands: list[SSAValue], **override: Attribute) -> Operation:
    """A copy of graph op `op` (all properties and attributes, `override` applied) on
    `operands`, with the result type inferred. Unlike `make`, keeps the attributes (layout)."""
    props = {**op.properties, **{k: v for k, v in override.items() if k in op.properties}}
    attrs = {**op.attributes, **{k: v for k, v in override.items() if k not in op.properties}}
    cls = type(op)
    probe = cls.create(operands=operands, result_types=[f32], properties=props, attributes=attrs)
    assert isinstance(probe, g.GraphOp), f"rebuild of {op.name}, not a graph op"
    try:
        ty = probe.infer_type()
    finally:
        probe.drop_all_references()
    return cls.create(operands=operands, result_types=[ty], properties=props, attributes=attrs)


def build(rewriter: PatternRewriter, op: Operation, *new_ops: Operation) -> SSAValue:
    """Insert `new_ops` before `op`, replace `op`'s result by the last one's."""
    rewriter.replace(op, list(new_ops), [new_ops[-1].results[0]])
    return new_ops[-1].results[0]


def replace_with_value(rewriter: PatternRewriter, op: Operation, value: SSAValue) -> None:
    """Replace `op`'s only result by an existing value (types must agree)."""
    assert op.results[0].type == value.type, (op.results[0].type, value.type)
    rewriter.replace(op, [], [value])


def insert_before(op: Operation, *new_ops: Operation) -> None:
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before(list(new_ops), op)


def users(value: SSAValue) -> set[Operation]:
    return {use.operation for use in value.uses}


def single_user(value: SSAValue) -> Operation | None:
    ops = users(value)
    return ops.pop() if len(ops) == 1 else None


def erase_dead(block: Block) -> None:
    """Erase graph ops (constants and params included) whose results are unused."""
    for op in reversed(list(block.ops)):
        if isinstance(op, g.GraphOp | g.ConstantOp | g.ParamOp) and not op.regions:
            if all(not r.uses for r in op.results):
                block.erase_op(op)


def same_type(a: SSAValue, b: SSAValue) -> bool:
    return a.type == b.type
