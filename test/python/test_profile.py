"""`dlpc-run --profile` (issue #11): per-kernel timers exist only in a build with
DLPC_PROFILE defined; static FLOPs and bytes per kernel; the tool's table and errors."""

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

import dlpc
from dlpc import api
from dlpc.backends.runtime.profile import format_profile, kernel_costs, profile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    import os

    os.environ.setdefault("DLPC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    model = dlpc.load(EXAMPLES / "mlp.dlpc", batch=1)
    return model, api.compile(model)


def test_the_normal_build_has_no_timers(mlp):
    _, compiled = mlp
    handle = compiled.artifact.library.handle
    with pytest.raises(ValueError, match="undefined symbol: dlpc_kernel_seconds"):
        ctypes.c_double.in_dll(handle, "dlpc_kernel_seconds")
    assert "#ifdef DLPC_PROFILE" in compiled.source  # the timers are behind the flag


def test_costs_count_flops_and_bytes_per_kernel(mlp):
    _, compiled = mlp
    costs = {c.name: c for c in kernel_costs(compiled.lowered)}
    assert list(costs) == ["linear_relu_0", "linear_relu_1", "linear_4"]
    # y[1, 10] = x[1, 256] @ W[10, 256]^T + b: 2 * 256 * 10 flops in multiply-adds, plus
    # the bias and what the schedule's tiles add (a static count of the emitted ops)
    assert 2 * 256 * 10 <= costs["linear_4"].flops <= 1.05 * 2 * 256 * 10
    # compulsory traffic: x, W, b and y, 4 bytes each
    assert costs["linear_4"].bytes == 4 * (256 + 256 * 10 + 10 + 10)
    assert 2 * 784 * 256 <= costs["linear_relu_0"].flops <= 1.05 * 2 * 784 * 256


def test_profile_times_every_kernel(mlp):
    model, compiled = mlp
    rows, call = profile(compiled.artifact, compiled.lowered, api.random_inputs(model), repeat=3)
    assert [r.name for r in rows] == ["linear_relu_0", "linear_relu_1", "linear_4"]
    assert all(r.seconds > 0 for r in rows) and call > 0
    table = format_profile(rows, call).splitlines()
    assert table[0].split()[:4] == ["kernel", "origin", "time", "us"]
    assert table[-2].startswith("total (3 kernels)")


def run_tool(*args):
    return subprocess.run(
        [sys.executable, "-m", "dlpc.tools.dlpc_run", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_dlpc_run_profile_prints_the_table():
    proc = run_tool(str(EXAMPLES / "lenet.dlpc"), "--profile", "--repeat", "3", "--check")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("profile (median of 3 calls, static FLOPs and compulsory bytes):")
    # the reshape is a view; graph-conv-layout's transposes (conv2 and its pool in NHWC)
    # are read through by their consumers but shift the later ops' numbers
    names = [ln.split()[0] for ln in lines[start + 2 : start + 9]]
    assert sorted(names) == sorted(
        [
            "conv2d_relu_0",
            "max_pool2d_2",
            "conv2d_relu_1",
            "max_pool2d_6",
            "linear_relu_2",
            "linear_relu_3",
            "linear_13",
        ]
    )


def test_dlpc_run_profile_needs_target_c():
    proc = run_tool(str(EXAMPLES / "mlp.dlpc"), "--profile", "--target", "numpy")
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "dlpc-run: error: --profile needs --target c or opencl, not 'numpy'"
    )


def test_dlpc_run_profile_opencl():
    pytest.importorskip("pyopencl", reason="the opencl extra is not installed")
    proc = run_tool(str(EXAMPLES / "mlp.dlpc"), "--target", "opencl", "--profile", "--repeat", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("profile (median of 3 calls, static FLOPs and compulsory bytes):")
    names = [ln.split()[0] for ln in lines[start + 2 : start + 5]]
    assert sorted(names) == ["linear_4", "linear_relu_0", "linear_relu_1"]


def test_dlpc_timing_prints_every_pass():
    proc = subprocess.run(
        [sys.executable, "-m", "dlpc.tools.dlpc", str(EXAMPLES / "mlp.dlpc"), "--emit=loop"]
        + ["--timing"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].split() == ["seconds", "share", "pass"]
    passes = [ln.split()[2] for ln in lines[1:-1]]
    assert passes[0] == "graph-infer-shapes"
    assert passes[-9:] == [
        "graph-to-te",
        "te-to-loop",
        "loop-default-schedule",
        "loop-fold-init-epilogue",
        "loop-slide-rows",
        "loop-views",
        "loop-memory-plan",
        "loop-prepack-weights",
        "loop-runtime-extents",
    ]
    assert lines[-1].split()[1:] == ["100.0%", "total", f"({len(passes)}", "passes)"]


def test_dlpc_run_batch_binds_the_named_dim(tmp_path):
    proc = run_tool(str(EXAMPLES / "mlp.dlpc"), "--batch", "4", "--profile", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    assert "output 0: 4x10 float32" in proc.stdout
    mlir = tmp_path / "m.mlir"
    mlir.write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  func.return %x : tensor<2xf32>\n}\n"
    )
    proc = run_tool(str(mlir), "--batch", "4")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "dlpc-run: error: --batch applies to .dlpc models, not mlir"


# In a fresh process: the model's C and --profile's build of it, 2 OpenMP threads; what
# the process's threads may run on, and which libgomp it maps
OPENMP_PROBE = """
import json, os, sys
import dlpc
from dlpc import api
from dlpc.backends.runtime.profile import profile
before = sorted(os.sched_getaffinity(0))
model = dlpc.load(sys.argv[1], batch=32)
compiled = api.compile(model)
inputs = api.random_inputs(model)
compiled(*inputs)  # a parallel kernel: libgomp starts its worker
rows, _ = profile(compiled.artifact, compiled.lowered, inputs, repeat=2)
import ctypes
from dlpc.backends.runtime import cbuild
getcpu = ctypes.CDLL(None).sched_getcpu
full = os.sched_getaffinity(0)
os.sched_setaffinity(0, {before[min(1, len(before) - 1)]})  # onto the worker's CPU, then free
os.sched_setaffinity(0, full)
on = getcpu()
cbuild.keep_off_workers()
moved = [on, getcpu()]
checks = []
keep_off = cbuild.keep_off_workers
cbuild.keep_off_workers = lambda: checks.append(1) or keep_off()
compiled(*inputs)  # a call checks once
def cpus(t):
    status = open(f"/proc/self/task/{t}/status").read()
    return status.split("Cpus_allowed_list:")[1].split()[0]
main = str(os.getpid())
print(json.dumps({
    "before": before,
    "main": cpus(main),
    "others": sorted(cpus(t) for t in os.listdir("/proc/self/task") if t != main),
    "gomp": sorted({line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line}),
    "bind_env": os.environ.get("OMP_PROC_BIND"),
    "kernels": len(rows),
    "worker_cpus": sorted(cbuild.worker_cpus),
    "moved": moved,
    "checks": len(checks),
}))
"""


def cpu_list(cpus):
    """/proc's Cpus_allowed_list spelling of a sorted CPU list ("0-1", "3", "0,2")."""
    runs = []
    for c in cpus:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in runs)


def run_openmp_probe(tmp_path, **env):
    import json
    import os

    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OMP_", "GOMP_", "KMP_")) and k != "OPENBLAS_NUM_THREADS"
    }
    clean["DLPC_CACHE_DIR"] = os.environ.get("DLPC_CACHE_DIR", str(tmp_path))
    clean["OPENBLAS_NUM_THREADS"] = "1"  # numpy's own threads out of the census
    done = subprocess.run(
        [sys.executable, "-c", OPENMP_PROBE, str(EXAMPLES / "mlp.dlpc")],
        env={**clean, "OMP_NUM_THREADS": "2", **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_openmp_worker_gets_a_cpu_of_its_own_and_the_caller_keeps_its_own(tmp_path):
    """2 threads, no OpenMP variable set (the case where --profile showed resnet's parallel
    convolutions at ~540 us instead of ~25, and the plain call 1.7 ms instead of 0.14, in
    most fresh processes): unbound, Linux started libgomp's worker on the caller's CPU and
    left it there, and each parallel loop then waited out a whole spin. The runtime binds
    libgomp's worker to a CPU other than the first (where libgomp puts the caller's team
    role); the calling thread's CPU set, the environment and the one libgomp that the
    model's build and the profiled build share are as before."""
    got = run_openmp_probe(tmp_path)
    before = got["before"]
    assert got["kernels"] == 3
    assert len(got["gomp"]) == 1  # the normal and the profiled build share one libgomp
    assert got["bind_env"] is None  # not left for child processes or another libgomp
    assert got["main"] == cpu_list(before)  # the caller (and what it starts later) unbound
    if len(before) >= 2:
        assert got["others"] == [str(before[1])]  # the one worker: the second CPU alone
        assert got["worker_cpus"] == [before[1]]
        # a call made on the worker's CPU first moves its thread off it
        assert got["moved"][0] == before[1] and got["moved"][1] != before[1]
        assert got["checks"] == 1
    else:  # one CPU: a team of 2 outnumbers it, nothing is bound
        assert got["others"] == [cpu_list(before)]
        assert got["worker_cpus"] == []


def test_openmp_binding_the_users_choice_stands(tmp_path):
    got = run_openmp_probe(tmp_path, OMP_PROC_BIND="false")
    assert got["main"] == cpu_list(got["before"])
    assert got["others"] == [cpu_list(got["before"])]  # libgomp left its worker unbound
    assert got["bind_env"] == "false"
    assert got["worker_cpus"] == []
