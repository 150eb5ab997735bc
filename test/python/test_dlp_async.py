"""Asynchronous DMA on the DLP target: the simulator's rule for overlapping latencies
(n copies issued between two waits take ceil(n / dma_queue_depth) latencies), its checks
that a copy's data is used only after the wait that lands it, the description's
`dma_queue_depth`, and the lowering's use of it (loads back to back, one wait)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import (
    NUM_COUNTERS,
    SPACES,
    DlpFunction,
    compile_dlp,
    model_kernel,
)
from dlpc.diagnostics import DlpcError
from dlpc.dialects import dlp
from dlpc.passes import pipeline
from dlpc.targets.dlp import DlpTarget, resolve

# three loads issued back to back (one wait), a relu, the store (one wait)
THREE_LOADS = """
func.func @main(%x: memref<64xf32>, %out: memref<64xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  dlp.kernel "k" attributes {tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    %b = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    dlp.memcpy_async GDRAM2NRAM %a[%c0], %x[%c0], %c16 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.memcpy_async GDRAM2NRAM %a[%c16], %x[%c16], %c16 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.memcpy_async GDRAM2NRAM %a[%c32], %x[%c32], %c32 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>
    dlp.wait_dma
    dlp.relu %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>
    dlp.memcpy_async NRAM2GDRAM %out[%c0], %b[%c0], %c64 : memref<64xf32>, memref<64xf32, #dlp.space<nram>>
    dlp.wait_dma
  }
  func.return
}
"""


def run_three_loads(desc: DlpTarget):
    f = compile_dlp(pipeline.parse_module(THREE_LOADS), desc, name="three_loads")
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    (out,) = f(x)
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    (rep,) = f.report
    return rep


@pytest.mark.parametrize("depth, latencies", [(8, 2), (2, 3), (1, 4)])
def test_copies_in_flight_share_latencies_up_to_the_queue_depth(depth, latencies):
    """Three loads then a wait: ceil(3 / depth) latencies; the store another one."""
    desc = dataclasses.replace(resolve("tiny"), dma_queue_depth=depth)
    rep = run_three_loads(desc)
    assert rep.dma_count == 4 and rep.dma_hidden == 4 - latencies
    gdram = 2 * 64 * 4 / (desc.gdram_bandwidth_gbs / desc.clock_ghz)
    assert rep.transfer_cycles == pytest.approx(latencies * desc.dma_latency_cycles + gdram)


def test_model_charges_only_the_latencies_not_hidden():
    """model_kernel on hand-made counters: DMAs 5, of which 3 hidden: 2 latencies."""
    desc = resolve("tiny")
    c = [0.0] * NUM_COUNTERS
    c[SPACES.index("gdram") * 4 + SPACES.index("nram")] = 1024.0
    c[16], c[20] = 5, 3
    rep = model_kernel("k", "o", 1, False, [c], desc)
    gdram = 1024.0 / (desc.gdram_bandwidth_gbs / desc.clock_ghz)
    assert rep.dma_count == 5 and rep.dma_hidden == 3
    assert rep.transfer_cycles == pytest.approx(2 * desc.dma_latency_cycles + gdram)


HAZARD = """
func.func @main(%x: memref<64xf32>, %out: memref<64xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "k" attributes {{tasks = 2 : i64, dma_align = 64 : i64, vector_align = 64 : i64}} {{
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %a = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    %b = memref.alloc() : memref<64xf32, #dlp.space<nram>>
    %s = memref.alloc() : memref<64xf32, #dlp.space<sram>>
    {body}
    dlp.wait_dma
  }}
  func.return
}}
"""
LOAD_A = "dlp.memcpy_async GDRAM2NRAM %a[%c0], %x[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>"
STORE_A = "dlp.memcpy_async NRAM2GDRAM %out[%c0], %a[%c0], %c64 : memref<64xf32>, memref<64xf32, #dlp.space<nram>>"
RELU_AB = "dlp.relu %b[%c0], %a[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>"
RELU_BA = "dlp.relu %a[%c0], %b[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32, #dlp.space<nram>>"
LOAD_X = "dlp.memcpy GDRAM2NRAM %b[%c0], %out[%c0], %c64 : memref<64xf32, #dlp.space<nram>>, memref<64xf32>"
STAGE = "dlp.memcpy_async GDRAM2SRAM %s[%c0], %x[%c0], %c64 : memref<64xf32, #dlp.space<sram>>, memref<64xf32>"
WAIT = "dlp.wait_dma"
SYNC = "dlp.sync_cluster"


@pytest.mark.parametrize(
    "ops, message",
    [
        ([LOAD_A, RELU_AB], "__bang_active_relu: src overlaps the destination of an asynchronous copy"),
        ([LOAD_A, WAIT, RELU_AB, STORE_A, RELU_BA], "__bang_active_relu: dst overwrites the source of an asynchronous copy"),
        ([LOAD_A, WAIT, STORE_A, LOAD_X], "__memcpy: source overlaps the destination of an asynchronous copy"),
        ([STAGE, SYNC], "__sync_cluster: an asynchronous copy into SRAM is not yet waited for"),
    ],
)  # fmt: skip
def test_data_of_a_copy_in_flight_is_an_error(ops, message):
    """The simulator completes a copy when issued; reading its destination, writing its
    source or a barrier over SRAM it fills before the wait would differ on the machine."""
    module = pipeline.parse_module(HAZARD.format(body="\n    ".join(ops)))
    f = compile_dlp(module, "tiny", name="hazard")
    with pytest.raises(DlpcError, match=f"kernel 'k' task 0: {message}"):
        f(np.ones(64, np.float32))


@pytest.mark.parametrize(
    "ops", [[LOAD_A, WAIT, RELU_AB, STORE_A, WAIT, RELU_BA], [STAGE, WAIT, SYNC]]
)
def test_waited_copies_pass_the_checks(ops):
    module = pipeline.parse_module(HAZARD.format(body="\n    ".join(ops)))
    compile_dlp(module, "tiny", name="hazard_ok")(np.ones(64, np.float32))


@pytest.mark.parametrize("value", [0, 1025, 2.5, True])
def test_queue_depth_is_checked(tmp_path, value):
    p = tmp_path / "q.toml"
    p.write_text(f"dma_queue_depth = {str(value).lower()}\n")
    with pytest.raises(
        DlpcError, match=f"{p}: error: 'dma_queue_depth' must be a positive integer"
    ):
        resolve(str(p))
    assert resolve("dlp").dma_queue_depth == DlpTarget().dma_queue_depth == 8


LINEAR = """
func.func @main(%x: memref<1x64xf32>, %w: memref<64x64xf32>, %bias: memref<64xf32>, %out: memref<1x64xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["w", "bias"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "linear_0" attributes {origin = "graph.linear"} {
    loop.for %i0 = 0 to 1 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1", parallel} {
        %acc = memref.alloca() : memref<f32>
        %zero = arith.constant 0.000000e+00 : f32
        memref.store %zero, %acc[] : memref<f32>
        loop.for %r0 = 0 to 64 step 1 {name = "r0", reduction} {
          %a = memref.load %x[%i0, %r0] : memref<1x64xf32>
          %b = memref.load %w[%i1, %r0] : memref<64x64xf32>
          %p = arith.mulf %a, %b : f32
          %o = memref.load %acc[] : memref<f32>
          %q = arith.addf %o, %p : f32
          memref.store %q, %acc[] : memref<f32>
        }
        %sum = memref.load %acc[] : memref<f32>
        %bb = memref.load %bias[%i1] : memref<64xf32>
        %y = arith.addf %sum, %bb : f32
        memref.store %y, %out[%i0, %i1] : memref<1x64xf32>
      }
    }
  }
  func.return
}
"""


@pytest.mark.parametrize("depth", [8, 1])
def test_lowered_linear_waits_once_for_its_loads(depth):
    """A batch-1 linear: the input, the task's weight rows and bias issued back to back
    with one wait, the store with the kernel's last; right numerics; with queue depth 1
    no latency is hidden."""
    desc = dataclasses.replace(resolve("dlp"), dma_queue_depth=depth)
    lowered = lower_to_dlp(pipeline.parse_module(LINEAR), desc)
    kernel = next(op for op in lowered.walk() if isinstance(op, dlp.KernelOp))
    assert isinstance(kernel.body.block.last_op, dlp.WaitDmaOp)
    f = DlpFunction(lowered, desc, name=f"linear_q{depth}")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    (out,) = f(x, params=[w, b])
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-4, atol=1e-4)
    (rep,) = f.report
    per_task = rep.dma_count / rep.tasks
    if depth == 1:
        assert rep.dma_hidden == 0
    else:  # the loads, one wait; the store, the kernel's last wait
        assert per_task >= 3 and per_task - rep.dma_hidden / rep.tasks == 2


@pytest.mark.parametrize("depth, tasks, transposes", [(8, 16, 0), (1, 1, 2)])
def test_head_split_at_batch_1_by_queue_depth(tmp_path, depth, tasks, transposes):
    """Attention's head split at batch 1 (64 pieces of 16 floats): with 8 copies in flight
    a task's 4 pieces cost one latency, so direct GDRAM2GDRAM copies over 16 tasks; with
    one, 4 latencies a task against the item on one task (two DMAs, two transposes)."""
    import dlpc

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[1, 16, 4, 16]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n"
    )
    model = dlpc.load(path)
    desc = dataclasses.replace(resolve("dlp"), dma_queue_depth=depth)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    lowered = lower_to_dlp(module.clone(), desc)
    (kernel,) = [op for op in lowered.walk() if isinstance(op, dlp.KernelOp)]
    assert kernel.num_tasks == tasks
    assert sum(isinstance(op, dlp.TransposeOp) for op in kernel.walk()) == transposes
    (x,) = dlpc.api.random_inputs(model)
    (out,) = DlpFunction(lowered, desc, name=f"head_split_q{depth}")(x)
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1, 3))


def test_independent_copies_share_one_kernel_and_one_wait():
    """The lit input loop-to-dlp-copy-siblings.mlir on the simulator: the three slices of
    one buffer as one kernel (each task's pieces of all three back to back: one latency),
    then the copy of q; right values, and the checks pass (no copy reads what another
    one still in flight writes)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "passes" / "loop-to-dlp-copy-siblings.mlir"
    module = pipeline.parse_module(path.read_text(), str(path))
    f = compile_dlp(module, None, name="siblings")
    qkv = np.arange(16 * 192, dtype=np.float32).reshape(16, 192)
    k, v, out = f(qkv)
    np.testing.assert_array_equal(k, qkv[:, 64:128])
    np.testing.assert_array_equal(v, qkv[:, 128:])
    np.testing.assert_array_equal(out, qkv[:, :64])
    merged, copy = f.report
    assert merged.name == "slice_2" and copy.name == "copy_3"
    assert merged.dma_count - merged.dma_hidden == merged.tasks  # one latency a task


STRIDED = """
func.func @main(%x: memref<16x192xf32>, %out: memref<16x64xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "k" attributes {{tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64}} {{
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %c192 = arith.constant 192 : index
    %c960 = arith.constant 960 : index
    %c1024 = arith.constant 1024 : index
    %a = memref.alloc() : memref<1024xf32, #dlp.space<nram>>
    dlp.memcpy_strided_async GDRAM2NRAM %a[%c0], %x[%c{first}], %c64 x %c16, %c64, %c192 : memref<1024xf32, #dlp.space<nram>>, memref<16x192xf32>
    {between}
    dlp.wait_dma
    dlp.relu %a[%c0], %a[%c0], %c1024 : memref<1024xf32, #dlp.space<nram>>, memref<1024xf32, #dlp.space<nram>>
    dlp.memcpy_async NRAM2GDRAM %out[%c0], %a[%c0], %c1024 : memref<16x64xf32>, memref<1024xf32, #dlp.space<nram>>
    dlp.wait_dma
  }}
  func.return
}}
"""


def test_a_strided_copy_is_one_dma_of_every_segment():
    """16 rows of 64 floats, 192 apart in the source: one DMA (one latency), every
    segment's bytes counted and checked; the DLP C is BANG's 7-argument form."""
    from dlpc.backends.dlp_c import emit_dlp_c

    module = pipeline.parse_module(STRIDED.format(first=64, between=""))
    source = emit_dlp_c(module, resolve("tiny"))
    assert re.search(
        r"__memcpy_async\(v_a, v_x \+ \w+, \w+ \* sizeof\(float\), GDRAM2NRAM, "
        r"\w+ \* sizeof\(float\), \w+ \* sizeof\(float\), \w+ - 1\);",
        source,
    ), source
    f = compile_dlp(module, "tiny", name="strided")
    x = np.linspace(-1, 1, 16 * 192, dtype=np.float32).reshape(16, 192)
    (out,) = f(x)
    np.testing.assert_array_equal(out, np.maximum(x[:, 64:128], 0))
    (rep,) = f.report
    assert rep.dma_count == 2 and rep.dma_hidden == 0
    assert rep.bytes == {"gdram->nram": 16 * 64 * 4.0, "nram->gdram": 16 * 64 * 4.0}


def test_a_segment_of_a_strided_copy_in_flight_is_checked():
    """Touching the last segment's destination before the wait is an error."""
    relu = "dlp.relu %a[%c960], %a[%c960], %c64 : memref<1024xf32, #dlp.space<nram>>, memref<1024xf32, #dlp.space<nram>>"
    module = pipeline.parse_module(STRIDED.format(first=0, between=relu))
    f = compile_dlp(module, "tiny", name="strided_hazard")
    with pytest.raises(DlpcError, match="__bang_active_relu: dst overlaps the destination"):
        f(np.ones((16, 192), np.float32))
