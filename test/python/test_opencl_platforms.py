"""Which OpenCL platform a process runs on (`opencl_rt.platforms`, `_choose_platform`,
`_icd_vendors`): PoCL first, a platform that cannot build a program skipped (PoCL 3.0's
LLVM 14 on a CPU it does not know: "unknown target CPU 'generic'"), Intel's CPU runtime
from its wheel made visible to the ICD loader, and one-line errors when nothing is left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.runtime import opencl_rt  # noqa: E402
from dlpc.diagnostics import DlpcError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class FakePlatform:
    def __init__(self, name: str, devices=("cpu",)):
        self.name = name
        self._devices = list(devices)

    def get_devices(self):
        return self._devices


def test_the_chosen_platform_builds_and_runs_a_program():
    """Whatever this machine is, the chosen platform builds (`_builds` says None for it)
    and a model runs on it with the reference's results."""
    import dlpc

    device = opencl_rt.devices()[0]
    assert opencl_rt._builds(device.platform) is None
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_pocl_comes_first(monkeypatch):
    """`platforms()` lists PoCL before the others, whatever order the loader gives."""

    class FakeCL:
        Error = RuntimeError

        @staticmethod
        def get_platforms():
            return [FakePlatform("Intel(R) OpenCL"), FakePlatform("Portable Computing Language")]

    monkeypatch.setattr(opencl_rt, "_cl", lambda: FakeCL)
    monkeypatch.setattr(opencl_rt, "_icd_vendors", lambda: None)
    assert [p.name for p in opencl_rt.platforms()] == [
        "Portable Computing Language",
        "Intel(R) OpenCL",
    ]


def test_a_platform_that_cannot_build_is_skipped(monkeypatch):
    pocl, intel = FakePlatform("Portable Computing Language"), FakePlatform("Intel(R) OpenCL")
    why = {pocl.name: "error: unknown target CPU 'generic'", intel.name: None}
    monkeypatch.setattr(opencl_rt, "_builds", lambda p: why[p.name])
    monkeypatch.delenv("DLPC_OPENCL_PLATFORM", raising=False)
    assert opencl_rt._choose_platform([pocl, intel]) is intel
    why[pocl.name] = None
    assert opencl_rt._choose_platform([pocl, intel]) is pocl
    # a platform without devices is passed over without a build
    empty = FakePlatform("Portable Computing Language", devices=())
    assert opencl_rt._choose_platform([empty, intel]) is intel


def test_no_platform_that_builds_is_one_line_naming_each(monkeypatch):
    pocl, intel = FakePlatform("Portable Computing Language"), FakePlatform("Intel(R) OpenCL")
    why = {pocl.name: "error: unknown target CPU 'generic'", intel.name: "error: no licence"}
    monkeypatch.setattr(opencl_rt, "_builds", lambda p: why[p.name])
    monkeypatch.delenv("DLPC_OPENCL_PLATFORM", raising=False)
    with pytest.raises(DlpcError) as e:
        opencl_rt._choose_platform([pocl, intel])
    text = str(e.value)
    assert "\n" not in text and text.startswith("error: no OpenCL platform builds programs")
    assert "Portable Computing Language: error: unknown target CPU 'generic'" in text
    assert "Intel(R) OpenCL: error: no licence" in text
    assert "pip install -e '.[opencl]'" in text


def test_the_platform_named_by_the_user_is_the_only_candidate(monkeypatch):
    pocl, intel = FakePlatform("Portable Computing Language"), FakePlatform("Intel(R) OpenCL")
    monkeypatch.setattr(opencl_rt, "_builds", lambda p: None)
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "intel")
    assert opencl_rt._choose_platform([pocl, intel]) is intel
    monkeypatch.setenv("DLPC_OPENCL_PLATFORM", "nvidia")
    with pytest.raises(DlpcError, match=r"no OpenCL platform named like.*'nvidia'.*Intel"):
        opencl_rt._choose_platform([pocl, intel])


def test_a_failed_probe_build_is_its_error_line():
    """`_builds` on a real platform with a program that cannot build: the first error
    line of the log, not a traceback."""
    platform = opencl_rt.devices()[0].platform
    saved = opencl_rt._PROBE
    try:
        opencl_rt._PROBE = "__kernel void broken(__global float *a) { a[0] = undeclared; }"
        why = opencl_rt._builds(platform)
    finally:
        opencl_rt._PROBE = saved
    assert why is not None and "\n" not in why and "undeclared" in why


def test_wheel_drivers_are_handed_to_the_loader(tmp_path, monkeypatch):
    """A wheel's driver gets an `.icd` file naming its library in dlpc's vendors
    directory, beside copies of the system's; stale files go; a user's
    `OCL_ICD_VENDORS` is left alone."""
    library = tmp_path / "lib" / "libintelocl.so"
    library.parent.mkdir()
    library.write_bytes(b"")
    system = tmp_path / "etc"
    system.mkdir()
    (system / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    monkeypatch.setattr(opencl_rt, "_wheel_icds", lambda: [library])
    monkeypatch.setattr(opencl_rt, "SYSTEM_VENDORS", system)
    monkeypatch.setattr(opencl_rt, "_VENDORS", None)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    stale = tmp_path / "tmp" / f"dlpc-opencl-vendors-{os.getuid()}" / "old.icd"
    stale.parent.mkdir()
    stale.write_text("gone\n")
    before = os.environ.get("OCL_ICD_VENDORS")
    # (set, then deleted: monkeypatch restores only what it recorded, and `_icd_vendors`
    # sets the variable itself)
    monkeypatch.setenv("OCL_ICD_VENDORS", "")
    monkeypatch.delenv("OCL_ICD_VENDORS")
    opencl_rt._icd_vendors()
    directory = Path(os.environ["OCL_ICD_VENDORS"])
    assert directory == stale.parent
    files = {p.name: p.read_text() for p in directory.glob("*.icd")}
    assert files == {
        "dlpc-wheel-0.icd": f"{library}\n",
        "system-nvidia.icd": "libnvidia-opencl.so.1\n",
    }
    monkeypatch.setenv("OCL_ICD_VENDORS", "/the/users/own")
    opencl_rt._icd_vendors()
    assert os.environ["OCL_ICD_VENDORS"] == "/the/users/own"
    monkeypatch.undo()
    assert os.environ.get("OCL_ICD_VENDORS") == before


def test_the_installed_runtime_wheel_is_found():
    """With the opencl extra on x86-64 Linux, Intel's runtime is installed and its
    library found (`_wheel_icds`), and the platforms listed include both."""
    import importlib.util
    import platform

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("intel-opencl-rt is installed on x86-64 Linux only")
    assert importlib.util.find_spec("pyopencl") is not None
    icds = opencl_rt._wheel_icds()
    assert len(icds) == 1 and icds[0].name.startswith("libintelocl.so") and icds[0].is_file()
    script = (
        "from dlpc.backends.runtime import opencl_rt as r; import os;"
        "print('|'.join(p.name for p in r.platforms()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_VENDORS"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    names = out.stdout.strip().split("|")
    assert names[0] == "Portable Computing Language" and "Intel(R) OpenCL" in names


def test_no_platform_named_like_the_users_is_a_cli_error(tmp_path):
    env = {**os.environ, "DLPC_OPENCL_PLATFORM": "no-such-platform"}
    out = subprocess.run(
        [sys.executable, "-m", "dlpc.tools.dlpc_run", str(ROOT / "examples" / "mlp.dlpc")]
        + ["--target", "opencl"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "no OpenCL platform named like DLPC_OPENCL_PLATFORM='no-such-platform'" in lines[0]
    assert "Traceback" not in out.stderr


class FakeDevice:
    def __init__(self, units: int, split=None, platform="Intel(R) OpenCL"):
        self.type = 2  # CL_DEVICE_TYPE_CPU
        self.max_compute_units = units
        self.split = split
        self.platform = FakePlatform(platform)

    def create_sub_devices(self, properties):
        if self.split is None:
            import pyopencl as cl

            raise cl.LogicError("create_sub_devices", 0, "not supported")
        return self.split


def test_a_parallel_only_cpu_device_gets_serial_sub_devices(monkeypatch):
    """Intel's runtime has no driver like PoCL's basic: its CPU device is split into
    one-unit sub-devices (`_serial_subdevices`), listed after it, which `serial_device`
    and `team_devices` find; not when a serial device exists, on PoCL, when splitting
    fails, or with DLPC_OPENCL_SUBDEVICES=0."""
    monkeypatch.delenv("DLPC_OPENCL_SUBDEVICES", raising=False)
    subs = [FakeDevice(1), FakeDevice(1)]
    parent = FakeDevice(2, split=subs)
    assert opencl_rt._serial_subdevices([parent]) == subs
    assert opencl_rt._serial_subdevices([parent, FakeDevice(1)]) == []
    assert opencl_rt._serial_subdevices([FakeDevice(2)]) == []
    # PoCL's pthread driver alone (the user's POCL_DEVICES) is left as it is
    pthread = FakeDevice(2, split=subs, platform="Portable Computing Language")
    assert opencl_rt._serial_subdevices([pthread]) == []
    monkeypatch.setenv("DLPC_OPENCL_SUBDEVICES", "0")
    assert opencl_rt._serial_subdevices([parent]) == []


def test_this_machines_devices_have_a_serial_one():
    """Whatever the platform, a process has a serial CPU device beside the parallel one
    (PoCL's basic driver, or a sub-device of Intel's), so small models run as one
    launch a call (a chain)."""
    import dlpc

    found = opencl_rt.devices()
    if not any(opencl_rt._cpu(d) for d in found):
        pytest.skip("the OpenCL platform has no CPU device")
    assert opencl_rt.serial_device() is not None
    model = dlpc.load(ROOT / "examples" / "transformer.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    assert compiled.artifact.device == opencl_rt.serial_device()
    assert compiled.artifact.num_launches == 1
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_on_sub_devices_the_parallel_device_takes_one_launch_calls(monkeypatch):
    """Where the serial devices are sub-devices (Intel's runtime: cheap hand-offs) a
    model takes the parallel device when its call there is one launch
    (`parallel_launches`: kernels split by images into one chain), else a serial one
    (teams off here, DLPC_OPENCL_TEAM=0); results match the reference either way.
    Teams are of sub-devices whose queues run commands in the waiting thread
    (`_queue_flags`), or of any with DLPC_OPENCL_TEAM=1."""
    import dlpc
    from dlpc.backends.runtime.opencl_rt import _subdevice

    serial = opencl_rt.serial_device()
    if serial is None or not _subdevice(serial):
        pytest.skip("the serial devices here are not sub-devices (PoCL's basic driver)")
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "0")
    assert opencl_rt.team_devices() is None
    parallel = opencl_rt.default_device()
    for name, batch, launches in (("lenet", 4, 1), ("resnet", 32, 1), ("resnet", 1, 8)):
        model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
        compiled = dlpc.compile(model, target="opencl")
        assert opencl_rt.parallel_launches(compiled.lowered, parallel) == launches
        expected = parallel if launches == 1 else serial
        assert compiled.artifact.device == expected and compiled.artifact.team is None
        inputs = dlpc.api.random_inputs(model)
        (out,) = compiled(*inputs)
        (ref,) = dlpc.api.reference(model, inputs)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    monkeypatch.setenv("DLPC_OPENCL_TEAM", "1")
    assert opencl_rt.team_devices() == opencl_rt.serial_devices()[:2]
    monkeypatch.delenv("DLPC_OPENCL_TEAM")
    local = all(opencl_rt._queue_flags(d) for d in opencl_rt.serial_devices()[:2])
    assert (opencl_rt.team_devices() is not None) == local


class FakeQueueDevice:
    def __init__(self, units: int, parent, extensions: str):
        self.max_compute_units = units
        self.parent_device = parent
        self.extensions = extensions


def test_serial_sub_devices_run_commands_in_the_waiting_thread():
    """A one-unit sub-device of a runtime with `cl_intel_exec_by_local_thread` gets the
    queue property that runs its commands in the thread that waits for them
    (`_queue_flags`); a root device, a parallel one or a runtime without the
    extension gets none; on this machine a model on such a queue matches the
    reference."""
    import dlpc

    ext = "cl_khr_fp64 cl_intel_exec_by_local_thread"
    flag = opencl_rt.CL_QUEUE_THREAD_LOCAL_EXEC_ENABLE_INTEL
    assert opencl_rt._queue_flags(FakeQueueDevice(1, object(), ext)) == flag
    assert opencl_rt._queue_flags(FakeQueueDevice(1, None, ext)) == 0
    assert opencl_rt._queue_flags(FakeQueueDevice(2, object(), ext)) == 0
    assert opencl_rt._queue_flags(FakeQueueDevice(1, object(), "cl_khr_fp64")) == 0
    serial = opencl_rt.serial_device()
    if serial is None or not opencl_rt._queue_flags(serial):
        pytest.skip("no serial sub-device with cl_intel_exec_by_local_thread here")
    # (the runtime does not echo the vendor flag in CL_QUEUE_PROPERTIES: the queue is
    # the serial device's, made with `_queue_flags`)
    model = dlpc.load(ROOT / "examples" / "lenet.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    assert compiled.artifact.device == serial
    assert compiled.artifact.queue is opencl_rt.context(serial)[1]
    for _ in range(3):
        inputs = dlpc.api.random_inputs(model)
        (out,) = compiled(*inputs)
        (ref,) = dlpc.api.reference(model, inputs)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_a_compiled_opencl_model_calls_its_runtime_directly():
    """`dlpc.compile(..., target="opencl")` hands arrays of the right shape and dtype
    straight to the runtime (as the C target does: `CompiledModel._direct`), and anything
    else through the checks: a wrong shape is still one line naming the input."""
    import dlpc

    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    compiled = dlpc.compile(model, target="opencl")
    assert compiled._direct is compiled.artifact
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    (again,) = compiled(np.asfortranarray(inputs[0]))  # (not as it is: converted)
    np.testing.assert_array_equal(again, out)
    with pytest.raises(DlpcError, match="shape") as e:
        compiled(inputs[0][:, :-1])
    assert "\n" not in str(e.value)
