"""The shared calling convention (backends/runtime/callconv.py) on all three runtimes:
argument checks, dtype conversion, 0-d arguments, output allocation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dlpc.backends.runtime.cbuild import CFunction
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

SCALE = """
func.func @main(%x: memref<16xf32>, %s: memref<f32>, %out: memref<16xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["scale"], dlpc.num_outputs = 1 : i64} {
  loop.kernel "scale_0" {
    loop.for %i = 0 to 16 step 1 {name = "i0", parallel} {
      %v = memref.load %x[%i] : memref<16xf32>
      %k = memref.load %s[] : memref<f32>
      %r = arith.mulf %v, %k : f32
      memref.store %r, %out[%i] : memref<16xf32>
    }
  }
  func.return
}
"""


def _opencl(module):
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime.opencl_rt import compile_opencl

    return compile_opencl(module, name="callconv")


RUNTIMES = {
    "c": lambda m: CFunction(m, name="callconv"),
    "dlp": lambda m: compile_dlp(m, "tiny", name="callconv"),
    "opencl": _opencl,
}


@pytest.fixture(scope="module", params=list(RUNTIMES))
def scale(request):
    return RUNTIMES[request.param](pipeline.parse_module(SCALE))


def test_signature_is_read_from_main(scale):
    assert (scale.num_inputs, scale.param_names, scale.num_outputs) == (1, ["scale"], 1)
    assert scale.arg_specs[1] == ((), np.dtype(np.float32))


def test_zero_d_param_and_dtype_conversion(scale):
    x = np.arange(16, dtype=np.float64)[::-1]  # float64 and not contiguous: converted
    for params in ({"scale": 3.0}, [np.float32(3.0)]):
        (y,) = scale(x, params=params)
        assert y.dtype == np.float32 and y.shape == (16,)
        np.testing.assert_allclose(y, 3.0 * x)


@pytest.mark.parametrize(
    "args, params, message",
    [
        ((), {"scale": 1.0}, r"^error: expected 1 inputs, got 0$"),
        ((np.ones(16),), {}, r"^error: missing value for parameter 'scale'$"),
        ((np.ones(16),), [], r"^error: expected 1 parameters, got 0$"),
        ((np.ones(15),), [1.0], r"^error: input 0 has shape \(15,\), expected \(16,\)$"),
        (
            (np.ones(16),),
            [np.ones(2)],
            r"^error: parameter 'scale' has shape \(2,\), expected \(\)$",
        ),
    ],
)
def test_argument_errors(scale, args, params, message):
    with pytest.raises(DlpcError, match=message):
        scale(*args, params=params)


@pytest.mark.parametrize("runtime", ["c", "dlp"])
def test_bound_params_are_resident(runtime):
    """`bind_params` converts the weights once; later calls without `params=` reuse them,
    give what an explicit `params=` call gives, and still check the inputs."""
    fn = RUNTIMES[runtime](pipeline.parse_module(SCALE))
    fn.bind_params({"scale": 2.5})
    assert fn.bound_params is not None and fn.bound_params[0].dtype == np.float32
    for seed in range(3):  # the prepared argument vector is reused call after call
        x = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
        (y,) = fn(x)
        (want,) = fn(x, params={"scale": 2.5})
        np.testing.assert_array_equal(y, want)
        np.testing.assert_allclose(y, 2.5 * x, rtol=1e-6)
    (y,) = fn(np.arange(16, dtype=np.float64))  # converted like any call
    np.testing.assert_allclose(y, 2.5 * np.arange(16))
    with pytest.raises(DlpcError, match=r"^error: input 0 has shape \(15,\), expected \(16,\)$"):
        fn(np.zeros(15, np.float32))
    with pytest.raises(DlpcError, match=r"^error: expected 1 inputs, got 0$"):
        fn()


def test_read_only_and_empty_arrays_pass_their_own_data():
    """The resident call path takes each array's data pointer through the buffer protocol;
    an array that cannot export a writable buffer (read-only: np.load with mmap, a
    broadcast view made contiguous but frozen) or has no bytes takes `ctypes.data`."""
    from dlpc.backends.runtime.cbuild import address

    fn = RUNTIMES["c"](pipeline.parse_module(SCALE))
    fn.bind_params({"scale": 2.0})
    x = np.arange(16, dtype=np.float32)
    frozen = x.copy()
    frozen.flags.writeable = False
    for arg in (x, frozen):
        (y,) = fn(arg)
        np.testing.assert_array_equal(y, 2.0 * x)
        assert address(arg) == arg.ctypes.data
    empty = np.zeros((0, 3), np.float32)
    assert address(empty) == empty.ctypes.data


@pytest.mark.parametrize(
    "env, spin",
    [
        ({}, "10000"),  # nothing chosen: a short spin, then sleep
        ({"OMP_WAIT_POLICY": "PASSIVE"}, None),  # the user's policy stands
        ({"GOMP_SPINCOUNT": "5"}, "5"),
    ],
)
def test_openmp_threads_spin_briefly_unless_the_user_chose(env, spin):
    """The C runtime sets GOMP_SPINCOUNT before libgomp first loads, and only when the user
    set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT (a spin count would override a policy)."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from dlpc.backends.runtime.cbuild import CFunction\n"
        "from dlpc.passes import pipeline\n"
        "from test_callconv import SCALE\n"
        "CFunction(pipeline.parse_module(SCALE), name='callconv')\n"
        "print(os.environ.get('GOMP_SPINCOUNT'))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    here = str(Path(__file__).resolve().parent)
    clean["PYTHONPATH"] = os.pathsep.join([here, clean.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(spin)
