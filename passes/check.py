"""The per-pass semantic check (`--check-each-pass`): run every function of the module on
seeded random inputs before and after each pass and stop at the first pass that changes a
result beyond tolerance.

    checker = Checker()                                  # graph and te levels
    checker = Checker(evaluators={"loop": run_c})        # loop/dlp by a backend (the caller's)
    checker.start(module, weights)                       # inputs, params, first results
    GraphSimplify().apply(ctx, module)
    checker.after("graph-simplify", module)              # DlpcError on a changed result

Levels and their evaluators:
- graph: the numpy reference (`reference.graph`, op by op);
- te:    the te evaluator (`reference.te`; graph ops still left go through the reference);
- loop, dlp: an evaluator given by the caller, `fn(module, arrays) -> None`, which runs the
  module's `@main` in place on all of its argument buffers (the C backend for loop IR, the
  DLP simulator for dlp IR: `dlpc.backends.runtime.evaluate`). This module sits in the
  passes layer, below the backends, so it does not import them.

Results are what a function computes: the returned values at graph/te level; at loop/dlp
level the last `dlpc.num_outputs` argument buffers, or every argument buffer when the
function has no calling-convention attributes (a hand-written loop nest updates its
arguments). Inputs: floats ~ N(0, 1), ints in [0, bound) (a gather index within the
gathered dim), bools 50/50; params: the bound weights when given, else random (positive for
a batch-norm variance). Every level sees the same arrays, so a lowering is checked too.

Tolerance: |after - before| <= atol * scale + rtol * |before|, scale the largest finite
|before| of that result; NaN must stay NaN and an infinity the same infinity. A function
that cannot be evaluated at some level (an op an evaluator lacks) keeps its last results,
and the next pass whose results can be evaluated is compared with them, naming the passes
in between. `notes` lists what was not evaluated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlpc.diagnostics import DlpcError
from dlpc.dialects import graph, symdims

LEVELS = ("graph", "te", "loop", "dlp")
Evaluator = Callable[[ModuleOp, list[np.ndarray]], None]


def level_of(fn: func.FuncOp) -> str:
    """The level of a function's body: dlp, loop, te or graph."""
    level = "graph"
    for op in fn.walk():
        if op.name.startswith("dlp."):
            return "dlp"
        if op.name.startswith("loop.") or op.name.startswith("memref."):
            level = "loop"
        elif level == "graph" and op.name in ("te.compute", "te.reduce"):
            level = "te"
    if level == "graph" and any(isinstance(a.type, MemRefType) for a in fn.args):
        level = "loop"
    return level


def convention(fn: func.FuncOp) -> tuple[int, list[str], int]:
    """(inputs, param names, outputs) of a function's arguments: at loop/dlp level from its
    `dlpc.*` attributes (without them every argument is an input whose final contents are
    results), at graph/te level every argument is an input."""
    attrs = fn.attributes
    n_args = len(fn.args)
    if not any(isinstance(a.type, MemRefType) for a in fn.args):
        return n_args, [], 0
    params_attr = attrs.get("dlpc.params")
    params = [p.data for p in params_attr.data] if isinstance(params_attr, ArrayAttr) else []
    out_attr = attrs.get("dlpc.num_outputs")
    n_out = out_attr.value.data if isinstance(out_attr, IntegerAttr) else 0
    return n_args - len(params) - n_out, params, n_out


# the size every symbolic dim (dialects/symdims) takes when a function is evaluated
SYMBOL_SIZE = 3


def _symbolic_sizes() -> dict[str, int]:
    from collections import defaultdict

    return defaultdict(lambda: SYMBOL_SIZE)


def _shape_dtype(ty) -> tuple[tuple[int, ...], np.dtype]:
    if isinstance(ty, TensorType) and graph.DYNAMIC_INDEX in ty.get_shape():
        shape = symdims.bind_shape(graph.shape_of(ty), _symbolic_sizes())
        return shape, np.dtype(graph.numpy_dtype(ty.get_element_type()))
    if isinstance(ty, TensorType | MemRefType):
        return tuple(ty.get_shape()), np.dtype(graph.numpy_dtype(ty.get_element_type()))
    return (), np.dtype(graph.numpy_dtype(ty))


def _symbolic(ty) -> bool:
    return isinstance(ty, TensorType) and graph.DYNAMIC_INDEX in ty.get_shape()


def _int_bound(value: SSAValue, default: int = 10) -> int:
    """Exclusive bound for random ints fed to `value`: gather indices stay in range."""
    bound = default
    for use in value.uses:
        op = use.operation
        if isinstance(op, graph.GatherOp) and use.index == 1:
            data = graph.shape_of(op.operands[0])
            axis = graph.normalize_axis(op.axis, len(data))
            bound = min(bound, data[axis])
    return max(bound, 1)


def random_array(rng: np.random.Generator, shape, dtype, int_bound: int = 10) -> np.ndarray:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(0, int_bound, shape).astype(dtype)


def _positive_param(op: graph.ParamOp) -> bool:
    """A param that must be positive for the model to be meaningful (a variance)."""
    return any(
        isinstance(use.operation, graph.BatchNormOp) and use.index == 4 for use in op.output.uses
    )


def _label(op: Operation) -> str:
    """`graph.mul`, `te.compute "relu_0"`, `loop.kernel "matmul_0"`."""
    for attrs in (op.properties, op.attributes):
        for key in ("name", "sym_name", "kernel", "label"):
            attr = attrs.get(key)
            if isinstance(attr, StringAttr):
                return f'{op.name} "{attr.data}"'
    return op.name


def _top_level(op: Operation, fn: func.FuncOp) -> Operation:
    while op.parent_op() is not None and op.parent_op() is not fn:
        op = op.parent_op()  # type: ignore[assignment]
    return op


def result_producer(fn: func.FuncOp, k: int) -> str:
    """What defines result `k` of `fn`: the returned value's op, or the last top-level op
    (kernel) that writes that argument buffer."""
    level = level_of(fn)
    if level in ("graph", "te"):
        ret = fn.body.block.last_op
        if isinstance(ret, func.ReturnOp) and k < len(ret.operands):
            value = ret.operands[k]
            owner = value.owner
            return _label(owner) if isinstance(owner, Operation) else "an argument"
        return "?"
    n_in, params, n_out = convention(fn)
    arg = fn.args[n_in + len(params) + k] if n_out else fn.args[k]
    writer = None
    for use in arg.uses:
        top = _top_level(use.operation, fn)
        if writer is None or writer.is_before_in_block(top):
            writer = top
    return _label(writer) if writer is not None else "no kernel (never written)"


def compare(before: np.ndarray, after: np.ndarray, rtol: float, atol: float):
    """None when `after` matches `before`, else (index, before, after) of the worst element."""
    if before.shape != after.shape:
        return None if before.size == after.size == 0 else ((), before.shape, after.shape)
    if not (np.issubdtype(before.dtype, np.floating) or np.issubdtype(after.dtype, np.floating)):
        bad = before != after
        if not bad.any():
            return None
        idx = np.unravel_index(int(np.argmax(bad)), before.shape)
        return idx, before[idx], after[idx]
    b, a = before.astype(np.float64), after.astype(np.float64)
    finite = np.isfinite(b) & np.isfinite(a)
    scale = float(np.abs(b[np.isfinite(b)]).max(initial=0.0)) or 1e-30
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(a - b) / (atol * scale + rtol * np.abs(b)), 0.0)
        special = ~finite & ~((np.isnan(a) & np.isnan(b)) | (a == b))
    err = np.where(special, np.inf, err)
    if err.size == 0 or float(err.max()) <= 1.0:
        return None
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return idx, before[idx], after[idx]


def kept_results(pass_name: str, applied: ModulePass | None, count: int) -> list[tuple[int, int]]:
    """(result before, result after) pairs a pass must keep equal: all of them, except for
    a pass that changes what @main returns (graph-autodiff: the loss, result `result`
    before, comes first; gradients follow)."""
    if pass_name == "graph-autodiff":
        return [(int(getattr(applied, "result", 0)), 0)]
    return [(k, k) for k in range(count)]


def _fmt(value) -> str:
    if isinstance(value, tuple):
        return "shape " + str(value)
    value = np.asarray(value)
    if np.issubdtype(value.dtype, np.floating):
        return f"{float(value):.7g}"
    return str(value.item())


@dataclass
class _State:
    """What is known of one function: its inputs and its last evaluated results."""

    inputs: list[np.ndarray]
    results: list[np.ndarray] | None = None
    level: str = "graph"
    producers: list[str] = field(default_factory=list)
    digest: str = ""
    unchecked: list[str] = field(default_factory=list)  # passes since the last results


@dataclass
class Checker:
    seed: int = 0
    rtol: float = 1e-3
    atol: float = 1e-4
    evaluators: dict[str, Evaluator] = field(default_factory=dict)
    functions: str = "all"  # "all" functions of the module, or "main" only
    weights: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    notes: list[str] = field(default_factory=list)
    states: dict[str, _State] = field(default_factory=dict, repr=False)
    random: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    checked: int = 0  # passes whose results were compared

    # ---------------------------------------------------------------- entry points

    def start(self, module: ModuleOp, weights: dict[str, np.ndarray] | None = None) -> None:
        """Draw the inputs (and params not in `weights`) and evaluate the module as it is.
        `weights` is used as it is, not copied: weights folded later are seen."""
        if weights is not None:
            self.weights = weights
        self.states, self.random = {}, {}
        rng = np.random.default_rng(self.seed)
        for fn in self._functions(module):
            name = fn.sym_name.data
            n_in, params, _ = convention(fn)
            inputs = []
            for arg in fn.args[:n_in]:
                shape, dtype = _shape_dtype(arg.type)
                bound = _int_bound(arg) if isinstance(arg.type, TensorType) else 2
                inputs.append(random_array(rng, shape, dtype, bound))
            self._draw_params(fn, params, rng)
            state = _State(inputs)
            self.states[name] = state
            self._evaluate(fn, state, "the input")

    def after(self, pass_name: str, module: ModuleOp, applied: ModulePass | None = None) -> None:
        """Evaluate every function after `pass_name` (the pass object `applied`, when
        given, for its options); a DlpcError if a result changed."""
        if not self.states:
            return
        rng = np.random.default_rng(self.seed + 1)
        for fn in self._functions(module):
            state = self.states.get(fn.sym_name.data)
            if state is None:
                continue
            n_in, params, _ = convention(fn)
            self._draw_params(fn, params, rng)
            shapes = [_shape_dtype(a.type) for a in fn.args[:n_in]]
            if shapes != [(x.shape, x.dtype) for x in state.inputs]:  # a new signature
                self.notes.append(f"@{fn.sym_name.data}: pass '{pass_name}' changed the inputs")
                bounds = [_int_bound(a) if isinstance(a.type, TensorType) else 2 for a in fn.args]
                inputs = [random_array(rng, s, d, b) for (s, d), b in zip(shapes, bounds)]
                self.states[fn.sym_name.data] = state = _State(inputs)
                self._evaluate(fn, state, f"pass '{pass_name}'")
                continue
            previous, producers = state.results, state.producers
            state.unchecked.append(pass_name)
            if not self._evaluate(fn, state, f"pass '{pass_name}'"):
                continue
            if previous is None:
                state.unchecked = []
                continue
            pairs = kept_results(pass_name, applied, len(previous))
            self._compare(fn, pass_name, previous, producers, state, pairs)
            state.unchecked = []
        self.checked += 1

    # ------------------------------------------------------------------- helpers

    def _functions(self, module: ModuleOp) -> list[func.FuncOp]:
        fns = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
        if self.functions == "main":
            fns = [f for f in fns if f.sym_name.data == "main"]
        return fns

    def _draw_params(self, fn: func.FuncOp, loop_params: list[str], rng) -> None:
        """Random values for the params of `fn` that are not bound (per function: two
        functions of a test file may use one name for params of different shapes)."""
        drawn = self.random.setdefault(fn.sym_name.data, {})
        wanted = []
        for op in fn.walk():
            if isinstance(op, graph.ParamOp):
                wanted.append((op.pname, op.output.type, _positive_param(op)))
        n_in = convention(fn)[0]
        wanted += [(name, arg.type, False) for name, arg in zip(loop_params, fn.args[n_in:])]
        for name, ty, positive in wanted:
            if name in self.weights or name in drawn:
                continue
            shape, dtype = _shape_dtype(ty)
            value = random_array(rng, shape, dtype)
            drawn[name] = (np.abs(value) + 0.5).astype(dtype) if positive else value
        from dlpc.passes.lower.dlp_pack_params import packed_values  # (dlp-pack-params)

        for name, value in packed_values(fn, self._params(fn.sym_name.data)).items():
            if name not in self.weights:  # a packed param holds its members' values
                drawn[name] = value

    def _params(self, fn_name: str) -> dict[str, np.ndarray]:
        return {**self.random.get(fn_name, {}), **self.weights}

    def _evaluate(self, fn: func.FuncOp, state: _State, when: str) -> bool:
        """Evaluate `fn` into `state.results`; False when it cannot be evaluated."""
        module = fn.parent_op()
        text = str(module) if level_of(fn) in ("loop", "dlp") else str(fn)  # with its globals
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == state.digest and state.results is not None:
            return True  # unchanged by the pass
        level = level_of(fn)
        if "dlpc.dims" in fn.attributes:
            # graph-to-te's one program for every value of its symbols: its results are
            # defined only inside the call's extents, which the comparison does not know
            self.notes.append(
                f"@{fn.sym_name.data} after {when} ({level}): not evaluated: a program over "
                "symbolic dims (dlpc.dims) is not checked below the graph"
            )
            return False
        try:
            results = self._run(fn, level, state.inputs)
        except (DlpcError, NotImplementedError, KeyError, IndexError, ValueError) as e:
            reason = str(e).removeprefix("error: ")
            self.notes.append(
                f"@{fn.sym_name.data} after {when} ({level}): not evaluated: {reason}"
            )
            return False
        state.results, state.level, state.digest = results, level, digest
        state.producers = [result_producer(fn, k) for k in range(len(results))]
        return True

    def _run(self, fn: func.FuncOp, level: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):  # NaN from log(-1) is a result like any other
            return self._run_quietly(fn, level, inputs)

    def _run_quietly(self, fn, level: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        # the function as @main of a module with the same globals and no other function
        module = fn.parent_op()
        assert isinstance(module, ModuleOp)
        ops = [op.clone() for op in module.ops if op is fn or not isinstance(op, func.FuncOp)]
        single = ModuleOp(ops)
        main = next(op for op in single.ops if isinstance(op, func.FuncOp))
        main.sym_name = StringAttr("main")
        if any(_symbolic(a.type) for a in main.args):  # every symbol at SYMBOL_SIZE
            from xdsl.utils.exceptions import VerifyException

            from dlpc.passes.graph.bind_dims import bind_module

            try:
                bind_module(single, _symbolic_sizes())
            except VerifyException as e:
                raise DlpcError(f"symbolic dims at {SYMBOL_SIZE}: {e}") from None
        values = self._params(fn.sym_name.data)
        if level == "graph":
            from dlpc.reference.graph import run_reference

            return [np.asarray(r) for r in run_reference(single, inputs, values)]
        if level == "te":
            from dlpc.reference.te import run_te

            return [np.asarray(r) for r in run_te(single, inputs, values)]
        if level not in self.evaluators:
            raise DlpcError(f"no evaluator for the {level} level")
        n_in, params, n_out = convention(main)
        arrays = [np.ascontiguousarray(x).copy() for x in inputs]
        for name, arg in zip(params, main.args[n_in:]):
            shape, dtype = _shape_dtype(arg.type)
            arrays.append(np.ascontiguousarray(values[name], dtype=dtype).reshape(shape))
        for arg in main.args[n_in + len(params) :]:
            shape, dtype = _shape_dtype(arg.type)
            arrays.append(np.zeros(shape, dtype))
        self.evaluators[level](single, arrays)
        return arrays[len(arrays) - n_out :] if n_out else arrays

    def _compare(self, fn, pass_name, before, producers, state: _State, pairs) -> None:
        name = fn.sym_name.data
        passes = state.unchecked
        who = f"pass '{pass_name}'"
        if len(passes) > 1:
            who += f" (with the unevaluated {', '.join(repr(p) for p in passes[:-1])} before it)"
        after = state.results or []
        if len(before) > len(after):  # added results (gradients: graph-autodiff) are new
            raise DlpcError(
                f"error: --check-each-pass: {who} dropped results of @{name}: "
                f"{len(after)} instead of {len(before)}"
            )
        for j, k in pairs:
            worst = compare(np.asarray(before[j]), np.asarray(after[k]), self.rtol, self.atol)
            if worst is None:
                continue
            idx, vb, va = worst
            op = state.producers[k] if k < len(state.producers) else "?"
            was = producers[j] if j < len(producers) else "?"
            where = op if op == was else f"{op}, before the pass {was}"
            index = "[" + ", ".join(str(int(i)) for i in idx) + "]"
            raise DlpcError(
                f"error: --check-each-pass: {who} changed result {k} of @{name} ({where}): "
                f"worst element {index}: {_fmt(vb)} before, {_fmt(va)} after "
                f"(rtol {self.rtol:g}, atol {self.atol:g} x max |before|; seed {self.seed})"
            )


# ----------------------------------------------------------------- a test pass


@dataclass(frozen=True)
class TestSwapOperands(ModulePass):
    """A deliberately wrong pass, for testing `--check-each-pass`: swaps the operands of the
    first subtraction or division it finds (graph.sub/graph.div, or arith.subf/divf in a
    te or loop body), the bug of a rewrite that applies a rule to the wrong operand order.
    Never in a pipeline."""

    name = "test-swap-operands"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kinds = (graph.SubOp, graph.DivOp, arith.SubfOp, arith.DivfOp)
        for inner in op.walk():
            if isinstance(inner, kinds):
                a, b = inner.operands
                inner.operands = [b, a]
                return
