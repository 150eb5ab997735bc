"""Kernels of their own for short extents of a symbolic program (`loop-short-extents`).

Input: loop IR as te-to-loop writes it over a symbolic function (passes/lower/_symbolic.py),
before the schedules: buffers at the maxima (`dlpc.max_dims` on @main), loops over
symbolic extents marked `dlpc.extent = "<expr>"` and running to the extent's maximum.
@main may carry `dlpc.short_extents = [{batch = 1 : i64, seq = 2 : i64}, ...]`: the
bindings (some of the dims, each at a small value) whose calls get kernels of their own
(runtime/dynamic.py `Generic.versions`, `compile(short=)`).
Output: loop IR.
Requires: with `dlpc.short_extents`, @main has `dlpc.dims` (the order of `dlpc_dims`),
`dlpc.num_inputs` and `dlpc.max_dims`; each named dim is one of `dlpc.dims` and each
value is in 1..its maximum (else a diagnostic naming the pass).
Guarantees: the same results. A kernel of @main's body that computes (it has a
reduction loop) over marked loops whose extents grow with a binding's dims gets a copy
for that binding: each such loop runs to the extent's value at the binding (the other
dims at their maxima) rounded up to its step, so the schedules that follow see the
nest of a program specialised to it and tile it so (a linear at seq 3 gets a 3-row
tile, not the remainder of an 8-row one). When every marked loop's extent is a value of
the binding (a loop from 0 by 1, or a row group's per-row loop whose block loop now
runs once), the copy is static: its loops lose their marks and the kernel its
`dlpc.exact`, so nothing is guarded or versioned at run time, and it is marked
`dlpc.short` (its loops stop short of its buffers: loop-fold-init-epilogue still folds
its init and epilogue); else the marks stay. The
kernel becomes a chain of `scf.if dims == binding` (the dims the copy depends on) over
its copies, in the order of the bindings, the kernel itself last; a copy is named
`<kernel>_<dim><value>...`; a binding that would give a kernel the same copy as an
earlier one gives none. Kernels that compute nothing (copies, slices, transposes) and
kernels inside control flow are left as they are. Without the attribute the pass changes
nothing; a second run changes nothing (it removes the attribute).

    loop.kernel "sum_0" {
      loop.for %i0 = 0 to 4 {dlpc.extent = "batch"} {
        loop.for %r0 = 0 to 16 {dlpc.extent = "seq"} ...
    } }

with `dlpc.short_extents = [{batch = 1 : i64, seq = 2 : i64}]` becomes

    %c = (dlpc_dims[0] == 1) and (dlpc_dims[1] == 2)
    scf.if %c {
      loop.kernel "sum_0_batch1_seq2" { loop.for %i0 = 0 to 1 { loop.for %r0 = 0 to 2 ... } }
    } else {
      loop.kernel "sum_0" { ... as it was ... }
    }
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import symdims
from dlpc.dialects.loop import KernelOp
from dlpc.passes.lower._symbolic import (
    BASE_ATTR,
    DIMS_ATTR,
    EXACT_ATTR,
    EXTENT_ATTR,
    ID_ATTR,
    MAX_ATTR,
)
from dlpc.passes.lower.view_copies import main_function

SHORT_ATTR = "dlpc.short_extents"  # @main: dim -> the small values given kernels of their own
# a static copy's attribute: its loops stop short of its buffers' dims, past them lies
# padding no result reads (loop-fold-init-epilogue folds such init and epilogue nests)
SHORT_KERNEL = "dlpc.short"


@dataclass(frozen=True)
class LoopShortExtents(ModulePass):
    """`loop-short-extents`: kernels copied for small values of dims (module docstring)."""

    name = "loop-short-extents"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        funcs = [f for f in op.ops if SHORT_ATTR in f.attributes]
        if not funcs:
            return
        fn = main_function(op, self.name)
        versions = _versions(fn.attributes.pop(SHORT_ATTR), self.name)
        order = _names(fn.attributes.get(DIMS_ATTR))
        maxima = _maxima(fn.attributes.get(MAX_ATTR))
        n_in = fn.attributes.get("dlpc.num_inputs")
        if order is None or maxima is None or not isinstance(n_in, IntegerAttr):
            raise VerifyException(
                f"{self.name}: @{fn.sym_name.data} has {SHORT_ATTR} but no {DIMS_ATTR}, "
                f"{MAX_ATTR} or dlpc.num_inputs"
            )
        for version in versions:
            for name, value in version.items():
                if name not in order or name not in maxima:
                    raise VerifyException(
                        f"{self.name}: {SHORT_ATTR} names '{name}', which is not one of "
                        f"@{fn.sym_name.data}'s dims ({', '.join(order)})"
                    )
                if not 1 <= value <= maxima[name]:
                    raise VerifyException(
                        f"{self.name}: {SHORT_ATTR} gives '{name}' = {value}, outside "
                        f"1..{maxima[name]} (its maximum)"
                    )
        dims = fn.body.block.args[n_in.value.data - 1]
        for kernel in [k for k in fn.body.block.ops if isinstance(k, KernelOp)]:
            chain: list[tuple[dict[str, int], KernelOp]] = []
            seen: set[tuple[tuple[str, int], ...]] = set()
            for version in versions:
                found = _shortened(kernel, version, maxima)
                if found is None:
                    continue
                used, copy = found
                key = tuple(sorted(used.items()))
                if key not in seen:  # (a version that shortens the same loops alike)
                    seen.add(key)
                    chain.append((used, copy))
            if chain:
                _dispatch(kernel, chain, dims, order.index)


def _versions(attr: object, pass_name: str) -> list[dict[str, int]]:
    """`[{batch = 1, seq = 2}, ...]` as [{"batch": 1, "seq": 2}, ...]; anything else is a
    diagnostic."""
    out: list[dict[str, int]] = []
    if isinstance(attr, ArrayAttr):
        for entry in attr.data:
            if not isinstance(entry, DictionaryAttr) or not entry.data:
                break
            values = {k: v.value.data for k, v in entry.data.items() if isinstance(v, IntegerAttr)}
            if len(values) != len(entry.data):
                break
            out.append(values)
        else:
            return out
    raise VerifyException(
        f"{pass_name}: {SHORT_ATTR} must be an array of dicts from dims to integers, e.g. "
        f"[{{batch = 1 : i64, seq = 2 : i64}}]; got {attr}"
    )


def _names(attr: object) -> list[str] | None:
    if not isinstance(attr, ArrayAttr):
        return None
    return [a.data for a in attr.data if isinstance(a, StringAttr)]


def _maxima(attr: object) -> dict[str, int] | None:
    if not isinstance(attr, DictionaryAttr):
        return None
    return {k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)}


def _grows(d: symdims.Dim) -> bool:
    """Whether `d` never decreases when a symbol grows (symbols are >= 1): a polynomial
    with positive coefficients over symbols and floors of such polynomials."""
    if isinstance(d, int):
        return True
    for mono, coeff in d.terms.items():
        if coeff < 0:
            return False
        for atom in mono:
            if isinstance(atom, symdims.Floor) and not (atom.den > 0 and _grows(atom.num)):
                return False
    return True


def _shortened(
    kernel: KernelOp, version: Mapping[str, int], maxima: Mapping[str, int]
) -> tuple[dict[str, int], KernelOp] | None:
    """The copy of `kernel` for calls whose dims equal `version`'s, with the dims it
    depends on (those that changed a loop) and their values; None when the kernel
    computes nothing (no reduction loop) or no loop changes. Each marked loop whose
    extent grows with the version's dims runs to its value there (other dims at their
    maxima), rounded up to its step. When every marked loop's extent is a value of the
    version's dims, the copy is static: a loop from 0 by 1 runs to exactly that value,
    so does a split's inner loop whose outer loops now run once from 0 (a row group's
    block, which loses its mark too), the marks go, and the kernel's `dlpc.exact` (each
    reduction stops exactly at its static bound). Else the marks stay."""
    loops = list(kernel.loops())
    if not any(lp.reduction is not None for lp in loops):
        return None
    bound = {**maxima, **version}
    used: dict[str, int] = {}
    uppers: dict[int, int] = {}  # loop -> its upper bound in the copy
    exact: set[int] = set()  # loops whose extent is a value of the version's dims
    marked = 0
    for n, loop in enumerate(loops):
        text = loop.attributes.get(EXTENT_ATTR)
        if not isinstance(text, StringAttr):
            continue
        marked += 1
        try:
            extent = symdims.parse(text.data)
            symbols = symdims.symbols((extent,))
        except ValueError:
            return None  # (loop-runtime-extents names it)
        names = symbols & set(version)
        if not names or not _grows(extent):
            continue
        try:
            most = symdims.evaluate(extent, bound)
        except (KeyError, ValueError):
            continue
        steps = -(-max(most - loop.lower, 1) // loop.stride)
        uppers[n] = min(loop.upper, loop.lower + steps * loop.stride)
        used.update({k: version[k] for k in names})
        if symbols <= set(version) and loop.lower == 0:
            exact.add(n)
    if not uppers:
        return None
    ids = {  # split id -> the loop's position (n >= 0)
        a.value.data: n
        for n, lp in enumerate(loops)
        if isinstance(a := lp.attributes.get(ID_ATTR), IntegerAttr)
    }

    def once(n: int) -> bool:  # (runs once from 0 in the copy)
        return n in uppers and loops[n].lower == 0 and uppers[n] <= loops[n].stride

    static = len(exact) == marked
    for n in exact:
        loop = loops[n]
        base = loop.attributes.get(BASE_ATTR)
        if ID_ATTR in loop.attributes:
            static = static and once(n)
        elif isinstance(base, ArrayAttr):
            static = static and all(
                isinstance(b, IntegerAttr) and once(ids.get(b.value.data, -1)) for b in base.data
            )
        static = static and (loop.stride == 1 or ID_ATTR in loop.attributes)
    if not static and all(upper == loops[n].upper for n, upper in uppers.items()):
        return None
    copy = kernel.clone()
    suffix = "_".join(f"{k}{v}" for k, v in sorted(used.items()))
    copy.properties["name"] = StringAttr(f"{kernel.sym}_{suffix}")
    copied = list(copy.loops())
    for n, upper in uppers.items():
        copied[n].properties["ub"] = IntegerAttr(upper, i64)
    if static:
        for loop in copied:
            for attr in (EXTENT_ATTR, BASE_ATTR, ID_ATTR):
                loop.attributes.pop(attr, None)
        copy.attributes.pop(EXACT_ATTR, None)
        copy.attributes[SHORT_KERNEL] = UnitAttr()
    return used, copy


def _dispatch(
    kernel: KernelOp, chain: list[tuple[dict[str, int], KernelOp]], dims: SSAValue, index_of
) -> None:
    """`kernel` becomes `if dims <= version1 {copy1} else if ... else {kernel}` (each
    condition: every dim of the version at most its value)."""
    block = kernel.parent_block()
    assert block is not None
    after = kernel.next_op
    kernel.detach()
    rest: list[Operation] = [kernel]
    for used, copy in reversed(chain):
        head: list[Operation] = []
        cond: SSAValue | None = None
        for name, k in sorted(used.items()):
            at = arith.ConstantOp(IntegerAttr(index_of(name), IndexType()))
            value = memref.LoadOp.get(dims, [at.result])
            value.res.name_hint = name
            limit = arith.ConstantOp(IntegerAttr(k, i64))
            test = arith.CmpiOp(value.res, limit.result, "eq")
            head += [at, value, limit, test]
            if cond is not None:
                both = arith.AndIOp(cond, test.result)
                head.append(both)
                cond = both.result
            else:
                cond = test.result
        assert cond is not None
        branch = scf.IfOp(
            cond, [], Region(Block([copy, scf.YieldOp()])), Region(Block([*rest, scf.YieldOp()]))
        )
        rest = [*head, branch]
    if after is None:
        block.add_ops(rest)
    else:
        block.insert_ops_before(rest, after)
