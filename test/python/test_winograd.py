"""Winograd F(2x2, 3x3) (graph-winograd, passes/graph/winograd.py): the numpy reference
of its three ops against a direct conv; the rewritten graph and the compiled C against
the numpy reference (resnet, random convs with epilogues); which convs the pass leaves
alone; a training step compiled at -O3 (weights not folded: the pass does not run).
rtol/atol 1e-4: F(2x2, 3x3) reassociates the sums (a few ulps more than the direct conv).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser

import dlpc
from dlpc import api
from dlpc.dialects import graph as g
from dlpc.passes.graph.winograd import GraphWinograd
from dlpc.reference import graph as ref
from dlpc.reference.graph import run_reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-4


def _winograd_conv(x, w, b, pads):
    """conv2d through the three reference kernels and a batched matmul."""
    n, c = x.shape[:2]
    u = ref.winograd_filter_transform(w)
    v = ref.winograd_input_transform(x, pads=pads)
    th, tw = v.shape[3:]
    m = np.matmul(u[:, None], v.reshape(16, n, c, th * tw)).reshape(16, n, w.shape[0], th, tw)
    oh = x.shape[2] + pads[0] + pads[2] - 2
    ow = x.shape[3] + pads[1] + pads[3] - 2
    return ref.winograd_output_transform(m, b, output=(oh, ow))


@pytest.mark.parametrize(
    "n, c, o, h, w, pads",
    [
        (1, 16, 16, 32, 32, (1, 1, 1, 1)),  # resnet's
        (2, 5, 7, 9, 11, (1, 1, 1, 1)),  # odd sizes, channels no multiple of 16
        (3, 3, 6, 8, 6, (0, 0, 0, 0)),  # even output, no padding
        (2, 4, 5, 7, 8, (0, 0, 0, 0)),  # odd output H (5), even W (6)
        (1, 2, 3, 6, 5, (1, 0, 0, 1)),  # asymmetric padding
        (2, 3, 2, 3, 3, (0, 0, 0, 0)),  # one 1x1 output: one tile, cropped
    ],
)
def test_reference_matches_direct_conv(n, c, o, h, w, pads):
    rng = np.random.default_rng(n * 100 + c)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    k = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    direct = ref.conv2d(x, k, b, strides=(1, 1), pads=pads, dilations=(1, 1), groups=1)
    got = _winograd_conv(x, k, b, pads)
    assert got.shape == direct.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, direct, rtol=TOL, atol=TOL)


def test_filter_transform_is_g_g_gt():
    w = np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32)
    gm = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
    u = ref.winograd_filter_transform(w)
    for o in range(3):
        for i in range(2):
            np.testing.assert_allclose(
                u[:, o, i].reshape(4, 4), gm @ w[o, i] @ gm.T, rtol=1e-5, atol=1e-6
            )


# ---------------------------------------------------------------- the pass on graph IR


def _parse(text: str):
    ctx = Context()
    for dialect in (Builtin, Func, g.Graph):
        ctx.load_dialect(dialect)
    return Parser(ctx, text).parse_module()


def _conv_module(x_shape, w_shape, attrs: str, out_shape, weight_arg: bool = False) -> str:
    ts = lambda s: "tensor<" + "x".join(map(str, s)) + "xf32>"  # noqa: E731
    args = f"%x: {ts(x_shape)}" + (f", %w: {ts(w_shape)}" if weight_arg else "")
    weight = "" if weight_arg else f'  %w = graph.param "w" : {ts(w_shape)}\n'
    return (
        f"func.func @main({args}) -> {ts(out_shape)} {{\n{weight}"
        f"  %c = graph.conv2d %x, %w {attrs} : ({ts(x_shape)}, {ts(w_shape)}) -> {ts(out_shape)}\n"
        f"  func.return %c : {ts(out_shape)}\n}}\n"
    )


INELIGIBLE = {
    "stride 2": ((1, 8, 8, 8), (8, 8, 3, 3), "{strides = array<i64: 2, 2>}", (1, 8, 3, 3), False),
    "1x1": ((1, 8, 8, 8), (8, 8, 1, 1), "", (1, 8, 8, 8), False),
    "depthwise": ((1, 8, 8, 8), (8, 1, 3, 3), "{groups = 8 : i64}", (1, 8, 6, 6), False),
    "5x5": ((1, 8, 8, 8), (8, 8, 5, 5), "", (1, 8, 4, 4), False),
    "dilation 2": (
        (1, 8, 8, 8),
        (8, 8, 3, 3),
        "{dilations = array<i64: 2, 2>}",
        (1, 8, 4, 4),
        False,
    ),
    "dynamic weight": ((1, 8, 8, 8), (8, 8, 3, 3), "", (1, 8, 6, 6), True),
}


@pytest.mark.parametrize("case", sorted(INELIGIBLE))
def test_pass_leaves_ineligible_convs(case):
    module = _parse(_conv_module(*INELIGIBLE[case]))
    before = str(module)
    GraphWinograd(where="all").apply(Context(), module)
    assert str(module) == before
    assert not any("winograd" in op.name for op in module.walk())


def test_pass_rewrites_eligible_conv_and_keeps_results():
    module = _parse(
        _conv_module((2, 5, 9, 7), (6, 5, 3, 3), "{pads = array<i64: 1, 1, 1, 1>}", (2, 6, 9, 7))
    )
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 9, 7)).astype(np.float32)
    weights = {"w": rng.standard_normal((6, 5, 3, 3)).astype(np.float32)}
    (expected,) = run_reference(module, [x], weights)
    GraphWinograd(where="pays").apply(Context(), module)  # 5 channels: below the rule
    assert any(isinstance(op, g.Conv2DOp) for op in module.walk())
    GraphWinograd(where="all").apply(Context(), module)
    module.verify()
    names = [op.name for op in module.walk() if op.name.startswith("graph.")]
    assert "graph.conv2d" not in names
    assert {"graph.winograd_filter_transform", "graph.winograd_input_transform"} <= set(names)
    (got,) = run_reference(module, [x], weights)
    np.testing.assert_allclose(got, expected, rtol=TOL, atol=TOL)


# --------------------------------------------------------------------- compiled C


def _model(tmp_path, name: str, text: str, batch: int):
    path = tmp_path / f"{name}.dlpc"
    path.write_text(text)
    return dlpc.load(str(path), batch=batch)


def _check_c(model, where: str = "all", fuse: bool = False):
    xs = api.random_inputs(model)
    expected = api.reference(model, xs)
    extra = {"loop_default_schedule": {"winograd_fuse": fuse}}
    compiled = dlpc.compile(
        model, target="c", opt_level=3, graph_winograd={"where": where}, **extra
    )
    kernels = str(compiled.lowered)
    got = compiled(*xs)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL)
    return kernels


@pytest.mark.parametrize("batch", [1, 2])
def test_resnet_c_matches_reference(batch):
    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=batch)
    kernels = _check_c(model)
    # the residual epilogue (batch-norm bias, add, relu) fused into the output transform
    assert 'loop.kernel "winograd_output_transform_add_relu' in kernels
    assert "conv2d_relu_1" not in kernels  # resnet's 16 -> 16 convs all rewritten
    # the filter transform (and its per-image reshape) folded into a weight at compile time
    assert "winograd_filter_transform" not in kernels and "folded" in kernels


@pytest.mark.parametrize(
    "n, c, o, h, w, pad",
    [(2, 5, 7, 9, 11, 1), (1, 3, 16, 8, 10, 0), (3, 6, 4, 7, 6, 1), (1, 17, 9, 10, 5, 0)],
)
def test_random_conv_c_matches_reference(tmp_path, n, c, o, h, w, pad):
    text = f"""model wconv(x: f32[B, {c}, {h}, {w}], r: f32[B, {o}, {h + 2 * pad - 2}, {w + 2 * pad - 2}]) {{
  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)
  param b: f32[{o}] = normal(seed=6, std=0.1)
  return relu(conv2d(x, k, b, padding={pad}) + r)
}}
"""
    kernels = _check_c(_model(tmp_path, "wconv", text, n))
    assert "winograd_input_transform" in kernels
    assert 'loop.kernel "winograd_output_transform_add_relu' in kernels


# the fused form (loop-default-schedule{winograd_fuse=true}, passes/schedule/winograd.py
# fused_script): per block of tiles, the input transform, the reshapes and the matmul
# computed inside the output transform's block loop (compute_at ... local)


def _fused(kernels: str) -> bool:
    """Every input transform computed inside an output transform (its cloned loops)."""
    return (
        'loop.kernel "winograd_input_transform' not in kernels
        and '{name = "winograd_input_transform_' in kernels
    )


@pytest.mark.parametrize("batch", [1, 2])
def test_fused_resnet_c_matches_reference(batch):
    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=batch)
    kernels = _check_c(model, fuse=True)
    assert _fused(kernels)
    assert 'loop.kernel "winograd_output_transform_add_relu' in kernels


@pytest.mark.parametrize(
    "n, c, o, h, w, pad, fused",
    [
        (2, 16, 16, 32, 32, 1, True),  # resnet's 16 -> 16, batch 2: one block per tile row
        (1, 32, 32, 16, 16, 1, True),  # 32 -> 32 on 16x16: blocks of two rows of 8 tiles
        (2, 8, 16, 12, 16, 1, True),  # two rows of 8 tiles, 6 tile rows, images parallel
        (1, 32, 32, 10, 16, 1, True),  # 5 rows of 8 tiles: blocks of one row
        (1, 48, 48, 8, 8, 1, False),  # 48 channels (> FUSED_MAX_CHANNELS): three kernels
        (2, 32, 24, 6, 8, 1, True),  # 24 output channels: one 24-row register tile
        (3, 5, 7, 10, 12, 1, True),  # channels no multiple of 16, blocks of 6 tiles
        (2, 5, 7, 9, 11, 1, False),  # odd output (9 x 11): the three kernels
        (1, 3, 20, 8, 8, 0, True),  # no padding, 20 output channels (one 20-row tile)
        (1, 4, 40, 6, 6, 1, False),  # 40 output channels (no register tile): three kernels
    ],
)
@pytest.mark.parametrize("residual", [True, False])
def test_fused_random_conv_c_matches_reference(tmp_path, n, c, o, h, w, pad, fused, residual):
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    extra = f", r: f32[B, {o}, {oh}, {ow}]" if residual else ""
    body = f"conv2d(x, k, b, padding={pad})" + (" + r" if residual else "")
    text = f"""model wconv(x: f32[B, {c}, {h}, {w}]{extra}) {{
  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)
  param b: f32[{o}] = normal(seed=6, std=0.1)
  return relu({body})
}}
"""
    kernels = _check_c(_model(tmp_path, "wconv", text, n), fuse=True)
    assert _fused(kernels) == fused


def test_rule_takes_resnets_32_channel_conv_fused():
    """The cost rule (passes/graph/winograd.py) takes resnet's 32 -> 32 conv and its two
    16 -> 16 convs at any batch (the fused kernel wins there on 1 and 2 threads, batch 1
    and 32), and keeps the stem direct (the default schedule fuses the chain: no
    transform kernels)."""
    path = os.path.join(ROOT, "examples", "resnet.dlpc")
    for batch in (1, 2, 32):
        kernels = _check_c(dlpc.load(path, batch=batch), where="pays", fuse=True)
        assert 'loop.kernel "winograd_output_transform_add_relu' in kernels
        assert _fused(kernels)
        assert 'loop.kernel "conv2d_relu_1"' not in kernels  # resnet's first 16 -> 16
        assert 'loop.kernel "winograd_output_transform_relu' in kernels  # ... is fused
        assert 'loop.kernel "conv2d_relu_0"' in kernels  # the stem direct
        transforms = re.findall(r'loop\.kernel "winograd_output_transform_[a-z_]*\d+"', kernels)
        assert len(transforms) == 3  # the three stride-1 3x3 convs but the stem


# ----------------------------------------------------------------------- training


def test_training_step_is_not_rewritten(tmp_path):
    """A training step's weights change every call (not folded): -O3 leaves its convs
    direct (here one the cost rule would take), and the step still trains."""
    from dlpc.train import Trainer

    text = """model wtrain(x: f32[B, 64, 32, 32]) {
  param k: f32[64, 64, 3, 3] = kaiming(seed=7)
  param fc.weight: f32[10, 64] = kaiming(seed=8)
  param fc.bias: f32[10] = zeros()
  let h = relu(conv2d(x, k, padding=1))
  return linear(reshape(global_avg_pool(h), shape=[B, 64]), fc.weight, fc.bias)
}
"""
    model = _model(tmp_path, "wtrain", text, 2)
    inference = dlpc.compile(model, target="c", opt_level=3)
    assert "winograd" in str(inference.lowered)  # bound weights: the rule takes this conv
    trainer = Trainer(model, batch_size=2, opt_level=3)
    assert "winograd" not in str(trainer.compiled.lowered)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 2)
    losses = [trainer.step(x, y) for _ in range(6)]
    assert losses[-1] < losses[0]
