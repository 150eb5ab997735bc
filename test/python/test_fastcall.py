"""The C runtime's common call in C (backends/runtime/fastcall.py): it fills the argument
vector as the Python path does, refuses (None) every input the Python path would have to
convert or report, and turns a failing status into the one-line error."""

from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np
import pytest

from dlpc import api
from dlpc.backends.runtime import cbuild, fastcall
from dlpc.diagnostics import DlpcError

# y = x + w (4 floats), z = sum(x) (1 float); status 5 when x[0] is negative
SOURCE = """
int dlpc_main(void **args) {
  const float *x = args[0], *w = args[1];
  float *y = args[2], *z = args[3];
  if (x[0] < 0) return 5;
  float s = 0;
  for (int i = 0; i < 4; i++) { y[i] = x[i] + w[i]; s += x[i]; }
  z[0] = s;
  return 0;
}
"""


@pytest.fixture(scope="module")
def call():
    if fastcall._build_command("x.so") is None:
        pytest.skip("the extension needs Python's headers")
    assert fastcall.extension() is not None  # (headers and a compiler: it must build)
    lib = cbuild.build(SOURCE, name="fastcall_test")
    w = np.arange(4, dtype=np.float32) * 10
    argv = (ctypes.c_void_p * 4)()
    argv[1] = w.ctypes.data
    caller = fastcall.caller(
        ctypes.cast(lib.entry, ctypes.c_void_p).value or 0,
        ctypes.addressof(argv),
        4,
        1,
        2,
        [((2, 2), np.dtype(np.float32))],
        [((2, 2), np.dtype(np.float32)), ((), np.dtype(np.float32))],
        None,
        functools.partial(cbuild._raise_failure, lib),
        (argv, w, lib),
    )
    assert caller is not None
    return caller


def test_fills_inputs_and_fresh_outputs(call):
    x = np.array([[1, 2], [3, 4]], np.float32)
    first = call(x)
    assert type(first) is list and len(first) == 2
    y, z = first
    assert y.shape == (2, 2) and y.dtype == np.float32 and z.shape == ()
    np.testing.assert_array_equal(y, [[1, 12], [23, 34]])
    assert z == 10
    y2, _ = call(x + 1)
    np.testing.assert_array_equal(y2, [[2, 13], [24, 35]])
    assert not np.shares_memory(y, y2)
    np.testing.assert_array_equal(y, [[1, 12], [23, 34]])  # (the first result kept)
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(call(frozen)[0], y)


@pytest.mark.parametrize(
    "case",
    ["float64", "shape", "rank", "fortran", "strided", "list", "subclass", "count", "swapped"],
)
def test_refuses_what_the_python_path_converts_or_reports(call, case):
    x = np.array([[1, 2], [3, 4]], np.float32)
    arg = {
        "float64": lambda: (x.astype(np.float64),),
        "shape": lambda: (np.zeros((2, 3), np.float32),),
        "rank": lambda: (np.zeros(4, np.float32),),
        "fortran": lambda: (np.asfortranarray(np.zeros((2, 2), np.float32) + x.T),),
        "strided": lambda: (np.zeros((2, 4), np.float32)[:, ::2],),
        "list": lambda: ([[1.0, 2.0], [3.0, 4.0]],),
        "subclass": lambda: (np.ma.masked_array(x),),
        "count": lambda: (x, x),
        "swapped": lambda: (x.astype(">f4"),),
    }[case]()
    assert call(*arg) is None
    assert call(x=x) is None  # (keywords: the Python path's business)


def test_failing_status_is_the_one_line_error(call):
    with pytest.raises(DlpcError, match="status 5") as e:
        call(np.full((2, 2), -1, np.float32))
    assert "\n" not in str(e.value)


def test_concurrent_calls_keep_their_own_vectors(call):
    rng = np.random.default_rng(0)
    xs = [rng.random((2, 2), dtype=np.float32) for _ in range(8)]
    want = [x + np.arange(4, dtype=np.float32).reshape(2, 2) * 10 for x in xs]
    bad = []

    def run(k):
        for _ in range(300):
            if not np.array_equal(call(xs[k])[0], want[k]):
                bad.append(k)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_compiled_model_takes_it_and_matches_the_python_path(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[3, 5]) {\n"
        "  param w: f32[4, 5] = kaiming(seed=1)\n"
        "  param b: f32[4] = normal(seed=2)\n"
        "  return relu(linear(x, w, b))\n"
        "}\n"
    )
    fn = api.compile(api.load(path), target="c")
    function = fn._direct
    assert function is not None and function._fast is not None
    x = api.random_inputs(fn.model, seed=1)[0]
    fast = fn(x)[0]
    slow = function(x, params=function.bound_params)[0]
    np.testing.assert_array_equal(fast, slow)


def test_repeat_runs_each_chunk_on_its_slices(call):
    """repeat=2: dlpc_main (the program of a 2 x 2 chunk) runs on rows 0-1, then 2-3 of
    the whole call's inputs and outputs."""
    lib = cbuild.build(SOURCE, name="fastcall_test")
    w = np.arange(4, dtype=np.float32) * 10
    argv = (ctypes.c_void_p * 4)()
    argv[1] = w.ctypes.data
    chunks = fastcall.caller(
        ctypes.cast(lib.entry, ctypes.c_void_p).value or 0,
        ctypes.addressof(argv),
        4,
        1,
        2,
        [((4, 2), np.dtype(np.float32))],
        [((4, 2), np.dtype(np.float32)), ((2,), np.dtype(np.float32))],
        None,
        functools.partial(cbuild._raise_failure, lib),
        (argv, w, lib),
        2,
    )
    assert chunks is not None
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    y, z = chunks(x)
    np.testing.assert_array_equal(y, x + np.tile(w.reshape(2, 2), (2, 1)))
    np.testing.assert_array_equal(z, [0 + 1 + 2 + 3, 4 + 5 + 6 + 7])
    assert chunks(np.zeros((2, 2), np.float32)) is None  # the chunk's shape is not the call's
    with pytest.raises(ValueError, match="divide"):
        fastcall.caller(
            0, ctypes.addressof(argv), 4, 1, 2, [((3, 2), np.float32)], [], None, print, None, 2
        )
