"""Tests of the comm runtime's decisions no single-process test pinned before the fifth
round of issue 35 (bench/mutation.py --area comm-runtime): the C driver the planner prints
for each collective on a stand-in world of 2 ranks (no mpiexec: the driver is planned,
not built), which buffer each op reads and writes, the split program's Python path on
that world, and SplitFunction(native=False). Fast: no rank is started."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from dlpc.diagnostics import DlpcError
from dlpc.runtime import mpi

pytest.importorskip("mpi4py")

from test_mutation_kills_commrt4 import _Stub, _world  # noqa: E402

# every collective on a [4, 6] value, each along an inner dim where it has one
CHAIN = """
func.func @main(%x: tensor<4x6xf32>) -> (tensor<4x6xf32>) {
  %w = graph.param "w" : tensor<4x6xf32>
  %h = graph.mul %x, %w : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = comm.all_reduce avg %h group <world 2> : tensor<4x6xf32>
  %g = comm.all_gather %a dim 1 group <world 2> : tensor<4x6xf32> -> tensor<4x12xf32>
  %s = comm.reduce_scatter avg %g dim 1 group <world 2> : tensor<4x12xf32> -> tensor<4x6xf32>
  %t = comm.all_to_all %s split 1 concat 0 group <world 2> : tensor<4x6xf32> -> tensor<8x3xf32>
  %b = comm.broadcast %t root 1 group <world 2> : tensor<8x3xf32>
  %r = comm.reduce max %b root 1 group <world 2> : tensor<8x3xf32>
  %c = comm.scatter %r dim 0 root 0 group <world 2> : tensor<8x3xf32> -> tensor<4x3xf32>
  %d = comm.gather %c dim 1 root 1 group <world 2> : tensor<4x3xf32> -> tensor<4x6xf32>
  %e = graph.relu %d : (tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %e : tensor<4x6xf32>
}
"""

SEGMENT = [
    "{",
    "  void *a[] = {ARGS};",
    "  int st = seg_prepare[K] ? seg_prepare[K](a) : 0;",
    "  if (!st) st = seg_main[K](a);",
    "  if (st) { dlpc_comm_segment = K; return st; }",
    "}",
]


def _segment(k: int, args: str) -> list[str]:
    return [f"  /* segment {k} */"] + [
        "  " + line.replace("ARGS", args).replace("K", str(k)) for line in SEGMENT
    ]


def _split(text: str, monkeypatch, tmp_path, size=2, rank=0, weights=None, native=False, fold=True):
    """The SplitFunction of `text` on a stand-in world of `size` (segments compiled for C)."""
    import dlpc
    from dlpc import api
    from dlpc.model import Model
    from dlpc.runtime.comm_split import SplitFunction

    world = _world(size, rank)
    monkeypatch.setattr(mpi, "world", lambda: world)
    path = tmp_path / "m.mlir"
    path.write_text(text)
    model = dlpc.load(path, weights=weights or {})

    def build(segment, k):
        part = Model(segment, model.weights, f"m_seg{k}")
        return api.compile(part, "c", fold_weights=fold).artifact

    return SplitFunction(model.module, build, native=native), model


def _plan(split, monkeypatch):
    """The driver NativeStep plans for `split`, without building or binding it."""
    from dlpc.backends.runtime import cbuild
    from dlpc.runtime import comm_native

    monkeypatch.setattr(cbuild, "build", lambda source, name, link: types.SimpleNamespace())
    monkeypatch.setattr(comm_native.NativeStep, "_bind", lambda self, split: None)
    mpic = comm_native.MpiC(Path("/x/include"), Path("/x/lib/libmpi.so"))
    return comm_native.NativeStep(split, mpic)


def _body(step) -> list[str]:
    text = step.source
    return text[text.index("int dlpc_comm_step") :].splitlines()


def test_every_collective_of_a_chain_on_two_ranks(monkeypatch, tmp_path):
    """The driver of CHAIN at rank 0 of 2, line by line: the all_reduce in place on the
    segment's output (blocking: its Wait would follow it), inner-dim gathers joined and
    scatters split by dlpc_chunks, a broadcast's operand copied on its root, a reduce's
    and a gather's result zeroed off the root, the last segment writing @main's output."""
    split, _ = _split(CHAIN, monkeypatch, tmp_path, weights={"w": np.ones((4, 6), np.float32)})
    step = _plan(split, monkeypatch)
    assert (step.n_args, step.count, step.plan.slots) == (2, 15, 15)
    assert [(k, step.fixed[k].shape) for k in sorted(step.fixed)] == [
        (3, (4, 6)),
        (4, (4, 12)),
        (5, (48,)),
        (6, (48,)),
        (7, (4, 6)),
        (8, (24,)),
        (9, (8, 3)),
        (10, (8, 3)),
        (11, (8, 3)),
        (12, (4, 3)),
        (13, (4, 6)),
        (14, (24,)),
    ]
    assert _body(step) == [
        "int dlpc_comm_step(void **S, int overlap) {",
        "  dlpc_comm_segment = -1;",
        *_segment(0, "S[0], S[1], S[3]"),
        "  /* comm.all_reduce avg */",
        '  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, S[3], 24, MPI_FLOAT, MPI_SUM, comm[0]), "MPI_Allreduce");',
        "  for (long i = 0; i < 24; i++) ((float *)S[3])[i] /= 2;",
        "  /* comm.all_gather */",
        '  MPI_CHECK(MPI_Allgather(S[3], 24, MPI_FLOAT, S[5], 24, MPI_FLOAT, comm[0]), "MPI_Allgather");',
        "  dlpc_chunks(S[4], S[5], 4, 2, 24, 1);",
        "  dlpc_chunks(S[6], S[4], 4, 2, 24, 0);",
        "  /* comm.reduce_scatter avg */",
        '  MPI_CHECK(MPI_Reduce_scatter_block(S[6], S[7], 24, MPI_FLOAT, MPI_SUM, comm[0]), "MPI_Reduce_scatter_block");',
        "  for (long i = 0; i < 24; i++) ((float *)S[7])[i] /= 2;",
        "  dlpc_chunks(S[8], S[7], 4, 2, 12, 0);",
        "  /* comm.all_to_all */",
        '  MPI_CHECK(MPI_Alltoall(S[8], 12, MPI_FLOAT, S[9], 12, MPI_FLOAT, comm[0]), "MPI_Alltoall");',
        "  if (comm_rank[0] == 1) {",
        "    memcpy(S[10], S[9], 96);",
        "  }",
        "  /* comm.broadcast */",
        '  MPI_CHECK(MPI_Bcast(S[10], 24, MPI_FLOAT, 1, comm[0]), "MPI_Bcast");',
        "  /* comm.reduce max */",
        '  MPI_CHECK(MPI_Reduce(S[10], S[11], 24, MPI_FLOAT, MPI_MAX, 1, comm[0]), "MPI_Reduce");',
        "  if (comm_rank[0] == 1) {",
        "  } else {",
        "    memset(S[11], 0, 96);",
        "  }",
        "  /* comm.scatter */",
        '  MPI_CHECK(MPI_Scatter(S[11], 12, MPI_FLOAT, S[12], 12, MPI_FLOAT, 0, comm[0]), "MPI_Scatter");',
        "  /* comm.gather */",
        '  MPI_CHECK(MPI_Gather(S[12], 12, MPI_FLOAT, S[14], 12, MPI_FLOAT, 1, comm[0]), "MPI_Gather");',
        "  if (comm_rank[0] == 1) {",
        "    dlpc_chunks(S[13], S[14], 4, 2, 12, 1);",
        "  } else {",
        "    memset(S[13], 0, 96);",
        "  }",
        *_segment(1, "S[13], S[2]"),
        "  return 0;",
        "}",
        "",
        "int dlpc_main(void **S) { return dlpc_comm_step(S, 1); }",
    ]


MIXED = """
func.func @main(%x: tensor<4x6xf32>, %i: tensor<4xi32>)
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4xi32>, tensor<4x6xf32>) {
  %w = graph.param "w" : tensor<4x6xf32>
  %h = graph.mul %x, %w : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %r = graph.relu %h : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %j = graph.add %i, %i : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %a, %b, %k = comm.all_reduce avg %h, %r, %j group <world 2> : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4xi32>
  %u = graph.add %h, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %m = comm.reduce avg %u root 0 group <world 2> : tensor<4x6xf32>
  %v = graph.neg %m : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = comm.broadcast %v root 0 group <world 2> : tensor<4x6xf32>
  %sc = comm.scatter %q dim 1 root 0 group <world 2> : tensor<4x6xf32> -> tensor<4x3xf32>
  %aa = comm.all_to_all %sc split 0 concat 1 group <world 2> : tensor<4x3xf32> -> tensor<2x6xf32>
  comm.send %aa to 0 tag 7 group <world 2> : tensor<2x6xf32>
  %rv = comm.recv from 0 tag 8 group <world 2> : tensor<4x6xf32>
  comm.barrier group <world 2>
  %o = graph.add %a, %rv : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %o, %b, %k, %x : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4xi32>, tensor<4x6xf32>
}
"""


def test_a_packed_bucket_overlaps_and_rooted_ops_on_a_non_root_rank(monkeypatch, tmp_path):
    """MIXED at rank 1 of 2: a bucket whose operand %h is read again is packed (one copy
    per operand) and sent as one f32 message, its i32 operand as another straight into
    its output; both stay non-blocking while the segments and ops between run, each
    waited for (and averaged) before its first reader; a reduce's average on the root
    only; a broadcast in its operand's buffer (only it reads it); a scatter's split on
    the root only; an all-to-all joined along its inner dim; send, recv, barrier; a
    returned bucket result and a returned input copied into their outputs."""
    split, _ = _split(
        MIXED, monkeypatch, tmp_path, rank=1, weights={"w": np.ones((4, 6), np.float32)}
    )
    step = _plan(split, monkeypatch)
    assert (step.n_args, step.count) == (3, 24)
    assert {k: a.dtype.name for k, a in step.fixed.items() if a.dtype != np.float32} == {9: "int32"}
    assert step.fixed[12].base is step.fixed[10] and step.fixed[14].base is step.fixed[10]
    assert step.fixed[13].base is step.fixed[11] and step.fixed[15].base is step.fixed[11]
    assert step.fixed[14].ctypes.data == step.fixed[10].ctypes.data + 96
    assert step.fixed[15].ctypes.data == step.fixed[11].ctypes.data + 96
    iallreduce = (
        "  if (overlap) MPI_CHECK(MPI_Iallreduce({s}, {r}, {n}, {t}, MPI_SUM, comm[0], "
        '&request[{q}]), "MPI_Iallreduce"); else MPI_CHECK(MPI_Allreduce({s}, {r}, {n}, {t}, '
        'MPI_SUM, comm[0]), "MPI_Allreduce");'
    )
    assert _body(step) == [
        "int dlpc_comm_step(void **S, int overlap) {",
        "  dlpc_comm_segment = -1;",
        *_segment(0, "S[0], S[1], S[2], S[7], S[8], S[9]"),
        "  memcpy(S[12], S[7], 96);",
        "  memcpy(S[14], S[8], 96);",
        "  /* comm.all_reduce avg */",
        iallreduce.format(s="S[10]", r="S[11]", n=48, t="MPI_FLOAT", q=0),
        "  /* comm.all_reduce avg */",
        iallreduce.format(s="S[9]", r="S[5]", n=4, t="MPI_INT32_T", q=1),
        *_segment(1, "S[7], S[0], S[16]"),
        "  /* comm.reduce avg */",
        '  MPI_CHECK(MPI_Reduce(S[16], S[17], 24, MPI_FLOAT, MPI_SUM, 0, comm[0]), "MPI_Reduce");',
        "  if (comm_rank[0] == 0) {",
        "    for (long i = 0; i < 24; i++) ((float *)S[17])[i] /= 2;",
        "  } else {",
        "    memset(S[17], 0, 96);",
        "  }",
        *_segment(2, "S[17], S[18]"),
        "  /* comm.broadcast */",
        '  MPI_CHECK(MPI_Bcast(S[18], 24, MPI_FLOAT, 0, comm[0]), "MPI_Bcast");',
        "  if (comm_rank[0] == 0) {",
        "    dlpc_chunks(S[19], S[18], 4, 2, 12, 0);",
        "  }",
        "  /* comm.scatter */",
        '  MPI_CHECK(MPI_Scatter(S[19], 12, MPI_FLOAT, S[20], 12, MPI_FLOAT, 0, comm[0]), "MPI_Scatter");',
        "  /* comm.all_to_all */",
        '  MPI_CHECK(MPI_Alltoall(S[20], 6, MPI_FLOAT, S[22], 6, MPI_FLOAT, comm[0]), "MPI_Alltoall");',
        "  dlpc_chunks(S[21], S[22], 2, 2, 12, 1);",
        "  /* comm.send */",
        '  MPI_CHECK(MPI_Send(S[21], 12, MPI_FLOAT, 0, 7, comm[0]), "MPI_Send");',
        "  /* comm.recv */",
        "  { double t0 = MPI_Wtime(); MPI_CHECK(MPI_Recv(S[23], 24, MPI_FLOAT, 0, 8, comm[0], "
        'MPI_STATUS_IGNORE), "MPI_Recv"); dlpc_comm_recv_seconds += MPI_Wtime() - t0; }',
        "  /* comm.barrier */",
        '  MPI_CHECK(MPI_Barrier(comm[0]), "MPI_Barrier");',
        "  /* wait for request 0 */",
        '  if (overlap) MPI_CHECK(MPI_Wait(&request[0], MPI_STATUS_IGNORE), "MPI_Wait");',
        "  for (long i = 0; i < 48; i++) ((float *)S[11])[i] /= 2;",
        *_segment(3, "S[13], S[23], S[3]"),
        "  /* wait for request 1 */",
        '  if (overlap) MPI_CHECK(MPI_Wait(&request[1], MPI_STATUS_IGNORE), "MPI_Wait");',
        "  for (long i = 0; i < 4; i++) ((int32_t *)S[5])[i] /= 2;",
        "  /* output 1 */",
        "  memcpy(S[4], S[15], 96);",
        "  /* output 3 */",
        "  memcpy(S[6], S[0], 96);",
        "  return 0;",
        "}",
        "",
        "int dlpc_main(void **S) { return dlpc_comm_step(S, 1); }",
    ]
    assert step.source.splitlines()[1:4] == [
        "#define DLPC_SEGMENTS 4",
        "#define DLPC_COMMS 1",
        "#define DLPC_REQUESTS 2",
    ]


GROUPS = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>) {
  %w = graph.param "w" : tensor<4xf32>
  %h = graph.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = comm.all_reduce avg %h group <world 4, mesh [2, 2, 1], axis "dp"> : tensor<4xf32>
  %b = comm.all_reduce avg %a group <world 4, ranks [2, 3]> : tensor<4xf32>
  %c = comm.broadcast %b root 1 group <world 4, mesh [2, 2, 1], axis "dp"> : tensor<4xf32>
  %d = comm.all_reduce avg %c group <world 4> : tensor<4xf32>
  func.return %d : tensor<4xf32>
}
"""


def test_each_set_of_ranks_has_one_communicator_in_program_order(monkeypatch, tmp_path):
    """GROUPS at world rank 2 of 4: the dp axis of a 2x2 mesh is ranks 0 and 2 (comm 0),
    ranks [2, 3] comm 1, the dp axis again comm 0 (its rank there is 1: the root), the
    world comm 2; each average divides by its own group's size; a result returned
    straight into @main's output."""
    split, _ = _split(
        GROUPS, monkeypatch, tmp_path, size=4, rank=2, weights={"w": np.ones(4, np.float32)}
    )
    step = _plan(split, monkeypatch)
    assert [c.size for c in step.comms] == [2, 2, 4]
    assert step.comms[2] is split.comm.world
    body = [line for line in _body(step) if "MPI_" in line or "/=" in line or "memcpy" in line]
    assert body == [
        '  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, S[3], 4, MPI_FLOAT, MPI_SUM, comm[0]), "MPI_Allreduce");',
        "  for (long i = 0; i < 4; i++) ((float *)S[3])[i] /= 2;",
        '  MPI_CHECK(MPI_Allreduce(S[3], S[4], 4, MPI_FLOAT, MPI_SUM, comm[1]), "MPI_Allreduce");',
        "  for (long i = 0; i < 4; i++) ((float *)S[4])[i] /= 2;",
        "    memcpy(S[5], S[4], 16);",
        '  MPI_CHECK(MPI_Bcast(S[5], 4, MPI_FLOAT, 1, comm[0]), "MPI_Bcast");',
        '  MPI_CHECK(MPI_Allreduce(S[5], S[2], 4, MPI_FLOAT, MPI_SUM, comm[2]), "MPI_Allreduce");',
        "  for (long i = 0; i < 4; i++) ((float *)S[2])[i] /= 4;",
    ]
    assert "  if (comm_rank[0] == 1) {" in _body(step)


# ---- runtime/comm_split.py: the Python path on a stand-in world ---------------------------

SUM = """
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %w = graph.param "w" : tensor<2x3xf32>
  %h = graph.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %a = comm.all_reduce sum %h group <world 2> : tensor<2x3xf32>
  %g = comm.all_gather %x dim 0 group <world 2> : tensor<2x3xf32> -> tensor<4x3xf32>
  %s = comm.reduce_scatter sum %g dim 0 group <world 2> : tensor<4x3xf32> -> tensor<2x3xf32>
  %t = graph.add %a, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %t, %s : tensor<2x3xf32>, tensor<2x3xf32>
}
"""


def test_native_false_keeps_the_python_path_on_c_segments(monkeypatch, tmp_path):
    """SplitFunction(native=False) with C segments runs its collectives through the
    communicator (the stand-in world of 2: a sum is twice this rank's value), started
    and waited with `overlap`, blocking without; it never plans the C driver (before,
    the segment loop's own `native` shadowed the argument)."""
    from dlpc.runtime import comm_native

    def refuse(*a, **k):
        raise AssertionError("the C driver was planned")

    monkeypatch.setattr(comm_native, "NativeStep", refuse)
    w = np.full((2, 3), 3.0, np.float32)
    split, _ = _split(SUM, monkeypatch, tmp_path, weights={"w": w})
    assert split.native is None and split.native_reason == "not asked for"
    assert all(s.function is not None and hasattr(s.function, "library") for s in split.segments)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    stub = split.comm.world
    t, s = split(x, params=[w])
    np.testing.assert_array_equal(t, 2 * x * w + x)
    np.testing.assert_array_equal(s, 2 * x)  # (the stub gathers this rank's rows only)
    assert stub.calls == ["Iallreduce", "Wait"]
    stub.calls.clear()
    split.overlap = False
    t, s = split(x, params=[w])
    np.testing.assert_array_equal(t, 2 * x * w + x)
    assert stub.calls == ["Allreduce"]


# ---- dist/*.py on a stand-in world: every rank sends what this one sends --------------------

SMALL = """model small(x: f32[B, 6]) {
  param fc1.weight: f32[4, 6] = kaiming(seed=1)
  param fc1.bias: f32[4] = normal(seed=3, std=0.1)
  param fc2.weight: f32[3, 4] = kaiming(seed=2)
  param fc2.bias: f32[3] = normal(seed=4, std=0.1)
  return linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
}
"""


class _Barrier(_Stub):
    def Barrier(self):
        self.calls.append("Barrier")


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.dlpc"
    path.write_text(SMALL)
    return path


def _batch(rows=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 6)).astype(np.float32), rng.integers(0, 3, rows)


def test_a_data_parallel_rank_steps_on_its_slice_of_the_global_batch(small, monkeypatch, tmp_path):
    """On a stand-in world of 2 an average over the ranks is this rank's own value, so
    rank 1's data-parallel step on a global batch of 4 is one device's step on rows 2..3
    (the rank's slice), bit for bit; a batch of another size is refused; only rank 0
    writes a checkpoint, every rank waits at the barrier."""
    import dlpc
    from dlpc.dist.data_parallel import DataParallelTrainer
    from dlpc.passes.train.optim import make_optimizer

    world = mpi.Communicator(_Barrier(2, 1))
    monkeypatch.setattr(mpi, "world", lambda: world)
    # (rank 0's initial state: the same seeded initialisers here; the stub's Bcast is none)
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: np.array(x))
    sgd = make_optimizer("sgd", lr=0.1)
    dp = DataParallelTrainer(str(small), "cross_entropy", sgd, batch_size=4, comm=world)
    one = dlpc.train.Trainer(str(small), "cross_entropy", sgd, batch_size=2, target="numpy")
    assert (dp.global_batch, dp.local_batch, dp.batch_size) == (4, 2, 4)
    x, y = _batch()
    for _ in range(2):
        assert dp.step(x, y) == one.step(x[2:4], y[2:4])
    for name, value in one.weights.items():
        np.testing.assert_array_equal(dp.weights[name], value)
    with pytest.raises(DlpcError, match=r"^error: a global batch has 4 samples, got 2$"):
        dp.step(x[:2], y[:2])
    world.world.calls.clear()
    dp.save(tmp_path / "s.npz")
    assert not (tmp_path / "s.npz").exists() and world.world.calls == ["Barrier"]
    with pytest.raises(
        DlpcError, match=r"^error: data parallel over 3 ranks, but MPI started 2 \(mpiexec -n 3\)$"
    ):
        DataParallelTrainer(str(small), batch_size=4, ranks=3, comm=world)
    with pytest.raises(
        DlpcError, match=r"^error: data-parallel steps run on targets numpy and c .*not 'dlp'$"
    ):
        DataParallelTrainer(str(small), batch_size=4, target="dlp", comm=world)
    from dlpc.passes.train.losses import Loss

    with pytest.raises(DlpcError, match=r"the loss reduction must be 'mean', not 'sum'$"):
        DataParallelTrainer(
            str(small), Loss("cross_entropy", reduction="sum"), batch_size=4, comm=world
        )


def test_a_data_parallel_checkpoint_is_read_on_rank_0_and_shared(small, monkeypatch, tmp_path):
    from dlpc.dist.data_parallel import DataParallelTrainer, read_state

    zero = mpi.Communicator(_Barrier(2, 0))
    monkeypatch.setattr(mpi, "world", lambda: zero)
    dp = DataParallelTrainer(str(small), "mse", "sgd", batch_size=2, comm=zero)
    x, _ = _batch(2)
    dp.step(x, np.zeros((2, 3), np.float32))
    dp.save(tmp_path / "s.npz")
    assert (tmp_path / "s.npz").exists() and zero.world.calls[-1] == "Barrier"
    with pytest.raises(DlpcError, match=r"^error: save path .*s\.txt must end in \.npz$"):
        dp.save(tmp_path / "s.txt")
    state = read_state(zero, tmp_path / "s.npz")
    assert int(state["opt.step"]) == 1
    other = DataParallelTrainer(str(small), "mse", "sgd", batch_size=2, comm=zero)
    other.load(tmp_path / "s.npz")
    for name, value in dp.weights.items():
        np.testing.assert_array_equal(other.weights[name], value)
    with pytest.raises(DlpcError, match=r"^error: no such weights file: .*none\.npz$"):
        read_state(zero, tmp_path / "none.npz")
    one = mpi.Communicator(_Barrier(2, 1))  # not rank 0: reads nothing, takes rank 0's
    sent = []
    monkeypatch.setattr(one.world, "bcast", lambda obj, root: sent.append(obj) or (state, None))
    assert read_state(one, tmp_path / "none.npz") is state and sent == [(None, None)]
    monkeypatch.setattr(one.world, "bcast", lambda obj, root: (None, "error: rank 0's"))
    with pytest.raises(DlpcError, match=r"^error: rank 0's$"):
        read_state(one, tmp_path / "s.npz")


def test_a_tensor_parallel_trainer_shards_and_gathers_its_state(small, monkeypatch):
    """On a stand-in world of 2 (rank 1): the hidden layer's weight and bias cut along
    dim 0, the second weight along dim 1; an optimizer slot cut as its param; the state
    gathered to whole shapes; a saved state cut back into this rank's shards."""
    from dlpc.dist.tensor_parallel import TensorParallelTrainer

    world = mpi.Communicator(_Barrier(2, 1))
    monkeypatch.setattr(mpi, "world", lambda: world)
    tp = TensorParallelTrainer(str(small), "cross_entropy", "adam", batch_size=2, comm=world)
    assert tp.sharded == {"fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1}
    assert tp.weights["fc1.weight"].shape == (2, 6) and tp.weights["fc2.weight"].shape == (3, 2)
    assert tp._sharded_dim("opt.exp_avg.fc2.weight") == 1
    assert tp._sharded_dim("opt.exp_avg.fc2.bias") is None
    assert tp._sharded_dim("opt.step") is None and tp._sharded_dim("fc1.bias") == 0
    state = tp.state
    assert state["fc1.weight"].shape == (4, 6) and state["opt.exp_avg_sq.fc2.weight"].shape == (
        3,
        4,
    )
    full = tp.full_weights()
    assert full["fc2.weight"].shape == (3, 4) and full["fc2.bias"].shape == (3,)
    whole = {n: np.arange(v.size, dtype=v.dtype).reshape(v.shape) for n, v in state.items()}
    box = {"state": whole}  # what rank 0 reads and broadcasts
    monkeypatch.setattr(world.world, "bcast", lambda obj, root: (box["state"], None))
    tp.load(None)
    np.testing.assert_array_equal(tp.weights["fc1.weight"], whole["fc1.weight"][2:])
    np.testing.assert_array_equal(tp.weights["fc2.weight"], whole["fc2.weight"][:, 2:])
    np.testing.assert_array_equal(tp.weights["fc2.bias"], whole["fc2.bias"])
    box["state"] = dict(whole, **{"fc2.weight": np.zeros((3, 3), np.float32)})
    with pytest.raises(
        DlpcError,
        match=r"^error: saved state 'fc2\.weight' of shape \(3, 3\) does not split into 2 "
        r"shards along dim 1$",
    ):
        tp.load(None)
    box["state"] = dict(whole, **{"fc1.bias": np.zeros((), np.float32)})
    with pytest.raises(DlpcError, match=r"does not split into 2 shards along dim 0$"):
        tp.load(None)
    with pytest.raises(DlpcError, match=r"^error: tensor parallel over 4 ranks, but MPI started 2"):
        TensorParallelTrainer(str(small), batch_size=2, ranks=4, comm=world)
    with pytest.raises(
        DlpcError, match=r"^error: tensor-parallel steps run on targets numpy and c"
    ):
        TensorParallelTrainer(str(small), batch_size=2, target="opencl", comm=world)


# ---- dist/parameter_server.py: the server's event loop and a worker, on a scripted world ----


class _Scripted:
    """A world whose `recv` returns scripted (message, source, tag) and whose `send` and
    `recv` calls are logged: the server's and a worker's loops without other ranks."""

    ANY_SOURCE, ANY_TAG = -1, -2

    def __init__(self, messages):
        self.messages = list(messages)
        self.sent: list[tuple[int, int, object]] = []
        self.asked: list[tuple[int, int]] = []
        scripted = self

        class Status:
            def Get_source(self):
                return scripted.source

            def Get_tag(self):
                return scripted.tag

        self.Status = Status

    def recv(self, source, tag, status=None):
        self.asked.append((source, tag))
        message, self.source, self.tag = self.messages.pop(0)
        return message

    def send(self, obj, dest, tag):
        self.sent.append((dest, tag, obj))


def _server(small, messages, staleness, rank=0, server=0):
    from dlpc.dist.parameter_server import AsyncParameterServer

    comm = mpi.Communicator(_Stub(3, rank))
    ps = AsyncParameterServer(
        str(small),
        "cross_entropy",
        lr=0.5,
        batch_size=4,
        staleness=staleness,
        comm=comm,
        server=server,
    )
    scripted = _Scripted(messages)
    comm.world = scripted  # type: ignore[assignment]
    comm.MPI = scripted  # (Status, ANY_SOURCE, ANY_TAG)
    return ps, scripted


def _g(k: float) -> dict:
    return {"fc1.bias": np.full(4, k, np.float32)}


def test_the_synchronous_server_serves_each_step_after_every_push(small):
    """Staleness 0, two workers (ranks 1, 2), two steps: a pull for step 1 waits until
    every worker pushed step 0; both step-0 gradients are applied then (lr / workers
    each), a round's params kept in the history; each reply goes to the puller's rank."""
    from dlpc.dist.parameter_server import PARAMS, PULL, PUSH, Pull

    ps, w = _server(
        small,
        [
            (0, 1, PULL),
            (0, 2, PULL),
            ((0, _g(1.0)), 1, PUSH),
            (1, 1, PULL),  # held: worker 1 has not pushed step 0
            ((0, _g(2.0)), 2, PUSH),
            (1, 2, PULL),
            ((1, _g(4.0)), 1, PUSH),
            ((1, _g(8.0)), 2, PUSH),
        ],
        staleness=0,
    )
    assert (ps.workers, ps.local, ps.worker) == (2, 2, -1)
    start = ps.trainer.weights["fc1.bias"].astype(np.float32)
    run = ps._serve(2)
    assert not w.messages and w.asked == [(-1, -2)] * 8
    assert run.pulls == [Pull(0, 0, 0, 0), Pull(1, 0, 0, 0), Pull(0, 1, 1, 2), Pull(1, 1, 1, 2)]
    assert [(dest, tag) for dest, tag, _ in w.sent] == [
        (1, PARAMS),
        (2, PARAMS),
        (1, PARAMS),
        (2, PARAMS),
    ]
    assert run.max_staleness == 0
    step = np.float32(0.5 / 2)
    np.testing.assert_array_equal(run.history[0]["fc1.bias"], start - step * 1 - step * 2)
    np.testing.assert_array_equal(
        run.weights["fc1.bias"], start - step * 1 - step * 2 - step * 4 - step * 8
    )
    assert len(run.history) == 2
    np.testing.assert_array_equal(run.weights["fc2.bias"], ps.trainer.weights["fc2.bias"])


def test_a_stale_server_lets_a_worker_run_ahead_by_its_bound(small):
    """Staleness 1: worker 0 pulls step 1 before worker 1 pushed anything (1 - 0 <= 1);
    a step-0 gradient is applied at once (k < slowest + 1), the step-1 one only once the
    slowest worker has pushed step 0; the history is every second update."""
    from dlpc.dist.parameter_server import PULL, PUSH, Pull

    ps, w = _server(
        small,
        [
            (0, 1, PULL),
            ((0, _g(1.0)), 1, PUSH),
            (1, 1, PULL),
            ((1, _g(2.0)), 1, PUSH),
            (0, 2, PULL),
            ((0, _g(4.0)), 2, PUSH),
            (1, 2, PULL),
            ((1, _g(8.0)), 2, PUSH),
        ],
        staleness=1,
    )
    start = ps.trainer.weights["fc1.bias"].astype(np.float32)
    run = ps._serve(2)
    assert run.pulls == [Pull(0, 0, 0, 0), Pull(0, 1, 0, 1), Pull(1, 0, 0, 1), Pull(1, 1, 1, 3)]
    assert run.max_staleness == 1 and [d for d, _, _ in w.sent] == [1, 1, 2, 2]
    step = np.float32(0.25)
    # applied: 1 (at once), then 2 and 4 once worker 1 pushed step 0, then 8
    np.testing.assert_array_equal(run.history[0]["fc1.bias"], start - step * 1 - step * 2)
    np.testing.assert_array_equal(
        run.weights["fc1.bias"], start - step * 1 - step * 2 - step * 4 - step * 8
    )


def test_a_worker_pulls_steps_on_its_rows_and_pushes_its_gradients(small):
    """Worker 1 (rank 2 of 3, server 0): for each step it asks for the params (PULL with
    its clock), steps on rows [2, 4) of the global batch with them and pushes (clock,
    gradients); its loss is one device's on those rows."""
    import dlpc
    from dlpc.dist.parameter_server import PARAMS, PULL, PUSH
    from dlpc.passes.train.optim import SGD

    x, y = _batch(4, seed=5)
    xs, ys = np.stack([x, x[::-1]]), np.stack([y, y[::-1]])
    ps, w = _server(small, [], staleness=0, rank=2)
    assert ps.worker == 1
    params = ps.trainer.weights
    w.messages = [(params, 0, PARAMS), (params, 0, PARAMS)]
    losses, correct = ps._work(xs, ys)
    one = dlpc.train.Trainer(str(small), "cross_entropy", SGD(), 2, "numpy", return_grads=True)
    assert losses[0] == one.step(x[2:4], y[2:4])
    one.load({**one.state, **params})
    assert losses[1] == one.step(x[::-1][2:4], y[::-1][2:4])
    assert w.asked == [(0, PARAMS), (0, PARAMS)]
    assert [(d, t) for d, t, _ in w.sent] == [(0, PULL), (0, PUSH), (0, PULL), (0, PUSH)]
    assert [w.sent[0][2], w.sent[2][2]] == [0, 1]
    clock, grads = w.sent[3][2]
    assert clock == 1 and sorted(grads) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    for name, g in one.grads.items():
        np.testing.assert_array_equal(grads[name], g)
    assert len(correct) == 2 and all(0 <= c <= 2 for c in correct)


# ---- dist/hybrid.py on a stand-in world of 4 ------------------------------------------------


def test_a_hybrid_rank_knows_its_row_column_and_shards(small, monkeypatch):
    """dp 2 x tp 2 at world rank 3: row 1, column 1; its tensor-parallel shards are the
    second halves; its row's share of a global batch of 4 is rows 2..3; the mesh, the
    target and a global batch of another size are refused in one line."""
    from dlpc.dist.hybrid import HybridTrainer

    world = mpi.Communicator(_Barrier(4, 3))
    monkeypatch.setattr(mpi, "world", lambda: world)
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: np.array(x))
    h = HybridTrainer(
        str(small), "cross_entropy", "sgd", batch_size=4, dp=2, tp=2, comm_world=world
    )
    assert (h.d, h.t, h.local_batch, h.global_batch) == (1, 1, 2, 4)
    assert h.tp_group == (4, (), (2, 2, 1), "tp") and h.dp_group == (4, (), (2, 2, 1), "dp")
    assert h.sharded == {"fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1}
    assert h.weights["fc1.weight"].shape == (2, 6)
    taken = []
    monkeypatch.setattr(
        HybridTrainer.__mro__[2], "_step", lambda self, x, y: taken.append((x, y)) or [0.0]
    )
    x, y = _batch(4)
    h._step(x, y)
    np.testing.assert_array_equal(taken[0][0], x[2:4])
    np.testing.assert_array_equal(taken[0][1], y[2:4])
    with pytest.raises(DlpcError, match=r"^error: a global batch has 4 samples, got 3$"):
        h._step(x[:3], y[:3])
    with pytest.raises(
        DlpcError, match=r"^error: a mesh of dp 2 x tp 1 needs 2 ranks, but MPI started 4$"
    ):
        HybridTrainer(str(small), batch_size=4, dp=2, tp=1, comm_world=world)
    with pytest.raises(
        DlpcError, match=r"^error: hybrid steps run on targets numpy and c, not 'dlp'$"
    ):
        HybridTrainer(str(small), batch_size=4, target="dlp", comm_world=world)
    with pytest.raises(DlpcError, match=r"^error: batch size 5 does not divide by 2 ranks"):
        HybridTrainer(str(small), batch_size=5, comm_world=world)


def test_a_hybrid_pipeline_checks_its_mesh_schedule_and_micro_batches(small, monkeypatch):
    from dlpc.dist.hybrid import HybridPipelineTrainer
    from dlpc.passes.train.losses import Loss

    world = mpi.Communicator(_Barrier(4, 2))
    monkeypatch.setattr(mpi, "world", lambda: world)
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: np.array(x))
    for kw, message in [
        ({"pp": 1}, r"^error: a mesh of dp 2 x pp 1 needs 2 ranks, but MPI started 4$"),
        ({"target": "opencl"}, r"^error: hybrid steps run on targets numpy and c, not 'opencl'$"),
        ({"schedule": "zb"}, r"^error: hybrid pipelines run gpipe and 1f1b, not 'zb'$"),
        ({"microbatches": 3}, r"^error: a row's batch 4 does not divide into 3 micro-batches$"),
        (
            {"loss": Loss("mse", reduction="sum")},
            r"^error: a pipeline needs a loss with reduction 'mean'$",
        ),
    ]:
        args = {"batch_size": 8, "comm_world": world, **kw}
        with pytest.raises(DlpcError, match=message):
            HybridPipelineTrainer(str(small), **args)
    h = HybridPipelineTrainer(
        str(small), "cross_entropy", "sgd", batch_size=8, microbatches=2, comm_world=world
    )
    assert (h.d, h.s, h.local_batch, h.global_batch) == (1, 0, 4, 8)
    assert h.group == h.pp_group == (4, (), (2, 1, 2), "pp") and h.dp_group == (
        4,
        (),
        (2, 1, 2),
        "dp",
    )
    h.owner = {"fc1.weight": 1, "fc2.bias": 0}  # (each param from its stage's rank; 0 else)
    roots = []
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: roots.append((root, group)) or x)
    full = h.full_weights()
    assert list(full) == list(h.weights)
    assert roots == [(h.owner.get(n, 0), h.pp_group) for n in h.weights]
    assert (1, h.pp_group) in roots


# ---- dist/pipeline.py: 2BW's two versions; dist/data_parallel.py: the synchronous server ----


def test_a_2bw_stage_steps_on_the_stashed_version_and_moves_its_update(monkeypatch):
    """PipelineTrainer's 2bw step on a stand-in world of 2 (the step itself replaced by
    an update of +1 that records the weights it ran on): the first step runs on W0, each
    later one on the version before the newest, its update added to the newest; the
    state carries the stash (from each param's stage), and load takes it back (a state
    without one leaves none)."""
    import dlpc.train as T
    from dlpc.dist.pipeline import PipelineTrainer

    world = _world(2)
    t = PipelineTrainer("examples/mlp.dlpc", "cross_entropy", "sgd", batch_size=4, comm=world)
    t.schedule = "2bw"
    seen = []

    def update(self, *arrays):
        current = self._resident.current()
        seen.append(np.array(current["fc1.bias"]))
        self._resident.assign({n: np.array(current[n]) + 1 for n in self.owner})
        return [np.float32(0.5)]

    monkeypatch.setattr(T.Trainer, "_step", update)
    w0 = np.array(t._resident.current()["fc1.bias"])
    assert t._step() == [0.5] and t._stash is not None
    np.testing.assert_array_equal(t._stash["fc1.bias"], w0)
    t._step()
    t._step()
    # (newest + (after - stash) rounds in float32: within an ulp of the sums)
    for k, ran in enumerate(seen):  # W0, W0, W1
        np.testing.assert_allclose(ran, w0 + max(k - 1, 0), rtol=0, atol=1e-6)
    np.testing.assert_allclose(t._resident.current()["fc1.bias"], w0 + 3, rtol=0, atol=1e-6)
    np.testing.assert_allclose(t._stash["fc1.bias"], w0 + 2, rtol=0, atol=1e-6)
    w2 = t._stash["fc1.bias"]
    roots = []
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: roots.append(root) or x)
    state = t.state
    np.testing.assert_array_equal(state["pipeline.stash.fc1.bias"], w2)
    assert sorted(n for n in state if n.startswith("pipeline.stash.")) == [
        f"pipeline.stash.{n}" for n in sorted(t.owner)
    ]
    assert roots.count(1) == 2 * sum(1 for s in t.owner.values() if s == 1)  # stash and slot
    t._stash = None
    t.load({n: np.array(v) for n, v in state.items()})
    np.testing.assert_array_equal(t._stash["fc1.bias"], w2)
    t.load({n: np.array(v) for n, v in state.items() if not n.startswith("pipeline.")})
    assert t._stash is None
    t.schedule = "1f1b"
    t.load({n: np.array(v) for n, v in state.items()})
    assert t._stash is None  # only 2bw keeps a second version
    monkeypatch.setattr(T.Trainer, "_step", lambda self, *a: ["plain"])
    assert t._step() == ["plain"]


def test_the_synchronous_servers_state_is_the_servers(small, monkeypatch, tmp_path):
    """ParameterServerTrainer (graph-parameter-server) on a stand-in world of 2 with the
    server on rank 1: weights and state are broadcast from it; rank 0 writes a checkpoint
    (an .npz path only) and every rank waits at the barrier."""
    from dlpc.dist.data_parallel import ParameterServerTrainer

    world = mpi.Communicator(_Barrier(2, 0))
    monkeypatch.setattr(mpi, "world", lambda: world)
    t = ParameterServerTrainer(str(small), "mse", "sgd", batch_size=2, server=1, comm=world)
    roots = []
    monkeypatch.setattr(
        world, "broadcast", lambda x, root, group: roots.append((root, group)) or np.array(x)
    )
    assert sorted(t.weights) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert roots == [(1, (2, (), (), ""))] * 4
    roots.clear()
    state = t.state
    # (Trainer.state reads the weights property too: 4 more)
    assert "opt.step" in state and len(roots) == len(state) + 4 and {r for r, _ in roots} == {1}
    with pytest.raises(DlpcError, match=r"^error: save path .*s\.txt must end in \.npz$"):
        t.save(tmp_path / "s.txt")
    t.save(tmp_path / "s.npz")
    assert world.world.calls[-1] == "Barrier"
    assert sorted(np.load(tmp_path / "s.npz").files) == sorted(state)
    other = mpi.Communicator(_Barrier(2, 1))
    monkeypatch.setattr(mpi, "world", lambda: other)
    monkeypatch.setattr(other, "broadcast", lambda x, root, group: np.array(x))
    u = ParameterServerTrainer(str(small), "mse", "sgd", batch_size=2, server=1, comm=other)
    u.save(tmp_path / "u.npz")
    assert not (tmp_path / "u.npz").exists() and other.world.calls[-1] == "Barrier"


# ---- runtime/mpi.py: the point-to-point ops and all_to_all on a stand-in world --------------


class _PointToPoint(_Barrier):
    def Send(self, buf, dest, tag):
        self.calls.append(("Send", buf.copy(), dest, tag))

    def Recv(self, buf, source, tag):
        self.calls.append(("Recv", buf.shape, buf.dtype.name, source, tag))
        buf[...] = 7


def test_send_recv_barrier_and_all_to_all(monkeypatch):
    c = mpi.Communicator(_PointToPoint(2, 0))
    g = (2, (), (), "")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    c.send(x.T, 1, 5, g)
    kind, sent, dest, tag = c.world.calls[-1]
    assert (kind, dest, tag) == ("Send", 1, 5) and sent.flags.c_contiguous
    np.testing.assert_array_equal(sent, x.T)
    clock = iter([10.0, 12.5, 20.0, 20.25])
    monkeypatch.setattr(mpi, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    got = c.recv([2, 3], "int32", 1, 6, g)
    assert c.world.calls[-1] == ("Recv", (2, 3), "int32", 1, 6)
    assert got.dtype == np.int32 and (got == 7).all() and c.recv_seconds == 2.5
    c.recv([1], "float64", 1, 7, g)
    assert c.recv_seconds == 2.75
    c.barrier(g)
    assert c.world.calls[-1] == "Barrier"
    # the stub's Alltoall returns what it sends: the chunks along split_dim joined along
    # concat_dim
    out = c.all_to_all(x, 1, 0, g)
    np.testing.assert_array_equal(out, np.concatenate(np.split(x, 2, axis=1), axis=0))
    out = c.all_to_all(x, 0, 1, g)
    np.testing.assert_array_equal(out, np.concatenate(np.split(x, 2, axis=0), axis=1))


# ---- dist/cli.py: a rank's body ---------------------------------------------------------------


def test_a_rank_other_than_0_is_silent_and_blas_takes_a_cores_share(monkeypatch):
    import io
    import sys

    from dlpc.dist import cli

    outs = []
    monkeypatch.setattr(mpi, "guard", lambda fn, tool: fn())
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for rank in (0, 1):
        world = _world(2, rank)
        monkeypatch.setattr(mpi, "world", lambda world=world: world)

        def train_fn(args, data):
            print("hello")
            outs.append((args, data, sys.stdout.name if hasattr(sys.stdout, "name") else "kept"))
            return 3

        assert cli.train("ARGS", lambda: "DATA", train_fn) == 3
    assert outs[0] == ("ARGS", "DATA", "kept") and outs[1][2] == "/dev/null"
    limits = []

    class Local:
        def Get_size(self):
            return 3

        def Free(self):
            limits.append("Free")

    world = _world(2)
    world.world.Split_type = lambda kind: Local()  # type: ignore[attr-defined]
    monkeypatch.setattr(mpi, "world", lambda: world)
    import threadpoolctl

    monkeypatch.setattr(
        threadpoolctl,
        "threadpool_limits",
        lambda limits=None, user_api=None: outs.append((limits, user_api)),
    )
    cli._limit_blas_threads()  # OMP_NUM_THREADS set: nothing
    assert limits == []
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 8)
    cli._limit_blas_threads()
    assert limits == ["Free"] and outs[-1] == (8 // 3, "blas")
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)
    cli._limit_blas_threads()
    assert outs[-1] == (1, "blas")


# ---- runtime/comm_split.py: why not native, and the Python path's other steps ----------------

UNREAD = """
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
  %w = graph.param "w" : tensor<2x3xf32>
  %h = graph.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %n = graph.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %a = comm.all_reduce sum %h group <world 2> : tensor<2x3xf32>
  comm.send %h to 1 tag 3 group <world 2> : tensor<2x3xf32>
  comm.barrier group <world 2>
  %t = graph.add %h, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %u = graph.relu %t : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %t : tensor<2x3xf32>
}
"""


def test_the_python_path_runs_sends_barriers_and_unread_all_reduces(monkeypatch, tmp_path):
    """A run of ops whose values nothing after it reads is no segment (%n; %u at the
    end); send and barrier have no results; an all_reduce whose results nothing reads
    is still started and completed before the call returns."""
    w = np.full((2, 3), 2.0, np.float32)
    split, _ = _split(UNREAD, monkeypatch, tmp_path, weights={"w": w})
    stub = _PointToPoint(2, 0)
    split.comm = mpi.Communicator(stub)
    assert len(split.segments) == 2  # (x*w, neg x) and (h + x, relu: only %t returned)
    assert [len(s.outputs) for s in split.segments] == [1, 1]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (t,) = split(x, params=[w])
    np.testing.assert_array_equal(t, x * w + x)
    kinds = [c if isinstance(c, str) else c[0] for c in stub.calls]
    assert kinds == ["Iallreduce", "Send", "Barrier", "Wait"]
    np.testing.assert_array_equal(stub.calls[1][1], x * w)


HALF = """
func.func @main(%x: tensor<4xf16>) -> (tensor<4xf16>) {
  %h = graph.neg %x : (tensor<4xf16>) -> tensor<4xf16>
  %a = comm.all_reduce sum %h group <world 2> : tensor<4xf16>
  func.return %a : tensor<4xf16>
}
"""


def test_why_a_split_program_has_no_c_driver(monkeypatch, tmp_path):
    from dlpc.runtime import comm_native

    mpic = comm_native.MpiC(Path("/x/include"), Path("/x/lib/libmpi.so"))
    monkeypatch.setattr(comm_native, "find_mpi_c", lambda: (mpic, ""))
    split, _ = _split(HALF, monkeypatch, tmp_path, native=None)
    assert split.native is None
    assert split.native_reason == "comm.all_reduce on float16 (no MPI type in the driver)"

    def refuse(split, mpi):
        raise DlpcError("error: comm_driver.so does not see mpi4py's MPI (another libmpi?)")

    monkeypatch.setattr(comm_native, "NativeStep", refuse)
    split, _ = _split(
        SUM, monkeypatch, tmp_path, weights={"w": np.ones((2, 3), np.float32)}, native=None
    )
    assert split.native is None and split.native_reason.startswith("error: comm_driver.so")
    monkeypatch.setattr(comm_native, "find_mpi_c", lambda: (None, "no mpi.h here"))
    split, _ = _split(
        SUM, monkeypatch, tmp_path, weights={"w": np.ones((2, 3), np.float32)}, native=None
    )
    assert split.native is None and split.native_reason == "no mpi.h here"
    assert "// ---- the step" not in split.source and split.source.startswith(
        "// ---- segment 0 of 2\n"
    )


def test_a_run_gathers_every_workers_losses_in_worker_order(small):
    """AsyncParameterServer.run at worker 0 (rank 1 of 3, server 2): its steps, then every
    rank's (losses, correct) gathered and the server's Run broadcast from the server;
    the losses listed by worker (ranks 0 and 1), the server's entry skipped."""
    from dlpc.dist.parameter_server import PARAMS, Run

    ps, w = _server(small, [], staleness=0, rank=1, server=2)
    assert (ps.worker, ps._worker_rank(0), ps._worker_rank(1)) == (1, 0, 1)
    params = ps.trainer.weights
    w.messages = [(params, 2, PARAMS)]
    x, y = _batch(4, seed=6)
    gathered = []

    def allgather(mine):
        gathered.append(mine)
        return [([9.0], [1.0]), mine, ([], [])]  # ranks 0 (worker 0), 1 (us), 2 (server)

    w.allgather = allgather  # type: ignore[attr-defined]
    w.bcast = lambda run, root: Run(weights={}, pulls=[]) if root == 2 else None  # type: ignore[attr-defined]
    run = ps.run(x[None], y[None])
    (mine,) = gathered
    assert run.losses == [[9.0], mine[0]] and run.correct == [[1.0], mine[1]]
    assert [(d, t) for d, t, _ in w.sent][0] == (2, 11)  # PULL to the server's rank
    with pytest.raises(DlpcError, match=r"^error: a global batch has 4 samples, got 2$"):
        ps.run(x[None, :2], y[None, :2])
    with pytest.raises(DlpcError, match=r"^error: server 3 is not a rank of 3$"):
        _server(small, [], staleness=0, server=3)
    with pytest.raises(DlpcError, match=r"^error: staleness must be >= 0, got -1$"):
        _server(small, [], staleness=-1)


# ---- the trainers' checkpoints on a stand-in world ------------------------------------------


def test_tensor_parallel_and_pipeline_checkpoints_are_rank_0s(small, monkeypatch, tmp_path):
    """TP: rank 0 writes the gathered state (an .npz path only), rank 1 gathers and waits;
    a model without a linear pair is refused. Pipeline: rank 1 still takes part in the
    state's broadcasts and waits at the barrier; full_weights is its weights."""
    from dlpc.dist.pipeline import PipelineTrainer
    from dlpc.dist.tensor_parallel import TensorParallelTrainer

    for rank in (0, 1):
        world = mpi.Communicator(_Barrier(2, rank))
        monkeypatch.setattr(mpi, "world", lambda world=world: world)
        tp = TensorParallelTrainer(str(small), "cross_entropy", "sgd", batch_size=2, comm=world)
        path = tmp_path / f"tp{rank}.npz"
        tp.save(path)
        assert path.exists() == (rank == 0) and world.world.calls[-1] == "Barrier"
        if rank == 0:
            saved = np.load(path)
            assert saved["fc1.weight"].shape == (4, 6) and saved["fc2.weight"].shape == (3, 4)
            with pytest.raises(DlpcError, match=r"^error: save path .*t\.txt must end in \.npz$"):
                tp.save(tmp_path / "t.txt")
    one = tmp_path / "one.dlpc"
    one.write_text(
        "model one(x: f32[B, 6]) {\n  param w: f32[3, 6] = kaiming(seed=1)\n"
        "  return linear(x, w)\n}\n"
    )
    with pytest.raises(
        DlpcError,
        match=r"^error: one has no linear pair \(linear, elementwise, linear\), attention or conv "
        r"to split over ranks$",
    ):
        TensorParallelTrainer(str(one), batch_size=2, comm=world)
    world = mpi.Communicator(_Barrier(2, 1))
    pp = PipelineTrainer("examples/mlp.dlpc", "cross_entropy", "sgd", batch_size=4, comm=world)
    roots = []
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: roots.append(root) or x)
    pp.save(tmp_path / "pp.npz")
    assert not (tmp_path / "pp.npz").exists() and world.world.calls[-1] == "Barrier"
    assert len(roots) == len(pp.owner) and roots.count(1) == list(pp.owner.values()).count(1)
    roots.clear()
    assert sorted(pp.full_weights()) == sorted(pp.owner) and len(roots) == len(pp.owner)


def test_a_hybrid_row_gathers_its_shards_along_tp(small, monkeypatch):
    from dlpc.dist.hybrid import HybridTrainer

    world = mpi.Communicator(_Barrier(4, 1))
    monkeypatch.setattr(mpi, "world", lambda: world)
    monkeypatch.setattr(world, "broadcast", lambda x, root, group: np.array(x))
    h = HybridTrainer(
        str(small), "cross_entropy", "sgd", batch_size=4, dp=2, tp=2, comm_world=world
    )
    assert (h.d, h.t) == (0, 1)
    gathered = []
    monkeypatch.setattr(
        world,
        "all_gather",
        lambda x, dim, group: gathered.append((dim, group)) or np.concatenate([x, x], axis=dim),
    )
    full = h.full_weights()
    assert full["fc1.weight"].shape == (4, 6) and full["fc2.weight"].shape == (3, 4)
    assert full["fc2.bias"].shape == (3,)
    assert sorted(gathered) == [(0, h.tp_group), (0, h.tp_group), (1, h.tp_group)]


def test_the_async_servers_checkpoint_is_one_devices_sgd_state(small, monkeypatch, tmp_path):
    """AsyncParameterServerTrainer (a stand-in world of 3): its state is one device's
    SGD state with the steps done and the epoch; rank 0 writes it; load restores the
    params, the epoch and the steps; evaluate is the trainer's."""
    from dlpc.dist import parameter_server as PS

    world = mpi.Communicator(_Barrier(3, 0))
    t = PS.AsyncParameterServerTrainer(str(small), "cross_entropy", "sgd", batch_size=4, comm=world)
    assert t.spec is t.trainer.spec and t.weights.keys() == t.trainer.weights.keys()
    t.steps_done, t.epoch = 6, 2
    state = t.state
    assert (
        int(state["opt.step"]) == 6 and state["opt.step"].dtype == t.trainer.state["opt.step"].dtype
    )
    assert state["trainer.epoch"].dtype == np.int64 and int(state["trainer.epoch"]) == 2
    with pytest.raises(DlpcError, match=r"^error: save path .*s\.txt must end in \.npz$"):
        t.save(tmp_path / "s.txt")
    t.save(tmp_path / "s.npz")
    assert world.world.calls[-1] == "Barrier"
    u = PS.AsyncParameterServerTrainer(str(small), "cross_entropy", "sgd", batch_size=4, comm=world)
    u.load(tmp_path / "s.npz")
    assert (u.epoch, u.steps_done) == (2, 6)
    for name, value in t.weights.items():
        np.testing.assert_array_equal(u.weights[name], value)
    x, y = _batch(4, seed=7)
    assert u.evaluate(x, y) == u.trainer.evaluate(x, y)
    other = mpi.Communicator(_Barrier(3, 1))
    w = PS.AsyncParameterServerTrainer(str(small), "cross_entropy", "sgd", batch_size=4, comm=other)
    w.save(tmp_path / "w.npz")
    assert not (tmp_path / "w.npz").exists() and other.world.calls[-1] == "Barrier"


# ---- runtime/comm_native.py at world 1, in-process (MPI's singleton) --------------------------

ONE = """
func.func @main(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>) {
  %w = graph.param "w" : tensor<5x5xf32>
  %h = graph.matmul %x, %w : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %a = comm.all_reduce avg %h group <world 1> : tensor<4x5xf32>
  %t = graph.add %a, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %t : tensor<4x5xf32>
}
"""


def test_the_drivers_output_is_reused_only_once_the_caller_drops_it(tmp_path):
    """NativeStep at world 1: a call's output array is written again by the next call
    only when the caller holds no reference to it; held, the next call gets a new one."""
    import dlpc
    from dlpc.runtime import comm_native

    path = tmp_path / "one.mlir"
    path.write_text(ONE)
    comm_native.find_mpi_c.cache_clear()
    compiled = dlpc.compile(dlpc.load(path, weights={"w": np.eye(5, dtype=np.float32)}), target="c")
    fn = compiled.artifact
    if fn.native is None:  # type: ignore[union-attr]
        pytest.skip(fn.native_reason)  # type: ignore[union-attr]
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    (first,) = compiled(x)
    np.testing.assert_array_equal(first, 2 * x)
    (second,) = compiled(x + 1)  # `first` held: a new array
    assert second.ctypes.data != first.ctypes.data
    np.testing.assert_array_equal(first, 2 * x)
    np.testing.assert_array_equal(second, 2 * (x + 1))
    address = second.ctypes.data
    del first, second
    (third,) = compiled(x)  # nothing holds the last one: written again
    assert third.ctypes.data == address
    np.testing.assert_array_equal(third, 2 * x)
    assert fn.native.split.comm.recv_seconds == 0.0  # type: ignore[union-attr]


# ---- written after the comm-runtime seed-44 draw, for its survivor ---------------------------

SQUARE = """
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
  %w = graph.param "w" : tensor<3x3xf32>
  %h = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %a = comm.all_reduce sum %h group <world 2> : tensor<2x3xf32>
  %t = graph.add %a, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %t : tensor<2x3xf32>
}
"""


def test_a_segments_kept_buffers_have_its_outputs_shapes(monkeypatch, tmp_path):
    """The Python path's kept buffer of a segment output is the output's own spec, after
    the segment's one input and one unfolded param (a training step's) (comm-runtime seed 44's survivor
    comm_split.py:186, `num_inputs + params` -> `num_inputs | params`: 1 | 1 took the
    [3, 3] param's spec for the [2, 3] output)."""
    w = (np.arange(9, dtype=np.float32).reshape(3, 3) - 4) / 4
    split, _ = _split(SQUARE, monkeypatch, tmp_path, weights={"w": w}, fold=False)
    (first, _) = split.segments
    assert first.function is not None and first.function.param_names == ["w"]  # (not folded)
    assert [k.shape for k in first.kept] == [(2, 3)]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    (t,) = split(x, params=[w])
    np.testing.assert_allclose(t, 2 * (x @ w) + x, rtol=1e-6)


def test_the_async_servers_workers_take_the_options_they_are_given(small):
    """AsyncParameterServerTrainer passes opt_level and bn_momentum (dlpc-train's
    --bn-momentum) to the workers' step; before, it dropped both (comm-runtime seed 44's
    equivalent survivor parameter_server.py:206: the default was never read)."""
    from dlpc.dist import parameter_server as PS

    world = mpi.Communicator(_Barrier(3, 1))
    t = PS.AsyncParameterServerTrainer(
        str(small), "cross_entropy", "sgd", batch_size=4, comm=world, opt_level=1, bn_momentum=0.3
    )
    assert (t.trainer.opt_level, t.trainer._bn_momentum) == (1, 0.3)
    d = PS.AsyncParameterServerTrainer(str(small), "cross_entropy", "sgd", batch_size=4, comm=world)
    assert (d.trainer.opt_level, d.trainer._bn_momentum) == (2, 0.1)
