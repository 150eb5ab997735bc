"""Recompute every graph op's result type from its operands; update function signatures.

Input: graph, func, builtin.  Output: the same ops with inferred result types.
Requires: nothing (the operand types of `@main` are the source of truth).
Guarantees: every graph op's result type is what `infer_type` gives for its operands;
`graph.fused` region arguments take their operands' types and its results take the
yielded types; each `func.func`'s type matches its block arguments and `func.return`.
A tensor over dlpc's size limit (2^40 bytes) in a signature is an error naming the
argument or result. An op whose operands are inconsistent is an error naming the op:

    func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
      %w = graph.param "w" : tensor<8x4xf32>
      %y = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<1x1xf32>
      %r = graph.relu %y : (tensor<1x1xf32>) -> tensor<1x1xf32>
      func.return %r : tensor<1x1xf32>
    }

becomes (%y and %r get tensor<2x4xf32>, the signature follows).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g


def _describe(op: Operation) -> str:
    hint = op.results[0].name_hint if op.results else None
    return f"{op.name} (%{hint})" if hint else op.name


def _retype(op: Operation, index: int, ty) -> None:
    if op.results[index].type != ty:
        Rewriter.replace_value_with_new_type(op.results[index], ty)


def infer_block(block: Block) -> None:
    for op in list(block.ops):
        if op.regions and op.name == "graph.fused":
            inner = op.regions[0].blocks.first
            assert inner is not None
            for arg, operand in zip(list(inner.args), op.operands):
                if arg.type != operand.type:
                    Rewriter.replace_value_with_new_type(arg, operand.type)
            infer_block(inner)
            terminator = inner.last_op
            assert terminator is not None
            for i, v in enumerate(terminator.operands):
                _retype(op, i, v.type)
        elif isinstance(op, g.GraphOp):
            try:
                op.check_arity()
                ty = op.infer_type()
            except VerifyException as e:
                raise VerifyException(f"cannot infer the type of {_describe(op)}: {e}") from e
            _retype(op, 0, ty)
        else:
            for region in op.regions:
                for inner in region.blocks:
                    infer_block(inner)


def infer_module(module: ModuleOp) -> None:
    for op in list(module.ops):
        if not isinstance(op, func.FuncOp) or not op.body.blocks:
            continue
        block = op.body.blocks.first
        assert block is not None
        infer_block(block)
        ret = block.last_op
        outputs = list(ret.operand_types) if isinstance(ret, func.ReturnOp) else []
        inputs = list(block.arg_types)
        _check_sizes(op, inputs, outputs)
        op.function_type = FunctionType.from_lists(inputs, outputs)


def _check_sizes(fn: func.FuncOp, inputs: list, outputs: list) -> None:
    """A signature's tensors within dlpc's size limit (graph ops check their own: this
    catches an argument no op reads, returned as it is)."""
    for what, types in (("argument", inputs), ("result", outputs)):
        for k, ty in enumerate(types):
            if isinstance(ty, TensorType):
                message = g.size_error(ty.get_shape(), ty.get_element_type())
                if message:
                    raise VerifyException(f"@{fn.sym_name.data} {what} {k}: {message}")


@dataclass(frozen=True)
class GraphInferShapes(ModulePass):
    """graph-infer-shapes: recompute graph result types and function signatures."""

    name = "graph-infer-shapes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        infer_module(op)
