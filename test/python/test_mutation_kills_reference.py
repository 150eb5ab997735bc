"""Tests written against surviving mutants of the numpy reference and the te evaluator
(issue 35, bench/mutation.py --area reference)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference

PARAM = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %w = graph.param "w" : tensor<3xi64>
  %y = graph.add %x, %w : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  func.return %y : tensor<3xi64>
}"""


def test_a_weight_of_another_kind_is_refused():
    """Float weights for an i64 param are an error naming it; i32 ones are cast."""
    x = np.arange(3, dtype=np.int64)
    with pytest.raises(
        DlpcError, match="weight 'w' has dtype float32 but graph.param declares int64"
    ):
        run_reference(parse_module(PARAM), [x], {"w": np.ones(3, np.float32)})
    (y,) = run_reference(parse_module(PARAM), [x], {"w": np.ones(3, np.int32)})
    np.testing.assert_array_equal(y, x + 1)


def test_te_integer_comparisons():
    """The te evaluator's arith.cmpi on ints (signed predicates) for every graph.compare
    predicate, through graph-to-te against the graph reference (test_graph_to_te compares
    floats only)."""
    from test_graph_to_te import ints, lower_and_check, module_of

    from dlpc.dialects import graph as g

    a, b = ints(3, 4), ints(4)
    a[0, :] = b  # some equal elements
    for pred in g.CompareOp.PREDICATES:
        build = lambda x, y: g.CompareOp.make(x, y, predicate=pred)  # noqa: B023, E731
        lower_and_check(module_of([a, b], build), [a, b])


def test_pad_crops_with_negative_ends():
    """Negative pads at the end crop: 2 of 5 columns (not only the one the numpy backend's
    test crops at the start), 1 of 4 rows."""
    from test_numpy_backend import rand, run_op

    from dlpc.dialects import graph as g

    x = rand(4, 5)
    out = run_op(g.PadOp, [x], pads=(1, 0, -1, -2), value=3.0)
    np.testing.assert_array_equal(out, np.pad(x[:3, :3], ((1, 0), (0, 0)), constant_values=3))


def test_te_rsqrt():
    """The te evaluator's math.rsqrt is 1 / sqrt (graph-to-te writes div(1, sqrt), so
    only te IR written by hand has it)."""
    from dlpc.reference.te import run_te

    module = parse_module("""func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = te.compute "rsqrt_0" (%i0) : tensor<4xf32> {
    %v = te.read %x[%i0] : tensor<4xf32>
    %r = math.rsqrt %v : f32
    te.yield %r : f32
  }
  func.return %y : tensor<4xf32>
}""")
    x = np.array([0.25, 1.0, 4.0, 16.0], np.float32)
    (out,) = run_te(module, [x])
    np.testing.assert_allclose(out, [2.0, 1.0, 0.5, 0.25], rtol=1e-6)


def test_winograd_input_transform_tile_by_tile():
    """V[4a+b, n, c, th, tw] = (B^T d B)[a, b] for the 4x4 tile d at (2 th, 2 tw) of the
    padded input, computed here one tile at a time (3 x 5 tiles of a 5 x 9 input)."""
    from dlpc.reference.graph import winograd_input_transform

    x = np.random.default_rng(7).standard_normal((1, 2, 5, 9)).astype(np.float32)
    pads = (1, 1, 1, 1)
    v = winograd_input_transform(x, pads)
    th, tw = (5 + 2 - 1) // 2, (9 + 2 - 1) // 2
    assert v.shape == (16, 1, 2, th, tw)
    xp = np.zeros((1, 2, 2 * th + 2, 2 * tw + 2), np.float32)
    xp[:, :, 1:6, 1:10] = x
    bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
    for i in range(th):
        for j in range(tw):
            for c in range(2):
                tile = bt @ xp[0, c, 2 * i : 2 * i + 4, 2 * j : 2 * j + 4] @ bt.T
                np.testing.assert_allclose(v[:, 0, c, i, j], tile.ravel(), rtol=1e-5, atol=1e-5)


def test_one_input_too_many_is_an_error():
    """check_inputs refuses more inputs than the model takes, as it refuses fewer."""
    module = parse_module("""func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = graph.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}""")
    x = np.ones(2, np.float32)
    for given in ([], [x, x]):
        with pytest.raises(DlpcError, match=rf"takes 1 inputs \(.*\) but {len(given)} were given"):
            run_reference(module, given, {})


def test_conv2d_adds_a_wider_bias():
    """An f16 convolution with an f32 bias: the sum is f32 (not added in place), y + b."""
    from dlpc.reference.graph import conv2d

    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float16)
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float16)
    b = np.array([1.0, -2.0, 3.0], np.float32)
    y = conv2d(x, w, b, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1)
    plain = conv2d(x, w, None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, plain.astype(np.float32) + b.reshape(1, 3, 1, 1), rtol=1e-6)


def test_winograd_output_transform_tile_by_tile_with_bias():
    """y[n, o, 2 th + a, 2 tw + b] = (A^T m A)[a, b] + bias[o], cropped to (3, 5)."""
    from dlpc.reference.graph import winograd_output_transform

    m = np.random.default_rng(9).standard_normal((16, 1, 2, 2, 3)).astype(np.float32)
    b = np.array([0.5, -1.5], np.float32)
    y = winograd_output_transform(m, b, output=(3, 5))
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)
    full = np.zeros((1, 2, 4, 6), np.float32)
    for o in range(2):
        for i in range(2):
            for j in range(3):
                tile = at @ m[:, 0, o, i, j].reshape(4, 4) @ at.T
                full[0, o, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2] = tile + b[o]
    np.testing.assert_allclose(y, full[:, :, :3, :5], rtol=1e-5, atol=1e-5)


def test_dropout_seed_is_taken_modulo_2_to_the_32():
    """graph.dropout's seed enters the hash as a 32-bit value."""
    from dlpc.reference.graph import dropout_keep

    a = dropout_keep((4, 8), 3, 2**32 + 5, 0.5)
    assert np.array_equal(a, dropout_keep((4, 8), 3, 5, 0.5))
    assert not np.array_equal(a, dropout_keep((4, 8), 3, 6, 0.5))
