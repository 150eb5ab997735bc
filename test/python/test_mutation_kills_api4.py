"""Tests of the public API's and the drivers' decisions no other fast test pins (issue 35,
bench/mutation.py --area api): load's formats and its diagnostics, the input checks,
compile's option checks, random inputs, the settings, and the pipeline's pass table.
Small models, in-process; numpy target unless a test needs C."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc import settings as S
from dlpc.diagnostics import DlpcError

GATHER = """
func.func @main(%t: tensor<5x3xf32>, %i: tensor<4xi64>, %b: tensor<2xi1>, %h: tensor<2xf64>)
    -> tensor<4x3xf32> {
  %w = graph.param "w" : tensor<5x3xf32>
  %s = graph.add %t, %w : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %g = graph.gather %s, %i {axis = 0 : i64} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  func.return %g : tensor<4x3xf32>
}
"""

ADD = """
func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %w = graph.param "w" : tensor<2x3xf32>
  %s = graph.add %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = graph.mul %s, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %t : tensor<2x3xf32>
}
"""


@pytest.fixture
def add(tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    return path


# ---- load -------------------------------------------------------------------------------


def test_load_reads_weights_beside_an_mlir_model_unless_given(add, tmp_path):
    w = np.full((2, 3), 2.0, np.float32)
    np.savez(add.with_suffix(".npz"), w=w)
    model = dlpc.load(add)
    assert model.name == "add" and model.path == str(add)
    np.testing.assert_array_equal(model.weights["w"], w)
    other = tmp_path / "other.npz"
    np.savez(other, w=3 * w)
    np.testing.assert_array_equal(dlpc.load(add, weights=other).weights["w"], 3 * w)
    np.testing.assert_array_equal(dlpc.load(add, weights={"w": w + 1}).weights["w"], w + 1)


def test_load_by_format_and_its_diagnostics(add, tmp_path):
    renamed = tmp_path / "model.txt"
    renamed.write_text(ADD)
    assert api.load(renamed, format="mlir").name == "model"
    upper = tmp_path / "m.MLIR"
    upper.write_text(ADD)
    assert dlpc.load(upper).param_names == ["w"]
    with pytest.raises(DlpcError, match=r"^error: unknown model format '\.txt' \(expected"):
        dlpc.load(renamed)
    bare = tmp_path / "README"
    bare.write_text("")
    with pytest.raises(DlpcError, match=r"^error: unknown model format 'README'"):
        dlpc.load(bare)
    with pytest.raises(DlpcError, match=r"^error: no such file: .*nope\.mlir$"):
        dlpc.load(tmp_path / "nope.mlir")


def test_weights_files_that_are_not_named_arrays(tmp_path):
    with pytest.raises(DlpcError, match=r"^error: no such weights file: .*w\.npz$"):
        api.load_weights(tmp_path / "w.npz")
    npy = tmp_path / "w.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(DlpcError, match=r"must be an \.npz archive of named arrays"):
        api.load_weights(npy)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DlpcError, match=r"^error: cannot read weights .*bad\.npz: "):
        api.load_weights(bad)
    good = tmp_path / "good.npz"
    np.savez(good, a=np.arange(3), b=np.ones(2))
    got = api.load_weights(good)
    assert sorted(got) == ["a", "b"] and got["a"].tolist() == [0, 1, 2]


def test_a_missing_or_misshapen_weight_is_one_line(add):
    model = dlpc.load(add, weights={})
    with pytest.raises(DlpcError, match=r"^error: no value for weight 'w' \(graph\.param in add\)"):
        api.check_weights(model)
    model = dlpc.load(add, weights={"w": np.ones((3, 2), np.float32)})
    with pytest.raises(DlpcError):
        api.check_weights(model)


# ---- calls and their checks -------------------------------------------------------------------


def test_calls_check_count_shape_and_dtype(add):
    c = dlpc.compile(dlpc.load(add, weights={"w": np.full((2, 3), 2, np.float32)}), target="numpy")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(c(x, x)[0], np.full((2, 3), 4.0))
    out = c(np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)), x)
    assert type(out) is list and type(out[0]) is np.ndarray
    np.testing.assert_array_equal(out[0], 2 * (np.arange(6).reshape(2, 3) + 1))
    with pytest.raises(DlpcError, match="2 inputs"):
        c(x)
    with pytest.raises(DlpcError, match=r"shape"):
        c(x, np.ones((3, 2), np.float32))
    with pytest.raises(DlpcError, match=r"f(loat)?64|dtype"):
        c(x, np.ones((2, 3), np.float64))
    np.testing.assert_array_equal(c(x, x)[0], np.full((2, 3), 4.0))  # after a refusal


def test_check_against_names_each_mismatch():
    specs = [((2,), np.dtype(np.float32)), ((3,), np.dtype(np.int64))]
    a, b = np.zeros(2, np.float32), np.zeros(3, np.int64)
    assert api._check_against(["a", "b"], specs, [a, b]) == [a, b]
    with pytest.raises(
        DlpcError, match=r"^error: the model takes 2 inputs \(a, b\) but 1 were given$"
    ):
        api._check_against(["a", "b"], specs, [a])
    with pytest.raises(DlpcError, match=r"^error: input 'b' has shape 2 but the model expects 3$"):
        api._check_against(["a", "b"], specs, [a, np.zeros(2, np.int64)])
    with pytest.raises(
        DlpcError, match=r"^error: input 'b' has dtype int32 but the model expects int64$"
    ):
        api._check_against(["a", "b"], specs, [a, np.zeros(3, np.int32)])


def test_compile_refuses_options_of_another_target(add):
    model = dlpc.load(add, weights={"w": np.ones((2, 3), np.float32)})
    with pytest.raises(DlpcError, match=r"^error: unsupported target 'gpu' \(expected "):
        dlpc.compile(model, target="gpu")
    with pytest.raises(
        DlpcError, match=r"^error: a tuning log applies to target 'c', not 'numpy'$"
    ):
        dlpc.compile(model, target="numpy", tuning_log="t.json")
    with pytest.raises(
        DlpcError, match=r"^error: profile= applies to target 'opencl', not 'numpy'$"
    ):
        dlpc.compile(model, target="numpy", profile="gpu")
    with pytest.raises(DlpcError, match=r"^error: unknown compile option 'graph_fusee'"):
        dlpc.compile(model, target="numpy", graph_fusee={})
    with pytest.raises(DlpcError, match=r"^error: unknown compile option 'graph_fuse'"):
        api.pass_options({"graph_fuse": True})
    assert api.pass_options({"graph_fuse": {"horizontal": False}}) == {
        "graph-fuse": {"horizontal": False}
    }
    with pytest.raises(DlpcError, match=r"^error: target 'opencl' does not run on device cpu$"):
        dlpc.compile(model, target="opencl", device="cpu")


def test_time_runs_warmup_and_repeat_calls(add):
    c = dlpc.compile(dlpc.load(add, weights={"w": np.ones((2, 3), np.float32)}), target="numpy")
    calls = []
    runner = c.runner
    c.runner = lambda arrays: calls.append(1) or runner(arrays)
    x = np.ones((2, 3), np.float32)
    assert c.time(x, x, repeat=3, warmup=2) >= 0
    assert len(calls) == 5
    calls.clear()
    c.time(x, x, repeat=0, warmup=0)
    assert len(calls) == 1


# ---- random inputs and the reference ----------------------------------------------------------


def test_random_inputs_per_dtype_and_gather_bound(tmp_path):
    path = tmp_path / "g.mlir"
    path.write_text(GATHER)
    model = dlpc.load(path, weights={"w": np.zeros((5, 3), np.float32)})
    t, i, b, h = api.random_inputs(model, seed=3)
    assert t.dtype == np.float32 and t.shape == (5, 3) and t.std() > 0.3
    assert h.dtype == np.float64
    assert b.dtype == np.bool_
    assert i.dtype == np.int64 and i.min() >= 0 and i.max() < 5
    many = np.concatenate([api.random_inputs(model, seed=s)[1] for s in range(30)])
    assert set(many.tolist()) == {0, 1, 2, 3, 4}  # the whole gathered dim, not [0, 10)
    again = api.random_inputs(model, seed=3)
    np.testing.assert_array_equal(again[0], t)
    out = api.reference(model, [t, i, b, h])[0]
    np.testing.assert_array_equal(out, t[i])


def test_index_bound_is_the_gathered_dim_and_at_least_one(tmp_path):
    text = GATHER.replace("5x3xf32>, %i", "5x3xf32>, %i").replace(
        "{axis = 0 : i64}", "{axis = -2 : i64}"
    )
    path = tmp_path / "g.mlir"
    path.write_text(text)
    model = dlpc.load(path, weights={"w": np.zeros((5, 3), np.float32)})
    main = model.module.body.block.first_op
    assert api._index_bound(main.args[1]) == 5
    assert api._index_bound(main.args[1], default=2) == 2
    assert api._index_bound(main.args[2]) == 10  # not used as indices
    assert api._index_bound(main.args[2], default=0) == 1


# ---- settings ---------------------------------------------------------------------------------


def test_settings_read_at_call_time(monkeypatch):
    monkeypatch.setenv("DLPC_DEBUG", " 0 ")
    assert S.is_set("DLPC_DEBUG") and not S.flag("DLPC_DEBUG")
    monkeypatch.setenv("DLPC_DEBUG", "yes")
    assert S.flag("DLPC_DEBUG") and S.get("DLPC_DEBUG") == "yes"
    monkeypatch.setenv("DLPC_DEBUG", "   ")
    assert not S.is_set("DLPC_DEBUG") and not S.flag("DLPC_DEBUG")
    monkeypatch.setenv("DLPC_CACHE_DIR", "~/x")
    assert not S.get("DLPC_CACHE_DIR").startswith("~") and S.get("DLPC_CACHE_DIR").endswith("/x")
    monkeypatch.delenv("DLPC_CACHE_DIR")
    assert S.get("DLPC_CACHE_DIR").endswith("/.cache/dlpc")
    monkeypatch.setenv("DLPC_TUNING_MACHINE", "~m")
    assert S.get("DLPC_TUNING_MACHINE") == "~m"  # only paths expand ~
    with pytest.raises(KeyError):
        S.get("DLPC_NOPE")
    with pytest.raises(KeyError):
        S.is_set("DLPC_NOPE")
    rows = S.table().splitlines()
    assert rows[0] == "| variable | kind | default | what it does |"
    assert len(rows) == 2 + len(S.SETTINGS)
    assert any(r.startswith("| `DLPC_CACHE_DIR` | path | `~/.cache/dlpc` |") for r in rows)
    assert any(r.startswith("| `DLPC_DEBUG` | flag | (unset) |") for r in rows)


# ---- the trainer (train.py) on numpy -----------------------------------------------------------

SMALL = """model small(x: f32[B, 6]) {
  param fc1.weight: f32[5, 6] = kaiming(seed=1)
  param fc1.bias: f32[5] = normal(seed=3, std=0.1)
  param fc2.weight: f32[3, 5] = kaiming(seed=2)
  param fc2.bias: f32[3] = normal(seed=4, std=0.1)
  return linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
}
"""


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.dlpc"
    path.write_text(SMALL)
    return path


def test_batch_binding_and_its_diagnostics(small, add):
    from dlpc.train import bind_batch

    for bad in (0, -1, True, 2.0):
        with pytest.raises(DlpcError, match=r"^error: batch size must be a positive int, got "):
            bind_batch(str(small), bad)  # type: ignore[arg-type]
    assert bind_batch(str(small), 3).module.body.block.first_op.args[0].type.get_shape() == (3, 6)
    loaded = api.load(small, batch=2)
    loaded.name = "renamed"
    again = bind_batch(loaded, 5)
    assert again.name == "renamed"
    assert again.module.body.block.first_op.args[0].type.get_shape() == (5, 6)
    fixed = dlpc.load(add, weights={"w": np.ones((2, 3), np.float32)})
    assert bind_batch(fixed, 2) is fixed
    with pytest.raises(DlpcError, match=r"^error: model 'add' has batch size 2, not 4; load it"):
        bind_batch(fixed, 4)


def test_trainer_steps_by_name_and_refuses_wrong_arrays(small, tmp_path):
    from dlpc.passes.train.optim import make_optimizer

    sgd = make_optimizer("sgd", lr=0.1)
    t = dlpc.train.Trainer(str(small), "mse", sgd, batch_size=2, target="numpy")
    assert t.input_names == ["x"] and len(t.target_names) == 1
    (y_name,) = t.target_names
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    before = t.weights
    first = t.step(x=x, **{y_name: y})
    assert t.steps_done == 1
    assert any(not np.array_equal(before[n], v) for n, v in t.weights.items())
    second = t.step(x, y)
    assert second < first  # plain SGD at 0.1 on the same batch
    with pytest.raises(DlpcError, match=r"^error: the step has no input 'z' \(it takes x, "):
        t.step(z=x)
    with pytest.raises(DlpcError, match=r"^error: no array for the step's input "):
        t.step(x=x)
    with pytest.raises(DlpcError, match=r"^error: the step takes 2 arrays .* got 1$"):
        t.step(x)
    with pytest.raises(
        DlpcError, match=r"^error: no gradients: build the trainer with return_grads"
    ):
        t.grads  # noqa: B018
    with pytest.raises(
        DlpcError, match=r"^error: evaluate takes 1 inputs and 1 targets, got 1 arrays"
    ):
        t.evaluate(x)
    with pytest.raises(DlpcError, match=r"^error: save path .*s\.txt must end in \.npz$"):
        t.save(tmp_path / "s.txt")
    t.save(tmp_path / "s.npz")
    state = dict(np.load(tmp_path / "s.npz"))
    assert int(state["trainer.epoch"]) == 0 and int(state["opt.step"]) == 2
    other = dlpc.train.Trainer(str(small), "mse", sgd, batch_size=2, target="numpy")
    other.load(tmp_path / "s.npz")
    for n, v in t.weights.items():
        np.testing.assert_array_equal(other.weights[n], v)
    assert other.step(x, y) == t.step(x, y)
    with pytest.raises(DlpcError, match=r"^error: saved state has 'nope', which this trainer"):
        other.load({**state, "nope": np.zeros(1)})
    state.pop("fc1.bias")
    with pytest.raises(DlpcError, match=r"^error: saved state lacks 'fc1.bias'$"):
        other.load(state)


def test_grads_are_the_last_steps(small):
    from dlpc.passes.train.optim import make_optimizer

    sgd = make_optimizer("sgd", lr=1e-12)  # (the weights stay as they were)
    t = dlpc.train.Trainer(str(small), "mse", sgd, batch_size=2, target="numpy", return_grads=True)
    with pytest.raises(DlpcError, match=r"^error: no gradients before the first step$"):
        t.grads  # noqa: B018
    x = np.ones((2, 6), np.float32)
    y = np.zeros((2, 3), np.float32)
    t.step(x, y)
    g = t.grads
    assert sorted(g) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    w = t.weights
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    p = h @ w["fc2.weight"].T + w["fc2.bias"]
    dp = 2 * (p - y) / p.size  # mse: the mean over every element
    np.testing.assert_allclose(g["fc2.bias"], dp.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g["fc2.weight"], dp.T @ h, rtol=1e-5, atol=1e-6)


# ---- the pipeline (passes/pipeline.py): which passes run, in order ------------------------------

COMMON_C = [
    "loop-fold-init-epilogue",
    "loop-slide-rows",
    "loop-views",
    "loop-memory-plan",
    "loop-prepack-weights",
    "loop-runtime-extents",
]
O2_GRAPH = [
    "graph-infer-shapes",
    "graph-fold-qdq",
    "graph-simplify",
    "graph-substitute",
    "graph-fold-constants",
]


@pytest.mark.parametrize(
    ("level", "stop", "target", "schedule", "weights", "passes"),
    [
        (
            0,
            "loop",
            "c",
            True,
            True,
            ["graph-infer-shapes", "graph-to-te", "te-to-loop", *COMMON_C],
        ),
        (
            1,
            "loop",
            "opencl",
            False,
            True,
            [
                "graph-infer-shapes",
                "graph-fold-qdq",
                "graph-simplify",
                "graph-fold-constants",
                "fold-params",
                "graph-to-te",
                "te-to-loop",
                "loop-view-copies",
                "loop-opencl-winograd",
                "loop-runtime-extents",
            ],
        ),
        (
            2,
            "loop",
            "c",
            True,
            True,
            [
                *O2_GRAPH,
                "fold-params",
                "graph-conv-layout",
                "graph-winograd",
                "graph-fuse",
                "fold-params",
                "graph-to-te",
                "te-to-loop",
                "loop-default-schedule",
                *COMMON_C,
            ],
        ),
        # dlp: no layout passes (dlp.conv2d reads NCHW), no winograd
        (
            2,
            "dlp",
            None,
            False,
            True,
            [
                *O2_GRAPH,
                "fold-params",
                "graph-fuse",
                "fold-params",
                "graph-to-te",
                "te-to-loop",
                "dlp-reshape-aliases",
                "dlp-pack-params",
                "loop-to-dlp",
            ],
        ),
        # no weights: nothing to fold, and winograd (which needs them) is skipped
        (
            2,
            "loop",
            None,
            False,
            False,
            [*O2_GRAPH, "graph-conv-layout", "graph-fuse", "graph-to-te", "te-to-loop"],
        ),
        # above the loop level for no target: no winograd rule
        (
            3,
            "te",
            None,
            False,
            True,
            [*O2_GRAPH, "fold-params", "graph-layout", "graph-fuse", "fold-params", "graph-to-te"],
        ),
        (3, "graph", None, False, False, [*O2_GRAPH, "graph-layout", "graph-fuse"]),
    ],
)
def test_each_level_and_target_runs_its_passes(level, stop, target, schedule, weights, passes):
    from dlpc.passes import pipeline as PL

    m = api.load("examples/mlp.dlpc", batch=1)
    options = PL.PipelineOptions(opt_level=level, target=target, schedule=schedule)
    with PL.timing() as rows:
        PL.lower(m.module.clone(), stop, options, weights=dict(m.weights) if weights else None)
    assert [name for name, _ in rows] == passes


def test_unscheduled_and_forced_layout_and_emit_kinds():
    from dlpc.passes import pipeline as PL

    m = api.load("examples/mlp.dlpc", batch=1)
    options = PL.PipelineOptions(opt_level=1, schedule=True)
    stages = []
    with PL.timing() as rows:
        PL.lower(
            m.module.clone(), "loop", options, lambda s, _m: stages.append(s), unscheduled=True
        )
    assert [n for n, _ in rows][-2:] == ["graph-to-te", "te-to-loop"]
    assert stages == ["input", "graph", "te", "loop"]
    forced = PL.PipelineOptions(opt_level=2, extra={"graph-layout": {}})
    with PL.timing() as rows:
        PL.lower(m.module.clone(), "dlp", forced, weights=dict(m.weights))
    assert "graph-conv-layout" not in [n for n, _ in rows]
    with pytest.raises(
        DlpcError, match=r"^error: unknown stage 'x' \(expected graph, te, loop, dlp\)$"
    ):
        PL.lower(m.module.clone(), "x")
    with pytest.raises(DlpcError, match=r"^error: unknown --emit kind 'x' \(expected graph, te, "):
        PL.compile_to(m.module.clone(), "x")
    with pytest.raises(DlpcError, match=r"^error: unsupported target 'x' \(expected numpy, c, "):
        PL.emit(m.module.clone(), "x")
    with pytest.raises(
        DlpcError, match=r"^error: unknown optimisation level -O4 \(expected -O0 to -O3\)$"
    ):
        PL.PipelineOptions(opt_level=4)
    with pytest.raises(
        DlpcError, match=r"^error: unknown target 'numpy' \(expected c, opencl, dlp\)$"
    ):
        PL.PipelineOptions(target="numpy")
    with pytest.raises(DlpcError, match=r"^error: pipeline pass 'nope' is not registered"):
        PL.make_pass("nope", PL.PipelineOptions())
    with pytest.raises(DlpcError, match=r"^error: bad options \{'x': 1\} for pass 'graph-fuse': "):
        PL.make_pass("graph-fuse", PL.PipelineOptions(extra={"graph-fuse": {"x": 1}}))
    assert PL.PipelineOptions(checker=True).verify_each
    assert PL.schedules_for("c") and PL.schedules_for("loop") and not PL.schedules_for("opencl")
    text = PL.format_timing([("a", 0.25), ("b", 0.75)])
    assert text.splitlines() == [
        "  seconds   share  pass",
        "   0.2500   25.0%  a",
        "   0.7500   75.0%  b",
        "   1.0000  100.0%  total (2 passes)",
    ]
    assert PL.format_timing([]).splitlines()[-1].endswith("total (0 passes)")


# ---- the per-pass check (passes/check.py): its tolerance and inputs ------------------------------


def test_check_tolerance_scales_by_the_largest_finite_value():
    from dlpc.passes import check

    before = np.array([100.0, 1.0, np.inf], np.float64)
    # (rtol, atol): atol * scale (100: the largest finite |before|) + rtol * |before|
    assert check.compare(before, before + [0, 0.0109, 0], 1e-3, 1e-4) is None  # 0.01 + 0.001
    worst = check.compare(before, before + [0, 0.0111, 0], 1e-3, 1e-4)
    assert worst is not None and worst[0] == (1,)
    assert check.compare(before, before + [0.09, 0, 0], 0.0, 1e-3) is None  # 0.1 at scale 100
    assert check.compare(before, before + [0.11, 0, 0], 0.0, 1e-3) is not None
    zeros = np.zeros(3)
    assert check.compare(zeros, zeros + 1e-40, 0.0, 1e-9) is None  # scale 0 -> 1e-30
    assert check.compare(zeros, zeros + 1e-20, 0.0, 1e-9) is not None
    assert check.compare(np.zeros((0, 2)), np.zeros((2, 0)), 0, 0) is None
    assert check.compare(np.zeros(2), np.zeros(3), 0, 0) == ((), (2,), (3,))
    assert check.compare(np.array([True, False]), np.array([True, True]), 0, 0)[0] == (1,)
    assert check.compare(np.zeros(0), np.zeros(0), 0, 0) is None


def test_check_random_inputs_and_what_a_pass_keeps():
    from dlpc.passes import check

    rng = np.random.default_rng(0)
    f = check.random_array(rng, (200,), "float16")
    assert f.dtype == np.float16 and 0.7 < f.std() < 1.3
    b = check.random_array(rng, (400,), np.bool_)
    assert b.dtype == np.bool_ and 100 < b.sum() < 300
    i = check.random_array(rng, (400,), np.int32, 3)
    assert i.dtype == np.int32 and set(i.tolist()) == {0, 1, 2}
    assert check.kept_results("graph-fuse", None, 3) == [(0, 0), (1, 1), (2, 2)]

    class Autodiff:
        result = 2

    assert check.kept_results("graph-autodiff", Autodiff(), 3) == [(2, 0)]
    assert check.kept_results("graph-autodiff", None, 3) == [(0, 0)]
    assert check._fmt((2, 3)) == "shape (2, 3)"
    assert check._fmt(np.float32(0.1)) == "0.1"
    assert check._fmt(np.int64(7)) == "7"


# ---- the tuner's cost model (tune/model.py) -----------------------------------------------------


def test_ridge_model_trusts_itself_from_min_samples_and_learns_a_log_time():
    from dlpc.tune.model import RidgeCostModel

    m = RidgeCostModel(alpha=1e-6, min_samples=3)
    assert m.predict([1.0, 2.0]) == 0.0 and not m.trained
    np.testing.assert_array_equal(m._expand([2.0, 3.0]), [2.0, 3.0, 4.0, 6.0, 9.0])
    m.update([1.0, 0.0], 1.0)
    assert m.w is None  # one point: nothing fitted
    m.update([2.0, 1.0], np.e)
    assert m.w is not None and not m.trained  # fitted, not yet trusted
    for x in ([3.0, 0.0], [1.0, 2.0], [0.0, 1.0], [2.0, 2.0], [4.0, 1.0]):
        m.update(x, float(np.exp(0.5 * x[0] - 0.25 * x[1])))
    assert m.trained and m.ys[0] == 0.0 and m.ys[1] == 1.0
    # log(seconds) = 0.5 a - 0.25 b on the last points: the model follows them closely
    assert abs(m.predict([3.0, 1.0]) - 1.25) < 0.3
    assert m.predict([4.0, 0.0]) > m.predict([0.0, 2.0])
    strong = RidgeCostModel(alpha=1e6, min_samples=1)
    for x in ([0.0], [1.0], [2.0]):
        strong.update(x, float(np.exp(x[0])))
    assert abs(strong.predict([2.0]) - 1.0) < 0.05  # shrunk to the intercept: the mean log


def test_fit_reports_each_batch_on_a_fake_clock(small, monkeypatch):
    """fit's progress events: the batch's place, the running mean loss, and samples per
    second as seen / elapsed (on a clock that advances 0.5 s per reading: no real time)."""
    import types

    import dlpc.train as T
    from dlpc.passes.train.optim import make_optimizer

    ticks = iter(np.arange(0.0, 100.0, 0.5))
    monkeypatch.setattr(T, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    t = T.Trainer(str(small), "mse", make_optimizer("sgd", lr=0.01), batch_size=2, target="numpy")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    events = []
    history = t.fit(x, y, epochs=1, shuffle=False, callback=lambda e, i: events.append((e, i)))
    batches = [i for e, i in events if e == "batch"]
    assert [(i["epoch"], i["batch"], i["batches"]) for i in batches] == [(0, 0, 2), (0, 1, 2)]
    assert [i["samples_per_s"] for i in batches] == [2 / 0.5, 4 / 1.0]
    assert batches[0]["accuracy"] is None
    assert batches[1]["mean_loss"] == pytest.approx((batches[0]["loss"] + batches[1]["loss"]) / 2)
    (epoch,) = [i for e, i in events if e == "epoch"]
    assert epoch["seconds"] == 1.5 and epoch["loss"] == history["loss"][0]
    assert np.isnan(history["accuracy"][0]) and np.isnan(history["val_loss"][0])
    assert t.epoch == 1
    with pytest.raises(DlpcError, match=r"^error: 1 samples are fewer than one batch of 2$"):
        t.fit(x[:1], y[:1])


def test_a_one_input_model_refuses_a_wrong_shape_on_every_path(tmp_path):
    """The checks of a model of one input: a wrong shape is refused on the first call and
    after a good call (the cached specs)."""
    path = tmp_path / "one.mlir"
    path.write_text(
        "func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        "  %y = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
        "  func.return %y : tensor<2x3xf32>\n}\n"
    )
    c = dlpc.compile(dlpc.load(path), target="numpy")
    with pytest.raises(
        DlpcError, match=r"^error: input 'x' has shape 3x2 but the model expects 2x3$"
    ):
        c(np.ones((3, 2), np.float32))
    good = np.asfortranarray(np.array([[1, -2, 3], [-4, 5, -6]], np.float32))
    np.testing.assert_array_equal(c(good)[0], [[1, 0, 3], [0, 5, 0]])
    with pytest.raises(
        DlpcError, match=r"^error: input 'x' has shape 3x2 but the model expects 2x3$"
    ):
        c(np.ones((3, 2), np.float32))
    with pytest.raises(
        DlpcError, match=r"^error: input 'x' has shape 6 but the model expects 2x3$"
    ):
        c(np.ones(6, np.float32))


def test_time_is_the_median_of_the_repeats_on_a_fake_clock(add, monkeypatch):
    import types

    c = dlpc.compile(dlpc.load(add, weights={"w": np.ones((2, 3), np.float32)}), target="numpy")
    readings = iter([10.0, 10.5, 20.0, 23.0, 30.0, 30.25])  # calls of 0.5, 3 and 0.25 s
    monkeypatch.setattr(api, "time", types.SimpleNamespace(perf_counter=lambda: next(readings)))
    x = np.ones((2, 3), np.float32)
    assert c.time(x, x, repeat=3, warmup=0) == 0.5


# ---- the tuner's search space (tune/space.py) -------------------------------------------------


def test_gemm_features_end_with_the_working_sets():
    """A gemm point's derived features: log2 of A's and B's panels in bytes against 32 KiB
    and 1 MiB, whether they exceed 48 KiB and 1 MiB, and the register tile over 256."""
    import math

    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune.space import space_for

    space = space_for(parse_module(MATMUL), "mm")
    assert space is not None and space.template == "gemm"
    point = dict(space.default(), mc=24, kc=16, nc=64, mr=4, nr=8)
    tail = space.features(point)[-5:]
    a_bytes, b_bytes = 24 * 16 * 4, 16 * 64 * 4
    assert tail == [
        math.log2(a_bytes) - 15,
        math.log2(b_bytes) - 20,
        0.0,
        0.0,
        4 * 8 / 256.0,
    ]
    big = dict(point, mc=1024, kc=64, nc=8192)  # 256 KiB of A, 2 MiB of B
    assert space.features(big)[-3:-1] == [1.0, 1.0]


def test_a_measurement_runs_its_repeats_until_the_deadline(monkeypatch):
    """tune/measure.py's child, in-process on a fake clock (1 s a reading): `repeat` timed
    calls after `warmup`, stopping once a reading passes `max_seconds` from the start;
    the best of them is the time."""
    import types

    from test_schedule import MATMUL

    from dlpc.backends.runtime import cbuild
    from dlpc.tune import measure

    calls = []
    real = cbuild.build

    def counting_build(source, name, **kw):
        lib = real(source, name=name, **kw)
        if name != "tune":
            return lib
        return types.SimpleNamespace(call=lambda out: calls.append(1) or lib.call(out))

    monkeypatch.setattr(cbuild, "build", counting_build)
    clock = iter(np.arange(1000.0, 2000.0, 1.0))
    monkeypatch.setattr(measure, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    job = {"ir": MATMUL, "script": "", "repeat": 4, "warmup": 1, "max_seconds": 100.0}
    assert measure._child(job) == {"ok": True, "time": 1.0}
    assert len(calls) == 1 + 1 + 4  # the check, the warmup, the repeats
    calls.clear()
    # deadline t + 4.5 (t its reading): repeat 1 reads t+1, t+2, t+3 (before it), repeat 2
    # reads t+4, t+5, t+6 (past it: the last)
    job["max_seconds"] = 4.5
    assert measure._child(job)["ok"]
    assert len(calls) == 1 + 1 + 2


def test_the_tuner_stops_at_its_trials_and_its_time_budget(tmp_path, monkeypatch):
    """tune/search.py with a stand-in measurement (no compile): `trials` measurements,
    the best time so far in each progress, a record per trial in the log; and on a fake
    clock (1 s a reading) a time budget of 2.5 s lets two trials start."""
    import types

    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    times = iter([3.0, 2.0, 5.0, 1.0, 4.0, 6.0, 7.0, 8.0])

    def fake(ir, script, **kw):
        return Result(True, next(times) * 1e-3)

    log = tmp_path / "log.json"
    tuner = search.Tuner(parse_module(MATMUL), log=str(log), measure_fn=fake, seed=1)
    assert [t.kernel for t in tuner.tasks] == ["mm"]
    progress = list(tuner.run(trials=5))
    assert [p.trial for p in progress] == [1, 2, 3, 4, 5]
    assert all(p.total == 5 and p.ok for p in progress)
    assert [p.best for p in progress] == [3e-3, 2e-3, 2e-3, 1e-3, 1e-3]
    assert len({p.script for p in progress}) == 5
    assert [h[0] for h in tuner.history] == [1, 2, 3, 4, 5]
    clock = iter(np.arange(0.0, 1000.0, 1.0))
    monkeypatch.setattr(search, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    times = iter([3.0] * 10)
    again = search.Tuner(parse_module(MATMUL), log=str(tmp_path / "b.json"), measure_fn=fake)
    assert len(list(again.run(trials=5, time_budget=2.5))) == 2
    with pytest.raises(ValueError, match=r"unknown search strategy 'x' \(expected evolutionary"):
        search.Tuner(parse_module(MATMUL), strategy="x", tasks=[])


# ---- the graph builder's attribute checks (frontends/builder.py) --------------------------------


def test_attribute_values_are_checked_and_normalised():
    from dlpc.frontends.builder import OPS, FrontendError, coerce_attr

    conv, mm, softmax = OPS["conv2d"], OPS["matmul"], OPS["softmax"]
    assert coerce_attr(conv, "pads", "pads", 1) == [1, 1, 1, 1]
    assert coerce_attr(conv, "pads", "pads", [1, 2]) == [1, 2, 1, 2]
    assert coerce_attr(conv, "pads", "pads", [1, 2, 3, 4]) == [1, 2, 3, 4]
    with pytest.raises(
        FrontendError, match=r"^conv2d argument 'pads' expects 1, 2 or 4 values, got"
    ):
        coerce_attr(conv, "pads", "pads", [1, 2, 3])
    assert coerce_attr(conv, "strides", "strides", 2) == [2, 2]
    assert coerce_attr(conv, "strides", "strides", [2, 3]) == [2, 3]
    with pytest.raises(FrontendError, match=r"expects 1 or 2 values"):
        coerce_attr(conv, "strides", "strides", [1, 2, 3])
    wit = OPS["winograd_input_transform"]  # not a window op: its pads as given
    assert coerce_attr(wit, "pads", "pads", [1, 2]) == [1, 2]
    assert coerce_attr(conv, "groups", "groups", np.int64(2)) == 2
    assert coerce_attr(conv, "groups", "groups", -(2**63)) == -(2**63)
    for big in (2**63, -(2**63) - 1):
        with pytest.raises(
            FrontendError, match=r"^conv2d argument 'groups': -?\d+ does not fit in 64 bits$"
        ):
            coerce_attr(conv, "groups", "groups", big)
    with pytest.raises(FrontendError, match=r"does not fit in 64 bits"):
        coerce_attr(conv, "pads", "pads", [1, 2**63])
    with pytest.raises(FrontendError, match=r"^softmax argument 'axis' expects an int, got"):
        coerce_attr(softmax, "axis", "axis", 1.5)
    assert coerce_attr(mm, "transpose_b", "transpose_b", True) is True
    with pytest.raises(
        FrontendError, match=r"^matmul argument 'transpose_b' expects true or false"
    ):
        coerce_attr(mm, "transpose_b", "transpose_b", 1)
    leaky = OPS["leaky_relu"]
    assert coerce_attr(leaky, "alpha", "alpha", 1) == 1.0
    assert isinstance(coerce_attr(leaky, "alpha", "alpha", 1), float)
    with pytest.raises(FrontendError, match=r"^leaky_relu argument 'alpha' expects a number"):
        coerce_attr(leaky, "alpha", "alpha", "x")
    gelu = OPS["gelu"]
    assert coerce_attr(gelu, "approximate", "approximate", "tanh") == "tanh"
    with pytest.raises(FrontendError, match=r"^gelu argument 'approximate' expects a string"):
        coerce_attr(gelu, "approximate", "approximate", 1)
    cast = OPS["cast"]
    with pytest.raises(FrontendError, match=r"^cast argument 'to' expects an element type \("):
        coerce_attr(cast, "to", "to", "f7")
    with pytest.raises(FrontendError, match=r"expects an int or a list of ints"):
        coerce_attr(conv, "pads", "pads", "x")


def test_a_conv_of_16_channels_blocks_them_by_1_2_4_or_8(tmp_path):
    """The reduction template's channel blocks: the powers of two up to 8 that divide the
    output channels (an NCHW conv at -O1); a 6x6 output row is too short to tile."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune.space import space_for

    path = tmp_path / "c.dlpc"
    path.write_text(
        "model c(x: f32[1, 3, 8, 8]) {\n"
        "  param w: f32[16, 3, 3, 3] = kaiming(seed=1)\n"
        "  return relu(conv2d(x, w))\n}\n"
    )
    model = api.load(path)
    module = model.module.clone()
    lower(module, "loop", PipelineOptions(opt_level=1), weights=dict(model.weights))
    (conv,) = [k.sym for k in kernels(module) if k.sym.startswith("conv2d")]
    space = space_for(module, conv)
    assert space is not None and space.template == "reduction"
    assert space.knobs["cb"] == [1, 2, 4, 8]
    assert space.knobs["wt"] == [0]
    assert space.knobs["par"] == ["auto", "i1"]
    assert not space.strided and not space.default()["im2col"]  # stride 1: rows not packed


def test_a_variadic_op_takes_its_operands_as_a_list_or_one_by_one():
    from dlpc.frontends.builder import GraphBuilder

    b = GraphBuilder()
    x = b.input("x", (2, 3))
    y = b.input("y", (2, 1))
    listed = b.op("concat", [x, y], axis=1)
    spread = b.op("concat", x, y, axis=1)
    single = b.op("concat", [x], axis=1)
    for v in (listed, spread):
        assert list(v.owner.operands) == [x, y]
        assert v.type.get_shape() == (2, 4)
    assert list(single.owner.operands) == [x]


def test_a_frontends_result_becomes_a_model_named_after_the_file(add, tmp_path):
    """`_as_model`: a frontend may return a Model, a (module, weights) pair or an object
    with `module` and `weights`; the model is named after the file's stem."""
    import types

    from dlpc.model import Model

    module = dlpc.load(add).module
    w = {"w": np.ones((2, 3), np.float32)}
    path = tmp_path / "net.onnx"
    pair = api._as_model((module, w), path, None)
    assert (pair.name, pair.path, list(pair.weights)) == ("net", str(path), ["w"])
    assert api._as_model((module, None), path, None).weights == {}
    obj = api._as_model(types.SimpleNamespace(module=module, weights=w), path, None)
    assert obj.name == "net" and list(obj.weights) == ["w"] and obj.weights is not w
    given = Model(module, w, "given", None)
    assert api._as_model(given, path, None) is given


def test_a_graph_losss_value_weights_each_batch_by_its_new_rows(small):
    """evaluate with a loss in the model language over 5 rows at batch 2: batches [0, 1],
    [2, 3] and [4, 0] (completed by wrapping around), weighted 2, 2 and 1."""
    from dlpc.passes.train.optim import make_optimizer

    loss = "model l1(p: f32[B, 3], y: f32[B, 3]) {\n  return reduce_mean(abs(p - y))\n}\n"
    t = dlpc.train.Trainer(
        str(small), loss, make_optimizer("sgd", lr=0.1), batch_size=2, target="numpy"
    )
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    p = t.predict(x)
    rows = [[0, 1], [2, 3], [4, 0]]
    per = [float(np.abs(p[r] - y[r]).mean()) for r in rows]
    want = (2 * per[0] + 2 * per[1] + 1 * per[2]) / 5
    assert t.evaluate(x, y) == {"loss": pytest.approx(want, rel=1e-5)}


def test_a_conv_row_of_16_is_tiled_by_8(tmp_path):
    """The reduction template's row tiles: the divisors of the output row from 8 up,
    short of the whole row."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune.space import space_for

    path = tmp_path / "c.dlpc"
    path.write_text(
        "model c(x: f32[1, 3, 18, 18]) {\n"
        "  param w: f32[4, 3, 3, 3] = kaiming(seed=1)\n"
        "  return conv2d(x, w)\n}\n"
    )
    model = api.load(path)
    module = model.module.clone()
    lower(module, "loop", PipelineOptions(opt_level=1), weights=dict(model.weights))
    (conv,) = [k.sym for k in kernels(module) if k.sym.startswith("conv2d")]
    space = space_for(module, conv)
    assert space is not None
    assert space.knobs["wt"] == [0, 8]
    assert space.knobs["cb"] == [1, 2, 4]
    split = space.script(module, dict(space.default(), tile=False, wt=8))
    assert [ln for ln in split.splitlines() if " by 8 -> " in ln]  # the row split by 8
    whole = space.script(module, dict(space.default(), tile=False, wt=16))  # a whole row
    assert not [ln for ln in whole.splitlines() if " by 16 -> " in ln]


# ---- for api seed 43's mutants: device and OpenCL calls, initialisers, operands, measure ------


def test_a_device_model_refuses_a_wrong_shape_or_count(add):
    model = dlpc.load(add, weights={"w": np.full((2, 3), 2, np.float32)})
    on_cpu = dlpc.compile(model, device="cpu")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(on_cpu(x, x)[0], np.full((2, 3), 4.0))
    for bad in (np.ones((3, 3), np.float32), np.ones((1, 3), np.float32)):
        with pytest.raises(
            DlpcError,
            match=r"^error: input 1 is \[\d, 3\] float32, the model takes \[2, 3\] float32$",
        ):
            on_cpu(x, bad)
    with pytest.raises(DlpcError, match=r"^error: input 0 is \[2, 3\] float64"):
        on_cpu(x.astype(np.float64), x)
    with pytest.raises(DlpcError, match=r"^error: the model takes 2 inputs, 1 given$"):
        on_cpu(x)


def test_an_opencl_model_checks_inputs_after_a_good_call(add):
    pytest.importorskip("pyopencl")
    model = dlpc.load(add, weights={"w": np.full((2, 3), 2, np.float32)})
    try:
        on_cl = dlpc.compile(model, target="opencl")
    except DlpcError as e:  # no OpenCL device here
        pytest.skip(str(e))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(on_cl(x, x)[0], np.full((2, 3), 4.0))
    with pytest.raises(
        DlpcError, match=r"^error: input 'y' has shape 3x2 but the model expects 2x3$"
    ):
        on_cl(x, np.ones((3, 2), np.float32))


def test_initialiser_arguments_are_checked():
    from dlpc.frontends.builder import FrontendError, make_initializer

    assert dict(make_initializer("normal", 0).args)["seed"] == 0
    assert dict(make_initializer("normal", seed=3, std=2).args) == {
        "seed": 3,
        "mean": 0.0,
        "std": 2,
    }
    with pytest.raises(FrontendError, match=r"^normal\(\) takes 3 arguments, got 4$"):
        make_initializer("normal", 1, 0.0, 1.0, 2.0)
    make_initializer("normal", 1, 0.0, 1.0)
    with pytest.raises(
        FrontendError, match=r"^normal\(\) seed must be a non-negative int, got -1$"
    ):
        make_initializer("normal", seed=-1)
    with pytest.raises(FrontendError, match=r"seed must be a non-negative int"):
        make_initializer("uniform", seed=1.5)
    with pytest.raises(FrontendError, match=r"^full\(\) is missing argument 'value'$"):
        make_initializer("full")
    with pytest.raises(
        FrontendError, match=r"^full\(\) argument 'value' expects a number, got true$"
    ):
        make_initializer("full", True)
    with pytest.raises(FrontendError, match=r"^normal\(\) got argument 'seed' twice$"):
        make_initializer("normal", 1, seed=2)


def test_an_operand_given_twice_is_refused():
    from dlpc.frontends.builder import OPS, FrontendError, GraphBuilder, operand_names

    b = GraphBuilder()
    x = b.input("x", (2,))
    y = b.input("y", (2,))
    names = operand_names(OPS["add"])
    with pytest.raises(FrontendError, match=rf"^add got operand '{names[0]}' twice$"):
        b.op("add", x, y, **{names[0]: y})
    s = b.op("add", x, **{names[1]: y})  # the second by name after the first by place
    assert list(s.owner.operands) == [x, y]


def test_a_measuring_process_that_fails_is_a_failed_candidate(monkeypatch):
    import subprocess
    import types

    from dlpc.tune import measure

    def fake(code, out, err=""):
        return lambda *a, **k: types.SimpleNamespace(returncode=code, stdout=out, stderr=err)

    monkeypatch.setattr(measure.subprocess, "run", fake(1, '{"ok": true, "time": 1.0}\n', "boom\n"))
    r = measure.measure("ir", "")
    assert (r.ok, r.error) == (False, "failed (exit 1): boom")
    monkeypatch.setattr(measure.subprocess, "run", fake(0, "", "x\nlast words\n"))
    assert measure.measure("ir", "").error == "failed (exit 0): last words"
    monkeypatch.setattr(measure.subprocess, "run", fake(-11, ""))
    assert measure.measure("ir", "").error == "crashed (signal 11)"
    monkeypatch.setattr(measure.subprocess, "run", fake(0, 'noise\n{"ok": true, "time": 0.5}\n'))
    r = measure.measure("ir", "")
    assert (r.ok, r.time) == (True, 0.5)

    def slow(*a, **k):
        raise subprocess.TimeoutExpired("x", 3)

    monkeypatch.setattr(measure.subprocess, "run", slow)
    assert measure.measure("ir", "", timeout=3).error == "timed out after 3 s"


def test_the_tuner_ranks_by_its_cost_model_once_trained(tmp_path):
    """After the default and a first batch of 4 (5 measurements: the ridge model trusts
    itself from 4), the next batch is the model's best 3 and one random point."""
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    seen = []

    def fake(ir, script, **kw):
        seen.append(script)
        return Result(True, 1e-3 * (1 + len(seen) % 3))

    tuner = search.Tuner(parse_module(MATMUL), log=str(tmp_path / "l.json"), measure_fn=fake)
    progress = list(tuner.run(trials=9))
    assert [p.trial for p in progress] == list(range(1, 10))
    assert len(set(seen)) == 9 and min(p.best for p in progress if p.best) == 1e-3


def test_a_compiled_out_hyper_parameter_says_how_to_keep_it(small):
    """Changing a hyper-parameter compiled out at 0: momentum names cycle_momentum,
    weight decay does not; a run-time one (lr) changes freely."""
    from dlpc.passes.train.optim import make_optimizer

    x = np.ones((2, 6), np.float32)
    y = np.zeros((2, 3), np.float32)
    for key, hint in (("momentum", True), ("weight_decay", False)):
        t = dlpc.train.Trainer(
            str(small), "mse", make_optimizer("sgd", lr=0.1), batch_size=2, target="numpy"
        )
        t.param_groups[0]["lr"] = 0.05
        t.step(x, y)
        t.param_groups[0][key] = 0.5
        with pytest.raises(DlpcError) as e:
            t.step(x, y)
        text = str(e.value)
        assert text.startswith(f"error: param group 0: '{key}' is compiled out (0 when built)")
        assert ("cycle_momentum=True" in text) == hint, text


def test_fit_reads_an_npz_path_or_batches(small, tmp_path):
    from dlpc.passes.train.optim import make_optimizer

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=y)

    def trainer():
        return dlpc.train.Trainer(
            str(small), "mse", make_optimizer("sgd", lr=0.1), batch_size=2, target="numpy"
        )

    a, b, c = trainer(), trainer(), trainer()
    ha = a.fit(x, y, shuffle=False)
    hb = b.fit(str(tmp_path / "d.npz"), shuffle=False)
    hc = c.fit(iter([(x[:2], y[:2]), (x[2:], y[2:])]))  # (a list would be a data set of rows)
    assert ha["loss"] == hb["loss"] == hc["loss"]
    with pytest.raises(DlpcError, match=r"^error: fit takes arrays with targets, a data set, "):
        a.fit(3)


def test_a_batch_1_linear_offers_gemv_with_the_divisors_of_k():
    """A batch-1 linear (m < 4, along k): the gemv knob and its rfactor widths, the
    powers of two 4..64 that divide k (784 = 16 x 49: up to 16)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune.space import space_for

    model = api.load("examples/mlp.dlpc", batch=1)
    module = model.module.clone()
    lower(module, "loop", PipelineOptions(opt_level=1), weights=dict(model.weights))
    rf = {}
    for k in kernels(module):
        space = space_for(module, k.sym)
        if space is not None:
            assert space.knobs["gemv"] == [False, True]
            rf[k.sym] = space.knobs["rf"]
    assert rf == {
        "linear_0": [4, 8, 16],
        "linear_2": [4, 8, 16, 32, 64],
        "linear_4": [4, 8, 16, 32, 64],
    }
