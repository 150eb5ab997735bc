"""Comm ops on MPI: the communicator a rank's generated numpy program calls.

    COMM = world()                                  # MPI.COMM_WORLD, initialised once
    a, b = COMM.all_reduce([ga, gb], kind="avg", group=(2, (), (), ""))

Every method takes the op's inputs as numpy arrays and its properties as plain values
(`dlpc.reference.comm.op_args`), and returns its results as new arrays, with the meaning
of `dlpc.reference.comm` (checked on 2, 3 and 4 ranks in test/python/test_comm_mpi.py).
A group is `(world, ranks, mesh, axis)` as `comm.group` prints it; a sub-communicator per
distinct set of world ranks is made once (MPI_Comm_create_group: collective over the
group's members only) and kept. Several all_reduce operands travel as one message (a
bucket): packed into one contiguous buffer per dtype, reduced, unpacked.
`all_reduce_start` is the same as MPI_Iallreduce: it returns a `PendingAllReduce` whose
`wait()` gives the results, so computation can run while the bucket is in flight.

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


def _chunks(x: np.ndarray, n: int, dim: int) -> np.ndarray:
    """[n, *chunk]: x split into n along `dim`, contiguous chunk by chunk."""
    return np.ascontiguousarray(np.stack(np.split(x, n, axis=dim)))


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
        self._scratch: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._ops = {
            "sum": MPI.SUM,
            "avg": MPI.SUM,
            "prod": MPI.PROD,
            "min": MPI.MIN,
            "max": MPI.MAX,
        }

    # ---- groups ----------------------------------------------------------------
    def _comm(self, group: Group) -> tuple[Any, tuple[int, ...]]:
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
        outs: list[np.ndarray] = [np.empty(0)] * len(xs)
        by_dtype: dict[np.dtype, list[int]] = {}
        for k, x in enumerate(xs):
            by_dtype.setdefault(np.asarray(x).dtype, []).append(k)
        for dtype, ks in by_dtype.items():
            # one bucket, one message, through buffers kept per size: MPI on fresh
            # buffers pays their pages' faults and registration on every call
            # (figures: docs/distributed.md)
            total = sum(np.asarray(xs[k]).size for k in ks)
            send, recv = self._buffers(total, dtype)
            offset = 0
            for k in ks:
                size = np.asarray(xs[k]).size
                send[offset : offset + size] = np.asarray(xs[k]).reshape(-1)
                offset += size
            comm.Allreduce(send, recv, op=self._op(kind))
            if kind == "avg":
                recv /= np.asarray(len(ranks), dtype=dtype)
            offset = 0
            for k in ks:
                size = np.asarray(xs[k]).size
                outs[k] = recv[offset : offset + size].reshape(np.shape(xs[k])).copy()
                offset += size
        return outs

    def all_reduce_start(
        self, xs: Sequence[np.ndarray], kind: str, group: Group, key: object = None
    ) -> PendingAllReduce:
        """`all_reduce` as MPI_Iallreduce: the operands are packed (so the caller may
        overwrite them at once) and the request started; `.wait()` returns the results.
        `key` names the bucket: its buffers stay its own while other buckets are in
        flight (the blocking call's buffers are shared by size)."""
        comm, ranks = self._comm(group)
        pending = PendingAllReduce(len(xs), kind, len(ranks))
        by_dtype: dict[np.dtype, list[int]] = {}
        for k, x in enumerate(xs):
            by_dtype.setdefault(np.asarray(x).dtype, []).append(k)
        for dtype, ks in by_dtype.items():
            total = sum(np.asarray(xs[k]).size for k in ks)
            send, recv = self._buffers(total, dtype, key)
            offset = 0
            shapes = []
            for k in ks:
                size = np.asarray(xs[k]).size
                send[offset : offset + size] = np.asarray(xs[k]).reshape(-1)
                shapes.append((k, offset, size, np.shape(xs[k])))
                offset += size
            pending.parts.append((comm.Iallreduce(send, recv, op=self._op(kind)), recv, shapes))
        return pending

    def _buffers(
        self, size: int, dtype: np.dtype, bucket: object = None
    ) -> tuple[np.ndarray, np.ndarray]:
        key = (size, dtype) if bucket is None else (size, dtype, bucket)
        if key not in self._scratch:
            self._scratch[key] = (np.empty(size, dtype), np.empty(size, dtype))
        return self._scratch[key]

    def broadcast(self, x: np.ndarray, root: int, group: Group) -> np.ndarray:
        comm, _ = self._comm(group)
        buf = np.array(x, copy=True, order="C")
        comm.Bcast(buf, root=root)
        return buf

    def reduce(self, x: np.ndarray, kind: str, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = np.zeros_like(send)
        comm.Reduce(send, recv, op=self._op(kind), root=root)
        if kind == "avg" and comm.Get_rank() == root:
            recv /= np.asarray(len(ranks), dtype=recv.dtype)
        return recv

    def scatter(self, x: np.ndarray, dim: int, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        n = len(ranks)
        chunks = _chunks(np.asarray(x), n, dim)
        recv = np.empty_like(chunks[0])
        comm.Scatter(chunks if comm.Get_rank() == root else None, recv, root=root)
        return recv

    def gather(self, x: np.ndarray, dim: int, root: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = np.empty((len(ranks), *send.shape), send.dtype)
        comm.Gather(send, recv if comm.Get_rank() == root else None, root=root)
        whole = np.concatenate(list(recv), axis=dim)
        return whole if comm.Get_rank() == root else np.zeros_like(whole)

    def all_gather(self, x: np.ndarray, dim: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        send = np.ascontiguousarray(x)
        recv = np.empty((len(ranks), *send.shape), send.dtype)
        comm.Allgather(send, recv)
        return np.concatenate(list(recv), axis=dim)

    def reduce_scatter(self, x: np.ndarray, kind: str, dim: int, group: Group) -> np.ndarray:
        comm, ranks = self._comm(group)
        chunks = _chunks(np.asarray(x), len(ranks), dim)
        recv = np.empty_like(chunks[0])
        comm.Reduce_scatter_block(chunks, recv, op=self._op(kind))
        if kind == "avg":
            recv /= np.asarray(len(ranks), dtype=recv.dtype)
        return recv

    def all_to_all(self, x: np.ndarray, split_dim: int, concat_dim: int, group: Group):
        comm, ranks = self._comm(group)
        send = _chunks(np.asarray(x), len(ranks), split_dim)
        recv = np.empty_like(send)
        comm.Alltoall(send, recv)
        return np.concatenate(list(recv), axis=concat_dim)

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
    requests (one per dtype) and returns the results as new arrays, as `all_reduce`."""

    def __init__(self, n: int, kind: str, size: int):
        self.n, self.kind, self.size = n, kind, size
        self.parts: list[tuple[Any, np.ndarray, list]] = []
        self.results: list[np.ndarray] | None = None

    def wait(self) -> list[np.ndarray]:
        if self.results is None:
            outs: list[np.ndarray] = [np.empty(0)] * self.n
            for request, recv, shapes in self.parts:
                request.Wait()
                if self.kind == "avg":
                    recv /= np.asarray(self.size, dtype=recv.dtype)
                for k, offset, size, shape in shapes:
                    outs[k] = recv[offset : offset + size].reshape(shape).copy()
            self.results = outs
        return self.results


_WORLD: Communicator | None = None


def world() -> Communicator:
    """The communicator of MPI_COMM_WORLD (MPI is initialised on the first call)."""
    global _WORLD
    if _WORLD is None:
        _WORLD = Communicator()
    return _WORLD


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
        MPI.COMM_WORLD.Abort(1)
        return 1
