"""passes/lower/dlp_select/elementwise.py: elementwise nests become vector intrinsics."""

from dlp_select_cases import lowered, matches_reference


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
