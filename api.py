"""dlpc's Python API: load a model, compile it for a target, call it on numpy arrays.

import dlpc
model = dlpc.load("examples/mlp.dlpc")          # .dlpc text, .onnx or .mlir graph IR
fn = dlpc.compile(model, target="numpy")        # or "c"
(y,) = fn(x)                                     # a list of outputs
print(fn.source)                                 # the generated code
print(fn.time(x, repeat=10))                     # median seconds per call
"""

from __future__ import annotations

import builtins
import os
import statistics
import threading
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from dlpc import settings as dlpc_settings
from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError
from dlpc.dialects import symdims
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.reference import graph as ref

if TYPE_CHECKING:
    from dlpc.runtime.dynamic import DynamicFunction

TARGETS = ("numpy", "c", "opencl", "dlp")
STAGE_OF = {"numpy": "graph", "c": "loop", "opencl": "loop", "dlp": "dlp"}  # what it runs
# `compile(short=)`'s default: a symbolic model's one C program carries kernels of its
# own for each dim that leads no input at 1..SHORT (the batch at 1); past it the
# generic kernels' tiles are whole or mostly so (docs/design/dynamic-short-lengths.md)
SHORT = 8


# ----------------------------------------------------------------------- load


def load_weights(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Weights from an .npz file (name -> array)."""
    path = Path(path)
    if not path.is_file():
        raise DlpcError(f"error: no such weights file: {path}")
    # (an empty file is an EOFError, a damaged archive a BadZipFile, an object array a
    # ValueError when its member is read)
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        data = np.load(path, allow_pickle=False)
    except unreadable as e:
        raise DlpcError(f"error: cannot read weights {path}: {e}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise DlpcError(f"error: weights {path} must be an .npz archive of named arrays")
    with data:
        try:
            return {k: data[k] for k in data.files}
        except unreadable as e:
            raise DlpcError(f"error: cannot read weights {path}: {e}") from None


def _check_weights_argument(weights: object) -> None:
    """`load(weights=)`: an .npz path or a dict of arrays; anything else is one line."""
    if weights is not None and not isinstance(weights, str | os.PathLike | Mapping):
        what = type(weights).__name__
        raise DlpcError(f"error: weights must be an .npz path or a dict of arrays, not {what}")


def _as_model(result, path: Path, weights) -> Model:
    """Frontends return a Model or (module, weights)."""
    if isinstance(result, Model):
        return result
    if hasattr(result, "module") and hasattr(result, "weights"):
        return Model(result.module, dict(result.weights), path.stem, str(path))
    module, found = result
    return Model(module, dict(found or {}), path.stem, str(path))


def load(path: str | os.PathLike, weights=None, batch=None, format=None, dims=None) -> Model:
    """Load a model: `.dlpc` (text), `.onnx`, or `.mlir` (graph IR). `weights` (an .npz
    path or a dict) override the model's own; an .mlir model's weights are otherwise
    read from `<model>.npz` beside it. A .dlpc model's named dims (`x: f32[B, 784]`) stay
    symbolic, as an ONNX `dim_param` does: `dlpc.compile` gives one program for every
    value of them (docs/dynamic.md); `batch=N` binds each input's named leading dim and
    `dims={"B": 32}` binds by name, for a program specialised to those sizes. `format`
    ("dlpc", "onnx" or "mlir") reads a file whose extension says otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DlpcError(f"error: no such file: {path}")
    suffix = f".{format}" if format else path.suffix.lower()
    _check_weights_argument(weights)
    if dims is not None and suffix != ".dlpc":
        raise DlpcError(f"error: dims= binds a .dlpc model's named dims, not a {suffix} model's")
    if suffix == ".dlpc":  # the frontend reads an .npz itself, to name it in its errors
        try:
            from dlpc.frontends.text import load_model
        except ImportError as e:
            raise DlpcError(f"error: the text frontend is not available ({e})") from None
        model = load_model(str(path), weights=weights, dims=dims, batch=batch)
        return _as_model(model, path, weights)
    if isinstance(weights, str | os.PathLike):
        weights = load_weights(weights)
    if suffix == ".onnx":
        try:
            from dlpc.frontends.onnx import load_model as load_onnx
        except ImportError as e:
            raise DlpcError(f"error: the ONNX frontend is not available ({e})") from None
        return _as_model(load_onnx(str(path), weights=weights), path, weights)
    if suffix == ".mlir":
        module = pipeline.parse_module(path.read_text(), str(path))
        beside = path.with_suffix(".npz")
        if weights is None and beside.is_file():
            weights = load_weights(beside)
        return Model(module, dict(weights or {}), path.stem, str(path))
    raise DlpcError(
        f"error: unknown model format '{suffix or path.name}' (expected .dlpc, .onnx or .mlir)"
    )


def _require_graph_level(model: Model) -> FuncOp:
    """@main of a model that runs: graph-level IR, taking and returning tensors. Lower-level
    IR (loop, dlp: memref arguments) compiles to source with `dlpc`, but has no reference,
    no random inputs and no runner signature."""
    from xdsl.dialects.builtin import TensorType

    func = ref.main_func(model.module)
    types = [*func.function_type.inputs.data, *func.function_type.outputs.data]
    other = next((t for t in types if not isinstance(t, TensorType)), None)
    if other is not None:
        raise DlpcError(
            f"error: {model.path or model.name}: @main takes or returns {other}, not a "
            f"tensor: only graph-level models run here (lower-level IR compiles to source "
            f"with `dlpc --emit c`)"
        )
    return func


# -------------------------------------------------------------------- compile


def check_weights(model: Model) -> dict[str, np.ndarray]:
    """Every graph.param bound, with the declared shape and dtype."""
    bound = {}
    for op in ref.main_func(model.module).walk():
        if isinstance(op, ref.graph.ParamOp) and op.pname not in bound:
            if op.pname not in model.weights:
                raise DlpcError(
                    f"error: no value for weight '{op.pname}' (graph.param in "
                    f"{model.name}); pass weights= or --weights"
                )
            bound[op.pname] = ref.evaluate_op(op, [model.weights[op.pname]])
    return bound


@dataclass
class CompiledModel:
    """A model compiled for a target; call it on numpy arrays."""

    model: Model
    target: str
    source: str
    _lowered: ModuleOp | str  # the lowered module, or its text (a warm compile: parsed on use)
    runner: Callable[[list[np.ndarray]], list[np.ndarray]]
    artifact: ModuleFunction | None = None  # the runtime (CFunction, OpenCLFunction, DlpFunction)
    cached: bool = False  # True when a warm compile reused the whole artifact (no pipeline)
    # a model whose inputs decide its shapes (`Model.specialiser`): one compiled model per
    # value of those inputs; source, lowered and artifact above are the newest one's
    specialisations: dict[tuple, CompiledModel] = field(default_factory=dict, repr=False)
    _main: FuncOp | None = field(default=None, init=False, repr=False)
    _specs: list = field(default_factory=list, init=False, repr=False)
    _names: list[str] = field(default_factory=list, init=False, repr=False)
    # the C runtime itself (`CFunction`), called straight on inputs that pass the check:
    # it returns a fresh list of arrays, so the runner's wrapping and the output checks of
    # `__call__` are not needed (docs/design/c-backend.md#direct-call)
    _direct: Callable[..., list[np.ndarray]] | None = field(default=None, init=False, repr=False)
    # the arguments `compile` was called with, options included (what `to` compiles with)
    compile_args: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def lowered(self) -> ModuleOp:
        """The module as the pipeline left it (loop IR for C, graph IR for numpy)."""
        if isinstance(self._lowered, str):
            self._lowered = pipeline.parse_module(self._lowered, f"<cached {self.model.name}>")
        return self._lowered

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        direct, specs = self._direct, self._specs
        fast = getattr(direct, "_fast", None)  # the C runtime's own check and call
        if fast is not None and direct is not None and specs:  # (specs: a first call checked)
            outputs = fast(*inputs)  # None: an input to check, convert or refuse
            return outputs if outputs is not None else direct(*self.check_inputs(inputs))
        if direct is not None and len(inputs) == len(specs):  # (specs: after a first call)
            for x, (shape, dtype) in zip(inputs, specs):
                if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype:
                    break
            else:
                return direct(*inputs)
        outputs = self.runner(self.check_inputs(inputs))
        if all(type(y) is np.ndarray for y in outputs):
            return outputs if type(outputs) is list else list(outputs)
        return [y if type(y) is list else np.asarray(y) for y in outputs]  # (list: a sequence)

    def check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inputs as arrays, checked against @main's signature (read once). Arrays
        of the right shape and dtype pass through untouched: the common case costs a
        comparison per input (a call of a small model is a few microseconds)."""
        specs = self._specs
        if specs and len(inputs) == len(specs):
            for x, (shape, dtype) in zip(inputs, specs):
                if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype:
                    break
            else:
                return list(inputs)
        spec = self.model.specialiser
        if spec is not None and not self._names:  # every input a call passes
            self._names = [s.name for s in spec.inputs]
            self._specs = [(s.shape, s.dtype) for s in spec.inputs]
        elif spec is None and self._main is None:
            self._main = _require_graph_level(self.model)
            self._specs = [(ref.graph.shape_of(a), ref.result_dtype(a)) for a in self._main.args]
        arrays = [np.asarray(x) for x in inputs]
        if len(arrays) == len(self._specs) and all(
            a.shape == s and a.dtype == d for a, (s, d) in zip(arrays, self._specs)
        ):
            return arrays
        if self._main is not None:
            return ref.check_inputs(self._main, inputs)  # the one-line error naming the input
        return _check_against(self._names, self._specs, arrays)

    def to(self, device) -> CompiledModel:
        """The model compiled for runtime device `device` with this model's own compile
        options (`compile(model, ..., device=)`): weights resident there, called on its
        tensors. Where the device's target is not this model's, the options that belong
        to a target (`tuning_log`, OpenCL's `profile`) stay behind; the rest go along."""
        from dlpc.runtime import device as devices

        args = dict(self.compile_args) or {"target": self.target}
        wanted = DEVICE_TARGETS[devices.device(device).type]
        if args.get("target", "c") != wanted:
            args.update(target="c", tuning_log=None)  # ("c": unset, the device decides)
            args.pop("profile", None)
        args["device"] = device
        return compile(self.model, **args)

    def time(self, *inputs: np.ndarray, repeat: int = 10, warmup: int = 1) -> float:
        """Median wall time of one call in seconds, after `warmup` calls."""
        arrays = self.check_inputs(inputs)
        for _ in range(warmup):
            self.runner(arrays)
        times = []
        for _ in range(max(repeat, 1)):
            start = time.perf_counter()
            self.runner(arrays)
            times.append(time.perf_counter() - start)
        return statistics.median(times)


def _check_against(names: list[str], specs: list, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """`reference.graph.check_inputs` for a model known by its input specs."""
    if len(arrays) != len(specs):
        raise DlpcError(
            f"error: the model takes {len(specs)} inputs ({', '.join(names)}) "
            f"but {len(arrays)} were given"
        )
    if any(symdims.is_symbolic(shape) for shape, _ in specs):  # the dims bind per call
        try:
            symdims.bind_inputs(names, [s for s, _ in specs], [x.shape for x in arrays])
        except symdims.SymbolicError as e:
            raise DlpcError(f"error: {e}") from None
    for name, (shape, dtype), x in zip(names, specs, arrays):
        if symdims.is_symbolic(shape):
            pass
        elif x.shape != shape:
            raise DlpcError(
                f"error: input '{name}' has shape {ref.graph.fmt_shape(x.shape)} "
                f"but the model expects {ref.graph.fmt_shape(shape)}"
            )
        if x.dtype != dtype:
            raise DlpcError(
                f"error: input '{name}' has dtype {x.dtype} but the model expects {dtype}"
            )
    return arrays


def _numpy_runner(source: str, weights: dict) -> Callable:
    namespace: dict = {"__name__": "dlpc_generated"}
    exec(builtins.compile(source, "<dlpc --emit=numpy>", "exec"), namespace)  # noqa: S102
    main = namespace["main"]
    return lambda arrays: list(main(*arrays, params=weights))


def _opencl_plans(profile: str | None, place=None) -> str:
    """Target opencl: the launch plans ("cpu" or "gpu", `opencl_rt.launch_profile`) of the
    device the model runs on (`place`'s, else the default device), resolved before
    lowering, since graph-winograd's cost rule is the plans'."""
    try:
        from dlpc.backends.runtime.opencl_rt import launch_profile
    except ImportError as e:
        raise DlpcError(f"error: target 'opencl' is not available ({e})") from None
    return launch_profile(profile, place.backend.cl_device if place is not None else None)


def _check_plan_log(path: str, plans: str) -> None:
    """A tuning log given for target opencl: `dlpc-tune --target opencl`'s records, which
    choose GPU plans (`tune/gpu.py`); a one-line error under the CPU plans (`plans`, as
    `_opencl_plans` resolved them), which take no params, and for a log that is not one
    (read at once: `TuningLog`)."""
    if plans != "gpu":
        raise DlpcError(
            "error: a tuning log applies to target 'c' and to target 'opencl''s GPU "
            "launch plans (profile='gpu' or DLPC_OPENCL_PROFILE=gpu); this device gets the "
            "CPU plans"
        )
    from dlpc.passes.schedule.tuning_log import TuningLog

    TuningLog(path)


def _runtime(
    target: str,
    lowered: ModuleOp,
    name: str,
    profile: str | None = None,
    place=None,
    tuning_log: str | None = None,
):
    """The compiled artifact for a lowered module: source text, callable on
    `(*inputs, params=...)`. C: cbuild (cached shared library); OpenCL: pyopencl (its GPU
    plans' params from `tuning_log`); dlp: DLP C on the simulator."""
    try:
        if target == "c":
            from dlpc.backends.runtime.cbuild import CFunction as Function
        elif target == "opencl":
            from dlpc.backends.runtime.opencl_rt import OpenCLFunction as Function
        else:
            from dlpc.backends.runtime.dlp_sim import DlpFunction as Function
    except ImportError as e:
        raise DlpcError(f"error: target '{target}' is not available ({e})") from None
    if target == "opencl":  # (its launch plans: "cpu", "gpu" or the device's; on a
        # runtime device, device buffers)
        where = {"device": place.backend.cl_device, "svm": False} if place is not None else {}
        return Function(lowered, name=name, profile=profile, tuning_log=tuning_log, **where)  # pyright: ignore[reportCallIssue]
    return Function(lowered, name=name)


def pass_options(options: dict) -> dict[str, dict]:
    """`graph_fuse={"horizontal": False}` -> {"graph-fuse": {"horizontal": False}}."""
    from dlpc.passes.registry import PASSES

    extra = {}
    for key, value in options.items():
        name = key.replace("_", "-")
        if name not in PASSES or not isinstance(value, dict):
            raise DlpcError(
                f"error: unknown compile option '{key}' (expected a pass name "
                f"with a dict of its options, e.g. graph_fuse={{...}})"
            )
        extra[name] = value
    return extra


def _artifact_key(model: Model, weights: dict, target: str, settings: dict) -> str | None:
    """The warm-compile key (backends/runtime/artifact.py), None when the C runtime is
    not available."""
    try:
        from dlpc.backends.runtime import artifact
    except ImportError:
        return None
    return artifact.artifact_key(str(model.module), weights, target, settings)


def _warm_compile(model: Model, key: str) -> CompiledModel | None:
    """The cached compiled model for `key` without running the pipeline, or None."""
    from dlpc.backends.runtime import artifact

    entry = artifact.load_entry(key, model.name)
    if entry is None:
        return None
    function = entry.function(model.name)
    compiled = CompiledModel(
        model,
        "c",
        entry.source,
        entry.loop_ir,
        lambda arrays: function(*arrays),
        function,
        cached=True,
    )
    compiled._direct = function
    return compiled


def compile(
    model: Model,
    target: str = "c",
    opt_level: int = 2,  # noqa: A001
    tuning_log: str | None = None,
    fold_weights: bool = True,
    check_each_pass: bool = False,
    buckets: dict[str, list[int]] | None = None,
    max_dims: dict[str, int] | None = None,
    tiles: dict[str, int] | None = None,
    symbolic: bool = True,
    specialise: int = 0,
    device=None,
    batch_chunks: bool = True,
    short: int | list[dict[str, int]] = SHORT,
    **options,
) -> CompiledModel:
    """Lower `model` through the pipeline and build it for `target`.

    `fold_weights=False` keeps every subgraph over the weights in the compiled code: for
    weights that change between calls (a training step's, `dlpc.train`).

    `tuning_log` (`dlpc-tune`'s records): C, the tuned loop schedules; target opencl under
    its GPU plans, each kernel's plan params tuned on the device it runs on
    (`dlpc-tune --target opencl`, `tune/gpu.py`), the defaults elsewhere.

    `options` configure passes by name: `dlpc.compile(m, graph_fuse={"horizontal": False})`.

    `check_each_pass=True` runs the model on seeded random inputs (its own weights) before
    and after every pass (numpy reference, te evaluator, C for loop IR, the simulator for
    dlp IR) and raises a DlpcError naming the first pass that changes a result
    (`dlpc.passes.check`).

    `device="opencl:0"` (a runtime device: `cpu`, `opencl:N`, `dlp:N`; the target is
    its) gives a `DeviceModel`: weights resident on that device, called on `dlpc.Tensor`s.

    `short` (symbolic dims, C): the one program carries kernels of its own for small
    values of a dim, picked per call by a guard in `dlpc_main` (`stats["short"]` counts
    the calls that take them): K gives each dim that leads no input 1..K with the
    leading dims (the batch) at 1; a list gives the bindings (`[{"batch": 1, "seq": 2}]`);
    0 none (passes/lower/short_extents.py, docs/dynamic.md).

    `batch_chunks` (C, folded weights): a per-sample graph whose batch's intermediates
    outgrow the caches is compiled for a chunk of the batch and run chunk after chunk
    (passes/graph/rebatch.py); `lowered`, `source` and `artifact` are the chunk's.
    """
    args: dict[str, Any] = dict(
        target=target, opt_level=opt_level, tuning_log=tuning_log, fold_weights=fold_weights,
        check_each_pass=check_each_pass, buckets=buckets, max_dims=max_dims, tiles=tiles,
        symbolic=symbolic, specialise=specialise, device=device, batch_chunks=batch_chunks,
        short=short, **options,
    )  # fmt: skip
    compiled = _compile(model, **args)  # (a fresh **options: _compile pops from it)
    compiled.compile_args = args
    return compiled


def _compile(
    model: Model,
    target: str,
    opt_level: int,
    tuning_log: str | None,
    fold_weights: bool,
    check_each_pass: bool,
    buckets: dict[str, list[int]] | None,
    max_dims: dict[str, int] | None,
    tiles: dict[str, int] | None,
    symbolic: bool,
    specialise: int,
    device,
    batch_chunks: bool,
    short: int | list[dict[str, int]],
    **options,
) -> CompiledModel:
    """`compile`'s work, on its arguments."""
    layout = sequence_layout(model)
    if layout:  # (a sequence output: the flat program, its results regrouped per call)
        if device is not None:
            raise DlpcError("error: device= takes a model whose outputs are all tensors")
        flat = compile(
            Model(_flat_module(model.module), model.weights, model.name, model.path),
            target, opt_level, tuning_log, fold_weights, check_each_pass, buckets, max_dims,
            tiles, symbolic, specialise, None, batch_chunks, short, **options,
        )  # fmt: skip
        return SequenceOutputs.of(model, flat, layout)
    place = None
    if device is not None:  # (compiled for that device's target, run there)
        place, target = _placement(device, target, model, bool(buckets or max_dims or tiles))
    if target not in TARGETS:
        raise DlpcError(f"error: unsupported target '{target}' (expected {', '.join(TARGETS)})")
    if tuning_log and target not in ("c", "opencl"):  # (opencl: its GPU plans, below)
        raise DlpcError(f"error: a tuning log applies to target 'c', not '{target}'")
    from dlpc.runtime import dynamic

    if (
        tuning_log
        and target == "opencl"
        and (buckets or max_dims or tiles or dynamic.is_dynamic(model) or model.specialiser)
    ):  # (its records are the static program's kernels')
        raise DlpcError("error: a tuning log for target 'opencl' applies to a static model")
    if buckets or max_dims or tiles or dynamic.is_dynamic(model):
        settings = dict(
            target=target,
            opt_level=opt_level,
            tuning_log=tuning_log,
            fold_weights=fold_weights,
            check_each_pass=check_each_pass,
        )
        return _compile_dynamic(
            model,
            settings,
            options,
            buckets or {},
            max_dims or {},
            tiles or {},
            symbolic=symbolic,
            specialise=specialise,
            short=short,
        )
    if model.specialiser is not None:
        settings = dict(
            opt_level=opt_level,
            tuning_log=tuning_log,
            fold_weights=fold_weights,
            check_each_pass=check_each_pass,
        )
        return _compile_per_value(model, target, settings, options)
    # target opencl: its launch plans, "cpu" or "gpu" (`opencl_rt.launch_profile`)
    profile = options.pop("profile", None)
    if profile is not None and target != "opencl":
        raise DlpcError(f"error: profile= applies to target 'opencl', not '{target}'")
    if target == "opencl":  # (before lowering: graph-winograd's cost rule is the plans')
        profile = _opencl_plans(profile, place)
    # target opencl: the log's GPU plan params for the device it runs on (`tune/gpu.py`),
    # given to its runtime; the C loop schedules the pipeline applies are C's alone
    plan_log = tuning_log if target == "opencl" else None
    if plan_log:
        _check_plan_log(plan_log, profile or "cpu")  # (resolved above: target opencl)
        tuning_log = None
    weights = check_weights(model)
    if batch_chunks and target == "c" and place is None and fold_weights and not check_each_pass:
        chunked = _compile_chunks(model, opt_level, tuning_log, options)
        if chunked is not None:
            return chunked
    if target != "numpy" and _has_comm(model):
        split = _compile_split(model, target, opt_level, tuning_log, fold_weights, options)
        assert split.artifact is not None
        split.artifact.bind_params(weights)  # resident, as for one compiled function
        return split
    settings = {
        "opt_level": opt_level,
        "tuning_log": tuning_log,
        "fold_weights": fold_weights,
        "options": options,
    }
    warm = target == "c" and not check_each_pass  # a checking run always runs every pass
    key = _artifact_key(model, weights, target, settings) if warm else None
    if key is not None:
        hit = _warm_compile(model, key)
        if hit is not None:
            return hit if place is None else DeviceModel.of(hit, place)
    opts = pipeline.PipelineOptions(
        opt_level=opt_level,
        tuning_log=tuning_log,
        schedule=pipeline.schedules_for(target),
        target=target if target in pipeline.TARGET_PASSES else None,  # (its printer's IR)
        opencl_plans=profile or "cpu",
        extra=pass_options(options),
        checker=_checker(weights) if check_each_pass else None,
        verify_each=dlpc_settings.flag("DLPC_VERIFY_EACH"),  # else the input and the result
    )
    lowered = pipeline.lower(
        model.module.clone(), STAGE_OF[target], opts, weights=weights if fold_weights else None
    )  # may add folded weights
    if target == "numpy":
        source = pipeline.emit(lowered, target)
        return CompiledModel(model, target, source, lowered, _numpy_runner(source, weights))
    function = _runtime(target, lowered, model.name, profile, place, plan_log)
    function.bind_params(weights)  # resident: checked and converted once, not per call
    if key is not None:
        from dlpc.backends.runtime import artifact
        from dlpc.backends.runtime.cbuild import CFunction

        assert isinstance(function, CFunction)  # (warm artifacts are C: key is None otherwise)
        artifact.store_entry(key, model.name, function, str(lowered))
    compiled = CompiledModel(
        model,
        target,
        function.source,
        lowered,
        lambda arrays: function(*arrays),
        function,
    )
    if target in ("c", "opencl"):  # (their runtimes take the checked arrays as they are)
        compiled._direct = function
    return compiled if place is None else DeviceModel.of(compiled, place)


def _compile_chunks(
    model: Model, opt_level: int, tuning_log: str | None, options: dict
) -> CompiledModel | None:
    """`model` as one chunk's C program run over its batch (`compile`'s batch_chunks),
    or None where that does not apply (rebatch.chunk_plan) or the loop has no C runtime."""
    from dlpc.backends.runtime import fastcall
    from dlpc.backends.runtime.cbuild import CFunction, omp_threads
    from dlpc.backends.runtime.chunks import BatchChunks
    from dlpc.passes.graph.rebatch import CHUNK_BUDGET_BYTES, chunk_plan, rebatch

    if model.ir is None or _has_comm(model) or fastcall.extension() is None:
        return None
    # a chunk's kernels split over the team: each thread's part within its own core's
    # caches (docs/design/c-backend.md#batch-chunks: smaller chunks lost the threads' work)
    team = omp_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    plan = chunk_plan(model.module, CHUNK_BUDGET_BYTES * max(1, team), max(1, team))
    small = rebatch(model.module, plan[1]) if plan is not None else None
    if plan is None or small is None:
        return None
    part = Model(small, model.weights, model.name, model.path)
    one = compile(part, "c", opt_level, tuning_log, batch_chunks=False, **options)
    function = one.artifact
    assert isinstance(function, CFunction)  # (a C compile of a model without comm ops)
    run = BatchChunks(function, plan[0] // plan[1])
    compiled = CompiledModel(
        model, "c", one.source, one._lowered, lambda arrays: run(*arrays), function, one.cached
    )
    compiled._direct = run
    return compiled


DEVICE_TARGETS = {"cpu": "c", "opencl": "opencl", "dlp": "dlp"}


def _placement(device, target: str, model: Model, dynamic: bool):
    """The runtime device `device` names and the target compiled for it; a one-line
    error for a target of another device or a model compiled per binding."""
    from dlpc.runtime import device as devices
    from dlpc.runtime import dynamic as dyn

    place = devices.device(device)
    wanted = DEVICE_TARGETS[place.type]
    if target not in ("c", wanted):  # ("c": the default, taken as unset)
        raise DlpcError(f"error: target '{target}' does not run on device {place}")
    if dynamic or dyn.is_dynamic(model) or model.specialiser is not None:
        raise DlpcError("error: device= takes a model of static shapes")
    return place, wanted


def sequence_layout(model: Model) -> tuple[int, ...]:
    """Per graph output, how many of @main's results its sequence takes (-1: a tensor);
    () when every output is a tensor (the ONNX importer's `dlpc.sequence_outputs`)."""
    from xdsl.dialects.builtin import ArrayAttr, IntegerAttr

    if model.ir is None:
        return ()
    for op in model.ir.ops:  # (a module without @main: no layout, compile says the rest)
        attr = op.attributes.get("dlpc.sequence_outputs") if isinstance(op, FuncOp) else None
        if isinstance(attr, ArrayAttr):
            return tuple(a.value.data for a in attr.data if isinstance(a, IntegerAttr))
    return ()


def _flat_module(module: ModuleOp) -> ModuleOp:
    flat = module.clone()
    ref.main_func(flat).attributes.pop("dlpc.sequence_outputs", None)
    return flat


def regroup(outputs: Sequence[Any], layout: tuple[int, ...]) -> list:
    """@main's results grouped per `layout`: a tensor as it is, a sequence as a list."""
    out: list = []
    k = 0
    for n in layout:
        if n < 0:
            out.append(outputs[k])
            k += 1
        else:
            out.append(list(outputs[k : k + n]))
            k += n
    return out


@dataclass
class SequenceOutputs(CompiledModel):
    """A compiled model with a sequence output: `inner` runs @main's flat results, which
    each call regroups into a list per sequence output (as onnxruntime returns them)."""

    inner: CompiledModel | None = None
    layout: tuple[int, ...] = ()

    @classmethod
    def of(cls, model: Model, inner: CompiledModel, layout: tuple[int, ...]) -> SequenceOutputs:
        def run(arrays: list[np.ndarray]) -> list:
            return regroup(inner.runner(arrays), layout)

        return cls(
            model, inner.target, inner.source, inner._lowered, run, inner.artifact, inner.cached,
            inner=inner, layout=layout,
        )  # fmt: skip

    def __call__(self, *inputs: np.ndarray) -> list:  # pyright: ignore[reportIncompatibleMethodOverride]
        assert self.inner is not None
        return regroup(self.inner(*inputs), self.layout)


@dataclass
class DeviceModel(CompiledModel):
    """A compiled model placed on a runtime device (`compile(..., device=)`,
    `CompiledModel.to`): its weights and buffers stay there between calls. Called on
    tensors (`dlpc.Tensor`) it returns tensors of the same class on its device, an input
    on another device (or a numpy array) moved there first; called on numpy arrays
    alone it returns numpy arrays. It runs through `runtime/device_call.DeviceCall`."""

    device: Any = None
    _call: Any = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, compiled: CompiledModel, device) -> DeviceModel:
        from dataclasses import fields

        from dlpc.runtime.device_call import DeviceCall

        placed = cls(**{f.name: getattr(compiled, f.name) for f in fields(compiled) if f.init})
        placed.device = device
        placed._call = DeviceCall(compiled._direct or compiled.artifact, device)
        placed.runner = lambda arrays: placed(*arrays)  # (the kernels use tensors' buffers)
        return placed

    def __call__(self, *inputs) -> list:  # pyright: ignore[reportIncompatibleMethodOverride]
        from dlpc.runtime.tensor import TensorView

        dev = self.device
        cls = next((type(x) for x in inputs if isinstance(x, TensorView)), None)
        fn = self._call.fn
        specs = fn.arg_specs[: fn.num_inputs]
        if len(inputs) != len(specs):
            raise DlpcError(f"error: the model takes {len(specs)} inputs, {len(inputs)} given")
        tensors = []
        for k, (x, (shape, dtype)) in enumerate(zip(inputs, specs)):
            if not isinstance(x, TensorView):
                x = TensorView.from_numpy(np.asarray(x), dev)
            elif x.device is not dev:
                x = x.to(dev)
            if x.shape != tuple(shape) or x.dtype != dtype:
                raise DlpcError(
                    f"error: input {k} is {list(x.shape)} {x.dtype}, the model takes "
                    f"{list(shape)} {dtype}"
                )
            tensors.append(x)
        outs = self._call.run(tensors, cls or TensorView)
        return outs if cls is not None else [o.numpy() for o in outs]


def _compile_dynamic(
    model: Model,
    settings: dict,
    options: dict,
    buckets: dict,
    max_dims: dict,
    tiles: dict,
    *,
    symbolic: bool,
    specialise: int,
    short: int | list[dict[str, int]],
) -> CompiledModel:
    """A model with symbolic dims: one program with runtime extents serving every value
    of the dims (`symbolic=False`: one compiled program per binding; per bucket with
    `buckets`; with `tiles={"batch": T}` two programs, at T and 1, serve every batch),
    built on first use and cached; a guard per call checks the shapes against the
    declared relations and maxima (`runtime/dynamic.py`). A model whose dims were only
    left unbound (`Model.specialise_first`: a .dlpc model loaded without a binding),
    compiled with none of these options, gives its first call's binding a program of
    its own and the one program serves every other binding (at most 2 compiles)."""
    from dlpc.runtime.dynamic import DynamicFunction, is_dynamic

    if not is_dynamic(model):
        raise DlpcError(
            "error: buckets=, max_dims= and tiles= apply to a model with symbolic dims; this "
            "model's shapes are static"
        )

    def compile_static(static: Model):
        one = compile(static, **settings, **options)
        function.last = one
        return one

    function = DynamicFunction(
        model,
        compile_static,
        buckets,
        max_dims,
        tiles,
        symbolic=symbolic,
        target=settings["target"],
        specialise=specialise,
        short=short,
    )
    compiled = DynamicCompiledModel(
        model, settings["target"], "", ModuleOp([]), lambda arrays: compiled.dispatch(arrays)
    )
    compiled.function = function
    if model.specialise_first and symbolic and not (buckets or max_dims or tiles or specialise):
        compiled.build_first = lambda arrays: compile_static(bind_dims(model, inputs=arrays))
        compiled.first_lock = threading.Lock()
    return compiled


class DynamicCompiledModel(CompiledModel):
    """A compiled model over symbolic dims (`runtime/dynamic.py`): a call binds the dims
    (the guard), pads to a bucket if asked, and runs the program compiled for that binding.
    `source`, `lowered` are the newest program's; `stats` counts calls and compiles."""

    function: DynamicFunction  # (set by _compile_dynamic)
    # (set by _compile_dynamic for a `specialise_first` model) the static program of a
    # binding, from a call's arrays; the first call's binding gets one, held in `first`
    build_first: Callable[[list[np.ndarray]], CompiledModel] | None = None
    first: tuple[tuple, CompiledModel] | None = None  # its (shape, dtype)s and program
    first_lock: Any = None  # (with build_first) held while the first binding compiles

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.function.stats, programs=self.function.programs + bool(self.first))

    def dispatch(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """A call: the first binding's own program where it has one, else the function."""
        if self.build_first is not None:
            first = self.first
            if first is None:  # (the guard first: bad shapes are its one line)
                arrays = [np.asarray(x) for x in arrays]
                self.function.bind(arrays)
                with self.first_lock:  # threads racing on the first call: one compiles
                    first = self.first
                    if first is None:
                        shapes = tuple((x.shape, x.dtype) for x in arrays)
                        first = self.first = (shapes, self.build_first(arrays))
                        stats = self.function.stats
                        stats["compiles"] += 1
                        stats["specialised"] = stats.get("specialised", 0) + 1
            shapes, one = first
            if len(arrays) == len(shapes) and all(
                isinstance(x, np.ndarray) and x.shape == s and x.dtype == d
                for x, (s, d) in zip(arrays, shapes)
            ):
                self.function.stats["calls"] += 1
                return one(*arrays)
        return self.function(*arrays)

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        function = self.function
        fast = function._fast  # (the previous call's binding: no guard, same program)
        if fast is not None:
            outputs = fast(*inputs)
            if outputs is not None:
                function.count_fast()
                return outputs
        outputs = self.dispatch(inputs)
        last = self.function.last
        if isinstance(last, CompiledModel):
            self.source, self._lowered = last.source, last._lowered
        return outputs

    def check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrays = [np.asarray(x) for x in inputs]
        self.function.bind(arrays)
        return arrays


def _has_comm(model: Model) -> bool:
    from dlpc.runtime.comm_split import has_comm

    return has_comm(model.module)


def _compile_split(
    model: Model, target: str, opt_level: int, tuning_log, fold_weights: bool, options: dict
) -> CompiledModel:
    """A graph with comm ops on a compiled target: each run of ops between two comm ops
    compiled on its own, the collectives between them on MPI (runtime/comm_split.py)."""
    if target != "c":
        raise DlpcError(f"error: comm ops run on targets numpy and c, not '{target}'")
    from dlpc.runtime.comm_split import SplitFunction

    def build(segment: ModuleOp, k: int):
        part = Model(segment, model.weights, f"{model.name}_seg{k}", model.path)
        one = compile(part, target, opt_level, tuning_log, fold_weights, **options)
        assert one.artifact is not None  # (a C compile always has its runtime)
        return one.artifact

    function = SplitFunction(model.module, build)
    return CompiledModel(
        model, target, function.source, model.module, lambda arrays: function(*arrays), function
    )


def _checker(weights: dict[str, np.ndarray]):
    from dlpc.backends.runtime.evaluate import make_checker

    return make_checker(weights)


def _compile_per_value(model: Model, target: str, settings: dict, options: dict) -> CompiledModel:
    """A compiled model that dispatches on the values of the inputs that decide `model`'s
    shapes: per distinct value (dtype, shape and bytes) the frontend builds the static
    model with those values frozen, compiled once and cached, like a JIT guard; the call's
    other inputs go to it by name."""
    spec = model.specialiser
    assert spec is not None

    def specialise(values: dict[str, np.ndarray], static: Model | None = None) -> CompiledModel:
        static = static or spec.build(values)  # may add to spec.shape_inputs
        one = compile(static, target, **settings, **options)
        compiled.specialisations[spec.key(values)] = one
        compiled.source, compiled._lowered = one.source, one._lowered
        compiled.artifact, compiled.cached = one.artifact, one.cached
        return one

    def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
        values = dict(zip((s.name for s in spec.inputs), arrays))
        one = compiled.specialisations.get(spec.key(values)) or specialise(values)
        return one.runner([values[n] for n in one.model.input_names])

    compiled = CompiledModel(model, target, "", ModuleOp([]), run)
    if model.ir is not None and not spec.shape_inputs:  # one graph (empty inputs): build it now
        specialise({}, Model(model.ir, model.weights, model.name, model.path))
    return compiled


def bind_dims(
    model: Model, dims: dict[str, int] | None = None, inputs: Sequence[np.ndarray] | None = None
) -> Model:
    """The static model of a model with symbolic dims at `dims` (name -> size) or at the
    shapes of `inputs` (checked by the guard); a symbol neither gives is 1. A static model
    is returned as it is."""
    from dlpc.runtime.dynamic import DynamicFunction, is_dynamic

    if not is_dynamic(model):
        return model
    function = DynamicFunction(model, lambda static: static)  # pyright: ignore[reportArgumentType]
    bound = function.bind([np.asarray(x) for x in inputs]) if inputs is not None else {}
    names = set().union(*(symdims.symbols(s) for s in function.sig.shapes))
    bound = {n: 1 for n in names} | dict(dims or {}) | bound
    if inputs is None:
        inputs = [
            np.zeros(symdims.bind_shape(s, bound), d)
            for s, d in zip(function.sig.shapes, function.sig.dtypes)
        ]
    static = function._build((), bound, list(inputs))
    assert isinstance(static, Model)
    return static


def reference(model: Model, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The numpy reference's outputs for `model` on `inputs` (no optimisation)."""
    model = bind_dims(model, inputs=inputs)  # (symbolic dims: bound by the inputs' shapes)
    _require_graph_level(model)
    return ref.run_reference(model.module, inputs, check_weights(model))


def _index_bound(value, default: int = 10) -> int:
    """Exclusive upper bound for random integers fed to `value`: an input used as
    graph.gather indices must index the gathered dim."""
    bound = default
    for use in value.uses:
        op = use.operation
        if isinstance(op, ref.graph.GatherOp) and use.index == 1:
            data = ref.graph.shape_of(op.operands[0])
            axis = ref.graph.normalize_axis(op.axis, len(data))
            bound = min(bound, data[axis])
    return max(bound, 1)


def _concrete_shape(arg, dims: dict[str, int]) -> tuple[int, ...]:
    shape = ref.graph.shape_of(arg)
    missing = sorted(symdims.symbols(shape) - set(dims))
    if missing:
        name = arg.name_hint or "input"
        raise DlpcError(
            f"error: input '{name}' has symbolic dim(s) {', '.join(missing)}: give their "
            f"values, e.g. random_inputs(model, dims={{{missing[0]!r}: 1}})"
        )
    return tuple(symdims.evaluate(d, dims) for d in shape)


def random_inputs(
    model: Model, seed: int = 0, dims: dict[str, int] | None = None
) -> list[np.ndarray]:
    """Reproducible random inputs: floats ~ N(0, 1), bools 50/50, ints in [0, 10) or,
    for gather indices, within the gathered dim. A model with symbolic dims needs their
    values (`dims={"B": 4}`); one left without is a one-line error naming the input."""
    rng = np.random.default_rng(seed)
    arrays = []
    args = _require_graph_level(model).args
    if model.specialiser is not None:  # inputs that are not arguments are empty: zeros
        by_name = dict(zip(ref.input_names(ref.main_func(model.module)), args))
        for s in model.specialiser.inputs:
            if s.name not in by_name:
                arrays.append(np.zeros(s.shape, s.dtype))
                continue
            arrays += _random_like(rng, [by_name[s.name]], dims or {})
        return arrays
    return _random_like(rng, args, dims or {})


def _random_like(rng: np.random.Generator, args, dims: dict[str, int]) -> list[np.ndarray]:
    arrays = []
    for arg in args:
        shape, dtype = _concrete_shape(arg, dims), ref.result_dtype(arg)
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(0, _index_bound(arg), shape).astype(dtype))
    return arrays
