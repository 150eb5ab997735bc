"""Tests of the compiled functions' runtime (issue 35, fifth round, area backend-runtime of
bench/mutation.py): `CFunction.__call__`'s Python path (the one the C fast call,
fastcall.c, hands back inputs it refuses, and the only one without the extension), forced
here by dropping the fast caller; `Library.run`/`call_argv` packing weights for one call;
the C build's cache names, its parallel units and their fallback, the compiler probes;
the warm-compile entries written and read back (artifact); the per-pass checker's
evaluators (evaluate); an OpenCL model's outputs held across more calls than its SVM pool
and with SVM turned off."""

from __future__ import annotations

import ctypes
import os
import re

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

import dlpc
from dlpc import api
from dlpc.backends.runtime import artifact, cbuild, evaluate
from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module
from dlpc.universe import PASSES

SRC = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = graph.param "w" : tensor<8xf32>
  %s = graph.add %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = graph.tanh %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""
W = np.linspace(-1, 1, 8, dtype=np.float32)
X = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)


def lower(src: str = SRC, spec: str = "graph-to-te,te-to-loop"):
    module = parse_module(src)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    return module


def want(x: np.ndarray, w: np.ndarray = W) -> np.ndarray:
    return np.tanh(x.astype(np.float32) + w)


@pytest.fixture
def slow():
    """A CFunction with its parameter bound and no fast caller: every call takes the
    Python path."""
    f = cbuild.CFunction(lower(), name="bkrt5")
    f.bind_params({"w": W})
    f._fast = None
    return f


# ------------------------------------------------------------- CFunction's Python path


def test_python_path_passes_exact_arrays_and_converts_others(slow):
    np.testing.assert_allclose(slow(X)[0], want(X), rtol=1e-6)
    for x in (
        X.astype(np.float64),  # another dtype
        np.asfortranarray(X),  # not C order
        X.tolist(),  # not an array
        np.ascontiguousarray(X.T).T,  # a transposed view
    ):
        np.testing.assert_allclose(slow(x)[0], want(X), rtol=1e-6)
    a, b = slow(X)[0], slow(-X)[0]  # each call's outputs are its own arrays
    assert a is not b
    np.testing.assert_allclose(a, want(X), rtol=1e-6)
    np.testing.assert_allclose(b, want(-X), rtol=1e-6)
    assert a.dtype == np.float32 and a.shape == (4, 8) and a.flags.c_contiguous


def test_python_path_reports_bad_calls(slow):
    with pytest.raises(DlpcError) as e:
        slow()
    assert str(e.value) == "error: expected 1 inputs, got 0"
    with pytest.raises(DlpcError) as e:
        slow(X, X)
    assert str(e.value) == "error: expected 1 inputs, got 2"
    with pytest.raises(DlpcError) as e:
        slow(X.T)
    assert str(e.value) == "error: input 0 has shape (8, 4), expected (4, 8)"


def test_python_path_while_the_vector_is_busy_fills_a_copy(slow):
    """A call made while another holds the argument vector (the lock taken) writes its
    pointers into a copy: the shared vector keeps the bound parameter's pointer and the
    last call's input pointer, and the results are right."""
    slow(X)
    before = list(slow._argv)
    assert before[1] == slow.bound_params[0].ctypes.data
    slow._argv_lock.acquire()
    try:
        y = slow(-X)[0]
    finally:
        slow._argv_lock.release()
    np.testing.assert_allclose(y, want(-X), rtol=1e-6)
    assert list(slow._argv) == before
    x2 = X * 0.5
    slow(x2)
    assert slow._argv[0] == x2.ctypes.data and slow._argv[1] == before[1]


def test_python_path_reports_a_failed_call(slow):
    """A nonzero status of dlpc_main is the library's failure line; with params= the
    call goes through Library.call, and reports the same."""
    slow.library.entry = lambda argv: 3
    with pytest.raises(DlpcError) as e:
        slow(X)
    assert (
        str(e.value)
        == f"error: {slow.library.path.name}: dlpc_main failed (status 3: out of memory)"
    )
    with pytest.raises(DlpcError) as e:
        slow(X, params={"w": W})
    assert "dlpc_main failed (status 3: out of memory)" in str(e.value)


def test_params_per_call_and_unbound_calls():
    f = cbuild.CFunction(lower(), name="bkrt5")
    np.testing.assert_allclose(f(X, params={"w": W})[0], want(X), rtol=1e-6)
    np.testing.assert_allclose(f(X, params=[-W])[0], want(X, -W), rtol=1e-6)
    f.bind_params([W])
    f._fast = None
    np.testing.assert_allclose(f(X, params=[-W])[0], want(X, -W), rtol=1e-6)
    np.testing.assert_allclose(f(X)[0], want(X), rtol=1e-6)  # the bound one again


# ------------------------------------------------------------- packed weights per call


@pytest.fixture(scope="module")
def mlp():
    model = dlpc.load("examples/mlp.dlpc", batch=2)
    compiled = api.compile(model, fold_weights=False)
    lib = compiled.artifact.library
    assert lib.prepare_entry is not None and lib.packed_bytes > 0
    return model, compiled, lib


def _args(model, compiled, x):
    fn = compiled.artifact
    params = [np.ascontiguousarray(model.weights[n]) for n in fn.param_names]
    outs = fn.empty_outputs()
    return [np.ascontiguousarray(a) for a in x] + params + outs, outs


def test_library_run_packs_for_the_call(mlp):
    model, compiled, lib = mlp
    x = api.random_inputs(model, seed=4)
    expected = api.reference(model, x)
    arrays, outs = _args(model, compiled, x)
    assert lib.num_args == len(arrays)
    assert lib.run(arrays) == 0  # no block given: a fresh one, packed for this call
    np.testing.assert_allclose(outs[0], expected[0], rtol=1e-4, atol=1e-5)
    arrays, outs = _args(model, compiled, x)  # a block of garbage given: packed first
    block = lib.packed_block()
    block[:] = 0xFF
    assert block.ctypes.data % 64 == 0 and block.nbytes == lib.packed_bytes
    assert lib.run([*arrays, block]) == 0
    np.testing.assert_allclose(outs[0], expected[0], rtol=1e-4, atol=1e-5)
    arrays, outs = _args(model, compiled, x)  # a pointer vector of @main's arguments
    argv = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    lib.call_argv(argv, keep_alive=arrays)
    np.testing.assert_allclose(outs[0], expected[0], rtol=1e-4, atol=1e-5)


def test_a_failing_prepare_stops_the_call(mlp, monkeypatch):
    model, compiled, lib = mlp
    x = api.random_inputs(model, seed=4)
    arrays, outs = _args(model, compiled, x)
    monkeypatch.setattr(lib, "prepare_entry", lambda argv: 5)
    monkeypatch.setattr(lib, "entry", lambda argv: pytest.fail("dlpc_main after a failure"))
    assert lib.run(arrays) == 5
    argv = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    with pytest.raises(DlpcError, match=r"dlpc_main failed \(status 5: out of memory\)"):
        lib.call_argv(argv, keep_alive=arrays)
    with pytest.raises(DlpcError, match=r"status 5"):
        lib.prepare(argv)


# ---------------------------------------------------------------------------- the build

MAIN = "int dlpc_main(void **args) {{ (void)args; return {}; }}\n"


def test_build_names_its_library_and_keeps_the_source(monkeypatch, tmp_path):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    source = MAIN.format(0)
    lib = cbuild.build(source, name="my model/v2.x")
    assert re.fullmatch(r"my_model_v2_x-[0-9a-f]{20}\.so", lib.path.name)
    assert not lib.cached and lib.run([]) == 0
    assert (tmp_path / lib.path.name.replace(".so", ".c")).read_text() == source
    again = cbuild.build(source, name="my model/v2.x")
    assert again.cached and again.path == lib.path
    assert cbuild.build(source, name="").path.name.startswith("module-")
    assert cbuild.build(source, name="y" * 50).path.name.startswith("y" * 40 + "-")
    # $DLPC_CFLAGS is part of the key: another library
    monkeypatch.setenv("DLPC_CFLAGS", "-DDLPC_BKRT5=1")
    assert cbuild.extra_flags() == ["-DDLPC_BKRT5=1"]
    other = cbuild.build(source, name="my model/v2.x")
    assert not other.cached and other.path != lib.path


def _units(value: int, broken: bool = False) -> list[str]:
    return [
        "int bkrt5_one(void) { return 1; }\n",
        "int bkrt5_two(void) { return 2; }\n" + ("syntax error here\n" if broken else ""),
        "int bkrt5_one(void); int bkrt5_two(void);\n"
        f"int dlpc_main(void **args) {{ (void)args; return bkrt5_one() + bkrt5_two() + {value}; }}\n",
    ]


def _sized(n: int) -> str:
    """A one-unit program (its dlpc_main returns 0) of exactly `n` bytes."""
    head = MAIN.format(0) + "/*"
    return head + "x" * (n - len(head) - 3) + "*/\n"


@pytest.mark.parametrize(
    "size, units, status",
    [
        (cbuild.PARALLEL_SOURCE_BYTES, _units(4), 7),  # large, three units: the units
        (cbuild.PARALLEL_SOURCE_BYTES - 1, _units(4), 0),  # one byte short: one unit
        (cbuild.PARALLEL_SOURCE_BYTES, _units(4)[1:], 0),  # two units: one unit
        (cbuild.PARALLEL_SOURCE_BYTES, _units(4, broken=True), 0),  # a unit fails
    ],
    ids=["units", "short", "two_units", "broken_unit"],
)
def test_build_compiles_large_sources_as_units(monkeypatch, tmp_path, size, units, status):
    """The units are another program here (dlpc_main returns 7) so that the library
    tells which was built: the units when the one source has PARALLEL_SOURCE_BYTES and
    there are more than two of them, else (or when a unit fails) the one source."""
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    source = _sized(size)
    assert len(source) == size
    assert cbuild.build(source, name="bkrt5_units", units=units).run([]) == status


def test_compiler_probes(monkeypatch):
    with pytest.raises(DlpcError) as e:
        cbuild._compiler_version(("/nonexistent/bkrt5-cc",))
    assert str(e.value).startswith("error: cannot run the C compiler '/nonexistent/bkrt5-cc': ")
    assert cbuild.supported_flags(("true",)) == cbuild.OPTIONAL_FLAGS  # accepts anything
    assert cbuild.supported_flags(("false",)) == ()
    assert cbuild.supported_libs(("true",)) == cbuild.OPTIONAL_LIBS
    assert cbuild.supported_libs(("false",)) == ()
    assert cbuild.flags(["false"])[: len(cbuild.BASE_FLAGS)] == list(cbuild.BASE_FLAGS)
    assert "-DDLPC_HAVE_LIBMVEC" in cbuild.flags(["true"])
    assert "-DDLPC_HAVE_LIBMVEC" not in cbuild.flags(["false"])
    assert cbuild.libs(["false"]) == list(cbuild.LIBS)
    monkeypatch.setenv("CC", "")
    assert cbuild.compiler() == ["cc"]
    monkeypatch.setenv("CC", "ccache  gcc -m64")
    assert cbuild.compiler() == ["ccache", "gcc", "-m64"]


# ----------------------------------------------------------------- warm-compile entries


def test_an_entry_is_written_and_read_back(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    f = cbuild.CFunction(lower(), name="bkrt5_entry")
    f.bind_params({"w": W})
    path = artifact.store_entry("k5", "bkrt5 entry", f, "loop ir text")
    assert path == tmp_path / "bkrt5_entry-k5.model.npz" and path.exists()
    assert cbuild.check_entry(path) is None
    entry = artifact.load_entry("k5", "bkrt5 entry")
    assert entry is not None and entry.path == path
    assert entry.source == f.source and entry.loop_ir == "loop ir text"
    assert entry.meta["format"] == artifact.FORMAT
    assert entry.meta["library"] == f.library.path.name
    assert len(entry.params) == 1
    np.testing.assert_array_equal(entry.params[0], W)
    g = entry.function("bkrt5_entry")
    assert g.library.cached
    np.testing.assert_allclose(g(X)[0], want(X), rtol=1e-6)
    # the library gone: rebuilt from the entry's source
    f.library.path.unlink()
    g = entry.function("bkrt5_entry")
    np.testing.assert_allclose(g(X)[0], want(X), rtol=1e-6)
    assert artifact.load_entry("k6", "bkrt5 entry") is None  # a miss
    assert capsys.readouterr().err == ""


def test_a_damaged_or_foreign_entry_is_a_miss_with_one_warning(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    f = cbuild.CFunction(lower(), name="bkrt5_entry")
    f.bind_params({"w": W})
    path = artifact.store_entry("k7", "m", f, "ir")
    monkeypatch.setattr(artifact, "FORMAT", artifact.FORMAT + 1)
    assert artifact.load_entry("k7", "m") is None
    err = capsys.readouterr().err
    assert f"dlpc: warning: cached model {path} is damaged" in err
    assert f"format {artifact.FORMAT - 1}, expected {artifact.FORMAT}" in err
    assert err.rstrip().endswith("recompiling it")
    monkeypatch.setattr(artifact, "FORMAT", artifact.FORMAT - 1)
    path2 = artifact.store_entry("k8", "m", f, "ir")
    path2.write_bytes(path2.read_bytes()[:-10])
    assert artifact.load_entry("k8", "m") is None
    err = capsys.readouterr().err
    assert "its content does not match its hash" in err


# ------------------------------------------------------------------- the checker's evaluators


def test_run_loop_c_runs_main_in_place():
    module = lower()
    out = np.zeros((4, 8), np.float32)
    evaluate.run_loop_c(module, [X.copy(), W.copy(), out])
    np.testing.assert_allclose(out, want(X), rtol=1e-6)


def test_make_checker_has_every_level():
    c = evaluate.make_checker({"w": W}, rtol=0.5)
    assert c.evaluators == {"loop": evaluate.run_loop_c, "dlp": evaluate.run_dlp_sim}
    assert c.weights["w"] is W and c.rtol == 0.5
    assert evaluate.make_checker().weights == {}


def test_run_dlp_sim_runs_main_in_place():
    from dlpc.passes import pipeline

    module = pipeline.lower(parse_module(SRC), "dlp", pipeline.PipelineOptions(target="dlp"))
    out = np.zeros((4, 8), np.float32)
    evaluate.run_dlp_sim(module, [X.copy(), W.copy(), out])
    np.testing.assert_allclose(out, want(X), rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------------ OpenCL


def test_opencl_outputs_held_past_the_svm_pool_keep_their_values(tmp_path):
    """Six calls whose results are all held (more than SVM_POOL): each keeps its own
    values; after they are dropped the pool's arrays are handed out again."""
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[B, 8]) {\n  param w: f32[8] = normal(seed=1)\n  return tanh(x + w)\n}\n"
    )
    model = dlpc.load(str(path), batch=4)
    compiled = dlpc.compile(model, target="opencl")
    w = model.weights["w"]
    xs = [X * k for k in range(opencl_rt.SVM_POOL + 2)]
    held = [compiled(x)[0] for x in xs]
    for x, y in zip(xs, held):
        np.testing.assert_allclose(y, want(x, w), rtol=1e-5, atol=1e-6)
    del held
    for x in xs[:2]:
        np.testing.assert_allclose(compiled(x)[0], want(x, w), rtol=1e-5, atol=1e-6)


def test_opencl_without_svm(tmp_path, monkeypatch):
    pytest.importorskip("pyopencl")
    monkeypatch.setenv("DLPC_OPENCL_SVM", "0")
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[B, 8]) {\n  param w: f32[8] = normal(seed=1)\n  return tanh(x + w)\n}\n"
    )
    model = dlpc.load(str(path), batch=4)
    compiled = dlpc.compile(model, target="opencl")
    assert compiled.artifact.svm_args == {}
    w = model.weights["w"]
    for x in (X, -X):
        np.testing.assert_allclose(compiled(x)[0], want(x, w), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------ opencl_rt: the host's plan, as data


def _ints(*values):
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IntegerAttr, i64

    return [arith.ConstantOp(IntegerAttr(v, i64)) for v in values]


def test_host_scalars():
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import FloatAttr, f32

    from dlpc.backends.runtime.opencl_rt import _host_scalar

    a, b = _ints(6, 3)
    assert _host_scalar(a, {}) == 6
    env = {a.result: 6, b.result: 3}
    assert _host_scalar(arith.AndIOp(a, b), env) == 2
    assert _host_scalar(arith.AddiOp(a, b), env) == 9
    got = {p: _host_scalar(arith.CmpiOp(a, b, p), env) for p in ("eq", "ne", "slt", "sle", "sgt")}
    assert got == {"eq": False, "ne": True, "slt": False, "sle": False, "sgt": True}
    same = {a.result: 3, b.result: 3}
    got = {p: _host_scalar(arith.CmpiOp(a, b, p), same) for p in ("eq", "ne", "slt", "sle", "sgt")}
    assert got == {"eq": True, "ne": False, "slt": False, "sle": True, "sgt": False}
    assert _host_scalar(arith.CmpiOp(a, b, "slt"), {a.result: -1, b.result: 0}) is True
    less = {a.result: -1, b.result: 0}  # (seed 44's opencl_rt.py:1508: sle is <=, not ==)
    got = {p: _host_scalar(arith.CmpiOp(a, b, p), less) for p in ("eq", "ne", "slt", "sle", "sgt")}
    assert got == {"eq": False, "ne": True, "slt": True, "sle": True, "sgt": False}
    with pytest.raises(DlpcError) as e:
        _host_scalar(arith.CmpiOp(a, b, "ult"), env)
    assert str(e.value) == "error: opencl backend: comparison 'ult' in @main"
    with pytest.raises(DlpcError) as e:
        _host_scalar(arith.ConstantOp(FloatAttr(1.5, f32)), {})
    assert str(e.value).startswith("error: opencl backend: constant ") and "in @main" in str(
        e.value
    )


def test_nest_turns_markers_into_nested_steps():
    from dlpc.backends.runtime.opencl_rt import _nest

    flat = [
        ("kernel", "k0"),
        ("if", "c"),
        ("kernel", "k1"),
        ("else",),
        ("kernel", "k2"),
        ("end",),
        ("while",),
        ("load", "v", "m"),
        ("do", "d"),
        ("kernel", "k3"),
        ("if", "e"),
        ("else",),
        ("kernel", "k4"),
        ("end",),
        ("end",),
        ("kernel", "k5"),
    ]
    assert _nest(flat) == [
        ("kernel", "k0"),
        ("if", "c", [("kernel", "k1")], [("kernel", "k2")]),
        (
            "while",
            [("load", "v", "m")],
            "d",
            [("kernel", "k3"), ("if", "e", [], [("kernel", "k4")])],
        ),
        ("kernel", "k5"),
    ]


def test_build_failure_line():
    from dlpc.backends.runtime.opencl_rt import _build_failure

    log = (
        "clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed\n\n"
        "Build on <pyopencl.Device 'cpu'>:\n\n"
        "<kernel>:2:3: warning: unused\n"
        "<kernel>:3:5: error: use of undeclared identifier 'y'\n"
    )
    assert (
        _build_failure(RuntimeError(log))
        == "clBuildProgram failed: BUILD_PROGRAM_FAILURE: <kernel>:3:5: error: use of undeclared identifier 'y'"
    )
    assert _build_failure(RuntimeError("status - x\nfirst line\nsecond")) == "status: first line"
    assert _build_failure(RuntimeError("only a status - here")) == "only a status"
    assert _build_failure(ValueError("")) == "ValueError"


PLAN_SRC = """
func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = graph.exp %x : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %b = graph.neg %a : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = graph.sin %b : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = graph.reduce_sum %c {axes = array<i64: 1>} : (tensor<8x8xf32>) -> tensor<8xf32>
  %k = graph.constant dense<2.0> : tensor<8xf32>
  %t = graph.mul %s, %k : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = graph.add %x, %t : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}"""


@pytest.mark.parametrize("split", [False, True])
def test_plan_buffers_reuses_freed_slots_of_a_size_class(split):
    """a, b, c (256 bytes), s and t (32): c takes a's slot once a is freed, t takes
    none of theirs (another size class); in a split chain nothing is reused. The splat
    constant is a whole array."""
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import _plan_buffers

    module = lower(PLAN_SRC)
    fn = find_main(module)
    homes, slots, values, steps, aliased = _plan_buffers(module, fn, {}, split)
    sizes = [size for size, _ in slots]
    if split:
        assert sorted(sizes) == [32, 32, 256, 256, 256]
    else:
        assert sorted(sizes) == [32, 32, 256, 256]
    assert [s[0] for s in steps] == ["kernel"] * 6 and aliased == ()
    (name,) = values
    np.testing.assert_array_equal(values[name], np.full(8, 2.0, np.float32))
    assert [k for k, _ in homes.values()].count("arg") == 2
    assert [k for k, _ in homes.values()].count("global") == 1


def test_plan_buffers_copies_and_refusals():
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import _plan_buffers

    module = parse_module(
        """
func.func @main(%x: memref<4xf32>, %e: memref<0xf32>, %y: memref<4xf32>, %z: memref<0xf32>) {
  "memref.copy"(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
  "memref.copy"(%e, %z) : (memref<0xf32>, memref<0xf32>) -> ()
  func.return
}"""
    )
    fn = find_main(module)
    args = fn.body.block.args
    _, slots, _, steps, _ = _plan_buffers(module, fn, {}, False)
    assert slots == () and steps == (("copy", args[2], args[0], 16),)
    module = parse_module(
        """
func.func @main(%x: memref<4xf32>) {
  %c = arith.constant 2 : index
  %d = arith.muli %c, %c : index
  func.return
}"""
    )
    with pytest.raises(DlpcError) as e:
        _plan_buffers(module, find_main(module), {}, False)
    assert str(e.value) == "error: opencl backend: unsupported op 'arith.muli' in @main"


@pytest.mark.parametrize(
    "layout, ok",
    [
        ("offset: [0], sizes: [2, 8], strides: [8, 1]", True),
        ("offset: [1], sizes: [2, 8], strides: [8, 1]", False),
        ("offset: [0], sizes: [2, 8], strides: [1, 2]", False),
        ("offset: [0], sizes: [2, 8], strides: [16, 1]", False),
    ],
)
def test_a_reinterpret_cast_must_be_row_major_at_zero(layout, ok):
    from xdsl.dialects import memref

    from dlpc.backends.runtime.opencl_rt import _check_reinterpret

    module = parse_module(
        f"""
func.func @main(%x: memref<16xf32>) {{
  %r = memref.reinterpret_cast %x to {layout} : memref<16xf32> to memref<2x8xf32>
  func.return
}}"""
    )
    op = next(o for o in module.walk() if isinstance(o, memref.ReinterpretCastOp))
    if ok:
        _check_reinterpret(op)
        return
    with pytest.raises(DlpcError) as e:
        _check_reinterpret(op)
    assert str(e.value) == (
        "error: opencl backend: a memref.reinterpret_cast in @main must be static, "
        "row-major and at offset 0"
    )


def test_team_run_is_the_whole_call_or_nothing():
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import team_run

    fn = find_main(lower(PLAN_SRC))
    run = team_run(fn, {})
    assert run is not None and [k.sym for k in run] == [
        k.sym for k in fn.body.block.ops if k.name == "loop.kernel"
    ]
    assert len(run) == 6
    from xdsl.dialects import memref

    args = fn.body.block.args  # a copy among the kernels: no team chain
    last = fn.body.block.last_op
    assert last is not None
    fn.body.block.insert_op_before(memref.CopyOp(args[0], args[1]), last)
    assert team_run(fn, {}) is None
    empty = parse_module("func.func @main(%x: memref<4xf32>) {\n  func.return\n}")
    assert team_run(find_main(empty), {}) is None  # no kernel


def test_a_team_splits_by_the_first_arguments_images(tmp_path, monkeypatch):
    """A team chain splits by images in the groups the first argument's batch allows
    (4 at batch 4), whatever the other arguments' first dims (the conv's 5 filters would
    allow none); the team's call matches the reference."""
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    monkeypatch.setenv("DLPC_OPENCL_TEAM", "1")
    team = opencl_rt.team_devices()
    if team is None:
        pytest.skip("the OpenCL platform has no two serial CPU devices")
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[B, 1, 12, 12]) {\n  param k: f32[5, 1, 3, 3] = kaiming(seed=1)\n"
        "  param b: f32[5] = normal(seed=2)\n  return relu(conv2d(x, k, b))\n}\n"
    )
    model = dlpc.load(str(path), batch=4)
    lowered = dlpc.compile(model, target="opencl").lowered
    f = opencl_rt.OpenCLFunction(lowered, name="bkrt5_team", team=team)
    assert f.team is not None and [c.parts for c in f.chains] == [4]
    f.bind_params(model.weights)
    xs = api.random_inputs(model)
    for _ in range(2):
        np.testing.assert_allclose(f(*xs)[0], api.reference(model, xs)[0], rtol=1e-4, atol=1e-5)
    f.team.stop()


# -------------------------------------------- opencl_rt: platforms and devices (stand-ins)


class _Device:
    """A stand-in for a pyopencl device: what the choice functions read."""

    def __init__(self, name, units, cpu=True, parent=None, extensions="", platform=None):
        import pyopencl as cl

        self.name = name
        self.max_compute_units = units
        self.type = cl.device_type.CPU if cpu else cl.device_type.GPU
        self.parent_device = parent
        self.extensions = extensions
        self.platform = platform
        self.native_vector_width_float = 8

    def __repr__(self):
        return self.name


class _Platform:
    def __init__(self, name, found):
        self.name = name
        self.found = found

    def get_devices(self):
        return self.found


@pytest.fixture
def rt(monkeypatch):
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    for name in ("DLPC_OPENCL_PLATFORM", "DLPC_OPENCL_TEAM", "DLPC_OPENCL_SUBDEVICES"):
        monkeypatch.delenv(name, raising=False)
    return opencl_rt


def _use(monkeypatch, rt, found):
    monkeypatch.setattr(rt, "devices", lambda: found)


def test_choose_platform_by_name_and_by_build(rt, monkeypatch):
    a = _Platform("Portable Computing Language", [_Device("p0", 2)])
    b = _Platform("Intel(R) OpenCL", [_Device("i0", 2)])
    empty = _Platform("Empty PoCL", [])
    monkeypatch.setattr(rt, "_builds", lambda p: None if p is b else "unknown target CPU")
    assert rt._choose_platform([empty, a, b]) is b
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "INTEL")
    assert rt._choose_platform([a, b]) is b
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "nvidia")
    with pytest.raises(DlpcError) as e:
        rt._choose_platform([a, b])
    assert str(e.value) == (
        "error: no OpenCL platform named like DLPC_OPENCL_PLATFORM='nvidia' "
        "(platforms: 'Portable Computing Language', 'Intel(R) OpenCL')"
    )
    with pytest.raises(DlpcError, match=r"\(platforms: none\)"):
        rt._choose_platform([])
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "portable")
    with pytest.raises(DlpcError) as e:
        rt._choose_platform([a])
    assert str(e.value).startswith(
        "error: no OpenCL platform builds programs here "
        "(Portable Computing Language: unknown target CPU; "
    )
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "empty")
    with pytest.raises(DlpcError) as e:
        rt._choose_platform([empty])
    assert str(e.value).startswith("error: no OpenCL platform builds programs here (no devices; ")


def test_platforms_put_gpus_then_pocl_first(rt, monkeypatch):
    import types

    import pyopencl as cl

    gpu = _Platform("Vendor GPU", [_Device("g", 40, cpu=False)])
    pocl = _Platform("Portable Computing Language", [_Device("p", 2)])
    other = _Platform("Other CPU", [_Device("o", 2)])
    fake = types.SimpleNamespace(get_platforms=lambda: [other, pocl, gpu], Error=cl.Error)
    monkeypatch.setattr(rt, "_cl", lambda: fake)
    monkeypatch.setattr(rt, "_icd_vendors", lambda: None)
    assert [p.name for p in rt.platforms()] == [
        "Vendor GPU",
        "Portable Computing Language",
        "Other CPU",
    ]


def test_serial_devices_and_the_default(rt, monkeypatch):
    parallel, basic1, basic2 = _Device("pthread", 4), _Device("basic1", 1), _Device("basic2", 1)
    gpu = _Device("gpu", 64, cpu=False)
    _use(monkeypatch, rt, [gpu, basic1, parallel, basic2])
    assert rt.default_device() is parallel  # the CPU with the most units
    assert rt.serial_device() is basic1
    assert rt.serial_devices() == [basic1, basic2]
    assert rt.team_devices() == [basic1, basic2]
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "0")
    assert rt.team_devices() is None
    monkeypatch.delenv("DLPC_OPENCL_TEAM")
    _use(monkeypatch, rt, [gpu, basic1])  # no parallel CPU beside it: no serial device
    assert rt.serial_device() is None and rt.team_devices() is None
    assert rt.default_device() is gpu  # one CPU: the platform's first
    _use(monkeypatch, rt, [basic1, basic2])
    assert rt.serial_device() is None
    assert rt.default_device() is basic1  # (equal units: the first)


def test_sub_devices_join_a_team_only_with_local_execution(rt, monkeypatch):
    parent = _Device("parent", 4)
    local = "cl_khr_fp64 cl_intel_exec_by_local_thread"
    s1, s2 = _Device("s1", 1, parent=parent, extensions=local), _Device("s2", 1, parent=parent)
    assert rt._subdevice(s1) and not rt._subdevice(parent)
    assert rt._queue_flags(s1) == rt.CL_QUEUE_THREAD_LOCAL_EXEC_ENABLE_INTEL
    assert rt._queue_flags(s2) == 0  # no such extension
    assert rt._queue_flags(parent) == 0  # no sub-device
    assert rt._queue_flags(_Device("s4", 2, parent=parent, extensions=local)) == 0
    _use(monkeypatch, rt, [parent, s1, s2])
    assert rt.team_devices() is None  # s2 runs its launches on worker threads
    s2.extensions = local
    assert rt.team_devices() == [s1, s2]
    s2.extensions = ""
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "1")
    assert rt.team_devices() == [s1, s2]  # any sub-devices

    class Raising(_Device):
        @property
        def parent_device(self):
            raise RuntimeError("no parent")

        @parent_device.setter
        def parent_device(self, value):
            pass

    assert not rt._subdevice(Raising("r", 1))


def test_serial_subdevices_only_where_no_serial_device_exists(rt, monkeypatch):
    class Splittable(_Device):
        def create_sub_devices(self, props):
            self.asked = props
            return [_Device(f"sub{k}", 1, parent=self) for k in range(self.max_compute_units)]

    intel = _Platform("Intel(R) OpenCL", [])
    pocl = _Platform("Portable Computing Language", [])
    small, big = Splittable("small", 2, platform=intel), Splittable("big", 4, platform=intel)
    subs = rt._serial_subdevices([small, big])
    assert [d.name for d in subs] == ["sub0", "sub1", "sub2", "sub3"]  # the largest split
    import pyopencl as cl

    assert big.asked == [cl.device_partition_property.EQUALLY, 1]
    assert rt._serial_subdevices([big, _Device("one", 1, platform=intel)]) == []
    assert rt._serial_subdevices([Splittable("p", 4, platform=pocl)]) == []
    assert rt._serial_subdevices([_Device("gpu", 8, cpu=False, platform=intel)]) == []
    monkeypatch.setenv("DLPC_OPENCL_SUBDEVICES", "0")
    assert rt._serial_subdevices([big]) == []
    monkeypatch.delenv("DLPC_OPENCL_SUBDEVICES")
    unsplittable = _Device("flat", 4, platform=intel)  # (no create_sub_devices)
    assert rt._serial_subdevices([unsplittable]) == []


def test_choose_device_by_estimate_and_by_launches(rt, monkeypatch):
    from dlpc.backends.runtime import profile

    parallel, basic = _Device("pthread", 4), _Device("basic", 1)
    monkeypatch.setattr(rt, "serial_device", lambda: basic)
    monkeypatch.setattr(rt, "default_device", lambda: parallel)

    class Cost:
        def __init__(self, flops):
            self.flops = flops

    for seconds, want in ((rt.PARALLEL_SECONDS / 2, basic), (rt.PARALLEL_SECONDS, parallel)):
        flops = (seconds - rt.ESTIMATED_LAUNCH) * rt.ESTIMATED_FLOPS
        monkeypatch.setattr(profile, "kernel_costs", lambda m, f=flops: [Cost(f)])
        assert rt._choose_device(object(), 8) == (want, None)
    monkeypatch.setattr(rt, "serial_device", lambda: None)
    assert rt._choose_device(object(), 8) == (parallel, None)
    sub = _Device("sub", 1, parent=parallel)
    monkeypatch.setattr(rt, "serial_device", lambda: sub)
    for launches, want in ((1, (parallel, ("emitter", "source"))), (2, (sub, None))):
        monkeypatch.setattr(
            rt, "_parallel_emission", lambda m, d, w, n=launches: (n, "emitter", "source")
        )
        assert rt._choose_device(object(), 8) == want


def test_pocl_cache_falls_back_to_a_writable_directory(rt, monkeypatch, tmp_path):
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    rt._pocl_cache()  # writable: left to PoCL
    assert "POCL_CACHE_DIR" not in os.environ
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path / "cache"))
    rt._pocl_cache()
    assert os.environ["POCL_CACHE_DIR"] == str(tmp_path / "cache" / f"pocl-{os.getuid()}")
    monkeypatch.delenv("POCL_CACHE_DIR")
    monkeypatch.setenv("DLPC_CACHE_DIR", str(blocked / "x"))
    monkeypatch.setattr(rt.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    rt._pocl_cache()
    assert os.environ["POCL_CACHE_DIR"] == str(tmp_path / "tmp" / f"pocl-{os.getuid()}")
    monkeypatch.setenv("POCL_CACHE_DIR", "/the/users/choice")
    rt._pocl_cache()
    assert os.environ["POCL_CACHE_DIR"] == "/the/users/choice"
    assert not rt._writable(blocked / "sub")


def _bare_team(rt, next_id=1):
    import threading

    team = rt.Team.__new__(rt.Team)  # (no thread: start's bookkeeping only)
    team.sync = np.zeros(16, np.int64)
    team.next_id, team.avoided, team.tid = next_id, -1, 4321
    team.allowed = {0, 1, 2}
    team.armed, team.error, team.stopped = False, 0, False
    team.wake = threading.Event()
    return team


def test_team_start_publishes_the_call_and_keeps_the_helper_off_the_callers_cpu(rt, monkeypatch):
    from dlpc.backends.opencl import TEAM_GO

    moves = []
    monkeypatch.setattr(rt.os, "sched_setaffinity", lambda tid, cpus: moves.append((tid, cpus)))
    monkeypatch.setattr(rt, "_current_cpu", lambda: 1)
    team = _bare_team(rt, next_id=7)
    team.start()
    assert int(team.sync[TEAM_GO]) == 7 and team.next_id == 8 and team.wake.is_set()
    assert moves == [(4321, {0, 2})] and team.avoided == 1
    team.wake.clear()
    team.armed = True  # an armed helper is not woken; the same CPU: no move
    team.start()
    assert int(team.sync[TEAM_GO]) == 8 and not team.wake.is_set() and len(moves) == 1
    monkeypatch.setattr(rt, "_current_cpu", lambda: 5)  # a CPU the process may not use
    team.start()
    assert len(moves) == 1
    team = _bare_team(rt, next_id=0x7FFFFFFFFFFFFFFF)  # the id wraps to 1, never 0
    team.error = -5  # a failed helper is not woken
    team.allowed = {1}  # one CPU: nowhere to move
    monkeypatch.setattr(rt, "_current_cpu", lambda: 1)
    team.start()
    assert int(team.sync[TEAM_GO]) == 0x7FFFFFFFFFFFFFFF and team.next_id == 1
    assert not team.wake.is_set() and len(moves) == 1
    team = _bare_team(rt)
    team.tid = 0  # the helper thread not started yet
    team.start()
    assert len(moves) == 1

    def refuse(tid, cpus):
        raise OSError("not permitted")

    monkeypatch.setattr(rt.os, "sched_setaffinity", refuse)
    team = _bare_team(rt)
    team.start()
    assert team.allowed == set() and team.avoided == -1


def test_team_close_stops_and_waits_for_the_helper(rt):
    import threading

    team = _bare_team(rt)
    ran = threading.Event()

    def helper():
        team.wake.wait(5)
        ran.set()

    team.thread = threading.Thread(target=helper)
    team.thread.start()
    team.close()
    assert team.stopped and team.wake.is_set() and ran.is_set()
    assert not team.thread.is_alive()


def test_keep_off_workers_moves_the_caller_off_a_workers_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(cbuild.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(cbuild.os, "sched_setaffinity", lambda pid, cpus: calls.append(cpus))
    monkeypatch.setattr(cbuild, "worker_cpus", frozenset({1, 2}))
    monkeypatch.setattr(cbuild, "_getcpu", lambda: 2)  # on a worker's CPU: moved off, back
    cbuild.keep_off_workers()
    assert calls == [{0, 3}, {0, 1, 2, 3}]
    calls.clear()
    monkeypatch.setattr(cbuild, "_getcpu", lambda: 3)  # on its own CPU: left alone
    cbuild.keep_off_workers()
    assert calls == []
    monkeypatch.setattr(cbuild, "_getcpu", lambda: 1)
    monkeypatch.setattr(cbuild.os, "sched_getaffinity", lambda pid: {1, 2})  # nowhere else
    cbuild.keep_off_workers()
    assert calls == []
    monkeypatch.setattr(cbuild, "worker_cpus", frozenset())  # no bound workers
    monkeypatch.setattr(cbuild, "_getcpu", lambda: pytest.fail("asked for the CPU"))
    cbuild.keep_off_workers()


@pytest.mark.parametrize(
    "env, gomp_before, bound",
    [
        ({"OMP_NUM_THREADS": "2"}, False, True),  # worker 1 on CPU 1 of 0-3
        ({"OMP_NUM_THREADS": "4"}, False, True),  # workers on 1, 2, 3
        ({"OMP_NUM_THREADS": "1"}, False, False),  # no team
        ({"OMP_NUM_THREADS": "5"}, False, False),  # more threads than CPUs
        ({"OMP_NUM_THREADS": "2", "OMP_PROC_BIND": "spread"}, False, False),  # the user's
        ({"OMP_NUM_THREADS": "2", "GOMP_CPU_AFFINITY": "0-3"}, False, False),
        ({"OMP_NUM_THREADS": "2"}, True, False),  # libgomp already loaded: too late
    ],
    ids=["two", "four", "one", "five", "proc_bind", "affinity", "loaded"],
)
def test_load_binds_openmp_workers_once(monkeypatch, env, gomp_before, bound):
    """cbuild._load: libgomp's workers get CPUs of their own (OMP_PROC_BIND=close only
    while it loads, the caller's CPU set restored at once), unless the user chose a
    binding, the team is not 2..#CPUs threads, or libgomp was loaded before."""
    for name in (*cbuild.BIND_VARS, "OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cbuild.sys, "platform", "linux")
    monkeypatch.setattr(cbuild.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    restored = []
    monkeypatch.setattr(cbuild.os, "sched_setaffinity", lambda pid, cpus: restored.append(cpus))
    loaded = [gomp_before]
    monkeypatch.setattr(cbuild, "_gomp_loaded", lambda: loaded[0])
    monkeypatch.setattr(cbuild, "worker_cpus", frozenset())
    monkeypatch.setattr(cbuild, "_getcpu", cbuild._no_cpu)
    seen = []

    class Handle:
        sched_getcpu = staticmethod(lambda: 2)

    def cdll(path):
        if path is not None:
            seen.append(os.environ.get("OMP_PROC_BIND"))
            loaded[0] = True
        return Handle()

    monkeypatch.setattr(cbuild.ctypes, "CDLL", cdll)
    assert isinstance(cbuild._load(cbuild.Path("/lib/x.so")), Handle)
    assert os.environ["GOMP_SPINCOUNT"] == cbuild.SPIN_COUNT == "10000"
    if bound:
        team = int(env["OMP_NUM_THREADS"])
        assert seen == ["close"] and "OMP_PROC_BIND" not in os.environ
        assert restored == [{0, 1, 2, 3}]
        assert cbuild.worker_cpus == frozenset(range(1, team))
        assert cbuild._getcpu() == 2
    else:
        assert seen == [env.get("OMP_PROC_BIND")] and restored == []
        assert cbuild.worker_cpus == frozenset() and cbuild._getcpu is cbuild._no_cpu


COSTED = """
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  loop.kernel "pack_0" attributes {dlpc.prepare} {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      %v = memref.load %x[%i] : memref<4xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%i] : memref<4xf32>
    }
  }
  loop.kernel "k_1" attributes {origin = "graph.custom"} {
    loop.for %i = 0 to 4 step 1 {name = "i0"} {
      loop.for %j = 0 to 3 step 1 {name = "i1"} {
        %v = memref.load %x[%i] : memref<4xf32>
        %f = math.fma %v, %v, %v : f32
        %c = arith.cmpf ogt, %f, %v : f32
        %r = scf.if %c -> (f32) {
          %a = arith.addf %f, %v : f32
          scf.yield %a : f32
        } else {
          %b = arith.mulf %f, %v : f32
          %d = arith.subf %b, %v : f32
          scf.yield %d : f32
        }
        memref.store %r, %y[%i] : memref<4xf32>
      }
    }
  }
  func.return
}"""


def test_kernel_costs_count_fma_twice_both_branches_and_skip_prepare_kernels():
    from dlpc.backends.runtime import profile

    (cost,) = profile.kernel_costs(parse_module(COSTED))
    assert (cost.name, cost.origin) == ("k_1", "graph.custom")
    assert cost.flops == 4 * 3 * (2 + 1 + 2)  # fma, then branch, else branch; no cmpf
    assert cost.bytes == 16 + 16


# ----------------------------------- backend-runtime seed 43's survivors (written after it)


def _kernel(name, src, dst, origin="graph.neg"):
    return f"""  loop.kernel "{name}" attributes {{origin = "{origin}"}} {{
    loop.for %i = 0 to 8 step 1 {{name = "i0"}} {{
      %v = memref.load %{src}[%i] : memref<8xf32>
      %w = arith.negf %v : f32
      memref.store %w, %{dst}[%i] : memref<8xf32>
    }}
  }}
"""


def _main(body: str):
    return parse_module(
        "func.func @main(%x: memref<8xf32>, %y: memref<8xf32>)\n"
        "    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {\n"
        "  %a = memref.alloc() : memref<8xf32>\n  %b = memref.alloc() : memref<8xf32>\n"
        + body
        + "  func.return\n}"
    )


def test_kernel_runs_are_cut_at_copies():
    """(opencl_rt.py:1568: each kernel joins the last run, not the first)"""
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import kernel_runs

    module = _main(
        _kernel("k0", "x", "a")
        + _kernel("k1", "a", "b")
        + '  "memref.copy"(%b, %a) : (memref<8xf32>, memref<8xf32>) -> ()\n'
        + _kernel("k2", "a", "b")
        + _kernel("k3", "b", "y")
        + _kernel("k4", "y", "b")
        + '  "memref.copy"(%b, %a) : (memref<8xf32>, memref<8xf32>) -> ()\n'
        + _kernel("k5", "a", "y")
    )
    fn = find_main(module)
    runs = kernel_runs(fn, {})
    assert [[k.sym for k in run] for run in runs] == [["k0", "k1"], ["k2", "k3", "k4"]]
    alias = next(k for k in fn.walk() if getattr(k, "sym", None) == "k3")
    runs = kernel_runs(fn, {alias: None})  # (an aliased reshape is no launch)
    assert [[k.sym for k in run] for run in runs] == [["k0", "k1"], ["k2", "k4"]]


def test_a_reshape_kernel_storing_only_into_a_local_buffer_is_no_alias():
    """A graph.reshape kernel whose one store goes to a buffer of its own (not one of
    the two it uses from outside) aliases nothing (opencl_rt.py:1603, reshape_aliases'
    `stored != {result}`; a hand-written kernel: te-to-loop's reshapes store their
    result)."""
    from dlpc.backends.c import find_main
    from dlpc.backends.runtime.opencl_rt import reshape_aliases

    local = """  loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      %t = memref.alloca() : memref<1xf32>
      %v = memref.load %b[%i] : memref<8xf32>
      %u = memref.load %a[%i] : memref<8xf32>
      %w = arith.addf %v, %u : f32
      %c0 = arith.constant 0 : index
      memref.store %w, %t[%c0] : memref<1xf32>
    }
  }
"""
    fn = find_main(_main(_kernel("k0", "x", "a") + _kernel("k1", "x", "b") + local))
    assert reshape_aliases(fn) == {}
    plain = _kernel("reshape_1", "a", "b", origin="graph.reshape")
    fn = find_main(_main(_kernel("k0", "x", "a") + plain + _kernel("k2", "b", "y")))
    ((kernel, (source, result)),) = reshape_aliases(fn).items()
    assert kernel.sym == "reshape_1" and source.name_hint == "a" and result.name_hint == "b"


def test_writable_takes_an_existing_directory(tmp_path):
    """(opencl_rt.py:79: an existing directory is writable, `exist_ok=True`)"""
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime.opencl_rt import _writable

    assert _writable(tmp_path)
    assert _writable(tmp_path / "a" / "b") and (tmp_path / "a" / "b").is_dir()
    assert _writable(tmp_path / "a" / "b")  # (now it exists)


def test_has_gpu_counts_a_device_without_a_type_as_none(rt):
    """(opencl_rt.py:203: a device that reports no type is no GPU)"""

    class Typeless:
        pass

    assert not rt._has_gpu(_Platform("p", [Typeless()]))
    assert rt._has_gpu(_Platform("p", [Typeless(), _Device("g", 8, cpu=False)]))


def test_icd_vendors_keeps_the_systems_drivers_visible(rt, monkeypatch, tmp_path):
    """(opencl_rt.py:160: /etc/OpenCL/vendors/*.icd copied beside the wheel's, a stale
    file of an earlier run removed)"""
    monkeypatch.setenv("OCL_ICD_VENDORS", "")
    monkeypatch.delenv("OCL_ICD_VENDORS")
    monkeypatch.setattr(rt, "_VENDORS", None)
    monkeypatch.setattr(rt, "_wheel_icds", lambda: [tmp_path / "libintelocl.so"])
    system = tmp_path / "system"
    system.mkdir()
    (system / "pocl.icd").write_text("libpocl.so.2\n")
    (system / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    (system / "readme.txt").write_text("not a driver\n")
    monkeypatch.setattr(rt, "SYSTEM_VENDORS", system)
    monkeypatch.setattr(rt.tempfile, "gettempdir", lambda: str(tmp_path))
    directory = tmp_path / f"dlpc-opencl-vendors-{os.getuid()}"
    directory.mkdir()
    (directory / "old.icd").write_text("gone\n")
    rt._icd_vendors()
    assert os.environ["OCL_ICD_VENDORS"] == str(directory)
    got = {p.name: p.read_text() for p in directory.iterdir()}
    assert got == {
        "dlpc-wheel-0.icd": f"{tmp_path / 'libintelocl.so'}\n",
        "system-nvidia.icd": "libnvidia-opencl.so.1\n",
        "system-pocl.icd": "libpocl.so.2\n",
    }


def test_the_default_dlp_targets_intrinsic_throughputs():
    """The textbook DLP's vector and matrix units (targets/dlp.py:52: tanh's 16 a
    cycle): elements a cycle a core, MACs for matmul and conv, window cells for pool."""
    from dlpc.targets.dlp import DlpTarget

    assert DlpTarget().to_dict()["intrinsics"] == {
        **dict.fromkeys(["add", "sub", "mul", "max", "min", "relu", "pool"], 64),
        **dict.fromkeys(["add_scalar", "mul_scalar", "max_scalar"], 64),
        **dict.fromkeys(["cycle_add", "cycle_mul", "cycle_sub"], 64),
        **dict.fromkeys(["div", "sigmoid", "tanh", "exp", "log", "sqrt"], 16),
        **dict.fromkeys(["reduce_sum", "reduce_max", "transpose"], 32),
        "matmul": 256,
        "conv": 256,
    }
    assert DlpTarget().intrinsic_cycles("tanh", 64) == 4


@pytest.mark.parametrize("how", ["gpu_profile", "no_svm"])
def test_opencl_function_under_the_gpu_profile_and_without_svm(how):
    """The GPU launch plans run on the CPU device too (every kernel its own launch, no
    chain or team); svm=False keeps every argument in a device buffer. Both match the
    reference, twice."""
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    model = dlpc.load("examples/lenet.dlpc", batch=2)
    lowered = dlpc.compile(model, target="opencl").lowered
    if how == "gpu_profile":
        f = opencl_rt.OpenCLFunction(lowered, name="bkrt5_gpu", profile="gpu")
        assert f.plans == "gpu" and f.chains == [] and f.team is None
        assert f.num_launches == len(f.kernel_ops) > 1
    else:
        f = opencl_rt.OpenCLFunction(lowered, name="bkrt5_nosvm", svm=False)
        assert f.plans == "cpu" and f.svm_args == {} and f.svm_pools == {}
    f.bind_params(model.weights)
    xs = api.random_inputs(model)
    (ref,) = api.reference(model, xs)
    for _ in range(2):
        np.testing.assert_allclose(f(*xs)[0], ref, rtol=1e-4, atol=1e-5)


def test_a_failed_build_names_its_line_and_leaves_no_library(monkeypatch, tmp_path):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    source = "int dlpc_main(void **args) {\n  return undeclared_bkrt5;\n}\n"
    with pytest.raises(DlpcError) as e:
        cbuild.build(source, name="broken")
    message = str(e.value)
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path))}/broken-[0-9a-f]{{20}}\.c:2: error: C compiler failed "
        r"in dlpc_main: .*undeclared_bkrt5.*",
        message,
    )
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 1 and names[0].endswith(".c")  # the source kept, no library, no temp


def test_inputs_the_fast_call_refuses_take_the_python_path():
    """With the fast caller kept (where the extension builds), inputs it hands back (another
    dtype, not an array, not C order) still give the right answers through the Python
    path; exact ones too."""
    f = cbuild.CFunction(lower(), name="bkrt5")
    f.bind_params({"w": W})
    for x in (X, X.astype(np.float64), X.tolist(), np.asfortranarray(X)):
        np.testing.assert_allclose(f(x)[0], want(X), rtol=1e-6)
    with pytest.raises(DlpcError) as e:
        f(X[:2])
    assert str(e.value) == "error: input 0 has shape (2, 8), expected (4, 8)"


def test_a_device_not_of_type_cpu_keeps_the_planned_local_sizes(monkeypatch):
    """On a CPU device a launch without a local size gets `cpu_local_size`'s work-groups;
    on a device of another type (here the CPU bit moved so that this device is not
    one: last round's `opencl_rt.py:1086`, `&` -> `//`, which only a GPU tells apart)
    it keeps the plan's (None: the runtime chooses), and the answers are the same."""
    cl = pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    model = dlpc.load("examples/mlp.dlpc", batch=2)
    lowered = dlpc.compile(model, target="opencl").lowered
    device = opencl_rt.default_device()
    assert int(device.type) == int(cl.device_type.CPU) == 2
    cpu = opencl_rt.OpenCLFunction(lowered, name="bkrt5_cpu", device=device, profile="cpu")
    assert all(s[3] is not None for s in cpu.kernel_steps if s[0] == "kernel")
    monkeypatch.setattr(cl.device_type, "CPU", 1)
    other = opencl_rt.OpenCLFunction(lowered, name="bkrt5_other", device=device, profile="cpu")
    kernels = [s for s in other.kernel_steps if s[0] == "kernel"]
    assert kernels and all(s[3] is None for s in kernels) and other.chains == []
    other.bind_params(model.weights)
    xs = api.random_inputs(model)
    np.testing.assert_allclose(other(*xs)[0], api.reference(model, xs)[0], rtol=1e-4, atol=1e-5)


# ----------------------------------- backend-runtime seed 44's survivors (written after it)


def test_the_helper_counts_its_launches_and_rearms_after_a_stale_one(rt, monkeypatch):
    """Team._run on stand-ins: a launch that found its arguments stale (TEAM_STALE) is
    armed again at once (seed 44's opencl_rt.py:675, `==` -> `>=`), one that found no
    call (TEAM_IDLE, every started call seen) ends the spin and the thread sleeps; each
    result counted once (:673, `Team.launches`)."""
    import threading
    import types

    from dlpc.backends.opencl import TEAM_GO, TEAM_IDLE, TEAM_RESULT, TEAM_SEEN, TEAM_STALE

    team = rt.Team.__new__(rt.Team)
    team.queue = types.SimpleNamespace(int_ptr=0)
    team.kernel = types.SimpleNamespace(int_ptr=0, set_arg=lambda pos, arg: None)
    team.sync = np.zeros(16, np.int64)
    team.sync[TEAM_GO] = team.sync[TEAM_SEEN] = 7
    team.lock, team.pending, team.version, team.version_pos = threading.Lock(), {}, 0, 3
    team.armed, team.stopped, team.error = False, False, 0
    team.wake = threading.Event()
    team.launches = {k: 0 for k in (1, 3, 4)}
    results = [TEAM_STALE, TEAM_IDLE]

    def launch(queue, kernel):
        team.sync[TEAM_RESULT] = results.pop(0)
        return 0

    monkeypatch.setattr(rt, "_launch_one", launch)
    team.wake.set()
    thread = threading.Thread(target=team._run, daemon=True)
    thread.start()
    for _ in range(500):  # (until the thread sleeps again)
        if team.launches[TEAM_IDLE] and not team.armed:  # (counted after the launch)
            break
        threading.Event().wait(0.01)
    assert results == [] and team.launches == {1: 0, 3: 1, 4: 1}
    assert thread.is_alive()  # asleep, woken by the next start
    team.stopped = True
    team.wake.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_profile_kernels_runs_two_warmups_and_twenty_calls_by_default(tmp_path, monkeypatch):
    """(seed 44's opencl_rt.py:1417: the default `repeat`; no caller in the package leaves
    it out)"""
    pytest.importorskip("pyopencl")
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[B, 8]) {\n  param w: f32[8] = normal(seed=1)\n  return tanh(x + w)\n}\n"
    )
    model = dlpc.load(str(path), batch=4)
    f = dlpc.compile(model, target="opencl").artifact
    calls = []

    def call(queue, inputs, params, events=None, steps=None):
        calls.append(events)
        return []

    monkeypatch.setattr(f, "_call", call)
    seconds, _ = f.profile_kernels(api.random_inputs(model))
    assert calls[:2] == [None, None] and len(calls) == 22  # warmups without events
    assert all(isinstance(e, list) for e in calls[2:])
    assert seconds == [0.0] * len(f.kernel_ops) and f.launches_per_call == [0] * len(f.kernel_ops)


def test_a_target_name_must_be_a_short_string():
    """(seed 44's targets/dlp.py:248: `name` is checked like the ranged fields)"""
    from dlpc.targets.dlp import MAX_NAME, DlpTarget

    for bad in (3, "x" * (MAX_NAME + 1)):
        with pytest.raises(DlpcError) as e:
            DlpTarget.from_dict({"name": bad}, origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: 'name' must be a string of at most {MAX_NAME} characters"
        )
    assert DlpTarget.from_dict({"name": "x" * MAX_NAME}).name == "x" * MAX_NAME
    for bad in (3, "x" * (MAX_NAME + 1)):  # built directly: checked in __post_init__
        with pytest.raises(DlpcError) as e:
            DlpTarget(name=bad)  # type: ignore[arg-type]
        assert str(e.value) == (
            f"target description: error: 'name' must be a string of at most {MAX_NAME} characters"
        )
