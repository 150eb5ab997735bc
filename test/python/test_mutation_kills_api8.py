"""Tests of the `api` area's decisions no fast test compared before the eighth round of
issue 35 (bench/mutation.py --area api: `__init__.py`, api.py, model.py, settings.py, the
drivers, the pass table, the pipeline and the per-pass checker), written from a
branch-coverage run of the area's tests before the seed-52 draw, and the two bad-input
bugs session 7 noted: a parameter with an unbound named dim, and a weights argument of
the wrong type, each a one-line DlpcError. Small models, in-process."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc import api
from dlpc.diagnostics import DlpcError
from dlpc.frontends.text import parse_model

NAMED_PARAM = """model m(x: f32[B, 4]) {
  param w: f32[B] = zeros()
  return x
}
"""

ADD = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %w = graph.param "w" : tensor<2x3xf32>
  %s = graph.add %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}
"""


# ---- bad input: a parameter with an unbound named dim (session 7's note) ------------------
def test_a_param_with_an_unbound_named_dim_is_one_located_line(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text(NAMED_PARAM)
    with pytest.raises(DlpcError) as e:
        dlpc.load(path)
    assert str(e.value).splitlines()[0] == (
        f"{path}:2:16: error: parameter 'w' has the unbound named dim 'B': a parameter's "
        "shape must be known (bind it: dims={'B': n})"
    )
    with pytest.raises(DlpcError, match="unbound named dim 'B'"):
        dlpc.load(path, dims="symbolic")
    # bound, by the batch or by name, the parameter takes the size
    assert dlpc.load(path, batch=2).weights["w"].shape == (2,)
    assert dlpc.load(path, dims={"B": 3}).weights["w"].shape == (3,)


def test_a_param_dim_only_params_name_is_bound_by_name():
    text = "model m(x: f32[4]) {\n  param w: f32[N, 4] = zeros()\n  return x\n}\n"
    with pytest.raises(DlpcError, match=r"^<string>:2:16: error: parameter 'w' has the unbound "):
        parse_model(text)
    assert parse_model(text, dims={"N": 2}).weights["w"].shape == (2, 4)


# ---- bad input: a weights argument that is no path and no dict (session 7's note) ---------
@pytest.mark.parametrize(
    "weights, what", [(5, "int"), ([1.0], "list"), (np.zeros(3), "ndarray"), (b"w.npz", "bytes")]
)
def test_weights_of_the_wrong_type_are_one_line(tmp_path, weights, what):
    message = f"error: weights must be an .npz path or a dict of arrays, not {what}"
    dlpc_file = tmp_path / "m.dlpc"
    dlpc_file.write_text(NAMED_PARAM)
    mlir = tmp_path / "add.mlir"
    mlir.write_text(ADD)
    for load in (
        lambda: parse_model(NAMED_PARAM, weights=weights),
        lambda: dlpc.load(dlpc_file, weights=weights, batch=2),
        lambda: api.load(mlir, weights=weights),
    ):
        with pytest.raises(DlpcError) as e:
            load()
        assert str(e.value) == message


def test_weights_as_a_path_or_a_mapping_still_load(tmp_path):
    mlir = tmp_path / "add.mlir"
    mlir.write_text(ADD)
    w = np.full((2, 3), 2.0, np.float32)
    np.savez(tmp_path / "w.npz", w=w)

    class Fs:  # an os.PathLike that is no Path
        def __fspath__(self):
            return str(tmp_path / "w.npz")

    for given in (tmp_path / "w.npz", str(tmp_path / "w.npz"), Fs(), {"w": w}):
        model = api.load(mlir, weights=given)
        np.testing.assert_array_equal(model.weights["w"], w)
    text = parse_model(NAMED_PARAM, weights={"w": np.ones(2, np.float32)}, batch=2)
    np.testing.assert_array_equal(text.weights["w"], np.ones(2, np.float32))


# ---- the per-pass checker (passes/check.py): what branch coverage left ---------------------
DLP_FN = """
func.func @main(%x: memref<4xf32>, %o: memref<4xf32>) attributes {dlpc.num_outputs = 1 : i64} {
  "memref.copy"(%x, %o) : (memref<4xf32>, memref<4xf32>) -> ()
  dlp.kernel "k" attributes {tasks = 1 : i64, dma_align = 64 : i64, vector_align = 64 : i64} {
    dlp.sync_cluster
  }
  func.return
}
"""


def _fn(text: str, name: str = "main"):
    from xdsl.dialects import func

    from dlpc.passes import pipeline

    module = pipeline.parse_module(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == name)
    return module, fn


def test_level_of_each_body():
    from dlpc.passes import check

    graph = (
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n  func.return %x : tensor<3xf32>\n}"
    )
    te = (
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
        '  %y = te.compute "c" (%i) : tensor<3xf32> {\n'
        "    %z = arith.constant 0.0 : f32\n"
        "    te.yield %z : f32\n"
        "  }\n"
        "  func.return %y : tensor<3xf32>\n}"
    )
    args_only = "func.func @main(%a: memref<2xf32>) {\n  func.return\n}"
    body = (
        "func.func @main(%a: memref<2xf32>, %b: memref<2xf32>) {\n"
        '  "memref.copy"(%a, %b) : (memref<2xf32>, memref<2xf32>) -> ()\n  func.return\n}'
    )
    levels = [check.level_of(_fn(t)[1]) for t in (graph, te, args_only, body, DLP_FN)]
    assert levels == ["graph", "te", "loop", "loop", "dlp"]  # (a dlp op anywhere: dlp)


def test_a_dlp_function_runs_on_the_dlp_evaluator_with_its_module():
    from dlpc.passes import check

    module, _ = _fn(DLP_FN)
    calls = []

    def dlp(single, arrays):
        calls.append(("dlp", str(single).count("dlp.sync_cluster")))
        arrays[1][:] = arrays[0] * 2

    def loop(single, arrays):  # pragma: no cover - the mutant's choice
        calls.append(("loop", 0))

    checker = check.Checker(evaluators={"loop": loop, "dlp": dlp})
    checker.start(module)
    assert calls == [("dlp", 1)] and checker.states["main"].level == "dlp"
    np.testing.assert_array_equal(
        checker.states["main"].results[0], checker.states["main"].inputs[0] * 2
    )
    assert checker.states["main"].producers == ["memref.copy"]  # (o's only writer)
    without = check.Checker(evaluators={"loop": loop})
    without.start(module)
    assert without.notes == [
        "@main after the input (dlp): not evaluated: no evaluator for the dlp level"
    ]


def test_the_last_top_level_writer_of_an_output_is_its_producer():
    from dlpc.passes import check

    _, fn = _fn(
        "func.func @main(%x: memref<4xf32>, %o: memref<4xf32>) "
        "attributes {dlpc.num_outputs = 1 : i64} {\n"
        '  "memref.copy"(%x, %o) {label = "first"} : (memref<4xf32>, memref<4xf32>) -> ()\n'
        '  "memref.copy"(%x, %o) {label = "second"} : (memref<4xf32>, memref<4xf32>) -> ()\n'
        '  "memref.copy"(%o, %x) {label = "reads"} : (memref<4xf32>, memref<4xf32>) -> ()\n'
        "  func.return\n}"
    )
    # (a later use that only reads still counts as a writer: the last top-level user)
    assert check.result_producer(fn, 0) == 'memref.copy "reads"'
    _, fn = _fn(
        "func.func @main(%x: memref<4xf32>, %o: memref<4xf32>) "
        "attributes {dlpc.num_outputs = 1 : i64} {\n"
        '  "memref.copy"(%x, %o) {label = "first"} : (memref<4xf32>, memref<4xf32>) -> ()\n'
        '  "memref.copy"(%x, %o) {label = "second"} : (memref<4xf32>, memref<4xf32>) -> ()\n'
        "  func.return\n}"
    )
    assert check.result_producer(fn, 0) == 'memref.copy "second"'
    # a writer inserted before the others later (its use comes first): the block order rules
    from xdsl.dialects.builtin import StringAttr

    last = fn.body.block.first_op.next_op
    early = last.clone()
    early.attributes["label"] = StringAttr("inserted")
    fn.body.block.insert_op_before(early, fn.body.block.first_op)
    assert fn.args[1].uses and check.result_producer(fn, 0) == 'memref.copy "second"'


LOOP_SCALE = """
func.func @main(%a: memref<3xf32>, %o: memref<3xf32>) attributes {dlpc.num_outputs = 1 : i64} {
  func.return
}
"""


def _scaling_checker():
    """A loop checker whose evaluator writes o = a * main's `scale` attribute (a pass
    changes it), and fails while the attribute is missing."""
    from xdsl.dialects.builtin import IntegerAttr

    from dlpc.passes import check

    def evaluate(single, arrays):
        main = next(iter(single.ops))
        scale = main.attributes.get("scale")
        if not isinstance(scale, IntegerAttr):
            raise NotImplementedError("no scale yet")
        arrays[1][:] = arrays[0] * scale.value.data

    return check.Checker(evaluators={"loop": evaluate})


def _set_scale(module, value: int, name: str = "main"):
    from xdsl.dialects.builtin import IntegerAttr, i64

    fn = next(op for op in module.ops if op.sym_name.data == name)
    fn.attributes["scale"] = IntegerAttr(value, i64)


def test_a_function_first_evaluated_after_a_pass_is_compared_from_then_on():
    module, _ = _fn(LOOP_SCALE)
    checker = _scaling_checker()
    checker.start(module)
    assert checker.states["main"].results is None
    _set_scale(module, 2)
    checker.after("gives-scale", module)  # (first results: nothing to compare with)
    assert checker.states["main"].unchecked == [] and checker.checked == 1
    _set_scale(module, 3)
    with pytest.raises(DlpcError) as e:
        checker.after("rescale", module)
    # only the pass since the last results is named: none left unevaluated before it
    assert str(e.value).startswith(
        "error: --check-each-pass: pass 'rescale' changed result 0 of @main (no kernel "
        "(never written)): worst element ["
    )


def test_a_function_a_pass_adds_before_main_does_not_stop_mains_check():
    from xdsl.dialects import func

    module, _ = _fn(LOOP_SCALE)
    _set_scale(module, 2)
    checker = _scaling_checker()
    checker.start(module)
    added = func.FuncOp.from_region("added", [], [], func.Region(func.Block()))
    added.body.block.add_op(func.ReturnOp())
    module.body.block.insert_op_before(added, module.body.block.first_op)
    _set_scale(module, 3)
    with pytest.raises(DlpcError, match="pass 'outline' changed result 0 of @main"):
        checker.after("outline", module)
    assert "added" not in checker.states


# ---- random inputs: a gather's data operand and other uses keep the default bound ----------
GATHER_INTS = """
func.func @main(%t: tensor<5x16xi64>, %i: tensor<4xi64>) -> (tensor<4x16xi64>, tensor<4xi64>) {
  %g = graph.gather %t, %i {axis = 0 : i64} : (tensor<5x16xi64>, tensor<4xi64>) -> tensor<4x16xi64>
  %s = graph.add %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %g, %s : tensor<4x16xi64>, tensor<4xi64>
}
"""


def test_only_a_gathers_indices_are_bounded_by_the_gathered_dim(tmp_path):
    from dlpc.passes import check

    path = tmp_path / "g.mlir"
    path.write_text(GATHER_INTS)
    model = api.load(path)
    t, i = api.random_inputs(model, seed=4)
    # the table (the gather's operand 0) is drawn in [0, 10): 80 draws reach 5 and up
    assert t.min() >= 0 and t.max() == 9 and i.min() >= 0 and i.max() < 5
    rng = np.random.default_rng(4)
    np.testing.assert_array_equal(t, rng.integers(0, 10, (5, 16)))
    np.testing.assert_array_equal(i, rng.integers(0, 5, (4,)))
    # the per-pass checker draws the same way
    checker = check.Checker(seed=4)
    checker.start(model.module)
    t2, i2 = checker.states["main"].inputs
    assert t2.max() == 9 and i2.max() < 5
    (g, s) = checker.states["main"].results
    np.testing.assert_array_equal(g, t2[i2])
    np.testing.assert_array_equal(s, i2 + i2)


# ---- api seed 52's killable survivor (drawn on b82eb00) ------------------------------------
def test_static_specs_refuse_a_larger_shape_as_a_smaller_one():
    """_check_against with static specs only (no symbol: no per-call guard): an input of
    another shape is refused whether it sorts before or after the expected one (seed 52's
    api.py:270, `x.shape != shape` -> `<`, let a larger shape through)."""
    f32 = np.dtype(np.float32)
    specs = [((2, 3), f32)]
    assert api._check_against(["x"], specs, [np.zeros((2, 3), f32)])[0].shape == (2, 3)
    for shape in [(2, 4), (3, 3), (2, 2), (1, 3), (2, 3, 1)]:
        with pytest.raises(DlpcError) as info:
            api._check_against(["x"], specs, [np.zeros(shape, f32)])
        got = "x".join(map(str, shape))
        assert str(info.value) == f"error: input 'x' has shape {got} but the model expects 2x3"


def test_after_a_new_signature_gather_indices_stay_inside_the_gathered_dim():
    """A pass that changes @main's inputs gets fresh inputs from seed + 1, drawn as at the
    start: gather indices inside the gathered dim (they were drawn in [0, 10) and a
    gather from 3 rows was then noted as not evaluated rather than checked)."""
    from dlpc.passes import check, pipeline

    def gather(n: int):
        return pipeline.parse_module(
            f"func.func @main(%t: tensor<3x4xf32>, %i: tensor<{n}xi64>) -> tensor<{n}x4xf32> {{\n"
            f"  %g = graph.gather %t, %i {{axis = 0 : i64}} : (tensor<3x4xf32>, tensor<{n}xi64>)"
            f" -> tensor<{n}x4xf32>\n"
            f"  func.return %g : tensor<{n}x4xf32>\n}}\n"
        )

    checker = check.Checker(seed=1)
    checker.start(gather(8))
    assert checker.notes == []
    checker.after("widen", gather(64))
    assert checker.notes == ["@main: pass 'widen' changed the inputs"]
    t, i = checker.states["main"].inputs
    assert i.shape == (64,) and i.min() >= 0 and i.max() == 2
    np.testing.assert_array_equal(checker.states["main"].results[0], t[i])
