"""Tests of the compiled functions' runtime (issue 35, sixth round, area backend-runtime of
bench/mutation.py), written from a branch-coverage run of the area's tests before the
round's samples: the DLP target description's ranges at both ends of every field (in
range at the bound, refused one step past it, each one line naming the field); a batch run
chunk after chunk (chunks.py) in C and in Python; the fast call's extension built once per
cache directory, loaded after, and absent without headers, with a failing compiler or a
damaged file (fastcall.py)."""

from __future__ import annotations

import ctypes
import math
import re

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

from dlpc.backends.runtime import cbuild, chunks, fastcall
from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module
from dlpc.targets import dlp as targets
from dlpc.universe import PASSES

INTEGER_KEYS = [k for k, d in vars(targets.DlpTarget()).items() if type(d) is int]
FLOAT_KEYS = [k for k, d in vars(targets.DlpTarget()).items() if type(d) is float]


def _fields(key, value) -> dict:
    """A description with `key` set (clusters alone at 64 keeps 64 x 4 cores)."""
    data = {key: value}
    if key == "cores_per_cluster":
        data["clusters"] = 1
    return data


# the range of every number of a description (targets/dlp.py RANGES, docs/dlp.md: sizes the
# simulator can allocate, core counts it can start threads for, finite positive rates)
LIMITS = {
    "clusters": (1, 64),
    "cores_per_cluster": (1, 64),
    "nram_bytes": (1, 2**30),
    "wram_bytes": (1, 2**30),
    "sram_bytes": (1, 2**30),
    "clock_ghz": (1e-3, 1e3),
    "gdram_bandwidth_gbs": (1e-3, 1e6),
    "sram_bandwidth_gbs": (1e-3, 1e6),
    "dma_latency_cycles": (1, 10**9),
    "dma_queue_depth": (1, 1024),
    "dma_align": (1, 4096),
    "vector_width": (1, 65536),
    "vector_align": (1, 4096),
    "scalar_ops_per_cycle": (1e-3, 1e6),
    "intrinsics": (1e-3, 1e9),
}


def test_every_number_of_a_description_has_its_range():
    assert sorted(INTEGER_KEYS + FLOAT_KEYS + ["intrinsics"]) == sorted(LIMITS)
    assert len(INTEGER_KEYS) == 10 and len(FLOAT_KEYS) == 4
    assert targets.RANGES == LIMITS
    assert (targets.MAX_CORES, targets.MAX_NAME) == (256, 200)
    assert targets.DlpTarget.from_dict({"name": "n" * 200}).name == "n" * 200
    with pytest.raises(DlpcError, match="'name' must be a string of at most 200 characters"):
        targets.DlpTarget.from_dict({"name": "n" * 201})


@pytest.mark.parametrize("key", INTEGER_KEYS)
def test_an_integer_field_is_taken_at_both_bounds_and_refused_past_them(key):
    low, high = LIMITS[key]
    for v in (low, high):
        assert getattr(targets.DlpTarget.from_dict(_fields(key, v)), key) == v
    for v in (low - 1, high + 1, True, 2.0, "8"):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict(_fields(key, v), origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: '{key}' must be a positive integer at most {high}, got {v!r}"
        )


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_a_rate_is_taken_at_both_bounds_and_refused_past_them(key):
    low, high = LIMITS[key]
    for v in (low, high, int(high)):
        got = getattr(targets.DlpTarget.from_dict({key: v}), key)
        assert got == v and type(got) is float
    for v in (low * 0.999, high * 1.001, math.inf, math.nan, -1.0, False, "1.0"):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict({key: v}, origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: '{key}' must be a finite number in [{low:g}, {high:g}], got {v!r}"
        )


def test_an_intrinsic_throughput_is_taken_at_both_bounds_and_refused_past_them():
    low, high = LIMITS["intrinsics"]
    for v in (low, high):
        t = targets.DlpTarget.from_dict({"intrinsics": {"exp": v}})
        assert t.throughput("exp") == v and t.throughput("matmul") == 256
    for v in (low / 2, high * 2, math.inf):
        with pytest.raises(DlpcError) as e:
            targets.DlpTarget.from_dict({"intrinsics": {"exp": v}}, origin="t.toml")
        assert str(e.value) == (
            f"t.toml: error: intrinsic 'exp' must be a finite number in "
            f"[{low:g}, {high:g}], got {v!r}"
        )


def test_a_direct_description_is_checked_as_a_loaded_one():
    with pytest.raises(DlpcError, match=r"'vector_width' must be a positive integer at most 65536"):
        targets.DlpTarget(vector_width=65537)
    with pytest.raises(DlpcError, match=r"'clock_ghz' must be a finite number in \[0.001, 1000\]"):
        targets.DlpTarget(clock_ghz=1000.5)
    with pytest.raises(DlpcError) as e:
        targets.DlpTarget(clusters=17, cores_per_cluster=16)
    assert str(e.value) == (
        "target description: error: 272 cores (clusters x cores_per_cluster) > 256"
    )
    assert targets.DlpTarget(clusters=16, cores_per_cluster=16).cores == 256
    with pytest.raises(DlpcError, match="'dma_align' must be a power of two, got 96"):
        targets.DlpTarget(dma_align=96)


# ------------------------------------------------- the batch's chunks (chunks.py)

CHUNK_SRC = """
func.func @main(%x: tensor<4x8xf32>, %u: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<4xi32>) {
  %w = graph.param "w" : tensor<8xf32>
  %s = graph.add %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = graph.tanh %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = graph.neg %u : (tensor<4xi32>) -> tensor<4xi32>
  func.return %y, %v : tensor<4x8xf32>, tensor<4xi32>
}"""
CW = np.linspace(-1, 1, 8, dtype=np.float32)


@pytest.fixture(scope="module")
def chunk_function():
    module = parse_module(CHUNK_SRC)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, "graph-to-te,te-to-loop").apply(
        Context(), module
    )
    f = cbuild.CFunction(module, name="bkrt6_chunk")
    f.bind_params({"w": CW})
    return f


@pytest.mark.parametrize("fast", [True, False], ids=["in-C", "in-Python"])
def test_batch_chunks_run_each_chunk_on_its_rows(chunk_function, fast):
    """A chunk of 4 rows, 3 chunks: the whole call's specs are 12 rows (params left out),
    each chunk's rows computed by the one-chunk program, in C (fastcall's repeat) or,
    without the extension, in Python over slices."""
    run = chunks.BatchChunks(chunk_function, 3)
    assert run.chunk == 4 and run.repeat == 3 and run.source == chunk_function.source
    assert run.in_specs == [((12, 8), np.dtype(np.float32)), ((12,), np.dtype(np.int32))]
    assert run.out_specs == [((12, 8), np.dtype(np.float32)), ((12,), np.dtype(np.int32))]
    assert (run._fast is not None) == (fastcall.extension() is not None)
    if not fast:
        run._fast = None
    x = np.linspace(-3, 3, 96, dtype=np.float32).reshape(12, 8)
    u = np.arange(12, dtype=np.int32) - 5
    y, v = run(x, u)
    np.testing.assert_allclose(y, np.tanh(x + CW), rtol=1e-6)
    np.testing.assert_array_equal(v, -u)
    assert y.shape == (12, 8) and y.dtype == np.float32 and v.dtype == np.int32
    y2, _ = run(x[::-1].copy(), u)  # outputs of their own each call
    assert y2 is not y
    np.testing.assert_allclose(y2, np.tanh(x[::-1] + CW), rtol=1e-6)
    np.testing.assert_allclose(y, np.tanh(x + CW), rtol=1e-6)


def test_batch_chunks_refuse_a_wrong_call_in_one_line(chunk_function):
    """The Python path (the one the C call hands what it refuses) names the culprit."""
    run = chunks.BatchChunks(chunk_function, 3)
    x = np.zeros((12, 8), np.float32)
    u = np.zeros(12, np.int32)
    with pytest.raises(DlpcError) as e:
        run(x)
    assert str(e.value) == "error: expected 2 inputs, got 1"
    with pytest.raises(DlpcError) as e:
        run(x, np.zeros(8, np.int32))
    assert str(e.value) == "error: input 1: expected int32 of shape [12], got int32 of shape [8]"
    with pytest.raises(DlpcError) as e:
        run(x.astype(np.float64), u)
    assert str(e.value) == (
        "error: input 0: expected float32 of shape [12, 8], got float64 of shape [12, 8]"
    )
    strided = (np.arange(24, dtype=np.int32) - 7)[::2]
    y, v = run(np.asfortranarray(x + 1), strided)  # (not C order: the Python path)
    np.testing.assert_allclose(y, np.tanh(x + 1 + CW), rtol=1e-6)
    np.testing.assert_array_equal(v, -strided)


# ------------------------------------------------------------ the extension's build


@pytest.fixture
def fresh_extension(monkeypatch, tmp_path):
    """`fastcall.extension()` decided again in an empty cache directory; decided again
    after the test in the real one."""
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    fastcall.extension.cache_clear()
    yield tmp_path
    fastcall.extension.cache_clear()


def _extension_files(root):
    return sorted(p.name for p in root.iterdir())


@pytest.mark.skipif(fastcall._build_command("x.so") is None, reason="no Python headers")
def test_the_extension_is_built_once_per_cache_directory_and_loaded_after(
    fresh_extension, monkeypatch
):
    root = fresh_extension
    ext = fastcall.extension()
    assert ext is not None and hasattr(ext, "Caller")
    (name,) = _extension_files(root)
    assert re.fullmatch(r"_dlpc_fastcall-[0-9a-f]{20}\.[-\w.]*so", name), name
    fastcall.extension.cache_clear()

    def no_compiler(*a, **k):
        raise AssertionError("built again")

    monkeypatch.setattr(fastcall.subprocess, "run", no_compiler)
    assert fastcall.extension() is not None  # loaded from the file, not built
    assert _extension_files(root) == [name]


def test_without_headers_or_with_a_failing_compiler_there_is_no_extension(
    fresh_extension, monkeypatch
):
    root = fresh_extension
    monkeypatch.setattr(fastcall, "_build_command", lambda out: None)
    assert fastcall.extension() is None
    assert fastcall.caller(0, 0, 0, 0, 0, [], [], None, print, None) is None
    assert _extension_files(root) == []  # (no temporary file left)
    fastcall.extension.cache_clear()
    monkeypatch.undo()
    monkeypatch.setenv("DLPC_CACHE_DIR", str(root))
    monkeypatch.setenv("CC", "false")  # a compiler that fails (and another key)
    assert fastcall.extension() is None
    assert _extension_files(root) == []


def test_a_damaged_extension_file_is_no_extension(fresh_extension, monkeypatch, tmp_path_factory):
    """The file named for this source, Python and compiler holds garbage: not loaded (in
    another directory: the built one stays mapped in this process)."""
    if fastcall._build_command("x.so") is None:
        pytest.skip("no Python headers")
    assert fastcall.extension() is not None
    (name,) = _extension_files(fresh_extension)
    other = tmp_path_factory.mktemp("damaged")
    (other / name).write_bytes(b"not a shared object")
    monkeypatch.setenv("DLPC_CACHE_DIR", str(other))
    fastcall.extension.cache_clear()
    assert fastcall.extension() is None
    assert _extension_files(other) == [name]


# --------------------------------------------------------- the warm-compile cache key


def test_artifact_key_sees_every_part_and_only_them(monkeypatch, tmp_path):
    from dlpc.backends.runtime import artifact

    w = {"w": np.ones(3, np.float32)}
    base = artifact.artifact_key("ir", w, "c", {"opt": 1, "b": [1, 2]})
    assert re.fullmatch(r"[0-9a-f]{24}", base)
    assert artifact.artifact_key("ir", w, "c", {"b": (1, 2), "opt": 1}) == base  # canonical
    for other in (
        artifact.artifact_key("ir2", w, "c", {"opt": 1, "b": [1, 2]}),
        artifact.artifact_key("ir", {"w": np.zeros(3, np.float32)}, "c", {"opt": 1, "b": [1, 2]}),
        artifact.artifact_key("ir", w, "opencl", {"opt": 1, "b": [1, 2]}),
        artifact.artifact_key("ir", w, "c", {"opt": 2, "b": [1, 2]}),
        artifact.artifact_key("ir", w, "c", {"opt": 1, "b": [2, 1]}),
    ):
        assert other != base
    # a named file counts by its content; the tuning machine only with a tuning log
    log = tmp_path / "log.jsonl"
    log.write_text("a\n")
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "m1")
    with_log = artifact.artifact_key("ir", w, "c", {"tuning_log": str(log)})
    without = artifact.artifact_key("ir", w, "c", {"tuning_log": None})
    log.write_text("b\n")
    assert artifact.artifact_key("ir", w, "c", {"tuning_log": str(log)}) != with_log
    log.write_text("a\n")
    assert artifact.artifact_key("ir", w, "c", {"tuning_log": str(log)}) == with_log
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "m2")
    assert artifact.artifact_key("ir", w, "c", {"tuning_log": str(log)}) != with_log
    assert artifact.artifact_key("ir", w, "c", {"tuning_log": None}) == without


def test_settings_text_is_canonical_json_with_file_digests(tmp_path):
    import hashlib
    import json

    from dlpc.backends.runtime import artifact

    f = tmp_path / "t.toml"
    f.write_bytes(b"x = 1\n")
    text = artifact._settings_text(
        {"z": (1, 2.5), "a": {"k": None, 3: True}, "f": str(f), "o": object, "s": "no-file"}
    )
    assert json.loads(text) == {
        "a": {"3": True, "k": None},
        "f": {"file": str(f), "sha256": hashlib.sha256(b"x = 1\n").hexdigest()},
        "o": repr(object),
        "s": "no-file",
        "z": [1, 2.5],
    }
    assert text == json.dumps(json.loads(text), sort_keys=True)


# ------------------------------------------------------------- names: Python literals


def test_py_literal_of_every_attribute_value():
    from dlpc.backends.names import py_literal
    from dlpc.dialects import symdims

    cases = [
        ((), "()"),
        ((1,), "(1,)"),
        ([1, 2], "(1, 2)"),
        ((1.5, (2,)), "(1.5, (2,))"),
        (float("inf"), "np.inf"),
        (float("-inf"), "-np.inf"),
        (float("nan"), "np.nan"),
        (True, "True"),
        (None, "None"),
        (-3, "-3"),
        ("a'b\u00e9", ascii("a'b\u00e9")),
        (b"x\n", ascii("x\n")),
    ]
    for value, text in cases:
        assert py_literal(value) == text
    dim = symdims.parse("2*seq")
    assert isinstance(dim, symdims.SymDim)
    assert py_literal(dim) == symdims.python_expr(dim) and "seq" in py_literal(dim)
    with pytest.raises(AssertionError, match="no Python literal for"):
        py_literal(object())


# ------------------------------------------------------------------ OpenCL: SVM arguments

SVM_SRC = """
func.func @main(%x: tensor<4x8xf32>, %u: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<4xi32>) {
  %w = graph.param "w" : tensor<8xf32>
  %s = graph.add %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = graph.tanh %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = graph.neg %u : (tensor<4xi32>) -> tensor<4xi32>
  func.return %y, %v : tensor<4x8xf32>, tensor<4xi32>
}"""


def test_svm_arguments_are_read_only_inputs_and_write_only_outputs(monkeypatch):
    """The fine-grained SVM arrays the device gets for @main's arguments: each input
    READ_ONLY, each output WRITE_ONLY (the param, in between, keeps its device buffer),
    on a device that has them (PoCL's); the call's answers through them."""
    cl = pytest.importorskip("pyopencl")
    import dlpc
    from dlpc.model import Model

    made: list[tuple[int, tuple, str]] = []
    svm_empty = cl.svm_empty

    def recording(ctx, flags, shape, dtype, **kw):
        made.append((int(flags), tuple(np.atleast_1d(shape)), np.dtype(dtype).name))
        return svm_empty(ctx, flags, shape, dtype, **kw)

    monkeypatch.setattr(cl, "svm_empty", recording)
    model = Model(parse_module(SVM_SRC), weights={"w": CW})
    compiled = dlpc.compile(model, target="opencl")
    if not compiled.artifact.svm_args:
        pytest.skip("the device has no fine-grained SVM")
    fine = int(cl.svm_mem_flags.SVM_FINE_GRAIN_BUFFER)
    read, write = int(cl.svm_mem_flags.READ_ONLY) | fine, int(cl.svm_mem_flags.WRITE_ONLY) | fine
    assert sorted(compiled.artifact.svm_args) == [0, 1, 3, 4]
    assert made[:4] == [
        (read, (4, 8), "float32"),
        (read, (4,), "int32"),
        (write, (4, 8), "float32"),
        (write, (4,), "int32"),
    ]
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    u = np.arange(4, dtype=np.int32) - 2
    y, v = compiled(x, u)
    np.testing.assert_allclose(y, np.tanh(x + CW), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(v, -u)


# --------------------------------------------------------- cbuild: a failed call's line

OOM_C = """
#include <stddef.h>
size_t dlpc_oom_count = 3, dlpc_oom_size = 1000;
const char *dlpc_oom_kernel = KERNEL;
int dlpc_main(void **args) { (void)args; return 1; }
"""


@pytest.mark.parametrize(
    "kernel,line",
    [
        ('"conv_3"', "error: out of memory: 3000 bytes for conv_3"),
        ("NULL", "error: {lib}: dlpc_main failed (status 1: out of memory)"),
        (None, "error: {lib}: dlpc_main failed (status 7: out of memory)"),
    ],
    ids=["recorded", "none-recorded", "no-prelude"],
)
def test_a_failed_call_names_the_allocation_it_recorded(kernel, line):
    """The status of dlpc_main as one line: the bytes and kernel of the failed allocation
    the generated code recorded (count x size), else the library and status."""
    if kernel is None:
        source = "int dlpc_main(void **args) { (void)args; return 7; }\n"
    else:
        source = OOM_C.replace("KERNEL", kernel)
    lib = cbuild.build(source, name=f"bkrt6_oom_{kernel is None}")
    x = np.zeros(1, np.float32)
    with pytest.raises(DlpcError) as e:
        lib.call([x])
    assert str(e.value) == line.format(lib=lib.path.name)
    argv = (ctypes.c_void_p * 1)(x.ctypes.data)
    with pytest.raises(DlpcError) as e:
        lib.call_argv(argv)
    assert str(e.value) == line.format(lib=lib.path.name)


# ----------------------------------------------------- OpenCL: a failed launch, buffers

TANH_SRC = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""


@pytest.mark.parametrize(
    "code,tail", [(-5, " (out of memory)"), (-4, " (out of memory)"), (-30, "")]
)
def test_a_failed_opencl_launch_is_one_line_naming_the_kernel(monkeypatch, code, tail):
    cl = pytest.importorskip("pyopencl")
    import dlpc
    from dlpc.model import Model

    compiled = dlpc.compile(Model(parse_module(TANH_SRC)), target="opencl")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_allclose(compiled(x)[0], np.tanh(x), rtol=1e-5, atol=1e-6)

    def failing(*args, **kwargs):
        raise cl.MemoryError(cl._cl._ErrorRecord("clEnqueueNDRangeKernel", code, "x"))

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", failing)
    with pytest.raises(DlpcError) as e:
        compiled(x)
    assert str(e.value) == (
        f"error: opencl: kernel 'tanh_0' failed: clEnqueueNDRangeKernel {code}{tail}"
    )


def test_an_empty_constant_gets_a_one_byte_buffer():
    """OpenCL has no zero-byte buffers: an empty array gets one unused byte; any other
    array a buffer of its bytes holding them."""
    cl = pytest.importorskip("pyopencl")
    import dlpc
    from dlpc.model import Model

    f = dlpc.compile(Model(parse_module(TANH_SRC)), target="opencl").artifact
    assert f._buffer(cl.mem_flags.READ_ONLY, np.zeros(0, np.float32)).size == 1
    values = np.arange(3, dtype=np.float32) + 0.5
    buffer = f._buffer(cl.mem_flags.READ_ONLY, values)
    assert buffer.size == 12
    back = np.empty(3, np.float32)
    cl.enqueue_copy(f.queue, back, buffer)
    f.queue.finish()
    np.testing.assert_array_equal(back, values)


# -------------------------------------------------------------- the runtimes' constants


def test_the_runtimes_documented_constants():
    """The figures docs/opencl.md and docs/c-backend.md give for the runtimes' choices
    (the tests of those choices read them by name, so a changed figure passed them)."""
    pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt as rt

    assert (rt.PARALLEL_SECONDS, rt.ESTIMATED_FLOPS, rt.ESTIMATED_LAUNCH) == (1e-3, 50e9, 1e-6)
    assert (rt.TEAM_SECONDS, rt.TEAM_MAX_SECONDS) == (60e-6, 2e-3)
    assert rt.TEAM_IMAGE_GROUPS == (16, 8, 4, 2, 1) and rt.TEAM_ARM_SPINS == 100_000
    assert rt.SVM_POOL == 4 and rt.OUT_OF_MEMORY == (-4, -5, -6)
    assert rt.CL_DEVICE_TYPE_GPU == 4 and rt.CL_QUEUE_THREAD_LOCAL_EXEC_ENABLE_INTEL == 2**31
    assert rt.PROFILES == ("cpu", "gpu")
    assert cbuild.PARALLEL_SOURCE_BYTES == 200_000
    assert cbuild.BASE_FLAGS == ("-O3", "-fPIC", "-shared", "-std=gnu11")


# ------------------------------------------------------------- OpenCL: a team's helper


def test_a_new_team_counts_ids_and_argument_versions(monkeypatch):
    """Team on stand-ins (its thread asleep until woken): every result kind counted from
    0, call ids from 1 wrapping past 2**63 - 1 to 1 (never 0, the idle word), argument
    versions wrapping at 2**31; `close` ends the thread."""
    pytest.importorskip("pyopencl")
    import types

    from dlpc.backends.opencl import TEAM_GO, TEAM_IDLE, TEAM_JOINED, TEAM_STALE, TEAM_VERSION
    from dlpc.backends.runtime import opencl_rt as rt

    def never(queue, kernel):
        raise AssertionError("launched while asleep")

    monkeypatch.setattr(rt, "_launch_one", never)
    sync = np.zeros(16, np.int64)
    kernel = types.SimpleNamespace(int_ptr=0, set_arg=lambda pos, arg: None)
    team = rt.Team(types.SimpleNamespace(int_ptr=0), kernel, sync, 5)
    try:
        assert team.launches == {TEAM_JOINED: 0, TEAM_IDLE: 0, TEAM_STALE: 0}
        assert (team.next_id, team.version, team.version_pos, team.avoided) == (1, 0, 5, -1)
        assert not team.armed and not team.stopped and team.error == 0 and team.pending == {}
        team.armed = True  # (so `start` does not wake it: the stand-in cannot launch)
        team.start()
        team.start()
        assert sync[TEAM_GO] == 2 and team.next_id == 3
        team.next_id = 2**63 - 1
        team.start()
        assert sync[TEAM_GO] == 2**63 - 1 and team.next_id == 1
        team.rebind(2, "a")
        team.rebind(3, "b")
        assert team.pending == {2: "a", 3: "b"} and team.version == sync[TEAM_VERSION] == 2
        team.version = 2**31 - 1
        team.rebind(2, "c")
        assert team.version == sync[TEAM_VERSION] == 0 and team.pending[2] == "c"
        assert team.thread.is_alive()
    finally:
        team.close()
    assert team.stopped and not team.thread.is_alive()


# ------------------------------------------------ cbuild: the packed block of a library

PACKED_C = """
#include <stddef.h>
#include <stdint.h>
const size_t dlpc_packed_bytes = 100;
const int dlpc_num_args = 2;
int dlpc_prepare(void **args) {
  const float *x = args[0];
  float *block = args[2];
  if ((uintptr_t)block % 64) return 9;
  for (int i = 0; i < 25; i++) block[i] = 2 * x[i];
  return 0;
}
int dlpc_main(void **args) {
  const float *block = args[2];
  float *y = args[1];
  if ((uintptr_t)block % 64) return 8;
  for (int i = 0; i < 25; i++) y[i] = block[i] + 1;
  return 0;
}
"""


def test_a_librarys_packed_block_is_aligned_and_packed_for_each_call():
    """`dlpc_prepare` fills the packed block (ALIGN-aligned, `dlpc_packed_bytes` long) from
    the arguments: `run` and `call_argv` on @main's arguments alone pack a fresh block
    first; on a vector with the block, `prepare` then `call_argv` use the caller's."""
    lib = cbuild.build(PACKED_C, name="bkrt6_packed")
    assert (lib.packed_bytes, lib.num_args) == (100, 2) and lib.prepare_entry is not None
    for _ in range(4):
        block = lib.packed_block()
        assert block.nbytes == 100 and block.ctypes.data % 64 == 0
    x = np.arange(25, dtype=np.float32)
    y = np.zeros(25, np.float32)
    assert lib.run([x, y]) == 0
    np.testing.assert_array_equal(y, 2 * x + 1)
    argv = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    x += 1
    lib.call_argv(argv)
    np.testing.assert_array_equal(y, 2 * x + 1)
    block = lib.packed_block()
    full = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data, block.ctypes.data)
    lib.prepare(full)
    np.testing.assert_array_equal(block.view(np.float32), 2 * x)
    x += 1  # (not packed again: the block holds the last prepare's)
    lib.call_argv(full)
    np.testing.assert_array_equal(y, 2 * (x - 1) + 1)
    y[:] = 0
    assert lib.run([x, y, block]) == 0  # (a block given: packed into it)
    np.testing.assert_array_equal(y, 2 * x + 1)


IF_SRC = """
func.func @main(%c: tensor<i1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = graph.if %c, %a : (tensor<i1>, tensor<4x8xf32>) -> (tensor<4x8xf32>) {
  ^bb0(%x: tensor<4x8xf32>):
    %0 = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    graph.yield %0 : tensor<4x8xf32>
  } else {
  ^bb0(%x: tensor<4x8xf32>):
    %0 = graph.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    graph.yield %0 : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}"""


def test_a_failed_host_step_is_one_line_naming_it(monkeypatch):
    """The host's read of graph.if's condition (a scalar copied off the device) failing
    is one line naming the step (it was an IndexError: the line named the step's
    kernel, which a host step has not); a failed launch inside a branch names its
    kernel."""
    cl = pytest.importorskip("pyopencl")
    import dlpc
    from dlpc.model import Model

    compiled = dlpc.compile(Model(parse_module(IF_SRC)), target="opencl")
    a = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(compiled(np.array(True), a)[0], np.maximum(a, 0))
    np.testing.assert_array_equal(compiled(np.array(False), a)[0], -a)
    copy = cl.enqueue_copy

    def failing_scalar_read(queue, dest, src, **kwargs):
        if isinstance(dest, np.ndarray) and dest.size == 1:
            raise cl.RuntimeError(cl._cl._ErrorRecord("clEnqueueReadBuffer", -5, "x"))
        return copy(queue, dest, src, **kwargs)

    monkeypatch.setattr(cl, "enqueue_copy", failing_scalar_read)
    with pytest.raises(DlpcError) as e:
        compiled(np.array(True), a)
    assert str(e.value) == (
        "error: opencl: the host's load failed: clEnqueueReadBuffer -5 (out of memory)"
    )
    monkeypatch.setattr(cl, "enqueue_copy", copy)

    def failing_launch(*args, **kwargs):
        raise cl.RuntimeError(cl._cl._ErrorRecord("clEnqueueNDRangeKernel", -52, "x"))

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", failing_launch)
    with pytest.raises(
        DlpcError, match=r"^error: opencl: kernel '\w+' failed: clEnqueueNDRangeKernel -52$"
    ):
        compiled(np.array(False), a)


# --------------------------------------------- seed 45's survivors (written after it)


def test_the_source_digest_reads_the_compilers_sources_only(monkeypatch, tmp_path):
    """source_digest (the warm-compile key's part for dlpc itself) over a stand-in package:
    every source file counts, by path and content; tests, benchmarks, examples, docs,
    caches, build output and hidden directories do not, nor do other suffixes (seed 45's
    artifact.py:64, `and` -> `or`: test/ and .git/ were read too)."""
    from dlpc.backends.runtime import artifact

    root = tmp_path / "pkg"
    for rel in ("api.py", "passes/a.py", "backends/runtime/fastcall.c", "targets/t.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    monkeypatch.setattr(artifact, "PACKAGE_ROOT", root)

    def digest() -> str:
        artifact.source_digest.cache_clear()
        return artifact.source_digest()

    try:
        base = digest()
        for rel in [f"{d}/x.py" for d in sorted(artifact.NOT_SOURCE)] + [
            ".git/hooks/x.py",
            ".venv/x.py",
            "passes/.hidden/x.py",
            "passes/notes.md",
            "passes/a.pyc",
        ]:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("ignored\n")
            assert digest() == base, rel
        for rel in ("passes/a.py", "backends/runtime/fastcall.c", "targets/t.toml"):
            old = (root / rel).read_text()
            (root / rel).write_text(old + "# edited\n")
            assert digest() != base, rel
            (root / rel).write_text(old)
            assert digest() == base
        (root / "passes/new.lark").write_text("start: x\n")
        assert digest() != base
    finally:
        monkeypatch.undo()
        artifact.source_digest.cache_clear()


def test_a_device_without_svm_capabilities_gets_device_buffers(monkeypatch):
    """A device that reports no SVM capabilities (OpenCL 1.x: the query raises) gets no
    SVM arguments: every input and output keeps its device buffer (seed 45's
    opencl_rt.py:1219, `fine = False` -> `True`)."""
    pytest.importorskip("pyopencl")
    import types

    import dlpc
    from dlpc.model import Model

    f = dlpc.compile(Model(parse_module(TANH_SRC)), target="opencl").artifact
    module = parse_module(TANH_SRC)

    class OldDevice:
        @property
        def svm_capabilities(self):
            raise AttributeError("svm_capabilities")

    monkeypatch.setattr(f, "ctx", types.SimpleNamespace(devices=[OldDevice()]))
    assert f._svm_arguments(module) == {}


# --------------------------------------------- seed 46's survivors (written after it)


def test_load_cached_returns_an_intact_library_only(tmp_path, monkeypatch):
    """The warm-compile cache's library lookup: an intact entry loads (no build), a
    missing one or one whose hash does not match is None (seed 46's cbuild.py:393)."""
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path))
    lib = cbuild.build(OOM_C.replace("KERNEL", "NULL"), name="bkrt6_cached")
    again = cbuild.load_cached(lib.path)
    assert again is not None and again.cached and again.path == lib.path
    assert cbuild.load_cached(tmp_path / "absent.so") is None
    cbuild.hash_path(lib.path).write_text("0" * 64 + "\n")
    assert cbuild.load_cached(lib.path) is None


def test_a_description_file_may_set_intrinsic_throughputs(tmp_path):
    """An `[intrinsics]` table read from TOML or JSON (keys the parser made, not the
    literal's object: seed 46's targets/dlp.py:137, `==` -> `is`)."""
    import json

    toml = tmp_path / "t.toml"
    toml.write_text('name = "t"\nclusters = 2\n\n[intrinsics]\nexp = 32\nmatmul = 512\n')
    data = {"name": "j", "intrinsics": {"exp": 8.0}}
    jpath = tmp_path / "t.json"
    jpath.write_text(json.dumps(data))
    for path, name, exp, matmul in ((toml, "t", 32.0, 512.0), (jpath, "j", 8.0, 256.0)):
        t = targets.DlpTarget.load(str(path))
        assert (t.name, t.throughput("exp"), t.throughput("matmul")) == (name, exp, matmul)
    assert targets.DlpTarget.load(str(toml)).clusters == 2


def test_format_profile_cuts_long_names_and_rounds_bandwidth_from_the_exact_rate():
    """A kernel's name is cut at 32 characters and its origin at 28 (seed 46's
    profile.py:153); GB/s is bytes / seconds, not its floor (at 5.0050000005 GB/s the
    floor would print 5.00: seed 46's profile.py:155)."""
    from dlpc.backends.runtime import profile

    row = profile.ProfileRow("k" * 40, "graph.fused(" + "o" * 40 + ")", 2.0, 0, 10_010_000_001)
    line = profile.format_profile([row]).splitlines()[1]
    assert line.startswith("k" * 32 + " " + ("graph.fused(" + "o" * 40)[:28] + " ")
    assert line.split()[-1] == "5.01" and line.split()[-2] == "10010000.0"


def test_svm_needs_fine_grained_buffers_not_other_capabilities(monkeypatch):
    """A device with coarse-grained and fine-grained system SVM but no fine-grained
    buffers gets no SVM arguments (seed 46's opencl_rt.py:1217, `&` -> `>>`)."""
    cl = pytest.importorskip("pyopencl")
    import types

    import dlpc
    from dlpc.model import Model

    f = dlpc.compile(Model(parse_module(TANH_SRC)), target="opencl").artifact
    caps = cl.device_svm_capabilities
    device = types.SimpleNamespace(
        svm_capabilities=int(caps.COARSE_GRAIN_BUFFER) | int(caps.FINE_GRAIN_SYSTEM)
    )
    monkeypatch.setattr(f, "ctx", types.SimpleNamespace(devices=[device]))
    assert f._svm_arguments(parse_module(TANH_SRC)) == {}


def test_parameters_are_uploaded_once_per_binding(tmp_path):
    """An OpenCL function's parameters are not on the device when it is built
    (`params_resident` False until a bound call uploads them; seed 47's
    opencl_rt.py:1187), stay there across bound calls, and are uploaded again after
    `bind_params` or a call with other `params=`."""
    pytest.importorskip("pyopencl")
    import dlpc
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction
    from dlpc.model import Model

    compiled = dlpc.compile(Model(parse_module(SVM_SRC), weights={"w": CW}), target="opencl")
    f = OpenCLFunction(compiled.lowered, name="bkrt6_resident")
    assert f.params_resident is False
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    u = np.arange(4, dtype=np.int32)
    f.bind_params({"w": CW})
    assert f.params_resident is False
    for _ in range(2):
        np.testing.assert_allclose(f(x, u)[0], np.tanh(x + CW), rtol=1e-5, atol=1e-6)
        assert f.params_resident is True
    other = -CW
    np.testing.assert_allclose(
        f(x, u, params={"w": other})[0], np.tanh(x + other), rtol=1e-5, atol=1e-6
    )
    assert f.params_resident is False
    np.testing.assert_allclose(f(x, u)[0], np.tanh(x + CW), rtol=1e-5, atol=1e-6)
