"""A synchronous parameter server: rank `server` holds the params and applies the
updates; every rank pulls the params at the start of a step and pushes its gradients.

Input: graph, func: the output of `graph-autodiff{aux=true}` at the per-rank batch (as
graph-data-parallel).
Output: each param read through `comm.broadcast` from the server (the pull: the forward
and backward use the server's values); each param gradient replaced by
`comm.reduce avg` to the server (the push: the server gets the mean of the ranks'
gradients, the other ranks zeros, so the update appended after this pass changes the
server's params only: SGD and Adam leave a param with zero gradients as it is); the loss
averaged and the metrics summed over every rank, as graph-data-parallel.
Requires: as graph-data-parallel; `server` a rank.
Guarantees: the server's params after k steps are one device's on the same global
batches; the others' stored copies are stale, and never read (every step pulls).
The server also computes a share of the batch (it is worker 0 as well). The
asynchronous server with bounded staleness orders pushes and pulls at run time, which
no static program expresses: dlpc.dist.parameter_server (its staleness 0 is this pass's
synchronous run).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm, graph
from dlpc.passes.dist.data_parallel import check_batch, main_of, result_names


def parameter_server(module: ModuleOp, ranks: int, batch: int = 0, server: int = 0) -> None:
    if ranks < 1:
        raise DiagnosticException(f"graph-parameter-server: ranks must be >= 1, got {ranks}")
    if not 0 <= server < ranks:
        raise DiagnosticException(
            f"graph-parameter-server: server {server} is not a rank of {ranks}"
        )
    f = main_of(module, "graph-parameter-server")
    check_batch(f, ranks, batch, "graph-parameter-server")
    names = result_names(f)
    params = [op for op in f.body.block.ops if isinstance(op, graph.ParamOp)]
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    results = list(ret.operands)
    grad_at = [
        k
        for k, n in enumerate(names)
        if n.startswith("grad.") and n[5:] in {p.pname for p in params}
    ]
    if not grad_at:
        raise DiagnosticException(
            "graph-parameter-server: @main returns no grad.<param> results; run "
            "graph-autodiff{aux=true} first"
        )
    group = comm.GroupAttr.of(ranks)
    # pull: every use of a param reads the server's value
    for p in params:
        pulled = comm.BroadcastOp(p.output, server, group)
        Rewriter.insert_op(pulled, InsertPoint.after(p))
        p.output.replace_uses_with_if(
            pulled.output, lambda use, pulled=pulled: use.operation is not pulled
        )
    # push: the mean gradient to the server, right after each gradient is made
    new = list(results)
    for k in grad_at:
        g = results[k]
        owner = g.owner
        at = InsertPoint.after(owner) if isinstance(owner, Operation) else InsertPoint.before(ret)
        push = comm.ReduceOp(g, "avg", server, group)
        Rewriter.insert_op(push, at)
        new[k] = push.output
    end = InsertPoint.before(ret)
    loss = comm.AllReduceOp([results[0]], "avg", group)
    Rewriter.insert_op(loss, end)
    new[0] = loss.results[0]
    aux = [k for k in range(1, len(results)) if k not in grad_at]
    if aux:
        metrics = comm.AllReduceOp([results[k] for k in aux], "sum", group)
        Rewriter.insert_op(metrics, end)
        for k, v in zip(aux, metrics.results):
            new[k] = v
    ret.operands = new


@dataclass(frozen=True)
class GraphParameterServer(ModulePass):
    """Pull params from and push gradients to rank `server` (see the module docstring)."""

    name = "graph-parameter-server"

    ranks: int = 2
    batch: int = 0
    server: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        parameter_server(op, self.ranks, self.batch, self.server)
