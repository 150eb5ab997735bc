"""Comm ops on a compiled target: the graph function cut at its comm ops into segments,
each compiled for the target (C), run in order with the collectives between them.

    fn = SplitFunction(module, build)     # build(segment_module, k) -> a ModuleFunction
    outputs = fn(*inputs, params={...})   # @main's outputs, as one compiled function

A segment is a run of graph ops between two comm ops: its own graph function whose
arguments are the values it reads from before it (@main's inputs, results of earlier
segments or comm ops) and whose results are the values read after it. graph.param and
graph.constant ops are copied into every segment that reads them (a segment's params are
the step's params by name), so a weight is never carried from segment to segment. Each
comm op runs through the rank's communicator (`dlpc.runtime.mpi`, mpi4py) on the numpy
arrays the previous segment's compiled code wrote, and its results are the arrays the
next segment's code reads: no copy between a kernel and a collective beyond the
communicator's own (all_reduce packs a bucket into one message). Since fusion and
scheduling run per segment, no kernel spans a comm op.

An all_reduce is non-blocking (`overlap`, the default): started (MPI_Iallreduce) where
the program has it, right after the segment that computes its bucket, and waited for
before the first step that reads a result (the optimizer update's segment), so the
backward segments after it compute while the bucket is in flight. On 2 ranks the
results equal the blocking call's bit for bit (a + b in either algorithm); on more,
MPICH's Iallreduce may sum in another order than its Allreduce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph
from dlpc.reference import comm as comm_ref
from dlpc.reference import graph as ref
from dlpc.runtime.mpi import PendingAllReduce

if TYPE_CHECKING:
    from dlpc.runtime.comm_native import NativeStep


def has_comm(module: ModuleOp) -> bool:
    """Whether @main holds a comm op (at its top level: where a partition pass puts them)."""
    main = ref.main_func(module)
    return any(op.name.startswith("comm.") for op in main.body.block.ops)


def _free(op: Operation) -> bool:
    """An op copied into every segment that reads it instead of carried across."""
    return isinstance(op, graph.ParamOp | graph.ConstantOp)


@dataclass
class Segment:
    """One compiled run of graph ops: reads `inputs`, defines `outputs` (@main's values)."""

    module: ModuleOp
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    function: ModuleFunction | None = None
    params: list[tuple[str, np.ndarray | None]] = field(default_factory=list)
    # per output: a buffer kept across calls (a value only this call reads: a comm op's
    # operand or a later segment's input), or None (returned by @main: fresh per call)
    kept: list[np.ndarray | None] = field(default_factory=list)


def _segment(ops: list[Operation], later: set[Operation]) -> Segment | None:
    """The graph function of `ops` (with the free ops they read copied in), or None
    when nothing after it reads what it defines."""
    inside = set(ops)
    defined = {r for op in ops for r in op.results}
    outputs: list[SSAValue] = [
        r for op in ops for r in op.results if any(u.operation in later for u in r.uses)
    ]
    if not outputs:
        return None
    inputs: list[SSAValue] = []
    copied: list[Operation] = []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if v in defined or v in inputs:
                continue
            if isinstance(owner, Operation) and _free(owner) and owner not in inside:
                if owner not in copied:
                    copied.append(owner)
                continue
            inputs.append(v)
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    for op in [*copied, *ops]:
        block.add_op(op.clone(value_mapper=mapping))
    block.add_op(func.ReturnOp(*[mapping[v] for v in outputs]))
    fn = func.FuncOp("main", ([v.type for v in inputs], [v.type for v in outputs]), Region(block))
    return Segment(ModuleOp([fn]), inputs, outputs)


class SplitFunction(ModuleFunction):
    """@main of a graph module with comm ops, as compiled segments and collectives."""

    def __init__(
        self,
        module: ModuleOp,
        build: Callable[[ModuleOp, int], ModuleFunction],
        native: bool | None = None,
    ):
        from dlpc.runtime.mpi import world

        main = ref.main_func(module)
        body = list(main.body.block.ops)
        ret = body[-1]
        self.comm = world()
        self.overlap = True  # all_reduce non-blocking (see __call__); False: blocking
        self.args = list(main.args)
        self.returned = list(ret.operands)
        self.param_names = ref.param_names(module)
        self.num_inputs = len(self.args)
        self.num_outputs = len(self.returned)
        self.arg_specs = [(ref.graph.shape_of(a), np.dtype(ref.result_dtype(a))) for a in self.args]
        param_of: dict[str, SSAValue] = {}
        for op in main.walk():
            if isinstance(op, graph.ParamOp) and op.pname not in param_of:
                param_of[op.pname] = op.results[0]
        self.arg_specs += [
            (ref.graph.shape_of(param_of[n]), np.dtype(ref.result_dtype(param_of[n])))
            for n in self.param_names
        ]
        # the free ops, for a comm op or the return that reads one: a param's name (its
        # value bound per call) or a constant's value (evaluated once)
        self.free: list[tuple[SSAValue, str | np.ndarray]] = [
            (op.results[0], op.pname if isinstance(op, graph.ParamOp) else ref.evaluate_op(op, []))
            for op in body
            if _free(op)
        ]
        # the plan: segments and comm ops in program order
        self.steps: list[Segment | Operation] = []
        run: list[Operation] = []
        order: list[list[Operation] | Operation] = []
        for op in body[:-1]:
            if _free(op):
                continue
            if op.name.startswith("comm."):
                if run:
                    order.append(run)
                run = []
                order.append(op)
            else:
                run.append(op)
        if run:
            order.append(run)
        for k, item in enumerate(order):
            if isinstance(item, Operation):
                self.steps.append(item)
                continue
            later = {ret}
            for after in order[k + 1 :]:
                later.update([after] if isinstance(after, Operation) else after)
            seg = _segment(item, later)
            if seg is not None:
                self.steps.append(seg)
        self.segments = [s for s in self.steps if isinstance(s, Segment)]
        # each comm op's call, its properties read once (xDSL attributes are slow to read)
        self.calls = {
            op: (op.name.removeprefix("comm."), comm_ref.op_args(op))
            for op in self.steps
            if isinstance(op, Operation)
        }
        for k, seg in enumerate(self.segments):
            seg.function = build(seg.module, k)
            bound = seg.function.bound_params or []
            # a param the step does not name is one the segment's compile folded
            seg.params = [
                (n, None if n in self.param_names else bound[i])
                for i, n in enumerate(seg.function.param_names)
            ]
        returned = set(self.returned)
        for seg in self.segments:
            fn = seg.function
            assert fn is not None
            specs = fn.arg_specs[fn.num_inputs + len(fn.param_names) :]
            in_c = hasattr(fn, "library")  # a CFunction: its library takes our outputs
            seg.kept = [
                None if v in returned or not in_c else np.empty(shape, dtype)
                for v, (shape, dtype) in zip(seg.outputs, specs)
            ]
        self._flat_buckets()
        self.source = "\n".join(
            f"// ---- segment {k} of {len(self.segments)}\n{getattr(s.function, 'source', '')}"
            for k, s in enumerate(self.segments)
        )
        # the whole step in C (runtime/comm_native.py) where the MPI C library links
        self.native: NativeStep | None = None
        self.native_reason = "not asked for" if native is False else ""
        if native is not False:
            self._go_native()

    def _go_native(self) -> None:
        from dlpc.runtime.comm_native import NativeStep, find_mpi_c, supported

        mpi, why = find_mpi_c()
        why = why or supported(self)
        if not why and not all(hasattr(s.function, "library") for s in self.segments):
            why = "a segment is not compiled C"
        if mpi is not None and not why:
            try:
                self.native = NativeStep(self, mpi)
            except DlpcError as e:  # (e.g. the driver's MPI is not mpi4py's)
                why = str(e)
        self.native_reason = why
        if self.native is not None:
            self.source += f"\n// ---- the step: segments and MPI calls\n{self.native.source}"

    def _flat_buckets(self) -> None:
        """The kept buffers of a bucket's operands (per dtype) as views of one flat
        buffer, laid end to end in operand order: mpi4py then sends the bucket as it is,
        without packing it (`Communicator._bucket`)."""
        kept = {
            v: (seg, i)
            for seg in self.segments
            for i, v in enumerate(seg.outputs)
            if seg.kept and seg.kept[i] is not None
        }
        laid: set[SSAValue] = set()
        for op, (name, _) in self.calls.items():
            if name != "all_reduce":
                continue
            by_dtype: dict[np.dtype, list[SSAValue]] = {}
            for v in op.operands:
                by_dtype.setdefault(np.dtype(ref.result_dtype(v)), []).append(v)
            for dtype, xs in by_dtype.items():
                if (
                    len(xs) < 2
                    or len(set(xs)) < len(xs)
                    or any(x not in kept or x in laid for x in xs)
                ):
                    continue
                flat = np.empty(sum(ref.value_bytes(x.type) for x in xs) // dtype.itemsize, dtype)
                offset = 0
                for x in xs:
                    seg, i = kept[x]
                    old = seg.kept[i]
                    assert old is not None
                    seg.kept[i] = flat[offset : offset + old.size].reshape(old.shape)
                    offset += old.size
                    laid.add(x)

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        arrays = self.arguments(inputs, params)
        if self.native is not None:
            return self.native(arrays, self.overlap)
        values: dict[str, np.ndarray] = dict(zip(self.param_names, arrays[self.num_inputs :]))
        env: dict[SSAValue, np.ndarray] = dict(zip(self.args, arrays[: self.num_inputs]))
        for value, source in self.free:
            env[value] = values[source] if isinstance(source, str) else source
        # with `overlap`, an all_reduce is started (MPI_Iallreduce) where the program has
        # it and waited for where a later step (or the return) first reads a result
        pending: dict[SSAValue, tuple[SSAValue, ...]] = {}
        requests: dict[tuple[SSAValue, ...], PendingAllReduce] = {}

        def ready(vs) -> None:
            for v in vs:
                if v in pending:
                    results = pending[v]
                    env.update(zip(results, requests.pop(results).wait()))
                    for r in results:
                        del pending[r]

        for step in self.steps:
            if pending:
                ready(step.inputs if isinstance(step, Segment) else step.operands)
            if isinstance(step, Segment):
                fn = step.function
                assert fn is not None
                ps = [values[n] if w is None else w for n, w in step.params]
                ins = [env[v] for v in step.inputs]
                library = getattr(fn, "library", None)
                if library is None:
                    env.update(zip(step.outputs, fn(*ins, params=ps)))
                    continue
                # the C code writes the kept buffers in place: no fresh pages per call for
                # values (a bucket's gradients) that only this call reads
                outs = [
                    np.empty(shape, dtype) if k is None else k
                    for k, (shape, dtype) in zip(
                        step.kept, fn.arg_specs[fn.num_inputs + len(fn.param_names) :]
                    )
                ]
                library.call(fn.arguments(ins, ps) + outs)
                env.update(zip(step.outputs, outs))
                continue
            name, kw = self.calls[step]
            method = getattr(self.comm, name)
            args = [env[v] for v in step.operands]
            if name == "all_reduce" and self.overlap:
                results = tuple(step.results)
                requests[results] = self.comm.all_reduce_start(args, **kw)
                pending.update(dict.fromkeys(results, results))
            elif name == "all_reduce":  # one bucket: the operands as one list
                env.update(zip(step.results, method(args, **kw)))
            elif step.results:
                env[step.results[0]] = method(*args, **kw)
            else:
                method(*args, **kw)
        ready(self.returned)
        for results in list(requests):  # started, read by nothing: complete it still
            env.update(zip(results, requests.pop(results).wait()))
        return [np.asarray(env[v]) for v in self.returned]
