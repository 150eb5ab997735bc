"""Every schedule primitive preserves numerics: the kernel compiled to C before and
after the primitive gives the same result on random inputs (and both match numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.backends.c import emit_c, find_main, memref_info
from dlpc.backends.runtime.cbuild import build
from dlpc.passes.pipeline import parse_module
from dlpc.passes.schedule import (
    cache,
    compute_at,
    decompose,
    fuse,
    parallel,
    reorder,
    rfactor,
    split,
    tensorize,
    tile,
    unroll,
    vectorize,
)
from dlpc.passes.schedule._common import ScheduleError
from dlpc.passes.schedule.default import apply_default
from dlpc.passes.schedule.script import apply_script

MATMUL = """
func.func @main(%A: memref<24x16xf32>, %B: memref<16x64xf32>, %bias: memref<64xf32>, %C: memref<24x64xf32>) {
  loop.kernel "mm" {
    loop.for %i0 = 0 to 24 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 64 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 16 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %r0] : memref<24x16xf32>
          %b = memref.load %B[%r0, %i1] : memref<16x64xf32>
          %p = arith.mulf %a, %b : f32
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %p : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        %bb = memref.load %bias[%i1] : memref<64xf32>
        %y = arith.addf %v, %bb : f32
        %r = arith.maximumf %y, %z : f32
        memref.store %r, %C[%i0, %i1] : memref<24x64xf32>
      }
    }
  }
  func.return
}
"""

CHAIN = """
func.func @main(%x: memref<8x32xf32>, %y: memref<8x32xf32>) {
  %t = memref.alloc() : memref<8x32xf32>
  loop.kernel "relu" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1", vectorize} {
        %v = memref.load %x[%i0, %i1] : memref<8x32xf32>
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %z : f32
        memref.store %r, %t[%i0, %i1] : memref<8x32xf32>
      }
    }
  }
  loop.kernel "add" {
    loop.for %i0 = 0 to 8 step 1 {name = "i0"} {
      loop.for %i1 = 0 to 32 step 1 {name = "i1"} {
        %a = memref.load %t[%i0, %i1] : memref<8x32xf32>
        %b = memref.load %x[%i0, %i1] : memref<8x32xf32>
        %s = arith.addf %a, %b : f32
        memref.store %s, %y[%i0, %i1] : memref<8x32xf32>
      }
    }
  }
  memref.dealloc %t : memref<8x32xf32>
  func.return
}
"""


def run_c(module, seed: int = 0) -> list[np.ndarray]:
    """Compile the loop module to C and run it; every argument is given random data, the
    arrays are returned after the call (outputs overwritten)."""
    rng = np.random.default_rng(seed)
    args = [memref_info(a.type)[0] for a in find_main(module).body.block.args]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in args]
    build(emit_c(module), name="test_schedule").call(arrays)
    return arrays


def numpy_matmul(seed: int = 0) -> np.ndarray:
    a, b, bias, _ = run_inputs(seed)
    return np.maximum(a @ b + bias, 0)


def run_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(s).astype(np.float32) for s in ((24, 16), (16, 64), (64,), (24, 64))
    ]


def check(text: str, transform) -> None:
    before = parse_module(text)
    after = parse_module(text)
    transform(after)
    after.verify()
    assert str(after) != str(before), "the primitive changed nothing"
    ref, got = run_c(before), run_c(after)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_reference_matches_numpy():
    out = run_c(parse_module(MATMUL))[-1]
    np.testing.assert_allclose(out, numpy_matmul(), rtol=1e-5, atol=1e-5)


PRIMITIVES = {
    "split": lambda m: split.split(m, "mm", "i1", 16),
    "reorder": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        reorder.reorder(m, "mm", ["r0", "i1"]),
    ),
    "tile": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        tile.tile(m, "mm", ["i0", "i1"], [8, 16]),
    ),
    "fuse": lambda m: fuse.fuse(m, "mm", "i0", "i1"),
    "unroll": lambda m: unroll.unroll(m, "mm", "r0", 4),
    "vectorize": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        reorder.reorder(m, "mm", ["r0", "i1"]),
        vectorize.vectorize(m, "mm", "i1"),
    ),
    "parallel": lambda m: (parallel.serial(m, "mm"), parallel.parallel(m, "mm", "i1")),
    "decompose": lambda m: decompose.decompose_reduction(m, "mm"),
    "cache_read": lambda m: cache.cache_read(m, "mm", "i0", "B"),
    "cache_read_pack": lambda m: cache.cache_read(m, "mm", "i0", "B", pack=True),
    "cache_write": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        cache.cache_write(m, "mm", "i0", "C"),
    ),
    "rfactor": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        rfactor.rfactor(m, "mm", "r0", 8),
    ),
    "tensorize": lambda m: (
        decompose.decompose_reduction(m, "mm"),
        tile.tile(m, "mm", ["i0", "i1"], [8, 32]),
        reorder.reorder(m, "mm", ["i0o", "i1o", "i0i", "i1i", "r0"]),
        tensorize.tensorize(m, "mm", "i0i", "gemm"),
    ),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_preserves_numerics(name):
    check(MATMUL, PRIMITIVES[name])


def test_compute_at_preserves_numerics():
    check(CHAIN, lambda m: compute_at.compute_at(m, "relu", "add", "i0"))


def test_gemm_script_with_packing_preserves_numerics():
    script = """
        decompose mm
        split mm/i1 by 32 -> jc, j1
        split mm/r0 by 8 -> kc, k1
        split mm/i0 by 12 -> ic, i1x
        split mm/j1 by 16 -> jr, jj
        split mm/i1x by 6 -> ir, ii
        reorder mm: jc, kc, ic, jr, ir, ii, jj, k1
        tensorize mm/ii gemm
        cache_read mm/kc @1 -> Bp pack
        cache_read mm/ic @0 -> Ap pack
        serial mm
        parallel mm/jc
    """
    check(MATMUL, lambda m: apply_script(m, script))


def test_default_schedule_preserves_numerics():
    check(MATMUL, apply_default)


def test_default_schedule_keeps_an_f32_sum_stored_as_f16():
    """matmul -> cast to f16 fuses into one kernel whose f32 accumulator is stored as f16:
    decompose must not accumulate in the f16 output (the GEMM schedule is skipped)."""
    import dlpc
    from dlpc.api import Model
    from dlpc.reference.graph import run_reference

    module = parse_module("""
func.func @main(%a: tensor<2x8x6xf32>, %b: tensor<2x6x16xf32>) -> tensor<2x8x16xf16> {
  %m = graph.matmul %a, %b : (tensor<2x8x6xf32>, tensor<2x6x16xf32>) -> tensor<2x8x16xf32>
  %c = graph.cast %m {to = f16} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf16>
  func.return %c : tensor<2x8x16xf16>
}""")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 8, 6), np.float32), rng.standard_normal((2, 6, 16), np.float32)
    (want,) = run_reference(module, [a, b], {})
    (got,) = dlpc.compile(Model(module, {}, "mm_f16", None), target="c")(a, b)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)


def test_failed_primitive_names_the_loop():
    m = parse_module(MATMUL)
    with pytest.raises(split.SplitFactorError, match="loop mm/i1"):
        split.split(m, "mm", "i1", 48)
    with pytest.raises(ScheduleError, match="loop mm/r0 is a reduction loop"):
        parallel.parallel(m, "mm", "r0")


def _conv_case(n, c, h, w, o, k, stride, pad, groups, relu):
    ho = (h + 2 * pad - k) // stride + 1
    wo = (w + 2 * pad - k) // stride + 1
    attrs = (
        f"{{strides = array<i64: {stride}, {stride}>, "
        f"pads = array<i64: {pad}, {pad}, {pad}, {pad}>, groups = {groups} : i64}}"
    )
    x, wt, y = f"{n}x{c}x{h}x{w}xf32", f"{o}x{c // groups}x{k}x{k}xf32", f"{n}x{o}x{ho}x{wo}xf32"
    tail = (
        f"  %r = graph.relu %y : (tensor<{y}>) -> tensor<{y}>\n  func.return %r : tensor<{y}>"
        if relu
        else f"  func.return %y : tensor<{y}>"
    )
    return f"""
func.func @main(%x: tensor<{x}>, %w: tensor<{wt}>, %b: tensor<{o}xf32>) -> tensor<{y}> {{
  %y = graph.conv2d %x, %w, %b {attrs} : (tensor<{x}>, tensor<{wt}>, tensor<{o}xf32>) -> tensor<{y}>
{tail}
}}"""


# (n, c, h, w, o, k, stride, pad, groups, relu): odd sizes, strides, padding, groups,
# batches, rows narrower and wider than a vector, channel counts without a block of 8
CONV_CASES = [
    (1, 3, 13, 17, 6, 3, 1, 1, 1, True),
    (2, 5, 11, 9, 7, 3, 2, 1, 1, False),
    (1, 4, 10, 21, 12, 1, 1, 0, 1, True),
    (1, 6, 9, 9, 10, 1, 2, 0, 1, False),
    (3, 4, 7, 70, 16, 5, 1, 2, 1, True),
    (1, 6, 12, 12, 6, 3, 1, 1, 6, False),
    (1, 4, 11, 11, 8, 3, 1, 1, 2, True),
    (1, 2, 15, 33, 9, 3, 3, 0, 1, False),
    (2, 8, 9, 20, 8, 3, 1, 1, 8, True),
    (1, 12, 7, 7, 12, 5, 1, 2, 12, False),
    (1, 8, 9, 9, 8, 3, 2, 1, 8, True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c)))
def test_default_conv_schedules_match_the_reference(case):
    """Every conv shape through the default schedules (the register-tiled direct conv,
    its im2col packing, or a fallback) matches the numpy reference on C."""
    import dlpc
    from dlpc.api import Model
    from dlpc.reference.graph import run_reference

    module = parse_module(_conv_case(*case))
    n, c, h, w, o, k, _, _, groups, _ = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c, h, w), np.float32)
    wt = rng.standard_normal((o, c // groups, k, k), np.float32)
    b = rng.standard_normal((o,), np.float32)
    (want,) = run_reference(module, [x, wt, b], {})
    (got,) = dlpc.compile(Model(module, {}, "conv", None), target="c")(x, wt, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_default_conv_schedule_is_the_register_tile():
    """A strided 3x3 conv, a 1x1 conv and a strided 1x1 conv get the tiled schedule (an
    `_acc` tile around the reductions); the strided 3x3 reads its input as phase planes
    (`deinterleave`), the strided 1x1 as im2col rows (`pack`), the 1x1 directly."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.default import default_scripts

    for case, staged in (
        (CONV_CASES[1], "deinterleave"),
        (CONV_CASES[2], ""),
        (CONV_CASES[3], "pack"),
    ):
        module = parse_module(_conv_case(*case))
        lower(module, "loop", PipelineOptions(opt_level=0))
        (conv,) = [k.sym for k in kernels(module) if k.sym.startswith("conv")]
        script = default_scripts(module, conv)[0]
        assert f"cache_write {conv}/" in script and f"-> {conv}_acc" in script
        assert (" pack" in script) == (staged == "pack")
        assert (" deinterleave" in script) == (staged == "deinterleave")


@pytest.mark.parametrize("kernel, loop", [("cs", "i0"), ("cs", "i2"), ("cs2", "i3o")])
def test_cache_read_deinterleave_preserves_numerics(kernel, loop):
    """cache_read ... deinterleave of a stride-2 padded read: phase planes, read with unit
    stride (at cs/i0 the static copy: fill, then unguarded per-phase ranges; at cs/i2 the
    box's rows move with the output row: a guard per row; at cs2/i3o its columns move
    with the column block: the guarded copy)."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "passes" / "loop-cache-read-deinterleave.mlir"
    text = path.read_text()
    check(text, lambda m: cache.cache_read(m, kernel, loop, "x", deinterleave=True))


@pytest.mark.parametrize("loop", ["i0", "i2", "i3"])
def test_cache_read_of_a_padded_read_preserves_numerics(loop):
    """cache_read of a guarded (zero-padded) input: a padded copy, read unguarded (at i0
    the static copy: border filled, interior copied unguarded; at i2 the box's rows move
    with the output row: a guard per row; at i3 its columns move too: the guarded copy)."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "passes" / "loop-cache-read-padded.mlir").read_text()
    check(text, lambda m: cache.cache_read(m, "dw", loop, "x"))


@pytest.mark.parametrize("batch", [2, 3])
def test_default_conv_schedule_runs_a_batch_in_blocks_or_as_one_parallel_loop(monkeypatch, batch):
    """With a batch of small images (for any size here: this small conv is below the
    serial threshold otherwise), the (image, row) pairs are one loop. Images that split
    evenly over the 2 threads: one block of images per thread, staged by its thread
    inside the parallel block loop (batch 2: blocks of 1); else every image staged at once
    and (image, row) the parallel loop."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule import nest
    from dlpc.passes.schedule.default import default_scripts

    monkeypatch.setattr(nest, "CONV_PARALLEL_MACS", 0)

    # CONV_CASES[1] (batch 2, stride 2, padded) at this batch
    module = parse_module(_conv_case(batch, *CONV_CASES[1][1:]))
    lower(module, "loop", PipelineOptions(opt_level=0))
    (conv,) = [k.sym for k in kernels(module) if k.sym.startswith("conv")]
    script = default_scripts(module, conv)[0]
    lines = script.splitlines()
    assert f"cache_read {conv}/i0b " in script and " deinterleave" in script
    assert f"fuse {conv}/i0n, i2 -> i0i2" in lines
    if batch == 2:
        assert f"split {conv}/i0 by 1 -> i0b, i0n" in lines
        assert [ln for ln in lines if ln.startswith("parallel")] == [f"parallel {conv}/i0b"]
    else:
        assert f"split {conv}/i0 by 3 -> i0b, i0n" in lines
        assert [ln for ln in lines if ln.startswith("parallel")] == [f"parallel {conv}/i0i2"]


@pytest.mark.parametrize(
    "shape", [(3, 5, 12, 20), (2, 17, 9, 33), (32, 16, 64, 48), (2, 80, 300, 40)]
)
def test_default_gemm_over_a_batch_with_a_shared_b_matches_the_reference(shape):
    """[N, M, K] x [K, P]: small ones read A and B in place, larger ones pack B once with
    the batch loop inside its panel loops."""
    import dlpc
    from dlpc.api import Model
    from dlpc.reference.graph import run_reference

    n, m, k, p = shape
    a_t, b_t, c_t = f"{n}x{m}x{k}xf32", f"{k}x{p}xf32", f"{n}x{m}x{p}xf32"
    module = parse_module(f"""
func.func @main(%a: tensor<{a_t}>, %b: tensor<{b_t}>) -> tensor<{c_t}> {{
  %c = graph.matmul %a, %b : (tensor<{a_t}>, tensor<{b_t}>) -> tensor<{c_t}>
  func.return %c : tensor<{c_t}>
}}""")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((n, m, k), np.float32), rng.standard_normal((k, p), np.float32)
    (want,) = run_reference(module, [a, b], {})
    (got,) = dlpc.compile(Model(module, {}, "bmm", None), target="c")(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "op,shape",
    [
        ("global_avg_pool", (1, 32, 16, 16)),
        ("global_avg_pool", (3, 5, 7, 7)),
        ("global_avg_pool", (2, 4, 9, 20)),
        ("reduce_sum", (6, 4, 24)),
    ],
)
def test_default_flat_reduction_is_vectorized_and_matches_the_reference(op, shape):
    """A reduction over whole trailing dims (global average pooling, a sum over the last
    axes) gets rfactor of its innermost loop (partials around all its reduction loops)
    and matches the numpy reference on C."""
    import dlpc
    from dlpc.api import Model
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.passes.schedule.default import default_scripts
    from dlpc.reference.graph import run_reference

    x_t = "x".join(map(str, shape)) + "xf32"
    if op == "global_avg_pool":
        y_t = "x".join(map(str, (*shape[:2], 1, 1))) + "xf32"
        line = f"%y = graph.global_avg_pool %x : (tensor<{x_t}>) -> tensor<{y_t}>"
    else:
        y_t = f"{shape[0]}xf32"
        line = f"%y = graph.reduce_sum %x {{axes = array<i64: 1, 2>}} : (tensor<{x_t}>) -> tensor<{y_t}>"
    text = f"""
func.func @main(%x: tensor<{x_t}>) -> tensor<{y_t}> {{
  {line}
  func.return %y : tensor<{y_t}>
}}"""
    module = parse_module(text)
    lower(module, "loop", PipelineOptions(opt_level=0))
    (kernel,) = [k.sym for k in kernels(module)]
    inner = shape[-1]
    factor = max(d for d in range(1, 17) if inner % d == 0)
    assert default_scripts(module, kernel) == [
        f"decompose {kernel}\nrfactor {kernel}/r1 by {factor}"
    ]
    x = np.random.default_rng(3).standard_normal(shape, np.float32)
    (want,) = run_reference(parse_module(text), [x], {})
    (got,) = dlpc.compile(Model(parse_module(text), {}, "reduce", None), target="c")(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
