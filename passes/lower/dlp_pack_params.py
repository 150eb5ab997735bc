"""Small weights packed into one buffer for the DLP target (`dlp-pack-params`), folded with
the weights at compile time, so that a kernel reading several of them copies them on chip
with one DMA instead of one each (every DMA pays a latency at batch 1).

Input: loop IR (`loop.kernel`s in `func.func @main` in the calling convention of
docs/architecture.md: inputs, params (`dlpc.params`), outputs), before `loop-to-dlp`.
Output: loop IR, where the *small params* of each element type, when there are at least
two, became views of one new param:

- a small param is a vector (1-D: a bias, a norm's scale; a matrix or filter is read into
  WRAM on its own) of at most `max-elements` elements, and every use of it is a
  `memref.load` inside a `loop.kernel` (read-only, no view, no copy of it);
- the new param `packed.N` (1-D, of that element type) is appended to @main's params
  (`dlpc.params`, argument attribute `dlpc.name`); its argument attribute `dlpc.pack`
  lists `[name, element offset]` per member: the recipe;
- the members are laid out in the order kernels first read them (kernel by kernel, load by
  load), each at an offset of a multiple of `max(dma_align, vector_align)` bytes of the
  description (`target-desc`), so that the members a chain of kernels reads lie side by
  side and each starts where an intrinsic operand may;
- every use of a member reads `memref.reinterpret_cast %packed to offset: [off]` with the
  member's shape instead (made at the top of @main); the member stays an argument of
  @main, unread.

With `weights` (a dict of the bound params by name: `pipeline.lower` passes the weights
it folds, not an option of the command line) the packed array is computed and added to
it, as `graph-fold-constants` adds `folded.N`: the pack is made once at compile time,
never by a kernel. Only params present in `weights` are packed then. Without `weights`
(dlpc-opt) the recipe in `dlpc.pack` says how a caller makes it.

Numerics unchanged: the views hold the members' values. `loop-to-dlp` copies adjacent
views of one pack that a kernel reads whole with one DMA (`_dlp_pack.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, BlockArgument
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import dlp
from dlpc.dialects.loop import KernelOp
from dlpc.targets.dlp import resolve

PACK = "dlpc.pack"  # argument attribute of a packed param: [[member name, offset], ...]


def _main(module: ModuleOp) -> func.FuncOp | None:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    named = [f for f in funcs if f.sym_name.data == "main"]
    return named[0] if named else (funcs[0] if len(funcs) == 1 else None)


def _params(fn: func.FuncOp) -> tuple[int, list[str]]:
    """(index of @main's first param argument, the params' names)."""
    attr = fn.attributes.get("dlpc.params")
    names = (
        [a.data for a in attr.data if isinstance(a, StringAttr)]
        if isinstance(attr, ArrayAttr)
        else []
    )
    n_in_attr = fn.attributes.get("dlpc.num_inputs")
    n_out_attr = fn.attributes.get("dlpc.num_outputs")
    n_args = len(fn.body.block.args)
    n_out = n_out_attr.value.data if isinstance(n_out_attr, IntegerAttr) else 0
    n_in = (
        n_in_attr.value.data if isinstance(n_in_attr, IntegerAttr) else n_args - len(names) - n_out
    )
    if n_in < 0 or n_in + len(names) + n_out > n_args:
        raise VerifyException(
            f"dlp-pack-params: @main lists {len(names)} params and {n_out} outputs after "
            f"{n_in} inputs but has {n_args} arguments"
        )
    return n_in, names


def _small(arg: BlockArgument, max_elements: int) -> bool:
    """A static vector of at most `max_elements` elements read only by loads in kernels."""
    ty = arg.type
    if not isinstance(ty, MemRefType) or len(ty.get_shape()) != 1 or ty.get_shape()[0] < 0:
        return False  # (a vector: a weight matrix or filter goes to WRAM on its own)
    if math.prod(ty.get_shape()) > max_elements:
        return False
    for use in arg.uses:
        op = use.operation
        if not isinstance(op, memref.LoadOp) or op.memref is not arg:
            return False
        k = op.parent_op()
        while k is not None and not isinstance(k, KernelOp):
            k = k.parent_op()
        if k is None:
            return False
    return True


def first_reads(fn: func.FuncOp, args: set[BlockArgument]) -> list[BlockArgument]:
    """`args` in the order @main's kernels first read them (kernel by kernel, load by load)."""
    order: dict[BlockArgument, None] = {}
    for k in fn.body.block.ops:
        if isinstance(k, KernelOp):
            for op in k.walk():
                if isinstance(op, memref.LoadOp) and op.memref in args:
                    order.setdefault(op.memref, None)  # type: ignore[arg-type]
    return list(order)


def pack_params(
    module: ModuleOp,
    max_elements: int,
    align_bytes: int,
    weights: dict[str, np.ndarray] | None = None,
) -> list[str]:
    """Pack @main's small params (see the module docstring); the new params' names."""
    fn = _main(module)
    if fn is None:
        return []
    n_in, names = _params(fn)
    block = fn.body.block
    params = dict(zip(block.args[n_in : n_in + len(names)], names))
    small = {
        a
        for a, name in params.items()
        if _small(a, max_elements) and (weights is None or name in weights)
    }
    by_type: dict[Attribute, list[BlockArgument]] = {}
    for a in first_reads(fn, small):
        by_type.setdefault(a.type.get_element_type(), []).append(a)  # type: ignore[union-attr]
    made: list[str] = []
    taken = set(names) | set(weights or ())
    for elt, members in by_type.items():
        if len(members) < 2:
            continue
        elt_bytes = dlp.element_bytes(MemRefType(elt, [1]))
        step = max(1, align_bytes // elt_bytes)
        offsets, end = [], 0
        for a in members:
            offsets.append(end)
            end += -(-math.prod(a.type.get_shape()) // step) * step  # type: ignore[union-attr]
        n = 0
        while f"packed.{n}" in taken:
            n += 1
        name = f"packed.{n}"
        taken.add(name)
        at = n_in + len(names) + len(made)
        packed = block.insert_arg(MemRefType(elt, [end]), at)
        packed.name_hint = "packed"
        recipe = ArrayAttr(
            [
                ArrayAttr([StringAttr(params[a]), IntegerAttr(o, i64)])
                for a, o in zip(members, offsets)
            ]
        )
        _name_arg(fn, at, {"dlpc.name": StringAttr(name), PACK: recipe})
        first = block.first_op
        assert first is not None  # (the members are read in its kernels)
        for a, off in zip(members, offsets):
            shape = list(a.type.get_shape())  # type: ignore[union-attr]
            strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
            view_type = MemRefType(elt, shape)  # (as dlp-reshape-aliases' casts: no layout)
            view = memref.ReinterpretCastOp.from_dynamic(packed, [off], shape, strides, view_type)
            view.result.name_hint = a.name_hint
            block.insert_op_before(view, first)
            a.replace_all_uses_with(view.result)
        if weights is not None:
            weights[name] = pack_array(
                [(params[a], o) for a, o in zip(members, offsets)], end, weights
            )
        made.append(name)
    if made:
        fn.attributes["dlpc.params"] = ArrayAttr([StringAttr(s) for s in [*names, *made]])
        fn.function_type = FunctionType.from_lists(
            list(block.arg_types), list(fn.function_type.outputs.data)
        )
    return made


def pack_array(recipe: list[tuple[str, int]], size: int, values: dict) -> np.ndarray:
    """A packed param of `size` elements: each member's values (by name) at its offset."""
    dtype = np.asarray(values[recipe[0][0]]).dtype
    array = np.zeros(size, dtype=dtype)
    for member, off in recipe:
        flat = np.asarray(values[member], dtype=dtype).ravel()
        array[off : off + flat.size] = flat
    return array


def packed_values(fn: func.FuncOp, values: dict) -> dict[str, np.ndarray]:
    """The packed params of `fn` (a `dlpc.pack` recipe on the argument) made from the
    members' `values` by name (--check-each-pass's drawn params, a caller's weights)."""
    out: dict[str, np.ndarray] = {}
    for arg, attrs in zip(fn.body.block.args, fn.arg_attrs.data if fn.arg_attrs else ()):
        recipe = attrs.data.get(PACK) if isinstance(attrs, DictionaryAttr) else None
        name = attrs.data.get("dlpc.name") if isinstance(attrs, DictionaryAttr) else None
        if not isinstance(recipe, ArrayAttr) or not isinstance(name, StringAttr):
            continue
        pairs = []
        for entry in recipe.data:
            assert isinstance(entry, ArrayAttr)  # (made by pack_params: [name, offset])
            member, off = entry.data
            assert isinstance(member, StringAttr) and isinstance(off, IntegerAttr)
            pairs.append((member.data, off.value.data))
        if all(m in values for m, _ in pairs) and isinstance(arg.type, MemRefType):
            out[name.data] = pack_array(pairs, math.prod(arg.type.get_shape()), values)
    return out


def _name_arg(fn: func.FuncOp, at: int, attrs: dict[str, Attribute]) -> None:
    """Argument `at` (just inserted) gets `attrs`; the others keep theirs."""
    n = len(fn.body.block.args)
    old = list(fn.arg_attrs.data) if fn.arg_attrs else []
    old += [DictionaryAttr({})] * (n - 1 - len(old))
    fn.arg_attrs = ArrayAttr([*old[:at], DictionaryAttr(attrs), *old[at:]])


@dataclass(frozen=True)
class DlpPackParams(ModulePass):
    """`dlp-pack-params{max-elements=512 target-desc=tiny}`: small params as views of one
    packed param (see above); `weights` only from Python (`pipeline.lower`)."""

    name = "dlp-pack-params"

    max_elements: int = 512
    target_desc: str = ""
    weights: dict | None = field(default=None, compare=False, hash=False)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_elements < 1:
            raise VerifyException(
                f"dlp-pack-params: expected max-elements >= 1, got {self.max_elements}"
            )
        desc = resolve(self.target_desc or None)
        pack_params(op, self.max_elements, max(desc.dma_align, desc.vector_align), self.weights)
