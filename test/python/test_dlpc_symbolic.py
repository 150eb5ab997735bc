"""A `.dlpc` model's named dims (`x: f32[B, 784]`) stay symbolic unless bound (issue 29):
`dlpc.load` gives the symbolic model, `dlpc.compile` compiles it once and the program
serves every batch; `batch=N` / `dims={...}` bind; a bad binding is one line; training
binds the batch from its batch size; DLP C binds at call time; `dlpc-run` runs the
symbolic model on inputs of any size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.reference import graph as ref
from dlpc.tools import dlpc_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = EXAMPLES / "mlp.dlpc"


def first_shape(model: api.Model) -> tuple:
    return tuple(ref.graph.shape_of(ref.main_func(model.module).args[0]))


def test_named_dims_are_symbolic_unless_bound():
    from dlpc.dialects.symdims import is_symbolic

    assert is_symbolic(first_shape(dlpc.load(MLP)))
    assert first_shape(dlpc.load(MLP, batch=4)) == (4, 784)
    assert first_shape(dlpc.load(MLP, dims={"B": 3})) == (3, 784)
    assert first_shape(api.load(MLP, batch=1)) == (1, 784)


def run_batches(fn, model, batches):
    rng = np.random.default_rng(0)
    for batch in batches:
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        (y,) = fn(x)
        (want,) = api.reference(model, [x])
        assert y.shape == (batch, 10)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["c", "numpy"])
def test_one_compile_serves_every_batch(target):
    """Asked to be symbolic, the model compiles once: one program for every batch."""
    model = dlpc.load(MLP, batch="symbolic")
    fn = dlpc.compile(model, target=target)
    run_batches(fn, model, (1, 3, 64))
    assert fn.stats["compiles"] == 1 and fn.stats["calls"] == 3


@pytest.mark.parametrize("target", ["c", "numpy"])
def test_the_first_binding_gets_its_own_program(target):
    """Left unbound, the first call's batch gets its own (static, faster) program and the
    one program serves every other batch: at most 2 compiles whatever the batches."""
    model = dlpc.load(MLP)
    assert model.specialise_first and not dlpc.load(MLP, batch="symbolic").specialise_first
    fn = dlpc.compile(model, target=target)
    run_batches(fn, model, (1, 1))
    assert fn.stats["compiles"] == 1 and fn.stats["specialised"] == 1
    run_batches(fn, model, (3, 64, 1, 5))
    assert fn.stats == {"calls": 6, "compiles": 2, "specialised": 1, "programs": 2}


def test_threads_racing_on_the_first_call_compile_once():
    """The first call of a model left unbound builds the first binding's program under a
    lock: threads that make it at once share one compile, and each gets its answer."""
    import threading

    model = dlpc.load(MLP)
    fn = dlpc.compile(model, target="numpy")
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 784)).astype(np.float32) for _ in range(4)]
    start, got = threading.Barrier(len(xs)), {}

    def work(k: int) -> None:
        start.wait()
        got[k] = fn(xs[k])[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, x in enumerate(xs):
        np.testing.assert_allclose(got[k], api.reference(model, [x])[0], rtol=1e-4, atol=1e-5)
    stats = fn.stats
    assert (stats["compiles"], stats["specialised"], stats["programs"]) == (1, 1, 1)


def test_dlp_binds_at_call_time():
    """DLP C has no runtime extents: one program per binding, built on first use."""
    from dlpc.api import TARGETS

    if "dlp" not in TARGETS:
        pytest.skip("no dlp target")
    model = dlpc.load(MLP)
    fn = dlpc.compile(model, target="dlp")
    rng = np.random.default_rng(1)
    for batch in (2, 1, 2):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        (y,) = fn(x)
        np.testing.assert_allclose(y, api.reference(model, [x])[0], rtol=1e-4, atol=1e-5)
    assert fn.stats["compiles"] == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"dims": {"Q": 3}},
            "mlp.dlpc: error: cannot bind 'Q': the model has no such named dim (its named dims: B)",
        ),
        ({"batch": 0}, "mlp.dlpc:7:18: error: dimension 'B' must be bound to a positive int"),
        (
            {"dims": {"B": -2}},
            "mlp.dlpc:7:18: error: dimension 'B' must be bound to a positive int",
        ),
        ({"batch": "many"}, "error: dims must be a dict, an int or 'symbolic', not 'many'"),
    ],
)
def test_a_bad_binding_is_one_line(kwargs, message):
    with pytest.raises(DlpcError) as e:
        dlpc.load(MLP, **kwargs)
    assert str(e.value).splitlines()[0].endswith(message), str(e.value)


def test_dims_of_another_format_is_one_line(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}\n"
    )
    with pytest.raises(
        DlpcError, match=r"^error: dims= binds a \.dlpc model's named dims, not a \.mlir"
    ):
        dlpc.load(path, dims={"B": 2})


def test_training_binds_the_batch_from_its_batch_size():
    """A symbolic model trains: the trainer binds B to its batch size."""
    trainer = dlpc.train.Trainer(
        dlpc.load(MLP), "cross_entropy", "sgd", batch_size=4, target="numpy"
    )
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 784)).astype(np.float32)
    y = rng.integers(0, 10, 4)
    first = trainer.step(x, y)
    assert np.isfinite(first) and trainer.step(x, y) < first


def test_training_refuses_another_unbound_dim_in_one_line(tmp_path):
    path = tmp_path / "t.dlpc"
    path.write_text(
        "model t(x: f32[B, S, 4]) {\n  param w: f32[3, 4] = kaiming(seed=1)\n"
        "  return reduce_mean(linear(x, w), axes=[1])\n}\n"
    )
    with pytest.raises(DlpcError) as e:
        dlpc.train.Trainer(str(path), "cross_entropy", "sgd", batch_size=2, target="numpy")
    assert str(e.value) == (
        "error: model 't' leaves named dim(s) S unbound; training needs static shapes: load "
        "it with dims={'S': N} and the batch bound"
    )
    bound = dlpc.load(path, batch=2, dims={"S": 5})
    trainer = dlpc.train.Trainer(bound, "cross_entropy", "sgd", batch_size=2, target="numpy")
    assert np.isfinite(trainer.step(np.ones((2, 5, 4), np.float32), np.array([0, 1])))


def test_dlpc_run_on_a_symbolic_model_takes_inputs_of_any_size(tmp_path, capsys):
    for batch in (2, 5):
        x = tmp_path / f"x{batch}.npy"
        np.save(x, np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32))
        argv = [str(MLP), "--target", "c", "--input", str(x), "--repeat", "1", "--check"]
        assert dlpc_run.main(argv) == 0
        out = capsys.readouterr().out
        assert f"output 0: {batch}x10 float32" in out
        assert ": ok" in out
        assert " guarded calls, 1 compile(s)" in out, out  # the symbolic program, once


TINY = """model tiny(x: f32[B, 16]) {
  param w: f32[8, 16] = kaiming(seed=1)
  return relu(linear(x, w))
}
"""


def test_dlpc_tune_tunes_the_symbolic_program_at_given_dims(tmp_path, monkeypatch, capsys):
    """`dlpc-tune --dims B=4` tunes the one program's kernels with buffers at B = 4; a
    compile of that program (max_dims B = 4) applies the records."""
    import dlpc.passes.schedule.default as schedules
    from dlpc.tools import dlpc_tune

    path, log = tmp_path / "tiny.dlpc", tmp_path / "tune.jsonl"
    path.write_text(TINY)
    argv = [str(path), "--dims", "B=4", "--trials", "1", "--verify", "0", "--quiet"]
    assert dlpc_tune.main([*argv, "--log", str(log)]) == 0
    assert "at the maxima {'B': 4}" in capsys.readouterr().err
    seen: list[dict] = []
    apply = schedules.apply_tuned_or_default
    monkeypatch.setattr(
        schedules, "apply_tuned_or_default", lambda *a, **k: seen.append(apply(*a, **k)) or seen[-1]
    )
    model = dlpc.load(path)
    fn = dlpc.compile(model, max_dims={"B": 4}, tuning_log=str(log))
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(fn(x)[0], api.reference(model, [x])[0], rtol=1e-5, atol=1e-6)
    assert [how["linear_relu_0"] for how in seen] == ["tuned"]


@pytest.mark.parametrize(
    ("text", "dims", "message"),
    [
        (
            TINY,
            "Q=4",
            "dlpc-tune: error: --dims Q: the model has no symbolic dim 'Q' (its symbolic dims: B)",
        ),
        (
            TINY.replace("[B, 16]", "[2, 16]"),
            "B=4",
            "dlpc-tune: error: --dims names symbolic dims; this model has none",
        ),
        (TINY, "B=0", "error: --dims entry 'B=0' is not NAME=N (N > 0)"),
    ],
)
def test_dlpc_tune_bad_dims_is_one_line(tmp_path, capsys, text, dims, message):
    from dlpc.tools import dlpc_tune

    path = tmp_path / "tiny.dlpc"
    path.write_text(text)
    assert dlpc_tune.main([str(path), "--dims", dims, "--log", str(tmp_path / "t.jsonl")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(message), err


def test_random_inputs_of_a_symbolic_model_take_the_dims():
    """random_inputs on a model with an unbound named dim: the dims given, or one line
    naming the input and the dim (it was a SymbolicError traceback)."""
    model = dlpc.load(EXAMPLES / "mlp.dlpc")
    (x,) = api.random_inputs(model, dims={"B": 3})
    assert x.shape == (3, 784) and x.dtype == np.float32
    with pytest.raises(DlpcError) as err:
        api.random_inputs(model)
    assert str(err.value).count("\n") == 0
    assert "has symbolic dim(s) B" in str(err.value) and "dims={'B': 1}" in str(err.value)
