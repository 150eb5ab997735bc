"""The GPU launch plans (`backends/opencl/gpu_launch.py`, `profile="gpu"`) checked on
the CPU OpenCL platform: every example at batch 1, 4 and 32 and at an odd batch against
the numpy reference, the plans' shapes (coalesced dimension 0, work-groups of 64-256,
rounded-up NDRanges guarded), and how the profile is chosen."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.passes import pipeline

pytest.importorskip("pyopencl", reason="the opencl extra is not installed")

from dlpc.backends.opencl import OpenCLEmitter  # noqa: E402
from dlpc.backends.opencl.gpu_launch import (  # noqa: E402
    MIN_GROUP_ITEMS,
    GpuProfile,
    group_shape,
)
from dlpc.backends.runtime.opencl_rt import compile_opencl, launch_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPENCL = pipeline.PipelineOptions(target="opencl")
EXAMPLES = ["mlp", "lenet", "resnet", "transformer", "mobilenet"]
H200 = GpuProfile(max_group=1024, units=132)


def _lowered(name: str, batch: int):
    model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
    return model, pipeline.lower(model.module.clone(), "loop", OPENCL)


def _check(model, f, runs: int = 2) -> None:
    weights = dlpc.api.check_weights(model)
    f.bind_params(weights)
    for seed in range(runs):  # (a second call: resident weights, reused buffers)
        inputs = dlpc.api.random_inputs(model, seed=seed)
        for out, ref in zip(f(*inputs), dlpc.api.reference(model, inputs)):
            np.testing.assert_allclose(
                out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max()))
            )


@pytest.mark.parametrize("batch", [1, 4, 32, 3])
@pytest.mark.parametrize("name", EXAMPLES)
def test_gpu_plan_matches_reference(name, batch):
    """Every example under the GPU profile on this (CPU) device, against the reference."""
    model, module = _lowered(name, batch)
    f = compile_opencl(module, name=name, profile="gpu")
    assert not f.chains and f.team_devices is None  # (a launch per kernel, one queue)
    _check(model, f)


@pytest.mark.parametrize("batch", [1, 32])
@pytest.mark.parametrize("name", EXAMPLES)
def test_gpu_plan_for_a_big_gpu_matches_reference(name, batch, monkeypatch):
    """The plans sized for an H200 (132 compute units), run on this device: the linears,
    layer norms, global pool (and convs at batch 1) with fewer outputs than it can hold
    busy split each sum over a work-group (`split_reduction`), partials meeting in `__local` memory."""
    from dlpc.backends.opencl import gpu_launch

    monkeypatch.setattr(gpu_launch.GpuProfile, "of_device", classmethod(lambda cls, device: H200))
    model, module = _lowered(name, batch)
    f = compile_opencl(module, name=name, profile="gpu")
    split = [launch for launch in f.plan.launches.values() if launch.split is not None]
    # (resnet: its global pool's rows and columns, a nest: `reduction_nest`)
    assert bool(split) == (name in ("mlp", "lenet", "transformer", "resnet"))
    _check(model, f, runs=1)


def test_gpu_plan_shapes():
    """The MLP's linears at batch 32: features on dimension 0 (coalesced stores, and the
    weight read transposed so its loads are too), the batch on dimension 1 in blocks of
    4 rows, groups of 64-256; the last linear's 10 features rounded up to whole groups
    and guarded."""
    _, module = _lowered("mlp", 32)
    emitter = OpenCLEmitter(module, gpu=GpuProfile(1024, 1))  # (1 unit: no split sums)
    source = emitter.emit()
    launches = {k.sym: launch for k, launch in emitter.launches.items()}
    first = launches["linear_relu_0"]
    assert [lp.loop_name for lp in first.mapped] == ["i1", "i0"]
    assert first.mapped[next(iter(first.mapped))] == "get_global_id(0)"
    # 4 batch rows a work-item (register blocking), each weight load shared by them
    assert {lp.loop_name: u for lp, u in first.lanes.items()} == {"i0": 4}
    assert first.global_size == (256, 8) and first.local_size is not None
    assert first.global_size[1] % first.local_size[1] == 0 and not first.bounds
    assert MIN_GROUP_ITEMS <= np.prod(first.local_size) <= 256
    assert [perm for perm in first.relayout.values()] == [(1, 0)]
    last = launches["linear_4"]
    assert last.global_size[0] % last.local_size[0] == 0 and last.global_size[0] > 10
    assert list(last.bounds.values()) == [10]
    assert "if (v_i1 < 10) {" in source
    body = source[source.index("kernel_linear_relu_0(") :]
    body = body[: body.index("\n}\n")]
    assert body.count("v_fc1_weight[") == 1 and body.count("v_x[") == 4


def test_gpu_plan_splits_short_sums_over_a_group():
    """The MLP at batch 1 on 132 units (256 outputs): each dot product over a work-group
    of 64, its work-items striding the reduction from their local id (coalesced), the
    partials combined in `__local` memory, work-item 0 writing the output."""
    from dlpc.backends.opencl.gpu_launch import SPLIT_ITEMS

    _, module = _lowered("mlp", 1)
    emitter = OpenCLEmitter(module, gpu=H200)
    source = emitter.emit()
    first = next(launch for k, launch in emitter.launches.items() if k.sym == "linear_relu_0")
    assert first.split is not None and first.split[2] == "arith.addf"
    assert first.global_size == (256 * SPLIT_ITEMS,) and first.local_size == (SPLIT_ITEMS,)
    assert not first.relayout  # (the group's loads run along k: no transposed copy)
    body = source[source.index("kernel_linear_relu_0(") :]
    body = body[: body.index("\n}\n")]
    assert f"__local float v_group_sums[{SPLIT_ITEMS}];" in body
    assert "v_r0 = (long)get_local_id(0); v_r0 < 784; v_r0 += 64)" in body
    assert body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2


def test_gpu_plan_splits_a_reduction_nest_where_outputs_are_fewest():
    """A global pool's rows and columns (resnet at batch 32, 1024 outputs of 256 terms on
    132 units) split as one flat index, its last loop fastest (coalesced reads); a nest
    (a conv's channels and window) only while the outputs are fewer than the units x
    `MIN_GROUP_ITEMS`: resnet's first 16 -> 16 convs at batch 1 (16384 outputs) keep a
    work-item per output, its stride-2 conv (8192) splits."""
    from dlpc.backends.opencl.gpu_launch import SPLIT_ITEMS, reduction_nest

    def launches(batch):
        _, module = _lowered("resnet", batch)
        emitter = OpenCLEmitter(module, gpu=H200)
        source = emitter.emit()
        return source, {k.sym: launch for k, launch in emitter.launches.items()}

    def outputs(launch) -> int:
        return math.prod(launch.global_size) // math.prod(launch.local_size or (1,))

    source, at32 = launches(32)
    (pool,) = [launch for k, launch in at32.items() if k.startswith("global_avg_pool")]
    assert pool.split is not None and pool.split[2] == "arith.addf"
    assert [lp.trip_count for lp in reduction_nest(pool.split[0])] == [16, 16]
    assert pool.global_size == (32 * SPLIT_ITEMS, 32) and pool.local_size == (SPLIT_ITEMS, 1)
    body = source[source.index("kernel_global_avg_pool_") :]
    body = body[: body.index("\n}\n")]
    assert "for (long v_flat = (long)get_local_id(0); v_flat < 256; v_flat += 64) {" in body
    assert "const long v_r0 = (v_flat / 16);" in body
    assert "const long v_r1 = (v_flat % 16);" in body
    assert body.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert all(launch.split is None for k, launch in at32.items() if k.startswith("conv2d"))
    _, at1 = launches(1)
    convs = {k: launch for k, launch in at1.items() if k.startswith("conv2d")}
    split = {k for k, launch in convs.items() if launch.split is not None}
    # (16 x 32 x 32 outputs each: a work-item per output; 32 x 16 x 16: split)
    assert sorted(len(reduction_nest(convs[k].split[0])) for k in split) == [3, 3]
    assert all(outputs(convs[k]) == 32 * 16 * 16 for k in split)
    big = [k for k, launch in convs.items() if math.prod(launch.global_size) == 32 * 32 * 16]
    assert len(big) == 3 and not split & set(big)  # (the stem, the first block's two)
    assert (
        H200.units * MIN_GROUP_ITEMS > 32 * 16 * 16 and H200.units * MIN_GROUP_ITEMS <= 32 * 32 * 16
    )


def test_gpu_plan_collapses_outer_loops():
    """A conv at batch 4 (image, channel, row, column): columns on dimension 0, rows on
    1, images x channels collapsed into dimension 2."""
    _, module = _lowered("lenet", 4)
    emitter = OpenCLEmitter(module, gpu=H200)
    emitter.emit()
    conv = next(launch for k, launch in emitter.launches.items() if k.sym.startswith("conv2d"))
    assert len(conv.mapped) == 4 and len(conv.global_size) == 3
    assert not conv.lanes  # (padded: no row lanes)
    assert sum("get_global_id(2)" in expr for expr in conv.mapped.values()) == 2


def test_group_shape_fills_compute_units():
    """Fewer groups than compute units: the groups shrink, to 64 work-items at least."""
    assert group_shape((65536,), H200) == (256,)
    assert group_shape((4096,), H200) == (64,)  # (16 groups of 256 for 132 units)
    assert group_shape((256, 32), H200) == (64, 1)
    assert group_shape((1000,), GpuProfile(1024, 1)) == (256,)
    assert np.prod(group_shape((16, 16), H200)) == MIN_GROUP_ITEMS
    assert group_shape((8,), GpuProfile(4, 1)) == (4,)  # (the device's largest group)


def test_profile_choice(monkeypatch):
    """profile= first, then DLPC_OPENCL_PROFILE, then the device's type (a CPU: cpu);
    another name is a one-line error."""
    monkeypatch.delenv("DLPC_OPENCL_PROFILE", raising=False)
    assert launch_profile(None) == "cpu"  # (CI's devices are CPUs)
    assert launch_profile("gpu") == "gpu"
    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "gpu")
    assert launch_profile(None) == "gpu"
    assert launch_profile("cpu") == "cpu"
    monkeypatch.setenv("DLPC_OPENCL_PROFILE", "tpu")
    with pytest.raises(DlpcError, match="DLPC_OPENCL_PROFILE='tpu' is no launch profile"):
        launch_profile(None)
    with pytest.raises(DlpcError, match="profile='fast'"):
        launch_profile("fast")


def test_compile_profile_and_dlpc_run_prints_the_device(capsys):
    """dlpc.compile(..., profile="gpu") runs the GPU plans; `dlpc-run --target opencl`
    names the device and the plans; a profile for another target is a one-line error."""
    from dlpc.backends.runtime.opencl_rt import OpenCLFunction
    from dlpc.tools import dlpc_run

    model = dlpc.load(ROOT / "examples" / "mlp.dlpc", batch=2)
    compiled = dlpc.compile(model, target="opencl", profile="gpu")
    assert isinstance(compiled.artifact, OpenCLFunction) and compiled.artifact.plans == "gpu"
    assert not compiled.artifact.chains
    inputs = dlpc.api.random_inputs(model)
    (out,) = compiled(*inputs)
    (ref,) = dlpc.api.reference(model, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    with pytest.raises(DlpcError, match="profile= applies to target 'opencl', not 'c'"):
        dlpc.compile(model, target="c", profile="gpu")
    argv = [str(ROOT / "examples" / "mlp.dlpc"), "--target", "opencl", "--repeat", "1"]
    assert dlpc_run.main([*argv, "--opencl-profile", "gpu", "--check"]) == 0
    assert f"device: {compiled.artifact.device_name} (gpu launch plans)" in capsys.readouterr().out
    assert dlpc_run.main([*argv[:1], "--opencl-profile", "gpu"]) != 0
    assert "--opencl-profile needs --target opencl" in capsys.readouterr().err


def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("opencl_gpu", ROOT / "bench" / "opencl_gpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bench_opencl_gpu_dry_run(capsys, tmp_path):
    """bench/opencl_gpu.py on this CPU platform without torch: the table's row, the
    device's name, exit 0 within the tolerance; `--kernels DIR` writes each row's
    per-kernel profile with the launches, and its program."""
    argv = ["--device", "none", "--dry-run", "--models", "mlp", "--batches", "1"]
    assert _bench().main([*argv, "--kernels", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    assert "OpenCL device: " in out and "plans gpu" in out
    assert "| mlp | 1 | " in out and "| n/a | n/a |" in out
    profile = (tmp_path / "k" / "mlp-b1.txt").read_text()
    assert "total (3 kernels)" in profile and "whole call" in profile
    assert "kernel_linear_relu_0: global (" in profile and " split" in profile
    assert "__kernel void kernel_linear_relu_0(" in (tmp_path / "k" / "mlp-b1.cl").read_text()


def test_bench_registers_nvidia_icd(tmp_path, monkeypatch):
    """The driver's OpenCL library present but not in the loader's vendors (the H200
    machine's container): a vendors directory of the registered ones plus it; nothing
    when the vendors list it, when the library is absent, or when OCL_ICD_VENDORS is set."""
    bench = _bench()
    vendors, lib = tmp_path / "vendors", tmp_path / "libnvidia-opencl.so.1"
    vendors.mkdir()
    (vendors / "pocl.icd").write_text("libpocl.so.2\n")
    lib.write_text("")
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    monkeypatch.setattr(bench, "NVIDIA_OPENCL", ("/nonexistent/lib.so", str(lib)))
    assert bench.register_nvidia_icd(vendors) == str(lib)
    here = Path(os.environ["OCL_ICD_VENDORS"])
    assert sorted(p.name for p in here.iterdir()) == ["nvidia.icd", "pocl.icd"]
    assert (here / "nvidia.icd").read_text() == f"{lib}\n"
    assert (here / "pocl.icd").read_text() == "libpocl.so.2\n"
    assert bench.register_nvidia_icd(vendors) is None  # (set now: the user's)
    monkeypatch.delenv("OCL_ICD_VENDORS")
    (vendors / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    assert bench.register_nvidia_icd(vendors) is None  # (listed)
    (vendors / "nvidia.icd").unlink()
    monkeypatch.setattr(bench, "NVIDIA_OPENCL", ("/nonexistent/lib.so",))
    assert bench.register_nvidia_icd(vendors) is None  # (no library)
    assert "OCL_ICD_VENDORS" not in os.environ


def test_bench_opencl_transfer(capsys):
    """bench/opencl_transfer.py on this platform without CUDA: a row per size, every copy
    checked (its assert), torch's columns n/a."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            "opencl_transfer", ROOT / "bench" / "opencl_transfer.py"
        )
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        assert bench.main(["--sizes-mb", "0.01,0.02", "--repeat", "1"]) == 0
    finally:
        sys.path.remove(str(ROOT / "bench"))
    out = capsys.readouterr().out
    assert "| 0.01 | " in out and "| 0.02 | " in out and out.count("| n/a") >= 2


def test_bench_opencl_gpu_run_script(tmp_path):
    """bench/opencl_gpu_run.sh (the GPU measurement as one command) here, its table only,
    without its wheels (this environment has them installed): the table in $OUT and the
    per-kernel profiles in kernels.tgz."""
    import subprocess
    import tarfile

    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "SKIP_PIP": "1",
        "TABLE_ONLY": "1",
        "TABLE_ARGS": "--device none --dry-run --models mlp --batches 1",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "opencl_gpu_run.sh")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| mlp | 1 | " in (tmp_path / "table.txt").read_text()
    with tarfile.open(tmp_path / "kernels.tgz") as tar:
        assert "./table/mlp-b1.txt" in tar.getnames()
