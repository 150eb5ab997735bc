"""The DLP target at its roofline (issue 32): every convolution on the conv intrinsic,
weights laid out at compile time, no activation transposes, each checked against the
numpy reference on the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import dlpc

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
