"""Tensor parallelism (Megatron-LM): each linear pair of an MLP block split over ranks.

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

Backward (graph-autodiff with the comm rules of passes/train/comm_grad.py): the all_reduce's adjoint is an
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
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm, graph
from dlpc.passes.dist.data_parallel import main_of, result_names
from dlpc.passes.lower.te_inline import erase

SHARD = "dlpc.shard_dim"


def _param(value: SSAValue) -> graph.ParamOp | None:
    owner = value.owner
    return owner if isinstance(owner, graph.ParamOp) and value.has_one_use() else None


def _single_user(value: SSAValue) -> Operation | None:
    return next(iter(value.uses)).operation if value.has_one_use() else None


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
        chain: list[Operation] = []
        user = _single_user(op.results[0])
        while (
            isinstance(user, graph.UnaryOp)
            and user.has_default_properties()
            and not user.attributes
        ):
            chain.append(user)
            user = _single_user(user.results[0])
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
