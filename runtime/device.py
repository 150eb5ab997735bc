"""Devices, streams and events: the bottom of dlpc's execution runtime (docs/runtime.md).

    dev = device("opencl:0")            # cpu, opencl:N, dlp:N; a bad one: one line listing all
    s = dev.new_stream()                # an OpenCL command queue / the DLP task queue / inline
    with use_stream(s):                 # the current stream of its device
        ...
    e = s.record_event(); e.query(); e.synchronize(); e.elapsed_time(other)   # ms
    synchronize("opencl:0")             # every stream of the device

One registry holds every device of the process, enumerated once: `cpu` (host memory, an
inline stream: work is done when it is issued), `opencl:N` (the OpenCL devices of the
platform `backends/runtime/opencl_rt` chooses, GPUs sorted first so that `opencl:0` is a
GPU where one exists) and `dlp:N` (the DLP simulator: its memory is host memory, its task
queue runs a task when it is issued, as the simulator is synchronous). Memory comes from
each device's allocator (`allocator.py`): on demand on the CPU, cached on the others.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError
from dlpc.runtime.allocator import CachingAllocator

DEVICE_TYPES = ("cpu", "opencl", "dlp")
TRANSFER_KEYS: tuple[str, ...] = ("to_device", "to_device_bytes", "to_host", "to_host_bytes")


class Event:
    """A point in a stream's work: `record`ed on a stream, done when the work issued
    before it is (`query`), waited for by the host (`synchronize`) or by another stream
    (`Stream.wait_event`); `elapsed_time(other)` in milliseconds."""

    def __init__(self) -> None:
        self.stream: Stream | None = None
        self.handle: Any = None  # the OpenCL marker event
        self.host_time: float | None = None  # when the work before it was done (inline)

    def record(self, stream: Stream | None = None) -> Event:
        stream = stream or current_stream()
        self.stream = stream
        self.handle = stream.marker()
        self.host_time = time.perf_counter() if self.handle is None else None
        return self

    def query(self) -> bool:
        if self.handle is None:
            return True
        return self.stream is not None and self.stream.device.backend.event_done(self.handle)

    def synchronize(self) -> None:
        if self.handle is not None:
            self.handle.wait()

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds between this event and `end` (both recorded and done)."""
        if self.stream is None or end.stream is None:
            raise DlpcError("error: elapsed_time needs two recorded events")
        self.synchronize()
        end.synchronize()
        if self.handle is not None and end.handle is not None:
            return (end.handle.profile.end - self.handle.profile.end) / 1e6
        assert self.host_time is not None and end.host_time is not None
        return (end.host_time - self.host_time) * 1e3


class Stream:
    """An ordered queue of a device's work: the device's backend gives the handle (an
    OpenCL in-order command queue; None for the inline CPU and DLP streams)."""

    def __init__(self, device: Device, handle: Any = None) -> None:
        self.device = device
        self.handle = handle
        # copies from host memory still in flight: their events keep the host arrays
        # alive (pyopencl's NannyEvent waits when dropped), so they are held until done
        self.pending: list = []

    def hold(self, event) -> None:
        """Keep `event` (an upload's) until it is done, so the host never waits for it."""
        pending = self.pending
        pending.append(event)
        if len(pending) > 16:
            done = self.device.backend.event_done
            self.pending = [e for e in pending if not done(e)]

    def marker(self) -> Any:
        return self.device.backend.marker(self.handle)

    def record_event(self) -> Event:
        return Event().record(self)

    def wait_event(self, event: Event) -> None:
        """Later work on this stream starts after `event` (other streams' work)."""
        if event.handle is not None and self.handle is not None:
            self.device.backend.wait(self.handle, event.handle)
        else:
            event.synchronize()

    def query(self) -> bool:
        return self.record_event().query()

    def synchronize(self) -> None:
        if self.handle is not None:
            self.handle.finish()
            self.pending = []

    def __repr__(self) -> str:
        index = next((k for k, s in enumerate(self.device.streams) if s is self), "?")
        return f"<stream {index} of {self.device}>"


class Device:
    """One device of the registry: its type and index, its backend (memory, copies,
    events), its streams (the first is the default) and its allocator."""

    def __init__(self, type: str, index: int, backend: Backend) -> None:  # noqa: A002
        self.type = type
        self.index = index
        self.backend = backend
        self.name = f"{type}:{index}" if type != "cpu" else "cpu"
        self.streams: list[Stream] = [Stream(self, backend.new_queue())]
        self.allocator = backend.make_allocator(self)
        # copies between the host and this device made by the runtime (tensor uploads
        # and downloads, a compiled model's weights and host inputs): `transfer_stats`
        self.transfers: dict[str, int] = dict.fromkeys(TRANSFER_KEYS, 0)

    def count_transfer(self, direction: str, nbytes: int) -> None:
        """One copy `direction` ("to_device", "to_host") of `nbytes`."""
        self.transfers[direction] += 1
        self.transfers[f"{direction}_bytes"] += nbytes

    @property
    def default_stream(self) -> Stream:
        return self.streams[0]

    def new_stream(self) -> Stream:
        stream = Stream(self, self.backend.new_queue())
        self.streams.append(stream)
        return stream

    def synchronize(self) -> None:
        for s in self.streams:
            s.synchronize()

    def __repr__(self) -> str:
        return f"device('{self.name}')"

    def __str__(self) -> str:
        return self.name


# ------------------------------------------------------------------------ backends


class Backend:
    """What a device type provides: queues, raw memory, copies, events."""

    kind = "cpu"
    label = "host"

    def new_queue(self) -> Any:
        return None

    def marker(self, queue) -> Any:
        return None

    def wait(self, queue, event) -> None:
        pass

    def event_done(self, handle) -> bool:
        return True

    def make_allocator(self, device: Device) -> CachingAllocator | None:
        return None


class CpuBackend(Backend):
    """The host: numpy memory allocated on demand, an inline stream."""

    label = "host memory, inline stream"


class HostArenaBackend(Backend):
    """The DLP simulator: its GDRAM is host memory, cached in segments of bytes."""

    kind = "dlp"

    def __init__(self, target: str) -> None:
        self.target = target
        self.label = f"DLP simulator ({target})"

    def make_allocator(self, device: Device) -> CachingAllocator:
        return CachingAllocator(
            device.name,
            raw_alloc=lambda nbytes: np.empty(nbytes, np.uint8),
            raw_free=lambda handle: None,
        )


class OpenCLBackend(Backend):
    """An OpenCL device: a context of its own platform's (`opencl_rt.context`), an
    in-order command queue per stream (profiling on, for `Event.elapsed_time`),
    buffers from a caching allocator."""

    kind = "opencl"

    def __init__(self, cl_device) -> None:
        from dlpc.backends.runtime import opencl_rt

        self.cl = opencl_rt._cl()
        self.cl_device = cl_device
        self.ctx, _ = opencl_rt.context(cl_device)
        self.label = f"{cl_device.name.strip()} ({cl_device.platform.name.strip()})"

    def new_queue(self) -> Any:
        props = self.cl.command_queue_properties.PROFILING_ENABLE
        return self.cl.CommandQueue(self.ctx, self.cl_device, properties=props)

    def marker(self, queue) -> Any:
        return self.cl.enqueue_marker(queue)

    def wait(self, queue, event) -> None:
        self.cl.enqueue_barrier(queue, wait_for=[event])

    def event_done(self, handle) -> bool:
        status = handle.command_execution_status
        return status == self.cl.command_execution_status.COMPLETE

    def buffer_at(self, block, offset: int) -> Any:
        """A buffer whose first byte is byte `offset` of `block`'s storage: the segment
        itself at offset 0, else a sub-buffer of the rest of the segment, made once per
        (segment, offset) (kept with the segment); None where the offset is not aligned
        to the device's base address alignment (the caller copies instead)."""
        at = block.offset + offset
        if at == 0:
            return block.segment.handle
        views = block.segment.views
        buf = views.get(at)
        if buf is None:
            if at % self.align:
                return None
            buf = views[at] = block.segment.handle.get_sub_region(at, block.segment.size - at)
        return buf

    @property
    def align(self) -> int:
        return max(self.cl_device.mem_base_addr_align // 8, 1)

    def make_allocator(self, device: Device) -> CachingAllocator:
        cl = self.cl
        flags = cl.mem_flags.READ_WRITE
        return CachingAllocator(
            device.name,
            raw_alloc=lambda nbytes: cl.Buffer(self.ctx, flags, nbytes),
            raw_free=lambda handle: handle.release(),
            event_done=self.event_done,
        )


# ------------------------------------------------------------------------ registry

_LOCK = threading.Lock()
_DEVICES: list[Device] | None = None
_CURRENT: Device | None = None
_CURRENT_STREAM: dict[str, Stream] = {}


def _opencl_devices() -> list:
    """The chosen platform's OpenCL devices, GPUs first (stable otherwise); none when
    pyopencl or a platform is missing."""
    try:
        from dlpc.backends.runtime import opencl_rt

        found = list(opencl_rt.devices())
        cl = opencl_rt._cl()
    except (DlpcError, ImportError):
        return []
    return sorted(found, key=lambda d: not (d.type & cl.device_type.GPU))


def init() -> list[Device]:
    """Enumerate the devices once (later calls return the same list)."""
    global _DEVICES
    with _LOCK:
        if _DEVICES is None:
            found = [Device("cpu", 0, CpuBackend())]
            for k, d in enumerate(_opencl_devices()):
                found.append(Device("opencl", k, OpenCLBackend(d)))
            found.append(Device("dlp", 0, HostArenaBackend("dlp")))
            _DEVICES = found
    return _DEVICES


def devices(type: str | None = None) -> list[Device]:  # noqa: A002
    return [d for d in init() if type is None or d.type == type]


def device_count(type: str) -> int:  # noqa: A002
    return len(devices(type))


def _names() -> str:
    return ", ".join(d.name for d in init())


def device(spec: str | Device | None = None) -> Device:
    """A device by name (`cpu`, `opencl`, `opencl:1`, `dlp:0`; a bare type is index
    0); None: the current device. A name that is no device is a one-line error listing
    the devices that exist."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return current_device()
    text = str(spec).strip().lower()
    kind, _, index = text.partition(":")
    if kind not in DEVICE_TYPES or (index and not index.isdigit()):
        raise DlpcError(f"error: unknown device '{spec}' (devices: {_names()})")
    k = int(index or 0)
    found = devices(kind)
    if k >= len(found):
        raise DlpcError(f"error: no device '{spec}' (devices: {_names()})")
    return found[k]


def current_device() -> Device:
    return _CURRENT or init()[0]


def set_device(spec: str | Device) -> Device:
    global _CURRENT
    _CURRENT = device(spec)
    return _CURRENT


def current_stream(dev: str | Device | None = None) -> Stream:
    d = device(dev)
    return _CURRENT_STREAM.get(d.name) or d.default_stream


@contextlib.contextmanager
def use_stream(stream: Stream) -> Iterator[Stream]:
    """Make `stream` its device's current stream inside the `with`."""
    name = stream.device.name
    before = _CURRENT_STREAM.get(name)
    _CURRENT_STREAM[name] = stream
    try:
        yield stream
    finally:
        if before is None:
            _CURRENT_STREAM.pop(name, None)
        else:
            _CURRENT_STREAM[name] = before


def synchronize(dev: str | Device | None = None) -> None:
    device(dev).synchronize()


def memory_stats(dev: str | Device | None = None) -> dict[str, int]:
    """The device allocator's counters (`CachingAllocator.stats`); the CPU allocates on
    demand and has none."""
    d = device(dev)
    if d.allocator is None:
        return {}
    return d.allocator.stats()


def transfer_stats(dev: str | Device | None = None) -> dict[str, int]:
    """Copies between the host and `dev` so far (count and bytes each way): what the
    runtime copies, tensors' `to`/`numpy` and compiled models' uploads."""
    return dict(device(dev).transfers)


def empty_cache(dev: str | Device | None = None) -> None:
    """Return the cached free segments of `dev` (None: every device) to the device."""
    for d in [device(dev)] if dev is not None else init():
        if d.allocator is not None:
            d.allocator.empty_cache()
