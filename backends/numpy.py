"""The numpy backend: a graph module as a readable, runnable Python module.

    source = emit_numpy(module)      # main(*inputs, params) -> tuple of outputs

The kernels are the reference's own (`dlpc.reference.graph`): their source is copied into
the generated module, so the emitted code and the reference are the same code.
"""

from __future__ import annotations

import dis
import inspect
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from dlpc.backends.names import Scope, py_comment, py_literal
from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph, symdims
from dlpc.reference import comm as comm_ref
from dlpc.reference import graph as ref
from dlpc.reference.graph import (
    KERNELS,
    _fused_name,
    dead_after,
    input_names,
    kernel_args,
    main_func,
    param_names,
)

# ----------------------------------------------------------------- emit_numpy


def _helpers_for(op_names: set[str]) -> list[Callable]:
    """The kernels the module uses, plus the helpers they call, in source order."""
    helpers = (ref._windows, ref._pad_hw, ref._channels_first, ref._channels_last, ref._sum_f32)
    helpers += (ref.pcg_hash, ref.dropout_threshold, ref.dropout_keep)
    by_name = {fn.__name__: fn for fn in (*KERNELS.values(), *helpers)}
    todo = [KERNELS[n] for n in op_names if n in KERNELS]
    seen: set[str] = set()
    while todo:
        fn = todo.pop()
        if fn.__name__ in seen:
            continue
        seen.add(fn.__name__)
        called = {i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_GLOBAL"}
        todo += [by_name[n] for n in called if n in by_name]
    order = list(vars(ref))
    return sorted((by_name[n] for n in seen), key=lambda fn: order.index(fn.__name__))


def _array_literal(array: np.ndarray) -> str:
    dtype = f"np.{array.dtype.name}" if array.dtype != bool else "np.bool_"
    flat = array.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return f"np.full({py_literal(array.shape)}, {py_literal(flat[0].item())}, dtype={dtype})"
    items = ", ".join(py_literal(v) for v in flat.tolist())
    return f"np.array([{items}], dtype={dtype}).reshape({py_literal(array.shape)})"


class _Emitter:
    def __init__(self, module: ModuleOp):
        self.module = module
        self.func = main_func(module)
        ops = {op.name for op in self.func.walk()}
        self.helpers = _helpers_for(ops)
        # model names are `v_`/`const_`/`fused_` identifiers (names.py), which no helper,
        # builtin, keyword or name of the module's own (np, main, params, ...) is
        self.namer = Scope()
        self.fused: list[str] = []
        self.constants: list[str] = []
        self.uses_comm = False
        # the symbols' variables (`bind_dims`): locals of main, passed on by keyword to
        # each fused and region function, so that concurrent calls do not share them
        self.dims = self.symbol_dims()
        self.dim_vars = [symdims.python_name(n) for n in self.dims]

    def emit_block(
        self, block_ops, names: dict[SSAValue, str], indent: str, dead=None
    ) -> list[str]:
        """The lines of a block; with `dead` (`dead_after` of @main), each intermediate is
        deleted after its last reader, so the reference never holds them all."""
        lines = []
        previous = None
        waits: dict[SSAValue, str] = {}  # an all_reduce's result -> its wait line (@main)
        block_ops = list(block_ops)
        for k, op in enumerate(block_ops):
            if dead and previous in dead and not isinstance(op, ReturnOp):
                gone = [names[v] for v in dead[previous] if _deletable(v, names)]
                if gone:
                    lines.append(f"{indent}del {', '.join(gone)}")
            previous = op
            for v in op.operands:  # first reader of a started all_reduce: wait for it
                if v in waits:
                    wait = waits[v]
                    lines.append(indent + wait)
                    for r in [r for r, w in waits.items() if w == wait]:
                        del waits[r]
            if dead is not None and op.name == "comm.all_reduce":
                # started (MPI_Iallreduce), waited for before the first reader, so the ops
                # between compute while it is in flight; blocking when a result is unread
                # or the next op reads one (nothing to overlap)
                after = block_ops[k + 1] if k + 1 < len(block_ops) else None
                read_next = after is not None and set(after.operands) & set(op.results)
                if not read_next and not set(op.results) & set(dead.get(op, [])):
                    start, wait = self.emit_all_reduce_start(op, names)
                    lines.append(indent + start)
                    waits.update(dict.fromkeys(op.results, wait))
                    continue
            if isinstance(op, ReturnOp) or op.name == "graph.yield":
                outs = ", ".join(names[v] for v in op.operands)
                lines.append(
                    f"{indent}return ({outs},)"
                    if isinstance(op, ReturnOp)
                    else f"{indent}return {outs}"
                )
                continue
            if op.name.startswith("comm."):
                lines.append(indent + self.emit_comm(op, names))
                continue
            if isinstance(op, graph.ControlOp):
                lines += self.emit_control(op, names, indent)
                continue
            hint = op.results[0].name_hint
            if isinstance(op, graph.ConstantOp):  # a module-level constant, used by name
                const = self.namer.fresh(hint, kind="const")
                self.constants.append(f"{const} = {_array_literal(op.to_numpy())}")
                names[op.results[0]] = const
                continue
            if isinstance(op, graph.ParamOp):  # the weight's own name, not its lossy SSA hint
                hint = op.pname
            target = self.namer.fresh(hint)
            names[op.results[0]] = target
            args = [names[v] for v in op.operands]
            if isinstance(op, graph.ParamOp):
                lines.append(f"{indent}{target} = params[{py_literal(op.pname)}]")
            elif op.name == "graph.fused":
                fn = self.emit_fused(op)
                lines.append(f"{indent}{target} = {fn}({', '.join(args + self.dim_args())})")
            elif op.name in KERNELS:
                kw = [f"{k}={py_literal(v)}" for k, v in kernel_args(op).items()]
                call = f"{KERNELS[op.name].__name__}({', '.join(args + kw)})"
                lines.append(f"{indent}{target} = {call}")
            else:
                raise DlpcError(f"error: emit-numpy has no definition of '{op.name}'")
        return lines

    def emit_comm(self, op: Operation, names: dict[SSAValue, str]) -> str:
        """A comm op: a call of the rank's communicator (`dlpc.runtime.mpi`)."""
        self.uses_comm = True
        method = op.name.removeprefix("comm.")
        args = [names[v] for v in op.operands]
        if method == "all_reduce":  # one bucket: the operands as one list
            args = [f"[{', '.join(args)}]"]
        kw = [f"{k}={py_literal(v)}" for k, v in comm_ref.op_args(op).items()]
        call = f"COMM.{method}({', '.join(args + kw)})"
        targets = [self.namer.fresh(r.name_hint) for r in op.results]
        names.update(zip(op.results, targets))
        if not targets:
            return call
        return f"{', '.join(targets)}{',' if method == 'all_reduce' else ''} = {call}"

    def emit_all_reduce_start(self, op: Operation, names: dict[SSAValue, str]) -> tuple[str, str]:
        """An all_reduce as `request = COMM.all_reduce_start(...)` and its `wait()` line."""
        self.uses_comm = True
        args = ", ".join(names[v] for v in op.operands)
        kw = [f"{k}={py_literal(v)}" for k, v in comm_ref.op_args(op).items()]
        request = self.namer.fresh("request")
        targets = [self.namer.fresh(r.name_hint) for r in op.results]
        names.update(zip(op.results, targets))
        start = f"{request} = COMM.all_reduce_start([{args}], {', '.join(kw)})"
        return start, f"{', '.join(targets)}, = {request}.wait()"

    def emit_fused(self, op: Operation) -> str:
        fn = self.namer.fresh(_fused_name(op), kind="fused")
        block = op.regions[0].blocks[0]
        names: dict[SSAValue, str] = {a: self.namer.fresh(a.name_hint, "a") for a in block.args}
        body = self.emit_block(block.ops, names, "    ")
        header = f"def {fn}({', '.join([names[a] for a in block.args] + self.dim_params())}):"
        doc = "    " + py_comment(f"graph.fused {_fused_name(op)}")
        self.fused.append("\n".join([header, doc, *body]))
        return fn

    def emit_region(self, block, kind: str) -> str:
        """A region as a module-level function of its block arguments, returning the
        values its graph.yield gives."""
        fn = self.namer.fresh(kind, kind="fused")
        names: dict[SSAValue, str] = {a: self.namer.fresh(a.name_hint, "a") for a in block.args}
        body = self.emit_block(block.ops, names, "    ")
        header = f"def {fn}({', '.join([names[a] for a in block.args] + self.dim_params())}):"
        self.fused.append("\n".join([header, "    " + py_comment(f"graph.{kind} region"), *body]))
        return fn

    def emit_control(self, op: Operation, names: dict[SSAValue, str], indent: str) -> list[str]:
        """graph.if as a Python if/else, graph.loop as a while loop, over region functions."""
        targets = [self.namer.fresh(r.name_hint) for r in op.results]
        names.update(zip(op.results, targets))
        cond, args = names[op.operands[0]], [names[v] for v in op.operands[1:]]
        out = ", ".join(targets) + ("," if len(targets) == 1 else "")
        if isinstance(op, graph.IfOp):
            then_fn = self.emit_region(op.then_region.block, "if_then")
            else_fn = self.emit_region(op.else_region.block, "if_else")
            call = ", ".join(args + self.dim_args())
            return [
                f"{indent}if bool({cond}):",
                f"{indent}    ({out}) = ({then_fn}({call}),)"
                if len(targets) == 1
                else f"{indent}    {out} = {then_fn}({call})",
                f"{indent}else:",
                f"{indent}    ({out}) = ({else_fn}({call}),)"
                if len(targets) == 1
                else f"{indent}    {out} = {else_fn}({call})",
            ]
        assert isinstance(op, graph.LoopOp)
        body_fn = self.emit_region(op.body.block, "loop_body")
        go, i = self.namer.fresh("go"), self.namer.fresh("i")
        bound = "" if op.trips < 0 else f" and {i} < {op.trips}"
        kw = "".join(f", {a}" for a in self.dim_args())
        lines = [f"{indent}{go}, {i} = bool({cond}), 0"]
        if targets:
            lines.append(f"{indent}{out} = {', '.join(args)},")
        lines += [
            f"{indent}while {go}{bound}:",
            f"{indent}    {go}, {out} = {body_fn}(np.asarray({i}, dtype=np.int64), {out}{kw})"
            if targets
            else f"{indent}    ({go},) = ({body_fn}(np.asarray({i}, dtype=np.int64){kw}),)",
            f"{indent}    {go}, {i} = bool({go}), {i} + 1",
        ]
        return lines

    def emit(self) -> str:
        arg_names = input_names(self.func)
        names: dict[SSAValue, str] = {
            a: self.namer.fresh(n, "x") for a, n in zip(self.func.args, arg_names)
        }
        body = self.emit_block(self.func.body.block.ops, names, "    ", dead_after(self.func))
        unpack = ", ".join(names[a] for a in self.func.args)
        head = [
            '"""numpy reference for a dlpc model, generated by `dlpc --emit=numpy`.',
            "",
            "    outputs = main(*inputs, params=weights)",
            '"""',
            "",
            "import math",
            "",
            "import numpy as np",
            "",
            f"INPUTS = {py_literal(tuple(arg_names))}",
            f"PARAMS = {py_literal(tuple(param_names(self.module)))}",
        ]
        if self.uses_comm:  # the rank's MPI communicator, initialised on import
            head += ["", "from dlpc.runtime.mpi import world", "", "COMM = world()"]
        parts = ["\n".join(head)]
        parts += [inspect.getsource(fn).rstrip() for fn in self.helpers]
        parts += self.fused
        if self.constants:
            parts.append("\n".join(self.constants))
        main = ["def main(*inputs, params):"]
        main.append(f"    ({unpack},) = inputs" if unpack else "    assert not inputs")
        main += self.bind_dims(names)
        parts.append("\n".join(main + body))
        return "\n\n\n".join(parts) + "\n"

    def symbol_dims(self) -> dict[str, tuple[int, int]]:
        """Each symbol of @main's inputs: (the input, the axis) of its first occurrence."""
        found: dict[str, tuple[int, int]] = {}
        for k, a in enumerate(self.func.args):
            shape = graph.shape_of(a) if isinstance(a.type, TensorType) else ()
            for axis, d in enumerate(shape):
                name = symdims.name_of(d)
                if name is not None and name not in found:
                    found[name] = (k, axis)
        return found

    def dim_params(self) -> list[str]:
        """A fused or region function's keyword parameters: the symbols' variables."""
        return ["*", *self.dim_vars] if self.dim_vars else []

    def dim_args(self) -> list[str]:
        return [f"{v}={v}" for v in self.dim_vars]

    def bind_dims(self, names: dict[SSAValue, str]) -> list[str]:
        """Symbolic dims: each symbol's value read off the first input dim that is it, a
        local of main (passed on to the functions that use it: `dim_params`)."""
        args = list(self.func.args)
        return [
            f"    {v} = {names[args[k]]}.shape[{axis}]"
            for v, (k, axis) in zip(self.dim_vars, self.dims.values())
        ]


def _deletable(v: SSAValue, names: dict[SSAValue, str]) -> bool:
    """An intermediate the emitted `main` computed (not an input, weight or constant)."""
    owner = v.owner
    return (
        v in names
        and isinstance(owner, Operation)
        and not isinstance(owner, graph.ParamOp | graph.ConstantOp)
    )


def emit_numpy(module: ModuleOp) -> str:
    """A readable, runnable Python module: `main(*inputs, params) -> tuple of outputs`."""
    return _Emitter(module).emit()
