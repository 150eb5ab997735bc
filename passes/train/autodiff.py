"""Reverse-mode automatic differentiation of @main as a graph rewrite.

Input: graph, func: `func.func @main` whose result `result` (default 0) is a scalar loss
(rank 0 or one element, float), static shapes, NCHW layout (run before graph-layout).
Output: graph, func: @main returns the loss, then `grad.<param>` for every `graph.param`
name (first-appearance order), then with `wrt-inputs` `grad.<input>` for every float
input, then with `aux` @main's other results; result attributes `dlpc.name` name them.
Requires: static shapes; a gradient rule (passes/train/_grad.py) for every op on a path
from a param (or input) to the loss.
Guarantees: a param with no path to the loss gets a zero gradient (a broadcast 0.0);
only the forward values the backward reads stay alive (dead code is erased); with
`recompute`, cheap elementwise forward values are recomputed in the backward next to
their use instead of being kept (activation checkpointing); numerics are unchanged.

As the textbook's reverse mode: the forward graph gives the dependencies; the backward
walks the ops in reverse order, applying each op's vector-Jacobian product to the adjoint
of its result (the sum of the adjoints from every consumer) and passing the products on
to the operands, summed back over broadcast dims.

    %x3 = graph.exp %x1                           // forward as it was, then
    %x5 = graph.add %x3, %x2                      //   d x6 = 1
    %x4 = graph.add %x2, %c1                      //   d x5 = d x6 * x4, d x4 = d x6 * x5
    %y = graph.mul %x5, %x4                       //   d x2 = d x5 + d x4 (two consumers)
    func.return %y                                //   d x1 = d x5 * x3
        -> func.return %y, %grad.x1, %grad.x2

`saved_bytes(module, recompute=...)` reports how many bytes of forward activations the
backward keeps alive, with and without checkpointing (`dlpc-train --stats` prints it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnregisteredOp,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import Pure
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph
from dlpc.passes.train import (
    _comm_grad,  # noqa: F401 - the comm ops' rules
    _control_grad,
    _grad,
    _int_grad,  # noqa: F401 - the bit operations' rules
)
from dlpc.passes.train._build import Builder

# forward ops that `recompute` re-evaluates in the backward instead of keeping their result
CHEAP = (
    *graph.UNARY_OPS,
    *graph.BINARY_OPS,
    graph.PReluOp,
    graph.WhereOp,
    graph.CompareOp,
    graph.BroadcastOp,
    graph.ReshapeOp,
)


@dataclass
class Stats:
    """What the backward keeps of the forward: activations (results of forward ops other
    than params and constants) read by a backward op."""

    kept_values: int = 0
    kept_bytes: int = 0
    recomputed_ops: int = 0
    names: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # bytes of each kept value, as `names`


def _main(module: ModuleOp) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            return op
    raise DiagnosticException("graph-autodiff needs a func.func @main")


def _describe(op: Operation, index: int) -> str:
    """`graph.frobnicate (%y, op 3 of @main)`: the op and where it is."""
    hint = op.results[0].name_hint if op.results else None
    where = f"%{hint}, " if hint else ""
    name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
    return f"{name} ({where}op {index} of @main)"


def _names(attrs: ArrayAttr | None, count: int) -> list[str | None]:
    """The `dlpc.name` of each of `count` arguments/results (None where there is none)."""
    out: list[str | None] = []
    data = attrs.data if attrs is not None else ()
    for i in range(count):
        a = data[i] if i < len(data) else None
        name = a.data.get("dlpc.name") if isinstance(a, DictionaryAttr) else None
        out.append(name.data if isinstance(name, StringAttr) else None)
    return out


def _inline_fused(block: Block) -> None:
    """Replace every graph.fused by a copy of its body (differentiate the ops inside)."""
    for op in list(block.ops):
        if not isinstance(op, graph.FusedOp):
            continue
        values: dict[SSAValue, SSAValue] = dict(zip(op.body.block.args, op.inputs))
        for inner in op.body.block.ops:
            if isinstance(inner, graph.YieldOp):
                op.results[0].replace_all_uses_with(values[inner.values[0]])
                break
            clone = inner.clone(value_mapper=values)
            Rewriter.insert_op(clone, InsertPoint.before(op))
            for old, new in zip(inner.results, clone.results):
                values[old] = new
        op.detach()
        op.erase()


def _bytes(value: SSAValue) -> int:
    ty = value.type
    assert isinstance(ty, TensorType)
    dtype = np.dtype(graph.numpy_dtype(ty.get_element_type()))
    return math.prod(ty.get_shape()) * dtype.itemsize


def _erase_dead(block: Block) -> None:
    """Erase pure ops with unused results, last first (one sweep: users come later).
    graph.params stay: a param the loss does not read still has its (zero) gradient, and
    a caller updating it (the train step) reads it."""
    for op in reversed(list(block.ops)):
        if isinstance(op, graph.ParamOp):
            continue
        if op.results and op.has_trait(Pure) and all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def differentiate(
    module: ModuleOp,
    result: int = 0,
    wrt_inputs: bool = False,
    aux: bool = False,
    recompute: bool = False,
) -> Stats:
    """Append the backward of @main (see the module docstring); what it keeps alive."""
    f = _main(module)
    block = f.body.block
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        raise DiagnosticException("graph-autodiff: @main must end in func.return")
    _inline_fused(block)
    results = list(ret.operands)
    if not 0 <= result < len(results):
        raise DiagnosticException(
            f"graph-autodiff: result {result} does not exist (@main returns {len(results)})"
        )
    loss = results[result]
    if not _grad.is_float(loss) or math.prod(graph.shape_of(loss)) != 1:
        raise DiagnosticException(
            f"graph-autodiff needs a scalar float loss, but result {result} of @main has "
            f"type {loss.type}"
        )
    forward = [op for op in block.ops if op is not ret]
    forward_set = set(forward)

    # which values depend on a param (or an input): only those get adjoints
    sources: list[SSAValue] = [op.results[0] for op in forward if isinstance(op, graph.ParamOp)]
    if wrt_inputs:
        sources += list(block.args)
    active = {v for v in sources if not _grad.no_gradient(v)}
    for op in forward:
        if any(v in active for v in op.operands):
            active.update(r for r in op.results if not _grad.no_gradient(r))

    # reverse sweep: adjoints[v] holds one contribution per consumer of v
    b = Builder.before(ret)
    adjoints: dict[SSAValue, list[SSAValue]] = {}
    if loss in active:
        adjoints[loss] = [_grad.const(b, np.ones(graph.shape_of(loss)), loss)]
    for index in range(len(forward) - 1, -1, -1):
        op = forward[index]
        if not any(r in adjoints for r in op.results):
            continue
        want = [v in active for v in op.operands]
        if not any(want):
            continue  # a param (its uses' adjoints are summed below) or a constant path
        if isinstance(op, graph.ControlOp):  # several results: an adjoint each (or None)
            parts = [_total(b, adjoints[r], r) if r in adjoints else None for r in op.results]
            operands = list(op.operands)  # (a loop's rule replaces the op: read them first)
            for v, grad in zip(operands, _control_grad.vjp(b, op, parts, want)):
                if grad is not None:
                    adjoints.setdefault(v, []).append(grad)
            continue
        g = _total(b, adjoints[op.results[0]], op.results[0])
        closed = _grad.batch_norm_train_vjp(b, op, g) if _grad.BN_TRAIN in op.attributes else None
        if closed is not None:  # a training batch norm as a whole (its inner ops get none)
            for v, grad in closed:
                if v in active:
                    adjoints.setdefault(v, []).append(grad)
            continue
        rule = _grad.RULES.get(op.name)
        if rule is None or len(op.results) != 1:
            raise DiagnosticException(
                f"graph-autodiff has no gradient rule for {_describe(op, index)}"
            )
        grads = rule(b, op, g, want)
        for v, w, grad in zip(op.operands, want, grads):
            if w and grad is not None:
                assert graph.shape_of(grad) == graph.shape_of(v), (op.name, grad.type, v.type)
                adjoints.setdefault(v, []).append(grad)

    for op in forward:  # (the marks are for this sweep only)
        op.attributes.pop(_grad.BN_TRAIN, None)

    # the gradients, by name; a param used twice sums its uses, an unused one is 0
    outputs: list[SSAValue] = [loss]
    names = [_names(f.res_attrs, len(results))[result] or "loss"]
    params: dict[str, list[graph.ParamOp]] = {}
    for op in forward:
        if isinstance(op, graph.ParamOp):
            params.setdefault(op.pname, []).append(op)
    for name, ops in params.items():
        parts = [c for p in ops for c in adjoints.get(p.output, [])]
        outputs.append(_gradient(b, parts, ops[0].output, name))
        names.append(f"grad.{name}")
    if wrt_inputs:
        arg_names = _names(f.arg_attrs, len(block.args))
        for i, arg in enumerate(block.args):
            if _grad.no_gradient(arg):
                continue  # integer inputs (labels, indices) have no gradient
            name = arg_names[i] or arg.name_hint or f"arg{i}"
            outputs.append(_gradient(b, adjoints.get(arg, []), arg, name))
            names.append(f"grad.{name}")
    if aux:
        res_names = _names(f.res_attrs, len(results))
        for i, v in enumerate(results):
            if i != result:
                outputs.append(v)
                names.append(res_names[i] or f"result{i}")

    ret.operands = outputs
    f.res_attrs = ArrayAttr([DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in names])
    f.update_function_type()
    backward = [op for op in block.ops if op not in forward_set and op is not ret]
    recomputed = _recompute(backward, forward_set) if recompute else 0
    _erase_dead(block)
    stats = _kept(block, forward_set)
    stats.recomputed_ops = recomputed
    return stats


def _total(b: Builder, parts: list[SSAValue], like: SSAValue) -> SSAValue:
    """The adjoint of `like`: its consumers' contributions summed."""
    total = _grad.add_all(b, parts)
    hint = like.name_hint
    if hint and total.name_hint is None and total.owner is not None:
        total.name_hint = graph.ssa_name_hint(f"d_{hint}")
    return total


def _gradient(b: Builder, parts: list[SSAValue], value: SSAValue, name: str) -> SSAValue:
    """The gradient of `value` from its uses' adjoints; with no path to the loss it is 0,
    never dropped."""
    grad = _grad.add_all(b, parts) if parts else _grad.zeros(b, graph.shape_of(value), value)
    grad.name_hint = graph.ssa_name_hint(f"grad.{name}")
    return grad


def _recompute(backward: list[Operation], forward: set[Operation]) -> int:
    """Activation checkpointing: the cheap forward values the backward reads that
    `_plan` picks are read through copies computed right before each reader (recursively
    from their operands: a chain stops at params, constants, inputs, expensive ops and
    the values that stay kept), so the forward value dies after its last forward use."""
    plan = _Plan(backward, forward)
    recompute = plan.choose()
    copies: dict[SSAValue, SSAValue] = {}

    def copy(v: SSAValue, before: Operation) -> SSAValue:
        if v in copies:
            return copies[v]
        if not plan.cheap(v) or (v in plan.candidates and v not in recompute):
            return v
        op = v.owner
        assert isinstance(op, Operation)
        operands = [copy(o, before) for o in op.operands]
        clone = op.clone(value_mapper=dict(zip(op.operands, operands)))
        Rewriter.insert_op(clone, InsertPoint.before(before))
        copies[v] = clone.results[0]
        return copies[v]

    for op in backward:
        for i, v in enumerate(op.operands):
            if v in recompute:
                op.operands[i] = copy(v, op)
    return len(copies)


class _Plan:
    """Which cheap forward values to recompute: all of them, except those whose
    recomputation would keep more bytes alive (operands nothing else keeps, larger than
    the value itself: relu(a + b) of two batch-norm results is kept, not its inputs)."""

    def __init__(self, backward: list[Operation], forward: set[Operation]):
        self.forward = forward
        reads: dict[SSAValue, None] = {}
        for op in backward:
            for v in op.operands:
                if isinstance(v.owner, Operation) and v.owner in forward:
                    reads.setdefault(v)
        self.candidates = {v for v in reads if self.cheap(v)}
        self.base = {v for v in reads if not self.cheap(v) and not self.free(v)}

    def cheap(self, v: SSAValue) -> bool:
        return isinstance(v.owner, CHEAP) and v.owner in self.forward

    @staticmethod
    def free(v: SSAValue) -> bool:
        """Alive anyway: inputs, params, constants."""
        return not isinstance(v.owner, Operation) or isinstance(
            v.owner, graph.ParamOp | graph.ConstantOp
        )

    def leaves(self, v: SSAValue, recompute: set[SSAValue]) -> set[SSAValue]:
        """The values a copy of v reads that must then be alive."""
        out: set[SSAValue] = set()
        stack, seen = list(v.owner.operands), {v}  # type: ignore[union-attr]
        while stack:
            w = stack.pop()
            if w in seen or self.free(w):
                continue
            seen.add(w)
            if self.cheap(w) and (w not in self.candidates or w in recompute):
                stack.extend(w.owner.operands)  # type: ignore[union-attr]
            else:
                out.add(w)
        return out

    def choose(self) -> set[SSAValue]:
        recompute = set(self.candidates)
        changed = True
        while changed:
            changed = False
            for v in sorted(recompute, key=_bytes, reverse=True):
                others = set(self.base) | (self.candidates - recompute)
                for u in recompute - {v}:
                    others |= self.leaves(u, recompute)
                extra = sum(_bytes(w) for w in self.leaves(v, recompute) - others)
                if extra and extra >= _bytes(v):  # no saving: keep v, skip the work
                    recompute.discard(v)
                    changed = True
        return recompute


def _kept(block: Block, forward: set[Operation]) -> Stats:
    stats = Stats()
    seen: set[SSAValue] = set()
    for op in block.ops:
        if op in forward or isinstance(op, func.ReturnOp):
            continue
        for v in op.operands:
            owner = v.owner
            if (
                v in seen
                or not isinstance(owner, Operation)
                or owner not in forward
                or isinstance(owner, graph.ParamOp | graph.ConstantOp)
            ):
                continue
            seen.add(v)
            stats.kept_values += 1
            stats.kept_bytes += _bytes(v)
            stats.names.append(v.name_hint or owner.name)
            stats.sizes.append(_bytes(v))
    return stats


def saved_bytes(module: ModuleOp, recompute: bool = False, **options) -> Stats:
    """What the backward of `module` (not modified) keeps alive of the forward."""
    return differentiate(module.clone(), recompute=recompute, **options)


@dataclass(frozen=True)
class GraphAutodiff(ModulePass):
    """Append the backward graph of @main (reverse-mode autodiff; see the module docstring).

    Options: `result` (which result is the loss), `wrt-inputs` (also the inputs'
    gradients), `aux` (keep the other results after the gradients), `recompute`
    (activation checkpointing of cheap elementwise values)."""

    name = "graph-autodiff"

    result: int = 0
    wrt_inputs: bool = False
    aux: bool = False
    recompute: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        differentiate(op, self.result, self.wrt_inputs, self.aux, self.recompute)
