"""Outputs read into pinned host memory (`OpenCLFunction._pinned_output`), the path a
GPU device takes (`_pinned_outputs`: off the host's CPU), forced here on the CPU
platform without its SVM: every result is the reference's, and one a caller still holds is never
written by a later call; a dropped one's memory is reused; past the pool, plain arrays."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import dlpc

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.runtime import opencl_rt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def mlp(monkeypatch):
    monkeypatch.setattr(opencl_rt, "_pinned_outputs", lambda device: True)
    # (no fine-grained SVM, as on NVIDIA's platform: PoCL's would hold the output)
    monkeypatch.setattr(opencl_rt.OpenCLFunction, "_svm_arguments", lambda self, module: {})
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=3)
    compiled = dlpc.compile(model, target="opencl", profile="gpu")
    return model, compiled


def _inputs(model, seed):
    return dlpc.api.random_inputs(model, seed=seed)


def test_held_results_stay_and_dropped_ones_are_reused(mlp):
    model, compiled = mlp
    (k,) = compiled.artifact.pinned_pools  # (mlp: one output, in the pool)
    held = []
    for seed in range(opencl_rt.SVM_POOL + 2):  # (two past the pool: plain arrays)
        (out,) = compiled(*_inputs(model, seed))
        held.append(out)
    pool = compiled.artifact.pinned_pools[k]
    assert len(pool) == opencl_rt.SVM_POOL
    pinned = {_address(e[0]) for e in pool}
    assert [_address(a) in pinned for a in held] == [True] * opencl_rt.SVM_POOL + [False] * 2
    for seed, out in enumerate(held):  # (none overwritten by the calls after it)
        (ref,) = dlpc.api.reference(model, _inputs(model, seed))
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    kept = held[1][1:]  # (a view of a result holds it)
    del held, out
    gc.collect()
    (again,) = compiled(*_inputs(model, 7))
    assert _address(again) in pinned and not np.shares_memory(again, kept)
    (ref,) = dlpc.api.reference(model, _inputs(model, 1))
    np.testing.assert_allclose(kept, ref[1:], rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_not_on_the_cpu():
    """The host's CPU device reads into plain arrays: pinning buys nothing there."""
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl", profile="gpu")
    assert opencl_rt._cpu(compiled.artifact.device)
    assert compiled.artifact.pinned_pools == {}
