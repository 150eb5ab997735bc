"""Tests written against the GPU launch plans' decisions (issue 35, bench/mutation.py
--area opencl, third round: `backends/opencl/gpu_launch.py` read rule by rule and each
rule pinned on a small model): which loops are work-items and how the outer ones fold
into dimension 2, the work-group shape filling the compute units, the row lanes, the
split reductions' thresholds; and the plans run on this (CPU) device against the numpy
reference."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import (
    OpenCLEmitter,  # noqa: E402
    gpu_launch,  # noqa: E402
)
from dlpc.backends.opencl.gpu_launch import (  # noqa: E402
    GROUP_ITEMS,
    MIN_GROUP_ITEMS,
    SPLIT_ITEMS,
    GpuProfile,
    _pow2_at_least,
    group_shape,
)

OPENCL = pipeline.PipelineOptions(target="opencl")
H200 = GpuProfile(max_group=1024, units=132)
ONE = GpuProfile(max_group=1024, units=1)


def _lowered(tmp_path, text: str, batch: int):
    (tmp_path / "m.dlpc").write_text(text)
    model = dlpc.load(tmp_path / "m.dlpc", batch=batch)
    return model, pipeline.lower(model.module.clone(), "loop", OPENCL)


def _launch(tmp_path, text: str, batch: int, profile: GpuProfile):
    """The one kernel's launch under `profile`, its loops by name, and the source."""
    _, module = _lowered(tmp_path, text, batch)
    emitter = OpenCLEmitter(module, gpu=profile)
    source = emitter.emit()
    ((kernel, launch),) = emitter.launches.items()
    return launch, source


def _names(d: dict) -> dict:
    return {lp.loop_name: v for lp, v in d.items()}


def _run(tmp_path, text: str, batch: int, profile: GpuProfile, monkeypatch) -> None:
    """The model compiled under the GPU profile sized as `profile`, against the reference."""
    from dlpc.backends.runtime.opencl_rt import compile_opencl

    monkeypatch.setattr(
        gpu_launch.GpuProfile, "of_device", classmethod(lambda cls, device: profile)
    )
    model, module = _lowered(tmp_path, text, batch)
    f = compile_opencl(module, name="m", profile="gpu")
    f.bind_params(dlpc.api.check_weights(model))
    inputs = dlpc.api.random_inputs(model, seed=1)
    for out, ref in zip(f(*inputs), dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(ref).max()))


# ------------------------------------------------------------------- group shapes


@pytest.mark.parametrize("n, pow2", [(0, 1), (1, 1), (2, 2), (3, 4), (64, 64), (65, 128)])
def test_pow2_at_least(n, pow2):
    assert _pow2_at_least(n) == pow2


@pytest.mark.parametrize(
    "extents, profile, local",
    [
        # one unit: the largest group up to GROUP_ITEMS, dimension 0 first (a power of 2
        # covering it), then dimension 1 within what is left
        ((100,), ONE, (128,)),
        ((3, 5), ONE, (4, 8)),
        ((300, 7), ONE, (256, 1)),
        ((16, 16), ONE, (16, 16)),
        ((10, 10, 5), ONE, (16, 16, 1)),
        # 132 units: halved (the largest dimension first) while the groups are fewer
        # than the units, down to MIN_GROUP_ITEMS
        ((16, 16), H200, (8, 8)),
        ((300, 7), H200, (64, 1)),
        ((32768,), H200, (128,)),  # 256 groups of 128 >= 132: stop there
        ((65536,), H200, (256,)),  # 256 groups of 256 already
        ((8,), GpuProfile(4, 1), (4,)),  # the device's largest group
    ],
)
def test_group_shape_rule(extents, profile, local):
    """gpu_launch.group_shape: the rule in its docstring, case by case."""
    got = group_shape(extents, profile)
    assert got == local
    # why: a group smaller than on one unit only where the groups of that shape are too
    # few for the units, and never below MIN_GROUP_ITEMS
    whole = group_shape(extents, GpuProfile(profile.max_group, 1))
    if got != whole:
        assert np.prod(got) >= MIN_GROUP_ITEMS
        assert np.prod([-(-e // w) for e, w in zip(extents, got)]) <= 2 * profile.units
    assert np.prod(got) <= GROUP_ITEMS


# -------------------------------------------------------------------- work-items

RELU5 = "model r(x: f32[B, 3, 5, 7, 9]) {\n  return relu(x)\n}\n"


def test_outer_loops_fold_into_dimension_2_slowest_outermost(tmp_path):
    """relu over [2, 3, 5, 7, 9]: columns on dimension 0, rows on 1, the other three
    loops folded into dimension 2 (30 work-items): the innermost of them `% 5`, the
    middle `(/ 5) % 3`, the outermost `/ 15` (no modulo: it is below 2 anyway)."""
    launch, _ = _launch(tmp_path, RELU5, 2, ONE)
    assert _names(launch.mapped) == {
        "i4": "get_global_id(0)",
        "i3": "get_global_id(1)",
        "i2": "(get_global_id(2) % 5)",
        "i1": "((get_global_id(2) / 5) % 3)",
        "i0": "(get_global_id(2) / 15)",
    }
    # 9 columns and 7 rows rounded up to the groups (16, 8): both guarded
    assert launch.global_size == (16, 8, 30) and launch.local_size == (16, 8, 1)
    assert _names(launch.bounds) == {"i4": 9, "i3": 7}


def test_a_vector_of_work_items_takes_dimension_1_of_one(tmp_path):
    """relu over [B, 5] with B = 1 (an extent-1 loop is no work-item): one loop, the
    NDRange (8,) rounded up from 5 and guarded."""
    launch, source = _launch(tmp_path, "model r(x: f32[B, 5]) {\n  return relu(x)\n}\n", 1, ONE)
    assert list(_names(launch.mapped)) == ["i1"]
    assert launch.global_size == (8,) and _names(launch.bounds) == {"i1": 5}
    assert "< 5) {" in source


def test_folded_outer_loops_run_right(tmp_path, monkeypatch):
    _run(tmp_path, RELU5, 2, ONE, monkeypatch)


# ------------------------------------------------------------------------- lanes

LINEAR = "model l(x: f32[B, 64]) {\n  param w: f32[300, 64] = kaiming(seed=1)\n  return linear(x, w)\n}\n"


@pytest.mark.parametrize("batch, lanes", [(8, 4), (6, 2), (5, 1), (12, 4)])
def test_row_lanes_are_the_widest_of_4_and_2_dividing_the_rows(tmp_path, batch, lanes):
    """A linear's batch rows (dimension 1) in lanes of 4, else 2, else none: the lanes
    divide the loop, so dimension 1 is rows / lanes work-items, never rounded up."""
    launch, _ = _launch(tmp_path, LINEAR, batch, ONE)
    assert _names(launch.lanes) == ({"i0": lanes} if lanes > 1 else {})
    assert launch.global_size == (512, batch // lanes)
    assert _names(launch.bounds) == {"i1": 300}  # (300 features rounded up to 512)


def test_row_lanes_need_a_reduction(tmp_path):
    """relu over [8, 16]: no reduction below dimension 0, no load to share: no lanes."""
    launch, _ = _launch(tmp_path, "model r(x: f32[B, 16]) {\n  return relu(x)\n}\n", 8, ONE)
    assert not launch.lanes and launch.global_size == (16, 8)


def test_row_lanes_run_right(tmp_path, monkeypatch):
    _run(tmp_path, LINEAR, 6, ONE, monkeypatch)


# ------------------------------------------------------------- split reductions


def _linear(k: int, n: int = 8, shape: str = "B") -> str:
    return (
        f"model l(x: f32[{shape}, {k}]) {{\n  param w: f32[{n}, {k}] = kaiming(seed=1)\n"
        "  return linear(x, w)\n}\n"
    )


@pytest.mark.parametrize("k, split", [(63, False), (64, True)])
def test_a_sum_splits_over_a_group_from_64_terms(tmp_path, k, split):
    """16 outputs on 132 units (far fewer work-items than 132 x 256): each sum of at
    least SPLIT_ITEMS (64) terms is split over a work-group of 64; 63 terms are not."""
    launch, _ = _launch(tmp_path, _linear(k), 2, H200)
    assert (launch.split is not None) is split
    if split:
        assert launch.split[2] == "arith.addf"
        assert launch.global_size == (8 * SPLIT_ITEMS, 2)
        assert launch.local_size == (SPLIT_ITEMS, 1)
        assert _names(launch.mapped) == {"i1": "get_group_id(0)", "i0": "get_global_id(1)"}


@pytest.mark.parametrize("n, split", [(127, True), (128, False)])
def test_a_sum_splits_only_while_the_work_items_cannot_fill_the_device(tmp_path, n, split):
    """One unit x GROUP_ITEMS = 256 work-items fill the device: 2 x 127 = 254 outputs
    of 64 terms split their sums over groups, 2 x 128 = 256 are one work-item each."""
    profile = GpuProfile(1024, 1)  # 1 unit: 256 work-items fill it
    launch, _ = _launch(tmp_path, _linear(64, n), 2, profile)
    assert (launch.split is not None) is split


def test_a_max_reduction_splits_with_its_own_identity(tmp_path):
    """reduce_max over 64 terms on 132 units: split, partials combined with max."""
    text = "model r(x: f32[B, 5, 64]) {\n  return reduce_max(x, axes=[2])\n}\n"
    launch, _ = _launch(tmp_path, text, 2, H200)
    assert launch.split is not None and launch.split[2] == "arith.maximumf"
    assert launch.global_size == (5 * SPLIT_ITEMS, 2)


def test_a_split_group_is_at_most_the_devices_largest(tmp_path):
    """A linear over [2, 3, 64] on a device of groups of at most 32: groups of 32 per
    output, the rows on dimension 1, the batch on 2."""
    launch, _ = _launch(tmp_path, _linear(64, 8, "B, 3"), 2, GpuProfile(32, 132))
    assert launch.split is not None
    assert launch.global_size == (8 * 32, 3, 2) and launch.local_size == (32, 1, 1)
    assert _names(launch.mapped) == {
        "i2": "get_group_id(0)",
        "i1": "get_global_id(1)",
        "i0": "get_global_id(2)",
    }


@pytest.mark.parametrize(
    "text, batch",
    [
        (_linear(64, 8, "B, 3"), 2),
        ("model r(x: f32[B, 5, 64]) {\n  return reduce_max(x, axes=[2])\n}\n", 2),
    ],
    ids=["linear-3d", "max"],
)
def test_split_sums_run_right(tmp_path, monkeypatch, text, batch):
    _run(tmp_path, text, batch, GpuProfile(32, 132), monkeypatch)


# --------------------------------------------------------------- CPU launch plans

# The CPU plans (`plan_launch`: NDRange, lanes, partial sums, the vector loop) the
# examples get on an 8-wide device (PoCL's) and a 16-wide one (Intel's), per kernel:
# "global/local/lanes/partial loops/vector loop/__local stages/relaid-out buffers".
# These are the plans the lane heuristics' constants were measured with
# (docs/design/opencl-experiments.md): a change to a heuristic that changes one of them
# is a change of plan to be measured, and this table updated with it.
PLANS = {
    ("resnet", 1, 8): [
        "add_0 2/-/i0:8/-/-/0/0",
        "rsqrt_1 2/-/i0:8/-/-/0/0",
        "mul_2 2/-/i0:8/-/-/0/0",
        "mul_4 16x1/-/i1:3/-/-/0/0",
        "mul_5 2/-/i0:8/-/-/0/0",
        "sub_6 2/-/i0:8/-/-/0/0",
        "conv2d_relu_0 2/-/i3:8,i1:8/-/i3/0/0",
        "add_9 2/-/i0:8/-/-/0/0",
        "rsqrt_10 2/-/i0:8/-/-/0/0",
        "mul_11 2/-/i0:8/-/-/0/0",
        "mul_13 16x2/-/i1:8/-/-/0/0",
        "mul_14 2/-/i0:8/-/-/0/0",
        "sub_15 2/-/i0:8/-/-/0/0",
        "conv2d_relu_1 2/-/i3:8,i1:8/-/i3/0/0",
        "add_18 2/-/i0:8/-/-/0/0",
        "rsqrt_19 2/-/i0:8/-/-/0/0",
        "mul_20 2/-/i0:8/-/-/0/0",
        "mul_22 16x2/-/i1:8/-/-/0/0",
        "mul_23 2/-/i0:8/-/-/0/0",
        "sub_24 2/-/i0:8/-/-/0/0",
        "conv2d_add_relu_2 2/-/i3:8,i1:8/-/i3/0/0",
        "add_28 4/-/i0:8/-/-/0/0",
        "rsqrt_29 4/-/i0:8/-/-/0/0",
        "mul_30 4/-/i0:8/-/-/0/0",
        "mul_32 32x2/-/i1:8/-/-/0/0",
        "mul_33 4/-/i0:8/-/-/0/0",
        "sub_34 4/-/i0:8/-/-/0/0",
        "conv2d_relu_3 4/-/i3:8,i1:8/-/i3/0/0",
        "add_37 4/-/i0:8/-/-/0/0",
        "rsqrt_38 4/-/i0:8/-/-/0/0",
        "mul_39 4/-/i0:8/-/-/0/0",
        "mul_41 32x4/-/i1:8/-/-/0/0",
        "mul_42 4/-/i0:8/-/-/0/0",
        "sub_43 4/-/i0:8/-/-/0/0",
        "add_44 4/-/i0:8/-/-/0/0",
        "rsqrt_45 4/-/i0:8/-/-/0/0",
        "mul_46 4/-/i0:8/-/-/0/0",
        "mul_48 4/-/i1:8,i0:8/-/i1/0/1",
        "mul_49 4/-/i0:8/-/-/0/0",
        "sub_50 4/-/i0:8/-/-/0/0",
        "conv2d_51 4/-/i3:8,i1:8/-/i3/0/0",
        "conv2d_add_relu_4 4/-/i3:8,i1:8/-/i3/0/0",
        "global_avg_pool_55 4/-/i1:8,r1:8/r1/r1/0/0",
        "linear_57 2/-/i1:5,r0:8/r0/r0/0/0",
    ],
    ("resnet", 2, 16): [
        "add_0 2/-/i0:8/-/-/0/0",
        "rsqrt_1 2/-/i0:8/-/-/0/0",
        "mul_2 2/-/i0:8/-/-/0/0",
        "mul_4 16x1/-/i1:3/-/-/0/0",
        "mul_5 2/-/i0:8/-/-/0/0",
        "sub_6 2/-/i0:8/-/-/0/0",
        "conv2d_relu_0 2x2/-/i3:16,i1:8/-/i3/0/0",
        "add_9 2/-/i0:8/-/-/0/0",
        "rsqrt_10 2/-/i0:8/-/-/0/0",
        "mul_11 2/-/i0:8/-/-/0/0",
        "mul_13 16x2/-/i1:8/-/-/0/0",
        "mul_14 2/-/i0:8/-/-/0/0",
        "sub_15 2/-/i0:8/-/-/0/0",
        "conv2d_relu_1 2x2/-/i3:16,i1:8/-/i3/0/0",
        "add_18 2/-/i0:8/-/-/0/0",
        "rsqrt_19 2/-/i0:8/-/-/0/0",
        "mul_20 2/-/i0:8/-/-/0/0",
        "mul_22 16x2/-/i1:8/-/-/0/0",
        "mul_23 2/-/i0:8/-/-/0/0",
        "sub_24 2/-/i0:8/-/-/0/0",
        "conv2d_add_relu_2 2x2/-/i3:16,i1:8/-/i3/0/0",
        "add_28 4/-/i0:8/-/-/0/0",
        "rsqrt_29 4/-/i0:8/-/-/0/0",
        "mul_30 4/-/i0:8/-/-/0/0",
        "mul_32 32x2/-/i1:8/-/-/0/0",
        "mul_33 4/-/i0:8/-/-/0/0",
        "sub_34 4/-/i0:8/-/-/0/0",
        "conv2d_relu_3 2x4/-/i3:16,i1:8/-/i3/0/0",
        "add_37 4/-/i0:8/-/-/0/0",
        "rsqrt_38 4/-/i0:8/-/-/0/0",
        "mul_39 4/-/i0:8/-/-/0/0",
        "mul_41 32x4/-/i1:8/-/-/0/0",
        "mul_42 4/-/i0:8/-/-/0/0",
        "sub_43 4/-/i0:8/-/-/0/0",
        "add_44 4/-/i0:8/-/-/0/0",
        "rsqrt_45 4/-/i0:8/-/-/0/0",
        "mul_46 4/-/i0:8/-/-/0/0",
        "mul_48 4/-/i1:16,i0:8/-/i1/0/1",
        "mul_49 4/-/i0:8/-/-/0/0",
        "sub_50 4/-/i0:8/-/-/0/0",
        "conv2d_51 2x4/-/i3:16,i1:8/-/i3/0/0",
        "conv2d_add_relu_4 2x4/-/i3:16,i1:8/-/i3/0/0",
        "global_avg_pool_55 2/-/r1:8/r1/-/0/0",
        "linear_57 2/-/i1:2/-/i1/0/1",
    ],
    ("lenet", 1, 16): [
        "conv2d_relu_0 2/-/i3:16,i1:3/-/i3/0/0",
        "max_pool2d_2 2/-/i3:8,i1:3/-/i3/0/0",
        "conv2d_relu_1 2/-/i3:16,i1:5/-/i3/0/1",
        "max_pool2d_6 5/-/i3:16/-/i3/0/0",
        "reshape_8 50/-/i1:8/-/-/0/0",
        "linear_relu_2 15/-/i1:8,r0:16/r0/r0/0/0",
        "linear_relu_3 14/-/i1:6,r0:8/r0/r0/0/0",
        "linear_13 2/-/i1:5,r0:4/r0/r0/0/0",
    ],
    ("lenet", 1, 8): [
        "conv2d_relu_0 2/-/i3:4,i1:3/-/i3/0/0",
        "max_pool2d_2 2/-/i3:2,i1:3/-/i3/0/0",
        "conv2d_relu_1 2/-/i3:16,i1:5/-/i3/0/1",
        "max_pool2d_6 5/-/i3:16/-/i3/0/0",
        "reshape_8 50/-/i1:8/-/-/0/0",
        "linear_relu_2 15/-/i1:8,r0:8/r0/r0/0/0",
        "linear_relu_3 14/-/i1:6,r0:8/r0/r0/0/0",
        "linear_13 2/-/i1:5,r0:4/r0/r0/0/0",
    ],
    ("lenet", 4, 16): [
        "conv2d_relu_0 4x1/-/i3:16,i1:6/-/i3/0/0",
        "max_pool2d_2 4x1/-/i3:8,i1:6/-/i3/0/0",
        "conv2d_relu_1 4x2/-/i3:16,i1:5/-/i3/0/1",
        "max_pool2d_6 4x1/-/i3:16,i1:5/-/i3/0/0",
        "reshape_8 2/-/i1:16,i0:2/-/i1/0/0",
        "linear_relu_2 2/-/i1:8,i0:2/-/i1/0/1",
        "linear_relu_3 2/-/i1:16,i0:2/-/i1/0/1",
        "linear_13 2/-/i1:2,i0:2/-/i1/0/1",
    ],
    ("mobilenet", 1, 8): [
        "add_0 4/-/i0:8/-/-/0/0",
        "rsqrt_1 4/-/i0:8/-/-/0/0",
        "mul_2 4/-/i0:8/-/-/0/0",
        "mul_4 32x1/-/i2:3/-/-/0/0",
        "mul_5 4/-/i0:8/-/-/0/0",
        "sub_6 4/-/i0:8/-/-/0/0",
        "conv2d_clip_0 4/-/i3:8,i1:8/-/i3/0/0",
        "add_9 8/-/i0:8/-/-/0/0",
        "rsqrt_10 8/-/i0:8/-/-/0/0",
        "mul_11 8/-/i0:8/-/-/0/0",
        "mul_13 8/-/i1:8,i0:8/-/i1/0/1",
        "mul_14 8/-/i0:8/-/-/0/0",
        "sub_15 8/-/i0:8/-/-/0/0",
        "conv2d_clip_1 11/-/i3:16,i1:6/-/i3/0/0",
    ],
    ("mobilenet", 2, 16): [
        "add_0 4/-/i0:8/-/-/0/0",
        "rsqrt_1 4/-/i0:8/-/-/0/0",
        "mul_2 4/-/i0:8/-/-/0/0",
        "mul_4 32x1/-/i2:3/-/-/0/0",
        "mul_5 4/-/i0:8/-/-/0/0",
        "sub_6 4/-/i0:8/-/-/0/0",
        "conv2d_clip_0 2x16/-/i3:16,i1:2/-/i3/0/0",
        "add_9 8/-/i0:8/-/-/0/0",
        "rsqrt_10 8/-/i0:8/-/-/0/0",
        "mul_11 8/-/i0:8/-/-/0/0",
        "mul_13 8/-/i1:16,i0:8/-/i1/0/1",
        "mul_14 8/-/i0:8/-/-/0/0",
        "sub_15 8/-/i0:8/-/-/0/0",
        "conv2d_clip_1 2x8/-/i3:16,i1:8/-/i3/0/0",
    ],
    ("transformer", 1, 8): [
        "concat_0 24/-/i1:8,i0:8/-/i1/0/0",
        "concat_1 24/-/i0:8/-/-/0/0",
        "linear_2 2/-/i2:8,i1:8/-/i2/0/0",
        "matmul_mul_0 2/-/i3:8,i1:2,i2:4/-/i3/0/0",
        "softmax_14_max 2/-/i2:16,i1:2/-/i2/0/0",
        "softmax_14_exp 2/-/i3:8,i1:2/-/i3/0/0",
        "softmax_14_sum 2/-/i2:16,i1:2/-/i2/0/0",
        "softmax_14 2/-/i3:16,i1:2/-/i3/0/0",
        "matmul_15 2/-/i3:8,i1:2,i2:4/-/i3/0/0",
        "reshape_17 2/-/i2:8,i1:8/-/i2/0/0",
        "linear_add_1 2/-/i2:8,i1:8/-/i2/0/1",
        "layer_norm_20_mean 2/-/i1:8,r0:8/r0/r0/0/0",
        "layer_norm_20_rstd 2/-/i1:8,r0:8/r0/r0/0/0",
        "layer_norm_20 2/-/i2:8,i1:8/-/i2/0/0",
        "linear_gelu_2 2/-/i2:8,i1:8/-/i2/0/1",
        "linear_add_3 2/-/i2:8,i1:8/-/i2/0/1",
        "layer_norm_25_mean 2/-/i1:8,r0:8/r0/r0/0/0",
        "layer_norm_25_rstd 2/-/i1:8,r0:8/r0/r0/0/0",
        "layer_norm_25 2/-/i2:8,i1:8/-/i2/0/0",
    ],
    ("mlp", 4, 16): [
        "linear_relu_0 2/-/i1:16,i0:2/-/i1/0/1",
        "linear_relu_1 2/-/i1:16,i0:2/-/i1/0/1",
        "linear_4 2/-/i1:2,i0:2/-/i1/0/1",
    ],
}


def _plan_summary(launch) -> str:
    lanes = ",".join(f"{lp.loop_name}:{u}" for lp, u in launch.lanes.items())
    partial = ",".join(sorted(lp.loop_name for lp in launch.partials))
    vector = launch.vector.loop_name if launch.vector is not None else "-"
    size = "x".join(map(str, launch.global_size))
    local = "x".join(map(str, launch.local_size)) if launch.local_size else "-"
    return (
        f"{size}/{local}/{lanes or '-'}/{partial or '-'}/{vector}/{len(launch.shared)}"
        f"/{len(launch.relayout)}"
    )


@pytest.mark.parametrize("name, batch, width", PLANS)
def test_cpu_launch_plans_of_the_examples(name, batch, width):
    """Every kernel's CPU launch plan for the example (see PLANS)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    model = dlpc.load(root / "examples" / f"{name}.dlpc", batch=batch)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    emitter = OpenCLEmitter(module, vector_width=width)
    emitter.emit()
    got = [f"{k.sym} {_plan_summary(launch)}" for k, launch in emitter.launches.items()]
    assert got == PLANS[(name, batch, width)]


@pytest.mark.parametrize("features, split", [(64, True), (65, False)])
def test_a_split_chain_member_reads_at_most_256_kib_of_weights(tmp_path, features, split):
    """chains.batch_split: a linear at batch 8 whose weight is exactly MAX_SPLIT_RESIDENT
    (64 x 1024 floats) may run in a split chain, each group its images; one feature more
    (260 KiB) and every group would read the weights again: launched alone."""
    from dlpc.backends.opencl import batch_split, plan_launch, resident_values
    from dlpc.backends.opencl.chains import MAX_SPLIT_RESIDENT

    assert 64 * 1024 * 4 == MAX_SPLIT_RESIDENT
    (tmp_path / "l.dlpc").write_text(
        f"model l(x: f32[B, 1024]) {{\n  param w: f32[{features}, 1024] = kaiming(seed=1)\n"
        "  return linear(x, w)\n}\n"
    )
    model = dlpc.load(tmp_path / "l.dlpc", batch=8)
    module = pipeline.lower(model.module.clone(), "loop", pipeline.PipelineOptions())
    resident = resident_values(module)
    (kernel,) = [k for k in module.walk() if k.name == "loop.kernel"]
    launch = plan_launch(kernel, kernel.sym, resident=resident)
    assert batch_split(kernel, launch, 2, resident) == (8 if split else None)


@pytest.mark.parametrize("w, partials", [(120, False), (128, True)])
def test_strided_vector_lanes_give_way_to_partials_from_128_terms(tmp_path, w, partials):
    """launch.plan_launch: a global average pool at batch 2 first takes 16 channel lanes
    as a vector, but its loads stride by a plane per channel; from LONG_REDUCTION (128)
    terms per output on it sums in 8 partials along the contiguous plane instead (no
    vector), below that the channel vector stays (docs/design/opencl-experiments.md)."""
    from dlpc.backends.opencl import plan_launch

    (tmp_path / "g.dlpc").write_text(
        f"model g(x: f32[B, 16, 1, {w}]) {{\n  return global_avg_pool(x)\n}}\n"
    )
    model = dlpc.load(tmp_path / "g.dlpc", batch=2)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    (kernel,) = [k for k in module.walk() if k.name == "loop.kernel"]
    launch = plan_launch(kernel, kernel.sym)
    if partials:
        assert launch.vector is None and _names(launch.lanes) == {"r1": 8}
        assert list(_names(launch.partials)) == ["r1"]
    else:
        assert _names(launch.lanes) == {"i1": 16} and not launch.partials
        assert launch.vector is not None and launch.vector.loop_name == "i1"


@pytest.mark.parametrize("features, inner", [(96, 16), (80, 16), (48, 8), (64, 16)])
def test_a_linears_feature_lanes_widen_to_16_unless_3_steps(tmp_path, features, inner):
    """lanes._wide_inner: a linear at batch 4 (2 mapped lanes over the batch) widens its
    8 feature lanes to WIDE_LANES (16, a float16) when 16 lanes take 1, 2, 4, 5 or 6
    steps (96 features: 6, 80: 5, 64: 4), not 3 (48 features keep 8)."""
    from dlpc.backends.opencl import plan_launch

    (tmp_path / "l.dlpc").write_text(
        f"model l(x: f32[B, 64]) {{\n  param w: f32[{features}, 64] = kaiming(seed=1)\n"
        "  return linear(x, w)\n}\n"
    )
    model = dlpc.load(tmp_path / "l.dlpc", batch=4)
    module = pipeline.lower(model.module.clone(), "loop", OPENCL)
    (kernel,) = [k for k in module.walk() if k.name == "loop.kernel"]
    assert _names(plan_launch(kernel, kernel.sym).lanes) == {"i1": inner, "i0": 2}


EXPRS = """
func.func @main(%x: memref<64xf32>, %y: memref<8x8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %c2 = arith.constant 2 : index
        %c4 = arith.constant 4 : index
        %ipc = arith.addi %i, %c2 : index
        %cpi = arith.addi %c2, %i : index
        %cmi = arith.subi %c2, %i : index
        %imj = arith.subi %i, %j : index
        %ipi = arith.addi %i, %i : index
        %i4 = arith.muli %i, %c4 : index
        %fouri = arith.muli %c4, %i : index
        %ij = arith.muli %i, %j : index
        %i4j = arith.addi %i4, %j : index
        %id2 = arith.divsi %i, %c2 : index
        %jp2 = arith.addi %j, %c2 : index
        %v = memref.load %x[%ipc] : memref<64xf32>
        memref.store %v, %y[%i, %j] : memref<8x8xf32>
      }
    }
  }
  func.return
}"""


def test_index_predicates_of_the_opencl_backend():
    """backends/opencl/indices.py: affine_index (adds, subtractions and products by a
    constant of loop variables and constants), varies_with (the variable plus or minus
    what does not vary with it, a constant minus it not), depends_on (any use)."""
    from dlpc.backends.opencl.indices import affine_index, depends_on, varies_with
    from dlpc.passes.pipeline import parse_module

    module = parse_module(EXPRS)
    v = {op.results[0].name_hint: op.results[0] for op in module.walk() if op.results}
    loops = {op.loop_name: op.induction_var for op in module.walk() if op.name == "loop.for"}
    i, j = loops["i0"], loops["i1"]
    v["i"], v["j"] = i, j
    affine = {"i", "c2", "ipc", "cmi", "imj", "i4", "fouri", "i4j", "jp2"}
    for name in ["i", "c2", "ipc", "cmi", "imj", "i4", "fouri", "i4j", "jp2", "ij", "id2"]:
        assert affine_index(v[name]) is (name in affine), name
    varying = {"i", "ipc", "cpi", "imj"}
    for name in ["i", "ipc", "cpi", "cmi", "imj", "ipi", "i4", "j", "jp2"]:
        assert varies_with(v[name], i) is (name in varying), name
    for name, dep in [("i4j", True), ("jp2", False), ("id2", True), ("c2", False)]:
        assert depends_on(v[name], i) is dep, name


GUARDED = """
func.func @main(%x: memref<16xf32>, %y: memref<8x8xf32>) {
  loop.kernel "k" {
    loop.for %i = 0 to 8 step 1 {name = "i0"} {
      loop.for %j = 0 to 8 step 1 {name = "i1"} {
        %c1 = arith.constant 1 : index
        %c2 = arith.constant 2 : index
        COND
        %v = scf.if %g -> (f32) {
          %l = memref.load %x[%i] : memref<16xf32>
          scf.yield %l : f32
        } else {
          %z = arith.constant 0.000000e+00 : f32
          scf.yield %z : f32
        }
        memref.store %v, %y[%i, %j] : memref<8x8xf32>
      }
    }
  }
  func.return
}"""


@pytest.mark.parametrize(
    "cond, guard",
    [
        ("%d = arith.subi %i, %j : index\n%g = arith.cmpi slt, %d, %c1 : index", True),
        ("%d = arith.muli %i, %c2 : index\n%g = arith.cmpi sge, %d, %c1 : index", True),
        ("%d = arith.remsi %i, %c2 : index\n%g = arith.cmpi slt, %d, %c1 : index", False),
        ("%d = arith.shli %i, %c1 : index\n%g = arith.cmpi slt, %d, %c2 : index", False),
        ("%g = arith.cmpi eq, %i, %c1 : index", False),
    ],
)
def test_padding_guards_are_inequalities_of_affine_indices(cond, guard):
    """guards.padding_guards: an scf.if is a padding guard when its condition is signed
    inequalities of affine functions of the loops (adds, subtractions, products by a
    constant): i - j < 1 and 2 i >= 1 are; i % 2 < 1, (i << 1) < 2 (not convex in the
    lanes) and i == 1 (no inequality) are not."""
    from dlpc.backends.opencl.guards import padding_guards
    from dlpc.passes.pipeline import parse_module

    module = parse_module(GUARDED.replace("COND", cond.replace("\n", "\n        ")))
    nest = next(op for op in module.walk() if op.name == "loop.for")
    assert (padding_guards(nest) is not None) is guard


def _indentation_errors(source: str) -> list[str]:
    """Lines of the kernels (from the first `__kernel` on) not indented by two spaces per
    unclosed brace (a closing line one level less)."""
    lines = source.splitlines()
    first = next(n for n, ln in enumerate(lines) if ln.startswith("__kernel"))
    depth, bad = 0, []
    for ln in lines[first:]:
        text = ln.strip()
        if not text:
            continue
        want = 2 * (depth - text.startswith("}"))
        if len(ln) - len(ln.lstrip(" ")) != want and not text.startswith(("#", "//", "*")):
            bad.append(ln)
        depth += text.count("{") - text.count("}")
    return bad


def test_border_tiles_are_indented_by_their_braces(tmp_path):
    """kernel_writer.border_tiles writes the in-bounds copy of a border tile inside an
    `if (...) {` one level deeper and comes back out after it (its `} else {` and what
    follows at the `if`'s level): every kernel line is indented two spaces per open brace
    (a padded depthwise conv whose border tiles are in bounds at every lane and tap, and
    the masked loads of emit-opencl-masked-load.mlir)."""
    from pathlib import Path

    from dlpc.backends.opencl import emit_opencl
    from dlpc.passes.pipeline import parse_module

    (tmp_path / "dw.dlpc").write_text(
        "model dw(x: f32[B, 16, 9, 16]) {\n"
        "  param w: f32[16, 1, 3, 3] = kaiming(seed=7)\n"
        "  return conv2d(x, w, padding=1, groups=16)\n}\n"
    )
    model = dlpc.load(tmp_path / "dw.dlpc", batch=1)
    source = OpenCLEmitter(pipeline.lower(model.module.clone(), "loop", OPENCL)).emit()
    assert " = (int8)(-(int)(" in source and "} else {" in source
    assert not _indentation_errors(source)
    root = Path(__file__).resolve().parents[2]
    module = parse_module((root / "test" / "e2e" / "emit-opencl-masked-load.mlir").read_text())
    assert not _indentation_errors(emit_opencl(module))


@pytest.mark.parametrize("team, chains", [(1, 0), (2, 1)])
def test_a_run_of_one_kernel_is_a_chain_only_in_a_team(tmp_path, team, chains):
    """chains.ChainWriter.chain_runs: a piece of one kernel is no chain (it is launched
    as it is), except in a team of devices, whose chain hands its work-items out to the
    helper (`team_chain`): relu at batch 4 as a run of one kernel."""
    from dlpc.dialects.loop import KernelOp

    (tmp_path / "r.dlpc").write_text("model r(x: f32[B, 64]) {\n  return relu(x)\n}\n")
    model = dlpc.load(tmp_path / "r.dlpc", batch=4)
    emitter = OpenCLEmitter(pipeline.lower(model.module.clone(), "loop", OPENCL))
    kernels = [k for k in emitter.module.walk() if isinstance(k, KernelOp)]
    emitter.emit(chains=[kernels], team=team)
    assert len(emitter.chains) == chains
