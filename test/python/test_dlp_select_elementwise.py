"""passes/lower/dlp_select/elementwise.py: elementwise nests become vector intrinsics."""

import numpy as np
from dlp_select_cases import lowered, matches_reference

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp


def test_a_product_takes_the_vector_mul(tmp_path):
    text = """
model m(x: f32[4, 256], y: f32[4, 256]) {
  return x * y
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.mul"] == 1, ops
    matches_reference(model, module)


def test_relu_of_a_difference(tmp_path):
    text = """
model m(x: f32[3, 100], y: f32[3, 100]) {
  return relu(x - y)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert {"dlp.sub", "dlp.relu"} & set(ops), ops
    matches_reference(model, module)


def test_erf_and_gelu_take_vector_intrinsics(tmp_path):
    """erf has no intrinsic of its own: sign(x) * (1 - erfc(|x|)) from vector ops (a
    polynomial in 1 / (1 + |x|/2), exp), not scalar loops; checked against the reference
    over both tails (x from -6 to 6), zero and tiny values."""
    text = """
model m(x: f32[2, 64]) {
  param w: f32[64, 64] = kaiming(seed=1)
  return gelu(linear(x, w)) + erf(x)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.exp"] >= 4 and ops["dlp.log"] >= 2, ops  # two erfs
    dlp_module = lower_to_dlp(module.clone())
    kernels = [op for op in dlp_module.walk() if op.name == "dlp.kernel"]
    assert kernels and not [k for k in kernels if "dlpc.scalar" in k.attributes]
    x = np.linspace(-6.0, 6.0, 128, dtype=np.float32).reshape(2, 64)
    x[0, :4] = [0.0, -0.0, 1e-30, -1e-6]
    weights = dlpc.api.check_weights(model)
    (out,) = compile_dlp(module, name="m")(x, params=weights)
    (ref,) = dlpc.api.reference(model, [x])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    np.testing.assert_allclose(out[0, :4] - ref[0, :4], 0.0, atol=1e-6)
