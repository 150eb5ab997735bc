"""Matrix products tiled through `__local` memory with register blocking under the GPU
launch plans (`plan_tiled` -> `Launch` with a `Tile`, written by `write_tiled`): the
classic SGEMM scheme, tried by `OpenCLEmitter.kernel` before `plan_gpu_launch`; a KxK
conv is one as an implicit GEMM.

Which kernels (`match_product`): a perfect nest of independent output loops whose
innermost body is `acc = 0; for k..: acc = acc + A * B;` (k: a perfect nest of
reduction loops) and an elementwise epilogue after it (bias, relu, clip, add, ...: any
ops without regions); f32. A and B are the factors: each the loop IR's ops computing it
from the loop variables (arithmetic, loads of buffers the kernel does not write, an
`scf.if` yielding a load or the padding: `_pure`). The columns are the output loops B
uses (B: the factor the innermost loop indexes), collapsed into one index N; the rows
the others (A's), collapsed into M; k the reduction nest flattened, its last loop
fastest, K its iterations; the loops both factors use are the batch (`Tile.batch`).
`graph.linear`, a `graph.matmul` and a 1x1 `graph.conv2d` (A = W[co, ci, 0, 0], B = the
input: columns images x rows x columns, k the input channels) are plain products: each
factor one load whose indices `_index_expr` prints. A batched `graph.matmul` (rank 3 or
4: attention's Q K^T, P V) has batch loops: NDRange dimension 2 is them collapsed, each
work-group one tile of one batch's product (`get_group_id(2)`, groups of one along
it); same tiles, blocks and epilogue as a 2-d product. A batch dimension one operand
broadcasts (extent 1 there) indexes the other alone, so it is that one's rows or
columns (a plain product of B x M rows); transposed operands are the loads' index
order (each tile is loaded along its operand's last index, whichever loop that is). A
loop of both factors in an implicit GEMM (a grouped or depthwise conv) is refused.
A KxK `graph.conv2d` (strided, padded, dilated) is an implicit GEMM (`Tile.implicit`):
rows the output channels, columns images x output rows x output columns (or the other
way round where the output keeps its channels last, lenet's), k input channels x kernel
rows x kernel columns; its input read through the loop IR's own index arithmetic and
padding guard. Fused or not.

The kernel: a work-group computes a TM x TN block of outputs, each of its
(TN / RN) x (TM / RM) work-items an RM x RN register block of it, strided by the group's
extent (row `ty + i * TM / RM`, column `tx + j * TN / RN`: consecutive work-items read
consecutive `__local` words and store consecutive outputs). The reduction runs in steps
of TK: the group loads the TM x TK tile of A and the TK x TN tile of B into `__local`
memory, consecutive work-items reading consecutive addresses of each (along the
operand's last index that varies over the tile, whichever loop that is: a batch loop is
fixed in a group), zero past M, N or K; barrier; each
work-item accumulates its block from `__local` memory; barrier. An implicit GEMM's
tile element for (k, column) is the loop IR's ops for its factor (`_load_implicit`) with
the output and reduction loops' variables split from the column and k by `/` and `%`
(as ints): the same value as the loop IR's, the guard's padding included; a factor
whose consecutive elements run along its output loops (a conv's input) splits its
column once before the steps. Then the epilogue, the loop IR's own ops, once per output
of the block, guarded by `row < M && col < N`. Each output sums its products in the
loop IR's order, k = 0, 1, ...: the zero-padded steps add +0.0 (the compiler may
contract a product and its sum into one fma, within the reference's tolerance).

When (`plan_tiled`): both sides at least `MIN_SIDE` (64) and at least `OUTPUTS_PER_UNIT`
(256) outputs per compute unit (a batched product's: all its batches' outputs, groups
counted over the batches too), that is a product whose outputs alone fill the device
(with fewer `plan_gpu_launch` splits each sum over a work-group: mlp's and lenet's
linears at any batch up to 32, transformer's 64-feature ones; a product of fewer than 64
rows keeps its row lanes). On an H200 that tiles transformer's linear_0 and
linear_gelu_2 at batch 32 and mobilenet's pointwise conv at batch 1 and 32. The tile
(`TileParams`): 64 x 64 in 4 x 4 blocks (256 work-items, 8 KB of `__local`) when that
makes as many work-groups as the device has compute units, else 32 x 32 in 2 x 2 blocks
(256 work-items, 4 times the groups: transformer's two at batch 32 make 96 and 64 of
them for the H200's 132 units). Transformer's batched matmuls (16 x 16 a head, K 16)
are under `MIN_SIDE`: untiled by the rule at any batch. Only tiles whose two `__local`
tiles fit the device's local memory are taken (`GpuProfile.local_mem_size`,
`tile_local_bytes`: 8320 bytes for 64 x 64, 4224 for 32 x 32, at most 10368 for the
narrow ones; an H200 has 48 KB, OpenCL guarantees 32): on a smaller one the next
tile, or none (the plain plan). A caller (a tuner) may pass its own `TileParams`, refused
as well where it does not fit.

A conv's implicit GEMM has as few rows as output channels (resnet's 16 and 32), under
`MIN_SIDE`, but long sums (K = 9 x input channels) and many columns: a 64-row tile would
be a quarter or half padding, and the untiled plan (one output a work-item) reads each
input from global memory once per output channel and tap, through the caches. Such a conv (`implicit`, smaller side 16 to 63)
tiles from `CONV_OUTPUTS_PER_UNIT` (512) outputs a unit on, half a group of its smallest
tile (1024 outputs) per unit: fewer leave most of the H200's units idle in a tiled
plan. Its tile (`NARROW_TILES`) holds the small side whole, 16 (up to 16) or 32, and the
other long, 256 work-items each: 16 x 128 in 2 x 4 blocks or 16 x 64 in 1 x 4; 32 x 128
in 4 x 4, 32 x 64 in 2 x 4 or 32 x 32 in 2 x 2; the first that makes as many groups as
units, else the last. Each B element loaded (its index arithmetic and guard: the
loader's cost) serves TM products, each A element TN. On an H200: resnet at batch 32
tiles its five 3x3 convs, the 16-channel ones (16 x 32768 outputs, K 27 and 144) in
16 x 128 tiles (256 groups), the 32-channel ones (32 x 8192, K 144 and 288) in
32 x 32 (256 groups; 32 x 64 would make 128, under 132); at batch 1 none (16384 and
8192 outputs: under 512 a unit); lenet's convs at neither batch (6 channels; 16 x 3200
outputs at batch 32: under 512 a unit); mobilenet's depthwise conv never (a grouped
conv). A 1x1 conv of fewer than 64 channels (resnet's shortcut) stays untiled: one step
of TK covers its K = 16, little to reuse.

`DLPC_OPENCL_TILES=0` in the environment turns the plan off (the programs of
`plan_gpu_launch` alone), `DLPC_OPENCL_TILES=all` tiles every product it recognises
whatever its size: the three, timed on a GPU, check the rule (another value: a one-line
`DlpcError`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr, MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlpc import settings
from dlpc.backends.c import Buffer
from dlpc.backends.opencl.gpu_launch import tile_local_bytes
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

#: a conv's window (an implicit GEMM) whose smaller side (its output channels) is under
#: MIN_SIDE tiles from CONV_MIN_SIDE on, with CONV_OUTPUTS_PER_UNIT outputs a unit at
#: least (half a group of its smallest tile)
CONV_MIN_SIDE = 16
CONV_OUTPUTS_PER_UNIT = 512

#: an implicit GEMM's M, N and K are below this (its tiles split their indices as ints)
INDEX_LIMIT = 2**31

#: the tiles of such a conv by its smaller side (16: up to 16, else 32), that side
#: whole in one tile and the other long, 256 work-items of 4 to 16 outputs each; tried
#: as `TILES` are, largest first (`_narrow_tiles` turns them when the columns are few)
NARROW_TILES = {
    16: (TileParams(16, 128, 16, 2, 4), TileParams(16, 64, 16, 1, 4)),
    32: (
        TileParams(32, 128, 16, 4, 4),
        TileParams(32, 64, 16, 2, 4),
        TileParams(32, 32, 16, 2, 2),
    ),
}


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


def _pure(op: Operation) -> bool:
    """May `op` compute an operand's value (a tile reads it anywhere, any number of
    times)? Arithmetic, a load of a non-0-d buffer, an `scf.if` of such ops (a conv's
    padding guard) and its yields."""
    if isinstance(op, memref.LoadOp):
        return shape_of(op.memref) != ()
    if isinstance(op, scf.IfOp | scf.YieldOp):
        return all(_pure(o) for o in op.walk() if o is not op)
    return op.name.startswith("arith.") and not op.regions


def _free_operands(op: Operation) -> list[SSAValue]:
    """The values `op` and the ops in its regions use that are defined outside it."""
    return [v for o in op.walk() for v in o.operands if o is op or not defined_inside(v, op)]


def _operand(
    value: SSAValue, body: list[Operation], ivs: set[SSAValue], kernel: KernelOp
) -> tuple[tuple[Operation, ...], set[SSAValue]] | None:
    """The ops computing `value` (a factor of the product) from the loop variables
    `ivs`: the constants outside `body` it uses, then its ops of `body` in order (the
    last one yields `value`); and the loop variables it uses. None when it uses another
    value of the kernel or an op that is not `_pure`."""
    inside = set(body)
    needed: set[Operation] = set()
    constants: list[Operation] = []
    used: set[SSAValue] = set()
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in ivs:
            used.add(v)
            continue
        if not defined_inside(v, kernel):  # (a buffer of @main)
            if not isinstance(v.type, MemRefType):
                return None
            continue
        op = v.owner
        if isinstance(op, arith.ConstantOp) and op not in inside:
            constants.append(op)
        elif isinstance(op, Operation) and op in inside and _pure(op):
            if op not in needed:
                needed.add(op)
                stack += _free_operands(op)
        else:
            return None
    return (*constants, *(op for op in body if op in needed)), used


def _main_load(ops: tuple[Operation, ...]) -> memref.LoadOp | None:
    """The last load among `ops` and their regions (a guarded operand's: the one under
    its `scf.if`)."""
    loads = [o for op in ops for o in op.walk() if isinstance(o, memref.LoadOp)]
    return loads[-1] if loads else None


def _plain(ops: tuple[Operation, ...], names: dict[SSAValue, str]) -> bool:
    """Is an operand computed by `ops` one load whose indices `_index_expr` prints (a
    linear's, a matmul's, a 1x1 conv's)?"""
    *index, load = ops
    return (
        isinstance(load, memref.LoadOp)
        and all(o.name in INDEX_OPS or isinstance(o, arith.ConstantOp) for o in index)
        and all(_index_expr(i, names) is not None for i in load.indices)
    )


def match_product(kernel: KernelOp) -> Tile | None:
    """The matrix product `kernel` is, when it is one the tiled plan writes (module
    docstring), as a `Tile` of the default `TileParams` (`plan_tiled` sets its own), else
    None. The columns: the output loops B uses, the innermost among them; the rows: the
    others (A's; a loop neither operand uses goes with them)."""
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
    inner: list[ForOp] = []  # the reduction nest's inner loops: a conv's kernel rows, columns
    body_loop = red
    while True:
        nested = list(body_loop.block.ops)
        if len(nested) != 1 or not isinstance(nested[0], ForOp):
            break
        body_loop = nested[0]
        inner.append(body_loop)
    nest = (red, *inner)
    if any(lp.reduction is None or (lp.lower, lp.stride) != (0, 1) for lp in nest):
        return None
    before, after = ops[: ops.index(red)], ops[ops.index(red) + 1 :]
    if not all(isinstance(o, memref.AllocaOp | arith.ConstantOp | memref.StoreOp) for o in before):
        return None
    body = list(body_loop.block.ops)
    store = [o for o in body if isinstance(o, memref.StoreOp)]
    if len(store) != 1 or shape_of(store[0].memref) != ():
        return None
    (store_op,) = store
    acc = store_op.memref
    add_op = store_op.value.owner
    if not isinstance(add_op, arith.AddfOp) or add_op not in body:
        return None
    acc_loads = [o for o in body if isinstance(o, memref.LoadOp) and o.memref is acc]
    if len(acc_loads) != 1 or len(set(add_op.operands)) != 2:
        return None
    mul_op = next((v.owner for v in add_op.operands if v is not acc_loads[0].res), None)
    if {*add_op.operands} != {acc_loads[0].res, getattr(mul_op, "result", None)}:
        return None
    if not isinstance(mul_op, arith.MulfOp) or mul_op not in body:
        return None
    if len(set(mul_op.operands)) != 2:
        return None
    f32 = Float32Type()
    if element_type(acc) != f32 or any(v.type != f32 for v in mul_op.operands):
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
    ivs: set[SSAValue] = {lp.induction_var for lp in (*loops, *nest)}
    reduction = {lp.induction_var for lp in nest}
    first, second = (_operand(v, body, ivs, kernel) for v in mul_op.operands)
    if first is None or second is None:
        return None
    chain = {acc_loads[0], mul_op, add_op, store_op}
    if any(
        o not in chain and o not in first[0] and o not in second[0]
        for o in body
        if not isinstance(o, arith.ConstantOp)
    ):
        return None  # (an op of the body neither factor needs)
    stored = {o.memref for o in kernel.walk() if isinstance(o, memref.StoreOp)}
    for operand_ops, used in (first, second):
        loaded = [o for op in operand_ops for o in op.walk() if isinstance(o, memref.LoadOp)]
        if not loaded or not used & reduction:
            return None
        if any(o.memref in stored or defined_inside(o.memref, kernel) for o in loaded):
            return None
    col = loops[-1].induction_var
    if (col in first[1]) == (col in second[1]):
        return None  # (the innermost loop: columns of one operand, B)
    (a_ops, a_uses), (b_ops, b_uses) = (second, first) if col in first[1] else (first, second)
    batch = tuple(lp for lp in loops if lp.induction_var in a_uses and lp.induction_var in b_uses)
    rows = tuple(lp for lp in loops if lp.induction_var not in b_uses)
    cols = tuple(lp for lp in loops if lp.induction_var in b_uses and lp not in batch)
    a_load, b_load = _main_load(a_ops), _main_load(b_ops)
    assert a_load is not None and b_load is not None
    names: dict[SSAValue, str] = dict.fromkeys(ivs, "i")
    implicit = any(lp.trip_count > 1 for lp in inner) or not (
        _plain(a_ops, names) and _plain(b_ops, names)
    )
    if batch and implicit:
        return None  # (a loop of both in a conv's window: a grouped or depthwise conv)
    constants = [o for o in before if isinstance(o, arith.ConstantOp)]  # (pure: the
    # epilogue writes its own copy of those it uses)
    m, n = math.prod(lp.trip_count for lp in rows), math.prod(lp.trip_count for lp in cols)
    k = math.prod(lp.trip_count for lp in nest)
    epilogue = (*constants, *after)
    return Tile(
        TileParams(),
        rows,
        cols,
        red,
        tuple(inner),
        acc,
        a_load,
        b_load,
        epilogue,
        m,
        n,
        k,
        a_ops,
        b_ops,
        implicit,
        batch,
    )


def _narrow_tiles(m: int, n: int) -> tuple[TileParams, ...]:
    """`NARROW_TILES` for a product of `m` x `n` outputs whose smaller side is under
    `MIN_SIDE`: that side's (16 up to 16, else 32), turned so it lies along that side."""
    tiles = NARROW_TILES[16 if min(m, n) <= 16 else 32]
    if m <= n:
        return tiles
    return tuple(TileParams(p.tn, p.tm, p.tk, p.rn, p.rm) for p in tiles)


def plan_tiled(
    kernel: KernelOp,
    fname: str,
    profile,
    resident: set[SSAValue] | None = None,
    params: TileParams | None = None,
    force: bool = False,
) -> Launch | None:
    """The tiled launch of `kernel` on a device of `profile` (a `GpuProfile`: its
    largest work-group, compute units and local memory) when it is a product the rule of
    the module docstring tiles (or any product it recognises, with `force`: a tuning
    record's tile), else None. `params`: the tile (default: from `TILES`, or
    `NARROW_TILES` for a narrow conv, those whose `__local` tiles fit the device's local
    memory; None where none, or `params`, does not). `resident` is unused: the tiles
    read every operand coalesced as it lies. `DLPC_OPENCL_TILES=0` turns every tile
    off, forced ones too."""
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
    m, n, batches = found.m, found.n, found.batches
    outputs = batches * m * n
    if found.implicit and max(m, n, found.k) >= INDEX_LIMIT:
        return None  # (its tiles' indices are ints)
    if found.implicit and min(m, n) < MIN_SIDE:  # (a conv's few output channels)
        tiles = _narrow_tiles(m, n)
        wanted = min(m, n) >= CONV_MIN_SIDE and outputs >= profile.units * CONV_OUTPUTS_PER_UNIT
    else:
        tiles = TILES
        wanted = min(m, n) >= MIN_SIDE and outputs >= profile.units * OUTPUTS_PER_UNIT
    if mode != "all" and not wanted and not force:
        return None
    if params is None:
        tiles = tuple(p for p in tiles if tile_local_bytes(p) <= profile.local_mem_size)
        if not tiles:
            return None
        params = next(
            (p for p in tiles if batches * -(-m // p.tm) * -(-n // p.tn) >= profile.units),
            tiles[-1],
        )
    gx, gy = params.group
    if params.tm % params.rm or params.tn % params.rn or gx * gy > profile.max_group:
        return None
    if tile_local_bytes(params) > profile.local_mem_size:
        return None
    tile = replace(found, params=params)
    sizes = (-(-n // params.tn) * gx, -(-m // params.tm) * gy)
    if batches > 1:  # (dimension 2: one group a batch)
        launch = Launch(fname, (*sizes, batches), (gx, gy, 1))
    else:
        launch = Launch(fname, sizes, (gx, gy))
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
    tile (not with extent-1 loops, batch loops and constants alone) depends on the
    reduction."""
    one = {lp.induction_var for lp in (*tile.rows, *tile.cols, *tile.inner) if lp.trip_count == 1}
    if tile.batch:  # (one batch a group: constant over the tile)
        one |= {lp.induction_var for lp in tile.batch}
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


@dataclass
class _Operand:
    """One factor as `write_tiled` loads it: its last load and its ops (`Tile`), its
    output loops, its `__local` tile and that tile's row length, whether consecutive
    work-items load it along k, the tile's side (TM or TN), the first output index of
    the group's tile, the extent (M or N); an implicit GEMM's output index when split
    once before the steps (`mm`, `at`: C names), else empty."""

    load: memref.LoadOp
    ops: tuple[Operation, ...]
    loops: tuple[ForOp, ...]
    stage: str
    row: int
    along_k: bool
    side: int
    base: str
    extent: int
    mm: str = ""
    at: str = ""


def _runs_along_k(load: memref.LoadOp, loops: tuple[ForOp, ...], tile: Tile) -> bool:
    """Are an implicit GEMM's factor's consecutive elements along k? The last index of
    its `load` that varies over the tile varies with the reduction nest alone (a conv's
    weight, [co, ci, kh, kw]), not with the factor's output loops too (its input: the
    output columns and the kernel's columns both move along a row; consecutive outputs
    read the longer run)."""
    nest = {lp.induction_var for lp in (tile.red, *tile.inner) if lp.trip_count > 1}
    varying = nest | {lp.induction_var for lp in loops if lp.trip_count > 1}
    for index in reversed(list(load.indices)):
        used = _loops_of(index) & varying
        if used:
            return used <= nest
    return False


def _ivs_of(ops: tuple[Operation, ...]) -> set[SSAValue]:
    """The block arguments (loop variables) `ops` and the ops in their regions use."""
    return {v for op in ops for v in _free_operands(op) if isinstance(v, BlockArgument)}


def _bind_loops(w, loops: tuple[ForOp, ...], flat: str, used: set[SSAValue]) -> None:
    """The variables of `loops` that `used` holds, as `_split_index` of `flat`: each a
    `const int` of the loop's name in `w` (an extent-1 loop's is 0; `INDEX_LIMIT`: 32-bit
    divisions, cheaper on a GPU than 64-bit ones)."""
    split = _split_index(loops, flat)
    for lp in loops:
        iv, e = lp.induction_var, split[lp.induction_var]
        if iv not in used:
            continue
        if e in ("0", flat):
            w.expr[iv] = e
            continue
        name = w.names.fresh(lp.loop_name or iv.name_hint, "i")
        w.line(f"const int {name} = {e};")
        w.expr[iv] = name


def _load_implicit(w, tile: Tile, x: _Operand, k0: str, lid: str) -> None:
    """One step's `__local` tile of an implicit GEMM's factor `x` (at reduction index
    `k0` on): each element the loop IR's own ops for it (index arithmetic, padding
    guard, load) with the output and reduction loops' variables split from its column
    (or row) and k; 0 past M, N or K (tested only where a tile or step can pass them)."""
    p = tile.params
    fresh = w.names.fresh
    group = p.group[0] * p.group[1]
    kk, kx = fresh("kk"), fresh("k")
    if x.at:  # (its output index split before the steps; its k: lid / side + ...)
        mm, at = x.mm, x.at
        w.line(f"for (int {kk} = ({lid}) / {x.side}; {kk} < {p.tk}; {kk} += {group // x.side}) {{")
        w.depth += 1
        w.line(f"const int {kx} = (int){k0} + {kk};")
    else:
        t, mm, at = fresh("t"), fresh("mm"), fresh("at")
        w.line(f"for (int {t} = {lid}; {t} < {p.tk * x.side}; {t} += {group}) {{")
        w.depth += 1
        if x.along_k:  # consecutive work-items: consecutive k
            w.line(f"const int {kk} = {t} % {p.tk}, {mm} = {t} / {p.tk};")
        else:
            w.line(f"const int {mm} = {t} % {x.side}, {kk} = {t} / {x.side};")
        w.line(f"const int {kx} = (int){k0} + {kk}, {at} = (int){x.base} + {mm};")
    tests = [f"{at} < {x.extent}"] if x.extent % x.side else []
    tests += [f"{kx} < {tile.k}"] if tile.k % p.tk else []
    target = f"{x.stage}[{kk} * {x.row} + {mm}]"
    if tests:
        w.line(f"if ({' && '.join(tests)}) {{")
        w.depth += 1
    used = _ivs_of(x.ops)
    if not x.at:
        _bind_loops(w, x.loops, at, used)
    _bind_loops(w, (tile.red, *tile.inner), kx, used)
    for op in x.ops:
        w.op(op)
    w.line(f"{target} = {w[x.ops[-1].results[0]]};")
    if tests:
        w.depth -= 1
        w.line("} else {")
        w.line(f"  {target} = 0.0f;")
        w.line("}")
    w.depth -= 1
    w.line("}")


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
    if tile.implicit:
        a_along_k = _runs_along_k(tile.a, tile.rows, tile)
        b_along_k = _runs_along_k(tile.b, tile.cols, tile)
    else:
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
    batch: dict[SSAValue, str] = {}  # (a batched product's: from the group's dimension 2)
    if tile.batch and tile.batches == 1:  # (extent-1 batch loops)
        batch = {lp.induction_var: "0" for lp in tile.batch}
        w.expr.update(batch)
    elif tile.batch:
        bz = fresh("batch")
        w.line(f"const long {bz} = (long)get_group_id(2);")
        for lp in tile.batch:
            e = _split_index(tile.batch, bz)[lp.induction_var]
            if e in ("0", bz):
                batch[lp.induction_var] = e
                continue
            name = fresh(lp.loop_name or lp.induction_var.name_hint, "i")
            w.line(f"const long {name} = {e};")
            batch[lp.induction_var] = name
        w.expr.update(batch)
    c = [[fresh(f"c{i}_{j}") for j in range(p.rn)] for i in range(p.rm)]
    w.line("float " + ", ".join(f"{name} = 0.0f" for r in c for name in r) + ";")
    operands = [
        _Operand(tile.a, tile.a_ops, tile.rows, a_tile, a_row, a_along_k, p.tm, row0, m),
        _Operand(tile.b, tile.b_ops, tile.cols, b_tile, b_row, b_along_k, p.tn, col0, n),
    ]
    lid = f"{ty} * {gx} + {tx}"
    for x in operands if tile.implicit else ():
        if not x.along_k and gx * gy % x.side == 0:  # (its output index: one per
            # work-item, the same at every step: split once, here)
            x.mm, x.at = fresh("mm"), fresh("at")
            w.line(f"const int {x.mm} = ({lid}) % {x.side};")
            w.line(f"const int {x.at} = (int){x.base} + {x.mm};")
            _bind_loops(w, x.loops, x.at, _ivs_of(x.ops))
    w.line(f"for (long {k0} = 0; {k0} < {k}; {k0} += {p.tk}) {{")
    w.depth += 1
    for x in operands:
        if tile.implicit:
            _load_implicit(w, tile, x, k0, lid)
            continue
        load, stage, row, along_k, side, base, extent = (
            x.load,
            x.stage,
            x.row,
            x.along_k,
            x.side,
            x.base,
            x.extent,
        )
        t, kk, mm = fresh("t"), fresh("kk"), fresh("mm")
        w.line(f"for (int {t} = {lid}; {t} < {p.tk * side}; {t} += {gx * gy}) {{")
        w.depth += 1
        if along_k:  # consecutive work-items: consecutive k
            w.line(f"const int {kk} = {t} % {p.tk}, {mm} = {t} / {p.tk};")
        else:
            w.line(f"const int {mm} = {t} % {side}, {kk} = {t} / {side};")
        kx, mx = fresh("k"), fresh("at")
        w.line(f"const long {kx} = {k0} + {kk}, {mx} = {base} + {mm};")
        known: dict[SSAValue, str] = {
            k_iv: kx,
            **{lp.induction_var: "0" for lp in tile.inner},
            **batch,
        }
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
