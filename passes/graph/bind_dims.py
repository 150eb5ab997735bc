"""Bind symbolic dims to values: a symbolic graph becomes the static graph of one call.

Input: graph, func, builtin, with symbolic dims (`tensor<?x784xf32, ["batch"]>`, ints
properties with `?` entries named by their `sym_<name>` attribute).
Output: the same ops with every dim and property static.
Requires: a value for every symbol the function arguments carry (`dims="batch=8,seq=16"`).
Guarantees: no `?` dim and no `sym_*` attribute remains in a bound function; result types
are re-inferred (graph-infer-shapes), so a value that breaks an op (a slice past its
input, a window larger than its input) is an error naming the op. A symbol with no value
is an error naming the argument and the dim:

    func.func @main(%x: tensor<?x4xf32, ["batch"]>) -> tensor<?x4xf32, ["batch"]> {
      %y = graph.relu %x : (tensor<?x4xf32, ["batch"]>) -> tensor<?x4xf32, ["batch"]>
      func.return %y : tensor<?x4xf32, ["batch"]>
    }

with dims="batch=8" becomes the same function over tensor<8x4xf32>.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, TensorType, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.dialects import symdims
from dlpc.passes.graph.infer_shapes import infer_module


def parse_dims(text: str) -> dict[str, int]:
    """ "batch=8,seq=16" -> {"batch": 8, "seq": 16}; a malformed entry is a VerifyException."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or not name.strip() or not value.strip().lstrip("-").isdigit():
            raise VerifyException(f"graph-bind-dims: dims entry '{part}' is not name=int")
        if int(value) < 1:
            raise VerifyException(f"graph-bind-dims: dim '{name.strip()}' = {value} is below 1")
        out[name.strip()] = int(value)
    return out


def _bound(shape, bound: Mapping[str, int], where: str) -> tuple[int, ...]:
    try:
        return symdims.bind_shape(shape, bound)
    except KeyError as e:
        raise VerifyException(
            f"graph-bind-dims: {where} has symbolic dim '{e.args[0]}' with no value "
            f"(given: {', '.join(f'{k}={v}' for k, v in bound.items()) or 'none'})"
        ) from None


def _check_ends(op: g.SliceOp, ends: tuple[int, ...]) -> None:
    """A symbolic end past its input would be clamped silently by the slice: an error."""
    shape = g.shape_of(op.operands[0])
    axes = op.axes or tuple(range(len(ends)))
    for end, axis in zip(ends, axes):
        size = shape[g.normalize_axis(axis, len(shape))]
        if isinstance(size, int) and end > size:
            raise VerifyException(
                f"graph-bind-dims: graph.slice end {end} is past its input's {size} along "
                f"axis {axis} (a bound dim larger than the model allows)"
            )


def bind_module(module: ModuleOp, bound: Mapping[str, int]) -> None:
    """Bind in place: argument types, then symbolic properties, then inference."""
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
            continue
        block = fn.body.blocks.first
        assert block is not None
        for k, arg in enumerate(block.args):
            ty = arg.type
            if isinstance(ty, TensorType) and g.DYNAMIC_INDEX in ty.get_shape():
                where = f"@{fn.sym_name.data} argument {k}"
                shape = _bound(g.shape_of(ty), bound, where)
                Rewriter.replace_value_with_new_type(
                    arg, g.tensor_type(shape, ty.get_element_type())
                )
        for op in fn.walk():
            for name in [a for a in op.attributes if a.startswith("sym_")]:
                prop = name.removeprefix("sym_")
                raw = op.properties.get(prop)
                if not isinstance(raw, DenseArrayBase):
                    continue
                values = g.sym_ints(op, prop, raw.get_values())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
                ints = _bound(values, bound, f"{op.name} property '{prop}'")
                if isinstance(op, g.SliceOp) and prop == "ends":
                    _check_ends(op, ints)
                op.properties[prop] = DenseArrayBase.from_list(i64, list(ints))
                del op.attributes[name]
    infer_module(module)


@dataclass(frozen=True)
class GraphBindDims(ModulePass):
    """graph-bind-dims: give symbolic dims their values (dims="batch=8,seq=16")."""

    name = "graph-bind-dims"

    dims: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        bind_module(op, parse_dims(self.dims))
