"""A convolution chain split into bands of output rows (passes/lower/_dlp_fuse.py:
`Bands`) and a conv's bias and ReLU moved after its max pool (_dlp_commute.py): on the
simulator against the numpy reference."""

import numpy as np
from dlp_select_cases import lowered, matches_reference

import dlpc
from dlpc.backends.dlp_c import lower_to_dlp
from dlpc.backends.runtime.dlp_sim import compile_dlp
from dlpc.dialects.loop import KernelOp
from dlpc.passes import pipeline
from dlpc.passes.lower import _dlp_commute


def kernels(module) -> dict[str, tuple[int, list[dict]]]:
    """Per dlp kernel: its task count and its convs' attributes."""
    out = {}
    for k in lower_to_dlp(module.clone()).walk():
        if k.name == "dlp.kernel":
            convs = [
                {n: a.value.data for n, a in op.attributes.items()}
                for op in k.walk()
                if op.name == "dlp.conv2d"
            ]
            out[k.sym] = (k.attributes["tasks"].value.data, convs)
    return out


CONV_POOL = """model m(x: f32[1, {cin}, {h}, {h}]) {{
  param w: f32[{cout}, {cin}, {k}, {k}] = kaiming(seed=1)
  param b: f32[{cout}] = normal(seed=2)
  return max_pool2d(relu(conv2d(x, w, b, padding={pad})), kernel=2, stride=2)
}}
"""


def test_one_channel_conv_is_split_in_bands(tmp_path):
    # 2 output channels of an 8x8 image: 4 bands of 2 output rows each, 8 tasks
    model, module, _ = lowered(tmp_path, CONV_POOL.format(cin=1, cout=2, h=8, k=3, pad=1))
    ((tasks, convs),) = kernels(module).values()
    assert tasks == 8
    # the top band padded above, the bottom one below, the middle ones 4 rows unpadded
    geometry = sorted((c["height"], c["pad_top"], c["pad_bottom"]) for c in convs)
    assert geometry == [(3, 0, 1), (3, 1, 0), (4, 0, 0)]
    matches_reference(model, module)


def test_lenet_like_bands_numerics(tmp_path):
    # LeNet's first layer at 12x12: a 5x5 conv padded by 2, 3 channels, 12 rows -> 6
    # pooled rows; the bands' windows reach two rows past their own on each side
    model, module, _ = lowered(tmp_path, CONV_POOL.format(cin=1, cout=3, h=12, k=5, pad=2))
    ((tasks, convs),) = kernels(module).values()
    assert tasks > 3 and tasks % 3 == 0
    bands = tasks // 3
    assert sum(c["height"] for c in convs) >= 12  # every band's rows, halos overlapping
    assert all(c["height"] <= 12 // bands + 4 for c in convs)
    matches_reference(model, module)


def test_several_input_channels_are_not_banded(tmp_path):
    # the band's rows of each input channel would be several ranges: one channel a task
    model, module, _ = lowered(tmp_path, CONV_POOL.format(cin=2, cout=2, h=8, k=3, pad=1))
    ((tasks, convs),) = kernels(module).values()
    assert tasks == 2 and [c["height"] for c in convs] == [8]
    matches_reference(model, module)


def test_bias_and_relu_after_the_max_pool(tmp_path):
    path = tmp_path / "m.dlpc"
    path.write_text(CONV_POOL.format(cin=2, cout=4, h=8, k=3, pad=1))
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    ks = [k for k in module.walk() if isinstance(k, KernelOp)]
    assert _dlp_commute.commute(ks) == 1
    conv, pool = ks
    names = [op.name for op in conv.walk()]
    assert "arith.maximumf" not in names and names.count("memref.load") == 4  # x, w, acc x2
    after = [op.name for op in pool.walk()]
    assert after.count("arith.addf") == 1 and after.count("arith.maximumf") == 2
    assert _dlp_commute.commute(ks) == 0  # (nothing left to move)
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    (out,) = compile_dlp(module, name="m")(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_no_commute_when_the_conv_output_is_read_again(tmp_path):
    # y is returned as well as pooled: its stored values must stay relu(conv + b)
    text = (
        "model m(x: f32[1, 1, 8, 8]) {\n"
        "  param w: f32[2, 1, 3, 3] = kaiming(seed=1)\n  param b: f32[2] = normal(seed=2)\n"
        "  let y = relu(conv2d(x, w, b, padding=1))\n"
        "  return y, max_pool2d(y, kernel=2, stride=2)\n}\n"
    )
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    model = dlpc.load(path)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    assert _dlp_commute.commute([k for k in module.walk() if isinstance(k, KernelOp)]) == 0


def test_no_commute_past_an_average_pool(tmp_path):
    text = (
        "model m(x: f32[1, 1, 8, 8]) {\n"
        "  param w: f32[2, 1, 3, 3] = kaiming(seed=1)\n  param b: f32[2] = normal(seed=2)\n"
        "  return avg_pool2d(relu(conv2d(x, w, b, padding=1)), kernel=2, stride=2)\n}\n"
    )
    model, module, _ = lowered(tmp_path, text)
    assert _dlp_commute.commute([k for k in module.walk() if isinstance(k, KernelOp)]) == 0
    matches_reference(model, module)


ATTENTION = """model m(q: f32[1, 4, 16, 16], k: f32[1, 4, 16, 16], v: f32[1, 4, 16, 16]) {
  let s = matmul(q, k, transpose_b=true) * (1 / 4)
  return softmax(s, axis=-1) @ v
}
"""


def test_attention_heads_split_in_row_bands(tmp_path):
    # 4 heads of 16 query rows: the chain (scores, softmax, product) on 4 x 4 tasks, each
    # its head's 4 query rows against all 16 keys and values of the head
    model, module, ops = lowered(tmp_path, ATTENTION)
    ((tasks, _),) = kernels(module).values()
    assert tasks == 16
    dlp_module = lower_to_dlp(module.clone())
    products = [op for op in dlp_module.walk() if op.name == "dlp.matmul"]
    assert len(products) == 2
    m = {int(p.operands[6].owner.value.value.data) for p in products}  # type: ignore[union-attr]
    assert m == {4}  # each product over the band's 4 rows
    matches_reference(model, module)


def test_softmax_over_few_items_split_in_row_bands(tmp_path):
    # 2 items of 32 rows: 2 x 8 tasks, each 4 rows
    text = "model m(x: f32[2, 32, 16]) {\n  return softmax(x, axis=-1)\n}\n"
    model, module, _ = lowered(tmp_path, text)
    ((tasks, _),) = kernels(module).values()
    assert tasks == 16
    matches_reference(model, module)


def test_many_rows_are_not_banded(tmp_path):
    # 16 items: one a task already
    text = "model m(x: f32[16, 8, 16]) {\n  return softmax(x, axis=-1)\n}\n"
    model, module, _ = lowered(tmp_path, text)
    ((tasks, _),) = kernels(module).values()
    assert tasks == 16
    matches_reference(model, module)


MERGE = """model m(q: f32[1, {h}, 16, 16], k: f32[1, {h}, 16, 16], v: f32[1, {h}, 16, 16]) {{
  let s = matmul(q, k, transpose_b=true) * (1 / 4)
  let a = softmax(s, axis=-1) @ v
  return {ret}
}}
"""


def test_head_merge_stored_by_the_attention_chain(tmp_path):
    # the merge (heads and rows swapped) is the chain's own strided store: one kernel
    ret = "transpose(a, perm=[0, 2, 1, 3])"
    model, module, ops = lowered(tmp_path, MERGE.format(h=4, ret=ret))
    assert len(kernels(module)) == 1
    assert ops["dlp.memcpy_strided_async"] == 1
    matches_reference(model, module)


def test_head_merge_kept_when_the_heads_are_read_again(tmp_path):
    # a is an output as well: the chain stores it, the merge copies it
    ret = "a, transpose(a, perm=[0, 2, 1, 3])"
    model, module, _ = lowered(tmp_path, MERGE.format(h=2, ret=ret))
    assert len(kernels(module)) == 2
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    outs = compile_dlp(module, name="m")(*inputs, params=weights)
    for out, ref in zip(outs, dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
