"""Tests of the compiled functions' runtime (issue 35, fourth round, area backend-runtime of
bench/mutation.py): the calling convention's checks and messages (callconv), the names and
escapers of generated source (backends/names.py), the DLP target description's checks and
derived facts (targets/dlp.py), the static kernel costs and the profile table (profile),
the warm-compile cache key's parts (artifact), the C build's error line, hash check and
status message (cbuild), and the OpenCL runtime's pure decisions (opencl_rt: work-group
sizes, size classes, launch profiles, reshape aliases, kernel runs)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes

from dlpc.backends import names
from dlpc.backends.c import find_main
from dlpc.backends.runtime import artifact, cbuild, opencl_rt, profile
from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module
from dlpc.targets.dlp import DlpTarget, resolve
from dlpc.universe import PASSES


def lower(src: str, spec: str = "graph-to-te,te-to-loop"):
    module = parse_module(src)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    return module


TWO_IN = """
func.func @main(%x: tensor<2x3xf32>, %n: tensor<3xi32>) -> tensor<2x3xf32> {
  %w = graph.param "w" : tensor<3xf32>
  %b = graph.param "b" : tensor<2x3xf32>
  %s = graph.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %y = graph.add %s, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}"""


# ----------------------------------------------------------------------------- callconv


@pytest.fixture(scope="module")
def fn():
    f = ModuleFunction()
    f.bind_signature(find_main(lower(TWO_IN)))
    return f


def test_signature_read_from_main(fn):
    assert (fn.num_inputs, fn.param_names, fn.num_outputs) == (2, ["w", "b"], 1)
    assert fn.arg_specs == [
        ((2, 3), np.dtype(np.float32)),
        ((3,), np.dtype(np.int32)),
        ((3,), np.dtype(np.float32)),
        ((2, 3), np.dtype(np.float32)),
        ((2, 3), np.dtype(np.float32)),
    ]
    again = ModuleFunction()
    again.set_signature(fn.signature())
    assert again.signature() == fn.signature()
    assert (again.num_inputs, again.param_names, again.arg_specs) == (
        2,
        ["w", "b"],
        fn.arg_specs,
    )
    outs = fn.empty_outputs()
    assert [(o.shape, o.dtype) for o in outs] == [((2, 3), np.float32)]


@pytest.mark.parametrize(
    "inputs,params,message",
    [
        ([np.zeros((2, 3))], {}, "error: expected 2 inputs, got 1"),
        (
            [np.zeros((2, 3)), np.zeros(3)],
            {"w": np.zeros(3)},
            "error: missing value for parameter 'b'",
        ),
        ([np.zeros((2, 3)), np.zeros(3)], [np.zeros(3)], "error: expected 2 parameters, got 1"),
        (
            [np.zeros((3, 2)), np.zeros(3)],
            [np.zeros(3), np.zeros((2, 3))],
            "error: input 0 has shape (3, 2), expected (2, 3)",
        ),
        (
            [np.zeros((2, 3)), np.zeros(3)],
            [np.zeros(4), np.zeros((2, 3))],
            "error: parameter 'w' has shape (4,), expected (3,)",
        ),
    ],
    ids=["inputs", "missing", "count", "input_shape", "param_shape"],
)
def test_argument_errors(fn, inputs, params, message):
    with pytest.raises(DlpcError) as e:
        fn.arguments(inputs, params)
    assert str(e.value) == message


def test_arguments_convert_and_keep(fn):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    n = [1, 2, 3]  # a list: converted to int32
    w = np.ones(3, np.float32)
    b = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))  # F order, f64
    got = fn.arguments([x, n], {"b": b, "w": w})
    assert got[0] is x and got[2] is w  # as they are: no copy
    assert got[1].dtype == np.int32 and got[1].tolist() == [1, 2, 3]
    assert got[3].dtype == np.float32 and got[3].flags.c_contiguous
    np.testing.assert_array_equal(got[3], b)
    bound = ModuleFunction()
    bound.set_signature(fn.signature())
    bound.bind_params([w, b])
    again = bound.arguments([x, n], None)
    assert len(again) == 4 and again[2] is bound.bound_params[0]  # type: ignore[index]


# -------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "text,kind,want",
    [
        ("fc1.weight", "v", "v_fc1_weight"),
        ("NULL", "v", "v_NULL"),
        ("relu_0", "kernel", "kernel_relu_0"),
        ("ﬁ", "v", "v_uFB01"),
        ("a..b__c", "v", "v_a_b_c"),
        ("_x_", "const", "const_x"),
        ("", "v", "v_"),
        (b"bytes\xff", "g", "g_bytes_xff"),  # undecodable: backslashreplace, spelled
        ("é", "task", "task_u00E9"),
    ],
)
def test_identifier(text, kind, want):
    got = names.identifier(text, kind)
    assert got == want


def test_identifier_is_cut_and_kinds_are_closed():
    long = "a" * 100
    assert names.identifier(long) == "v_" + "a" * names.MAX_LENGTH
    assert names.identifier("a" * 47 + ".b") == "v_" + "a" * 47  # the cut leaves no `_`
    with pytest.raises(AssertionError):
        names.identifier("x", "w")


def test_scope_makes_names_unique():
    s = names.Scope({"v_x"})
    assert s.fresh("x") == "v_x_2"
    assert s.fresh("x") == "v_x_3"
    assert s.fresh("a.b") == "v_a_b" and s.fresh("a_b") == "v_a_b_2"
    assert s.fresh(None) == "v_0" and s.fresh("") == "v_1"
    assert s.fresh(None, "tmp") == "v_tmp"
    assert s.fresh("k", kind="kernel") == "kernel_k"
    inner = names.Scope(s.used)
    assert inner.fresh("x") == "v_x_4"


@pytest.mark.parametrize(
    "text,want",
    [
        ('say "hi"?', '"say \\"hi\\"\\?"'),
        ("back\\slash", '"back\\\\slash"'),
        ("new\nline\t", '"new\\012line\\011"'),
        ("é", '"\\303\\251"'),
        ("~ del\x7f", '"~ del\\177"'),
    ],
)
def test_c_string(text, want):
    assert names.c_string(text) == want


def test_comments_cannot_end_early():
    assert names.c_comment("a */ b /* c ?? d\n") == "/* a *\\/ b /\\* c ?\\? d\\n */"
    assert names.c_comment("é") == "/* \\xe9 */"
    assert names.py_comment("x\ny é") == "# x\\ny \\xe9"


@pytest.mark.parametrize(
    "value,want",
    [
        ((1,), "(1,)"),
        ([1, 2.5], "(1, 2.5)"),
        (float("nan"), "np.nan"),
        (float("inf"), "np.inf"),
        (float("-inf"), "-np.inf"),
        (True, "True"),
        (None, "None"),
        ("é'", '"\\xe9\'"'),
        (b"ab", "'ab'"),
        ((), "()"),
    ],
)
def test_py_literal(value, want):
    assert names.py_literal(value) == want


def test_py_literal_refuses_other_values():
    with pytest.raises(AssertionError):
        names.py_literal(object())


# ----------------------------------------------------------------------------- targets


def test_default_target_facts():
    t = DlpTarget()
    assert t.cores == 16
    assert (t.capacity("nram"), t.capacity("wram"), t.capacity("sram")) == (
        512 * 1024,
        1024 * 1024,
        2 * 1024 * 1024,
    )
    assert t.has_intrinsic("matmul") and not t.has_intrinsic("gelu")
    assert t.throughput("div") == 16
    assert t.intrinsic_cycles("add", 65) == 2 and t.intrinsic_cycles("add", 64) == 1
    assert t.peak_ops_per_second() == 2 * 256 * 16 * 1e9
    assert t.to_dict()["intrinsics"]["exp"] == 16
    with pytest.raises(DlpcError) as e:
        t.capacity("gdram")
    assert str(e.value) == "error: memory space 'gdram' has no fixed capacity"
    with pytest.raises(DlpcError) as e:
        t.throughput("gelu")
    assert str(e.value) == "error: target 'dlp-default' has no intrinsic 'gelu'"


def test_from_dict_overrides_one_intrinsic_and_keeps_the_others():
    t = DlpTarget.from_dict({"name": "t", "clusters": 2, "intrinsics": {"add": 32}})
    assert (t.name, t.clusters, t.cores, t.throughput("add"), t.throughput("mul")) == (
        "t",
        2,
        8,
        32.0,
        64,
    )


@pytest.mark.parametrize(
    "data,message",
    [
        ({"clustrs": 2}, "d: error: unknown target field 'clustrs'"),
        ({"intrinsics": 3}, "d: error: 'intrinsics' must be a table name -> throughput"),
        ({"intrinsics": {"ad": 3}}, "d: error: unknown intrinsic 'ad'; did you mean 'add'?"),
        ({"intrinsics": {"zzz": 3}}, "d: error: unknown intrinsic 'zzz'"),
        (
            {"intrinsics": {"add": 0}},
            "d: error: intrinsic 'add' must be a finite number in [0.001, 1e+09], got 0",
        ),
        (
            {"clusters": 0},
            "d: error: 'clusters' must be a positive integer at most 64, got 0",
        ),
        (
            {"clusters": 65},
            "d: error: 'clusters' must be a positive integer at most 64, got 65",
        ),
        (
            {"clusters": True},
            "d: error: 'clusters' must be a positive integer at most 64, got True",
        ),
        (
            {"clock_ghz": float("inf")},
            "d: error: 'clock_ghz' must be a finite number in [0.001, 1000], got inf",
        ),
        ({"name": 3}, "d: error: 'name' must be a string of at most 200 characters"),
        ({"name": "x" * 201}, "d: error: 'name' must be a string of at most 200 characters"),
        (
            {"clusters": 64, "cores_per_cluster": 5},
            "d: error: 320 cores (clusters x cores_per_cluster) > 256",
        ),
        ({"dma_align": 48}, "d: error: 'dma_align' must be a power of two, got 48"),
        ({"vector_align": 3}, "d: error: 'vector_align' must be a power of two, got 3"),
    ],
)
def test_from_dict_refuses(data, message):
    with pytest.raises(DlpcError) as e:
        DlpTarget.from_dict(data, origin="d")
    assert str(e.value) == message


def test_from_dict_bounds_are_inclusive():
    t = DlpTarget.from_dict(
        {"clusters": 64, "cores_per_cluster": 4, "dma_align": 4096, "clock_ghz": 1e-3}
    )
    assert t.cores == 256
    assert DlpTarget.from_dict({"name": "x" * 200}).name == "x" * 200


def test_a_description_without_matmul_is_refused():
    with pytest.raises(DlpcError) as e:
        DlpTarget(intrinsics=(("add", 64.0),))
    assert str(e.value) == "target description: error: intrinsic set lacks 'matmul'"


def test_resolve_and_load(tmp_path):
    assert resolve(None) == DlpTarget() and resolve("") == DlpTarget()
    t = DlpTarget(name="mine")
    assert resolve(t) is t
    assert resolve("tiny").name == "tiny"
    path = tmp_path / "d.json"
    path.write_text('{"name": "j", "cores_per_cluster": 2}')
    assert resolve(str(path)).cores == 8
    bad = tmp_path / "bad.toml"
    bad.write_text("name = ")
    with pytest.raises(DlpcError) as e:
        resolve(str(bad))
    assert str(e.value).startswith(f"{bad}: error: cannot read target description: ")
    with pytest.raises(DlpcError) as e:
        resolve(str(tmp_path / "none.toml"))
    assert str(e.value) == f"error: no such target description: {tmp_path / 'none.toml'}"


# ------------------------------------------------------------------------------ profile

COSTS = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %m = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %r = graph.relu %m : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %t = graph.tanh %r : (tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %t : tensor<4x3xf32>
}"""


def test_kernel_costs_count_flops_and_bytes():
    costs = profile.kernel_costs(lower(COSTS))
    assert [(c.name, c.origin) for c in costs] == [
        ("matmul_0", "graph.matmul"),
        ("relu_1", "graph.relu"),
        ("tanh_2", "graph.tanh"),
    ]
    mm, relu, tanh = costs
    assert mm.flops == 4 * 3 * 8 * 2  # a mul and an add per MAC
    assert mm.bytes == 4 * (32 + 24 + 12)
    assert relu.bytes == 4 * (12 + 12)
    assert tanh.flops == 12  # one math op per element


def test_format_profile_orders_and_totals():
    rows = [
        profile.ProfileRow("a", "graph.add", 1e-6, 2000, 4000),
        profile.ProfileRow("b", "graph.matmul", 3e-6, 6000, 8000),
    ]
    lines = profile.format_profile(rows, call_seconds=8e-6).splitlines()
    assert lines[1].split()[:4] == ["b", "graph.matmul", "3.00", "75.0%"]
    assert lines[2].split()[:4] == ["a", "graph.add", "1.00", "25.0%"]
    assert lines[1].split()[4:] == ["2.00", "0.006", "8.0", "2.67"]
    assert lines[3].split() == ["total", "(2", "kernels)", "4.00", "100.0%", "2.00", "0.008"]
    assert lines[4] == (
        "whole call 8.00 us (median): kernels 50%, the rest is the Python call, "
        "allocation and timers"
    )
    assert len(profile.format_profile(rows).splitlines()) == 4


# ----------------------------------------------------------------------------- artifact


def test_weights_digest_sees_every_part():
    a = {"w": np.zeros((2, 3), np.float32)}
    base = artifact.weights_digest(a)
    assert artifact.weights_digest({"w": np.zeros((2, 3), np.float32)}) == base
    assert artifact.weights_digest({"v": np.zeros((2, 3), np.float32)}) != base
    assert artifact.weights_digest({"w": np.zeros((3, 2), np.float32)}) != base
    assert artifact.weights_digest({"w": np.zeros((2, 3), np.float64)}) != base
    one = np.zeros((2, 3), np.float32)
    one[1, 2] = 1
    assert artifact.weights_digest({"w": one}) != base
    empty = artifact.weights_digest({"e": np.zeros((0,), np.float32)})
    assert len(empty) == 64
    assert artifact.weights_digest({"a": one, "w": one}) == artifact.weights_digest(
        {"w": one, "a": one}
    )


def test_settings_text_is_canonical_and_reads_named_files(tmp_path):
    path = tmp_path / "log.json"
    path.write_text("one")
    text = artifact._settings_text({"b": [1, (2, None)], "a": {"z": 1.5, "y": str(path)}})
    digest = "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed"
    assert text == (
        '{"a": {"y": {"file": "' + str(path) + '", "sha256": "' + digest + '"}, "z": 1.5}, '
        '"b": [1, [2, null]]}'
    )
    path.write_text("two")
    assert artifact._settings_text({"a": {"y": str(path)}}) != text
    assert artifact._settings_text({"x": object}) == json.dumps({"x": repr(object)})


def test_artifact_key_depends_on_each_part():
    w = {"w": np.ones(2, np.float32)}
    key = artifact.artifact_key("ir", w, "c", {"opt": 2})
    assert len(key) == 24
    assert artifact.artifact_key("ir", w, "c", {"opt": 2}) == key
    others = [
        artifact.artifact_key("ir2", w, "c", {"opt": 2}),
        artifact.artifact_key("ir", {"w": np.zeros(2, np.float32)}, "c", {"opt": 2}),
        artifact.artifact_key("ir", w, "opencl", {"opt": 2}),
        artifact.artifact_key("ir", w, "c", {"opt": 3}),
    ]
    assert key not in others and len(set(others)) == 4


def test_entry_path_spells_the_name(monkeypatch, tmp_path):
    monkeypatch.setattr(cbuild, "cache_dir", lambda: tmp_path)
    assert artifact.entry_path("k1", "my model/v2") == tmp_path / "my_model_v2-k1.model.npz"
    assert artifact.entry_path("k1", "") == tmp_path / "module-k1.model.npz"
    assert artifact.entry_path("k", "x" * 50).name == "x" * 40 + "-k.model.npz"


# ------------------------------------------------------------------------------- cbuild


def test_compile_error_names_the_kernel(tmp_path):
    source = 'int x;\n/* kernel "relu_0" */\nvoid f() {\n  y = 1;\n}\n'
    stderr = "warning: w\nm.c:4:3: error: 'y' undeclared\nnote: n\n"
    got = cbuild.compile_error(stderr, source, tmp_path / "m.c")
    assert (
        got == f"{tmp_path / 'm.c'}:4: error: C compiler failed in kernel 'relu_0': 'y' undeclared"
    )
    main = "int dlpc_main(void **args) {\n  z;\n}\n"
    got = cbuild.compile_error("m.c:2: fatal error: z\n", main, tmp_path / "m.c")
    assert got == f"{tmp_path / 'm.c'}:2: error: C compiler failed in dlpc_main: z"
    got = cbuild.compile_error("ld: cannot find -lfoo\ncollect2: bad\n", "", tmp_path / "m.c")
    assert got == f"{tmp_path / 'm.c'}: error: C compiler failed: collect2: bad"
    got = cbuild.compile_error("", "", tmp_path / "m.c")
    assert got == f"{tmp_path / 'm.c'}: error: C compiler failed: unknown compiler failure"


def test_check_entry_reasons(tmp_path):
    lib = tmp_path / "a.so"
    lib.write_bytes(b"abc")
    assert cbuild.check_entry(lib) == "its hash file is missing"
    cbuild.hash_path(lib).write_text(cbuild.file_digest(lib) + "\n")
    assert cbuild.hash_path(lib).name == "a.so.sha256"
    assert cbuild.check_entry(lib) is None
    lib.write_bytes(b"abd")
    assert cbuild.check_entry(lib) == "its content does not match its hash"
    assert cbuild.load_cached(lib) is None
    assert cbuild.load_cached(tmp_path / "none.so") is None


@pytest.mark.parametrize("env,want", [("", 5), ("3", 3), ("2,4", 2), ("0", 5), ("x", 5)])
def test_omp_threads(monkeypatch, env, want):
    monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert cbuild.omp_threads(5) == want


def test_a_compiled_function_runs_and_reports_bad_calls():
    module = lower(COSTS)
    f = cbuild.CFunction(module, name="backendrt4")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(1, -1, 24, dtype=np.float32).reshape(8, 3)
    (got,) = f(x, w)
    np.testing.assert_allclose(got, np.tanh(np.maximum(x @ w, 0)), rtol=1e-5, atol=1e-6)
    assert f.library.failure(3).endswith("dlpc_main failed (status 3: out of memory)")
    with pytest.raises(DlpcError) as e:
        f(x)
    assert str(e.value) == "error: expected 2 inputs, got 1"


# ---------------------------------------------------------------------------- opencl_rt


@pytest.mark.parametrize(
    "size,units,want",
    [
        ((8,), 2, (2,)),  # 4 groups of 2
        ((3,), 2, (1,)),  # fewer items than groups wanted: one each
        ((6, 10), 2, (1, 10)),  # the outer dim split first, by its smallest divisor >= 4
        ((1, 16), 1, (1, 8)),
        ((4, 4), 0, (2, 4)),  # at least one unit
        ((5, 7), 2, (1, 7)),
    ],
)
def test_cpu_local_size(size, units, want):
    got = opencl_rt.cpu_local_size(size, units)
    groups = math.prod(g // lcl for g, lcl in zip(size, got))
    assert all(g % lcl == 0 for g, lcl in zip(size, got))
    assert groups >= min(2 * max(units, 1), math.prod(size))
    assert got == want


@pytest.mark.parametrize(
    "nbytes,want",
    [(0, 1), (1, 1), (2, 2), (3, 4), (4096, 4096), (4097, 8192), (8192, 8192), (8193, 12288)],
)
def test_size_class(nbytes, want):
    assert opencl_rt._size_class(nbytes) == want


def test_estimate_seconds():
    costs = [profile.KernelCost("a", "", 50_000, 0), profile.KernelCost("b", "", 0, 0)]
    assert opencl_rt.estimate_seconds(costs) == pytest.approx(1e-6 + 1e-6 + 1e-6)
    assert opencl_rt.estimate_seconds([]) == 0


def test_launch_profile_choice_and_errors(monkeypatch):
    monkeypatch.delenv("DLPC_OPENCL_PROFILE", raising=False)
    assert opencl_rt.launch_profile("gpu", device=object()) == "gpu"
    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "cpu")
    assert opencl_rt.launch_profile(None, device=object()) == "cpu"
    assert opencl_rt.launch_profile("gpu", device=object()) == "gpu"
    with pytest.raises(DlpcError) as e:
        opencl_rt.launch_profile("tpu")
    assert str(e.value) == "error: opencl: profile='tpu' is no launch profile (cpu or gpu)"
    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "npu")
    with pytest.raises(DlpcError) as e:
        opencl_rt.launch_profile(None)
    assert (
        str(e.value) == "error: opencl: DLPC_OPENCL_PROFILE='npu' is no launch profile (cpu or gpu)"
    )


RESHAPES = """
func.func @main(%x: tensor<2x6xf32>) -> (tensor<3x4xf32>, tensor<12xf32>) {
  %e = graph.exp %x : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %r = graph.reshape %e {shape = array<i64: 3, 4>} : (tensor<2x6xf32>) -> tensor<3x4xf32>
  %n = graph.neg %r : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %f = graph.reshape %x {shape = array<i64: 12>} : (tensor<2x6xf32>) -> tensor<12xf32>
  func.return %n, %f : tensor<3x4xf32>, tensor<12xf32>
}"""


def test_reshape_aliases_and_kernel_runs():
    fn = find_main(lower(RESHAPES))
    aliases = opencl_rt.reshape_aliases(fn)
    # the reshape into an intermediate is an alias; the one into an output is not
    assert [k.sym for k in aliases] == ["reshape_1"]
    runs = opencl_rt.kernel_runs(fn, aliases)
    assert [[k.sym for k in run] for run in runs] == [["exp_0", "neg_2", "reshape_3"]]
    assert opencl_rt.kernel_runs(fn, {}) == [
        [k for k in fn.body.block.ops if k.name == "loop.kernel"]
    ]


# --------------------------------------- survivors of backend-runtime --seed 42 (7ce5bc6)


def test_toolchain_identity_stamps_the_resolved_compiler():
    """The cache key sees the compiler binary itself (a new gcc at the same path is
    another key): its real path, size and modification time follow the command."""
    import os
    import shutil

    cmd = cbuild.compiler()
    identity = artifact.toolchain_identity()
    assert identity[: len(cmd)] == cmd
    real = os.path.realpath(shutil.which(cmd[0]) or "")
    st = os.stat(real)
    assert identity[len(cmd)] == f"{real}:{st.st_size}:{st.st_mtime_ns}"


def test_team_argument_version_counts_up_and_wraps_within_int32():
    """The helper's argument version is a kernel argument (an int): each rebind counts it
    up by one, 2^31 - 1 wraps to 0 (never past int32), and sync[TEAM_VERSION] follows."""
    import threading

    from dlpc.backends.opencl import TEAM_VERSION

    team = opencl_rt.Team.__new__(opencl_rt.Team)  # (no thread: rebind only)
    team.lock, team.pending, team.version = threading.Lock(), {}, 0
    team.sync = np.zeros(8, np.int64)
    team.rebind(3, "a")
    assert (team.version, int(team.sync[TEAM_VERSION]), team.pending) == (1, 1, {3: "a"})
    team.version = 0x7FFFFFFF
    team.rebind(3, "b")
    assert (team.version, int(team.sync[TEAM_VERSION]), team.pending) == (0, 0, {3: "b"})


def test_has_gpu_reads_the_gpu_bit_of_each_device_type():
    class Device:
        def __init__(self, t):
            self.type = t

    class Platform:
        def __init__(self, *types):
            self.types = types

        def get_devices(self):
            return [Device(t) for t in self.types]

    assert opencl_rt.CL_DEVICE_TYPE_GPU == 4
    assert opencl_rt._has_gpu(Platform(2, 4))  # a CPU and a GPU
    assert not opencl_rt._has_gpu(Platform(2 | 1))  # a CPU that is the default device
    assert not opencl_rt._has_gpu(Platform())


def test_team_wait_idle():
    import threading

    team = opencl_rt.Team.__new__(opencl_rt.Team)  # (no thread)
    team.armed, team.stopped, team.error, team.wake = False, False, 0, threading.Event()
    assert team.wait_idle() is True
    team.armed = True  # a launch spinning: not idle within the timeout
    assert team.wait_idle(timeout=0.001) is False
    team.error = -5  # a helper that failed spins no more
    assert team.wait_idle() is True


def test_icd_vendors_writes_the_wheels_drivers_once(monkeypatch, tmp_path):
    """A wheel's driver gets an .icd file in a directory of dlpc's, which
    $OCL_ICD_VENDORS then names; a second call rewrites nothing."""
    monkeypatch.setenv("OCL_ICD_VENDORS", "")  # (restored to what it was after the test)
    monkeypatch.delenv("OCL_ICD_VENDORS")
    monkeypatch.setattr(opencl_rt, "_VENDORS", None)
    monkeypatch.setattr(opencl_rt, "_wheel_icds", lambda: [tmp_path / "libpocl.so"])
    monkeypatch.setattr(opencl_rt, "SYSTEM_VENDORS", tmp_path / "no-vendors")
    monkeypatch.setattr(opencl_rt.tempfile, "gettempdir", lambda: str(tmp_path))
    opencl_rt._icd_vendors()
    directory = tmp_path / f"dlpc-opencl-vendors-{__import__('os').getuid()}"
    assert opencl_rt.os.environ["OCL_ICD_VENDORS"] == str(directory)
    icd = directory / "dlpc-wheel-0.icd"
    assert icd.read_text() == f"{tmp_path / 'libpocl.so'}\n"
    stamp = icd.stat().st_mtime_ns
    monkeypatch.delenv("OCL_ICD_VENDORS")
    monkeypatch.setattr(opencl_rt, "_VENDORS", None)
    opencl_rt._icd_vendors()
    assert icd.stat().st_mtime_ns == stamp and [p.name for p in directory.iterdir()] == [
        "dlpc-wheel-0.icd"
    ]


def test_opencl_kernels_without_a_local_size_get_cpu_work_groups():
    """On a CPU device (type CL_DEVICE_TYPE_CPU alone, as PoCL's are) a launch whose
    plan sets no work-group size gets `cpu_local_size`'s (opencl_rt.py:1086)."""
    device = opencl_rt.default_device()
    if not int(device.type) & 2:
        pytest.skip("the default OpenCL device is no CPU")
    f = opencl_rt.OpenCLFunction(lower(COSTS), name="backendrt4", device=device)
    steps = [s for s in f.kernel_steps if s[0] == "kernel"]
    planned = {op.sym: f.plan.launches[op].local_size for op in f.kernel_ops}
    assert None in planned.values()
    for _kind, _kernel, global_size, local, sym in steps:
        want = planned[sym] or opencl_rt.cpu_local_size(global_size, device.max_compute_units)
        assert local == want
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(1, -1, 24, dtype=np.float32).reshape(8, 3)
    np.testing.assert_allclose(f(x, w)[0], np.tanh(np.maximum(x @ w, 0)), rtol=1e-5, atol=1e-6)


def test_a_team_helper_has_the_second_device_and_its_version_argument_last(monkeypatch):
    """The helper's queue is the second device's (opencl_rt.py:1052), and the argument
    the helper's kernel reads its version from is its last (`n + 3`, opencl_rt.py:1399)."""
    pytest.importorskip("pyopencl")
    from test_opencl_team import _module

    monkeypatch.setenv("DLPC_OPENCL_TEAM", "1")
    team = opencl_rt.team_devices()
    if team is None:
        pytest.skip("the OpenCL platform has no two serial CPU devices (PoCL basic)")
    f = opencl_rt.OpenCLFunction(_module(copy=False), name="team4", team=team)
    assert f.team is not None
    try:
        assert f.queue.device == team[0] and f.team.queue.device == team[1]
        cl = opencl_rt._cl()
        assert f.team.version_pos == f.team.kernel.get_info(cl.kernel_info.NUM_ARGS) - 1
        x = np.linspace(-3, 3, 64, dtype=np.float32)
        np.testing.assert_array_equal(f(x)[0], 4 * x)
    finally:
        f.team.stop()
