"""The same graph over a chunk of the batch, for a batch that runs chunk after chunk.

    plan = chunk_plan(module, budget)      # (B, chunk) or None
    small = rebatch(module, chunk)         # @main over chunk images, or None

Input: graph IR before fusion (what `dlpc.load` gives): one `@main`, every argument
and result of size B along dim 0. Output (`rebatch`): a copy whose arguments and
results are of size `chunk` along dim 0 and whose other types are re-inferred
(graph-infer-shapes); None when the graph is not per-sample.
Guarantees: per-sample means every op that reads a batch value (one computed from an
argument) treats dim 0 as independent images: elementwise ops (a broadcast operand
without dim 0), conv / pooling / batch norm / linear / matmul on the batch operand
alone, reductions and softmax-like ops off axis 0, padding off dim 0, reshape keeping
dim 0. Then
running the copy on images [k*chunk, (k+1)*chunk) gives those rows of every result,
and calling it B/chunk times is the whole call. Anything else (a concat, a slice, a
transpose, a gather, a reduction over dim 0, control flow, fused ops) leaves the
graph whole.

A batched call streams every intermediate of the whole batch through the caches: a
MobileNetV2-style net at batch 32 moves 12.6 MB per expanded tensor, twice the time
per image of batch 1. `chunk_plan` picks the largest chunk whose per-sample working
set (the largest op's batch operands and result, per image, times the chunk) stays
within `budget` bytes, or None when the whole batch does already
(docs/design/c-backend.md#batch-chunks).
"""

from __future__ import annotations

import math

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.passes.graph.infer_shapes import infer_module

# The working set a chunk may have (`chunk_plan`): half the L2 of one core of the x86
# CPUs measured (1 MB on Zen 4/5; Intel's 1.25-2 MB), room left for the weights and the
# next kernel's output (docs/design/c-backend.md#batch-chunks)
CHUNK_BUDGET_BYTES = 1 << 19

# ops that act on their first operand per image when it is the only batch operand
_FIRST_ONLY = (g.WindowOp, g.GlobalAvgPoolOp, g.BatchNormOp, g.LinearOp, g.MatMulOp)


def _shape(v: SSAValue) -> tuple[int, ...] | None:
    t = v.type
    if not isinstance(t, TensorType):
        return None
    shape = tuple(t.get_shape())
    return shape if all(d >= 0 for d in shape) else None


def _main(module: ModuleOp) -> func.FuncOp | None:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(funcs) != 1 or funcs[0].sym_name.data != "main" or not funcs[0].body.blocks:
        return None
    return funcs[0]


def _per_sample(op: Operation, batch: set[SSAValue], B: int) -> bool:
    """Whether `op`, some of whose operands are batch values, treats dim 0 per image."""
    shapes = [_shape(v) for v in op.operands]
    out = [_shape(r) for r in op.results]
    if len(out) != 1 or out[0] is None or not out[0] or out[0][0] != B or None in shapes:
        return False
    rank = len(out[0])
    on = [v in batch for v in op.operands]
    if isinstance(op, g.UnaryOp):
        return True
    if isinstance(op, (g.BinaryOp, g.PReluOp)):
        for s, b in zip(shapes, on):
            assert s is not None
            if b and (len(s) != rank or s[0] != B):
                return False
            if not b and len(s) == rank and s[0] != 1:
                return False
        return True
    if isinstance(op, _FIRST_ONLY):
        return on[0] and not any(on[1:])
    if isinstance(op, g.ReduceOp):
        return 0 not in op.reduced_axes()
    if isinstance(op, g.AxisOp):
        return op.axis % rank != 0
    if isinstance(op, g.PadOp):  # (pads: begins then ends; none along dim 0)
        return len(op.pads) == 2 * rank and op.pads[0] == 0 and op.pads[rank] == 0
    if isinstance(op, g.ReshapeOp):
        first = shapes[0]
        return first is not None and bool(first) and first[0] == B and op.shape[0] in (0, B)
    return False


def batch_values(module: ModuleOp) -> tuple[int, set[SSAValue]] | None:
    """(B, the values computed from @main's arguments) when the graph is per-sample."""
    main = _main(module)
    if main is None:
        return None
    block = main.body.blocks.first
    assert block is not None
    shapes = [_shape(a) for a in block.args]
    if not shapes or any(not s for s in shapes):
        return None
    B = shapes[0][0]  # pyright: ignore[reportOptionalSubscript]
    if B < 2 or any(s[0] != B for s in shapes):  # pyright: ignore[reportOptionalSubscript]
        return None
    batch: set[SSAValue] = set(block.args)
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            if not op.operands or any(
                v not in batch or (_shape(v) or (0,))[0] != B for v in op.operands
            ):
                return None
            continue
        if op.regions:
            return None
        if any(v in batch for v in op.operands):
            if not _per_sample(op, batch, B):
                return None
            batch.update(op.results)
    return B, batch


def chunk_plan(module: ModuleOp, budget: int, team: int = 1) -> tuple[int, int] | None:
    """(B, chunk): the largest divisor of B whose working set (see the module docstring)
    fits `budget` bytes, at least 1, and at least `team` (the threads that run a chunk's
    kernels) when team divides B: one image a thread rather than one image split over
    the team; None when the graph is not per-sample or the whole batch fits (or the
    floor is the whole batch)."""
    found = batch_values(module)
    if found is None:
        return None
    B, batch = found
    main = _main(module)
    assert main is not None and main.body.blocks.first is not None
    largest = 0
    for op in main.body.blocks.first.ops:
        values = [v for v in (*op.operands, *op.results) if v in batch]
        if values:
            size = sum(math.prod(_shape(v) or ()) * _itemsize(v) for v in dict.fromkeys(values))
            largest = max(largest, size)
    if largest <= budget:
        return None
    per_image = largest / B
    chunk = max((d for d in range(1, B) if B % d == 0 and d * per_image <= budget), default=1)
    if chunk < team and B % team == 0:
        # an image whose working set outgrows the team's budget (MobileNetV2 at 2 threads)
        # still runs one a thread: split over the team, each kernel's rows or channels
        # are shared between cores and every kernel forks per image
        # (docs/design/c-backend.md#batch-chunks)
        chunk = team
    return (B, chunk) if chunk < B else None


def _itemsize(v: SSAValue) -> int:
    t = v.type
    assert isinstance(t, TensorType)
    width = getattr(t.get_element_type(), "bitwidth", 32)
    return max(1, width // 8)


def rebatch(module: ModuleOp, chunk: int) -> ModuleOp | None:
    """A copy of `module` over `chunk` images (see the module docstring), or None."""
    found = batch_values(module)
    if found is None:
        return None
    B, _ = found
    if chunk < 1 or B % chunk:
        return None
    copy = module.clone()
    main = _main(copy)
    assert main is not None and main.body.blocks.first is not None
    block = main.body.blocks.first
    for arg in block.args:
        t = arg.type
        assert isinstance(t, TensorType)
        Rewriter.replace_value_with_new_type(
            arg, TensorType(t.get_element_type(), [chunk, *t.get_shape()[1:]])
        )
    for op in block.ops:
        if isinstance(op, g.ReshapeOp) and op.shape[0] == B:
            values = [chunk, *op.shape[1:]]
            op.properties["shape"] = DenseArrayBase.from_list(i64, values)
    try:
        infer_module(copy)
    except VerifyException:
        return None
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    if any((_shape(v) or (0,))[0] != chunk for v in ret.operands):
        return None
    return copy
