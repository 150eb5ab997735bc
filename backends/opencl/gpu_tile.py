"""Matrix products tiled through `__local` memory with register blocking under the GPU
launch plans (`plan_tiled` -> `Launch` with a `Tile`, written by `write_tiled`): the
classic SGEMM scheme, tried by `OpenCLEmitter.kernel` before `plan_gpu_launch`.

Which kernels (`match_product`): a perfect nest of independent output loops whose
innermost body is `acc = 0; for k: acc = acc + A[..] * B[..];` (the reduction may hold
extent-1 loops) and an elementwise epilogue after it (bias, relu, clip, add, ...: any
ops without regions); f32. The columns are the output loops B's indices use (B: the load
the innermost loop indexes), collapsed into one index N; the rows the others (A's),
collapsed into M; a loop both loads use is a batched product (refused). Every index is
loop variables and constants under `INDEX_OPS`. The loop IR of `graph.linear`, of a 2-d
`graph.matmul` and of a 1x1 `graph.conv2d` (A = W[co, ci, 0, 0], B = the input: columns
images x rows x columns, k the input channels), fused or not.

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
(256) outputs per compute unit, that is a product whose outputs alone fill the device
(with fewer `plan_gpu_launch` splits each sum over a work-group: mlp's and lenet's
linears at any batch up to 32, transformer's 64-feature ones; a product of fewer than 64
rows keeps its row lanes). On an H200 that tiles transformer's linear_0 and
linear_gelu_2 at batch 32 and mobilenet's pointwise conv at batch 1 and 32. The tile
(`TileParams`): 64 x 64 in 4 x 4 blocks (256 work-items, 8 KB of `__local`) when that
makes as many work-groups as the device has compute units, else 32 x 32 in 2 x 2 blocks
(256 work-items, 4 times the groups: transformer's two at batch 32 make 96 and 64 of
them for the H200's 132 units). A caller (a tuner) may pass its own `TileParams`.
`DLPC_OPENCL_TILES=0` in the environment turns the plan off (the programs of
`plan_gpu_launch` alone), `DLPC_OPENCL_TILES=all` tiles every product it recognises
whatever its size: the three, timed on a GPU, check the rule (another value: a one-line
`DlpcError`).
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlpc import settings
from dlpc.backends.c import Buffer
from dlpc.backends.opencl.lanes import independent
from dlpc.backends.opencl.launch import Launch, Tile, TileParams
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import ForOp, KernelOp, defined_inside, spine
from dlpc.dialects.typed import element_type, shape_of

#: the smallest side (M and N) a tiled product has, and the outputs per compute unit it
#: needs at least (fewer: `plan_gpu_launch`'s split sums or row lanes stay)
MIN_SIDE = 64
OUTPUTS_PER_UNIT = 256


#: DLPC_OPENCL_TILES's values: unset, empty or 1 (the rule), 0 (none), all (every product)
TILE_MODES = ("", "1", "0", "all")

#: the tiles tried, largest first: the first that makes as many work-groups as the
#: device has compute units, else the last
TILES = (TileParams(), TileParams(tm=32, tn=32, tk=16, rm=2, rn=2))


#: index arithmetic a product's loads may compute their indices with
INDEX_OPS = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}


def _index_expr(v: SSAValue, known: dict[SSAValue, str]) -> str | None:
    """`v` (an index) as a C expression of the loop variables `known` names: integer
    constants and `INDEX_OPS` on them; None when it is anything else."""
    if isinstance(v, BlockArgument):
        return known.get(v)
    op = v.owner
    assert isinstance(op, Operation)
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return str(op.value.value.data)
    if op.name not in INDEX_OPS or len(op.operands) != 2:
        return None
    a, b = (_index_expr(x, known) for x in op.operands)
    if a is None or b is None:
        return None
    if b == "0" and op.name != "arith.muli" or b == "1" and op.name == "arith.muli":
        return a  # (an extent-1 loop's variable: a 1x1 conv's kernel offsets)
    if a == "0" and op.name == "arith.addi":
        return b
    return f"({a} {INDEX_OPS[op.name]} {b})"


def _loops_of(v: SSAValue) -> set[SSAValue]:
    """The loop variables (block arguments) index `v` is computed from."""
    if isinstance(v, BlockArgument):
        return {v}
    assert isinstance(v.owner, Operation)
    return {u for x in v.owner.operands for u in _loops_of(x)}


def match_product(kernel: KernelOp) -> tuple | None:
    """(rows, columns, reduction, its extent-1 inner loops, accumulator, A's load, B's
    load, epilogue) when `kernel` is a matrix product the tiled plan writes (module
    docstring), else None. The columns: the output loops B's indices use, the innermost
    among them; the rows: the others (A's; a loop neither load uses goes with them)."""
    loops = spine(kernel)
    if len(loops) < 2:
        return None
    if any((lp.lower, lp.stride) != (0, 1) or not independent(lp) for lp in loops):
        return None
    ops = list(loops[-1].block.ops)
    reds = [op for op in ops if isinstance(op, ForOp)]
    if len(reds) != 1 or any(op.regions for op in ops if op is not reds[0]):
        return None
    red = reds[0]
    inner: list[ForOp] = []  # a 1x1 conv's kernel rows and columns: r1, r2 of one step
    body_loop = red
    while True:
        nested = list(body_loop.block.ops)
        if len(nested) != 1 or not isinstance(nested[0], ForOp):
            break
        body_loop = nested[0]
        if body_loop.reduction is None or (body_loop.lower, body_loop.upper) != (0, 1):
            return None
        inner.append(body_loop)
    if red.reduction is None or (red.lower, red.stride) != (0, 1):
        return None
    before, after = ops[: ops.index(red)], ops[ops.index(red) + 1 :]
    if not all(isinstance(o, memref.AllocaOp | arith.ConstantOp | memref.StoreOp) for o in before):
        return None
    body = list(body_loop.block.ops)
    loads = [o for o in body if isinstance(o, memref.LoadOp) and shape_of(o.memref) != ()]
    acc_loads = [o for o in body if isinstance(o, memref.LoadOp) and shape_of(o.memref) == ()]
    mul = [o for o in body if isinstance(o, arith.MulfOp)]
    add = [o for o in body if isinstance(o, arith.AddfOp)]
    store = [o for o in body if isinstance(o, memref.StoreOp)]
    if not (len(loads) == 2 and len(acc_loads) == len(mul) == len(add) == len(store) == 1):
        return None
    index_ops = [o for o in body if o.name in INDEX_OPS or isinstance(o, arith.ConstantOp)]
    if len(body) != 6 + len(index_ops):
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
    if not defined_inside(acc, loops[-1]) or defined_inside(acc, red):
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
    k_iv = red.induction_var
    names: dict[SSAValue, str] = {lp.induction_var: "i" for lp in (*loops, red, *inner)}
    uses = []
    for load in loads:
        if defined_inside(load.memref, kernel):
            return None
        if any(_index_expr(i, names) is None for i in load.indices):
            return None
        used = {u for i in load.indices for u in _loops_of(i)}
        if k_iv not in used:
            return None
        uses.append(used)
    col = loops[-1].induction_var
    if (col in uses[0]) == (col in uses[1]):
        return None  # (the innermost loop: columns of one operand, B)
    b, a = (1, 0) if col in uses[1] else (0, 1)
    rows = tuple(lp for lp in loops if lp.induction_var not in uses[b])
    cols = tuple(lp for lp in loops if lp.induction_var in uses[b])
    if any(lp.induction_var in uses[a] for lp in cols):
        return None  # (a loop of both: a batched product)
    stored = {o.memref for o in kernel.walk() if isinstance(o, memref.StoreOp)}
    if loads[0].memref in stored or loads[1].memref in stored:
        return None
    constants = [o for o in before if isinstance(o, arith.ConstantOp)]  # (pure: the
    # epilogue writes its own copy of those it uses)
    epilogue = (*constants, *after)
    return rows, cols, red, tuple(inner), acc, loads[a], loads[b], epilogue


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
    mode = settings.get("DLPC_OPENCL_TILES")
    if mode not in TILE_MODES:
        raise DlpcError(
            f"error: opencl: DLPC_OPENCL_TILES={mode!r} is no tiling mode (0, 1 or all)"
        )
    if mode == "0":
        return None
    found = match_product(kernel)
    if found is None:
        return None
    rows, cols, red, inner, acc, a, b, epilogue = found
    m, n = math.prod(lp.trip_count for lp in rows), math.prod(lp.trip_count for lp in cols)
    k = red.trip_count
    if mode != "all" and (min(m, n) < MIN_SIDE or m * n < profile.units * OUTPUTS_PER_UNIT):
        return None
    if params is None:
        params = next(
            (p for p in TILES if -(-m // p.tm) * -(-n // p.tn) >= profile.units), TILES[-1]
        )
    gx, gy = params.group
    if params.tm % params.rm or params.tn % params.rn or gx * gy > profile.max_group:
        return None
    tile = Tile(params, rows, cols, red, inner, acc, a, b, epilogue, m, n, k)
    launch = Launch(fname, (-(-n // params.tn) * gx, -(-m // params.tm) * gy), (gx, gy))
    launch.tile = tile
    return launch


def _split_index(loops: tuple[ForOp, ...], flat: str) -> dict[SSAValue, str]:
    """The variables of `loops` (outermost first) as C expressions of their collapsed
    index `flat` (the innermost varying fastest); an extent-1 loop's is 0."""
    out: dict[SSAValue, str] = {}
    stride = 1
    for k, lp in reversed(list(enumerate(loops))):
        e = f"({flat} / {stride})" if stride > 1 else flat
        if lp.trip_count == 1:
            e = "0"
        elif k > 0 and any(q.trip_count > 1 for q in loops[:k]):
            e = f"({e} % {lp.trip_count})"
        out[lp.induction_var] = e
        stride *= lp.trip_count
    return out


def _along_k(load: memref.LoadOp, tile: Tile) -> bool:
    """Are `load`'s consecutive elements along k? Its last index that varies over the
    tile (not with extent-1 loops and constants alone) depends on the reduction."""
    one = {lp.induction_var for lp in (*tile.rows, *tile.cols, *tile.inner) if lp.trip_count == 1}
    for index in reversed(list(load.indices)):
        loops = _loops_of(index)
        if loops - one:
            return tile.red.induction_var in loops
    return False


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
    k_iv = tile.red.induction_var
    a_along_k, b_along_k = _along_k(tile.a, tile), _along_k(tile.b, tile)
    # a tile whose operand is loaded along k is written down its columns: one padding
    # word per row keeps those stores off a single bank
    a_row = p.tm + (1 if a_along_k else 0)
    b_row = p.tn + (1 if b_along_k else 0)
    for op in _constants(kernel, tile.cols[-1]):
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
        known: dict[SSAValue, str] = {k_iv: kx, **{lp.induction_var: "0" for lp in tile.inner}}
        known.update(_split_index(tile.rows if load is tile.a else tile.cols, mx))
        indices = [_index_expr(i, known) for i in load.indices]
        where = w.buffers[load.memref].at(indices)
        w.line(f"{stage}[{kk} * {row} + {mm}] = ({mx} < {extent} && {kx} < {k}) ? {where} : 0.0f;")
        w.depth -= 1
        w.line("}")
    w.line("barrier(CLK_LOCAL_MEM_FENCE);")
    kk = fresh("kk")
    w.line("#pragma unroll")
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
            for iv, e in (
                *_split_index(tile.rows, r).items(),
                *_split_index(tile.cols, cl).items(),
            ):
                w.expr[iv] = e
            w.buffers[tile.acc] = Buffer(c[i][j], (), scalar=True)
            for op in tile.epilogue:
                w.op(op)
            w.depth -= 1
            w.line("}")
