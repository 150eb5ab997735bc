"""The OpenCL C of one kernel (`KernelWriter`, on the C backend's `FunctionWriter`):
the work-item ids of its `Launch`, lanes and vectors, masked and contiguous vector
accesses, padded nests split into interior and border tiles.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import MutableMapping
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, MemRefType
from xdsl.ir import Operation, SSAValue

from dlpc.backends import c as cbe
from dlpc.backends.c import Buffer, FunctionWriter, c_type
from dlpc.backends.names import Scope
from dlpc.backends.opencl.gpu_launch import reduction_nest
from dlpc.backends.opencl.guards import Guards, padding_guards
from dlpc.backends.opencl.indices import affine_index, depends_on, varies_with
from dlpc.backends.opencl.lanes import (
    CONTIGUOUS_WIDTHS,
    MASKED_WIDTHS,
    PARTIAL_IDENTITY,
    VECTOR_BINARY,
    VECTOR_MACRO,
    VECTOR_MATH,
    VECTOR_WIDTHS,
)
from dlpc.backends.opencl.launch import Launch
from dlpc.backends.opencl.prelude import OWN_F32
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.dialects.typed import element_type, shape_of


@dataclass
class PermutedBuffer(Buffer):
    """A buffer stored with its dims permuted by `perm` (`Launch.relayout`), indexed by
    the original dims."""

    perm: tuple[int, ...] = ()

    def at(self, indices: list[str]) -> str:
        return Buffer(self.name, self.shape).at([indices[d] for d in self.perm])


def contracted(op: Operation) -> bool:
    """Is `op` a product whose only use is a sum (`arith.addf`/`subf`)? On vector lanes
    it is written inside that sum's expression, `acc + (a * b)`, which OpenCL C's default
    `FP_CONTRACT ON` makes one fused multiply-add, as GCC contracts the C backend's. The
    fma rounds once where the two
    operations round twice: within the reference tolerance, as the C backend is."""
    if op.name != "arith.mulf":
        return False
    uses = list(op.results[0].uses)
    return len(uses) == 1 and uses[0].operation.name in ("arith.addf", "arith.subf")


class LaneMap(MutableMapping):
    """A KernelWriter's `expr` or `buffers` with lanes: a value defined while lanes of
    some laned loops are fixed (`writer.emitting`) has one entry per combination of
    them, and is looked up under the lanes the writer has fixed now (`writer.current`)."""

    def __init__(self, writer: KernelWriter):
        self.writer = writer
        self.data: dict = {}

    def _key(self, value, deps):
        return (value, tuple(self.writer.current[lp] for lp in deps))

    def __getitem__(self, value):
        return self.data[self._key(value, self.writer.deps.get(value, ()))]

    def __setitem__(self, value, item) -> None:
        deps = self.writer.emitting
        self.writer.deps[value] = deps
        self.data[self._key(value, deps)] = item

    def __delitem__(self, value) -> None:
        del self.data[self._key(value, self.writer.deps.get(value, ()))]

    def __iter__(self):
        return iter({key[0]: None for key in self.data})

    def __len__(self) -> int:
        return len({key[0] for key in self.data})


class KernelWriter(FunctionWriter):
    """An OpenCL kernel body (C syntax, OpenCL address spaces and work-item ids).

    Register blocking (`Launch.lanes`): a laned loop of U lanes steps U iterations at a
    time (a mapped one takes U consecutive iterations per work-item) and its body is
    emitted once per lane, unrolled and jammed into the loops inside it: each op is
    written once per combination of the lanes its operands vary with (`deps`), so an
    input load shared by the lanes of an output-channel loop is written once, each
    lane's accumulator is a scalar of its own, and the lanes' reductions interleave in
    one loop. Every output is computed by the same operations in the same order as
    without lanes."""

    def __init__(self, emitter, names: Scope, what: str, launch: Launch):
        super().__init__(emitter, names, what)
        self.launch = launch
        self.deps: dict[SSAValue, tuple[ForOp, ...]] = {}  # laned loops a value varies with
        self.current: dict[ForOp, int] = {}  # the lane of each laned loop being written
        self.emitting: tuple[ForOp, ...] = ()  # the laned loops the current op varies with
        self.active: list[ForOp] = []  # laned loops entered, outermost first
        self.fixed = 0  # > 0 inside an op written for one combination of lanes
        self.expr = LaneMap(self)
        self.buffers = LaneMap(self)
        # vector lanes (`Launch.vector`): (value or 0-d buffer, the lanes of its other
        # laned loops) -> the name of the OpenCL vector holding its lanes
        self.vectors: dict[tuple, str] = {}
        # interior/border split (`split_interior`): padding guards known to hold
        self.assumed: set[scf.IfOp] = set()
        self.splitting = False
        # a border tile whose guarded loads lie in their buffers at every lane and tap
        # (`split_interior`'s `bound_tests`): masked loads need no per-lane fallback
        self.in_bounds = False
        self.masked = 0  # masked loads written (`masked_load`)
        self.sums = ""  # the `__local` partials of a split reduction (`split_reduction`)

    def op(self, op: Operation) -> None:
        if not self.active or self.fixed or isinstance(op, ForOp):
            return self.plain(op)
        deps = self.deps_of(op)
        if self.vector_math(op, deps) or self.vector_op(op, deps) or self.masked_load(op, deps):
            return None
        if self.contiguous_access(op, deps):
            return None
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in deps)):
            self.current.update(zip(deps, combination))
            self.emitting, self.fixed = deps, self.fixed + 1
            try:
                self.plain(op)
            finally:
                self.emitting, self.fixed = (), self.fixed - 1
        return None

    def vector_key(self, value: SSAValue) -> tuple:
        """`value`'s key in `vectors` under the lanes fixed now (all but the vector's)."""
        vec = self.launch.vector
        return (value, tuple(self.current[lp] for lp in self.deps.get(value, ()) if lp is not vec))

    def vector_operand(self, value: SSAValue, width: int) -> str:
        """`value` as an expression of the vector's type: its vector, a vector built from
        its lanes, or a scalar (OpenCL widens it) when it does not vary with the lanes."""
        vec = self.launch.vector
        assert vec is not None
        if vec not in self.deps.get(value, ()):
            return f"(float{width})({self[value]})"
        key = self.vector_key(value)
        if key in self.vectors:
            return self.vectors[key]
        parts = []
        for lane in range(width):
            self.current[vec] = lane
            parts.append(self[value])
        return f"(float{width})({', '.join(parts)})"

    def vector_op(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """Write `op` once per combination of its other lanes, on an OpenCL vector of the
        lanes of `Launch.vector`, when it varies with them and is f32 arithmetic
        (`VECTOR_BINARY`, negf) or a 0-d f32 private buffer (an accumulator: one vector
        variable, each lane `.sK` of it), its load or its store; False otherwise. Each
        lane is the same IEEE operation as when written alone, in the same order; ops on
        other types, global loads and stores and `scf.if`s stay per lane (`.sK` reads a
        lane of a vector, `(float8)(a, b, ...)` makes one)."""
        vec = self.launch.vector
        if vec is None or vec not in deps:
            return False
        f32 = Float32Type()
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            if shape_of(op.memref) != () or element_type(op.memref) != f32:
                return False
            if op.memref in self.launch.shared:
                return False
        elif isinstance(op, memref.LoadOp | memref.StoreOp):
            if self.vector_key(op.memref) not in self.vectors:
                return False
        elif op.name in VECTOR_BINARY or op.name == "arith.negf" or op.name in VECTOR_MACRO:
            if any(v.type != f32 for v in (*op.operands, *op.results)):
                return False
        else:
            return False
        width = self.launch.lanes[vec]
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            if isinstance(op, memref.AllocOp | memref.AllocaOp):
                name = self.names.fresh(op.memref.name_hint, "buf")
                self.line(f"float{width} {name};")
                self.lanes_of(
                    op.memref, deps, name, lambda k, n=name: Buffer(f"{n}.s{k:X}", (), scalar=True)
                )
                continue
            if isinstance(op, memref.StoreOp):
                value = self.vector_operand(op.value, width)
                self.line(f"{self.vectors[self.vector_key(op.memref)]} = {value};")
                continue
            if isinstance(op, memref.LoadOp):
                expr = self.vectors[self.vector_key(op.memref)]
            elif op.name == "arith.negf":
                expr = f"-{self.vector_operand(op.operands[0], width)}"
            elif op.name in VECTOR_MACRO:
                a, b = (self.vector_operand(v, width) for v in op.operands)
                expr = f"{VECTOR_MACRO[op.name]}({a}, {b})"
            else:
                a, b = (self.vector_operand(v, width) for v in op.operands)
                expr = f"{a} {cbe.BINARY[op.name]} {b}"
            if contracted(op):  # written inside the sum that uses it: one fma
                self.lanes_of(op.results[0], deps, f"({expr})", lambda k, e=expr: f"({e}).s{k:X}")
                continue
            name = self.names.fresh(op.results[0].name_hint)
            self.line(f"const float{width} {name} = {expr};")
            self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def contiguous_access(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """An f32 load or store of a kernel's global buffer whose lanes of the vector
        loop (`CONTIGUOUS_WIDTHS`) are consecutive elements (the loop's variable, step 1,
        plus what does not vary with it as the last index; no other index varies with
        it), written once per combination of its other lanes as one unaligned vector
        access, `*(__global dlpc_float16u *)&buf[first lane]`: the same elements. False
        when `op` is not one."""
        vec = self.launch.vector
        if (
            vec is None
            or vec not in deps
            or vec.stride != 1
            or self.launch.lanes[vec] not in CONTIGUOUS_WIDTHS
            or not isinstance(op, memref.LoadOp | memref.StoreOp)
            or element_type(op.memref) != Float32Type()
            or not op.indices
        ):
            return False
        iv = vec.induction_var
        indices = list(op.indices)
        if not varies_with(indices[-1], iv) or any(depends_on(i, iv) for i in indices[:-1]):
            return False
        kernel = op.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is None or defined_inside(op.memref, kernel):
            return False  # (a private or `__local` array)
        buf = self.buffers.get(op.memref)
        if type(buf) is not Buffer or buf.scalar or not buf.shape:
            return False
        width = self.launch.lanes[vec]
        load = isinstance(op, memref.LoadOp)
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            self.current[vec] = 0
            where = f"&{buf.at([self[i] for i in indices])}"
            if not load:
                value = self.vector_operand(op.operands[0], width)
                self.line(f"*(__global dlpc_float{width}u *){where} = {value};")
                continue
            name = self.names.fresh(op.res.name_hint)
            self.line(f"const float{width} {name} = *(__global const dlpc_float{width}u *){where};")
            self.lanes_of(op.res, deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def masked_load(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """A guarded f32 load of a global buffer (`scf.if (g) { load } else { pad }`: a
        conv's padding) whose guard varies with the vector lanes, written once per
        combination of its other lanes as one vector: when the flat indices of the first
        and the last lane lie in the buffer (the indices are affine in the lanes, so every
        lane's does), all lanes are loaded (consecutive ones: one vector load) and the
        lanes whose guard fails take the pad (`mask ? loaded : pad`, a blend); otherwise
        each lane is loaded under its own guard, as before. The same values either way.
        A border tile's taps that hold for some lanes only (`border_nest`) are one masked
        load instead of 8 guarded scalar ones. False when `op` is not one."""
        vec = self.launch.vector
        if (
            not isinstance(op, scf.IfOp)
            or vec is None
            or vec not in deps
            or op in self.assumed
            or self.launch.lanes[vec] not in MASKED_WIDTHS
            or len(op.results) != 1
            or not isinstance(op.results[0].type, Float32Type)
            or not op.false_region.blocks
        ):
            return False
        true_ops = list(op.true_region.block.ops)
        false_ops = list(op.false_region.block.ops)
        load, yielded = true_ops[0], true_ops[-1]
        pad_yield = false_ops[-1]
        if (
            len(true_ops) != 2
            or not isinstance(load, memref.LoadOp)
            or not isinstance(yielded, scf.YieldOp)
            or yielded.operands[0] is not load.res
            or not isinstance(pad_yield, scf.YieldOp)
            or not all(isinstance(o, arith.ConstantOp) for o in false_ops[:-1])
            or defined_inside(load.memref, op)
            or not all(affine_index(i) for i in load.indices)
        ):
            return False
        parent = op.parent_op()
        while parent is not None and parent is not vec:
            # a loop around the load that the guard does not vary with (a conv's input
            # channels) repeats each lane's branch the same way: there the per-lane loads
            # are faster, as with 4 lanes (docs/design/opencl-experiments.md)
            if (
                isinstance(parent, ForOp)
                and parent.trip_count > 1
                and not depends_on(op.cond, parent.induction_var)
            ):
                return False
            parent = parent.parent_op()
        pad_value = pad_yield.operands[0]
        if defined_inside(pad_value, op):
            if not isinstance(pad_value.owner, arith.ConstantOp):
                return False
        elif vec in self.deps.get(pad_value, ()):
            return False
        buf = self.buffers.get(load.memref)
        if type(buf) is not Buffer or buf.scalar or not buf.shape or buf.span is not None:
            return False
        width = self.launch.lanes[vec]
        size = math.prod(buf.shape)
        rest = tuple(lp for lp in deps if lp is not vec)
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            self.emitting, self.fixed = rest, self.fixed + 1
            try:
                for const in false_ops[:-1]:
                    self.plain(const)
            finally:
                self.emitting, self.fixed = (), self.fixed - 1
            pad = self[pad_value]
            guards, loads = [], []
            for lane in range(width):
                self.current[vec] = lane
                guards.append(self[op.cond])
                loads.append(buf.at([self[i] for i in load.indices]))
            first, last = (a[len(buf.name) + 1 : -1] for a in (loads[0], loads[-1]))
            mask = f"(int{width})({', '.join(f'-(int)({g})' for g in guards)})"
            vector = f"(float{width})({', '.join(loads)})"
            guarded = ", ".join(f"({g}) ? {a} : {pad}" for g, a in zip(guards, loads))
            name = self.names.fresh(op.results[0].name_hint)
            self.masked += 1
            if self.in_bounds:  # (`border_tiles`: every lane's index is in the buffer)
                self.line(f"const float{width} {name} = {mask} ? {vector} : (float{width})({pad});")
            else:
                self.line(
                    f"const float{width} {name} = (({first}) >= 0 && ({last}) < {size}) ? "
                    f"({mask} ? {vector} : (float{width})({pad})) : (float{width})({guarded});"
                )
            self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
        return True

    def lanes_of(self, value: SSAValue, deps: tuple[ForOp, ...], name: str, lane) -> None:
        """Record `name` as the vector of `value` (under the lanes fixed now) and lane k
        of it, `lane(k)`, as `value`'s entry for lane k (in `buffers` for a buffer)."""
        vec = self.launch.vector
        assert vec is not None
        table = self.buffers if isinstance(value.type, MemRefType) else self.expr
        self.emitting = deps
        for k in range(self.launch.lanes[vec]):
            self.current[vec] = k
            table[value] = lane(k)
        self.emitting = ()
        self.vectors[self.vector_key(value)] = name

    def vector_math(self, op: Operation, deps: tuple[ForOp, ...]) -> bool:
        """Write a `VECTOR_MATH` op on f32 once per combination of its other lanes, as one
        call on a vector of the lanes of its innermost laned loop; False if it is not one."""
        if (
            op.name not in VECTOR_MATH
            or not deps
            or not isinstance(op.results[0].type, Float32Type)
        ):
            return False
        inner, rest = deps[-1], deps[:-1]
        width = self.launch.lanes[inner]
        if width not in VECTOR_WIDTHS:
            return False
        call = OWN_F32.get(cbe.MATH_UNARY[op.name], cbe.MATH_UNARY[op.name])
        for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in rest)):
            self.current.update(zip(rest, combination))
            if inner is self.launch.vector:  # (its operand may be a vector already)
                arg = self.vector_operand(op.operands[0], width)
            else:
                args = []
                for lane in range(width):
                    self.current[inner] = lane
                    args.append(self[op.operands[0]])
                arg = f"(float{width})({', '.join(args)})"
            name = self.names.fresh(op.results[0].name_hint)
            self.line(f"const float{width} {name} = {call}({arg});")
            if inner is self.launch.vector:
                self.lanes_of(op.results[0], deps, name, lambda k, n=name: f"{n}.s{k:X}")
                continue
            self.emitting = deps
            for lane in range(width):
                self.current[inner] = lane
                self.expr[op.results[0]] = f"{name}.s{lane:X}"
            self.emitting = ()
        return True

    def deps_of(self, op: Operation) -> tuple[ForOp, ...]:
        """The laned loops `op` varies with: a buffer allocated in a laned body is one
        per lane of every enclosing laned loop; other ops vary with their operands."""
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return tuple(self.active)
        used: set[ForOp] = set()
        for inner in op.walk() if op.regions else (op,):
            for v in inner.operands:
                if inner is op or not defined_inside(v, op):
                    used.update(self.deps.get(v, ()))
        return tuple(lp for lp in self.active if lp in used)

    def plain(self, op: Operation) -> None:
        if isinstance(op, ForOp):
            return self.for_(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            return self.private(op)
        if isinstance(op, memref.DeallocOp):
            return None
        return super().op(op)

    def private(self, op) -> None:
        if op.memref in self.launch.shared:
            return None  # declared `__local` at the top of the kernel
        shape, elt = cbe.memref_info(op.memref.type)
        t = c_type(elt)
        name = self.names.fresh(op.memref.name_hint, "buf")
        if not shape:
            self.line(f"{t} {name};")
            self.buffers[op.memref] = Buffer(name, shape, scalar=True)
            return None
        self.line(f"{t} {name}[{max(math.prod(shape), 1)}];")
        self.buffers[op.memref] = Buffer(name, shape)
        return None

    def split_reduction(self, op: ForOp) -> None:
        """A reduction loop split over the work-items of a group (`Launch.split`): each
        sums every group-size-th iteration from its local id into its own accumulator (a
        nest of reduction loops, `reduction_nest`, as one flat index: consecutive
        work-items take consecutive iterations of its last loop)
        (which starts at the identity), the partials meet in `__local` memory (`sums`,
        declared by the emitter) pairwise, and work-item 0 alone goes on with the total."""
        assert self.launch.split is not None and self.launch.local_size is not None
        _, acc, combine = self.launch.split
        group = self.launch.local_size[0]
        lid = "(long)get_local_id(0)"
        nest = reduction_nest(op)
        if len(nest) == 1:
            iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
            self.expr[op.induction_var] = iv
            start = lid if (op.lower, op.stride) == (0, 1) else f"{op.lower} + {op.stride} * {lid}"
            step = op.stride * group
            self.line(f"for (long {iv} = {start}; {iv} < {op.upper}; {iv} += {step}) {{")
        else:  # one flat index over the nest's iterations, the last loop's fastest
            flat = self.names.fresh("flat", "i")
            total = math.prod(lp.trip_count for lp in nest)
            self.line(f"for (long {flat} = {lid}; {flat} < {total}; {flat} += {group}) {{")
            inside = total
            for lp in nest:
                inside //= lp.trip_count
                at = f"({flat} / {inside})" if inside > 1 else flat
                at = at if lp is nest[0] else f"({at} % {lp.trip_count})"
                at = at if (lp.lower, lp.stride) == (0, 1) else f"{lp.lower} + {lp.stride} * {at}"
                iv = self.names.fresh(lp.loop_name or lp.induction_var.name_hint, "i")
                self.expr[lp.induction_var] = iv
                self.line(f"  const long {iv} = {at};")
        self.depth += 1
        self.block(nest[-1].block)
        self.depth -= 1
        self.line("}")
        total, sums = self.buffers[acc].name, self.sums
        pair = f"{sums}[get_local_id(0)], {sums}[get_local_id(0) + s]"
        if combine in cbe.BINARY:
            both = pair.replace(", ", f" {cbe.BINARY[combine]} ", 1)
        else:
            both = f"{cbe.MACRO_BINARY[combine]}({pair})"
        self.line(f"{sums}[get_local_id(0)] = {total};")
        self.line("barrier(CLK_LOCAL_MEM_FENCE);")
        self.line(f"for (int s = {group // 2}; s > 0; s >>= 1) {{")
        self.line(f"  if ((int)get_local_id(0) < s) {sums}[get_local_id(0)] = {both};")
        self.line("  barrier(CLK_LOCAL_MEM_FENCE);")
        self.line("}")
        self.line("if (get_local_id(0) != 0) return;  /* (no barrier follows) */")
        self.line(f"{total} = {sums}[0];")

    def laned(self, op: ForOp) -> None:
        """A laned loop: U iterations per step (per work-item when mapped), its body
        written once per lane (see the class docstring); a reduction loop's lanes sum
        into partials of their accumulators, combined after it."""
        lanes = self.launch.lanes[op]
        partials = self.declare_partials(op, lanes)
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        step = op.stride * lanes
        once = op in self.launch.mapped or op.trip_count == lanes  # no loop around the lanes
        if op in self.launch.mapped:
            gid = f"(long){self.launch.mapped[op]}"
            first = f"{step} * {gid}" if op.lower == 0 else f"{op.lower} + {step} * {gid}"
            if op.trip_count % lanes:  # ragged (`clampable`): the last work-item's lanes
                # end at the loop's end, redoing some of the one before it
                first = f"DLPC_MIN({first}, {op.lower + op.stride * (op.trip_count - lanes)})"
            self.line(f"const long {iv} = {first};")
        elif once:
            self.line(f"const long {iv} = {op.lower};")
        elif op.trip_count % lanes:  # ragged (`_ragged`): the last step ends at the end
            at = self.names.fresh(f"{op.loop_name or op.induction_var.name_hint or 'i'}_step", "i")
            self.line(f"for (long {at} = {op.lower}; {at} < {op.upper}; {at} += {step}) {{")
            self.depth += 1
            last = op.lower + op.stride * (op.trip_count - lanes)
            self.line(f"const long {iv} = DLPC_MIN({at}, {last});")
        else:
            self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {iv} += {step}) {{")
            self.depth += 1
        self.active.append(op)
        for lane in range(lanes):
            self.current[op] = lane
            self.emitting = (op,)
            self.expr[op.induction_var] = f"({iv} + {lane * op.stride})" if lane else iv
        for acc, deps, combination, names in partials:  # lane k sums into partial k
            self.current.update(zip(deps, combination))
            if op is self.launch.vector:  # the partials are the lanes of one vector
                vector = names[0].partition(".")[0]
                self.lanes_of(
                    acc,
                    (*deps, op),
                    vector,
                    lambda k, n=vector: Buffer(f"{n}.s{k:X}", (), scalar=True),
                )
                continue
            for lane, name in enumerate(names):
                self.current[op], self.emitting = lane, (*deps, op)
                self.buffers[acc] = Buffer(name, (), scalar=True)
        self.emitting = ()
        self.block(op.block)
        self.active.remove(op)
        if not once:
            self.depth -= 1
            self.line("}")
        for acc, deps, combination, names in partials:
            self.deps[acc] = deps
            self.current.update(zip(deps, combination))
            combine = dict(self.launch.partials[op])[acc]
            total = self.buffers[acc].name
            if op is self.launch.vector:  # partial 0 is lane 0 of the vector
                self.line(f"{total} = {names[0]};")
            for name in names[1:]:
                if combine in cbe.BINARY:
                    self.line(f"{total} = {total} {cbe.BINARY[combine]} {name};")
                else:
                    self.line(f"{total} = {cbe.MACRO_BINARY[combine]}({total}, {name});")

    def split_interior(self, op: ForOp, guards: Guards) -> None:
        """A reduction nest whose loads are guarded by padding tests (`padding_guards`):
        written twice, `if (every guard holds everywhere) { the nest, guards taken as
        true } else { the nest as it is }`. A guard is a conjunction of affine
        inequalities of the loops and lanes, so it holds on the nest's whole box of
        iterations when it holds at its corners (and at the first and last lane): the
        tests are written once per corner before the nest. Interior tiles run loads and
        fmas only, the contiguous lanes' loads without per-element tests. Border tiles
        are not split the same way per iteration (slower: docs/design/opencl-experiments.md)."""
        ifs, ops, loops = guards
        corners = [sorted({lp.lower, lp.lower + lp.stride * (lp.trip_count - 1)}) for lp in loops]
        tests: list[str] = []
        bounds: list[str] | None = []
        for corner in itertools.product(*corners):
            self.emitting = ()
            for lp, value in zip(loops, corner):
                self.expr[lp.induction_var] = str(value)
            for inner in ops:
                self.op(inner)
            tests += [t for t in self.guard_tests(ifs) if t not in tests]
            if bounds is not None and self.launch.vector is not None:
                found = self.bound_tests(ifs)
                bounds = None if found is None else bounds + [t for t in found if t not in bounds]
        self.splitting = True
        try:
            self.line(f"if ({' && '.join(tests)}) {{")
            self.depth += 1
            self.assumed = set(ifs)
            self.for_(op)
            self.assumed = set()
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            self.border_tiles(op, guards, bounds)
            self.depth -= 1
            self.line("}")
        finally:
            self.splitting, self.assumed, self.in_bounds = False, set(), False

    def border_tiles(self, op: ForOp, guards: Guards, bounds: list[str] | None) -> None:
        """The border copy of `split_interior`, itself written twice when the flat indices
        of its guarded loads lie in their buffers at every corner (`bounds`: then at
        every lane and tap, they are affine) and the copy has masked loads: there they
        need no per-lane fallback (the fallback, 8 guarded scalar loads beside each vector
        load, is taken only at the first and last tiles of a buffer)."""
        if bounds:
            mark, masked, vectors = len(self.lines), self.masked, dict(self.vectors)
            self.line(f"if ({' && '.join(bounds)}) {{")
            self.depth += 1
            self.in_bounds = True
            try:
                self.border_nest(op, guards)
            finally:
                self.in_bounds = False
            self.depth -= 1
            self.vectors = vectors  # (the copy's own vectors are not the next copy's)
            if self.masked > masked:
                self.line("} else {")
                self.depth += 1
                self.border_nest(op, guards)
                self.depth -= 1
                self.line("}")
                return None
            del self.lines[mark:]  # (no masked load: one copy)
        self.border_nest(op, guards)
        return None

    def bound_tests(self, ifs: list[scf.IfOp]) -> list[str] | None:
        """`(i) >= 0` and `(i) < size` for the flat index i of each guarded global f32
        load of `ifs` (an `scf.if` yielding a load, `masked_load`'s shape) at the first
        and the last lane of each laned loop its indices vary with, under the values
        bound now (a corner of the window); None when one is not such a load or an
        index is not known here."""
        tests: list[str] = []
        for if_op in ifs:
            true_ops = list(if_op.true_region.block.ops)
            load = true_ops[0] if true_ops else None
            if not isinstance(load, memref.LoadOp) or defined_inside(load.memref, if_op):
                return None
            if not all(affine_index(i) for i in load.indices):
                return None
            buf = self.buffers.get(load.memref)
            if type(buf) is not Buffer or buf.scalar or not buf.shape or buf.span is not None:
                return None
            size = math.prod(buf.shape)
            deps = [
                lp for lp in self.active if any(lp in self.deps.get(i, ()) for i in load.indices)
            ]
            ends = (sorted({0, self.launch.lanes[lp] - 1}) for lp in deps)
            for combination in itertools.product(*ends):
                self.current.update(zip(deps, combination))
                try:
                    at = buf.at([self[i] for i in load.indices])
                except (KeyError, DlpcError):
                    return None
                flat = at[len(buf.name) + 1 : -1]
                tests += [t for t in (f"({flat}) >= 0", f"({flat}) < {size}") if t not in tests]
        return tests

    def border_nest(self, op: ForOp, guards: Guards) -> None:
        """A border tile's nest. A perfect nest whose guards vary with some of its loops
        only (a conv's window, not its input channels) is written with those loops
        outside (`for kh, kw: if (guards hold for all lanes) for c: <unguarded> else for
        c: <guarded>`): one test per tap and tile instead of one per element. This sums
        a border tile's outputs in another order (taps, then channels) than the interior
        ones (channels, then taps), as the C backend's direct conv reorders its sums:
        within the reference tolerance."""
        ifs, ops, loops = guards
        nest = [op]
        while len(nest[-1].block.ops) == 1 and isinstance(nest[-1].block.first_op, ForOp):
            nest.append(nest[-1].block.first_op)
        inner = [lp for lp in nest if lp not in loops]
        if (
            not inner
            or any(lp not in nest for lp in loops)
            or any(lp in self.launch.lanes for lp in nest)
        ):
            return self.for_(op)
        opened = 0
        for lp in [lp for lp in nest if lp in loops]:
            self.loop_header(lp)
            opened += 1
        for slice_op in ops:
            self.op(slice_op)
        self.line(f"if ({' && '.join(self.guard_tests(ifs))}) {{")
        self.depth += 1
        for assumed in (True, False):
            self.assumed = set(ifs) if assumed else set()
            for lp in inner:
                self.loop_header(lp)
            self.block(nest[-1].block)
            for _ in inner:
                self.depth -= 1
                self.line("}")
            self.assumed = set()
            if assumed:
                self.depth -= 1
                self.line("} else {")
                self.depth += 1
        self.depth -= 1
        self.line("}")
        for _ in range(opened):
            self.depth -= 1
            self.line("}")
        return None

    def loop_header(self, op: ForOp) -> None:
        """`for (...) {` of a plain loop, its induction variable bound; depth + 1."""
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
        self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1

    def guard_tests(self, ifs: list[scf.IfOp]) -> list[str]:
        """The conditions of `ifs` at the first and the last lane of each laned loop they
        vary with (affine in the lane: the lanes between hold when those do)."""
        tests: list[str] = []
        for if_op in ifs:
            deps = self.deps.get(if_op.cond, ())
            ends = (sorted({0, self.launch.lanes[lp] - 1}) for lp in deps)
            for combination in itertools.product(*ends):
                self.current.update(zip(deps, combination))
                test = self[if_op.cond]
                if test not in tests:
                    tests.append(test)
        return tests

    def if_(self, op: scf.IfOp) -> None:
        if op not in self.assumed:
            return super().if_(op)
        for inner in op.true_region.block.ops:  # the guard holds: its true branch inline
            if isinstance(inner, scf.YieldOp):
                for r, v in zip(op.results, inner.operands):
                    self.expr[r] = self[v]
            else:
                self.op(inner)
        return None

    def declare_partials(self, op: ForOp, lanes: int) -> list[tuple]:
        """Before a laned reduction loop: partials 1.. of each accumulator (per
        combination of the lanes it already varies with), starting at the identity;
        partial 0 is the accumulator itself."""
        partials = []
        for acc, combine in self.launch.partials.get(op, []):
            deps = self.deps.get(acc, ())
            elt = element_type(acc)
            t = c_type(elt)
            start = cbe.float_literal(PARTIAL_IDENTITY[combine], elt)
            for combination in itertools.product(*(range(self.launch.lanes[lp]) for lp in deps)):
                self.current.update(zip(deps, combination))
                names = [self.buffers[acc].name]
                if op is self.launch.vector:  # one vector: lane 0 the accumulator
                    vector = self.names.fresh(acc.name_hint, "acc")
                    lanes_init = ", ".join([names[0], *[start] * (lanes - 1)])
                    self.line(f"{t}{lanes} {vector} = ({t}{lanes})({lanes_init});")
                    names = [f"{vector}.s{k:X}" for k in range(lanes)]
                else:
                    for _ in range(1, lanes):
                        names.append(self.names.fresh(acc.name_hint, "acc"))
                        self.line(f"{t} {names[-1]} = {start};")
                partials.append((acc, deps, combination, names))
        return partials

    def for_(self, op: ForOp) -> None:
        if op in self.launch.lanes:
            return self.laned(op)
        if self.launch.split is not None and op is self.launch.split[0]:
            return self.split_reduction(op)
        if self.active and op.reduction is not None and not self.splitting:
            guards = padding_guards(op)
            if guards:
                return self.split_interior(op, guards)
        if op in self.launch.barrier_before and self.launch.local_size is not None:
            self.line("barrier(CLK_LOCAL_MEM_FENCE);")
        iv = self.names.fresh(op.loop_name or op.induction_var.name_hint, "i")
        self.expr[op.induction_var] = iv
        if op in self.launch.mapped:
            gid = self.launch.mapped[op]
            expr = (
                gid
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * (long){gid}"
            )
            self.line(f"const long {iv} = (long){expr};")
            if op in self.launch.bounds:  # (an NDRange rounded up to whole work-groups)
                self.line(f"if ({iv} < {op.lower + op.stride * self.launch.bounds[op]}) {{")
                self.depth += 1
                self.block(op.block)
                self.depth -= 1
                self.line("}")
                return
            self.block(op.block)
            return
        local = self.launch.local_size
        lid = local[-1] if local else 1
        if op in self.launch.cooperative:  # split the copy's outer loop over the group
            assert local is not None  # (a cooperative copy is planned only in a work-group)
            lid_expr = f"(long)get_local_id({len(local) - 1})"
            start = (
                lid_expr
                if (op.lower, op.stride) == (0, 1)
                else f"{op.lower} + {op.stride} * {lid_expr}"
            )
            self.line(f"for (long {iv} = {start}; {iv} < {op.upper}; {iv} += {op.stride * lid}) {{")
        else:
            step = f"{iv}++" if op.stride == 1 else f"{iv} += {op.stride}"
            self.line(f"for (long {iv} = {op.lower}; {iv} < {op.upper}; {step}) {{")
        self.depth += 1
        self.block(op.block)
        self.depth -= 1
        self.line("}")
