"""Calling a model with symbolic dims: bind the dims per call, one compiled program per
distinct binding (or per bucket), guarded, cached.

A model whose inputs have symbolic dims (`dialects.symdims`: an ONNX `dim_param`, a
`.dlpc` named dim, `tensor<?x784xf32, ["batch"]>`) is called through a `DynamicFunction`:

1. guard: the call's shapes bind the symbols (`symdims.bind_inputs`): a rank, a static
   dim, a symbol two inputs share, an expression (`2*seq`) or a declared maximum that the
   call breaks is one line naming the input and the dim, before any kernel runs;
2. bucketing (`buckets={"seq": [32, 64, 128]}`): a bucketed symbol's value is rounded up
   to the nearest bucket; inputs are padded with zeros along the axes that are that
   symbol, and the ops that would read the padding (softmax over it, reductions over it,
   a matmul contracting over it) are masked by `graph-mask-padding`, which gives the
   graph one more input: the mask of valid positions; outputs are sliced back;
3. dispatch: the binding (after bucketing) keys a cache of compiled programs; a miss
   builds the static graph (`graph-bind-dims` on the symbolic graph, or the frontend's
   per-shape build when the graph could not stay symbolic) and compiles it.

One compile (`symbolic=True`, the default without buckets or tiles): the symbolic graph
itself is compiled once, with runtime extents (passes/lower/_symbolic.py): its buffers
are sized for each symbol's maximum (`max_dims`, else DEFAULT_MAX, doubled by a new
compile when a call goes above an undeclared one), the call's dims go in as one more
input (`dlpc_dims`), inputs are copied into max-shaped buffers and outputs sliced back.
A model that cannot compile so (a graph the import could not keep symbolic, a target
without runtime extents) falls back to one program per binding; `symbolic_error` says why.
With `specialise=N`, a binding called N times gets its own static program as well
(`stats["specialised"]`), the generic one serving every other.

`stats` counts calls, compiles (cache misses) and guard hits.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType

from dlpc.diagnostics import DlpcError
from dlpc.dialects import symdims
from dlpc.model import Model
from dlpc.reference import graph as ref

MAX_ATTR = "dlpc.max_dims"  # (passes/lower/_symbolic.py: the program's buffers' maxima)

# what compiles one static model: api.compile with the caller's options
CompileStatic = Callable[[Model], Callable[..., list[np.ndarray]]]
# a symbol's buffers' size when max_dims does not declare it (grown by doubling)
DEFAULT_MAX = 128
# targets whose pipeline takes runtime extents (te-to-loop's guards)
SYMBOLIC_TARGETS = ("c", "opencl", "numpy")


@dataclass(frozen=True)
class Signature:
    """The inputs a call passes (name, symbolic shape, dtype) and the outputs' shapes
    (None when unknown: a model built per shape)."""

    names: tuple[str, ...]
    shapes: tuple[tuple[symdims.Dim, ...], ...]
    dtypes: tuple[np.dtype, ...]
    outputs: tuple[tuple[symdims.Dim, ...], ...] | None


def signature(model: Model) -> Signature:
    if model.ir is not None:
        main = ref.main_func(model.module)
        return Signature(
            tuple(ref.input_names(main)),
            tuple(ref.graph.shape_of(a) for a in main.args),
            tuple(np.dtype(ref.result_dtype(a)) for a in main.args),
            tuple(ref.graph.shape_of(t) for t in main.function_type.outputs.data),
        )
    spec = model.specialiser
    assert spec is not None
    return Signature(
        tuple(s.name for s in spec.inputs),
        tuple(s.shape for s in spec.inputs),
        tuple(np.dtype(s.dtype) for s in spec.inputs),
        None,
    )


def is_dynamic(model: Model) -> bool:
    """Whether a call of `model` binds symbolic dims."""
    if model.ir is None:
        spec = model.specialiser
        return spec is not None and any(symdims.is_symbolic(s.shape) for s in spec.inputs)
    try:
        main = ref.main_func(model.module)
    except DlpcError:
        return False
    if MAX_ATTR in main.attributes:  # the one-compile program's module (`_generic`)
        return False
    return any(
        isinstance(a.type, TensorType) and symdims.is_symbolic(ref.graph.shape_of(a))
        for a in main.args
    )


@dataclass
class DynamicFunction:
    model: Model
    compile_static: CompileStatic
    buckets: Mapping[str, Sequence[int]] = field(default_factory=dict)
    maxima: Mapping[str, int] = field(default_factory=dict)
    tiles: Mapping[str, int] = field(default_factory=dict)
    cache: dict[tuple, Callable[..., list[np.ndarray]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=lambda: {"calls": 0, "compiles": 0})
    last: object = None  # the newest compiled program (api's CompiledModel)
    symbolic: bool = True  # one compile with runtime extents when the model allows it
    target: str = "c"
    specialise: int = 0  # calls of one binding after which it gets its own program
    # the one program's kernels of their own for small dims (`Generic.versions`): K (each
    # non-leading dim at 1..K, the leading ones at 1) or the bindings themselves
    short: int | Sequence[Mapping[str, int]] = 0

    def __post_init__(self) -> None:
        self.sig = signature(self.model)
        known = set().union(*(symdims.symbols(s) for s in self.sig.shapes))
        self.symbolic_error: str | None = None
        self.generic: Generic | None = None
        self.hits: dict[tuple, int] = {}
        if self.symbolic and not self.buckets and not self.tiles:
            if self.model.ir is None:
                spec = self.model.specialiser
                self.symbolic_error = spec.symbolic_error if spec else "no symbolic graph"
            elif self.target not in SYMBOLIC_TARGETS:
                self.symbolic_error = f"target '{self.target}' takes no runtime extents"
            else:
                self.generic = Generic(self, sorted(known))
        self.buckets = {k: sorted(int(v) for v in vs) for k, vs in self.buckets.items()}
        for name, sizes in self.buckets.items():
            if name not in known:
                raise DlpcError(
                    f"error: bucketed dim '{name}' is not a symbolic dim of the model's inputs "
                    f"(they have: {', '.join(sorted(known)) or 'none'})"
                )
            if not sizes or sizes[0] < 1:
                raise DlpcError(f"error: the buckets of '{name}' must be positive sizes")
        if self.buckets:
            self._plan_buckets()
        self._plan_tiles(known)
        # the previous call's program for inputs of its shapes: None for other inputs
        self._fast: Callable[..., list[np.ndarray] | None] | None = None
        self._fast_short = False  # (whether that binding is one of `short`'s)
        if not isinstance(self.short, int):
            for v in self.short:
                bad = [f"{d}={n}" for d, n in v.items() if d not in known or int(n) < 1]
                if bad or not v:
                    raise DlpcError(
                        f"error: short= binding {dict(v)} must give symbolic dims of the "
                        f"model's inputs ({', '.join(sorted(known))}) values >= 1"
                    )
        elif self.short < 0:
            raise DlpcError(
                f"error: short= must be >= 0 (the largest short value), got {self.short}"
            )

    @property
    def programs(self) -> int:
        """Compiled programs held: one per binding or bucket, plus the generic one."""
        generic = self.generic is not None and self.generic.fn is not None
        return len(self.cache) + generic

    # ---- tiles -----------------------------------------------------------------------
    def _plan_tiles(self, known: set[str]) -> None:
        """A tiled dim (`tiles={"batch": 8}`) is served by two programs, at T and at 1:
        a call of n runs n // T chunks of T and n % T chunks of 1 (views along axis 0),
        outputs joined. Only for a dim that leads every value it is in and that no op
        mixes positions along (`leading_independent`)."""
        if not self.tiles:
            return
        if len(self.tiles) > 1:
            raise DlpcError("error: tiles= takes one dim (the batch)")
        ((name, size),) = self.tiles.items()
        if name not in known or size < 1:
            raise DlpcError(
                f"error: tiled dim '{name}' must be a symbolic dim of the model's inputs "
                f"with a tile size >= 1"
            )
        if self.model.ir is None:
            raise DlpcError(
                "error: tiling needs the model's symbolic graph, which the import could not keep"
            )
        module = self.masked if self.buckets else self.model.module
        reason = leading_independent(module, name)
        if reason is not None:
            raise DlpcError(f"error: dim '{name}' cannot be tiled: {reason}")
        self.lead = [symdims.name_of(s[0]) == name if s else False for s in self.sig.shapes]
        self.lead += [False] * len(getattr(self, "mask_inputs", []))

    def _run(self, bound: Mapping[str, int], args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The program(s) of a binding on its arguments (chunked when a dim is tiled)."""
        if not self.tiles:
            key = tuple(sorted(bound.items()))
            fn = self.cache.get(key) or self._build(key, bound, args)
            return fn(*args)
        ((name, tile),) = self.tiles.items()
        n, start, parts = bound[name], 0, []
        while start < n:
            size = tile if n - start >= tile else 1
            one = {**bound, name: size}
            chunk = [a[start : start + size] if lead else a for a, lead in zip(args, self.lead)]
            key = tuple(sorted(one.items()))
            fn = self.cache.get(key) or self._build(key, one, chunk)
            parts.append(fn(*chunk))
            start += size
        if len(parts) == 1:
            return parts[0]
        return [np.concatenate(ys, axis=0) for ys in zip(*parts)]

    # ---- buckets -------------------------------------------------------------------
    def _plan_buckets(self) -> None:
        """Which axes of each input and output are a bucketed symbol (padded / sliced)."""
        if self.model.ir is None or self.sig.outputs is None:
            reason = self.model.specialiser.symbolic_error if self.model.specialiser else None
            raise DlpcError(
                f"error: bucketing needs the model's symbolic graph, which the import could "
                f"not keep ({reason})"
            )
        for name, shape in zip(self.sig.names, self.sig.shapes):
            self._check_bucketed(shape, f"input '{name}'")
        for k, shape in enumerate(self.sig.outputs):
            self._check_bucketed(shape, f"output {k}")
        from dlpc.passes.graph.mask_padding import mask_padding

        self.masks: dict[tuple[str, int, int], np.ndarray] = {}
        # per input and output, the bucketed symbol of each axis (None: not bucketed)
        self.in_axes = [[self._bucketed(d) for d in s] for s in self.sig.shapes]
        self.out_axes = [[self._bucketed(d) for d in s] for s in self.sig.outputs]
        self.where = {  # the input and dim a bucketed symbol is read from, for errors
            name: next(
                f"input '{n}' dim {a}"
                for n, s in zip(self.sig.names, self.sig.shapes)
                for a, d in enumerate(s)
                if symdims.name_of(d) == name
            )
            for name in self.buckets
        }

        self.masked: ModuleOp = self.model.module.clone()
        self.mask_inputs = mask_padding(self.masked, list(self.buckets))

    def _check_bucketed(self, shape, what: str) -> None:
        for axis, d in enumerate(shape):
            if isinstance(d, symdims.SymDim) and d.symbols() & set(self.buckets):
                if symdims.name_of(d) is None:
                    raise DlpcError(
                        f"error: {what} dim {axis} is '{d}', an expression of a bucketed "
                        f"dim: it cannot be padded and sliced back"
                    )

    def _bucket(self, name: str, n: int, where: str) -> int:
        sizes = self.buckets[name]
        k = bisect.bisect_left(sizes, n)
        if k == len(sizes):
            raise DlpcError(
                f"error: {where} ('{name}') is {n}, above the largest bucket {sizes[-1]}"
            )
        return sizes[k]

    # ---- calls ---------------------------------------------------------------------
    def bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        """The guard: the symbols' values, or a one-line DlpcError naming the input."""
        sig = self.sig
        if len(arrays) != len(sig.names):
            raise DlpcError(
                f"error: the model takes {len(sig.names)} inputs ({', '.join(sig.names)}) "
                f"but {len(arrays)} were given"
            )
        for name, dtype, x in zip(sig.names, sig.dtypes, arrays):
            if x.dtype != dtype:
                raise DlpcError(
                    f"error: input '{name}' has dtype {x.dtype} but the model expects {dtype}"
                )
        try:
            bound = symdims.bind_inputs(
                sig.names, sig.shapes, [x.shape for x in arrays], self.maxima
            )
        except symdims.SymbolicError as e:
            raise DlpcError(f"error: {e}") from None
        for name, x in zip(sig.names, arrays):
            message = ref.graph.size_error(x.shape, ref.graph.NUMPY_TO_ELT[x.dtype.name])
            if message:
                raise DlpcError(f"error: input '{name}': {message}")
        return bound

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        fast = self._fast  # the previous call's shapes and program: no binding to redo
        if fast is not None:
            outputs = fast(*inputs)
            if outputs is not None:
                self.count_fast()
                return outputs
        arrays = [np.asarray(x) for x in inputs]
        bound = self.bind(arrays)
        self.stats["calls"] += 1
        if self.generic is not None:
            return self._call_generic(bound, arrays)
        if not self.buckets:
            if not self.tiles:
                key = tuple(sorted(bound.items()))
                fn = self.cache.get(key) or self._build(key, bound, arrays)
                self._fast = checked(tuple((x.shape, x.dtype) for x in arrays), fn)
                return fn(*arrays)
            return self._run(bound, arrays)
        padded = dict(bound)
        for name in self.buckets:
            padded[name] = self._bucket(name, bound[name], self.where[name])
        args = [self._pad(x, axes, padded) for x, axes in zip(arrays, self.in_axes)]
        for name in self.mask_inputs:
            key = (name, padded[name], bound[name])
            mask = self.masks.get(key)
            if mask is None:  # (one per length: calls of one length reuse it)
                mask = self.masks[key] = np.zeros(padded[name], np.float32)
                mask[: bound[name]] = 1.0
            args.append(mask)
        outputs = self._run(padded, args)
        assert self.sig.outputs is not None
        return [self._slice(y, axes, bound) for y, axes in zip(outputs, self.out_axes)]

    def count_fast(self) -> None:
        """Count a call of the previous call's binding (`_fast`)."""
        self.stats["calls"] += 1
        if self._fast_short:
            self.stats["short"] = self.stats.get("short", 0) + 1

    def _call_generic(self, bound: dict[str, int], arrays: list[np.ndarray]) -> list[np.ndarray]:
        generic = self.generic
        assert generic is not None
        key = tuple(sorted(bound.items()))
        if self.specialise:
            fn = self.cache.get(key)
            if fn is not None:
                return fn(*arrays)
            self.hits[key] = self.hits.get(key, 0) + 1
            if self.hits[key] >= self.specialise:  # a hot binding: its own static program
                self.stats["specialised"] = self.stats.get("specialised", 0) + 1
                return self._build(key, bound, arrays)(*arrays)
        try:
            outputs = generic(bound, arrays)
        except GenericUnavailable as e:  # fall back to one program per binding
            self.symbolic_error, self.generic = str(e), None
            fn = self.cache.get(key) or self._build(key, bound, arrays)
            return fn(*arrays)
        short = generic.serves(bound)
        if short:  # (the guard chose kernels of the binding's own: counted)
            self.stats["short"] = self.stats.get("short", 0) + 1
        if not self.specialise:  # the next call of these shapes skips the binding
            shapes = tuple((x.shape, x.dtype) for x in arrays)
            self._fast = generic.fast(bound, shapes)
            self._fast_short = short
        return outputs

    def _bucketed(self, d: symdims.Dim) -> str | None:
        name = symdims.name_of(d)
        return name if name in self.buckets else None

    def _pad(self, x: np.ndarray, axes, padded: Mapping[str, int]) -> np.ndarray:
        """x in zeros of the bucket's shape (x itself when it already has it); `axes`
        names the bucketed symbol of each axis (None: not bucketed)."""
        full = tuple(padded[name] if name else n for name, n in zip(axes, x.shape))
        if full == x.shape:
            return x
        out = np.zeros(full, x.dtype)
        out[tuple(slice(0, n) for n in x.shape)] = x
        return out

    def _slice(self, y: np.ndarray, axes, bound: Mapping[str, int]) -> np.ndarray:
        index = tuple(slice(0, bound[name]) if name else slice(None) for name in axes)
        return np.ascontiguousarray(y[index])

    def _build(self, key: tuple, bound: Mapping[str, int], arrays: Sequence[np.ndarray]):
        """The static program of one binding, compiled and cached."""
        from xdsl.utils.exceptions import VerifyException

        from dlpc.passes.graph.bind_dims import bind_module

        model = self.model
        if model.ir is not None:
            module = (self.masked if self.buckets else model.module).clone()
            try:
                bind_module(module, bound)
            except VerifyException as e:
                dims = ", ".join(f"{k}={v}" for k, v in bound.items())
                raise DlpcError(f"error: the model does not hold at {dims}: {e}") from None
            static = Model(module, model.weights, model.name, model.path)
        else:
            spec = model.specialiser
            assert spec is not None
            static = spec.build(dict(zip(self.sig.names, arrays)))
        fn = self.compile_static(static)
        self.cache[key] = fn
        self.stats["compiles"] += 1
        return fn


def leading_independent(module: ModuleOp, name: str) -> str | None:
    """None when `name` is axis 0 of every value it appears in (and nowhere else) and no op
    mixes positions along it (reduces, normalises or gathers over axis 0, moves it), so
    the rows of a call can be computed in chunks; else why not, naming the op."""
    from xdsl.dialects import func

    from dlpc.dialects import graph as g

    def leads(v) -> bool | None:
        """True: leads with `name`; False: has no `name`; None: has it elsewhere."""
        if not isinstance(v.type, TensorType):
            return False
        shape = g.shape_of(v)
        found = [a for a, d in enumerate(shape) if name in symdims.symbols((d,))]
        if not found:
            return False
        return True if found == [0] and symdims.name_of(shape[0]) == name else None

    main = ref.main_func(module)
    for op in main.walk():
        if op is main:
            continue
        if op.regions:
            return f"{op.name} has regions"
        ins = [leads(v) for v in op.operands]
        outs = [leads(v) for v in op.results]
        if None in ins + outs:
            return f"{op.name} has '{name}' off axis 0 or inside an expression"
        if isinstance(op, func.ReturnOp):
            if not all(ins):
                return "an output of @main does not lead with it"
            continue
        if any(ins) and not all(outs):
            return f"{op.name} reduces over it"
        if any(ins) and isinstance(op, g.AxisOp | g.LayerNormOp):
            axis = g.normalize_axis(op.axis, len(g.shape_of(op.operands[0])))
            if axis == 0:
                return f"{op.name} works along axis 0"
        if (
            isinstance(op, g.GatherOp)
            and ins[0]
            and op.axis % max(len(g.shape_of(op.operands[0])), 1) == 0
        ):
            return f"{op.name} gathers along it"
    return None


def checked(
    shapes: tuple[tuple[tuple[int, ...], np.dtype], ...], fn: Callable[..., list[np.ndarray]]
) -> Callable[..., list[np.ndarray] | None]:
    """`fn` for inputs of `shapes` (shape and dtype each); None for any other inputs."""

    def call(*xs: np.ndarray) -> list[np.ndarray] | None:
        if len(xs) != len(shapes):
            return None
        for x, (shape, dtype) in zip(xs, shapes):
            if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype:
                return None
        return fn(*xs)

    return call


class GenericUnavailable(Exception):
    """The model does not compile with runtime extents (why: the message)."""


class Generic:
    """The one-compile program of a DynamicFunction: the symbolic graph compiled once
    with its dims as an input (passes/lower/_symbolic.py), buffers at the maxima."""

    def __init__(self, owner: DynamicFunction, names: list[str]):
        self.owner = owner
        self.names = names  # the order of dlpc_dims (graph-to-te sorts them)
        self.declared = dict(owner.maxima)
        self.max = {n: self.declared.get(n, DEFAULT_MAX) for n in names}
        # a symbol that slices a static dim (pos[:, :seq] of a 64-long table) is at most
        # that dim: the cap is a declared maximum, which the guard enforces per call
        for name, cap in slice_caps(owner.model.module).items():
            if name in self.max and cap < self.max[name]:
                self.max[name] = self.declared[name] = cap
        owner.maxima = dict(self.declared)
        self.fn: Callable[..., list[np.ndarray]] | None = None
        self.guard_reductions = False  # (set when a schedule lost a reduction's mark)
        self.lock = threading.Lock()  # held by the call using `padded`
        self.full: list[tuple[int, ...]] = []  # per input: its max shape
        self.padded: list[np.ndarray] = []  # per input: its max-shaped buffer
        self.plans: dict[tuple[int, ...], Plan] = {}  # per binding (of this compile)
        self.short: list[dict[str, int]] = []  # the bindings with kernels of their own

    def compile(self) -> None:
        from xdsl.dialects.builtin import ArrayAttr, UnitAttr

        from dlpc.passes.lower._symbolic import GUARD_REDUCTIONS, integer_maxima
        from dlpc.passes.lower._symbolic import MAX_ATTR as attr
        from dlpc.passes.lower.short_extents import SHORT_ATTR

        owner, model = self.owner, self.owner.model
        module = model.module.clone()
        main = ref.main_func(module)
        main.attributes[attr] = integer_maxima(self.max)
        versions = self.short = self.versions()
        if versions:  # kernels of their own for these small dims (loop-short-extents)
            main.attributes[SHORT_ATTR] = ArrayAttr([integer_maxima(v) for v in versions])
        if self.guard_reductions:
            main.attributes[GUARD_REDUCTIONS] = UnitAttr()
        try:
            compiled = owner.compile_static(Model(module, model.weights, model.name, model.path))
        except DlpcError as e:
            owner.stats["compiles"] += 1
            if GUARD_REDUCTIONS in str(e) and not self.guard_reductions:
                # a schedule lost a reduction's mark: reductions guarded, unscheduled
                self.guard_reductions = True
                return self.compile()
            raise GenericUnavailable(str(e)) from None
        owner.stats["compiles"] += 1
        owner.last = compiled
        self.fn = getattr(compiled, "_direct", None) or compiled
        if owner.target == "numpy":
            runner = compiled.runner  # (its inputs are the model's, symbolic shapes)
            self.fn = lambda *arrays: runner(list(arrays))
        self.padded = (
            []
            if owner.target == "numpy"
            else [
                np.zeros(symdims.bind_shape(shape, self.max), dtype)
                for shape, dtype in zip(owner.sig.shapes, owner.sig.dtypes)
            ]
        )
        self.full = [symdims.bind_shape(shape, self.max) for shape in owner.sig.shapes]
        self.plans = {}
        owner._fast = None  # (a previous call's plan holds the old buffers)

    def versions(self) -> list[dict[str, int]]:
        """The bindings whose calls get kernels of their own in this program (the
        owner's `short`, within the maxima): with `short=K`, each dim that leads no
        input (a sequence, not a batch) at 1..K with the leading dims at 1."""
        short = self.owner.short
        if self.owner.target != "c":  # (the C pipeline's pass; OpenCL's is not measured)
            return []
        if isinstance(short, int):
            lead = {
                symdims.name_of(s[0]) for s in self.owner.sig.shapes if s and symdims.name_of(s[0])
            }
            short = [
                {**{n: 1 for n in self.names if n in lead}, d: k}
                for d in self.names
                if d not in lead
                for k in range(1, short + 1)
            ]
        return [dict(v) for v in short if all(1 <= n <= self.max.get(d, 0) for d, n in v.items())]

    def __call__(self, bound: Mapping[str, int], arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        grow = {n: v for n, v in bound.items() if v > self.max[n]}
        if grow:  # above an undeclared maximum (a declared one is refused by the guard)
            for n, v in grow.items():
                self.max[n] = max(2 * self.max[n], 1 << (v - 1).bit_length())
            self.fn = None
        if self.fn is None:
            self.compile()
        assert self.fn is not None
        if self.owner.target == "numpy":  # the graph's own numpy code: shapes as given
            return self.fn(*arrays)
        return self.run(self.plan(bound), arrays)

    def fast(
        self, bound: Mapping[str, int], shapes: tuple[tuple[tuple[int, ...], np.dtype], ...]
    ) -> Callable[..., list[np.ndarray] | None]:
        """The call for inputs of `shapes` (whose dims are `bound`), after a call of them
        (the program compiled, no growth): None for inputs of other shapes or dtypes."""
        if self.owner.target == "numpy":
            fn = self.fn
            assert fn is not None
            return checked(shapes, fn)
        plan, run, fn = self.plan(bound), self.run, self.fn
        caller = getattr(fn, "_fast", None)  # (the C runtime's call: fastcall.py)
        outputs = self.owner.sig.outputs
        if caller is not None and outputs is not None:
            # the whole call in C: the inputs checked and copied into max-shaped buffers,
            # the dims passed, each output's leading block copied into an array of the
            # binding's shape (fastcall.c, Bound)
            ins = [shape for shape, _ in shapes] + [plan.dims]
            try:
                return caller.bind(ins, [symdims.bind_shape(s, bound) for s in outputs])
            except ValueError:  # (a program run chunk by chunk: the Python path)
                pass
        return checked(shapes, lambda *xs: run(plan, xs))

    def plan(self, bound: Mapping[str, int]) -> Plan:
        """What a call of the binding `bound` copies and slices, made once per binding."""
        key = tuple(bound[n] for n in self.names)
        plan = self.plans.get(key)
        if plan is not None:
            return plan
        shapes = self.owner.sig.outputs
        assert shapes is not None
        ins = []
        for k, (shape, full) in enumerate(zip(self.owner.sig.shapes, self.full)):
            want = symdims.bind_shape(shape, bound)
            if want == full:
                ins.append(None)  # (passed as it is)
                continue
            index = tuple(slice(0, n) for n in want)
            ins.append((index, self.padded[k][index]))
        outs = []
        for s in shapes:
            want, full = symdims.bind_shape(s, bound), symdims.bind_shape(s, self.max)
            # the prefix of a max-shaped output is C-contiguous when every axis after the
            # first one longer than 1 is whole: a view, no copy
            first = next((a for a, n in enumerate(want) if n > 1), len(want))
            whole = want[first + 1 :] == full[first + 1 :]
            outs.append((tuple(slice(0, n) for n in want), whole))
        plan = self.plans[key] = Plan(np.array(key, np.int64), ins, outs)
        return plan

    def serves(self, bound: Mapping[str, int]) -> bool:
        """Whether the program has kernels of its own for the binding `bound`."""
        return any(all(bound.get(d) == n for d, n in v.items()) for v in self.short)

    def run(self, plan: Plan, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The program on `arrays` (of the plan's binding), its outputs sliced back."""
        fn = self.fn
        assert fn is not None
        # the max-shaped input buffers are reused; a call made while another thread's is
        # running fills buffers of its own
        own = self.lock.acquire(blocking=False)
        try:
            args = []
            for k, x in enumerate(arrays):
                into = plan.ins[k]
                if into is None:
                    args.append(x)
                elif own:
                    into[1][...] = x
                    args.append(self.padded[k])
                else:
                    buf = np.zeros(self.full[k], x.dtype)
                    buf[into[0]] = x
                    args.append(buf)
            args.append(plan.dims)  # (read, never written: shared by the calls)
            outputs = fn(*args)
        finally:
            if own:
                self.lock.release()
        return [
            y[index] if whole else np.ascontiguousarray(y[index])
            for y, (index, whole) in zip(outputs, plan.outs)
        ]


@dataclass
class Plan:
    """A binding's call: the dims argument, per input None (passed as it is) or (its
    index in the max-shaped buffer, that view), per output (its index, whether the view
    is C-contiguous as it is)."""

    dims: np.ndarray
    ins: list[tuple[tuple[slice, ...], np.ndarray] | None]
    outs: list[tuple[tuple[slice, ...], bool]]


def slice_caps(module: ModuleOp) -> dict[str, int]:
    """For each symbol that is the extent of a slice of a static dim, that dim's size; and
    for each symbol S whose positions 0..S-1 index a static table (a gather's indices
    are a leading slice of an arange constant, reshaped: the GPT's position embedding),
    the table's length, so that a call past the table is refused, not clamped."""
    from dlpc.dialects import graph as g

    caps: dict[str, int] = {}

    def cap(name: str | None, n: object) -> None:
        if isinstance(n, int) and name is not None:
            caps[name] = min(caps.get(name, n), n)

    for op in module.walk():
        if isinstance(op, g.SliceOp):
            for n, d in zip(g.shape_of(op.operands[0]), g.shape_of(op.results[0])):
                cap(symdims.name_of(d), n)
        elif isinstance(op, g.GatherOp):
            table = g.shape_of(op.operands[0])
            axis = op.axis % max(len(table), 1)
            if table:
                cap(_positions(op.operands[1]), table[axis])
    return caps


def _positions(v) -> str | None:
    """The symbol S when `v` holds 0, 1, ..., S-1 (in any shape with one symbolic dim):
    reshapes of a slice from 0 of a 1-d arange constant, its extent S."""
    from dlpc.dialects import graph as g

    while isinstance(v.owner, g.ReshapeOp):
        v = v.owner.operands[0]
    op = v.owner
    if not isinstance(op, g.SliceOp) or tuple(op.starts) != (0,) or set(op.steps) - {1}:
        return None
    source = op.operands[0].owner
    if not isinstance(source, g.ConstantOp):
        return None
    values = source.to_numpy()
    if values.ndim != 1 or not np.array_equal(values, np.arange(values.size)):
        return None
    (d,) = g.shape_of(op.results[0])
    return symdims.name_of(d)
