"""Storages and tensor views: the data layer under `dlpc.Tensor` (docs/runtime.md).

A `Storage` is bytes on one device: a host numpy array (`cpu`; on `dlp` a range of a
cached host segment, the simulator's GDRAM) or a block of a device buffer (`opencl`),
returned to its device's allocator when the last view of it dies. A `TensorView` is a
logical view of a storage: shape, strides and offset (in elements), dtype, device.
Slicing, transpose/permute, reshape of contiguous data, expand, squeeze/unsqueeze make
new views of the same storage (no copy); `contiguous()` copies only a view that is not
already row-major and dense. Host data interoperates with numpy without a copy
(`np.asarray(t)`, `from_numpy`) and with DLPack (`__dlpack__`, `from_dlpack`).

Views pass the graph op that computes the same values to `_as_view` (`("transpose",
{"perm": ...})`): `dlpc.eager` records it, so a view's gradient uses that op's rule.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError
from dlpc.runtime import device as devices
from dlpc.runtime.device import Device, Stream

COPY_KERNEL = """
__kernel void dlpc_strided_copy(__global const uchar *src, ulong src_off,
                                __global uchar *dst, ulong dst_off,
                                __global const long *geom, int rank, int item) {
  long i = get_global_id(0), rest = i, at = 0;
  for (int d = rank - 1; d >= 0; --d) {
    long n = geom[d];
    at += (rest % n) * geom[rank + d];
    rest /= n;
  }
  __global const uchar *s = src + src_off + at * item;
  __global uchar *t = dst + dst_off + i * item;
  for (int k = 0; k < item; ++k) t[k] = s[k];
}
"""


class Storage:
    """Bytes on a device: `array` (host memory: cpu, dlp) and/or `block` (a cached
    allocation: dlp, opencl), freed to the allocator with the last reference (on dlp,
    to it or to a numpy view of its array: `_HostBlock`); `stream` is the stream it
    was allocated on."""

    __slots__ = ("device", "nbytes", "array", "block", "stream", "addr", "__weakref__")

    def __init__(self, device: Device, nbytes: int, array=None, block=None, stream=None):
        self.device = device
        self.nbytes = nbytes
        self.array = array
        self.block = block
        self.stream = stream
        self.addr = 0  # the host array's address, once a kernel asked for it

    @staticmethod
    def allocate(device: Device, nbytes: int, stream: Stream | None = None) -> Storage:
        if device.allocator is None:  # the CPU: on demand
            return Storage(device, nbytes, np.empty(nbytes, np.uint8))
        stream = stream or devices.current_stream(device)
        block = device.allocator.malloc(nbytes, stream)
        array = None
        if device.type == "dlp":  # host memory: a view of the segment, owning the block
            array = np.asarray(_HostBlock(device.allocator, block, nbytes))
        return Storage(device, nbytes, array, block, stream)

    def record_stream(self, stream: Stream) -> None:
        if self.block is not None and self.device.allocator is not None:
            self.device.allocator.record_stream(self.block, stream)

    def __del__(self) -> None:
        block = self.block
        if block is not None and self.array is None:  # (host memory: _HostBlock frees it)
            self.block = None
            try:
                self.device.allocator.free(block)  # type: ignore[union-attr]
            except Exception:  # (interpreter shutdown: the allocator may be gone)
                pass


class _HostBlock:
    """A block of host-memory device (dlp) memory as the owner of its numpy arrays: the
    storage's array and every numpy view of it (`np.asarray(t)`) keep it, so the block
    goes back to the allocator, to be handed out again, only when the last of them died
    (not with the storage while a numpy view still reads it)."""

    __slots__ = ("allocator", "block", "__array_interface__")

    def __init__(self, allocator, block, nbytes: int) -> None:
        self.allocator = allocator
        self.block = block  # (holds its segment: the memory stays valid)
        address = block.handle.ctypes.data + block.offset
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }

    def __del__(self) -> None:
        try:
            self.allocator.free(self.block)
        except Exception:  # (interpreter shutdown: the allocator may be gone)
            pass


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _dim(d: int, rank: int, what: str = "dim") -> int:
    if not -rank <= d < max(rank, 1):
        raise DlpcError(f"error: {what} {d} is out of range for a rank-{rank} tensor")
    return d % rank if rank else 0


class Meta:
    """What a dispatch key needs of a tensor: shape, dtype, device; one object per
    distinct triple (`meta`), so a key of metas hashes by identity, not by contents."""

    __slots__ = ("shape", "dtype", "device", "sig", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, device: Device) -> None:
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.sig = (shape, dtype)  # (a kernel signature's operand)


_METAS: dict[tuple, Meta] = {}


def meta(shape: tuple[int, ...], dtype: np.dtype, device: Device) -> Meta:
    """The one `Meta` of (shape, dtype, device)."""
    key = (shape, dtype, device)
    m = _METAS.get(key)
    if m is None:
        m = _METAS[key] = Meta(shape, dtype, device)
    return m


_SWAP = ("transpose", {"perm": (1, 0)})  # (shared: read only)


class TensorView:
    """A logical view (shape, strides, offset, dtype, device) of a `Storage`. Slots:
    a tensor is made per op call; `_meta` (its dispatch-key part) and `_ptr` (the host
    address of its first element when it is contiguous, 0 until a kernel asked) are
    filled on first use."""

    __slots__ = (
        "_storage",
        "shape",
        "_strides",
        "_offset",
        "dtype",
        "device",
        "_np",
        "_meta",
        "_ptr",
    )

    _storage: Storage
    shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _offset: int
    dtype: np.dtype
    device: Device
    _np: np.ndarray | None
    _meta: Meta | None
    _ptr: int

    # ------------------------------------------------------------------ making
    @classmethod
    def _make(cls, storage, shape, strides, offset, dtype, host=None):
        t = cls.__new__(cls)
        t._storage = storage
        t.shape = shape
        t._strides = strides
        t._offset = offset
        t.dtype = dtype
        t.device = storage.device
        t._np = host
        t._meta = None
        t._ptr = 0
        return t

    def key_meta(self) -> Meta:
        """This tensor's `Meta` (made once per tensor)."""
        m = self._meta
        if m is None:
            m = self._meta = meta(self.shape, self.dtype, self.device)
        return m

    @classmethod
    def _wrap_host(cls, device: Device, array: np.ndarray):
        """A host array (owned from now on) as a view of itself: cpu only."""
        shape = array.shape
        strides = tuple(s // array.itemsize for s in array.strides) if array.ndim else ()
        storage = Storage(device, array.nbytes, array)
        return cls._make(storage, shape, strides, 0, array.dtype, array)

    @classmethod
    def empty(cls, shape, dtype, device: Device, stream: Stream | None = None):
        shape = tuple(int(n) for n in shape)
        dtype = np.dtype(dtype)
        if device.type == "cpu":
            return cls._wrap_host(device, np.empty(shape, dtype))
        nbytes = math.prod(shape) * dtype.itemsize
        storage = Storage.allocate(device, nbytes, stream)
        return cls._make(storage, shape, contiguous_strides(shape), 0, dtype)

    @classmethod
    def from_numpy(cls, array, device: Device | str | None = None, copy: bool = False):
        """A tensor of `array`'s values on `device` (default: cpu). On the CPU, a
        C-contiguous array is shared unless `copy`; elsewhere it is uploaded."""
        dev = devices.device(device) if device is not None else devices.device("cpu")
        array = np.asarray(array)
        if dev.type == "cpu":
            if copy or not array.flags.c_contiguous:
                array = np.array(array, order="C", copy=True)
            return cls._wrap_host(dev, array)
        t = cls.empty(array.shape, array.dtype, dev)
        t._upload(np.ascontiguousarray(array))
        return t

    # ------------------------------------------------------------------ properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, d: int | None = None):
        return self.shape if d is None else self.shape[_dim(d, self.ndim)]

    def stride(self, d: int | None = None):
        return self._strides if d is None else self._strides[_dim(d, self.ndim)]

    def storage_offset(self) -> int:
        return self._offset

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self._strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ------------------------------------------------------------------ host data
    def _host(self) -> np.ndarray:
        """The numpy view of a host-memory tensor (cpu, dlp): no copy."""
        a = self._np
        if a is None:
            base = self._storage.array
            if base is None:
                raise DlpcError(f"error: a tensor on {self.device} has no host view")
            item = self.dtype.itemsize
            a = np.ndarray(
                self.shape,
                self.dtype,
                buffer=base,
                offset=self._offset * item,
                strides=tuple(s * item for s in self._strides),
            )
            self._np = a
        return a

    def numpy(self) -> np.ndarray:
        """The values as a numpy array: the tensor's own memory on the host (cpu, dlp),
        a copy from a device."""
        if self._storage.array is not None:
            devices.current_stream(self.device).synchronize()
            return self._host()
        return self._download()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise DlpcError(f"error: item() of a tensor with {self.numel()} elements")
        return self.numpy().reshape(-1)[0].item()

    def __dlpack__(self, stream=None, **kwargs):
        if self._storage.array is None:
            raise DlpcError(f"error: DLPack export is for host tensors, not {self.device}")
        return self._host().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        if self._storage.array is None:
            raise DlpcError(f"error: DLPack export is for host tensors, not {self.device}")
        return (1, 0)  # kDLCPU

    # ------------------------------------------------------------------ device copies
    def _queue(self):
        return devices.current_stream(self.device).handle

    def _upload(self, array: np.ndarray) -> None:
        """Write the C-contiguous `array` into this contiguous tensor."""
        if self._storage.array is not None:
            np.copyto(self._host(), array.reshape(self.shape))
            return
        if array.nbytes:
            cl = self.device.backend.cl  # type: ignore[attr-defined]
            block: Any = self._storage.block
            off = block.offset + self._offset * self.dtype.itemsize
            stream = devices.current_stream(self.device)
            event = cl.enqueue_copy(
                stream.handle, block.handle, array, dst_offset=off, is_blocking=False
            )
            stream.hold(event)  # (no host wait: later work on the stream is after it)
            self.device.count_transfer("to_device", array.nbytes)

    def _download(self) -> np.ndarray:
        devices.synchronize(self.device)  # (work on any of its streams may write it)
        src = self if self.is_contiguous() else self.contiguous()
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            cl = self.device.backend.cl  # type: ignore[attr-defined]
            block: Any = src._storage.block
            off = block.offset + src._offset * self.dtype.itemsize
            cl.enqueue_copy(src._queue(), out, block.handle, src_offset=off, is_blocking=True)
            self.device.count_transfer("to_host", out.nbytes)
        return out

    def to(self, device: Device | str, copy: bool = False):
        dev = devices.device(device)
        if dev is self.device and not copy:
            return self
        return type(self).from_numpy(self.numpy(), dev, copy=True)

    def cpu(self):
        return self.to("cpu")

    def contiguous(self):
        """This tensor when it is row-major and dense, else a dense copy."""
        if self.is_contiguous():
            return self
        return self._copy_dense()

    def clone(self):
        return self._copy_dense()

    def _copy_dense(self):
        cls = type(self)
        if self._storage.array is not None:
            out = cls.empty(self.shape, self.dtype, self.device)
            np.copyto(out._host(), self._host())
            return out
        return self._device_copy()

    def _device_copy(self):
        """A dense copy of an OpenCL view, by the strided-copy kernel."""
        backend: Any = self.device.backend
        cl = backend.cl
        out = type(self).empty(self.shape, self.dtype, self.device)
        n = self.numel()
        if not n:
            return out
        kernel = getattr(backend, "copy_kernel", None)
        if kernel is None:
            from dlpc.backends.runtime.opencl_rt import build

            kernel = backend.copy_kernel = cl.Kernel(
                build(backend.ctx, COPY_KERNEL), "dlpc_strided_copy"
            )
        geom_key = (self.shape, self._strides)
        cache = backend.__dict__.setdefault("geom_buffers", {})
        geom = cache.get(geom_key)
        if geom is None:
            values = np.array([*self.shape, *self._strides] or [1, 0], np.int64)
            flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
            geom = cache[geom_key] = cl.Buffer(backend.ctx, flags, hostbuf=values)
        src: Any = self._storage.block
        dst: Any = out._storage.block
        item = self.dtype.itemsize
        kernel.set_args(
            src.handle,
            np.uint64(src.offset + self._offset * item),
            dst.handle,
            np.uint64(dst.offset),
            geom,
            np.int32(max(self.ndim, 1) if self.ndim else 1),
            np.int32(item),
        )
        cl.enqueue_nd_range_kernel(self._queue(), kernel, (n,), None)
        return out

    # ------------------------------------------------------------------ views
    def _as_view(self, shape, strides, offset, op: tuple[str, dict]):
        """A view of the same storage; `op` is the graph op computing its values."""
        return type(self)._make(self._storage, shape, strides, offset, self.dtype)

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if any(isinstance(i, TensorView | np.ndarray | list) for i in index):
            raise DlpcError("error: tensor indexing takes ints, slices, None and ...")
        used = sum(1 for i in index if i is not None and i is not Ellipsis)
        if used > self.ndim:
            raise DlpcError(f"error: too many indices ({used}) for a rank-{self.ndim} tensor")
        if Ellipsis in index:
            k = index.index(Ellipsis)
            index = (*index[:k], *[slice(None)] * (self.ndim - used), *index[k + 1 :])
        else:
            index = (*index, *[slice(None)] * (self.ndim - used))
        shape, strides, offset = [], [], self._offset
        starts, ends, steps = [], [], []
        d = 0
        final = []
        for i in index:
            if i is None:
                shape.append(1)
                strides.append(0)
                final.append(1)
                continue
            n, s = self.shape[d], self._strides[d]
            if isinstance(i, slice):
                start, stop, step = i.indices(n)
                if step <= 0:
                    raise DlpcError("error: slice steps must be positive")
                count = max(0, -(-(stop - start) // step))
                offset += start * s
                shape.append(count)
                strides.append(s * step)
                final.append(count)
                starts.append(start)
                ends.append(start + max(count - 1, 0) * step + 1 if count else start)
                steps.append(step)
            else:
                k = operator.index(i)
                if not -n <= k < n:
                    raise DlpcError(f"error: index {k} is out of range for dim {d} of size {n}")
                k %= n
                offset += k * s
                starts.append(k)
                ends.append(k + 1)
                steps.append(1)
            d += 1
        op = (
            "index",
            {
                "starts": tuple(starts),
                "ends": tuple(ends),
                "steps": tuple(steps),
                "shape": tuple(final),
            },
        )
        return self._as_view(tuple(shape), tuple(strides), offset, op)

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], list | tuple):
            dims = tuple(dims[0])
        perm = tuple(_dim(d, self.ndim) for d in dims)
        if sorted(perm) != list(range(self.ndim)):
            raise DlpcError(f"error: permute{dims} is no permutation of {self.ndim} dims")
        shape = tuple(self.shape[d] for d in perm)
        strides = tuple(self._strides[d] for d in perm)
        return self._as_view(shape, strides, self._offset, ("transpose", {"perm": perm}))

    def transpose(self, d0: int = 0, d1: int = 1):
        perm = list(range(self.ndim))
        a, b = _dim(d0, self.ndim), _dim(d1, self.ndim)
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(*perm)

    @property
    def T(self):  # noqa: N802 - torch's name
        if len(self.shape) == 2:  # (the common case, without permute's checks)
            (m, n), (s, t) = self.shape, self._strides
            return self._as_view((n, m), (t, s), self._offset, _SWAP)
        return self.permute(*reversed(range(self.ndim)))

    def _shape_arg(self, shape) -> tuple[int, ...]:
        if len(shape) == 1 and isinstance(shape[0], list | tuple):
            shape = tuple(shape[0])
        shape = tuple(int(n) for n in shape)
        if shape.count(-1) > 1:
            raise DlpcError(f"error: reshape {shape}: at most one -1")
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            shape = tuple(self.numel() // max(known, 1) if n == -1 else n for n in shape)
        if math.prod(shape) != self.numel():
            raise DlpcError(
                f"error: cannot reshape a tensor of shape {list(self.shape)} "
                f"({self.numel()} elements) to {list(shape)}"
            )
        return shape

    def reshape(self, *shape):
        """A view when the data is contiguous, else a reshaped copy."""
        new = self._shape_arg(shape)
        src = self.contiguous()
        return src._as_view(new, contiguous_strides(new), src._offset, ("reshape", {"shape": new}))

    def view(self, *shape):
        if not self.is_contiguous():
            raise DlpcError("error: view() of a non-contiguous tensor; use reshape()")
        return self.reshape(*shape)

    def flatten(self):
        return self.reshape(-1)

    def expand(self, *sizes):
        if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
            sizes = tuple(sizes[0])
        extra = len(sizes) - self.ndim
        if extra < 0:
            raise DlpcError(f"error: expand to {list(sizes)} has fewer dims than {self.ndim}")
        shape, strides = [], []
        for k, n in enumerate(sizes):
            if k < extra:
                shape.append(int(n))
                strides.append(0)
                continue
            own, s = self.shape[k - extra], self._strides[k - extra]
            if n == -1 or n == own:
                shape.append(own)
                strides.append(s)
            elif own == 1:
                shape.append(int(n))
                strides.append(0)
            else:
                raise DlpcError(f"error: cannot expand dim {k - extra} of size {own} to {n}")
        shape_t = tuple(shape)
        return self._as_view(
            shape_t, tuple(strides), self._offset, ("broadcast", {"shape": shape_t})
        )

    def squeeze(self, dim: int | None = None):
        if dim is None:
            keep = [k for k, n in enumerate(self.shape) if n != 1]
        else:
            d = _dim(dim, self.ndim)
            keep = [k for k in range(self.ndim) if k != d or self.shape[k] != 1]
        shape = tuple(self.shape[k] for k in keep)
        strides = tuple(self._strides[k] for k in keep)
        return self._as_view(shape, strides, self._offset, ("reshape", {"shape": shape}))

    def unsqueeze(self, dim: int):
        d = _dim(dim, self.ndim + 1)
        shape = (*self.shape[:d], 1, *self.shape[d:])
        inner = self._strides[d] * self.shape[d] if d < self.ndim else 1
        strides = (*self._strides[:d], inner, *self._strides[d:])
        return self._as_view(shape, strides, self._offset, ("reshape", {"shape": shape}))

    def shares_storage(self, other: TensorView) -> bool:
        return self._storage is other._storage
