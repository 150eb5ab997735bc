"""The DLP C emitter's and the simulator's decisions, third round (issue 35,
bench/mutation.py --area dlp-c-sim): scratchpad placement under a description whose DMA
and vector alignments differ, a 0-d argument's GDRAM registration, the emitter's
diagnostics on hand-written dlp IR; each run on the simulator against numpy."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dlpc.backends.dlp_c import emit_dlp_c
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline
from dlpc.targets.dlp import DlpTarget

ROOT = Path(__file__).resolve().parents[2]


def linear_relu():
    """The loop-level fc1 + relu of test/e2e/emit-dlp-c.mlir (x 1x2048, weight 8x2048:
    an input large enough to be staged in SRAM): it places buffers in NRAM, WRAM and SRAM."""
    path = ROOT / "test" / "e2e" / "emit-dlp-c.mlir"
    return pipeline.parse_module(path.read_text(), str(path))


def placements(source: str) -> dict[str, list[tuple[int, int]]]:
    """Per space, the (offset, bytes) of every scratchpad buffer of the emitted C."""
    offsets = {
        m[1]: (m[2], int(m[3]))
        for m in re.finditer(r"\*(\w+) = \(\w+ \*\)\(__(nram|wram|sram)_base \+ (\d+)\)", source)
    }
    sizes = {m[1]: int(m[2]) for m in re.finditer(r"__dlp_scratch\((\w+), (\d+),", source)}
    assert offsets and set(offsets) == set(sizes)
    out: dict[str, list[tuple[int, int]]] = {}
    for name, (space, off) in offsets.items():
        out.setdefault(space, []).append((off, sizes[name]))
    return out


@pytest.mark.parametrize("dma,vec", [(32, 128), (128, 16)])
def test_scratchpads_start_on_the_larger_alignment_and_do_not_overlap(dma, vec):
    """A buffer is both a DMA end and an intrinsic operand: its offset is a multiple of
    max(dma_align, vector_align), the plan reserves the rounded sizes and no two buffers
    of a space overlap; the simulator (which checks both alignments) gives relu(x W^T)."""
    desc = DlpTarget(name="align", dma_align=dma, vector_align=vec)
    f = compile_dlp(linear_relu(), desc, name=f"align_{dma}_{vec}")
    align = max(dma, vec)
    for space, bufs in placements(f.source).items():
        bufs.sort()
        assert all(off % align == 0 for off, _ in bufs), (space, bufs)
        assert all(a + n <= b for (a, n), (b, _) in zip(bufs, bufs[1:])), (space, bufs)
        reserved = int(re.search(rf"__dlp_reserve\(DLP_{space.upper()}, (\d+)\)", f.source)[1])
        assert reserved == sum(-(-n // align) * align for _, n in bufs), (space, reserved, bufs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2048)).astype(np.float32)
    w = rng.standard_normal((8, 2048)).astype(np.float32)
    (y,) = f(x, params={"fc1.weight": w})
    # (sums of 2048 f32 products: their rounding reaches 1e-5)
    np.testing.assert_allclose(y, np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-4)


def test_a_zero_dim_argument_is_one_element_of_gdram():
    """A 0-d input holds one element: registered as 1 * sizeof(float) bytes (a size of 0
    would make every read of it an out-of-range GDRAM access)."""
    src = """
func.func @main(%x: tensor<8xf32>, %s: tensor<f32>) -> tensor<8xf32> {
  %y = graph.add %x, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}"""
    loop = pipeline.lower(pipeline.parse_module(src), "loop", pipeline.PipelineOptions())
    f = compile_dlp(loop, name="zero_dim_arg")
    assert re.search(r"__dlp_gdram\(\w+, 1 \* sizeof\(float\)\);", f.source)
    x = np.arange(8, dtype=np.float32)
    (y,) = f(x, np.asarray(2.5, np.float32))
    np.testing.assert_array_equal(y, x + np.float32(2.5))


KERNEL = """
func.func @main(%x: memref<4xf32> {{dlpc.name = "x"}}, %out0: memref<4xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "k" attributes {{tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64, origin = "graph.relu"}} {{
    %0 = arith.constant 0 : index
    %4 = arith.constant 4 : index
    {body}
  }}
  func.return
}}"""  # noqa: E501


def test_a_gdram_allocation_inside_a_kernel_is_refused():
    """Kernels place on-chip buffers only; a GDRAM buffer is the host's to allocate."""
    body = """%b = memref.alloc() : memref<4xf32>
    dlp.memcpy GDRAM2GDRAM %out0[%0], %x[%0], %4 : memref<4xf32>, memref<4xf32>"""
    with pytest.raises(DlpcError, match="GDRAM allocation inside kernel 'k'"):
        emit_dlp_c(pipeline.parse_module(KERNEL.format(body=body)))


def test_a_copy_at_offset_zero_names_the_buffer_and_others_add_the_offset():
    """dst/src are `name` at offset 0 and `name + off` elsewhere; the simulator moves
    x[1:4] to out[0:3] (and leaves out[3] as the caller gave it)."""
    body = """%1 = arith.constant 1 : index
    %3 = arith.constant 3 : index
    dlp.memcpy GDRAM2GDRAM %out0[%0], %x[%1], %3 : memref<4xf32>, memref<4xf32>"""
    module = pipeline.parse_module(KERNEL.format(body=body))
    source = emit_dlp_c(module)
    assert re.search(
        r"__memcpy\(v_out0, v_x \+ \w+, \w+ \* sizeof\(float\), GDRAM2GDRAM\);", source
    )
    from dlpc.backends.runtime.dlp_sim import DlpFunction

    f = DlpFunction(module, name="offsets")
    x = np.array([1, 2, 3, 4], np.float32)
    (y,) = f(x)
    np.testing.assert_array_equal(y[:3], x[1:])
    (rep,) = f.report
    assert rep.bytes == {"gdram->gdram": 12.0} and rep.dma_count == 1


def test_a_constant_tensor_is_a_registered_gdram_global():
    """A graph.constant of several elements becomes a memref.global: @main registers it
    as GDRAM (the simulator checks every GDRAM operand against a registered buffer)."""
    src = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.5]> : tensor<8xf32>
  %y = graph.mul %x, %c : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}"""
    loop = pipeline.lower(pipeline.parse_module(src), "loop", pipeline.PipelineOptions())
    f = compile_dlp(loop, name="global_const")
    assert re.search(r"__dlp_gdram\(\w+, 8 \* sizeof\(float\)\);", f.source)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    (y,) = f(x)
    np.testing.assert_array_equal(y, x * np.array([1, 2, 3, 4, 5, 6, 7, 8.5], np.float32))


def test_the_kernel_header_states_tasks_plan_and_double_buffering():
    """The comment above each kernel (the emitter's documented output) gives the tasks,
    the bytes planned per space used (none for a space it does not use) and whether the
    kernel is double-buffered; the launch passes the same flag to the time model (relu
    of 16 x 16 on tiny's two cores is double-buffered, the linear + relu is not)."""
    single = compile_dlp(linear_relu(), name="hdr_single")
    head = re.search(r'/\* kernel "fc1_relu_0" \(from graph.linear\): (.*) \*/', single.source)[1]
    assert re.fullmatch(r"\d+ tasks; nram \d+ bytes, wram \d+ bytes, sram \d+ bytes", head), head
    rng = np.random.default_rng(1)
    x, w = (
        rng.standard_normal((1, 2048)).astype(np.float32),
        rng.standard_normal((8, 2048)).astype(np.float32),
    )
    (y,) = single(x, params={"fc1.weight": w})
    # (sums of 2048 f32 products: their rounding reaches 1e-5)
    np.testing.assert_allclose(y, np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-4)
    assert [r.double_buffered for r in single.report] == [False]
    src = """
func.func @main(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = graph.relu %x : (tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %y : tensor<16x16xf32>
}"""
    loop = pipeline.lower(pipeline.parse_module(src), "loop", pipeline.PipelineOptions())
    double = compile_dlp(loop, "tiny", name="hdr_double")
    head = re.search(r'/\* kernel "\w+" \(from graph.relu\): (.*) \*/', double.source)[1]
    assert re.fullmatch(r"2 tasks; nram \d+ bytes; double-buffered", head), head
    x = rng.standard_normal((16, 16)).astype(np.float32)
    (y,) = double(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert [r.double_buffered for r in double.report] == [True]
