"""graph-winograd under OpenCL's GPU launch plans: `dlpc.compile` resolves the plans
before lowering and no conv pays there (the plans have no Winograd kernel; on an H200
resnet at batch 32 took 1743 ms with the fused chains on one work-item each, issue 33),
while the CPU plans keep their rule and `where=all` still forces the rewrite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def resnet():
    return dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=1)


def _kernel_names(compiled) -> list[str]:
    return [launch.name for launch in compiled.artifact.plan.launches.values()]


def test_gpu_plans_take_no_winograd(resnet):
    """profile="gpu": every 3x3 conv stays direct (a kernel per conv, none a Winograd
    transform) and the result is the reference's."""
    compiled = dlpc.compile(resnet, target="opencl", profile="gpu")
    names = _kernel_names(compiled)
    assert names and not any("winograd" in n for n in names), names
    assert sum("conv2d" in n for n in names) == 6  # (stem, 4 in the blocks, 1x1 shortcut)
    inputs = dlpc.api.random_inputs(resnet)
    (out,), (ref,) = compiled(*inputs), dlpc.api.reference(resnet, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_cpu_plans_keep_their_rule(resnet):
    """profile="cpu" on the same device: the OpenCL rule's convs are Winograd chains."""
    names = _kernel_names(dlpc.compile(resnet, target="opencl", profile="cpu"))
    assert any("winograd" in n for n in names), names


def test_environment_chooses_before_lowering(resnet, monkeypatch):
    """DLPC_OPENCL_PROFILE=gpu is resolved before lowering too (not only the launches)."""
    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "gpu")
    names = _kernel_names(dlpc.compile(resnet, target="opencl"))
    assert not any("winograd" in n for n in names), names


def test_where_all_still_forces(resnet):
    """graph_winograd={"where": "all"} is the user's: the GPU plans run the chains."""
    compiled = dlpc.compile(resnet, target="opencl", profile="gpu", graph_winograd={"where": "all"})
    assert any("winograd" in n for n in _kernel_names(compiled))


def test_winograd_target_of_the_plans():
    gpu = pipeline.PipelineOptions(target="opencl", opencl_plans="gpu")
    cpu = pipeline.PipelineOptions(target="opencl")
    assert pipeline._winograd_target(gpu, "loop") == "opencl-gpu"
    assert pipeline._winograd_target(cpu, "loop") == "opencl"
    c = pipeline.PipelineOptions(target="c", opencl_plans="gpu")  # (the C target's own)
    assert pipeline._winograd_target(c, "loop") == "c"


def test_unknown_plans_are_refused():
    with pytest.raises(
        DlpcError, match="unknown OpenCL launch plans 'tpu' \\(expected cpu or gpu\\)"
    ):
        pipeline.PipelineOptions(target="opencl", opencl_plans="tpu")
    with pytest.raises(DlpcError, match="is no launch profile"):
        dlpc.compile(
            dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1), target="opencl", profile="tpu"
        )
