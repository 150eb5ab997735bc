"""Bufferise graph.if / graph.loop into host control flow around kernels (te -> loop).

Input: a graph.if or graph.loop at the te level (its regions' graph ops already lowered
to te.compute / te.reduce in place by graph-to-te), the loop-level block being built and
te-to-loop's KernelBuilder (the buffer of every tensor value read so far).
Output: in that block, `scf.if` / `scf.while` over `memref.load`s of the condition
buffers, the regions' kernels inside them, and copy kernels moving a region's yielded
values into the op's result buffers. Called by te-to-loop (`bufferize`) for each control
op of @main, and recursively for control ops inside regions.
Guarantees: every result of the op has a buffer allocated before the control flow
(returned, for te-to-loop to free after its last use); the buffers of a loop body (its
kernels' outputs, temporaries, nested loops' and ifs' buffers) are allocated once before
the outermost loop and freed after it, so iterations reuse them (and, at @main's top
level, the memory plan places them in the arena); buffers allocated inside an if branch
outside any loop are freed at its end; a loop's carried buffers are written only after its body's last
kernel, through a temporary when the body permutes its carried values, so no kernel reads
a carried value the same iteration already overwrote; a loop copies its initial values
into its carried buffers (inputs and params are never written).

    %r = graph.loop %c, %a {trip_count = 3} ...        %ri = memref.alloc ... (i, cond, carried)
                                                       copy %c -> cond, %a -> carried; i = 0
                                          becomes      scf.while {
                                                         cond[] and i[] < 3
                                                       } do {
                                                         <body kernels over carried, i>
                                                         copy yields -> cond, carried; i += 1
                                                       }

The C printer writes scf.if / scf.while in `dlpc_main` as C if / while around the kernel
calls (backends/c.py), so the control flow itself runs on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dlpc.dialects import graph as g
from dlpc.dialects import te
from dlpc.dialects.loop import KernelOp


class Builder(Protocol):
    """What te-to-loop's KernelBuilder gives this module."""

    buffers: dict[SSAValue, SSAValue]

    def compute(self, op: te.ComputeOp, out: SSAValue) -> KernelOp: ...

    def reduce(self, op: te.ReduceOp, out: SSAValue) -> KernelOp: ...

    def copy(self, name: str, src: SSAValue, dst: SSAValue, shape) -> KernelOp: ...


class Control:
    """Bufferises one control op (and those nested in its regions) into `block`."""

    def __init__(self, module: ModuleOp, builder: Builder, memref_of, constant_global):
        self.module = module
        self.builder = builder
        self.memref_of = memref_of
        self.constant_global = constant_global
        self.count = 0
        # inside a loop: (the block of the outermost loop, the buffers allocated there)
        self.hoist: tuple[Block, list[SSAValue]] | None = None

    def alloc(self, block: Block, ty, what: str, hint: str) -> SSAValue:
        """A buffer allocated in `block`, or, inside a loop, once before the outermost
        loop (freed after it): every iteration reuses it."""
        alloc = memref.AllocOp([], [], self.memref_of(ty, what))
        alloc.memref.name_hint = g.ssa_name_hint(hint)
        if self.hoist is None:
            block.add_op(alloc)
        else:
            self.hoist[0].add_op(alloc)
            self.hoist[1].append(alloc.memref)
        return alloc.memref

    def dealloc(self, block: Block, buf: SSAValue) -> None:
        """Free `buf` at the end of `block` unless it was hoisted out of a loop."""
        if self.hoist is None or buf not in self.hoist[1]:
            block.add_op(memref.DeallocOp.get(buf))

    def copy(self, block: Block, name: str, src: SSAValue, dst: SSAValue) -> None:
        ty = dst.type
        assert isinstance(ty, MemRefType)
        block.add_op(self.builder.copy(name, src, dst, ty.get_shape()))

    def lower(
        self, op: g.ControlOp, block: Block, given: Sequence[SSAValue | None] = ()
    ) -> list[SSAValue]:
        """The op's control flow appended to `block`; the buffers of its results (those
        `given`, @main's outputs, else allocated here)."""
        k = self.count
        self.count += 1
        kind = "if" if isinstance(op, g.IfOp) else "loop"
        given = list(given) or [None] * len(op.results)
        outs = [
            buf or self.alloc(block, r.type, f"result #{n} of {op.name}", f"{kind}{k}_out{n}")
            for n, (r, buf) in enumerate(zip(op.results, given))
        ]
        if isinstance(op, g.IfOp):
            self.lower_if(op, block, outs, f"if{k}")
        else:
            assert isinstance(op, g.LoopOp)
            self.lower_loop(op, block, outs, f"loop{k}")
        return outs

    def load_flag(self, block: Block, buf: SSAValue) -> SSAValue:
        load = memref.LoadOp.get(buf, [])
        block.add_op(load)
        return load.res

    def lower_if(self, op: g.IfOp, block: Block, outs: list[SSAValue], name: str) -> None:
        # if (cond[]) { then kernels; copy yields -> outs } else { ... }
        cond = self.load_flag(block, self.builder.buffers[op.cond])
        ins = [self.builder.buffers[v] for v in op.inputs]
        branches = []
        for which, region in (("then", op.then_region), ("else", op.else_region)):
            inner = Block()
            self.region(region.block, ins, outs, inner, f"{name}_{which}")
            inner.add_op(scf.YieldOp())
            branches.append(Region(inner))
        block.add_op(scf.IfOp(cond, [], branches[0], branches[1]))

    def lower_loop(self, op: g.LoopOp, block: Block, outs: list[SSAValue], name: str) -> None:
        bufs = self.builder.buffers
        flag = self.alloc(block, op.cond.type, "the condition of graph.loop", f"{name}_cond")
        count = self.alloc(block, g.TensorType(i64, []), "graph.loop's counter", f"{name}_i")
        self.copy(block, f"{name}_cond_init", bufs[op.cond], flag)
        for n, (v, out) in enumerate(zip(op.inputs, outs)):
            self.copy(block, f"{name}_init{n}", bufs[v], out)
        zero = arith.ConstantOp(IntegerAttr(0, i64))
        block.add_ops([zero, memref.StoreOp.get(zero, count, [])])

        # before: cond[] && i[] < trip_count
        before = Block()
        go = self.load_flag(before, flag)
        if op.trips >= 0:
            i = self.load_flag(before, count)
            bound = arith.ConstantOp(IntegerAttr(op.trips, i64))
            below = arith.CmpiOp(i, bound, "slt")
            both = arith.AndIOp(go, below)
            before.add_ops([bound, below, both])
            go = both.result
        before.add_op(scf.ConditionOp(go))

        # do: the body over (i, carried) into (cond, carried), then i += 1; the body's
        # buffers (and those of loops and ifs inside it) allocated before the outermost
        # loop and freed after it
        outermost = self.hoist is None
        if outermost:
            self.hoist = (block, [])
        after = Block()
        self.region(op.body.block, [count, *outs], [flag, *outs], after, f"{name}_body")
        i = self.load_flag(after, count)
        one = arith.ConstantOp(IntegerAttr(1, i64))
        inc = arith.AddiOp(i, one)
        after.add_ops([one, inc, memref.StoreOp.get(inc, count, []), scf.YieldOp()])
        block.add_op(scf.WhileOp([], [], Region(before), Region(after)))
        if outermost:
            assert self.hoist is not None
            hoisted, self.hoist = self.hoist[1], None
            for buf in hoisted:
                block.add_op(memref.DeallocOp.get(buf))
        self.dealloc(block, flag)
        self.dealloc(block, count)

    def region(
        self, body: Block, ins: list[SSAValue], outs: list[SSAValue], block: Block, name: str
    ) -> None:
        """`body`'s kernels into `block` over the buffers `ins` of its arguments; its
        yielded values copied into `outs` (which may be some of `ins`: a loop's carried
        buffers)."""
        bufs = self.builder.buffers
        bufs.update(zip(body.args, ins))
        local: list[SSAValue] = []
        for op in body.ops:
            if isinstance(op, te.ComputeOp | te.ReduceOp):
                out = self.alloc(
                    block, op.result.type, f'{op.name} "{op.compute_name}"', op.compute_name
                )
                local.append(out)
                bufs[op.result] = out
                if isinstance(op, te.ComputeOp):
                    block.add_op(self.builder.compute(op, out))
                else:
                    block.add_op(self.builder.reduce(op, out))
            elif isinstance(op, g.ConstantOp):
                sym = self.constant_global(self.module, op)
                get = memref.GetGlobalOp(sym, self.memref_of(op.output.type, "graph.constant"))
                block.add_op(get)
                bufs[op.output] = get.memref
            elif isinstance(op, g.ControlOp):
                results = self.lower(op, block)
                local += results
                bufs.update(zip(op.results, results))
            elif isinstance(op, g.YieldOp):
                self.yield_(op, outs, block, name, local)
            elif not isinstance(op, arith.ConstantOp):  # (scalars: copied into kernels)
                owner = body.parent_op()
                where = owner.name if owner is not None else "control"
                raise DiagnosticException(
                    f"te-to-loop: unexpected op {op.name} in a {where} region"
                )
        for buf in local:
            self.dealloc(block, buf)

    def yield_(
        self, op: g.YieldOp, outs: list[SSAValue], block: Block, name: str, local: list
    ) -> None:
        """Copy the yielded values into `outs` after every kernel of the region; a value
        whose buffer is another of `outs` (a loop permuting its carried values) goes
        through a temporary first."""
        bufs = self.builder.buffers
        srcs = [bufs[v] for v in op.values]
        for n, (src, dst) in enumerate(zip(srcs, outs)):
            if src in outs and src is not dst:
                ty = op.values[n].type
                tmp = self.alloc(block, ty, "a permuted carried value", f"{name}_tmp{n}")
                local.append(tmp)
                self.copy(block, f"{name}_tmp{n}", src, tmp)
                srcs[n] = tmp
        for n, (src, dst) in enumerate(zip(srcs, outs)):
            if src is not dst:
                self.copy(block, f"{name}_yield{n}", src, dst)
