"""The batch run chunk after chunk (passes/graph/rebatch.py) and the kernels copied for
short extents (passes/lower/short_extents.py, `loop-short-extents`), first round (issue
35, bench/mutation.py --area batch-extents): which ops are per sample (each branch of
`_per_sample` both ways), the chunk plan's figures (bytes per element, the budget's edge,
the team's floor), the chunk's graph against the whole batch on the numpy reference; the
short-extent copies' exact bounds, marks and guards on hand-written loop IR, and the
pass's one-line diagnostics."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from dlpc import api
from dlpc.dialects import symdims
from dlpc.frontends.text import parse_model
from dlpc.passes.graph.rebatch import CHUNK_BUDGET_BYTES, batch_values, chunk_plan, rebatch
from dlpc.passes.lower.short_extents import LoopShortExtents, _grows
from dlpc.passes.pipeline import context, parse_module
from dlpc.reference.graph import run_reference

# ------------------------------------------------------------------------ rebatch


def model(body: str, args: str = "x: f32[4, 6]", params: str = ""):
    return parse_model(f"model m({args}) {{\n{params}  {body}\n}}\n")


def chunks_match(m, chunk: int):
    """The chunk's graph over each slice of the batch gives those rows of the whole."""
    small = rebatch(m.module, chunk)
    assert small is not None
    weights = api.check_weights(m)
    inputs = api.random_inputs(m, seed=1)
    whole = run_reference(m.module, inputs, weights)
    B = inputs[0].shape[0]
    for k in range(B // chunk):
        part = [x[k * chunk : (k + 1) * chunk] for x in inputs]
        got = run_reference(small, part, weights)
        for w, g in zip(whole, got, strict=True):
            assert g.shape == (chunk, *w.shape[1:])
            np.testing.assert_allclose(g, w[k * chunk : (k + 1) * chunk], rtol=1e-5, atol=1e-6)
    return small


PARAMS = (
    "  param b: f32[6] = normal(seed=1)\n  param c: f32[1, 6] = normal(seed=2)\n"
    "  param w: f32[3, 6] = normal(seed=3)\n  param v: f32[6, 3] = normal(seed=4)\n"
    "  param a: f32[6] = uniform(seed=5, low=0.1, high=0.3)\n"
)


@pytest.mark.parametrize(
    "body",
    [
        "return relu(x)",  # unary
        "return x + b",  # a broadcast operand without dim 0
        "return x * c",  # a full-rank operand of size 1 along dim 0
        "return x + relu(x)",  # two batch operands
        "return prelu(x, a)",
        "return linear(x, w)",
        "return matmul(x, v)",
        "return softmax(x, axis=1)",
        "return softmax(x, axis=-1)",
        "return reduce_sum(x, axis=1)",
        "return reduce_max(x, axis=-1)",
        "return pad(x, pads=[0, 1, 0, 2])",
        "return reshape(x, shape=[4, 3, 2])",
        "return reshape(x, shape=[0, 2, 3])",
    ],
)
def test_per_sample_ops_run_chunk_by_chunk(body):
    m = model(body, params=PARAMS)
    found = batch_values(m.module)
    assert found is not None and found[0] == 4
    chunks_match(m, 2)
    chunks_match(m, 1)


def test_windows_and_norms_on_the_batch_operand():
    m = model(
        "let h = batch_norm(conv2d(x, k), s, t, mu, var)\n"
        "  return global_avg_pool(max_pool2d(relu(h), kernel=2, stride=2))",
        args="x: f32[4, 2, 6, 6]",
        params="  param k: f32[3, 2, 3, 3] = normal(seed=1)\n  param s: f32[3] = normal(seed=2)\n"
        "  param t: f32[3] = normal(seed=3)\n  param mu: f32[3] = normal(seed=4)\n"
        "  param var: f32[3] = uniform(seed=5, low=0.5, high=1.5)\n",
    )
    small = chunks_match(m, 2)
    assert "tensor<4x" not in str(small)


@pytest.mark.parametrize(
    "body,args",
    [
        ("return softmax(x, axis=0)", "x: f32[4, 6]"),
        ("return softmax(x, axis=-2)", "x: f32[4, 6]"),  # (-2 of rank 2: dim 0)
        ("return pad(x, pads=[0, 0, 1, 0])", "x: f32[4, 6]"),  # padded at the batch's end
        ("return matmul(p, x)", "x: f32[4, 6]"),  # the batch as the second operand
        ("return matmul(x, x)", "x: f32[4, 4]"),  # batch operands on both sides
        ("return linear(x, x)", "x: f32[4, 4]"),
        ("return x + reduce_sum(x, axis=1)", "x: f32[4, 4]"),  # a batch operand of rank 1
        ("return reshape(x, shape=[2, 12])", "x: f32[4, 6]"),  # dim 0 merged
        ("return transpose(x, perm=[1, 0])", "x: f32[4, 4]"),  # (dim 0 of the batch's size)
        ("return x + y", "x: f32[4, 6], y: f32[4, 1, 6]"),  # (a rank-3 result)
        ("return relu(x)", "x: f32[1, 6]"),  # a batch of one
        ("return relu(x), relu(y)", "x: f32[4, 6], y: f32[2, 6]"),  # arguments of other batches
        ("return reduce_sum(x, axis=1)", "x: f32[4, 6], y: f32[]"),  # a rank-0 argument
        ("return relu(x), p", "x: f32[4, 6]"),  # a result that is no batch value
    ],
)
def test_not_per_sample(body, args):
    text_args = args
    m = model(body, args=text_args, params="  param p: f32[4, 4] = normal(seed=1)\n")
    assert batch_values(m.module) is None
    assert chunk_plan(m.module, 1) is None and rebatch(m.module, 1) is None


def test_a_batch_of_one_has_no_chunk_graph():
    m = model("return relu(x)", args="x: f32[1, 6]")
    assert rebatch(m.module, 1) is None


def test_a_batch_of_two_runs_one_image_a_chunk():
    m = model("return relu(x)", args="x: f32[2, 6]")
    assert batch_values(m.module) is not None
    assert chunk_plan(m.module, 2 * 6 * 4) == (2, 1)
    chunks_match(m, 1)


def test_a_module_of_two_functions_or_another_name_is_left_whole():
    text = (
        "func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {\n"
        "  %y = graph.relu %x : (tensor<4x6xf32>) -> tensor<4x6xf32>\n"
        "  func.return %y : tensor<4x6xf32>\n}\n"
    )
    assert batch_values(parse_module(text)) is not None
    two = text + text.replace("@main", "@other")
    assert batch_values(parse_module(two)) is None
    assert batch_values(parse_module(text.replace("@main", "@net"))) is None
    dynamic = text.replace("tensor<4x6xf32>", "tensor<?x6xf32>")
    assert batch_values(parse_module(dynamic)) is None


def test_control_flow_and_an_empty_return_leave_the_graph_whole():
    flow = (
        "func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {\n"
        "  %c = graph.constant dense<true> : tensor<i1>\n"
        "  %r = graph.if %c, %x : (tensor<i1>, tensor<4x6xf32>) -> (tensor<4x6xf32>) {\n"
        "  ^bb0(%a: tensor<4x6xf32>):\n"
        "    %y = graph.exp %a : (tensor<4x6xf32>) -> tensor<4x6xf32>\n"
        "    graph.yield %y : tensor<4x6xf32>\n"
        "  } else {\n"
        "  ^bb0(%a: tensor<4x6xf32>):\n"
        "    %y = graph.neg %a : (tensor<4x6xf32>) -> tensor<4x6xf32>\n"
        "    graph.yield %y : tensor<4x6xf32>\n"
        "  }\n"
        "  func.return %r : tensor<4x6xf32>\n}\n"
    )
    assert batch_values(parse_module(flow)) is None
    empty = "func.func @main(%x: tensor<4x6xf32>) {\n  func.return\n}\n"
    assert batch_values(parse_module(empty)) is None


def test_ops_that_read_no_batch_value_do_not_join_it():
    """A param's own arithmetic is not a batch value: returned alone, the graph is not
    per-sample; added to x, it is a broadcast operand."""
    params = "  param q: f32[6] = normal(seed=1)\n"
    m = model("return x + relu(q)", params=params)
    B, batch = batch_values(m.module)
    assert B == 4 and len(batch) == 2  # x and the add
    chunks_match(m, 2)


@pytest.mark.parametrize(
    "elt,bytes_",
    [("f32", 4), ("f16", 2), ("i8", 1), ("i64", 8)],
)
def test_chunk_plan_figures(elt, bytes_):
    """relu over [8, 16, 16]: the working set is x and the result, 2 * 256 elements an
    image; the plan is the largest divisor of 8 within the budget, the team's floor when
    the team divides 8; None when the whole batch fits."""
    m = model("return relu(x)", args=f"x: {elt}[8, 16, 16]")
    per_image = 2 * 256 * bytes_
    whole = 8 * per_image
    assert chunk_plan(m.module, whole) is None
    assert chunk_plan(m.module, whole - 1) == (8, 4)
    assert chunk_plan(m.module, 4 * per_image) == (8, 4)
    assert chunk_plan(m.module, 4 * per_image - 1) == (8, 2)
    assert chunk_plan(m.module, 2 * per_image - 1) == (8, 1)
    assert chunk_plan(m.module, 1) == (8, 1)  # (at least one image)
    assert chunk_plan(m.module, 2 * per_image - 1, 2) == (8, 2)  # one image a thread
    assert chunk_plan(m.module, 2 * per_image - 1, 4) == (8, 4)
    assert chunk_plan(m.module, 2 * per_image - 1, 3) == (8, 1)  # 3 does not divide 8
    assert chunk_plan(m.module, 2 * per_image - 1, 8) is None  # the team is the batch


def test_chunk_plan_counts_a_value_read_twice_once():
    """x + x: x and the sum (2 * 64 floats an image), not x twice."""
    m = model("return x + x", args="x: f32[4, 64]")
    assert chunk_plan(m.module, 4 * 2 * 64 * 4) is None
    assert chunk_plan(m.module, 4 * 2 * 64 * 4 - 1) == (4, 2)
    assert chunk_plan(m.module, 2 * 2 * 64 * 4 - 1) == (4, 1)


def test_chunk_plan_takes_the_largest_op():
    """reshape keeps [4, 64] -> [4, 8, 8]; the linear's operand and result are 64 + 16
    floats an image, the relu's 64 + 64: the relu decides."""
    m = model(
        "return linear(relu(x), w)",
        args="x: f32[4, 64]",
        params="  param w: f32[16, 64] = normal(seed=1)\n",
    )
    assert chunk_plan(m.module, 4 * 128 * 4) is None
    assert chunk_plan(m.module, 4 * 128 * 4 - 1) == (4, 2)
    assert chunk_plan(m.module, 2 * 128 * 4) == (4, 2)


def test_rebatch_rewrites_reshapes_to_the_batch_and_keeps_a_copied_dim():
    m = model("return reshape(relu(reshape(x, shape=[4, 2, 3])), shape=[0, 6])")
    small = chunks_match(m, 2)
    text = str(small)
    assert "shape = array<i64: 2, 2, 3>" in text and "shape = array<i64: 0, 6>" in text
    assert rebatch(m.module, 0) is None and rebatch(m.module, 3) is None
    assert rebatch(m.module, 4) is not None  # (the whole batch: a copy of the graph)


# ------------------------------------------------------------- loop-short-extents


def fn(body: str, short: str, dims='["batch", "seq"]', maxima="{batch = 4 : i64, seq = 16 : i64}",
       extra="", n_dims=2) -> str:  # fmt: skip
    attrs = f"dlpc.dims = {dims}, dlpc.max_dims = {maxima}, " if dims else ""
    return (
        f"func.func @main(%x: memref<4x16xf32>, %dlpc_dims: memref<{n_dims}xi64>, "
        f"%out0: memref<16xf32>) attributes {{{attrs}dlpc.short_extents = {short}, "
        f"dlpc.num_inputs = 2 : i64, dlpc.params = [], dlpc.num_outputs = 1 : i64{extra}}} {{\n"
        f"{body}\n  func.return\n}}\n"
    )


def rowsum(i0="0 to 4 step 1", r0="0 to 16 step 1", ei='"batch"', er='"seq"', exact=True) -> str:
    ai = f", dlpc.extent = {ei}" if ei else ""
    ar = f", dlpc.extent = {er}" if er else ""
    ex = ' attributes {dlpc.exact = ["r0"]}' if exact else ""
    return (
        f'  loop.kernel "sum_0"{ex} {{\n'
        f'    loop.for %i0 = {i0} {{name = "i0", parallel{ai}}} {{\n'
        f'      loop.for %r0 = {r0} {{name = "r0", reduction{ar}}} {{\n'
        "        %v = memref.load %x[%i0, %r0] : memref<4x16xf32>\n"
        "        %a = memref.load %out0[%i0] : memref<16xf32>\n"
        "        %s = arith.addf %a, %v : f32\n"
        "        memref.store %s, %out0[%i0] : memref<16xf32>\n"
        "      }\n    }\n  }"
    )


def short(text: str) -> str:
    module = parse_module(text)
    LoopShortExtents().apply(context(), module)
    module.verify()
    return str(module)


def kernels(text: str) -> list[str]:
    return re.findall(r'loop.kernel "(\w+)"', text)


def bounds(text: str, kernel: str) -> list[str]:
    """`lo to ub step s` of each loop of `kernel`'s copy (in order)."""
    body = text.split(f'loop.kernel "{kernel}"', 1)[1].split("loop.kernel", 1)[0]
    return re.findall(r"loop.for %\w+ = (\d+ to \d+ step \d+)", body)


def test_a_dim_no_marked_loop_grows_with_gives_no_copy():
    """{batch = 4}: at its maximum the batch loop is unchanged and seq keeps its maximum,
    so no copy (the version changes nothing)."""
    out = short(fn(rowsum(), "[{batch = 4 : i64}]"))
    assert kernels(out) == ["sum_0"] and "scf.if" not in out and "dlpc.short_extents" not in out


def test_a_kernel_over_other_dims_gets_no_copy():
    out = short(fn(rowsum(ei="", er='"seq"'), "[{batch = 1 : i64}]"))
    assert kernels(out) == ["sum_0"] and "scf.if" not in out


def test_the_same_copy_for_two_bindings_is_made_once():
    """Over seq alone, {seq = 2} and {seq = 2, batch = 4}... the kernel depends on seq
    only: both give the copy `sum_0_seq2`, made once; the guard loads dim 1 (seq)."""
    out = short(fn(rowsum(ei=""), "[{seq = 2 : i64}, {batch = 1 : i64, seq = 2 : i64}]"))
    assert kernels(out) == ["sum_0_seq2", "sum_0"]
    assert out.count("scf.if") == 1
    assert re.search(r"arith.constant 1 : index\n\s*%seq = memref.load %dlpc_dims", out)
    assert bounds(out, "sum_0_seq2") == ["0 to 4 step 1", "0 to 2 step 1"]
    assert 'loop.kernel "sum_0_seq2" attributes {dlpc.short}' in out  # static: every mark a value


def test_bindings_in_order_each_a_guard():
    """{batch = 2, seq = 5}, then {batch = 3}: guards in the bindings' order, the kernel
    last; the batch-only copy keeps seq's mark (seq at its maximum: not static)."""
    out = short(fn(rowsum(), "[{batch = 2 : i64, seq = 5 : i64}, {batch = 3 : i64}]"))
    assert kernels(out) == ["sum_0_batch2_seq5", "sum_0_batch3", "sum_0"]
    assert bounds(out, "sum_0_batch2_seq5") == ["0 to 2 step 1", "0 to 5 step 1"]
    assert bounds(out, "sum_0_batch3") == ["0 to 3 step 1", "0 to 16 step 1"]
    third = out.split('loop.kernel "sum_0_batch3"', 1)[1].split("loop.kernel", 1)[0]
    assert 'dlpc.extent = "seq"' in third and 'dlpc.extent = "batch"' in third
    assert out.split('"sum_0_batch3"', 1)[1].startswith(' attributes {dlpc.exact = ["r0"]}')
    # the guards: batch == 2 and seq == 5, then batch == 3
    limits = re.findall(r"arith.constant (\d+) : i64", out)
    assert limits == ["2", "5", "3"]
    assert out.count("arith.andi") == 1


def test_a_binding_at_the_maximum_with_other_marks_gives_no_copy():
    """{seq = 16} leaves every loop at its bound and the batch's mark keeps the copy
    from being static: nothing to copy."""
    out = short(fn(rowsum(), "[{seq = 16 : i64}]"))
    assert kernels(out) == ["sum_0"] and "scf.if" not in out


def test_a_binding_at_the_maximum_of_every_dim_gives_a_static_copy():
    out = short(fn(rowsum(), "[{batch = 4 : i64, seq = 16 : i64}]"))
    assert kernels(out) == ["sum_0_batch4_seq16", "sum_0"]
    assert 'loop.kernel "sum_0_batch4_seq16" attributes {dlpc.short}' in out


@pytest.mark.parametrize(
    "r0,seq,want,static",
    [
        ("0 to 16 step 4", 3, "0 to 4 step 4", False),  # rounded up to the step
        ("0 to 16 step 4", 5, "0 to 8 step 4", False),
        ("0 to 16 step 4", 16, None, False),  # (no change)
        ("2 to 16 step 1", 5, "2 to 5 step 1", False),  # from 2: not static
        ("2 to 16 step 1", 1, "2 to 3 step 1", False),  # at least one step
        ("2 to 16 step 3", 9, "2 to 11 step 3", False),
    ],
)
def test_short_bounds_round_up_to_the_step(r0, seq, want, static):
    out = short(fn(rowsum(r0=r0, ei="", exact=False), f"[{{seq = {seq} : i64}}]"))
    if want is None:
        assert kernels(out) == ["sum_0"]
        return
    name = f"sum_0_seq{seq}"
    assert kernels(out) == [name, "sum_0"]
    assert bounds(out, name) == ["0 to 4 step 1", want]
    assert ("dlpc.short" in out) == static
    copy = out.split(f'"{name}"', 1)[1].split("loop.kernel", 1)[0]
    assert ('dlpc.extent = "seq"' in copy) != static


@pytest.mark.parametrize(
    "extent,seq,want",
    [
        ('"2 * seq"', 3, "0 to 6 step 1"),
        ('"seq + 1"', 3, "0 to 4 step 1"),
        ('"floor((seq + 1) / 2)"', 5, "0 to 3 step 1"),
    ],
)
def test_extents_that_grow_with_the_dim(extent, seq, want):
    """An extent that is a polynomial or a floor of the dim with non-negative
    coefficients: its value at the binding; static (a value of the binding, from 0)."""
    out = short(fn(rowsum(er=extent, ei=""), f"[{{seq = {seq} : i64}}]"))
    name = f"sum_0_seq{seq}"
    assert kernels(out) == [name, "sum_0"]
    assert bounds(out, name) == ["0 to 4 step 1", want]
    assert f'loop.kernel "{name}" attributes {{dlpc.short}}' in out


@pytest.mark.parametrize(
    "extent",
    [
        '"16 + -1 * seq"',  # shrinks as seq grows
        '"floor((seq + -3) / 2)"',  # floor((seq + 1) / 2) - 2: a negative term
        '"seq * other"',  # a symbol with no value (no maximum, not bound)
        '"seq +"',  # malformed (loop-runtime-extents names it)
    ],
)
def test_extents_that_do_not_grow_or_do_not_evaluate_give_no_copy(extent):
    out = short(fn(rowsum(er=extent, ei=""), "[{seq = 3 : i64}]"))
    assert kernels(out) == ["sum_0"] and "scf.if" not in out


def test_a_kernel_with_no_reduction_is_left_alone():
    body = rowsum(ei="").replace("reduction", "parallel")
    out = short(fn(body, "[{seq = 2 : i64}]"))
    assert kernels(out) == ["sum_0"] and "scf.if" not in out


ROW_GROUP = """  loop.kernel "rows_0" attributes {dlpc.exact = ["r0"]} {
    loop.for %i1 = 0 to 32 step 16 {name = "i1", dlpc.extent = "seq", dlpc.extent_id = 1 : i64} {
      loop.for %b = 0 to 16 step 1 {name = "b", dlpc.extent = "seq", dlpc.extent_base = [1 : i64]} {
        %i = arith.addi %i1, %b : index
        loop.for %r0 = 0 to 32 step 1 {name = "r0", reduction, dlpc.extent = "seq"} {
          %v = memref.load %x[%i, %r0] : memref<32x32xf32>
          %a = memref.load %out0[%i] : memref<32xf32>
          %s = arith.addf %a, %v : f32
          memref.store %s, %out0[%i] : memref<32xf32>
        }
      }
    }
  }"""


def row_group(seq: int) -> str:
    return (
        "func.func @main(%x: memref<32x32xf32>, %dlpc_dims: memref<1xi64>, %out0: memref<32xf32>) "
        '{dlpc.dims = ["seq"], dlpc.max_dims = {seq = 32 : i64}, dlpc.short_extents = '
        f"[{{seq = {seq} : i64}}], dlpc.num_inputs = 2 : i64, dlpc.params = [], "
        "dlpc.num_outputs = 1 : i64} {\n" + ROW_GROUP + "\n  func.return\n}\n"
    ).replace("%out0: memref<32xf32>) {", "%out0: memref<32xf32>) attributes {")


@pytest.mark.parametrize("seq,static", [(16, True), (20, False), (1, True)])
def test_a_row_group_is_static_when_its_block_runs_once(seq, static):
    """At seq <= 16 the block loop (step 16) runs once from 0: the per-row loop runs to
    exactly seq, the marks and split ids go; at 20 it runs twice: the marks stay."""
    out = short(row_group(seq))
    name = f"rows_0_seq{seq}"
    assert kernels(out) == [name, "rows_0"]
    block = 16 if seq <= 16 else 32
    per_row = min(seq, 16)
    assert bounds(out, name) == [
        f"0 to {block} step 16",
        f"0 to {per_row} step 1",
        f"0 to {seq} step 1",
    ]
    copy = out.split(f'"{name}"', 1)[1].split("loop.kernel", 1)[0]
    assert ("dlpc.extent_id" in copy) != static and ("dlpc.extent_base" in copy) != static
    assert copy.startswith(" attributes {dlpc.short}") == static


def test_a_per_row_loop_whose_block_is_unmarked_is_not_static():
    """A base naming a loop id no loop has (-1: not a loop that runs once)."""
    text = row_group(3).replace(", dlpc.extent_id = 1 : i64", ", dlpc.extent_id = 7 : i64")
    out = short(text)
    copy = out.split('"rows_0_seq3"', 1)[1].split("loop.kernel", 1)[0]
    assert not copy.startswith(" attributes {dlpc.short}") and "dlpc.extent_base" in copy


def test_a_strided_marked_loop_from_zero_is_not_static():
    """A loop of step 2 over seq at seq = 4: to 4, but a step of 2 without a split id is
    no row group: the marks stay."""
    out = short(fn(rowsum(r0="0 to 16 step 2", ei=""), "[{seq = 4 : i64}]"))
    assert bounds(out, "sum_0_seq4") == ["0 to 4 step 1", "0 to 4 step 2"]
    assert 'loop.kernel "sum_0_seq4" attributes {dlpc.exact' in out


def test_without_the_attribute_nothing_changes():
    text = fn(rowsum(), "[{seq = 2 : i64}]").replace("dlpc.short_extents = [{seq = 2 : i64}], ", "")
    assert short(text) == str(parse_module(text))


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"dims": ""},
            "loop-short-extents: @main has dlpc.short_extents but no dlpc.dims, dlpc.max_dims "
            "or dlpc.num_inputs",
        ),
        (
            {"dims": '"batch"'},
            "loop-short-extents: @main has dlpc.short_extents but no dlpc.dims, dlpc.max_dims "
            "or dlpc.num_inputs",
        ),
        (
            {"maxima": '["batch"]'},
            "loop-short-extents: @main has dlpc.short_extents but no dlpc.dims, dlpc.max_dims "
            "or dlpc.num_inputs",
        ),
        (
            {"maxima": "{batch = 4 : i64}"},
            "loop-short-extents: dlpc.short_extents names 'seq', which is not one of @main's dims "
            "(batch, seq)",
        ),
        (
            {"short": "[{seq = 0 : i64}]"},
            "loop-short-extents: dlpc.short_extents gives 'seq' = 0, outside 1..16 (its maximum)",
        ),
        (
            {"short": "[{batch = 5 : i64}]"},
            "loop-short-extents: dlpc.short_extents gives 'batch' = 5, outside 1..4 (its maximum)",
        ),
        (
            {"short": "[1]"},
            "loop-short-extents: dlpc.short_extents must be an array of dicts from dims to "
            "integers, e.g. [{batch = 1 : i64, seq = 2 : i64}]; got [1 : i64]",
        ),
        (
            {"short": "[{seq = 2 : i64}, {}]"},
            "loop-short-extents: dlpc.short_extents must be an array of dicts from dims to "
            "integers, e.g. [{batch = 1 : i64, seq = 2 : i64}]; got [{seq = 2 : i64}, {}]",
        ),
        (
            {"short": '[{seq = "2"}]'},
            "loop-short-extents: dlpc.short_extents must be an array of dicts from dims to "
            'integers, e.g. [{batch = 1 : i64, seq = 2 : i64}]; got [{seq = "2"}]',
        ),
    ],
)
def test_diagnostics(change, message):
    args = {"short": "[{seq = 2 : i64}]", **change}
    text = fn(rowsum(), **args)
    with pytest.raises(VerifyException) as e:
        short(text)
    assert str(e.value) == message


def test_missing_num_inputs_is_a_diagnostic():
    text = fn(rowsum(), "[{seq = 2 : i64}]").replace("dlpc.num_inputs = 2 : i64, ", "")
    with pytest.raises(VerifyException, match="but no dlpc.dims, dlpc.max_dims or dlpc.num_inputs"):
        short(text)


def test_the_value_at_the_maximum_is_accepted():
    out = short(fn(rowsum(), "[{batch = 1 : i64, seq = 16 : i64}]"))
    assert kernels(out) == ["sum_0_batch1_seq16", "sum_0"]


def test_grows_reads_floor_numerators_and_denominators():
    """The parser keeps floor numerators positive; a hand-built floor of a shrinking
    numerator or of a negative denominator does not grow, an integer does."""
    seq = symdims.SymDim.make({("seq",): 1})
    shrinking = symdims.SymDim.make({("seq",): -1, (): 16})
    assert _grows(5) and _grows(seq)
    assert _grows(symdims.SymDim.make({(symdims.Floor(seq + 1, 2),): 1}))
    assert not _grows(symdims.SymDim.make({(symdims.Floor(shrinking, 2),): 1}))
    assert not _grows(symdims.SymDim.make({(symdims.Floor(seq + 1, -2),): 1}))
    assert not _grows(symdims.SymDim.make({(symdims.Floor(seq + 1, 0),): 1}))  # (seed 51)
    assert not _grows(shrinking)


# ---------------------------------------- the killable survivors of --seed 49 (e4ff67a)


def test_a_binding_that_gives_no_copy_does_not_stop_the_next():
    """{batch = 4} changes nothing (no copy); {seq = 2} after it still gets its copy."""
    out = short(fn(rowsum(), "[{batch = 4 : i64}, {seq = 2 : i64}]"))
    assert kernels(out) == ["sum_0_seq2", "sum_0"]


def test_a_loop_whose_extent_does_not_evaluate_does_not_stop_the_next():
    """The first marked loop's extent names a symbol with no value: skipped; the
    reduction over seq after it still runs to 3 (the copy keeps its marks)."""
    out = short(fn(rowsum(ei='"seq * other"'), "[{seq = 3 : i64}]"))
    assert kernels(out) == ["sum_0_seq3", "sum_0"]
    assert bounds(out, "sum_0_seq3") == ["0 to 4 step 1", "0 to 3 step 1"]
    assert 'loop.kernel "sum_0_seq3" attributes {dlpc.exact' in out


@pytest.mark.parametrize("block_id", [-1, -2])
def test_a_non_integer_base_names_no_loop(block_id):
    """A per-row loop whose base is no loop id is not a row group's (not static), whatever
    id the block loop has: a negative id must not match the malformed entry."""
    text = row_group(3).replace("dlpc.extent_id = 1 : i64", f"dlpc.extent_id = {block_id} : i64")
    text = text.replace("dlpc.extent_base = [1 : i64]", 'dlpc.extent_base = ["x"]')
    out = short(text)
    copy = out.split('"rows_0_seq3"', 1)[1].split("loop.kernel", 1)[0]
    assert not copy.startswith(" attributes {dlpc.short}") and "dlpc.extent_base" in copy


@pytest.mark.parametrize("x", ["f32[4, 6]", "f32[4, 2, 6]"])
def test_a_weight_with_the_batch_size_has_no_chunk_graph(x):
    """matmul by a [4, 6, 3] weight: its dim 0 pairs with the batch (not per image), so
    the chunk's graph gives a result of another batch or does not infer: None."""
    m = model(
        "return matmul(x, w)", args=f"x: {x}", params="  param w: f32[4, 6, 3] = normal(seed=1)\n"
    )
    assert rebatch(m.module, 2) is None


def test_booleans_count_one_byte_an_element():
    """A cast of i1 [8, 16, 16] to f32: 256 + 1024 bytes an image (an i1 is a byte)."""
    text = (
        "func.func @main(%x: tensor<8x16x16xi1>) -> tensor<8x16x16xf32> {\n"
        "  %y = graph.cast %x {to = f32} : (tensor<8x16x16xi1>) -> tensor<8x16x16xf32>\n"
        "  func.return %y : tensor<8x16x16xf32>\n}\n"
    )
    module = parse_module(text)
    assert chunk_plan(module, 8 * 1280) is None
    assert chunk_plan(module, 8 * 1280 - 1) == (8, 4)
    assert chunk_plan(module, 2 * 1280) == (8, 2)


def test_the_budget_is_half_a_megabyte():
    """CHUNK_BUDGET_BYTES = 512 KiB (half a Zen 4 core's L2): relu over [8, 128, 128]
    floats, 128 KiB an image, runs four images a chunk."""
    m = model("return relu(x)", args="x: f32[8, 128, 128]")
    assert CHUNK_BUDGET_BYTES == 1 << 19
    assert chunk_plan(m.module, CHUNK_BUDGET_BYTES) == (8, 4)


def test_a_declared_main_a_rank_zero_result_and_an_empty_dim():
    """A @main without a body, and a reduction to a scalar, are not per sample; a batch of
    empty images ([4, 0]) is (a size of 0 is a size)."""
    assert (
        batch_values(parse_module("func.func private @main(tensor<4x6xf32>) -> tensor<4x6xf32>"))
        is None
    )
    scalar = model("return reduce_sum(x, axes=[0, 1])")
    assert batch_values(scalar.module) is None
    empty = (
        "func.func @main(%x: tensor<4x0xf32>) -> tensor<4x0xf32> {\n"
        "  %y = graph.relu %x : (tensor<4x0xf32>) -> tensor<4x0xf32>\n"
        "  func.return %y : tensor<4x0xf32>\n}\n"
    )
    found = batch_values(parse_module(empty))
    assert found is not None and found[0] == 4


def test_the_guard_loads_each_dim_at_its_index():
    """dims (batch, seq): batch is dlpc_dims[0], seq dlpc_dims[1]; each compared with ==."""
    out = short(fn(rowsum(), "[{batch = 2 : i64, seq = 5 : i64}]"))
    assert re.search(r"arith.constant 0 : index\n\s*%batch = memref.load %dlpc_dims\[%\w+\]", out)
    assert re.search(r"arith.constant 1 : index\n\s*%seq = memref.load %dlpc_dims\[%\w+\]", out)
    assert out.count("arith.cmpi eq") == 2


# ---------------------------------------- the killable survivors of --seed 50 (ab5ffab)


def test_a_block_loop_that_runs_once_but_not_from_zero_is_no_row_group():
    """A block loop 2 to 16 step 16 runs once, from 2: its per-row loop's rows start at 2,
    so the copy is not static (the marks stay). (Not what kills seed 50's `once` mutant,
    `lower == 0` -> `>= 0`: that one is equivalent, a block loop from 2 is never in
    `exact`, so `once` is not asked.)"""
    text = row_group(3).replace("%i1 = 0 to 32 step 16", "%i1 = 2 to 16 step 16")
    out = short(text)
    copy = out.split('"rows_0_seq3"', 1)[1].split("loop.kernel", 1)[0]
    assert not copy.startswith(" attributes {dlpc.short}") and "dlpc.extent_id" in copy


def test_the_dims_argument_follows_the_inputs():
    """Three inputs (x, y, dlpc_dims): the guard reads dlpc_dims, the last input."""
    text = fn(rowsum(), "[{seq = 2 : i64}]").replace(
        "%x: memref<4x16xf32>, %dlpc_dims", "%x: memref<4x16xf32>, %y: memref<4x16xi64>, %dlpc_dims"
    )
    text = text.replace("dlpc.num_inputs = 2 : i64", "dlpc.num_inputs = 3 : i64")
    out = short(text)
    assert re.search(r"%seq = memref.load %dlpc_dims\[", out)
    assert "memref.load %y" not in out
