"""Memory of the reference and of dlpc-run's comparison (issue #15 item 10): dead values are
freed, a convolution's im2col goes a band of rows at a time, comparisons go a chunk at a
time, and a run that cannot fit is one error line before any work.

Peaks are measured with tracemalloc (numpy reports its buffers to it), relative to the
arrays a test makes before tracing starts."""

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from dlpc.passes.pipeline import parse_module
from dlpc.reference import graph as ref
from dlpc.tools import dlpc_run

MB = 1 << 20


def traced_peak(fn):
    """(result of fn(), peak bytes allocated while it ran)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def chain_module(n: int, shape=(1000, 1000)) -> str:
    ty = f"tensor<{'x'.join(map(str, shape))}xf32>"
    ops = ["exp", "tanh", "neg", "abs"]
    lines = [f"func.func @main(%v0: {ty}) -> {ty} {{"]
    for k in range(n):
        lines.append(f"  %v{k + 1} = graph.{ops[k % 4]} %v{k} : ({ty}) -> {ty}")
    lines += [f"  func.return %v{n} : {ty}", "}"]
    return "\n".join(lines)


def test_reference_frees_dead_values():
    """12 ops on a 4 MB tensor: at most the input, one operand and one result are alive
    (all 13 tensors were kept: 52 MB)."""
    module = parse_module(chain_module(12))
    x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    (y,), peak = traced_peak(lambda: ref.run_reference(module, [x], {}))
    want = x
    for k in range(12):
        want = [np.exp, np.tanh, np.negative, np.abs][k % 4](want)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    assert peak <= 3 * x.nbytes, peak
    # the static estimate dlpc-run checks before a run agrees: input + operand + result
    assert ref.peak_bytes(module) == 3 * x.nbytes


def test_peak_bytes_keeps_returned_values_alive():
    text = """
    func.func @main(%x: tensor<256x256xf32>) -> (tensor<256x256xf32>, tensor<256x256xf32>) {
      %a = graph.exp %x : (tensor<256x256xf32>) -> tensor<256x256xf32>
      %b = graph.tanh %a : (tensor<256x256xf32>) -> tensor<256x256xf32>
      %c = graph.neg %b : (tensor<256x256xf32>) -> tensor<256x256xf32>
      %d = graph.abs %c : (tensor<256x256xf32>) -> tensor<256x256xf32>
      func.return %a, %d : tensor<256x256xf32>, tensor<256x256xf32>
    }"""
    one = 256 * 256 * 4
    # the input stays alive (its caller holds it); at %c: x, %a (returned), %b, %c; at %d:
    # x, %a, %c, %d (%b died at %c)
    assert ref.peak_bytes(parse_module(text)) == 4 * one


def test_conv_im2col_goes_by_bands_of_rows():
    """1x3x1024x1024, 3x3, 8 channels: the whole im2col matrix was 27 x 2^20 floats
    (113 MB); a band is at most 2^22 elements (16 MiB)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 1024, 1024)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    kw = dict(strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
    y, peak = traced_peak(lambda: ref.conv2d(x, w, b, **kw))
    padded, out, band = 3 * 1026 * 1026 * 4, y.nbytes, (1 << 22) * 4
    assert peak <= padded + out + 2 * band, peak / MB
    # numerics: the same as one im2col product over the whole image
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack(
        [xp[0, :, i : i + 1024, j : j + 1024] for i in range(3) for j in range(3)], axis=1
    ).reshape(27, -1)
    want = (w.reshape(8, 27) @ cols).reshape(1, 8, 1024, 1024) + b.reshape(1, 8, 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_grouped_strided_conv_bands_match_reference_shapes():
    """Bands of one row (a wide image) with groups and strides give the same result."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 9, 70000)).astype(np.float32)  # 1 row per band
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    kw = dict(strides=(2, 3), pads=(1, 0, 2, 1), dilations=(1, 2), groups=2)
    y = ref.conv2d(x, w, None, **kw)
    import torch

    want = torch.nn.functional.conv2d(
        torch.nn.functional.pad(torch.from_numpy(x), (0, 1, 1, 2)),
        torch.from_numpy(w),
        stride=(2, 3),
        dilation=(1, 2),
        groups=2,
    ).numpy()
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_comparison_goes_by_chunks():
    """verdict/difference/within on two 32 MB arrays: each float64 temporary is one chunk
    (they made about eight float64 copies of the whole array: over 500 MB)."""
    rng = np.random.default_rng(3)
    out = rng.standard_normal(8 << 20).astype(np.float32)
    want = out + np.float32(1e-6)
    want[12345678 % want.size] += 1.0
    (said, diff, close), peak = traced_peak(
        lambda: (
            dlpc_run.verdict(out, want, 1e-4, 1e-5),
            dlpc_run.difference(out, want),
            dlpc_run.within(out, want, 1e-4, 1e-5),
        )
    )
    assert peak <= 16 * dlpc_run.CHUNK * 8, peak / MB
    assert said[:2] == (False, "MISMATCH (1 of 8388608 elements beyond atol + rtol*|ref|)")
    assert said[2].startswith("worst against its bound: [3957070] = ")
    assert diff[0] == pytest.approx(1.0, rel=1e-6) and not close


def test_chunked_comparison_equals_whole_array(monkeypatch):
    """With chunks of 7 elements, every figure is the whole-array one: the worst element
    is the first of the largest excess, NaN and infinities agree with themselves."""
    out = np.array([0.0, 1.0, np.nan, np.inf, 5.0, 2.0, 3.0, 9.0, 1.0, 2.0, 3.0, 9.5, 0.0])
    want = np.array([0.0, 1.0, np.nan, np.inf, 5.0, 2.1, 3.0, 9.0, 1.0, 2.0, 3.0, 9.0, 1e-9])
    whole = dlpc_run.verdict(out, want, 1e-4, 1e-5), dlpc_run.difference(out, want)
    monkeypatch.setattr(dlpc_run, "CHUNK", 7)
    chunked = dlpc_run.verdict(out, want, 1e-4, 1e-5), dlpc_run.difference(out, want)
    assert repr(chunked) == repr(whole)  # (repr: NaN equals NaN)
    assert whole[0][2].startswith("worst against its bound: [11] = 9.5 vs reference 9 ")
    assert dlpc_run.mean_std(want[:2]) == (0.5, 0.5)
    x = np.random.default_rng(4).standard_normal(100).astype(np.float32)
    mean, std = dlpc_run.mean_std(x)
    assert mean == pytest.approx(x.mean(dtype=np.float64), rel=1e-12)
    assert std == pytest.approx(x.std(dtype=np.float64), rel=1e-12)


def test_dlpc_run_says_before_starting_when_a_run_cannot_fit(tmp_path):
    """The issue's model with a 2^37-element broadcast: the reference would hold two
    512 GiB tensors; dlpc-run says so in one line before making any input."""
    path = tmp_path / "big.dlpc"
    path.write_text(
        "model big(x: f32[1]) {\n  return reduce_max(exp(broadcast(x, shape=[137438953472])))\n}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "dlpc", "run", str(path), "--target", "c"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(
        "dlpc-run: error: running big needs at least 1024.0 GiB (the reference's live "
        "tensors and the outputs) but "
    )
    assert proc.stdout == ""


def test_emitted_numpy_module_deletes_dead_intermediates():
    """`dlpc --emit=numpy`'s main() deletes each intermediate after its last reader."""
    from dlpc.backends.numpy import emit_numpy

    source = emit_numpy(parse_module(chain_module(12)))
    assert source.count("\n    del ") == 10  # v1..v10 (v11 dies at the last op, then return)
    namespace: dict = {}
    exec(compile(source, "<emitted>", "exec"), namespace)
    x = np.random.default_rng(5).standard_normal((1000, 1000)).astype(np.float32)
    (y,), peak = traced_peak(lambda: namespace["main"](x, params={}))
    assert peak <= 3 * x.nbytes, peak
    np.testing.assert_allclose(y, ref.run_reference(parse_module(chain_module(12)), [x], {})[0])
