"""Tests of the public API's and the drivers' decisions no fast test pinned before the fifth
round of issue 35 (bench/mutation.py --area api): `python -m dlpc` and the text frontend's
driver, the first-use program of a .dlpc model left unbound, bind_dims and the reference on
symbolic dims, compile's refusals, the pipeline's stats helpers, the trainer's partial
batch, momentum cycling, per-step lambda and casts, and the tuner's stale stop and its
verification. Small models, in-process; numpy target unless a test needs C."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError

UNBOUND = """model small(x: f32[B, 3]) {
  param w: f32[3] = normal(seed=1)
  return relu(x + w)
}
"""

CLS = """model cls(x: f32[B, 4]) {
  param fc.weight: f32[3, 4] = kaiming(seed=1)
  param fc.bias: f32[3] = normal(seed=2, std=0.1)
  return linear(x, fc.weight, fc.bias)
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
def unbound(tmp_path):
    path = tmp_path / "small.dlpc"
    path.write_text(UNBOUND)
    return path


@pytest.fixture
def cls(tmp_path):
    path = tmp_path / "cls.dlpc"
    path.write_text(CLS)
    return path


@pytest.fixture
def add(tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    np.savez(tmp_path / "add.npz", w=np.full((2, 3), 2.0, np.float32))
    return path


def _w(model) -> np.ndarray:
    return np.asarray(model.weights["w"], np.float32)


# ---- python -m dlpc and python -m dlpc.frontends.text ------------------------------------


def test_python_m_dlpc_usage_help_version_and_subcommands(add, capsys):
    from dlpc import __main__ as main_mod

    assert main_mod.USAGE == (
        "usage: python -m dlpc [compile|run|opt|tune|train] ARGS...  (default: compile)"
    )
    text = main_mod.help_text()
    assert text.splitlines()[0] == main_mod.USAGE
    assert "  compile  = dlpc\n  run      = dlpc-run\n  opt      = dlpc-opt\n" in text
    assert "  tune     = dlpc-tune\n  train    = dlpc-train\n" in text
    assert text.endswith("example: python -m dlpc run examples/mlp.dlpc --target c --check")
    assert main_mod.main([]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == text + "\n"
    for flag in ("-h", "--help"):
        assert main_mod.main([flag]) == 0
        out = capsys.readouterr()
        assert out.out == text + "\n" and out.err == ""
    assert main_mod.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("dlpc ")
    # a file first: the compile tool (dlpc); a subcommand: that tool on the rest
    assert main_mod.main([str(add), "--emit=graph"]) == 0
    assert "graph.mul" in capsys.readouterr().out
    assert main_mod.main(["compile", str(add), "--emit=graph"]) == 0
    assert "graph.mul" in capsys.readouterr().out
    assert main_mod.main(["opt", str(add), "-p", "graph-canonicalize"]) == 0
    assert "graph.add" in capsys.readouterr().out


def test_the_text_frontends_driver_prints_graph_ir(unbound, tmp_path, capsys):
    from dlpc.frontends.text import __main__ as text_main

    assert text_main.main([str(unbound)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("builtin.module {") and out.endswith("}\n") and not out.endswith("\n\n")
    assert "graph.relu" in out and "loc(" not in out
    assert text_main.main([str(unbound), "--debuginfo"]) == 0
    assert "loc(" in capsys.readouterr().out
    w = tmp_path / "w.npz"
    np.savez(w, w=np.array([1.0, 2.0, 3.0], np.float32))
    assert text_main.main([str(unbound), "--weights", str(w)]) == 0
    assert "graph.param" in capsys.readouterr().out
    assert text_main.main([str(tmp_path / "none.dlpc")]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "none.dlpc" in err


# ---- the first call's program of an unbound .dlpc model ----------------------------------


def test_an_unbound_model_gives_its_first_binding_a_program_of_its_own(unbound):
    model = dlpc.load(unbound)
    assert model.specialise_first
    fn = dlpc.compile(model, target="numpy")
    assert isinstance(fn, api.DynamicCompiledModel) and fn.build_first is not None
    w = _w(model)
    x2 = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    x3 = np.arange(9, dtype=np.float32).reshape(3, 3) - 4
    (y,) = fn(x2)
    np.testing.assert_array_equal(y, np.maximum(x2 + w, 0))
    assert fn.stats == {"calls": 1, "compiles": 1, "specialised": 1, "programs": 1}
    assert "tensor<2x3xf32>" in str(fn.lowered)
    (y,) = fn(x2)
    assert fn.stats == {"calls": 2, "compiles": 1, "specialised": 1, "programs": 1}
    (y,) = fn(x3)
    np.testing.assert_array_equal(y, np.maximum(x3 + w, 0))
    assert fn.stats == {"calls": 3, "compiles": 2, "specialised": 1, "programs": 2}
    assert "tensor<2x3xf32>" not in str(fn.lowered)  # the program over B
    (y,) = fn(x2)  # still the first program, not a third compile
    assert fn.stats == {"calls": 4, "compiles": 2, "specialised": 1, "programs": 2}
    (y,) = fn(x2.astype(np.float64).astype(np.float32)[:1])
    assert y.shape == (1, 3) and fn.stats["compiles"] == 2
    # the guard first: a bad shape is its one line, and no program is built for it
    again = dlpc.compile(dlpc.load(unbound), target="numpy")
    with pytest.raises(DlpcError, match=r"^error: input 'x' dim 1 is 4 but the model expects 3$"):
        again(np.ones((2, 4), np.float32))
    assert again.first is None and again.stats["programs"] == 0
    with pytest.raises(DlpcError, match=r"^error: input 'x' dim 1 is 4"):
        again.check_inputs([np.ones((2, 4), np.float32)])
    assert again.check_inputs([x2])[0] is x2 or np.array_equal(again.check_inputs([x2])[0], x2)


def test_the_first_program_is_skipped_with_any_binding_option(unbound):
    model = dlpc.load(unbound)
    for opts in ({"symbolic": False}, {"buckets": {"B": [4]}}, {"specialise": 1}):
        fn = dlpc.compile(model, target="numpy", **opts)
        assert fn.build_first is None, opts
    bound = dlpc.load(unbound, batch=2)
    assert not bound.specialise_first
    assert not isinstance(dlpc.compile(bound, target="numpy"), api.DynamicCompiledModel)
    with pytest.raises(
        DlpcError,
        match=r"^error: buckets=, max_dims= and tiles= apply to a model with symbolic dims; "
        r"this model's shapes are static$",
    ):
        dlpc.compile(bound, target="numpy", buckets={"B": [2]})
    for opt in ({"max_dims": {"B": 4}}, {"tiles": {"batch": 2}}):
        with pytest.raises(DlpcError, match=r"apply to a model with symbolic dims"):
            dlpc.compile(bound, target="numpy", **opt)


def test_bind_dims_reference_and_random_inputs_on_symbolic_dims(unbound):
    model = dlpc.load(unbound)
    assert api.bind_dims(model, {"B": 4}).module.body.block.first_op.args[0].type.get_shape() == (
        4,
        3,
    )
    one = api.bind_dims(model)  # a symbol neither gives is 1
    assert one.module.body.block.first_op.args[0].type.get_shape() == (1, 3)
    assert api.bind_dims(one) is one and api.bind_dims(one, {"B": 5}) is one
    x = np.ones((5, 3), np.float32)
    by_inputs = api.bind_dims(model, {"B": 2}, inputs=[x])  # the inputs win
    assert by_inputs.module.body.block.first_op.args[0].type.get_shape() == (5, 3)
    (y,) = api.reference(model, [x])
    np.testing.assert_array_equal(y, np.maximum(x + _w(model), 0))
    with pytest.raises(
        DlpcError,
        match=r"^error: input 'x' has symbolic dim\(s\) B: give their values, e\.g\. "
        r"random_inputs\(model, dims=\{'B': 1\}\)$",
    ):
        api.random_inputs(model)
    (r,) = api.random_inputs(model, seed=3, dims={"B": 2})
    expect = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(r, expect)


# ---- compile's and load's refusals -------------------------------------------------------


def test_compile_refuses_options_for_another_target(add):
    model = dlpc.load(add)
    with pytest.raises(DlpcError, match=r"^error: profile= applies to target 'opencl', not 'c'$"):
        dlpc.compile(model, target="c", profile="cpu")
    with pytest.raises(
        DlpcError, match=r"^error: profile= applies to target 'opencl', not 'numpy'$"
    ):
        dlpc.compile(model, target="numpy", profile="gpu")
    with pytest.raises(
        DlpcError, match=r"^error: a tuning log applies to target 'c', not 'numpy'$"
    ):
        dlpc.compile(model, target="numpy", tuning_log="log.json")
    with pytest.raises(
        DlpcError,
        match=r"^error: unsupported target 'cuda' \(expected numpy, c, opencl, dlp\)$",
    ):
        dlpc.compile(model, target="cuda")
    with pytest.raises(DlpcError, match=r"^error: target 'numpy' does not run on device cpu$"):
        dlpc.compile(model, target="numpy", device="cpu")
    with pytest.raises(DlpcError, match=r"^error: device= takes a model of static shapes$"):
        dlpc.compile(model, device="cpu", buckets={"B": [2]})


def test_device_and_symbolic_models_refuse_placement(unbound):
    with pytest.raises(DlpcError, match=r"^error: device= takes a model of static shapes$"):
        dlpc.compile(dlpc.load(unbound), device="cpu")


def test_load_refuses_dims_for_another_format_and_unknown_formats(add, tmp_path):
    with pytest.raises(
        DlpcError, match=r"^error: dims= binds a \.dlpc model's named dims, not a \.mlir model's$"
    ):
        dlpc.load(add, dims={"B": 2})
    other = tmp_path / "model.graph"
    other.write_text(ADD)
    with pytest.raises(
        DlpcError,
        match=r"^error: unknown model format '\.graph' \(expected \.dlpc, \.onnx or \.mlir\)$",
    ):
        dlpc.load(other)
    bare = tmp_path / "noext"
    bare.write_text(ADD)
    with pytest.raises(DlpcError, match=r"^error: unknown model format 'noext' "):
        dlpc.load(bare)
    assert api.load(other, format="mlir").name == "model"
    # no .npz beside it: no weights (compile then names the missing one)
    assert api.load(other, format="mlir").weights == {}


def test_a_lower_level_model_does_not_run(tmp_path):
    from dlpc.passes import pipeline

    module = pipeline.parse_module(ADD)
    loop = pipeline.lower(module, "loop", pipeline.PipelineOptions(), weights=None)
    path = tmp_path / "low.mlir"
    path.write_text(str(loop))
    model = dlpc.load(path)
    with pytest.raises(
        DlpcError,
        match=r"^error: .*low\.mlir: @main takes or returns memref<2x3xf32>, not a tensor: only "
        r"graph-level models run here \(lower-level IR compiles to source with `dlpc --emit c`\)$",
    ):
        api.random_inputs(model)


def test_comm_ops_compile_for_numpy_and_c_only(tmp_path):
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = comm.all_reduce sum %x group <world 2> : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
    path = tmp_path / "ar.mlir"
    path.write_text(text)
    model = dlpc.load(path)
    assert api._has_comm(model)
    with pytest.raises(
        DlpcError, match=r"^error: comm ops run on targets numpy and c, not 'opencl'$"
    ):
        api._compile_split(model, "opencl", 2, None, True, {})


# ---- CompiledModel's calls ----------------------------------------------------------------


def test_a_warm_compile_is_cached_and_parses_its_loop_ir_on_use(add):
    model = dlpc.load(add)
    first = dlpc.compile(model, target="c")
    again = dlpc.compile(dlpc.load(add), target="c")
    assert again.cached and isinstance(again._lowered, str)
    assert str(again.lowered) == str(first.lowered)
    assert not isinstance(again._lowered, str)
    x = np.ones((2, 3), np.float32)
    (y,) = again(x, x)
    np.testing.assert_array_equal(y, np.full((2, 3), 4.0, np.float32))
    # a checking compile never takes the cache
    assert not dlpc.compile(dlpc.load(add), target="c", check_each_pass=True).cached


def test_a_compiled_model_checks_its_inputs_on_every_path(add):
    fn = dlpc.compile(dlpc.load(add), target="numpy")
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    (y,) = fn(x, np.zeros((2, 3), np.float32))
    assert type(y) is np.ndarray
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(DlpcError, match=r"^error: input 'x' has dtype float64"):
        fn(np.ones((2, 3)), np.ones((2, 3), np.float32))
    c = dlpc.compile(dlpc.load(add), target="c")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(c(x, x)[0], np.full((2, 3), 4.0, np.float32))
    with pytest.raises(
        DlpcError, match=r"^error: input 'y' has shape 3x2 but the model expects 2x3$"
    ):
        c(x, np.ones((3, 2), np.float32))
    with pytest.raises(DlpcError, match=r"^error: input 'x' has dtype float64"):
        c(np.ones((2, 3)), x)


# ---- the pipeline's helpers ---------------------------------------------------------------


def test_the_pipelines_emit_stats_and_parse_failures():
    from dlpc.passes import pipeline

    with pytest.raises(
        DlpcError,
        match=r"^error: unsupported target 'cuda' \(expected numpy, c, opencl, dlp-c\)$",
    ):
        pipeline.emit(pipeline.parse_module(ADD), "cuda")
    with pytest.raises(
        DlpcError,
        match=r"^f\.mlir: error: malformed IR: the parser failed \(ValueError: bad\)$",
    ):
        with pipeline.parser_failures("f.mlir"):
            raise ValueError("bad\nsecond line")
    with pytest.raises(DlpcError, match=r"^f\.mlir: error: malformed IR: .*\(KeyError: \)$"):
        with pipeline.parser_failures("f.mlir"):
            raise KeyError()
    with pytest.raises(DlpcError, match=r"^mine$"):
        with pipeline.parser_failures("f.mlir"):
            raise DlpcError("mine")
    with pytest.raises(RuntimeError):
        with pipeline.parser_failures("f.mlir"):
            raise RuntimeError("not a parser's")
    module = pipeline.parse_module(ADD)
    assert pipeline.memory_stats(module) is None and pipeline.packed_stats(module) is None
    assert pipeline.dlp_scalar_kernels(module) == []
    from xdsl.dialects.builtin import IntegerAttr, StringAttr

    fn = module.body.block.first_op
    fn.attributes["dlpc.arena_bytes"] = IntegerAttr(96, 64)
    assert pipeline.memory_stats(module) is None  # both attributes or none
    fn.attributes["dlpc.intermediate_bytes"] = IntegerAttr(128, 64)
    fn.attributes["dlpc.packed_bytes"] = IntegerAttr(48, 64)
    assert pipeline.memory_stats(module) == (96, 128)
    assert pipeline.packed_stats(module) == 48
    fn.attributes["dlpc.scalar"] = StringAttr("no")  # not a dlp.kernel: not listed
    assert pipeline.dlp_scalar_kernels(module) == []
    ops, kernels = pipeline.stats(module)
    assert ops["graph.param"] == 1 and ops["graph.add"] == 1 and kernels == 2
    assert pipeline.target_of(pipeline.PipelineOptions(schedule=True), "loop") == "c"
    assert pipeline.target_of(pipeline.PipelineOptions(), "loop") is None
    assert pipeline.target_of(pipeline.PipelineOptions(target="opencl"), "dlp") == "dlp"
    assert pipeline.schedules_for("c") and pipeline.schedules_for("loop")
    assert not pipeline.schedules_for("opencl") and not pipeline.schedules_for("dlp")
    with pytest.raises(DlpcError, match=r"^error: unknown --emit kind 'x' \(expected graph, "):
        pipeline.compile_to(module, "x")


# ---- the trainer ---------------------------------------------------------------------------


def _sgd(lr=0.1, **kw):
    from dlpc.passes.train.optim import make_optimizer

    return make_optimizer("sgd", lr=lr, **kw)


def _data(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 4)).astype(np.float32)
    y = rng.integers(0, 3, rows).astype(np.int64)
    return x, y


def test_a_last_partial_batch_is_a_step_at_its_size_on_the_same_state(cls):
    x, y = _data(5)
    t = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    seen = []
    h = t.fit(x, y, shuffle=False, drop_last=False, callback=lambda e, i: seen.append((e, i)))
    # the same two steps by hand: 4 rows on this trainer's step, then 1 row on one at batch 1
    a = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    first = a.step(x[:4], y[:4])
    b = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=1, target="numpy")
    b.load({k: v for k, v in a.state.items()})
    second = b.step(x[4:], y[4:])
    for name, value in b.weights.items():
        np.testing.assert_allclose(t.weights[name], value, rtol=1e-6, atol=1e-7)
    assert t.steps_done == 2 and t.epoch == 1
    np.testing.assert_allclose(h["loss"][0], (4 * first + second) / 5, rtol=1e-6)
    batches = [i for e, i in seen if e == "batch"]
    assert [(i["batch"], i["batches"]) for i in batches] == [(0, 2), (1, 2)]
    np.testing.assert_allclose(batches[1]["mean_loss"], h["loss"][0], rtol=1e-6)
    assert list(t._partial) == [1]
    t.fit(x, y, shuffle=False, drop_last=False)  # the partial step compiled once
    assert list(t._partial) == [1] and t.steps_done == 4
    # dropped: one step an epoch
    d = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    d.fit(x, y, shuffle=False)
    assert d.steps_done == 1 and not d._partial


def test_fit_refuses_too_big_or_no_batches(cls):
    x, y = _data(6)
    t = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    with pytest.raises(DlpcError, match=r"^error: batch 1 has 6 samples, more than 4$"):
        t.fit(iter([(x[:4], y[:4]), (x, y)]))
    with pytest.raises(DlpcError, match=r"^error: no batch of 4 samples in the data$"):
        t.fit(iter([(x[:2], y[:2]), (x[2:5], y[2:5])]))
    with pytest.raises(DlpcError, match=r"^error: 3 samples are fewer than one batch of 4$"):
        t.fit(x[:3], y[:3])
    steps = t.steps_done
    h = t.fit(iter([(x[:2], y[:2]), (x[:4], y[:4])]))  # a small batch is skipped
    assert t.steps_done == steps + 1 and len(h["loss"]) == 1
    assert np.isnan(h["val_loss"][0]) and np.isnan(h["val_mse"][0])


def test_fit_names_an_npz_x_and_y_when_the_steps_names_are_not_there(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text(CLS.replace("x:", "pixels:").replace("linear(x,", "linear(pixels,"))
    x, y = _data(4, seed=1)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    a = dlpc.train.Trainer(str(path), "cross_entropy", _sgd(), batch_size=2, target="numpy")
    b = dlpc.train.Trainer(str(path), "cross_entropy", _sgd(), batch_size=2, target="numpy")
    assert a.input_names == ["pixels"]
    assert (
        a.fit(str(tmp_path / "d.npz"), shuffle=False)["loss"] == b.fit(x, y, shuffle=False)["loss"]
    )


def test_labels_and_data_are_cast_to_the_steps_dtypes(cls):
    x, y = _data(4, seed=2)
    a = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    b = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    assert a.step(x.astype(np.float64), y.astype(np.int32)) == b.step(x, y)
    assert a.step(x, y.astype(np.uint8)) == b.step(x, y)
    assert a.step(x.astype(np.int64), y) == b.step(x.astype(np.int64).astype(np.float32), y)
    cast = a._cast([x.astype(np.int32), y.astype(np.bool_)], 0)
    assert cast[0].dtype == np.float32 and cast[1].dtype == np.int64  # bool labels: ints
    kept = a._cast([x.astype(np.bool_), y.astype(np.float16)], 0)  # other kinds: the check's
    assert kept[0].dtype == np.bool_ and kept[1].dtype == np.float16
    assert a._cast([y.astype(np.int32)], 1)[0].dtype == np.int64  # from the step's input 1
    assert a._cast([x, y, y], 0)[2].dtype == np.int64  # past the step's inputs: as given
    with pytest.raises(DlpcError, match=r"has dtype float32 but the model expects int64"):
        a.step(x, y.astype(np.float32))  # a float label is not cast


def test_evaluate_reports_the_loss_and_its_metric(cls):
    x, y = _data(6, seed=3)
    t = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    w = t.weights
    logits = x @ w["fc.weight"].T + w["fc.bias"]
    scores = t.evaluate(x, y)
    assert sorted(scores) == ["accuracy", "loss"]
    z = logits - logits.max(1, keepdims=True)
    nll = -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(6), y].mean()
    np.testing.assert_allclose(scores["loss"], nll, rtol=1e-5)
    assert scores["accuracy"] == float(np.mean(logits.argmax(1) == y))
    np.testing.assert_allclose(t.predict(x), logits, rtol=1e-5, atol=1e-6)
    from dlpc.passes.train.data import ArrayDataset

    assert t.evaluate(ArrayDataset(x, y)) == scores
    h = t.fit(x[:4], y[:4], validation=(x, y), shuffle=False)
    after = t.evaluate(x, y)
    assert h["val_loss"] == [after["loss"]] and h["val_accuracy"] == [after["accuracy"]]
    assert np.isnan(h["val_mse"][0])


def test_cycle_momentum_builds_a_run_time_momentum_of_0(cls):
    x, y = _data(4, seed=4)
    plain = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    cyc = dlpc.train.Trainer(
        str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy", cycle_momentum=True
    )
    assert cyc.param_groups[0]["momentum"] == 0
    assert "momentum" in cyc.runtime_hyper()[0] and "momentum" not in plain.runtime_hyper()[0]
    for _ in range(2):  # momentum 0: plain SGD's updates
        assert cyc.step(x, y) == pytest.approx(plain.step(x, y), rel=1e-6)
    for n, v in plain.weights.items():
        np.testing.assert_allclose(cyc.weights[n], v, rtol=1e-6, atol=1e-7)
    cyc.param_groups[0]["momentum"] = 0.5  # changes between steps, no error
    cyc.step(x, y)
    with pytest.raises(
        DlpcError,
        match=r"^error: param group 0: 'momentum' is compiled out \(0 when built\); build the "
        r"trainer with cycle_momentum=True to set it; only lr can change between steps$",
    ):
        plain.param_groups[0]["momentum"] = 0.5
        plain.step(x, y)
    from dlpc.train import _momentum_built_in

    adam = dlpc.train.optim.make_optimizer("adam")
    assert _momentum_built_in(adam) is adam
    sgd9 = _momentum_built_in(_sgd(momentum=0.9))
    assert sgd9.momentum == 0.9
    sgd0 = _momentum_built_in(_sgd())
    assert sgd0.momentum == 0.9  # a placeholder: the trainer writes the declared 0
    grouped = _sgd(groups=({"params": "fc.bias", "momentum": 0.0}, {"params": "fc.w*"}))
    built = _momentum_built_in(grouped)
    assert built.groups[0]["momentum"] == 0.9 and "momentum" not in built.groups[1]
    with pytest.raises(
        DlpcError,
        match=r"^error: cycle_momentum needs an optimizer with momentum or betas, not adagrad$",
    ):
        _momentum_built_in(dlpc.train.optim.make_optimizer("adagrad"))


def test_lr_lambda_scales_the_lr_after_each_update(cls):
    x, y = _data(4, seed=5)
    t = dlpc.train.Trainer(
        str(cls),
        "cross_entropy",
        _sgd(lr=0.2),
        batch_size=4,
        target="numpy",
        lr_lambda=lambda epoch: 0.5**epoch,
    )
    assert t.lr == pytest.approx(0.2)
    t.step(x, y)
    assert t.lr == pytest.approx(0.1)
    t.step(x, y)
    assert t.lr == pytest.approx(0.05)
    acc = dlpc.train.Trainer(
        str(cls),
        "cross_entropy",
        _sgd(lr=0.2),
        batch_size=4,
        target="numpy",
        accumulate=2,
        lr_lambda=lambda epoch: 0.5**epoch,
    )
    acc.step(x, y)
    assert not acc.update_done and acc.lr == pytest.approx(0.2)
    acc.step(x, y)
    assert acc.update_done and acc.lr == pytest.approx(0.1)
    t.lr = 0.3
    assert [g["lr"] for g in t.param_groups] == [0.3]


def test_binding_refuses_other_unbound_dims_and_graph_losses_read_files(tmp_path):
    from dlpc.train import bind_batch, graph_loss

    two = tmp_path / "two.dlpc"
    two.write_text("model two(x: f32[B, N]) {\n  return relu(x)\n}\n")
    with pytest.raises(
        DlpcError,
        match=r"^error: model 'two' leaves named dim\(s\) N unbound; training needs static "
        r"shapes: load it with dims=\{'N': N\} and the batch bound$",
    ):
        bind_batch(str(two), 2)
    loaded = api.load(two, dims={"N": 3}, batch=2)
    assert bind_batch(loaded, 2) is loaded
    with pytest.raises(DlpcError, match=r"^error: model 'two' leaves named dim\(s\) N unbound"):
        bind_batch(loaded, 4)  # read again at batch 4 alone
    with pytest.raises(DlpcError, match=r"^error: no such file: .*nope\.dlpc$"):
        graph_loss(str(tmp_path / "nope.dlpc"))
    text = "model l1(p: f32[B, 3], y: f32[B, 3]) {\n  return reduce_mean(abs(p - y))\n}\n"
    path = tmp_path / "l1.dlpc"
    path.write_text(text)
    from_file, from_text = graph_loss(str(path), batch=2), graph_loss(text, batch=2)
    assert from_file.name == from_text.name == "l1"
    assert str(from_file.module) == str(from_text.module)
    assert "tensor<2x3xf32>" in str(from_file.module)


# ---- the tuner (tune/search.py, tune/measure.py) ------------------------------------------


def _tuner(tmp_path, times, **kw):
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    calls = []

    def fake(ir, script, **_):
        calls.append(script)
        return Result(True, next(times) * 1e-3)

    tuner = search.Tuner(
        parse_module(MATMUL), log=str(tmp_path / "log.json"), measure_fn=fake, **kw
    )
    return tuner, calls


def test_the_tuner_stops_after_three_rounds_of_seen_points(tmp_path):
    """Every proposal is the default point, measured first: each round of proposals is
    all seen, and the third such round ends the task (a stale count of 1 per emptied
    queue, not per seen point)."""
    tuner, calls = _tuner(tmp_path, iter([1.0] * 50), strategy="random", pool=3, batch=3)
    (task,) = tuner.tasks
    default = task.space.default()
    rounds = []
    real = tuner._proposals

    def proposals(task, measured, grid_iter):
        rounds.append(len(measured))
        return real(task, measured, grid_iter)

    tuner._proposals = proposals
    object.__setattr__(task.space, "sample", lambda rng: dict(default))
    progress = list(tuner.run(trials=20))
    assert len(progress) == 1 and len(calls) == 1
    assert rounds == [1, 1, 1]


def test_the_tuner_verifies_its_three_best_and_the_default(tmp_path):
    times = iter([5.0, 2.0, 3.0, 1.0, 4.0, 9.0, 9.0, 9.0, 9.0, 9.0])
    tuner, calls = _tuner(tmp_path, times, seed=1, verify=1)
    progress = list(tuner.run(trials=5))
    trials = [p.trial for p in progress]
    assert trials == [1, 2, 3, 4, 5, -1, -1, -1, -1]
    first = calls[:5]
    # re-measured: the three fastest (1, 2, 3 ms), then the default (5 ms, measured first)
    assert calls[5:] == [first[3], first[1], first[2], first[0]]
    assert all(p.total == 0 and p.time == pytest.approx(9e-3) for p in progress[5:])
    # the log's best by median: (1, 9) ms is 5, then the 2 ms one is 5.5, ...; 4 ms last
    assert [p.best for p in progress[5:]] == pytest.approx([2e-3, 3e-3, 4e-3, 4e-3])
    (tmp_path / "x").mkdir()
    again, calls = _tuner(tmp_path / "x", iter([3.0, 2.0, 5.0, 1.0] + [9.0] * 8), seed=1, verify=2)
    progress = list(again.run(trials=4))
    assert len(progress) == 4 + 2 * 3  # the default among the three best: three picks, twice
    assert calls[4:7] == calls[7:10] == [calls[3], calls[1], calls[0]]


def test_a_measurement_reports_each_failure_in_one_line(monkeypatch, capsys):
    import io
    import json

    from dlpc.tune import measure

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"ir": "not ir", "script": ""})))
    assert measure.main() == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ok"] is False and "\n" not in out["error"] and out["error"].startswith("ParseError")
    from test_schedule import MATMUL

    r = measure.measure(MATMUL, "", timeout=0.001)
    assert (r.ok, r.time, r.error) == (False, None, "timed out after 0.001 s")
    r = measure.measure(MATMUL, "", crash=True, timeout=60)
    assert (r.ok, r.error) == (False, "crashed (signal 6)")


# ---- the graph builder (frontends/builder.py) ----------------------------------------------


def test_the_graph_builders_refusals_name_what_is_wrong(tmp_path):
    from dlpc.frontends import builder as B
    from dlpc.frontends.builder import FrontendError, GraphBuilder

    g = GraphBuilder(name="m")
    x = g.input("x", [2, 3])
    with pytest.raises(FrontendError, match=r"^duplicate input 'x'$"):
        g.input("x", [2, 3])
    w = g.param("w", [2, 3], init=B.ones())
    with pytest.raises(FrontendError, match=r"^duplicate parameter 'w'$"):
        g.param("w", [2, 3])
    with pytest.raises(FrontendError, match=r"^unknown element type 'f31'"):
        g.input("y", [2], "f31")
    with pytest.raises(FrontendError, match=r"^unknown operator 'addd'"):
        g.op("addd", x, w)
    with pytest.raises(AttributeError):
        g.addd  # noqa: B018
    with pytest.raises(AttributeError):
        g._hidden  # noqa: B018
    with pytest.raises(FrontendError, match=r"^relu has no argument 'alpha'$"):
        g.op("relu", x, alpha=1)
    with pytest.raises(FrontendError, match=r"^reduce_sum got attribute 'keepdims' twice$"):
        g.op("reduce_sum", x, keepdims=True, keepdim=True)
    with pytest.raises(FrontendError, match=r"^reduce_sum got attribute 'axes' twice$"):
        g.op("reduce_sum", x, axes=[0], axis=[0])
    s = g.op("reduce_sum", x, axis=[1], keepdim=True)  # (aliases: axes, keepdims)
    assert s.type.get_shape() == (2, 1)
    with pytest.raises(FrontendError, match=r"^add\(lhs, rhs\) is missing operand 'rhs'$"):
        g.op("add", x)
    with pytest.raises(FrontendError, match=r"^add operand 2 must be a tensor, got "):
        g.op("add", x, "w")
    with pytest.raises(FrontendError, match=r"^300 does not fit in i8$"):
        from xdsl.dialects.builtin import i8

        g.constant(300, i8)
    with pytest.raises(FrontendError, match=r"^model 'm' has no outputs$"):
        g.module()
    with pytest.raises(FrontendError, match=r"^a model must return at least one value$"):
        g.output()
    y = g.add(x, w)
    assert g.add(x, 2.0).owner.operands[1].owner.name == "graph.constant"
    g.output(y)
    with pytest.raises(FrontendError, match=r"^the model already has outputs$"):
        g.output(y)
    module = g.module()
    assert g.module() is module
    with pytest.raises(FrontendError, match=r"^the module is finished; no ops can be added$"):
        g.relu(x)
    assert str(B.ones()) == "ones()" and str(B.full(2.5)) == "full(value=2.5)"
    assert str(B.uniform(1)) == "uniform(seed=1, low=-1.0, high=1.0)"
    np.testing.assert_array_equal(B.zeros().materialize((2,), "f32", "z"), np.zeros(2, np.float32))
    np.testing.assert_array_equal(B.full(2.5).materialize((2,), "f32", "f"), [2.5, 2.5])
    u = B.uniform(seed=3, low=1.0, high=2.0).materialize((50,), "f32", "u")
    assert u.dtype == np.float32 and 1.0 <= u.min() and u.max() < 2.0
    weights = g.weights()
    np.testing.assert_array_equal(weights["w"], np.ones((2, 3), np.float32))
    np.savez(tmp_path / "w.npz", w=np.full((2, 3), 4.0))
    got = g.weights(str(tmp_path / "w.npz"))
    assert got["w"].dtype == np.float32 and got["w"][0, 0] == 4.0
    with pytest.raises(
        FrontendError,
        match=r"^weight 'w' in .*bad\.npz has shape \[3\] but the parameter is declared f32\[2, 3\]$",
    ):
        np.savez(tmp_path / "bad.npz", w=np.zeros(3))
        g.weights(str(tmp_path / "bad.npz"))
    with pytest.raises(FrontendError, match=r"^no such weights file: .*none\.npz$"):
        g.weights(str(tmp_path / "none.npz"))
    h = GraphBuilder()
    h.param("v", [2], init=np.array([1, 2]))
    h.param("u", [2])
    assert h.weights({"u": [3, 4]})["v"].dtype == np.float32
    with pytest.raises(
        FrontendError, match=r"^parameter 'u' has no initializer and no weights were given$"
    ):
        h.weights()
    with pytest.raises(
        FrontendError, match=r"^parameter 'u' is missing from the weights and has no initializer$"
    ):
        h.weights({})


# ---- model.py ----------------------------------------------------------------------------


def test_a_model_without_a_graph_says_why():
    from dlpc.model import InputSpec, Model, Specialiser

    f32 = np.dtype(np.float32)
    per_shape = Specialiser((InputSpec("x", (2,), f32),), [], lambda values: None)  # type: ignore[arg-type,return-value]
    m = Model(None, {}, "m", "dir/m.onnx", specialiser=per_shape)
    with pytest.raises(
        DlpcError,
        match=r"^dir/m\.onnx: error: the model's inputs have symbolic dims, so it has one graph "
        r"per input shape: dlpc\.compile\(model\) builds them at call time \(or load it with "
        r"input_shapes=\.\.\.\)$",
    ):
        m.module  # noqa: B018
    per_value = Specialiser(
        (InputSpec("x", (2,), f32), InputSpec("s", (2,), np.dtype(np.int64))),
        ["s", "t"],
        lambda values: None,  # type: ignore[arg-type,return-value]
    )
    m = Model(None, {}, "m", specialiser=per_value)
    with pytest.raises(
        DlpcError,
        match=r"^m: error: the values of input\(s\) 's', 't' decide the model's shapes, so it has "
        r"one graph per value: dlpc\.compile\(model\) builds them at call time$",
    ):
        m.module  # noqa: B018
    assert m.input_names == ["x", "s"]
    with pytest.raises(DlpcError, match=r"^model: error: the values of input\(s\)  decide"):
        Model(None).module  # noqa: B018
    from dlpc.passes import pipeline

    module = pipeline.parse_module(ADD)
    m.module = module
    assert m.ir is module and m.module is module and m.param_names == ["w"]
    key = per_value.key({"x": np.ones(2, f32), "s": np.array([1, 2]), "t": np.int32(3)})
    assert key == (
        ("s", "<i8", (2,), np.array([1, 2]).tobytes()),
        ("t", "<i4", (1,), np.int32(3).tobytes()),  # (ascontiguousarray: at least 1-d)
    )


# ---- written after the api seed-44 draw, for its survivors ------------------------------------


def test_a_passs_time_is_its_end_minus_its_start_on_a_fake_clock(monkeypatch):
    """pipeline.timing on a fake clock: fold-params started at 100 and ended at 100.25
    takes 0.25 s (seed 44's pipeline.py:290, `-` -> `//`, gave 1.0); none once the
    collector is closed; format_timing's table."""
    import types

    from dlpc.passes import pipeline

    clock = iter([100.0, 100.25, 7.0, 9.5, 50.0])
    monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    module = pipeline.parse_module(ADD)
    with pipeline.timing() as rows:
        pipeline.fold_weights(module, {"w": np.ones((2, 3), np.float32)})
        pipeline.fold_weights(module, {"w": np.ones((2, 3), np.float32)})
    assert rows == [("fold-params", 0.25), ("fold-params", 2.5)]
    pipeline.fold_weights(module, {})  # no collector open: the end is not read
    assert next(clock, None) is None and len(rows) == 2
    assert pipeline.format_timing(rows).splitlines() == [
        "  seconds   share  pass",
        "   0.2500    9.1%  fold-params",
        "   2.5000   90.9%  fold-params",
        "   2.7500  100.0%  total (2 passes)",
    ]


def test_nested_timing_collectors_each_get_every_row_inside_them(monkeypatch):
    """Two nested timing() blocks whose rows are equal when the inner one closes: the
    inner's exit closes the inner one (before d845cdf, list.remove took the outer one
    and the outer's exit raised ValueError)."""
    import types

    from dlpc.passes import pipeline

    clock = iter([100.0, 100.25, 7.0, 9.5])
    monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    module = pipeline.parse_module(ADD)
    with pipeline.timing() as outer:
        with pipeline.timing() as inner:
            pipeline.fold_weights(module, {"w": np.ones((2, 3), np.float32)})
        pipeline.fold_weights(module, {"w": np.ones((2, 3), np.float32)})
    assert inner == [("fold-params", 0.25)]
    assert outer == [("fold-params", 0.25), ("fold-params", 2.5)]


def test_a_row_reduction_has_no_channel_blocks():
    """A reduction of one spatial loop (a row sum) has no channel loop: its `cb` knob is
    [1], no blocking, as its default point and the tuning log's records say (api seed
    44's survivor space.py:223, `or [1]` -> `or [0]`, gave cb 0)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
    from dlpc.tune.space import space_for

    module = parse_module(
        "func.func @main(%x: tensor<8x16xf32>) -> tensor<8xf32> {\n"
        "  %s = graph.reduce_sum %x {axes = array<i64: 1>} : "
        "(tensor<8x16xf32>) -> tensor<8xf32>\n"
        "  func.return %s : tensor<8xf32>\n}\n"
    )
    lower(module, "loop", PipelineOptions(opt_level=1), weights={})
    (k,) = [k.sym for k in kernels(module)]
    space = space_for(module, k)
    assert space is not None and space.template == "reduction"
    assert space.knobs["cb"] == [1] and space.knobs["par"] == ["auto", "i0"]
    assert space.default() == {
        "cb": 1,
        "wt": 0,
        "unroll_r": False,
        "par": "auto",
        "im2col": False,
    }


def test_the_checkers_random_indices_stay_inside_the_gathered_dim():
    """passes/check.py's `_int_bound`: an int input used as graph.gather's indices (its
    operand 1) gets random values below the gathered dim, the smallest over its uses;
    one used as gathered data keeps the default (api seed 44's survivors check.py:118,
    `use.index == 1` -> `!= 1` and `> 1`)."""
    from dlpc.passes import check
    from dlpc.passes.pipeline import parse_module

    module = parse_module(
        "func.func @main(%t: tensor<5x3xf32>, %u: tensor<7x3xf32>, %i: tensor<4xi64>, "
        "%j: tensor<2xi64>, %d: tensor<6x2xi64>) -> (tensor<4x3xf32>, tensor<2x3xf32>, "
        "tensor<4x2xi64>) {\n"
        "  %g = graph.gather %t, %i {axis = 0 : i64} : (tensor<5x3xf32>, tensor<4xi64>) -> "
        "tensor<4x3xf32>\n"
        "  %h = graph.gather %u, %j {axis = -2 : i64} : (tensor<7x3xf32>, tensor<2xi64>) -> "
        "tensor<2x3xf32>\n"
        "  %k = graph.gather %d, %i {axis = 0 : i64} : (tensor<6x2xi64>, tensor<4xi64>) -> "
        "tensor<4x2xi64>\n"
        "  func.return %g, %h, %k : tensor<4x3xf32>, tensor<2x3xf32>, tensor<4x2xi64>\n}\n"
    )
    t, u, i, j, d = module.body.block.first_op.args
    assert check._int_bound(i) == 5  # min(5, 6) over its two uses
    assert check._int_bound(j) == 7  # axis -2 of [7, 3]
    assert check._int_bound(d) == 10  # gathered, not indices
    assert check._int_bound(d, default=3) == 3


# ---- more of the area's corners (after seed 44, before any later draw) ------------------------


def test_the_grid_tuner_measures_consistent_grid_points_in_order(tmp_path):
    """strategy="grid": after the default point, the grid's points in order, those that
    are not `consistent` skipped, `batch` of them per round out of `pool` proposals."""
    from dlpc.tune.space import consistent

    tuner, calls = _tuner(tmp_path, iter([1.0] * 50), strategy="grid", pool=3, batch=2)
    (task,) = tuner.tasks
    space = task.space
    from dlpc.passes.pipeline import parse_module

    grid = [p for p in space.grid() if consistent(space, p)][:40]
    progress = list(tuner.run(trials=5))
    assert len(progress) == 5
    ir = parse_module(task.ir)
    want = [space.script(ir, p) for p in [space.default(), *grid]]
    want = list(dict.fromkeys(want))  # (the default may be a grid point: measured once)
    assert calls == want[:5]


def test_a_damaged_cached_reference_is_recomputed_with_a_warning(capsys, monkeypatch, tmp_path):
    from test_schedule import MATMUL

    from dlpc.backends.c import find_main, memref_info
    from dlpc.backends.runtime import cbuild
    from dlpc.dialects.graph import numpy_dtype
    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import measure

    monkeypatch.setattr(cbuild, "cache_dir", lambda: tmp_path)
    base = parse_module(MATMUL)
    rng = np.random.default_rng(0)
    specs = [memref_info(a.type) for a in find_main(base).body.block.args]
    arrays = [rng.standard_normal(s).astype(numpy_dtype(e)) for s, e in specs]
    first = measure._reference(base, arrays)
    (cached,) = list(tmp_path.glob("tune-ref-*.npz"))
    again = measure._reference(base, arrays)  # read back: no build
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    cached.write_bytes(b"not an npz")
    fixed = measure._reference(base, arrays)
    err = capsys.readouterr().err
    assert f"dlpc: warning: cached reference {cached} is damaged (" in err
    assert err.rstrip().endswith("); recomputing it")
    for a, b in zip(first, fixed):
        np.testing.assert_array_equal(a, b)
    assert np.load(cached).files == [f"a{n}" for n in range(len(arrays))]


def test_the_trainers_state_and_option_checks(cls, tmp_path):
    x, y = _data(4, seed=8)
    t = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    with pytest.raises(
        DlpcError, match=r"^error: state 'fc\.bias' has shape \(2,\), expected \(3,\)$"
    ):
        t.load({**t.state, "fc.bias": np.zeros(2, np.float32)})
    w = {"fc.weight": np.full((3, 4), 0.5, np.float32), "fc.bias": np.zeros(3, np.float32)}
    np.savez(tmp_path / "w.npz", **w)
    u = dlpc.train.Trainer(
        str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy", weights=tmp_path / "w.npz"
    )
    np.testing.assert_array_equal(u.weights["fc.weight"], w["fc.weight"])
    g = dlpc.train.Trainer(
        str(cls),
        "cross_entropy",
        _sgd(lr=0.1),
        batch_size=4,
        target="numpy",
        param_groups=[{"params": "fc.bias", "lr": 1e-30}],
    )
    before = g.weights
    g.step(x, y)
    np.testing.assert_array_equal(g.weights["fc.bias"], before["fc.bias"])  # lr 1e-30
    assert not np.array_equal(g.weights["fc.weight"], before["fc.weight"])
    assert [grp["lr"] for grp in g.param_groups] == [1e-30, 0.1]
    loss = "model l(p: f32[B, 3], y: f32[B, 3]) {\n  return reduce_mean(abs(p - y))\n}\n"
    gl = dlpc.train.Trainer(str(cls), loss, _sgd(), batch_size=4, target="numpy")
    with pytest.raises(DlpcError, match=r"^error: evaluate got no samples$"):
        gl.evaluate(x[:0], np.zeros((0, 3), np.float32))


def test_levels_of_functions_the_checker_runs():
    from xdsl.dialects import func
    from xdsl.dialects.builtin import MemRefType, f32

    from dlpc.passes import check
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module

    graph_module = parse_module(ADD)
    (fn,) = [op for op in graph_module.ops if isinstance(op, func.FuncOp)]
    assert check.level_of(fn) == "graph"
    te = lower(parse_module(ADD), "te", PipelineOptions(), weights=None)
    assert check.level_of(next(op for op in te.ops if isinstance(op, func.FuncOp))) == "te"
    loop = lower(parse_module(ADD), "loop", PipelineOptions(), weights=None)
    assert check.level_of(next(op for op in loop.ops if isinstance(op, func.FuncOp))) == "loop"
    empty = func.FuncOp("f", ([MemRefType(f32, [2])], []))
    empty.body.block.add_op(func.ReturnOp())
    assert check.level_of(empty) == "loop"  # a memref argument, no op saying so


BIG = """
func.func @main(%x: tensor<64x4096xf32>) -> tensor<64x4096xf32> {
  %r = graph.relu %x : (tensor<64x4096xf32>) -> tensor<64x4096xf32>
  %s = graph.mul %r, %x : (tensor<64x4096xf32>, tensor<64x4096xf32>) -> tensor<64x4096xf32>
  func.return %s : tensor<64x4096xf32>
}
"""


def test_a_batch_that_outgrows_the_caches_runs_chunk_after_chunk(tmp_path):
    """C with folded weights: a per-sample graph whose batch's working set exceeds the
    budget (512 KiB per thread of the team) is compiled for the largest chunk that fits
    and run chunk by chunk; batch_chunks=False, fold_weights=False or check_each_pass
    compile the whole batch."""
    import os
    import re

    from dlpc.backends.runtime.cbuild import CFunction, omp_threads
    from dlpc.backends.runtime.chunks import BatchChunks
    from dlpc.passes.graph.rebatch import CHUNK_BUDGET_BYTES, chunk_plan

    path = tmp_path / "big.mlir"
    path.write_text(BIG)
    model = dlpc.load(path)
    team = omp_threads(len(os.sched_getaffinity(0)))
    plan = chunk_plan(model.module, CHUNK_BUDGET_BYTES * max(1, team))
    assert plan is not None and plan[0] == 64 and 1 <= plan[1] < 64 and 64 % plan[1] == 0
    fn = dlpc.compile(model, target="c")
    assert isinstance(fn._direct, BatchChunks) and isinstance(fn.artifact, CFunction)
    rows = {int(r) for r in re.findall(r"memref<(\d+)x4096xf32>", str(fn.lowered))}
    assert rows == {plan[1]}
    x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
    np.testing.assert_array_equal(fn(x)[0], np.maximum(x, 0) * x)
    for kw in ({"batch_chunks": False}, {"fold_weights": False}):
        whole = dlpc.compile(model, target="c", **kw)
        assert isinstance(whole._direct, CFunction), kw
        assert {int(r) for r in re.findall(r"memref<(\d+)x4096xf32>", str(whole.lowered))} == {64}


def test_a_compiled_model_moves_to_a_runtime_device(add):
    fn = dlpc.compile(dlpc.load(add), target="c")
    placed = fn.to("cpu")
    assert isinstance(placed, api.DeviceModel) and str(placed.device) == "cpu"
    x = np.ones((2, 3), np.float32)
    (y,) = placed(x, x)
    assert type(y) is np.ndarray
    np.testing.assert_array_equal(y, np.full((2, 3), 4.0, np.float32))
    with pytest.raises(DlpcError, match=r"^error: the model takes 2 inputs, 1 given$"):
        placed(x)
    with pytest.raises(
        DlpcError, match=r"^error: input 1 is \[3, 2\] float32, the model takes \[2, 3\] float32$"
    ):
        placed(x, np.ones((3, 2), np.float32))


def test_a_loaded_state_sets_the_groups_run_time_hyper_parameters(cls):
    """Adam's run-time hyper-parameters live in the state (`opt.g0.beta1`, ...): loading
    a state sets the param group's betas and lr from it; a state without
    them keeps the trainer's."""
    from dlpc.passes.train.optim import make_optimizer

    t = dlpc.train.Trainer(
        str(cls), "cross_entropy", make_optimizer("adam", lr=0.01), batch_size=4, target="numpy"
    )
    state = t.state
    hyper = sorted(n for n in state if n.startswith("opt.g0."))
    assert hyper == ["opt.g0.beta1", "opt.g0.beta2", "opt.g0.lr"]  # (weight decay 0: compiled out)
    state["opt.g0.beta1"] = np.asarray(0.5, state["opt.g0.beta1"].dtype)
    state["opt.g0.beta2"] = np.asarray(0.75, state["opt.g0.beta2"].dtype)
    state["opt.g0.lr"] = np.asarray(0.125, state["opt.g0.lr"].dtype)
    t.load(state)
    group = t.param_groups[0]
    assert group["betas"] == (0.5, 0.75) and group["lr"] == 0.125 and t.lr == 0.125
    t.load({n: v for n, v in state.items() if not n.startswith("opt.g0.")})
    assert t.param_groups[0]["betas"] == (0.5, 0.75)  # kept
    x, y = _data(4, seed=9)
    t.step(x, y)
    assert float(t.state["opt.g0.beta1"]) == 0.5


def test_a_c_trainer_predicts_as_the_numpy_one(cls):
    x, _ = _data(6, seed=10)
    c = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="c")
    n = dlpc.train.Trainer(str(cls), "cross_entropy", _sgd(), batch_size=4, target="numpy")
    np.testing.assert_allclose(c.predict(x), n.predict(x), rtol=1e-5, atol=1e-6)
    assert c.predict(x).shape == (6, 3)


def test_which_gemm_tiles_are_consistent():
    """tune/space.consistent on the 24 x 64 (k 16) matmul: the dot kernel's block must
    divide the output, have at most DOT_ROWS rows and MAX_DOT products; a gemm tile at
    most MAX_MR x MAX_NR, dividing M and its mc block unless rows have a remainder tile,
    N and nc unless both do; gemv points always."""
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune.space import consistent, space_for

    space = space_for(parse_module(MATMUL), "mm")
    assert space is not None
    base = dict(space.default(), mc=24, nc=64, micro="gemm", tail="none", gemv=False)
    assert consistent(space, dict(base, mr=4, nr=16))
    assert not consistent(space, dict(base, mr=5, nr=16))  # 24 % 5
    assert not consistent(space, dict(base, mr=4, nr=16, mc=6))  # mc 6 % 4
    assert not consistent(space, dict(base, mr=4, nr=24))  # 64 % 24
    assert not consistent(space, dict(base, mr=4, nr=16, nc=24))  # nc 24 % 16
    assert consistent(space, dict(base, mr=5, nr=16, tail="rows"))
    assert not consistent(space, dict(base, mr=4, nr=24, tail="rows"))
    assert consistent(space, dict(base, mr=5, nr=24, tail="both"))
    assert not consistent(space, dict(base, mr=25, nr=16, tail="both"))  # > MAX_MR 24
    assert consistent(space, dict(base, mr=24, nr=128, tail="both"))
    assert not consistent(space, dict(base, mr=24, nr=129, tail="both"))  # > MAX_NR 128
    dot = dict(base, micro="dot")
    assert consistent(space, dict(dot, mr=8, nr=2))  # 8 rows, 16 products
    assert consistent(space, dict(dot, mr=6, nr=4))  # 24 products: MAX_DOT
    assert not consistent(space, dict(dot, mr=12, nr=1))  # > DOT_ROWS 8
    assert not consistent(space, dict(dot, mr=8, nr=4))  # 32 products
    assert not consistent(space, dict(dot, mr=5, nr=1))  # 24 % 5
    assert not consistent(space, dict(dot, mr=2, nr=3))  # 64 % 3
    assert consistent(space, dict(base, gemv=True, mr=5, nr=3))


def test_one_tuning_task_per_kernel_signature_biggest_first(tmp_path):
    """tune/search.tasks_of: two 16 -> 16 linears are one task (the first, linear_0), the
    16 -> 32 one another; the task of more work first; elementwise kernels none."""
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune.search import tasks_of

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[8, 16]) {\n"
        "  param w1: f32[16, 16] = kaiming(seed=1)\n"
        "  param w2: f32[16, 16] = kaiming(seed=2)\n"
        "  param w3: f32[32, 16] = kaiming(seed=3)\n"
        "  return linear(relu(linear(relu(linear(x, w1)), w2)), w3)\n}\n"
    )
    module = api.load(path).module.clone()
    lower(module, "loop", PipelineOptions(opt_level=1), weights=None)
    tasks = tasks_of(module)
    assert [(t.kernel, t.flops) for t in tasks] == [("linear_4", 8192), ("linear_0", 4096)]
    assert len({t.sig for t in tasks}) == 2 and all(t.space.template == "gemm" for t in tasks)


# ---- written after the api seed-45 draw, for its survivors ------------------------------------


def test_every_pass_but_autodiff_keeps_every_result():
    """check.kept_results: the pairs a pass must keep equal are every result for every
    pass but graph-autodiff, including passes named before it in sort order (api seed
    45's survivor check.py:205, `==` -> `<=`, took fold-params for autodiff)."""
    from dlpc.passes import check

    for name in ("fold-params", "dlp-reshape-aliases", "graph-a", "graph-autodiff-x", "te-to-loop"):
        assert check.kept_results(name, None, 3) == [(0, 0), (1, 1), (2, 2)], name
    assert check.kept_results("graph-autodiff", None, 3) == [(0, 0)]


def test_the_chunk_budget_is_per_thread_of_the_team(tmp_path):
    """A relu over [64, 2048] f32 holds 16 KiB a row (operand and result): on a team of
    one thread the 512 KiB budget takes 32 rows exactly, on more the whole batch fits
    (no chunks); the budget is CHUNK_BUDGET_BYTES times the team, not less (api seed
    45's survivor api.py:485, `*` -> `-`, chunked 16 rows)."""
    import os
    import re

    from dlpc.backends.runtime.cbuild import CFunction, omp_threads
    from dlpc.backends.runtime.chunks import BatchChunks

    path = tmp_path / "relu.mlir"
    path.write_text(
        "func.func @main(%x: tensor<64x2048xf32>) -> tensor<64x2048xf32> {\n"
        "  %r = graph.relu %x : (tensor<64x2048xf32>) -> tensor<64x2048xf32>\n"
        "  func.return %r : tensor<64x2048xf32>\n}\n"
    )
    fn = dlpc.compile(dlpc.load(path), target="c")
    rows = {int(r) for r in re.findall(r"memref<(\d+)x2048xf32>", str(fn.lowered))}
    if omp_threads(len(os.sched_getaffinity(0))) == 1:
        assert isinstance(fn._direct, BatchChunks) and rows == {32}
    else:
        assert isinstance(fn._direct, CFunction) and rows == {64}
    x = np.random.default_rng(1).standard_normal((64, 2048)).astype(np.float32)
    np.testing.assert_array_equal(fn(x)[0], np.maximum(x, 0))


def test_a_graph_loss_builds_its_evaluator_once(cls):
    """A graph loss's evaluate on a fresh trainer builds the model's evaluator (before any
    predict) and keeps it for later calls (api seed 45's survivor train.py:634, `is None`
    negated: no evaluator on a fresh trainer, a new one every call after)."""
    x, _ = _data(4, seed=11)
    y = np.zeros((4, 3), np.float32)
    loss = "model l(p: f32[B, 3], y: f32[B, 3]) {\n  return reduce_mean(abs(p - y))\n}\n"
    t = dlpc.train.Trainer(str(cls), loss, _sgd(), batch_size=4, target="numpy")
    assert t._evaluator is None
    w = t.weights
    want = float(np.mean(np.abs(x @ w["fc.weight"].T + w["fc.bias"])))
    assert t.evaluate(x, y)["loss"] == pytest.approx(want, rel=1e-6)
    built = t._evaluator
    assert built is not None
    assert t.evaluate(x, y)["loss"] == pytest.approx(want, rel=1e-6)
    assert t._evaluator is built


def test_the_first_program_serves_only_its_own_dtypes(unbound):
    """After the first call (f32 [2, 3]), arrays of that shape in another dtype, even one
    that casts safely to f32, do not go to the first call's program: the guard refuses
    them and counts no call (api seed 45's survivor api.py:652, `x.dtype == d` -> `<=`,
    sent them to it and counted each)."""
    fn = dlpc.compile(dlpc.load(unbound), target="numpy")
    fn(np.ones((2, 3), np.float32))
    for dtype in (np.float16, np.int8, np.bool_):
        with pytest.raises(
            DlpcError, match=rf"^error: input 'x' has dtype {np.dtype(dtype).name} but the model"
        ):
            fn(np.ones((2, 3), dtype))
    assert fn.stats == {"calls": 1, "compiles": 1, "specialised": 1, "programs": 1}


def test_a_cast_takes_its_element_type_by_name_or_as_a_type():
    """coerce_attr of a `type` attribute: a DTYPES name becomes its type, a type is kept,
    anything else is refused (api seed 45's survivor builder.py:190, `not isinstance`
    -> `isinstance`, refused every name)."""
    from xdsl.dialects.builtin import f16, i32

    from dlpc.frontends.builder import OPS, FrontendError, GraphBuilder, coerce_attr

    cast = OPS["cast"]
    assert coerce_attr(cast, "to", "to", "f16") == f16
    assert coerce_attr(cast, "to", "to", "i32") == i32
    assert coerce_attr(cast, "to", "to", f16) is f16
    with pytest.raises(FrontendError, match=r"^cast argument 'to' expects an element type \("):
        coerce_attr(cast, "to", "to", 16)
    g = GraphBuilder()
    x = g.input("x", [2], "f32")
    assert str(g.cast(x, to="f16").type) == "tensor<2xf16>"


def test_a_reduction_over_a_row_of_4_has_a_tuning_space():
    """space_for: a reduction whose last spatial loop runs 4 times has the reduction
    template's space, one of 3 none (api seed 45's survivor space.py:220, `< 4` ->
    `<= 4`)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
    from dlpc.tune.space import space_for

    def space(rows: int):
        module = parse_module(
            f"func.func @main(%x: tensor<{rows}x16xf32>) -> tensor<{rows}xf32> {{\n"
            f"  %s = graph.reduce_sum %x {{axes = array<i64: 1>}} : "
            f"(tensor<{rows}x16xf32>) -> tensor<{rows}xf32>\n"
            f"  func.return %s : tensor<{rows}xf32>\n}}\n"
        )
        lower(module, "loop", PipelineOptions(opt_level=1), weights={})
        (k,) = [k.sym for k in kernels(module)]
        return space_for(module, k)

    four = space(4)
    assert four is not None and four.template == "reduction" and four.knobs["cb"] == [1]
    assert space(3) is None


# ---- written after the api seed-46 draw, for its survivors ------------------------------------


def test_initialisers_defaults_and_their_seeds(unbound):
    """An initialiser's omitted arguments take the table's defaults: normal(seed=1) is
    N(0, 1) from default_rng(1), uniform [-1, 1), kaiming's gain sqrt(2); a seed left out
    is the crc32 of the parameter's name (api seed 46's survivor builder.py:215, normal's
    std 1.0 -> 0.0: a .dlpc `normal(seed=1)` weight was all zeros)."""
    import math
    import zlib

    from dlpc.frontends.builder import make_initializer

    def drawn(kind, **kw):
        return make_initializer(kind, **kw).materialize((2, 8), "f32", "p")

    f32 = np.float32
    np.testing.assert_array_equal(
        drawn("normal", seed=1), np.random.default_rng(1).normal(0.0, 1.0, (2, 8)).astype(f32)
    )
    np.testing.assert_array_equal(
        drawn("uniform", seed=2), np.random.default_rng(2).uniform(-1.0, 1.0, (2, 8)).astype(f32)
    )
    np.testing.assert_array_equal(
        drawn("kaiming", seed=3),
        np.random.default_rng(3).normal(0.0, math.sqrt(2.0) / math.sqrt(8), (2, 8)).astype(f32),
    )
    np.testing.assert_array_equal(
        drawn("normal"),
        np.random.default_rng(zlib.crc32(b"p")).normal(0.0, 1.0, (2, 8)).astype(f32),
    )
    # the text frontend's `normal(seed=1)`, std omitted
    w = dlpc.load(unbound, batch=1).weights["w"]
    np.testing.assert_array_equal(w, np.random.default_rng(1).normal(0.0, 1.0, 3).astype(f32))


def test_a_placed_model_takes_tensors_on_its_device_or_moves_them(add):
    """DeviceModel called on tensors: one on its own device is used as it is, one on
    another device is moved there first; tensors in, tensors of the same class out (api
    seed 46's survivor api.py:623, `x.device is not dev` -> `x.device >= dev`: devices
    have no order, a TypeError)."""
    from dlpc.runtime import device as devices
    from dlpc.runtime.tensor import TensorView

    placed = dlpc.compile(dlpc.load(add), target="c").to("cpu")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = TensorView.from_numpy(x, placed.device)
    (y,) = placed(a, a)
    assert isinstance(y, TensorView) and y.device is placed.device
    np.testing.assert_array_equal(y.numpy(), 2 * (x + x))
    try:
        other = devices.device("opencl:0")
    except Exception:  # noqa: BLE001 - no OpenCL device here: the same-device case only
        return
    b = TensorView.from_numpy(x, other)
    (z,) = placed(b, a)
    assert z.device is placed.device
    np.testing.assert_array_equal(z.numpy(), 2 * (x + x))


def test_the_tuners_trials_are_shared_by_each_tasks_work(tmp_path):
    """Tuner.run splits `trials` over the tasks by their work: 3 trials over tasks of
    8192 and 4096 flops are 2 and 1 (api seed 46's survivor search.py:158, `/` -> `<<`,
    gave the first task every trial)."""
    from dlpc.passes.pipeline import PipelineOptions, lower
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[8, 16]) {\n"
        "  param w1: f32[16, 16] = kaiming(seed=1)\n"
        "  param w3: f32[32, 16] = kaiming(seed=3)\n"
        "  return linear(relu(linear(x, w1)), w3)\n}\n"
    )
    module = api.load(path).module.clone()
    lower(module, "loop", PipelineOptions(opt_level=1), weights=None)
    times = iter([3.0, 2.0, 1.0, 4.0, 5.0])
    tuner = search.Tuner(
        module,
        log=str(tmp_path / "log.json"),
        measure_fn=lambda ir, script, **kw: Result(True, next(times) * 1e-3),
    )
    assert [(t.kernel, t.flops) for t in tuner.tasks] == [("linear_2", 8192), ("linear_0", 4096)]
    progress = list(tuner.run(trials=3))
    assert [p.kernel for p in progress] == ["linear_2", "linear_2", "linear_0"]
    assert [p.trial for p in progress] == [1, 2, 3]


def test_an_extracted_kernel_keeps_the_globals_it_reads():
    """tune/measure.extract_kernel on a matmul over a folded weight: the new module has the
    weight's memref.global (found by name) and @main runs the kernel alone on its buffers
    (api seed 46's survivor measure.py:65, `==` -> `is` on the symbol's name: the global
    was left out)."""
    from xdsl.dialects import memref

    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
    from dlpc.tune.measure import extract_kernel

    module = parse_module(
        "func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
        '  %w = graph.param "w" : tensor<8x8xf32>\n'
        "  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>\n"
        "  func.return %y : tensor<4x8xf32>\n}\n"
    )
    lower(module, "loop", PipelineOptions(opt_level=1), weights={"w": np.eye(8, dtype=np.float32)})
    module = parse_module(str(module))  # (as a loop-level file: names parsed apart)
    (k,) = [k.sym for k in kernels(module)]
    small = extract_kernel(module, k)
    globals_ = [op for op in small.ops if isinstance(op, memref.GlobalOp)]
    assert [g.sym_name.data for g in globals_] == ["__constant_0"]
    small.verify()
    main = small.body.block.last_op
    assert [a.type.get_shape() for a in main.body.block.args] == [(4, 8), (4, 8)]


def test_a_reduction_may_parallelise_a_loop_of_two():
    """The reduction template's `par` knob: the first two spatial loops running more than
    once, a loop of 2 included (api seed 46's survivor space.py:226, `> 1` -> `> 2`)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
    from dlpc.tune.space import space_for

    module = parse_module(
        "func.func @main(%x: tensor<2x8x16xf32>) -> tensor<2x8xf32> {\n"
        "  %s = graph.reduce_sum %x {axes = array<i64: 2>} : "
        "(tensor<2x8x16xf32>) -> tensor<2x8xf32>\n"
        "  func.return %s : tensor<2x8xf32>\n}\n"
    )
    lower(module, "loop", PipelineOptions(opt_level=1), weights={})
    (k,) = [k.sym for k in kernels(module)]
    space = space_for(module, k)
    assert space is not None and space.knobs["par"] == ["auto", "i0", "i1"]


def test_a_target_whose_runtime_does_not_import_is_one_line(add, monkeypatch):
    """api._runtime: a runtime module that fails to import (a missing dependency) is a
    one-line DlpcError naming the target (api seed 46's survivor api.py:281, the
    ImportError handler replaced)."""
    import sys

    monkeypatch.setitem(sys.modules, "dlpc.backends.runtime.dlp_sim", None)
    with pytest.raises(DlpcError, match=r"^error: target 'dlp' is not available \("):
        api._runtime("dlp", dlpc.load(add).module, "add")
