"""One rank of test_comm_mpi.py: every collective of dlpc.runtime.mpi against its numpy
definition (dlpc.reference.comm), then a compiled numpy program with comm ops.

    mpiexec -n 3 python test/python/comm_worker.py collectives

Every rank draws every rank's inputs from the same seed, so each can compute the
expected result of the whole group. Prints `ok <rank> <checks>` when all agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from dlpc.reference import comm as ref
from dlpc.runtime.mpi import guard, members, world

KINDS = ("sum", "prod", "min", "max", "avg")


def all_inputs(world_size: int, shape, dtype, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-3, 4, shape).astype(dtype) for _ in range(world_size)]
    # prod: values near 1, so a product of 4 stays well scaled
    return [(1 + 0.25 * rng.standard_normal(shape)).astype(dtype) for _ in range(world_size)]


def groups(n: int):
    yield (n, (), (), "")
    if n >= 3:
        yield (n, (0, 2), (), "")
        yield (n, (2, 0, 1), (), "")  # group order is not world order
    if n == 4:
        yield (n, (), (2, 2, 1), "dp")
        yield (n, (), (2, 2, 1), "tp")


def check(got, want, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"{what}: got {got.shape} {got.dtype}, want {want.shape} {want.dtype}")
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise AssertionError(f"{what}: got {got.ravel()[:6]}, want {want.ravel()[:6]}")


def collectives() -> int:
    C = world()
    r, n = C.rank, C.size
    count = 0
    for gi, group in enumerate(groups(n)):
        ranks = members(group, r)
        if r not in ranks:
            continue
        k = len(ranks)
        me = ranks.index(r)

        def mine(xs, ranks=ranks):
            return [xs[m] for m in ranks]

        for si, (shape, dtype) in enumerate(
            [((k * 3, 5), np.float32), ((k, 7), np.float64), ((2 * k, 3), np.int64)]
        ):
            seed = 100 * gi + si
            xs = mine(all_inputs(n, shape, dtype, seed))
            odd = mine(all_inputs(n, (7,), dtype, seed + 50))  # a second bucket member
            for kind in KINDS:
                if kind == "avg" and np.dtype(dtype).kind == "i":
                    continue
                a, b = C.all_reduce([xs[me], odd[me]], kind, group)
                check(a, ref.all_reduce(xs, kind)[me], f"all_reduce {kind} {group}")
                check(b, ref.all_reduce(odd, kind)[me], f"all_reduce {kind} bucket {group}")
                check(
                    C.reduce(xs[me], kind, 1 % k, group),
                    ref.reduce(xs, kind, 1 % k)[me],
                    f"reduce {kind}",
                )
                check(
                    C.reduce_scatter(xs[me], kind, 0, group),
                    ref.reduce_scatter(xs, kind, 0)[me],
                    f"reduce_scatter {kind}",
                )
                count += 3
            root = k - 1
            check(C.broadcast(xs[me], root, group), ref.broadcast(xs, root)[me], "broadcast")
            check(C.scatter(xs[me], 0, root, group), ref.scatter(xs, 0, root)[me], "scatter")
            for dim in (0, 1):
                check(C.gather(xs[me], dim, 0, group), ref.gather(xs, dim, 0)[me], "gather")
                check(C.all_gather(xs[me], dim, group), ref.all_gather(xs, dim)[me], "all_gather")
            check(C.all_to_all(xs[me], 0, 1, group), ref.all_to_all(xs, 0, 1)[me], "all_to_all")
            # a ring: send to the next group rank, receive from the previous one (the
            # even ranks send first, so the blocking sends cannot all wait)
            nxt, prv = (me + 1) % k, (me - 1) % k
            if me % 2 == 0:
                C.send(xs[me], nxt, 5, group)
                got = C.recv(xs[me].shape, str(xs[me].dtype), prv, 5, group)
            else:
                got = C.recv(xs[me].shape, str(xs[me].dtype), prv, 5, group)
                C.send(xs[me], nxt, 5, group)
            check(got, xs[prv], "send/recv ring")
            C.barrier(group)
            count += 9
    # results land in pooled buffers: a dropped result's buffer is written again (no
    # fresh pages per call), a held one never is
    group = (n, (), (), "")
    x = np.ones(1 << 14, np.float32)
    a = C.all_reduce([x], "sum", group)[0]
    where = a.ctypes.data
    del a
    b = C.all_reduce([x], "avg", group)[0]
    c = C.all_reduce([x], "sum", group)[0]
    assert b.ctypes.data == where and c.ctypes.data != where, "result buffers not pooled"
    check(b, np.ones_like(x), "pooled avg")
    check(c, np.full_like(x, n), "pooled sum")
    print(f"ok {r} {count}", flush=True)
    return 0


PROGRAM = """
func.func @main(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<{n5}xf32>, tensor<5xf32>) {
  %s = comm.all_reduce sum %x group <world {n}> : tensor<5xf32>
  %g = comm.all_gather %x dim 0 group <world {n}> : tensor<5xf32> -> tensor<{n5}xf32>
  %b = comm.broadcast %s root 1 group <world {n}> : tensor<5xf32>
  %y = graph.mul %b, %s : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  func.return %y, %g, %s : tensor<5xf32>, tensor<{n5}xf32>, tensor<5xf32>
}
"""


def program() -> int:
    """The textbook's first examples, then a program with comm ops through dlpc.compile
    on the numpy target."""
    import tempfile

    import dlpc

    C = world()
    r, n = C.rank, C.size
    group = (n, (), (), "")
    # a send of 1 from rank 0 arrives as 1 on rank 1
    if r == 0:
        C.send(np.ones(1, np.float32), 1, 0, group)
    elif r == 1:
        got = C.recv((1,), "float32", 0, 0, group)
        assert got[0] == 1.0, got
    # all-reduce of ones gives the number of ranks
    (total,) = C.all_reduce([np.ones(4, np.float32)], "sum", group)
    assert (total == n).all(), total

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "program.mlir"
        path.write_text(PROGRAM.replace("{n5}", str(5 * n)).replace("{n}", str(n)))
        model = dlpc.load(path)
    fn = dlpc.compile(model, target="numpy")
    xs = [np.arange(5, dtype=np.float32) * (q + 1) for q in range(n)]
    y, g, s = fn(xs[r])
    want_s = ref.all_reduce(xs, "sum")[r]
    check(s, want_s, "program all_reduce")
    check(y, want_s * want_s, "program broadcast * all_reduce")
    check(g, ref.all_gather(xs, 0)[r], "program all_gather")
    print(f"ok {r} program", flush=True)
    return 0


def fault() -> int:
    """Rank 1 raises while rank 0 waits in an all-reduce: guard aborts them both."""
    C = world()
    if C.rank == 1:
        raise ValueError("injected fault")
    C.all_reduce([np.ones(3, np.float32)], "sum", (C.size, (), (), ""))
    print(f"ok {C.rank} fault (unexpected)", flush=True)
    return 0


GRAD_PROGRAM = Path(__file__).resolve().parents[1] / "passes" / "graph-autodiff-comm.mlir"


def grad() -> int:
    """graph-autodiff through every comm op with a rule (test/passes/graph-autodiff-comm.mlir)
    against central differences of the objective the rules assume: the sum of every
    rank's loss, each rank's params perturbed in turn. The program is linear in w, so
    the differences are exact up to rounding."""
    import dlpc
    from dlpc.passes.train import _comm_grad as _rules  # noqa: F401 - the comm ops' rules
    from dlpc.passes.train.autodiff import differentiate

    C = world()
    r, n = C.rank, C.size
    group = (n, (), (), "")
    zero = {"w": np.zeros((4, 2), np.float32)}  # (bound per call below)
    model = dlpc.load(GRAD_PROGRAM, weights=zero)
    forward = dlpc.compile(model, target="numpy", fold_weights=False)
    backward_model = dlpc.load(GRAD_PROGRAM, weights=zero)
    differentiate(backward_model.module)
    backward = dlpc.compile(backward_model, target="numpy", fold_weights=False)
    rng = np.random.default_rng(r)
    x = rng.standard_normal((4, 2)).astype(np.float32)
    w = rng.standard_normal((4, 2)).astype(np.float32)

    def objective(w_mine):
        (loss,) = _call(forward, x, w_mine)
        (total,) = C.all_reduce([np.asarray(loss, np.float32).reshape(1)], "sum", group)
        return float(total[0])

    dw = _call(backward, x, w)[1]
    eps = 0.5
    for q in range(n):
        want = C.broadcast(dw, q, group)
        for i in range(w.size):
            step = np.zeros(w.size, np.float32)
            step[i] = eps
            step = step.reshape(w.shape)
            up = objective(w + step if r == q else w)
            down = objective(w - step if r == q else w)
            fd = (up - down) / (2 * eps)
            assert abs(fd - want.flat[i]) <= 1e-3 * max(1.0, abs(fd)), (q, i, fd, want.flat[i])
    print(f"ok {r} grad", flush=True)
    return 0


def _call(compiled, x, w):
    """Run a compiled numpy model with param w (its namespace's main, weights not folded)."""
    import builtins

    namespace: dict = {"__name__": "dlpc_generated"}
    exec(builtins.compile(compiled.source, "<dlpc>", "exec"), namespace)  # noqa: S102
    return [np.asarray(o) for o in namespace["main"](x, params={"w": w})]


MODES = {"collectives": collectives, "program": program, "fault": fault, "grad": grad}

if __name__ == "__main__":
    sys.exit(guard(MODES[sys.argv[1]], "comm_worker"))
