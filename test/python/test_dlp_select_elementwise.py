"""passes/lower/dlp_select/elementwise.py: elementwise nests become vector intrinsics."""

from collections import Counter

import numpy as np
from dlp_select_cases import lowered, matches_reference

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.passes import pipeline


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


ROWS_T = {
    # 10 x 10 output planes (400 bytes: rows not 64-byte aligned) of a conv's bias:
    # channels as the work loop at batch 1 (the bias tiled), whole images at batch 2
    # (the bias a whole buffer repeating per image)
    "conv_b1": "x: f32[1, 6, 14, 14]",
    "conv_b2": "x: f32[2, 6, 14, 14]",
}


def test_unaligned_bias_rows_go_through_a_transpose(tmp_path):
    for case, args in ROWS_T.items():
        text = f"""
model m({args}) {{
  param w: f32[16, 6, 5, 5] = kaiming(seed=1)
  param b: f32[16] = normal(seed=2, std=0.5)
  return relu(conv2d(x, w, b))
}}
"""
        path = tmp_path / f"{case}.dlpc"
        path.write_text(text)
        model = dlpc.load(path)
        options = pipeline.PipelineOptions(target="dlp")  # NCHW, as dlpc.compile lowers it
        module = pipeline.lower(model.module.clone(), "loop", options)
        dlp_module = lower_to_dlp(module.clone())
        ops = Counter(op.name for op in dlp_module.walk())
        assert ops["dlp.transpose"] >= 2 and ops["dlp.cycle_add"] >= 1, (case, ops)
        scalar = [op for op in dlp_module.walk() if "dlpc.scalar" in op.attributes]
        assert not scalar, case
        matches_reference(model, module)
