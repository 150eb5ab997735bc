"""dlp-c-sim's lines since seed 42 (088645f), pinned exactly (issue 35): the DMA queue
depth macro, BANG's strided async copy in both directions (its bytes, strides and segment
count, and the destination counted as written), a fused chain's kernel header."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlpc.backends.dlp_c import emit_dlp_c, target_macros
from dlpc.backends.runtime.dlp_sim import NUM_COUNTERS, SPACES, compile_dlp, model_kernel
from dlpc.passes import pipeline
from dlpc.targets.dlp import resolve

# 16 rows of 64 floats, 192 apart in x, land 80 apart in NRAM (from element 16), then go
# back to out 64 apart: strides that differ in every place an argument could be swapped
STRIDED = """
func.func @main(%x: memref<16x192xf32>, %out: memref<16x64xf32>) attributes {{dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64}} {{
  dlp.kernel "k" attributes {{tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64{fused}}} {{
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %c80 = arith.constant 80 : index
    %c192 = arith.constant 192 : index
    %a = memref.alloc() : memref<1280xf32, #dlp.space<nram>>
    dlp.memcpy_strided_async GDRAM2NRAM %a[%c16], %x[%c64], %c64 x %c16, %c80, %c192 : memref<1280xf32, #dlp.space<nram>>, memref<16x192xf32>
    dlp.wait_dma
    dlp.memcpy_strided_async NRAM2GDRAM %out[%c0], %a[%c16], %c64 x %c16, %c64, %c80 : memref<16x64xf32>, memref<1280xf32, #dlp.space<nram>>
    dlp.wait_dma
  }}
  func.return
}}
"""


def _source(fused: str = "") -> str:
    return emit_dlp_c(pipeline.parse_module(STRIDED.format(fused=fused)))


def test_strided_copies_print_bangs_seven_argument_form():
    lines = [ln.strip() for ln in _source().splitlines()]
    assert (
        "__memcpy_async(v_a + 16, v_x + 64, 64 * sizeof(float), GDRAM2NRAM, "
        "80 * sizeof(float), 192 * sizeof(float), 16 - 1);"
    ) in lines
    assert (
        "__memcpy_async(v_out0, v_a + 16, 64 * sizeof(float), NRAM2GDRAM, "
        "64 * sizeof(float), 80 * sizeof(float), 16 - 1);"
    ) in lines
    # out0 is written by a strided copy only: not a const argument
    assert "__mlu_entry__ void kernel_k(const float *v_x, float *v_out0)" in lines


def test_strided_copies_move_every_segment_on_the_simulator():
    f = compile_dlp(pipeline.parse_module(STRIDED.format(fused="")), None, name="strided5")
    x = np.arange(16 * 192, dtype=np.float32).reshape(16, 192)
    (out,) = f(x)
    np.testing.assert_array_equal(out, x[:, 64:128])
    (rep,) = f.report
    assert rep.dma_count == 2 and rep.dma_hidden == 0
    assert rep.bytes == {"gdram->nram": 16 * 64 * 4.0, "nram->gdram": 16 * 64 * 4.0}


def test_fused_chain_named_in_the_kernel_header():
    fused = _source(', dlpc.fused = "relu_0,copy_1"')
    assert '/* kernel "k": 1 tasks; nram 5120 bytes; fuses relu_0,copy_1 */' in fused.splitlines()
    plain = _source()
    assert '/* kernel "k": 1 tasks; nram 5120 bytes */' in plain.splitlines()
    assert "fuses" not in plain


def test_queue_depth_macro_from_the_description():
    macros = target_macros(dataclasses.replace(resolve("tiny"), dma_queue_depth=3)).splitlines()
    i = macros.index("#define DLP_DMA_QUEUE_DEPTH 3")
    assert macros[i - 1] == "#define DLP_DMA_ALIGN 64"
    assert macros[i + 1] == "#define DLP_VECTOR_ALIGN 64"


def test_onchip_bytes_cost_at_the_sram_bandwidth_per_cycle():
    """NRAM->WRAM and SRAM bytes at sram_bandwidth / clock bytes a cycle (a clock of 2 GHz:
    a ratio that differs from the bandwidth itself), GDRAM bytes at the GDRAM one's."""
    desc = dataclasses.replace(resolve("tiny"), clock_ghz=2.0)
    c = [0.0] * NUM_COUNTERS
    c[SPACES.index("nram") * 4 + SPACES.index("wram")] = 4096.0
    c[SPACES.index("sram") * 4 + SPACES.index("nram")] = 1024.0
    c[SPACES.index("gdram") * 4 + SPACES.index("nram")] = 512.0
    rep = model_kernel("k", "o", 1, False, [c], desc)
    sram = (4096.0 + 1024.0) / (desc.sram_bandwidth_gbs / 2.0)
    gdram = 512.0 / (desc.gdram_bandwidth_gbs / 2.0)
    assert rep.transfer_cycles == pytest.approx(sram + gdram)
    assert rep.cycles == pytest.approx(sram + gdram)
    assert rep.seconds == pytest.approx((sram + gdram) / 2e9)
