"""A batch run chunk after chunk (passes/graph/rebatch.py, backends/runtime/chunks.py,
`dlpc.compile`'s batch_chunks): which graphs are per-sample, the chunk's graph, and the
chunked call against the whole batch's program and the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc import api
from dlpc.backends.runtime.chunks import BatchChunks
from dlpc.diagnostics import DlpcError
from dlpc.passes.graph.rebatch import batch_values, chunk_plan, rebatch

# a conv net at batch 8; its largest working set is the residual add's: two operands
# and the result of 16 x 32 x 32 floats per image, 192 KB an image, 1.5 MB in all
NET = """
model net(x: f32[8, 4, 32, 32]) {
  param w1: f32[16, 4, 3, 3] = kaiming(seed=1)
  param b1: f32[16] = normal(seed=2, std=0.1)
  param s: f32[16] = uniform(seed=3, low=0.8, high=1.2)
  param t: f32[16] = normal(seed=4, std=0.1)
  param m: f32[16] = normal(seed=5, std=0.1)
  param v: f32[16] = uniform(seed=6, low=0.5, high=1.5)
  param w2: f32[16, 16, 1, 1] = kaiming(seed=7)
  param fc: f32[3, 16] = kaiming(seed=8)
  let h = clip(batch_norm(conv2d(x, w1, b1, padding=1), s, t, m, v), min=0, max=6)
  let h = relu(conv2d(h, w2) + h)
  let p = reshape(global_avg_pool(h), shape=[8, 16])
  return linear(p, fc)
}
"""


@pytest.fixture
def net(tmp_path):
    path = tmp_path / "net.dlpc"
    path.write_text(NET)
    return api.load(path)


def _load(tmp_path, text):
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    return api.load(path)


def test_plan_and_chunk_graph(net):
    found = batch_values(net.module)
    assert found is not None and found[0] == 8
    assert chunk_plan(net.module, 1 << 30) is None  # the whole batch fits
    B, chunk = chunk_plan(net.module, 400_000)  # 2 images of 192 KB fit
    assert (B, chunk) == (8, 2)
    small = rebatch(net.module, 2)
    assert small is not None
    text = str(small)
    assert "tensor<2x4x32x32xf32>" in text and "-> tensor<2x3xf32>" in text
    assert "tensor<8x" not in text
    assert rebatch(net.module, 3) is None  # 3 does not divide 8


@pytest.mark.parametrize(
    "body",
    [
        "return reduce_sum(x, axes=[0])",  # a reduction over the batch
        "return x + y",  # y: [8, 5], a batch-sized operand that is no batch value
        "return transpose(x, perm=[1, 0])",
        "return reshape(x, shape=[4, 10])",
        "return pad(x, pads=[1, 0, 0, 0])",  # a padded batch
    ],
)
def test_not_per_sample(tmp_path, body):
    model = _load(
        tmp_path,
        f"model m(x: f32[8, 5]) {{\n  param y: f32[8, 5] = normal(seed=1)\n  {body}\n}}\n",
    )
    assert batch_values(model.module) is None
    assert chunk_plan(model.module, 1) is None and rebatch(model.module, 1) is None


def test_chunked_call_matches_whole_batch_and_reference(net, monkeypatch):
    import dlpc.passes.graph.rebatch as rb

    monkeypatch.setattr(rb, "CHUNK_BUDGET_BYTES", 400_000)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # (the budget is per thread of the team)
    chunked = api.compile(net, target="c")
    whole = api.compile(net, target="c", batch_chunks=False)
    run = chunked._direct
    assert isinstance(run, BatchChunks) and (run.chunk, run.repeat) == (2, 4)
    assert not isinstance(whole._direct, BatchChunks)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # two threads' caches: chunks of 4
    two = api.compile(net, target="c")
    assert isinstance(two._direct, BatchChunks) and two._direct.chunk == 4
    x = api.random_inputs(net, seed=3)[0]
    got, want = chunked(x)[0], whole(x)[0]
    assert got.shape == (8, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ref = api.compile(net, target="numpy")(x)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    # the Python loop (no extension) gives the same, and other layouts are converted
    run._fast = None
    np.testing.assert_array_equal(chunked(x)[0], got)
    np.testing.assert_array_equal(chunked(np.asfortranarray(x))[0], got)
    with pytest.raises(DlpcError, match="shape"):
        chunked(x[:4])


def test_an_image_over_the_budget_runs_one_a_thread(net, monkeypatch):
    """An image of 192 KB against a budget of 100 KB: alone, a chunk of one image; on a
    team of 2 (8 % 2 == 0), chunks of 2, one image a thread, not one image split over
    both; a team of 3 does not divide the batch (chunks of one), a team of 8 is the
    whole batch (no chunks)."""
    import dlpc.passes.graph.rebatch as rb

    assert chunk_plan(net.module, 100_000) == (8, 1)
    assert chunk_plan(net.module, 200_000, 2) == (8, 2)
    assert chunk_plan(net.module, 300_000, 3) == (8, 1)
    assert chunk_plan(net.module, 800_000, 8) is None
    monkeypatch.setattr(rb, "CHUNK_BUDGET_BYTES", 100_000)  # x 2 threads: 1 image fits
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    two = api.compile(net, target="c")
    assert isinstance(two._direct, BatchChunks) and two._direct.chunk == 2
    x = api.random_inputs(net, seed=5)[0]
    ref = api.compile(net, target="numpy")(x)[0]
    np.testing.assert_allclose(two(x)[0], ref, rtol=1e-4, atol=1e-5)
