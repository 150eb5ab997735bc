"""Winograd F(2x2, 3x3) on the OpenCL target: graph-winograd's OpenCL rule
(passes/graph/winograd.py `pays_opencl`), the OpenCL target's pass for the chain
(`loop-opencl-winograd`: `fuse_chain`, the nests of a chain it does not fuse) and the
printer's fused kernel (backends/opencl_winograd.py `fused_source`), against the numpy reference
(rtol/atol 1e-4, as test_winograd.py: F(2x2, 3x3) reassociates the sums).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import dlpc  # noqa: E402
from dlpc import api  # noqa: E402
from dlpc.dialects.loop import KernelOp  # noqa: E402
from dlpc.passes.lower.opencl_winograd import is_fused  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-4


def _model(tmp_path, text: str, batch: int):
    path = tmp_path / "wconv.dlpc"
    path.write_text(text)
    return dlpc.load(str(path), batch=batch)


def _check(model, where: str = "pays"):
    """Compile `model` for OpenCL with graph-winograd's `where`, check every output
    against the reference (twice: the second call reuses the resident buffers) and
    return the compiled model."""
    xs = api.random_inputs(model)
    expected = api.reference(model, xs)
    compiled = dlpc.compile(model, target="opencl", graph_winograd={"where": where})
    for _ in range(2):
        for got, want in zip(compiled(*xs), expected):
            np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    return compiled


def _kernels(compiled) -> list[KernelOp]:
    return [k for k in compiled.artifact.kernel_ops]


def _conv_text(c: int, o: int, h: int, w: int, residual: bool, act: str = "relu") -> str:
    extra = f", r: f32[B, {o}, {h}, {w}]" if residual else ""
    body = "conv2d(x, k, b, padding=1)" + (" + r" if residual else "")
    body = f"{act}({body})" if act else body
    return f"""model wconv(x: f32[B, {c}, {h}, {w}]{extra}) {{
  param k: f32[{o}, {c}, 3, 3] = kaiming(seed=5)
  param b: f32[{o}] = normal(seed=6, std=0.1)
  return {body}
}}
"""


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_resnet_fused_on_opencl(batch):
    """resnet's stem and three stride-1 3x3 convs are graph-winograd's on OpenCL, each
    chain one fused kernel (no transform or matmul kernel left), the stride-2 conv and
    the 1x1 shortcut direct; outputs match the reference."""
    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=batch)
    compiled = _check(model)
    kernels = _kernels(compiled)
    fused = [k.sym for k in kernels if is_fused(k)]
    assert len(fused) == 4, fused
    origins = [k.origin.data for k in kernels if k.origin is not None]
    assert "graph.matmul" not in origins and "graph.winograd_input_transform" not in origins
    assert "kernel_conv2d_relu_3" in compiled.artifact.source  # (stride 2: direct)
    assert "fused Winograd F(2x2, 3x3)" in compiled.artifact.source


@pytest.mark.parametrize(
    "n, c, o, h, w",
    [
        (1, 16, 16, 32, 32),  # resnet's 16 -> 16: two float8 of tiles a row, 4 x 16 gemm
        (2, 32, 32, 16, 16),  # resnet's 32 -> 32: one float8 of tiles, 8 x 8 gemm
        (3, 5, 8, 6, 16),  # odd channels in, 3 tile rows, an odd batch
        (1, 8, 8, 4, 48),  # 24 tiles a row (3 float8s, 8 x 8 gemm blocks), 2 rows
    ],
)
@pytest.mark.parametrize("residual", [True, False])
def test_fused_conv_matches_reference(tmp_path, n, c, o, h, w, residual):
    """The fused kernel with and without a residual add (its first and last tiles read
    the padding: the row loads' neighbours `prev` and `next`, rows -1 and h)."""
    compiled = _check(_model(tmp_path, _conv_text(c, o, h, w, residual), n))
    kernels = _kernels(compiled)
    assert len(kernels) == 1 and is_fused(kernels[0])


@pytest.mark.parametrize("residual", [True, False])
def test_fused_without_relu_matches_reference(tmp_path, residual):
    """The fused kernel's other epilogues (a residual add alone, the bias alone), taken
    when forced (the rule wants a relu after them)."""
    model = _model(tmp_path, _conv_text(16, 16, 8, 16, residual, act=""), 2)
    kernels = _kernels(_check(model, where="all"))
    assert len(kernels) == 1 and is_fused(kernels[0])
    assert not any(is_fused(k) for k in _kernels(_check(model)))  # (the rule: direct)


@pytest.mark.parametrize(
    "n, c, o, h, w, act",
    [
        (2, 5, 7, 9, 11, "relu"),  # odd output: the three kernels (`winograd_nests`)
        (1, 16, 16, 32, 32, "sigmoid"),  # an epilogue the fused kernel does not write
        (3, 4, 12, 8, 16, "relu"),  # 12 output channels (no multiple of 8)
    ],
)
@pytest.mark.parametrize("residual", [True, False])
def test_unfused_chain_matches_reference(tmp_path, n, c, o, h, w, act, residual):
    """Chains the fused kernel does not take (forced with where=all: the OpenCL rule
    keeps them direct) run as their kernels in `winograd_nests`' shapes."""
    model = _model(tmp_path, _conv_text(c, o, h, w, residual, act), n)
    compiled = _check(model, where="all")
    kernels = _kernels(compiled)
    assert not any(is_fused(k) for k in kernels)
    assert any(k.origin is not None and k.origin.data == "graph.matmul" for k in kernels)
    direct = _check(model)  # the rule: direct
    assert not any(k.origin is not None and "winograd" in k.origin.data for k in _kernels(direct))


def test_fused_kernel_is_a_team_member():
    """resnet at batch 1 runs on a team when the machine offers one (two basic devices):
    the fused kernels are members of its chain (their body functions); the outputs match
    the reference on every call."""
    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=1)
    compiled = _check(model)
    source = compiled.artifact.source
    for k in _kernels(compiled):
        if is_fused(k):
            assert f"kernel_{k.sym}_body(" in source
    if compiled.artifact.team_devices:
        (chain,) = compiled.artifact.chains
        assert sum(is_fused(k) for k in chain.kernels) == 4


def test_fused_kernel_launched_alone():
    """Each kernel launched on its own (the profile's `kernel_steps`): the fused kernel's
    work-groups are one work-item (its 32 KB of private V and M per work-item; a
    work-group of many overflowed PoCL's stack at batch 32)."""
    from dlpc.backends.runtime.opencl_rt import opencl_profile

    model = dlpc.load(os.path.join(ROOT, "examples", "resnet.dlpc"), batch=32)
    compiled = _check(model)
    steps = [s for s in compiled.artifact.kernel_steps if "winograd" in s[-1]]
    assert len(steps) == 4 and all(s[3] == (1, 1) for s in steps)
    rows, _ = opencl_profile(compiled.artifact, compiled.lowered, api.random_inputs(model), 1)
    assert sum("winograd" in r.name for r in rows) == 4 and all(r.seconds > 0 for r in rows)
