"""Signed integer overflow wraps, as ONNX's Add/Sub/Mul/Neg/Abs and ReduceSum do, on C,
OpenCL and DLP C: the printers compute data integer add/sub/mul in the unsigned type of the
same width and convert back (backends/c.py `WRAPPING`), since signed overflow is
undefined behaviour in C and OpenCL C. The expected values are Python integers reduced
modulo 2**bits; one build runs under UBSan's signed-integer-overflow check in a child
process, so undefined behaviour fails the test, not only a wrong value. Float Mod
(fmod = 1) with infinite, nan and zero operands is np.fmod's on every target."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dlpc

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

OUTPUTS = ("add", "sub", "mul", "neg", "abs", "sum")


def _model(dtype: str) -> bytes:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    axes = helper.make_tensor("axes", onnx.TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Add", ["a", "b"], ["add"]),
        helper.make_node("Sub", ["a", "b"], ["sub"]),
        helper.make_node("Mul", ["a", "b"], ["mul"]),
        helper.make_node("Neg", ["a"], ["neg"]),
        helper.make_node("Abs", ["a"], ["abs"]),
        helper.make_node("ReduceSum", ["a", "axes"], ["sum"], keepdims=0),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        f"wrap_{dtype}",
        [vi("a", elem, [2, 64]), vi("b", elem, [2, 64])],
        [vi(o, elem, [2] if o == "sum" else [2, 64]) for o in OUTPUTS],
        initializer=[axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    return model.SerializeToString()


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Operands at and near the type's extremes, so every op overflows somewhere; row 0
    of `a` sums past the maximum, row 1 below the minimum."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    a = np.array([[hi - k for k in range(64)], [lo + k for k in range(64)]], dtype=dtype)
    a[1, 5] = lo  # (Neg and Abs of the minimum)
    b = np.array([[hi, 3, lo, -1] * 16, [-1, lo, 2, hi] * 16], dtype=dtype)
    return a, b


def _wrap(x: int, bits: int) -> int:
    x %= 2**bits
    return x - 2**bits if x >= 2 ** (bits - 1) else x


def _expected(dtype: str, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    bits = np.iinfo(dtype).bits
    ops = {
        "add": lambda x, y: x + y,
        "sub": lambda x, y: x - y,
        "mul": lambda x, y: x * y,
        "neg": lambda x, y: -x,
        "abs": lambda x, y: abs(x),
    }
    want = {
        name: np.array(
            [[_wrap(f(int(x), int(y)), bits) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)],
            dtype=dtype,
        )
        for name, f in ops.items()
    }
    want["sum"] = np.array([_wrap(sum(int(x) for x in row), bits) for row in a], dtype=dtype)
    return want


def _check(got, want: dict[str, np.ndarray], what: str) -> None:
    assert len(got) == len(OUTPUTS)
    for name, g in zip(OUTPUTS, got):
        assert g.dtype == want[name].dtype, (what, name, g.dtype)
        np.testing.assert_array_equal(g, want[name], err_msg=f"{what} {name}")


@pytest.fixture(scope="module", params=["int32", "int64"])
def case(request, tmp_path_factory):
    dtype = request.param
    path = tmp_path_factory.mktemp("wrap") / f"{dtype}.onnx"
    path.write_bytes(_model(dtype))
    a, b = _inputs(dtype)
    return dtype, path, a, b


def test_expected_values_are_numpys_wrapping_ones(case):
    """The Python-integer expectation is numpy's own wrapping arithmetic."""
    dtype, _, a, b = case
    want = _expected(dtype, a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(want["add"], a + b)
        np.testing.assert_array_equal(want["sub"], a - b)
        np.testing.assert_array_equal(want["mul"], a * b)
        np.testing.assert_array_equal(want["neg"], -a)
        np.testing.assert_array_equal(want["abs"], np.abs(a))
        np.testing.assert_array_equal(want["sum"], a.sum(axis=1, dtype=dtype))


@pytest.mark.parametrize("target", ["numpy", "c", "opencl", "dlp"])
def test_overflow_wraps(case, target):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    dtype, path, a, b = case
    with np.errstate(over="ignore"):
        got = dlpc.compile(dlpc.load(str(path)), target=target)(a, b)
    _check(got, _expected(dtype, a, b), f"{dtype} on {target}")


CHILD = """
import sys
import numpy as np
import dlpc
sys.path.insert(0, sys.argv[2])
from test_int_wrap import _check, _expected, _inputs
a, b = _inputs("int32")
_check(dlpc.compile(dlpc.load(sys.argv[1]), target="c")(a, b), _expected("int32", a, b), "ubsan")
print("ok")
"""


def test_no_signed_overflow_under_ubsan(tmp_path):
    """The int32 model built with `-fsanitize=signed-integer-overflow` (no recovery):
    a signed overflow left in the generated C aborts the child with UBSan's report."""
    cc = os.environ.get("CC", "cc").split()[0]
    if not shutil.which(cc):
        pytest.skip("no C compiler")
    lib = subprocess.run([cc, "-print-file-name=libubsan.so"], capture_output=True, text=True)
    if lib.returncode != 0 or not os.path.isabs(lib.stdout.strip()):
        pytest.skip("the C compiler has no UndefinedBehaviorSanitizer runtime (libubsan)")
    path = tmp_path / "int32.onnx"
    path.write_bytes(_model("int32"))
    env = {
        **os.environ,
        "DLPC_CFLAGS": "-fsanitize=signed-integer-overflow -fno-sanitize-recover=all",
        "DLPC_CACHE_DIR": str(tmp_path / "cache"),  # (built here, whatever is cached)
        "OMP_NUM_THREADS": "2",
    }
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), here],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert "runtime error" not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == ["ok"]


def test_cflags_are_in_the_warm_compile_key(monkeypatch):
    """A `$DLPC_CFLAGS` build (the sanitizer one above) is not the plain build's cached
    artifact: the warm-compile key names the extra flags."""
    from dlpc.backends.runtime import artifact

    monkeypatch.delenv("DLPC_CFLAGS", raising=False)
    plain = artifact.toolchain_identity()
    monkeypatch.setenv("DLPC_CFLAGS", "-fsanitize=signed-integer-overflow")
    assert artifact.toolchain_identity() != plain


REDUCTIONS = """
func.func @main(%x: memref<1000xi32>, %d: memref<1xi32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "signed" {
    %acc = memref.alloca() : memref<i32>
    %zero = arith.constant 0 : i32
    memref.store %zero, %acc[] : memref<i32>
    loop.for %r = 0 to 1000 step 1 {name = "r0", reduction, vectorize} {
      %a = memref.load %x[%r] : memref<1000xi32>
      %s = memref.load %acc[] : memref<i32>
      %n = arith.addi %s, %a : i32
      memref.store %n, %acc[] : memref<i32>
    }
    %c0 = arith.constant 0 : index
    %f = memref.load %acc[] : memref<i32>
    memref.store %f, %d[%c0] : memref<1xi32>
  }
  func.return
}
"""


def test_signed_sum_has_no_openmp_reduction_clause(tmp_path):
    """A vectorised int32 sum loop is `GCC ivdep` with the wrapping add: an OpenMP
    `reduction(+:acc)` would add the lanes' partial sums in int32_t, where overflow is
    undefined (an f32 sum keeps its clause: test/e2e/emit-c-simd.mlir)."""
    path = tmp_path / "sum.mlir"
    path.write_text(REDUCTIONS)
    proc = subprocess.run(
        ["dlpc-opt", str(path), "-t", "c"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    kernel = proc.stdout.partition('kernel "signed"')[2]
    assert "#pragma GCC ivdep" in kernel and "reduction(" not in kernel, kernel
    assert "const int32_t v_n = (int32_t)((uint32_t)v_s + (uint32_t)v_a);" in kernel, kernel


def _fmod_model(dtype: str) -> bytes:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)],
        f"fmod_{dtype}",
        [vi("a", elem, [14]), vi("b", elem, [14])],
        [vi("y", elem, [14])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    return model.SerializeToString()


@pytest.mark.parametrize("target", ["numpy", "c", "opencl"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_fmod_with_inf_and_nan(dtype, target, tmp_path):
    """Float Mod (fmod = 1) is np.fmod (and onnxruntime) on infinite, nan and zero operands:
    fmod(±inf, y) and fmod(x, 0) are nan, fmod(x, ±inf) is x, and a quotient past the
    mantissa is not cast to int64 (it was: fmod(inf, 2) gave inf, fmod(1, inf) nan)."""
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    inf, nan = np.inf, np.nan
    a = np.array([inf, -inf, nan, 1, -1, 5.5, 0, -0.0, 7, -7.5, 2.5, -inf, 3, 1e20], dtype)
    b = np.array([2, 3, 2, inf, -inf, 0, nan, 2, -2, 2, -inf, inf, -0.0, 3], dtype)
    path = tmp_path / "fmod.onnx"
    path.write_bytes(_fmod_model(dtype))
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)
        (got,) = dlpc.compile(dlpc.load(str(path)), target=target)(a, b)
    assert got.dtype == want.dtype
    finite = np.isfinite(want)  # (1e20 mod 3: a - trunc(a / b) * b is not exact there)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{got} {want}")
    np.testing.assert_array_equal(got[finite][:-1], want[finite][:-1])
    assert np.isfinite(got[-1])
    ort = pytest.importorskip("onnxruntime")
    if dtype == "float32":  # (onnxruntime's CPU Mod has no float64 kernel everywhere)
        sess = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b})[0], want)


@pytest.mark.parametrize("target", ["numpy", "c"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_division_by_minus_one_and_zero_does_not_trap(dtype, target, tmp_path):
    """Div and Mod of the minimum by -1 wrap (Div gives the minimum, Mod 0) and x / 0
    gives 0 (numpy's value) instead of the SIGFPE x86's idiv raises, which killed the
    calling process; the minimum / 3 truncates toward zero on numpy too."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [
            helper.make_node("Div", ["a", "b"], ["q"]),
            helper.make_node("Mod", ["a", "b"], ["r"], fmod=1),
        ],
        f"div_{dtype}",
        [vi("a", elem, [5]), vi("b", elem, [5])],
        [vi("q", elem, [5]), vi("r", elem, [5])],
    )
    path = tmp_path / "div.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    lo = np.iinfo(dtype).min
    a = np.array([lo, 7, -7, 5, lo], dtype)
    b = np.array([-1, 2, 2, 0, 3], dtype)
    with np.errstate(all="ignore"):
        q, r = dlpc.compile(dlpc.load(str(path)), target=target)(a, b)
    third = -(-int(lo) // 3)  # (toward zero; the reference took |lo|, which overflows)
    np.testing.assert_array_equal(q, [lo, 3, -3, 0, third])
    np.testing.assert_array_equal(r[[0, 1, 2, 4]], [0, 1, -1, int(lo) - 3 * third])
