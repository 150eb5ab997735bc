"""More tests written against surviving mutants of the comm area (issue 35,
bench/mutation.py --area comm): the mesh's ranks and its check, the reference average,
the deadlock check's tags, a pipeline's metrics, tensor-parallel gradients, data-parallel
buckets. Small IR through the passes in-process; no MPI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import comm, graph
from dlpc.passes.pipeline import parse_module

PASSES = Path(__file__).parent.parent / "passes"


def _opt(tmp_path, text: str, passes: str, capsys) -> tuple[int, str, str]:
    from dlpc.tools.dlpc_opt import main

    path = tmp_path / "in.mlir"
    path.write_text(text)
    code = main([str(path), "-p", passes])
    out, err = capsys.readouterr()
    return code or 0, out, err


def test_mesh_members_are_row_major_ranks():
    """mesh 2x3x2 (rank = (d * 3 + t) * 2 + p): each axis's group seen from rank 11
    (d 1, t 2, p 1) and from rank 4 (d 0, t 2, p 0)."""
    mesh = (2, 3, 2)
    assert comm.GroupAttr.of(12, mesh=mesh, axis="dp").members(11) == (5, 11)
    assert comm.GroupAttr.of(12, mesh=mesh, axis="tp").members(11) == (7, 9, 11)
    assert comm.GroupAttr.of(12, mesh=mesh, axis="pp").members(11) == (10, 11)
    assert comm.GroupAttr.of(12, mesh=mesh, axis="tp").members(4) == (0, 2, 4)


@pytest.mark.parametrize("mesh", [(2, 2), (4,), (1, 2, 2, 1)])
def test_a_mesh_must_have_three_axes(mesh):
    """The product matching the world is not enough: the mesh is dp x tp x pp."""
    with pytest.raises(VerifyException, match=r"is not dp x tp x pp of world 4"):
        comm.GroupAttr.of(4, mesh=mesh, axis="dp").verify()


def test_reference_average_divides_by_the_group_size():
    from dlpc.reference.comm import all_reduce, combine

    xs = [np.array([1.0, 2.0], np.float32), np.array([3.0, 6.0], np.float32)]
    np.testing.assert_array_equal(combine(xs, "avg"), [2.0, 4.0])
    xs.append(np.array([5.0, 1.0], np.float32))
    for out in all_reduce(xs, "avg"):
        np.testing.assert_array_equal(out, [3.0, 3.0])


UNMATCHED_TAGS = """
func.func @rank0(%x: tensor<2xf32>) -> tensor<2xf32> {
  comm.send %x to 1 tag 1 group <world 2> : tensor<2xf32>
  func.return %x : tensor<2xf32>
}
func.func @rank1(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = comm.recv from 0 tag 0 group <world 2> : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
"""


def test_a_send_and_a_recv_of_other_tags_do_not_meet(tmp_path, capsys):
    """send tag 1 against recv tag 0: a deadlock, seen from either side."""
    code, _, err = _opt(tmp_path, UNMATCHED_TAGS, "comm-check-schedule", capsys)
    assert code == 1
    assert "comm-check-schedule: deadlock: rank 0's comm.send to 1 tag 1" in err


PIPELINE_METRICS = """
func.func @main(%x: tensor<2x4xf32>, %t: tensor<2x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %w1 = graph.param "fc1.weight" : tensor<6x4xf32>
  %w2 = graph.param "fc2.weight" : tensor<3x6xf32>
  %h = graph.linear %x, %w1 : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %r = graph.relu %h : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = graph.linear %r, %w2 : (tensor<2x6xf32>, tensor<3x6xf32>) -> tensor<2x3xf32>
  %d = graph.sub %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = graph.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = graph.reduce_mean %e : (tensor<2x3xf32>) -> tensor<f32>
  %m0 = graph.reduce_mean %d : (tensor<2x3xf32>) -> tensor<f32>
  %m1 = graph.reduce_mean %y : (tensor<2x3xf32>) -> tensor<f32>
  func.return %l, %m0, %m1 : tensor<f32>, tensor<f32>, tensor<f32>
}
"""


def test_pipeline_broadcasts_each_metric_of_the_last_stage(tmp_path, capsys):
    """Two metrics: the last stage broadcasts the loss, metric0's and metric1's sums, three
    different values, and returns them in that order."""
    from xdsl.dialects import func

    code, out, _ = _opt(
        tmp_path, PIPELINE_METRICS, "graph-pipeline{stages=2 microbatches=2}", capsys
    )
    assert code == 0
    module = parse_module(out)
    last = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "stage1")
    casts = [op for op in last.walk() if isinstance(op, comm.BroadcastOp)]
    sources = [op.operands[0] for op in casts]
    assert len(casts) == 3 and len(set(sources)) == 3
    ret = last.body.block.last_op
    assert ret is not None
    assert [ret.operands[0], *ret.operands[2:]] == [op.results[0] for op in casts]

    # metric1's sum adds the two micro-batches' means of y, metric0's those of d
    def summed(v):
        add = v.owner
        assert isinstance(add, graph.AddOp)
        return {u.owner.operands[0].name_hint for u in add.operands}

    assert summed(sources[1]) <= {"d", "d_1"} and summed(sources[2]) <= {"y", "y_1"}


def test_tensor_parallel_grads_scale_every_gradient(capsys):
    """After graph-tensor-parallel + graph-autodiff: the sharded params' gradients times
    1/2, the replicated fc2.bias's averaged; the loss (result 0) untouched."""
    from xdsl.dialects import func

    from dlpc.passes.dist.tensor_parallel import tensor_parallel_grads
    from dlpc.tools.dlpc_opt import main

    src = str(PASSES / "graph-tensor-parallel.mlir")
    assert main([src, "-p", "graph-tensor-parallel{ranks=2},graph-autodiff"]) in (0, None)
    module = parse_module(capsys.readouterr().out)
    tensor_parallel_grads(module, 2)
    f = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ret = f.body.block.last_op
    assert ret is not None
    kinds = [type(v.owner).__name__ for v in ret.operands]
    assert kinds[1:] == ["MulOp", "MulOp", "MulOp", "AllReduceOp"]
    assert kinds[0] != "MulOp"


BUCKETS = """
func.func @main() -> (tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) {
  %a = graph.param "a" : tensor<2xf32>
  %b = graph.param "b" : tensor<1xf32>
  %c = graph.param "c" : tensor<1xf32>
  func.return %a, %b, %c : tensor<2xf32>, tensor<1xf32>, tensor<1xf32>
}
"""


def test_buckets_fill_the_newest_one():
    """8, 4, 4 bytes in buckets of 8: [a], [b, c] (c joins the open bucket, not the first)."""
    from dlpc.passes.dist.data_parallel import buckets

    module = parse_module(BUCKETS)
    a, b, c = [op.results[0] for op in module.walk() if isinstance(op, graph.ParamOp)]
    assert buckets([a, b, c], 8) == [[a], [b, c]]
    assert buckets([a, b, c], 16) == [[a, b, c]]


def test_parameter_server_returns_the_summed_metric(capsys):
    """The metric (result 3) is returned as its all-reduce sum over the ranks, not the
    rank's own value (graph-parameter-server.mlir checks it too, through filecheck)."""
    from xdsl.dialects import func

    from dlpc.tools.dlpc_opt import main

    src = str(PASSES / "graph-parameter-server.mlir")
    assert main([src, "-p", "graph-parameter-server{ranks=2 batch=8}"]) in (0, None)
    module = parse_module(capsys.readouterr().out)
    f = next(op for op in module.ops if isinstance(op, func.FuncOp))
    ret = f.body.block.last_op
    assert ret is not None
    loss, metric = ret.operands[0].owner, ret.operands[3].owner
    assert isinstance(loss, comm.AllReduceOp) and isinstance(metric, comm.AllReduceOp)
    assert (loss.kind.data.value, metric.kind.data.value) == ("avg", "sum")
    assert metric.operands[0].name_hint == "c"


@pytest.mark.parametrize("nbytes, reduces", [(100, 1), (99, 2)])
def test_bucket_mb_counts_mebibytes(nbytes, reduces):
    """graph-data-parallel's bucket-mb is in MiB (2^20 bytes): fc1's and fc2's gradients
    (60 + 40 bytes) share one all_reduce in a bucket of 100 / 2^20 MiB, not of 99."""
    from dlpc.passes.dist.data_parallel import data_parallel

    module = parse_module((PASSES / "graph-data-parallel.mlir").read_text())
    data_parallel(module, 2, nbytes / 2**20)
    grads = [
        op
        for op in module.walk()
        if isinstance(op, comm.AllReduceOp)
        and any(v.owner.name == "graph.matmul" for v in op.operands)
    ]
    assert len(grads) == reduces


def _attention_without_batch(heads: int, dh: int) -> str:
    """Self-attention on x: [3, heads * dh] (no batch dim): the heads are dim 1 of the
    projections' [3, heads, dh] reshape, dim -2 but not dim 2."""
    d, s = heads * dh, 3
    lines = [f"func.func @main(%x: tensor<{s}x{d}xf32>) -> tensor<f32> {{"]
    lines += [f'  %w{n} = graph.param "w{n}" : tensor<{d}x{d}xf32>' for n in "qkvo"]
    for n in "qkv":
        lines += [
            f"  %l{n} = graph.linear %x, %w{n} : (tensor<{s}x{d}xf32>, tensor<{d}x{d}xf32>) -> tensor<{s}x{d}xf32>",
            f"  %r{n} = graph.reshape %l{n} {{shape = array<i64: {s}, {heads}, {dh}>}} : (tensor<{s}x{d}xf32>) -> tensor<{s}x{heads}x{dh}xf32>",
            f"  %{n} = graph.transpose %r{n} {{perm = array<i64: 1, 0, 2>}} : (tensor<{s}x{heads}x{dh}xf32>) -> tensor<{heads}x{s}x{dh}xf32>",
        ]
    hsd, hss = f"tensor<{heads}x{s}x{dh}xf32>", f"tensor<{heads}x{s}x{s}xf32>"
    lines += [
        f"  %qk = graph.matmul %q, %k {{transpose_b = true}} : ({hsd}, {hsd}) -> {hss}",
        f"  %p = graph.softmax %qk : ({hss}) -> {hss}",
        f"  %a = graph.matmul %p, %v : ({hss}, {hsd}) -> {hsd}",
        f"  %t = graph.transpose %a {{perm = array<i64: 1, 0, 2>}} : ({hsd}) -> tensor<{s}x{heads}x{dh}xf32>",
        f"  %m = graph.reshape %t {{shape = array<i64: {s}, {d}>}} : (tensor<{s}x{heads}x{dh}xf32>) -> tensor<{s}x{d}xf32>",
        f"  %o = graph.linear %m, %wo : (tensor<{s}x{d}xf32>, tensor<{d}x{d}xf32>) -> tensor<{s}x{d}xf32>",
        f"  %l = graph.reduce_mean %o : (tensor<{s}x{d}xf32>) -> tensor<f32>",
        "  func.return %l : tensor<f32>",
        "}",
    ]
    return "\n".join(lines) + "\n"


def test_heads_of_an_attention_without_batch_dim(tmp_path, capsys):
    """3 heads of 2 (no batch dim) do not divide by 2 ranks: the heads are the reshape's
    dim -2 (3), not its dim 2 (2, the head size); 2 heads of 3 split."""
    code, _, err = _opt(
        tmp_path, _attention_without_batch(3, 2), "graph-tensor-parallel{ranks=2}", capsys
    )
    assert code == 1
    assert "the attention projection wq has 3 heads, which do not divide by ranks 2" in err
    code, out, err = _opt(
        tmp_path, _attention_without_batch(2, 3), "graph-tensor-parallel{ranks=2}", capsys
    )
    assert code == 0, err
    assert "tensor<3x1x3xf32>" in out  # each rank's projection reshaped to its 1 head of 3


def test_an_op_that_mixes_heads_keeps_the_attention_whole(tmp_path, capsys):
    """A reduce_sum over the heads axis (not a head-local op) inside the attention: the
    attention stays whole (no param sharded, no comm op), as every other rank needs
    every head."""
    text = (PASSES / "graph-tensor-parallel-heads.mlir").read_text()
    softmax = "  %p = graph.softmax %s : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>\n"
    assert softmax in text
    mixed = (
        "  %h = graph.reduce_sum %s {axes = array<i64: 1>, keepdims = true} : "
        "(tensor<1x2x3x3xf32>) -> tensor<1x1x3x3xf32>\n"
        "  %p = graph.sub %s, %h : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> "
        "tensor<1x2x3x3xf32>\n"
    )
    body = "\n".join(
        ln for ln in text.replace(softmax, mixed).splitlines() if not ln.startswith("//")
    )
    code, out, err = _opt(tmp_path, body, "graph-tensor-parallel{ranks=2}", capsys)
    assert code == 0, err
    assert "graph.reduce_sum %s {axes = array<i64: 1>, keepdims = true}" in out
    assert "comm." not in out and "dlpc.shard_dim" not in out


def test_no_cut_where_no_activation_crosses():
    """A metric of the input computed first (used only by the return): after it nothing
    defined before crosses, so the pipeline's cut points are after the linear and the
    relu only (one activation each), not after the metric."""
    from dlpc.passes.dist.pipeline import cut_points

    module = parse_module("""
func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32>, tensor<f32>) {
  %c = graph.reduce_sum %x : (tensor<4x3xf32>) -> tensor<f32>
  %w = graph.param "w" : tensor<5x3xf32>
  %h = graph.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %r = graph.relu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %l = graph.reduce_mean %r : (tensor<4x5xf32>) -> tensor<f32>
  func.return %l, %c : tensor<f32>, tensor<f32>
}""")
    ops = [op for op in module.walk() if op.name.startswith("graph.") and op.name != "graph.param"]
    assert [op.name for op in ops] == [
        "graph.reduce_sum",
        "graph.linear",
        "graph.relu",
        "graph.reduce_mean",
    ]
    assert cut_points(ops) == [2, 3]


def test_a_mesh_of_a_thousand_ranks():
    """8 x 16 x 8 = 1024 ranks (ints past CPython's small-int cache): the mesh's product
    equals the world by value."""
    group = comm.GroupAttr.of(1024, mesh=(8, 16, 8), axis="tp")
    group.verify()
    assert group.members(1023) == tuple(range(1023 - 15 * 8, 1024, 8))
