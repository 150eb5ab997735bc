"""int8 quantized inference: the quantization ops on every backend against the numpy
reference, and onnxruntime's QDQ-quantized examples (bench/int8_models.py: the mlp and
lenet quantized by `quantize_static` over seeded calibration data, lenet also with uint8
activations) through
`dlpc.load` + `dlpc.compile` against onnxruntime on the same file, with the check that
they run as integer kernels (graph-fold-qdq + graph-fuse), not as dequantized floats."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc import api

BENCH = Path(__file__).resolve().parents[2] / "bench"

# quantize per axis (ties to even, saturation, nan, infinities), conv_integer with padding,
# stride and per-output-channel weight zero points, matmul_integer of uint8 x int8 with
# per-row zero points and transpose_b, dequantize per axis
OPS = """
func.func @main(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xi8>, %b: tensor<5x8xui8>, %c: tensor<6x8xi8>) -> (tensor<2x3x6x6xi8>, tensor<2x4x3x3xi32>, tensor<5x6xi32>, tensor<2x3x6x6xf32>, tensor<2x3x6x6xui8>) {
  %s = graph.constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32>
  %z = graph.constant dense<[0, 3, -2]> : tensor<3xi8>
  %q = graph.quantize %x, %s, %z : (tensor<2x3x6x6xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x6x6xi8>
  %s1 = graph.constant dense<0.5> : tensor<1xf32>
  %z1 = graph.constant dense<200> : tensor<1xui8>
  %u = graph.quantize %x, %s1, %z1 : (tensor<2x3x6x6xf32>, tensor<1xf32>, tensor<1xui8>) -> tensor<2x3x6x6xui8>
  %zx = graph.constant dense<1> : tensor<i8>
  %zw = graph.constant dense<[0, 1, -1, 2]> : tensor<4xi8>
  %y = graph.conv_integer %q, %w, %zx, %zw {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x6x6xi8>, tensor<4x3x3x3xi8>, tensor<i8>, tensor<4xi8>) -> tensor<2x4x3x3xi32>
  %za = graph.constant dense<[128, 0, 255, 7, 9]> : tensor<5xui8>
  %zb = graph.constant dense<3> : tensor<i8>
  %m = graph.matmul_integer %b, %c, %za, %zb {transpose_b = true} : (tensor<5x8xui8>, tensor<6x8xi8>, tensor<5xui8>, tensor<i8>) -> tensor<5x6xi32>
  %d = graph.dequantize %q, %s, %z : (tensor<2x3x6x6xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x6x6xf32>
  func.return %q, %y, %m, %d, %u : tensor<2x3x6x6xi8>, tensor<2x4x3x3xi32>, tensor<5x6xi32>, tensor<2x3x6x6xf32>, tensor<2x3x6x6xui8>
}
"""


def _op_inputs():
    rng = np.random.default_rng(0)
    x = (rng.integers(-600, 600, (2, 3, 6, 6)) / 4).astype(np.float32)  # halves, saturation
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    b = rng.integers(0, 256, (5, 8)).astype(np.uint8)
    c = rng.integers(-128, 128, (6, 8)).astype(np.int8)
    return [x, w, b, c]


def test_reference_semantics():
    """The reference is ONNX's: halves to even, saturated, nan to the minimum; the
    integer products are exact in int32."""
    from dlpc.reference import graph as ref

    x = np.array([0.25, 0.75, -0.25, 1000.0, -1000.0, np.nan], np.float32)
    q = ref.quantize(x, np.float32(0.5).reshape(()), np.int8(1).reshape(()), axis=1)
    np.testing.assert_array_equal(q, [1, 3, 1, 127, -128, -128])  # rint(0.5) = 0, rint(1.5) = 2
    a = np.full((1, 300), -128, np.int8)
    b = np.full((300, 1), -128, np.int8)
    z = np.zeros((), np.int8)
    got = ref.matmul_integer(a, b, z, z, transpose_b=False)
    assert got.dtype == np.int32 and got[0, 0] == 300 * 128 * 128


@pytest.mark.parametrize("target", ["numpy", "c", "opencl", "dlp"])
def test_quantization_ops_on_every_backend(tmp_path, target):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    path = tmp_path / "ops.mlir"
    path.write_text(OPS)
    model = dlpc.load(path)
    inputs = _op_inputs()
    want = api.reference(model, inputs)
    got = dlpc.compile(model, target=target)(*inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


# matmul_integer without a weight zero point: quant_to_te sums (a + 128) * w (u8 x s8, nsw)
# and subtracts (za + 128) * the weight's column sums (a kernel for the weight %c, a
# constant for %k); per-row zero points, the extremes of both types, K = 300
U8_DOT = """
func.func @main(%a: tensor<3x300xi8>, %c: tensor<4x300xi8>, %u: tensor<2x5xui8>) -> (tensor<3x4xi32>, tensor<2x2xi32>) {
  %za = graph.constant dense<[-128, 127, 5]> : tensor<3xi8>
  %z0 = graph.constant dense<0> : tensor<i8>
  %m = graph.matmul_integer %a, %c, %za, %z0 {transpose_b = true} : (tensor<3x300xi8>, tensor<4x300xi8>, tensor<3xi8>, tensor<i8>) -> tensor<3x4xi32>
  %k = graph.constant dense<[[-128, 127], [1, -1], [-128, -128], [127, 0], [3, -7]]> : tensor<5x2xi8>
  %zu = graph.constant dense<255> : tensor<ui8>
  %n = graph.matmul_integer %u, %k, %zu, %z0 : (tensor<2x5xui8>, tensor<5x2xi8>, tensor<ui8>, tensor<i8>) -> tensor<2x2xi32>
  func.return %m, %n : tensor<3x4xi32>, tensor<2x2xi32>
}
"""


@pytest.mark.parametrize("target", ["numpy", "c", "opencl", "dlp"])
def test_u8_dot_matmuls_match_reference(tmp_path, target):
    """The u8 x s8 form with the column-sum correction equals the reference exactly, and
    in C the sum is a signed accumulate (GCC's dot-product pattern: VNNI)."""
    if target == "opencl":
        pytest.importorskip("pyopencl")
    path = tmp_path / "dot.mlir"
    path.write_text(U8_DOT)
    model = dlpc.load(path)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (3, 300)).astype(np.int8)
    a[0], a[1, :150] = -128, 127  # u = 0 and u = 255
    c = rng.integers(-128, 128, (4, 300)).astype(np.int8)
    c[0] = -128
    u = rng.integers(0, 256, (2, 5)).astype(np.uint8)
    u[0] = 255
    inputs = [a, c, u]
    want = api.reference(model, inputs)
    compiled = dlpc.compile(model, target=target)
    for g, w in zip(compiled(*inputs), want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    if target == "c":
        import re

        assert "kernel_matmul_integer_0_colsum" in compiled.source
        assert re.search(r"const int32_t v_\d+ = v_\d+ \+ 128;", compiled.source)
        assert re.search(r"const int32_t (v_\d+) = v_\d+ \+ v_\d+;\n *v_acc = \1;", compiled.source)


# ------------------------------------------- onnxruntime's QDQ models of the examples


def _int8_models():
    spec = importlib.util.spec_from_file_location("dlpc_int8_models", BENCH / "int8_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def int8_files(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    where = tmp_path_factory.mktemp("int8")
    make = _int8_models().int8_model
    files = {name: make(name, where, batch=2) for name in ("mlp", "lenet")}
    files["lenet-uint8"] = make("lenet", where, batch=2, activations="uint8")
    return files


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    # its exact u8s8 products on AVX2 CPUs (AMD Zen 3): by default onnxruntime takes
    # vpmaddubsw there, whose int16 sums saturate (lenet: 8 quanta off), unlike AVX-512
    options.add_session_config_entry("session.x64quantprecision", "1")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", ["mlp", "lenet", "lenet-uint8"])
def test_qdq_example_matches_onnxruntime(int8_files, name):
    """The same int8 file, the same inputs: dlpc on numpy, C, OpenCL and DLP gives
    onnxruntime's outputs (dequantized int8: equal, or one quantum apart where a float
    rounding tie falls differently, on at most 2 % of them)."""
    model = dlpc.load(int8_files[name])
    (x,) = api.random_inputs(model, seed=3)
    want = _ort(int8_files[name], x)
    step = np.min(np.diff(np.unique(want)))  # one quantum of the output's scale
    targets = ["numpy", "c", "dlp"]
    if importlib.util.find_spec("pyopencl") is not None:
        targets.append("opencl")
    for target in targets:
        got = dlpc.compile(model, target=target)(x)[0]
        off = np.abs(got - want)
        assert off.max() <= step * 1.001, (target, off.max(), step)
        assert (off > 0).mean() <= 0.02, (target, (off > 0).mean())


@pytest.mark.parametrize("name", ["mlp", "lenet", "lenet-uint8"])
def test_qdq_example_runs_integer_kernels(int8_files, name):
    """Every matmul / linear / conv of the QDQ model is an integer product in one kernel
    with its rescale and requantization (int32 accumulator in the C source); -O0 (no
    graph-fold-qdq) computes the same values through dequantized floats."""
    model = dlpc.load(int8_files[name])
    compiled = dlpc.compile(model, target="c")
    origins = [
        op.attributes["origin"].data
        for op in compiled.lowered.walk()
        if op.name == "loop.kernel" and "origin" in op.attributes
    ]
    products = [o for o in origins if "_integer" in o]
    assert products and all("quantize" in o for o in products), origins
    floats = ("graph.matmul,", "graph.matmul)", "graph.linear", "graph.conv2d")
    assert not [o for o in origins if any(f in o for f in floats)], origins
    assert "int32_t v_acc" in compiled.source
    (x,) = api.random_inputs(model, seed=4)
    plain = dlpc.compile(model, target="numpy", opt_level=0)(x)[0]
    np.testing.assert_allclose(compiled(x)[0], plain, atol=np.abs(plain).max() * 0.05)


@pytest.mark.parametrize("name", ["lenet", "lenet-uint8"])
def test_int8_convs_are_scheduled(int8_files, name):
    """The fused int8 convs take the integer conv template (passes/schedule/int_conv.py):
    decompose gives their i32 sums a kernel-local buffer (`sums`), an output tile of them
    accumulates in a local `_acc`, and loop-fold-init-epilogue makes the tile's copy-out
    requantize straight into the output (`sums` gone); the 8-bit products print in plain
    signed C (quant_to_te marks them nsw), which GCC vectorizes, not in the wrapping
    uint32_t form. With uint8 activations the padded conv's zero-point padding is a
    constant plus a bitcast, which the padded staging copy does not take: only the
    unpadded conv is tiled, the other keeps the reduction template over `sums`."""
    import re

    model = dlpc.load(int8_files[name])
    compiled = dlpc.compile(model, target="c")
    convs = [
        op
        for op in compiled.lowered.walk()
        if op.name == "loop.kernel" and "graph.conv_integer" in op.attributes["origin"].data
    ]
    assert len(convs) == 2
    for kernel in convs[1:] if name == "lenet-uint8" else convs:
        text = str(kernel)
        assert "_acc = memref.alloca()" in text and "%sums" not in text, text[:3000]
    if name == "lenet-uint8":  # (decomposed: the reduction template)
        assert "%sums = memref.alloca()" in str(convs[0])
    assert re.search(r"const int32_t v_\d+ = v_\d+ \* v_\d+;", compiled.source)
