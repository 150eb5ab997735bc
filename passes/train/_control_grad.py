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

The reverse of a loop replays its iterations backwards with the values it saved, as the
textbook describes: the forward graph.loop is rebuilt to also carry its iteration count
and a stack [trip_count, ...] of every carried value, row i holding the values iteration
i started from (a one-hot where); the reverse is a graph.loop over the same bound that
reads row n - 1 - j of the stacks and applies the body's VJP (built as a branch's is) to
the carried adjoints. The stack needs a static bound: a loop without trip_count is named.

    %r = graph.loop %c, %v {trip_count = T} { body }
        ->  %r, %n, %stack = graph.loop %c, %v, 0, zeros {T} { body; stack[i] = v; n = i + 1 }
            %dv = graph.loop (%n > 0), %dr, %n, %stack {T} {
                    v = stack[n - 1 - j]; dv = vjp(body)(n - 1 - j, v, dv) }

The rule of graph.dynamic_slice (a loop body's read at its iteration, ONNX Slice at a
run-time offset) is here too: a scatter through the one-hot of the rows it read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph
from dlpc.dialects.sizes import size_error
from dlpc.passes.train._build import Builder
from dlpc.passes.train._grad import as_float, is_float, reshape, rule, shape, zeros


@rule("dynamic_slice")
def _dynamic_slice(b, op, g, want):
    # per sliced axis, the scatter of a gather at start + arange(size): with the one-hot
    # of those rows, d x [A, D, B] = onehot[N, D]^T @ g [A, N, B] (the start clamped as
    # the op clamps it)
    x, starts = op.operands
    elt = graph.element_type_of(starts)
    for k, (axis, n) in enumerate(zip(op.axes, op.sizes)):
        gs, d = shape(g), shape(x)[axis]
        s = b.op(graph.GatherOp, starts, b.const(np.asarray(k), elt), axis=0)
        s = b.where(b.compare(s, 0, "lt"), b.add(s, d), s)
        s = b.op(graph.MinOp, s, b.const(np.asarray(d - n), elt))
        s = b.op(graph.MaxOp, s, b.const(np.asarray(0), elt))
        rows = reshape(b, b.add(b.const(np.arange(n), elt), s), (n, 1))
        onehot = as_float(b, b.compare(rows, b.const(np.arange(d), elt), "eq"), g)  # [N, D]
        g3 = reshape(b, g, (math.prod(gs[:axis]), n, math.prod(gs[axis + 1 :])))
        g3 = b.op(graph.MatMulOp, onehot, g3, transpose_a=True)
        g = reshape(b, g3, (*gs[:axis], d, *gs[axis + 1 :]))
    return [g, None]


def _branch_vjp(block: Block, cot_types: list, floats: list[int]) -> Region:
    """The region (block arguments..., cotangents of the float yields...) -> gradients of
    the block arguments at positions `floats`."""
    from dlpc.passes.train.autodiff import _erase_dead, differentiate

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
    _erase_dead(block2)  # the loss and the cotangents' own gradients
    fn.body.detach_block(block2)
    return Region(block2)


def vjp(
    b: Builder, op: graph.ControlOp, gs: Sequence[SSAValue | None], want: Sequence[bool]
) -> list[SSAValue | None]:
    """The adjoints of `op`'s operands from those of its results (None: no adjoint)."""
    return RULES[op.name](b, op, gs, want)


def _if_vjp(
    b: Builder, op: graph.ControlOp, gs: Sequence[SSAValue | None], want: Sequence[bool]
) -> list[SSAValue | None]:
    """An if of the branches' adjoints."""
    assert isinstance(op, graph.IfOp)
    inputs = list(op.inputs)
    floats = [k for k, v in enumerate(inputs) if want[1 + k] and is_float(v)]
    # (graph-autodiff calls this with an adjoint for a result and a wanted operand, both
    # float: integers take none, so neither list is empty)
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


def _clone_into(block: Block, src: Block, mapping: dict[SSAValue, SSAValue]) -> list[SSAValue]:
    """`src`'s ops cloned at the end of `block` with `mapping` for its arguments; the
    values its graph.yield gives."""
    for inner in src.ops:
        if isinstance(inner, graph.YieldOp):
            return [mapping.get(v, v) for v in inner.values]
        clone = inner.clone(value_mapper=mapping)
        block.add_op(clone)
        mapping.update(zip(inner.results, clone.results))
    raise DiagnosticException("graph-autodiff: a region without graph.yield")


def _stacked_forward(op: graph.LoopOp) -> graph.LoopOp:
    """`op` rebuilt before itself to also carry its iteration count and a stack of
    every carried value (row i: the values iteration i started from); `op`'s results
    are the first of the new loop's."""
    trips = op.trips
    at = Builder.before(op)
    carried = list(op.inputs)
    n0 = at.const(0, graph.i64)
    stacks0 = [
        zeros(at, (trips, *graph.shape_of(v)), v) if is_float(v) else _int_zeros(at, trips, v)
        for v in carried
    ]
    types = [graph.TensorType(graph.i64, []), *(v.type for v in carried)]
    types += [n0.type, *(s.type for s in stacks0)]
    body = Block(arg_types=types)
    i, args = body.args[0], list(body.args[1 : 1 + len(carried)])
    stacks = list(body.args[2 + len(carried) :])
    ys = _clone_into(body, op.body.block, {**dict(zip(op.body.block.args, [i, *args]))})
    tail = graph.ConstantOp.from_numpy(np.zeros((), dtype=np.int64))  # (an anchor, erased)
    body.add_op(tail)
    b = Builder.before(tail)
    hot = b.compare(b.const(np.arange(trips, dtype=np.int64), graph.i64), i, "eq")
    new_stacks = []
    for v, stack in zip(args, stacks):
        shape = graph.shape_of(v)
        mask = b.reshape(hot, (trips,) + (1,) * len(shape))
        new_stacks.append(b.where(mask, b.reshape(v, (1, *shape)), stack))
    count = b.add(i, b.const(1, graph.i64))
    tail.detach()
    tail.erase()
    body.add_op(graph.YieldOp.create(operands=[*ys, count, *new_stacks]))
    new = graph.LoopOp(op.cond, [*carried, n0, *stacks0], Region(body), trips)
    at.insert(new)
    for old, r in zip(op.results, new.results):
        old.replace_all_uses_with(r)
    return new


def _int_zeros(b: Builder, trips: int, like: SSAValue) -> SSAValue:
    dtype = graph.numpy_dtype(graph.element_type_of(like))
    return b.insert(graph.ConstantOp.from_numpy(np.zeros((trips, *graph.shape_of(like)), dtype)))


def _loop_vjp(
    b: Builder, op: graph.ControlOp, gs: Sequence[SSAValue | None], want: Sequence[bool]
) -> list[SSAValue | None]:
    """The reverse of a loop: its iterations replayed backwards from the saved stack."""
    assert isinstance(op, graph.LoopOp)
    if op.trips < 0:
        raise DiagnosticException(
            "graph-autodiff: the reverse of a graph.loop needs a trip_count bound (the "
            "stack of its iterations' values is sized by it)"
        )
    carried = list(op.inputs)
    for v in carried:  # (a while loop exported with M = 2**63 - 1 has no usable bound)
        message = size_error((op.trips, *graph.shape_of(v)), graph.element_type_of(v))
        if message:
            raise DiagnosticException(
                f"graph-autodiff: the stack of graph.loop's iterations (trip_count "
                f"{op.trips}) is too large: {message}"
            )
    nv = len(carried)
    floats = [k for k, v in enumerate(carried) if is_float(v)]
    wanted = [k for k in floats if want[1 + k]]  # (not empty: see _if_vjp)
    body_block = op.body.block
    cot_types = [carried[k].type for k in floats]
    vjp_region = _branch_vjp(body_block, cot_types, [1 + k for k in floats])
    forward = _stacked_forward(op)
    count = forward.results[nv]
    stacks = list(forward.results[nv + 1 :])
    adj0: list[SSAValue] = []
    for k in floats:
        g = gs[k]
        adj0.append(g if g is not None else zeros(b, graph.shape_of(carried[k]), carried[k]))
    go0 = b.compare(count, b.const(0, graph.i64), "gt")
    types = [graph.TensorType(graph.i64, []), *(a.type for a in adj0)]
    types += [count.type, *(s.type for s in stacks)]
    body = Block(arg_types=types)
    j, adjs = body.args[0], list(body.args[1 : 1 + len(floats)])
    n, saved = body.args[1 + len(floats)], list(body.args[2 + len(floats) :])
    tail = graph.ConstantOp.from_numpy(np.zeros((), dtype=np.int64))  # (an anchor, erased)
    body.add_op(tail)
    rb = Builder.before(tail)
    one = rb.const(1, graph.i64)
    idx = rb.sub(rb.sub(n, one), j)  # the iteration replayed: n - 1 - j
    values = [rb.op(graph.GatherOp, s, idx, axis=0) for s in saved]
    go = rb.compare(rb.add(j, one), n, "lt")
    tail.detach()
    tail.erase()
    vjp_block = vjp_region.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(vjp_block.args, [idx, *values, *adjs]))
    grads = _clone_into(body, vjp_block, mapping)
    body.add_op(graph.YieldOp.create(operands=[go, *grads, n, *saved]))
    reverse = graph.LoopOp(go0, [*adj0, count, *stacks], Region(body), op.trips)
    b.insert(reverse)
    out: list[SSAValue | None] = [None] * len(op.operands)
    op.detach()
    op.erase()
    for k, r in zip(floats, reverse.results):
        if k in wanted:
            out[1 + k] = r
    return out


# the control ops' rules (several results, an adjoint each): graph-autodiff calls `vjp`
RULES = {"graph.if": _if_vjp, "graph.loop": _loop_vjp}
