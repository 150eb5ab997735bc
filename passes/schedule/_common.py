"""Shared machinery of the schedule primitives (TVM TIR-schedule style) on the loop level.

Every primitive addresses loops as `kernel/loop` (the `name` annotation of a `loop.for`
inside a `loop.kernel`), checks its requirements one by one, and raises a dedicated
`ScheduleError` subclass whose message names the loop (`kernel/loop`) when one is
violated. The helpers here: lookup, loop-chain queries, affine analysis of index
expressions (for footprints), and small IR builders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects.loop import ForOp, KernelOp, kernels

index = IndexType()


# The mark of a loop whose iterations are independent (it was `parallel`) in a kernel too
# small to wake a thread for (default.py `finish_kernel`): the C backend runs it serially
# in the kernel's function and shares it among the threads inside @main's team region
# (docs/design/schedules.md#team-loops); passes after the schedule treat it as parallel.
TEAM_LOOP = "dlpc.team"


class ScheduleError(VerifyException):
    """A schedule primitive's requirement is violated (the message names the loop)."""


class KernelNotFoundError(ScheduleError):
    pass


class LoopNotFoundError(ScheduleError):
    pass


class BufferNotFoundError(ScheduleError):
    pass


# ------------------------------------------------------------------------- lookup


def path(loop: ForOp) -> str:
    """`kernel/loop`, the way schedules and diagnostics name a loop."""
    return f"{loop.kernel().sym}/{loop.loop_name}"


def loop_name(loop: ForOp) -> str:
    """The name a primitive addresses `loop` by; an unnamed loop cannot be addressed."""
    if loop.loop_name is None:
        raise LoopNotFoundError(f"a loop of kernel '{loop.kernel().sym}' has no name")
    return loop.loop_name


# the last root looked up and its kernels by name (the first of each name), for
# get_kernel; one module is held until another root is looked up
_index: tuple[Operation, dict[str, KernelOp]] | None = None


def get_kernel(root: Operation, name: str) -> KernelOp:
    """The first kernel called `name` under `root`. From an index of `root`'s kernels,
    taken when a kernel is still `name` and under `root` (kernel names are unique: the
    verifier says so), else rebuilt: a scan per lookup made scheduling quadratic in the
    kernel count (resnet's training step: 2,000 lookups among 350 kernels)."""
    global _index
    if _index is not None and _index[0] is root:
        k = _index[1].get(name)
        if k is not None and k.sym == name and (k is root or root.is_ancestor(k)):
            return k
    found: dict[str, KernelOp] = {}
    for k in kernels(root):
        found.setdefault(k.sym, k)
    _index = (root, found)
    if name in found:
        return found[name]
    known = ", ".join(k.sym for k in kernels(root)) or "none"
    raise KernelNotFoundError(f"no kernel named '{name}' (kernels: {known})")


def get_loop(root: Operation, kernel: str, loop: str) -> ForOp:
    k = get_kernel(root, kernel) if not isinstance(root, KernelOp) else root
    for op in k.loops():
        if op.loop_name == loop:
            return op
    known = ", ".join(str(op.loop_name) for op in k.loops())
    raise LoopNotFoundError(f"kernel '{k.sym}' has no loop named '{loop}' (loops: {known})")


def split_path(text: str) -> tuple[str, str]:
    kernel, sep, loop = text.partition("/")
    if not sep or not kernel or not loop:
        raise LoopNotFoundError(f"expected a 'kernel/loop' path, got '{text}'")
    return kernel, loop


def fresh_name(kernel: KernelOp, wanted: str | None, base: str) -> str:
    """`wanted` if given (must be unused), else a fresh name derived from `base`."""
    if wanted:
        if any(op.loop_name == wanted for op in kernel.loops()):
            raise ScheduleError(f"loop name '{wanted}' is already used in kernel '{kernel.sym}'")
        return wanted
    return kernel.fresh_loop_name(base)


# -------------------------------------------------------------------- loop chains


def index_arith(op: Operation) -> bool:
    return op.dialect_name() == "arith" and all(isinstance(r.type, IndexType) for r in op.results)


def child_loop(loop: ForOp) -> ForOp | None:
    """The loop that is the only op of `loop`'s body apart from index arithmetic, which is
    sunk into it (so the nest becomes perfect); None if there is no such loop."""
    ops = list(loop.block.ops)
    loops = [op for op in ops if isinstance(op, ForOp)]
    if len(loops) != 1 or not all(op is loops[0] or index_arith(op) for op in ops):
        return None
    child = loops[0]
    first = child.block.first_op
    for op in ops:
        if op is not child:
            op.detach()
            if first is None:
                child.block.add_op(op)
            else:
                child.block.insert_op_before(op, first)
    return child


def inner_loops(loop: ForOp) -> list[ForOp]:
    """Loops strictly inside `loop`, pre-order."""
    return [op for op in loop.walk() if isinstance(op, ForOp) and op is not loop]


def ancestors(op: Operation) -> list[ForOp]:
    """Enclosing loops of `op`, outermost first."""
    out: list[ForOp] = []
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        if isinstance(parent, ForOp):
            out.append(parent)
        parent = parent.parent_op()
    return out[::-1]


def is_reduction(loop: ForOp) -> bool:
    """A loop carries a dependence if marked `reduction` or if some store inside it does not
    index with its induction variable (every iteration writes the same element)."""
    if loop.reduction is not None:
        return True
    iv = loop.induction_var
    for op in loop.walk():
        if (
            isinstance(op, memref.StoreOp)
            and not _local_to(op.memref, loop)
            and not any(depends_on(i, iv) for i in op.indices)
        ):
            return True
    return False


def _local_to(buf: SSAValue, loop: ForOp) -> bool:
    """Is `buf` allocated inside `loop` (private to one iteration)?"""
    owner = buf.owner
    return isinstance(owner, Operation) and loop.is_ancestor(owner)


def depends_on(value: SSAValue, target: SSAValue) -> bool:
    """Does `value` (transitively, through pure ops) depend on `target`?"""
    seen: set[int] = set()
    work = [value]
    while work:
        v = work.pop()
        if v is target:
            return True
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, OpResult):
            work.extend(v.op.operands)
    return False


def name_iv(loop: ForOp) -> None:
    """Give the induction variable the loop's name as SSA name hint (readable IR)."""
    name = loop.loop_name
    if name and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
        loop.induction_var.name_hint = name


def copy_annotations(src: ForOp, dst: ForOp, keys: Sequence[str]) -> None:
    for key in keys:
        if key in src.attributes:
            dst.attributes[key] = src.attributes[key]


def split_extent(target: ForOp, out: ForOp, inn: ForOp) -> None:
    """A loop over a symbolic extent (`dlpc.extent`, passes/lower/_symbolic.py) split:
    both loops keep the extent; the outer one gets a `dlpc.extent_id` fresh in the
    kernel, and the original index is the inner iv plus the ivs of the loops whose ids
    `dlpc.extent_base` lists (the outer one, and the target's own base): ids, not names,
    since later schedules rename loops."""
    if "dlpc.extent" not in target.attributes:
        return
    kernel = target.kernel()
    taken = [
        o.attributes["dlpc.extent_id"]
        for o in kernel.walk()
        if isinstance(o, ForOp) and "dlpc.extent_id" in o.attributes
    ]
    fresh = 1 + max((a.value.data for a in taken if isinstance(a, IntegerAttr)), default=0)
    base = target.attributes.get("dlpc.extent_base")
    ids = list(base.data) if isinstance(base, ArrayAttr) else []
    for loop, below in ((out, ids), (inn, [*ids, IntegerAttr(fresh, 64)])):
        loop.attributes["dlpc.extent"] = target.attributes["dlpc.extent"]
        if below:
            loop.attributes["dlpc.extent_base"] = ArrayAttr(below)
    out.attributes["dlpc.extent_id"] = IntegerAttr(fresh, 64)


def move_ops(src: Block, dst: Block) -> None:
    """Move every op of `src` to the end of `dst`."""
    for op in list(src.ops):
        op.detach()
        dst.add_op(op)


def block_of(op: Operation) -> Block:
    """The block holding `op`: every op a schedule primitive rewrites is inside a kernel."""
    block = op.parent_block()
    assert block is not None, f"{op.name} is not in a block"
    return block


def erase(op: Operation) -> None:
    """Detach (if attached) and erase an op that has no remaining uses."""
    block = op.parent_block()
    if block is not None:
        block.erase_op(op)
    else:
        op.erase()


def const(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, index))


def unroll_in_place(loop: ForOp) -> None:
    """Replace a loop without loops inside by one copy of its body per iteration, the
    induction variable a constant in each (a full unroll in the IR, where `unroll` only
    asks the code generator): the loop around it then holds straight-line code, so it
    can be the innermost, vectorized loop. Numerics unchanged."""
    assert not inner_loops(loop), "unroll_in_place wants a loop without loops inside"
    block = block_of(loop)
    for value in range(loop.lower, loop.upper, loop.stride):
        iv = const(value)
        block.insert_op_before(iv, loop)
        mapper: dict[SSAValue, SSAValue] = {loop.induction_var: iv.result}
        for op in loop.block.ops:
            block.insert_op_before(op.clone(value_mapper=mapper), loop)
    erase(loop)


# ------------------------------------------------------------------ affine access


@dataclass
class Affine:
    """`const + sum(coef * iv)` over induction variables (block arguments of loop.for)."""

    const: int = 0
    terms: dict[SSAValue, int | Fraction] = field(default_factory=dict)

    def add(self, other: Affine, scale: int = 1) -> Affine:
        terms = dict(self.terms)
        for v, c in other.terms.items():
            terms[v] = _whole(terms.get(v, 0) + scale * c)
        return Affine(self.const + scale * other.const, {v: c for v, c in terms.items() if c})

    def scaled(self, k: int) -> Affine:
        return Affine(self.const * k, {v: c * k for v, c in self.terms.items() if c * k})


def _whole(c: int | Fraction) -> int | Fraction:
    """A coefficient as an int when it is one (a Fraction only from `_delinearized`)."""
    return int(c) if isinstance(c, Fraction) and c.denominator == 1 else c


def affine(value: SSAValue, delinearize: bool = False) -> Affine | None:
    """The affine form of an index value, or None if it is not affine in loop IVs.

    With `delinearize`, `x / K` and `x % K` (`arith.divsi`/`remsi` by a constant K > 0)
    are affine too when the loop ranges make them exact: x = K q + r with q, r affine,
    x >= 0 and 0 <= r < K over every iteration (a reshape copy's mixed-radix index,
    `(16 a + b) / 16 = a` and `% 16 = b` for b in [0, 16)); a loop whose every value
    makes its term a multiple of K goes whole into the quotient (a split's outer loop
    `o` of `0 to 16 step 8`: `(o + i) / 8 = o / 8`, a Fraction coefficient that
    `emit_affine` prints as an exact division)."""
    if isinstance(value, BlockArgument):
        if isinstance(value.block.parent_op(), ForOp):
            return Affine(0, {value: 1})
        return None
    op = value.op if isinstance(value, OpResult) else None
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return Affine(op.value.value.data, {})
    if delinearize and isinstance(op, arith.DivSIOp | arith.RemSIOp):
        return _delinearized(op, affine(op.lhs, True), affine(op.rhs, True))
    if isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        a, b = affine(op.lhs, delinearize), affine(op.rhs, delinearize)
        if a is None or b is None:
            return None
        if isinstance(op, arith.AddiOp):
            return a.add(b)
        if isinstance(op, arith.SubiOp):
            return a.add(b, -1)
        if not a.terms:
            return b.scaled(a.const)
        if not b.terms:
            return a.scaled(b.const)
    return None


def affine_range(expr: Affine) -> tuple[int, int]:
    """The least and greatest value of `expr` over the ranges of its loops."""
    lo = hi = expr.const
    for v, c in expr.terms.items():
        lp = iv_loop(v)
        first, last = lp.lower, lp.lower + (lp.trip_count - 1) * lp.stride
        lo += min(c * first, c * last)
        hi += max(c * first, c * last)
    return int(lo), int(hi)  # whole: a Fraction term is whole on its loop's values


def _delinearized(
    op: arith.DivSIOp | arith.RemSIOp, x: Affine | None, k: Affine | None
) -> Affine | None:
    if x is None or k is None or k.terms or k.const <= 0:
        return None
    K = k.const
    q = Affine(x.const // K, {v: c // K for v, c in x.terms.items() if c // K})
    r = Affine(x.const % K, {v: c % K for v, c in x.terms.items() if c % K})
    if any(iv_loop(v).trip_count <= 0 for v in x.terms):
        return None
    if affine_range(x)[0] < 0:
        return None  # truncating division of a negative value
    if not _spills(r, K):
        return q if isinstance(op, arith.DivSIOp) else r
    whole = {  # terms that are multiples of K on every value of their loop
        v: c
        for v, c in x.terms.items()
        if c % K and (c * iv_loop(v).stride) % K == 0 and (c * iv_loop(v).lower) % K == 0
    }
    if not whole:
        return None
    q = q.add(Affine(0, {v: _whole(Fraction(c) / K) - c // K for v, c in whole.items()}))
    r = Affine(r.const, {v: c for v, c in r.terms.items() if v not in whole})
    if _spills(r, K):
        return None  # r spills into q
    return q if isinstance(op, arith.DivSIOp) else r


def _spills(r: Affine, K: int) -> bool:
    r_lo, r_hi = affine_range(r)
    return r_lo < 0 or r_hi >= K


def iv_loop(iv: SSAValue) -> ForOp:
    assert isinstance(iv, BlockArgument)
    loop = iv.block.parent_op()
    assert isinstance(loop, ForOp)
    return loop


def conjunction(tests: list[tuple[SSAValue, int, str]]) -> tuple[list[Operation], SSAValue]:
    """`value <pred> bound` for every (value, bound, pred) test (`arith.cmpi` predicates,
    e.g. "sge", "slt"), and-ed together: (the ops, constants and compares first and the
    `arith.andi` chain after, not yet inserted; the i1 result). At least one test."""
    ops: list[Operation] = []
    for value, bound, pred in tests:
        c = const(bound)
        ops += [c, arith.CmpiOp(value, c.result, pred)]
    cond = ops[1].results[0]
    for cmp in ops[3::2]:
        both = arith.AndIOp(cond, cmp.results[0])
        ops.append(both)
        cond = both.result
    return ops, cond


def bound_tests(checks, index, shape) -> list[tuple[SSAValue, int, str]]:
    """The tests of padding checks `(dim, "lo" | "hi")` on `index[dim]` against the
    buffer's `shape`: `>= 0` and `< shape[dim]`, for `conjunction`."""
    return [
        (index[d], 0, "sge") if side == "lo" else (index[d], shape[d], "slt") for d, side in checks
    ]


def rows_in_bounds(
    base: Sequence[Affine], ivs: Sequence[SSAValue], moving, checks, shape, block: Block
) -> tuple[list[Operation], SSAValue]:
    """The test that a copied box's row lies inside the buffer in its moving dims: the
    row index `base[d] + ivs[d]` of each dim in `moving` (emitted at the start of
    `block`) under the padding checks `checks` on those dims, as `conjunction` gives it
    (the ops, not yet inserted; the i1)."""
    rows = {d: emit_affine(base[d].add(Affine(0, {ivs[d]: 1})), block) for d in moving}
    tests = [(d, side) for d in moving for side in ("lo", "hi") if (d, side) in checks]
    return conjunction(bound_tests(tests, rows, shape))


def emit_affine(expr: Affine, block: Block, before: Operation | None = None) -> SSAValue:
    """Materialise `expr` with arith ops at the start of `block` (or before `before`)."""
    ops: list[Operation] = []
    acc: SSAValue | None = None
    for v, c in expr.terms.items():
        term = v
        if isinstance(c, Fraction):  # (p / d) v, v a multiple of d (`_delinearized`)
            d = const(c.denominator)
            div = arith.DivSIOp(v, d.result)
            ops += [d, div]
            term, c = div.result, c.numerator
        if c != 1:
            k = const(c)
            mul = arith.MuliOp(term, k.result)  # (of v / d for a Fraction)
            ops += [k, mul]
            term = mul.result
        if acc is None:
            acc = term
        else:
            add = arith.AddiOp(acc, term)
            ops.append(add)
            acc = add.result
    if acc is None or expr.const:
        k = const(expr.const)
        ops.append(k)
        if acc is None:
            acc = k.result
        else:
            add = arith.AddiOp(acc, k.result)
            ops.append(add)
            acc = add.result
    if before is not None:
        block.insert_ops_before(ops, before)
    elif block.first_op is not None:
        block.insert_ops_before(ops, block.first_op)
    else:
        block.add_ops(ops)
    return acc


# -------------------------------------------------------------------- buffers


def buffers_accessed(kernel: Operation, external: bool = False) -> list[SSAValue]:
    """Distinct memrefs loaded or stored under `kernel`, in order of first access (with
    `external`, only those allocated outside the kernel)."""
    out: list[SSAValue] = []
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp | memref.StoreOp) and op.memref not in out:
            owner = op.memref.owner
            if external and isinstance(owner, Operation) and kernel.is_ancestor(owner):
                continue
            out.append(op.memref)
    return out


def buffer_label(value: SSAValue) -> str:
    return value.name_hint or "?"


def find_buffer(kernel: KernelOp, where: Operation, spec: str | SSAValue) -> SSAValue:
    """A buffer by name hint (`A`, `x`) or by position among the buffers accessed in the
    kernel (`0`, `1`, ...); an SSA value is returned as is."""
    if isinstance(spec, SSAValue):
        return spec
    bufs = buffers_accessed(kernel)
    if spec.isdigit() and int(spec) < len(bufs):
        return bufs[int(spec)]
    for b in bufs:
        if b.name_hint == spec:
            return b
    known = ", ".join(f"{n}:{buffer_label(b)}" for n, b in enumerate(bufs))
    raise BufferNotFoundError(
        f"kernel '{kernel.sym}' accesses no buffer '{spec}' (buffers: {known})"
    )


def guarded(op: Operation, stop: Operation) -> bool:
    """Is `op` under an scf.if below `stop`?"""
    parent = op.parent_op()
    while parent is not None and parent is not stop:
        if isinstance(parent, scf.IfOp):
            return True
        parent = parent.parent_op()
    return False


def memref_type(value: SSAValue) -> MemRefType:
    ty = value.type
    assert isinstance(ty, MemRefType)
    return ty


def module_of(op: Operation) -> ModuleOp:
    while not isinstance(op, ModuleOp):
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op
