"""bench/opencl_gpu.py's device-tensor column (issue 33) on the CPU OpenCL platform:
printed beside the whole call, its output checked against the reference on its own (a
wrong device output fails the run while the whole call passes), its conditions
reported (copies through the function's buffers, host transfers while timed) and its
plans the whole call's."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

ROOT = Path(__file__).resolve().parents[2]
ARGV = ["--device", "none", "--dry-run", "--models", "mlp", "--batches", "1"]


def _bench():
    spec = importlib.util.spec_from_file_location("opencl_gpu", ROOT / "bench" / "opencl_gpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _row(out: str) -> list[str]:
    (line,) = [x for x in out.splitlines() if x.startswith("| mlp | 1 | ")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_device_column_dry_run(capsys, tmp_path):
    """Both dlpc columns timed and within the tolerance, the device column's kernels
    bound to the tensors' buffers with no host transfer while timed (no note), its
    figures in `--kernels`' file."""
    assert _bench().main([*ARGV, "--kernels", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| dlpc whole call | dlpc device tensors | torch | whole / torch | device / torch" in out
    row = _row(out)
    assert all(re.fullmatch(r"\d+\.\d{3}", c) for c in row[2:4]), row
    assert row[4:7] == ["n/a"] * 3 and row[9] == "n/a"
    assert float(row[7]) <= 1e-6 and float(row[8]) <= 1e-6
    assert "note:" not in out
    text = (tmp_path / "mlp-b1.txt").read_text()
    assert f"whole call {row[2]}\ndevice tensors {row[3]}\ntorch n/a\n" in text


def test_device_column_wrong_output_fails(capsys, monkeypatch):
    """A device call computing on other inputs (ones, uploaded inside the timed call):
    exit 1 naming the device column alone, and the upload reported."""
    from dlpc.runtime import device_call
    from dlpc.runtime.tensor import TensorView

    run = device_call.DeviceCall._run_opencl

    def wrong(self, inputs, cls):
        ones = [TensorView.from_numpy(np.ones(t.shape, t.dtype), t.device) for t in inputs]
        return run(self, ones, cls)

    monkeypatch.setattr(device_call.DeviceCall, "_run_opencl", wrong)
    assert _bench().main(ARGV) == 1
    captured = capsys.readouterr()
    errors = [x for x in captured.err.splitlines() if "error:" in x]
    assert len(errors) == 1 and "mlp batch 1: device tensors: error " in errors[0], errors
    row = _row(captured.out)
    assert float(row[7]) <= 1e-6 and float(row[8]) > 1e-3
    assert "note: mlp batch 1: device tensors: host transfers while timed: to_device " in (
        captured.out
    )


def test_device_column_reports_copies(capsys, monkeypatch):
    """Kernels not bound to the tensors' buffers (`device_call.BIND` off): the row still
    checked (exit 0), and a note says why."""
    from dlpc.runtime import device_call

    monkeypatch.setattr(device_call, "BIND", False)
    assert _bench().main(ARGV) == 0
    out = capsys.readouterr().out
    assert "note: mlp batch 1: device tensors: runtime/device_call.BIND is False" in out


def test_device_column_other_plans_fail(capsys, monkeypatch):
    """A device model of other plans than the whole call's (the columns would time
    different programs): exit 1."""
    bench = _bench()
    place = bench.place_like
    monkeypatch.setattr(bench, "place_like", lambda m, c, profile: place(m, c, "cpu"))
    assert bench.main(ARGV) == 1
    assert "mlp batch 1: device tensors: plans ('cpu', 'gpu')" in capsys.readouterr().err


def test_copies_through_names_the_reason():
    """Why a device call copies through the function's buffers, from what
    `runtime/device_call.py` checks: an input read transposed, host control flow, an
    argument left in the function's own buffer; None when every one was bound."""
    from types import SimpleNamespace as NS

    copies_through = _bench().copies_through
    own = [object() for _ in range(3)]
    fn = NS(bound_args=[], team_devices=None, svm_args={}, steps=[], param_copies={})
    fn.arg_buffers = own
    call = NS(fn=fn, bindable=True, args=[0, 2], bound={0: object(), 2: object()})
    placed = NS(_call=call)
    assert copies_through(placed) is None
    call.bound[2] = own[2]
    assert copies_through(placed) == "arguments [2] at offsets the device cannot start a buffer at"
    call.bindable = False
    fn.param_copies = {0: []}
    assert copies_through(placed) == "not bindable: an input read from a transposed copy"
    fn.param_copies, fn.steps = {}, [("if",)]
    assert copies_through(placed) == "not bindable: host control flow"


def test_place_like_takes_the_whole_calls_device():
    """The device column runs on the OpenCL device of the whole call, whichever that is:
    under the CPU plans at batch 1 PoCL's serial driver (`choose_device`), not the
    default (parallel) one; its program is the whole call's."""
    import dlpc
    from dlpc.backends.runtime import opencl_rt

    bench = _bench()
    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=1)
    for profile in ("gpu", "cpu"):
        compiled = dlpc.compile(model, target="opencl", profile=profile)
        placed = bench.place_like(model, compiled, profile)
        assert placed.device.backend.cl_device == compiled.artifact.device
        assert placed.artifact.plans == profile and placed.source == compiled.source
    if opencl_rt.serial_device() is not None:  # (PoCL: both drivers)
        assert compiled.artifact.device == opencl_rt.serial_device()
        assert placed.device.backend.cl_device != opencl_rt.default_device()
