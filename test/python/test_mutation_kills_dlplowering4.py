"""Tests written against surviving mutants of the DLP lowering (issue 35,
bench/mutation.py --area dlp-lowering, fourth round), and from a read of
passes/lower/dlp_select/*.py for the preconditions no dlp-lowering test refused before
the seed-43 draw: hand-written loop kernels lowered for the `tiny` target, whether the
intrinsic pattern matched pinned with its reason, and every kernel run on the simulator
against numpy (a kernel refused keeps its scalar loops and must still be right)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module

NEG_INF = "0xFF800000"
POS_INF = "0x7F800000"
ZERO = "0.000000e+00"


def _lowered(text: str) -> str:
    module = parse_module(text)
    pipeline.run("loop-to-dlp", module, pipeline.PipelineOptions(), target_desc="tiny")
    return str(module)


def _close(out, ref) -> None:
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ pooling windows


def _pool(h, w, oh, ow, kh, kw, sh, sw, oth, otw, comb, init, guard, chan="%i1", colmul=None):
    """out[0, c, i, j] = comb over r0 < kh, r1 < kw of x[0, c, i*colmul + ..]: rows
    i*sh + r0 + oth, columns j*colmul + r1 + otw (colmul = sw unless given), the cell
    guarded (fill `init` outside the plane) or not."""
    colmul = sw if colmul is None else colmul
    load = f"memref.load %x[%i0, {chan}, %h, %w] : memref<1x2x{h}x{w}xf32>"
    if guard:
        cell = f"""%zi = arith.constant 0 : index
                %nh = arith.constant {h} : index
                %nw = arith.constant {w} : index
                %g0 = arith.cmpi sge, %h, %zi : index
                %g1 = arith.cmpi slt, %h, %nh : index
                %g2 = arith.cmpi sge, %w, %zi : index
                %g3 = arith.cmpi slt, %w, %nw : index
                %g01 = arith.andi %g0, %g1 : i1
                %g23 = arith.andi %g2, %g3 : i1
                %in = arith.andi %g01, %g23 : i1
                %v = scf.if %in -> (f32) {{
                  %l = {load}
                  scf.yield %l : f32
                }} else {{
                  %f = arith.constant {init} : f32
                  scf.yield %f : f32
                }}"""
    else:
        cell = f"%v = {load}"
    return f"""
func.func @main(%x: memref<1x2x{h}x{w}xf32>, %out0: memref<1x2x{oh}x{ow}xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "pool_0" {{
    loop.for %i0 = 0 to 1 step 1 {{name = "i0"}} {{
      loop.for %i1 = 0 to 2 step 1 {{name = "i1", parallel}} {{
        loop.for %i2 = 0 to {oh} step 1 {{name = "i2"}} {{
          loop.for %i3 = 0 to {ow} step 1 {{name = "i3"}} {{
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant {init} : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to {kh} step 1 {{name = "r0", reduction}} {{
              loop.for %r1 = 0 to {kw} step 1 {{name = "r1", reduction}} {{
                %sh = arith.constant {sh} : index
                %sw = arith.constant {colmul} : index
                %oth = arith.constant {oth} : index
                %otw = arith.constant {otw} : index
                %a = arith.muli %i2, %sh : index
                %a1 = arith.addi %a, %r0 : index
                %h = arith.addi %a1, %oth : index
                %b = arith.muli %i3, %sw : index
                %b1 = arith.addi %b, %r1 : index
                %w = arith.addi %b1, %otw : index
                {cell}
                %o = memref.load %acc[] : memref<f32>
                %m = arith.{comb} %o, %v : f32
                memref.store %m, %acc[] : memref<f32>
              }}
            }}
            %res = memref.load %acc[] : memref<f32>
            memref.store %res, %out0[%i0, %i1, %i2, %i3] : memref<1x2x{oh}x{ow}xf32>
          }}
        }}
      }}
    }}
  }}
  func.return
}}"""


def _pool_ref(x, oh, ow, kh, kw, sh, sw, oth, otw, comb, init, chan_fixed=False, colmul=None):
    colmul = sw if colmul is None else colmul
    _, c, h, w = x.shape
    out = np.full((1, 2, oh, ow), np.float32(init), np.float32)
    f = {"maximumf": np.maximum, "addf": np.add, "minimumf": np.minimum}[comb]
    for ch in range(2):
        for i in range(oh):
            for j in range(ow):
                acc = np.float32(init)
                for r0 in range(kh):
                    for r1 in range(kw):
                        a, b = i * sh + r0 + oth, j * colmul + r1 + otw
                        v = (
                            x[0, 0 if chan_fixed else ch, a, b]
                            if 0 <= a < h and 0 <= b < w
                            else np.float32(init)
                        )
                        acc = f(acc, v)
                out[0, ch, i, j] = acc
    return out


# name -> (h, w, oh, ow, kh, kw, sh, sw, row offset, column offset, combine, init,
# guarded[, channel index, column multiplier]), whether dlp.pool is selected
POOLS = {
    # 2x2 max, stride 2: the pooling window
    "max2s2": ((8, 8, 4, 4, 2, 2, 2, 2, 0, 0, "maximumf", NEG_INF, False), True),
    # 3x3 sum, stride 1, padding 1 (guarded cells): pads of 1 < the window
    "sum3s1p1": ((6, 6, 6, 6, 3, 3, 1, 1, -1, -1, "addf", ZERO, True), True),
    # a padding of 2 rows of a 3-row window: still a window
    "pad-lt-kernel": ((6, 6, 4, 4, 3, 3, 1, 1, -2, 0, "addf", ZERO, True), True),
    # min has no pool mode
    "min": ((8, 8, 4, 4, 2, 2, 2, 2, 0, 0, "minimumf", POS_INF, False), False),
    # a max from 0 is max(0, window), not the pool's max from -inf
    "max-from-0": ((8, 8, 4, 4, 2, 2, 2, 2, 0, 0, "maximumf", ZERO, False), False),
    # a padding as tall as the window: its first row of windows reads only padding
    "pad-eq-kernel": ((6, 6, 4, 4, 3, 3, 1, 1, -3, 0, "addf", ZERO, True), False),
    # windows starting one row down (a negative padding)
    "pad-negative": ((8, 8, 3, 3, 2, 2, 2, 2, 1, 0, "addf", ZERO, False), False),
    # the last row of windows starts at row 4 of a 4-row plane
    "last-past-plane": ((4, 4, 3, 2, 2, 2, 2, 2, 0, 0, "addf", ZERO, True), False),
    # every output column reads the same columns (a column stride of 0)
    "column-stride-0": ((8, 8, 4, 4, 2, 2, 2, 2, 0, 0, "addf", ZERO, False, "%i1", 0), False),
    # every output row reads the same rows (a row stride of 0: window.py:176, seed 43)
    "row-stride-0": ((8, 8, 4, 4, 2, 2, 0, 2, 0, 0, "addf", ZERO, False), False),
    # channel 0 read for every output channel (the channel index is not the work loop)
    "one-channel": ((8, 8, 4, 4, 2, 2, 2, 2, 0, 0, "addf", ZERO, False, "%i0"), False),
}


@pytest.mark.parametrize("case", POOLS)
def test_a_pool_window_is_selected_only_where_its_preconditions_hold(case):
    """dlp_select/window.py match_pool / match_window: a max from -inf or a sum from 0,
    rows and columns `o * s - pad + k` with 0 <= pad < the window, the last window
    starting inside the plane, the channel the work loop's; anything else keeps its
    scalar loops. Either way the simulator gives numpy's values."""
    args, selected = POOLS[case]
    h, w, oh, ow, kh, kw, sh, sw, oth, otw, comb, init, _guard, *rest = args
    text = _pool(*args)
    lowered = _lowered(text)
    assert ("dlp.pool" in lowered) is selected
    if not selected:
        assert "no intrinsic pattern matches its loop nest" in lowered
    x = np.random.default_rng(2).standard_normal((1, 2, h, w)).astype(np.float32)
    name = "pool_" + case.replace("-", "_")
    (out,) = compile_dlp(parse_module(text), "tiny", name=name)(x)
    fill = {NEG_INF: -np.inf, POS_INF: np.inf}.get(init, 0.0)
    chan = rest[0] if rest else "%i1"
    colmul = rest[1] if len(rest) > 1 else None
    want = _pool_ref(x, oh, ow, kh, kw, sh, sw, oth, otw, comb, fill, chan == "%i0", colmul)
    _close(out, want)


# ------------------------------------------------------------------ row reductions


def _rows(init: str, comb: str, value: str, lo: int = 0, step: int = 1) -> str:
    """out[i] = comb over j from lo by 1 of VALUE (x[i, j] by default), acc from init; the
    row loop i over 8 rows by `step`."""
    return f"""
func.func @main(%x: memref<8x64xf32>, %out0: memref<8xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "rows_0" {{
    loop.for %i = 0 to 8 step {step} {{name = "i0", parallel}} {{
      %acc = memref.alloca() : memref<f32>
      %z = arith.constant {init} : f32
      memref.store %z, %acc[] : memref<f32>
      loop.for %j = {lo} to 64 step 1 {{name = "r0", reduction}} {{
        %c0 = arith.constant 0 : index
        %v = {value}
        %o = memref.load %acc[] : memref<f32>
        %s = arith.{comb} : f32
        memref.store %s, %acc[] : memref<f32>
      }}
      %r = memref.load %acc[] : memref<f32>
      memref.store %r, %out0[%i] : memref<8xf32>
    }}
  }}
  func.return
}}"""


XIJ = "memref.load %x[%i, %j] : memref<8x64xf32>"
X0 = "memref.load %x[%i, %c0] : memref<8x64xf32>"

# name -> (init, combine, value, lo, step), the reduce op selected (None: scalar loops),
# numpy's value of x (8 x 64)
ROWS = {
    "sum": (ZERO, "addf %o, %v", XIJ, 0, 1, "dlp.reduce_sum", lambda x: x.sum(1)),
    "max": (NEG_INF, "maximumf %o, %v", XIJ, 0, 1, "dlp.reduce_max", lambda x: x.max(1)),
    # a sum from 1: the reduce op starts from 0
    "sum-from-1": ("1.000000e+00", "addf %o, %v", XIJ, 0, 1, None, lambda x: 1 + x.sum(1)),
    # a max from 0 (max(0, row)): the reduce op starts from -inf
    "max-from-0": (ZERO, "maximumf %o, %v", XIJ, 0, 1, None, lambda x: np.maximum(x.max(1), 0)),
    # a reduction from column 1: not the row's whole tile
    "from-column-1": (ZERO, "addf %o, %v", XIJ, 1, 1, None, lambda x: x[:, 1:].sum(1)),
    # every other row: the work loop does not step by 1
    "every-other-row": (
        ZERO,
        "addf %o, %v",
        XIJ,
        0,
        2,
        None,
        lambda x: np.where(np.arange(8) % 2 == 0, x.sum(1), 0),
    ),
    # acc + acc: no value summed
    "doubling": (ZERO, "addf %o, %o", XIJ, 0, 1, None, lambda x: np.zeros(8)),
    # the row's first element 64 times: a scalar per row, not a vector
    "one-element": (ZERO, "addf %o, %v", X0, 0, 1, None, lambda x: 64 * x[:, 0]),
}


@pytest.mark.parametrize("case", ROWS)
def test_a_row_reduction_is_selected_only_where_its_preconditions_hold(case):
    """dlp_select/reduce.py match_reduce: loops from 0 by 1, `acc = init; acc = acc <op>
    v` with the op's identity as init (0 for a sum, -inf for a max) and v a vector over
    the row; anything else keeps its scalar loops. Either way numpy's values."""
    init, comb, value, lo, step, op, ref = ROWS[case]
    text = _rows(init, comb, value, lo, step)
    lowered = _lowered(text)
    for name in ("dlp.reduce_sum", "dlp.reduce_max"):
        assert (name in lowered) is (name == op)
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    (out,) = compile_dlp(parse_module(text), "tiny", name="rows_" + case.replace("-", "_"))(x)
    want = ref(x)
    if step == 2:  # rows the loop skips are left as the output buffer was (zeros)
        out = np.where(np.arange(8) % 2 == 0, out, 0)
    _close(out, want)


# -------------------------------------------------------------------- convolutions

# out[0, co, i, j] = INIT (+ or -) sum over ci, kh, kw of x[0, ci, i + kh, j + kw] * w[WIDX]
CONV = """
func.func @main(%x: memref<1x2x6x6xf32>, %w: memref<4x2x3x3xf32>, %out0: memref<1x4x4x4xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "conv2d_0" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 4 step 1 {name = "i1", parallel} {
        loop.for %i2 = 0 to 4 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 4 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant INIT : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 3 step 1 {name = "r1", reduction} {
                loop.for %r2 = 0 to 3 step 1 {name = "r2", reduction} {
                  %1 = arith.addi %i2, %r1 : index
                  %2 = arith.addi %i3, %r2 : index
                  %3 = memref.load %x[%i0, %r0, %1, %2] : memref<1x2x6x6xf32>
                  %4 = memref.load %w[WIDX] : memref<4x2x3x3xf32>
                  %5 = arith.mulf %3, %4 : f32
                  %6 = memref.load %acc[] : memref<f32>
                  %7 = arith.COMB %6, %5 : f32
                  memref.store %7, %acc[] : memref<f32>
                }
              }
            }
            %sum = memref.load %acc[] : memref<f32>
            memref.store %sum, %out0[%i0, %i1, %i2, %i3] : memref<1x4x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}"""

W_OIHW = "%i1, %r0, %r1, %r2"

# name -> (init, combine, weight index), whether dlp.conv2d is selected
CONVS = {
    "conv": ("0.000000e+00", "addf", W_OIHW, True),
    # a sum from 1 (the conv op starts from 0)
    "from-1": ("1.000000e+00", "addf", W_OIHW, False),
    # acc - x * w
    "subtracted": ("0.000000e+00", "subf", W_OIHW, False),
    # w[co, ci, kw, kh]: the filter read transposed
    "filter-transposed": ("0.000000e+00", "addf", "%i1, %r0, %r2, %r1", False),
}


@pytest.mark.parametrize("case", CONVS)
def test_a_conv_is_selected_only_where_its_preconditions_hold(case):
    """dlp_select/window.py match_conv: `acc = 0; acc += x * w[co, ci, kh, kw]` (the
    filter in OIHW order, the sum from 0); anything else keeps its scalar loops. Either
    way numpy's values."""
    init, comb, widx, selected = CONVS[case]
    text = CONV.replace("INIT", init).replace("COMB", comb).replace("WIDX", widx)
    assert ("dlp.conv2d" in _lowered(text)) is selected
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    (out,) = compile_dlp(parse_module(text), "tiny", name="conv_" + case.replace("-", "_"))(x, w)
    wr = w.transpose(0, 1, 3, 2) if case == "filter-transposed" else w
    sign = -1.0 if comb == "subf" else 1.0
    windows = np.lib.stride_tricks.sliding_window_view(x[0], (3, 3), axis=(1, 2))
    want = float(init) + sign * np.einsum("cijkl,ockl->oij", windows, wr)[None]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


# ------------------------------------------- dlp-lowering seed 43's survivors (after the draw)

# out[i, :] = x[i OP 2, :]: one contiguous row a piece, a direct GDRAM2GDRAM copy each
ROW_COPY = """
func.func @main(%x: memref<5x16xf32>, %out0: memref<8x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "copy_0" {
    loop.for %i = 0 to 8 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c = arith.constant 2 : index
        %r = arith.OP %i, %c : index
        %v = memref.load %x[%r, %j] : memref<5x16xf32>
        memref.store %v, %out0[%i, %j] : memref<8x16xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "op, rows",
    [
        ("ceildivsi", [0, 1, 1, 2, 2, 3, 3, 4]),
        ("floordivsi", [0, 0, 1, 1, 2, 2, 3, 3]),
        ("divsi", [0, 0, 1, 1, 2, 2, 3, 3]),
    ],
)
def test_direct_row_copies_evaluate_the_index_arithmetic_exactly(op, rows):
    """_dlp_copy.py:69 (`-((-a) // b)` -> `-(a // b)`, seed 43): a copy kernel becomes
    direct GDRAM2GDRAM copies of the pieces its index arithmetic evaluates to, so each
    op is evaluated as the C backend would (ceil(i / 2) for ceildivsi); the simulator
    then copies x's rows in numpy's order."""
    text = ROW_COPY.replace("OP", op)
    assert "GDRAM2GDRAM" in _lowered(text)
    x = np.arange(80, dtype=np.float32).reshape(5, 16)
    (out,) = compile_dlp(parse_module(text), "tiny", name=f"rowcopy_{op}")(x)
    np.testing.assert_array_equal(out, x[rows])


# x[e] with e an index expression of j in [0, 15] (the work loop i0 not in it)
INDEX = """
func.func @main(%x: memref<64xf32>, %out: memref<8x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c5 = arith.constant 5 : index
        %c7 = arith.constant 7 : index
        %c8 = arith.constant 8 : index
        EXPR
        %v = memref.load %x[%e] : memref<64xf32>
        memref.store %v, %out[%i, %j] : memref<8x16xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "expr, form",
    [
        # j < 8 ? 5 : 7 is 5 or 7, whatever the condition's own 0 / 1
        ("%b = arith.cmpi slt, %j, %c8 : index\n%e = arith.select %b, %c5, %c7 : index", (0, 5, 7)),
        # j < 8 ? j : 7 lies in [0, 15]
        ("%b = arith.cmpi slt, %j, %c8 : index\n%e = arith.select %b, %j, %c7 : index", (0, 0, 15)),
    ],
)
def test_a_selects_interval_is_its_two_values(expr, form):
    """loop_to_dlp.py:186 (`args[-2:]` -> `args[not 2:]`, seed 43): the interval of
    `select(c, a, b)` spans a's and b's, not the condition's [0, 1] (x[5 or 7] reads
    elements 5 to 7 only)."""
    from dlpc.passes.lower.loop_to_dlp import IndexAnalysis

    module = parse_module(INDEX.replace("EXPR", expr.replace("\n", "\n        ")))
    loops = {op.loop_name: op for op in module.walk() if op.name == "loop.for"}
    (load,) = [op for op in module.walk() if op.name == "memref.load"]
    analysis = IndexAnalysis(loops["i0"].induction_var, {loops["i1"].induction_var: (0, 15)})
    got = analysis(load.indices[0])
    assert got is not None and (got.a, got.lo, got.hi) == form


def test_two_unaligned_per_head_blocks_keep_scalar_loops(tmp_path):
    """permute.py:120 (`bb > 1` -> `bb > 2`, dlp-lowering seed 44): [2, 3, 2, 5] ->
    [2, 2, 3, 5] writes one 3 x 5 block per head, 60 bytes apart (not vector-aligned):
    with 2 heads already the second block would start unaligned, so the permutation
    keeps its scalar loops; against the reference."""
    from dlp_select_cases import lowered, matches_reference

    text = "model m(x: f32[2, 3, 2, 5]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n"
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.transpose"] == 0, ops
    matches_reference(model, module)


def _nram_bytes(kernel) -> int:
    """Bytes of the NRAM buffers a dlp.kernel allocates."""
    from xdsl.dialects import memref

    total = 0
    for op in kernel.walk():
        if isinstance(op, memref.AllocOp | memref.AllocaOp) and "nram" in str(op.memref.type):
            t = op.memref.type
            total += int(np.prod(t.get_shape())) * (t.get_element_type().bitwidth // 8)
    return total


@pytest.mark.parametrize("channels, size", [(16, 16), (64, 8), (32, 16)])
def test_an_average_pools_tile_counts_its_accumulator_planes_in_nram(tmp_path, channels, size):
    """window.py:441 (`tile * inner` -> `tile // inner`, dlp-lowering seed 44): an
    average pool is no passthrough (the sum is scaled after the window), so each channel
    of the tile keeps an accumulator plane of `inner` output elements in NRAM; counted,
    the tile's buffers fit tiny's 4 KiB, and the pool gives the reference's values."""
    import dlpc
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.dialects import dlp
    from dlpc.targets.dlp import resolve

    path = tmp_path / "p.dlpc"
    path.write_text(
        f"model m(x: f32[1, {channels}, {size}, {size}]) {{\n"
        "  return avg_pool2d(x, kernel=2, strides=2)\n}\n"
    )
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(schedule=False))
    (kernel,) = [
        op for op in lower_to_dlp(module.clone(), "tiny").walk() if isinstance(op, dlp.KernelOp)
    ]
    assert "dlp.pool" in str(kernel)
    assert _nram_bytes(kernel) <= resolve("tiny").capacity("nram")
    inputs = dlpc.api.random_inputs(model)
    (out,) = compile_dlp(module, "tiny", name=f"avgpool_{channels}_{size}")(*inputs, params={})
    _close(out, dlpc.api.reference(model, inputs)[0])


@pytest.mark.parametrize("m, k, n, matmuls", [(1, 2, 16, 0), (3, 16, 16, 1)])
def test_a_batched_matmul_needs_every_entry_aligned(tmp_path, m, k, n, matmuls):
    """matmul.py:173 (`mm * k` -> `mm & k`, dlp-lowering seed 45): a batched matmul's
    entries start m * k, k * n and m * n floats apart, each a multiple of the 64-byte
    vector alignment or the product keeps its scalar loops: [2, 1, 2] x [2, 2, 16] has
    A entries 8 bytes apart (1 & 2 = 0 would pass), [2, 3, 16] x [2, 16, 16] is aligned
    (dlp.matmul). Both against the reference."""
    from dlp_select_cases import lowered, matches_reference

    text = f"model m(a: f32[2, {m}, {k}], b: f32[2, {k}, {n}]) {{\n  return matmul(a, b)\n}}\n"
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.matmul"] == matmuls, ops
    matches_reference(model, module)
