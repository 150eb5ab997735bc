"""The whole pipeline, graph -> te -> loop (-> dlp) -> source, as one readable function.

    module = parse_module(text)
    lower(module, stop_at="loop", options=PipelineOptions(opt_level=2))
    source = emit(module, "c")

Stages (see docs/pipeline.md):

- graph: `graph-infer-shapes`, then the graph optimisations of the -O level
  (`GRAPH_PASSES_BY_LEVEL`);
- te:    `graph-to-te` (DL ops -> compute definitions);
- loop:  `te-to-loop` (compute definitions -> loop nests over buffers), then schedules:
  the tuning log's (`loop-apply-tuning-log`, defaults for kernels it lacks) when one is
  given, else with `schedule=True` at -O1 and above `loop-default-schedule`;
- the target's passes (`TARGET_PASSES`): C's views, memory plan and packed weights,
  OpenCL's views and Winograd kernels, or `loop-to-dlp` (scratchpad tiling, DMA,
  intrinsics, multi-core split: the dlp stage).

Emitters: `numpy` reads graph IR, `c` and `opencl` loop IR, `dlp-c` dlp IR; each only
prints, so `dlpc --emit=loop --target=T` shows what T's printer receives. Passes are
looked up by name in `dlpc.passes.registry.PASSES` and imported only when they run, so this
module imports even while a stage is missing; running a missing stage is a one-line
DlpcError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException, ParseError

from dlpc.diagnostics import DlpcError, boundary
from dlpc.dialects.loop import verify_ir

STAGES = ("graph", "te", "loop", "dlp")
# emitter -> the stage it reads
EMITTERS = {"numpy": "graph", "c": "loop", "opencl": "loop", "dlp-c": "dlp"}

# Graph passes per -O level, in order. Every name must be registered in
# dlpc.passes.registry.PASSES (a missing one is an error, never skipped silently), except
# FOLD_PARAMS: `fold_params` over the bound weights, which folds the static subgraphs
# that graph-substitute (rescaled conv weights) and graph-fuse (concatenated Q/K/V
# weights) build; it runs whenever weights are given to `lower`.
FOLD_PARAMS = "fold-params"
GRAPH_PASSES_BY_LEVEL: dict[int, tuple[str, ...]] = {
    0: ("graph-infer-shapes",),
    1: (
        "graph-infer-shapes",
        "graph-fold-qdq",  # before constants fold a dequantized weight into floats
        "graph-simplify",
        "graph-fold-constants",
        FOLD_PARAMS,
    ),
    2: (
        "graph-infer-shapes",
        "graph-fold-qdq",
        "graph-simplify",
        "graph-substitute",
        "graph-fold-constants",
        FOLD_PARAMS,
        "graph-conv-layout",  # NHWC where a conv's channels vectorize better than its row
        "graph-winograd",  # where it pays (32 -> 32 fused, 64+ channels); weights bound, c/opencl
        "graph-fuse",
        FOLD_PARAMS,
    ),
    # NHWC before fusion, only where it pays (GRAPH_PASS_OPTIONS_BY_LEVEL): forced on
    # every conv it ran 1.04x (resnet) to 7.6x (lenet) slower than -O2 with the default
    # schedules (figures: docs/graph-passes.md, bench/layout.py)
    3: (
        "graph-infer-shapes",
        "graph-fold-qdq",
        "graph-simplify",
        "graph-substitute",
        "graph-fold-constants",
        FOLD_PARAMS,
        "graph-layout",
        "graph-winograd",  # where it pays; weights bound, target c or opencl (see `lower`)
        "graph-fuse",
        FOLD_PARAMS,
    ),
}
# target -> the passes that follow the common ones (graph, te-to-loop, the schedules):
# what each target needs done to the IR before its printer, which only prints
TARGET_PASSES: dict[str, tuple[str, ...]] = {
    "c": (
        "loop-fold-init-epilogue",  # init/epilogue into the tiles
        "loop-slide-rows",  # `tensorize ... slide` nests as vector code (C only)
        "loop-views",  # reshapes as aliases, copies as strided views
        "loop-memory-plan",  # intermediates in one arena
        "loop-prepack-weights",  # weights packed once, not per call
        "loop-runtime-extents",  # symbolic dims: loops stop at the call's extents
    ),
    "opencl": (
        "loop-view-copies",  # copies as strided views (the runtime aliases reshapes)
        "loop-opencl-winograd",  # graph-winograd's chains as the printer writes them
        "loop-runtime-extents",  # symbolic dims: loops stop at the call's extents
    ),
    "dlp": (
        "dlp-reshape-aliases",  # reshapes as aliases of the same GDRAM bytes
        "dlp-pack-params",  # small weights in one buffer, folded (weights bound only)
        "loop-to-dlp",  # scratchpad tiles, DMA, intrinsics, cores
    ),
}
# the target of an emitter (`compile_to`)
TARGET_OF_EMITTER = {"c": "c", "opencl": "opencl", "dlp-c": "dlp"}

# options of the passes of a level (a compile's own pass options, `extra`, override them:
# `dlpc.compile(m, opt_level=3, graph_layout={"where": "all"})` forces NHWC everywhere)
GRAPH_PASS_OPTIONS_BY_LEVEL: dict[int, dict[str, dict[str, Any]]] = {
    3: {"graph-layout": {"where": "pays"}},
}


@dataclass(frozen=True)
class PipelineOptions:
    opt_level: int = 2
    tuning_log: str | None = None
    # schedule the loop nests (dlpc, dlpc-run and dlpc.compile do); off, `lower` gives
    # te-to-loop's nests as they are, which is what dlpc-tune searches from
    schedule: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # per-pass options, by pass name
    # --check-each-pass: a `dlpc.passes.check.Checker` that evaluates the module before
    # and after every pass and stops at the first that changes a result; True gives one
    # with the graph and te evaluators only (the backends add loop/dlp: api, tools)
    checker: Any = None
    # the target lowered for: its `TARGET_PASSES` follow the common ones; None: the C
    # target's with `schedule`, else none (te-to-loop's nests as scheduled)
    target: str | None = None
    # target opencl: its launch plans, "cpu" or "gpu" (`opencl_rt.launch_profile`, which
    # `dlpc.compile` resolves before lowering): graph-winograd's cost rule is the plans'
    opencl_plans: str = "cpu"
    # verify the IR after every pass (mlir-opt's -verify-each, its default); off, `lower`
    # verifies its input and its result only (dlpc.compile's default, DLPC_VERIFY_EACH;
    # docs/pipeline.md#verification). A checker always verifies each pass.
    verify_each: bool = True

    def __post_init__(self):
        if self.opt_level not in GRAPH_PASSES_BY_LEVEL:
            raise DlpcError(
                f"error: unknown optimisation level -O{self.opt_level} (expected -O0 to -O3)"
            )
        if self.target is not None and self.target not in TARGET_PASSES:
            raise DlpcError(
                f"error: unknown target '{self.target}' (expected {', '.join(TARGET_PASSES)})"
            )
        if self.opencl_plans not in ("cpu", "gpu"):
            raise DlpcError(
                f"error: unknown OpenCL launch plans '{self.opencl_plans}' (expected cpu or gpu)"
            )
        if self.checker is True:
            from dlpc.passes.check import Checker

            object.__setattr__(self, "checker", Checker())
        if self.checker:  # it evaluates each pass's output: that must be valid IR
            object.__setattr__(self, "verify_each", True)


# ----------------------------------------------------------------- IR plumbing


@functools.cache
def _dialect_factories() -> tuple[tuple[str, Callable], ...]:
    from xdsl.universe import Universe

    from dlpc.dialects import DIALECTS

    factories = dict(Universe.get_multiverse().all_dialects)
    for name, factory in DIALECTS.items():
        factories.setdefault(name, factory)
    return tuple(factories.items())


def context() -> Context:
    """A context with xDSL's dialects and dlpc's (graph, te, loop, ...)."""
    ctx = Context()
    for name, factory in _dialect_factories():
        ctx.register_dialect(name, factory)
    return ctx


def parse_module(text: str, path: str = "<input>") -> ModuleOp:
    """Parse and verify IR text; errors are xDSL ParseError/VerifyException."""
    with parser_failures(path):
        module = Parser(context(), text, name=path).parse_module()
    module.verify()
    return module


@contextlib.contextmanager
def parser_failures(path: str):
    """xDSL's parser reports malformed text as ParseError, but some malformed attributes
    (`array<i0: ...>`, an integer type of width 0) end in a plain Python exception inside
    it: those become one diagnostic naming the file, like any other parse error."""
    try:
        yield
    except (ParseError, DiagnosticException, DlpcError):
        raise
    except (ArithmeticError, ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
        first = (str(e).splitlines() or [""])[0]
        raise DlpcError(
            f"{path}: error: malformed IR: the parser failed ({type(e).__name__}: {first})"
        ) from None


def make_pass(name: str, options: PipelineOptions, **fixed) -> ModulePass:
    from dlpc.passes.registry import PASSES

    if name not in PASSES:
        raise DlpcError(f"error: pipeline pass '{name}' is not registered in dlpc.passes.registry")
    try:
        cls: type[ModulePass] = PASSES[name]()
    except ImportError as e:
        raise DlpcError(f"error: pipeline pass '{name}' is not available ({e})") from None
    kwargs = {**options.extra.get(name, {}), **fixed}
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise DlpcError(f"error: bad options {kwargs} for pass '{name}': {e}") from None


def run(name: str, module: ModuleOp, options: PipelineOptions, **fixed) -> None:
    """Apply one pass by name (its options from `options.extra`, then `fixed`) and, with
    `options.verify_each`, verify the result: every op of the module, as mlir-opt's
    `-verify-each` (`verify_ir`: the same checks, cheaper)."""
    started = time.perf_counter()
    p = make_pass(name, options, **fixed)
    with _collector_paused():
        with boundary(f"pass {name}"):  # whatever escapes is one line naming the pass and op
            p.apply(context(), module)
        if options.verify_each:
            with boundary(f"verifying the output of pass {name}"):
                verify_ir(module)  # = module.verify(), each kind of arith/memref op once
    _timed(name, started)
    if options.checker:
        options.checker.after(name, module, p)  # same results as before the pass?


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while a pass runs, back on (when it was on)
    after it: IR is cyclic (ops and their parents), so the collector's full passes walk
    the whole module, 0.12 s of resnet's cold compile (2 of them) for nothing a pass
    frees; the garbage a pass leaves is collected after it (0.04 s in all)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def fold_weights(module: ModuleOp, weights: dict[str, np.ndarray], checker=None) -> None:
    from dlpc.passes.graph.fold_constants import fold_params

    started = time.perf_counter()
    with boundary(f"pass {FOLD_PARAMS}"):
        weights.update(fold_params(module, weights))
        module.verify()
    _timed(FOLD_PARAMS, started)
    if checker:
        checker.after(FOLD_PARAMS, module)


# --------------------------------------------------------------------- timing

_timings: list[list[tuple[str, float]]] = []  # the collectors `timing()` has open


@contextlib.contextmanager
def timing():
    """Collect `(pass name, seconds)` for every pass run inside, in order (like MLIR's
    `-mlir-timing`; `dlpc --timing`, bench/compile.py). A pass's time includes verifying
    its output, not `--check-each-pass`."""
    found: list[tuple[str, float]] = []
    _timings.append(found)
    try:
        yield found
    finally:  # (by identity: list.remove takes the first equal list, another collector's)
        del _timings[next(k for k, f in enumerate(_timings) if f is found)]


def _timed(name: str, started: float) -> None:
    if _timings:
        elapsed = time.perf_counter() - started
        for found in _timings:
            found.append((name, elapsed))


def format_timing(rows: list[tuple[str, float]]) -> str:
    """`timing()`'s rows as a table: seconds, share of the total and the pass."""
    total = sum(t for _, t in rows) or 1e-12
    lines = [f"{'seconds':>9}  {'share':>6}  pass"]
    lines += [f"{t:9.4f}  {100 * t / total:5.1f}%  {name}" for name, t in rows]
    lines.append(f"{total:9.4f}  100.0%  total ({len(rows)} passes)")
    return "\n".join(lines)


# ------------------------------------------------------------------- pipeline


def lower(
    module: ModuleOp,
    stop_at: str = "loop",
    options: PipelineOptions | None = None,
    on_stage: Callable[[str, ModuleOp], None] = lambda stage, module: None,
    weights: dict[str, np.ndarray] | None = None,
    unscheduled: bool = False,
) -> ModuleOp:
    """`_lower` (below); without `options.verify_each` the input and the result are
    verified instead of each pass's output, and an invalid result names no pass: rerun
    with DLPC_VERIFY_EACH=1 (or --check-each-pass) to find it."""
    options = options or PipelineOptions()
    if not options.verify_each:
        with boundary("verifying the input of the pipeline"):
            verify_ir(module)
    _lower(module, stop_at, options, on_stage, weights, unscheduled)
    if not options.verify_each:
        with boundary("verifying the output of the pipeline (DLPC_VERIFY_EACH=1 names the pass)"):
            verify_ir(module)
    return module


def _lower(
    module: ModuleOp,
    stop_at: str = "loop",
    options: PipelineOptions | None = None,
    on_stage: Callable[[str, ModuleOp], None] = lambda stage, module: None,
    weights: dict[str, np.ndarray] | None = None,
    unscheduled: bool = False,
) -> ModuleOp:
    """Lower graph IR in place down to `stop_at` ("graph", "te", "loop" or "dlp"), for
    the target `target_of(options, stop_at)`: at the loop level its `TARGET_PASSES`
    follow the schedules, so the module is what that target's printer takes.

    `on_stage(stage, module)` sees the module as it enters and after each stage.
    `weights`, when given, are the bound params: static subgraphs over them are folded
    and the new arrays (`folded.N`) are added to this dict. `unscheduled` stops a
    scheduled lowering (`options.schedule`) at the loop level before the kernels'
    schedules: the kernels a compile would schedule, as dlpc-tune searches them.
    """
    options = options or PipelineOptions()
    if stop_at not in STAGES:
        raise DlpcError(f"error: unknown stage '{stop_at}' (expected {', '.join(STAGES)})")
    on_stage("input", module)
    if options.checker:  # --check-each-pass: inputs, params and results as the model enters
        options.checker.start(module, weights)
    level_options = GRAPH_PASS_OPTIONS_BY_LEVEL.get(options.opt_level, {})
    for name in GRAPH_PASSES_BY_LEVEL[options.opt_level]:
        winograd_target = _winograd_target(options, stop_at)
        if name == "graph-winograd" and (weights is None or winograd_target is None):
            # only with the weights folded (a training step's change every call: the filter
            # would be transformed on every call) and for the targets its cost rule was
            # measured on (loop-to-dlp cannot tile its output transform's reads)
            continue
        if (
            name in ("graph-conv-layout", "graph-layout")
            and name not in options.extra
            and target_of(options, stop_at) == "dlp"
        ):
            continue  # their rule is a CPU's vector width; dlp.conv2d and dlp.pool read NCHW
        if name != FOLD_PARAMS:  # shapes first, then -O graph rewrites
            fixed = {**level_options.get(name, {}), **options.extra.get(name, {})}
            if name == "graph-winograd":  # its rule is the target's (c or opencl)
                fixed = {"target": winograd_target, **fixed}
            run(name, module, options, **fixed)
        elif weights is not None:
            fold_weights(module, weights, options.checker)  # what only depends on weights
    on_stage("graph", module)
    if stop_at == "graph":
        return module
    run("graph-to-te", module, options)  # DL ops -> compute definitions
    on_stage("te", module)
    if stop_at == "te":
        return module
    # computes -> loop nests over buffers; softmax/layer-norm row groups as one blocked row
    # kernel for the CPU schedules (OpenCL wants the rows as work-items: separate kernels)
    run("te-to-loop", module, options, fuse_rows=options.schedule)
    if any("dlpc.short_extents" in op.attributes for op in module.ops):
        # symbolic dims: kernels of their own for the short bindings @main names
        run("loop-short-extents", module, options)
    if unscheduled:
        on_stage("loop", module)
        return module
    if options.tuning_log:  # tuned schedules where logged, defaults elsewhere
        run("loop-apply-tuning-log", module, options, log=options.tuning_log)
    elif options.schedule and options.opt_level >= 1:
        run("loop-default-schedule", module, options)  # a heuristic schedule per kernel
    target = target_of(options, stop_at)
    if target == "dlp":  # its passes leave the loop level
        on_stage("loop", module)
        if stop_at == "loop":
            return module
    for name in TARGET_PASSES.get(target or "", ()):  # what the target's printer needs
        if name == "dlp-pack-params":  # the pack is folded: only with the weights bound
            if weights is not None:
                desc = options.extra.get("loop-to-dlp", {}).get("target_desc", "")
                fixed = {"target_desc": desc} if desc else {}
                run(name, module, options, weights=weights, **fixed)
            continue
        run(name, module, options)
    on_stage("dlp" if target == "dlp" else "loop", module)
    return module


def target_of(options: PipelineOptions, stop_at: str) -> str | None:
    """The target `lower` lowers for: the dlp stage is the dlp target's; else the
    options' target, or C's when scheduled (`schedules_for`), or None."""
    if stop_at == "dlp":
        return "dlp"
    if options.target is not None:
        return options.target
    return "c" if options.schedule else None


def _winograd_target(options: PipelineOptions, stop_at: str) -> str | None:
    """The target whose cost rule graph-winograd applies, None where it does not run: C
    or OpenCL's (under OpenCL's GPU launch plans "opencl-gpu"); an unscheduled lowering to the loop level for no target is OpenCL's
    (`schedules_for`); the dlp target and the stages above loop for none take none."""
    target = target_of(options, stop_at)
    if target == "opencl" and options.opencl_plans == "gpu":
        return "opencl-gpu"
    if target in ("c", "opencl"):
        return target
    return "opencl" if stop_at == "loop" and target is None else None


def emit(module: ModuleOp, target: str) -> str:
    """Source code for `target` from a module already lowered to `EMITTERS[target]`."""
    emitters = {
        "numpy": ("dlpc.backends.numpy", "emit_numpy"),
        "c": ("dlpc.backends.c", "emit_c"),
        "opencl": ("dlpc.backends.opencl", "emit_opencl"),
        "dlp-c": ("dlpc.backends.dlp_c", "emit_dlp_c"),
    }
    if target not in emitters:
        raise DlpcError(f"error: unsupported target '{target}' (expected {', '.join(emitters)})")
    module_name, fn_name = emitters[target]
    try:
        fn = getattr(importlib.import_module(module_name), fn_name)
    except ImportError as e:
        raise DlpcError(f"error: target '{target}' is not available ({e})") from None
    with boundary(f"emitter {target}"):
        return fn(module)


def schedules_for(target: str) -> bool:
    """Whether `target` takes the CPU loop schedules: C does; OpenCL maps te-to-loop's
    parallel loops to its NDRange and loop-to-dlp tiles the plain nests itself."""
    return target in ("c", "loop")


def compile_to(
    module: ModuleOp,
    emit_kind: str,
    options: PipelineOptions | None = None,
    on_stage: Callable[[str, ModuleOp], None] = lambda stage, module: None,
    weights: dict[str, np.ndarray] | None = None,
) -> str:
    """Text for `dlpc --emit=`: IR of a stage, or source code of a target."""
    if emit_kind in STAGES:
        return str(lower(module, emit_kind, options, on_stage, weights)) + "\n"
    if emit_kind in EMITTERS:
        options = options or PipelineOptions()
        if emit_kind in TARGET_OF_EMITTER and options.target is None:
            options = dataclasses.replace(options, target=TARGET_OF_EMITTER[emit_kind])
        return emit(lower(module, EMITTERS[emit_kind], options, on_stage, weights), emit_kind)
    kinds = ", ".join((*STAGES, *EMITTERS))
    raise DlpcError(f"error: unknown --emit kind '{emit_kind}' (expected {kinds})")


# ---------------------------------------------------------------------- stats

KERNEL_OPS = {"te.compute", "te.reduce", "loop.kernel", "dlp.kernel"}
NOT_KERNELS = {"graph.param", "graph.constant", "graph.yield"}


def memory_stats(module: ModuleOp) -> tuple[int, int] | None:
    """(the memory plan's arena bytes, the sum of the intermediates' bytes) of a module
    loop-memory-plan has planned, else None."""
    for func in module.ops:
        attrs = getattr(func, "attributes", {})
        if "dlpc.arena_bytes" in attrs and "dlpc.intermediate_bytes" in attrs:
            return attrs["dlpc.arena_bytes"].value.data, attrs["dlpc.intermediate_bytes"].value.data
    return None


def packed_stats(module: ModuleOp) -> int | None:
    """The bytes of resident pre-packed weights loop-prepack-weights made, else None."""
    for func in module.ops:
        attrs = getattr(func, "attributes", {})
        if "dlpc.packed_bytes" in attrs:
            return attrs["dlpc.packed_bytes"].value.data
    return None


def dlp_scalar_kernels(module: ModuleOp) -> list[tuple[str, str]]:
    """(kernel, why) for each dlp.kernel whose compute loop-to-dlp left as scalar loops
    (its `dlpc.scalar` attribute)."""
    out = []
    for op in module.walk():
        why = op.attributes.get("dlpc.scalar") if op.name == "dlp.kernel" else None
        name = op.properties.get("name")
        if isinstance(why, StringAttr) and isinstance(name, StringAttr):
            out.append((name.data, why.data))
    return out


def stats(module: ModuleOp) -> tuple[Counter, int]:
    """(op counts by name, kernel count) of the top level of each function: a graph
    op (other than param/constant) or a fused op is one kernel; so is a te compute or
    reduce, a loop.kernel and a dlp.kernel, except the `dlpc.prepare` kernels of
    loop-prepack-weights (they pack weights once per binding, outside a call)."""
    ops: Counter = Counter()
    kernels = 0
    for func in module.ops:
        for op in func.regions[0].block.ops if func.regions else ():
            ops[op.name] += 1
            graph_kernel = op.name.startswith("graph.") and op.name not in NOT_KERNELS
            per_call = "dlpc.prepare" not in op.attributes
            kernels += graph_kernel or (op.name in KERNEL_OPS and per_call)
    return ops, kernels
