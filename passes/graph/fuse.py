"""Horizontal and vertical fusion of graph ops.

Input: graph, func.  Output: graph (with `graph.fused`), func.
Requires: nothing; best after graph-substitute (batch norms folded into convs) and
graph-fold-constants.
Guarantees: results unchanged (fusion only regroups ops; the concatenated weights of
horizontal fusion are exact).

Horizontal: matmuls/linears that read the same input with static 2-D weights defined by
`graph.param`/`graph.constant` (the Q, K, V projections) become one op over the
concatenated weights followed by slices of its result:

    %q = graph.linear %x, %wq, %bq        %w = graph.concat %wq, %wk {axis = 0}
    %k = graph.linear %x, %wk, %bk   ->   %b = graph.concat %bq, %bk {axis = 0}
                                          %qk = graph.linear %x, %w, %b
                                          %q = graph.slice %qk {starts = [0], ends = [64], axes = [-1]}
                                          %k = graph.slice %qk {starts = [64], ends = [128], axes = [-1]}

Matmuls whose only users are adds of static 1-D biases (ONNX's MatMul + Add) take their
adds along: `add(matmul(x, concat(w)), concat(b))`, then the slices, so the vertical
fusion below folds the bias into the one matmul kernel as it does for a linear.

The concats are static: `fold_params`/`graph-fold-constants` evaluate them.

Vertical: a matmul/linear/conv2d anchor (or an elementwise op) followed by a chain of
elementwise ops over the same index space (bias add, batch norm, activation, residual
add, ...) becomes one `graph.fused` op whose region holds the chain, i.e. one kernel:

    %y = graph.conv2d %x, %w, %b ...                %r = graph.fused "conv2d_relu_0" %x, %w, %b : ... {
    %r = graph.relu %y ...               ->         ^bb0(%a, %k, %c):
                                                      %0 = graph.conv2d %a, %k, %c ...
                                                      %1 = graph.relu %0 ...
                                                      graph.yield %1 ...
                                                    }

A chain absorbs elementwise users of its values that have the chain's result shape
(their other operands may broadcast into it), earliest first, and is then cut to the
longest prefix whose intermediates are not used outside it (so x * sigmoid(x) after a
matmul fuses: both users of the matmul are inside). An anchor is only ever the first op of a chain, so each
fused op has at most one reduction with the rest as its epilogue. Ops on static values
only (weights and constants, e.g. the rescaled weights of batch-norm folding) are left
for `fold_params`/`graph-fold-constants` and never fused.

Comm ops are fusion barriers: a chain and a horizontal group take ops between the same
two comm ops only, so no work moves across a collective or a send/recv (a pipeline's
running gradient sums stay after each backward instead of gathering into one kernel at
the end, which would keep every micro-batch's gradient alive to it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph as g
from dlpc.dialects.typed import element_type
from dlpc.passes.graph import _util as u

# the Winograd output transform is a conv's result: its bias/activation/residual follow
ANCHORS = (
    g.MatMulOp,
    g.LinearOp,
    g.Conv2DOp,
    g.WinogradOutputTransformOp,
    g.MatMulIntegerOp,  # (their rescale and requantization become the epilogue)
    g.ConvIntegerOp,
)
ELEMENTWISE = (
    *g.UNARY_OPS,
    *g.BINARY_OPS,
    g.PReluOp,
    g.WhereOp,
    g.CompareOp,
    g.BatchNormOp,
    g.QuantizeOp,
    g.DequantizeOp,
)


def _short(op: Operation) -> str:
    return op.name.removeprefix("graph.")


# ------------------------------------------------------------------- horizontal


def _leaf(value: SSAValue) -> Operation | None:
    op = u.producer(value)
    return op if isinstance(op, g.ParamOp | g.ConstantOp) else None


def _horizontal_key(op: g.LinearOp | g.MatMulOp):
    """Ops with equal keys can share one op over concatenated weights; None: never."""
    if isinstance(op, g.LinearOp):
        w = op.operands[1]
        has_bias = len(op.operands) == 3
        if _leaf(w) is None or (
            has_bias and (_leaf(op.operands[2]) is None or len(g.shape_of(op.operands[2])) != 1)
        ):
            return None
        return ("linear", op.operands[0], g.shape_of(w)[1], has_bias, element_type(w))
    w = op.operands[1]
    if _leaf(w) is None or len(g.shape_of(w)) != 2 or len(g.shape_of(op.operands[0])) < 2:
        return None
    tb = op.transpose_b
    k = g.shape_of(w)[1 if tb else 0]
    return ("matmul", op.operands[0], k, op.transpose_a, tb, element_type(w))


def _bias_adds(group: list[g.LinearOp | g.MatMulOp]) -> list[tuple[Operation, SSAValue]] | None:
    """When every matmul of `group` has one user, an add of a static 1-D bias along its
    last dim (ONNX's MatMul + Add for a linear layer), those (add, bias); else None."""
    found = []
    for op in group:
        uses = list(op.results[0].uses)
        if not isinstance(op, g.MatMulOp) or len(uses) != 1:
            return None
        add = uses[0].operation
        if not isinstance(add, g.AddOp) or add.results[0].type != op.results[0].type:
            return None
        (bias,) = [v for v in add.operands if v is not op.results[0]] or [None]
        width = g.shape_of(op.results[0])[-1]
        if bias is None or _leaf(bias) is None or g.shape_of(bias) != (width,):
            return None
        found.append((add, bias))
    return found


def _fuse_horizontal(block: Block, group: list[g.LinearOp | g.MatMulOp]) -> None:
    first = group[0]
    adds = _bias_adds(group)
    biases = [bias for _, bias in adds] if adds else []
    for op in group:  # leaves have no operands: hoisting them is always legal
        for v in [*op.operands[1:], *biases]:
            leaf = _leaf(v)
            if leaf is not None and block.get_operation_index(leaf) > block.get_operation_index(
                first
            ):
                leaf.detach()
                block.insert_op_before(leaf, first)
    linear = isinstance(first, g.LinearOp)
    if linear:
        w_axis = 0
    else:
        w_axis = 0 if first.transpose_b else 1
    widths = [g.shape_of(op.operands[1])[w_axis] for op in group]
    new_ops: list[Operation] = [g.ConcatOp.make(*(op.operands[1] for op in group), axis=w_axis)]
    operands = [first.operands[0], new_ops[0].results[0]]
    if linear and len(first.operands) == 3:
        new_ops.append(g.ConcatOp.make(*(op.operands[2] for op in group), axis=0))
        operands.append(new_ops[-1].results[0])
    attrs = {} if linear else {"transpose_a": first.transpose_a, "transpose_b": first.transpose_b}
    big = type(first).make(*operands, **attrs)
    new_ops.append(big)
    if adds:  # matmul(x, w_k) + b_k for every k: one add of the concatenated biases
        new_ops.append(g.ConcatOp.make(*biases, axis=0))
        big = g.AddOp.make(big, new_ops[-1])
        new_ops.append(big)
        for (add, _), op in zip(adds, group):  # the slices stand for the adds now
            op.results[0].name_hint = add.results[0].name_hint
            add.results[0].replace_all_uses_with(op.results[0])
            block.erase_op(add)
    offset = 0
    slices = []
    for _op, width in zip(group, widths):
        s = g.SliceOp.make(big, starts=[offset], ends=[offset + width], axes=[-1])
        offset += width
        slices.append(s)
    block.insert_ops_before(new_ops + slices, first)
    for op, s in zip(group, slices):
        assert op.results[0].type == s.results[0].type
        s.results[0].name_hint = op.results[0].name_hint
        op.results[0].replace_all_uses_with(s.results[0])
        block.erase_op(op)


def _zones(block: Block) -> dict[Operation, int]:
    """Each op's count of comm ops before it: ops of one zone may fuse (the barrier)."""
    zone, out = 0, {}
    for op in block.ops:
        zone += op.name.startswith("comm.")
        out[op] = zone
    return out


def fuse_horizontal(block: Block) -> int:
    groups: dict[object, list[g.LinearOp | g.MatMulOp]] = defaultdict(list)
    zone = _zones(block)
    for op in block.ops:
        if not isinstance(op, g.LinearOp | g.MatMulOp):
            continue
        key = _horizontal_key(op)
        if key is not None:
            groups[(key, zone[op])].append(op)
    fused = 0
    for group in groups.values():
        if len(group) >= 2:
            _fuse_horizontal(block, group)
            fused += 1
    return fused


# --------------------------------------------------------------------- vertical


def _chain(
    position: dict[Operation, int],
    seed: Operation,
    taken: set[Operation],
    max_chain: int,
    zone: dict[Operation, int] | None = None,
) -> list[Operation]:
    """The longest fusable chain starting at `seed` using no op of `taken`.

    Users of chain values are absorbed earliest first (so the chain stays in block
    order: every outside operand dominates its last op); the result is the longest
    prefix that is *closed*: only its last value is used outside it.
    """
    group = [seed]
    shape = g.shape_of(seed.results[0])
    rejected: set[Operation] = set()
    while len(group) < max_chain:
        members = set(group)
        candidates = {user for op in group for user in u.users(op.results[0])}
        candidates -= members | rejected
        if not candidates:
            break
        user = min(candidates, key=position.__getitem__)
        if (
            not isinstance(user, ELEMENTWISE)
            or user in taken
            or g.shape_of(user.results[0]) != shape
            or (zone is not None and zone[user] != zone[seed])  # across a comm op
        ):
            rejected.add(user)
            continue
        group.append(user)
    for k in range(len(group), 1, -1):
        members = set(group[:k])
        if all(u.users(op.results[0]) <= members for op in group[: k - 1]):
            return group[:k]
    return group[:1]


def _outside_operands(group: list[Operation]) -> list[SSAValue]:
    inside = {op.results[0] for op in group}
    out: list[SSAValue] = []
    for op in group:
        for v in op.operands:
            if v not in inside and v not in out:
                out.append(v)
    return out


def _build_fused(block: Block, group: list[Operation], index: int) -> None:
    inputs = _outside_operands(group)
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for op in group:
        body.add_op(op.clone(value_mapper=mapping))  # maps operands, records results
    last = group[-1]
    body.add_op(g.YieldOp.create(operands=[mapping[last.results[0]]]))
    kernel = "_".join(_short(op) for op in group) + f"_{index}"
    fused = g.FusedOp(kernel, inputs, last.results[0].type, Region([body]))
    fused.results[0].name_hint = last.results[0].name_hint
    block.insert_op_before(fused, last)
    last.results[0].replace_all_uses_with(fused.results[0])
    for op in reversed(group):
        block.erase_op(op)


def fuse_vertical(block: Block, start: int = 0, max_chain: int = 32) -> int:
    memo: dict = {}
    static = {op for op in block.ops if op.results and u.is_static(op.results[0], memo)}
    taken: set[Operation] = set(static)  # weight-only work is folded, not fused
    position = {op: i for i, op in enumerate(block.ops)}
    zone = _zones(block)
    chains = []
    for seeds in (ANCHORS, ELEMENTWISE):  # anchors first: they take their epilogues
        for op in block.ops:
            if op in taken or not isinstance(op, seeds):
                continue
            chain = _chain(position, op, taken, max_chain, zone)
            if len(chain) >= 2:
                taken.update(chain)
                chains.append(chain)
    for i, chain in enumerate(chains):
        _build_fused(block, chain, start + i)
    return len(chains)


@dataclass(frozen=True)
class GraphFuse(ModulePass):
    """graph-fuse{horizontal=true vertical=true max-chain=32}: fewer, bigger kernels."""

    name = "graph-fuse"

    horizontal: bool = True
    vertical: bool = True
    max_chain: int = 32
    """Most ops in one fused kernel."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_chain < 2:
            raise DlpcError(f"error: graph-fuse max-chain must be >= 2, got {self.max_chain}")
        count = 0
        for fn in u.funcs(op):
            for block in fn.body.blocks:
                if self.horizontal:
                    fuse_horizontal(block)
                if self.vertical:
                    count += fuse_vertical(block, count, self.max_chain)
