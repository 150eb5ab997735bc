"""ONNX import: an `.onnx` model (opsets 13 to the newest the installed `onnx` knows)
to graph IR.

    model = load_model("mlp.onnx")            # -> dlpc.model.Model
    print(model.module)

gives

    func.func @main(%x: tensor<1x784xf32> {dlpc.name = "input"}) -> tensor<1x10xf32> {
      %w = graph.param "fc1.weight" : tensor<256x784xf32>
      %b = graph.param "fc1.bias" : tensor<256xf32>
      %h = graph.linear %x, %w, %b : (...) -> tensor<1x256xf32> loc("/fc1/Gemm")
      ...
    }

- Graph inputs (those that are not initializers) become the arguments of `@main`
  (argument attribute `dlpc.name`), graph outputs its return values.
- Float initializers become `graph.param` named after the initializer (the value goes into
  `Model.weights` under that name); integer, boolean and one-element initializers become
  `graph.constant`.
- Every op carries the ONNX node's name as its location (`loc("name")`, printed with
  debug info), and every import error names the node, the operator and the attribute.
- Values known at import time (initializers, `Constant`, `Shape` of a static tensor, and
  everything computed only from those: the integer shape arithmetic exporters emit) are
  kept in a numpy-side constant environment and folded with onnx's reference evaluator;
  only values that reach a runtime op are materialised in the IR.
- Inputs that fix a shape (`Reshape`'s shape, `Slice`'s starts, ...) must be known at
  import time. When such an input is a graph input (or computed from one), the import
  raises `NeedsConstantInput`; `load_model` catches it and returns a Model with a
  `Specialiser` that imports the model again per value of those inputs, frozen
  (`dlpc.compile` dispatches on them). `freeze_inputs={"name": array}` binds an input for
  good. An empty graph input (a dim of 0) has no values, so it becomes an import-time
  constant by itself (a call still passes it).
- An operator without a handler whose schema defines it by an ONNX function is imported
  as the nodes of that function.
- A model below opset 13 is accepted node by node: a node whose operator means at the
  model's opset what it means at 13 (`onnx_opsets.py`: unchanged, or changed only in types
  or in where an argument is given) is imported in its opset-13 form; any other is an error.

The operator handlers live in `dlpc.frontends.onnx_ops`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    NameLoc,
    NoneAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dlpc.diagnostics import DlpcError, install_hint
from dlpc.dialects import graph, symdims
from dlpc.frontends import onnx_opsets
from dlpc.frontends.onnx_ops import HANDLERS
from dlpc.frontends.onnx_values import Const, Value, onnx_dtype_to_numpy, onnx_type_name
from dlpc.model import InputSpec, Model, Specialiser
from dlpc.reference.graph import input_names as _input_names
from dlpc.reference.graph import main_func

if TYPE_CHECKING:
    from onnx import NodeProto

MIN_OPSET = 13
# operators whose handler reads the node at any opset (it knows the older forms)
LEGACY = {"Dropout", "If", "Loop", "Scan"}  # (control flow: the same for tensors since 9 / 11)
# ops whose value is not a function of their inputs: never folded at import time
NONDETERMINISTIC = {
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}
# @main's attribute when a graph output is a sequence: per graph output, the number of
# results its sequence takes (-1: a tensor, one result); dlpc.compile regroups them
SEQUENCE_OUTPUTS = "dlpc.sequence_outputs"
# operators whose output is a sequence: their handler builds it, never the folder
SEQUENCE_MAKERS = {"SplitToSequence"}
# float initializers/folded values up to this many elements become graph.constant
SMALL_CONSTANT = 1


class NeedsConstantInput(DlpcError):
    """A graph input must be known at import time (pass it in `freeze_inputs`)."""

    def __init__(self, message: str, input_name: str):
        super().__init__(message)
        self.input_name = input_name


def _require_onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise DlpcError(
            f"error: importing .onnx models needs the 'onnx' package ({install_hint('onnx')})"
        ) from e
    return onnx


class Importer:
    """Builds `@main` from one ONNX GraphProto, node by node."""

    def __init__(
        self,
        model,
        source: str,
        weights: dict | None,
        freeze: dict | None,
        input_shapes: dict | None,
        symbolic: bool = False,
    ):
        self.model = model
        self.source = source
        self.user_weights = dict(weights or {})
        self.freeze = {k: np.asarray(v) for k, v in (freeze or {}).items()}
        self.input_shapes = dict(input_shapes or {})
        self.symbolic = symbolic  # dims without a value stay symbolic (onnx_symbolic.py)
        self.weights: dict[str, np.ndarray] = {}
        self.ops: list[Operation] = []
        self.env: dict[str, Value] = {}
        # sequence values of known length (SplitToSequence's): kept only as graph outputs
        self.sequences: dict[str, list[Value]] = {}
        self.materialised: dict[int, tuple[Const, SSAValue]] = {}
        self.used_names: set[str] = set()
        self.initializers: set[str] = set()
        self._node: NodeProto | None = None
        self.node_index = -1
        self.opset = self._opset()
        self.block = Block()

    @property
    def node(self) -> NodeProto:
        """The node being imported (handlers and their helpers run only while there is one)."""
        assert self._node is not None, "no ONNX node is being imported"
        return self._node

    # ---- diagnostics -------------------------------------------------------------
    def where(self) -> str:
        if self._node is None:
            return f"{self.source}"
        n = self._node
        label = f"'{n.name}'" if n.name else f"#{self.node_index}"
        out = f" -> '{n.output[0]}'" if not n.name and n.output else ""
        return f"{self.source}: node {label} ({n.op_type}{out})"

    def error(self, message: str) -> DlpcError:
        return DlpcError(f"{self.where()}: error: {message}")

    # ---- opset -------------------------------------------------------------------
    def _opset(self) -> int:
        onnx = _require_onnx()
        newest = onnx.defs.onnx_opset_version()
        versions = [o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")]
        if not versions:
            # a model of another domain's operators only (ai.onnx.ml's): name the first one
            others = [
                (i, n)
                for i, n in enumerate(self.model.graph.node)
                if n.domain not in ("", "ai.onnx")
            ]
            if others:
                i, n = others[0]
                label = f"'{n.name}'" if n.name else f"#{i}"
                raise DlpcError(
                    f"{self.source}: node {label} ({n.op_type}): error: operator "
                    f"'{n.domain}.{n.op_type}' is not supported (only the default ONNX "
                    "domain is)"
                )
            raise DlpcError(f"{self.source}: error: model imports no default-domain opset")
        v = versions[0]
        if v > newest:
            raise DlpcError(
                f"{self.source}: error: opset {v} is newer than the installed onnx knows "
                f"(dlpc imports opsets {MIN_OPSET} to {newest})"
            )
        return v

    def _check_legacy_opset(self, node):
        """Below opset 13 a node is accepted where its operator means what it means at 13
        (`onnx_opsets.SAME_SINCE`); it is returned in its opset-13 form."""
        if self.opset >= MIN_OPSET:
            return node
        ok, new = onnx_opsets.accepted(node.op_type, self.opset, node.domain, MIN_OPSET)
        if not ok:
            raise self.error(
                f"opset {self.opset} is not supported for this operator (dlpc imports "
                f"opsets {MIN_OPSET} and up; '{node.op_type}' changed at opset {new})"
            )
        old = onnx_opsets.version_of(node.op_type, self.opset, node.domain)
        return onnx_opsets.upgrade(self, node, old or new)

    def op_version(self) -> int:
        """The version of the current node's operator schema under the model's opset."""
        from onnx import defs

        return defs.get_schema(self.node.op_type, self.opset, self.node.domain).since_version

    # ---- values ------------------------------------------------------------------
    def input(self, i: int) -> Value | None:
        names = self.node.input
        if i >= len(names) or names[i] == "":
            return None
        return self.env[names[i]]

    def required(self, i: int) -> Value:
        """Input i, which the operator requires (its absence is an error naming it)."""
        v = self.input(i)
        if v is None:
            raise self.error(f"input {i} is required")
        return v

    @property
    def op_type(self) -> str:
        """The current node's operator."""
        return self._node.op_type if self._node is not None else ""

    def value(self, i: int | Value) -> SSAValue:
        v = self.input(i) if isinstance(i, int) else i
        if v is None:
            raise self.error(f"input {i} is required")
        return self.materialise(v) if isinstance(v, Const) else v

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The import-time value of input i (None when absent)."""
        v = self.input(i)
        if v is None or isinstance(v, Const):
            return None if v is None else v.array
        source = _graph_input_source(v)
        if source is not None and source.owner is self.block:  # (not a subgraph's input)
            name = self.arg_names[source.index]
            how = "comes from" if source is v else "is computed from"
            raise NeedsConstantInput(
                f"{self.where()}: error: input '{what}' must be known at import time but "
                f"{how} graph input '{name}' (pass freeze_inputs={{'{name}': ...}})",
                name,
            )
        raise self.error(
            f"input '{what}' must be known at import time, but '{self.node.input[i]}' is "
            f"computed at run time"
        )

    def required_const(self, i: int, what: str) -> np.ndarray:
        """The import-time value of input i, which the operator requires."""
        arr = self.const(i, what)
        if arr is None:
            raise self.error(f"input {i} ('{what}') is required")
        return arr

    def materialise(self, c: Const) -> SSAValue:
        if id(c) in self.materialised:  # (the entry keeps c alive, so ids are not reused)
            return self.materialised[id(c)][1]
        arr = c.array
        if arr.dtype.name not in graph.NUMPY_TO_ELT:
            raise self.error(f"element type {arr.dtype.name} is not supported by dlpc")
        if arr.dtype.kind == "f" and arr.size > SMALL_CONSTANT:
            # an initializer keeps its name; a folded value gets its ONNX value name
            name = c.name if c.name in self.initializers else self._param_name(c.name or "const")
            self.weights[name] = arr
            op: Operation = graph.ParamOp(name, graph.tensor_type(arr.shape, _elt(arr)))
        else:
            op = graph.ConstantOp.from_numpy(arr)
        self._append(op)
        self.materialised[id(c)] = (c, op.results[0])
        return op.results[0]

    def _param_name(self, base: str) -> str:
        name, k = base, 1
        while name in self.used_names:
            name, k = f"{base}_{k}", k + 1
        self.used_names.add(name)
        return name

    def shape(self, v: Value) -> tuple[int, ...]:
        return tuple(v.array.shape) if isinstance(v, Const) else graph.shape_of(v)

    def dtype(self, v: Value) -> np.dtype:
        if isinstance(v, Const):
            return v.array.dtype
        return np.dtype(graph.numpy_dtype(graph.element_type_of(v)))

    # ---- emitting ----------------------------------------------------------------
    def _append(self, op: Operation) -> None:
        if self._node is not None:
            label = self._node.name or (self._node.output[0] if self._node.output else "")
            op.location = NameLoc(StringAttr(label), NoneAttr())
        self.ops.append(op)

    def emit(self, op_cls: type[graph.GraphOp], *operands: Value, **attrs: Any) -> SSAValue:
        """Build `op_cls.make(...)` (consts materialised); shape errors name the node."""
        values = [self.value(o) for o in operands]
        try:
            op = op_cls.make(*values, **attrs)
        except VerifyException as e:
            raise self.error(str(e)) from None
        self._append(op)
        return op.results[0]

    def scalar(self, value: float, like: Value) -> Const:
        return Const(np.asarray(value, dtype=self.dtype(like)))

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        shape = tuple(d if isinstance(d, symdims.SymDim) else int(d) for d in shape)
        if isinstance(v, Const) and symdims.is_symbolic(shape):
            raise self.error(f"cannot reshape an import-time value to the symbolic {shape}")
        if isinstance(v, Const):  # (a new value: it must not take the initializer's name)
            return Const(v.array.reshape(shape), v.name and f"{v.name}_reshaped")
        if graph.shape_of(v) == shape:
            return v
        return self.emit(graph.ReshapeOp, v, shape=shape)

    def attrs(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The node's attributes with defaults from `spec`; any other attribute is an error."""
        from onnx import helper

        out = dict(spec)
        for a in self.node.attribute:
            if a.name not in spec:
                raise self.error(f"unsupported attribute '{a.name}'")
            if a.ref_attr_name:
                raise self.error(f"attribute '{a.name}' refers to a function attribute")
            val = helper.get_attribute_value(a)
            if isinstance(val, bytes):
                val = val.decode()
            if isinstance(val, float):  # a float32: its shortest decimal (1e-05, not 9.99e-06)
                val = float(str(np.float32(val)))
            out[a.name] = val
        return out

    def require(self, attrs: dict, name: str, allowed: Sequence[Any]) -> None:
        if attrs[name] not in allowed:
            raise self.error(f"attribute '{name}' = {attrs[name]!r} is not supported")

    def no_extra_outputs(self, keep: int) -> None:
        for i, name in enumerate(self.node.output):
            if i >= keep and name:
                raise self.error(f"output {i} ('{name}') is not supported")

    # ---- driver ------------------------------------------------------------------
    def run(self) -> ModuleOp:
        g = self.model.graph
        for init in g.initializer:
            self.env[init.name] = Const(self._tensor(init), init.name)
            self.initializers.add(init.name)
            self.used_names.add(init.name)
        for init in g.sparse_initializer:
            raise DlpcError(
                f"{self.source}: error: sparse initializer '{init.values.name}' is not supported"
            )
        arg_names = []
        for vi in g.input:
            if vi.name in self.env:
                continue
            if vi.name in self.freeze:
                self.env[vi.name] = Const(self.freeze[vi.name], vi.name)
                continue
            ty = self._input_type(vi, symbolic=self.symbolic)
            if math.prod(ty.get_shape()) == 0:  # an empty tensor has no values: a constant
                dt = graph.numpy_dtype(ty.get_element_type())
                self.env[vi.name] = Const(np.zeros(ty.get_shape(), dtype=dt), vi.name)
                continue
            arg = self.block.insert_arg(ty, len(self.block.args))
            self.env[vi.name] = arg
            arg_names.append(vi.name)
        self.arg_names = arg_names
        for idx, node in enumerate(g.node):
            self.import_node(node, idx)
        self._node = None
        results, layout = [], []
        for vi in g.output:
            if vi.name in self.sequences:  # its tensors in order; the layout groups them
                items = self.sequences[vi.name]
                results.extend(self.value(v) for v in items)
                layout.append(len(items))
                continue
            if vi.name not in self.env:
                raise DlpcError(f"{self.source}: error: graph output '{vi.name}' is never computed")
            results.append(self.value(self.env[vi.name]))
            layout.append(-1)
        module = self._module(arg_names, results)
        if any(n >= 0 for n in layout):
            main_func(module).attributes[SEQUENCE_OUTPUTS] = ArrayAttr(
                [IntegerAttr(n, 64) for n in layout]
            )
        return module

    def import_node(self, node, idx: int) -> None:
        """Import one node: fold it, hand it to its handler, or expand it into the nodes
        of its ONNX function body (each imported in turn)."""
        self._node, self.node_index = node, idx
        if node.domain not in ("", "ai.onnx"):
            raise self.error(
                f"operator '{node.domain}.{node.op_type}' is not supported "
                f"(only the default ONNX domain is)"
            )
        for name in node.input:
            if name in self.sequences:
                raise self.error(
                    f"input '{name}' is a sequence; dlpc keeps a sequence only as a graph "
                    f"output, and '{node.op_type}' does not read one"
                )
            if name and name not in self.env:
                raise self.error(f"input '{name}' is not defined before its use")
        outputs: Sequence[Value | None]
        outer, at = self.opset, self.opset
        if node.op_type in HANDLERS and node.op_type not in LEGACY and self.opset < MIN_OPSET:
            # an older node in its opset-13 form, folded or handled as at 13 (onnx_opsets.py)
            self._node = node = self._check_legacy_opset(node)
            at = MIN_OPSET
        if self._foldable(node) and not self._symbolic_extent(node):
            self.opset = at
            try:
                outputs = self._fold(node)
            finally:
                self.opset = outer
        elif node.op_type in HANDLERS:
            self.opset = at
            try:
                outputs = HANDLERS[node.op_type](self)
            except symdims.SymbolicError as e:  # (a handler's arithmetic over a symbol)
                raise self.error(str(e)) from None
            finally:
                self.opset = outer
        else:
            body = self._function_body(node)
            if body is None:
                raise self.error(f"unsupported operator '{node.op_type}'")
            nodes, opset = body
            outer = self.opset
            self.opset = opset
            try:
                for sub in nodes:
                    self.import_node(sub, idx)
            finally:
                self.opset, self._node, self.node_index = outer, node, idx
            for name in node.output:
                if name and name not in self.env:
                    raise self.error(f"its function body does not compute output '{name}'")
            return
        for name, val in zip(node.output, outputs):
            if not name:
                continue
            if val is None:  # (a handler computes every output it does not reject)
                raise self.error(f"output '{name}' is not computed")
            if isinstance(val, list):  # a sequence of tensors (onnx_ops/sequence.py)
                self.sequences[name] = val
                continue
            if isinstance(val, SSAValue) and 0 in graph.shape_of(val):
                # an empty tensor has no values: keep it as an import-time constant
                dt = graph.numpy_dtype(graph.element_type_of(val))
                val = Const(np.zeros(graph.shape_of(val), dtype=dt), name)
            self.env[name] = val

    def _function_body(self, node) -> tuple[list, int] | None:
        """The nodes of the ONNX function that defines `node`'s operator (names prefixed,
        attribute references resolved, as onnx's own `_expanded` test cases are made) and
        the opset they are written in; None when the operator has no function."""
        from onnx import AttributeProto, FunctionProto, NodeProto, defs

        try:
            schema = defs.get_schema(node.op_type, self.opset, node.domain)
        except Exception:  # noqa: BLE001 - an unknown operator
            return None
        # (these OpSchema members are missing from onnx's type stubs)
        plain_all: list[int] = getattr(schema, "function_opset_versions", [])
        context_all: list[int] = getattr(schema, "context_dependent_function_opset_versions", [])
        plain = [v for v in plain_all if v <= self.opset]
        context = [v for v in context_all if v <= self.opset]
        if not plain and not context:
            return None
        node_ = NodeProto()
        node_.CopyFrom(node)
        given = {a.name for a in node.attribute}
        for name, attr in schema.attributes.items():
            if name not in given and attr.default_value and attr.default_value.name:
                node_.attribute.extend([attr.default_value])
        fn = FunctionProto()
        if context and (not plain or max(context) >= max(plain)):
            types = [self._type_proto(n) for n in node.input]
            build = getattr(schema, "get_context_dependent_function_with_opset_version")  # noqa: B009
            fn.ParseFromString(
                build(
                    max(context), node_.SerializeToString(), [t.SerializeToString() for t in types]
                )
            )
        else:
            plain_fn = getattr(schema, "get_function_with_opset_version")  # noqa: B009
            fn.ParseFromString(plain_fn(max(plain)))
        prefix = f"{node.output[0] if node.output else node.op_type}__{node.op_type}_"
        names = {n: (node.input[i] if i < len(node.input) else "") for i, n in enumerate(fn.input)}
        names.update(
            {
                n: node.output[i]
                for i, n in enumerate(fn.output)
                if i < len(node.output) and node.output[i]
            }
        )

        def rename(name: str) -> str:
            return names.get(name, prefix + name if name else "")

        attrs = {a.name: a for a in node_.attribute}
        nodes = []
        for inner in fn.node:
            new = NodeProto()
            new.CopyFrom(inner)
            new.ClearField("input")
            new.ClearField("output")
            new.ClearField("attribute")
            new.input.extend(rename(n) for n in inner.input)
            new.output.extend(rename(n) for n in inner.output)
            for a in inner.attribute:
                if a.ref_attr_name:
                    if a.ref_attr_name in attrs:
                        ref = AttributeProto()
                        ref.CopyFrom(attrs[a.ref_attr_name])
                        ref.name = a.name
                        new.attribute.append(ref)
                elif a.type == AttributeProto.GRAPH:  # a branch or body: its names too
                    sub = AttributeProto()
                    sub.CopyFrom(a)
                    _rename_graph(sub.g, rename)
                    new.attribute.append(sub)
                elif a.type == AttributeProto.GRAPHS:
                    raise self.error(
                        f"unsupported operator '{node.op_type}' (its ONNX function body "
                        f"has a graphs attribute, '{inner.op_type}')"
                    )
                else:
                    new.attribute.append(a)
            if not new.name:
                new.name = f"{node.name or prefix}/{inner.op_type}"
            nodes.append(new)
        versions = [o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")]
        return nodes, (versions[0] if versions else self.opset)

    def _type_proto(self, name: str):
        """The ONNX TypeProto of an imported value (empty for an omitted input)."""
        from onnx import TypeProto, helper

        if not name:
            return TypeProto()
        v = self.env[name]
        dt = helper.np_dtype_to_tensor_dtype(self.dtype(v))
        return helper.make_tensor_type_proto(dt, list(self.shape(v)))

    def _module(self, arg_names: list[str], results: list[SSAValue]) -> ModuleOp:
        self.block.add_ops(self.ops)
        self.block.add_op(func.ReturnOp(*results))
        ftype = FunctionType.from_lists(
            [a.type for a in self.block.args], [r.type for r in results]
        )
        arg_attrs = ArrayAttr([DictionaryAttr({"dlpc.name": StringAttr(n)}) for n in arg_names])
        main = func.FuncOp("main", ftype, Region(self.block), arg_attrs=arg_attrs)
        module = ModuleOp([main])
        try:
            module.verify()
        except VerifyException as e:
            raise DlpcError(f"{self.source}: error: imported IR does not verify: {e}") from None
        return module

    def _symbolic_extent(self, node) -> bool:
        """Import-time data cut or spread by a symbolic dim (a position buffer sliced up to
        `seq`): its result has a symbolic shape, so its handler emits a graph op."""
        names = [n for n in node.input if n]
        if node.op_type in ("ConstantOfShape", "Range"):  # (a symbolic shape or limit)
            return any(
                isinstance(c := self.env[n], Const) and c.array.dtype == object for n in names
            )
        if not names or node.op_type not in ("Slice", "Expand", "Tile", "Reshape"):
            return False
        arrays = [self.env[n] for n in names]
        first = arrays[0]
        return (
            isinstance(first, Const)
            and first.array.dtype != object
            and any(isinstance(a, Const) and a.array.dtype == object for a in arrays[1:])
        )

    def _foldable(self, node) -> bool:
        if node.op_type in NONDETERMINISTIC or node.op_type in SEQUENCE_MAKERS:
            return False
        if any(a.type in (5, 10) for a in node.attribute):  # GRAPH / GRAPHS attributes
            return False
        if node.op_type == "DequantizeLinear" and _quantized_weight(self.env[node.input[0]]):
            return False  # the integers reach graph-fold-qdq's integer kernels
        return all(isinstance(self.env[n], Const) for n in node.input if n)

    def _fold(self, node) -> list[Const | None]:
        """Evaluate a node on import-time values with onnx's reference evaluator: one value
        per output, None for an omitted one."""
        if node.op_type == "Constant":
            value = self._constant_value(node)
            if value is not None:
                return [Const(value, node.output[0])]
        if node.op_type == "GatherElements":
            return [Const(self._gather_elements(node), node.output[0])]
        if node.op_type == "Optional":  # an optional imports as its value (onnx_ops/control.py)
            if not node.input or not node.input[0]:
                raise self.error("an empty optional is not supported")
            return [cast(Const, self.env[node.input[0]])]
        if any(self._const_of(n).dtype == object for n in node.input if n):
            return self._fold_symbolic(node)
        from onnx.reference import ReferenceEvaluator

        feeds: dict[str, np.ndarray] = {}
        for n in node.input:
            if n:
                c = self.env[n]
                assert isinstance(c, Const), "only nodes of import-time values are folded"
                feeds[n] = c.array
        try:
            ref = ReferenceEvaluator(node, opsets={"": self.opset})
            with np.errstate(all="ignore"):  # log(0) = -inf is a value, not an error
                outs = ref.run(None, feeds)
        except Exception as e:  # noqa: BLE001 - any failure of the evaluator is a user error
            raise self.error(f"cannot evaluate at import time: {e}") from None
        # (the evaluator answers every output position, an omitted one included)
        return [Const(np.asarray(a), n) if n else None for a, n in zip(outs, node.output)]

    def _gather_elements(self, node) -> np.ndarray:
        """GatherElements on import-time values, folded here: onnx's evaluator (1.23) takes
        the data's extent off every axis, so an index smaller than the data on another axis
        (BERT's token types gathered at `pos[:, :seq]`) fails there. Outside `axis` the
        index reads the data's leading part; negative indices count from the end."""
        data, index = (self._const_of(n) for n in node.input[:2])
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if data.ndim != index.ndim or not -data.ndim <= axis < max(data.ndim, 1):
            raise self.error(
                f"cannot evaluate at import time: GatherElements of data {list(data.shape)} "
                f"by indices {list(index.shape)} on axis {axis}"
            )
        axis %= max(data.ndim, 1)
        region = tuple(slice(None) if i == axis else slice(0, n) for i, n in enumerate(index.shape))
        part = data[region]
        outside = part.shape[:axis] + part.shape[axis + 1 :]
        if outside != index.shape[:axis] + index.shape[axis + 1 :]:
            raise self.error(
                f"cannot evaluate at import time: GatherElements indices {list(index.shape)} "
                f"exceed data {list(data.shape)} outside axis {axis}"
            )
        n = data.shape[axis]
        if index.size and (index.min() < -n or index.max() >= n):
            raise self.error(
                f"cannot evaluate at import time: GatherElements index out of range [-{n}, {n})"
            )
        return np.take_along_axis(part, np.where(index < 0, index + n, index), axis=axis)

    def _fold_symbolic(self, node) -> list[Const | None]:
        """Shape arithmetic over symbolic dims (`onnx_symbolic.fold`)."""
        from onnx import helper

        from dlpc.frontends import onnx_symbolic

        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        inputs = [self._const_of(n) if n else None for n in node.input]
        try:
            outs = onnx_symbolic.fold(node.op_type, attrs, inputs)
        except ValueError as e:
            raise self.error(f"cannot evaluate at import time: {e}") from None
        return [Const(a, n) if n else None for a, n in zip(outs, node.output)]

    def _const_of(self, name: str) -> np.ndarray:
        c = self.env[name]
        assert isinstance(c, Const), "only nodes of import-time values are folded"
        return c.array

    @staticmethod
    def _constant_value(node) -> np.ndarray | None:
        """A `Constant` node's tensor `value`, read directly: TorchScript exports hold their
        weights and every scalar in Constant nodes, and onnx's reference evaluator (a
        ReferenceEvaluator per node) costs ~17 MB of imports and its construction. None
        for the other attribute forms and external data (the evaluator reads those)."""
        from onnx import AttributeProto, numpy_helper

        (attr, *rest) = list(node.attribute) or [None]
        if rest or attr is None or attr.name != "value" or attr.type != AttributeProto.TENSOR:
            return None
        if attr.t.data_location == 1:  # EXTERNAL
            return None
        try:
            return np.asarray(numpy_helper.to_array(attr.t))
        except Exception:  # noqa: BLE001 - the evaluator's path names the failure
            return None

    def _tensor(self, init) -> np.ndarray:
        from onnx import numpy_helper

        if init.name in self.user_weights:
            arr = np.asarray(self.user_weights[init.name])
        else:
            if init.data_location == 1:  # EXTERNAL
                base = os.path.dirname(self.source) if os.path.exists(self.source) else "."
                from onnx.external_data_helper import load_external_data_for_tensor

                load_external_data_for_tensor(init, base)
            try:
                arr = numpy_helper.to_array(init)
            except Exception as e:  # noqa: BLE001
                raise DlpcError(
                    f"{self.source}: error: cannot read initializer '{init.name}': {e}"
                ) from None
        # (np.ascontiguousarray would give a 0-d initializer shape (1,): a wrong rank)
        return arr if arr.flags.c_contiguous else arr.copy(order="C")

    def _input_type(self, vi, symbolic: bool = False) -> TensorType:
        """The type of a graph input; a dim that is not a number (a `dim_param`, or none)
        is symbolic when `symbolic`, named for its `dim_param` (else `<input>_<axis>`),
        and an error otherwise."""
        t = vi.type
        if not t.HasField("tensor_type"):
            kind = (t.WhichOneof("value") or "unknown").removesuffix("_type")
            users = sorted({n.op_type for n in self.model.graph.node if vi.name in n.input})
            raise DlpcError(
                f"{self.source}: error: graph input '{vi.name}' is not a tensor but "
                f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                f"(read by {', '.join(users) or 'no node'}; sequences and optionals are not "
                "supported)"
            )
        dt = onnx_dtype_to_numpy(t.tensor_type.elem_type)
        if dt is None:
            users = sorted({n.op_type for n in self.model.graph.node if vi.name in n.input})
            raise DlpcError(
                f"{self.source}: error: graph input '{vi.name}' has element type "
                f"{onnx_type_name(t.tensor_type.elem_type)}, which dlpc does not support "
                f"(read by {', '.join(users) or 'no node'})"
            )
        if vi.name in self.input_shapes:
            shape = tuple(int(d) for d in self.input_shapes[vi.name])
        else:
            if not t.tensor_type.HasField("shape"):
                raise DlpcError(
                    f"{self.source}: error: graph input '{vi.name}' has no "
                    f"shape; pass input_shapes={{'{vi.name}': ...}}"
                )
            shape = []
            for axis, d in enumerate(t.tensor_type.shape.dim):
                if not d.HasField("dim_value") and symbolic:
                    shape.append(symdims.sym(_symbol_name(d.dim_param or f"{vi.name}_{axis}")))
                    continue
                if not d.HasField("dim_value"):
                    sym = d.dim_param or "?"
                    raise DlpcError(
                        f"{self.source}: error: graph input '{vi.name}' has symbolic dim "
                        f"'{sym}'; dlpc needs static shapes (export without dynamic axes "
                        f"or pass input_shapes={{'{vi.name}': ...}})"
                    )
                shape.append(d.dim_value)
            shape = tuple(shape)
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise DlpcError(
                f"{self.source}: error: graph input '{vi.name}' has a negative dim in {list(shape)}"
            )
        too_big = graph.size_error(shape, graph.NUMPY_TO_ELT[dt.name])
        if too_big:
            raise DlpcError(f"{self.source}: error: graph input '{vi.name}': {too_big}")
        return graph.tensor_type(shape, graph.NUMPY_TO_ELT[dt.name])


def _rename_graph(g, rename) -> None:
    """Rename every value name of a function body's subgraph (GraphProto `g`, nested
    subgraphs included) as the body's own names are renamed when it is expanded."""
    for vi in (*g.input, *g.output):
        vi.name = rename(vi.name)
    for init in g.initializer:
        init.name = rename(init.name)
    for n in g.node:
        inputs, outputs = [rename(x) for x in n.input], [rename(x) for x in n.output]
        del n.input[:], n.output[:]
        n.input.extend(inputs)
        n.output.extend(outputs)
        for a in n.attribute:
            if a.HasField("g"):
                _rename_graph(a.g, rename)


def _graph_input_source(v: SSAValue) -> BlockArgument | None:
    """A graph input a value is computed from (an integer one first, as sizes are; else
    the first found), or None: freezing it may make the value an import-time constant (a
    window's size arrives as an integer and is cast to float on its way to Range)."""
    if isinstance(v, BlockArgument):
        return v
    found: list[BlockArgument] = []
    seen, todo = set(), [v]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, BlockArgument):
            found.append(x)
            continue
        if isinstance(x.owner, Operation):
            todo.extend(x.owner.operands)
    ints = [a for a in found if not graph.is_float_type(graph.element_type_of(a))]
    return (ints or found or [None])[0]


def _symbol_name(dim_param: str) -> str:
    """A `dim_param` as a symbol name (letters, digits, `_` and `.`; not a digit first)."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_.") else "_" for c in dim_param)
    return name if name and not name[0].isdigit() else f"_{name}"


def _quantized_weight(v: Value) -> bool:
    """An 8-bit integer initializer of more than one value (a quantized weight)."""
    return isinstance(v, Const) and v.array.dtype in (np.int8, np.uint8) and v.array.size > 1


def _elt(arr: np.ndarray):
    return graph.NUMPY_TO_ELT[arr.dtype.name]


def import_onnx(
    model,
    source: str = "<onnx>",
    weights: dict | None = None,
    freeze_inputs: dict | None = None,
    input_shapes: dict | None = None,
    symbolic: bool = False,
):
    """ModelProto -> (graph-level ModuleOp, weights dict); `symbolic` keeps the dims with
    no value symbolic (else they are an error)."""
    imp = Importer(model, source, weights, freeze_inputs, input_shapes, symbolic)
    module = imp.run()
    return module, imp.weights


def load_model(
    path_or_model,
    weights: dict | None = None,
    *,
    freeze_inputs: dict | None = None,
    input_shapes: dict | None = None,
) -> Model:
    """Load an ONNX model (a path or a `onnx.ModelProto`) into a `dlpc.model.Model`.

    `weights` overrides initializer values by name; `freeze_inputs` binds graph inputs to
    fixed values (they stop being arguments); `input_shapes` gives static shapes for inputs
    whose dims are symbolic.

    A model some of whose inputs decide shapes (Reshape's `shape`, Slice's `starts`, ... as
    graph inputs), or that has empty inputs, gets a `Specialiser`: a call passes every graph
    input, and `dlpc.compile` imports the model again per value of the inputs that decide
    shapes (found as the importer meets them), frozen; empty inputs are constants.
    """
    onnx = _require_onnx()
    if isinstance(path_or_model, str | os.PathLike):
        path = os.fspath(path_or_model)
        try:
            model = onnx.load(path)
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - protobuf decode errors
            raise DlpcError(f"{path}: error: not a readable ONNX model: {e}") from None
        source, name = path, os.path.splitext(os.path.basename(path))[0]
    else:
        model, path = path_or_model, None
        source, name = "<onnx>", (model.graph.name or "model")
    freeze = dict(freeze_inputs or {})
    inputs = call_inputs(model, source, freeze, input_shapes)
    names = {s.name for s in inputs}
    symbolic = {s.name for s in inputs if symdims.is_symbolic(s.shape)}
    found: list[str] = []
    reason = None
    try:
        if symbolic:  # one symbolic graph; else one graph per input shape, at call time
            try:
                module, params = import_onnx(
                    model, source, weights, freeze, input_shapes, symbolic=True
                )
            except (DlpcError, VerifyException, symdims.SymbolicError) as e:
                module, params, reason = None, {}, str(e)
        else:
            module, params = import_onnx(model, source, weights, freeze, input_shapes)
    except NeedsConstantInput as e:
        if e.input_name not in names:
            raise
        module, params, found = None, {}, [e.input_name]
    if module is not None and [s.name for s in inputs] == _input_names(main_func(module)):
        return Model(module, params, name, path)

    def build(values: Mapping[str, np.ndarray]) -> Model:
        shapes = {**(input_shapes or {}), **{n: np.shape(values[n]) for n in symbolic}}
        while True:
            frozen = {n: np.asarray(values[n]) for n in spec.shape_inputs}
            try:
                m, p = import_onnx(model, source, weights, {**freeze, **frozen}, shapes)
            except NeedsConstantInput as e:
                if e.input_name in spec.shape_inputs or e.input_name not in values:
                    raise
                spec.shape_inputs.append(e.input_name)
                continue
            return Model(m, p, name, path)

    spec = Specialiser(tuple(inputs), found, build, symbolic_error=reason)
    return Model(module, params, name, path, spec)


def call_inputs(model, source: str, freeze: dict, input_shapes: dict | None) -> list[InputSpec]:
    """The inputs a call of the model passes: its graph inputs that are not initializers
    (nor frozen), with their static types."""
    imp = Importer(model, source, None, None, input_shapes)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits or vi.name in freeze:
            continue
        ty = imp._input_type(vi, symbolic=True)
        dt = np.dtype(graph.numpy_dtype(ty.get_element_type()))
        out.append(InputSpec(vi.name, graph.shape_of(ty), dt))
    return out
