"""passes/lower/dlp_select/window.py: 16-channel convs and pools become dlp.conv2d / dlp.pool."""

from dlp_select_cases import lowered, matches_reference

CONV = """
model m(x: f32[1, 16, 8, 8]) {
  param w: f32[16, 16, 3, 3] = kaiming(seed=1)
  return conv2d(x, w, padding=1)
}
"""


def test_conv_takes_the_conv_intrinsic(tmp_path):
    model, module, ops = lowered(tmp_path, CONV)
    assert ops["dlp.conv2d"] == 1, ops
    matches_reference(model, module)


def test_max_pool_takes_the_pool_intrinsic(tmp_path):
    text = """
model m(x: f32[1, 16, 8, 8]) {
  return max_pool2d(x, kernel=2, stride=2)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.pool"] == 1, ops
    matches_reference(model, module)


def test_average_pool_with_padding(tmp_path):
    text = """
model m(x: f32[1, 8, 9, 9]) {
  return avg_pool2d(x, kernel=3, stride=2, padding=1)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.pool"] >= 1, ops
    matches_reference(model, module)
