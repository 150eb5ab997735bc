"""Loops over symbolic extents stop at the call's dims (`loop-runtime-extents`).

Input: loop IR of a function with symbolic dims, as te-to-loop writes it over a
symbolic te function (passes/lower/_symbolic.py): buffers at the maxima, the dims in
the input `dlpc_dims`, spatial loops over symbolic extents marked `dlpc.extent =
"<expr>"`, after any schedules (a split keeps the mark on its outer loop).
Output: loop IR.
Requires: a `func.func @main` with the `dlpc.dims` attribute when any loop is marked.
Guarantees: the same results; no loop keeps `dlpc.extent`; each marked loop's body is
under `scf.if iv < limit`, the limit (the extent less the split's outer ivs) computed
from `dlpc_dims` just before the loop, so the body is the compare and the `scf.if` alone
and the C printer stops the loop at the limit: a call does the work of its own dims,
not the maxima's. A vector loop is stopped so too (it stays one vector loop with a
runtime trip count), except a non-exact vector loop inside an unrolled one (the
columns of a register tile), which runs to its static bound so that the tile's
accumulators stay in registers. A register tile (a marked, non-exact unrolled loop
under the split loops its index adds) runs in two versions chosen once per iteration of
its innermost split loop: a copy of that loop's body with the tile's static trip counts
when the whole tile lies inside the extent, else the body with the tile stopped at the
extent (a short extent computes its own rows, not a tile's); a marked loop of that body
over the tile's range from the same base (its write-back: cache_write marks it) is
static in the first version and stopped at the extent in the other. Any other unrolled
marked loop, or one in a
`dlpc.prepare` kernel (run before any call gives dims), is left to run to its static
bound (its iterations past the extent compute padding that nothing reads), unless it is
exact (a reduction's): then it runs in two versions, unguarded when the whole tile is
below the extent. A second run changes nothing.

    loop.for %i1 = 0 to 128 step 1 {name = "i1", dlpc.extent = "seq"} { ... }

becomes

    %k = arith.constant 1 : index
    %seq = memref.load %dlpc_dims[%k] : memref<2xi64>
    %n = arith.index_cast %seq : i64 to index
    loop.for %i1 = 0 to 128 step 1 {name = "i1"} {
      %c = arith.cmpi slt, %i1, %n : index
      scf.if %c { ... }
    }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import symdims
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.passes.lower._symbolic import (
    BASE_ATTR,
    DIMS_ATTR,
    EXACT_ATTR,
    EXTENT_ATTR,
    GUARD_REDUCTIONS,
    ID_ATTR,
    SCALE_ATTR,
    guard,
    guard_tile,
    tile_fits,
)
from dlpc.passes.lower.prepack import PREPARE
from dlpc.passes.lower.view_copies import main_function


@dataclass(frozen=True)
class LoopRuntimeExtents(ModulePass):
    """`loop-runtime-extents`: marked loops guarded by the call's extents (module
    docstring)."""

    name = "loop-runtime-extents"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        exact: set[ForOp] = set()
        for kernel in [k for k in op.walk() if isinstance(k, KernelOp)]:
            exact |= _exact_loops(kernel, self.name)
        marked = [o for o in op.walk() if isinstance(o, ForOp) and EXTENT_ATTR in o.attributes]
        if not marked:
            return
        fn = main_function(op, self.name)
        names = fn.attributes.get(DIMS_ATTR)
        n_in = fn.attributes.get("dlpc.num_inputs")
        if not isinstance(names, ArrayAttr) or not isinstance(n_in, IntegerAttr):
            raise VerifyException(
                f"{self.name}: loops are marked {EXTENT_ATTR} but @{fn.sym_name.data} has no "
                f"{DIMS_ATTR} (the symbols of its dlpc_dims input) or dlpc.num_inputs"
            )
        order = [a.data for a in names.data if isinstance(a, StringAttr)]
        dims = fn.body.block.args[n_in.value.data - 1]
        rest = _version_tiles(op, dims, order, exact)
        marked = [o for o in op.walk() if isinstance(o, ForOp) and EXTENT_ATTR in o.attributes]
        for loop in marked:
            text = loop.attributes.pop(EXTENT_ATTR)
            where = f"loop '{loop.loop_name}'"
            if not isinstance(text, StringAttr):
                raise VerifyException(f"{self.name}: {where}: {EXTENT_ATTR} must be a string")
            try:
                extent = symdims.parse(text.data)
            except ValueError as e:  # (a SymbolicError too)
                raise VerifyException(f"{self.name}: {where}: {e}") from None
            unknown = sorted(symdims.symbols((extent,)) - set(order))
            if unknown:
                raise VerifyException(
                    f"{self.name}: {where} runs over '{text.data}' but '{unknown[0]}' is not "
                    f"one of @{fn.sym_name.data}'s dims ({', '.join(order)})"
                )
            tile = "unroll" in loop.attributes or "vectorize" in loop.attributes
            # a vector loop stopped at its limit stays one vector loop (C: a clamped bound),
            # except the columns of a register tile (inside an unrolled loop): with a
            # runtime trip count its accumulators would leave the registers
            clamp = (
                "vectorize" in loop.attributes
                and "unroll" not in loop.attributes
                and (loop in exact or not _in_unrolled(loop))
            )
            if (
                (tile and not clamp and loop not in exact and loop not in rest)
                or isinstance(extent, int)
                or _prepares(loop)
            ):
                loop.attributes.pop(BASE_ATTR, None)
                loop.attributes.pop(SCALE_ATTR, None)
                continue  # (runs to its static bound: past the extent it computes padding)
            base = _base(loop)
            scale = loop.attributes.pop(SCALE_ATTR, None)
            if isinstance(scale, IntegerAttr) and base is not None:  # (a fused loop)
                guard(loop, extent, dims, order, base, scale.value.data)
            elif base is not None and tile and loop in exact and not clamp:
                # (an exact register tile: guarded only in the last one)
                guard_tile(loop, extent, dims, order, base)
            elif base is not None:  # (None: a loop the index's other parts run in is inside)
                guard(loop, extent, dims, order, base)
            elif loop in exact:
                raise VerifyException(
                    f"{self.name}: loop '{loop.loop_name}' reduces over '{text.data}' but a "
                    f"loop its index adds to is no longer around it; lower with "
                    f"{GUARD_REDUCTIONS} on @main"
                )
        for loop in [o for o in op.walk() if isinstance(o, ForOp)]:
            loop.attributes.pop(ID_ATTR, None)


def _version_tiles(op: ModuleOp, dims: SSAValue, order: list[str], exact: set[ForOp]) -> set[ForOp]:
    """Register tiles over a symbolic extent in two versions, chosen once per tile: the
    body of the tile's innermost split loop B (the last loop its index adds) becomes
    `scf.if sum(base) + upper <= extent` (every tile of B's iteration lies inside the
    extent) with a copy of the body whose tile loops lose their marks (static trip
    counts: the accumulators stay in registers), else the body as it was, whose tile
    loops are returned to be stopped at the extent like any marked loop (a call of a
    short extent computes its own rows, not a whole tile's). A tile loop here is a
    marked, non-exact unrolled loop. Exact loops (copied with the body) stay exact in
    both versions."""
    rest: set[ForOp] = set()
    while True:
        groups: dict[ForOp, list[tuple[ForOp, list[ForOp]]]] = {}
        for loop in [o for o in op.walk() if isinstance(o, ForOp)]:
            if loop in rest or loop in exact or EXTENT_ATTR not in loop.attributes:
                continue
            found = _tile_base(loop)
            if found is not None:
                groups.setdefault(found[-1], []).append((loop, found))
        if not groups:
            return rest
        outer = next(iter(groups))  # (walk order: an enclosing B before the Bs inside it)
        tiles = groups[outer]
        now = {t for t, _ in tiles}
        body = list(outer.block.ops)
        mapper: dict[SSAValue, SSAValue] = {}
        copies = [o.clone(value_mapper=mapper) for o in body]
        kernel = outer.kernel()
        originals = [o for b in body for o in b.walk() if isinstance(o, ForOp)]
        cloned = [o for c in copies for o in c.walk() if isinstance(o, ForOp)]
        covered: dict[tuple[str, str], int] = {}  # (extent, base) of the tiles: trip count
        for t, _ in tiles:
            key = (str(t.attributes[EXTENT_ATTR]), str(t.attributes[BASE_ATTR]))
            covered[key] = max(covered.get(key, 0), t.upper)
        for a, b in zip(originals, cloned, strict=True):
            b.annotate("name", kernel.fresh_loop_name(f"{a.loop_name or 'l'}_tile"))
            if a in exact:
                exact.add(b)
            elif a in now or _within(a, covered):  # (inside the extent: static)
                b.attributes.pop(EXTENT_ATTR, None)
                b.attributes.pop(BASE_ATTR, None)
            elif a in rest:  # (a tile of an enclosing version's remainder)
                rest.add(b)
        rest |= now
        # the condition: for each (extent, base) of the tiles, sum(base) + upper <= extent
        head: list[Operation] = []
        cond: SSAValue | None = None
        keys: dict[tuple[str, tuple[int, ...]], tuple[ForOp, list[ForOp]]] = {}
        for t, found in tiles:
            text = t.attributes[EXTENT_ATTR]
            assert isinstance(text, StringAttr)
            key = (text.data, tuple(id(b) for b in found))
            if key not in keys or t.upper > keys[key][0].upper:
                keys[key] = (t, found)
        for (text, _), (t, found) in keys.items():
            fits = tile_fits(
                symdims.parse(text), dims, order, [b.induction_var for b in found], t.upper, head
            )
            cond = fits if cond is None else _add(head, arith.AndIOp(cond, fits))
        assert cond is not None
        for o in body:
            o.detach()
        branch = scf.IfOp(
            cond, [], Region(Block([*copies, scf.YieldOp()])), Region(Block([*body, scf.YieldOp()]))
        )
        outer.block.add_ops([*head, branch])


def _within(loop: ForOp, covered: dict[tuple[str, str], int]) -> bool:
    """Whether `loop` (not a tile: a tile's write-back, schedules/cache.py) runs over the
    range of a tile of the version, from its base: inside the extent when the tile is."""
    key = (str(loop.attributes.get(EXTENT_ATTR)), str(loop.attributes.get(BASE_ATTR)))
    upper = covered.get(key)
    return (
        upper is not None
        and BASE_ATTR in loop.attributes
        and loop.lower == 0
        and loop.stride > 0
        and loop.upper <= upper
    )


def _add(head: list[Operation], op: Operation) -> SSAValue:
    head.append(op)
    return op.results[0]


def _tile_base(loop: ForOp) -> list[ForOp] | None:
    """The split loops (outermost first) whose ivs `loop`'s index adds, when `loop` is a
    register tile over a symbolic extent (unrolled) and they are all around it; else
    None."""
    ids = loop.attributes.get(BASE_ATTR)
    if not isinstance(ids, ArrayAttr) or not ids.data:
        return None
    wanted = [_id(a) for a in ids.data]
    found: dict[int, ForOp] = {}
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        if isinstance(parent, ForOp):
            own = _id(parent.attributes.get(ID_ATTR))
            if own in wanted and own not in found:
                found[own] = parent
        parent = parent.parent_op()
    if (
        "unroll" not in loop.attributes
        or SCALE_ATTR in loop.attributes
        or len(found) != len(wanted)
        or _prepares(loop)
    ):
        return None
    loops = sorted(found.values(), key=_depth)
    return loops


def _in_unrolled(loop: ForOp) -> bool:
    """Whether an unrolled loop of `loop`'s kernel is around it (a register tile)."""
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        if isinstance(parent, ForOp) and "unroll" in parent.attributes:
            return True
        parent = parent.parent_op()
    return False


def _depth(op: Operation) -> int:
    n = 0
    parent = op.parent_op()
    while parent is not None:
        n, parent = n + 1, parent.parent_op()
    return n


def _base(loop: ForOp) -> list[SSAValue] | None:
    """The ivs of the enclosing loops whose `dlpc.extent_id`s `dlpc.extent_base` lists
    (a split's outer loops: with `loop`'s iv they sum to the lowest original index of
    an iteration), or None when one of them is not around `loop` (a reorder moved it
    inside)."""
    ids = loop.attributes.pop(BASE_ATTR, None)
    wanted = [_id(a) for a in ids.data] if isinstance(ids, ArrayAttr) else []
    found: dict[int, SSAValue] = {}
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        if isinstance(parent, ForOp):
            own = _id(parent.attributes.get(ID_ATTR))
            if own in wanted and own not in found:
                found[own] = parent.induction_var
        parent = parent.parent_op()
    if len(found) != len(wanted):
        return None
    return [found[n] for n in wanted]


def _id(attr: object) -> int:
    return attr.value.data if isinstance(attr, IntegerAttr) else -1


def _exact_loops(kernel: KernelOp, pass_name: str) -> set[ForOp]:
    """The marked loops a schedule made from a kernel's reduction loops over symbolic
    extents (`dlpc.exact` lists te-to-loop's names; a schedule's names extend them:
    r0 -> r0o, r0_rf, r0_first): they are guarded whatever their annotations (a sum
    must not read padding). Such a loop without a mark must not read outside the kernel
    at an index that depends on it (r0_fold folds a local buffer: it may),
    unless it runs once from 0 (a peeled first iteration, whose index is its marked
    outer loops'); one that does (a schedule dropped its mark) is an error. Removes
    `dlpc.exact`."""
    roots = kernel.attributes.pop(EXACT_ATTR, None)
    if not isinstance(roots, ArrayAttr):
        return set()
    names = [a.data for a in roots.data if isinstance(a, StringAttr)]
    exact: set[ForOp] = set()
    for loop in [o for o in kernel.walk() if isinstance(o, ForOp)]:
        if not _derives(loop.loop_name, names):
            continue
        if EXTENT_ATTR in loop.attributes:
            exact.add(loop)
        elif not (loop.lower == 0 and loop.trip_count == 1) and _reads_outside(loop, kernel):
            raise VerifyException(
                f"{pass_name}: kernel '{kernel.sym}': loop '{loop.loop_name}' has no "
                f"{EXTENT_ATTR} mark but reads the kernel's inputs at its index, in a "
                f"kernel that reduces over a symbolic extent; lower with {GUARD_REDUCTIONS} "
                f"on @main"
            )
    return exact


def _derives(name: str | None, roots: list[str]) -> bool:
    """Whether loop `name` is one of `roots` or a schedule's loop made from one."""
    return name is not None and any(
        name == r or (name.startswith(r) and not name[len(r)].isdigit()) for r in roots
    )


def _reads_outside(loop: ForOp, kernel: KernelOp) -> bool:
    """Whether a load in `loop` of a buffer defined outside `kernel` has an index that
    depends on `loop`'s induction variable."""
    iv = loop.induction_var
    for op in loop.walk():
        if not isinstance(op, memref.LoadOp) or defined_inside(op.memref, kernel):
            continue
        if any(_depends(i, iv) for i in op.indices):
            return True
    return False


def _depends(value: SSAValue, iv: SSAValue) -> bool:
    todo: list[SSAValue] = [value]
    seen: set[SSAValue] = set()
    while todo:
        v = todo.pop()
        if v is iv:
            return True
        if v in seen or not isinstance(v.owner, Operation):
            continue
        seen.add(v)
        todo += list(v.owner.operands)
    return False


def _prepares(loop: ForOp) -> bool:
    """Whether `loop` is in a kernel that runs before any call (`dlpc.prepare`: it packs
    weights, loop-prepack-weights), when no dims are given yet."""
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    return parent is not None and PREPARE in parent.attributes
