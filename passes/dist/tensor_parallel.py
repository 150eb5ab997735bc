"""Tensor parallelism (Megatron-LM): MLP linear pairs, attention heads and conv output
channels split over ranks.

Input: graph, func: a forward model (@main, static shapes, before graph-autodiff).
Output: the program of every rank (SPMD) where each pair

    h = act(linear(x, W1, b1))      W1 [H, D] column-parallel: rank r keeps rows r of n
    y = linear(h, W2, b2)           W2 [O, H] row-parallel: rank r keeps columns r of n

becomes `y = all_reduce sum(linear(h_r, W2_r)) + b2` with h_r = act(linear(x, W1_r, b1_r))
[.., H/n]; the sharded params carry `dlpc.shard_dim` (the dim split in n equal parts,
rank r holding part r: `shard_weights`), printed in the IR. `act` is a chain of
attribute-free elementwise unary ops (relu, tanh, sigmoid, ...); a pair's middle value
has no other use. Linears in no such pair stay whole (replicated).
Requires: H divides by `ranks` (else one line naming the param and both numbers).
Guarantees: forward results equal the unsplit model's (up to summation order).

Attention (`_attention`), split by heads: a row linear `o = linear(merge(a), Wo, bo)`
whose input comes, through head-local ops only (transpose, matmul over batch dims,
softmax and elementwise ops on other axes, constants without a head dim), from
projections `linear(x, W, b)` each reshaped [.., D] -> [.., H, dh]. Each projection's W
and b are split by rows (rank r: heads r*H/n ... of its H), the region rebuilt with H/n
heads, the merge reshaped to [.., D/n], and Wo split by columns with its all_reduce sum,
then bo added once. Requires: H divides by `ranks` (else one line naming the projection's
param, H and the ranks). An attention whose region has any other op stays whole.

Convs (`_convs`), split by output channels: `conv2d(x, W, b)` with groups 1 and W [O, ..]
a param: rank r keeps W's and b's part r along O, then any elementwise unary chain on its
O/n channels, then `comm.all_gather dim 1` gives the next layer every channel.
Requires: O divides by `ranks` (else one line naming the param).

Every all_reduce / all_gather's adjoint sums the ranks' adjoints (all_reduce sum,
reduce_scatter sum), so a sharded param's gradient is n times the loss's and the ranks'
copies of a replicated one average to the loss's, for every split above alike.

Backward (graph-autodiff with the comm rules of passes/train/_comm_grad.py): the all_reduce's adjoint is an
all_reduce of the loss's adjoint, so the objective is the sum of the ranks' (equal)
losses, n times the loss. `tensor_parallel_grads` (after graph-autodiff) restores the
loss's gradients: a sharded param's gradient divided by n; a replicated one averaged
over the ranks (its copies' gradients, summed over the ranks as n copies of one param,
then divided by n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm, graph
from dlpc.passes.dist.data_parallel import main_of, result_names
from dlpc.passes.graph._util import rebuild
from dlpc.passes.lower.te_inline import erase

SHARD = "dlpc.shard_dim"


def _param(value: SSAValue) -> graph.ParamOp | None:
    owner = value.owner
    return owner if isinstance(owner, graph.ParamOp) and value.has_one_use() else None


def _single_user(value: SSAValue) -> Operation | None:
    return next(iter(value.uses)).operation if value.has_one_use() else None


def _unary_chain(op: Operation) -> tuple[list[Operation], Operation | None]:
    """The plain elementwise ops that follow `op`, each the single user of the one
    before (they commute with a split along the channels), and the user after them."""
    chain: list[Operation] = []
    user = _single_user(op.results[0])
    while isinstance(user, graph.UnaryOp) and user.has_default_properties() and not user.attributes:
        chain.append(user)
        user = _single_user(user.results[0])
    return chain, user


def _pairs(f: func.FuncOp) -> list[tuple[Operation, list[Operation], Operation]]:
    """(column linear, elementwise chain, row linear) triples, in program order."""
    pairs = []
    taken: set[Operation] = set()
    for op in f.body.block.ops:
        if not isinstance(op, graph.LinearOp) or op in taken:
            continue
        if _param(op.operands[1]) is None:
            continue
        if len(op.operands) == 3 and _param(op.operands[2]) is None:
            continue
        chain, user = _unary_chain(op)
        if (
            not isinstance(user, graph.LinearOp)
            or user.operands[0] is not (chain[-1] if chain else op).results[0]
        ):
            continue
        if _param(user.operands[1]) is None:
            continue
        pairs.append((op, chain, user))
        taken.update((op, user))
    return pairs


def _shard_param(p: graph.ParamOp, dim: int, ranks: int) -> SSAValue:
    """A new param op of shard `dim` (1/ranks of it), annotated."""
    shape = list(graph.shape_of(p.output))
    if shape[dim] % ranks:
        raise DiagnosticException(
            f"graph-tensor-parallel: {p.pname} has {shape[dim]} entries along dim {dim}, "
            f"which do not divide by ranks {ranks}"
        )
    shape[dim] //= ranks
    new = graph.ParamOp(p.pname, graph.tensor_type(shape, graph.element_type_of(p.output)))
    new.attributes[SHARD] = IntegerAttr(dim, 64)
    Rewriter.insert_op(new, InsertPoint.before(p))
    new.output.name_hint = p.output.name_hint
    return new.output


_HEAD_LOCAL = (
    graph.TransposeOp,
    graph.MatMulOp,
    graph.SoftmaxOp,
    graph.UnaryOp,
    graph.BinaryOp,
    graph.ReshapeOp,
)


def _projection(op: Operation | None) -> bool:
    """A linear with its weight (and bias) params used once, its result used once by a
    reshape [.., D] -> [.., H, dh]."""
    if not isinstance(op, graph.LinearOp) or _param(op.operands[1]) is None:
        return False
    if len(op.operands) == 3 and _param(op.operands[2]) is None:
        return False
    user = _single_user(op.results[0])
    if not isinstance(user, graph.ReshapeOp):
        return False
    d, out = graph.shape_of(op.results[0]), graph.shape_of(user.results[0])
    return len(out) == len(d) + 1 and out[:-2] == d[:-1] and out[-2] * out[-1] == d[-1]


def _head_region(
    merged: SSAValue,
) -> tuple[list[graph.LinearOp], list[Operation]] | None:
    """The projections and the head-local ops (program order) that `merged` comes from,
    or None where anything else feeds it."""
    projections: list[graph.LinearOp] = []
    region: set[Operation] = set()
    todo = [merged]
    while todo:
        value = todo.pop()
        op = value.owner
        if not isinstance(op, Operation):
            return None  # a block argument reached without a projection
        if op in region or op in projections:
            continue
        if _projection(op):
            projections.append(op)  # type: ignore[arg-type]
            continue
        if isinstance(op, graph.ConstantOp):
            continue
        if not isinstance(op, _HEAD_LOCAL) or len(op.results) != 1 or op.regions:
            return None
        region.add(op)
        todo.extend(op.operands)
    if not projections:
        return None
    for op in region:  # nothing outside reads the per-head values
        for use in op.results[0].uses:
            if use.operation not in region and op.results[0] is not merged:
                return None
    block = merged.owner.parent_block()  # type: ignore[union-attr]
    assert block is not None
    order = {op: k for k, op in enumerate(block.ops)}
    return sorted(projections, key=order.__getitem__), sorted(region, key=order.__getitem__)


def _head_axes(
    projections: list[graph.LinearOp], region: list[Operation], merged: SSAValue
) -> dict[SSAValue, int] | None:
    """The axis that holds the heads in each value of the region (projections' outputs:
    the last), or None where an op would mix heads."""
    axes: dict[SSAValue, int] = {p.results[0]: -1 for p in projections}
    for op in region:
        ins = [(v, axes[v]) for v in op.operands if v in axes]
        if not ins:
            return None
        out = graph.shape_of(op.results[0])
        v, a = ins[0]
        rank = len(graph.shape_of(v))
        a %= rank
        if isinstance(op, graph.ReshapeOp):
            x = graph.shape_of(v)
            if a == rank - 1 and v.owner in projections:  # split: [.., D] -> [.., H, dh]
                axis = len(out) - 2
            elif a == rank - 2 and op.results[0] is merged and out[-1] == x[-2] * x[-1]:
                axis = len(out) - 1  # merge: [.., H, dh] -> [.., D]
            else:
                return None
        elif isinstance(op, graph.TransposeOp):
            axis = list(op.perm).index(a)  # type: ignore[attr-defined]
        else:
            if len(out) != rank or any(b % len(graph.shape_of(u)) != a for u, b in ins):
                return None
            if isinstance(op, graph.MatMulOp) and a >= rank - 2:
                return None  # heads must be a batch dim
            if isinstance(op, graph.SoftmaxOp) and op.axis % rank == a:
                return None
            for u in op.operands:  # constants: no head dim to split
                s = graph.shape_of(u)
                if u not in axes and len(s) > rank - a and s[a - rank] != 1:
                    return None
            axis = a
        axes[op.results[0]] = axis
    return axes


def _attention(f: func.FuncOp, ranks: int, group: comm.GroupAttr, sharded: dict[str, int]) -> None:
    """Split every attention of @main by heads (see the module docstring)."""
    for row in [op for op in f.body.block.ops if isinstance(op, graph.LinearOp)]:
        if row.parent is None or _param(row.operands[1]) is None:
            continue  # (erased: a projection of an attention split before)
        merged = row.operands[0]
        if not isinstance(merged.owner, graph.ReshapeOp) or not merged.has_one_use():
            continue
        found = _head_region(merged)
        axes = found and _head_axes(*found, merged)
        if not found or not axes:
            continue
        projections, region = found
        for p in projections:
            reshape = _single_user(p.results[0])
            heads = graph.shape_of(reshape.results[0])[-2]  # type: ignore[union-attr]
            if heads % ranks:
                raise DiagnosticException(
                    f"graph-tensor-parallel: the attention projection "
                    f"{p.operands[1].owner.pname} has {heads} heads, which do not divide "  # type: ignore[union-attr]
                    f"by ranks {ranks}"
                )
        new: dict[SSAValue, SSAValue] = {}
        for p in projections:
            operands = [p.operands[0]]
            for param in p.operands[1:]:
                operands.append(_shard_param(param.owner, 0, ranks))  # type: ignore[arg-type]
                sharded[param.owner.pname] = 0  # type: ignore[union-attr]
            new[p.results[0]] = _insert(graph.LinearOp.make(*operands), InsertPoint.before(p))
            new[p.results[0]].name_hint = p.results[0].name_hint
        for op in region:
            override: dict[str, Attribute] = {}
            if isinstance(op, graph.ReshapeOp):
                shape = list(graph.shape_of(op.results[0]))
                shape[axes[op.results[0]]] //= ranks
                override["shape"] = DenseArrayBase.from_list(i64, shape)
            assert isinstance(op, graph.GraphOp)
            clone = rebuild(op, [new.get(v, v) for v in op.operands], **override)
            new[op.results[0]] = _insert(clone, InsertPoint.before(op))
            new[op.results[0]].name_hint = op.results[0].name_hint
        wo = _shard_param(row.operands[1].owner, 1, ranks)  # type: ignore[arg-type]
        sharded[row.operands[1].owner.pname] = 1  # type: ignore[union-attr]
        at = InsertPoint.before(row)
        partial = _insert(graph.LinearOp.make(new[merged], wo), at)
        y = _insert(comm.AllReduceOp([partial], "sum", group), at)
        if len(row.operands) == 3:
            y = _insert(graph.AddOp.make(y, row.operands[2]), at)
        row.results[0].replace_all_uses_with(y)
        y.name_hint = row.results[0].name_hint
        for op in [row, *reversed(region)]:
            erase(op)
        for p in projections:
            erase(p)


def _convs(f: func.FuncOp, ranks: int, group: comm.GroupAttr, sharded: dict[str, int]) -> None:
    """Split every groups-1 conv of @main with param weights by output channels."""
    for conv in [op for op in f.body.block.ops if isinstance(op, graph.Conv2DOp)]:
        if conv.groups != 1 or _param(conv.operands[1]) is None:
            continue
        if len(conv.operands) == 3 and _param(conv.operands[2]) is None:
            continue
        operands = [conv.operands[0]]
        for param in conv.operands[1:]:
            operands.append(_shard_param(param.owner, 0, ranks))  # type: ignore[arg-type]
            sharded[param.owner.pname] = 0  # type: ignore[union-attr]
        at = InsertPoint.before(conv)
        h = _insert(rebuild(conv, operands), at)
        chain, _ = _unary_chain(conv)
        last = chain[-1] if chain else conv
        for op in chain:
            unary = type(op)
            assert issubclass(unary, graph.UnaryOp)
            h = _insert(unary.make(h), at)
        gathered = comm.AllGatherOp.create(
            operands=[h],
            result_types=[last.results[0].type],
            properties={"dim": IntegerAttr(1, 64), "group": group},
        )
        y = _insert(gathered, at)
        last.results[0].replace_all_uses_with(y)
        y.name_hint = last.results[0].name_hint
        for op in [*reversed(chain), conv]:
            erase(op)


def tensor_parallel(
    module: ModuleOp, ranks: int, group: comm.GroupAttr | None = None
) -> dict[str, int]:
    """Split the linear pairs of @main over `ranks`; the sharded params' dims by name.
    `group`: the ranks that share a layer (default all; a mesh's tp axis for hybrids)."""
    if ranks < 1:
        raise DiagnosticException(f"graph-tensor-parallel: ranks must be >= 1, got {ranks}")
    f = main_of(module, "graph-tensor-parallel")
    group = group or comm.GroupAttr.of(ranks)
    sharded: dict[str, int] = {}
    _attention(f, ranks, group, sharded)
    for col, chain, row in _pairs(f):
        w1 = _shard_param(col.operands[1].owner, 0, ranks)  # type: ignore[arg-type]
        operands = [col.operands[0], w1]
        sharded[col.operands[1].owner.pname] = 0  # type: ignore[union-attr]
        if len(col.operands) == 3:
            operands.append(_shard_param(col.operands[2].owner, 0, ranks))  # type: ignore[arg-type]
            sharded[col.operands[2].owner.pname] = 0  # type: ignore[union-attr]
        w2 = _shard_param(row.operands[1].owner, 1, ranks)  # type: ignore[arg-type]
        sharded[row.operands[1].owner.pname] = 1  # type: ignore[union-attr]
        at = InsertPoint.before(row)
        h = _insert(graph.LinearOp.make(*operands), at)
        for op in chain:
            unary = type(op)
            assert issubclass(unary, graph.UnaryOp)  # (what _pairs chains)
            h = _insert(unary.make(h), at)
        partial = _insert(graph.LinearOp.make(h, w2), at)
        y = _insert(comm.AllReduceOp([partial], "sum", group), at)
        if len(row.operands) == 3:
            y = _insert(graph.AddOp.make(y, row.operands[2]), at)
        row.results[0].replace_all_uses_with(y)
        y.name_hint = row.results[0].name_hint
        for op in [row, *reversed(chain), col]:
            erase(op)
    _convs(f, ranks, group, sharded)
    for op in list(f.body.block.ops):  # the unsplit params, now unused
        if isinstance(op, graph.ParamOp) and not op.output.uses and SHARD not in op.attributes:
            erase(op)
    return sharded


def _insert(op: Operation, at: InsertPoint) -> SSAValue:
    Rewriter.insert_op(op, at)
    return op.results[0]


def sharded_params(module: ModuleOp) -> dict[str, int]:
    """The params graph-tensor-parallel split, with the dim it split."""
    out: dict[str, int] = {}
    for op in module.walk():
        if isinstance(op, graph.ParamOp) and SHARD in op.attributes:
            attr = op.attributes[SHARD]
            assert isinstance(attr, IntegerAttr)
            out[op.pname] = attr.value.data
    return out


def shard_weights(
    weights: dict[str, np.ndarray], sharded: dict[str, int], rank: int, ranks: int
) -> dict[str, np.ndarray]:
    """Rank `rank`'s weights: part `rank` of `ranks` of each sharded one, the rest whole."""
    return {
        name: np.ascontiguousarray(np.split(w, ranks, axis=sharded[name])[rank])
        if name in sharded
        else w
        for name, w in weights.items()
    }


def tensor_parallel_grads(
    module: ModuleOp, ranks: int, group: comm.GroupAttr | None = None
) -> None:
    """After graph-autodiff{aux=true}: a sharded param's gradient divided by `ranks`, a
    replicated param's averaged over the ranks (see the module docstring)."""
    f = main_of(module, "graph-tensor-parallel")
    sharded = sharded_params(module)
    params = {op.pname for op in f.body.block.ops if isinstance(op, graph.ParamOp)}
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    results = list(ret.operands)
    group = group or comm.GroupAttr.of(ranks)
    at = InsertPoint.before(ret)
    replicated: list[int] = []
    for k, name in enumerate(result_names(f)):
        if not name.startswith("grad.") or name[5:] not in params:
            continue
        if name[5:] in sharded:
            scale = graph.ConstantOp.from_numpy(np.asarray(1.0 / ranks, np.float32))
            results[k] = _insert(graph.MulOp.make(results[k], _insert(scale, at)), at)
        else:
            replicated.append(k)
    for k in replicated:
        results[k] = _insert(comm.AllReduceOp([results[k]], "avg", group), at)
    ret.operands = results


@dataclass(frozen=True)
class GraphTensorParallel(ModulePass):
    """Split MLP linear pairs column- then row-parallel (see the module docstring)."""

    name = "graph-tensor-parallel"

    ranks: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tensor_parallel(op, self.ranks)
