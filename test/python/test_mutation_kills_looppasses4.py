"""Tests of te-to-loop and the loop-level passes (issue 35, fourth round, area loop-passes of
bench/mutation.py): te-to-loop's row groups (block sizes at the buffer limit), its loop
marks, copy-out kernels, reduction initial values and signature attributes; te-inline's
diagnostics; the memory plan's placement (`place`, `buffer_bytes`) and its in-place rule;
the diagnostics of the passes that need a @main. Loop IR is run in C (cbuild.CFunction)
against numpy written out in the test."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType, ModuleOp, f32, i1, i8, i32
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from dlpc.backends.runtime.cbuild import CFunction
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.passes.lower import memory_plan
from dlpc.passes.lower.te_to_loop import ROW_BLOCK, ROW_BUFFER_LIMIT, init_attr, init_ops
from dlpc.passes.pipeline import parse_module
from dlpc.universe import PASSES


def lower(src: str, spec: str = "graph-to-te,te-to-loop") -> ModuleOp:
    module = parse_module(src)
    PassPipeline.parse_spec({**get_all_passes(), **PASSES}, spec).apply(Context(), module)
    module.verify()
    return module


def kernels(module: ModuleOp) -> list[KernelOp]:
    return [op for op in module.walk() if isinstance(op, KernelOp)]


def loops(kernel: KernelOp) -> list[ForOp]:
    return [op for op in kernel.walk() if isinstance(op, ForOp)]


def mark(lp: ForOp) -> tuple:
    """(name, extent, parallel, vectorize, reduction) of a loop."""
    flags = [k in lp.attributes for k in ("parallel", "vectorize", "reduction")]
    return (lp.loop_name, lp.upper, *flags)


def run_c(module: ModuleOp, *inputs, params=None) -> list[np.ndarray]:
    return CFunction(module, name="looppasses4")(*inputs, params=params)


def softmax_src(rows: int, tail: int) -> str:
    t = f"tensor<{rows}x{tail}xf32>"
    return f"""
func.func @main(%x: {t}) -> {t} {{
  %y = graph.softmax %x {{axis = -1 : i64}} : ({t}) -> {t}
  func.return %y : {t}
}}"""


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ------------------------------------------------------------------- te-to-loop: rows


@pytest.mark.parametrize(
    "rows,tail,block",
    [
        (24, 8, 12),  # the largest divisor of 24 up to 16
        (32, 8, 16),  # ROW_BLOCK itself
        (17, 8, 1),  # a prime: one row a block
        (16, 512, 8),  # 8 rows of 512 exps fill the 4096-element buffer
        (16, 4096, 1),  # one row fills it
    ],
)
def test_row_group_blocks_and_values(rows, tail, block):
    module = lower(softmax_src(rows, tail))
    (kernel,) = kernels(module)
    assert kernel.sym == "softmax_0"
    nest = loops(kernel)
    assert mark(nest[0])[:3] == ("i0", rows // block, rows > block)
    b = [lp for lp in nest if lp.loop_name == "b"]
    assert b and b[0].upper == block
    x = np.random.default_rng(0).standard_normal((rows, tail)).astype(np.float32)
    (got,) = run_c(module, x)
    np.testing.assert_allclose(got, softmax(x), rtol=1e-5, atol=1e-6)


def test_row_group_constants():
    assert (ROW_BLOCK, ROW_BUFFER_LIMIT) == (16, 4096)


def test_a_row_beyond_the_buffer_limit_is_no_group():
    module = lower(softmax_src(2, 4097))
    assert len(kernels(module)) > 1


def test_fuse_rows_off_gives_one_kernel_per_te_op():
    module = lower(softmax_src(4, 8), "graph-to-te,te-to-loop{fuse_rows=false}")
    assert len(kernels(module)) == 4


def test_layer_norm_row_group_matches_numpy():
    src = """
func.func @main(%x: tensor<6x10xf32>) -> tensor<6x10xf32> {
  %g = graph.param "g" : tensor<10xf32>
  %b = graph.param "b" : tensor<10xf32>
  %y = graph.layer_norm %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<6x10xf32>, tensor<10xf32>, tensor<10xf32>) -> tensor<6x10xf32>
  func.return %y : tensor<6x10xf32>
}"""
    module = lower(src)
    assert len(kernels(module)) == 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    g_, b_ = rng.standard_normal((2, 10)).astype(np.float32)
    (got,) = run_c(module, x, params={"g": g_, "b": b_})
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    np.testing.assert_allclose(
        got, (x - mean) / np.sqrt(var + 1e-5) * g_ + b_, rtol=1e-4, atol=1e-5
    )


# --------------------------------------------------------------- te-to-loop: the nests


def test_parallel_goes_to_the_first_loop_longer_than_one():
    src = """
func.func @main(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %y = graph.relu %x : (tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  func.return %y : tensor<1x3x8xf32>
}"""
    (kernel,) = kernels(lower(src))
    marks = [mark(lp) for lp in loops(kernel)]
    assert marks == [
        ("i0", 1, False, False, False),
        ("i1", 3, True, False, False),
        ("i2", 8, False, True, False),
    ]


def test_a_trailing_extent_of_one_is_not_vectorized():
    src = """
func.func @main(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %y = graph.relu %x : (tensor<4x1xf32>) -> tensor<4x1xf32>
  func.return %y : tensor<4x1xf32>
}"""
    (kernel,) = kernels(lower(src))
    assert [mark(lp)[2:4] for lp in loops(kernel)] == [(True, False), (False, False)]


@pytest.mark.parametrize("vec", [False, True])
def test_reduction_loops_are_never_parallel_and_vectorized_on_request(vec):
    src = """
func.func @main(%x: tensor<3x5xf32>) -> tensor<3xf32> {
  %y = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<3x5xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    spec = "graph-to-te,te-to-loop" + ("{vectorize_reductions=true}" if vec else "")
    module = lower(src, spec)
    (kernel,) = kernels(module)
    marks = [mark(lp) for lp in loops(kernel)]
    assert marks == [("i0", 3, True, False, False), ("r0", 5, False, vec, True)]
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_allclose(run_c(module, x)[0], x.sum(1))


def test_returned_input_param_constant_and_twice_are_copied_out():
    src = """
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %w = graph.param "w" : tensor<2x3xf32>
  %c = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = graph.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %x, %w, %c, %y, %y : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}"""
    module = lower(src)
    names = [k.sym for k in kernels(module)]
    assert names == ["neg_0", "copy_out0", "copy_out1", "copy_out2", "copy_out4"]
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert fn.attributes["dlpc.num_inputs"].value.data == 1
    assert fn.attributes["dlpc.num_outputs"].value.data == 5
    assert [a.data for a in fn.attributes["dlpc.params"].data] == ["w"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.full((2, 3), 7.0, np.float32)
    got = run_c(module, x, params={"w": w})
    for a, b in zip(got, [x, w, np.array([1.0, 2.0, 3.0], np.float32), -x, -x], strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_param_named_twice_is_one_argument():
    src = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = graph.param "w" : tensor<3xf32>
  %v = graph.param "v" : tensor<3xf32>
  %b = graph.param "w" : tensor<3xf32>
  %s = graph.add %a, %v : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %t = graph.add %s, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = graph.add %t, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    module = lower(src)
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert [a.data for a in fn.attributes["dlpc.params"].data] == ["w", "v"]
    assert len(fn.body.block.args) == 4
    x = np.ones(3, np.float32)
    got = run_c(
        module, x, params={"w": np.full(3, 2.0, np.float32), "v": np.full(3, 5.0, np.float32)}
    )
    np.testing.assert_array_equal(got[0], np.full(3, 10.0, np.float32))


@pytest.mark.parametrize(
    "op,dtype,values,ref",
    [
        ("reduce_max", "i32", [-5, -9, -7], -5),  # starts at INT_MIN, not 0
        ("reduce_min", "i32", [5, 9, 7], 5),  # starts at INT_MAX
        ("reduce_max", "f32", [-5.0, -9.0, -7.0], -5.0),
        ("reduce_min", "f32", [5.0, 9.0, 7.0], 5.0),
        ("reduce_prod", "i32", [2, 3, 4], 24),
    ],
)
def test_reduction_initial_values(op, dtype, values, ref):
    src = f"""
func.func @main(%x: tensor<3x{dtype}>) -> tensor<{dtype}> {{
  %y = graph.{op} %x {{axes = array<i64: 0>}} : (tensor<3x{dtype}>) -> tensor<{dtype}>
  func.return %y : tensor<{dtype}>
}}"""
    module = lower(src)
    np_t = np.int32 if dtype == "i32" else np.float32
    (got,) = run_c(module, np.array(values, np_t))
    assert got.item() == ref


def test_init_attr_clamps_at_the_type_bounds():
    assert init_attr(float("-inf"), i32).value.data == -(2**31)
    assert init_attr(float("inf"), i32).value.data == 2**31 - 1
    assert init_attr(float("inf"), i8).value.data == 127
    assert init_attr(float("-inf"), i1) == IntegerAttr(0, i1)  # false < true, as numpy
    assert init_attr(float("inf"), i1) == IntegerAttr(1, i1)
    assert init_attr(3.0, i32).value.data == 3
    assert init_attr(-1.5, f32).value.data == -1.5


@pytest.mark.parametrize(
    "src,message",
    [
        (
            """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = graph.relu %x : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}""",
            "te-to-loop: unexpected op graph.relu in @main; run graph-to-te first",
        ),
        (
            """
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  func.return %x : tensor<?xf32>
}""",
            "te-to-loop needs static shapes: argument #0 of @main has type tensor<?xf32>; run "
            "graph-infer-shapes first",
        ),
    ],
    ids=["graph_op", "dynamic"],
)
def test_te_to_loop_diagnostics(src, message):
    with pytest.raises(DiagnosticException) as e:
        lower(src, "te-to-loop")
    assert str(e.value) == message


# ----------------------------------------------------------------------------- te-inline

CHAIN = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = graph.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 0>, keepdims = true} : (tensor<4xf32>) -> tensor<1xf32>
  %n = graph.neg %e : (tensor<4xf32>) -> tensor<4xf32>
  %y = graph.add %n, %s : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}"""


@pytest.mark.parametrize(
    "names,message",
    [
        ("nope", 'te-inline: no te.compute named "nope"'),
        (
            "reduce_sum_1",
            'te-inline cannot inline te.reduce "reduce_sum_1": only te.compute '
            "(elementwise/injective) can be inlined",
        ),
        (
            "add_3",
            'te-inline cannot inline te.compute "add_3": its result is used by an op other '
            "than te.read",
        ),
    ],
)
def test_te_inline_diagnostics(names, message):
    with pytest.raises(DiagnosticException) as e:
        lower(CHAIN, f"graph-to-te,te-inline{{names={names}}}")
    assert str(e.value) == message


def test_te_inline_all_and_named_keep_values():
    x = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    want = -np.exp(x) + np.exp(x).sum()
    every = lower(CHAIN, "graph-to-te,te-inline,te-to-loop")
    assert [k.sym for k in kernels(every)] == ["reduce_sum_1", "add_3"]
    np.testing.assert_allclose(run_c(every, x)[0], want, rtol=1e-6)
    named = lower(CHAIN, "graph-to-te,te-inline{names=neg_2},te-to-loop")
    assert [k.sym for k in kernels(named)] == ["exp_0", "reduce_sum_1", "add_3"]
    np.testing.assert_allclose(run_c(named, x)[0], want, rtol=1e-6)


# --------------------------------------------------------------------------- memory plan


def test_place_is_greedy_by_size_at_the_lowest_aligned_offset():
    # (size, start, end): a and b live together; c after both; d overlaps b only
    offsets, peak = memory_plan.place([(100, 0, 1), (200, 0, 2), (60, 3, 4), (64, 2, 3)])
    # b (200 -> 256 bytes) first at 0; a (128) at 256; d (64) overlaps b at op 2: 256;
    # c overlaps only d (op 3): 0
    assert offsets == [256, 0, 0, 256]
    assert peak == 384


def test_place_fills_a_gap_between_placed_buffers():
    offsets, peak = memory_plan.place(
        [(128, 0, 9), (64, 0, 1), (128, 0, 9), (64, 2, 3), (64, 0, 9)]
    )
    # big ones at 0 and 128; the two short 64s share 256; the long 64 cannot: 320
    assert offsets == [0, 256, 128, 256, 320]
    assert peak == 384


def test_place_touching_lifetimes_overlap():
    offsets, _ = memory_plan.place([(64, 0, 1), (64, 1, 2)])
    assert offsets == [0, 64]
    offsets, peak = memory_plan.place([(1, 0, 0), (0, 1, 1)])
    assert offsets == [0, 0] and peak == 64


@pytest.mark.parametrize(
    "elt,shape,bytes_",
    [(f32, [3, 5], 60), (i1, [7], 7), (i8, [9], 9), (i32, [2], 8)],
)
def test_buffer_bytes(elt, shape, bytes_):
    assert memory_plan.buffer_bytes(MemRefType(elt, shape), "%t") == bytes_


def test_buffer_bytes_refuses_dynamic_shapes():
    with pytest.raises(memory_plan.MemoryPlanError) as e:
        memory_plan.buffer_bytes(MemRefType(f32, [DYNAMIC_INDEX]), "%t")
    assert str(e.value) == "loop-memory-plan needs static shapes; %t is memref<?xf32>"


def test_memory_plan_reuses_a_dying_input_in_place_and_keeps_values():
    src = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = graph.exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %b = graph.neg %a : (tensor<64xf32>) -> tensor<64xf32>
  %c = graph.sin %b : (tensor<64xf32>) -> tensor<64xf32>
  %y = graph.add %c, %x : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}"""
    module = lower(src, "graph-to-te,te-to-loop,loop-memory-plan")
    fn = next(op for op in module.walk() if op.name == "func.func")
    # a, b, c (256 bytes each): b over a, c over b in place: one slot
    assert fn.attributes["dlpc.arena_bytes"].value.data == 256
    assert fn.attributes["dlpc.intermediate_bytes"].value.data == 768
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(run_c(module, x)[0], np.sin(-np.exp(x)) + x, rtol=1e-5, atol=1e-6)


def test_memory_plan_keeps_two_live_buffers_apart():
    src = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = graph.exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %b = graph.neg %x : (tensor<64xf32>) -> tensor<64xf32>
  %y = graph.add %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}"""
    module = lower(src, "graph-to-te,te-to-loop,loop-memory-plan")
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert fn.attributes["dlpc.arena_bytes"].value.data == 512
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(run_c(module, x)[0], np.exp(x) - x, rtol=1e-6)


# --------------------------------------------------------------- passes needing a @main


def test_view_copies_names_the_missing_main():
    src = """
func.func @f(%x: memref<2xf32>) { func.return }
func.func @g(%x: memref<2xf32>) { func.return }"""
    with pytest.raises(VerifyException) as e:
        lower(src, "loop-view-copies")
    assert str(e.value) == (
        "loop-view-copies needs a func.func @main; the module has 2 functions, none named main"
    )


def test_view_copies_and_views_turn_a_transpose_into_a_view():
    src = """
func.func @main(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = graph.neg %t : (tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for spec in ("loop-view-copies", "loop-views"):
        module = lower(src, f"graph-to-te,te-to-loop,{spec}")
        assert [k.sym for k in kernels(module)] == ["neg_1"]
        np.testing.assert_array_equal(run_c(module, x)[0], -x.T)


def test_reshape_alias_for_the_dlp_and_the_views():
    src = """
func.func @main(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
  %e = graph.exp %x : (tensor<2x6xf32>) -> tensor<2x6xf32>
  %r = graph.reshape %e {shape = array<i64: 3, 4>} : (tensor<2x6xf32>) -> tensor<3x4xf32>
  %y = graph.neg %r : (tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}"""
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    for spec in ("dlp-reshape-aliases", "loop-views"):
        module = lower(src, f"graph-to-te,te-to-loop,{spec}")
        assert [k.sym for k in kernels(module)] == ["exp_0", "neg_2"]
        casts = [op for op in module.walk() if op.name == "memref.reinterpret_cast"]
        assert len(casts) == 1
        np.testing.assert_allclose(run_c(module, x)[0], -np.exp(x).reshape(3, 4), rtol=1e-6)
    # loop-view-copies keeps plain reshapes (the OpenCL runtime aliases them)
    module = lower(src, "graph-to-te,te-to-loop,loop-view-copies")
    assert [k.sym for k in kernels(module)] == ["exp_0", "reshape_1", "neg_2"]


# ------------------------------------------ survivors of loop-passes --seed 42 (001bcfe)

TRANSPOSE_KEEPS_INNER = """
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  %e = graph.exp %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %t = graph.transpose %e {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %y = graph.neg %t : (tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  func.return %y : tensor<3x2x4xf32>
}"""


def test_a_transpose_keeping_the_inner_dim_is_written_through():
    """perm (1, 0, 2) keeps the innermost dim: the producer stores at the permuted index
    and the consumer reads contiguous memory (memory_plan.view_copies' `inner_kept`), not
    the consumer reading through the map."""
    module = lower(TRANSPOSE_KEEPS_INNER, "graph-to-te,te-to-loop,loop-views")
    exp, neg = kernels(module)
    (store,) = [op for op in exp.walk() if op.name == "memref.store"]
    (load,) = [op for op in neg.walk() if op.name == "memref.load"]
    ivs = [lp.induction_var for lp in loops(exp)]
    assert list(store.indices) == [ivs[1], ivs[0], ivs[2]]
    assert list(load.indices) == [lp.induction_var for lp in loops(neg)]
    assert load.memref is store.memref
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_allclose(run_c(module, x)[0], -np.exp(x).transpose(1, 0, 2), rtol=1e-6)


def test_view_copies_counts_what_it_removed():
    """view_copies returns how many copy kernels it removed (a chain: each of them)."""
    from dlpc.backends.c import find_main

    module = lower(TRANSPOSE_KEEPS_INNER)
    assert memory_plan.view_copies(find_main(module)) == 1
    assert memory_plan.view_copies(find_main(module)) == 0  # a second run changes nothing
    # a returned transpose of the innermost dim: no reader to read through, the producer
    # writes through into the output (view_copies' second branch), counted too
    returned = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %e = graph.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = graph.transpose %e {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %t : tensor<3x2xf32>
}"""
    module = lower(returned)
    assert memory_plan.view_copies(find_main(module)) == 1
    assert [k.sym for k in kernels(module)] == ["exp_0"]
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(run_c(module, x)[0], np.exp(x).T, rtol=1e-6)
    chain = """
func.func @main(%x: tensor<4x6xf32>) -> tensor<3x2xf32> {
  %e = graph.exp %x : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = graph.transpose %e {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %s = graph.slice %t {starts = array<i64: 0, 1>, ends = array<i64: 6, 3>, steps = array<i64: 2, 1>} : (tensor<6x4xf32>) -> tensor<3x2xf32>
  %y = graph.neg %s : (tensor<3x2xf32>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}"""
    module = lower(chain)
    assert memory_plan.view_copies(find_main(module)) == 2
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_allclose(run_c(module, x)[0], -np.exp(x).T[0:6:2, 1:3], rtol=1e-6)


def test_in_place_reuse_of_buffers_over_256_bytes():
    """Sizes are compared by value (`head.size < b.size`), not identity: 512-byte
    buffers (ints Python does not cache) are reused in place as 64-byte ones are."""
    src = """
func.func @main(%x: tensor<128xf32>) -> tensor<128xf32> {
  %a = graph.exp %x : (tensor<128xf32>) -> tensor<128xf32>
  %b = graph.neg %a : (tensor<128xf32>) -> tensor<128xf32>
  %c = graph.sin %b : (tensor<128xf32>) -> tensor<128xf32>
  %y = graph.add %c, %x : (tensor<128xf32>, tensor<128xf32>) -> tensor<128xf32>
  func.return %y : tensor<128xf32>
}"""
    module = lower(src, "graph-to-te,te-to-loop,loop-memory-plan")
    fn = next(op for op in module.walk() if op.name == "func.func")
    assert fn.attributes["dlpc.arena_bytes"].value.data == 512
    x = np.linspace(-1, 1, 128, dtype=np.float32)
    np.testing.assert_allclose(run_c(module, x)[0], np.sin(-np.exp(x)) + x, rtol=1e-5, atol=1e-6)


def test_unsigned_reduction_inits_are_the_signless_bits():
    """An unsigned max starts at 0, an unsigned min at 255 (as i8 bits: -1), each a
    signless constant bitcast to ui8 (te_to_loop.init_ops)."""
    from xdsl.dialects.builtin import IntegerType, Signedness

    ui8 = IntegerType(8, Signedness.UNSIGNED)
    for value, bits in ((float("-inf"), 0), (float("inf"), -1), (200.0, -56), (5.0, 5)):
        const, cast = init_ops(value, ui8)
        assert const.value == IntegerAttr(bits, IntegerType(8))  # type: ignore[attr-defined]
        assert cast.name == "arith.bitcast" and cast.results[0].type == ui8


def test_opencl_winograd_folds_integer_division_as_c_does():
    """The pass's index folder truncates toward zero, as C's / and % do."""
    from dlpc.passes.lower.opencl_winograd import _INT

    assert [_INT["arith.divsi"](a, b) for a, b in ((7, 2), (-7, 2), (7, -2))] == [3, -3, -3]
    assert [_INT["arith.remsi"](a, b) for a, b in ((7, 3), (-7, 3), (7, -3))] == [1, -1, 1]
    assert _INT["arith.remsi"](7, 0) is None and _INT["arith.divsi"](7, 0) is None


def test_index_forms_divide_by_one_and_split_dims():
    """index_form of `iv / d` and `iv % d` (memory_plan._divmod): exact for d = 1 (the
    quotient is iv, the remainder 0) and for a split dim; None for d = 0, or when the
    remainder's terms leave [0, d)."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IndexType
    from xdsl.ir import Block

    block = Block(arg_types=[IndexType(), IndexType()])
    i, h = block.args
    ranges = {i: (0, 5), h: (0, 3)}

    def const(n):
        return arith.ConstantOp(IntegerAttr(n, IndexType())).result

    def form(value):
        f = memory_plan.index_form(value, ranges)
        return None if f is None else (f.const, tuple(f.terms))

    assert form(arith.DivSIOp(i, const(1)).result) == (0, ((i, 1),))
    assert form(arith.RemSIOp(i, const(1)).result) == (0, ())
    assert form(arith.DivSIOp(i, const(0)).result) is None
    flat = arith.AddiOp(arith.MuliOp(i, const(4)).result, h).result  # i * 4 + h, h < 4
    assert form(arith.DivSIOp(flat, const(4)).result) == (0, ((i, 1),))
    assert form(arith.RemSIOp(flat, const(4)).result) == (0, ((h, 1),))
    assert form(arith.DivSIOp(flat, const(3)).result) is None  # h reaches 3: not split


def test_a_ceil_mode_pool_guards_its_last_window():
    """Without padding, a ceil_mode pool's last window reaches past the input: its loads
    are guarded (_te_builder.window_checks: (o - 1) * s + (k - 1) * dil - p >= size)."""
    src = """
func.func @main(%x: tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true} : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}"""
    module = lower(src)
    x = -np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) - 1  # all negative
    padded = np.full((1, 1, 6, 6), -np.inf, np.float32)
    padded[..., :5, :5] = x
    want = padded.reshape(1, 1, 3, 2, 3, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(run_c(module, x)[0], want)


@pytest.mark.parametrize("op,hint", [("reduce_sum", "sum"), ("reduce_max", "max")])
def test_a_reductions_result_is_named_after_its_combiner(op, hint):
    src = f"""
func.func @main(%x: tensor<3x5xf32>) -> tensor<3xf32> {{
  %y = graph.{op} %x {{axes = array<i64: 1>}} : (tensor<3x5xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}}"""
    (kernel,) = kernels(lower(src))
    hints = [op.results[0].name_hint for op in kernel.walk() if op.name == "memref.load"]
    assert hint in hints


def test_check_plan_names_two_overlapping_views():
    """check_plan (the plan's soundness, for tests) names both views, their byte ranges
    and lifetimes."""
    from xdsl.dialects import arith

    from dlpc.backends.c import find_main

    src = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = graph.exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %b = graph.neg %x : (tensor<64xf32>) -> tensor<64xf32>
  %y = graph.add %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}"""
    fn = find_main(lower(src, "graph-to-te,te-to-loop,loop-memory-plan"))
    assert memory_plan.check_plan(fn) == []
    views = [op for op in fn.body.block.ops if op.name == "memref.view"]
    shifts = [v.byte_shift.owner for v in views]
    assert sorted(s.value.value.data for s in shifts) == [0, 256]
    moved = next(s for s in shifts if s.value.value.data == 256)
    zero = arith.ConstantOp(IntegerAttr(0, moved.result.type))
    fn.body.block.insert_op_before(zero, moved)
    moved.result.replace_all_uses_with(zero.result)
    (problem,) = memory_plan.check_plan(fn)
    assert re.fullmatch(
        r"%\w+ \[0, 256\) live \d+\.\.\d+ overlaps %\w+ \[0, 256\) live \d+\.\.\d+", problem
    )


def test_opencl_winograd_folds_integer_comparisons():
    from dlpc.passes.lower.opencl_winograd import _CMP

    pairs = [(1, 2), (2, 2), (3, 2)]
    assert [[_CMP[p](a, b) for a, b in pairs] for p in range(6)] == [
        [False, True, False],  # eq
        [True, False, True],  # ne
        [True, False, False],  # slt
        [True, True, False],  # sle
        [False, False, True],  # sgt
        [False, True, True],  # sge
    ]


def test_an_nhwc_pool_with_padding_matches_numpy():
    """Window ops read their spatial dims from the layout (_te_builder.spatial_dims),
    compared by value: a layout parsed from text is not the literal's object."""
    src = """
func.func @main(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, layout = "nhwc"} : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  func.return %y : tensor<1x4x4x2xf32>
}"""
    module = lower(src)
    x = np.random.default_rng(3).standard_normal((1, 4, 4, 2)).astype(np.float32)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    want = np.stack([padded[:, i : i + 4, j : j + 4, :] for i in range(3) for j in range(3)]).max(0)
    np.testing.assert_array_equal(run_c(module, x)[0], want)


def test_check_plan_accepts_in_place_only_at_the_same_offset():
    """An in-place pair (an elementwise kernel's output over its dying input) is sound at
    the same offset only: shifted by 64 bytes it overlaps and is reported."""
    from xdsl.dialects import arith

    from dlpc.backends.c import find_main

    src = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = graph.exp %x : (tensor<64xf32>) -> tensor<64xf32>
  %b = graph.neg %a : (tensor<64xf32>) -> tensor<64xf32>
  %y = graph.add %b, %x : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}"""
    fn = find_main(lower(src, "graph-to-te,te-to-loop,loop-memory-plan"))
    assert memory_plan.check_plan(fn) == []
    views = [op for op in fn.body.block.ops if op.name == "memref.view"]
    shifts = [v.byte_shift.owner for v in views]
    assert [s.value.value.data for s in shifts] == [0, 0]  # b over a, in place
    later = shifts[-1]
    moved = arith.ConstantOp(IntegerAttr(64, later.result.type))
    fn.body.block.insert_op_before(moved, views[-1])
    views[-1].operands[1] = moved.result
    (problem,) = memory_plan.check_plan(fn)
    assert "[0, 256)" in problem and "[64, 320)" in problem


def test_a_returned_reshape_adding_a_unit_dim_is_no_transpose():
    """dst[i0, i1] = src[i1] (a [3] -> [1, 3] reshape into an output) is no permutation
    (CopyMap.permutation: the src dims must use every dst iv once): the copy stays."""
    src = """
func.func @main(%x: tensor<3xf32>) -> tensor<1x3xf32> {
  %e = graph.exp %x : (tensor<3xf32>) -> tensor<3xf32>
  %u = graph.reshape %e {shape = array<i64: 1, 3>} : (tensor<3xf32>) -> tensor<1x3xf32>
  func.return %u : tensor<1x3xf32>
}"""
    module = lower(src, "graph-to-te,te-to-loop,loop-views")
    assert [k.sym for k in kernels(module)] == ["exp_0", "reshape_1"]
    x = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_allclose(run_c(module, x)[0], np.exp(x)[None], rtol=1e-6)
