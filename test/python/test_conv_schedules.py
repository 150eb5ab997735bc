"""Convolutions (and pools) through the default pipeline (-O2: graph-conv-layout picks NHWC or NCHW
per conv, the default schedules pick the register-tiled NCHW or NHWC direct conv, the
depthwise path, or im2col rows) on odd shapes, strides, pads, dilations, groups and
depthwise, at batch 1, 4 and 32, on target c against the numpy reference.
rtol/atol 1e-4 (float32 sums are reordered)."""

from __future__ import annotations

import numpy as np
import pytest

from dlpc import api
from dlpc.dialects import graph as g
from dlpc.passes import pipeline

TOL = 1e-4

# name -> (input [C, H, W], the model's body over `x` with params, NHWC convs expected)
CASES = {
    # LeNet's second conv and pool: 16 channels, a 10-wide row -> NHWC, pool follows
    "lenet2": (
        (6, 14, 14),
        "param w: f32[16, 6, 5, 5] = kaiming(seed=1)\n"
        "param b: f32[16] = normal(seed=2, std=0.1)\n"
        "return max_pool2d(relu(conv2d(x, w, b)), kernel=2, stride=2)",
        1,
    ),
    # padded, an odd 11-wide row, 32 channels -> NHWC with a padded input copy
    "ragged_pad": (
        (3, 13, 11),
        "param w: f32[32, 3, 3, 3] = kaiming(seed=3)\nreturn conv2d(x, w, padding=1)",
        1,
    ),
    # 96 channels: the channel tile is 48 (3 vectors), the row 7 wide
    "wide_channels": (
        (5, 9, 7),
        "param w: f32[96, 5, 3, 3] = kaiming(seed=4)\n"
        "param b: f32[96] = normal(seed=5, std=0.1)\n"
        "return relu(conv2d(x, w, b, padding=1))",
        1,
    ),
    # stride 2 and dilation 2 in NHWC
    "strided": (
        (4, 15, 17),
        "param w: f32[16, 4, 3, 3] = kaiming(seed=6)\nreturn conv2d(x, w, stride=2, padding=1)",
        1,
    ),
    "dilated": (
        (4, 12, 13),
        "param w: f32[16, 4, 3, 3] = kaiming(seed=7)\nreturn conv2d(x, w, dilation=2, padding=2)",
        1,
    ),
    # two NHWC convs in a row with a residual add: one region, no transpose between
    "chain": (
        (8, 10, 10),
        "param w1: f32[16, 8, 3, 3] = kaiming(seed=8)\n"
        "param w2: f32[16, 16, 3, 3] = kaiming(seed=9)\n"
        "let h = relu(conv2d(x, w1, padding=1))\n"
        "return relu(conv2d(h, w2, padding=1) + h)",
        2,
    ),
    # NCHW: LeNet's first conv (6 channels), a 32-wide row, depthwise, grouped
    "lenet1": (
        (1, 28, 28),
        "param w: f32[6, 1, 5, 5] = kaiming(seed=10)\nreturn relu(conv2d(x, w, padding=2))",
        0,
    ),
    "whole_rows": (
        (3, 9, 32),
        "param w: f32[16, 3, 3, 3] = kaiming(seed=11)\nreturn conv2d(x, w, padding=1)",
        0,
    ),
    "depthwise": (
        (16, 11, 13),
        "param w: f32[16, 1, 3, 3] = kaiming(seed=12)\nreturn conv2d(x, w, padding=1, groups=16)",
        0,
    ),
    # pools: a 2x2 window gets the plain nest with the window unrolled, a 3x3 one the
    # im2col rows; odd sizes, stride 1 and 2, padding
    "maxpool2": ((5, 13, 11), "return max_pool2d(x, kernel=2, stride=2)", 0),
    "maxpool2s1": ((3, 9, 7), "return max_pool2d(x, kernel=2, stride=1)", 0),
    "avgpool2pad": ((4, 10, 9), "return avg_pool2d(x, kernel=2, stride=2, padding=1)", 0),
    "maxpool3": ((4, 11, 13), "return max_pool2d(x, kernel=3, stride=2, padding=1)", 0),
    "grouped": (
        (8, 9, 9),
        "param w: f32[16, 4, 3, 3] = kaiming(seed=13)\nreturn conv2d(x, w, padding=1, groups=2)",
        0,
    ),
    # strided NCHW convs: 3x3 (and wider) read the input as stride-1 phase planes
    # (`cache_read ... deinterleave`), 1x1 as im2col rows. ResNet's 3x3 stride 2 (16x16
    # out, 32 channels) and its 1x1 shortcut; odd sizes (odd box widths: the last phase
    # plane runs past the box), no padding, 5x5, stride 3
    "s2_resnet": (
        (16, 32, 32),
        "param w: f32[32, 16, 3, 3] = kaiming(seed=14)\n"
        "param b: f32[32] = normal(seed=15, std=0.1)\n"
        "return relu(conv2d(x, w, b, stride=2, padding=1))",
        0,
    ),
    "s2_odd": (
        (5, 33, 31),
        "param w: f32[12, 5, 3, 3] = kaiming(seed=16)\nreturn conv2d(x, w, stride=2, padding=1)",
        0,
    ),
    "s2_unpadded": (
        (3, 17, 19),
        "param w: f32[12, 3, 3, 3] = kaiming(seed=17)\nreturn conv2d(x, w, stride=2)",
        0,
    ),
    "s2_5x5": (
        (7, 20, 22),
        "param w: f32[10, 7, 5, 5] = kaiming(seed=18)\nreturn conv2d(x, w, stride=2, padding=2)",
        0,
    ),
    "s3": (
        (4, 20, 23),
        "param w: f32[12, 4, 3, 3] = kaiming(seed=19)\nreturn conv2d(x, w, stride=3, padding=1)",
        0,
    ),
    "s2_1x1": (
        (16, 32, 32),
        "param w: f32[32, 16, 1, 1] = kaiming(seed=20)\nreturn conv2d(x, w, stride=2)",
        0,
    ),
    "s2_1x1_odd": (
        (6, 15, 17),
        "param w: f32[12, 6, 1, 1] = kaiming(seed=21)\nreturn conv2d(x, w, stride=2)",
        0,
    ),
    # resnet's first block conv (16 -> 16, 32x32): a batch stages per image in parallel
    "s1_resnet": (
        (16, 32, 32),
        "param w: f32[16, 16, 3, 3] = kaiming(seed=22)\nreturn relu(conv2d(x, w, padding=1) + x)",
        0,
    ),
    # stride 1, padded, one image: the padded copy staged per block of rows inside the
    # parallel rows (halos of 4 rows; a ragged 28-wide row tiled 7 rows at a
    # time, so a block is 2 tiles of rows)
    "s1_5x5": (
        (8, 22, 32),
        "param w: f32[16, 8, 5, 5] = kaiming(seed=23)\nreturn conv2d(x, w, padding=2)",
        0,
    ),
    "s1_5x5_ragged": (
        (4, 28, 28),
        "param w: f32[6, 4, 5, 5] = kaiming(seed=24)\nreturn conv2d(x, w, padding=2)",
        0,
    ),
    # ... and in NHWC (a 21-wide row): the padded copy per block of rows too
    "s1_5x5_nhwc": (
        (8, 22, 21),
        "param w: f32[16, 8, 5, 5] = kaiming(seed=26)\nreturn conv2d(x, w, padding=2)",
        1,
    ),
    # 1x1 convs read in place whose many channel blocks share each output row's input
    # rows: those rows copied together first (a MobileNetV2 expand conv, 16 -> 96); a
    # ragged 48-wide row, the rows tiled 6 at a time, one channel per block
    "pointwise": (
        (16, 6, 32),
        "param w: f32[96, 16, 1, 1] = kaiming(seed=27)\n"
        "param b: f32[96] = normal(seed=28, std=0.1)\n"
        "return clip(conv2d(x, w, b), min=0, max=6)",
        0,
    ),
    "pointwise_rows": (
        (8, 6, 48),
        "param w: f32[64, 8, 1, 1] = kaiming(seed=29)\nreturn relu(conv2d(x, w))",
        0,
    ),
    # one-vector rows whose tile of 8 rows stays in L1 (8 channels x 8 rows x 16): 8 rows
    # x 3 channels per tile, not one row x 24 channels
    "pointwise_short": (
        (8, 8, 16),
        "param w: f32[48, 8, 1, 1] = kaiming(seed=30)\n"
        "param b: f32[48] = normal(seed=31, std=0.1)\n"
        "return clip(conv2d(x, w, b), min=0, max=6)",
        0,
    ),
    # resnet's stem (3 -> 16 channels, 32x32): an image's padded copy is small (14 KB),
    # so a batch is staged in one block of images per thread
    "stem": (
        (3, 32, 32),
        "param w: f32[16, 3, 3, 3] = kaiming(seed=25)\nreturn relu(conv2d(x, w, padding=1))",
        0,
    ),
}
# the cases whose conv reads deinterleaved phase planes (the rest: no such buffer)
PHASED = {"s2_resnet", "s2_odd", "s2_unpadded", "s2_5x5", "s3"}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DLPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dlpc-cache"))


def load(tmp_path, name: str, batch: int) -> tuple[api.Model, int]:
    (c, h, w), body, nhwc = CASES[name]
    src = f"model {name}(x: f32[B, {c}, {h}, {w}]) {{\n{body}\n}}\n"
    path = tmp_path / f"{name}.dlpc"
    path.write_text(src)
    return api.load(path, batch=batch), nhwc


@pytest.mark.parametrize("batch", [1, 4, 32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_matches_reference_on_c(tmp_path, name, batch):
    model, nhwc = load(tmp_path, name, batch)
    # the layout the -O2 graph passes chose: the path under test is the one meant
    graph = model.module.clone()
    pipeline.lower(graph, "graph", pipeline.PipelineOptions(opt_level=2))
    convs = [op for op in graph.walk() if isinstance(op, g.Conv2DOp)]
    assert sum(g.layout_of(op) == "nhwc" for op in convs) == nhwc
    xs = api.random_inputs(model, seed=batch)
    (want,) = api.reference(model, xs)
    compiled = api.compile(model, target="c")
    if "winograd" in str(compiled.lowered):
        # graph-winograd's rule took the conv (s1_resnet's 16 -> 16, test_winograd.py has
        # its schedules): its result checked, then the direct conv this file is about
        (got,) = compiled(*xs)
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
        compiled = api.compile(model, target="c", graph_winograd={"where": "none"})
        assert "winograd" not in str(compiled.lowered)
    (got,) = compiled(*xs)
    assert ("_xq[" in compiled.source) == (name in PHASED)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


@pytest.mark.parametrize(
    "name, batch, parallel, staged_at",
    [
        ("s2_resnet", 1, "i2t", "i2t"),  # one image, strided: per block of rows
        ("s2_resnet", 4, "i0", "i0"),  # a batch: per image inside the parallel images
        ("s1_resnet", 32, "i0", "i0"),
        ("s1_resnet", 1, "i2t", "i2t"),  # stride 1, one image: per block of rows
        ("s1_5x5", 1, "i2t", "i2t"),
        ("s1_5x5_ragged", 1, "i2t", "i2t"),  # blocks of row tiles (i2o split by 2)
        ("stem", 32, "i0b", "i0b"),  # a batch of small copies: one block of images per thread
        ("stem", 4, "i0b", "i0b"),
        ("s1_5x5_ragged", 4, "i0b", "i0b"),
        ("s1_5x5_nhwc", 1, "i1t", "i1t"),  # NHWC: rows are i1; one image, blocks of rows
        ("ragged_pad", 4, "i0t", "i0t"),  # NHWC, a batch: one block of images per thread
        ("ragged_pad", 32, "i0t", "i0t"),
        ("pointwise", 1, "i2", "i2"),  # a 1x1 conv: its input rows per output row
        ("pointwise", 4, "i0i2", "i2"),
        ("pointwise_rows", 4, "i0i2", "i2o"),
        ("pointwise_short", 32, "i0i2", "i2o"),
    ],
)
def test_conv_staging_goes_inside_the_parallel_loop(tmp_path, name, batch, parallel, staged_at):
    """Where the register-tiled conv stages its input and what runs in parallel (2
    threads): the schedule the numerics test above runs."""
    from dlpc.dialects.loop import kernels
    from dlpc.passes.schedule.default import default_scripts
    from dlpc.passes.schedule.nest import analyse

    model, _ = load(tmp_path, name, batch)
    module = model.module.clone()
    pipeline.lower(module, "loop", pipeline.PipelineOptions(opt_level=2))
    # the conv's own kernel (not an NHWC weight's layout copy: no reduction loops)
    (conv,) = [
        k.sym
        for k in kernels(module)
        if k.sym.startswith("conv") and (n := analyse(k)) is not None and n.reduce
    ]
    script = default_scripts(module, conv)[0]
    assert f"cache_read {conv}/{staged_at} " in script
    assert f"parallel {conv}/{parallel}" in script.splitlines()
