"""Build graph IR from Python, and the operator table every frontend shares.

    b = GraphBuilder("mlp")
    x = b.input("x", (1, 784))
    w = b.param("w", (256, 784), init=normal(seed=1, std=0.05))
    y = b.relu(b.linear(x, w))
    b.output(y)
    model = b.model()          # dlpc.model.Model: module + weights

`b.<op>(...)` calls any graph op by its natural name (`relu`, `conv2d`, `max_pool2d`,
`layer_norm`, ...) with operands positionally (or by operand name, e.g. `bias=b`) and
attributes as keywords.  Friendly keyword spellings map to the op's attributes (`stride` ->
`strides`, `padding` -> `pads`, `dilation` -> `dilations`, `kernel_size` -> `kernel`,
`axis` -> `axes` for reductions, `eps` -> `epsilon`, `keepdim` -> `keepdims`); an int is
accepted wherever a pair is meant (`stride=2` -> `[2, 2]`, `padding=1` -> `[1, 1, 1, 1]`).
Python numbers as operands become scalar `graph.constant`s (numpy broadcasting does the rest).

The text frontend (`frontends/text/irgen.py`) drives this same builder, so the op table,
argument checking and weight resolution exist once.  Errors are `FrontendError`s that say
which argument is at fault; the text frontend turns them into located diagnostics.
"""

from __future__ import annotations

import difflib
import math
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float16Type,
    IntegerType,
    LocationAttr,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import one_line
from dlpc.dialects import graph
from dlpc.dialects.graph import REQUIRED, GraphOp, ssa_name_hint
from dlpc.dialects.symdims import SymDim
from dlpc.model import Model

DTYPES: dict[str, Attribute] = {
    "f16": Float16Type(),
    "f32": f32,
    "f64": f64,
    "i1": i1,
    "bool": i1,
    "i8": IntegerType(8),
    "i16": IntegerType(16),
    "i32": IntegerType(32),
    "i64": i64,
    "ui8": IntegerType(8, Signedness.UNSIGNED),
    "ui16": IntegerType(16, Signedness.UNSIGNED),
    "ui32": IntegerType(32, Signedness.UNSIGNED),
    "ui64": IntegerType(64, Signedness.UNSIGNED),
}


class FrontendError(ValueError):
    """A user error in a builder call.  `arg` names the culprit: an int is a positional
    argument's index, a str a keyword's name, None the whole call."""

    def __init__(self, message: str, arg: int | str | None = None):
        super().__init__(message)
        self.message = message
        self.arg = arg


def show(value: Any) -> str:
    """A value as the text language writes it (true, "tanh", [1, 2])."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def suggest(name: str, candidates: Sequence[str]) -> str:
    """`; did you mean 'x'?` or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# ------------------------------------------------------------------ operator table

OPS: dict[str, type[GraphOp]] = {
    op.name.removeprefix("graph."): op for op in graph.GRAPH_OPS if issubclass(op, GraphOp)
}
# sugar: name -> (op, fixed attributes)
SUGAR: dict[str, tuple[str, dict[str, Any]]] = {
    "relu6": ("clip", {"min": 0.0, "max": 6.0}),
}
BINARY_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "@": "matmul"}

KEYWORD_ALIASES = {
    "stride": "strides",
    "padding": "pads",
    "dilation": "dilations",
    "kernel_size": "kernel",
    "eps": "epsilon",
    "keepdim": "keepdims",
}
# attributes of conv/pool ops that are (h, w) pairs or [top, left, bottom, right] pads
_PAIR_ATTRS = ("strides", "dilations", "kernel")


def op_names() -> list[str]:
    return sorted([*OPS, *SUGAR])


def _attr_name(op: type[GraphOp], key: str) -> str | None:
    """The op attribute a keyword sets, or None."""
    if key in op.ATTRS:
        return key
    alias = KEYWORD_ALIASES.get(key)
    if alias in op.ATTRS:
        return alias
    if key == "axis" and "axes" in op.ATTRS:
        return "axes"
    return None


def operand_names(op: type[GraphOp]) -> list[str]:
    return [n.lstrip("*") for n in op.OPERANDS]


def _is_int(v: Any) -> TypeGuard[int | np.integer]:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _ints(v: Any) -> list[int] | None:
    """An int or a list of them; an entry may be a symbolic dim (`dialects.symdims`: a
    named dim of a model loaded with dims="symbolic"), kept as it is."""
    if _is_int(v):
        return [int(v)]
    if isinstance(v, list | tuple) and all(_is_int(x) or isinstance(x, SymDim) for x in v):
        return [cast(int, x) if isinstance(x, SymDim) else int(x) for x in v]
    return None


def coerce_attr(op: type[GraphOp], key: str, attr: str, value: Any) -> Any:
    """Check a Python value against the attribute's kind; normalise pairs and pads."""
    kind = op.ATTRS[attr][0]
    name = op.name.removeprefix("graph.")

    def bad(expected: str) -> FrontendError:
        return FrontendError(f"{name} argument '{key}' expects {expected}, got {show(value)}", key)

    if kind in ("int", "ints"):
        for v in value if isinstance(value, list | tuple) else [value]:
            if _is_int(v) and not -(2**63) <= v < 2**63:
                raise FrontendError(f"{name} argument '{key}': {v} does not fit in 64 bits", key)
    if kind == "int":
        if not _is_int(value):
            raise bad("an int")
        return int(value)
    if kind == "float":
        if not (_is_int(value) or isinstance(value, float | np.floating)):
            raise bad("a number")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if kind == "type":
        if isinstance(value, Attribute):
            return value
        if not isinstance(value, str) or value not in DTYPES:
            raise bad(f"an element type ({', '.join(DTYPES)})")
        return DTYPES[value]
    assert kind == "ints", kind
    ints = _ints(value)
    if ints is None:
        raise bad("an int or a list of ints")
    if issubclass(op, graph.WindowOp) and attr in _PAIR_ATTRS:
        if len(ints) not in (1, 2):
            raise bad("1 or 2 values")
        return ints * 2 if len(ints) == 1 else ints
    if issubclass(op, graph.WindowOp) and attr == "pads":
        if len(ints) not in (1, 2, 4):
            raise bad("1, 2 or 4 values")
        return ints * 4 if len(ints) == 1 else ints * 2 if len(ints) == 2 else ints
    return ints


# -------------------------------------------------------------------- initialisers

# name -> {argument: default}; a seed defaults to a hash of the parameter name
INITIALIZERS: dict[str, dict[str, Any]] = {
    "zeros": {},
    "ones": {},
    "full": {"value": REQUIRED},
    "normal": {"seed": None, "mean": 0.0, "std": 1.0},
    "uniform": {"seed": None, "low": -1.0, "high": 1.0},
    "kaiming": {"seed": None, "gain": math.sqrt(2.0)},
}


MAX_INIT_ELEMENTS = 1 << 28  # 1 GiB of f32: a typo in a shape, not a model


@dataclass(frozen=True)
class Initializer:
    """A seeded recipe for a parameter's value, e.g. `normal(seed=1, std=0.1)`.

    `kaiming` is normal with std = gain / sqrt(fan_in), fan_in = prod(shape[1:]) (OIHW
    conv and [out, in] linear weights), which keeps activations O(1) through relu layers.
    """

    kind: str
    args: tuple[tuple[str, Any], ...] = ()

    def materialize(self, shape: Sequence[int], dtype: str, name: str) -> np.ndarray:
        a = dict(self.args)
        np_dtype = graph.numpy_dtype(DTYPES[dtype])
        shape = tuple(shape)
        if math.prod(shape) > MAX_INIT_ELEMENTS:
            raise FrontendError(
                f"parameter '{name}' has {math.prod(shape)} elements, more than an initialiser "
                f"may create ({MAX_INIT_ELEMENTS}); give its value in a weights file"
            )
        seed = a.get("seed")
        rng = np.random.default_rng(zlib.crc32(name.encode()) if seed is None else seed)
        if self.kind == "zeros":
            value = np.zeros(shape)
        elif self.kind == "ones":
            value = np.ones(shape)
        elif self.kind == "full":
            value = np.full(shape, a["value"])
        elif self.kind == "normal":
            value = rng.normal(a["mean"], a["std"], shape)
        elif self.kind == "uniform":
            value = rng.uniform(a["low"], a["high"], shape)
        else:
            assert self.kind == "kaiming", self.kind
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else math.prod(shape)
            fan_in = max(fan_in, 1)  # a zero-size weight (f32[3, 0]) has no values to scale
            value = rng.normal(0.0, a["gain"] / math.sqrt(fan_in), shape)
        return np.asarray(value).astype(np_dtype)

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(f'{k}={v}' for k, v in self.args)})"


def make_initializer(kind: str, *args: Any, **kwargs: Any) -> Initializer:
    """Check an initialiser call (positional arguments in the table's order)."""
    if kind not in INITIALIZERS:
        raise FrontendError(
            f"unknown initializer '{kind}'{suggest(kind, list(INITIALIZERS))}", None
        )
    spec = INITIALIZERS[kind]
    if len(args) > len(spec):
        raise FrontendError(f"{kind}() takes {len(spec)} arguments, got {len(args)}", len(spec))
    values = dict(zip(spec, args))
    for key, v in kwargs.items():
        if key not in spec:
            raise FrontendError(f"{kind}() has no argument '{key}'{suggest(key, list(spec))}", key)
        if key in values:
            raise FrontendError(f"{kind}() got argument '{key}' twice", key)
        values[key] = v
    for key, default in spec.items():
        if key not in values:
            if default is REQUIRED:
                raise FrontendError(f"{kind}() is missing argument '{key}'", None)
            values[key] = default
        v = values[key]
        blame = key if key in kwargs else list(spec).index(key)
        if key == "seed" and v is not None and not (_is_int(v) and int(v) >= 0):
            raise FrontendError(f"{kind}() seed must be a non-negative int, got {show(v)}", blame)
        if key != "seed" and (not isinstance(v, int | float) or isinstance(v, bool)):
            raise FrontendError(f"{kind}() argument '{key}' expects a number, got {show(v)}", blame)
    return Initializer(kind, tuple(values.items()))


def zeros() -> Initializer:
    return make_initializer("zeros")


def ones() -> Initializer:
    return make_initializer("ones")


def full(value: float) -> Initializer:
    return make_initializer("full", value)


def normal(seed: int | None = None, mean: float = 0.0, std: float = 1.0) -> Initializer:
    return make_initializer("normal", seed=seed, mean=mean, std=std)


def uniform(seed: int | None = None, low: float = -1.0, high: float = 1.0) -> Initializer:
    return make_initializer("uniform", seed=seed, low=low, high=high)


def kaiming(seed: int | None = None, gain: float = math.sqrt(2.0)) -> Initializer:
    return make_initializer("kaiming", seed=seed, gain=gain)


# --------------------------------------------------------------------------- model


@dataclass
class ParamDecl:
    name: str
    shape: tuple[int, ...]
    dtype: str
    init: Initializer | np.ndarray | None


def load_weights(source: str | Mapping[str, Any]) -> dict[str, np.ndarray]:
    if isinstance(source, Mapping):
        return {k: np.asarray(v) for k, v in source.items()}
    try:
        with np.load(source) as npz:
            return {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise FrontendError(f"no such weights file: {source}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # (empty, damaged)
        raise FrontendError(f"cannot read weights file {source}: {e}") from None


def resolve_weight(
    decl: ParamDecl, given: Mapping[str, np.ndarray] | None, where: str
) -> np.ndarray:
    """The value of one parameter: `given` (a weights file/dict) first, then its initialiser."""
    declared = f"{decl.dtype}[{', '.join(map(str, decl.shape))}]"
    if given is not None and decl.name in given:
        value = np.asarray(given[decl.name])
        if tuple(value.shape) != decl.shape:
            shape = ", ".join(map(str, value.shape))
            raise FrontendError(
                f"weight '{decl.name}' in {where} has shape [{shape}] but the parameter is "
                f"declared {declared}"
            )
        return value.astype(graph.numpy_dtype(DTYPES[decl.dtype]))
    if isinstance(decl.init, Initializer):
        return decl.init.materialize(decl.shape, decl.dtype, decl.name)
    if isinstance(decl.init, np.ndarray):
        return resolve_weight(
            ParamDecl(decl.name, decl.shape, decl.dtype, None),
            {decl.name: decl.init},
            "the builder",
        )
    if given is None:
        raise FrontendError(f"parameter '{decl.name}' has no initializer and no weights were given")
    raise FrontendError(f"parameter '{decl.name}' is missing from {where} and has no initializer")


def _tensor_type(shape: Sequence[int], dtype: str) -> TensorType:
    """An input's or parameter's type; a tensor over dlpc's size limit is a FrontendError."""
    try:
        return graph.tensor_type(shape, _dtype(dtype))
    except VerifyException as e:
        raise FrontendError(str(e)) from None


@dataclass
class GraphBuilder:
    """Builds `builtin.module { func.func @main }` in graph IR, op by op."""

    name: str = "main"
    loc: LocationAttr | None = None  # stamped on every op created (the text frontend sets it)
    block: Block = field(default_factory=Block)
    input_names: list[str] = field(default_factory=list)
    params: dict[str, ParamDecl] = field(default_factory=dict)
    outputs: list[SSAValue] | None = None
    _constants: dict[tuple, SSAValue] = field(default_factory=dict)
    _module: ModuleOp | None = None

    # ---- values ----------------------------------------------------------------
    def _append(self, op: Operation) -> None:
        if self._module is not None:
            raise FrontendError("the module is finished; no ops can be added")
        if self.loc is not None:
            op.location = self.loc
        self.block.add_op(op)

    def _add(self, op: Operation) -> SSAValue:
        """Append an op with one result and return that result."""
        self._append(op)
        return op.results[0]

    def input(self, name: str, shape: Sequence[int], dtype: str = "f32") -> SSAValue:
        if name in self.input_names:
            raise FrontendError(f"duplicate input '{name}'")
        arg = self.block.insert_arg(_tensor_type(shape, dtype), len(self.block.args))
        arg.name_hint = ssa_name_hint(name)
        if self.loc is not None:
            arg.location = self.loc
        self.input_names.append(name)
        return arg

    def param(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "f32",
        init: Initializer | np.ndarray | None = None,
    ) -> SSAValue:
        if name in self.params:
            raise FrontendError(f"duplicate parameter '{name}'")
        ty = _tensor_type(shape, dtype)
        self.params[name] = ParamDecl(name, tuple(int(d) for d in shape), dtype, init)
        value = self._add(graph.ParamOp(name, ty))
        value.name_hint = ssa_name_hint(name)
        return value

    def constant(
        self, value: float | np.integer | np.floating, element_type: Attribute = f32
    ) -> SSAValue:
        """A scalar constant (rank 0), shared between uses."""
        key = (float(value), str(element_type))
        if key not in self._constants:
            dtype = np.dtype(graph.numpy_dtype(element_type))
            if dtype.kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
                raise FrontendError(f"{value} does not fit in {element_type}")
            with np.errstate(over="ignore"):  # 1e308 as f32 is inf, as in C (no warning)
                array = np.asarray(value, dtype=dtype)
            self._constants[key] = self._add(graph.ConstantOp.from_numpy(array))
        return self._constants[key]

    # ---- ops ---------------------------------------------------------------------
    def op(self, name: str, *args: Any, **kwargs: Any) -> SSAValue:
        """Call a graph op by its natural name; see the module docstring."""
        if name in SUGAR:
            base, fixed = SUGAR[name]
            return self.op(base, *args, **kwargs, **fixed)
        if name not in OPS:
            raise FrontendError(f"unknown operator '{name}'{suggest(name, op_names())}")
        op = OPS[name]
        names = operand_names(op)
        variadic = op.OPERANDS[0].startswith("*")
        if variadic and len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])
        operands: list[Any] = list(args)
        attrs: dict[str, Any] = {}
        for key, value in kwargs.items():
            if not variadic and key in names:
                index = names.index(key)
                if index < len(operands) and operands[index] is not None:
                    raise FrontendError(f"{name} got operand '{key}' twice", key)
                operands += [None] * (index + 1 - len(operands))
                operands[index] = value
                continue
            attr = _attr_name(op, key)
            if attr is None:
                known = [*op.ATTRS, *(k for k, v in KEYWORD_ALIASES.items() if v in op.ATTRS)]
                if not variadic:
                    known += names
                hint = suggest(key, known)
                if not known:
                    hint = f"; {name} takes no keyword arguments"
                raise FrontendError(f"{name} has no argument '{key}'{hint}", key)
            if attr in attrs:
                raise FrontendError(f"{name} got attribute '{attr}' twice", key)
            attrs[attr] = coerce_attr(op, key, attr, value)
        for attr, (_, default) in op.ATTRS.items():
            if default is REQUIRED and attr not in attrs:
                raise FrontendError(f"{name} is missing attribute '{attr}'")
        if not variadic:
            self._check_arity(name, op, names, operands)
        values = self._materialize(name, operands)
        try:
            built = op.make(*values, **attrs)
        except VerifyException as e:
            raise FrontendError(str(e)) from None
        try:
            built.verify()  # element types, attributes: reported at the call, not later
        except VerifyException as e:
            built.drop_all_references()
            raise FrontendError(one_line(str(e))) from None
        return self._add(built)

    def _check_arity(self, name: str, op: type[GraphOp], names: list[str], operands: list) -> None:
        signature = f"{name}({', '.join(names)})"
        if len(operands) > len(names):
            raise FrontendError(
                f"{signature} takes at most {len(names)} operands, got {len(operands)}",
                len(names),
            )
        required = len(names) - len(op.OPTIONAL)
        for i, v in enumerate(operands):
            if v is None and i < required:
                raise FrontendError(f"{signature} is missing operand '{names[i]}'")
        if len(operands) < required:
            raise FrontendError(f"{signature} is missing operand '{names[len(operands)]}'")
        if None in operands:  # an optional operand skipped before a later one
            raise FrontendError(f"{signature} is missing operand '{names[operands.index(None)]}'")

    def _materialize(self, name: str, operands: list[Any]) -> list[SSAValue]:
        """Numbers become scalar constants of the float operands' element type."""
        tensors = [v for v in operands if isinstance(v, SSAValue)]
        floats = [v for v in tensors if graph.is_float_type(graph.element_type_of(v))]
        elt = graph.element_type_of((floats or tensors)[0]) if tensors else f32
        values = []
        for i, v in enumerate(operands):
            if isinstance(v, SSAValue):
                values.append(v)
            elif isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
                if not graph.is_float_type(elt) and v != int(v):
                    raise FrontendError(
                        f"{name} operand {i + 1}: {v} is not an integer but the tensor "
                        f"operands are {elt}",
                        i,
                    )
                values.append(self.constant(v, elt))
            else:
                raise FrontendError(f"{name} operand {i + 1} must be a tensor, got {show(v)}", i)
        return values

    def __getattr__(self, name: str):
        if name.startswith("_") or (name not in OPS and name not in SUGAR):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.op(name, *args, **kwargs)

    def binary(self, operator: str, lhs: Any, rhs: Any) -> SSAValue:
        return self.op(BINARY_OPERATORS[operator], lhs, rhs)

    # ---- results -----------------------------------------------------------------
    def output(self, *values: SSAValue) -> None:
        if self.outputs is not None:
            raise FrontendError("the model already has outputs")
        if not values:
            raise FrontendError("a model must return at least one value")
        self.outputs = list(values)
        self._append(func.ReturnOp(*values))

    def module(self) -> ModuleOp:
        """The finished module (verified), after `output`; later calls return it again."""
        if self._module is not None:
            return self._module
        if self.outputs is None:
            raise FrontendError(f"model '{self.name}' has no outputs")
        ftype = ([a.type for a in self.block.args], [v.type for v in self.outputs])
        arg_attrs = ArrayAttr(
            [DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in self.input_names]
        )
        main = func.FuncOp("main", ftype, Region(self.block), arg_attrs=arg_attrs)
        if self.loc is not None:
            main.location = self.loc
        module = ModuleOp([main])
        module.verify()
        self._module = module
        return module

    def weights(
        self, given: Mapping[str, Any] | str | None = None, where: str = "the weights"
    ) -> dict[str, np.ndarray]:
        """Every parameter's value: `given` first, then its initialiser."""
        source = None if given is None else load_weights(given)
        if isinstance(given, str):
            where = given
        return {n: resolve_weight(d, source, where) for n, d in self.params.items()}

    def model(self, weights: Mapping[str, Any] | str | None = None, path: str | None = None):
        module = self.module()
        return Model(module, self.weights(weights), self.name, path)


def _dtype(name: str) -> Attribute:
    if name not in DTYPES:
        raise FrontendError(f"unknown element type '{name}'{suggest(name, list(DTYPES))}")
    return DTYPES[name]


def tensor_of(shape: Sequence[int], dtype: str = "f32") -> TensorType:
    return graph.tensor_type(shape, _dtype(dtype))
