"""Tests written against surviving mutants of the default schedules' heuristics (issue 35,
bench/mutation.py --area schedule, the survivors `test_mutation_kills_schedule.py` left):
mutants that keep the numbers but change which schedule is picked. Each pins the choice
(the script a template writes, the annotations left on the loops, the kernels a spent
budget leaves alone), the expected choice read off the heuristic's documented rule."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects.loop import ForOp, kernels
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule import default
from dlpc.passes.schedule.conv import conv_script
from dlpc.passes.schedule.deinterleave import cache_read_deinterleaved
from dlpc.passes.schedule.nest import analyse


def _model(tmp_path, text: str, batch: int = 1) -> api.Model:
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    return dlpc.load(path, batch=batch)


def test_register_tiled_conv_caches_its_accumulator_inside_the_tile_loops(tmp_path):
    """conv.py:73: `conv_script(register_tile=True)` keeps the output tile (a block of
    output channels x the row) in `acc` across all the reductions: the cache_write is at
    the innermost tile loop, the one the reorder puts right before the reduction loops
    (one loop further out, the accumulator would hold every channel block of the row)."""
    model = _model(
        tmp_path,
        "model c(x: f32[B, 4, 10, 12]) {\n"
        "  param k: f32[8, 4, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k)\n}\n",
    )
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (n := analyse(k)) is not None and n.reduce]
    nest = analyse(kernel)
    assert nest is not None
    script = conv_script(kernel, nest, register_tile=True).splitlines()
    K = kernel.sym
    (order,) = [ln.split(": ")[1].split(", ") for ln in script if ln.startswith("reorder ")]
    tile_loop = order[order.index(nest.reduce[0]) - 1]
    assert tile_loop not in nest.reduce and tile_loop != order[0]
    (cached,) = [ln for ln in script if ln.startswith("cache_write ")]
    assert cached.startswith(f"cache_write {K}/{tile_loop} ")


# out[i, j] = x[j] + 1 over ROWS x 16384: `ROWS * 16384` iterations, 16384 elements read
STREAM = """
func.func @main(%x: memref<16384xf32>, %out: memref<ROWSx16384xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to ROWS step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 16384 step 1 {name = "i1"} {
        %v = memref.load %x[%j] : memref<16384xf32>
        %one = arith.constant 1.0 : f32
        %w = arith.addf %v, %one : f32
        memref.store %w, %out[%i, %j] : memref<ROWSx16384xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("rows, parallel", [(2, True), (4, True), (8, False)])
def test_a_small_kernel_stays_parallel_only_while_it_streams(rows, parallel):
    """default.py:667: a kernel below SERIAL_WORK (2^18 iterations) runs serial unless it
    streams: at least STREAM_SERIAL_WORK (2^15) iterations and at most STREAM_RATIO (4)
    per element read. 16384 elements read: 2 and 4 rows (2^15 and 2^16 iterations, 2 and 4 per element)
    stream and keep their parallel loop, 8 rows (8 per element) are serialised."""
    (kernel,) = kernels(parse_module(STREAM.replace("ROWS", str(rows))))
    assert default.STREAM_SERIAL_WORK <= rows * 16384 < default.SERIAL_WORK
    default.finish_kernel(kernel)
    (outer,) = [lp for lp in kernel.loops() if lp.loop_name == "i0"]
    assert (outer.parallel is not None) == parallel


def _winograd_module(tmp_path, width: int, height: int | None = None):
    model = _model(
        tmp_path,
        f"model w(x: f32[B, 4, {height or width}, {width}]) {{\n"
        "  param k: f32[8, 4, 3, 3] = kaiming(seed=5)\n"
        "  return relu(conv2d(x, k, padding=1))\n}\n",
    )
    opts = pipeline.PipelineOptions(
        opt_level=3,
        schedule=True,
        extra={
            "graph-winograd": {"where": "all"},
            "loop-default-schedule": {"winograd_fuse": True},
        },
    )
    return pipeline.lower(
        model.module.clone(), "loop", opts, weights=dict(api.check_weights(model))
    )


@pytest.mark.parametrize(
    "width, height, unrolled", [(32, 32, True), (16, 16, True), (16, 10, False)]
)
def test_fused_winograd_unrolls_the_copy_out_of_rows_of_whole_vectors(
    tmp_path, width, height, unrolled
):
    """winograd.py:255: the fused Winograd schedule unrolls the register tile's copy-out
    vector loop (the accumulator's last dim) for blocks of whole vectors of tiles (>= LANES,
    16): an output 32 wide is 16 tiles per row (unrolled); 16 wide is 8 per row, in blocks
    of two rows where the tile rows pair up (16 high: 16 tiles, unrolled), else one (10
    high, 5 tile rows: 8 tiles, not)."""
    module = _winograd_module(tmp_path, width, height)
    found = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp) and lp.loop_name}
    acc = sorted(n for n in found if re.fullmatch(r"\w+_b_acc_out\d", n))
    assert acc, sorted(found)  # the fused schedule took the conv
    last = found[acc[-1]]
    assert (last.attributes.get("unroll") is not None) == unrolled


MANY = """
func.func @main(%x: memref<64x64xf32>, %y: memref<64x64xf32>, %z: memref<64x64xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  MM(mm_0, y)
  MM(mm_1, z)
  func.return
}"""


def _mm(match) -> str:
    name, out = (p.strip() for p in match.group(1).split(","))
    return f"""loop.kernel "{name}" {{
    loop.for %i = 0 to 64 step 1 {{name = "i0"}} {{
      loop.for %j = 0 to 64 step 1 {{name = "i1"}} {{
        %acc = memref.alloca() : memref<f32>
        %z0 = arith.constant 0.000000e+00 : f32
        memref.store %z0, %acc[] : memref<f32>
        loop.for %r = 0 to 64 step 1 {{name = "r0", reduction}} {{
          %a = memref.load %x[%i, %r] : memref<64x64xf32>
          %b = memref.load %x[%r, %j] : memref<64x64xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }}
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %{out}[%i, %j] : memref<64x64xf32>
      }}
    }}
  }}"""


def test_a_spent_search_budget_leaves_every_remaining_kernel_unscheduled(monkeypatch, capsys):
    """default.py:856: once the search budget is spent, every kernel reached after it keeps
    the identity schedule (`"none"`), not only the first, and the note counts them all."""
    monkeypatch.setattr(default, "SEARCH_BUDGET", 0.0)
    module = parse_module(re.sub(r"MM\(([^)]*)\)", _mm, MANY))
    how = default.apply_tuned_or_default(module)
    assert how == {"mm_0": "none", "mm_1": "none"}
    assert "2 of 2 kernels keep the identity schedule" in capsys.readouterr().err


def test_a_spent_budget_in_the_default_schedule_counts_every_kernel(capsys):
    """The same rule in `apply_default` (its own `continue`, default.py:816): a budget of 0 s
    leaves both kernels with te-to-loop's nests, and the note counts both."""
    module = parse_module(re.sub(r"MM\(([^)]*)\)", _mm, MANY))
    default.apply_default(module, budget=0.0)
    assert "2 of 2 kernels keep the identity schedule" in capsys.readouterr().err
    assert [lp.loop_name for lp in module.walk() if isinstance(lp, ForOp)] == ["i0", "i1", "r0"] * 2


# y[i] = sum over r of x[2 * i + C +- r] (r from LO to HI): a stride-2 window read, the
# output loop i innermost, for cache_read ... deinterleave at the outer loop o
WINDOW = """
func.func @main(%x: memref<20xf32>, %y: memref<8xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "init"} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %y[%i] : memref<8xf32>
    }
    loop.for %o = 0 to 1 step 1 {name = "o"} {
      loop.for %r = LO to HI step 1 {name = "r0", reduction} {
        loop.for %i = 0 to 8 step 1 {name = "i0"} {
          %two = arith.constant 2 : index
          %c = arith.constant C : index
          %i2 = arith.muli %i, %two : index
          %q0 = arith.addi %i2, %c : index
          %q = OP %q0, %r : index
          %v = memref.load %x[%q] : memref<20xf32>
          %p = memref.load %y[%i] : memref<8xf32>
          %s = arith.addf %p, %v : f32
          memref.store %s, %y[%i] : memref<8xf32>
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "lo, hi, c, op",
    [
        (0, 3, 2, "arith.subi"),  # x[2i + 2 - r]: a reversed window (coefficient -1)
        (3, 6, 0, "arith.addi"),  # x[2i + r], r from 3: a window loop not starting at 0
    ],
)
def test_deinterleave_takes_reversed_and_offset_windows(lo, hi, c, op):
    """deinterleave.py:85: `_minimum` of the part of the last index that the stride does
    not divide is the least over each loop's first and last iteration (lower and
    lower + (trips - 1) * stride). Here it is 0 (2 - r over r = 0..2; r - 3 over r =
    3..5): both nests deinterleave (no refusal) and compute what they did before."""
    text = WINDOW.replace("LO", str(lo)).replace("HI", str(hi)).replace("C", str(c))
    text = text.replace("OP", op)
    x = (np.arange(20, dtype=np.float32) - 7) ** 2
    (want,) = CFunction(parse_module(text), name="window")(x)
    module = parse_module(text)
    cache_read_deinterleaved(module, "k", "o", "x")
    assert "x_q" in str(module)
    (got,) = CFunction(module, name="window_q")(x)
    np.testing.assert_array_equal(got, want)


# y[i] = sum over r < R of x[2 * i + r - P] (0 outside x): a padded stride-2 window
PADDED = """
func.func @main(%x: memref<Nxf32>, %y: memref<Ixf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %o = 0 to 1 step 1 {name = "o"} {
      loop.for %r = 0 to R step 1 {name = "r0", reduction} {
        loop.for %i = 0 to I step 1 {name = "i0"} {
          %two = arith.constant 2 : index
          %pad = arith.constant P : index
          %zi = arith.constant 0 : index
          %n = arith.constant N : index
          %i2 = arith.muli %i, %two : index
          %q0 = arith.addi %i2, %r : index
          %q = arith.subi %q0, %pad : index
          %c0 = arith.cmpi sge, %q, %zi : index
          %c1 = arith.cmpi slt, %q, %n : index
          %in = arith.andi %c0, %c1 : i1
          %v = scf.if %in -> (f32) {
            %l = memref.load %x[%q] : memref<Nxf32>
            scf.yield %l : f32
          } else {
            %zz = arith.constant 0.000000e+00 : f32
            scf.yield %zz : f32
          }
          %p = memref.load %y[%i] : memref<Ixf32>
          %s = arith.addf %p, %v : f32
          memref.store %s, %y[%i] : memref<Ixf32>
        }
      }
    }
  }
  func.return
}"""


def _padded_loops(n: int, i: int, r: int, p: int) -> dict[str, ForOp]:
    text = PADDED.replace("N", str(n)).replace("I", str(i)).replace("R", str(r))
    module = parse_module(text.replace("P", str(p)))
    cache_read_deinterleaved(module, "k", "o", "x")
    return {lp.loop_name or "": lp for lp in module.walk() if isinstance(lp, ForOp)}


def test_a_phase_wholly_in_the_padding_gets_no_copy_loop():
    """deinterleave.py:256 (the copy's phase test; the sampled :300 is the fill's, which
    is equivalent: `_fill_nest` never passes it a start past its end): a phase with nothing
    in bounds gets no copy loop. The box
    2i + r - 5 (i, r < 2) is columns -5..-2 of a 4-long x: phase 0 (-5, -3) and phase 1
    (-4, -2) are both padding, so only the fill loops are written, each 0 to 2."""
    loops = _padded_loops(4, 2, 2, 5)
    assert sorted(n for n in loops if n.startswith("x_q")) == ["x_q_fill0p0", "x_q_fill0p1"]
    assert all(lp.lower < lp.upper for lp in loops.values())


@pytest.mark.parametrize("outputs, edges", [(8192, True), (8193, False)])
def test_edge_fill_is_for_phase_planes_up_to_64_kib(outputs, edges):
    """deinterleave.py:230: a padded box's phase planes of at most EDGE_FILL_BYTES (64 KiB)
    get the fill value only where the copies do not write (`_fill_nest`: per phase,
    `x_q_fill0p<phase>`); larger ones are filled whole first (`x_q_fill0`, `x_q_fill1`).
    8192 outputs: the box 2i + r - 1 is 16384 columns, 2 planes of 8192 floats = 64 KiB
    exactly (edges); 8193 outputs: 2 x 8193 floats (whole)."""
    loops = _padded_loops(16384, outputs, 2, 1)
    fills = sorted(n for n in loops if "_fill" in n)
    assert fills == (["x_q_fill0p0"] if edges else ["x_q_fill0", "x_q_fill1"])


def test_deinterleaved_phase_copies_sit_in_the_innermost_row_loop():
    """deinterleave.py:243: the phase copies go in the innermost of the box's outer loops
    (they index the plane with every outer loop's variable). loop-cache-read-deinterleave's
    conv staged at i0: a box of 1 x 2 x 7 rows, loops xq_in0 > xq_in1 > xq_in2, the copies
    xq_in3p0 and xq_in3p1 in xq_in2. (The lit file checks it too; bench/fastlit.py hands a
    failing lit file to lit, whose environment drops PYTHONPATH, so a mutation run sees
    it pass.)"""
    from pathlib import Path

    path = Path(__file__).parent.parent / "passes" / "loop-cache-read-deinterleave.mlir"
    text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("//"))
    module = parse_module(text)
    cache_read_deinterleaved(module, "cs", "i0", "x", "xq")
    loops = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp)}
    for phase in ("xq_in3p0", "xq_in3p1"):
        parent = loops[phase].parent_op()
        assert isinstance(parent, ForOp) and parent.loop_name == "xq_in2"


def test_a_register_tile_holds_at_most_256_accumulators(tmp_path):
    """conv.py: the register tile is cb x the row's width, at most 256 values: an output
    row of 257 (prime: not split) with cb = 1 is one too many; 256 with cb = 1 fits."""
    for width, cached in ((257, False), (256, True)):
        model = _model(
            tmp_path,
            f"model c(x: f32[B, 1, 3, {width + 2}]) {{\n"
            "  param k: f32[1, 1, 3, 3] = kaiming(seed=5)\n"
            "  return conv2d(x, k)\n}\n",
        )
        opts = pipeline.PipelineOptions(opt_level=0)
        module = pipeline.lower(model.module.clone(), "loop", opts)
        (kernel,) = [k for k in kernels(module) if (n := analyse(k)) is not None and n.reduce]
        nest = analyse(kernel)
        assert nest is not None and nest.trips[nest.spatial[-1]] == width
        script = conv_script(kernel, nest, cb=1, register_tile=True)
        assert ("cache_write " in script) == cached, script


BATCHED_DOT = """
func.func @main(%x: memref<2x16x16xf32>, %y: memref<2x16x16xf32>, %out: memref<2x16x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %b = 0 to 2 step 1 {name = "i0"} {
      loop.for %i = 0 to 16 step 1 {name = "i1"} {
        loop.for %j = 0 to 16 step 1 {name = "i2"} {
          %zero = arith.constant 0.0 : f32
          memref.store %zero, %out[%b, %i, %j] : memref<2x16x16xf32>
          loop.for %r = 0 to 16 step 1 {name = "r0", reduction} {
            %a = memref.load %x[%b, %i, %r] : memref<2x16x16xf32>
            %w = memref.load %y[%b, %j, %r] : memref<2x16x16xf32>
            %p = arith.mulf %a, %w : f32
            %o = memref.load %out[%b, %i, %j] : memref<2x16x16xf32>
            %s = arith.addf %o, %p : f32
            memref.store %s, %out[%b, %i, %j] : memref<2x16x16xf32>
          }
        }
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize("parallel, loop", [("auto", "i1o"), ("outer", "i0"), ("none", None)])
def test_dot_script_parallel_loop(parallel, loop):
    """default.dot_script over a batch of 2 with 16 / 4 = 4 row blocks, 2 threads: "auto"
    takes the first tile loop of >= 2 * threads iterations (the row blocks), "outer" the
    outermost of >= 2 (the batch), "none" none."""
    (kernel,) = kernels(parse_module(BATCHED_DOT))
    nest = analyse(kernel)
    assert nest is not None
    script = default.dot_script(kernel, nest, tile=(4, 16), threads=2, parallel=parallel)
    found = [ln for ln in script.splitlines() if ln.startswith("parallel ")]
    assert found == ([f"parallel k/{loop}"] if loop else []), script


def test_reduction_script_unrolls_the_split_second_loop(tmp_path):
    """default.reduction_script over 4 spatial loops, the second of 8 iterations: split
    by 4, its inner part unrolled next to the vectorized innermost loop."""
    model = _model(
        tmp_path, "model r(x: f32[2, 8, 3, 16, 8]) {\n  return reduce_sum(x, axes=[2])\n}\n"
    )
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = kernels(module)
    nest = analyse(kernel)
    assert nest is not None and nest.spatial == ["i0", "i1", "i2", "i3"]
    script = default.reduction_script(kernel, nest).splitlines()
    K = kernel.sym
    assert f"unroll {K}/i1i" in script and f"vectorize {K}/i3" in script, script


INIT_LOOPS = """
func.func @main(%x: memref<4xf32>, %out: memref<4xf32>, %one: memref<1xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 2 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "a_init"} {
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %out[%i] : memref<4xf32>
    }
    loop.for %j = 0 to 1 step 1 {name = "b_init"} {
      %w = memref.load %x[%j] : memref<4xf32>
      memref.store %w, %one[%j] : memref<1xf32>
    }
  }
  func.return
}"""


def test_finish_kernel_vectorizes_init_loops_of_two_or_more_iterations():
    """An init/epilogue loop is vectorized when it has more than one iteration."""
    (kernel,) = kernels(parse_module(INIT_LOOPS))
    default.finish_kernel(kernel)
    vec = {lp.loop_name: lp.vectorize is not None for lp in kernel.loops()}
    assert vec == {"a_init": True, "b_init": False}


@pytest.mark.parametrize("time", ["NaN", "Infinity"])
def test_a_tuning_log_refuses_an_ok_record_timed_nan_or_infinite(tmp_path, time):
    """tuning_log.py: an ok record needs 0 < time < inf; JSON's NaN and Infinity are not."""
    from dlpc.diagnostics import DlpcError
    from dlpc.passes.schedule.tuning_log import TuningLog

    line = '{"sig": "s", "kernel": "k", "target": "c", "script": "a", "ok": true, "time": %s}\n'
    path = tmp_path / "t.jsonl"
    path.write_text(line % "1.0" + line % time)
    with pytest.raises(DlpcError, match=r"t\.jsonl line 2: not a tuning record"):
        TuningLog(str(path))


def _conv_kernel(x: str, k: str, y: str, groups: int = 1, stride: int = 1):
    """The conv kernel of a graph conv2d (no padding) lowered to loops, its nest."""
    o = k.split("x")[0]
    text = f"""
func.func @main(%x: tensor<{x}xf32>, %w: tensor<{k}xf32>, %b: tensor<{o}xf32>) -> tensor<{y}xf32> {{
  %y = graph.conv2d %x, %w, %b {{strides = array<i64: {stride}, {stride}>, pads = array<i64: 0, 0, 0, 0>,
    groups = {groups} : i64}} : (tensor<{x}xf32>, tensor<{k}xf32>, tensor<{o}xf32>) -> tensor<{y}xf32>
  func.return %y : tensor<{y}xf32>
}}"""
    module = pipeline.lower(parse_module(text), "loop", pipeline.PipelineOptions(opt_level=0))
    (kernel,) = [k for k in kernels(module) if (n := analyse(k)) is not None and n.reduce]
    nest = analyse(kernel)
    assert nest is not None
    return kernel, nest


def test_conv_tile_splits_a_wide_row_into_tiles_of_at_most_four_vectors():
    """conv.py:113: a row of more than 4 vectors is tiled by its largest divisor of at most
    4 * lanes that is a multiple of lanes: 48 wide at 8 lanes by 24 (not whole, 48); and
    conv.py:220: a small conv (8 * 8 * 48 * 36 MACs < CONV_PARALLEL_MACS) of 8 rows stays
    serial even with 2 threads (its row loop is not made parallel)."""
    from dlpc.passes.schedule.conv import conv_tile_script

    kernel, nest = _conv_kernel("1x4x10x50", "8x4x3x3", "1x8x8x48")
    script = conv_tile_script(kernel, nest, threads=2, lanes=8).splitlines()
    K, w = kernel.sym, nest.spatial[-1]
    assert f"split {K}/{w} by 24 -> {w}o, {w}i" in script
    assert not [ln for ln in script if ln.startswith("parallel ")], script


def test_depthwise_tile_splits_a_wide_row_into_tiles_of_at_most_four_vectors():
    """depthwise.py:68: a depthwise row wider than 4 vectors (80 at 16 lanes) is tiled by
    its largest divisor of at most 64 that is a multiple of 16: 16 (80 is not <= 64)."""
    from dlpc.passes.schedule.conv import conv_tile_script

    kernel, nest = _conv_kernel("1x2x5x82", "2x1x3x3", "1x2x3x80", groups=2)
    script = conv_tile_script(kernel, nest).splitlines()
    K, w = kernel.sym, nest.spatial[-1]
    assert f"split {K}/{w} by 16 -> {w}o, {w}i" in script


ROWSUM = """
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4xf32>
  loop.kernel "rowsum" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0", parallel} {
      %z = arith.constant 0.000000e+00 : f32
      memref.store %z, %t[%i0] : memref<4xf32>
      loop.for %r0 = 0 to 8 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i0, %r0] : memref<4x8xf32>
        %o = memref.load %t[%i0] : memref<4xf32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %t[%i0] : memref<4xf32>
      }
    }
  }
  loop.kernel "add" {
    loop.for %i0 = 0 to 4 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 8 step 1 {name = "i1"} {
        %a = memref.load %t[%i0] : memref<4xf32>
        %b = memref.load %x[%i0, %i1] : memref<4x8xf32>
        %s = arith.addf %a, %b : f32
        memref.store %s, %y[%i0, %i1] : memref<4x8xf32>
      }
    }
  }
  memref.dealloc %t : memref<4xf32>
  func.return
}"""


def test_compute_at_renames_the_producers_inner_loops():
    """compute_at.py:178: the producer's loops inside its recomputed nest (its reduction
    loop r0 here) are cloned under the producer's prefix, rowsum_r0, serial."""
    from dlpc.passes.schedule import compute_at

    module = parse_module(ROWSUM)
    compute_at.compute_at(module, "rowsum", "add", "i0")
    (kernel,) = kernels(module)
    names = [lp.loop_name for lp in kernel.loops()]
    assert "rowsum_r0" in names and "r0" not in names, names
    (inner,) = [lp for lp in kernel.loops() if lp.loop_name == "rowsum_r0"]
    assert inner.parallel is None


def _linear(batch: int, m: int, n: int, k: int, b_transposed: bool) -> str:
    """out[b, i, j] = sum_r a[b, i, r] * w[r, j] (w[j, r] when b_transposed): a linear
    layer over [batch, m, k], its B shared by the batch."""
    wshape = f"{n}x{k}" if b_transposed else f"{k}x{n}"
    widx = "%j, %r" if b_transposed else "%r, %j"
    return f"""
func.func @main(%a: memref<{batch}x{m}x{k}xf32>, %w: memref<{wshape}xf32>,
    %out: memref<{batch}x{m}x{n}xf32>)
    attributes {{dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "lin" {{
    loop.for %b = 0 to {batch} step 1 {{name = "i0"}} {{
      loop.for %i = 0 to {m} step 1 {{name = "i1"}} {{
        loop.for %j = 0 to {n} step 1 {{name = "i2"}} {{
          %acc = memref.alloca() : memref<f32>
          %z = arith.constant 0.000000e+00 : f32
          memref.store %z, %acc[] : memref<f32>
          loop.for %r = 0 to {k} step 1 {{name = "r0", reduction}} {{
            %x = memref.load %a[%b, %i, %r] : memref<{batch}x{m}x{k}xf32>
            %y = memref.load %w[{widx}] : memref<{wshape}xf32>
            %p = arith.mulf %x, %y : f32
            %o = memref.load %acc[] : memref<f32>
            %s = arith.addf %o, %p : f32
            memref.store %s, %acc[] : memref<f32>
          }}
          %v = memref.load %acc[] : memref<f32>
          memref.store %v, %out[%b, %i, %j] : memref<{batch}x{m}x{n}xf32>
        }}
      }}
    }}
  }}
  func.return
}}"""


def test_a_shared_b_counts_the_batch_rows_for_the_dot_kernel():
    """default.py:571: B shared by the batch, the gemm has batch * m rows: 2 x 3 = 6 <=
    DOT_ROWS (8), so the dot kernel comes first (3 ** 2 = 9 rows would not take it)."""
    (kernel,) = kernels(parse_module(_linear(2, 3, 32, 32, b_transposed=True)))
    nest = analyse(kernel)
    assert nest is not None
    plans = default.gemm_plans(kernel, nest)
    assert isinstance(plans[0], default.DotParams), plans


def test_the_row_tail_gemm_puts_a_shared_bs_batch_inside_its_panel_loops():
    """default.py:460: a gemm of M = 29 rows (a prime: rows_tail) over a batch of 2 with B
    shared: the batch loop goes right inside the B panel loops (after r0c), so each panel
    is packed once per call."""
    (kernel,) = kernels(parse_module(_linear(2, 29, 32, 32, b_transposed=False)))
    nest = analyse(kernel)
    assert nest is not None
    p = default.gemm_default_params(29, 32, 32)
    assert p.rows_tail
    script = default.gemm_script(kernel, nest, p).splitlines()
    (order,) = [ln.split(": ")[1].split(", ") for ln in script if ln.startswith("reorder ")]
    assert order.index("i0") == order.index("r0c") + 1, order


def test_a_whole_fill_stores_in_its_innermost_loop():
    """deinterleave.py:238: phase planes over EDGE_FILL_BYTES are filled whole by a nest
    x_q_fill0 > x_q_fill1 whose store indexes with both loops' variables: it sits in the
    innermost loop (x_q_fill0 holds that loop alone)."""
    from xdsl.dialects import memref

    loops = _padded_loops(16384, 8193, 2, 1)
    outer, inner = loops["x_q_fill0"], loops["x_q_fill1"]
    assert list(outer.block.ops) == [inner]
    (store,) = [op for op in inner.block.ops if isinstance(op, memref.StoreOp)]
    assert list(store.indices) == [outer.induction_var, inner.induction_var]


@pytest.mark.parametrize("co, w, fused", [(4, 256, True), (2, 258, False)])
def test_fusable_winograd_takes_at_most_max_nr_tiles_per_row(co, w, fused):
    """winograd.py:214: the fused Winograd schedule takes a row of at most MAX_NR (128)
    tiles (and mr * tiles <= MAX_TILE): 256 wide (128 tiles of 4 channels, 512) is fused,
    258 wide (129 tiles of 2 channels, 258 <= 512) is not."""
    from dlpc.passes.schedule.nest import Nest
    from dlpc.passes.schedule.winograd import fusable

    (kernel,) = kernels(parse_module(STREAM.replace("ROWS", "2")))
    nest = Nest(["n", "o", "h", "w"], [], {"n": 1, "o": co, "h": 2, "w": w})
    assert fusable(kernel, nest) == fused


@pytest.mark.parametrize("co, fused", [(16, True), (25, False)])
def test_winograd_matmul_is_fused_only_into_a_fusable_output_transform(tmp_path, co, fused):
    """winograd.py:375: `fused_into` names the output transform that computes the
    Winograd matmul (and its reshapes) inside itself only when that transform is
    `fusable`: 16 output channels (a multiple of CO_BLOCK) are, 25 (> MAX_MR, no multiple
    of 16) are not, and then every kernel keeps its own template."""
    from dlpc.passes.schedule.winograd import _origin, fused_into

    model = _model(
        tmp_path,
        f"model w(x: f32[B, 4, 8, 8]) {{\n  param k: f32[{co}, 4, 3, 3] = kaiming(seed=5)\n"
        "  return conv2d(x, k, padding=1)\n}\n",
    )
    opts = pipeline.PipelineOptions(
        opt_level=3, schedule=False, extra={"graph-winograd": {"where": "all"}}
    )
    module = pipeline.lower(
        model.module.clone(), "loop", opts, weights=dict(api.check_weights(model))
    )
    (mm,) = [k for k in kernels(module) if _origin(k) == "graph.matmul"]
    (out,) = [k for k in kernels(module) if _origin(k) == "graph.winograd_output_transform"]
    assert fused_into(module, mm.sym) == (out.sym if fused else None)


INLINE = """
func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  loop.kernel "neg" {
    loop.for %i0 = LO to 8 step 1 {name = "i0"} {
      %v = memref.load %x[%i0] : memref<8xf32>
      %r = arith.negf %v : f32
      memref.store %r, %t[%i0] : memref<8xf32>
    }
  }
  loop.kernel "add" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      %a = memref.load %t[%i0] : memref<8xf32>
      %b = memref.load %x[%i0] : memref<8xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %y[%i0] : memref<8xf32>
    }
  }
  memref.dealloc %t : memref<8xf32>
  func.return
}"""


@pytest.mark.parametrize("lo", [-1, 1])
def test_compute_inline_refuses_a_producer_loop_not_from_zero(lo):
    """compute_at.py:226: compute_inline takes a producer nest from 0 only: one from -1
    (whose store at its loop variable writes t[-1], out of bounds) or from 1 is refused,
    the IR left as it was."""
    from dlpc.passes.schedule.compute_at import ComputeAtProducerError, compute_inline

    module = parse_module(INLINE.replace("LO", str(lo)))
    before = str(module)
    with pytest.raises(ComputeAtProducerError, match="perfect nest from 0 step 1"):
        compute_inline(module, "neg")
    assert str(module) == before


# schedule --seed 41 survivors


def test_gemm_tile_takes_6_rows_before_4():
    """default.py:309: the register tile's rows are the first of 8, 6, 4 dividing M:
    M = 12 takes 6 rows (12 x 32 in tiles of 6 x 32)."""
    assert default._gemm_tile(12, 32) == (6, 32)


def test_a_two_row_tile_is_pipelined():
    """default.py:389: a tile of 2 to PIPE_ROWS rows and whole vectors (2 x 32) carries B's
    row in registers: `tensorize .. gemm_pipe` at the reduction loop, not `gemm`."""
    (kernel,) = kernels(parse_module(_linear(1, 4, 32, 32, b_transposed=False)))
    nest = analyse(kernel)
    assert nest is not None
    p = default.GemmParams(4, 32, 32, 2, 32, pack_a=False, pack_b=False)
    script = default.gemm_script(kernel, nest, p).splitlines()
    assert "tensorize lin/r0 gemm_pipe" in script, script


def test_gemm_parallel_loop_is_the_first_with_two_iterations_per_thread():
    """default.py:419: the parallel loop is the first blocked loop of >= 2 x threads (4)
    iterations: N = 64 in column blocks of 32 is 2 (too few), M = 32 in row blocks of 8
    is 4: the row blocks i1c run in parallel."""
    (kernel,) = kernels(parse_module(_linear(1, 32, 64, 32, b_transposed=False)))
    nest = analyse(kernel)
    assert nest is not None
    p = default.GemmParams(8, 32, 32, 8, 32, pack_a=False, pack_b=False)
    script = default.gemm_script(kernel, nest, p, threads=2).splitlines()
    assert [ln for ln in script if ln.startswith("parallel ")] == ["parallel lin/i1c"]


def test_a_weight_gemm_whose_a_fits_in_l2_is_one_k_block():
    """default.py:588: B a weight and A (16 rows x 1024 = 64 KiB) within A_IN_PLACE_BYTES:
    one k block of all 1024 (not the default 512), A read in place."""
    text = _linear(1, 16, 32, 1024, b_transposed=False).replace(
        "dlpc.num_inputs = 2 : i64, dlpc.params = []",
        'dlpc.num_inputs = 1 : i64, dlpc.params = ["w"]',
    )
    (kernel,) = kernels(parse_module(text))
    nest = analyse(kernel)
    assert nest is not None
    (plan,) = default.gemm_plans(kernel, nest)
    assert isinstance(plan, default.GemmParams)
    assert (plan.kc, plan.pack_a, plan.pack_b) == (1024, False, True)


def test_a_kernel_signature_is_16_hex_digits():
    """tuning_log.py:145: a kernel's signature, the tuning log's key, is the first 16 hex
    digits of its sha256 (logs written before keep matching only at that length)."""
    from dlpc.passes.schedule.tuning_log import kernel_signature

    (kernel,) = kernels(parse_module(_linear(1, 4, 32, 32, b_transposed=False)))
    assert re.fullmatch(r"[0-9a-f]{16}", kernel_signature(kernel))


def test_a_strided_pointwise_conv_stages_its_im2col_rows():
    """conv.py:146: a 1x1 stride-2 conv stages its im2col rows (`pack`), 8 rows x 8
    columns x 8 channels x 4 bytes = 2 KiB, well within CONV_PACK_BYTES."""
    from dlpc.passes.schedule.conv import conv_tile_script

    kernel, nest = _conv_kernel("1x8x16x16", "8x8x1x1", "1x8x8x8", stride=2)
    script = conv_tile_script(kernel, nest).splitlines()
    assert [ln for ln in script if ln.startswith("cache_read ") and ln.endswith(" pack")], script


# C[i, j] = sum_r A[i, r] * B[r, j] over the rows 8 .. 18 (11 rows, a loop not from 0)
ROWS_FROM_8 = """
func.func @main(%A: memref<19x16xf32>, %B: memref<16x32xf32>, %C: memref<19x32xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 8 to 19 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<19x16xf32>
          %b = memref.load %B[%r0, %i1] : memref<16x32xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %C[%i0, %i1] : memref<19x32xf32>
      }
    }
  }
  func.return
}"""


def test_gemm_rows_remainder_starts_after_the_whole_tiles():
    """tensorize.py:388: `gemm8` over rows 8 .. 18 (11 rows): one tile of 8 rows (8 .. 15)
    and a remainder copy over rows 16 .. 18 (its lower bound is the loop's lower + 8)."""
    from dlpc.passes.schedule.script import apply_script

    module = parse_module(ROWS_FROM_8)
    apply_script(module, "decompose mm\ntensorize mm/i0 gemm8")
    bounds = {lp.loop_name: (lp.lower, lp.upper) for lp in module.walk() if isinstance(lp, ForOp)}
    assert bounds["i0_tail"] == (16, 19), bounds


def test_compute_inline_erases_the_inlined_buffer():
    """compute_at.py:265: once inlined, the producer's buffer has no use left: its alloc
    (and dealloc) are erased too."""
    from xdsl.dialects import memref

    from dlpc.passes.schedule.compute_at import compute_inline

    module = parse_module(INLINE.replace("LO", "0"))
    compute_inline(module, "neg")
    assert not [op for op in module.walk() if isinstance(op, memref.AllocOp | memref.DeallocOp)]


@pytest.mark.parametrize("at, columns", [("i0", 1), ("r0", 8)])
def test_a_guarded_phase_copy_vectorizes_rows_of_two_or_more(at, columns):
    """deinterleave.py:348: PADDED staged inside r0 (the box's columns move with r: one
    guarded copy nest x_q_in0 over the 2 phases > x_q_in1 over the columns per phase)
    vectorizes the column loop only when it has more than one iteration: staged at i0
    the box is 1 column (not vectorized), at r0 it is 8 per phase (vectorized)."""
    text = PADDED.replace("N", "16").replace("I", "8").replace("R", "3").replace("P", "1")
    module = parse_module(text)
    cache_read_deinterleaved(module, "k", at, "x")
    loops = {lp.loop_name: lp for lp in module.walk() if isinstance(lp, ForOp)}
    assert loops["x_q_in0"].trip_count == 2 and loops["x_q_in1"].trip_count == columns
    assert (loops["x_q_in1"].vectorize is not None) == (columns > 1)


@pytest.mark.parametrize("m, n, tile", [(25, 16, (5, 16)), (75, 10, (15, 10)), (26, 32, (2, 32))])
def test_gemm_tile_search_keeps_within_the_row_and_accumulator_limits(m, n, tile):
    """default.py:319: the fallback tile search tries rows up to min(M, MAX_MR (24),
    ACC_VECTORS // vectors per row) only: M = 25 or 75 never take a 25-row tile, M = 26
    at 2 vectors a row (12 rows at most) not 13."""
    assert default._gemm_tile(m, n) == tile


def test_a_tuning_log_looks_records_up_by_their_exact_target(tmp_path):
    """tuning_log.py:253: `for_kernel` returns the records of the signature on the asked
    target only (the opencl record of the same kernel is not one of the c target's)."""
    from dlpc.passes.schedule.tuning_log import TuningLog

    line = '{"sig": "s", "kernel": "k", "target": "%s", "script": "a", "ok": true, "time": 1.0}\n'
    path = tmp_path / "t.jsonl"
    path.write_text(line % "c" + line % "opencl")
    log = TuningLog(str(path))
    assert [r.target for r in log.for_kernel("s", "c")] == ["c"]
    assert [r.target for r in log.for_kernel("s", "opencl")] == ["opencl"]


# y[I, J] = x[I, J] under loops i > j: a copy along rows (I, J = i, j) or along columns
COPY = """
func.func @main(%x: memref<4x4xf32>, %y: memref<4x4xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      loop.for %j = 0 to 4 step 1 {name = "i1"} {
        %v = memref.load %x[%I, %J] : memref<4x4xf32>
        memref.store %v, %y[%I, %J] : memref<4x4xf32>
      }
    }
  }
  func.return
}"""


def test_a_copy_along_columns_has_another_kernel_signature():
    """tuning_log.py:139: the signature numbers each loop's variable where the loop
    opens, so a copy along rows and one along columns (x[i, j] vs x[j, i], y alike)
    differ (numbered at their first use instead, both would read `x[v1, v2]`)."""
    from dlpc.passes.schedule.tuning_log import kernel_signature

    same = COPY.replace("%I", "%i").replace("%J", "%j")
    swapped = COPY.replace("%I", "%j").replace("%J", "%i")
    (a,) = kernels(parse_module(same))
    (b,) = kernels(parse_module(swapped))
    assert kernel_signature(a) != kernel_signature(b)


@pytest.mark.parametrize("b_transposed", [True, False])
def test_a_contiguous_reduction_reads_every_varying_load_along_its_last_index(b_transposed):
    """default.py:185: a row reduction needs every load varying along r to read along its
    last index: a[b, i, r] * w[j, r] does, a[b, i, r] * w[r, j] (down w's columns) not."""
    (kernel,) = kernels(parse_module(_linear(1, 4, 16, 32, b_transposed)))
    nest = analyse(kernel)
    assert nest is not None
    assert default.contiguous_reduction(kernel, nest) == b_transposed


def test_a_batch_staged_over_conv_pack_bytes_is_not_batched():
    """conv.py:168: a batch is staged at once (one parallel (image, row) loop) only while
    N x the bytes staged per image <= CONV_PACK_BYTES (8 MiB): 2 images of 16 x 258 x 258
    floats (4.26 MB each) are not (no split of the batch loop)."""
    from dlpc.passes.schedule.conv import conv_tile_script

    kernel, nest = _conv_kernel("2x16x258x258", "8x16x3x3", "2x8x128x128", stride=2)
    script = conv_tile_script(kernel, nest, threads=1).splitlines()
    assert not [ln for ln in script if ln.startswith(f"split {kernel.sym}/{nest.spatial[0]} ")]
    kernel, nest = _conv_kernel("2x4x34x34", "8x4x3x3", "2x8x16x16", stride=2)
    script = conv_tile_script(kernel, nest, threads=1).splitlines()
    assert [ln for ln in script if ln.startswith(f"split {kernel.sym}/{nest.spatial[0]} ")]


def test_a_one_row_conv_keeps_its_channel_block_by_whole_vectors():
    """conv.py:121: the ragged-row rule (a tile counted in GCC's vector pieces) is for
    outputs of more than one row; a one-row output 28 wide counts ceil(28 / 16) = 2
    vectors, so its 24 channels go in blocks of 24 // 2 = 12 (counted as the 3 pieces
    16 + 8 + 4, they would go in blocks of 8)."""
    from dlpc.passes.schedule.conv import conv_tile_script

    kernel, nest = _conv_kernel("1x2x3x30", "24x2x3x3", "1x24x1x28")
    script = conv_tile_script(kernel, nest).splitlines()
    c = nest.spatial[1]
    assert f"split {kernel.sym}/{c} by 12 -> {c}o, {c}i" in script
