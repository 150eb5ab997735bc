"""Gradient rules of graph.if, part of graph-autodiff (autodiff.py calls `vjp` for a
control op, whose several results each bring their adjoint).

The adjoint of an if is an if of the adjoints: each branch's vector-Jacobian product is
built by differentiating the branch as a function of (its operands, the cotangents of
its float results) whose scalar loss is sum_k sum(y_k * dy_k), with graph-autodiff
itself (`wrt-inputs`): so the branch's ops, nested control flow included, use the same
rules as @main's. The adjoint branch recomputes its forward values from the operands
(nothing of the forward branch is kept).

    %r = graph.if %c, %x { f } else { g }
        ->  %dx = graph.if %c, %x, %dr { vjp(f) } else { vjp(g) }

graph.loop has no rule yet: graph-autodiff names it (a loop's reverse replays its
iterations backwards from a stack of its carried values: docs/control-flow.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph
from dlpc.passes.train._build import Builder
from dlpc.passes.train._grad import is_float, zeros


def _branch_vjp(block: Block, cot_types: list, floats: list[int]) -> Region:
    """The region (operands..., cotangents...) -> grads of the float operands `floats`."""
    from dlpc.passes.train.autodiff import differentiate

    n = len(block.args)
    body = Block(arg_types=[*(a.type for a in block.args), *cot_types])
    values: dict[SSAValue, SSAValue] = dict(zip(block.args, body.args[:n]))
    ys: list[SSAValue] = []
    for inner in block.ops:
        if isinstance(inner, graph.YieldOp):
            ys = [values[v] for v in inner.values]
            break
        clone = inner.clone(value_mapper=values)
        body.add_op(clone)
        values.update(zip(inner.results, clone.results))
    ret = func.ReturnOp()
    body.add_op(ret)
    b = Builder.before(ret)
    cots = iter(body.args[n:])
    terms = [b.sum(b.mul(y, next(cots))) for y in ys if is_float(y)]
    loss = terms[0]
    for t in terms[1:]:
        loss = b.add(loss, t)
    ret.operands = [loss]
    ftype = FunctionType.from_lists([a.type for a in body.args], [loss.type])
    module = ModuleOp([func.FuncOp("main", ftype, Region(body))])
    differentiate(module, wrt_inputs=True)
    # @main returns the loss, then a gradient per float argument in order
    fn = next(iter(module.ops))
    assert isinstance(fn, func.FuncOp)
    block2 = fn.body.block
    end = block2.last_op
    assert isinstance(end, func.ReturnOp)
    float_args = [k for k, a in enumerate(block2.args) if is_float(a)]
    grads = dict(zip(float_args, list(end.operands)[1:]))
    yielded = [grads[k] for k in floats]
    end.detach()
    end.erase()
    block2.add_op(graph.YieldOp.create(operands=yielded))
    fn.body.detach_block(block2)
    return Region(block2)


def vjp(
    b: Builder, op: graph.ControlOp, gs: Sequence[SSAValue | None], want: Sequence[bool]
) -> list[SSAValue | None]:
    """The adjoints of `op`'s operands from those of its results (None: no adjoint)."""
    if not isinstance(op, graph.IfOp):
        raise DiagnosticException(
            f"graph-autodiff has no gradient rule for {op.name} (differentiate through a "
            f"loop: not yet supported)"
        )
    inputs = list(op.inputs)
    floats = [k for k, v in enumerate(inputs) if want[1 + k] and is_float(v)]
    out_floats = [r for r in op.results if is_float(r)]
    if not floats or not out_floats:
        return [None] * len(op.operands)
    cots = [
        g if g is not None else zeros(b, graph.shape_of(r), r)
        for r, g in zip(op.results, gs)
        if is_float(r)
    ]
    types = [c.type for c in cots]
    then_r = _branch_vjp(op.then_region.block, types, floats)
    else_r = _branch_vjp(op.else_region.block, types, floats)
    adj = graph.IfOp(op.cond, [*inputs, *cots], [inputs[k].type for k in floats], then_r, else_r)
    b.insert(adj)
    out: list[SSAValue | None] = [None] * len(op.operands)
    for k, r in zip(floats, adj.results):
        out[1 + k] = r
    return out
