"""Matrix products tiled through `__local` memory with register blocking under the GPU
launch plans (`plan_tiled` -> `Launch` with a `Tile`, written by `write_tiled`): the
classic SGEMM scheme, tried by `OpenCLEmitter.kernel` before `plan_gpu_launch`.

Which kernels (`match_product`): a perfect nest of independent output loops (the rows:
every loop but the innermost, collapsed into one row index M; the columns: the
innermost, N) whose innermost body is `acc = 0; for k: acc = acc + A[..] * B[..];` and an
elementwise epilogue after it (bias, relu, clip, add, ... : any ops without regions); A
varies with the rows and k, B with the columns and k, neither with both (no batched
products), every index of both a loop variable or a constant; f32. The loop IR of
`graph.linear` and of a 2-d `graph.matmul`, fused or not.

The kernel: a work-group computes a TM x TN block of outputs, each of its
(TN / RN) x (TM / RM) work-items an RM x RN register block of it, strided by the group's
extent (row `ty + i * TM / RM`, column `tx + j * TN / RN`: consecutive work-items read
consecutive `__local` words and store consecutive outputs). The reduction runs in steps
of TK: the group loads the TM x TK tile of A and the TK x TN tile of B into `__local`
memory, consecutive work-items reading consecutive addresses of each (along the
operand's last index, whichever loop that is), zero past M, N or K; barrier; each
work-item accumulates its block from `__local` memory; barrier. Then the epilogue, the
loop IR's own ops, once per output of the block, guarded by `row < M && col < N`. Each
output sums its products in the loop IR's order, k = 0, 1, ...: the zero-padded steps
add +0.0 (the compiler may contract a product and its sum into one fma, within the
reference's tolerance).

When (`plan_tiled`): both sides at least `MIN_SIDE` (64) and at least `OUTPUTS_PER_UNIT`
(256) outputs per compute unit: a product the device's units can be kept busy on with
one output per work-item (there `plan_gpu_launch` would split each sum over a
work-group instead: mlp's and lenet's linears at any batch up to 32, transformer's
64-feature ones; a product of 32 rows keeps its row lanes). The tile (`TileParams`):
64 x 64 in 4 x 4 blocks (256 work-items, 8 KB of `__local`) when that makes as many
work-groups as the device has compute units, else 32 x 32 in 2 x 2 blocks (256
work-items, more groups: transformer's linears at batch 32 are 96-128 of them on the
H200's 132 units). A caller (a tuner) may pass its own `TileParams`.
`DLPC_OPENCL_TILES=0` in the environment turns the plan off (the programs of
`plan_gpu_launch` alone, to compare).
"""

from __future__ import annotations

import math
import os

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlpc.backends.c import Buffer
from dlpc.backends.opencl.lanes import independent
from dlpc.backends.opencl.launch import Launch, Tile, TileParams
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside, spine
from dlpc.dialects.typed import element_type, shape_of

#: the smallest side (M and N) a tiled product has, and the outputs per compute unit it
#: needs at least (fewer: `plan_gpu_launch`'s split sums or row lanes stay)
MIN_SIDE = 64
OUTPUTS_PER_UNIT = 256


#: the tiles tried, largest first: the first that makes as many work-groups as the
#: device has compute units, else the last
TILES = (TileParams(), TileParams(tm=32, tn=32, tk=16, rm=2, rn=2))


def _plain_index(v: SSAValue, ivs: set) -> bool:
    """Is `v` one of the loop variables `ivs` or an integer constant?"""
    if isinstance(v, BlockArgument):
        return v in ivs
    return isinstance(v.owner, arith.ConstantOp) and isinstance(v.owner.value, IntegerAttr)


def match_product(kernel: KernelOp) -> tuple | None:
    """(rows, column loop, reduction, accumulator, A's load, B's load, epilogue) when
    `kernel` is a matrix product the tiled plan writes (module docstring), else None."""
    loops = spine(kernel)
    if len(loops) < 2:
        return None
    rows, col = tuple(loops[:-1]), loops[-1]
    if any((lp.lower, lp.stride) != (0, 1) or not independent(lp) for lp in loops):
        return None
    ops = list(col.block.ops)
    reds = [op for op in ops if isinstance(op, ForOp)]
    if len(reds) != 1 or any(op.regions for op in ops if op is not reds[0]):
        return None
    red = reds[0]
    if red.reduction is None or (red.lower, red.stride) != (0, 1) or red.trip_count < 1:
        return None
    before, after = ops[: ops.index(red)], ops[ops.index(red) + 1 :]
    if not all(isinstance(o, memref.AllocaOp | arith.ConstantOp | memref.StoreOp) for o in before):
        return None
    body = list(red.block.ops)
    if len(body) != 6:
        return None
    loads = [o for o in body if isinstance(o, memref.LoadOp) and shape_of(o.memref) != ()]
    acc_loads = [o for o in body if isinstance(o, memref.LoadOp) and shape_of(o.memref) == ()]
    mul = [o for o in body if isinstance(o, arith.MulfOp)]
    add = [o for o in body if isinstance(o, arith.AddfOp)]
    store = [o for o in body if isinstance(o, memref.StoreOp)]
    if not (len(loads) == 2 and len(acc_loads) == len(mul) == len(add) == len(store) == 1):
        return None
    acc = acc_loads[0].memref
    (mul_op,), (add_op,), (store_op,) = mul, add, store
    if store_op.memref is not acc or store_op.value is not add_op.result:
        return None
    if {*add_op.operands} != {acc_loads[0].res, mul_op.result} or len(set(add_op.operands)) != 2:
        return None
    if {*mul_op.operands} != {loads[0].res, loads[1].res} or len(set(mul_op.operands)) != 2:
        return None
    f32 = Float32Type()
    if any(element_type(v) != f32 for v in (acc, loads[0].memref, loads[1].memref)):
        return None
    if not defined_inside(acc, col) or defined_inside(acc, red):
        return None
    init = [o for o in before if isinstance(o, memref.StoreOp)]
    if len(init) != 1 or init[0].memref is not acc:
        return None
    zero = init[0].value.owner
    if not isinstance(zero, arith.ConstantOp) or not isinstance(zero.value, FloatAttr):
        return None
    if zero.value.value.data != 0.0:
        return None
    if any(isinstance(o, memref.StoreOp) and o.memref is acc for o in after):
        return None
    k_iv, c_iv = red.induction_var, col.induction_var
    row_ivs = {lp.induction_var for lp in rows}
    ivs = {*row_ivs, c_iv, k_iv}
    a = b = None
    for load in loads:
        indices = list(load.indices)
        if not all(_plain_index(i, ivs) for i in indices) or indices.count(k_iv) != 1:
            return None
        if defined_inside(load.memref, kernel):
            return None
        if c_iv not in indices:
            a = load if a is None else None
        elif not row_ivs & set(indices):
            b = load if b is None else None
    if a is None or b is None:
        return None
    stored = {o.memref for o in kernel.walk() if isinstance(o, memref.StoreOp)}
    if a.memref in stored or b.memref in stored:
        return None
    constants = [o for o in before if isinstance(o, arith.ConstantOp)]  # (pure: the
    # epilogue writes its own copy of those it uses)
    return rows, col, red, acc, a, b, (*constants, *after)


def plan_tiled(
    kernel: KernelOp,
    fname: str,
    profile,
    resident: set[SSAValue] | None = None,
    params: TileParams | None = None,
) -> Launch | None:
    """The tiled launch of `kernel` on a device of `profile` (a `GpuProfile`: its
    largest work-group and compute units) when it is a product the rule of the module
    docstring tiles, else None. `params`: the tile (default: from `TILES`). `resident`
    is unused: the tiles read every operand coalesced as it lies."""
    del resident
    if os.environ.get("DLPC_OPENCL_TILES", "1") == "0":
        return None
    found = match_product(kernel)
    if found is None:
        return None
    rows, col, red, acc, a, b, epilogue = found
    m, n, k = math.prod(lp.trip_count for lp in rows), col.trip_count, red.trip_count
    if min(m, n) < MIN_SIDE or m * n < profile.units * OUTPUTS_PER_UNIT:
        return None
    if params is None:
        params = next(
            (p for p in TILES if -(-m // p.tm) * -(-n // p.tn) >= profile.units), TILES[-1]
        )
    gx, gy = params.group
    if params.tm % params.rm or params.tn % params.rn or gx * gy > profile.max_group:
        return None
    tile = Tile(params, rows, col, red, acc, a, b, epilogue, m, n, k)
    launch = Launch(fname, (-(-n // params.tn) * gx, -(-m // params.tm) * gy), (gx, gy))
    launch.tile = tile
    return launch


def _row_exprs(rows: tuple[ForOp, ...], m: str) -> dict[SSAValue, str]:
    """The row loops' variables as C expressions of the collapsed row index `m`."""
    out: dict[SSAValue, str] = {}
    stride = 1
    for k, lp in reversed(list(enumerate(rows))):
        e = f"({m} / {stride})" if stride > 1 else m
        if lp.trip_count == 1:
            e = "0"
        elif k > 0:
            e = f"({e} % {lp.trip_count})"
        out[lp.induction_var] = f"({e})" if not e.startswith("(") else e
        stride *= lp.trip_count
    return out


def _index(load: memref.LoadOp, known: dict) -> list[str]:
    """The C expressions of `load`'s indices: loop variables by `known`, constants."""
    out = []
    for v in load.indices:
        if isinstance(v, BlockArgument):
            out.append(known[v])
        else:
            assert isinstance(v.owner, arith.ConstantOp)
            value = v.owner.value
            assert isinstance(value, IntegerAttr)
            out.append(str(value.value.data))
    return out


def _constants(kernel: KernelOp, col: ForOp) -> list[Operation]:
    """The constants in the blocks of the spine above `col`'s body (the epilogue may use
    them)."""
    out: list[Operation] = []
    block: Block | None = kernel.block
    while block is not None and block is not col.block:
        out += [op for op in block.ops if isinstance(op, arith.ConstantOp)]
        block = next((op.block for op in block.ops if isinstance(op, ForOp)), None)
    return out


def write_tiled(w, kernel: KernelOp, launch: Launch) -> None:
    """The body of a tiled kernel (module docstring) into `w` (a `KernelWriter` whose
    `buffers` hold the kernel's parameters)."""
    tile = launch.tile
    assert tile is not None
    p = tile.params
    gx, gy = p.group
    m, n, k = tile.m, tile.n, tile.k
    fresh = w.names.fresh
    tx, ty, row0, col0 = fresh("tx"), fresh("ty"), fresh("row0"), fresh("col0")
    a_tile, b_tile, k0 = fresh("a_tile"), fresh("b_tile"), fresh("k0")
    k_iv, c_iv = tile.red.induction_var, tile.col.induction_var
    # a tile whose operand is loaded along k (its last index) is written down its
    # columns: one padding word per row keeps those stores off a single bank
    a_along_k = list(tile.a.indices)[-1] is k_iv
    b_along_k = list(tile.b.indices)[-1] is k_iv
    a_row = p.tm + (1 if a_along_k else 0)
    b_row = p.tn + (1 if b_along_k else 0)
    for op in _constants(kernel, tile.col):
        w.op(op)
    w.line(f"__local float {a_tile}[{p.tk * a_row}];  /* A: [k][row] */")
    w.line(f"__local float {b_tile}[{p.tk * b_row}];  /* B: [k][column] */")
    w.line(f"const int {tx} = (int)get_local_id(0), {ty} = (int)get_local_id(1);")
    w.line(f"const long {row0} = (long)get_group_id(1) * {p.tm};")
    w.line(f"const long {col0} = (long)get_group_id(0) * {p.tn};")
    c = [[fresh(f"c{i}_{j}") for j in range(p.rn)] for i in range(p.rm)]
    w.line("float " + ", ".join(f"{name} = 0.0f" for r in c for name in r) + ";")
    w.line(f"for (long {k0} = 0; {k0} < {k}; {k0} += {p.tk}) {{")
    w.depth += 1
    for load, stage, row, along_k, side, base, extent in (
        (tile.a, a_tile, a_row, a_along_k, p.tm, row0, m),
        (tile.b, b_tile, b_row, b_along_k, p.tn, col0, n),
    ):
        t, kk, mm = fresh("t"), fresh("kk"), fresh("mm")
        w.line(f"for (int {t} = {ty} * {gx} + {tx}; {t} < {p.tk * side}; {t} += {gx * gy}) {{")
        w.depth += 1
        if along_k:  # consecutive work-items: consecutive k
            w.line(f"const int {kk} = {t} % {p.tk}, {mm} = {t} / {p.tk};")
        else:
            w.line(f"const int {mm} = {t} % {side}, {kk} = {t} / {side};")
        kx, mx = fresh("k"), fresh("at")
        w.line(f"const long {kx} = {k0} + {kk}, {mx} = {base} + {mm};")
        known: dict[SSAValue, str] = {k_iv: kx}
        if load is tile.a:
            known.update(_row_exprs(tile.rows, mx))
        else:
            known[c_iv] = mx
        where = w.buffers[load.memref].at(_index(load, known))
        w.line(f"{stage}[{kk} * {row} + {mm}] = ({mx} < {extent} && {kx} < {k}) ? {where} : 0.0f;")
        w.depth -= 1
        w.line("}")
    w.line("barrier(CLK_LOCAL_MEM_FENCE);")
    kk = fresh("kk")
    w.line(f"for (int {kk} = 0; {kk} < {p.tk}; {kk}++) {{")
    w.depth += 1
    av = [fresh(f"a{i}") for i in range(p.rm)]
    bv = [fresh(f"b{j}") for j in range(p.rn)]
    for i, name in enumerate(av):
        w.line(
            f"const float {name} = {a_tile}[{kk} * {a_row} + {ty}{f' + {i * gy}' if i else ''}];"
        )
    for j, name in enumerate(bv):
        w.line(
            f"const float {name} = {b_tile}[{kk} * {b_row} + {tx}{f' + {j * gx}' if j else ''}];"
        )
    for i in range(p.rm):
        for j in range(p.rn):
            w.line(f"{c[i][j]} = {c[i][j]} + {av[i]} * {bv[j]};")
    w.depth -= 1
    w.line("}")
    w.line("barrier(CLK_LOCAL_MEM_FENCE);")
    w.depth -= 1
    w.line("}")
    for i in range(p.rm):  # the epilogue, the loop IR's ops, per output of the block
        for j in range(p.rn):
            r, cl = fresh("row"), fresh("col")
            at_r = f"{row0} + {ty}" + (f" + {i * gy}" if i else "")
            at_c = f"{col0} + {tx}" + (f" + {j * gx}" if j else "")
            w.line(f"const long {r} = {at_r}, {cl} = {at_c};")
            w.line(f"if ({r} < {m} && {cl} < {n}) {{")
            w.depth += 1
            for iv, e in _row_exprs(tile.rows, r).items():
                w.expr[iv] = e
            w.expr[c_iv] = cl
            w.buffers[tile.acc] = Buffer(c[i][j], (), scalar=True)
            for op in tile.epilogue:
                w.op(op)
            w.depth -= 1
            w.line("}")
