"""Comm ops on MPI: the communicator a rank's generated numpy program calls.

    COMM = world()                                  # MPI.COMM_WORLD, initialised once
    a, b = COMM.all_reduce([ga, gb], kind="avg", group=(2, (), (), ""))

Every method takes the op's inputs as numpy arrays and its properties as plain values
(`dlpc.reference.comm.op_args`), and returns its results, with the meaning of
`dlpc.reference.comm` (checked on 2, 3 and 4 ranks in test/python/test_comm_mpi.py).
A group is `(world, ranks, mesh, axis)` as `comm.group` prints it; a sub-communicator per
distinct set of world ranks is made once (MPI_Comm_create_group: collective over the
group's members only) and kept. Several all_reduce operands travel as one message (a
bucket, per dtype). MPI reads the operands where they are (one array, or views laid end
to end in one buffer; other buckets are packed once) and writes the results into pooled
buffers (`_result`: reused once nothing references them), which the results are views
of: no copy out and no fresh pages per call, as raw mpi4py on preallocated buffers.
`all_reduce_start` is the same as MPI_Iallreduce: it returns a `PendingAllReduce` whose
`wait()` gives the results, so computation can run while the bucket is in flight (the
numpy backend starts each all_reduce where the program has it and waits before the first
reader of a result).

Faults: `guard(fn)` runs a rank's work and turns an exception into one line naming the
rank on stderr and MPI_Abort, so the other ranks stop instead of waiting forever.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dlpc.diagnostics import DlpcError, install_hint

Group = tuple[int, tuple[int, ...], tuple[int, ...], str]
MESH_AXES = ("dp", "tp", "pp")


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:
        raise DlpcError(f"error: comm ops need mpi4py ({install_hint('dist')})") from None
    return MPI


def members(group: Group, rank: int) -> tuple[int, ...]:
    """The world ranks of `group` as world rank `rank` sees it (group order)."""
    world, ranks, mesh, axis = group
    if axis:
        k = MESH_AXES.index(axis)
        coords = [int(c) for c in np.unravel_index(rank, mesh)]
        out = []
        for i in range(mesh[k]):
            coords[k] = i
            out.append(int(np.ravel_multi_index(tuple(coords), mesh)))
        return tuple(out)
    return tuple(ranks) or tuple(range(world))


POOLED = 4  # result buffers kept per size
# sys.getrefcount of a pooled buffer nothing else references: the pool's list, the loop
# variable, getrefcount's own argument
_UNREFERENCED = 3


def _contiguous(xs: list[np.ndarray]) -> np.ndarray | None:
    """One flat array over `xs` when they lie end to end in one buffer (one C-contiguous
    array, or views of one flat buffer in order), else None."""
    if len(xs) == 1:
        x = xs[0]
        return x.reshape(-1) if x.flags.c_contiguous else None
    base = xs[0].base
    if not isinstance(base, np.ndarray) or base.ndim != 1 or not base.flags.c_contiguous:
        return None
    start = xs[0].ctypes.data
    end = start
    for x in xs:
        if x.base is not base or not x.flags.c_contiguous or x.ctypes.data != end:
            return None
        end += x.nbytes
    first = (start - base.ctypes.data) // base.itemsize
    return base[first : first + (end - start) // base.itemsize]


def _chunks(x: np.ndarray, n: int, dim: int) -> np.ndarray:
    """[n, *chunk]: x split into n along `dim`, contiguous chunk by chunk (x itself,
    reshaped, when the chunks already are: every dim before `dim` of size 1)."""
    if x.flags.c_contiguous and all(d == 1 for d in x.shape[:dim]):
        return x.reshape(n, *x.shape[:dim], x.shape[dim] // n, *x.shape[dim + 1 :])
    return np.ascontiguousarray(np.stack(np.split(x, n, axis=dim)))


def _concat(chunks: np.ndarray, dim: int) -> np.ndarray:
    """[n, *chunk] joined along `dim` of the chunk (a view when every dim before `dim`
    has size 1, else a new array)."""
    n, shape = chunks.shape[0], chunks.shape[1:]
    if all(d == 1 for d in shape[:dim]):
        return chunks.reshape(*shape[:dim], n * shape[dim], *shape[dim + 1 :])
    return np.concatenate(list(chunks), axis=dim)


class Communicator:
    """MPI_COMM_WORLD and the sub-communicators of the groups a program uses."""

    def __init__(self, comm: Any = None):
        MPI = _mpi()
        self.MPI = MPI
        self.world = comm if comm is not None else MPI.COMM_WORLD
        self.rank: int = self.world.Get_rank()
        self.size: int = self.world.Get_size()
        self._groups: dict[tuple[int, ...], Any] = {}
        self.recv_seconds = 0.0  # time spent waiting in recv, for bench/distributed.py
        self._results: dict[tuple, list[np.ndarray]] = {}  # result buffers (`_result`)
        self._resolved: dict[Group, tuple[Any, tuple[int, ...]]] = {}  # group -> comm, ranks
        self._ops = {
            "sum": MPI.SUM,
            "avg": MPI.SUM,
            "prod": MPI.PROD,
            "min": MPI.MIN,
            "max": MPI.MAX,
        }

    # ---- groups ----------------------------------------------------------------
    def _comm(self, group: Group) -> tuple[Any, tuple[int, ...]]:
        found = self._resolved.get(group)
        if found is None:
            found = self._resolved[group] = self._resolve(group)
        return found

    def _resolve(self, group: Group) -> tuple[Any, tuple[int, ...]]:
        if group[0] != self.size:
            raise DlpcError(
                f"error: the program was built for {group[0]} ranks but runs on {self.size}"
            )
        ranks = members(group, self.rank)
        if self.rank not in ranks:
            raise DlpcError(f"error: rank {self.rank} runs a comm op of group {list(ranks)}")
        if ranks == tuple(range(self.size)):
            return self.world, ranks
        if ranks not in self._groups:
            sub = self.world.Get_group().Incl(list(ranks))
            self._groups[ranks] = self.world.Create_group(sub, tag=hash(ranks) & 0x7FFF)
        return self._groups[ranks], ranks

    def _op(self, kind: str):
        return self._ops[kind]

    # ---- collectives -------------------------------------------------------------
    def all_reduce(self, xs: Sequence[np.ndarray], kind: str, group: Group) -> list[np.ndarray]:
        comm, ranks = self._comm(group)
        if len(xs) == 1 and type(x := xs[0]) is np.ndarray and x.flags.c_contiguous:
            # (the common case without the bucket's bookkeeping: a few us a call)
            recv = self._result(x.size, x.dtype)
            comm.Allreduce(x, recv, op=self._ops[kind])
            if kind == "avg":
                recv /= np.asarray(len(ranks), dtype=recv.dtype)
            return [recv if x.ndim == 1 else recv.reshape(x.shape)]
        outs: list[np.ndarray] = [np.empty(0)] * len(xs)
        for send, recv, parts in self._bucket(xs):
            comm.Allreduce(send, recv, op=self._op(kind))
            if kind == "avg":
                recv /= np.asarray(len(ranks), dtype=recv.dtype)
            for k, offset, size, shape in parts:
                outs[k] = recv[offset : offset + size].reshape(shape)
        return outs

    def all_reduce_start(
        self, xs: Sequence[np.ndarray], kind: str, group: Group
    ) -> PendingAllReduce:
        """`all_reduce` as MPI_Iallreduce: the request started; `.wait()` returns the
        results. MPI reads an operand (or a bucket already contiguous) in place while the
        request is in flight, so the caller leaves the operands unchanged until `wait()`
        (the request keeps them alive; a packed bucket's buffer is pooled, so no other
        request takes it while this one holds it)."""
        comm, ranks = self._comm(group)
        pending = PendingAllReduce(len(xs), kind, len(ranks))
        for send, recv, parts in self._bucket(xs):
            request = comm.Iallreduce(send, recv, op=self._op(kind))
            pending.parts.append((request, send, recv, parts))
        return pending

    def _bucket(self, xs: Sequence[np.ndarray]):
        """Per dtype of the operands: (send, recv, [(k, offset, size, shape)]). MPI reads
        the operands' own memory when they are one array, or views laid end to end in one
        buffer (comm_split's bucket buffers); otherwise they are packed into one pooled
        send buffer (one copy, one message). The results are views of `recv`,
        a buffer reused once nothing holds a view of it (`_result`): no copy out, and no
        fresh pages per call (MPI on fresh buffers pays their faults and registration:
        docs/distributed.md)."""
        by_dtype: dict[np.dtype, list[int]] = {}
        arrays = [np.asarray(x) for x in xs]
        for k, x in enumerate(arrays):
            by_dtype.setdefault(x.dtype, []).append(k)
        for dtype, ks in by_dtype.items():
            parts, offset = [], 0
            for k in ks:
                parts.append((k, offset, arrays[k].size, arrays[k].shape))
                offset += arrays[k].size
            send = _contiguous([arrays[k] for k in ks])
            if send is None:  # (a pooled buffer: not reused while a request holds it)
                send = self._result(offset, dtype)
                for k, start, size, _ in parts:
                    send[start : start + size] = arrays[k].reshape(-1)
            yield send, self._result(offset, dtype), parts

    def _result(self, size: int, dtype: np.dtype) -> np.ndarray:
        """A flat buffer for results: one of this size that nothing else references any
        more (every view of it dropped: its refcount is the pool's alone), else a new one,
        pooled up to POOLED per size."""
        pool = self._results.setdefault((size, dtype), [])
        for buf in pool:
            if sys.getrefcount(buf) <= _UNREFERENCED:
                return buf
        buf = np.empty(size, dtype)
        if len(pool) < POOLED:
            pool.append(buf)
        return buf

    def _out(self, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """A result array of `shape` (a view of a pooled buffer: `_result`)."""
        return self._result(int(np.prod(shape, dtype=np.int64)), np.dtype(dtype)).reshape(shape)

    def broadcast(self, x: np.ndarray, root: int, group: Group) -> np.ndarray:
        comm, _ = self._comm(group)
        x = np.asarray(x)
        buf = self._out(x.shape, x.dtype)
        if comm.Get_rank() == root:  # (the others receive straight into it)
            buf[...] = x
        comm.Bcast(buf, root=root)
        return buf

    def reduce(self, x: np.ndarray, kind: str, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = self._out(send.shape, send.dtype)
        comm.Reduce(send, recv, op=self._op(kind), root=root)
        if comm.Get_rank() != root:
            recv[...] = 0
        elif kind == "avg":
            recv /= np.asarray(len(ranks), dtype=recv.dtype)
        return recv

    def scatter(self, x: np.ndarray, dim: int, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        n, x = len(ranks), np.asarray(x)
        shape = list(x.shape)
        shape[dim] //= n
        recv = self._out(shape, x.dtype)
        send = _chunks(x, n, dim) if comm.Get_rank() == root else None
        comm.Scatter(send, recv, root=root)
        return recv

    def gather(self, x: np.ndarray, dim: int, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = self._out((len(ranks), *send.shape), send.dtype)
        comm.Gather(send, recv if comm.Get_rank() == root else None, root=root)
        whole = _concat(recv, dim)
        if comm.Get_rank() != root:
            whole[...] = 0
        return whole

    def all_gather(self, x: np.ndarray, dim: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = self._out((len(ranks), *send.shape), send.dtype)
        comm.Allgather(send, recv)
        return _concat(recv, dim)

    def reduce_scatter(self, x: np.ndarray, kind: str, dim: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        chunks = _chunks(np.asarray(x), len(ranks), dim)
        recv = self._out(chunks.shape[1:], chunks.dtype)
        comm.Reduce_scatter_block(chunks, recv, op=self._op(kind))
        if kind == "avg":
            recv /= np.asarray(len(ranks), dtype=recv.dtype)
        return recv

    def all_to_all(self, x: np.ndarray, split_dim: int, concat_dim: int, group: Group):
        comm, ranks = self._comm(group)
        send = _chunks(np.asarray(x), len(ranks), split_dim)
        recv = self._out(send.shape, send.dtype)
        comm.Alltoall(send, recv)
        return _concat(recv, concat_dim)

    def send(self, x: np.ndarray, peer: int, tag: int, group: Group) -> None:
        comm, _ = self._comm(group)
        comm.Send(np.ascontiguousarray(x), dest=peer, tag=tag)

    def recv(self, shape: Sequence[int], dtype: str, peer: int, tag: int, group: Group):
        comm, _ = self._comm(group)
        buf = np.empty(tuple(shape), np.dtype(dtype))
        start = time.perf_counter()
        comm.Recv(buf, source=peer, tag=tag)
        self.recv_seconds += time.perf_counter() - start  # (a pipeline's idle time)
        return buf

    def barrier(self, group: Group) -> None:
        comm, _ = self._comm(group)
        comm.Barrier()


class PendingAllReduce:
    """An all_reduce in flight (`Communicator.all_reduce_start`): `wait()` completes its
    requests (one per dtype) and returns the results, as `all_reduce`."""

    def __init__(self, n: int, kind: str, size: int):
        self.n, self.kind, self.size = n, kind, size
        self.parts: list[tuple[Any, np.ndarray, np.ndarray, list]] = []
        self.results: list[np.ndarray] | None = None

    def wait(self) -> list[np.ndarray]:
        if self.results is None:
            outs: list[np.ndarray] = [np.empty(0)] * self.n
            for request, _send, recv, parts in self.parts:
                request.Wait()
                if self.kind == "avg":
                    recv /= np.asarray(self.size, dtype=recv.dtype)
                for k, offset, size, shape in parts:
                    outs[k] = recv[offset : offset + size].reshape(shape)
            self.parts = []  # (the operands and buffers released)
            self.results = outs
        return self.results


_WORLD: Communicator | None = None


def world() -> Communicator:
    """The communicator of MPI_COMM_WORLD (MPI is initialised on the first call)."""
    global _WORLD
    if _WORLD is None:
        _WORLD = Communicator()
    return _WORLD


ABORT_GRACE_S = 0.5  # between a failing rank's line and its MPI_Abort (guard)


def guard(fn: Callable[[], int], tool: str = "dlpc") -> int:
    """Run a rank's work: an exception is one line naming the rank on stderr, then
    MPI_Abort, so that every other rank stops (mpiexec ends them) instead of waiting in a
    collective that will never complete."""
    MPI = _mpi()
    rank = MPI.COMM_WORLD.Get_rank()
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001 - the rank's boundary
        from dlpc.diagnostics import format_exception

        message = format_exception(e) or type(e).__name__
        # the process's own stderr: a silenced rank's errors are still seen
        print(f"{tool}: rank {rank}: {message}", file=sys.__stderr__, flush=True)
        # Hydra ends every process (its output proxies too) on an abort: a line still in
        # the pipe to the proxy is then lost, so the proxy gets a moment to forward it
        time.sleep(ABORT_GRACE_S)
        MPI.COMM_WORLD.Abort(1)
        return 1
