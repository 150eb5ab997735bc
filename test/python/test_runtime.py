"""dlpc.runtime: the device registry, streams and events, tensor views over storages, and
the caching allocator (a randomized stress test: no two live blocks overlap, a block
freed after use on another stream is not handed out before that stream is done, the
stats add up)."""

from __future__ import annotations

import numpy as np
import pytest

import dlpc
from dlpc.diagnostics import DlpcError
from dlpc.runtime import allocator as alloc
from dlpc.runtime.device import device, devices

OPENCL = [d.name for d in devices("opencl")][:1]
HOST_AND_DEVICE = ["cpu", *OPENCL, "dlp:0"]


def test_registry_names_and_errors():
    assert device("cpu").name == "cpu" and device("dlp").name == "dlp:0"
    assert dlpc.device_count("cpu") == 1
    dlpc.set_device("dlp:0")
    try:
        assert dlpc.current_device() is device("dlp:0")
    finally:
        dlpc.set_device("cpu")
    for bad in ("tpu", "cpu:3", "opencl:99", "dlp:x"):
        with pytest.raises(DlpcError) as e:
            device(bad)
        assert "\n" not in str(e.value) and "cpu" in str(e.value) and "dlp:0" in str(e.value)


def test_opencl_gpu_first():
    cl = [d.backend.cl_device for d in devices("opencl")]  # type: ignore[attr-defined]
    if not cl:
        pytest.skip("no OpenCL platform")
    gpu = [bool(d.type & 4) for d in cl]  # CL_DEVICE_TYPE_GPU
    assert gpu == sorted(gpu, reverse=True)


@pytest.mark.parametrize("name", HOST_AND_DEVICE)
def test_streams_and_events(name):
    dev = device(name)
    s = dev.new_stream()
    a = dlpc.tensor(np.arange(6.0), device=name)
    with dlpc.use_stream(s):
        assert dlpc.current_stream(name) is s
        start = s.record_event()
        b = a * 2.0
        end = s.record_event()
    assert dlpc.current_stream(name) is dev.default_stream
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0.0 and end.elapsed_time(start) <= 0.0  # (ordered)
    dev.default_stream.wait_event(end)
    dlpc.synchronize(name)
    np.testing.assert_array_equal(np.asarray(b), np.arange(6.0) * 2)


@pytest.mark.parametrize("name", HOST_AND_DEVICE)
def test_views_share_storage(name):
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = dlpc.tensor(base, device=name)
    views = {
        "slice": (t[1, :, ::2], base[1, :, ::2]),
        "ellipsis": (t[..., 1], base[..., 1]),
        "none": (t[:, None, 0], base[:, None, 0]),
        "transpose": (t.transpose(0, 2), base.transpose(2, 1, 0)),
        "permute": (t.permute(1, 2, 0), base.transpose(1, 2, 0)),
        "reshape": (t.reshape(6, 4), base.reshape(6, 4)),
        "view": (t.view(-1), base.reshape(-1)),
        "expand": (t[:, :1, :].expand(2, 5, 4), np.broadcast_to(base[:, :1, :], (2, 5, 4))),
        "squeeze": (t[:, :1].squeeze(1), base[:, 0]),
        "unsqueeze": (t.unsqueeze(1), base[:, None]),
    }
    for what, (v, expected) in views.items():
        assert v.shares_storage(t), what
        assert v.shape == expected.shape, what
        np.testing.assert_array_equal(np.asarray(v), expected, err_msg=what)
    tr = t.transpose(0, 1)
    assert not tr.is_contiguous()
    c = tr.contiguous()
    assert not c.shares_storage(t) and c.is_contiguous()
    np.testing.assert_array_equal(np.asarray(c), base.transpose(1, 0, 2))
    assert t.contiguous() is t  # no copy when not needed
    r = tr.reshape(12, 2)  # reshape of a non-contiguous view copies
    assert not r.shares_storage(t)
    np.testing.assert_array_equal(np.asarray(r), base.transpose(1, 0, 2).reshape(12, 2))


def test_host_views_alias():
    a = np.zeros((3, 4), np.float32)
    t = dlpc.from_numpy(a)
    v = t[1:, 2:]
    np.asarray(v)[...] = 7.0  # writes through the view into the array
    assert a[1:, 2:].tolist() == [[7.0, 7.0], [7.0, 7.0]] and a[0].sum() == 0
    assert np.shares_memory(np.asarray(t), a)


def test_dlpack_roundtrip():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dlpc.from_dlpack(a)
    assert np.shares_memory(np.asarray(t), a)
    back = np.from_dlpack(t.T)
    assert np.shares_memory(back, a)
    np.testing.assert_array_equal(back, a.T)
    if OPENCL:
        with pytest.raises(DlpcError):
            np.from_dlpack(dlpc.tensor(a, device=OPENCL[0]))


def test_bad_views_are_one_line_errors():
    t = dlpc.zeros((2, 3))
    for bad in (lambda: t.reshape(4, 2), lambda: t[5], lambda: t.expand(3, 3), lambda: t.T.view(6)):
        with pytest.raises(DlpcError) as e:
            bad()
        assert "\n" not in str(e.value)


# ------------------------------------------------------------------ the allocator


class FakeStream:
    """A stream whose work finishes when the test says so."""

    def __init__(self) -> None:
        self.pending: list[list[bool]] = []

    def marker(self):
        event = [False]
        self.pending.append(event)
        return event

    def finish(self) -> None:
        for event in self.pending:
            event[0] = True


class FakeEvent(list):
    def wait(self) -> None:
        self[0] = True


def _make(caching: bool = True):
    heap: dict[int, int] = {}
    counter = iter(range(1, 1 << 30))

    def raw_alloc(n: int) -> int:
        h = next(counter)
        heap[h] = n
        return h

    def raw_free(h: int) -> None:
        del heap[h]

    a = alloc.CachingAllocator(
        "fake", raw_alloc, raw_free, event_done=lambda e: bool(e[0]), caching=caching
    )
    return a, heap


def test_allocator_reuses_splits_and_coalesces():
    a, heap = _make()
    s = FakeStream()
    x = a.malloc(1000, s)
    y = a.malloc(3000, s)
    assert a.stats()["device_allocs"] == 1 and x.handle == y.handle  # one 2 MiB segment
    assert x.size == 1024 and y.offset == 1024
    a.free(x)
    a.free(y)
    whole = a.blocks()
    assert len(whole) == 1 and whole[0].size == alloc.SMALL_SEGMENT  # merged back
    z = a.malloc(5000, s)
    assert z.handle == x.handle and a.stats()["device_allocs"] == 1  # reused, no new memory
    big = a.malloc(3 << 20, s)
    assert big.segment.size == alloc.LARGE_SEGMENT and not big.segment.small
    a.free(z)
    a.free(big)
    a.empty_cache()
    assert heap == {} and a.stats()["reserved_bytes"] == 0


def test_allocator_stream_ownership():
    a, _ = _make()
    s1, s2 = FakeStream(), FakeStream()
    x = a.malloc(4096, s1)
    a.record_stream(x, s2)  # s2's work reads x
    a.free(x)
    y = a.malloc(4096, s1)
    assert not (y.handle == x.handle and y.offset == x.offset)  # s2 not done yet
    s2.finish()
    a.free(y)
    z = a.malloc(4096, s1)
    assert (z.handle, z.offset) == (x.handle, x.offset)  # now reusable
    w = a.malloc(4096, s2)
    assert w.segment is not z.segment  # never another stream's cached block


def test_allocator_without_caching_counts_device_allocations():
    a, heap = _make(caching=False)
    s = FakeStream()
    for _ in range(5):
        a.free(a.malloc(100, s))
    st = a.stats()
    assert st["device_allocs"] == 5 and st["device_frees"] == 5 and heap == {}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_allocator_stress(seed):
    rng = np.random.default_rng(seed)
    a, heap = _make()
    streams = [FakeStream() for _ in range(3)]
    live: list = []  # (block, stream, streams that used it)
    for _ in range(600):
        r = rng.random()
        if r < 0.55 or not live:
            s = streams[rng.integers(3)]
            size = int(
                rng.choice(
                    [
                        rng.integers(1, 4096),
                        rng.integers(4096, 1 << 20),
                        rng.integers(1 << 20, 12 << 20),
                    ],
                    p=[0.6, 0.3, 0.1],
                )
            )
            b = a.malloc(size, s)
            assert b.size >= size and b.offset + b.size <= b.segment.size
            assert b.stream is s
            used = {id(s)}
            if rng.random() < 0.2:
                other = streams[rng.integers(3)]
                a.record_stream(b, other)
                used.add(id(other))
            live.append((b, s, used))
        elif r < 0.9:
            b, s, used = live.pop(int(rng.integers(len(live))))
            a.free(b)
        elif r < 0.97:
            streams[rng.integers(3)].finish()
        else:
            a.empty_cache()
        # no two live blocks overlap; a live block is never one pending on another stream
        spans = sorted((b.segment.serial, b.offset, b.offset + b.size) for b, _, _ in live)
        for (s0, _, e0), (s1, o1, _) in zip(spans, spans[1:]):
            assert s0 != s1 or e0 <= o1
        pending = {id(b) for b, _ in a.pending}
        assert not pending & {id(b) for b, _, _ in live}
        st = a.stats()
        assert st["allocated_bytes"] == sum(b.size for b, _, _ in live)
        assert st["active_blocks"] == len(live)
        assert st["reserved_bytes"] == sum(heap.values()) == sum(s.size for s in a.segments)
        assert st["peak_allocated_bytes"] >= st["allocated_bytes"]
        # every byte of every segment is in exactly one block
        for seg in a.segments:
            blocks = [b for b in a.blocks() if b.segment is seg]
            assert blocks[0].offset == 0 and sum(b.size for b in blocks) == seg.size
            assert all(x.offset + x.size == y.offset for x, y in zip(blocks, blocks[1:]))
    for b, _, _ in live:
        a.free(b)
    for s in streams:
        s.finish()
    a.empty_cache()
    assert heap == {} and a.stats()["allocated_bytes"] == 0


@pytest.mark.skipif(not OPENCL, reason="no OpenCL platform")
def test_opencl_memory_stats_and_empty_cache():
    name = OPENCL[0]
    dlpc.empty_cache(name)
    before = dlpc.memory_stats(name)
    ts = [dlpc.zeros((64, 64), device=name) for _ in range(4)]
    st = dlpc.memory_stats(name)
    assert st["allocated_bytes"] - before["allocated_bytes"] == 4 * 64 * 64 * 4
    del ts
    after = dlpc.memory_stats(name)
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["reserved_bytes"] >= st["reserved_bytes"] - 0  # cached, not given back
    dlpc.empty_cache(name)
    assert dlpc.memory_stats(name)["reserved_bytes"] <= after["reserved_bytes"]


def test_opencl_platform_with_a_gpu_comes_first(monkeypatch):
    cl = pytest.importorskip("pyopencl")
    from dlpc.backends.runtime import opencl_rt

    class Platform:
        def __init__(self, name: str, gpu: bool) -> None:
            self.name, self.gpu = name, gpu

        def get_devices(self):
            kind = cl.device_type.GPU if self.gpu else cl.device_type.CPU
            return [type("Device", (), {"type": kind})()]

    found = [
        Platform("Portable Computing Language", False),
        Platform("Intel(R) OpenCL", False),
        Platform("NVIDIA CUDA", True),
    ]
    monkeypatch.setattr(opencl_rt, "_icd_vendors", lambda: None)
    monkeypatch.setattr(cl, "get_platforms", lambda: list(found))
    names = [p.name for p in opencl_rt.platforms()]
    assert names == ["NVIDIA CUDA", "Portable Computing Language", "Intel(R) OpenCL"]


@pytest.mark.skipif(not OPENCL, reason="no OpenCL platform")
def test_opencl_streams_share_kernels_in_order():
    """The same kernel called on two streams (queues) in turn: each call reads its own
    inputs (its argument buffers are shared, the second call waits for the first)."""
    name = OPENCL[0]
    dev = device(name)
    s1, s2 = dev.new_stream(), dev.new_stream()
    a = np.arange(4096, dtype=np.float32)
    x = dlpc.tensor(a, device=name)
    scales = [dlpc.tensor(np.float32(k), device=name) for k in range(6)]  # (one kernel)
    dlpc.synchronize(name)
    outs = []
    for k in range(6):
        with dlpc.use_stream(s1 if k % 2 else s2):
            outs.append(x * scales[k])
    dlpc.synchronize(name)
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(o), a * k)
