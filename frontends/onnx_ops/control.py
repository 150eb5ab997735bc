"""ONNX control flow: If, Loop, Scan onto graph.if / graph.loop.

A subgraph becomes a region isolated from above: the outer values it reads (ONNX lets a
subgraph capture any name of an enclosing graph) are found after its nodes are imported
and passed in as operands. Large float constants a subgraph materialises (graph.param)
are moved out of the region and passed in too.

- If: a condition known at import time imports the chosen branch inline; otherwise a
  graph.if over the union of the values both branches capture. Branches that yield an
  optional (no tensor form: an Optional holding a value is that value) need the
  condition at import time (a graph input is specialised on).
- Loop: graph.loop with carried values (cond, v..., scan accumulators..., captured...).
  A run-time trip count M is carried too (the condition is cond and i < M: one program
  for every M) unless the loop has scan outputs, whose rows are the iterations run: then
  M must be known at import time (a graph input is specialised on, as Reshape's shape
  is), the body's condition must be its input passed through or a constant true (else
  the row count is known only at run time: refused), and the initial cond known (a
  graph input is specialised on): M rows, or none. A scan output is a [M, ...]
  accumulator written at row i by a one-hot where.
- Scan-8 (a leading batch axis, `sequence_lens`): one opset-9 scan per batch element.
- Scan (opset 9+): graph.loop over the scan axis; each iteration gathers its slice of
  every scan input (reversed for direction 1) and writes each scan output's row (at the
  mirrored row for direction 1), moved to its output axis at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Block, Operation, Region, SSAValue

from dlpc.dialects import graph
from dlpc.frontends.onnx_ops.registry import handles, norm_axis
from dlpc.frontends.onnx_values import Const, NodeContext, Value

Bind = Callable[[list[SSAValue]], list[Value]]
Finish = Callable[[list[SSAValue], list[Value]], list[Value]]


class _Sub:
    """A subgraph imported as a region: its ops, yielded values and captured values."""

    def __init__(self, block: Block, ops: list[Operation], outputs: list[SSAValue]):
        self.block = block
        self.ops = ops
        self.outputs = outputs
        self.captured: list[SSAValue] = []
        inside: set[SSAValue] = set(block.args)
        for op in ops:
            for v in op.operands:
                if v not in inside and v not in self.captured:
                    self.captured.append(v)
            inside.update(op.results)
        for v in outputs:
            if v not in inside and v not in self.captured:
                self.captured.append(v)

    def close(self, union: Sequence[SSAValue]) -> Region:
        """The region: block arguments for `union` (the captured values of every region
        of the op) appended, the captured uses redirected to them, graph.yield last."""
        args = {v: self.block.insert_arg(v.type, len(self.block.args)) for v in union}
        for op in self.ops:
            for i, v in enumerate(op.operands):
                if v in args:
                    op.operands[i] = args[v]
            self.block.add_op(op)
        self.block.add_op(graph.YieldOp.create(operands=[args.get(v, v) for v in self.outputs]))
        return Region(self.block)


def _subgraph(imp: Any, g, arg_types: Sequence[Any], bind: Bind, finish: Finish) -> _Sub:
    """Import the nodes of GraphProto `g` into a fresh region whose block takes
    `arg_types`; `bind(args)` gives the values of g's inputs, `finish(args, outputs)` the
    values to yield (it may emit ops: they go into the region)."""
    saved = (imp.ops, imp.env, imp.materialised, imp._node, imp.node_index)
    block = Block(arg_types=list(arg_types))
    imp.ops, imp.env, imp.materialised = [], dict(imp.env), dict(imp.materialised)
    try:
        for vi, v in zip(g.input, bind(list(block.args))):
            imp.env[vi.name] = v
        for init in g.initializer:
            imp.env[init.name] = Const(imp._tensor(init), init.name)
        for idx, node in enumerate(g.node):
            imp.import_node(node, idx)
        imp._node, imp.node_index = saved[3], saved[4]
        for vi in g.output:
            if vi.name not in imp.env:
                raise imp.error(f"subgraph '{g.name}' never computes its output '{vi.name}'")
        outputs = [
            imp.value(v) for v in finish(list(block.args), [imp.env[vi.name] for vi in g.output])
        ]
        ops = imp.ops
    finally:
        imp.ops, imp.env, imp.materialised = saved[0], saved[1], saved[2]
        imp._node, imp.node_index = saved[3], saved[4]
    inner: list[Operation] = []
    for op in ops:  # a weight stays outside: the region takes it as an operand
        (imp.ops if isinstance(op, graph.ParamOp) else inner).append(op)
    return _Sub(block, inner, outputs)


def _scalar(imp: NodeContext, v: Value, what: str) -> SSAValue:
    """A one-element value as a rank-0 tensor."""
    if int(np.prod(imp.shape(v))) != 1:
        raise imp.error(f"{what} must have one element, got shape {imp.shape(v)}")
    return imp.value(imp.reshape(v, ()))


@handles("If")
def if_(imp: NodeContext) -> list[Value]:
    a = imp.attrs({"then_branch": None, "else_branch": None})
    cond = imp.required(0)
    if _optional_outputs(a["then_branch"], a["else_branch"]) and not isinstance(cond, Const):
        # an optional has no tensor form: the branch is chosen at import time (a graph
        # input condition is specialised on; one computed at run time is refused)
        cond = Const(np.asarray(imp.const(0, "cond")))
    if isinstance(cond, Const):  # known at import time: the chosen branch, inline
        return _inline(
            imp, a["then_branch"] if bool(cond.array.reshape(-1)[0]) else a["else_branch"]
        )
    c = _scalar(imp, cond, "the condition")
    keep: Finish = lambda args, outs: outs  # noqa: E731
    subs = [_subgraph(imp, a[k], [], lambda args: [], keep) for k in ("then_branch", "else_branch")]
    then_types = [v.type for v in subs[0].outputs]
    else_types = [v.type for v in subs[1].outputs]
    if then_types != else_types:
        show = lambda ts: ", ".join(str(t) for t in ts)  # noqa: E731
        raise imp.error(
            f"the branches yield different types: then ({show(then_types)}), else "
            f"({show(else_types)})"
        )
    union = [*subs[0].captured, *(v for v in subs[1].captured if v not in subs[0].captured)]
    op = graph.IfOp(c, union, then_types, subs[0].close(union), subs[1].close(union))
    imp._append(op)  # type: ignore[attr-defined]
    return list(op.results)


def _optional_outputs(*graphs) -> bool:
    """Whether a subgraph yields an optional."""
    return any(vi.type.HasField("optional_type") for g in graphs for vi in g.output)


@handles("Optional")
def optional(imp: NodeContext) -> list[Value]:
    """An optional holding a value is that value; an empty one is refused."""
    imp.attrs({"type": None})
    v = imp.input(0)
    if v is None:
        raise imp.error("an empty optional is not supported (an optional imports as its value)")
    return [v]


def _inline(imp: Any, g) -> list[Value]:
    """The nodes of a branch imported into the enclosing graph."""
    node, index = imp._node, imp.node_index
    for i, sub in enumerate(g.node):
        imp.import_node(sub, i)
    imp._node, imp.node_index = node, index
    return [imp.env[vi.name] for vi in g.output]


def _store_row(imp: NodeContext, acc: SSAValue, row: SSAValue, i: SSAValue) -> SSAValue:
    """acc with row `i` (a rank-0 i64 tensor) replaced by `row`: a one-hot where."""
    shape = imp.shape(acc)
    iota = Const(np.arange(shape[0], dtype=np.int64))
    hot = imp.emit(graph.CompareOp, iota, i, predicate="eq")
    hot = imp.reshape(hot, (shape[0],) + (1,) * (len(shape) - 1))
    return imp.emit(graph.WhereOp, hot, imp.reshape(row, (1, *shape[1:])), acc)


def _flip(imp: NodeContext, i: SSAValue, n: int) -> SSAValue:
    """n - 1 - i."""
    return imp.emit(graph.SubOp, Const(np.asarray(n - 1, dtype=np.int64)), i)


def _loop(
    imp: Any,
    body,
    trip: int,
    cond: SSAValue,
    carried: list[SSAValue],
    bind: Bind,
    step: Finish,
    scan_row: Callable[[SSAValue, int], SSAValue],
) -> tuple[list[SSAValue], list[SSAValue]]:
    """graph.loop over (carried..., scan accumulators..., captured...); `step(args,
    outputs)` gives (cond, next carried..., scan rows...), each row stored at
    `scan_row(i, k)` of its accumulator. Returns the carried values and the scans."""
    n = len(carried)
    accs: list[tuple[tuple[int, ...], np.dtype]] = []

    def finish(args: list[SSAValue], outs: list[Value]) -> list[Value]:
        stepped = step(args, outs)
        if len(stepped) > 1 + n and trip < 0:
            raise imp.error("a scan output needs a trip count known at import time")
        block, i = args[0].owner, args[0]
        assert isinstance(block, Block)
        stored: list[Value] = []
        for k, row in enumerate(stepped[1 + n :]):
            shape, dtype = (trip, *imp.shape(row)), imp.dtype(row)
            elt = graph.NUMPY_TO_ELT[dtype.name]
            acc = block.insert_arg(graph.tensor_type(shape, elt), len(block.args))
            accs.append((shape, dtype))
            stored.append(_store_row(imp, acc, imp.value(row), scan_row(i, k)))
        return [*stepped[: 1 + n], *stored]

    sub = _subgraph(imp, body, [TensorI64, *(v.type for v in carried)], bind, finish)
    inits = [imp.value(Const(np.zeros(shape, dtype=dtype))) for shape, dtype in accs]
    region = sub.close(sub.captured)
    term = region.block.last_op
    assert isinstance(term, graph.YieldOp)
    passed = region.block.args[len(region.block.args) - len(sub.captured) :]
    term.operands = [*term.operands, *passed]  # the captured values pass through
    op = graph.LoopOp(cond, [*carried, *inits, *sub.captured], region, trip)
    imp._append(op)
    results: list[SSAValue] = list(op.results)
    return results[:n], results[n : n + len(inits)]


TensorI64 = graph.TensorType(graph.i64, [])


@handles("Loop")
def loop(imp: NodeContext) -> list[Value]:
    a = imp.attrs({"body": None})
    body = a["body"]
    if _optional_outputs(body):
        raise imp.error("Loop carrying an optional is not supported")
    inits = [imp.value(imp.required(k)) for k in range(2, len(imp.node.input))]
    n = 1 + len(inits)  # cond is carried too: the body reads it
    cond_in = imp.input(1)
    cond = (
        _scalar(imp, cond_in, "cond") if cond_in is not None else imp.value(Const(np.asarray(True)))
    )
    m_in = imp.input(0)
    if isinstance(m_in, SSAValue) and len(body.output) == n:  # M carried: one program
        m = _scalar(imp, m_in, "M")
        cond = _and(
            imp,
            cond,
            imp.emit(graph.CompareOp, Const(np.asarray(0, dtype=np.int64)), m, predicate="lt"),
        )
        trip = -1
    else:  # M bounds the scan outputs' rows: known at import (or specialised on)
        m = None
        known = imp.const(0, "M")
        trip = -1 if known is None else int(np.asarray(known).reshape(-1)[0])
        if len(body.output) > n:  # rows = iterations run: M, or 0 if cond starts false
            if not _cond_invariant(body):
                raise imp.error(
                    "a Loop with scan outputs whose condition may end it early is not "
                    "supported (the scan outputs' row count is known only at run time)"
                )
            start = imp.const(1, "cond")  # (a graph input: specialised on)
            if start is not None and not bool(np.asarray(start).reshape(-1)[0]):
                trip = 0
            cond = imp.value(Const(np.asarray(True)))

    def bind(args: list[SSAValue]) -> list[Value]:
        return list[Value](args[: 1 + n])

    def step(args: list[SSAValue], outs: list[Value]) -> list[Value]:
        c = _scalar(imp, outs[0], "the body's condition output")
        if m is None:
            return [c, c, *outs[1:]]
        # cond and i + 1 < M; M passes through
        m_arg = args[1 + n]
        more = imp.emit(graph.AddOp, args[0], Const(np.asarray(1, dtype=np.int64)))
        c = _and(imp, c, imp.emit(graph.CompareOp, more, m_arg, predicate="lt"))
        return [c, c, *outs[1:n], m_arg, *outs[n:]]

    carried_in = [cond, *inits] if m is None else [cond, *inits, m]
    if trip == 0:  # no iteration: the initial values and empty scans
        _, accs = _loop(imp, body, 1, cond, carried_in, bind, step, lambda i, k: i)
        importer: Any = imp  # (the Importer: its op list)
        op = importer.ops.pop()  # (imported for its scan outputs' row shapes only)
        empty = [Const(np.zeros((0, *imp.shape(v)[1:]), imp.dtype(v))) for v in accs]
        op.erase()
        return [*inits, *empty]
    carried, accs = _loop(imp, body, trip, cond, carried_in, bind, step, lambda i, k: i)
    return [*carried[1:n], *accs]


def _cond_invariant(body) -> bool:
    """Whether the body's condition output is its condition input or a constant true
    (through Identity nodes): then the loop runs M times or, if cond starts false, none."""
    from onnx import numpy_helper

    made = {out: node for node in body.node for out in node.output}
    name = body.output[0].name
    while name != body.input[1].name:
        node = made.get(name)
        if node is None:
            return False
        if node.op_type == "Identity":
            name = node.input[0]
            continue
        value = [a.t for a in node.attribute if a.name == "value"]
        return (
            node.op_type == "Constant"
            and bool(value)
            and bool(numpy_helper.to_array(value[0]).all())
        )
    return True


def _and(imp: NodeContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """a and b, of two i1 scalars."""
    return imp.emit(graph.WhereOp, a, b, Const(np.asarray(False)))


@handles("Scan")
def scan(imp: NodeContext) -> list[Value]:
    if imp.op_version() < 9:
        return _scan8(imp)
    a = imp.attrs(
        {
            "body": None,
            "num_scan_inputs": None,
            "scan_input_axes": None,
            "scan_input_directions": None,
            "scan_output_axes": None,
            "scan_output_directions": None,
        }
    )
    m = int(a["num_scan_inputs"])
    values = [imp.value(imp.required(k)) for k in range(len(imp.node.input))]
    n = len(values) - m
    n_out = len(a["body"].output) - n
    return _scan(
        imp,
        a["body"],
        values[:n],
        values[n:],
        list(a["scan_input_axes"] or [0] * m),
        list(a["scan_input_directions"] or [0] * m),
        list(a["scan_output_axes"] or [0] * n_out),
        list(a["scan_output_directions"] or [0] * n_out),
    )


def _scan8(imp: NodeContext) -> list[Value]:
    """Scan-8: every state and scan input has a leading batch axis (scan inputs scan
    their axis 1) and the body sees one batch element; `sequence_lens` may shorten a
    batch element's scan. Imported as one opset-9 scan per batch element (the batch is
    static), stacked back on axis 0; a sequence_lens below the scan length is refused."""
    a = imp.attrs({"body": None, "num_scan_inputs": None, "directions": None})
    m = int(a["num_scan_inputs"])
    values = [imp.value(imp.required(k)) for k in range(1, len(imp.node.input))]
    n = len(values) - m
    xs = values[n:]
    n_out = len(a["body"].output) - n
    batches = {imp.shape(v)[0] for v in values if imp.shape(v)}
    if len(batches) != 1 or any(not imp.shape(v) for v in values):
        raise imp.error(f"Scan-8 inputs need one leading batch axis, got {sorted(batches)}")
    batch = batches.pop()
    lens = imp.const(0, "sequence_lens")
    if lens is not None:
        full = {imp.shape(x)[1] for x in xs if len(imp.shape(x)) > 1}
        if lens.size != batch or any(int(v) not in full for v in lens.reshape(-1)):
            raise imp.error(
                f"Scan-8 with sequence_lens {lens.reshape(-1).tolist()} shorter than the "
                f"scan length {sorted(full)} is not supported"
            )
    dirs = list(a["directions"] or [0] * m)
    per: list[list[Value]] = []
    for b in range(batch):
        at = Const(np.asarray(b, dtype=np.int64))
        pick = [imp.emit(graph.GatherOp, v, at, axis=0) for v in values]
        per.append(
            _scan(imp, a["body"], pick[:n], pick[n:], [0] * m, dirs, [0] * n_out, [0] * n_out)
        )
    outs: list[Value] = []
    for k in range(n + n_out):
        rows = [imp.reshape(p[k], (1, *imp.shape(p[k]))) for p in per]
        outs.append(rows[0] if batch == 1 else imp.emit(graph.ConcatOp, *rows, axis=0))
    return outs


def _scan(
    imp: NodeContext,
    body,
    states: list[SSAValue],
    xs: list[SSAValue],
    in_axes: list[int],
    in_dirs: list[int],
    out_axes: list[int],
    out_dirs: list[int],
) -> list[Value]:
    """Scan (opset 9+) of `body` over states and scan inputs."""
    n, m = len(states), len(xs)
    in_axes = [
        norm_axis(imp, ax, len(imp.shape(x)), "scan_input_axes") for ax, x in zip(in_axes, xs)
    ]
    lengths = {imp.shape(x)[ax] for x, ax in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise imp.error(f"scan inputs have different lengths {sorted(lengths)}")
    trip = lengths.pop()
    true = imp.value(Const(np.asarray(True)))

    def bind(args: list[SSAValue]) -> list[Value]:
        i = args[0]
        elems = []
        for k, x in enumerate(args[1 + n : 1 + n + m]):
            at = _flip(imp, i, trip) if in_dirs[k] else i
            elems.append(imp.emit(graph.GatherOp, x, at, axis=in_axes[k]))
        return [*args[1 : 1 + n], *elems]

    def step(args: list[SSAValue], outs: list[Value]) -> list[Value]:
        t = imp.value(Const(np.asarray(True)))
        return [t, *outs[:n], *args[1 + n : 1 + n + m], *outs[n:]]

    def scan_row(i: SSAValue, k: int) -> SSAValue:
        return _flip(imp, i, trip) if out_dirs[k] else i

    carried, accs = _loop(imp, body, trip, true, [*states, *xs], bind, step, scan_row)
    outs: list[Value] = list(carried[:n])
    for acc, ax in zip(accs, out_axes):
        rank = len(imp.shape(acc))
        ax = norm_axis(imp, ax, rank, "scan_output_axes")
        if ax:
            perm = [*range(1, ax + 1), 0, *range(ax + 1, rank)]
            acc = imp.emit(graph.TransposeOp, acc, perm=perm)
        outs.append(acc)
    return outs
