"""Tests written against surviving mutants of the DLP lowering, its C emitter and the
simulator (issue 35, bench/mutation.py --area dlp-lowering / dlp-c-sim): small models
lowered for the `tiny` target (tiles, ping-pong) and run on the simulator against the
numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from test_dlp import _run_small, close

import dlpc
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline


@pytest.mark.parametrize(
    "expr, args",
    [
        # x does not fit tiny's NRAM whole: a tile of n output rows of a stride-2 window
        # reads its rows 2t .. 2t + 2n, inside x (no clamp)
        ("max_pool2d(x, kernel=3, strides=2)", "x: f32[1, 1, 41, 41]"),
        # padded: rows t - 1 .. t + n, clamped to x at the first and last tiles
        ("max_pool2d(x, kernel=3, strides=1, pads=[1, 1, 1, 1])", "x: f32[1, 1, 41, 41]"),
        ("avg_pool2d(x, kernel=3, strides=1, pads=[1, 1, 1, 1])", "x: f32[1, 1, 41, 41]"),
        # x whole in NRAM: not the tiled window form
        ("max_pool2d(x, kernel=2, strides=2)", "x: f32[1, 1, 8, 8]"),
    ],
    ids=["strided", "padded-max", "padded-avg", "whole"],
)
def test_windows_tiled_by_rows(tmp_path, expr, args):
    _run_small(tmp_path, expr, "tiny", args)


def test_batched_matmul_runs_as_one_intrinsic_per_batch_entry(tmp_path):
    """matmul over a batch with aligned 8x16 / 16x8 entries selects __bang_matmul (the
    batched form), and the relu after it runs as its epilogue."""
    args = "a: f32[3, 8, 16], b: f32[3, 16, 8]"
    rep, c = _run_small(tmp_path, "relu(matmul(a, b))", "tiny", args)
    assert "__bang_matmul(" in c and rep.intrinsic_cycles > 0


PREFIX = """
func.func @main(%x: memref<2x64x16xf32>, %out: memref<64x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %a = memref.load %x[%c1, %i, %j] : memref<2x64x16xf32>
        %two = arith.constant 2.0 : f32
        %m = arith.mulf %a, %two : f32
        memref.store %m, %out[%i, %j] : memref<64x16xf32>
      }
    }
  }
  func.return
}"""


def test_rows_tiled_under_a_constant_prefix():
    """x[1, i, :] tiled by rows i: each tile starts at x's second 64x16 block."""
    module = pipeline.parse_module(PREFIX)
    x = np.random.default_rng(3).standard_normal((2, 64, 16)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="prefix")(x)
    close(out, x[1] * 2)


def test_a_copy_takes_a_task_per_64_elements(tmp_path):
    """A GDRAM-to-GDRAM copy is split over tiny's 2 cores only when each gets >= 64
    elements (MIN_ELEMENTS_PER_TASK): 126 elements stay on one task, 128 take two."""
    rep, _ = _run_small(tmp_path, "reshape(x, shape=[126])", "tiny", "x: f32[2, 63]")
    assert set(rep.bytes) == {"gdram->gdram"} and rep.tasks == 1
    rep, _ = _run_small(tmp_path, "reshape(x, shape=[128])", "tiny", "x: f32[2, 64]")
    assert rep.tasks == 2


SHIFTED = """
func.func @main(%x: memref<68x16xf32>, %out: memref<64x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c3 = arith.constant 3 : index
        %c1 = arith.constant 1 : index
        %p = arith.addi %i, %c3 : index
        %r = arith.subi %p, %c1 : index
        %a = memref.load %x[%r, %j] : memref<68x16xf32>
        %two = arith.constant 2.0 : f32
        %m = arith.mulf %a, %two : f32
        memref.store %m, %out[%i, %j] : memref<64x16xf32>
      }
    }
  }
  func.return
}"""


def test_rows_read_through_a_subtraction():
    """2 * x[i + 3 - 1, :] tiled by rows (not a copy): the row interval of a difference is [lo - hi', hi - lo']."""
    module = pipeline.parse_module(SHIFTED)
    x = np.random.default_rng(4).standard_normal((68, 16)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="shifted")(x)
    close(out, x[2:66] * 2)


GEMV_SHIFTED = """
func.func @main(%x: memref<32xf32>, %w: memref<65x32xf32>, %out: memref<64xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "gemv" {
    loop.for %i0 = 0 to 64 step 1 {name = "i0"} {
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction} {
        %c1 = arith.constant 1 : index
        %n = arith.addi %i0, %c1 : index
        %a = memref.load %x[%r0] : memref<32xf32>
        %b = memref.load %w[%n, %r0] : memref<65x32xf32>
        %p = arith.mulf %a, %b : f32
        %o = memref.load %acc[] : memref<f32>
        %q = arith.addf %o, %p : f32
        memref.store %q, %acc[] : memref<f32>
      }
      %s = memref.load %acc[] : memref<f32>
      memref.store %s, %out[%i0] : memref<64xf32>
    }
  }
  func.return
}"""


def test_gemv_over_rows_one_past_the_work_loop():
    """out[n] = x . w[n + 1]: w's rows shifted by one from the work loop, tiled."""
    module = pipeline.parse_module(GEMV_SHIFTED)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(32).astype(np.float32)
    w = rng.standard_normal((65, 32)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="gemv_shifted")(x, w)
    close(out, w[1:] @ x)


def test_kernel_model_adds_compute_and_transfer():
    """model_kernel on hand-made counters: compute = intrinsic cycles + scalar ops at the
    scalar rate, transfer = DMA latency + GDRAM and on-chip bytes at their bandwidths;
    single buffering adds them, ping-pong hides the shorter."""
    from dlpc.backends.runtime.dlp_sim import NUM_COUNTERS, SPACES, model_kernel
    from dlpc.targets.dlp import resolve

    desc = resolve("tiny")
    c = [0.0] * NUM_COUNTERS
    g2n = SPACES.index("gdram") * 4 + SPACES.index("nram")
    n2w = SPACES.index("nram") * 4 + SPACES.index("wram")
    c[g2n], c[n2w] = 4096.0, 1024.0
    c[16], c[17], c[18], c[19] = 3, 500.0, 2000.0, 999.0  # DMAs, icycles, iops, scalar ops
    compute = 500.0 + 999.0 / desc.scalar_ops_per_cycle
    transfer = (
        3 * desc.dma_latency_cycles
        + 4096.0 / (desc.gdram_bandwidth_gbs / desc.clock_ghz)
        + 1024.0 / (desc.sram_bandwidth_gbs / desc.clock_ghz)
    )
    single = model_kernel("k", "o", 1, False, [c], desc)
    assert single.compute_cycles == pytest.approx(compute)
    assert single.transfer_cycles == pytest.approx(transfer)
    assert single.cycles == pytest.approx(compute + transfer)
    assert single.ops == 2999.0 and single.bytes == {"gdram->nram": 4096.0, "nram->wram": 1024.0}
    double = model_kernel("k", "o", 1, True, [c], desc)
    assert double.cycles == pytest.approx(max(compute, transfer))


def test_report_total_line_sums_the_kernels():
    from dlpc.backends.runtime.dlp_sim import KernelReport, format_report

    reps = [KernelReport("a", "o", 1, False, seconds=1.5, ops=10.0)]
    reps.append(KernelReport("b", "o", 2, True, seconds=2.25, ops=5.0))
    assert (
        format_report(reps).splitlines()[-1]
        == "total: 2 kernels, 3750000.00 us simulated, 15 flops"
    )


STEP2 = """
func.func @main(%x: memref<8x16xf32>, %out: memref<8x8xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 2 {name = "i1"} {
        %a = memref.load %x[%i, %j] : memref<8x16xf32>
        %two = arith.constant 2.0 : f32
        %m = arith.mulf %a, %two : f32
        %c2 = arith.constant 2 : index
        %h = arith.divui %j, %c2 : index
        memref.store %m, %out[%i, %h] : memref<8x8xf32>
      }
    }
  }
  func.return
}"""


def test_a_loop_stepping_by_two_in_dlp_c():
    """A loop of step 2 inside a DLP kernel is `j += 2` in the emitted C, not `j++`."""
    module = pipeline.parse_module(STEP2)
    x = np.random.default_rng(6).standard_normal((8, 16)).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name="step2", intrinsics=False)(x)
    close(out, x[:, ::2] * 2)


def _nram_bytes(kernel) -> int:
    """Bytes of the NRAM buffers a dlp.kernel allocates (each alloc op once)."""
    from xdsl.dialects import memref

    total = 0
    for op in kernel.walk():
        if isinstance(op, memref.AllocOp | memref.AllocaOp) and "nram" in str(op.memref.type):
            t = op.memref.type
            total += int(np.prod(t.get_shape())) * (t.get_element_type().bitwidth // 8)
    return total


@pytest.mark.parametrize(
    "expr",
    ["reduce_sum(exp(x) * x, axes=[1])", "softmax(x, axis=1)", "relu(matmul(x, w))"],
    ids=["reduce-prologue", "softmax", "matmul-epilogue"],
)
def test_kernels_allocate_within_nram(tmp_path, expr):
    """The tile chosen from each selection's scratch_bytes leaves every kernel's NRAM
    buffers within tiny's 4096 bytes (the simulator does not check it)."""
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.dialects import dlp
    from dlpc.targets.dlp import resolve

    path = tmp_path / "m.dlpc"
    path.write_text(f"model m(x: f32[64, 48], w: f32[48, 16]) {{\n  return {expr}\n}}\n")
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(schedule=False))
    lowered = lower_to_dlp(module, "tiny")
    kernels = [op for op in lowered.walk() if isinstance(op, dlp.KernelOp)]
    assert kernels and all(_nram_bytes(k) <= resolve("tiny").capacity("nram") for k in kernels)


def _lowered_conv(tmp_path):
    """The 16-channel conv of test_dlp_select_window lowered to loop IR (it takes
    dlp.conv2d as it is), to be changed by hand into a nest that is no convolution."""
    from dlpc.backends.dlp_c import lower_to_dlp

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[1, 16, 8, 8]) {\n  param w: f32[16, 16, 3, 3] = kaiming(seed=1)\n"
        "  return conv2d(x, w, padding=1)\n}\n"
    )
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    assert any(op.name == "dlp.conv2d" for op in lower_to_dlp(module.clone()).walk())
    return model, module


def _scalar_loops_as_on_c(model, module, name):
    """The changed nest takes no dlp.conv2d and computes as the C backend does."""
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.backends.runtime.cbuild import CFunction

    assert not any(op.name == "dlp.conv2d" for op in lower_to_dlp(module.clone()).walk())
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    (ref,) = CFunction(module.clone(), name=name)(*inputs, params=weights)
    (out,) = compile_dlp(module, name=name)(*inputs, params=weights)
    close(out, ref)


def test_a_window_sum_of_differences_is_no_convolution(tmp_path):
    """sum(x - w) over the window (the product replaced) is not conv2d."""
    from xdsl.dialects import arith
    from xdsl.rewriter import Rewriter

    model, module = _lowered_conv(tmp_path)
    (mul,) = [op for op in module.walk() if isinstance(op, arith.MulfOp)]
    Rewriter.replace_op(mul, arith.SubfOp(*mul.operands))
    _scalar_loops_as_on_c(model, module, "window_sub")


def test_a_depthwise_conv_takes_the_conv_intrinsic(tmp_path):
    """groups == channels: output channel c reads input channel c (channel form {co: 1})."""
    from dlp_select_cases import lowered, matches_reference

    text = (
        "model m(x: f32[1, 16, 8, 8]) {\n  param w: f32[16, 1, 3, 3] = kaiming(seed=2)\n"
        "  return conv2d(x, w, padding=1, groups=16)\n}\n"
    )
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.conv2d"] == 1, ops
    matches_reference(model, module)


def test_report_seconds_are_cycles_at_the_clock(tmp_path):
    """A kernel's simulated time is its cycles over the description's clock."""
    from dlpc.targets.dlp import resolve

    rep, _ = _run_small(tmp_path, "relu(x)", "tiny", "x: f32[4, 64]")
    assert rep.cycles > 0
    assert rep.seconds == pytest.approx(rep.cycles / (resolve("tiny").clock_ghz * 1e9))
    peak = resolve("tiny").peak_ops_per_second()
    assert rep.utilisation == pytest.approx(rep.ops / (rep.seconds * peak))


def test_a_module_lowered_for_a_named_description_records_it(tmp_path):
    """lower_to_dlp(module, "tiny") records the description's name on @main, so that
    emitting the lowered module later without one targets tiny again."""
    from dlpc.backends.dlp_c import lower_to_dlp, module_target

    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[4, 64]) {\n  return relu(x)\n}\n")
    module = pipeline.lower(dlpc.load(path).module.clone(), "loop", pipeline.PipelineOptions())
    assert module_target(lower_to_dlp(module, "tiny")).name == "tiny"


def test_report_levels_and_table_of_a_known_kernel():
    """level_bytes counts a copy at both ends (GDRAM2GDRAM: read and written), and the
    table prints time in microseconds and utilisation in percent."""
    from dlpc.backends.runtime.dlp_sim import KernelReport, format_report

    rep = KernelReport("k", "graph.relu", 2, False)
    rep.bytes = {"gdram->nram": 100.0, "nram->gdram": 40.0, "gdram->gdram": 8.0, "nram->wram": 4.0}
    rep.seconds, rep.utilisation, rep.intrinsic_cycles = 0.5, 0.125, 7.0
    assert rep.level_bytes() == {"gdram": 156.0, "sram": 0.0, "nram": 144.0, "wram": 4.0}
    row = format_report([rep]).splitlines()[2].split()
    assert row[-3:] == ["7", "500000.00", "12.50"], row


CLUSTER_CASES = {
    # a 512 KiB weight each cluster stages in SRAM: compute-bound, fewer clusters win
    "linear": (
        "model m(x: f32[32, 256]) {\n  param w: f32[512, 256] = kaiming(seed=1)\n"
        "  return relu(linear(x, w))\n}\n",
        [(32, 256)],
        [(512, 256)],
        lambda x, w: np.maximum(x @ w.T, 0),
    ),
    # a bias row added to two tiled inputs: small tiles, the DMA latency of each of the
    # three tile copies dominates
    "bias": (
        "model m(x: f32[256, 64], y: f32[256, 64], b: f32[64]) {\n  return add(add(x, y), b)\n}\n",
        [(256, 64), (256, 64), (64,)],
        [],
        lambda x, y, b: x + y + b,
    ),
}


@pytest.mark.parametrize("case", CLUSTER_CASES)
def test_cluster_estimate_is_the_simulated_time_and_picks_the_fastest(tmp_path, monkeypatch, case):
    """Kernels on the dlp target (4 clusters of 4 cores) with a whole buffer each cluster
    stages in SRAM: `_estimate` is the simulator's model, so for every task count it
    gives the simulated cycles, and `_choose_clusters` keeps the task count the
    simulator runs fastest (up to the 10 % it asks of a gain)."""
    from dlpc.passes.lower import loop_to_dlp as lower

    text, shapes, params, reference = CLUSTER_CASES[case]
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    module = pipeline.lower(
        dlpc.load(path).module, "loop", pipeline.PipelineOptions(schedule=False)
    )
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes + params]
    inputs, weights = args[: len(shapes)], args[len(shapes) :]
    estimate, choose = lower._estimate, lower._choose_clusters
    estimates: dict[int, float] = {}

    def forced(tasks):
        def choose_forced(plan, double_buffer, flops):
            plan.tasks = tasks
            assert lower._choose_tile(plan, double_buffer)
            estimates[tasks] = estimate(plan, flops)

        return choose_forced

    simulated: dict[int, float] = {}
    for tasks in (16, 8, 4):
        monkeypatch.setattr(lower, "_choose_clusters", forced(tasks))
        f = compile_dlp(module.clone(), None, name=f"{case}{tasks}")
        (out,) = f(*inputs, params=weights)
        close(out, reference(*args))
        (rep,) = f.report  # one kernel
        assert rep.tasks == tasks
        simulated[tasks] = rep.cycles
        assert estimates[tasks] == pytest.approx(rep.cycles, rel=0.01), (tasks, estimates)
    monkeypatch.setattr(lower, "_choose_clusters", choose)
    f = compile_dlp(module.clone(), None, name=case)
    f(*inputs, params=weights)
    (rep,) = f.report
    # (all cores unless fewer run clearly faster: > 10 %, the model being rough)
    assert rep.tasks in simulated and simulated[rep.tasks] * 0.9 <= min(simulated.values()), (
        simulated
    )
    if case == "linear":
        assert rep.tasks == 4, simulated  # 1 cluster: the weight crosses GDRAM once


def test_a_scratchpad_dealloc_in_a_dlp_kernel_releases_no_gdram(tmp_path):
    """A dlp-level module is emitted as is; a memref.dealloc of an NRAM scratch buffer
    inside a kernel frees nothing (only @main's GDRAM buffers are released: the NRAM
    scratchpad is carved out of the core's reserve, not allocated)."""
    from dlpc.backends.dlp_c import emit_dlp_c, lower_to_dlp

    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[4, 64]) {\n  return relu(x)\n}\n")
    module = pipeline.lower(dlpc.load(path).module, "loop", pipeline.PipelineOptions())
    text = str(lower_to_dlp(module, "tiny"))
    end = "      dlp.wait_dma\n    }\n    func.return"
    assert text.count(end) == 1, text
    free = "      memref.dealloc %x_nram : memref<128xf32, #dlp.space<nram>>\n"
    lowered = pipeline.parse_module(text.replace(end, free + end))
    kernels = emit_dlp_c(lowered.clone()).split("int dlpc_main")[0]
    assert "kernel_relu_0" in kernels and "__dlp_gdram_release" not in kernels
    x = np.random.default_rng(6).standard_normal((4, 64)).astype(np.float32)
    (out,) = compile_dlp(lowered, None, name="dealloc")(x)
    close(out, np.maximum(x, 0))


def test_a_copy_over_the_element_limit_is_not_evaluated(tmp_path, monkeypatch):
    """A copy kernel's index space is evaluated at compile time (numpy arrays of its
    size) only up to MAX_ELEMENTS = 2**22: a slice of 2049 x 2048 elements is not, and
    is lowered as a staged (GDRAM-NRAM-GDRAM) kernel instead."""
    from dlpc.backends.dlp_c import lower_to_dlp
    from dlpc.passes.lower import _dlp_copy

    assert 2049 * 2048 > _dlp_copy.MAX_ELEMENTS == 2**22

    def no_eval(*args):
        raise AssertionError("evaluated a copy over MAX_ELEMENTS")

    monkeypatch.setattr(_dlp_copy, "_Eval", no_eval)
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[2049, 2049]) {\n  return slice(x, starts=[0], ends=[2048], axes=[1])\n}\n"
    )
    module = pipeline.lower(
        dlpc.load(path).module, "loop", pipeline.PipelineOptions(schedule=False)
    )
    lowered = lower_to_dlp(module, None)
    assert any(op.name == "dlp.memcpy_async" for op in lowered.walk())


def _rows_module(xshape, index, col="%j", guard=""):
    """out[i, j] = 2 * x[%row, col] (i < 64, j < 16), `index` computing %row; with
    `guard` (computing %g), x is read only where %g holds, else 0."""
    ty = f"memref<{xshape[0]}x{xshape[1]}xf32>"
    load = f"%a = memref.load %x[%row, {col}] : {ty}"
    if guard:
        load = f"""{guard}
        %a = scf.if %g -> (f32) {{
          {load}
          scf.yield %a : f32
        }} else {{
          %z = arith.constant 0.0 : f32
          scf.yield %z : f32
        }}"""
    return f"""
func.func @main(%x: {ty}, %out: memref<64x16xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "k" {{
    loop.for %i = 0 to 64 step 1 {{name = "i0"}} {{
      loop.for %j = 0 to 16 step 1 {{name = "i1"}} {{
        {index}
        {load}
        %two = arith.constant 2.0 : f32
        %m = arith.mulf %a, %two : f32
        memref.store %m, %out[%i, %j] : memref<64x16xf32>
      }}
    }}
  }}
  func.return
}}"""


I, J = np.arange(64)[:, None], np.arange(16)[None, :]
ROWS = {
    # x[i + (j + 6) / 4]: the quotient's interval is [6 // 4, 21 // 4] = [1, 5]
    "quotient": (
        (69, 16),
        "%c6 = arith.constant 6 : index\n%c4 = arith.constant 4 : index\n"
        "%s = arith.addi %j, %c6 : index\n%q = arith.divsi %s, %c4 : index\n"
        "%row = arith.addi %i, %q : index",
        {},
        "tiny",
        lambda x: x[I + (J + 6) // 4, J],
    ),
    # x[3i - i]: rows 2i (a = 3 - 1)
    "difference": (
        (127, 16),
        "%c3 = arith.constant 3 : index\n%t = arith.muli %i, %c3 : index\n"
        "%row = arith.subi %t, %i : index",
        {},
        "tiny",
        lambda x: x[2 * I, J],
    ),
    # x[i / 2, i]: the row is not affine in i, so x is no tile of columns of row 0
    "diagonal": (
        (32, 64),
        "%c2 = arith.constant 2 : index\n%row = arith.divsi %i, %c2 : index",
        {"col": "%i"},
        None,
        lambda x: np.broadcast_to(x[I // 2, I], (64, 16)),
    ),
    # x[i + 1] where i + 1 < 64: the last tile's rows reach past x, clamped to it
    "guarded": (
        (64, 16),
        "%c1 = arith.constant 1 : index\n%row = arith.addi %i, %c1 : index",
        {"guard": "%c64 = arith.constant 64 : index\n%g = arith.cmpi slt, %row, %c64 : index"},
        "tiny",
        lambda x: np.concatenate([x[1:], np.zeros((1, 16), np.float32)]),
    ),
}


@pytest.mark.parametrize("case", ROWS)
def test_rows_of_an_index_expression(case):
    """The rows a tile reads, from the index analysis of hand-written loop IR (the
    interval of a quotient, the coefficient of a difference, a non-affine row, a guarded
    read past the end), checked on the simulator against numpy."""
    shape, index, extra, desc, reference = ROWS[case]
    module = pipeline.parse_module(_rows_module(shape, index, **extra))
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    (out,) = compile_dlp(module, desc, name=f"rows_{case}")(x)
    close(out, 2 * reference(x))


REPEAT = """
func.func @main(%x: memref<32x16xf32>, %out: memref<64x16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "k" {
    loop.for %i = 0 to 64 step 1 {name = "i0"} {
      loop.for %j = 0 to 16 step 1 {name = "i1"} {
        %c2 = arith.constant 2 : index
        %r = arith.floordivsi %i, %c2 : index
        %a = memref.load %x[%r, %j] : memref<32x16xf32>
        memref.store %a, %out[%i, %j] : memref<64x16xf32>
      }
    }
  }
  func.return
}"""


def test_a_copy_through_a_floor_division_repeats_rows():
    """out[i] = x[floor(i / 2)]: a pure copy, its pieces found by evaluating the index
    space at compile time (integer floor division), copied GDRAM to GDRAM."""
    module = pipeline.parse_module(REPEAT)
    x = np.random.default_rng(8).standard_normal((32, 16)).astype(np.float32)
    f = compile_dlp(module, "tiny", name="repeat")
    (out,) = f(x)
    np.testing.assert_array_equal(out, np.repeat(x, 2, axis=0))
    assert set(f.report[0].bytes) == {"gdram->gdram"}, f.report[0].bytes


GEMM = """
func.func @main(%x: memref<256x16xf32>, %w: memref<16x8xf32>, %out: memref<256x8xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "mm" {
    loop.for %i = 0 to 256 step 1 {name = "i0"} {
      loop.for %n = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i, %r] : memref<256x16xf32>
          %b = memref.load %w[%r, %n] : memref<16x8xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %s = memref.load %acc[] : memref<f32>
        memref.store %s, %out[%i, %n] : memref<256x8xf32>
      }
    }
  }
  func.return
}"""


def test_a_matmul_tile_counts_its_accumulator_in_nram():
    """256 rows of x @ w on tiny (4 KiB NRAM): the row tile is limited by NRAM, where the
    accumulator tile (rows x 8) sits beside x's tile; the simulator refuses a kernel
    whose buffers overrun it."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    f = compile_dlp(pipeline.parse_module(GEMM), "tiny", name="gemm")
    (out,) = f(x, w)
    close(out, x @ w)
    assert f.report[0].intrinsic_cycles > 0


@pytest.mark.parametrize(
    "expr, args",
    [
        # three vector ops: their temporaries sit beside x's and out's tiles in NRAM
        ("mul(add(mul(x, x), x), x)", "x: f32[256, 16]"),
        # a row tile of 64-element rows staged whole for the reduction
        ("reduce_sum(x, axis=1)", "x: f32[64, 64]"),
        # scalar minus vector: s - v, not v - s
        ("sub(2.0, x)", "x: f32[4, 64]"),
    ],
    ids=["temporaries", "reduce-rows", "scalar-minus-vector"],
)
def test_intrinsic_tiles_fit_nram_and_keep_operand_order(tmp_path, expr, args):
    """On tiny (4 KiB NRAM) these tiles are limited by NRAM, where every scratch buffer an
    intrinsic selection needs must be counted (the simulator refuses an overrun); each
    runs on intrinsics and matches numpy."""
    rep, _ = _run_small(tmp_path, expr, "tiny", args)
    assert rep.intrinsic_cycles > 0


BMM = """
func.func @main(%a: memref<3x8x16xf32>, %b: memref<3x8x20xf32>, %out: memref<3x8x8xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "bmm" {
    loop.for %e = 0 to 3 step 1 {name = "i0"} {
      loop.for %m = 0 to 8 step 1 {name = "i1"} {
        loop.for %n = 0 to 8 step 1 {name = "i2"} {
          %acc = memref.alloca() : memref<f32>
          %zero = arith.constant 0.000000e+00 : f32
          memref.store %zero, %acc[] : memref<f32>
          loop.for %r = 0 to 16 step 1 {name = "r0", reduction} {
            %x = memref.load %a[%e, %m, %r] : memref<3x8x16xf32>
            %y = memref.load %b[%e, %n, %r] : memref<3x8x20xf32>
            %p = arith.mulf %x, %y : f32
            %o = memref.load %acc[] : memref<f32>
            %q = arith.addf %o, %p : f32
            memref.store %q, %acc[] : memref<f32>
          }
          %s = memref.load %acc[] : memref<f32>
          memref.store %s, %out[%e, %m, %n] : memref<3x8x8xf32>
        }
      }
    }
  }
  func.return
}"""


def test_a_batched_matmul_over_part_of_b_rows_is_no_intrinsic():
    """out[e] = a[e] @ b[e, :, :16].T where b's rows hold 20 elements: a batch entry of b
    is no contiguous 8 x 16 block, so the batched intrinsic (which reads it as one) is not
    selected; the result matches numpy."""
    rng = np.random.default_rng(10)
    a = rng.standard_normal((3, 8, 16)).astype(np.float32)
    b = rng.standard_normal((3, 8, 20)).astype(np.float32)
    (out,) = compile_dlp(pipeline.parse_module(BMM), "tiny", name="bmm_part")(a, b)
    close(out, a @ b[:, :, :16].transpose(0, 2, 1))


DIAG_MM = """
func.func @main(%x: memref<32x16x16xf32>, %w: memref<16x8xf32>, %out: memref<32x8xf32>)
    attributes {dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "mm" {
    loop.for %i = 0 to 32 step 1 {name = "i0"} {
      loop.for %n = 0 to 8 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i, %r, %r] : memref<32x16x16xf32>
          %b = memref.load %w[%r, %n] : memref<16x8xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %s = memref.load %acc[] : memref<f32>
        memref.store %s, %out[%i, %n] : memref<32x8xf32>
      }
    }
  }
  func.return
}"""


def test_a_matmul_over_a_diagonal_is_no_intrinsic():
    """out[i] = diag(x[i]) @ w: x's rows are read as x[i, r, r], not one row of k
    elements, so the row-tiled matmul intrinsic is not selected; matches numpy."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((32, 16, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    (out,) = compile_dlp(pipeline.parse_module(DIAG_MM), "tiny", name="diag_mm")(x, w)
    close(out, np.einsum("mrr,rn->mn", x, w))


def test_a_depthwise_tile_is_limited_by_nram_not_the_filter_slots(tmp_path):
    """A 3x3 depthwise conv over 16 channels on tiny: each channel's filter takes one
    aligned WRAM slot (tile slots in all, far under tiny's 4 KiB WRAM), so the channel
    tile is the largest whose NRAM buffers fit: one channel more overruns NRAM."""
    from dlpc.dialects.loop import KernelOp
    from dlpc.passes.lower import loop_to_dlp as lower
    from dlpc.targets.dlp import resolve

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[1, 16, 8, 8]) {\n  param w: f32[16, 1, 3, 3] = kaiming(seed=2)\n"
        "  return conv2d(x, w, padding=1, groups=16)\n}\n"
    )
    module = pipeline.lower(
        dlpc.load(path).module, "loop", pipeline.PipelineOptions(schedule=False)
    )
    (kernel,) = [op for op in module.walk() if isinstance(op, KernelOp)]
    desc = resolve("tiny")
    plan = lower.plan_kernel(kernel, desc, True, True, True)
    assert type(plan.selection).__name__ == "DepthwiseSelection"
    assert 1 < plan.tile < plan.chunk, (plan.tile, plan.chunk)
    used = plan.space_bytes(plan.tile, plan.double, plan.sram)
    more = plan.space_bytes(plan.tile + 1, plan.double, plan.sram)
    assert used["wram"] == plan.tile * 16 * 4  # 9 taps in a 16-float (64-byte) slot
    assert more["wram"] <= desc.capacity("wram") and more["nram"] > desc.capacity("nram")


def _scalar_module(xtype, index, op, const, step=1, setup=""):
    """out[i, j] = x[index] `op` const over i < 64 (step `step`), j < 16, on 64x16 out."""
    return f"""
func.func @main(%x: memref<{xtype}>, %out: memref<64x16xf32>)
    attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "k" {{
    loop.for %i = 0 to 64 step {step} {{name = "i0"}} {{
      loop.for %j = 0 to 16 step 1 {{name = "i1"}} {{
        {setup}
        %a = memref.load %x[{index}] : memref<{xtype}>
        %c = arith.constant {const} : f32
        %m = arith.{op} %a, %c : f32
        memref.store %m, %out[%i, %j] : memref<64x16xf32>
      }}
    }}
  }}
  func.return
}}"""


SCALAR_CASES = {
    # x[1, 2, i, :]: the tile's base is 1 * (3 * 64 * 16) + 2 * (64 * 16) + its rows
    "two-dim-prefix": (
        (2, 3, 64, 16),
        ("2x3x64x16xf32", "%c1, %c2, %i, %j", "mulf", "2.0", 1),
        "%c1 = arith.constant 1 : index\n%c2 = arith.constant 2 : index",
        lambda x: 2 * x[1, 2],
        slice(None),
    ),
    # a work loop of step 2: rows i = 2t (a = 1 * 2); the odd rows are not written
    "step-two": (
        (64, 16),
        ("64x16xf32", "%i, %j", "mulf", "2.0", 2),
        "",
        lambda x: 2 * x[::2],
        slice(None, None, 2),
    ),
    # x + 0.0 is an add, not a relu (which only max(x, 0.0) is)
    "plus-zero": (
        (64, 16),
        ("64x16xf32", "%i, %j", "addf", "0.0", 1),
        "",
        lambda x: x,
        slice(None),
    ),
}


@pytest.mark.parametrize("case", SCALAR_CASES)
def test_tiled_vector_scalar_kernels(case):
    """Hand-written loop IR of a vector-scalar op over rows tiled on tiny, checked on
    the simulator against numpy (on the rows the loop writes)."""
    shape, (xtype, index, op, const, step), setup, reference, rows = SCALAR_CASES[case]
    module = pipeline.parse_module(_scalar_module(xtype, index, op, const, step, setup))
    x = np.random.default_rng(12).standard_normal(shape).astype(np.float32)
    (out,) = compile_dlp(module, "tiny", name=f"scalar_{case}".replace("-", "_"))(x)
    close(out[rows], reference(x))


def _gemv_module(wfirst, diag):
    wt = "64x16x16xf32" if diag else "64x16xf32"
    wi = "%n, %r, %r" if diag else "%n, %r"
    la = "%a = memref.load %x[%r] : memref<16xf32>"
    lb = f"%b = memref.load %w[{wi}] : memref<{wt}>"
    loads = f"{lb}\n          {la}" if wfirst else f"{la}\n          {lb}"
    return f"""
func.func @main(%x: memref<16xf32>, %w: memref<{wt}>, %out: memref<64xf32>)
    attributes {{dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  loop.kernel "gemv" {{
    loop.for %n = 0 to 64 step 1 {{name = "i0"}} {{
      %acc = memref.alloca() : memref<f32>
      %zero = arith.constant 0.000000e+00 : f32
      memref.store %zero, %acc[] : memref<f32>
      loop.for %r = 0 to 16 step 1 {{name = "r0", reduction}} {{
          {loads}
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
      }}
      %s = memref.load %acc[] : memref<f32>
      memref.store %s, %out[%n] : memref<64xf32>
    }}
  }}
  func.return
}}"""


@pytest.mark.parametrize(
    "w_first, diagonal", [(True, False), (False, True)], ids=["w-first", "diagonal"]
)
def test_gemv_over_columns(w_first, diagonal):
    """out[n] = sum_r x[r] * w[n, r] with x whole and w tiled by n: one matmul intrinsic
    whichever load comes first (the product commutes); w[n, r, r] is no row of w, so it
    is no matmul. Checked on the simulator against numpy."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal(16).astype(np.float32)
    w = rng.standard_normal((64, 16, 16) if diagonal else (64, 16)).astype(np.float32)
    from dlpc.backends.dlp_c import emit_dlp_c
    from dlpc.targets.dlp import resolve

    module = pipeline.parse_module(_gemv_module(w_first, diagonal))
    assert ("__bang_matmul(" in emit_dlp_c(module.clone(), resolve("tiny"))) == (not diagonal)
    (out,) = compile_dlp(module, "tiny", name="gemv_cols")(x, w)
    close(out, np.einsum("nrr,r->n", w, x) if diagonal else w @ x)


def test_double_buffering_splits_a_task_into_two_tiles(tmp_path, monkeypatch):
    """relu over 16 rows on tiny's 2 cores: 8 rows a task, double-buffered as 2 tiles of 4
    (the fewest that overlap a load with compute); 3 tiles of at most 3 rows run slower
    on the simulator (one more DMA latency per buffer)."""
    from dlpc.passes.lower import loop_to_dlp as lower

    rep, _ = _run_small(tmp_path, "relu(x)", "tiny", "x: f32[16, 16]")
    largest = lower._largest_tile

    def at_most_3(plan, limit, double, sram):
        return largest(plan, min(limit, 3), double, sram)

    monkeypatch.setattr(lower, "_largest_tile", at_most_3)
    capped, _ = _run_small(tmp_path, "relu(x)", "tiny", "x: f32[16, 16]")
    assert rep.double_buffered and capped.double_buffered
    assert rep.cycles < capped.cycles, (rep.cycles, capped.cycles)


def test_kernel_model_shares_the_gdram_port_among_tasks():
    """Two tasks each moving 4096 bytes GDRAM->NRAM with no DMA count or compute: each
    alone takes 4096 bytes at the port's rate, but they share the port, so the kernel
    takes the 8192 bytes' time; a kernel with no work takes 0 cycles."""
    from dlpc.backends.runtime.dlp_sim import NUM_COUNTERS, SPACES, model_kernel
    from dlpc.targets.dlp import resolve

    desc = resolve("tiny")
    c = [0.0] * NUM_COUNTERS
    c[SPACES.index("gdram") * 4 + SPACES.index("nram")] = 4096.0
    rep = model_kernel("k", "o", 2, True, [c, list(c)], desc)
    per_cycle = desc.gdram_bandwidth_gbs / desc.clock_ghz
    assert rep.transfer_cycles == pytest.approx(4096.0 / per_cycle)
    assert rep.cycles == pytest.approx(8192.0 / per_cycle, rel=1e-9)
    idle = model_kernel("k", "o", 1, False, [[0.0] * NUM_COUNTERS], desc)
    assert idle.cycles == 0.0 and idle.seconds == 0.0


def test_scalar_loops_charge_their_ops_in_kernels():
    """A kernel left as scalar loops (x[i + 1] under a guard) charges each loop's scalar
    ops per iteration (`__dlp_scalar_ops(n)`, n > 0: a loop without scalar work charges
    nothing); the report counts them as compute, with no intrinsic cycles, and its time
    is its cycles at the clock; the table marks the kernel double-buffered or not."""
    from dlpc.backends.dlp_c import emit_dlp_c
    from dlpc.backends.runtime.dlp_sim import format_report
    from dlpc.targets.dlp import resolve

    shape, index, extra, desc, _ = ROWS["guarded"]
    module = pipeline.parse_module(_rows_module(shape, index, **extra))
    c = emit_dlp_c(module.clone(), resolve(desc))
    assert "__dlp_scalar_ops(" in c and "__dlp_scalar_ops(0)" not in c
    f = compile_dlp(module, desc, name="scalar_ops")
    f(np.zeros(shape, np.float32))
    (rep,) = f.report
    assert rep.intrinsic_cycles == 0 and rep.ops > 0 and rep.compute_cycles > 0
    assert rep.seconds == rep.cycles / (resolve(desc).clock_ghz * 1e9)
    row = format_report([rep]).splitlines()[2].split()
    assert row[:3] == ["k", str(rep.tasks), "y" if rep.double_buffered else "n"], row


def test_a_host_loop_in_main_charges_no_task(tmp_path):
    """A dlp-level module (emitted as is) with a loop in @main: host code runs outside
    every task, so its loop charges no scalar ops (the counters are a task's, unset on
    the host); the kernel's loops do."""
    from dlpc.backends.dlp_c import emit_dlp_c, lower_to_dlp

    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[4, 64]) {\n  return relu(x)\n}\n")
    module = pipeline.lower(dlpc.load(path).module, "loop", pipeline.PipelineOptions())
    text = str(lower_to_dlp(module, "tiny"))
    end = "    }\n    func.return"
    assert text.count(end) == 1, text
    host = """    }
    %h0 = arith.constant 0 : index
    %h1 = arith.constant 1 : index
    %h4 = arith.constant 4 : index
    scf.for %q = %h0 to %h4 step %h1 {
      %v = memref.load %x[%q, %h0] : memref<4x64xf32>
      memref.store %v, %out0[%q, %h0] : memref<4x64xf32>
    }
    func.return"""
    kernels, main = emit_dlp_c(pipeline.parse_module(text.replace(end, host))).split(
        "int dlpc_main"
    )
    assert "__dlp_scalar_ops(" in kernels
    assert "for (int64_t" in main and "__dlp_scalar_ops" not in main, main
