"""Run a loop-level module as OpenCL kernels through pyopencl.

    f = OpenCLFunction(loop_module)             # emit_opencl + build the program once
    (y,) = f(x, params={"fc1.weight": w})       # walks @main: buffers, kernels, copies

The host glue interprets `@main`: its arguments and `memref.alloc`s become device
buffers, `memref.global`s are uploaded once, each `loop.kernel` is enqueued with the
NDRange from `plan_launch`, `memref.copy` is a device copy; outputs are read back.
The platform is the first OpenCL platform pyopencl finds that builds a program for its
devices, a platform with a GPU first, then PoCL (`$DLPC_OPENCL_PLATFORM` picks one by a
substring of its name); on a CPU-only machine that is PoCL from the
`pocl-binary-distribution` wheel, or, on a CPU its LLVM 14 does not know, Intel's CPU
runtime from the `intel-opencl-rt` wheel (both in `pip install -e '.[opencl]'` from the
dlpc checkout; `platforms()`).
"""

from __future__ import annotations

import atexit
import importlib.metadata
import math
import os
import statistics
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dlpc import settings
from dlpc.backends.runtime.callconv import ModuleFunction
from dlpc.diagnostics import DlpcError, install_hint

if TYPE_CHECKING:
    from pyopencl import Buffer

    from dlpc.backends.opencl import Chain, Launch


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise DlpcError(
            f"error: target 'opencl' needs pyopencl ({install_hint('opencl')}): {e}"
        ) from None
    return cl


# IEEE division and sqrt, as the C backend's; no fast-math: results match the reference
BUILD_OPTIONS = ["-cl-fp32-correctly-rounded-divide-sqrt"]


def build(context, source: str):
    """`source` built for `context`'s devices with `BUILD_OPTIONS`. A build that succeeds
    says nothing: pyopencl warns of any build log, and Intel's runtime logs
    "Compilation started / done" for every build (a failure raises with its log)."""
    cl = _cl()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        return cl.Program(context, source).build(options=BUILD_OPTIONS)


#: SVM or pinned arrays an output hands to callers, at most (`OpenCLFunction._svm_output`,
#: `_pinned_output`): a
#: caller holding more results than this gets copies
SVM_POOL = 4
# MEM_OBJECT_ALLOCATION_FAILURE, OUT_OF_RESOURCES, OUT_OF_HOST_MEMORY
OUT_OF_MEMORY = (-4, -5, -6)


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            return True
    except OSError:
        return False


def _pocl_cache() -> None:
    """PoCL writes every kernel it builds to `$POCL_CACHE_DIR` (default
    `$XDG_CACHE_HOME/pocl`, i.e. `~/.cache/pocl`) and fails every build, with no log, when
    it cannot: where that default is not writable (a read-only or foreign home, as in some
    CI sandboxes), point it at dlpc's own cache, else at a private temporary directory."""
    if os.environ.get("POCL_CACHE_DIR"):
        return
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    if _writable(Path(xdg) / "pocl"):
        return
    for candidate in (
        settings.get("DLPC_CACHE_DIR") if settings.is_set("DLPC_CACHE_DIR") else None,
        tempfile.gettempdir(),
    ):
        if candidate:
            path = Path(candidate) / f"pocl-{os.getuid()}"
            if _writable(path):
                os.environ["POCL_CACHE_DIR"] = str(path)
                return


#: PoCL's two CPU drivers, both enumerated when the user has not chosen (`POCL_DEVICES`
#: unset): `pthread` runs work-groups on worker threads, one per core; `basic` runs the
#: kernels in the thread that enqueues them. Each compiled model takes one
#: (`choose_device`), or two basic devices as a team (`team_devices`, `Team`): handing
#: a call to pthread's sleeping workers and back costs more than the whole C call of the
#: small examples (figures: docs/design/opencl-experiments.md).
POCL_CPU_DRIVERS = "pthread basic basic"
_DEVICES: list | None = None
_CONTEXTS: dict[int, tuple] = {}
#: the directory of ICD files dlpc hands the OpenCL ICD loader (`_icd_vendors`)
_VENDORS: str | None = None
#: the system's ICD files (the loader's default directory), kept visible by `_icd_vendors`
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
#: a program every usable platform builds (`_builds`)
_PROBE = "__kernel void dlpc_probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"


def _wheel_icds() -> list[Path]:
    """OpenCL drivers installed as Python wheels that the ICD loader does not find by
    itself: Intel's CPU runtime (`intel-opencl-rt`) puts `libintelocl.so` in the
    environment's `lib/` and an `.icd` file naming a path of its build machine."""
    try:
        files = importlib.metadata.distribution("intel-opencl-rt").files or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = []
    for f in files:
        if f.name == "libintelocl.so":
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                found.append(path)
    return found[:1]


def _icd_vendors() -> None:
    """Before the loader is first asked for platforms: when a wheel brings a driver
    (`_wheel_icds`) and the user has not set `$OCL_ICD_VENDORS`, point it at a directory
    of dlpc's (in the system temporary directory, per user) holding an `.icd` file
    per driver, the system's `/etc/OpenCL/vendors/*.icd` copied beside them (so they stay
    visible); pyopencl's loader adds its own PoCL. Unset again once the platforms are
    listed (`devices`), as `POCL_DEVICES`."""
    global _VENDORS
    if "OCL_ICD_VENDORS" in os.environ:
        return
    icds = _wheel_icds()
    if not icds:
        return
    if _VENDORS is None:
        directory = Path(tempfile.gettempdir()) / f"dlpc-opencl-vendors-{os.getuid()}"
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            wanted = {f"dlpc-wheel-{i}.icd": f"{path}\n" for i, path in enumerate(icds)}
            if SYSTEM_VENDORS.is_dir():
                for icd in sorted(SYSTEM_VENDORS.glob("*.icd")):
                    wanted[f"system-{icd.name}"] = icd.read_text()
            for old in directory.glob("*.icd"):
                if old.name not in wanted:
                    old.unlink()
            for name, text in wanted.items():
                target = directory / name
                if not target.is_file() or target.read_text() != text:
                    tmp = directory / f".{name}.{os.getpid()}"
                    tmp.write_text(text)
                    tmp.replace(target)
        except OSError:
            return
        _VENDORS = str(directory)
    os.environ["OCL_ICD_VENDORS"] = _VENDORS


def _builds(platform) -> str | None:
    """None when `platform` builds a trivial program for its first device, else the
    first line of why not: PoCL 3.0's LLVM 14 names a CPU it does not know (AMD's
    family 1Ah, Zen 5) 'generic', then rejects that name in every build ("unknown
    target CPU 'generic'")."""
    cl = _cl()
    try:
        context = cl.Context(platform.get_devices()[:1])
        build(context, _PROBE)
    except cl.Error as e:
        return _build_failure(e)
    return None


def _is_pocl(platform) -> bool:
    return "portable computing language" in platform.name.lower()


CL_DEVICE_TYPE_GPU = 1 << 2


def _has_gpu(platform) -> bool:
    try:
        found = platform.get_devices()
    except _cl().Error:
        return False
    return any(int(getattr(d, "type", 0)) & CL_DEVICE_TYPE_GPU for d in found)


def platforms() -> list:
    """The OpenCL platforms pyopencl lists (the wheels' drivers made visible first,
    `_icd_vendors`): those with a GPU first (a user with a GPU gets it), then PoCL."""
    cl = _cl()
    _icd_vendors()
    try:
        return sorted(cl.get_platforms(), key=lambda p: (not _has_gpu(p), not _is_pocl(p)))
    except cl.Error as e:
        raise DlpcError(f"error: no OpenCL platform available: {e}") from None


def _choose_platform(found: list):
    """The first of `found` (`platforms()`) whose name contains `$DLPC_OPENCL_PLATFORM`
    (any, unset) and that builds a program (`_builds`); a one-line error when none
    does."""
    want = settings.get("DLPC_OPENCL_PLATFORM")
    named = [p for p in found if want.lower() in p.name.lower()]
    if not named:
        names = ", ".join(repr(p.name) for p in found) or "none"
        raise DlpcError(
            f"error: no OpenCL platform named like DLPC_OPENCL_PLATFORM={want!r} "
            f"(platforms: {names})"
        )
    failures = []
    for platform in named:
        if not platform.get_devices():
            continue
        why = _builds(platform)
        if why is None:
            return platform
        failures.append(f"{platform.name}: {why}")
    raise DlpcError(
        "error: no OpenCL platform builds programs here ("
        + "; ".join(failures or ["no devices"])
        + f"; {install_hint('opencl')})"
    )


def devices() -> list:
    """The chosen OpenCL platform's devices (`_choose_platform`), enumerated once per
    process. For PoCL both CPU drivers (`POCL_CPU_DRIVERS`) unless `POCL_DEVICES` is set;
    PoCL reads it when the devices are first listed, and it is unset again right after
    (child processes do not inherit it)."""
    global _DEVICES
    if _DEVICES is None:
        _pocl_cache()
        ours = "POCL_DEVICES" not in os.environ
        if ours:
            os.environ["POCL_DEVICES"] = POCL_CPU_DRIVERS
        vendors = "OCL_ICD_VENDORS" not in os.environ
        try:
            found = _choose_platform(platforms()).get_devices()
        finally:
            if ours:
                del os.environ["POCL_DEVICES"]
            if vendors:
                os.environ.pop("OCL_ICD_VENDORS", None)
        _DEVICES = list(found) + _serial_subdevices(found)
    return _DEVICES


def _serial_subdevices(found: list) -> list:
    """On a platform whose CPU device is parallel only (Intel's: no driver like PoCL's
    basic), that device split into sub-devices of one compute unit each (device
    fission, `CL_DEVICE_PARTITION_EQUALLY`), listed after it: the serial devices that
    `choose_device` and `team_devices` look for. A launch on Intel's runtime costs the
    caller microseconds, and a serial device runs a model's consecutive kernels as one
    launch (`Chain`; figures: docs/design/opencl-experiments.md). Nothing when the
    platform already has a serial
    CPU device, on PoCL (a user who chose its pthread driver alone keeps it), or when the
    device cannot be split."""
    cpus = [d for d in found if _cpu(d)]
    if not cpus or any(d.max_compute_units == 1 for d in cpus):
        return []
    if any(_is_pocl(d.platform) for d in cpus):
        return []  # (PoCL: its basic driver is the serial device; a user's POCL_DEVICES stands)
    if settings.get("DLPC_OPENCL_SUBDEVICES") == "0":
        return []
    cl = _cl()
    parent = max(cpus, key=lambda d: d.max_compute_units)
    try:
        return list(parent.create_sub_devices([cl.device_partition_property.EQUALLY, 1]))
    except (cl.Error, cl.LogicError, AttributeError):
        return []


def device_vector_width() -> int:
    """The float vector width the kernels are written for (`backends.opencl.lane_profile`):
    the narrowest `native_vector_width_float` of the platform's devices (PoCL on this
    CPU class: 8, its LLVM enabling no AVX-512; Intel's runtime on AVX-512: 16; a GPU's
    1 falls back to the default 8-lane plan)."""
    return min((int(d.native_vector_width_float) for d in devices()), default=8)


def _cpu(device) -> bool:
    return bool(device.type & _cl().device_type.CPU)


def _pinned_outputs(device) -> bool:
    """Whether a call's outputs are read into pinned host memory (`_pinned_output`): on
    a device that is not the host's CPU. On an H200 an 8 MB read into a pageable numpy
    array ran at 14 GB/s, into a mapped `ALLOC_HOST_PTR` buffer at 52 (torch's pinned
    copy: 50; bench/opencl_transfer.py)."""
    return not _cpu(device)


def default_device():
    """The device a model gets when the choice does not matter: the platform's first,
    except that of PoCL's CPU drivers the one with the most compute units (pthread)."""
    found = devices()
    cpus = [d for d in found if _cpu(d)]
    if len(cpus) > 1:
        return max(cpus, key=lambda d: d.max_compute_units)
    return found[0]


def serial_device():
    """A CPU device with one compute unit (PoCL's basic driver: the kernels run in the
    calling thread, no hand-off) beside a parallel one, else None."""
    cpus = [d for d in devices() if _cpu(d)]
    serial = [d for d in cpus if d.max_compute_units == 1]
    if serial and any(d.max_compute_units > 1 for d in cpus):
        return serial[0]
    return None


def serial_devices() -> list:
    """The CPU devices with one compute unit (PoCL's basic driver), in the platform's
    order."""
    return [d for d in devices() if _cpu(d) and d.max_compute_units == 1]


def _subdevice(device) -> bool:
    """Is `device` a sub-device (`_serial_subdevices`)? Its launches run on the
    runtime's worker threads, not in the thread that enqueues them."""
    try:
        return device.parent_device is not None
    except Exception:  # noqa: BLE001 - (a root device may raise instead of None)
        return False


def team_devices() -> list | None:
    """Two serial CPU devices (PoCL basic, enumerated twice by `POCL_CPU_DRIVERS`) that a
    model's call can run on together, each from its own host thread (`Team`), else None
    (one driver chosen by the user, another platform, `DLPC_OPENCL_TEAM=0`). Sub-devices
    (Intel's runtime) only when their queues run commands in the waiting thread
    (`_queue_flags`), as PoCL basic runs a launch: without that, each launch is handed
    to the runtime's worker threads and a team lost to one sub-device (figures:
    docs/design/opencl-experiments.md). `DLPC_OPENCL_TEAM=1` takes any sub-devices (the
    team protocol's tests run on them)."""
    setting = settings.get("DLPC_OPENCL_TEAM")
    if setting == "0":
        return None
    serial = [d for d in serial_devices() if setting == "1" or not _subdevice(d) or _queue_flags(d)]
    return serial[:2] if len(serial) >= 2 else None


#: the parallel CPU device pays for its hand-off (about 50 us a call on this machine,
#: `POCL_CPU_DRIVERS`) once a call's work is worth about this many one-core seconds
#: (estimated by `estimate_seconds`); below it the serial device runs the model
#: (figures: docs/design/opencl-experiments.md)
PARALLEL_SECONDS = 1e-3
#: one-core rates `estimate_seconds` assumes: float ops a second (PoCL's kernels run at
#: 10-90 GFLOP/s on one core of this machine) and the cost of one launch
ESTIMATED_FLOPS = 50e9
ESTIMATED_LAUNCH = 1e-6


def estimate_seconds(costs) -> float:
    """A rough one-core time of a call from the kernels' static costs
    (`profile.kernel_costs`)."""
    return sum(c.flops / ESTIMATED_FLOPS + ESTIMATED_LAUNCH for c in costs)


def choose_device(module):
    """The device a compiled model runs on: the serial CPU device when there is one and
    the call's estimated one-core time is under `PARALLEL_SECONDS` (the parallel device
    would spend more handing the work to its threads than the second core saves), else
    `default_device()`. `POCL_DEVICES` set by the user leaves one driver: that one.
    Where the serial devices are sub-devices (Intel's runtime) the parallel device when
    its call is one launch (`parallel_launches`)."""
    return _choose_device(module, device_vector_width())[0]


def _choose_device(module, width: int) -> tuple[Any, tuple | None]:
    """`choose_device`, and the parallel device's program as `_parallel_emission` made
    it (emitter, source) when that device is chosen by it (`OpenCLFunction` takes it
    instead of emitting the program again), else None."""
    serial = serial_device()
    if serial is None:
        return default_device(), None
    if _subdevice(serial):
        parallel = default_device()
        launches, emitter, source = _parallel_emission(module, parallel, width)
        return (parallel, (emitter, source)) if launches == 1 else (serial, None)
    from dlpc.backends.runtime.profile import kernel_costs

    if estimate_seconds(kernel_costs(module)) < PARALLEL_SECONDS:
        return serial, None
    return default_device(), None


def parallel_launches(module, device) -> int:
    """The launches a call of `module` takes on the parallel `device` (its kernels split
    by images into one chain of a work-group per compute unit where they can,
    `OpenCLEmitter.emit`). Where the serial devices are sub-devices of the parallel
    one (Intel's runtime: a launch's hand-off to the worker threads costs the caller
    2-3 us, not PoCL pthread's 30-70) the model takes the parallel device when that is
    one launch, else a serial one (figures: docs/design/opencl-experiments.md)."""
    return _parallel_emission(module, device, device_vector_width())[0]


def _parallel_emission(module, device, width: int) -> tuple[int, Any, str]:
    """(launches a call, emitter, program) of `module` on the parallel `device`, emitted
    as `OpenCLFunction` emits it for that device."""
    from dlpc.backends.c import find_main
    from dlpc.backends.opencl import OpenCLEmitter
    from dlpc.dialects.loop import KernelOp

    fn = find_main(module)
    aliases = reshape_aliases(fn)
    units = device.max_compute_units
    emitter = OpenCLEmitter(module, width)
    source = emitter.emit(kernel_runs(fn, aliases), parts=units if units > 1 else 1)
    chained = {k for chain in emitter.chains for k in chain.kernels}
    kernels = [op for op in fn.body.block.ops if isinstance(op, KernelOp) and op not in aliases]
    return len(emitter.chains) + sum(1 for k in kernels if k not in chained), emitter, source


#: a call whose estimated one-core time (`estimate_seconds`) is at least this runs on a
#: team of two serial devices (`team_devices`) when the whole call is one chain: the
#: helper thread's wake-up (10-30 us when it has stopped spinning) and the barriers
#: cost less than the second core saves from about here
TEAM_SECONDS = 60e-6
#: ... and at most this: a longer call runs as before (`choose_device`: PoCL pthread's
#: split chain), where a team measured no better (a helper sharing its CPU with another
#: process holds the call's last range of images while the caller spins; figures:
#: docs/design/opencl-experiments.md)
TEAM_MAX_SECONDS = 2e-3
#: spin reads a team chain's helper makes waiting for the next call (then it returns,
#: and its thread sleeps until a call wakes it)
TEAM_ARM_SPINS = 100_000
#: a team chain whose members all split by images (`backends.opencl.batch_split`) runs
#: in this many ranges of images (the first that every member's batch and first NDRange
#: dimension divide into), each range through every member; 1: by each member's
#: work-items (`backends.opencl.TEAM_CHUNKS` chunks a member, a wait after each member)
TEAM_IMAGE_GROUPS = (16, 8, 4, 2, 1)


#: `cl_intel_exec_by_local_thread`'s queue property: the queue's commands run in the
#: host thread that waits for them (`clFinish`), as PoCL's basic driver runs a launch
CL_QUEUE_THREAD_LOCAL_EXEC_ENABLE_INTEL = 1 << 31


def _queue_flags(device) -> Any:  # (pyopencl types it as an enum; a vendor bit is not one)
    """The properties of a device's in-order queue: on a serial sub-device of a runtime
    with `cl_intel_exec_by_local_thread` (Intel's), its commands run in the waiting
    thread instead of being handed to a worker thread: a launch and its wait cost 1.9
    instead of 3.1 us here, and a team's two launches each run in their own host
    thread (`Team`), as on PoCL basic."""
    if device.max_compute_units != 1 or not _subdevice(device):
        return 0
    if "cl_intel_exec_by_local_thread" not in device.extensions.split():
        return 0
    return CL_QUEUE_THREAD_LOCAL_EXEC_ENABLE_INTEL


def context(device=None):
    """One OpenCL context and in-order queue per device and process (`device` None: the
    `default_device()`)."""
    if device is None:
        device = default_device()
    key = devices().index(device)
    if key not in _CONTEXTS:
        cl = _cl()
        ctx = cl.Context([device])
        _CONTEXTS[key] = (ctx, cl.CommandQueue(ctx, device, properties=_queue_flags(device)))
    return _CONTEXTS[key]


_TEAM_CONTEXTS: dict[tuple[int, ...], tuple] = {}


def team_context(team: list) -> tuple:
    """One OpenCL context of the `team`'s devices and an in-order queue per device, per
    process."""
    key = tuple(devices().index(d) for d in team)
    if key not in _TEAM_CONTEXTS:
        cl = _cl()
        ctx = cl.Context(list(team))
        queues = [cl.CommandQueue(ctx, d, properties=_queue_flags(d)) for d in team]
        _TEAM_CONTEXTS[key] = (ctx, queues)
    return _TEAM_CONTEXTS[key]


_LIB: Any = None


def _opencl_library():
    """The OpenCL ICD loader pyopencl uses, through ctypes: pyopencl holds the GIL in
    `enqueue_nd_range_kernel`, and PoCL's basic driver runs the kernel inside that call,
    so a team's two launches would run one after the other; a ctypes call releases the
    GIL."""
    global _LIB
    if _LIB is None:
        import ctypes
        import ctypes.util

        cl = _cl()
        here = Path(cl.__file__).parent
        found = sorted(here.glob(".libs/libOpenCL*")) + sorted(
            here.parent.glob("pyopencl.libs/libOpenCL*")
        )
        name = str(found[0]) if found else ctypes.util.find_library("OpenCL")
        if name is None:
            raise DlpcError("error: opencl: the OpenCL library is not found for a team launch")
        lib = ctypes.CDLL(name)
        size_p = ctypes.POINTER(ctypes.c_size_t)
        lib.clEnqueueNDRangeKernel.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_uint,
            size_p,
            size_p,
            size_p,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.clFinish.argtypes = [ctypes.c_void_p]
        one = (ctypes.c_size_t * 1)(1)
        _LIB = (lib, one)
    return _LIB


def _current_cpu() -> int:
    """The CPU the calling thread runs on (glibc's `sched_getcpu`), -1 where unknown."""
    global _GETCPU
    if _GETCPU is None:
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _GETCPU = libc.sched_getcpu
            _GETCPU.restype = ctypes.c_int
        except (OSError, AttributeError):
            _GETCPU = False
    return int(_GETCPU()) if _GETCPU else -1


_GETCPU: Any = None


def _launch_one(queue_ptr: int, kernel_ptr: int) -> int:
    """Enqueue a kernel of one work-item and wait for it, with the GIL released; the
    OpenCL status (0: done)."""
    lib, one = _opencl_library()
    err = lib.clEnqueueNDRangeKernel(queue_ptr, kernel_ptr, 1, None, one, one, 0, None, None)
    return err or lib.clFinish(queue_ptr)


class Team:
    """The helper of a team chain (`backends.opencl.OpenCLEmitter.team_chain`): a daemon
    thread that keeps the chain's role-1 launch armed on the second serial device, so
    that a call the caller starts (`start`: the call id in `sync[TEAM_GO]`) finds it
    spinning and joins in well under a microsecond. A launch that waited
    `TEAM_ARM_SPINS` reads for a call returns, and the thread sleeps until the next call
    wakes it (`start`); the caller's own launch waits `TEAM_WAIT_SPINS` reads for the
    helper to join, then runs the call alone. Whatever the helper does, every call is
    done by the caller's launch returning (a helper that never comes costs the wait).
    The helper's kernel arguments are set by the thread itself (`rebind`: an output's
    array changed), the argument version in `sync` telling an armed launch it is stale.
    The thread holds no reference to the compiled model: `stop` (at its collection, and
    at exit) ends it. The helper thread keeps off the CPU the caller starts a call on
    (`start` sets the helper's affinity, when the caller's CPU changed and the process
    may use more than one): left to the scheduler, on a machine with other load, the two
    often shared a CPU, the helper spinning while the caller's launch waited for the CPU
    (a call then took the caller's time plus the helper's spin; pinned apart, the two
    launches overlapped)."""

    def __init__(self, queue, kernel, sync: np.ndarray, version_pos: int):
        self.queue, self.kernel, self.sync = queue, kernel, sync
        self.next_id = 1
        self.version_pos = version_pos
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.pending: dict[int, Any] = {}
        self.version = 0
        self.armed = False
        self.stopped = False
        self.error = 0
        self.avoided = -1  # the CPU the helper keeps off: the caller's at its last start
        self.tid = 0  # the helper thread's (set by it)
        try:
            self.allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):  # (not Linux)
            self.allowed = set()
        self.launches = {k: 0 for k in (1, 3, 4)}  # TEAM_JOINED, TEAM_IDLE, TEAM_STALE
        self.thread = threading.Thread(target=self._run, name="dlpc-opencl-team", daemon=True)
        self.thread.start()
        _TEAMS.add(self)

    def start(self) -> None:
        """Begin the next call: its id in `sync[TEAM_GO]`, the helper woken unless armed."""
        from dlpc.backends.opencl import TEAM_GO

        self.sync[TEAM_GO] = self.next_id
        self.next_id = (self.next_id + 1) & 0x7FFFFFFFFFFFFFFF or 1
        cpu = _current_cpu()
        if cpu != self.avoided and self.tid and len(self.allowed) > 1 and cpu in self.allowed:
            try:  # (the helper, spinning or asleep, moves off the caller's CPU)
                os.sched_setaffinity(self.tid, self.allowed - {cpu})
                self.avoided = cpu
            except OSError:
                self.allowed = set()
        if not self.armed and not self.error:
            self.wake.set()

    def rebind(self, pos: int, arg) -> None:
        """Argument `pos` of the helper's kernel, from the next launch it arms on."""
        from dlpc.backends.opencl import TEAM_VERSION

        with self.lock:
            self.pending[pos] = arg
            self.version = (self.version + 1) & 0x7FFFFFFF
            self.sync[TEAM_VERSION] = self.version

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()

    def close(self) -> None:
        """`stop`, then wait (at most a second) for the helper's armed launch to return:
        at the compiled model's collection its buffers go next, and a launch still
        running on them (Intel's runtime runs it on a worker thread of its own) would
        read freed memory (a segmentation fault in the next test, seen on Intel's CPU
        runtime)."""
        self.stop()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)

    def wait_idle(self, timeout: float = 0.01) -> bool:
        """Wait (at most `timeout` seconds) until the helper's launch has returned and
        nothing is spinning on the second CPU (bench/opencl.py, before timing another
        runtime: the helper's spin after a call would take a core from it)."""
        end = time.perf_counter() + timeout
        while (self.armed or self.wake.is_set()) and not self.stopped and not self.error:
            if time.perf_counter() > end:
                return False
            time.sleep(2e-5)
        return True

    def _run(self) -> None:
        from dlpc.backends.opencl import TEAM_GO, TEAM_IDLE, TEAM_RESULT, TEAM_SEEN

        queue, kernel = self.queue.int_ptr, self.kernel.int_ptr
        self.tid = threading.get_native_id()
        while True:
            self.wake.wait()
            self.wake.clear()
            while not self.stopped:
                with self.lock:
                    if self.pending:
                        for pos, arg in self.pending.items():
                            self.kernel.set_arg(pos, arg)
                        self.kernel.set_arg(self.version_pos, np.int32(self.version))
                        self.pending.clear()
                self.armed = True
                err = _launch_one(queue, kernel)
                self.armed = False
                if err:  # (the caller runs every call alone from now on)
                    self.error = err
                    return
                result = int(self.sync[TEAM_RESULT])
                self.launches[result] = self.launches.get(result, 0) + 1
                # (a call started while the launch gave up, seeing it armed: not woken)
                if result == TEAM_IDLE and self.sync[TEAM_GO] == self.sync[TEAM_SEEN]:
                    break
            if self.stopped:
                return


_TEAMS: weakref.WeakSet[Team] = weakref.WeakSet()


def _stop_teams() -> None:
    """At exit: end every helper thread (each is at most one launch of `TEAM_ARM_SPINS`
    reads from its wait) before the OpenCL objects go."""
    teams = list(_TEAMS)
    for team in teams:
        team.stop()
    for team in teams:
        team.thread.join(timeout=1.0)


atexit.register(_stop_teams)


def _build_failure(e: Exception) -> str:
    """What the OpenCL compiler said, in one line: pyopencl's message is the status code
    repeated, then the build log; the log's first `error:` line (else its first line, else
    the status) is the part a user can act on."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    status = lines[0].split(" - ")[0]
    log = [ln for ln in lines[1:] if not ln.startswith("Build on <")]
    first = next((ln for ln in log if "error" in ln.lower()), log[0] if log else "")
    return f"{status}: {first}" if first else status


@dataclass(frozen=True)
class OpenCLPlan:
    """What an `OpenCLFunction` is made of, decided before any OpenCL object exists
    (`plan_function`; devices are only queried): where it runs, the program, and @main's
    buffers and steps as plain data. `OpenCLFunction._bind` creates the objects."""

    device: Any  # the device the program is built for (a team's first)
    team_devices: tuple[Any, ...] | None  # a team of serial devices (`Team`), or None
    source: str  # the OpenCL C program
    launches: Mapping[Any, Launch]  # loop.kernel -> its launch (`OpenCLEmitter.launches`)
    chains: tuple[Chain, ...]  # runs of kernels launched as one
    # every memref value of @main -> where it lives: ("arg", position), ("global", name)
    # or ("slot", index of `slots`); aliases (reshape kernels, reinterpret casts) share
    homes: Mapping[Any, tuple[str, Any]]
    slots: tuple[tuple[int, str], ...]  # intermediates' device buffers: (bytes, what for)
    global_values: Mapping[str, np.ndarray]  # `memref.global`s' values, by name
    # what a call does, in @main's order: ("kernel", op) (or its chain's launch, in
    # its last member's place), ("copy", destination, source, bytes)
    steps: tuple[tuple, ...]
    aliased: tuple[Any, ...]  # reshape kernels run as aliases (no launch)


def plan_function(
    module,
    fn,
    arg_specs,
    *,
    device: Any = None,
    team: list | None = None,
    vector_width: int | None = None,
    profile: str | None = None,
    gpu_params: dict | None = None,
    tuning_log: str | None = None,
) -> OpenCLPlan:
    """The plan of `module` (@main `fn`, its arguments' `(shape, dtype)`s): the device
    (`choose_device`) or a team (`choose_team`), the program emitted for it (chains,
    split by images, team chains), then the buffers (`_plan_buffers`). `profile`
    "gpu" (`launch_profile`): GPU-shaped launches on `device` or the default device,
    with `gpu_params` (kernel name -> `GpuParams`) and a tuning log's params for that
    device (`_gpu_plan`)."""
    from dlpc.backends.opencl import OpenCLEmitter

    if launch_profile(profile, device) == "gpu":
        return _gpu_plan(module, fn, device, vector_width, gpu_params, tuning_log)

    # the lanes' width: the device's (`device_vector_width`), or the caller's (8: the plan
    # `dlpc --emit=opencl` writes)
    width = vector_width or device_vector_width()
    emitter = OpenCLEmitter(module, width)
    aliases = reshape_aliases(fn)  # reshape kernels: the result is the operand
    # a team of two serial devices, each launch from its own thread (`Team`), when
    # the whole call is one chain (`team_run`) and worth the second core
    if team is None and device is None:
        team = choose_team(module)
    team_devices: tuple[Any, ...] | None = None
    run: list = (team_run(fn, aliases) if team else None) or []
    # by images when every member splits so (`batch_split`): one wait a call; else
    # by each member's work-items, a wait after each member
    shape = arg_specs[0][0] if arg_specs else ()
    batch = shape[0] if shape else 1
    candidates = [g for g in TEAM_IMAGE_GROUPS if batch % g == 0] if team and run else []
    source = ""
    for groups in candidates:  # (1 always divides)
        source = emitter.emit([run], parts=groups, team=len(team or ()))
        if [c.kernels for c in emitter.chains] == [run]:
            team_devices = tuple(team or ())
            break
        # (a member without a body, too many parameters, no split: launched as usual)
        emitter = OpenCLEmitter(module, width)
    if team_devices is not None:
        device = team_devices[0]
    else:
        prepared = None  # (the program `_choose_device` emitted for its choice)
        if device is None:
            device, prepared = _choose_device(module, width)
        # on a device that runs every launch in the calling thread, consecutive
        # kernels are one launch (`Chain`); on a device with several compute units,
        # consecutive kernels that split by images (`batch_split`) are one launch of a
        # work-group per unit: one hand-off to the sleeping workers a call instead of
        # one a kernel
        units = device.max_compute_units if _cpu(device) else 0
        if prepared is not None:
            emitter, source = prepared
        else:
            runs = kernel_runs(fn, aliases) if units else None
            source = emitter.emit(runs, parts=units if units > 1 else 1)
    split = any(chain.parts > 1 for chain in emitter.chains)
    homes, slots, global_values, steps, aliased = _plan_buffers(module, fn, aliases, split)
    return OpenCLPlan(
        device,
        team_devices,
        source,
        dict(emitter.launches),
        tuple(emitter.chains),
        homes,
        slots,
        global_values,
        steps,
        aliased,
    )


PROFILES = ("cpu", "gpu")


def device_key(device) -> str:
    """The name GPU-plan tuning records are keyed by (`tune/gpu.py`): the OpenCL
    device's name as the driver gives it (`NVIDIA H200`, PoCL's `cpu-haswell-...`),
    spaces trimmed; a log from one device never applies on another."""
    return " ".join(str(device.name).split())


def launch_profile(profile: str | None, device=None) -> str:
    """The launch plans a model gets: `profile` ("cpu" or "gpu"), else
    `$DLPC_OPENCL_PROFILE`, else "gpu" when the device (`device`, else the default
    device) is a GPU and "cpu" otherwise; a one-line error for any other name."""
    chosen = profile or settings.get("DLPC_OPENCL_PROFILE")
    if chosen and chosen not in PROFILES:
        where = "profile=" if profile else "DLPC_OPENCL_PROFILE="
        raise DlpcError(f"error: opencl: {where}{chosen!r} is no launch profile (cpu or gpu)")
    if chosen:
        return chosen
    return "cpu" if _cpu(device if device is not None else default_device()) else "gpu"


def _gpu_plan(
    module, fn, device, vector_width, gpu_params: dict | None = None, tuning_log: str | None = None
) -> OpenCLPlan:
    """`plan_function` under the GPU profile: every kernel its own launch on one
    in-order queue (`backends.opencl.gpu_launch`), no chains or teams. Each kernel's
    plan params (`GpuParams`): `gpu_params`' by its name, else the tuning log's best
    record for its signature measured on this device (by name, `gpu_launch.logged_params`),
    else the defaults. The plans are sized by the device's facts (`GpuProfile.of_device`:
    its largest work-group, compute units and local memory)."""
    from dlpc.backends.opencl import OpenCLEmitter
    from dlpc.backends.opencl.gpu_launch import GpuProfile

    if device is None:
        device = default_device()
    gpu = GpuProfile.of_device(device)
    params = {}
    if tuning_log:
        from dlpc.backends.opencl.gpu_launch import logged_params

        params = logged_params(tuning_log, module, device_key(device))
    params.update(gpu_params or {})
    emitter = OpenCLEmitter(module, gpu=gpu, gpu_params=params)  # (no lanes: no width)
    source = emitter.emit()
    aliases = reshape_aliases(fn)
    homes, slots, global_values, steps, aliased = _plan_buffers(module, fn, aliases, False)
    return OpenCLPlan(
        device,
        None,
        source,
        dict(emitter.launches),
        (),
        homes,
        slots,
        global_values,
        steps,
        aliased,
    )


HOST_STEPS = ("load", "store", "scalar", "if", "else", "end", "while", "do")


def _host_flow(block, steps: list):
    """The ops of `block` for `_plan_buffers`, host control flow (scf.if / scf.while over
    buffer state: passes/lower/_control_to_loop.py) flattened: the ops of its regions in
    order, with the host's own steps appended to `steps` around them: ("if", cond) ...
    ("else",) ... ("end",); ("while",) ... ("do", cond) ... ("end",); ("load", value,
    memref), ("store", value, memref) and ("scalar", arith op) on the host's scalars.
    `OpenCLFunction._bind` nests them (`_nest`), `_enqueue` runs them."""
    from xdsl.dialects import arith, memref, scf

    for op in block.ops:
        if isinstance(op, scf.IfOp) and not op.results:
            steps.append(("if", op.cond))
            yield from _host_flow(op.true_region.block, steps)
            steps.append(("else",))
            if op.false_region.blocks:
                yield from _host_flow(op.false_region.block, steps)
            steps.append(("end",))
        elif isinstance(op, scf.WhileOp) and not op.results:
            steps.append(("while",))
            yield from _host_flow(op.before_region.block, steps)
            yield from _host_flow(op.after_region.block, steps)
            steps.append(("end",))
        elif isinstance(op, scf.ConditionOp):
            steps.append(("do", op.condition))
        elif isinstance(op, scf.YieldOp):
            continue
        elif isinstance(op, memref.LoadOp):
            steps.append(("load", op.res, op.memref))
        elif isinstance(op, memref.StoreOp):
            steps.append(("store", op.value, op.memref))
        elif isinstance(op, arith.ConstantOp | arith.CmpiOp | arith.AndIOp | arith.AddiOp):
            steps.append(("scalar", op))
        else:
            yield op


def _nest(steps: list) -> list:
    """Flat steps with `_host_flow`'s markers as nested ones: ("if", cond, then steps,
    else steps), ("while", condition steps, cond, body steps)."""
    return _nest_from(steps, 0, "")[0]


def _nest_from(steps: list, i: int, stop: str) -> tuple[list, int]:
    out: list = []
    while i < len(steps) and steps[i][0] != stop:
        step = steps[i]
        if step[0] == "if":
            then, i = _nest_from(steps, i + 1, "else")
            other, i = _nest_from(steps, i + 1, "end")
            step = ("if", step[1], then, other)
        elif step[0] == "while":
            before, i = _nest_from(steps, i + 1, "do")
            cond = steps[i][1]
            after, i = _nest_from(steps, i + 1, "end")
            step = ("while", before, cond, after)
        out.append(step)
        i += 1
    return out, i


def _plan_buffers(module, fn, aliases: dict, split: bool):
    """@main's buffers and steps (`OpenCLPlan`): arguments and globals where they are,
    each intermediate in a slot, a slot whose every memref was deallocated reused by a
    later allocation of its size class (not in a split chain: work-groups run their
    images at their own pace, a buffer another value used may still be read)."""
    from xdsl.dialects import arith, func, memref
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

    from dlpc.backends.c import kernel_for, memref_info
    from dlpc.dialects.graph import numpy_dtype
    from dlpc.dialects.loop import KernelOp

    global_values: dict[str, np.ndarray] = {}
    for op in module.body.block.ops:
        if isinstance(op, memref.GlobalOp):
            shape, elt = memref_info(op.type)
            init = op.initial_value
            if not isinstance(init, DenseIntOrFPElementsAttr):  # uninitialized: zeros, as C
                values = np.zeros(shape, dtype=numpy_dtype(elt))
            else:
                values = np.array(list(init.get_values()), dtype=numpy_dtype(elt))
            if values.size == 1 and math.prod(shape) > 1:
                values = np.full(shape, values[0])
            global_values[op.sym_name.data] = values.reshape(shape)
    homes: dict[Any, tuple[str, Any]] = {v: ("arg", k) for k, v in enumerate(fn.body.block.args)}
    slots: list[tuple[int, str]] = []
    free: dict[int, list[int]] = {}  # size class -> slots no longer in use
    owners: dict[int, int] = {}  # slot -> memrefs living in it
    steps: list[tuple] = []
    aliased: list = []

    def share(result, source) -> None:  # `result` lives in `source`'s buffer
        homes[result] = homes[source]
        kind, where = homes[source]
        if kind == "slot" and where in owners:
            owners[where] += 1

    for op in _host_flow(fn.body.block, steps):  # (scf.if / scf.while: marker steps)
        if isinstance(op, KernelOp) and op in aliases:
            source, result = aliases[op]
            share(result, source)
            aliased.append(op)
        elif isinstance(op, KernelOp):
            steps.append(("kernel", op))
        elif isinstance(op, memref.AllocOp | memref.AllocaOp):
            if any(op.memref is result for _, result in aliases.values()):
                continue  # given its operand's buffer by the reshape
            shape, elt = memref_info(op.memref.type)
            nbytes = max(math.prod(shape), 1) * np.dtype(numpy_dtype(elt)).itemsize
            size_class = _size_class(nbytes)
            pool = free.get(size_class) if not split else None
            if pool:
                slot = pool.pop()
            else:
                slot = len(slots)
                slots.append((size_class, kernel_for(op)))
            homes[op.memref] = ("slot", slot)
            owners[slot] = 1
        elif isinstance(op, memref.DeallocOp):
            kind, where = homes.get(op.memref, ("", None))
            if kind == "slot" and where in owners:
                owners[where] -= 1
                if owners[where] == 0:  # no memref lives in it any more: reuse it
                    del owners[where]
                    free.setdefault(slots[where][0], []).append(where)
        elif isinstance(op, memref.GetGlobalOp):
            homes[op.memref] = ("global", op.name_.root_reference.data)
        elif isinstance(op, memref.ReinterpretCastOp):  # loop-views: a reshape
            _check_reinterpret(op)
            share(op.result, op.source)
        elif isinstance(op, memref.CopyOp):
            if _nbytes(op.source):  # (a zero-byte copy is an OpenCL error)
                steps.append(("copy", op.destination, op.source, _nbytes(op.source)))
        elif isinstance(op, arith.ConstantOp | func.ReturnOp):
            continue
        else:
            raise DlpcError(f"error: opencl backend: unsupported op '{op.name}' in @main")
    return homes, tuple(slots), global_values, tuple(steps), tuple(aliased)


class OpenCLFunction(ModuleFunction):
    """A module lowered for the OpenCL target (`pipeline.TARGET_PASSES["opencl"]`: the
    printer and this runtime change nothing in it) compiled to OpenCL and callable on
    numpy arrays.

    Made in two steps: `plan_function` decides, as plain data (`OpenCLPlan`), the device,
    the program and where every buffer of @main lives; `_bind` creates the OpenCL objects
    from that plan. Everything but the inputs and outputs is set up once: the program is built
    once (PoCL also keeps the binary in its kernel cache, `_pocl_cache`), `memref.global`s
    and the bound parameters (`bind_params`) are resident device buffers, intermediates
    are device buffers planned once (a buffer whose `memref.dealloc` has run is reused by
    a later allocation of the same size class), and every kernel object has its arguments
    set. A call uploads the inputs (and parameters when `params=` is given), enqueues the
    kernels and copies, and reads the outputs back. Calls are serialised by a lock: the
    buffers are shared."""

    def __init__(
        self,
        module,
        *,
        name: str = "module",
        device=None,
        team=None,
        vector_width=None,
        profile: str | None = None,
        svm: bool = True,
        gpu_params: dict | None = None,
        tuning_log: str | None = None,
    ):
        """`gpu_params` (kernel name -> `GpuParams`) and `tuning_log` (`dlpc-tune --target
        opencl`'s records for this device) choose the GPU plans' params (`_gpu_plan`);
        the CPU plans take neither."""
        from dlpc.backends.c import find_main

        self.lock = threading.Lock()
        self.svm = svm  # False: every argument in a device buffer (device copies in and out)
        self.fn = find_main(module)
        self.bind_signature(self.fn)
        self.plans = launch_profile(profile, device)  # "cpu" or "gpu" launch plans
        plan = plan_function(
            module,
            self.fn,
            self.arg_specs,
            device=device,
            team=team,
            vector_width=vector_width,
            profile=self.plans,
            gpu_params=gpu_params,
            tuning_log=tuning_log,
        )
        self._bind(module, plan, name)

    def _bind(self, module, plan: OpenCLPlan, name: str) -> None:
        """The OpenCL objects of `plan`: context and queues, the built program, the device
        buffers (arguments, globals, transposed copies, the intermediates' slots) and
        every kernel object with its arguments set, in `self.steps` for a call."""
        cl = _cl()
        self.plan = plan
        self.team: Team | None = None
        self.team_devices = list(plan.team_devices) if plan.team_devices else None
        self.team_kernel: Any = None  # the caller's kernel of the team chain
        self.device = plan.device
        helper_queue = None
        if self.team_devices is not None:
            self.ctx, queues = team_context(self.team_devices)
            self.queue, helper_queue = queues[0], queues[1]
        else:
            self.ctx, self.queue = context(self.device)
        self.source = plan.source
        self.device_name = (
            f"{len(self.team_devices)} x {self.device.name}"
            if self.team_devices
            else self.device.name
        )
        self.chains = list(plan.chains)
        chain_of = {k: chain for chain in plan.chains for k in chain.kernels}
        chain_buffers: dict[tuple, Any] = {}
        try:
            self.program = build(self.ctx, self.source)
        except cl.Error as e:
            raise DlpcError(
                f"error: opencl: the program for '{name}' does not build: {_build_failure(e)}"
            ) from None
        mf = cl.mem_flags
        self.sizes: dict[int, int] = {}  # id(device buffer) -> bytes
        # @main's arguments: inputs and parameters (uploaded), outputs (read back)
        self.arg_buffers = [
            self._device_alloc(max(math.prod(shape), 1) * dtype.itemsize, f"argument {k}")
            for k, (shape, dtype) in enumerate(self.arg_specs)
        ]
        arg_homes: list[Any] = list(self.arg_buffers)
        # inputs and outputs in shared virtual memory where the device has fine-grained
        # SVM buffers (PoCL's CPU devices): host copies, no upload or read commands
        self.svm_args = self._svm_arguments(module)
        self.svm_tags = {k: cl.SVM(array) for k, array in self.svm_args.items()}
        for k, tag in self.svm_tags.items():
            arg_homes[k] = tag
        bound: list[tuple[Any, list]] = []  # every kernel object and its arguments
        device = self.ctx.devices[0]
        cpu = bool(device.type & cl.device_type.CPU)
        globals_ = {
            sym: self._buffer(mf.READ_ONLY, values) for sym, values in plan.global_values.items()
        }
        slots = [self._device_alloc(nbytes, what) for nbytes, what in plan.slots]

        def buffer_of(v):
            kind, where = plan.homes[v]
            return {"arg": arg_homes, "global": globals_, "slot": slots}[kind][where]

        # resident buffers some kernels read transposed (`Launch.relayout`): a copy each,
        # globals made now, parameters on every upload of them (`_upload`)
        transposed: dict[tuple, Buffer] = {}
        self.param_copies: dict[int, list[tuple[tuple[int, ...], Buffer]]] = {}

        def relaid(v, perm):
            kind, where = plan.homes[v]
            key = (where, perm)
            if key in transposed:
                return transposed[key]
            if kind == "global":
                values = np.ascontiguousarray(plan.global_values[where].transpose(perm))
                transposed[key] = self._buffer(mf.READ_ONLY, values)
            else:
                shape, dtype = self.arg_specs[where]
                nbytes = max(math.prod(shape), 1) * dtype.itemsize
                transposed[key] = self._device_alloc(nbytes, f"argument {where} transposed")
                self.param_copies.setdefault(where, []).append((perm, transposed[key]))
            return transposed[key]

        self.steps: list[tuple] = []  # what a call enqueues: kernels, chains, copies
        self.kernel_steps: list[tuple] = []  # the same with every kernel its own launch
        self.kernel_ops: list = []
        self.aliased: list = list(plan.aliased)
        for what, *step in plan.steps:
            if what in HOST_STEPS:  # the host's control flow (`_host_flow`)
                host = (what, *step)
                if what in ("load", "store"):
                    from dlpc.backends.c import memref_info
                    from dlpc.dialects.graph import numpy_dtype

                    _, elt = memref_info(step[1].type)
                    host = (what, step[0], buffer_of(step[1]), np.dtype(numpy_dtype(elt)))
                self.steps.append(host)
                self.kernel_steps.append(host)
                continue
            if what == "copy":
                destination, source, nbytes = step
                copy = ("copy", buffer_of(destination), buffer_of(source), nbytes)
                self.steps.append(copy)
                self.kernel_steps.append(copy)
                continue
            (op,) = step
            launch = plan.launches[op]
            kernel = cl.Kernel(self.program, launch.name)
            kernel_args = [
                relaid(v, launch.relayout[v]) if v in launch.relayout else buffer_of(v)
                for v in launch.args
            ]
            kernel.set_args(*kernel_args)
            bound.append((kernel, kernel_args))
            local = launch.local_size
            if local is None and cpu:
                local = cpu_local_size(launch.global_size, device.max_compute_units)
            launched = ("kernel", kernel, launch.global_size, local, op.sym)
            self.kernel_steps.append(launched)
            self.kernel_ops.append(op)
            chain = chain_of.get(op)
            if chain is None:
                self.steps.append(launched)
                continue
            for v, buffer in zip(launch.args, kernel_args):
                chain_buffers[v, launch.relayout.get(v)] = buffer
            if op is not chain.kernels[-1]:
                continue
            # the chain's launch, in its last kernel's place
            kernel = cl.Kernel(self.program, chain.name)
            chain_args = [chain_buffers[key] for key in chain.args]
            sym = f"chain of {', '.join(k.sym for k in chain.kernels)}"
            if chain.team > 1:
                kernel.set_args(*self._team(chain, chain_args, helper_queue))
                self.team_kernel = kernel
                bound.append((kernel, chain_args))
                self.steps.append(("team", kernel, (1,), (1,), sym))
                continue
            kernel.set_args(*chain_args)
            bound.append((kernel, chain_args))
            self.steps.append(("kernel", kernel, (chain.parts,), (1,), sym))
        self.steps, self.kernel_steps = _nest(self.steps), _nest(self.kernel_steps)
        # per call (the aliased reshapes are free, a chain is one)
        self.num_launches = sum(1 for step in self.steps if step[0] in ("kernel", "team"))
        self.launches_per_call = [1] * len(self.kernel_ops)  # (profile_kernels counts them)
        # the kernels' arguments hold no reference to their buffers: keep every one alive
        self.device_buffers = [
            *self.arg_buffers,
            *self.svm_tags.values(),
            *slots,
            *globals_.values(),
            *self.svm_args.values(),
            *transposed.values(),
        ]
        self.params_resident = False  # the bound parameters are in their device buffers
        self.bound_args = bound  # (kernel, its arguments): dlpc.runtime rebinds arguments
        # outputs in SVM are handed to the caller as they are (`_svm_output`): where each
        # one is a kernel argument, to bind another array of its pool
        first_output = self.num_inputs + len(self.param_names)
        self.svm_uses: dict[int, list[tuple[Any, int]]] = {
            k: [
                (kernel, pos)
                for kernel, kernel_args in bound
                for pos, a in enumerate(kernel_args)
                if a is tag
            ]
            for k, tag in self.svm_tags.items()
            if k >= first_output
        }
        self.svm_pools: dict[int, list[list]] = {k: [] for k in self.svm_uses}
        self.svm_bound: dict[int, np.ndarray] = dict(self.svm_args)  # what the kernels write
        # off the host's CPU, the other outputs are read into pinned host arrays handed to
        # the caller (`_pinned_output`)
        pinned = self.team_devices is None and _pinned_outputs(self.device)
        self.pinned_pools: dict[int, list[list]] = {
            k: []
            for k in range(first_output, len(self.arg_specs))
            if pinned and k not in self.svm_args
        }

    def _svm_arguments(self, module) -> dict[int, np.ndarray]:
        """@main's inputs and outputs (by position) given a fine-grained SVM array each,
        when the device has fine-grained SVM buffers and no `memref.copy` reads or writes
        the argument (copies are between device buffers). On PoCL's pthread driver an
        upload is one more hand-off to its worker threads and back (about 20 us a call); a
        host copy into or out of SVM is not a command at all, and the kernels use it as
        any global buffer (a call copies the outputs out after its kernels finished)."""
        from xdsl.dialects import memref

        cl = _cl()
        device = self.ctx.devices[0]
        try:
            fine = bool(device.svm_capabilities & cl.device_svm_capabilities.FINE_GRAIN_BUFFER)
        except (cl.Error, AttributeError):  # OpenCL 1.x: no SVM
            fine = False
        if not fine or not self.svm or settings.get("DLPC_OPENCL_SVM") == "0":
            return {}
        args = self.fn.body.block.args
        copies = [o for o in module.walk() if isinstance(o, memref.CopyOp)]
        copied = {v for o in copies for v in (o.source, o.destination)}
        svm = cl.svm_mem_flags
        first_output = self.num_inputs + len(self.param_names)
        arrays = {}
        for k in [*range(self.num_inputs), *range(first_output, len(args))]:
            shape, dtype = self.arg_specs[k]
            if args[k] in copied or math.prod(shape) == 0:
                continue
            access = svm.READ_ONLY if k < self.num_inputs else svm.WRITE_ONLY
            flags: Any = access | svm.SVM_FINE_GRAIN_BUFFER
            try:
                arrays[k] = cl.svm_empty(self.ctx, flags, shape, dtype, alignment=64)
            except cl.Error:  # (out of SVM: the argument keeps its device buffer)
                continue
        return arrays

    def bind_params(self, params) -> None:
        """Check the parameters once and upload them: they stay on the device, and calls
        without `params=` use them as they are (resident weights)."""
        super().bind_params(params)
        self.params_resident = False

    def __call__(self, *inputs, params=None) -> list[np.ndarray]:
        return self._call(self.queue, inputs, params)

    def _call(self, queue, inputs, params, events=None, steps=None) -> list[np.ndarray]:
        bound = params is None and self.bound_params is not None
        arrays = self._convert(inputs, 0) if bound else self.arguments(inputs, params)
        first_output = self.num_inputs + len(self.param_names)
        with self.lock:
            outputs: list[np.ndarray] = []
            copied: list[int] = []  # outputs copied out of the device's SVM array
            for k, (shape, dtype) in enumerate(self.arg_specs[first_output:], first_output):
                handed = self._svm_output(k) if k in self.svm_pools else None
                if handed is None:
                    handed = self._pinned_output(k) if k in self.pinned_pools else None
                    handed = np.empty(shape, dtype) if handed is None else handed
                    copied.append(k)
                outputs.append(handed)
            if bound and not self.params_resident:  # once, or after a call with params=
                self._upload(queue, self.bound_params or [], self.num_inputs, blocking=True)
            self.params_resident = bound
            self._upload(queue, arrays, 0)
            self._enqueue(queue, self.steps if steps is None else steps, events)
            svm = self.svm_args
            for k, (out, buffer) in enumerate(zip(outputs, self.arg_buffers[first_output:])):
                if out.nbytes and first_output + k not in svm:
                    if self.team_devices is not None:
                        queue.finish()
                        out.reshape(-1).view(np.uint8)[:] = _host_view(buffer)[: out.nbytes]
                    else:
                        _cl().enqueue_copy(queue, out, buffer, is_blocking=False)
            queue.finish()
            for k in copied:
                if k in svm:
                    np.copyto(outputs[k - first_output], svm[k])
        return outputs

    def _svm_output(self, k: int) -> np.ndarray | None:
        """Output `k` for the caller to keep, the kernels bound to write it: a view of an
        SVM array of the output's pool that no earlier result still holds (its view's
        weak reference dead), a new one while the pool has fewer than `SVM_POOL`; None
        when all are held (the call then writes the output's own array and copies it
        out, as before). The copy out of SVM was a call's largest cost after the
        kernels: mobilenet at batch 32, 8 MB, about 0.3 ms. (Caller holds the lock.)"""
        cl = _cl()
        pool = self.svm_pools[k]
        entry = next((e for e in pool if e[1]() is None), None)
        if entry is None and len(pool) < SVM_POOL:
            shape, dtype = self.arg_specs[k]
            flags: Any = cl.svm_mem_flags.WRITE_ONLY | cl.svm_mem_flags.SVM_FINE_GRAIN_BUFFER
            try:
                array = cl.svm_empty(self.ctx, flags, shape, dtype, alignment=64)
            except cl.Error:
                return None
            entry = [array, _dead, cl.SVM(array)]
            pool.append(entry)
        target = entry if entry is not None else [self.svm_args[k], _dead, self.svm_tags[k]]
        if self.svm_bound.get(k) is not target[0]:
            for kernel, pos in self.svm_uses[k]:
                kernel.set_arg(pos, target[2])
                if self.team is not None and kernel is self.team_kernel:
                    self.team.rebind(pos, target[2])
            self.svm_bound[k] = target[0]
        if entry is None:
            return None
        view = entry[0].view()
        entry[1] = weakref.ref(view)
        return view

    def _pinned_output(self, k: int) -> np.ndarray | None:
        """Output `k` for the caller to keep, read into pinned host memory: a view of a
        mapped `ALLOC_HOST_PTR` buffer of the output's pool that no earlier result still
        holds (its view's weak reference dead), a new one while the pool has fewer than
        `SVM_POOL`; None when all are held or the device refuses one (the call then
        reads into a new numpy array, as before). (Caller holds the lock.)"""
        cl = _cl()
        pool = self.pinned_pools[k]
        entry = next((e for e in pool if e[1]() is None), None)
        if entry is None:
            shape, dtype = self.arg_specs[k]
            nbytes = math.prod(shape) * np.dtype(dtype).itemsize
            if len(pool) >= SVM_POOL or not nbytes:
                return None
            flags: Any = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
            try:
                buffer = cl.Buffer(self.ctx, flags, size=nbytes)
                mapping: Any = cl.map_flags.READ | cl.map_flags.WRITE
                array, _ = cl.enqueue_map_buffer(self.queue, buffer, mapping, 0, shape, dtype)
            except cl.Error:
                return None
            entry = [array, _dead, buffer]
            pool.append(entry)
        view = entry[0].view()
        entry[1] = weakref.ref(view)
        return view

    def _upload(self, queue, arrays, first: int, blocking: bool = False) -> None:
        """Copy `arrays` into @main's argument buffers `first`, `first + 1`, ... (the
        host arrays must live until the queue finishes: the caller holds them)."""
        team = self.team_devices is not None
        for k, (buffer, a) in enumerate(zip(self.arg_buffers[first:], arrays), first):
            if k in self.svm_args:
                np.copyto(self.svm_args[k], a)  # (no kernel runs: the last call finished)
            elif team:  # (an armed helper reads nothing before the call starts)
                _host_view(buffer)[: a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            elif a.nbytes:
                _cl().enqueue_copy(queue, buffer, a, is_blocking=blocking)
            for perm, copy in self.param_copies.get(k, []) if a.nbytes else []:
                moved = np.ascontiguousarray(a.transpose(perm))
                if team:
                    _host_view(copy)[: moved.nbytes] = moved.reshape(-1).view(np.uint8)
                else:  # (blocking: the transposed host array is a temporary)
                    _cl().enqueue_copy(queue, copy, moved)

    def _enqueue(self, queue, steps, events, env: dict | None = None) -> None:
        """Enqueue `steps` in order (kernel launches with their planned sizes, device
        copies, the host's control flow over `env`, its scalars), each launch's (kernel
        name, event) appended to `events` when it is a list."""
        cl = _cl()
        launch, copy = cl.enqueue_nd_range_kernel, cl.enqueue_copy
        env = {} if env is None else env
        step = steps[0] if steps else None
        try:
            for step in steps:
                if step[0] in HOST_STEPS:
                    self._host_step(queue, step, events, env)
                    continue
                if step[0] == "copy":
                    copy(queue, step[1], step[2], byte_count=step[3])
                    continue
                if step[0] == "team":
                    self._team_launch(queue, step)
                    continue
                event = launch(queue, step[1], step[2], step[3])
                if events is not None:
                    events.append((step[4], event))
        except cl.Error as e:  # (a device may allocate buffers when first used)
            if step is None or step[0] == "copy":
                raise
            code = e.what.code()
            oom = " (out of memory)" if code in OUT_OF_MEMORY else ""
            # (a launch names its kernel; a host step, a scalar's copy, names its kind)
            launch = step[0] in ("kernel", "team")
            what = f"kernel '{step[4]}'" if launch else f"the host's {step[0]}"
            raise DlpcError(
                f"error: opencl: {what} failed: {e.what.routine()} {code}{oom}"
            ) from None

    def _host_step(self, queue, step, events, env: dict) -> None:
        """One step of the host's control flow: a scalar read from (or written to) a
        device buffer, an arith op on scalars, an if / while over nested steps."""
        cl = _cl()
        what = step[0]
        if what == "load":  # (blocking: the kernels before it have run)
            host = np.empty(1, dtype=step[3])
            cl.enqueue_copy(queue, host, step[2])
            env[step[1]] = host[0]
        elif what == "store":
            cl.enqueue_copy(queue, step[2], np.asarray([env[step[1]]], dtype=step[3]))
        elif what == "scalar":
            env[step[1].results[0]] = _host_scalar(step[1], env)
        elif what == "if":
            self._enqueue(queue, step[2] if env[step[1]] else step[3], events, env)
        else:  # while
            while True:
                self._enqueue(queue, step[1], events, env)
                if not env[step[2]]:
                    break
                self._enqueue(queue, step[3], events, env)

    def _team(self, chain, chain_args: list, helper_queue) -> list:
        """The caller's arguments of a team chain (`chain.team` > 1), its helper's kernel
        and `Team` made: the chain's buffers, then the `sync` words, the role, the spin
        reads and the argument version."""
        from dlpc.backends.opencl import team_sync_words

        cl = _cl()
        flags: Any = cl.svm_mem_flags.READ_WRITE | cl.svm_mem_flags.SVM_FINE_GRAIN_BUFFER
        words = team_sync_words(len(chain.kernels))
        sync = cl.svm_empty(self.ctx, flags, words, np.dtype(np.int64), alignment=64)
        sync[:] = 0
        tag = cl.SVM(sync)
        helper = cl.Kernel(self.program, chain.name)
        n = len(chain_args)
        helper.set_args(*chain_args, tag, np.int32(1), np.int32(TEAM_ARM_SPINS), np.int32(0))
        self.team = Team(helper_queue, helper, sync, n + 3)
        weakref.finalize(self, self.team.close)
        self.team_sync = sync
        self.device_buffers_team = [sync, tag, helper]
        return [*chain_args, tag, np.int32(0), np.int32(0), np.int32(0)]

    def _team_launch(self, queue, step) -> None:
        """A team chain's call (`Team`): the helper told, the caller's launch run with
        the GIL released (the helper's thread needs it to arm); it returns when the
        call is done."""
        team = self.team
        assert team is not None
        team.start()
        err = _launch_one(queue.int_ptr, step[1].int_ptr)
        if err:
            code = " (out of memory)" if err in OUT_OF_MEMORY else ""
            raise DlpcError(f"error: opencl: kernel '{step[4]}' failed: status {err}{code}")

    def profile_kernels(self, inputs, repeat: int = 20, warmup: int = 2):
        """(seconds per kernel in launch order, median over `repeat` calls; median seconds
        of a whole call): the kernels' device times from OpenCL profiling events, on a
        queue of their own with `PROFILING_ENABLE`. A kernel's seconds are those of all
        its launches in a call (a loop body's kernel runs once per iteration, one in the
        branch not taken not at all); `self.launches_per_call` gets the median count."""
        cl = _cl()
        queue = cl.CommandQueue(
            self.ctx, self.device, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        for _ in range(warmup):
            self._call(queue, inputs, None, steps=self.kernel_steps)
        index = {op.sym: k for k, op in enumerate(self.kernel_ops)}
        per_kernel: list[list[float]] = [[] for _ in self.kernel_ops]
        counts: list[list[int]] = [[] for _ in self.kernel_ops]
        calls = []
        for _ in range(max(repeat, 1)):
            events: list = []
            start = time.perf_counter()
            self._call(queue, inputs, None, events, steps=self.kernel_steps)
            calls.append(time.perf_counter() - start)
            seconds, launches = [0.0] * len(per_kernel), [0] * len(per_kernel)
            for name, event in events:
                seconds[index[name]] += (event.profile.end - event.profile.start) * 1e-9
                launches[index[name]] += 1
            for k, (t, n) in enumerate(zip(seconds, launches)):
                per_kernel[k].append(t)
                counts[k].append(n)
        self.launches_per_call = [int(statistics.median(n)) for n in counts]
        return [statistics.median(t) for t in per_kernel], statistics.median(calls)

    def _device_alloc(self, nbytes: int, what: str) -> Any:
        """A device buffer for an intermediate; a failure is the runtime's one line. On a
        team, a fine-grained SVM array (`cl.SVM`): PoCL orders every command using a
        `cl_mem` after the last command that used it, whatever its queue, so the
        helper's launch (armed before the call) would hold up the caller's."""
        cl = _cl()
        try:
            if self.team_devices:
                flags: Any = cl.svm_mem_flags.READ_WRITE | cl.svm_mem_flags.SVM_FINE_GRAIN_BUFFER
                array = cl.svm_empty(self.ctx, flags, nbytes, np.dtype(np.uint8), alignment=64)
                buffer = cl.SVM(array)
            else:
                buffer = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size=nbytes)
        except cl.Error as e:
            raise DlpcError(
                f"error: out of memory: {nbytes} bytes for {what} (opencl: {e.what.routine()}"
                f" {e.what.code()})"
            ) from None
        self.sizes[id(buffer)] = nbytes
        return buffer

    def _buffer(self, flags, host: np.ndarray) -> Buffer:
        """A device buffer holding a copy of `host`. OpenCL has no zero-byte buffers
        (INVALID_BUFFER_SIZE): an empty array gets one unused byte, as outputs and
        allocations do; no kernel reads it (every loop over it has extent 0)."""
        cl = _cl()
        if self.team_devices:  # (SVM, as `_device_alloc`)
            buffer = self._device_alloc(max(host.nbytes, 1), "a constant")
            _host_view(buffer)[: host.nbytes] = host.reshape(-1).view(np.uint8)
            return buffer
        if host.nbytes == 0:
            return cl.Buffer(self.ctx, flags, size=1)
        return cl.Buffer(self.ctx, flags | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)


def _dead():  # (a weak reference to nothing: an array no caller holds)
    return None


def _host_view(buffer) -> np.ndarray:
    """The bytes of a team's SVM buffer (`OpenCLFunction._device_alloc`) as a host array."""
    return buffer.mem.reshape(-1).view(np.uint8)


def _host_scalar(op, env: dict):
    """The value of an arith op of the host's control flow (`_host_flow`)."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IntegerAttr

    if isinstance(op, arith.ConstantOp):
        value = op.value
        if not isinstance(value, IntegerAttr):
            raise DlpcError(f"error: opencl backend: constant {value} in @main")
        return value.value.data
    a, b = (env[v] for v in op.operands)
    if isinstance(op, arith.AndIOp):
        return a & b
    if isinstance(op, arith.AddiOp):
        return a + b
    pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    compare = {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b}
    if pred not in compare:
        raise DlpcError(f"error: opencl backend: comparison '{pred}' in @main")
    return bool(compare[pred])


def team_run(fn, aliases) -> list | None:
    """The kernels of @main `fn` (the reshapes in `aliases` left out) when a call is
    nothing but them (no `memref.copy`), in order: one team chain's members; else None."""
    from xdsl.dialects import memref, scf

    from dlpc.dialects.loop import KernelOp

    if any(isinstance(op, memref.CopyOp | scf.IfOp | scf.WhileOp) for op in fn.body.block.ops):
        return None  # (a copy, or host control flow between the kernels)
    run = [op for op in fn.body.block.ops if isinstance(op, KernelOp) and op not in aliases]
    return run or None


def choose_team(module) -> list | None:
    """The devices of a team (`team_devices`) when there is one and the call's estimated
    one-core time is from `TEAM_SECONDS` to `TEAM_MAX_SECONDS`, else None."""
    team = team_devices()
    if team is None:
        return None
    from dlpc.backends.runtime.profile import kernel_costs

    estimate = estimate_seconds(kernel_costs(module))
    return team if TEAM_SECONDS <= estimate <= TEAM_MAX_SECONDS else None


def cpu_local_size(global_size: tuple[int, ...], units: int) -> tuple[int, ...]:
    """Work-group sizes for a kernel on a CPU device: at least `2 * units` work-groups
    where the NDRange has that many work-items, the outermost dimensions split first.
    PoCL's own choice is one work-group of the whole NDRange for the small NDRanges dlpc
    launches (a few fat work-items each, see `plan_lanes`), and a work-group runs on one
    thread: resnet's convolutions ran on one of the two cores (138 us against 74 split
    in two)."""
    want = 2 * max(units, 1)
    local, groups = [], 1
    for g in global_size:
        if groups >= want:
            local.append(g)
            continue
        split = next((f for f in range(1, g + 1) if g % f == 0 and groups * f >= want), g)
        local.append(g // split)
        groups *= split
    return tuple(local)


def kernel_runs(fn, aliases) -> list[list]:
    """The runs of consecutive kernels of @main `fn` (no `memref.copy` between them; the
    reshape kernels in `aliases` are no launch and left out), of two kernels or more."""
    from xdsl.dialects import memref, scf

    from dlpc.dialects.loop import KernelOp

    runs: list[list] = [[]]
    for op in fn.body.block.ops:
        if isinstance(op, KernelOp) and op not in aliases:
            runs[-1].append(op)
        elif isinstance(op, memref.CopyOp | scf.IfOp | scf.WhileOp):
            runs.append([])  # (host control flow: its kernels run between)
    return [run for run in runs if len(run) > 1]


def reshape_aliases(fn) -> dict:
    """The `graph.reshape` kernels of @main `fn` whose result can be their operand's
    buffer (row-major data is the same bytes in any shape), as kernel -> (operand,
    result): the result is an intermediate `memref.alloc` of the same element type and
    count, and nothing after the reshape in @main writes the operand or the result."""
    from xdsl.dialects import memref

    from dlpc.backends.c import kernel_uses
    from dlpc.dialects.loop import KernelOp
    from dlpc.dialects.typed import memref_type

    ops = list(fn.body.block.ops)
    writes: list[set] = []  # per op of @main: the buffers it writes
    for op in ops:
        if isinstance(op, KernelOp):
            writes.append(kernel_uses(op)[1])
        elif op.regions:  # host control flow: what its kernels write
            inner = [kernel_uses(k)[1] for k in op.walk() if isinstance(k, KernelOp)]
            writes.append(set().union(*inner))
        else:
            writes.append({op.destination} if isinstance(op, memref.CopyOp) else set())
    aliases = {}
    for n, k in enumerate(ops):
        if not isinstance(k, KernelOp) or k.origin is None or k.origin.data != "graph.reshape":
            continue
        free, stored = kernel_uses(k)
        if len(free) != 2 or len(stored) != 1:
            continue
        source, result = free if free[1] in stored else free[::-1]
        if stored != {result} or not isinstance(result.owner, memref.AllocOp):
            continue
        src_type, res_type = memref_type(source), memref_type(result)
        same = src_type.element_type == res_type.element_type and math.prod(
            src_type.get_shape()
        ) == math.prod(res_type.get_shape())
        later = set().union(*writes[n + 1 :])
        if same and not later & {source, result}:
            aliases[k] = (source, result)
    return aliases


def _check_reinterpret(op) -> None:
    """A `memref.reinterpret_cast` in @main is its source's buffer (`_plan_buffers`) when
    it is the same memory under another row-major shape (loop-views' reshapes); else an
    error."""
    from dlpc.backends.c import memref_info

    shape, _ = memref_info(op.result.type)
    offsets = list(op.static_offsets.get_values())
    strides = list(op.static_strides.get_values())
    rowmajor = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
    if op.offsets or op.sizes or op.strides or offsets != [0] or strides != rowmajor:
        raise DlpcError(
            "error: opencl backend: a memref.reinterpret_cast in @main must be static, "
            "row-major and at offset 0"
        )


def _size_class(nbytes: int) -> int:
    """Intermediates are allocated in size classes (powers of two up to 4 KiB, then
    multiples of 4 KiB) so that a freed buffer fits later allocations of about its size."""
    if nbytes <= 4096:
        return 1 << max(nbytes - 1, 0).bit_length()
    return -(-nbytes // 4096) * 4096


def opencl_profile(function: OpenCLFunction, module, inputs, repeat: int = 20):
    """(a `profile.ProfileRow` per kernel in launch order, median seconds of a whole
    call): `dlpc-run --target opencl --profile`, bench/opencl.py."""
    from dlpc.backends.runtime.profile import ProfileRow, kernel_costs

    seconds, call = function.profile_kernels(inputs, repeat)
    launched = {k.sym for k in function.kernel_ops}  # (not the reshapes made aliases)
    costs = [c for c in kernel_costs(module) if c.name in launched]
    if [c.name for c in costs] != [k.sym for k in function.kernel_ops]:
        raise DlpcError("error: profile: the kernels of the program and of the loop IR differ")
    # a kernel launched n times a call (in a loop) does n times its work in its seconds
    counts = function.launches_per_call
    rows = [
        ProfileRow(c.name, c.origin, t, c.flops * n, c.bytes * n)
        for c, t, n in zip(costs, seconds, counts)
    ]
    return rows, call


def _nbytes(value) -> int:
    """The size in bytes of a memref value."""
    from dlpc.backends.c import memref_info
    from dlpc.dialects.graph import numpy_dtype

    shape, elt = memref_info(value.type)
    return math.prod(shape) * np.dtype(numpy_dtype(elt)).itemsize


def compile_opencl(
    loop_module,
    *,
    name: str = "module",
    vector_width: int | None = None,
    profile: str | None = None,
) -> OpenCLFunction:
    """Emit OpenCL C for a module lowered for the OpenCL target (`pipeline.lower` with
    `PipelineOptions(target="opencl")`) and build it; call the result on
    `(*inputs, params=...)`. `vector_width`: the lanes' plan (`backends.opencl.
    lane_profile`), the device's when None. `profile`: "gpu" or "cpu" launch plans
    (`launch_profile`)."""
    return OpenCLFunction(loop_module, name=name, vector_width=vector_width, profile=profile)
