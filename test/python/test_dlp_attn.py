"""Attention folded into the row chain that reads its merged heads (passes/lower/_dlp_attn.py),
on the simulator against the numpy reference."""

import numpy as np
import pytest

import dlpc

MODEL = """model attn(x: f32[1, 16, 32]) {{
  param wq: f32[32, 32] = kaiming(seed=1, gain=1.0)
  param wk: f32[32, 32] = kaiming(seed=2, gain=1.0)
  param wv: f32[32, 32] = kaiming(seed=3, gain=1.0)
  param wo: f32[32, 32] = kaiming(seed=4, gain=1.0)
  param bo: f32[32] = normal(seed=5, std=0.1)
  param g: f32[32] = normal(seed=6)
  param beta: f32[32] = normal(seed=7)
  let q = transpose(reshape(matmul(x, wq), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let k = transpose(reshape(matmul(x, wk), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let v = transpose(reshape(matmul(x, wv), shape=[1, 16, 2, 16]), perm=[0, 2, 1, 3])
  let a = softmax({scores}, axis=-1) @ v
  let a = reshape(transpose(a, perm=[0, 2, 1, 3]), shape=[1, 16, 32])
  return layer_norm(x + linear(a, wo, bo), g, beta, eps=1e-5)
}}
"""
FOLDED = "matmul_mul_0,softmax_12_max,softmax_12_exp,softmax_12_sum,softmax_12,matmul_13"


def run(tmp_path, scores: str, **options):
    """(dlp kernels' (name, dlpc.fused), the output checked against the reference)."""
    path = tmp_path / "m.dlpc"
    path.write_text(MODEL.format(scores=scores))
    model = dlpc.load(path)
    compiled = dlpc.compile(model, target="dlp", loop_to_dlp=options)
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    kernels = []
    for k in compiled.lowered.walk():
        if k.name == "dlp.kernel":
            fused = k.attributes.get("dlpc.fused")
            kernels.append((k.sym, fused.data if fused is not None else ""))
    return kernels


@pytest.mark.parametrize(
    "scores", ["matmul(q, k, transpose_b=true) * (1 / 4)", "matmul(q, k, transpose_b=true)"]
)
def test_attention_computed_by_the_row_chain(tmp_path, scores):
    kernels = run(tmp_path, scores)
    assert not any(n.startswith("matmul") for n, _ in kernels)  # (no attention kernel)
    members = kernels[-1][1].split(",")
    assert members[0].startswith("linear_add") and members[-1].startswith("transpose")
    assert sum(m.startswith("softmax") for m in members) == 4
    assert len(kernels) == 4  # the linear, the slices, the head splits, the row chain


def test_without_chains_attention_is_its_own(tmp_path):
    kernels = run(tmp_path, "matmul(q, k, transpose_b=true) * (1 / 4)", fuse=False)
    assert "matmul_13" in [n for n, _ in kernels] and len(kernels) > 4


def test_on_one_core(tmp_path):  # (not folded: one task would compute every row's attention)
    kernels = run(tmp_path, "matmul(q, k, transpose_b=true) * (1 / 4)", multicore=False)
    assert any(FOLDED in fused for _, fused in kernels)  # (the attention's own chain)
    assert not any("linear_add" in fused and "softmax" in fused for _, fused in kernels)
