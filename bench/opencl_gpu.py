"""dlpc's OpenCL backend on a GPU against PyTorch eager on the same card (issue 33).

    python bench/opencl_gpu.py --wheels wheels/                 # on the GPU machine
    python bench/opencl_gpu.py --device none --dry-run          # here: CPU OpenCL, no torch

Made for a GPU machine with no network whose Python has torch (CUDA), numpy and
onnxruntime but not pyopencl, xDSL, lark or dlpc: `--wheels DIR` first installs whichever
of those is missing from the wheel files in DIR (`pip install --no-index --find-links
DIR`; build them with `pip wheel . xdsl lark pyopencl -w wheels/` in the dlpc checkout,
docs/opencl.md). Then, per example and batch (default 1 and 32), it prints the median
time of `--repeat` (30) calls of:

- dlpc whole call: `dlpc.compile(model, target="opencl", profile=...)` (default "gpu")
  called on numpy arrays: the input uploaded, the kernels on one in-order queue, the
  output read back (weights resident on the device): what a numpy user gets, PCIe
  copies included (mobilenet b32: 12 MB across, most of its time on the H200);
- dlpc device tensors: the same plans compiled for the runtime device (`opencl:N`)
  that runs the whole call's device (`compile(..., device=)`, a `DeviceModel`), called on
  `dlpc.Tensor`s uploaded once before timing, each call timed to the device's
  `synchronize` and its output left there: torch's conditions (the kernels bound to
  the tensors' own buffers, `runtime/device_call.py`; a call that copies through the
  function's buffers instead, or moves bytes to or from the host, is reported);
- torch eager: the same graph op by op with torch.nn.functional (bench/models.py's
  interpreter) on `--device` (default cuda when available), inputs already on the
  device, timed to `torch.cuda.synchronize()`;

with the OpenCL device's name (NVIDIA's OpenCL registered for the loader first when the
driver's library is there but /etc/OpenCL/vendors lacks its .icd: `register_nvidia_icd`),
and checks both dlpc outputs (the device column's read back once, after its timed
calls) against the numpy reference:
max |dlpc - reference| / max |reference| <= `--tolerance` (1e-6), or <= torch's own error
on the same inputs when that is larger (the reference is float32 numpy, summing in its
own order: torch on lenet at batch 32 is 1.1e-6 from it). The exit status is 1 when a
check fails. `--device none` leaves torch out (a machine without it or without
CUDA); `--dry-run` takes 3 calls per figure (a check of the script, not a measure).
`--kernels DIR` also writes, per row, DIR/NAME-bBATCH.txt: every kernel's device time
(OpenCL profiling events, `dlpc-run --profile`'s table) with its NDRange and work-group,
and both columns' call times, and DIR/NAME-bBATCH.cl, the program: what the next change
to the plans is read from.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("mlp", "lenet", "transformer", "mobilenet", "resnet")
#: module -> its distribution's name on PyPI (what the wheels are called)
NEEDED = {"pyopencl": "pyopencl", "xdsl": "xdsl", "lark": "lark", "dlpc": "dlpc"}


def install_wheels(wheels: Path) -> None:
    """pip-install, from the wheel files in `wheels` only, the modules not importable."""
    missing = [dist for mod, dist in NEEDED.items() if importlib.util.find_spec(mod) is None]
    if not missing:
        return
    if not wheels.is_dir():
        sys.exit(f"opencl_gpu.py: error: --wheels {wheels}: no such directory")
    print(f"installing {', '.join(missing)} from {wheels}", flush=True)
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels)]
    # dlpc without its pinned dependencies (its numpy pin would replace the one torch
    # was installed with); the others with theirs, from the same directory
    others = [dist for dist in missing if dist != "dlpc"]
    runs = [[*cmd, *others]] if others else []
    runs += [[*cmd, "--no-deps", "dlpc"]] if "dlpc" in missing else []
    for run in runs:
        if subprocess.run(run, check=False).returncode:
            sys.exit(f"opencl_gpu.py: error: pip could not install {', '.join(missing)}")
    importlib.invalidate_caches()


#: where a driver install puts NVIDIA's OpenCL library (the ICD that the loader needs)
NVIDIA_OPENCL = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1",
    "/usr/lib64/libnvidia-opencl.so.1",
    "/usr/lib/libnvidia-opencl.so.1",
    "/usr/local/nvidia/lib64/libnvidia-opencl.so.1",
)


def register_nvidia_icd(vendors: Path = Path("/etc/OpenCL/vendors")) -> str | None:
    """The path of NVIDIA's OpenCL library when the driver has it but the ICD loader's
    vendor directory does not list it (a container given the driver's libraries without
    its /etc/OpenCL/vendors/nvidia.icd: the H200 machine's, where the platform list held
    PoCL alone), after pointing `OCL_ICD_VENDORS` at a directory of the registered
    vendors plus it; None when nothing was needed or found. Call before pyopencl loads."""
    if os.environ.get("OCL_ICD_VENDORS"):
        return None  # (the user's choice)
    registered = sorted(vendors.glob("*.icd")) if vendors.is_dir() else []
    if any("nvidia" in p.read_text(errors="replace").lower() for p in registered):
        return None
    lib = next((p for p in NVIDIA_OPENCL if Path(p).exists()), None)
    if lib is None:
        return None
    import tempfile

    here = Path(tempfile.mkdtemp(prefix="dlpc-icd-"))
    for p in registered:
        (here / p.name).write_text(p.read_text(errors="replace"))
    (here / "nvidia.icd").write_text(lib + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(here)
    return lib


def median_ms(call, repeat: int, sync=None) -> float:
    """Median wall time of `repeat` calls (after 3 warm-up calls), in ms."""
    for _ in range(3):
        call()
    if sync:
        sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def torch_column(model, inputs, device: str, repeat: int):
    """(ms, max error against the reference) of the model run op by op by torch."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from models import torch_model

    from dlpc import api

    net = torch_model(model.module, api.check_weights(model), device=device)
    xs = [torch.from_numpy(x).to(device) for x in inputs]
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    with torch.no_grad():
        out = net(*xs)
        ms = median_ms(lambda: net(*xs), repeat, sync)
    out = out[0] if isinstance(out, tuple) else out
    return ms, out.cpu().numpy()


def place_like(model, compiled, profile: str):
    """`model` compiled with `profile`'s plans for the runtime OpenCL device
    (`dlpc.runtime.device`, `opencl:N`) whose device runs `compiled` (the whole-call
    column's: the same platform and device), a `DeviceModel`; None when no runtime
    device is that one (a call split over a team of devices)."""
    import dlpc
    from dlpc.runtime import device as runtime

    cl_device = compiled.artifact.device
    place = next((d for d in runtime.devices("opencl") if d.backend.cl_device == cl_device), None)
    if place is None or compiled.artifact.team_devices:
        return None
    return dlpc.compile(model, target="opencl", profile=profile, device=place)


def copies_through(placed) -> str | None:
    """Why `placed`'s calls copy its tensors through the function's own buffers instead
    of binding the kernels to the tensors' (`runtime/device_call.py`), None when every
    input and output of its latest call was bound."""
    from dlpc.runtime import device_call

    call = placed._call
    fn = call.fn
    if not device_call.BIND:
        return "runtime/device_call.BIND is False"
    if not call.bindable:
        host = device_call.HOST_STEPS
        why = [
            what
            for what, holds in (
                ("no kernel arguments to rebind", not hasattr(fn, "bound_args")),
                ("a team chain", fn.team_devices is not None),
                ("arguments in shared virtual memory", bool(fn.svm_args)),
                ("host control flow", any(isinstance(s, list) or s[0] in host for s in fn.steps)),
                (
                    "an input read from a transposed copy",
                    any(k in fn.param_copies for k in call.args),
                ),
            )
            if holds
        ]
        return "not bindable: " + (", ".join(why) or "?")
    copied = [k for k in call.args if call.bound[k] is fn.arg_buffers[k]]
    if copied:
        return f"arguments {copied} at offsets the device cannot start a buffer at"
    return None


def device_column(placed, inputs, repeat: int):
    """(ms, output, note) of `placed` (`place_like`) called on device tensors uploaded
    once: each timed call is the call and the device's synchronize (torch's
    conditions), its output read back once after the timed calls; the note says what
    broke those conditions (bytes to or from the host during the timed calls, copies
    through the function's buffers), None when nothing did."""
    import dlpc
    from dlpc.runtime import device as runtime

    dev = placed.device
    xs = [dlpc.from_numpy(x, device=dev) for x in inputs]
    last: list = []

    def call():
        last[:] = placed(*xs)

    sync = lambda: runtime.synchronize(dev)  # noqa: E731
    call()  # (the first call uploads the weights: not counted below)
    sync()
    before = runtime.transfer_stats(dev)
    ms = median_ms(call, repeat, sync)
    after = runtime.transfer_stats(dev)
    moved = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    note = copies_through(placed)
    if moved:
        across = ", ".join(f"{k} {v}" for k, v in moved.items())
        note = "; ".join(filter(None, [note, f"host transfers while timed: {across}"]))
    (out,) = last
    return ms, out.numpy(), note


def write_profile(stem: Path, compiled, inputs, repeat: int, calls: str = "") -> None:
    """`stem`.txt: the per-kernel profile of `compiled` and each kernel's launch, then
    `calls` (the table's figures of the row); `stem`.cl: its OpenCL program."""
    from dlpc.backends.runtime.opencl_rt import opencl_profile
    from dlpc.backends.runtime.profile import format_profile

    function = compiled.artifact
    rows, call = opencl_profile(function, compiled.lowered, inputs, repeat)
    launches = [
        f"{launch.name}: global {launch.global_size} local {launch.local_size}"
        + (f" lanes {sorted(launch.lanes.values())}" if launch.lanes else "")
        + (" split" if launch.split else "")
        for launch in function.plan.launches.values()
    ]
    stem.parent.mkdir(parents=True, exist_ok=True)
    text = format_profile(rows, call) + "\n\nlaunches:\n" + "\n".join(launches) + "\n"
    text += f"\ncalls, median ms:\n{calls}" if calls else ""
    stem.with_suffix(".txt").write_text(text)
    stem.with_suffix(".cl").write_text(function.source)


def relative_error(out, ref) -> float:
    import numpy as np

    scale = float(np.abs(ref).max()) or 1.0
    return float(np.abs(out.astype(np.float64) - ref).max()) / scale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheels", type=Path, help="install missing modules from this directory")
    p.add_argument("--models", default=",".join(EXAMPLES))
    p.add_argument("--batches", default="1,32")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--profile", default="gpu", choices=("gpu", "cpu"), help="dlpc's plans")
    p.add_argument(
        "--device", default="auto", help="torch's device: cuda, cpu, none (auto: cuda or none)"
    )
    p.add_argument("--platform", help="DLPC_OPENCL_PLATFORM (e.g. NVIDIA)")
    p.add_argument("--tolerance", type=float, default=1e-6)
    p.add_argument("--dry-run", action="store_true", help="3 calls a figure")
    p.add_argument("--kernels", dest="profile_dir", type=Path, help="per-kernel times here")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.wheels is not None:
        install_wheels(args.wheels)
    if args.platform:
        os.environ["DLPC_OPENCL_PLATFORM"] = args.platform
    lib = register_nvidia_icd()
    if lib is not None:
        print(f"registered NVIDIA's OpenCL ({lib}): the ICD loader's vendors did not list it")
    repeat = 3 if args.dry_run else args.repeat
    device = args.device
    if device == "auto":
        try:
            import torch

            device = "cuda" if torch.cuda.is_available() else "none"
        except ImportError:
            device = "none"

    import dlpc
    from dlpc.backends.runtime import opencl_rt

    models = [m for m in args.models.split(",") if m]
    batches = [int(b) for b in args.batches.split(",") if b]
    opencl = opencl_rt.default_device()
    print(f"OpenCL device: {opencl.name} ({opencl.platform.name.strip()}), plans {args.profile}")
    if device.startswith("cuda"):
        import torch

        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    elif device != "none":
        print(f"torch on {device}")
    print(f"median of {repeat} calls, ms; error: max |out - ref| / max |ref|")
    print()
    print(
        "| model | batch | dlpc whole call | dlpc device tensors | torch | whole / torch "
        "| device / torch | whole error | device error | torch error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    failed, notes = [], []
    for name in models:
        for batch in batches:
            model = dlpc.load(ROOT / "examples" / f"{name}.dlpc", batch=batch)
            inputs = dlpc.api.random_inputs(model)
            (ref,) = dlpc.api.reference(model, inputs)
            compiled = dlpc.compile(model, target="opencl", profile=args.profile)
            (out,) = compiled(*inputs)
            error = relative_error(out, ref)
            ms = median_ms(lambda c=compiled, x=inputs: c(*x), repeat)
            row = [name, str(batch), f"{ms:.3f}", "n/a", "n/a", "n/a", "n/a"]
            row += [f"{error:.2g}", "n/a", "n/a"]
            errors = {"whole call": error}
            placed = place_like(model, compiled, args.profile)
            if placed is None:
                why = "no runtime device is the whole call's (a team's call?)"
                notes.append(f"{name} batch {batch}: no device-tensor column: {why}")
            else:
                dev_ms, dev_out, note = device_column(placed, inputs, repeat)
                errors["device tensors"] = relative_error(dev_out, ref)
                row[3], row[8] = f"{dev_ms:.3f}", f"{errors['device tensors']:.2g}"
                if note:
                    notes.append(f"{name} batch {batch}: device tensors: {note}")
                plans = placed.artifact.plans, compiled.artifact.plans
                if plans[0] != plans[1]:  # (then the columns time different programs)
                    failed.append(f"{name} batch {batch}: device tensors: plans {plans}")
                elif placed.source != compiled.source:
                    notes.append(f"{name} batch {batch}: device tensors: another program")
            bound = args.tolerance
            if device != "none":
                torch_ms, torch_out = torch_column(model, inputs, device, repeat)
                torch_error = relative_error(torch_out, ref)
                row[4:6] = [f"{torch_ms:.3f}", f"{ms / torch_ms:.2f}"]
                if placed is not None:
                    row[6] = f"{dev_ms / torch_ms:.2f}"
                row[9] = f"{torch_error:.2g}"
                bound = max(bound, torch_error)  # (float32's floor against this reference)
            for column, e in errors.items():
                if e > bound:
                    failed.append(f"{name} batch {batch}: {column}: error {e:.3g} > {bound:.3g}")
            print("| " + " | ".join(row) + " |", flush=True)
            if args.profile_dir is not None:
                calls = f"whole call {row[2]}\ndevice tensors {row[3]}\ntorch {row[4]}\n"
                stem = args.profile_dir / f"{name}-b{batch}"
                write_profile(stem, compiled, inputs, repeat, calls)
    for line in notes:
        print(f"note: {line}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    for line in failed:
        print(f"opencl_gpu.py: error: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
