"""Data parallelism (PyTorch DDP): every rank runs the whole step on its share of the
global batch; the gradients are averaged across the ranks before the update.

Input: graph, func: the output of `graph-autodiff{aux=true}` at the per-rank batch:
@main returns the loss, `grad.<param>` for the params (result attribute `dlpc.name`),
then the metrics (`aux`, counts over the rank's samples such as `correct`).
Output: the same, each param gradient replaced by its mean over the ranks: gradients are
grouped in buckets of at most `bucket-mb` MiB in the order the backward produces them
(last layer first, as DDP), one `comm.all_reduce avg` per bucket (one message); the loss
is averaged and the metrics summed, so every rank returns the global batch's values.
Requires: `ranks` >= 1; with `batch` (the global batch), `batch` divides by `ranks` and
the inputs' leading dim is `batch / ranks`.
Guarantees: with equal shares, the mean of the ranks' mean-loss gradients is the
gradient of the global batch's mean loss, so the update equals one device's on the
global batch (up to summation order). The initial params are rank 0's: the runtime
broadcasts them once before the first step (`dlpc.dist`); the per-rank samples come from
`dlpc.dist.shard` (disjoint per epoch, reshuffled by the epoch's seed).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import comm, graph
from dlpc.dialects.sizes import element_bytes

MIB = 1 << 20


def main_of(module: ModuleOp, who: str = "graph-data-parallel") -> func.FuncOp:
    """The module's func.func @main; else a diagnostic naming the pass `who`."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            return op
    raise DiagnosticException(f"{who}: the module has no func.func @main")


def check_batch(f: func.FuncOp, ranks: int, batch: int, who: str = "graph-data-parallel"):
    """With a global `batch`: it divides by `ranks`, and every input is a rank's share."""
    if not batch:
        return
    if batch % ranks:
        raise DiagnosticException(f"{who}: the batch {batch} does not divide by ranks {ranks}")
    for arg in f.args:
        shape = graph.shape_of(arg)
        if not shape or shape[0] != batch // ranks:
            raise DiagnosticException(
                f"{who}: input of shape {graph.fmt_shape(shape)} is not a share of "
                f"{batch // ranks} of the batch {batch} over {ranks} ranks"
            )


def result_names(f: func.FuncOp) -> list[str]:
    """@main's results' `dlpc.name`s ('' where none)."""
    names = []
    for a in f.res_attrs.data if f.res_attrs is not None else ():
        name = a.data.get("dlpc.name") if isinstance(a, DictionaryAttr) else None
        names.append(name.data if isinstance(name, StringAttr) else "")
    return names + [""] * (len(f.function_type.outputs) - len(names))


def buckets(grads: list[SSAValue], bucket_bytes: float) -> list[list[SSAValue]]:
    """`grads` (in the backward's order) in consecutive groups of at most
    `bucket_bytes` each (a larger gradient is a bucket of its own)."""
    out: list[list[SSAValue]] = []
    size = 0
    for g in grads:
        nbytes = element_bytes(graph.element_type_of(g))
        for d in graph.shape_of(g):
            nbytes *= d
        if out and size + nbytes <= bucket_bytes:
            out[-1].append(g)
            size += nbytes
        else:
            out.append([g])
            size = nbytes
    return out


def data_parallel(
    module: ModuleOp,
    ranks: int,
    bucket_mb: float,
    batch: int = 0,
    group: comm.GroupAttr | None = None,
) -> None:
    """See the module docstring; `group`: the ranks that share the batch (default all
    `ranks`; a mesh's dp axis for hybrid parallelism, `ranks` then being its size)."""
    if ranks < 1:
        raise DiagnosticException(f"graph-data-parallel: ranks must be >= 1, got {ranks}")
    if bucket_mb <= 0:
        raise DiagnosticException(f"graph-data-parallel: bucket-mb must be > 0, got {bucket_mb}")
    f = main_of(module)
    check_batch(f, ranks, batch)
    names = result_names(f)
    params = {op.pname for op in f.body.block.ops if isinstance(op, graph.ParamOp)}
    ret = f.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    results = list(ret.operands)
    grad_at = [k for k, n in enumerate(names) if n.startswith("grad.") and n[5:] in params]
    if not grad_at:
        raise DiagnosticException(
            "graph-data-parallel: @main returns no grad.<param> results; run "
            "graph-autodiff{aux=true} first"
        )
    group = group or comm.GroupAttr.of(ranks)
    new = list(results)

    def all_reduce(values: list[SSAValue], kind: str, point: InsertPoint) -> list[SSAValue]:
        op = comm.AllReduceOp(values, kind, group)
        Rewriter.insert_op(op, point)
        return list(op.results)

    # buckets in the order the backward produces the gradients (the last layer's first);
    # each bucket's all-reduce right after its last gradient, where it could start while
    # the rest of the backward runs
    order = sorted(grad_at, key=lambda k: _position(results[k]))
    for bucket in buckets([results[k] for k in order], bucket_mb * MIB):
        last = max(bucket, key=_position).owner
        point = InsertPoint.after(last) if isinstance(last, Operation) else InsertPoint.before(ret)
        for value, reduced in zip(bucket, all_reduce(bucket, "avg", point)):
            for k in grad_at:
                if results[k] is value:
                    new[k] = reduced
    end = InsertPoint.before(ret)
    (new[0],) = all_reduce([results[0]], "avg", end)
    aux = [k for k in range(1, len(results)) if k not in grad_at]
    if aux:
        for k, reduced in zip(aux, all_reduce([results[k] for k in aux], "sum", end)):
            new[k] = reduced
    ret.operands = new


def _position(value: SSAValue) -> int:
    """Where the value is defined in @main's block (a block argument: -1)."""
    owner = value.owner
    if not isinstance(owner, Operation) or owner.parent is None:
        return -1
    return owner.parent.get_operation_index(owner)


@dataclass(frozen=True)
class GraphDataParallel(ModulePass):
    """Average the step's gradients over `ranks` ranks (see the module docstring)."""

    name = "graph-data-parallel"

    ranks: int = 2
    bucket_mb: float = 25.0
    batch: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        data_parallel(op, self.ranks, self.bucket_mb, self.batch)
