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
