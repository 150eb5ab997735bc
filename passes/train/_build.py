"""A small graph-IR builder for the training rewrites (losses, optimizers, the step):
ops are inserted at one point of a block, scalars become rank-0 constants.

    b = Builder.before(return_op)
    loss = b.mean(b.mul(d, d))

The frontends' `GraphBuilder` is a layer above the passes, so the passes build with this.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dlpc.dialects import graph

Value = SSAValue | float | int


class Builder:
    """Insert graph ops at `point`; every method returns the new op's result."""

    def __init__(self, point: InsertPoint):
        self.point = point

    @staticmethod
    def before(op: Operation) -> Builder:
        return Builder(InsertPoint.before(op))

    @staticmethod
    def at_end(block: Block) -> Builder:
        return Builder(InsertPoint.at_end(block))

    def insert(self, op: Operation) -> SSAValue:
        Rewriter.insert_op(op, self.point)
        return op.results[0]

    def op(self, cls: type[graph.GraphOp], *operands: Value, **attrs) -> SSAValue:
        dtype: Attribute = next(
            (graph.element_type_of(v) for v in operands if isinstance(v, SSAValue)),
            graph.f32,
        )
        values = [v if isinstance(v, SSAValue) else self.const(v, dtype) for v in operands]
        return self.insert(cls.make(*values, **attrs))

    def const(self, value, element_type: Attribute = graph.f32) -> SSAValue:
        """A constant tensor (a Python number: rank 0) of `element_type`."""
        array = np.asarray(value, dtype=graph.numpy_dtype(element_type))
        if array.dtype in (np.int32, np.int64) and array.size > 1:
            return self.insert(_int_constant(array, element_type))
        return self.insert(graph.ConstantOp.from_numpy(array))

    def param(
        self, name: str, shape: Sequence[int], element_type: Attribute = graph.f32
    ) -> SSAValue:
        value = self.insert(graph.ParamOp(name, graph.tensor_type(shape, element_type)))
        value.name_hint = graph.ssa_name_hint(name)
        return value

    # ---- the ops the rewrites use, by their natural names -------------------------
    def add(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.AddOp, a, b)

    def sub(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.SubOp, a, b)

    def mul(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.MulOp, a, b)

    def div(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.DivOp, a, b)

    def maximum(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.MaxOp, a, b)

    def minimum(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.MinOp, a, b)

    def pow(self, a: Value, b: Value) -> SSAValue:
        return self.op(graph.PowOp, a, b)

    def neg(self, a: SSAValue) -> SSAValue:
        return self.op(graph.NegOp, a)

    def exp(self, a: SSAValue) -> SSAValue:
        return self.op(graph.ExpOp, a)

    def log(self, a: SSAValue) -> SSAValue:
        return self.op(graph.LogOp, a)

    def abs(self, a: SSAValue) -> SSAValue:
        return self.op(graph.AbsOp, a)

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.op(graph.SqrtOp, a)

    def relu(self, a: SSAValue) -> SSAValue:
        return self.op(graph.ReluOp, a)

    def cast(self, a: SSAValue, to) -> SSAValue:
        return self.insert(graph.CastOp.make(a, to=to))

    def compare(self, a: Value, b: Value, predicate: str) -> SSAValue:
        return self.op(graph.CompareOp, a, b, predicate=predicate)

    def where(self, cond: SSAValue, a: Value, b: Value) -> SSAValue:
        dtype = next(graph.element_type_of(v) for v in (a, b) if isinstance(v, SSAValue))
        a, b = (v if isinstance(v, SSAValue) else self.const(v, dtype) for v in (a, b))
        return self.insert(graph.WhereOp.make(cond, a, b))

    def sum(self, a: SSAValue, axes: Sequence[int] = (), keepdims: bool = False) -> SSAValue:
        return self.op(graph.ReduceSumOp, a, axes=list(axes), keepdims=keepdims)

    def mean(self, a: SSAValue, axes: Sequence[int] = (), keepdims: bool = False) -> SSAValue:
        return self.op(graph.ReduceMeanOp, a, axes=list(axes), keepdims=keepdims)

    def max(self, a: SSAValue, axes: Sequence[int] = (), keepdims: bool = False) -> SSAValue:
        return self.op(graph.ReduceMaxOp, a, axes=list(axes), keepdims=keepdims)

    def reshape(self, a: SSAValue, shape: Sequence[int]) -> SSAValue:
        return self.op(graph.ReshapeOp, a, shape=list(shape))

    def log_softmax(self, a: SSAValue, axis: int = -1) -> SSAValue:
        return self.op(graph.LogSoftmaxOp, a, axis=axis)


def _int_constant(array: np.ndarray, element_type: Attribute) -> graph.ConstantOp:
    """`ConstantOp.from_numpy(array)` for an int32/int64 array (im2col's index tables:
    tens of thousands of entries), packed in one call: the same attribute, without
    xdsl's per-element normalisation, the identity on values of the signed range (all of
    an int32/int64 array's)."""
    assert isinstance(element_type, IntegerType)
    graph.check_size(array.shape, element_type)
    kind = TensorType(element_type, array.shape)
    packed = element_type.pack(array.reshape(-1).tolist())
    return graph.ConstantOp(DenseIntOrFPElementsAttr(kind, BytesAttr(packed)))
