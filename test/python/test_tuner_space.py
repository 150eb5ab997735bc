"""Search spaces: a template per kernel class whose knobs are legal by construction;
every point renders to a schedule script that applies and preserves the kernel's
result."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_schedule import MATMUL, run_c

from dlpc.api import load
from dlpc.dialects.loop import kernels
from dlpc.passes.pipeline import PipelineOptions, lower, parse_module
from dlpc.passes.schedule.script import apply_script
from dlpc.tune.space import consistent, divisors, space_for


def test_divisors():
    assert divisors(24) == [1, 2, 3, 4, 6, 8, 12, 24]
    assert divisors(24, lo=3, hi=12, multiple_of=2) == [4, 6, 8, 12]


def test_gemm_space_knobs_divide_the_extents():
    space = space_for(parse_module(MATMUL), "mm")
    assert space is not None and space.template == "gemm"
    m, n, k = 24, 64, 16
    assert all(m % v == 0 for v in space.knobs["mc"] + space.knobs["mr"])
    assert all(n % v == 0 for v in space.knobs["nc"] + space.knobs["nr"])
    assert all(k % v == 0 for v in space.knobs["kc"])
    assert space.size() == len(space.grid()) > 100
    assert consistent(space, space.default())
    rng = random.Random(0)
    point = space.default()
    for _ in range(20):  # mutation moves one knob to a neighbouring legal value
        new = space.mutate(point, rng)
        changed = [key for key in point if new[key] != point[key]]
        assert len(changed) <= 1 and all(new[key] in space.knobs[key] for key in new)
        point = new
    assert len(space.features(point)) == len(space.features(space.default()))


def test_gemm_points_render_scripts_that_preserve_results():
    expected = run_c(parse_module(MATMUL))[-1]
    space = space_for(parse_module(MATMUL), "mm")
    rng = random.Random(3)
    points = [space.default()]
    while len(points) < 4:
        point = space.sample(rng)
        if consistent(space, point):
            points.append(point)
    for point in points:
        module = parse_module(MATMUL)
        script = space.script(module, point)
        assert script.strip(), point
        apply_script(module, script)
        module.verify()
        np.testing.assert_allclose(
            run_c(module)[-1], expected, rtol=1e-5, atol=1e-5, err_msg=f"{point}\n{script}"
        )


def _lenet_loop():
    model = load("examples/lenet.dlpc", batch=1)
    module = model.module.clone()
    lower(module, "loop", PipelineOptions(opt_level=2), weights=dict(model.weights))
    return module


def test_conv_kernels_get_the_reduction_template():
    module = _lenet_loop()
    spaces = {k.sym: space_for(module, k.sym) for k in kernels(module)}
    # (an NHWC conv's weight transpose, `<conv>_weight_hwio`, is a copy, not a conv)
    convs = {
        name: s
        for name, s in spaces.items()
        if name.startswith("conv2d") and not name.endswith("_weight_hwio")
    }
    assert len(convs) == 2 and all(
        s is not None and s.template == "reduction" for s in convs.values()
    )
    for space in convs.values():
        default = space.default()
        assert all(default[key] in values for key, values in space.knobs.items())
        assert space.script(module, default).strip()


@pytest.mark.parametrize("seed", [0, 1])
def test_reduction_points_preserve_results(seed):
    reference = run_c(_lenet_loop())[-1]
    module = _lenet_loop()
    conv = next(k.sym for k in kernels(module) if k.sym.startswith("conv2d"))
    space = space_for(module, conv)
    point = space.sample(random.Random(seed))
    apply_script(module, space.script(module, point))
    module.verify()
    np.testing.assert_allclose(
        run_c(module)[-1], reference, rtol=1e-4, atol=1e-5, err_msg=str(point)
    )


def _gemm_module(op: str, m: int, n: int, k: int, weight: bool):
    """A one-gemm model lowered to loops without schedules, and its gemm kernel's name."""
    wshape = f"{n}x{k}" if op == "linear" else f"{k}x{n}"
    w = f'%w = graph.param "w" : tensor<{wshape}xf32>\n  ' if weight else ""
    args = f"%x: tensor<{m}x{k}xf32>" + ("" if weight else f", %w: tensor<{wshape}xf32>")
    module = parse_module(f"""
func.func @main({args}) -> tensor<{m}x{n}xf32> {{
  {w}%0 = graph.{op} %x, %w : (tensor<{m}x{k}xf32>, tensor<{wshape}xf32>) -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}""")
    lower(module, "loop", PipelineOptions(opt_level=2))
    (kernel,) = [kn.sym for kn in kernels(module) if kn.sym.startswith(op)]
    return module, kernel


# (op, M, N, K, B a weight): the dot kernel (few rows, N < 16), the packed and unpacked
# gemm, one k block with A in place, row remainders (M = 37, 101), column remainders
# (N = 131, 257), a 17 x 16 tile
GEMM_CASES = [
    ("linear", 1, 256, 784, True),
    ("linear", 4, 256, 784, True),
    ("linear", 32, 10, 256, True),
    ("linear", 32, 256, 784, True),
    ("linear", 5, 4, 33, False),
    ("linear", 17, 31, 4, True),
    ("matmul", 17, 256, 100, False),
    ("matmul", 37, 64, 257, False),
    ("matmul", 101, 48, 64, False),
    ("matmul", 40, 131, 20, False),
    ("matmul", 37, 257, 16, False),
    ("matmul", 100, 100, 100, False),
    ("linear", 9, 20, 2053, True),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: "-".join(map(str, c)))
def test_the_default_gemm_schedule_is_a_point_of_the_space(case):
    """The space holds what the default schedule does (dot kernel, gemmN / gemmNxM
    remainder tiles, one k block, A in place): its default point is legal, every knob
    value is among the knob's values, and it renders the default schedule's script."""
    from dlpc.passes.schedule.default import default_scripts

    module, kernel = _gemm_module(*case)
    space = space_for(module, kernel)
    assert space is not None and space.template == "gemm"
    point = space.default()
    assert all(point[key] in values for key, values in space.knobs.items()), point
    assert consistent(space, point), point
    assert space.script(module, point) == default_scripts(module, kernel)[0]


@pytest.mark.parametrize(
    "case,fixed",
    [
        (("linear", 4, 32, 48, False), {"micro": "dot"}),
        (("matmul", 37, 64, 40, False), {"tail": "rows"}),
        (("matmul", 37, 131, 20, False), {"tail": "both"}),
    ],
)
def test_dot_and_remainder_points_preserve_results(case, fixed):
    """Points of the space with the dot kernel or the remainder tiles (not only the
    default one) render scripts that apply and give the unscheduled kernel's result."""
    module, kernel = _gemm_module(*case)
    expected = run_c(module)[-1]
    space = space_for(module, kernel)
    assert all(value in space.knobs[key] for key, value in fixed.items()), space.knobs
    rng = random.Random(5)
    points = []
    while len(points) < 3:
        point = {**space.sample(rng), **fixed}
        if consistent(space, point) and point not in points:
            points.append(point)
    for point in points:
        scheduled, _ = _gemm_module(*case)
        script = space.script(scheduled, point)
        assert (" dot" in script) == (fixed.get("micro") == "dot"), script
        apply_script(scheduled, script)
        scheduled.verify()
        np.testing.assert_allclose(
            run_c(scheduled)[-1], expected, rtol=1e-4, atol=1e-4, err_msg=f"{point}\n{script}"
        )


def test_points_logged_before_a_knob_existed_still_work():
    """A point from an older log (no `micro` / `tail` knob) means the gemm without
    remainder tiles: it renders, mutates and has as many features as a new point."""
    module, kernel = _gemm_module("linear", 4, 32, 48, False)
    space = space_for(module, kernel)
    old = {key: value for key, value in space.default().items() if key not in ("micro", "tail")}
    old.update(mr=4, nr=16, mc=4, nc=32)
    assert "micro" in space.knobs and "micro" not in old
    assert " gemm" in space.script(module, old)
    assert len(space.features(old)) == len(space.features(space.default()))
    assert set(space.mutate(old, random.Random(0))) == set(space.knobs)


def test_outer_parallel_is_a_loop_of_two_or_more_iterations():
    """`par = outer` parallelizes the outermost blocked loop that has 2 or more
    iterations: a 256 x 256 gemm's column block (jc) is one block, a parallel loop of one
    iteration would run on one thread (single-threaded tuning cannot tell the two apart)."""
    from dlpc.dialects.loop import ForOp

    module, kernel = _gemm_module("matmul", 256, 256, 256, False)
    space = space_for(module, kernel)
    point = {**space.default(), "par": "outer", "nc": 256}
    script = space.script(module, point)
    assert "parallel " in script and f"parallel {kernel}/i1c" not in script, script
    apply_script(module, script)
    trips = [
        op.trip_count for op in module.walk() if isinstance(op, ForOp) and op.parallel is not None
    ]
    assert trips and min(trips) >= 2, trips


def _example_loop(name: str):
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    module = load(os.path.join(root, "examples", f"{name}.dlpc"), batch=1).module
    lower(module, "loop", PipelineOptions(opt_level=2))
    return module


@pytest.mark.parametrize("example", ["resnet", "mobilenet", "lenet"])
def test_the_default_conv_schedule_is_a_point_of_the_space(example):
    """Every conv the register-tiled direct conv applies to (stride 1 and 2, 1x1, the
    stem, depthwise, NHWC) has the `tile` knob, and the space's default point renders
    exactly the default schedule's script: a tuner starts from the default and can keep
    it, so a tuned conv is never a template the default has outgrown. A conv point
    logged before the knob existed still renders the plain reduction template."""
    from dlpc.passes.schedule.default import default_scripts

    module = _example_loop(example)
    convs = [
        k.sym
        for k in kernels(module)
        if k.sym.startswith("conv2d") and not k.sym.endswith("_weight_hwio")
    ]
    assert convs
    for name in convs:
        space = space_for(module, name)
        assert space is not None and "tile" in space.knobs, name
        point = space.default()
        assert all(point[key] in values for key, values in space.knobs.items()), point
        assert space.script(module, point) == default_scripts(module, name)[0], name
        old = {key: value for key, value in point.items() if key != "tile"}
        assert space.script(module, old) == space.script(module, {**point, "tile": False})
        assert len(space.features(old)) == len(space.features(point))


def test_a_tile_point_preserves_results():
    """The tiled conv rendered through the space applies and matches the unscheduled
    kernels (resnet, every conv tiled)."""
    reference = run_c(_example_loop("resnet"))[-1]
    module = _example_loop("resnet")
    tiled = 0
    for k in list(kernels(module)):
        space = space_for(module, k.sym)
        if space is not None and "tile" in space.knobs:
            apply_script(module, space.script(module, {**space.default(), "tile": True}))
            tiled += 1
    assert tiled == 6  # the five 3x3 convs and the 1x1 stride-2 shortcut
    module.verify()
    np.testing.assert_allclose(run_c(module)[-1], reference, rtol=1e-4, atol=1e-5)
