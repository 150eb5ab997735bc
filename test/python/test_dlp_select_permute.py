"""passes/lower/dlp_select/permute.py: dimension permutations become dlp.transpose."""

import pytest
from dlp_select_cases import lowered, matches_reference

CASES = {  # (model text, dlp.transpose ops in the kernel)
    # attention's head split [B, S, H, D] -> [B, H, S, D]: one transpose into the scratch,
    # then one per head (in a loop)
    "head_split": (
        "model m(x: f32[2, 16, 4, 16]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n",
        2,
    ),
    # and back: [B, H, S, D] -> [B, S, H, D]
    "head_merge": (
        "model m(x: f32[2, 4, 16, 16]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n",
        2,
    ),
    # C == 1: one transpose per item
    "matrix": ("model m(x: f32[3, 16, 32]) {\n  return transpose(x, perm=[0, 2, 1])\n}\n", 1),
    # batch 1: one item, 64 GDRAM2GDRAM pieces of 16 floats, 4 a task issued back to back
    # (one DMA latency), cheaper than the item on one task (two DMAs and its transposes);
    # with a DMA queue depth of 1 the item on one task wins (test_dlp_async.py)
    "one_item": (
        "model m(x: f32[1, 16, 4, 16]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n",
        0,
    ),
    # two dims against one: [B, 4, 4, 16] -> [B, 16, 4, 4]
    "groups": (
        "model m(x: f32[2, 4, 4, 16]) {\n  return transpose(x, perm=[0, 3, 1, 2])\n}\n",
        1,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_permutation_takes_the_transpose_intrinsic(tmp_path, case):
    text, transposes = CASES[case]
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.transpose"] == transposes, ops
    matches_reference(model, module)


def test_unaligned_per_head_blocks_keep_scalar_loops(tmp_path):
    # S x D = 3 x 5 floats per head: the per-head blocks would start unaligned
    text = "model m(x: f32[2, 3, 4, 5]) {\n  return transpose(x, perm=[0, 2, 1, 3])\n}\n"
    model, module, ops = lowered(tmp_path, text)
    assert ops["dlp.transpose"] == 0, ops
    matches_reference(model, module)
