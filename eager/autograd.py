"""Eager autograd: a tape of op calls, and the reverse pass with graph-autodiff's rules.

A call on tensors that require grad (while grad mode is on: `no_grad()` turns it off)
records a `Node` on its output: the op, its signature (operands' shapes and dtypes,
numbers, attributes) and its tensor operands. `backward(loss)` walks the tape from the
loss in reverse topological order; for each node it runs a backward kernel that is the
node's one-op graph with the adjoint `dy` as one more input, differentiated by the same
rules `graph-autodiff` applies (`passes/train/_grad.RULES`, summed over several uses as
it sums them), compiled by dlpc's pipeline for the node's device and cached per
(op, signature, attributes, which operands want a gradient, device). Leaves accumulate
into `.grad`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dlpc.diagnostics import DlpcError
from dlpc.eager import dispatch
from dlpc.frontends.builder import GraphBuilder
from dlpc.passes.train import (
    _comm_grad,  # noqa: F401 - registers the comm ops' rules
    _control_grad,  # noqa: F401 - registers dynamic_slice's, graph.if's, graph.loop's
    _grad,
    _int_grad,  # noqa: F401 - registers the bit operations'
)
from dlpc.passes.train._build import Builder
from dlpc.runtime.tensor import TensorView


class GradMode:
    enabled = True


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Calls inside record nothing (evaluation, optimizer updates)."""
    before = GradMode.enabled
    GradMode.enabled = False
    try:
        yield
    finally:
        GradMode.enabled = before


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    before = GradMode.enabled
    GradMode.enabled = True
    try:
        yield
    finally:
        GradMode.enabled = before


class Node:
    """One recorded call: what produced a tensor that requires grad."""

    __slots__ = ("name", "operands", "attrs", "inputs", "want", "custom")

    def __init__(self, name: str, operands: tuple, attrs: dict, inputs: list, want: tuple):
        self.name = name
        self.operands = operands  # the signature: (shape, dtype) per tensor, numbers, None
        self.attrs = attrs
        self.inputs = inputs  # the tensor operands, in order
        self.want = want  # per tensor operand: does it need a gradient
        # dy -> the wanted gradients, for a node that is no one op (a dlpc.jit graph)
        self.custom: Any = None


def backward_graph(node: Node) -> GraphBuilder:
    """The node's op with `dy` as an input, and the gradients of the wanted tensor
    operands as outputs: a reverse sweep over the op's graph (one op, or a view's
    slice + reshape) with graph-autodiff's rules."""
    sig = dispatch.Signature(node.name, node.operands, node.attrs)
    gb = GraphBuilder(f"eager_{node.name}_grad")
    inputs, y = sig.build(gb)
    dy = gb.input("dy", dispatch.graph_shape(y), dispatch.dtype_name(node_dtype(y)))
    wanted = [v for v, w in zip(inputs, node.want) if w]
    ops = [op for op in gb.block.ops if op.operands]  # (constants have none)
    active = set(wanted)
    for op in ops:
        if any(v in active for v in op.operands):
            active.update(r for r in op.results if not _grad.no_gradient(r))
    b = Builder.at_end(gb.block)
    adjoints: dict[Any, list] = {y: [dy]}
    for op in reversed(ops):
        result = op.results[0]
        if result not in adjoints:
            continue
        want = [v in active for v in op.operands]
        rule = _grad.RULES.get(op.name)
        if rule is None:
            raise DlpcError(f"error: no gradient rule for {op.name} (graph-autodiff has none)")
        g = _grad.add_all(b, adjoints[result])
        for v, w, grad in zip(op.operands, want, rule(b, op, g, want)):
            if w and grad is not None:
                adjoints.setdefault(v, []).append(grad)
    grads = []
    for v in wanted:
        parts = adjoints.get(v, [])
        grads.append(
            _grad.add_all(b, parts) if parts else _grad.zeros(b, dispatch.graph_shape(v), v)
        )
    gb.output(*grads)
    return gb


def node_dtype(value):
    import numpy as np

    from dlpc.reference import graph as ref

    return np.dtype(ref.result_dtype(value))


_BACKWARD: dict[tuple, dispatch.Kernel] = {}


def run_backward(node: Node, dy: TensorView) -> list:
    """The gradients of the node's wanted operands for the adjoint `dy`."""
    if node.custom is not None:
        return node.custom(dy)
    device = dy.device
    key = (node.name, node.operands, dispatch.freeze(node.attrs), node.want, device.name)
    kernel = _BACKWARD.get(key)
    if kernel is None:
        kernel = dispatch.compile_graph(backward_graph(node), device, f"{node.name}_grad")
        _BACKWARD[key] = kernel
    return kernel.run([*node.inputs, dy], type(dy))


def backward(root: TensorView, grad: TensorView | None, ones) -> None:
    """Reverse pass from `root` (adjoint `grad`, default 1) into the leaves' `.grad`."""
    order: list = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:  # iterative post-order DFS over the tape
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        node = t._node
        if node is not None:
            for x, w in zip(node.inputs, node.want):
                if w and id(x) not in seen:
                    stack.append((x, False))
    grads: dict[int, Any] = {id(root): grad if grad is not None else ones(root)}
    with no_grad():
        for t in reversed(order):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            node = t._node
            if node is None:
                t.grad = g if t.grad is None else t.grad + g
                continue
            outs = iter(run_backward(node, g))
            for x, w in zip(node.inputs, node.want):
                if not w:
                    continue
                gx = next(outs)
                before = grads.get(id(x))
                grads[id(x)] = gx if before is None else before + gx
