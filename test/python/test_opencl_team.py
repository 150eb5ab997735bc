"""Teams of two serial OpenCL devices (PoCL basic twice, `opencl_rt.Team`): which models
get one, that every call computes what numpy does however the work is shared (the
caller's launch alone, the helper's alone, both), and the helper's protocol words
(`backends.opencl.TEAM_*`). No test here depends on timing: the helper's share of a
call depends on the scheduler, so the tests that need a given share drive the launches
by hand."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from test_opencl import _chained_kernel  # noqa: E402

from dlpc.backends import opencl  # noqa: E402
from dlpc.backends.runtime import opencl_rt  # noqa: E402
from dlpc.dialects.loop import KernelOp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

MAIN = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>)
    attributes {dlpc.num_inputs = 1 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64} {
  %a = memref.alloc() : memref<64xf32>
  %b = memref.alloc() : memref<64xf32>
  KERNEL(neg_0, x, a, negf)
  KERNEL(neg_1, a, b, negf)
  COPY
  KERNEL(twice_2, b, a, twice)
  KERNEL(twice_3, a, y, twice)
  memref.dealloc %a : memref<64xf32>
  memref.dealloc %b : memref<64xf32>
  func.return
}
"""


def _kernel(match) -> str:
    return _chained_kernel(match, 64)


def _module(copy: bool):
    text = re.sub(r"KERNEL\(([^)]*)\)", _kernel, MAIN)
    line = '"memref.copy"(%b, %a) : (memref<64xf32>, memref<64xf32>) -> ()' if copy else ""
    return pipeline.parse_module(text.replace("COPY", line))


@pytest.fixture
def team(monkeypatch):
    # (teams on sub-devices too: Intel's runtime offers no basic driver, and the
    # protocol is the same there; `team_devices`)
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "1")
    devices = opencl_rt.team_devices()
    if devices is None:
        pytest.skip("the OpenCL platform has no two serial CPU devices (PoCL basic)")
    return devices


def _stop(f) -> None:
    """End the helper thread of `f`'s team (its launch returns after its spin reads)."""
    f.team.stop()
    f.team.thread.join(timeout=10)
    assert not f.team.thread.is_alive()


def _emulate_start(f, call_id: int) -> None:
    """What the caller's launch does first (`OpenCLEmitter.team_chain`): every member's
    counters to (id << 32) + 0, then the id published as started."""
    sync = f.team_sync
    members = len(f.chains[0].kernels)
    sync[opencl.TEAM_COUNTERS : opencl.TEAM_COUNTERS + 2 * members] = call_id << 32
    sync[opencl.TEAM_STARTED] = call_id


def test_a_call_without_copies_is_one_team_chain_and_computes_what_numpy_does(team):
    """A call that is only kernels is one team chain of all of them (`team_run`), one
    launch a call on the first device; with a `memref.copy` between kernels there is no
    team (the model gets one device). Results over many calls: 4 x."""
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    f = opencl_rt.OpenCLFunction(_module(copy=False), name="team", team=team)
    assert f.team is not None and f.team_devices == team and f.device == team[0]
    assert [c.team for c in f.chains] == [2] and f.num_launches == 1
    assert [c.kernels for c in f.chains] == [f.kernel_ops]
    assert f.source.count("team chain of kernels") == 1
    assert "cl_khr_int64_base_atomics" in f.source
    for k in range(20):
        np.testing.assert_array_equal(f(x + k)[0], 4 * (x + k))
    g = opencl_rt.OpenCLFunction(_module(copy=True), name="copied", team=team)
    assert g.team is None and g.team_devices is None
    np.testing.assert_array_equal(g(x)[0], 4 * x)


def test_the_choice_of_a_team_follows_the_estimate(team, monkeypatch):
    """A model estimated at TEAM_SECONDS to TEAM_MAX_SECONDS of one core gets a team
    (resnet at batch 1); below it one serial device (mlp at batch 1), above it the
    parallel device (resnet at batch 32); DLPC_OPENCL_TEAM=0 turns teams off."""
    from dlpc.backends.runtime.profile import kernel_costs

    for name, batch, expected in (("resnet", 1, True), ("mlp", 1, False), ("resnet", 32, False)):
        model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
        compiled = dlpc.compile(model, target="opencl")
        estimate = opencl_rt.estimate_seconds(kernel_costs(compiled.lowered))
        within = opencl_rt.TEAM_SECONDS <= estimate <= opencl_rt.TEAM_MAX_SECONDS
        assert within == expected
        assert (compiled.artifact.team is not None) == expected
        if not expected:
            assert compiled.artifact.device == opencl_rt.choose_device(compiled.lowered)
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "0")
    assert opencl_rt.team_devices() is None
    model = dlpc.load(ROOT / "examples" / "resnet.dlpc", batch=1)
    assert dlpc.compile(model, target="opencl").artifact.team is None


@pytest.mark.parametrize(("name", "batch"), [("resnet", 1), ("mobilenet", 1), ("lenet", 4)])
def test_team_models_match_the_reference_on_every_call(team, name, batch):
    """Examples on a team, called repeatedly with new inputs and every result kept (more
    than the SVM output pool: the output array changes, the helper's arguments are
    rebound through the argument version), each result against the numpy reference."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    compiled = dlpc.compile(model, target="opencl")
    assert compiled.artifact.team is not None and compiled.artifact.num_launches == 1
    rng = np.random.default_rng(0)
    calls = []
    for _ in range(opencl_rt.SVM_POOL + 3):
        inputs = [
            rng.standard_normal(a.shape).astype(a.dtype) for a in dlpc.api.random_inputs(model)
        ]
        calls.append((inputs, compiled(*inputs)))
    for inputs, outputs in calls:
        for out, ref in zip(outputs, dlpc.api.reference(model, inputs)):
            tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=tol)


@pytest.mark.parametrize(("name", "batch", "images"), [("mobilenet", 1, False), ("lenet", 4, True)])
def test_a_call_run_wholly_by_the_helper(team, name, batch, images):
    """The helper's launch alone runs a started call to the end: with the caller's start
    done by hand (counters, started id) and no caller's launch, the outputs are the
    reference's, every chunk was the helper's (TEAM_HELPED), and after its spin reads
    it returns TEAM_IDLE. By each member's work-items (mobilenet at batch 1) and by
    ranges of images through every member (lenet at batch 4: `batch_split`)."""
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    compiled = dlpc.compile(model, target="opencl")
    f = compiled.artifact
    assert f.team is not None
    (chain,) = f.chains
    assert (chain.parts > 1) == images
    if images:  # (one chunk a range of images)
        assert chain.chunks == (chain.parts,)
    _stop(f)
    inputs = dlpc.api.random_inputs(model)
    arrays = f._convert(inputs, 0)
    f._upload(f.queue, f.bound_params, f.num_inputs, blocking=True)
    f._upload(f.queue, arrays, 0)
    helped = int(f.team_sync[opencl.TEAM_HELPED])
    _emulate_start(f, 41)
    assert opencl_rt._launch_one(f.team.queue.int_ptr, f.team.kernel.int_ptr) == 0
    assert int(f.team_sync[opencl.TEAM_RESULT]) == opencl.TEAM_IDLE
    chunks = chain.chunks
    assert len(chunks) == (1 if images else len(chain.kernels))
    assert all(0 < c <= opencl.TEAM_CHUNKS for c in chunks)
    assert int(f.team_sync[opencl.TEAM_HELPED]) - helped == sum(chunks)
    first_output = f.num_inputs + len(f.param_names)
    (ref,) = dlpc.api.reference(model, inputs)
    out = f.svm_args[first_output]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_a_stale_helper_leaves_the_call_alone_and_the_caller_runs_it(team):
    """A helper armed with an older argument version than the host's returns
    TEAM_STALE before taking any work; the caller's launch (no helper: its thread
    stopped) then runs the whole call, and it is right."""
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    f = opencl_rt.OpenCLFunction(_module(copy=False), name="stale", team=team)
    np.testing.assert_array_equal(f(x)[0], 4 * x)
    _stop(f)
    f.team_sync[opencl.TEAM_VERSION] = 12345  # (the helper's kernel has version 0)
    helped = int(f.team_sync[opencl.TEAM_HELPED])
    _emulate_start(f, int(f.team_sync[opencl.TEAM_STARTED]) + 1)
    assert opencl_rt._launch_one(f.team.queue.int_ptr, f.team.kernel.int_ptr) == 0
    assert int(f.team_sync[opencl.TEAM_RESULT]) == opencl.TEAM_STALE
    assert int(f.team_sync[opencl.TEAM_HELPED]) == helped
    f.team.next_id = int(f.team_sync[opencl.TEAM_STARTED]) + 1
    for k in range(5):  # the caller alone
        np.testing.assert_array_equal(f(x - k)[0], 4 * (x - k))
    assert int(f.team_sync[opencl.TEAM_HELPED]) == helped


def test_profile_times_each_kernel_of_a_team_model(team):
    """The profile launches every member on its own (one device, profiling events)."""
    model = dlpc.load(ROOT / "examples" / "mobilenet.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    f = compiled.artifact
    assert f.team is not None
    seconds, call = f.profile_kernels(dlpc.api.random_inputs(model), repeat=2, warmup=1)
    kernels = [k for k in compiled.lowered.walk() if isinstance(k, KernelOp)]
    assert len(seconds) == len(f.kernel_ops) == len(kernels) and all(t > 0 for t in seconds)
    assert call > 0


def test_a_collected_team_model_ends_its_helper_before_its_buffers_go(team):
    """At its collection a team model's helper is stopped and joined (`Team.close`): its
    armed launch must not outlive the buffers (on Intel's runtime the launch runs on a
    worker thread, and freeing the buffers under it crashed the process); a model
    compiled after it runs."""
    import gc

    x = np.linspace(-3, 3, 64, dtype=np.float32)
    f = opencl_rt.OpenCLFunction(_module(copy=False), name="collected", team=team)
    for k in range(3):
        np.testing.assert_array_equal(f(x + k)[0], 4 * (x + k))
    thread = f.team.thread
    del f
    gc.collect()
    assert not thread.is_alive()
    g = opencl_rt.OpenCLFunction(_module(copy=False), name="after", team=team)
    np.testing.assert_array_equal(g(x)[0], 4 * x)
    _stop(g)
