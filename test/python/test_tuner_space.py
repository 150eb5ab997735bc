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
    model = load("examples/lenet.dlpc")
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
