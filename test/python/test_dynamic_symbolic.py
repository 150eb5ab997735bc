"""One compile for symbolic dims (issue 29): a dynamic-axes export runs through
`dlpc.load` + `dlpc.compile` with no shape given as ONE program with runtime extents
(passes/lower/_symbolic.py, runtime/dynamic.py's Generic), on C, numpy and OpenCL,
matching onnxruntime at every size tried; the compile count is asserted. Each compiled
model is shared by the tests of this module (compiles are the slow part)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (dlpc[test])")
pytest.importorskip("onnx", reason="onnx is not installed (dlpc[onnx])")

from test_dynamic import _ids, _ort, files  # noqa: E402,F401  (the exported models)

import dlpc  # noqa: E402
from dlpc.api import compile as dlpc_compile  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402
from dlpc.runtime import dynamic  # noqa: E402

# (batch, seq) pairs: batch 1-64 and seq 1-64 (the exports' position tables hold 64);
# batch 1 at seq 1, 3 and 7 takes the program's short kernels (compile(short=))
SIZES = ((1, 1), (3, 17), (64, 2), (2, 64), (5, 33), (1, 3), (1, 7))
SHORT_CALLS = 3


@pytest.fixture(scope="module")
def compiled(files):  # noqa: F811
    """One compile per (model, target), made on first use and shared."""
    cache: dict[tuple[str, str, str], object] = {}

    def get(name: str, target: str = "c", **kw):
        key = (name, target, repr(sorted(kw.items())))
        if key not in cache:
            cache[key] = dlpc_compile(dlpc.load(files[name]), target=target, **kw)
        return cache[key]

    return get


@pytest.mark.parametrize("name", ["enc", "gpt", "bert"])
def test_sequence_models_compile_once_and_match_onnxruntime(files, compiled, name):  # noqa: F811
    fn = compiled(name)
    for b, n in SIZES:
        x = _ids(b, n, seed=b + n)
        np.testing.assert_allclose(fn(x)[0], _ort(files[name], x), rtol=1e-4, atol=1e-5)
    stats = {"calls": len(SIZES), "compiles": 1, "short": SHORT_CALLS, "programs": 1}
    assert fn.stats == stats
    assert fn.function.symbolic_error is None
    assert "dlpc_dims" in fn.source  # the dims are an argument of the one program


def test_cnn_compiles_once_for_batches_1_to_64(files, compiled):  # noqa: F811
    fn = compiled("cnn")
    rng = np.random.default_rng(3)
    for b in (1, 64, 7, 2):
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats == {"calls": 4, "compiles": 1, "programs": 1}


def test_numpy_emits_shapes_from_the_call(files, compiled):  # noqa: F811
    fn = compiled("enc", "numpy")
    for b, n in SIZES[:3]:
        x = _ids(b, n)
        np.testing.assert_allclose(fn(x)[0], _ort(files["enc"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 1
    assert "dim_seq = " in fn.source  # the symbol read off the input's shape


def test_opencl_compiles_once(files, compiled):  # noqa: F811
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    try:
        fn = compiled("gpt", "opencl")
        fn(_ids(1, 1))
    except DlpcError as e:
        if "platform" in str(e).lower() or "not available" in str(e):
            pytest.skip(str(e))
        raise
    for b, n in SIZES[1:3]:
        x = _ids(b, n)
        np.testing.assert_allclose(fn(x)[0], _ort(files["gpt"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 1


def test_guards_refuse_past_a_maximum_with_one_line(compiled):
    enc = compiled("enc")  # pos[:, :seq] slices a 64-long table: seq is at most 64
    with pytest.raises(DlpcError) as info:
        enc(_ids(1, 65))
    assert (
        str(info.value) == "error: input 'ids' dim 1 ('seq') is 65, above its declared maximum 64"
    )
    # the GPT gathers positions 0..seq-1 from a 64-row table: past it is refused too
    gpt = compiled("gpt")
    with pytest.raises(DlpcError) as info:
        gpt(_ids(1, 65))
    assert str(info.value) == (
        "error: input 'ids' dim 1 ('seq') is 65, above its declared maximum 64"
    )
    declared = compiled("gpt", max_dims={"batch": 4, "seq": 8})
    with pytest.raises(DlpcError) as info:
        declared(_ids(5, 3))
    assert "input 'ids' dim 0 ('batch') is 5, above its declared maximum 4" in str(info.value)
    assert "\n" not in str(info.value) and declared.stats["compiles"] == 0


def test_a_hot_binding_gets_its_own_program(files, compiled):  # noqa: F811
    fn = compiled("cnn", specialise=2)
    rng = np.random.default_rng(4)
    for b in (3, 3, 3, 5):
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)
    # batch 3: the generic program, then its own from the second call; batch 5: generic
    assert fn.stats == {"calls": 4, "compiles": 2, "specialised": 1, "programs": 2}


def test_an_undeclared_maximum_grows_by_one_compile(files, monkeypatch):  # noqa: F811
    monkeypatch.setattr(dynamic, "DEFAULT_MAX", 4)
    fn = dlpc_compile(dlpc.load(files["cnn"]), target="c")
    rng = np.random.default_rng(5)
    for b in (2, 4, 9, 3):
        x = rng.standard_normal((b, 1, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(fn(x)[0], _ort(files["cnn"], x), rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 2 and fn.function.generic.max == {"batch": 16}


def test_per_binding_stays_on_request(compiled):
    fn = compiled("bert", symbolic=False)
    for b, n in ((1, 3), (2, 3), (1, 3)):
        fn(_ids(b, n))
    assert fn.stats == {"calls": 3, "compiles": 2, "programs": 2}


def test_threads_calling_one_program_with_different_shapes(files, compiled):  # noqa: F811
    """The reused max-shaped input buffers are one call's at a time: a concurrent call
    fills its own (Generic's lock), so every thread gets its own batch's result."""
    from concurrent.futures import ThreadPoolExecutor

    fn = compiled("cnn")
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((b, 1, 16, 16)).astype(np.float32) for b in (1, 5, 9, 3)] * 4
    want = [_ort(files["cnn"], x) for x in xs[:4]]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda x: fn(x)[0], xs))
    for k, y in enumerate(got):
        np.testing.assert_allclose(y, want[k % 4], rtol=1e-4, atol=1e-5)
