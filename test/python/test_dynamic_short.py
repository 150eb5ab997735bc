"""Short-extent kernels of the one-compile program (issue 29, docs/dynamic.md,
passes/lower/short_extents.py): the C program carries copies of its kernels for small
values of the dims, picked per call by a guard in dlpc_main; every call, at a short
binding or not, matches numpy, the program is still one compile, and `stats["short"]`
counts the calls that took the copies."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc.api import compile as dlpc_compile
from dlpc.api import reference
from dlpc.diagnostics import DlpcError
from dlpc.dialects.loop import KernelOp
from dlpc.frontends.text import parse_model
from dlpc.runtime.dynamic import DynamicFunction, Generic

# one attention head over a symbolic batch and length (test_dynamic_speed's): linears,
# q k^T, softmax and layer norm over S (row groups), att @ v (a reduction over S)
SOURCE = """
model t(x: f32[B, S, 32]) {
  param wq: f32[32, 32] = normal(seed=1, std=0.2)
  param wk: f32[32, 32] = normal(seed=2, std=0.2)
  param wv: f32[32, 32] = normal(seed=3, std=0.2)
  param b: f32[32] = normal(seed=4, std=0.1)
  param g: f32[32] = normal(seed=5, std=1.0)
  let q = linear(x, wq, b)
  let k = linear(x, wk, b)
  let v = linear(x, wv, b)
  let a = softmax(matmul(q, k, transpose_b=true) * 0.25, axis=-1)
  return a @ v, linear(relu(a @ v), wq, b), layer_norm(a @ v, g, b)
}
"""
# static copies at (B, S) = (1, 1) and (1, 3); at S = 2 alone the batch keeps its
# maximum, so that copy keeps its marks (it stops at the call's batch)
SHORT = [{"B": 1, "S": 1}, {"B": 1, "S": 3}, {"S": 2}]


@pytest.fixture(scope="module")
def head():
    model = parse_model(SOURCE, dims="symbolic")
    return model, dlpc_compile(model, target="c", max_dims={"B": 2, "S": 32}, short=SHORT)


def test_short_copies_match_numpy(head):
    model, fn = head
    rng = np.random.default_rng(0)
    calls = [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (2, 1), (1, 4), (1, 9), (2, 32), (1, 1)]
    for b, s in calls:
        x = rng.standard_normal((b, s, 32)).astype(np.float32)
        for _ in range(2):  # (the second call takes the binding's C path)
            got, want = fn(x), reference(model, [x])
            for y, w in zip(got, want):
                assert y.shape == w.shape
                np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-5)
    # the short bindings: (1, 1) (twice), (1, 2), (2, 2), (1, 3); each called twice
    assert fn.stats["compiles"] == 1 and fn.stats["short"] == 2 * 5


def test_the_program_holds_the_copies(head):
    model, fn = head
    fn(np.zeros((1, 1, 32), np.float32))
    names = {op.sym for op in fn.lowered.walk() if isinstance(op, KernelOp)}
    for suffix in ("_B1_S1", "_B1_S3", "_S2"):
        assert any(n.startswith("softmax") and n.endswith(suffix) for n in names), names
    assert any(n.startswith("softmax") and n[-1].isdigit() and "_S" not in n for n in names)
    source = fn.source
    assert "_B1_S3(" in source and "dlpc_main" in source


def test_versions_of_short_k():
    """short=K: each dim that leads no input at 1..K, the leading dims at 1, within the
    maxima; a list is taken as it is; a bad one is one line."""
    model = parse_model(SOURCE, dims="symbolic")
    fn = DynamicFunction(model, lambda m: m, maxima={"S": 2}, short=3)  # pyright: ignore[reportArgumentType]
    generic = fn.generic
    assert isinstance(generic, Generic)
    assert generic.versions() == [{"B": 1, "S": 1}, {"B": 1, "S": 2}]
    fn = DynamicFunction(model, lambda m: m, short=0)  # pyright: ignore[reportArgumentType]
    assert fn.generic is not None and fn.generic.versions() == []
    with pytest.raises(DlpcError, match=r"short= binding \{'T': 1\} must give symbolic dims"):
        DynamicFunction(model, lambda m: m, short=[{"T": 1}])  # pyright: ignore[reportArgumentType]
    with pytest.raises(DlpcError, match="short= must be >= 0"):
        DynamicFunction(model, lambda m: m, short=-1)  # pyright: ignore[reportArgumentType]


def test_short_zero_compiles_no_copies():
    model = parse_model(SOURCE, dims="symbolic")
    fn = dlpc_compile(model, target="c", max_dims={"B": 2, "S": 8}, short=0)
    x = np.random.default_rng(1).standard_normal((1, 3, 32)).astype(np.float32)
    for y, w in zip(fn(x), reference(model, [x])):
        np.testing.assert_allclose(y, w, rtol=1e-4, atol=1e-5)
    assert "scf.if" not in str(fn.lowered).split("loop.kernel", 1)[0]
    assert "short" not in fn.stats
