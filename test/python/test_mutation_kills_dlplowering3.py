"""Tests written against the DLP lowering's decisions (issue 35, bench/mutation.py --area
dlp-lowering, third round: an exploration sample drawn before the scoring one, and
loop_to_dlp read rule by rule): hand-written loop kernels lowered for the `tiny` target,
the plan's choice pinned with its reason (the `dlpc.scalar` reason `dlpc --stats`
prints, the tasks, the tiles) and run on the simulator against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline
from dlpc.passes.pipeline import parse_module


def close(out, ref):
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


MAIN = """
func.func @main(%x: memref<64xTY>, %y: memref<64xTY>, %out: memref<OUTxTY>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    BODY
  }
  func.return
}"""

ADD = """loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      %a = memref.load %x[%i] : memref<64xTY>
      %b = memref.load %y[%i] : memref<64xTY>
      %s = arith.addf %a, %b : TY
      memref.store %s, %out[%i] : memref<64xTY>
    }"""

# x read backwards (index 63 - i: no tile of x follows the work loop, x is loaded whole)
REVERSED = """loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      %c63 = arith.constant 63 : index
      %j = arith.subi %c63, %i : index
      %a = memref.load %x[%j] : memref<64xTY>
      %b = memref.load %y[%i] : memref<64xTY>
      %s = arith.addf %a, %b : TY
      memref.store %s, %out[%i] : memref<64xTY>
    }"""

# a sum of x into out[0]: no loop writes disjoint parts of the output
SUM = """%c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : TY
    memref.store %zero, %out[%c0] : memref<1xTY>
    loop.for %i = 0 to 64 step 1 {name = "r0", reduction} {
      %a = memref.load %x[%i] : memref<64xTY>
      %o = memref.load %out[%c0] : memref<1xTY>
      %s = arith.addf %a, %o : TY
      memref.store %s, %out[%c0] : memref<1xTY>
    }"""

KERNELS = {"add": (ADD, 64), "reversed": (REVERSED, 64), "sum": (SUM, 1)}


def _module(kernel: str, ty: str = "f32"):
    body, out = KERNELS[kernel]
    text = MAIN.replace("BODY", body).replace("OUT", str(out)).replace("TY", ty)
    return parse_module(text)


def _lowered(kernel: str, ty: str = "f32", **options):
    module = _module(kernel, ty)
    pipeline.run("loop-to-dlp", module, pipeline.PipelineOptions(), target_desc="tiny", **options)
    (k,) = [op for op in module.walk() if op.name == "dlp.kernel"]
    reason = k.attributes.get("dlpc.scalar")
    return (reason.data if reason is not None else None), k.attributes["tasks"].value.data


@pytest.mark.parametrize(
    "kernel, ty, options, reason, tasks",
    [
        ("add", "f32", {}, None, 2),  # dlp.add on both of tiny's cores
        ("add", "f32", {"intrinsics": False}, "intrinsics are off", 2),
        # intrinsics off is the reason whatever else would stop them
        ("add", "f64", {"intrinsics": False}, "intrinsics are off", 2),
        ("add", "f64", {}, "a buffer is not f32", 2),
        ("reversed", "f32", {}, "no intrinsic pattern matches its loop nest", 2),
        (
            "sum",
            "f32",
            {},
            "no loop whose iterations write disjoint parts of its outputs (one task)",
            1,
        ),
        ("add", "f32", {"multicore": False}, None, 1),
    ],
)
def test_scalar_reason_and_tasks(kernel, ty, options, reason, tasks):
    """The reason a kernel's compute stays scalar loops (`scalar_reason`, what `dlpc
    --stats` lists), checked in its order: no work loop, intrinsics off, a non-f32
    buffer, no pattern; and the tasks (one without a work loop or multicore)."""
    assert _lowered(kernel, ty, **options) == (reason, tasks)


@pytest.mark.parametrize("kernel", ["add", "reversed", "sum"])
def test_scalar_and_intrinsic_kernels_run_right(kernel):
    module = _module(kernel)
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    (out,) = compile_dlp(module, "tiny", name=f"k_{kernel}")(x, y)
    ref = {"add": x + y, "reversed": x[::-1] + y, "sum": np.array([x.sum()])}[kernel]
    close(out, ref)


LINEAR6 = "model m(x: f32[6, 256]) {\n  param w: f32[512, 256] = kaiming(seed=1)\n  return relu(linear(x, w))\n}\n"


@pytest.mark.parametrize("tasks, stagers", [(6, 1), (3, 3), (8, 4), (4, 4)])
def test_whole_buffers_staged_by_shares_or_by_core_0(tmp_path, monkeypatch, tasks, stagers):
    """_stagers: a linear's weight staged once per cluster in SRAM (the dlp target, 4
    cores a cluster) is copied by every core of the cluster, a DMA-aligned share each,
    when the launch's clusters are alike (8 tasks: 2 full clusters; 3 or 4 tasks: one
    cluster, every core with a task), else by core 0 alone (6 tasks: a full cluster and
    one of 2). Each split computes the right rows, and `_estimate` (which divides the
    staging among the stagers) is the simulated time."""
    from dlpc.passes.lower import loop_to_dlp as lower

    path = tmp_path / "m.dlpc"
    path.write_text(LINEAR6)
    module = pipeline.lower(
        dlpc.load(path).module, "loop", pipeline.PipelineOptions(schedule=False)
    )
    estimates = {}

    def forced(plan, double_buffer, flops):
        plan.tasks = tasks
        assert lower._choose_tile(plan, double_buffer) and plan.sram
        estimates["cycles"] = lower._estimate(plan, flops)
        estimates["stagers"] = lower._stagers(plan)

    monkeypatch.setattr(lower, "_choose_clusters", forced)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    w = rng.standard_normal((512, 256)).astype(np.float32)
    f = compile_dlp(module, None, name=f"stage{tasks}")
    (out,) = f(x, params=[w])
    close(out, np.maximum(x @ w.T, 0))
    (rep,) = f.report
    assert rep.tasks == tasks and estimates["stagers"] == stagers
    assert estimates["cycles"] == pytest.approx(rep.cycles, rel=0.01)


def _nram_bytes(kernel) -> int:
    """Bytes of the NRAM buffers a dlp.kernel allocates."""
    from xdsl.dialects import memref

    total = 0
    for op in kernel.walk():
        if isinstance(op, memref.AllocOp | memref.AllocaOp) and "nram" in str(op.memref.type):
            t = op.memref.type
            total += int(np.prod(t.get_shape())) * (t.get_element_type().bitwidth // 8)
    return total


@pytest.mark.parametrize(
    "expr, cols",
    [
        ("reduce_sum(x, axes=[1])", 64),
        ("reduce_max(x, axes=[1])", 64),
        # an epilogue of vector ops on the row results: their temporaries count too
        ("exp(reduce_max(x, axes=[1]) * 2.0) + 1.0", 64),
        ("sqrt(reduce_sum(x * x, axes=[1]) + 1.0) * 3.0", 60),
    ],
)
def test_a_row_reduction_tile_is_the_largest_that_fits_nram(tmp_path, expr, cols):
    """dlp_select/reduce.py:59 (`full * (temps + 1)` -> `full << (temps + 1)`): the rows
    a reduction's tile takes are the most whose buffers fit tiny's 4 KiB of NRAM: x's
    rows and the staged row copy (`row_nram`) grow by a row of `cols` floats each, so a
    tile one row larger would not fit (an overcounted scratch halves the tile)."""
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.dialects import dlp
    from dlpc.targets.dlp import resolve

    path = tmp_path / "m.dlpc"
    path.write_text(f"model m(x: f32[256, {cols}]) {{\n  return {expr}\n}}\n")
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(schedule=False))
    lowered = lower_to_dlp(module.clone(), "tiny")
    (kernel,) = [
        op for op in lowered.walk() if isinstance(op, dlp.KernelOp) and "dlp.reduce_" in str(op)
    ]
    cap, row = resolve("tiny").capacity("nram"), 2 * cols * 4
    assert cap - row - 64 < _nram_bytes(kernel) <= cap
    inputs = dlpc.api.random_inputs(model)
    (out,) = compile_dlp(module, "tiny", name="rows")(*inputs, params={})
    close(out, dlpc.api.reference(model, inputs)[0])


# max_pool2d(x, kernel=2, strides=2) over [1, 2, 8, 8] as te-to-loop writes it, but the
# row index 2 i2 + r0 computed as (2 i2 + r0 + i3) - i3: i3's coefficient cancels
POOL_CANCELLING = """
func.func @main(%x: memref<1x2x8x8xf32>, %out0: memref<1x2x4x4xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "max_pool2d_0" {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 2 step 1 {name = "i1", parallel} {
        loop.for %i2 = 0 to 4 step 1 {name = "i2"} {
          loop.for %i3 = 0 to 4 step 1 {name = "i3"} {
            %acc = memref.alloca() : memref<f32>
            %0 = arith.constant 0xff800000 : f32
            memref.store %0, %acc[] : memref<f32>
            loop.for %r0 = 0 to 2 step 1 {name = "r0", reduction} {
              loop.for %r1 = 0 to 2 step 1 {name = "r1", reduction} {
                %1 = arith.constant 2 : index
                %2 = arith.muli %i2, %1 : index
                %3 = arith.addi %2, %r0 : index
                %a = arith.addi %3, %i3 : index
                %b = arith.subi %a, %i3 : index
                %4 = arith.constant 2 : index
                %5 = arith.muli %i3, %4 : index
                %6 = arith.addi %5, %r1 : index
                %7 = memref.load %x[%i0, %i1, %b, %6] : memref<1x2x8x8xf32>
                %8 = memref.load %acc[] : memref<f32>
                %9 = arith.maximumf %8, %7 : f32
                memref.store %9, %acc[] : memref<f32>
              }
            }
            %max = memref.load %acc[] : memref<f32>
            memref.store %max, %out0[%i0, %i1, %i2, %i3] : memref<1x2x4x4xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def test_a_window_index_whose_terms_cancel_is_still_the_pool_window():
    """_matching.py:82 (`v or k == 1` -> `v or k < 1`): a linear form drops the loop
    variables whose coefficients cancel ((2 i2 + r0 + i3) - i3 is 2 i2 + r0), so the
    pooling window is recognised (dlp.pool) and pools the right rows."""
    module = parse_module(POOL_CANCELLING)
    lowered = module.clone()
    pipeline.run("loop-to-dlp", lowered, pipeline.PipelineOptions(), target_desc="tiny")
    assert "dlp.pool" in str(lowered)
    x = np.random.default_rng(2).standard_normal((1, 2, 8, 8)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="pool_cancel")(x)
    close(out, x.reshape(1, 2, 4, 2, 4, 2).max(axis=(3, 5)))


# out[i] = exp(sum over j of x[i, j]) * 2 + 1 in one kernel: a row reduction with a
# vector epilogue of three ops (two temporaries of a row each)
ROWSUM_EPILOGUE = """
func.func @main(%x: memref<ROWSx16xf32>, %out: memref<ROWSxf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to ROWS step 1 {name = "i0", parallel} {
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r = 0 to 16 step 1 {name = "r0", reduction} {
        %v = memref.load %x[%i, %r] : memref<ROWSx16xf32>
        %o = memref.load %acc[] : memref<f32>
        %s = arith.addf %o, %v : f32
        memref.store %s, %acc[] : memref<f32>
      }
      %t = memref.load %acc[] : memref<f32>
      %e = math.exp %t : f32
      %two = arith.constant 2.000000e+00 : f32
      %m = arith.mulf %e, %two : f32
      %one = arith.constant 1.000000e+00 : f32
      %y = arith.addf %m, %one : f32
      memref.store %y, %out[%i] : memref<ROWSxf32>
    }
  }
  func.return
}"""


@pytest.mark.parametrize("rows", [512, 256])
def test_a_row_reduction_epilogue_counts_its_temporaries_in_nram(rows):
    """reduce.py:59 (`rows * (temps + 1)` -> `rows // (temps + 1)`): a reduction's
    epilogue of vector ops needs a row-tile scratch per temporary beside the row results;
    with them counted the tile's buffers fit tiny's 4 KiB of NRAM (the simulator refuses
    an overrun) and the results are right."""
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.dialects import dlp
    from dlpc.targets.dlp import resolve

    module = parse_module(ROWSUM_EPILOGUE.replace("ROWS", str(rows)))
    (kernel,) = [
        op for op in lower_to_dlp(module.clone(), "tiny").walk() if isinstance(op, dlp.KernelOp)
    ]
    assert "dlp.reduce_sum" in str(kernel) and "dlpc.scalar" not in kernel.attributes
    assert _nram_bytes(kernel) <= resolve("tiny").capacity("nram")
    x = np.random.default_rng(6).standard_normal((rows, 16)).astype(np.float32) * 0.1
    (out,) = compile_dlp(module, "tiny", name=f"rowexp{rows}")(x)
    close(out, np.exp(x.sum(axis=1)) * 2 + 1)


# out[i, j] = x[i, j] * s[1, 2]: one element of a small whole buffer, at constant indices
SCALAR_AT = """
func.func @main(%x: memref<64x16xf32>, %s: memref<3x4xf32>, %out: memref<64x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 64 step 1 {name = "i0", parallel} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %c2 = arith.constant 2 : index
        %a = memref.load %x[%i, %j] : memref<64x16xf32>
        %b = memref.load %s[%c1, %c2] : memref<3x4xf32>
        %m = arith.mulf %a, %b : f32
        memref.store %m, %out[%i, %j] : memref<64x16xf32>
      }
    }
  }
  func.return
}"""


def test_a_constant_element_of_a_whole_buffer_is_a_scalar_operand():
    """elementwise.py:245 (`shape[j + 1:]` -> `shape[j // 1:]`): s[1, 2] of a 3 x 4
    buffer is element 1 * 4 + 2 = 6 of its NRAM copy, the scalar of dlp.mul_scalar."""
    module = parse_module(SCALAR_AT)
    lowered = module.clone()
    pipeline.run("loop-to-dlp", lowered, pipeline.PipelineOptions(), target_desc="tiny")
    assert "dlpc.scalar" not in str(lowered)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    s = rng.standard_normal((3, 4)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="scalar_at")(x, s)
    close(out, x * s[1, 2])


EW_CASES = {
    # vector-vector ops of every kind in one expression (graph fusion off: one kernel
    # each), a scalar on either side
    "vec": (
        "x: f32[64, 32], y: f32[64, 32]",
        "max(x, y) * min(x, y) / (2.0 - y)",
    ),
    # a bias per column: the cycle ops (the bias repeats every row)
    "bias-row": ("x: f32[64, 32], b: f32[32]", "relu(b + x) * b - (b - x) - b"),
    # a constant on either side of each op
    "scalar": ("x: f32[64, 32]", "min(x, 0.5) * max(x, -0.5) - x / 4.0"),
    # a value per row broadcast along it: vector-scalar ops per row
    "bias-col": ("x: f32[64, 32], c: f32[64, 1]", "(x - c) * c + c"),
}


@pytest.mark.parametrize("case", EW_CASES)
def test_elementwise_kernels_on_intrinsics_match_numpy(tmp_path, case):
    """Elementwise kernels on tiny: each binary op takes its vector, cycle or
    vector-scalar intrinsic by its operands' kinds (vec, a bias repeating per row, a
    value per row, a constant) and computes what numpy does."""
    from dlpc.backends.dlp_c import lower_to_dlp

    args, expr = EW_CASES[case]
    path = tmp_path / "m.dlpc"
    path.write_text(f"model m({args}) {{\n  return {expr}\n}}\n")
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(schedule=False))
    lowered = lower_to_dlp(module.clone(), "tiny")
    kernels = [op for op in lowered.walk() if op.name == "dlp.kernel"]
    assert kernels and not [k.sym for k in kernels if "dlpc.scalar" in k.attributes]
    inputs = dlpc.api.random_inputs(model)
    (out,) = compile_dlp(module, "tiny", name=case.replace("-", "_"))(*inputs, params={})
    close(out, dlpc.api.reference(model, inputs)[0])


# out[i, j] = x[i + (j & 1), j]: the row offset (j & 1) is 0 or 1, an interval loop-to-dlp
# does not bound (andi): x is no tile of rows i .. i + n - 1
ANDI_ROWS = """
func.func @main(%x: memref<33x16xf32>, %out: memref<32x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 32 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %o = arith.andi %j, %c1 : index
        %r = arith.addi %i, %o : index
        %a = memref.load %x[%r, %j] : memref<33x16xf32>
        memref.store %a, %out[%i, %j] : memref<32x16xf32>
      }
    }
  }
  func.return
}"""


def test_a_row_offset_of_unknown_range_loads_the_buffer_whole():
    """loop_to_dlp.py:181 (`and args[0].lo >= 0` -> `or`): only a remainder by a
    positive constant of a non-negative value is bounded (to [0, c - 1]); `j & 1` is of
    unknown range to the interval analysis, so x is read whole (every row any tile may
    reach), and out[i, j] = x[i + (j & 1), j] is right."""
    x = np.random.default_rng(12).standard_normal((33, 16)).astype(np.float32)
    (out,) = compile_dlp(parse_module(ANDI_ROWS), "tiny", name="andi_rows")(x)
    rows = np.arange(32)[:, None] + (np.arange(16) & 1)[None, :]
    close(out, x[rows, np.arange(16)[None, :]])


def test_a_row_offset_by_a_remainder_is_a_halo_of_one_row():
    """loop_to_dlp.py:180 (`args[1].lo == args[1].hi > 0` -> `== 0`): j % 2 of j >= 0 is
    within [0, 1], so x[i + j % 2, j] is tiled by rows with one halo row per tile (each
    task reads its 16 rows and the next, not all 33 rows of x), and is right."""
    text = ANDI_ROWS.replace("arith.andi %j, %c1", "arith.remsi %j, %c2").replace(
        "%c1 = arith.constant 1 : index", "%c2 = arith.constant 2 : index"
    )
    x = np.random.default_rng(14).standard_normal((33, 16)).astype(np.float32)
    f = compile_dlp(parse_module(text), "tiny", name="rem_rows")
    (out,) = f(x)
    rows = np.arange(32)[:, None] + (np.arange(16) % 2)[None, :]
    close(out, x[rows, np.arange(16)[None, :]])
    (rep,) = f.report
    assert rep.tasks == 2 and rep.bytes["gdram->nram"] < 2 * 33 * 16 * 4


INDEX = """
func.func @main(%x: memref<64xf32>, %out: memref<8x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %c2 = arith.constant 2 : index
        %c3 = arith.constant 3 : index
        %c4 = arith.constant 4 : index
        %c20 = arith.constant 20 : index
        %cm2 = arith.constant -2 : index
        %cm4 = arith.constant -4 : index
        EXPR
        %v = memref.load %x[%e] : memref<64xf32>
        memref.store %v, %out[%i, %j] : memref<8x16xf32>
      }
    }
  }
  func.return
}"""

INF = float("inf")


@pytest.mark.parametrize(
    "expr, form",
    [
        ("%e = arith.remsi %j, %c4 : index", (0, 0, 3)),
        ("%e = arith.divsi %j, %c4 : index", (0, 0, 3)),
        ("%d = arith.subi %j, %c20 : index\n%e = arith.divsi %d, %c4 : index", (0, -5, -2)),
        ("%d = arith.subi %j, %c1 : index\n%e = arith.remsi %d, %c4 : index", (0, -INF, INF)),
        ("%e = arith.remsi %j, %cm4 : index", (0, -INF, INF)),
        ("%e = arith.andi %j, %c1 : index", (0, -INF, INF)),
        ("%e = arith.maxsi %j, %c3 : index", (0, 0, 15)),
        ("%e = arith.minsi %j, %c20 : index", (0, 0, 20)),
        ("%e = arith.subi %c3, %j : index", (0, -12, 3)),
        ("%e = arith.muli %j, %cm2 : index", (0, -30, 0)),
        ("%e = arith.muli %j, %j : index", (0, 0, 225)),
        ("%d = arith.muli %i, %c2 : index\n%e = arith.addi %d, %j : index", (2, 0, 15)),
        ("%d = arith.muli %c3, %i : index\n%e = arith.subi %d, %j : index", (3, -15, 0)),
        ("%e = arith.muli %i, %j : index", None),
    ],
)
def test_index_intervals_of_loop_to_dlp(expr, form):
    """loop_to_dlp.IndexAnalysis: an index as a * i + r, i the work loop, r within
    [lo, hi] over j in [0, 15] (remainders and quotients by positive constants of
    non-negative values bounded, other ops of independent values unbounded, products
    of intervals by their corners); a product of two loop variables is no such form."""
    from dlpc.passes.lower.loop_to_dlp import IndexAnalysis

    module = parse_module(INDEX.replace("EXPR", expr.replace("\n", "\n        ")))
    loops = {op.loop_name: op for op in module.walk() if op.name == "loop.for"}
    (load,) = [op for op in module.walk() if op.name == "memref.load"]
    analysis = IndexAnalysis(loops["i0"].induction_var, {loops["i1"].induction_var: (0, 15)})
    got = analysis(load.indices[0])
    assert (None if got is None else (got.a, got.lo, got.hi)) == form


# out[i, j] = x[i, (j + 2^63) - 2^63]: an index constant no int64 holds (the sum wraps)
BIG_CONSTANT = """
func.func @main(%x: memref<64x16xf32>, %out: memref<64x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %big = arith.constant 9223372036854775808 : index
        %a = arith.addi %j, %big : index
        %b = arith.subi %a, %big : index
        %v = memref.load %x[%i, %b] : memref<64x16xf32>
        memref.store %v, %out[%i, %j] : memref<64x16xf32>
      }
    }
  }
  func.return
}"""


def test_a_copy_with_an_index_constant_past_int64_is_no_direct_copy():
    """_dlp_copy.py:129 (`value < 2**63` -> `< 2 << 63`): the copy planner evaluates
    index arithmetic in int64; a constant of 2^63 is beyond it, so the kernel is no
    direct GDRAM copy (planned through NRAM tiles, its index the affine j) and copies x."""
    x = np.random.default_rng(1).standard_normal((64, 16)).astype(np.float32)
    f = compile_dlp(parse_module(BIG_CONSTANT), "tiny", name="big_constant")
    (out,) = f(x)
    close(out, x)
    assert "gdram->gdram" not in f.report[0].bytes


# out[n, c, h, w] = x[n, c, h, w] + b[0, c]: a bias per channel held as a 1 x 4 buffer
BIAS_2D = """
func.func @main(%x: memref<2x4x4x16xf32>, %b: memref<1x4xf32>, %out: memref<2x4x4x16xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %n = 0 to 2 step 1 {name = "i0", parallel} {
      loop.for %c = 0 to 4 step 1 {name = "i1"} {
        loop.for %h = 0 to 4 step 1 {name = "i2"} {
          loop.for %w = 0 to 16 step 1 {name = "i3"} {
            %c0 = arith.constant 0 : index
            %v = memref.load %x[%n, %c, %h, %w] : memref<2x4x4x16xf32>
            %bb = memref.load %b[%c0, %c] : memref<1x4xf32>
            %s = arith.addf %v, %bb : f32
            memref.store %s, %out[%n, %c, %h, %w] : memref<2x4x4x16xf32>
          }
        }
      }
    }
  }
  func.return
}"""


def test_a_bias_per_channel_with_a_leading_unit_dim_is_a_row_operand_of_the_nest():
    """elementwise.py:233 (`len(idx) - (j - 1)` -> `len(idx) % (j - 1)`): b[0, c] is a
    bias per channel (its leading index 0) repeating every image, a row operand of the
    whole nest: the images are the work loop (no image-by-image outer plan, which the
    simulator runs slower), and every plane gets its channel's b."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.lower.loop_to_dlp import plan_kernel
    from dlpc.targets.dlp import resolve

    module = parse_module(BIAS_2D)
    (kernel,) = kernels(module.clone())
    plan = plan_kernel(kernel, resolve("tiny"), True, True, True)
    assert plan.selection is not None and plan.outer is None and plan.work.loop_name == "i0"
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 4, 4, 16)).astype(np.float32)
    b = rng.standard_normal((1, 4)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="bias2d")(x, b)
    close(out, x + b[0][None, :, None, None])


@pytest.mark.parametrize(
    "rows, cols, keep, direct",
    [
        (8, 16, 4, True),  # 8 pieces of 4 on one task: MAX_PIECES_PER_TASK
        (9, 16, 4, False),  # 9 short pieces: staged through NRAM instead
        (64, 32, 16, True),  # 32 pieces a task averaging 16 elements: long pieces
        (64, 32, 15, False),  # ... averaging 15: too short for so many
        (128, 32, 16, True),  # 64 pieces a task: MAX_LONG_PIECES_PER_TASK
        (130, 32, 16, False),  # 65
    ],
)
def test_a_slice_is_direct_copies_while_its_pieces_are_few_or_long(
    tmp_path, rows, cols, keep, direct
):
    """_dlp_copy.lower_copy on tiny (2 cores, a task per 64 elements): x[:, :keep] is
    one piece per row; it becomes direct GDRAM2GDRAM copies when each task copies at
    most MAX_PIECES_PER_TASK pieces, or at most MAX_LONG_PIECES_PER_TASK averaging
    MIN_PIECE_ELEMENTS or more (one DMA latency each beats staging through NRAM)."""
    from test_dlp import _run_small

    rep, _ = _run_small(
        tmp_path,
        f"slice(x, starts=[0], ends=[{keep}], axes=[1])",
        "tiny",
        f"x: f32[{rows}, {cols}]",
    )
    assert ("gdram->gdram" in rep.bytes) is direct
