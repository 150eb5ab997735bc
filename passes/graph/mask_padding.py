"""Mask the padding of bucketed dims, so a padded call computes what the unpadded one does.

Input: graph, func, builtin, with symbolic dims (`dialects.symdims`).
Output: the same graph with one more `@main` argument per masked dim `S`: `mask_S`, an
f32 vector of S entries, 1 at the call's valid positions and 0 at the padding (the caller
pads each input with zeros along every axis whose dim is `S`, `runtime/dynamic.py`).
Requires: symbolic dims on `@main`'s arguments (the dims to mask are named by the option).
Guarantees: every op that mixes positions along an axis of dim `S` reads the padding as
absent:
- softmax / log_softmax along S: a bias of -80 at the padding before it (see BIG);
- reduce_sum / reduce_mean / reduce_max / reduce_min / reduce_prod over S: the padding
  replaced by the reduction's identity (a mean divides by the valid count);
- matmul / linear contracting over S: the lhs multiplied by the mask along that axis;
positions along S otherwise stay independent (elementwise ops, reshapes keeping S whole,
transposes), so the padded rows are garbage the caller slices off. An op that mixes
positions along S in another way (a window or normalisation over S, a reduction over an
expression of S such as 16*S) is an error naming the op:

    %s = graph.softmax %x : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?x?xf32, ["b", "seq"]>

becomes, with dims="seq", (mask_seq - 1) * 80 added along the last axis before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    f32,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.dialects import symdims
from dlpc.passes.graph.infer_shapes import infer_module

# the padding's bias: e^-80 (1.8e-35) is below f32's resolution next to any valid term
# unless a padded score exceeds the valid maximum by about 60. Far larger biases
# (-1e9, or -inf through a where) give exact zeros but send exp down its underflow path:
# 2.4x the whole call at seq 100 in bucket 128 (bench/dynamic.py); -80 costs 1.2x.
BIG = 80.0
FAR = 1e30  # a max / min over the padding: no exp, so the bias may be far beyond any value


class _Masker:
    def __init__(self, block: Block, masks: Mapping[str, SSAValue]):
        self.block = block
        self.masks = masks
        self.cache: dict[tuple[str, str, int, int], SSAValue] = {}

    def insert(self, before: Operation, op: Operation) -> SSAValue:
        self.block.insert_op_before(op, before)
        return op.results[0]

    def const(self, before: Operation, value: float) -> SSAValue:
        import numpy as np

        return self.insert(before, g.ConstantOp.from_numpy(np.asarray(value, np.float32)))

    def along(self, before: Operation, name: str, kind: str, rank: int, axis: int) -> SSAValue:
        """The mask of `name` as a tensor of `rank` dims, S at `axis` and 1 elsewhere:
        kind "mul" (1 valid, 0 padding), "bias" (0 valid, -BIG padding) or "far" (0
        valid, -FAR padding)."""
        key = (name, kind, rank, axis)
        if key in self.cache:
            return self.cache[key]
        first = self.block.first_op
        assert first is not None
        m = self.masks[name]
        if kind in ("bias", "far"):
            m = self.insert(first, g.SubOp.make(m, self.const(first, 1.0)))
            scale = BIG if kind == "bias" else FAR
            m = self.insert(first, g.MulOp.make(m, self.const(first, scale)))
        shape = [1] * rank
        shape[axis] = g.shape_of(self.masks[name])[0]
        out = self.insert(first, g.ReshapeOp.make(m, shape=shape))
        self.cache[key] = out
        return out


def _axis_symbol(op: Operation, d: symdims.Dim, names: Sequence[str]) -> str | None:
    """The masked symbol a dim is, None when it involves none; an expression of one is an
    error naming the op."""
    if not isinstance(d, symdims.SymDim) or not d.symbols() & set(names):
        return None
    name = symdims.name_of(d)
    if name is None:
        raise VerifyException(
            f"graph-mask-padding: {op.name} mixes positions along '{d}', an expression of a "
            f"padded dim: it cannot be masked"
        )
    return name


def _mask_op(m: _Masker, op: Operation, names: Sequence[str]) -> None:
    if isinstance(op, g.SoftmaxOp | g.LogSoftmaxOp):
        x = op.operands[0]
        shape = g.shape_of(x)
        axis = g.normalize_axis(op.axis, len(shape))
        name = _axis_symbol(op, shape[axis], names)
        if name is not None:
            bias = m.along(op, name, "bias", len(shape), axis)
            op.operands[0] = m.insert(op, g.AddOp.make(x, bias))
    elif isinstance(op, g.ReduceOp):
        x = op.operands[0]
        shape = g.shape_of(x)
        for axis in op.reduced_axes():
            name = _axis_symbol(op, shape[axis], names)
            if name is None:
                continue
            mul = m.along(op, name, "mul", len(shape), axis)
            if isinstance(op, g.ReduceSumOp | g.ReduceMeanOp):
                x = m.insert(op, g.MulOp.make(x, mul))
            elif isinstance(op, g.ReduceProdOp):  # x * m + (1 - m)
                one = m.const(op, 1.0)
                x = m.insert(op, g.MulOp.make(x, mul))
                x = m.insert(op, g.AddOp.make(x, m.insert(op, g.SubOp.make(one, mul))))
            else:  # max: x + (m - 1) * FAR; min: x - (m - 1) * FAR
                bias = m.along(op, name, "far", len(shape), axis)
                make = g.AddOp if isinstance(op, g.ReduceMaxOp) else g.SubOp
                x = m.insert(op, make.make(x, bias))
            if isinstance(op, g.ReduceMeanOp):  # mean over S = sum * S_padded / S_valid
                count = m.insert(op, g.ReduceSumOp.make(m.masks[name]))
                scale = m.insert(op, g.DivOp.make(m.const(op, 1.0), count))
                padded = m.insert(
                    op,
                    g.ReduceSumOp.make(
                        m.insert(
                            op,
                            g.AddOp.make(
                                m.insert(op, g.MulOp.make(m.masks[name], m.const(op, 0.0))),
                                m.const(op, 1.0),
                            ),
                        )
                    ),
                )
                x = m.insert(op, g.MulOp.make(x, m.insert(op, g.MulOp.make(scale, padded))))
        op.operands[0] = x
    elif isinstance(op, g.MatMulOp | g.LinearOp):
        x = op.operands[0]
        shape = g.shape_of(x)
        if len(shape) < 1:
            return
        axis = len(shape) - 2 if isinstance(op, g.MatMulOp) and op.transpose_a else len(shape) - 1
        name = _axis_symbol(op, shape[axis], names)
        if name is not None:
            mul = m.along(op, name, "mul", len(shape), axis)
            op.operands[0] = m.insert(op, g.MulOp.make(x, mul))
    elif isinstance(op, g.LayerNormOp | g.WindowOp | g.GlobalAvgPoolOp | g.BatchNormOp):
        shape = g.shape_of(op.operands[0])
        start = g.normalize_axis(op.axis, len(shape)) if isinstance(op, g.LayerNormOp) else 2
        if isinstance(op, g.BatchNormOp):
            return  # (inference batch norm: per element, with running statistics)
        for d in shape[start:]:
            if _axis_symbol(op, d, names) is not None:
                raise VerifyException(
                    f"graph-mask-padding: {op.name} mixes positions along the padded dim "
                    f"'{d}': it cannot be masked"
                )


def mask_padding(module: ModuleOp, names: Sequence[str]) -> list[str]:
    """Mask `names` in @main in place; returns the names that got a mask argument (in the
    order of the new arguments; a name no op needs masked gets none)."""
    main = next(
        (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == "main"),
        None,
    )
    if main is None or not main.body.blocks:
        raise VerifyException("graph-mask-padding: the module has no @main")
    block = main.body.blocks.first
    assert block is not None
    known = set().union(*(symdims.symbols(g.shape_of(a)) for a in block.args))
    for name in names:
        if name not in known:
            raise VerifyException(
                f"graph-mask-padding: '{name}' is not a symbolic dim of @main's arguments"
            )
    masks: dict[str, BlockArgument] = {}
    for name in names:
        dim = cast(int, symdims.sym(name))  # (a SymDim acts as an int in a shape)
        masks[name] = block.insert_arg(g.tensor_type((dim,), f32), len(block.args))
    masker = _Masker(block, masks)
    for op in list(block.ops):
        _mask_op(masker, op, names)
    used = [n for n in names if masks[n].uses]
    for name in names:
        if not masks[name].uses:
            block.erase_arg(masks[name])
    if used:
        old = main.arg_attrs.data if main.arg_attrs else ()
        old = tuple(old) + (DictionaryAttr({}),) * (len(block.args) - len(used) - len(old))
        attrs = list(old) + [DictionaryAttr({"dlpc.name": StringAttr(f"mask_{n}")}) for n in used]
        main.arg_attrs = ArrayAttr(attrs)
    infer_module(module)
    main.function_type = FunctionType.from_lists(
        list(block.arg_types), list(main.function_type.outputs.data)
    )
    return used


@dataclass(frozen=True)
class GraphMaskPadding(ModulePass):
    """graph-mask-padding: mask the zero padding of bucketed dims (dims="seq")."""

    name = "graph-mask-padding"

    dims: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mask_padding(op, [d.strip() for d in self.dims.split(",") if d.strip()])
