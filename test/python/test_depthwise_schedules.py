"""Depthwise convolutions (groups = input channels) through the default pipeline on target
c against the numpy reference: channels 8/32/48/96, rows 7/14/28/32/56/112, padding 0 and
1, stride 1 (and 2 and 3: the input staged as phase planes), channel multiplier 1 and 2, batch 1, 4 and 32, a batch norm + relu6 epilogue
(mobilenet's block) and a bias. The NCHW depthwise template (`passes/schedule/depthwise.py`)
is checked to be the one that ran where it applies: one channel's padded plane staged
per (image, channel), the (image, channel) pairs one loop. At -O3 with graph-layout forced (NHWC)
the channel-vectorized NHWC template runs (its weight packed along the channels).
rtol/atol 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc import api

TOL = 1e-4

# name -> (channels, rows, columns, padding, multiplier, epilogue)
CASES = {
    "c8_7x7": (8, 7, 7, 1, 1, ""),
    "c32_14x14": (32, 14, 14, 1, 1, "bias"),
    "c48_28x28": (48, 28, 28, 1, 1, ""),
    "c32_32x32_bn_relu6": (32, 32, 32, 1, 1, "bn"),  # mobilenet's depthwise layer
    "c8_56x56": (8, 56, 56, 1, 1, ""),
    "c96_7x7_nopad": (96, 7, 7, 0, 1, ""),
    "c48_14x14_nopad": (48, 14, 14, 0, 1, "bn"),
    "c32_28x28_nopad": (32, 28, 28, 0, 1, ""),
    "c8_13x11_odd": (8, 13, 11, 1, 1, ""),  # 13 rows: no row block divides it
    "c8_112x112": (8, 112, 112, 1, 1, "bn"),  # mobilenet's first row width: tiles of 16
    "c4_24x80_nopad": (4, 24, 80, 0, 1, ""),  # 78 columns (> 64): no tile of 16 divides it
    "c8_14x14_mult2": (8, 14, 14, 1, 2, ""),
    "c48_7x7_mult2": (48, 7, 7, 1, 2, "bias"),
}


UNTILED = {"c4_24x80_nopad"}


def source(name: str) -> str:
    c, h, w, pad, mult, epilogue = CASES[name]
    o = c * mult
    params = [f"param w: f32[{o}, 1, 3, 3] = kaiming(seed=1)"]
    conv = f"conv2d(x, w, padding={pad}, groups={c})"
    if epilogue == "bias":
        params.append(f"param b: f32[{o}] = normal(seed=2, std=0.1)")
        conv = f"conv2d(x, w, b, padding={pad}, groups={c})"
    elif epilogue == "bn":
        params += [
            f"param s: f32[{o}] = uniform(seed=3, low=0.8, high=1.2)",
            f"param b: f32[{o}] = normal(seed=4, std=0.1)",
            f"param m: f32[{o}] = normal(seed=5, std=0.1)",
            f"param v: f32[{o}] = uniform(seed=6, low=0.5, high=1.5)",
        ]
        conv = f"relu6(batch_norm({conv}, s, b, m, v))"
    body = "\n".join(params + [f"return {conv}"])
    return f"model {name}(x: f32[B, {c}, {h}, {w}]) {{\n{body}\n}}\n"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dlpc-cache"))


def run(tmp_path, name: str, batch: int, opt_level: int, **options):
    c, h, w, pad, mult, _ = CASES[name]
    path = tmp_path / f"{name}.dlpc"
    path.write_text(source(name))
    model = api.load(path, batch=batch)
    xs = api.random_inputs(model, seed=batch)
    (want,) = api.reference(model, xs)
    # (the whole batch's program: its schedule is what the tests read, not a chunk's)
    compiled = api.compile(model, target="c", opt_level=opt_level, batch_chunks=False, **options)
    (got,) = compiled(*xs)
    return compiled, got, want


@pytest.mark.parametrize("batch", [1, 4, 32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_depthwise_matches_reference_on_c(tmp_path, name, batch):
    c, h, w, pad, mult, _ = CASES[name]
    compiled, got, want = run(tmp_path, name, batch, opt_level=2)
    assert got.shape == want.shape == (batch, c * mult, h - 2 + 2 * pad, w - 2 + 2 * pad)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    # the depthwise template ran (multiplier 2: the input channel is o / 2, not affine; a
    # row over 64 columns that no multiple of 16 divides: the reduction template)
    if mult == 1 and name not in UNTILED:
        plane = (h + 2 * pad) * (w + 2 * pad)
        assert (f"_xp_mem[{plane}]" in compiled.source) == (pad > 0)
        if batch > 1:
            assert f"v_i0i1 < {batch * c};" in compiled.source


NHWC_CASES = ["c32_14x14", "c96_7x7_nopad", "c32_32x32_bn_relu6", "c8_13x11_odd", "c8_14x14_mult2"]


@pytest.mark.parametrize("batch", [1, 4, 32])
@pytest.mark.parametrize("name", NHWC_CASES)
def test_nhwc_depthwise_matches_reference_on_c(tmp_path, name, batch):
    c, h, w, pad, mult, _ = CASES[name]
    # graph-layout forced (-O3 alone converts no depthwise conv: NHWC does not pay)
    compiled, got, want = run(tmp_path, name, batch, 3, graph_layout={"where": "all"})
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    # the NHWC template ran: its weight packed once, contiguous along the channels
    # (multiplier 2 reads input channel o / 2, which no padded copy can stage: fallback)
    assert ("_wp_prepack" in compiled.source) == (mult == 1)


# name -> (channels, rows, columns, padding, stride): strided depthwise convs read their
# channel's plane as stride-1 phase planes (`cache_read ... deinterleave`, a `_xq` buffer)
STRIDED = {
    "s2_c32_32x32": (32, 32, 32, 1, 2),  # mobilenet's downsampling depthwise
    "s2_c16_56x56": (16, 56, 56, 1, 2),
    "s2_c24_15x15_odd": (24, 15, 15, 1, 2),
    "s2_c16_28x28_nopad": (16, 28, 28, 0, 2),
    "s3_c8_20x19": (8, 20, 19, 1, 3),
}


@pytest.mark.parametrize("batch", [1, 4, 32])
@pytest.mark.parametrize("name", sorted(STRIDED))
def test_strided_depthwise_matches_reference_on_c(tmp_path, name, batch):
    c, h, w, pad, stride = STRIDED[name]
    path = tmp_path / f"{name}.dlpc"
    path.write_text(
        f"model {name}(x: f32[B, {c}, {h}, {w}]) {{\n"
        f"param w: f32[{c}, 1, 3, 3] = kaiming(seed=7)\n"
        f"return conv2d(x, w, stride={stride}, padding={pad}, groups={c})\n}}\n"
    )
    model = api.load(path, batch=batch)
    xs = api.random_inputs(model, seed=batch)
    (want,) = api.reference(model, xs)
    compiled = api.compile(model, target="c")
    (got,) = compiled(*xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    assert "_xq[" in compiled.source  # the phase planes, not the reduction template


# name -> (channels, rows, columns, padding): whole vectors a row at stride 1, so the window
# slides in registers (`tensorize ... slide`, passes/schedule/slide.py): 16 and 32 columns
# (the MobileNetV2-style net's), an unpadded 18 (the window reads the input's own rows of
# 18: the last load clamped to the row's end), 64 columns with a batch norm + relu6
SLIDING = {
    "c16_16x16": (16, 16, 16, 1),
    "c8_32x32": (8, 32, 32, 1),
    "c4_18x18_nopad": (4, 18, 18, 0),
    "c4_12x64_bn": (4, 12, 64, 1),
}


@pytest.mark.parametrize("isa", ["native", "no-avx512"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("name", sorted(SLIDING))
def test_sliding_depthwise_matches_reference_on_c(tmp_path, monkeypatch, name, batch, isa):
    """Both halves of a sliding nest against the reference: the vector code where the C
    compiler targets AVX-512, the scalar nest it keeps under `#if !defined(__AVX512F__)`
    (compiled with -mno-avx512f appended; on a host without AVX-512 both runs take it)."""
    c, h, w, pad = SLIDING[name]
    if isa == "no-avx512":
        monkeypatch.setenv("DLPC_CFLAGS", "-mno-avx512f")
    params = [f"param k: f32[{c}, 1, 3, 3] = kaiming(seed=3)"]
    conv = f"conv2d(x, k, padding={pad}, groups={c})"
    if name.endswith("_bn"):
        params += [
            f"param s: f32[{c}] = uniform(seed=3, low=0.8, high=1.2)",
            f"param b: f32[{c}] = normal(seed=4, std=0.1)",
            f"param m: f32[{c}] = normal(seed=5, std=0.1)",
            f"param v: f32[{c}] = uniform(seed=6, low=0.5, high=1.5)",
        ]
        conv = f"relu6(batch_norm({conv}, s, b, m, v))"
    path = tmp_path / f"{name}.dlpc"
    path.write_text(
        f"model {name}(x: f32[B, {c}, {h}, {w}]) {{\n"
        + "\n".join(params)
        + f"\nreturn {conv}\n}}\n"
    )
    model = api.load(path, batch=batch)
    xs = api.random_inputs(model, seed=batch)
    (want,) = api.reference(model, xs)
    compiled = api.compile(model, target="c", batch_chunks=False)
    (got,) = compiled(*xs)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    # the window slid: the vector code and the scalar nest, one of them compiled
    assert "#if defined(__AVX512F__)" in compiled.source
    assert "#if !defined(__AVX512F__)" in compiled.source
    assert "DLPC_SHUFFLE16(" in compiled.source.split("#if defined(__AVX512F__)", 1)[1]
    # a padded plane of one image: the vector code reads the input in place, the padded
    # copy only for the scalar nest (under the `!defined` half)
    vector_code = [
        part.split("#endif", 1)[0] for part in compiled.source.split("#if defined(__AVX512F__)")[1:]
    ]
    if pad > 0 and batch == 1:
        assert vector_code and all("_xp[" not in code for code in vector_code)
