"""The dynamic area's decisions, fourth round (issue 35, bench/mutation.py --area dynamic):
the one-compile program (runtime/dynamic.py's Generic) on small symbolic graphs compiled
for C and numpy: its outputs sliced back exact and C-contiguous at every kind of binding,
the previous call's fast path left for another dtype or a list, an undeclared maximum
grown by doubling or to the next power of two, a declared one refused, a hot binding's own
program; tiles= passing an input without the tiled dim whole to every chunk."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.model import Model
from dlpc.passes import pipeline
from dlpc.reference import graph as ref
from dlpc.runtime import dynamic
from dlpc.runtime.dynamic import DynamicFunction

TWO = """
func.func @main(%x: tensor<?x?xf32, ["b", "seq"]>) -> (tensor<?x?xf32, ["b", "seq"]>, tensor<?xf32, ["b"]>) {
  %e = graph.exp %x : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?x?xf32, ["b", "seq"]>
  %s = graph.reduce_sum %e {axes = array<i64: 1>} : (tensor<?x?xf32, ["b", "seq"]>) -> tensor<?xf32, ["b"]>
  func.return %e, %s : tensor<?x?xf32, ["b", "seq"]>, tensor<?xf32, ["b"]>
}
"""

ONE = """
func.func @main(%x: tensor<?x4xf32, ["b"]>) -> tensor<?x4xf32, ["b"]> {
  %y = graph.tanh %x : (tensor<?x4xf32, ["b"]>) -> tensor<?x4xf32, ["b"]>
  func.return %y : tensor<?x4xf32, ["b"]>
}
"""


def _model(text: str) -> Model:
    return Model(pipeline.parse_module(text))


def _x(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("target", ["c", "numpy"])
def test_one_program_serves_every_binding_exact_and_contiguous(target):
    """(3, 5): both dims cut (a copy); (1, 5): one row (a view of the prefix); (2, 128):
    seq at its maximum, rows whole (a view); (5, 1): a column (a copy); (5, 3) after (3, 5):
    the dims argument in graph-to-te's order, b then seq."""
    c = dlpc.compile(_model(TWO), target=target)
    for shape in [(3, 5), (1, 5), (2, 128), (5, 1), (5, 3), (3, 5)]:
        x = _x(*shape, seed=shape[0] * 7 + shape[1])
        e, s = c(x)
        assert e.shape == shape and s.shape == shape[:1]
        assert e.flags.c_contiguous and s.flags.c_contiguous
        np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(s, np.exp(x).sum(1), rtol=1e-5)
    assert c.function.stats["compiles"] == 1 and c.function.generic is not None


def test_the_fast_path_is_left_for_another_dtype_or_a_list():
    c = dlpc.compile(_model(ONE))
    x = _x(3, 4)
    for _ in range(2):  # (the second call takes the previous call's program and plan)
        np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    with pytest.raises(DlpcError, match="^error: input 'x' has dtype float64 but the model expects float32$"):  # fmt: skip
        c(x.astype(np.float64))
    with pytest.raises(DlpcError, match="^error: input 'x' has dtype float64"):
        c(x.tolist())
    with pytest.raises(DlpcError, match="^error: the model takes 1 inputs \\(x\\) but 2 were given$"):  # fmt: skip
        c(x, x)
    y = _x(2, 4, seed=1)
    np.testing.assert_allclose(c(y)[0], np.tanh(y), rtol=1e-6)
    np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    assert c.function.stats["calls"] == 4


def test_an_undeclared_maximum_grows_by_doubling_or_to_the_next_power_of_two(monkeypatch):
    """From a maximum of 3: b = 4 gives max(2 * 3, 4) = 6; b = 7 gives max(12, 8) = 12;
    b = 30 gives max(24, 32) = 32; each growth one compile, every result exact."""
    monkeypatch.setattr(dynamic, "DEFAULT_MAX", 3)
    c = dlpc.compile(_model(ONE))
    f = c.function
    for b, grown, compiles in [(2, 3, 1), (4, 6, 2), (7, 12, 3), (5, 12, 3), (30, 32, 4)]:
        x = _x(b, 4, seed=b)
        np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
        assert f.generic.max == {"b": grown} and f.stats["compiles"] == compiles


def test_a_declared_maximum_is_refused_and_a_call_at_it_is_exact():
    c = dlpc.compile(_model(ONE), max_dims={"b": 4})
    x = _x(4, 4)  # (the input has the buffer's shape: passed as it is)
    np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
    y = _x(2, 4, seed=2)
    np.testing.assert_allclose(c(y)[0], np.tanh(y), rtol=1e-6)
    with pytest.raises(
        DlpcError, match="^error: input 'x' dim 0 \\('b'\\) is 5, above its declared maximum 4$"
    ):
        c(_x(5, 4))


def test_a_hot_binding_gets_its_own_program_after_n_calls():
    c = dlpc.compile(_model(ONE), specialise=2)
    f = c.function
    x = _x(3, 4)
    for k in range(4):
        np.testing.assert_allclose(c(x)[0], np.tanh(x), rtol=1e-6)
        assert f.stats.get("specialised", 0) == (0 if k == 0 else 1)
    assert f.stats["compiles"] == 2 and list(f.cache) == [(("b", 3),)]


TILED_W = """
func.func @main(%x: tensor<?x4xf32, ["b"]>, %w: tensor<4x3xf32>) -> tensor<?x3xf32, ["b"]> {
  %y = graph.matmul %x, %w : (tensor<?x4xf32, ["b"]>, tensor<4x3xf32>) -> tensor<?x3xf32, ["b"]>
  func.return %y : tensor<?x3xf32, ["b"]>
}
"""


@pytest.mark.parametrize("b", [1, 3, 4])
def test_tiles_pass_an_input_without_the_dim_whole_to_every_chunk(b):
    def on_reference(static: Model):
        return lambda *xs: ref.run_reference(static.module, list(xs), static.weights)

    options = {"tiles": {"b": 2}}
    if "symbolic" in {f.name for f in dataclasses.fields(DynamicFunction)}:
        options["symbolic"] = False
    f = DynamicFunction(_model(TILED_W), on_reference, **options)
    assert f.lead == [True, False]
    x, w = _x(b, 4), _x(4, 3, seed=9)
    (y,) = f(x, w)
    np.testing.assert_allclose(y, x @ w, rtol=1e-5, atol=1e-6)


MIN = -9223372036854775808
MIXED = f"""
func.func @main(%x: tensor<?x?x8xf32, ["b", "seq"]>, %y: tensor<?x?x8xf32, ["b", "seq"]>) -> (tensor<?x8xf32, ["2*b*seq"]>, tensor<?x8xf32, ["b"]>, tensor<?x8x8xf32, ["b"]>, tensor<?x?x8xf32, ["b", "seq"]>) {{
  %c = graph.concat %x, %y {{axis = 1 : i64}} : (tensor<?x?x8xf32, ["b", "seq"]>, tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x?x8xf32, ["b", "2*seq"]>
  %s = graph.softmax %c {{axis = 1 : i64}} : (tensor<?x?x8xf32, ["b", "2*seq"]>) -> tensor<?x?x8xf32, ["b", "2*seq"]>
  %r = graph.reshape %s {{shape = array<i64: {MIN}, 8>, sym_shape = ["2*b*seq"]}} : (tensor<?x?x8xf32, ["b", "2*seq"]>) -> tensor<?x8xf32, ["2*b*seq"]>
  %t = graph.reduce_max %x {{axes = array<i64: 1>}} : (tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x8xf32, ["b"]>
  %m = graph.matmul %x, %y {{transpose_a = true}} : (tensor<?x?x8xf32, ["b", "seq"]>, tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x8x8xf32, ["b"]>
  %p = graph.transpose %x {{perm = array<i64: 1, 0, 2>}} : (tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x?x8xf32, ["seq", "b"]>
  %q = graph.transpose %p {{perm = array<i64: 1, 0, 2>}} : (tensor<?x?x8xf32, ["seq", "b"]>) -> tensor<?x?x8xf32, ["b", "seq"]>
  %e = graph.exp %q : (tensor<?x?x8xf32, ["b", "seq"]>) -> tensor<?x?x8xf32, ["b", "seq"]>
  func.return %r, %t, %m, %e : tensor<?x8xf32, ["2*b*seq"]>, tensor<?x8xf32, ["b"]>, tensor<?x8x8xf32, ["b"]>, tensor<?x?x8xf32, ["b", "seq"]>
}}
"""


def _mixed(x, y):
    c = np.concatenate([x, y], 1)
    s = np.exp(c - c.max(1, keepdims=True))
    s = s / s.sum(1, keepdims=True)
    return [s.reshape(-1, 8), x.max(1), np.swapaxes(x, 1, 2) @ y, np.exp(x)]


@pytest.mark.parametrize("target", ["c", "numpy"])
def test_expressions_of_two_symbols_under_runtime_extents(target):
    """One program for a concat (2*seq), a softmax over it, a reshape to 2*b*seq, a max
    and a matmul contracting over seq, a transpose moving seq first and back: exact at
    seq 1, 3, 16, 17 (inside, at and past a vector tile) and b 1 to 3."""
    c = dlpc.compile(_model(MIXED), target=target)
    for b, s in [(2, 3), (1, 17), (3, 1), (2, 16), (1, 3)]:
        rng = np.random.default_rng(b * 100 + s)
        x, y = (rng.standard_normal((b, s, 8)).astype(np.float32) for _ in range(2))
        for k, (g, w) in enumerate(zip(c(x, y), _mixed(x, y))):
            assert g.shape == w.shape, (k, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"output {k}")
    assert c.function.stats["compiles"] == 1


GEMM = """
func.func @main(%x: tensor<?x32xf32, ["seq"]>, %w: tensor<32x24xf32>) -> (tensor<?x24xf32, ["seq"]>, tensor<24xf32>) {
  %y = graph.matmul %x, %w : (tensor<?x32xf32, ["seq"]>, tensor<32x24xf32>) -> tensor<?x24xf32, ["seq"]>
  %r = graph.relu %y : (tensor<?x24xf32, ["seq"]>) -> tensor<?x24xf32, ["seq"]>
  %s = graph.reduce_sum %r {axes = array<i64: 0>} : (tensor<?x24xf32, ["seq"]>) -> tensor<24xf32>
  func.return %r, %s : tensor<?x24xf32, ["seq"]>, tensor<24xf32>
}
"""


def test_register_tiles_over_symbolic_rows_compute_only_the_calls_rows():
    """A GEMM over seq rows (the schedule's register tiles split seq) and a sum over
    them: exact at seq below, at and past a tile (1 to 33), the sum over exactly the
    call's rows (the tiles' padding rows never reach it)."""
    c = dlpc.compile(_model(GEMM))
    w = _x(32, 24, seed=5)
    for s in [1, 3, 4, 7, 8, 13, 33]:
        x = _x(s, 32, seed=s)
        r, total = c(x, w)
        want = np.maximum(x @ w, 0)
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, want.sum(0), rtol=1e-5, atol=1e-4)
    assert c.function.stats["compiles"] == 1


UNMASKABLE = {
    "avg_pool2d": (
        'func.func @main(%x: tensor<1x3x?x8xf32, ["seq"]>) -> tensor<1x3x?x7xf32, ["seq + -1"]> {\n'
        '  %a = graph.avg_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<1x3x?x8xf32, ["seq"]>) -> tensor<1x3x?x7xf32, ["seq + -1"]>\n'
        '  func.return %a : tensor<1x3x?x7xf32, ["seq + -1"]>\n}',
        "graph.avg_pool2d mixes positions along the padded dim 'seq': it cannot be masked",
    ),
    "global_avg_pool": (
        'func.func @main(%x: tensor<1x3x?x8xf32, ["seq"]>) -> tensor<1x3x1x1xf32> {\n'
        '  %a = graph.global_avg_pool %x : (tensor<1x3x?x8xf32, ["seq"]>) -> tensor<1x3x1x1xf32>\n'
        "  func.return %a : tensor<1x3x1x1xf32>\n}",
        "graph.global_avg_pool mixes positions along the padded dim 'seq': it cannot be masked",
    ),
    "sum-over-2*seq": (
        'func.func @main(%x: tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x3xf32, ["b"]> {\n'
        '  %c = graph.concat %x, %x {axis = 1 : i64} : (tensor<?x?x3xf32, ["b", "seq"]>, tensor<?x?x3xf32, ["b", "seq"]>) -> tensor<?x?x3xf32, ["b", "2*seq"]>\n'
        '  %s = graph.reduce_sum %c {axes = array<i64: 1>} : (tensor<?x?x3xf32, ["b", "2*seq"]>) -> tensor<?x3xf32, ["b"]>\n'
        '  func.return %s : tensor<?x3xf32, ["b"]>\n}',
        "graph.reduce_sum mixes positions along '2*seq', an expression of a padded dim: it "
        "cannot be masked",
    ),
    "layer_norm-axis-1": (
        'func.func @main(%x: tensor<?x?xf32, ["b", "seq"]>) -> tensor<?x?xf32, ["b", "seq"]> {\n'
        '  %g = graph.param "g" : tensor<1xf32>\n'
        '  %y = graph.layer_norm %x, %g {axis = -1 : i64} : (tensor<?x?xf32, ["b", "seq"]>, tensor<1xf32>) -> tensor<?x?xf32, ["b", "seq"]>\n'
        '  func.return %y : tensor<?x?xf32, ["b", "seq"]>\n}',
        "graph.layer_norm mixes positions along the padded dim 'seq': it cannot be masked",
    ),
}


@pytest.mark.parametrize("case", list(UNMASKABLE))
def test_what_graph_mask_padding_cannot_mask_is_named(case):
    from xdsl.utils.exceptions import VerifyException

    from dlpc.passes.graph.mask_padding import mask_padding

    text, message = UNMASKABLE[case]
    with pytest.raises(VerifyException) as e:
        mask_padding(pipeline.parse_module(text), ["seq"])
    assert str(e.value) == f"graph-mask-padding: {message}"


def test_a_padded_dim_no_op_mixes_gets_no_mask_and_a_layer_norm_elsewhere_passes():
    """Elementwise ops and a layer norm over a static axis need no mask: no argument."""
    from dlpc.passes.graph.mask_padding import mask_padding

    text = (
        'func.func @main(%x: tensor<?x4xf32, ["seq"]>) -> tensor<?x4xf32, ["seq"]> {\n'
        '  %g = graph.param "g" : tensor<4xf32>\n'
        '  %y = graph.layer_norm %x, %g {axis = 1 : i64} : (tensor<?x4xf32, ["seq"]>, tensor<4xf32>) -> tensor<?x4xf32, ["seq"]>\n'
        '  %e = graph.exp %y : (tensor<?x4xf32, ["seq"]>) -> tensor<?x4xf32, ["seq"]>\n'
        '  func.return %e : tensor<?x4xf32, ["seq"]>\n}'
    )
    module = pipeline.parse_module(text)
    assert mask_padding(module, ["seq"]) == []
    assert len(ref.main_func(module).body.block.args) == 1


def test_python_expr_evaluates_as_the_dim():
    """The numpy backend's text of a dim (`python_expr`) is the dim's value for every
    binding: coefficients, products, a floor division, a constant term."""
    from dlpc.dialects import symdims as sd

    s, t = sd.sym("s"), sd.sym("t")
    dims = [s, 2 * s, s * t * 3 - 2, (s + -3) // 2 + 1, (2 * s + 1) // 4 * t, -s + 7, 5]
    for d in dims:
        text = sd.python_expr(d)
        for sv, tv in [(1, 1), (5, 3), (8, 2), (13, 7)]:
            env = {sd.python_name("s"): sv, sd.python_name("t"): tv}
            assert eval(text, env) == sd.evaluate(d, {"s": sv, "t": tv}), (str(d), text)
    assert sd.python_name("a.b-c") == "dim_a_b_c"


NAMED = """
func.func @main(%x: tensor<?x4xf32, ["b"]> {dlpc.name = "feat"}, %w: tensor<4x3xf32> {dlpc.name = "wt"}) -> tensor<?x3xf32, ["b"]> {
  %y = graph.matmul %x, %w : (tensor<?x4xf32, ["b"]>, tensor<4x3xf32>) -> tensor<?x3xf32, ["b"]>
  func.return %y : tensor<?x3xf32, ["b"]>
}
"""


def test_the_dims_input_is_named_after_the_named_arguments():
    """graph-to-te appends dlpc_dims with its name: one argument attribute per input of
    the lowered @main (the names feat, wt, dlpc_dims), none padded in between."""
    from xdsl.dialects import func

    c = dlpc.compile(_model(NAMED))
    x, w = _x(2, 4), _x(4, 3, seed=3)
    np.testing.assert_allclose(c(x, w)[0], x @ w, rtol=1e-5, atol=1e-6)
    main = next(
        op for op in c.function.last.lowered.walk()
        if isinstance(op, func.FuncOp) and op.sym_name.data == "main"
    )  # fmt: skip
    names = [a.data.get("dlpc.name") for a in main.arg_attrs.data]
    assert len(names) == len(main.body.block.args)  # (the output buffer's: no name)
    assert [n.data if n else None for n in names] == ["feat", "wt", "dlpc_dims", None]


def test_a_static_zero_dim_is_not_read_as_a_symbol():
    """shape_from_type: a 0 dim is static (only a negative one is `?`), so the encoding's
    names go to the `?` dims after it."""
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

    from dlpc.dialects import symdims as sd

    enc = ArrayAttr([StringAttr("b")])
    assert sd.shape_from_type((0, -1, 3), enc) == (0, sd.sym("b"), 3)
    assert sd.shape_from_type((-1, 0), enc) == (sd.sym("b"), 0)
