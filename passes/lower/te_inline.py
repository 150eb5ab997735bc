"""Inline elementwise/injective te.computes into their consumers (TVM's compute_inline).

Input: te (+ arith, math, scf inside bodies).  Output: te, with fewer computes.
Requires: nothing beyond valid te.
Guarantees: every inlined te.compute is gone; each `te.read %p[idx]` of it was replaced
by a copy of its body with its index arguments bound to `idx`; numerics are unchanged
(te is pure). A compute is inlined only when all its uses are te.reads (a value
returned from the function stays materialised).

    %p = te.compute "exp_0" (%i0) : tensor<8xf32> {
      %v = te.read %x[%i0] : tensor<8xf32>
      %e = math.exp %v : f32
      te.yield %e : f32
    }
    %q = te.compute "neg_1" (%i0) : tensor<8xf32> {
      %v = te.read %p[%i0] : tensor<8xf32>
      %n = arith.negf %v : f32
      te.yield %n : f32
    }

becomes

    %q = te.compute "neg_1" (%i0) : tensor<8xf32> {
      %v = te.read %x[%i0] : tensor<8xf32>
      %e = math.exp %v : f32
      %n = arith.negf %e : f32
      te.yield %n : f32
    }

`names` restricts inlining to the computes named (`te-inline{names=exp_0}`); naming a
te.reduce or a compute that does not exist is an error.

Also here: `fold_into_epilogue`, used by graph-to-te for graph.fused, which turns
"a compute that reads a reduction at its own index" into that reduction's epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects.te import NSW_SUM, SYMBOLIC_OVER, ComputeOp, ReadOp, ReduceOp


def erase(op: Operation) -> None:
    op.detach()
    op.erase()


def readers(op: Operation) -> list[ReadOp] | None:
    """The te.reads of op's result, or None when some use is not a te.read."""
    uses = [u.operation for u in op.results[0].uses]
    reads = [u for u in uses if isinstance(u, ReadOp) and u.tensor is op.results[0]]
    return reads if len(reads) == len(uses) else None


def inline_read(producer: ComputeOp, read: ReadOp) -> SSAValue:
    """Replace one `te.read %producer[idx]` by a copy of the producer's body."""
    block = producer.body.block
    mapper: dict[SSAValue, SSAValue] = dict(zip(block.args, read.indices))
    parent = read.parent_block()
    assert parent is not None
    for op in block.ops:
        if op is producer.yield_op:
            break
        parent.insert_op_before(op.clone(value_mapper=mapper), read)
    value = producer.yield_op.value
    value = mapper.get(value, value)
    read.result.replace_all_uses_with(value)
    erase(read)
    return value


def inline_compute(producer: ComputeOp) -> bool:
    """Inline producer into all its readers and erase it; False if it has other uses."""
    uses = readers(producer)
    if uses is None:
        return False
    for read in uses:
        inline_read(producer, read)
    erase(producer)
    return True


def fold_into_epilogue(anchor: ReduceOp, consumer: ComputeOp) -> ReduceOp | None:
    """out[i] = f(anchor[i], i)  ->  anchor with epilogue f (composed with anchor's own).

    Applies when the consumer is anchor's only user, has anchor's shape and reads
    it only at its own index (`te.read %anchor[%i0, ..., %in]`). Returns the new
    te.reduce (inserted where the consumer was), or None when it does not apply.
    """
    uses = readers(anchor)
    if not uses or g.shape_of(anchor.result) != g.shape_of(consumer.result):
        return None
    cblock = consumer.body.block
    if not all(_inside(u, consumer) for u in uses):
        return None
    if any(tuple(u.indices) != tuple(cblock.args) for u in uses):
        return None
    acc = cblock.insert_arg(anchor.acc_type, 0)
    acc.name_hint = "acc"
    value: SSAValue = acc
    first = cblock.first_op
    if anchor.has_epilogue:
        eblock = anchor.epilogue.block
        mapper: dict[SSAValue, SSAValue] = {eblock.args[0]: acc}
        mapper.update(zip(eblock.args[1:], cblock.args[1:]))
        last = eblock.last_op
        assert first is not None and last is not None  # both bodies end with te.yield
        for op in eblock.ops:
            if op is last:
                break
            cblock.insert_op_before(op.clone(value_mapper=mapper), first)
        value = mapper.get(last.operands[0], last.operands[0])
    for read in uses:
        read.result.replace_all_uses_with(value)
        erase(read)
    body, epilogue = Region(), Region()
    anchor.body.move_blocks(body)
    consumer.body.move_blocks(epilogue)
    fused = ReduceOp(
        consumer.compute_name,
        consumer.result_type,
        anchor.reduce_extents,
        anchor.combiner_name,
        anchor.init_value,
        body,
        epilogue,
    )
    if SYMBOLIC_OVER in anchor.attributes:  # (symbolic reduction extents)
        fused.attributes[SYMBOLIC_OVER] = anchor.attributes[SYMBOLIC_OVER]
    if NSW_SUM in anchor.attributes:  # (sums bounded by the producer)
        fused.attributes[NSW_SUM] = anchor.attributes[NSW_SUM]
    parent = consumer.parent_block()
    assert parent is not None
    parent.insert_op_before(fused, consumer)
    consumer.result.replace_all_uses_with(fused.result)
    erase(consumer)
    erase(anchor)
    return fused


def _inside(op: Operation, ancestor: Operation) -> bool:
    node: Operation | None = op
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent_op()
    return False


@dataclass(frozen=True)
class TeInline(ModulePass):
    """Inline te.computes (all, or those named) into the te ops that read them."""

    name = "te-inline"

    names: tuple[str, ...] = field(default=())

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        computes = {c.compute_name: c for c in op.walk() if isinstance(c, ComputeOp | ReduceOp)}
        for name in self.names:
            target = computes.get(name)
            if target is None:
                raise DiagnosticException(f'te-inline: no te.compute named "{name}"')
            if isinstance(target, ReduceOp):
                raise DiagnosticException(
                    f'te-inline cannot inline te.reduce "{name}": only te.compute '
                    f"(elementwise/injective) can be inlined"
                )
        chosen = [c for c in computes.values() if isinstance(c, ComputeOp)]
        if self.names:
            chosen = [c for c in chosen if c.compute_name in self.names]
        # producers before consumers: inlining a producer into a compute that is later
        # inlined itself carries the producer's body along
        for compute in chosen:
            if not inline_compute(compute) and self.names:
                raise DiagnosticException(
                    f'te-inline cannot inline te.compute "{compute.compute_name}": its '
                    f"result is used by an op other than te.read"
                )
