"""Winograd F(2x2, 3x3) on the OpenCL target: graph-winograd's chains (its OpenCL rule,
passes/graph/winograd.py `pays_opencl`) as the backend writes them.

Input/Output: a loop-level module as te-to-loop builds it (the OpenCL target takes no
CPU schedules, `pipeline.schedules_for`), before its kernels are written (as `views`:
`winograd_nests(module)`, in place, called by the emitter and the runtime; a second run
finds nothing to do). Guarantees: the same results up to rounding (the fused kernel sums
the transforms and the gemm in its own order, as the C's fused kernel does; within the
tolerance of graph-winograd itself).

**Fused** (`fuse_chain`): a chain input transform -> (reshape) -> batched matmul ->
(reshape) -> output transform with its fused epilogue (bias; a residual add; relu; in
that order, any of them) of a conv with padding 1 on every side, an even output height,
output tile columns a multiple of 8, output channels a multiple of 8, and V and M of one
row of tiles within a work-item's private memory (`FUSED_MAX_FLOATS`, graph-winograd's
`OPENCL_FUSED_MAX_FLOATS`) becomes one kernel: the chain's nests, one after the other,
in the output transform's kernel (what it computes: the profile counts their FLOPs; V, M
and the reshapes' buffers stay allocated, only the chain reads them), marked
`opencl_winograd = "fused x=.. u=.. bias=.. residual=.. y=.."` (the positions of its
buffers among the values it uses). The emitter writes that kernel as `fused_source`'s
hand-blocked OpenCL C (`write_fused`, called first by `OpenCLEmitter.kernel`): one
work-item per (image, row of output tiles), work-groups of one work-item, a body
function for chains and teams like every kernel's:

- V = B^T d B of the row for every input channel: the four input rows of the tile row
  loaded as unaligned `float16`s (`dlpc_float16u`), split into even and odd columns
  (`.even`, `.odd`; the neighbours of a block of 8 tiles are two scalars), so padding
  costs one test per row and none per lane; 32 adds per tile on `float8`s of 8 tiles;
- M[t] = U[t] V[t] for the 16 points: 4 output channels x 16 tiles (two `float8`s a
  channel) when the row has a multiple of 16 tiles, else 8 x 8: 8 `float8` accumulators,
  U's scalars broadcast (on PoCL basic, resnet's 16 -> 16 on 32x32: 28 us with 4 x 16,
  32.5 with 8 x 8, 35 with 4 x 8; 32 -> 32 on 16x16: 27 with 8 x 8, 30 with 12 x 8, 37
  with 4 x 8);
- y = A^T M A, the bias, the residual (its two rows loaded as `float16`s and split as
  the input's) and relu (`DLPC_MAXIMUMF` on vectors), two output rows stored as
  `float16`s (the tile columns interleaved).

V and M never leave the work-item (private arrays, 32 KB for resnet's convs), as in the
C's fused kernel (passes/schedule/winograd.py `fused_script`). resnet at batch 1, PoCL
basic, profiling events, us, direct conv -> fused: stem 12.2 -> 8.5, 16 -> 16 61.5 ->
28.1 and 62.2 -> 28.8 (+ residual), 32 -> 32 on 16x16 67.3 -> 26.1.

**Unfused** chains (taken with `graph_winograd={"where": "all"}` only: an odd output, an
epilogue not of that form, ...) keep their kernels, with the nests the C schedules start
from (te-to-loop puts the point t of the input transform outermost, the NDRange
dimension, and chooses the output transform's coefficients by `h / 2`, `h % 2`: every
work-item evaluates the selects at run time, 3-5 GFLOP/s):

- input transform: the loops (n, c, th, tw, t), the tile's 16 loads hoisted out of the
  point loop (`_hoist`), the point loop unrolled in the IR (`unroll_in_place`), its
  selects folded and equal index arithmetic merged (`_simplify`); images and channels
  parallel (NDRange), the tile columns the vector lanes (`plan_lanes`);
- output transform (with its epilogue): `tile_by_two` on the rows and columns and
  `tiles_inside` (the 2x2 tile unrolled inside the tile column).

resnet with every stride-1 3x3 conv as such a chain, batch 1: 1600 -> 543 us of kernels
(the direct convs: 259; hence the rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, SSAValue

from dlpc.backends import c as cbe
from dlpc.backends.names import Scope, c_comment
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside
from dlpc.dialects.typed import element_type, shape_of
from dlpc.passes.graph.winograd import OPENCL_FUSED_MAX_FLOATS

DONE = "opencl_nests"  # a kernel attribute: winograd_nests made its nest


def _origin(kernel: KernelOp) -> str:
    attr = kernel.attributes.get("origin")
    return attr.data if isinstance(attr, StringAttr) else ""


def _is_output_transform(origin: str) -> bool:
    return origin == "graph.winograd_output_transform" or origin.startswith(
        "graph.fused(graph.winograd_output_transform"
    )


def _nest(kernel: KernelOp) -> list[ForOp]:
    """The kernel's perfect chain of outer loops, outermost first (te-to-loop's nest)."""
    loops: list[ForOp] = []
    ops = list(kernel.block.ops)
    while len(ops) == 1 and isinstance(ops[0], ForOp):
        loops.append(ops[0])
        ops = list(ops[0].block.ops)
    return loops


def _invariant(op: Operation, loop: ForOp, hoisted: set[Operation]) -> bool:
    """Does `op` (and everything nested in it) read only values from outside `loop`'s
    body or results of ops already hoisted out of it, and store nothing?"""
    for inner in op.walk():
        if isinstance(inner, memref.StoreOp):
            return False
        for v in inner.operands:
            owner = v.owner
            if isinstance(owner, Block):
                if owner is loop.block:
                    return False
                continue
            if owner in hoisted or not defined_inside(v, loop) or op.is_ancestor(owner):
                continue
            return False
    return True


def _hoist(loop: ForOp) -> None:
    """Loop-invariant ops of `loop`'s body moved before it (loads and `scf.if`s of loads
    too: the kernel's other buffers are never the one it stores)."""
    hoisted: set[Operation] = set()
    block = loop.parent_block()
    assert block is not None
    for op in list(loop.block.ops):
        if isinstance(op, scf.YieldOp) or op.name == "loop.yield":
            continue
        if _invariant(op, loop, hoisted):
            op.detach()
            block.insert_op_before(op, loop)
            hoisted.add(op)


def _constant(v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


_CMP = {
    0: lambda a, b: a == b,
    1: lambda a, b: a != b,
    2: lambda a, b: a < b,
    3: lambda a, b: a <= b,
    4: lambda a, b: a > b,
    5: lambda a, b: a >= b,
}
_INT = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: int(a / b) if b else None,
    "arith.remsi": lambda a, b: a - b * int(a / b) if b else None,
}


def _fold(op: Operation) -> SSAValue | int | None:
    """A value `op`'s result equals (an operand, or an integer constant), or None."""
    if isinstance(op, arith.SelectOp):
        cond = _constant(op.cond)
        if cond is not None:
            return op.lhs if cond else op.rhs
        return None
    args = [_constant(v) for v in op.operands]
    if op.name in _INT and None not in args:
        return _INT[op.name](*args)
    if isinstance(op, arith.CmpiOp) and None not in args and op.predicate.value.data in _CMP:
        return int(_CMP[op.predicate.value.data](*args))
    return None


def _simplify(block: Block) -> None:
    """Constants folded (the unrolled point's selects), equal pure arith ops merged, and
    arith ops left without uses erased, in `block` (not in nested regions)."""
    seen: dict[tuple, Operation] = {}
    for op in list(block.ops):
        if not op.name.startswith("arith.") or op.regions or len(op.results) != 1:
            continue
        folded = _fold(op)
        if isinstance(folded, int):
            kind = op.results[0].type
            assert isinstance(kind, IntegerType | IndexType)
            const = arith.ConstantOp(IntegerAttr(folded, kind))
            block.insert_op_before(const, op)
            folded = const.result
        if folded is not None:
            op.results[0].replace_all_uses_with(folded)
            op.detach()
            op.erase()
            continue
        key = (
            op.name,
            tuple(op.operands),
            str(op.properties),
            str(op.attributes),
            op.results[0].type,
        )
        if key in seen:
            op.results[0].replace_all_uses_with(seen[key].results[0])
            op.detach()
            op.erase()
            continue
        seen[key] = op
    for op in reversed(list(block.ops)):
        if op.name.startswith("arith.") and not op.regions and not any(r.uses for r in op.results):
            op.detach()
            op.erase()


def _input_transform(module: ModuleOp, kernel: KernelOp) -> None:
    from dlpc.passes.schedule._common import get_loop, unroll_in_place
    from dlpc.passes.schedule.reorder import reorder

    loops = _nest(kernel)
    if len(loops) != 5 or loops[0].upper != 16:
        return
    t, n, c, th, tw = (lp.loop_name or "" for lp in loops)
    reorder(module, kernel.sym, [n, c, th, tw, t])
    point = get_loop(module, kernel.sym, t)
    _hoist(point)  # the tile's 16 loads, once for its 16 points
    parent = point.parent_block()
    assert parent is not None
    unroll_in_place(point)
    _simplify(parent)
    for lp in _nest(kernel):  # images (when more than one) and channels: the NDRange
        name = lp.loop_name
        lp.annotate("parallel", name == c or (name == n and lp.upper > 1))
        lp.annotate("vectorize", False)
    kernel.attributes[DONE] = UnitAttr()


def _output_transform(module: ModuleOp, kernel: KernelOp) -> None:
    from dlpc.passes.schedule.winograd import tile_by_two, tiles_inside

    loops = _nest(kernel)
    if len(loops) != 4 or any(lp.loop_name is None for lp in loops):
        return
    if loops[2].upper % 2 or loops[3].upper % 2:
        return  # an odd output keeps te-to-loop's nest
    h, w = loops[2].loop_name or "", loops[3].loop_name or ""
    wt, wr = tile_by_two(kernel, w)
    rows = list(tile_by_two(kernel, h))
    tiles_inside(module, kernel, rows, wr, wt)
    for lp in _nest(kernel):
        lp.annotate("vectorize", False)
    kernel.attributes[DONE] = UnitAttr()


# ------------------------------------------------------------------ the fused chain

FUSED = "opencl_winograd"  # a kernel attribute: "fused", the chain's nests in one kernel
FUSED_MAX_FLOATS = OPENCL_FUSED_MAX_FLOATS  # (graph-winograd's OpenCL rule keeps to it)
EPILOGUES = {
    (): "",
    ("graph.relu",): "relu",
    ("graph.add",): "add",
    ("graph.add", "graph.relu"): "add relu",
}


@dataclass(frozen=True)
class FusedSpec:
    """What `fused_source` writes: the buffers' roles and the shapes."""

    x: SSAValue  # input [N, C, H, W]
    u: SSAValue  # transformed filter [16, 1, Co, C] (or [16, Co, C])
    bias: SSAValue | None  # [Co]
    residual: SSAValue | None  # [N, Co, H, W]
    y: SSAValue  # output [N, Co, H, W]
    n: int
    c: int
    co: int
    h: int
    w: int
    relu: bool


def _producer(kernel: KernelOp, buffer: SSAValue) -> KernelOp | None:
    """The nearest kernel before `kernel` in its block that stores to `buffer`."""
    op = kernel.prev_op
    while op is not None:
        if isinstance(op, KernelOp) and any(
            isinstance(s, memref.StoreOp) and s.memref is buffer for s in op.walk()
        ):
            return op
        op = op.prev_op
    return None


def _loaded(kernel: KernelOp) -> list[SSAValue]:
    """Buffers from outside `kernel` it loads, in order of first load."""
    out: list[SSAValue] = []
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp) and not defined_inside(op.memref, kernel):
            if op.memref not in out:
                out.append(op.memref)
    return out


def _stored(kernel: KernelOp) -> list[SSAValue]:
    return list(
        dict.fromkeys(
            op.memref
            for op in kernel.walk()
            if isinstance(op, memref.StoreOp) and not defined_inside(op.memref, kernel)
        )
    )


def _through_reshape(kernel: KernelOp, buffer: SSAValue, origin: str, chain: list[KernelOp]):
    """The kernel of `origin` that produced `buffer` for `kernel`, through at most one
    reshape copy (appended to `chain`); None if there is none."""
    p = _producer(kernel, buffer)
    if p is not None and _origin(p) == "graph.reshape":
        src = _loaded(p)
        if len(src) != 1:
            return None
        chain.append(p)
        p = _producer(p, src[0])
    return p if p is not None and _origin(p) == origin else None


def _pads(it: KernelOp, x: SSAValue) -> tuple[int, int] | None:
    """(top, left) padding of the input transform `it`: the least constant of its loads'
    row and column indices (2 th + i - top, 2 tw + j - left)."""
    from dlpc.passes.schedule._common import affine

    least: list[int] = []
    for dim in (2, 3):
        consts = []
        for op in it.walk():
            if isinstance(op, memref.LoadOp) and op.memref is x:
                form = affine(op.indices[dim])
                if form is None:
                    return None
                consts.append(form.const)
        if not consts:
            return None
        least.append(-min(consts))
    return least[0], least[1]


def fused_spec(ot: KernelOp) -> tuple[FusedSpec, list[KernelOp]] | None:
    """The spec of output transform `ot`'s chain and the chain's other kernels (input
    transform first), when `fused_source` can write it; else None."""
    origin = _origin(ot)
    inner = (
        origin[len("graph.fused(") : -1].split(", ")
        if origin.startswith("graph.fused(")
        else [origin]
    )
    if inner[0] != "graph.winograd_output_transform" or tuple(inner[1:]) not in EPILOGUES:
        return None
    epilogue = EPILOGUES[tuple(inner[1:])]
    stored = _stored(ot)
    if len(stored) != 1:
        return None
    y = stored[0]
    ys = shape_of(y)
    if len(ys) != 4 or element_type(y) != Float32Type():
        return None
    n, co, h, w = ys
    rest = [b for b in _loaded(ot) if b is not y]
    bias = [b for b in rest if shape_of(b) == (co,)]
    residual = [b for b in rest if shape_of(b) == tuple(ys)]
    products = [b for b in rest if b not in bias and b not in residual]
    if len(bias) > 1 or len(products) != 1 or len(residual) != (1 if "add" in epilogue else 0):
        return None
    chain: list[KernelOp] = []
    mm = _through_reshape(ot, products[0], "graph.matmul", chain)
    if mm is None:
        return None
    chain.append(mm)
    operands = _loaded(mm)
    if len(operands) != 2:
        return None
    u, v = operands
    it = _through_reshape(mm, v, "graph.winograd_input_transform", chain)
    if it is None or _producer(mm, u) is not None:  # (U: a weight, never computed here)
        return None
    chain.append(it)
    xs = _loaded(it)
    if len(xs) != 1 or len(shape_of(xs[0])) != 4:
        return None
    x = xs[0]
    _, c, xh, xw = shape_of(x)
    if (xh, xw) != (h, w) or _pads(it, x) != (1, 1) or shape_of(x)[0] != n:
        return None
    if h % 2 or w % 16 or co % 8 or 16 * (c + co) * (w // 2) > FUSED_MAX_FLOATS:
        return None
    if math.prod(shape_of(u)) != 16 * co * c:
        return None
    # V, M and the reshapes' copies are read by the chain only (the fused kernel keeps
    # them in private memory: what is in the buffers afterwards is not theirs)
    members = {ot, *chain}
    for k in chain:
        for b in _stored(k):
            for use in b.uses:
                user = use.operation
                kernel = user if isinstance(user, KernelOp) else None
                while user is not None and kernel is None:
                    user = user.parent_op()
                    kernel = user if isinstance(user, KernelOp) else None
                if kernel is None and not isinstance(use.operation, memref.DeallocOp):
                    return None
                if kernel is not None and kernel not in members:
                    return None
    spec = FusedSpec(
        x,
        u,
        bias[0] if bias else None,
        residual[0] if residual else None,
        y,
        n,
        c,
        co,
        h,
        w,
        "relu" in epilogue,
    )
    return spec, list(reversed(chain))


def fuse_chain(ot: KernelOp) -> bool:
    """The chain of output transform `ot` in one kernel (module docstring): the other
    kernels' nests moved, in order, to the front of `ot`'s body, their kernels erased,
    deallocations between them and `ot` of buffers the moved nests use moved after it;
    `ot` marked `FUSED`. False (nothing changed) when `fused_spec` says no."""
    found = fused_spec(ot)
    if found is None:
        return False
    _, chain = found
    block = ot.parent_block()
    assert block is not None
    first = ot.block.first_op
    moved_buffers: set[SSAValue] = set()
    for j, k in enumerate(chain):
        for b in _loaded(k) + _stored(k):
            moved_buffers.add(b)
        for lp in (o for o in k.walk() if isinstance(o, ForOp)):  # (names unique in `ot`)
            lp.attributes["name"] = StringAttr(f"w{j}_{lp.loop_name}")
        for op in list(k.block.ops):
            op.detach()
            if first is None:
                ot.block.add_op(op)
            else:
                ot.block.insert_op_before(op, first)
    late: list[Operation] = []
    op = chain[0].next_op
    while op is not None and op is not ot:
        nxt = op.next_op
        if isinstance(op, memref.DeallocOp) and op.memref in moved_buffers:
            op.detach()
            late.append(op)
        op = nxt
    for k in chain:
        k.detach()
        k.erase()
    after = ot
    for d in late:
        block.insert_op_after(d, after)
        after = d
    spec = found[0]
    free = cbe.kernel_uses(ot)[0]
    roles = [("x", spec.x), ("u", spec.u), ("bias", spec.bias), ("residual", spec.residual)]
    where = " ".join(f"{r}={free.index(v) if v is not None else -1}" for r, v in roles)
    ot.attributes[FUSED] = StringAttr(f"fused {where} y={free.index(spec.y)}")
    return True


def is_fused(kernel: KernelOp) -> bool:
    attr = kernel.attributes.get(FUSED)
    return isinstance(attr, StringAttr) and attr.data.startswith("fused")


def fused_spec_of(k: KernelOp) -> FusedSpec:
    """The spec of a kernel `fuse_chain` made (`is_fused`), from its attribute: the
    positions of its buffers among the values it uses from outside."""
    attr = k.attributes[FUSED]
    assert isinstance(attr, StringAttr)
    free = cbe.kernel_uses(k)[0]
    at = {key: int(v) for key, v in (part.split("=") for part in attr.data.split()[1:])}
    role = {key: free[i] if i >= 0 else None for key, i in at.items()}
    x, u, y = role["x"], role["u"], role["y"]
    assert x is not None and u is not None and y is not None
    n, co, h, w = shape_of(y)
    relu = _origin(k).endswith("graph.relu)")
    return FusedSpec(x, u, role["bias"], role["residual"], y, n, shape_of(x)[1], co, h, w, relu)


def fused_source(spec: FusedSpec, p: dict[str, str], ids: tuple[str, str]) -> list[str]:
    """The body lines of the fused kernel: `p` names the parameters (x, u, bias,
    residual, y), `ids` the work-item's image and row of tiles."""
    c, co, h, w = spec.c, spec.co, spec.h, spec.w
    tw = w // 2
    tb = 16 if tw % 16 == 0 else 8  # tiles per gemm block: 2 or 1 float8 per row
    cb = 4 if tb == 16 else 8  # output channels per gemm block (8 float8 accumulators)
    n_, t_ = ids
    x, u, y = p["x"], p["u"], p["y"]
    L = [
        f"  __global const float *xn = {x} + {n_} * {c * h * w}L;",
        f"  float V[16][{c}][{tw}];",
        f"  float M[16][{co}][{tw}];",
        "  /* V: the input transform of this row of tiles, B^T d B, 8 tiles a vector */",
        f"  for (int ci = 0; ci < {c}; ci++) {{",
        f"    __global const float *xc = xn + ci * {h * w};",
        f"    for (int b0 = 0; b0 < {tw}; b0 += 8) {{",
        "      float8 d[4][4];",
        "      #pragma unroll",
        "      for (int i = 0; i < 4; i++) {",
        f"        const long r = 2 * {t_} + i - 1;",
        "        float8 ev = (float8)(0.0f), od = (float8)(0.0f);",
        "        float prev = 0.0f, next = 0.0f;",
        f"        if (r >= 0 && r < {h}) {{",
        f"          __global const float *row = xc + r * {w} + 2 * b0;",
        "          const float16 a = *(__global const dlpc_float16u *)row;",
        "          ev = a.even;",
        "          od = a.odd;",
        "          if (b0 > 0) prev = row[-1];",
        f"          if (2 * b0 + 16 < {w}) next = row[16];",
        "        }",
        "        d[i][0] = (float8)(prev, od.s0, od.s1, od.s2, od.s3, od.s4, od.s5, od.s6);",
        "        d[i][1] = ev;",
        "        d[i][2] = od;",
        "        d[i][3] = (float8)(ev.s1, ev.s2, ev.s3, ev.s4, ev.s5, ev.s6, ev.s7, next);",
        "      }",
        "      #pragma unroll",
        "      for (int j = 0; j < 4; j++) {",
        "        const float8 e0 = d[0][j] - d[2][j], e1 = d[1][j] + d[2][j];",
        "        const float8 e2 = d[2][j] - d[1][j], e3 = d[1][j] - d[3][j];",
        "        d[0][j] = e0; d[1][j] = e1; d[2][j] = e2; d[3][j] = e3;",
        "      }",
        "      #pragma unroll",
        "      for (int a = 0; a < 4; a++) {",
        "        *(float8 *)&V[4 * a + 0][ci][b0] = d[a][0] - d[a][2];",
        "        *(float8 *)&V[4 * a + 1][ci][b0] = d[a][1] + d[a][2];",
        "        *(float8 *)&V[4 * a + 2][ci][b0] = d[a][2] - d[a][1];",
        "        *(float8 *)&V[4 * a + 3][ci][b0] = d[a][1] - d[a][3];",
        "      }",
        "    }",
        "  }",
        f"  /* M[t] = U[t] V[t]: {cb} output channels x {tb} tiles a block */",
        "  for (int t = 0; t < 16; t++) {",
        f"    for (int o0 = 0; o0 < {co}; o0 += {cb}) {{",
        f"      for (int b0 = 0; b0 < {tw}; b0 += {tb}) {{",
        f"        __global const float *ut = {u} + (t * {co} + o0) * {c};",
    ]
    halves = tb // 8
    accs = [(k, hh) for k in range(cb) for hh in range(halves)]
    L.append("        float8 " + ", ".join(f"a{k}_{hh} = (float8)(0.0f)" for k, hh in accs) + ";")
    L += [
        f"        for (int k = 0; k < {c}; k++) {{",
        *(
            f"          const float8 v{hh} = *(float8 *)&V[t][k][b0 + {8 * hh}];"
            for hh in range(halves)
        ),
    ]
    for k in range(cb):
        L.append(f"          const float u{k} = ut[{k * c} + k];")
    for k, hh in accs:
        L.append(f"          a{k}_{hh} += u{k} * v{hh};")
    L.append("        }")
    for k, hh in accs:
        L.append(f"        *(float8 *)&M[t][o0 + {k}][b0 + {8 * hh}] = a{k}_{hh};")
    L += [
        "      }",
        "    }",
        "  }",
        "  /* y: A^T M A, two output rows, and the epilogue */",
        f"  for (int o = 0; o < {co}; o++) {{",
        f"    for (int b0 = 0; b0 < {tw}; b0 += 8) {{",
        "      float8 m[16];",
        "      #pragma unroll",
        "      for (int t = 0; t < 16; t++) m[t] = *(float8 *)&M[t][o][b0];",
        "      float8 r0[4], r1[4];",
        "      #pragma unroll",
        "      for (int j = 0; j < 4; j++) {",
        "        r0[j] = m[j] + (m[4 + j] + m[8 + j]);",
        "        r1[j] = m[4 + j] - (m[8 + j] + m[12 + j]);",
        "      }",
        "      float8 y00 = r0[0] + (r0[1] + r0[2]), y01 = r0[1] - (r0[2] + r0[3]);",
        "      float8 y10 = r1[0] + (r1[1] + r1[2]), y11 = r1[1] - (r1[2] + r1[3]);",
        f"      const long at0 = (({n_} * {co} + o) * {h} + 2 * {t_}) * {w} + 2 * b0;",
        f"      const long at1 = at0 + {w};",
    ]
    if spec.bias is not None:
        L += [
            f"      const float bo = {p['bias']}[o];",
            "      y00 = y00 + bo; y01 = y01 + bo; y10 = y10 + bo; y11 = y11 + bo;",
        ]
    if spec.residual is not None:
        r = p["residual"]
        L += [
            f"      const float16 q0 = *(__global const dlpc_float16u *)({r} + at0);",
            f"      const float16 q1 = *(__global const dlpc_float16u *)({r} + at1);",
            "      y00 = y00 + q0.even; y01 = y01 + q0.odd; y10 = y10 + q1.even; y11 = y11 + q1.odd;",
        ]
    if spec.relu:
        L += [
            "      const float8 z = (float8)(0.0f);",
            "      y00 = DLPC_MAXIMUMF(y00, z); y01 = DLPC_MAXIMUMF(y01, z);",
            "      y10 = DLPC_MAXIMUMF(y10, z); y11 = DLPC_MAXIMUMF(y11, z);",
        ]
    inter = ", ".join(f"{{a}}.s{k}, {{b}}.s{k}" for k in range(8))
    L += [
        f"      *(__global dlpc_float16u *)({y} + at0) = (float16)({inter.format(a='y00', b='y01')});",
        f"      *(__global dlpc_float16u *)({y} + at1) = (float16)({inter.format(a='y10', b='y11')});",
        "    }",
        "  }",
    ]
    return L


def write_fused(emitter, k: KernelOp, chained: bool) -> bool:
    """Write fused kernel `k` (`is_fused`) into `emitter` (an `OpenCLEmitter`): its
    launch (NDRange: images x rows of tiles), its `__kernel` and, when `chained`, its body
    function for chains; False when `k` is no such kernel."""
    from dlpc.backends.opencl import Launch

    if not is_fused(k):
        return False
    spec = fused_spec_of(k)
    fname = emitter.top.fresh(k.sym, kind="kernel")
    names = Scope(emitter.top.used)
    roles = [("x", spec.x), ("u", spec.u), ("bias", spec.bias), ("residual", spec.residual)]
    roles = [(r, v) for r, v in roles if v is not None] + [("y", spec.y)]
    p = {r: names.fresh(v.name_hint, r) for r, v in roles}
    params = [f"__global {'' if r == 'y' else 'const '}float *restrict {p[r]}" for r, _ in roles]
    dims = (spec.n, spec.h // 2)
    loops = [op for op in k.block.ops if isinstance(op, ForOp)][:2]
    # one work-item a work-group: PoCL keeps a work-group's private arrays side by side
    # (its work-item loops), and 32 KB each for a group of the NDRange overflowed the
    # stack (resnet at batch 32, each kernel launched alone: a crash)
    launch = Launch(fname, dims, (1, 1))
    launch.mapped = {lp: f"get_global_id({d})" for d, lp in enumerate(loops)}  # (the ids)
    launch.args = [v for _, v in roles]
    emitter.launches[k] = launch
    ids = (names.fresh("n", "id"), names.fresh("t", "id"))
    body = emitter.top.fresh(f"{k.sym}_body", kind="kernel")
    note = c_comment(
        cbe.kernel_note(k)
        + f": fused Winograd F(2x2, 3x3), global ({dims[0]}, {dims[1]}), local (1, 1)"
    )
    signature = f"static inline void {body}({', '.join(params + [f'const long {i}' for i in ids])})"
    emitter.parts.append(
        f"{note}\n{signature}\n{{\n" + "\n".join(fused_source(spec, p, ids)) + "\n}\n"
    )
    call = [p[r] for r, _ in roles] + [f"(long)get_global_id({d})" for d in range(2)]
    emitter.parts.append(
        f"__kernel void {fname}({', '.join(params)})\n{{\n  {body}({', '.join(call)});\n}}\n"
    )
    if chained and (emitter.groups <= 1 or spec.n % emitter.groups == 0):
        types = [q[len("__global ") :].rsplit(" *restrict ", 1)[0] for q in params]
        emitter.bodies[k] = (body, types, [(v, None) for v in launch.args])
        if emitter.groups > 1:
            emitter.batches[k] = spec.n
    return True


def winograd_nests(module: ModuleOp) -> None:
    """graph-winograd's transform kernels of @main as the OpenCL target writes them best
    (module docstring), in place."""
    for fn in module.body.block.ops:
        if not (isinstance(fn, func.FuncOp) and fn.sym_name.data == "main"):
            continue
        for kernel in [op for op in fn.walk() if isinstance(op, KernelOp)]:
            if _is_output_transform(_origin(kernel)) and FUSED not in kernel.attributes:
                fuse_chain(kernel)
        for kernel in [op for op in fn.walk() if isinstance(op, KernelOp)]:
            origin = _origin(kernel)
            if DONE in kernel.attributes or FUSED in kernel.attributes:
                continue
            if origin == "graph.winograd_input_transform":
                _input_transform(module, kernel)
            elif _is_output_transform(origin):
                _output_transform(module, kernel)
        module.verify()
