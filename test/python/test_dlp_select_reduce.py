"""passes/lower/dlp_select/reduce.py: row reductions become dlp.reduce_sum / reduce_max."""

from dlp_select_cases import lowered, matches_reference


def test_row_sum_and_max_take_the_reduce_intrinsics(tmp_path):
    text = """
model m(x: f32[16, 64]) {
  return reduce_sum(x, axis=1) + reduce_max(x, axis=1)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.reduce_sum"] >= 1 and ops["dlp.reduce_max"] >= 1, ops
    matches_reference(model, module)


def test_softmax_rows(tmp_path):
    text = """
model m(x: f32[8, 32]) {
  return softmax(x, axis=-1)
}
"""
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.reduce_max"] + ops["dlp.reduce_sum"] >= 1, ops
    matches_reference(model, module)
