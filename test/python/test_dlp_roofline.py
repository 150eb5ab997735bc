"""The DLP target at its roofline (issue 32): every convolution on the conv intrinsic,
weights laid out at compile time, no activation transposes, each checked against the
numpy reference on the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import arith, memref, scf

import dlpc
from dlpc.targets.dlp import resolve

ROOT = Path(__file__).resolve().parents[2]


def run_dlp(name: str, batch: int = 1):
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    outs = compiled(*inputs)
    for out, ref in zip(outs, dlpc.api.reference(model, inputs)):
        np.testing.assert_allclose(
            out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))
        )
    return compiled.artifact.report


def test_lenet_convolutions_run_on_the_intrinsic_without_relayout_kernels():
    # graph-conv-layout's NHWC (a CPU's vector-width rule) is not applied for the dlp
    # target: no weight re-layout or activation transpose kernel, conv2 on dlp.conv2d
    report = run_dlp("lenet")
    names = [r.name for r in report]
    assert not [n for n in names if "transpose" in n or "hwio" in n], names
    convs = [r for r in report if "conv2d" in r.origin]
    assert len(convs) == 2
    assert all(r.intrinsic_cycles > 0 for r in convs), [(r.name, r.intrinsic_cycles) for r in convs]


BATCHED = {  # every kernel on intrinsics at batch > 1
    # 5 x 6 x 6 outputs and 3 x 6 x 6 images are not 64-byte multiples: one image a tile
    "conv_bias_relu": (
        "x: f32[3, 3, 6, 6]",
        "param w: f32[5, 3, 3, 3] = kaiming(seed=1)\n  param b: f32[5] = normal(seed=2, std=0.1)",
        "relu(conv2d(x, w, b, padding=1))",
    ),
    "conv_aligned": (
        "x: f32[4, 4, 4, 4]",
        "param w: f32[4, 4, 3, 3] = kaiming(seed=3)",
        "conv2d(x, w, padding=1)",
    ),
    "max_pool": ("x: f32[3, 4, 8, 8]", "", "max_pool2d(x, kernel=2, stride=2)"),
    "avg_pool": ("x: f32[2, 3, 6, 6]", "", "avg_pool2d(x, kernel=3, strides=1)"),
    # the 1x1 output's unit loops: a row reduction (dlp.reduce_sum), batched or not
    "global_avg_pool": ("x: f32[2, 4, 4, 4]", "", "global_avg_pool(x)"),
    "global_avg_pool_1": ("x: f32[1, 4, 4, 4]", "", "global_avg_pool(x)"),
    # no intrinsic over whole images: the batch loop around the work loop, image by image
    "depthwise": (  # (planes of 16 floats: a depthwise plane must start vector-aligned)
        "x: f32[2, 4, 4, 4]",
        "param w: f32[4, 1, 3, 3] = kaiming(seed=4)",
        "conv2d(x, w, padding=1, groups=4)",
    ),
    "linear_3d": (
        "x: f32[3, 4, 16]",
        "param w: f32[16, 16] = kaiming(seed=5)\n  param b: f32[16] = normal(seed=6, std=0.1)",
        "linear(x, w, b)",
    ),
}


@pytest.mark.parametrize("desc", [None, "tiny"])
@pytest.mark.parametrize("case", BATCHED)
def test_batched_windows_run_on_intrinsics(tmp_path, case, desc):
    args, params, expr = BATCHED[case]
    path = tmp_path / "m.dlpc"
    path.write_text(f"model m({args}) {{\n  {params}\n  return {expr}\n}}\n")
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    options = {"target_desc": desc} if desc else {}
    compiled = dlpc.compile(model, target="dlp", loop_to_dlp=options)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert rep.intrinsic_cycles > 0, (case, rep.name)
    # the tile chosen from the selection's scratch keeps the kernel's NRAM in capacity
    nram = sum(
        int(np.prod(op.memref.type.get_shape())) * 4
        for op in compiled.lowered.walk()
        if isinstance(op, memref.AllocOp) and "nram" in str(op.memref.type)
    )
    assert nram <= resolve(desc).capacity("nram"), nram


def test_a_linear_layer_weight_crosses_gdram_about_once(tmp_path):
    """32 rows over 16 cores would stage the 512 KiB weight in every cluster's SRAM (4x
    its bytes over GDRAM); the plan keeps it to one cluster where that is faster."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[32, 256]) {\n  param w: f32[512, 256] = kaiming(seed=1)\n"
        "  return relu(linear(x, w))\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    operands = (32 * 256 + 512 * 256 + 32 * 512) * 4
    assert rep.intrinsic_cycles > 0
    assert rep.level_bytes()["gdram"] < 1.5 * operands, (rep.tasks, rep.level_bytes())


def test_a_batch_of_row_slices_is_copied_gdram_to_gdram(tmp_path):
    """512 kept rows of 32 elements (32 per task): direct copies, no NRAM staging."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[32, 16, 96]) {\n  return slice(x, starts=[32], ends=[64], axes=[2])\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    np.testing.assert_array_equal(out, dlpc.api.reference(model, inputs)[0])
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert set(rep.bytes) == {"gdram->gdram"}, rep.bytes


def test_stats_names_each_kernel_left_as_scalar_loops(tmp_path, capsys):
    """`dlpc --stats` lists the dlp kernels whose compute (or epilogue) is scalar loops,
    with the reason: abs has no vector intrinsic; the relu layer has none listed."""
    from dlpc.tools.dlpc import main

    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[4, 64]) {\n  param w: f32[64, 64] = kaiming(seed=1)\n"
        "  param v: f32[64, 64] = kaiming(seed=2)\n"
        "  return linear(relu(linear(x, w)), v)\n}\n"
    )
    assert main([str(path), "--emit=dlp-c", "--stats", "-o", str(tmp_path / "a.c")]) == 0
    assert "runs scalar loops" not in capsys.readouterr().err
    path.write_text(
        "model m(x: f32[4, 64]) {\n  param w: f32[64, 64] = kaiming(seed=1)\n"
        "  return abs(linear(x, w))\n}\n"
    )
    assert main([str(path), "--emit=dlp-c", "--stats", "-o", str(tmp_path / "b.c")]) == 0
    err = capsys.readouterr().err
    assert "dlp: kernel 'linear_abs_0' runs scalar loops: its epilogue is not vector" in err, err


def test_softmax_division_by_the_row_sum_is_vector_intrinsics(tmp_path):
    """softmax's last kernel multiplies by 1 / sum: a scalar op of a per-row value is
    still a per-row value (one add_scalar/mul_scalar per row), not scalar loops."""
    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[2, 4, 16]) {\n  return softmax(x, axis=-1)\n}\n")
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    np.testing.assert_allclose(out, dlpc.api.reference(model, inputs)[0], rtol=1e-5, atol=1e-6)
    assert compiled.artifact is not None
    reports = compiled.artifact.report
    assert reports and all(r.intrinsic_cycles > 0 for r in reports), [
        (r.name, r.intrinsic_cycles) for r in reports
    ]


def test_images_are_split_over_groups_of_tasks_each_read_once(tmp_path):
    """A pointwise conv whose image and output do not fit NRAM together as a batch tile
    runs image by image with the output channels as the work loop; the images are split
    over the tasks (one image per task on tiny's 2 cores), so each crosses GDRAM once,
    not once per task."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[2, 16, 4, 4]) {\n  param w: f32[32, 16, 1, 1] = kaiming(seed=1)\n"
        "  param b: f32[32] = normal(seed=2, std=0.1)\n  return relu(conv2d(x, w, b))\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp", loop_to_dlp={"target_desc": "tiny"})
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert rep.tasks == 2 and rep.intrinsic_cycles > 0
    hints = {r.name_hint for op in compiled.lowered.walk() for r in op.results}
    assert "group" in hints  # the image loop of the plan with a batch loop outside
    # x once (2 images of 16 x 4 x 4), b's 32 values with each image's channel tiles
    assert rep.bytes["gdram->nram"] == 2 * 16 * 4 * 4 * 4 + 2 * 32 * 4, rep.bytes
    assert rep.bytes["nram->gdram"] == 2 * 32 * 4 * 4 * 4


def test_a_weight_staged_by_shares_of_the_cluster_cores(tmp_path):
    """A 100 x 30 weight (3000 floats, not a multiple of 4 cores' 64-byte shares) staged
    in SRAM by every core of each cluster, a share each: right numerics, and its bytes
    cross GDRAM once per cluster (the shares add up to the whole buffer). (64 rows of x:
    with 32, 4 tasks copying the weight each from GDRAM are cheaper than staging.)"""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[64, 30]) {\n  param w: f32[100, 30] = kaiming(seed=1)\n"
        "  return relu(linear(x, w))\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    clusters = -(-rep.tasks // resolve(None).cores_per_cluster)
    assert rep.bytes["gdram->sram"] == clusters * 100 * 30 * 4, (rep.tasks, rep.bytes)
    from dlpc.dialects import dlp

    staging = [
        op
        for op in compiled.lowered.walk()
        if isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp)
        and dlp.space_of(op.operands[0].type) == "sram"
    ]
    assert len(staging) == 1  # one copy, of this core's share (its count is not a constant)
    assert not isinstance(staging[0].operands[-1].owner, arith.ConstantOp)


def test_a_batch_1_conv_with_little_compute_runs_one_tile_a_task(tmp_path):
    """A strided 1x1 conv at batch 1 (ResNet's shortcut): its whole input staged per
    cluster, each task's 4 output channels as one tile without ping-pong: 5 DMAs a task
    (its share of the staging, SRAM to NRAM, weights, bias, output), not 8 with two tiles
    whose overlap hides almost nothing."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[1, 16, 32, 32]) {\n  param w: f32[32, 16, 1, 1] = kaiming(seed=1)\n"
        "  param b: f32[32] = normal(seed=2, std=0.1)\n  return conv2d(x, w, b, stride=2)\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert rep.intrinsic_cycles > 0 and not rep.double_buffered
    assert rep.dma_count == 5 * rep.tasks, (rep.tasks, rep.dma_count)


def test_a_task_loads_its_filters_once_over_its_tiles(tmp_path):
    """A 3x3 conv at batch 1 over 8 tasks of 2 output channels, ping-ponged one channel a
    tile: the task's 2 filters (2 x 16 x 3 x 3 floats, each tile's starting 64-byte
    aligned) are one GDRAM2WRAM copy before the tiles (outside the tile loop), not one a
    tile."""
    path = tmp_path / "m.dlpc"
    path.write_text(
        "model m(x: f32[1, 16, 32, 32]) {\n  param w: f32[16, 16, 3, 3] = kaiming(seed=1)\n"
        "  param b: f32[16] = normal(seed=2, std=0.1)\n"
        "  return relu(conv2d(x, w, b, padding=1))\n}\n"
    )
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert rep.double_buffered and rep.intrinsic_cycles > 0
    assert rep.bytes["gdram->wram"] == 16 * 16 * 3 * 3 * 4  # every filter once
    from dlpc.dialects import dlp

    loads = [
        op
        for op in compiled.lowered.walk()
        if isinstance(op, dlp.MemcpyOp | dlp.MemcpyAsyncOp)
        and dlp.space_of(op.operands[0].type) == "wram"
    ]
    assert len(loads) == 1, loads
    assert not any(isinstance(op, scf.ForOp) for op in _ancestors(loads[0])), loads


def test_a_batch_1_global_pool_is_one_tile_reduced_in_place(tmp_path):
    """ResNet's global average pool at batch 1 (64 planes of 8 x 8 over 16 tasks): each
    task's 4 planes are one tile without ping-pong, reduced where they were loaded (no
    NRAM-to-NRAM copy into a row buffer): 2 DMAs a task, its load and its store."""
    path = tmp_path / "m.dlpc"
    path.write_text("model m(x: f32[1, 64, 8, 8]) {\n  return global_avg_pool(x)\n}\n")
    model = dlpc.load(path)
    inputs = dlpc.api.random_inputs(model)
    compiled = dlpc.compile(model, target="dlp")
    (out,) = compiled(*inputs)
    np.testing.assert_allclose(out, dlpc.api.reference(model, inputs)[0], rtol=1e-5, atol=1e-6)
    assert compiled.artifact is not None
    (rep,) = compiled.artifact.report
    assert rep.intrinsic_cycles > 0 and not rep.double_buffered
    assert set(rep.bytes) == {"gdram->nram", "nram->gdram"}, rep.bytes
    assert rep.dma_count == 2 * rep.tasks, (rep.tasks, rep.dma_count)


def _ancestors(op):
    """The ops enclosing `op`, innermost first."""
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()
