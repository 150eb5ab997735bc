"""MobileNet's convs on OpenCL: the pointwise conv's 6 x 16 tile with ragged channel lanes
(`backends.opencl.lanes._wide_tile`, `clampable`), 16-lane contiguous vector loads and stores
(`KernelWriter.contiguous_access`), and depthwise convs on shapes that put tiles on every
border, all against the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import WIDE_TILE, clampable, plan_launch  # noqa: E402
from dlpc.backends.runtime.opencl_rt import compile_opencl  # noqa: E402
from dlpc.dialects.loop import ForOp, KernelOp  # noqa: E402

POINTWISE = """\
model pw(x: f32[B, {cin}, {h}, {w}]) {{
  param pw.weight: f32[{cout}, {cin}, 1, 1] = kaiming(seed=5)
  param pw.bias: f32[{cout}] = normal(seed=6, std=0.1)
  return clip(conv2d(x, pw.weight, pw.bias), min=0, max=6)
}}
"""

DEPTHWISE = """\
model dw(x: f32[B, {c}, {h}, {w}]) {{
  param dw.weight: f32[{c}, 1, 3, 3] = kaiming(seed=7)
  param dw.bias: f32[{c}] = normal(seed=8, std=0.1)
  return relu6(conv2d(x, dw.weight, dw.bias, stride={stride}, padding={pad}, groups={c}))
}}
"""


def _lowered(tmp_path, text: str, batch: int):
    path = tmp_path / "m.dlpc"
    path.write_text(text)
    model = dlpc.load(path, batch=batch)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions(target="opencl"))
    return model, module


def _check(model, module, name: str, vector_width: int | None = None) -> str:
    """The program compiled for this device with the lanes of `vector_width`
    (`backends.opencl.lane_profile`; the device's when None) matches the reference; its
    source."""
    inputs, weights = dlpc.api.random_inputs(model), dlpc.api.check_weights(model)
    f = compile_opencl(module, name=name, vector_width=vector_width)
    (out,) = f(*inputs, params=weights)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    return f.source


def _conv_launch(module):
    kernel = next(k for k in module.walk() if isinstance(k, KernelOp))
    return kernel, plan_launch(kernel, "k")


@pytest.mark.parametrize(
    "cout, cin, h, w, batch, ragged",
    [
        (64, 32, 32, 32, 1, True),  # mobilenet's: 11 work-items, the last at 58
        (64, 32, 32, 32, 3, True),  # the batch as a second NDRange dimension
        (66, 7, 5, 16, 1, False),  # 6 lanes divide the channels
        (88, 3, 3, 32, 2, True),  # 15 work-items, the last redoing 2 channels
    ],
)
def test_pointwise_wide_tile_matches_reference(tmp_path, cout, cin, h, w, batch, ragged):
    """A 1x1 conv + clip whose columns 16 divide takes 6 output channels x 16 columns a
    work-item; channels 6 do not divide end in a work-item that starts early
    (`DLPC_MIN(6 * id, cout - 6)`), redoing channels of the one before with the same
    results; every output matches the reference."""
    model, module = _lowered(tmp_path, POINTWISE.format(cout=cout, cin=cin, h=h, w=w), batch)
    kernel, launch = _conv_launch(module)
    assert sorted(launch.lanes.values()) == sorted(WIDE_TILE)
    assert launch.global_size[-1] == -(-cout // WIDE_TILE[0])
    _check(model, module, "pw")  # (the device's plan: on a 16-wide device, 16 lanes)
    source = _check(model, module, "pw", vector_width=8)  # (the 8-lane plan, WIDE_TILE)
    assert ("DLPC_MIN(6 * " in source) == ragged
    assert "*(__global const dlpc_float16u *)&" in source  # the input row, one load
    assert "*(__global dlpc_float16u *)&" in source  # the outputs, one store per channel


@pytest.mark.parametrize(
    "cout, w",
    [
        (60, 7),  # odd columns: 16 do not divide them
        (20, 32),  # 6 lanes would leave 4 of 24 channels over (more than 1/16)
        (64, 24),  # 16 do not divide 24 columns
    ],
)
def test_pointwise_keeps_its_plan_elsewhere(tmp_path, cout, w):
    """Odd widths, few channels or rows 16 do not divide keep the plan they had (no
    6-lane channels), and still match the reference."""
    model, module = _lowered(tmp_path, POINTWISE.format(cout=cout, cin=5, h=3, w=w), 1)
    _, launch = _conv_launch(module)
    assert sorted(launch.lanes.values()) != sorted(WIDE_TILE)
    _check(model, module, "pw")


def test_clampable_needs_no_loads_of_what_the_loop_stores(tmp_path):
    """The pointwise conv's channel loop stores its output and loads only its input and
    weights (it may run an iteration twice); a loop that reads back what it stores
    may not."""
    from xdsl.dialects import memref

    model, module = _lowered(tmp_path, POINTWISE.format(cout=64, cin=8, h=2, w=16), 1)
    kernel, launch = _conv_launch(module)
    (mapped,) = [lp for lp in launch.mapped if launch.lanes.get(lp) == WIDE_TILE[0]]
    assert clampable(mapped)
    store = next(o for o in mapped.walk() if isinstance(o, memref.StoreOp) and o.indices)
    load = next(o for o in mapped.walk() if isinstance(o, memref.LoadOp) and o.indices)
    load.operands[0] = store.memref  # read the output instead of the input
    assert not clampable(mapped)
    assert isinstance(mapped, ForOp)


@pytest.mark.parametrize(
    "c, h, w, stride, pad, batch",
    [
        (32, 32, 32, 1, 1, 1),  # mobilenet's depthwise conv
        (13, 9, 11, 1, 1, 1),  # odd widths, channels no lane count divides
        (12, 15, 17, 2, 1, 2),  # stride 2
        (10, 8, 13, 1, 0, 1),  # no padding
        (24, 7, 33, 2, 0, 3),  # stride 2, no padding, batch 3
    ],
)
@pytest.mark.parametrize("width", [8, 16])
def test_depthwise_matches_reference(tmp_path, c, h, w, stride, pad, batch, width):
    """Depthwise 3x3 convs + relu6 on shapes that put tiles on every border, with the
    lanes of an 8- and a 16-wide device."""
    text = DEPTHWISE.format(c=c, h=h, w=w, stride=stride, pad=pad)
    model, module = _lowered(tmp_path, text, batch)
    _check(model, module, "dw", vector_width=width)


@pytest.mark.parametrize("batch", [1, 2])
def test_depthwise_border_tiles_in_bounds_drop_the_fallback(tmp_path, batch):
    """A border tile whose guarded loads lie in the input at every lane and tap
    (`KernelWriter.border_tiles`) masks one vector load per tap without the per-lane
    fallback; the buffer's first and last tiles (whose lanes would read before or after
    it) take the copy with it; both match the reference."""
    text = DEPTHWISE.format(c=16, h=9, w=16, stride=1, pad=1)
    model, module = _lowered(tmp_path, text, batch)
    source = _check(model, module, "dw", vector_width=8)
    assert " = (int8)(-(int)(" in source  # no fallback: the vector or the pad
    assert ": (float8)((v_" in source  # the fallback copy: guarded scalar loads


def test_a_16_wide_device_blocks_short_padded_sums_16_by_2(tmp_path):
    """On a 16-wide device (`LANES_16`) a padded conv summing fewer than `SHORT_PADDED`
    terms an output (mobilenet's depthwise 3x3: 9) takes `LANES_16_SHORT`: 16 columns x
    2 channels (the 8-lane plan: 8 x 8); the pointwise conv (no padding, 32 terms)
    takes 16 lanes of `LANES_16`; both match the reference."""
    from dlpc.backends.opencl import LANES_16, SHORT_PADDED

    assert SHORT_PADDED > 9
    text = DEPTHWISE.format(c=32, h=32, w=32, stride=1, pad=1)
    model, module = _lowered(tmp_path, text, 1)
    kernel = next(k for k in module.walk() if isinstance(k, KernelOp))
    assert sorted(plan_launch(kernel, "k", profile=LANES_16).lanes.values()) == [2, 16]
    assert sorted(plan_launch(kernel, "k").lanes.values()) == [8, 8]
    _check(model, module, "dw", vector_width=16)
    _, module = _lowered(tmp_path, POINTWISE.format(cout=64, cin=32, h=32, w=32), 1)
    kernel = next(k for k in module.walk() if isinstance(k, KernelOp))
    assert 16 in plan_launch(kernel, "k", profile=LANES_16).lanes.values()


CONV = """\
model cv(x: f32[B, {cin}, {h}, {w}]) {{
  param cv.weight: f32[{cout}, {cin}, 5, 5] = kaiming(seed=9)
  param cv.bias: f32[{cout}] = normal(seed=10, std=0.1)
  return relu(conv2d(x, cv.weight, cv.bias, padding=2))
}}
"""


@pytest.mark.parametrize(
    "w, lanes",
    [
        (28, 16),  # lenet's first conv: 16 + 16 from column 12
        (27, 16),  # 5 columns redone of 27
        (23, 8),  # 16 would redo 9 (over a quarter): 8 + 8 + 8 from column 15
        (32, 16),  # 16 divide: no clamp
    ],
)
def test_ragged_inner_lanes_on_a_16_wide_device(tmp_path, w, lanes):
    """On a 16-wide device the columns of a conv take the widest lane count that covers
    them with at most a quarter redone (`_ragged`): the last step starts early
    (`DLPC_MIN`), redoing columns of the one before with the same results; the 8-lane
    plan (PoCL's) is unchanged; both match the reference."""
    from dlpc.backends.opencl import LANES_16
    from dlpc.backends.opencl.lanes import _ragged

    model, module = _lowered(tmp_path, CONV.format(cin=2, cout=6, h=9, w=w), 1)
    kernel = next(k for k in module.walk() if isinstance(k, KernelOp))
    wide = plan_launch(kernel, "k", profile=LANES_16)
    (columns,) = [lp for lp in wide.lanes if lp.trip_count == w]
    assert wide.lanes[columns] == lanes
    assert _ragged(columns, lanes) == (w % lanes != 0)
    narrow = plan_launch(kernel, "k")
    assert all(lp.trip_count % n == 0 for lp, n in narrow.lanes.items() if lp.trip_count == w)
    source = _check(model, module, "cv", vector_width=16)
    assert ("_step, " in source and "= DLPC_MIN(v_i" in source) == (w % lanes != 0)
    _check(model, module, "cv", vector_width=8)
