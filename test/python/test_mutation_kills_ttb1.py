"""Tests of the train-tune-builder area's decisions no fast test compared before the
seventh round of issue 35 (bench/mutation.py --area train-tune-builder: train.py, tune/,
frontends/builder.py, frontends/text/ast.py), written from a branch-coverage run of the
area's tests and a reading of its comparisons and defaults before the seed-49 draw: the
tuner's measured points on a fake measurement per strategy, the text AST's value
semantics, the search space's moves, and the trainer's and builder's remaining answers.
Small models, in-process; numpy target."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import ast

# ---- the text AST (frontends/text/ast.py) ----------------------------------------------


def test_ast_nodes_are_frozen_values_located_at_0_0_by_default():
    nodes = [
        ast.TensorTypeExpr("f32", (1, 4)),
        ast.Number(2),
        ast.String("s"),
        ast.Name("x"),
        ast.ListExpr(()),
        ast.Keyword("k", ast.Number(1)),
        ast.Call("relu", (), ()),
        ast.BinOp("*", ast.Name("x"), ast.Number(2)),
        ast.Neg(ast.Name("x")),
        ast.Input("x", ast.TensorTypeExpr("f32", (1,))),
        ast.Param("w", ast.TensorTypeExpr("f32", (1,)), None),
        ast.Let("y", ast.Name("x")),
        ast.Return(()),
        ast.Model("m", (), ()),
    ]
    for node in nodes:
        assert node.loc == (0, 0), type(node).__name__
        with pytest.raises(dataclasses.FrozenInstanceError):
            node.loc = (1, 1)  # type: ignore[misc]
    model = ast.Model("m", (), (), source="model m() {}")
    assert model.end == (0, 0) and model.filename == "<string>"
    assert "source" not in repr(model) and "model m()" not in repr(model)
    assert ast.Model("m", (), ()).source == ""


def test_a_type_expressions_named_dims_are_not_part_of_its_value():
    a = ast.TensorTypeExpr("f32", ("B", 4), (1, 2), {"B": (1, 6)})
    b = ast.TensorTypeExpr("f32", ("B", 4), (1, 2), {"B": (3, 9)})
    assert a == b and a.named != b.named
    assert ast.TensorTypeExpr("f32", (1,)).named == {}
    assert str(a) == "f32[B, 4]" and str(ast.TensorTypeExpr("i64", ())) == "i64[]"
    assert ast.Number(2) != ast.Number(2, (1, 1))


# ---- the tuner's chosen points on a fake measurement (tune/search.py) -------------------


def _short(p: dict) -> str:
    return " ".join(f"{k}{int(v) if isinstance(v, bool) else v}" for k, v in p.items())


def _fake_time(p: dict) -> float:
    """A made-up time, a pure function of the point (no measurement)."""
    return 1e-3 * (
        1
        + p["mc"] / 24
        + 16 / p["nr"]
        + p["kc"] / 64
        + 0.5 * p["pack_a"]
        + 0.25 * (p["par"] == "outer")
        + 0.1 * p["mr"]
    )


def _trace(strategy: str, trials: int = 12, **kw):
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    strategy = "".join(list(strategy))  # made at run time, as a command line's is
    tuner = search.Tuner(
        parse_module(MATMUL), log=None, strategy=strategy, seed=3, pool=6, batch=3, **kw
    )
    (task,) = tuner.tasks
    rendered, points = task.space.script, []
    last: dict = {}

    def script(module, point):
        last["point"] = point
        return rendered(module, point)

    def measure(ir, script, **_):
        points.append(last["point"])
        return Result(True, _fake_time(last["point"]))

    object.__setattr__(task.space, "script", script)
    tuner.measure_fn = measure
    progress = list(tuner.run(trials=trials))
    return tuner, progress, [_short(p) for p in points]


DEFAULT = "mc24 nc64 kc16 mr8 nr32 pack_a0 pack_b0 parauto"

TRACES = {
    # the default first; then mutations and crossovers of the four best, ranked by the
    # cost model once it has 4 samples (the last of each batch of 3 a random pick)
    "evolutionary": (
        [
            DEFAULT,
            "mc24 nc64 kc16 mr12 nr32 pack_a0 pack_b0 parauto",
            "mc24 nc64 kc16 mr8 nr32 pack_a1 pack_b0 parauto",
            "mc24 nc64 kc16 mr12 nr16 pack_a0 pack_b0 parauto",
            "mc24 nc32 kc16 mr8 nr32 pack_a0 pack_b0 parauto",
            "mc12 nc64 kc16 mr12 nr32 pack_a0 pack_b0 parauto",
            "mc24 nc64 kc16 mr8 nr64 pack_a0 pack_b0 parauto",
            "mc24 nc32 kc16 mr6 nr32 pack_a0 pack_b0 parauto",
            "mc24 nc32 kc16 mr8 nr32 pack_a0 pack_b1 parauto",
            "mc6 nc64 kc16 mr2 nr8 pack_a0 pack_b1 parauto",
            "mc12 nc32 kc16 mr2 nr16 pack_a0 pack_b1 parouter",
            "mc4 nc64 kc16 mr2 nr32 pack_a1 pack_b1 parouter",
        ],
        [3.55, 3.55, 3.55, 3.55, 3.55, 3.45, 3.3, 3.3, 3.3, 3.3, 3.2, 2.8667],
    ),
    "random": (
        [
            DEFAULT,
            "mc4 nc64 kc16 mr4 nr64 pack_a1 pack_b1 parouter",
            "mc6 nc64 kc16 mr2 nr64 pack_a0 pack_b0 parauto",
            "mc24 nc16 kc16 mr1 nr8 pack_a1 pack_b0 parauto",
            "mc1 nc32 kc16 mr1 nr32 pack_a0 pack_b0 parouter",
            "mc6 nc64 kc16 mr1 nr8 pack_a1 pack_b0 parouter",
            "mc6 nc64 kc16 mr1 nr64 pack_a0 pack_b1 parauto",
            "mc6 nc32 kc16 mr2 nr32 pack_a0 pack_b1 parauto",
            "mc8 nc16 kc16 mr1 nr8 pack_a1 pack_b1 parouter",
            "mc4 nc32 kc16 mr2 nr8 pack_a0 pack_b1 parauto",
            "mc1 nc64 kc16 mr1 nr8 pack_a1 pack_b0 parauto",
            "mc8 nc64 kc16 mr4 nr64 pack_a1 pack_b0 parauto",
        ],
        [3.55, 2.8167, 1.95, 1.95, 1.95, 1.95, 1.85, 1.85, 1.85, 1.85, 1.85, 1.85],
    ),
    # the grid in order, 3 consistent points per round, a script already measured
    # (a point that renders as an earlier one) skipped
    "grid": (
        [
            DEFAULT,
            "mc1 nc16 kc16 mr1 nr8 pack_a1 pack_b1 parauto",
            "mc1 nc16 kc16 mr1 nr8 pack_a1 pack_b0 parauto",
            "mc1 nc16 kc16 mr1 nr8 pack_a0 pack_b0 parauto",
            "mc1 nc16 kc16 mr1 nr16 pack_a1 pack_b1 parauto",
            "mc1 nc16 kc16 mr1 nr16 pack_a0 pack_b1 parauto",
            "mc1 nc16 kc16 mr1 nr16 pack_a0 pack_b0 parauto",
            "mc1 nc32 kc16 mr1 nr8 pack_a1 pack_b0 parauto",
            "mc1 nc32 kc16 mr1 nr8 pack_a1 pack_b0 parouter",
            "mc1 nc32 kc16 mr1 nr8 pack_a0 pack_b1 parauto",
            "mc1 nc32 kc16 mr1 nr16 pack_a1 pack_b1 parauto",
            "mc1 nc32 kc16 mr1 nr16 pack_a1 pack_b1 parouter",
        ],
        [3.55, 3.55, 3.55, 3.3917, 2.8917, 2.3917, 2.3917, 2.3917, 2.3917, 2.3917, 2.3917, 2.3917],
    ),
}


@pytest.mark.parametrize("strategy", sorted(TRACES))
def test_the_tuners_points_on_a_fake_measurement(strategy):
    """Seed 3, pool 6, batch 3, 12 trials on the 24x64x16 matmul: the measured points and
    the best time after each, pinned (each strategy's proposals, the cost model's ranking,
    the seen-script skip and the running best)."""
    points, best = TRACES[strategy]
    tuner, progress, measured = _trace(strategy)
    assert measured == points
    assert [p.trial for p in progress] == list(range(1, 13))
    assert all(p.total == 12 and p.ok and p.error is None for p in progress)
    assert [round(p.best * 1e3, 4) for p in progress] == best
    assert [round(p.time * 1e3, 4) for p in progress][0] == 3.55
    assert [(t, k, round(b * 1e3, 4)) for t, k, b in tuner.history] == [
        (k + 1, "mm", b) for k, b in enumerate(best)
    ]
    assert len({p.script for p in progress}) == 12


# ---- the search space's moves and features (tune/space.py) ------------------------------


class _Scripted:
    """A random.Random stand-in answering `choice` and `random` from scripts (and
    recording what `choice` was offered)."""

    def __init__(self, choices=(), randoms=()):
        self.choices, self.randoms, self.offered = list(choices), list(randoms), []

    def choice(self, seq):
        self.offered.append(list(seq))
        want = self.choices.pop(0)
        assert want in seq
        return want

    def random(self):
        return self.randoms.pop(0)


def _space(knobs, template="reduction"):
    from dlpc.tune.space import Space

    return Space(template, "k", knobs, None)  # type: ignore[arg-type]


def test_a_mutation_moves_one_multi_valued_knob_one_step_clamped_at_the_ends():
    space = _space({"a": [1, 2, 3], "b": [True], "c": ["x", "y"]})
    cases = [  # (point, key, step) -> the new value of key
        ({"a": 1, "b": True, "c": "y"}, "a", -1, 1),
        ({"a": 1, "b": True, "c": "y"}, "a", 1, 2),
        ({"a": 3, "b": True, "c": "y"}, "a", 1, 3),
        ({"a": 3, "b": True, "c": "y"}, "a", -1, 2),
        ({"a": 7, "b": True, "c": "y"}, "a", 1, 2),  # a value not in the knob: from index 0
        ({"a": 2, "b": True, "c": "y"}, "c", -1, "x"),
        ({"a": 2, "b": True}, "c", 1, "y"),  # a knob the point lacks: its first value
    ]
    for point, key, step, want in cases:
        rng = _Scripted([key, step])
        new = space.mutate(point, rng)
        assert rng.offered == [["a", "c"], [-1, 1]]
        assert new[key] == want, (point, key, step)
        assert {k: v for k, v in new.items() if k != key} == {
            k: point.get(k, space.knobs[k][0]) for k in space.knobs if k != key
        }
    single = _space({"a": [1], "b": [False]})
    rng = _Scripted(["b", 1])
    assert single.mutate({"a": 1, "b": False}, rng) == {"a": 1, "b": False}
    assert rng.offered[0] == ["a", "b"]  # no knob with a choice: any knob


def test_a_crossover_takes_each_knob_from_a_below_one_half():
    space = _space({"a": [1, 2], "b": [1, 2], "c": [1, 2]})
    rng = _Scripted(randoms=[0.2, 0.5, 0.7])
    got = space.crossover({"a": 1, "b": 1, "c": 1}, {"a": 2, "b": 2, "c": 2}, rng)
    assert got == {"a": 1, "b": 2, "c": 2}


def test_a_knob_a_logged_point_lacks_takes_its_legacy_meaning_else_its_first_value():
    space = _space({"micro": ["dot", "gemm"], "x": [5, 6], "tile": [True, False]})
    assert space.value({}, "micro") == "gemm" and space.value({}, "tile") is False
    assert space.value({}, "x") == 5 and space.value({"x": 6}, "x") == 6
    assert space.size() == 8


def test_gemm_features_switch_at_48k_of_a_and_1m_of_b():
    from dlpc.tune.space import Space

    knobs = {"mc": [96], "nc": [1024], "kc": [128], "mr": [4], "nr": [16], "par": ["auto", "x"]}
    space = Space("gemm", "k", knobs, None)  # type: ignore[arg-type]
    base = {"mc": 96, "nc": 1024, "kc": 128, "mr": 4, "nr": 16, "par": "x"}
    f = space.features(base)  # A 96*128*4 = 48 KiB, B 128*1024*4 = 512 KiB
    assert f[:6] == [np.log2(96), 10.0, 7.0, 2.0, 4.0, 1.0]
    assert f[6:] == [np.log2(96 * 128 * 4) - 15, 19 - 20, 0.0, 0.0, 4 * 16 / 256.0]
    f = space.features(dict(base, mc=97, kc=256, nc=1025))  # 97*256*4 > 48 KiB, B > 1 MiB
    assert f[8:10] == [1.0, 1.0]
    f = space.features(dict(base, kc=256))  # B 256*1024*4 = 1 MiB exactly
    assert f[8:10] == [1.0, 0.0]


def test_reduction_features_of_sizes_flags_and_choices():
    space = _space({"cb": [1, 2, 4], "wt": [0, 8], "unroll_r": [False, True], "par": ["auto"]})
    assert space.features({"cb": 4, "wt": 0, "unroll_r": True, "par": "auto"}) == [
        2.0,
        0.0,  # log2(max(0, 1))
        1.0,
        0.0,  # a choice of one: position 0 of max(0, 1)
    ]
    assert space.features({"cb": 1, "wt": 8, "unroll_r": False, "par": "zz"})[1:] == [
        3.0,
        0.0,
        0.0,  # a choice not among the values
    ]
    two = _space({"par": ["auto", "i", "j"]})
    assert two.features({"par": "j"}) == [1.0] and two.features({"par": "i"}) == [0.5]


def test_the_tuner_proposes_64_points_and_measures_them_4_at_a_time_by_default():
    """Tuner's defaults pool=64, batch=4: after the default point, one round of 64
    proposals whose first 4 are measured (the cost model untrained: no exploration pick),
    then the next round."""
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune import search
    from dlpc.tune.measure import Result

    measured: list[str] = []
    tuner = search.Tuner(
        parse_module(MATMUL),
        log=None,
        strategy="random",
        measure_fn=lambda ir, script, **_: measured.append(script) or Result(True, 1e-3),
    )
    rounds = []
    real = tuner._proposals

    def proposals(task, done, grid_iter):
        out = real(task, done, grid_iter)
        rounds.append((len(measured), len(out)))
        return out

    tuner._proposals = proposals
    assert len(list(tuner.run(trials=6))) == 6
    assert rounds == [(1, 64), (5, 64)]


# ---- the trainer (train.py) ------------------------------------------------------------


def test_a_graph_loss_text_may_open_with_a_comment(tmp_path):
    """train.graph_loss takes model text that does not start with `model` (a comment
    first) as text, not as a path: only a `.dlpc` suffix makes a path."""
    from dlpc import train as T

    text = "# mean abs\nmodel l(p: f32[B, 3], y: f32[B, 3]) { return reduce_mean(abs(p - y)) }"
    loss = T.graph_loss(text, 2)
    assert loss.name == "l" and loss.predictions is None
    assert "tensor<2x3xf32>" in str(loss.module)
    with pytest.raises(DlpcError, match=r"^error: no such file: .*nope\.dlpc$"):
        T.graph_loss(str(tmp_path / "nope.dlpc"))
    path = tmp_path / "l.dlpc"
    path.write_text(text)
    assert "tensor<4x3xf32>" in str(T.graph_loss(path, 4).module)


LINEAR = "model lin(x: f32[B, 3]) {\n  param w: f32[2, 3] = normal(seed=1, std=0.5)\n  return linear(x, w)\n}\n"


def _sgd_reference(w, x, y, epochs, batch, lr, seed, shuffle, drop_last):
    """Plain-numpy SGD on mean squared error of x @ w.T, batches drawn as `fit` does:
    per epoch a permutation from [seed, epoch], cut to whole batches unless a last
    partial one is trained on; (the weights, the loss per epoch weighted by rows)."""
    w, n = w.astype(np.float64), len(x)
    losses = []
    for epoch in range(epochs):
        order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
        cut = n if not drop_last else n - n % batch
        total = 0.0
        for k in range(0, cut, batch):
            idx = order[k : k + batch]
            xb, yb = x[idx].astype(np.float64), y[idx].astype(np.float64)
            pred = xb @ w.T
            total += np.mean((pred - yb) ** 2) * len(idx)
            w = w - lr * 2 * (pred - yb).T @ xb / pred.size
        losses.append(total / cut)
    return w, losses


@pytest.mark.parametrize("shuffle, drop_last", [(True, False), (False, True)])
def test_fit_is_minibatch_sgd_with_its_history_and_events(tmp_path, shuffle, drop_last):
    """Trainer.fit on 7 rows in batches of 3 against a numpy SGD: the weights, the
    per-epoch loss, validation (mse: no accuracy), and each batch/epoch event's fields;
    a last batch of 1 row is trained on (a step compiled at that size) or left out."""
    from dlpc import train as T
    from dlpc.passes.train.optim import make_optimizer

    path = tmp_path / "lin.dlpc"
    path.write_text(LINEAR)
    t = T.Trainer(str(path), "mse", make_optimizer("sgd", lr=0.1), batch_size=3, target="numpy")
    w0 = t.weights["w"].copy()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 3)).astype(np.float32)
    y = rng.standard_normal((7, 2)).astype(np.float32)
    events: list = []
    history = t.fit(
        x,
        y,
        epochs=2,
        seed=4,
        shuffle=shuffle,
        drop_last=drop_last,
        validation=(x, y),
        callback=lambda event, info: events.append((event, dict(info))),
    )
    w, losses = _sgd_reference(w0, x, y, 2, 3, 0.1, 4, shuffle, drop_last)
    np.testing.assert_allclose(t.weights["w"], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history["loss"], losses, rtol=1e-5)
    assert np.isnan(history["accuracy"]).all() and np.isnan(history["val_accuracy"]).all()
    assert history["val_loss"] == history["val_mse"]
    np.testing.assert_allclose(history["val_loss"][1], np.mean((x @ w.T - y) ** 2), rtol=1e-5)
    assert t.epoch == 2 and t.steps_done == (4 if drop_last else 6)
    per_epoch = 2 if drop_last else 3
    batches = [i for e, i in events if e == "batch"]
    assert [e for e, _ in events] == (["batch"] * per_epoch + ["epoch"]) * 2
    assert [(i["epoch"], i["batch"], i["batches"]) for i in batches] == [
        (e, k, per_epoch) for e in range(2) for k in range(per_epoch)
    ]
    assert all(i["accuracy"] is None and i["samples_per_s"] > 0 for i in batches)
    for e in range(2):
        mine = batches[e * per_epoch : (e + 1) * per_epoch]
        sizes = [3, 3, 1][:per_epoch]
        means = np.cumsum([i["loss"] * s for i, s in zip(mine, sizes)]) / np.cumsum(sizes)
        np.testing.assert_allclose([i["mean_loss"] for i in mine], means, rtol=1e-6)
        assert mine[-1]["mean_loss"] == history["loss"][e]
    epochs = [i for ev, i in events if ev == "epoch"]
    assert [i["epoch"] for i in epochs] == [0, 1]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy", "val_mse"):
        np.testing.assert_array_equal([i[key] for i in epochs], history[key])
    assert all(i["seconds"] >= 0 for i in epochs)
    # the current weights' predictions, 7 rows in batches of 3 (the last one padded), and
    # the evaluation of a data set
    np.testing.assert_allclose(t.predict(x), x @ w.T, rtol=1e-5, atol=1e-6)
    from dlpc.passes.train.data import ArrayDataset

    scores = t.evaluate(ArrayDataset(x, y))
    if not drop_last:  # a data set trains as its arrays do
        again = T.Trainer(str(path), "mse", make_optimizer("sgd", lr=0.1), 3, "numpy")
        again.fit(ArrayDataset(x, y), epochs=2, seed=4, drop_last=False)
        np.testing.assert_array_equal(again.weights["w"], t.weights["w"])
    assert set(scores) == {"loss", "mse"} and scores["loss"] == scores["mse"]
    np.testing.assert_allclose(scores["loss"], np.mean((x @ w.T - y) ** 2), rtol=1e-5)
    with pytest.raises(DlpcError, match=r"^error: evaluate takes 1 inputs and 1 targets, got 3"):
        t.evaluate(x, y, y)


def test_only_a_c_trainer_probes_the_compiler_early(tmp_path, monkeypatch):
    """The C compiler's flags are probed on a thread while a C step is built, not for
    another target (the probe stands in here: it stops the C trainer's construction)."""
    from dlpc import train as T
    from dlpc.passes.train.optim import make_optimizer

    class Probed(Exception):
        pass

    def probe():
        raise Probed

    monkeypatch.setattr(T, "_probe_compiler_early", probe)
    path = tmp_path / "lin.dlpc"
    path.write_text(LINEAR)
    sgd = make_optimizer("sgd", lr=0.1)
    T.Trainer(str(path), "mse", sgd, batch_size=2, target="numpy")
    with pytest.raises(Probed):
        T.Trainer(str(path), "mse", sgd, batch_size=2, target="c")


# ---- the Python builder (frontends/builder.py) ------------------------------------------

BUILT = """builtin.module {
  func.func @main(%x: tensor<1x2x6x6xf32> {dlpc.name = "x"}, %i: tensor<3xi64> {dlpc.name = "i"}) -> (tensor<1x4x1x1xf32>, tensor<3xi64>) {
    %w = graph.param "w" : tensor<4x2x3x3xf32>
    %v = graph.param "v" : tensor<5xf32>
    %0 = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x6x6xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
    %1 = graph.clip %0 {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    %2 = graph.max_pool2d %1 {kernel = array<i64: 2, 2>} : (tensor<1x4x3x3xf32>) -> tensor<1x4x2x2xf32>
    %3 = graph.constant dense<2.000000e+00> : tensor<f32>
    %4 = graph.add %2, %3 : (tensor<1x4x2x2xf32>, tensor<f32>) -> tensor<1x4x2x2xf32>
    %5 = graph.mul %4, %3 : (tensor<1x4x2x2xf32>, tensor<f32>) -> tensor<1x4x2x2xf32>
    %6 = graph.constant dense<2> : tensor<i64>
    %7 = graph.add %i, %6 : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
    %8 = graph.reduce_mean %5 {axes = array<i64: 2, 3>, keepdims = true} : (tensor<1x4x2x2xf32>) -> tensor<1x4x1x1xf32>
    func.return %8, %7 : tensor<1x4x1x1xf32>, tensor<3xi64>
  }
}"""


def test_the_builders_ir_text_and_initial_weights():
    """Friendly keywords (stride, padding, kernel_size, axis, keepdim), an int for a
    pair, sugar (relu6), Python numbers as scalar constants of the tensor operands'
    element type shared between uses; kaiming and a name-seeded normal against numpy."""
    import math
    import zlib

    from dlpc.frontends.builder import GraphBuilder, kaiming, normal

    b = GraphBuilder("m")
    x = b.input("x", (1, 2, 6, 6))
    w = b.param("w", (4, 2, 3, 3), init=kaiming(seed=1))
    b.param("v", (5,), init=normal(std=0.5))
    y = b.max_pool2d(b.relu6(b.conv2d(x, w, stride=2, padding=1)), kernel_size=2)
    z = b.mul(b.add(y, 2), 2.0)
    j = b.add(b.input("i", (3,), "i64"), 2)
    b.output(b.reduce_mean(z, axis=[2, 3], keepdim=True), j)
    assert str(b.module()) == BUILT
    weights = b.weights()
    want = np.random.default_rng(1).normal(0.0, math.sqrt(2.0) / math.sqrt(18), (4, 2, 3, 3))
    np.testing.assert_array_equal(weights["w"], want.astype(np.float32))
    want = np.random.default_rng(zlib.crc32(b"v")).normal(0.0, 0.5, (5,))
    np.testing.assert_array_equal(weights["v"], want.astype(np.float32))
    assert b.model().name == "m" and b.module() is b.module()


# ---- the measurement (tune/measure.py) ------------------------------------------------


def test_a_measurements_timed_calls_stop_2_s_after_they_start_by_default(monkeypatch):
    """tune/measure.py's child, in-process on a fake clock (0.5 s a reading), with no
    `max_seconds` (measure() never passes one): the deadline is 2 s after the timed calls
    start, so of 5 repeats 2 run (the second's end reads 1.5 s, its check 3 s)."""
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
    clock = iter(np.arange(1000.0, 2000.0, 0.5))
    monkeypatch.setattr(measure, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    job = {"ir": MATMUL, "script": "", "repeat": 5, "warmup": 1}
    assert measure._child(job) == {"ok": True, "time": 0.5}
    assert len(calls) == 1 + 1 + 2  # the check, the warmup, the repeats


def test_a_measurements_job_and_its_defaults(monkeypatch):
    """measure() sends the child its kernel, script, 5 repeats after 2 warm-up calls
    (defaults), runs it with a 60 s timeout and OMP_NUM_THREADS=1 unless told."""
    import json
    import types

    from dlpc.tune import measure

    seen = []

    def run(argv, input, timeout, env, **_):
        seen.append((argv[1:], json.loads(input), timeout, env["OMP_NUM_THREADS"]))
        return types.SimpleNamespace(returncode=0, stdout='{"ok": true, "time": 1.0}\n', stderr="")

    monkeypatch.setattr(measure.subprocess, "run", run)
    assert measure.measure("IR", "S") == measure.Result(True, 1.0, None)
    job = {"ir": "IR", "script": "S", "repeat": 5, "warmup": 2, "crash": False}
    assert seen == [(["-m", "dlpc.tune.measure"], job, 60.0, "1")]
    measure.measure("IR", "S", timeout=3.0, repeat=7, warmup=0, threads=4, crash=True)
    assert seen[1] == (
        ["-m", "dlpc.tune.measure"],
        {**job, "repeat": 7, "warmup": 0, "crash": True},
        3.0,
        "4",
    )


def test_param_groups_train_each_param_at_its_groups_lr(tmp_path):
    """Trainer(param_groups=...): w at the optimizer's lr 0.1, b at its group's 0.5, each
    a run-time input; one SGD step against numpy. The step's state refuses a missing
    param value in one line."""
    from dlpc import train as T
    from dlpc.passes.train.optim import make_optimizer

    path = tmp_path / "lb.dlpc"
    path.write_text(
        "model lb(x: f32[B, 3]) {\n  param w: f32[2, 3] = normal(seed=1, std=0.5)\n"
        "  param b: f32[2] = normal(seed=2, std=0.5)\n  return linear(x, w, b)\n}\n"
    )
    groups = [{"params": ["w"]}, {"params": ["b"], "lr": 0.5}]
    t = T.Trainer(str(path), "mse", make_optimizer("sgd", lr=0.1), 3, "numpy", param_groups=groups)
    assert [(g["params"], g["lr"]) for g in t.param_groups] == [(["w"], 0.1), (["b"], 0.5)]
    assert t.runtime_hyper() == [["lr"], ["lr"]]
    w0, b0 = t.weights["w"].astype(np.float64), t.weights["b"].astype(np.float64)
    x = np.arange(9, dtype=np.float32).reshape(3, 3) / 4
    y = np.ones((3, 2), np.float32)
    t.step(x, y)
    err = x @ w0.T + b0 - y
    np.testing.assert_allclose(t.weights["w"], w0 - 0.1 * 2 * err.T @ x / err.size, rtol=1e-5)
    np.testing.assert_allclose(t.weights["b"], b0 - 0.5 * 2 * err.sum(0) / err.size, rtol=1e-5)
    with pytest.raises(DlpcError, match=r"^error: no value for parameter 'w'$"):
        T._Resident(t.compiled, t.spec, {})


def test_an_integer_constant_takes_the_ends_of_its_range_and_no_more():
    from xdsl.dialects.builtin import IntegerType, Signedness

    from dlpc.frontends.builder import FrontendError, GraphBuilder

    i8, u8 = IntegerType(8), IntegerType(8, Signedness.UNSIGNED)
    b = GraphBuilder()
    for value, ty in ((127, i8), (-128, i8), (255, u8), (0, u8)):
        b.constant(value, ty)
    assert len(b._constants) == 4 and b.constant(127, i8) is b.constant(127.0, i8)
    for value, ty in ((128, i8), (-129, i8), (256, u8), (-1, u8)):
        with pytest.raises(FrontendError, match=rf"^{value} does not fit in {ty}$"):
            b.constant(value, ty)


SQRT = """
func.func @main(%A: memref<16xf32>, %C: memref<16xf32>) {
  loop.kernel "sq" {
    loop.for %i0 = 0 to 16 step 1 {name = "i0"} {
      %a = memref.load %A[%i0] : memref<16xf32>
      %r = math.sqrt %a : f32
      memref.store %r, %C[%i0] : memref<16xf32>
    }
  }
  func.return
}
"""


def test_a_candidate_whose_result_has_nans_where_the_reference_has_them_is_right():
    """The child compares a candidate with the unscheduled kernel NaN for NaN: sqrt of
    the standard-normal inputs is NaN at each negative one, in both (train-tune-builder
    seed 49's survivor measure.py:124, `equal_nan=True` -> `False`: every such kernel
    was a wrong result)."""
    from dlpc.tune import measure

    result = measure._child({"ir": SQRT, "script": "", "repeat": 1, "warmup": 0})
    assert result["ok"] is True and result["time"] > 0


def test_a_logged_points_tail_is_compared_by_value():
    """tune/space.consistent on a point whose `tail` string was made at run time (as a
    point read back from a tuning log is): "none" still asks the rows to divide, "both"
    still lets the columns have a remainder (train-tune-builder seed 50's survivor
    space.py:332, `tail != "none"` -> `is not`: a logged "none" let any mr through)."""
    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.tune.space import consistent, space_for

    space = space_for(parse_module(MATMUL), "mm")
    assert space is not None
    none, both = "".join(["no", "ne"]), "".join(["bo", "th"])
    base = dict(space.default(), mc=24, nc=64, micro="gemm", tail=none, gemv=False)
    assert consistent(space, dict(base, mr=4, nr=16))
    assert not consistent(space, dict(base, mr=5, nr=16))  # 24 % 5
    assert not consistent(space, dict(base, mr=4, nr=24))  # 64 % 24
    assert consistent(space, dict(base, mr=5, nr=24, tail=both))


@pytest.mark.parametrize("make", ["Trainer", "train"])
def test_a_trainers_batch_size_is_32_by_default(tmp_path, make):
    """Trainer(...) and dlpc.train(...) without batch_size bind the batch dim to 32
    (seed 50's survivor train.py:327, `batch_size: int = 32` -> 33)."""
    from dlpc import train as T
    from dlpc.passes.train.optim import make_optimizer

    path = tmp_path / "lin.dlpc"
    path.write_text(LINEAR)
    sgd = make_optimizer("sgd", lr=0.1)
    t = getattr(T, make)(str(path), "mse", sgd, target="numpy")
    assert t.batch_size == 32
    assert "tensor<32x3xf32>" in str(t.model.module)
    x, y = np.ones((32, 3), np.float32), np.zeros((32, 2), np.float32)
    assert np.isfinite(t.step(x, y))


def test_a_point_read_back_from_json_renders_as_the_literal_one():
    """Space.script and the reduction template compare a point's strings by value: the
    point as a tuning log gives it back (json: new string objects) renders the same
    schedule as the literal point (the dot micro-kernel, the rows / both remainder tiles,
    an outer parallel loop; a reduction's "auto" parallel loop adds no line)."""
    import json

    from test_schedule import MATMUL

    from dlpc.passes.pipeline import parse_module
    from dlpc.passes.schedule.nest import Nest
    from dlpc.tune.space import reduction_template, space_for

    module = parse_module(MATMUL)
    space = space_for(module, "mm")
    assert space is not None
    base = dict(space.default())
    cases = [
        (dict(base, micro="dot", mr=4, nr=2), "split mm/i0 by 4 -> i0o, i0i"),
        (dict(base, tail="rows", mr=5), "split mm/i1 by 64 -> i1c, i11"),
        (dict(base, par="outer"), "split mm/i1 by 64 -> i1c, i11"),
        (dict(base, tail="both", mr=5, nr=24), "split mm/r0 by 16 -> r0c, r01"),
    ]
    for point, second in cases:
        literal = space.script(module, point)
        assert literal.splitlines()[1] == second
        assert space.script(module, json.loads(json.dumps(point))) == literal, point
    conv = Nest(["n", "c", "h", "w"], ["r"], {"n": 1, "c": 8, "h": 6, "w": 16, "r": 9})
    plain = '{"cb": 1, "wt": 0, "unroll_r": false, "par": "auto"}'
    assert reduction_template("K", conv, json.loads(plain)).splitlines() == [
        "decompose K",
        "reorder K: n, c, h, r, w",
        "vectorize K/w",
    ]


# ---- train-tune-builder seed 51's killable survivors ------------------------------------


def _kernel_space(text: str):
    from dlpc.dialects.loop import kernels
    from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
    from dlpc.tune.space import space_for

    module = parse_module(text)
    lower(module, "loop", PipelineOptions(opt_level=1), weights={})
    (kernel,) = kernels(module)
    space = space_for(module, kernel.sym)
    assert space is not None
    return module, kernel.sym, space


def _graph(op: str, a: str, b: str, y: str) -> str:
    return (
        f"func.func @main(%a: tensor<{a}xf32>, %b: tensor<{b}xf32>) -> tensor<{y}xf32> {{\n"
        f"  %y = graph.{op} %a, %b : (tensor<{a}xf32>, tensor<{b}xf32>) -> tensor<{y}xf32>\n"
        f"  func.return %y : tensor<{y}xf32>\n}}\n"
    )


def test_a_batched_matmuls_space_reads_n_from_the_last_spatial_loop():
    """3 x (5 x 16) @ (16 x 32): N is the last spatial loop's 32, not the batch's
    neighbour (space.py:253, `spatial[-1]` -> `spatial[1]` read M's 5 as N)."""
    _, _, space = _kernel_space(_graph("matmul", "3x5x16", "3x16x32", "3x5x32"))
    assert space.nest.spatial == ["i0", "i1", "i2"]
    assert space.knobs["nc"] == [16, 32] and space.knobs["nr"] == [8, 16, 32]
    assert space.knobs["mc"] == [1, 5] and space.knobs["mr"] == [1, 5]


def test_nine_rows_have_a_remainder_tile_eight_do_not():
    """M = 9 has no divisor from 4 to 8: rows get a remainder tile (`tail`); M = 8 does
    not need one (space.py:258, `m > 8` -> `m > 9`)."""
    _, _, nine = _kernel_space(_graph("matmul", "9x16", "16x32", "9x32"))
    assert nine.knobs["tail"] == ["none", "rows"] and nine.knobs["mr"] == [1, 4, 6, 8, 9]
    _, _, eight = _kernel_space(_graph("matmul", "8x16", "16x32", "8x32"))
    assert "tail" not in eight.knobs


def test_a_gemv_point_renders_the_rfactor_schedule():
    """A batch-2 linear's point with `gemv` on renders gemv_script (rfactor of the dot
    products), off the gemm one (space.py:125, `template == "gemm"` -> `<`)."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.schedule._common import get_kernel
    from dlpc.passes.schedule.default import gemv_script

    module, name, space = _kernel_space(_graph("linear", "2x32", "16x32", "2x16"))
    assert [k.sym for k in kernels(module)] == [name]
    point = dict(space.default(), gemv=True, rf=8)
    want = gemv_script(get_kernel(module, name), space.nest, 8)
    assert space.script(module, point) == want
    assert space.script(module, dict(point, gemv=False)) != want


def test_a_zero_trip_loop_is_no_parallel_choice():
    """A reduction whose outer loop runs 0 times (hand-written loop IR): only loops of two
    or more iterations are `par` values (space.py:226, `> 1` -> `!= 1` offered it)."""
    from dlpc.passes.pipeline import parse_module
    from dlpc.tune.space import space_for

    ir = """
func.func @main(%A: memref<0x16x4xf32>, %C: memref<0x16xf32>) {
  loop.kernel "rs" {
    loop.for %i0 = 0 to 0 step 1 {name = "i0", parallel} {
      loop.for %i1 = 0 to 16 step 1 {name = "i1"} {
        %acc = memref.alloca() : memref<f32>
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %acc[] : memref<f32>
        loop.for %r0 = 0 to 4 step 1 {name = "r0", reduction} {
          %a = memref.load %A[%i0, %i1, %r0] : memref<0x16x4xf32>
          %c = memref.load %acc[] : memref<f32>
          %s = arith.addf %c, %a : f32
          memref.store %s, %acc[] : memref<f32>
        }
        %v = memref.load %acc[] : memref<f32>
        memref.store %v, %C[%i0, %i1] : memref<0x16xf32>
      }
    }
  }
  func.return
}
"""
    space = space_for(parse_module(ir), "rs")
    assert space is not None and space.knobs["par"] == ["auto", "i1"]


def test_an_extracted_kernel_takes_every_buffer_as_an_input():
    """extract_kernel's @main: every argument an input, no params, no outputs, so the C
    backend's calling convention accepts it (measure.py:75, `num_outputs` 0 -> 1: the
    attributes no longer added up and every candidate would fail to emit)."""
    from test_schedule import MATMUL

    from dlpc.backends.c import calling_convention, emit_c, find_main
    from dlpc.passes.pipeline import parse_module
    from dlpc.tune.measure import extract_kernel

    small = extract_kernel(parse_module(MATMUL), "mm")
    assert calling_convention(find_main(small)) == (4, [], 0)
    assert "mm" in emit_c(small)


EDGE_SPACES = [
    # (op, A, B, Y): the knobs but pack_a / pack_b / par, and the default point's
    # 3 rows along k (B [n, k], k = 16 = LANES): the dot micro-kernel and gemv (M < 4)
    (
        ("linear", "3x16", "16x16", "3x16"),
        {"mc": [1, 3], "nc": [16], "kc": [16], "mr": [1, 3], "nr": [1, 2, 4, 8, 16]}
        | {"micro": ["gemm", "dot"], "gemv": [False, True], "rf": [4, 8, 16]},
        {"mr": 3, "nr": 8, "micro": "dot", "gemv": False, "rf": 16},
    ),
    # 4 rows: no gemv
    (
        ("linear", "4x16", "16x16", "4x16"),
        {"mc": [1, 2, 4], "nc": [16], "kc": [16], "mr": [1, 2, 4], "nr": [1, 2, 4, 8, 16]}
        | {"micro": ["gemm", "dot"]},
        {"mr": 4, "nr": 4, "micro": "dot"},
    ),
    # k = 15 < LANES: neither dot nor gemv
    (
        ("linear", "2x15", "16x15", "2x16"),
        {"mc": [1, 2], "nc": [16], "kc": [15], "mr": [1, 2], "nr": [8, 16]},
        {"mr": 2, "nr": 16},
    ),
    # N = 131 > MAX_NR with no divisor from 8: a remainder tile along the columns too
    (
        ("matmul", "8x16", "16x131", "8x131"),
        {"mc": [1, 2, 4, 8], "nc": [131], "kc": [16], "mr": [1, 2, 4, 6, 8]}
        | {"nr": [1, 16, 32, 48, 64], "tail": ["none", "rows", "both"]},
        {"mr": 8, "nr": 16, "tail": "both"},
    ),
    # N = 8 x 131: its largest divisor up to MAX_NR is 8, enough: no tail
    (
        ("matmul", "8x16", "16x1048", "8x1048"),
        {"mc": [1, 2, 4, 8], "nc": [8, 131, 262, 524], "kc": [16], "mr": [1, 2, 4, 8]}
        | {"nr": [8]},
        {"mr": 8, "nr": 8, "nc": 8},
    ),
    # N = 128: divisible, no tail
    (
        ("matmul", "8x16", "16x128", "8x128"),
        {"mc": [1, 2, 4, 8], "nc": [16, 32, 64, 128], "kc": [16], "mr": [1, 2, 4, 8]}
        | {"nr": [8, 16, 32, 64]},
        {"mr": 8, "nr": 32},
    ),
]


@pytest.mark.parametrize("graph_op, knobs, default", EDGE_SPACES)
def test_the_gemm_spaces_at_the_edges_of_its_rules(graph_op, knobs, default):
    _, _, space = _kernel_space(_graph(*graph_op))
    got = {k: v for k, v in space.knobs.items() if k not in ("pack_a", "pack_b", "par")}
    assert got == knobs
    assert {k: space.default()[k] for k in default} == default


def _conv(stride: int) -> str:
    o = 8 // stride
    y = f"tensor<1x8x{o}x{o}xf32>"
    return (
        f"func.func @main(%a: tensor<1x4x8x8xf32>, %b: tensor<8x4x3x3xf32>) -> {y} {{\n"
        f"  %y = graph.conv2d %a, %b {{strides = array<i64: {stride}, {stride}>, "
        f"pads = array<i64: 1, 1, 1, 1>}} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> {y}\n"
        f"  func.return %y : {y}\n}}\n"
    )


@pytest.mark.parametrize("stride", [1, 2])
def test_a_strided_convs_default_point_packs_its_input_rows(stride):
    """A stride-2 conv's space is `strided` and its default point has im2col on (the
    default schedule packs its rows), a stride-1 one's off (train-tune-builder seed 52's
    survivor space.py:242, `conv_input(...) is not None` -> `is None`)."""
    _, _, space = _kernel_space(_conv(stride))
    assert space.template == "reduction" and space.strided is (stride == 2)
    assert space.default() == {
        "cb": 4,
        "wt": 0,
        "unroll_r": False,
        "par": "auto",
        "im2col": stride == 2,
        "tile": True,
    }
