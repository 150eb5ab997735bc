"""A caching device allocator, PyTorch's design (c10's CUDACachingAllocator) in small.

    a = CachingAllocator("opencl:0", raw_alloc, raw_free, event_done)
    block = a.malloc(nbytes, stream)   # (block.handle, block.offset): where the bytes are
    a.record_stream(block, other)      # the block is also used by work on `other`
    a.free(block)                      # back to the cache, not to the device
    a.stats(); a.empty_cache()

- Sizes are rounded up to 512 bytes. Requests up to 1 MiB come from the small pool,
  whose segments (the device allocations) are 2 MiB; larger ones from the large pool:
  a 20 MiB segment below 10 MiB, else the size rounded up to 2 MiB.
- A request takes the smallest free block of its pool and stream that fits (best fit,
  a sorted list searched by bisection) and splits off the rest when the rest is worth
  keeping (small: >= 512 bytes; large: > 1 MiB); a freed block merges with its free
  neighbours in the segment (coalescing), so the cache does not fragment.
- Per-stream ownership: a block belongs to the stream that allocated it and is only
  handed out again to that stream (whose later work is ordered after its earlier work).
  A block that work on other streams also used (`record_stream`) is not cached at `free`:
  an event is recorded on each of those streams, and the block joins the cache only when
  they are all done (checked at the next allocation, or by `empty_cache`).
- Memory goes back to the device only in `empty_cache()` (whole free segments) or when
  an allocation fails (the cache is emptied and the allocation retried).
- `caching=False`: every malloc is a device allocation and every free a device free
  (the baseline `bench/eager.py` counts against).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ROUND = 512
SMALL_SIZE = 1 << 20  # requests up to this size use the small pool
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


def round_size(nbytes: int) -> int:
    return max(ROUND, -(-nbytes // ROUND) * ROUND)


def segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_SEGMENT
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class Segment:
    """One device allocation."""

    handle: Any
    size: int
    stream: Any
    small: bool
    serial: int
    head: Block | None = None  # its first block (offset 0: splits and merges keep it)
    # device handles of [offset, end) made by the device (OpenCL sub-buffers): dropped
    # before the segment goes back to the device
    views: dict[int, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Block:
    """A range [offset, offset + size) of a segment, allocated or free."""

    segment: Segment
    offset: int
    size: int
    allocated: bool = False
    requested: int = 0
    prev: Block | None = None
    next: Block | None = None
    used_on: set = field(default_factory=set)  # other streams whose work uses it

    @property
    def handle(self) -> Any:
        return self.segment.handle

    @property
    def stream(self) -> Any:
        return self.segment.stream

    def key(self) -> tuple:
        return (id(self.segment.stream), self.size, self.segment.serial, self.offset)


class CachingAllocator:
    """See the module docstring. `raw_alloc(nbytes) -> handle` and `raw_free(handle)`
    are the device's; `event_done(event)` says whether a stream's marker is done; a
    stream is any object with `marker()` (None: its work is already done)."""

    def __init__(
        self,
        name: str,
        raw_alloc: Callable[[int], Any],
        raw_free: Callable[[Any], None],
        event_done: Callable[[Any], bool] | None = None,
        caching: bool = True,
    ) -> None:
        self.name = name
        self.raw_alloc = raw_alloc
        self.raw_free = raw_free
        self.event_done = event_done or (lambda event: True)
        self.caching = caching
        self.segments: list[Segment] = []
        self.pools: dict[bool, tuple[list[tuple], dict[tuple, Block]]] = {
            True: ([], {}),
            False: ([], {}),
        }
        self.pending: list[tuple[Block, list]] = []  # freed, waiting for other streams
        self._serial = 0
        self.counters = {
            "allocated_bytes": 0,
            "requested_bytes": 0,
            "reserved_bytes": 0,
            "peak_allocated_bytes": 0,
            "peak_reserved_bytes": 0,
            "active_blocks": 0,
            "device_allocs": 0,
            "device_frees": 0,
            "allocs": 0,
            "cache_hits": 0,
            "splits": 0,
            "merges": 0,
            "retries": 0,
        }

    # ------------------------------------------------------------------ the pools
    def _insert(self, block: Block) -> None:
        keys, blocks = self.pools[block.segment.small]
        key = block.key()
        bisect.insort(keys, key)
        blocks[key] = block

    def _remove(self, block: Block) -> None:
        keys, blocks = self.pools[block.segment.small]
        key = block.key()
        del keys[bisect.bisect_left(keys, key)]
        del blocks[key]

    def _best_fit(self, size: int, stream: Any) -> Block | None:
        keys, blocks = self.pools[size <= SMALL_SIZE]
        i = bisect.bisect_left(keys, (id(stream), size, -1, -1))
        if i < len(keys) and keys[i][0] == id(stream):
            return blocks[keys[i]]
        return None

    # ------------------------------------------------------------------ malloc / free
    def malloc(self, nbytes: int, stream: Any) -> Block:
        c = self.counters
        c["allocs"] += 1
        size = round_size(nbytes)
        if not self.caching:
            block = self._new_segment(size, size, stream)
        else:
            self._process_pending()
            block = self._best_fit(size, stream)
            if block is not None:
                self._remove(block)
                c["cache_hits"] += 1
            else:
                block = self._new_segment(size, segment_size(size), stream)
            block = self._split(block, size)
        block.allocated = True
        block.requested = nbytes
        c["allocated_bytes"] += block.size
        c["requested_bytes"] += nbytes
        c["active_blocks"] += 1
        c["peak_allocated_bytes"] = max(c["peak_allocated_bytes"], c["allocated_bytes"])
        return block

    def _new_segment(self, size: int, seg_size: int, stream: Any) -> Block:
        try:
            handle = self.raw_alloc(seg_size)
        except Exception:  # out of device memory: give the cache back and retry once
            self.counters["retries"] += 1
            self.synchronize_pending()
            self.empty_cache()
            handle = self.raw_alloc(seg_size)
        self._serial += 1
        segment = Segment(handle, seg_size, stream, size <= SMALL_SIZE, self._serial)
        self.segments.append(segment)
        c = self.counters
        c["device_allocs"] += 1
        c["reserved_bytes"] += seg_size
        c["peak_reserved_bytes"] = max(c["peak_reserved_bytes"], c["reserved_bytes"])
        segment.head = Block(segment, 0, seg_size)
        return segment.head

    def _split(self, block: Block, size: int) -> Block:
        rest = block.size - size
        worth = rest >= ROUND if block.segment.small else rest > SMALL_SIZE
        if not worth:
            return block
        tail = Block(block.segment, block.offset + size, rest, prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = tail
        block.next = tail
        block.size = size
        self._insert(tail)
        self.counters["splits"] += 1
        return block

    def record_stream(self, block: Block, stream: Any) -> None:
        """Work on `stream` (not the block's own) uses `block`: `free` waits for it."""
        if stream is not block.stream:
            block.used_on.add(stream)

    def free(self, block: Block) -> None:
        if not block.allocated:
            raise ValueError(f"{self.name}: a block freed twice")
        c = self.counters
        c["allocated_bytes"] -= block.size
        c["requested_bytes"] -= block.requested
        c["active_blocks"] -= 1
        block.allocated = False
        events = [s.marker() for s in block.used_on]
        block.used_on = set()
        events = [e for e in events if e is not None]
        if not self.caching and block.prev is None and block.next is None:
            for e in events:  # (a whole segment: one made while caching was off)
                e.wait()
            self._release(block.segment)
            return
        if events:
            self.pending.append((block, events))
            return
        self._cache(block)

    def _cache(self, block: Block) -> None:
        """A free block back in its pool, merged with free neighbours."""
        for other in (block.prev, block.next):
            if other is None or other.allocated or self._is_pending(other):
                continue
            self._remove(other)
            if other is block.prev:
                other.size += block.size
                other.next = block.next
                if block.next is not None:
                    block.next.prev = other
                block = other
            else:
                block.size += other.size
                block.next = other.next
                if other.next is not None:
                    other.next.prev = block
            self.counters["merges"] += 1
        self._insert(block)

    def _is_pending(self, block: Block) -> bool:
        return any(b is block for b, _ in self.pending)

    def _process_pending(self) -> None:
        if not self.pending:
            return
        ready = [b for b, events in self.pending if all(self.event_done(e) for e in events)]
        self._cache_pending(ready)

    def synchronize_pending(self) -> None:
        """Wait for the streams of every pending free, then cache those blocks."""
        for _, events in self.pending:
            for e in events:
                e.wait()
        self._cache_pending([b for b, _ in self.pending])

    def _cache_pending(self, ready: list[Block]) -> None:
        """Cache the `ready` pending blocks one by one: a block still pending is no
        free neighbour to merge with (it is in no pool yet)."""
        for block in ready:
            self.pending = [(b, e) for b, e in self.pending if b is not block]
            self._cache(block)

    def _release(self, segment: Segment) -> None:
        segment.views.clear()
        self.raw_free(segment.handle)
        self.segments.remove(segment)
        self.counters["device_frees"] += 1
        self.counters["reserved_bytes"] -= segment.size

    def empty_cache(self) -> None:
        """Return every wholly free segment to the device."""
        self._process_pending()
        for small in (True, False):
            keys, blocks = self.pools[small]
            for key in list(keys):
                block = blocks[key]
                if block.prev is None and block.next is None:  # the whole segment
                    self._remove(block)
                    self._release(block.segment)

    def stats(self) -> dict[str, int]:
        """Counters: allocated/reserved/peak bytes, active blocks, device allocations
        and frees, allocations served from the cache (`cache_hits`), splits, merges."""
        out = dict(self.counters)
        out["cached_bytes"] = out["reserved_bytes"] - out["allocated_bytes"]
        out["segments"] = len(self.segments)
        out["pending_frees"] = len(self.pending)
        return out

    def blocks(self) -> list[Block]:
        """Every block of every segment, in address order (for checks and tests)."""
        out = []
        for segment in self.segments:
            block: Block | None = segment.head
            while block is not None:
                out.append(block)
                block = block.next
        return out
