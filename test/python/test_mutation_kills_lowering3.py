"""graph-to-te's decisions, third round (issue 35, bench/mutation.py --area lowering): the
forms test_graph_to_te does not lower — f16 (accumulated in f32, rounded once), NHWC
windows and norms, small integer powers as products, dropout with a step, gathers and
concats at their edges — each lowered from hand-written graph IR and run on the te
evaluator against the numpy reference; the structural choices pinned with why."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import lower_and_check, te_ops

from dlpc.passes.pipeline import parse_module

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def ty(shape, elt="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{elt}>"


def one_op(op: str, ins: list[tuple[str, tuple, str]], out: tuple, attrs: str = "", elt="f32"):
    """@main over `ins` (name, shape, element type) returning `op` of them."""
    args = ", ".join(f"%{n}: {ty(s, e)}" for n, s, e in ins)
    operands = ", ".join(f"%{n}" for n, _, _ in ins)
    types = ", ".join(ty(s, e) for _, s, e in ins)
    return parse_module(
        f"func.func @main({args}) -> {ty(out, elt)} {{\n"
        f"  %y = {op} {operands} {attrs} : ({types}) -> {ty(out, elt)}\n"
        f"  func.return %y : {ty(out, elt)}\n}}"
    )


def body_names(module) -> list[str]:
    return [op.name for op in module.walk()]


# ------------------------------------------------------------------------- f16


@pytest.mark.parametrize(
    "op,sa,sb,out,attrs",
    [
        ("graph.matmul", (3, 40), (40, 4), (3, 4), ""),
        ("graph.matmul", (40, 3), (4, 40), (3, 4), "{transpose_a = true, transpose_b = true}"),
        ("graph.linear", (3, 40), (4, 40), (3, 4), ""),
    ],
)
def test_f16_products_accumulate_in_f32_and_round_once(op, sa, sb, out, attrs):
    """Forty f16 products summed in f16 would lose bits the reference (numpy's f16
    matmul, f32 accumulation) keeps: the lowering's sum must be f32, rounded at the end."""
    a, b = (rand(*s, dtype=np.float16) for s in (sa, sb))
    m = one_op(op, [("a", sa, "f16"), ("b", sb, "f16")], out, attrs, "f16")
    lower_and_check(m, [a, b], tol=2e-3)
    names = body_names(m)
    assert "arith.extf" in names and "arith.truncf" in names


def test_f16_linear_with_a_bias_adds_it_after_rounding():
    x, w, b = (
        rand(2, 24, dtype=np.float16),
        rand(5, 24, dtype=np.float16),
        rand(5, dtype=np.float16),
    )
    m = one_op(
        "graph.linear", [("x", (2, 24), "f16"), ("w", (5, 24), "f16"), ("b", (5,), "f16")],
        (2, 5), elt="f16",
    )  # fmt: skip
    lower_and_check(m, [x, w, b], tol=2e-3)


def test_f16_conv2d():
    x, w = rand(1, 6, 5, 5, dtype=np.float16), rand(2, 6, 3, 3, dtype=np.float16)
    m = one_op(
        "graph.conv2d", [("x", (1, 6, 5, 5), "f16"), ("w", (2, 6, 3, 3), "f16")], (1, 2, 3, 3),
        elt="f16",
    )  # fmt: skip
    lower_and_check(m, [x, w], tol=2e-3)


@pytest.mark.parametrize("op", ["graph.softmax", "graph.log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_f16_softmax_sums_in_f32(op, axis):
    x = (rand(30, 3) * 4).astype(np.float16)
    m = one_op(op, [("x", (30, 3), "f16")], (30, 3), f"{{axis = {axis} : i64}}", "f16")
    lower_and_check(m, [x], tol=2e-3)


def test_f32_softmax_on_the_last_axis_stores_exp_once():
    """The last-axis softmax exps once into a stored tensor (`_exp`) and multiplies by the
    reciprocal sum; another axis recomputes the exp (no row buffer to keep it in)."""
    x = rand(3, 7)
    last = one_op("graph.softmax", [("x", (3, 7), "f32")], (3, 7), "{axis = 1 : i64}")
    lower_and_check(last, [x])
    assert '"softmax_0_exp"' in str(last)
    first = one_op("graph.softmax", [("x", (3, 7), "f32")], (3, 7), "{axis = 0 : i64}")
    lower_and_check(first, [x])
    assert "_exp" not in str(first)


# ------------------------------------------------------------------------ NHWC

NHWC_CONV = [
    ((1, 5, 5, 4), (6, 2, 3, 3), (1, 3, 3, 6), "groups = 2 : i64"),  # grouped
    ((1, 5, 5, 4), (4, 1, 3, 3), (1, 5, 5, 4), "groups = 4 : i64, pads = array<i64: 1, 1, 1, 1>"),
    ((1, 4, 4, 4), (8, 2, 1, 1), (1, 4, 4, 8), "groups = 2 : i64"),  # 1x1 grouped: cg = 2
    ((1, 4, 4, 4), (4, 1, 1, 1), (1, 4, 4, 4), "groups = 4 : i64"),  # cg*kh*kw = 1: OIHW
    ((2, 6, 5, 3), (4, 3, 2, 3), (2, 3, 3, 4), "strides = array<i64: 2, 1>, dilations = array<i64: 1, 1>"),
]  # fmt: skip


@pytest.mark.parametrize("sx,sw,out,attrs", NHWC_CONV, ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_nhwc_conv2d(sx, sw, out, attrs, bias):
    """NHWC reads the OIHW weight through a (kh, kw, c/g, o) re-layout unless c/g*kh*kw
    is 1 (then OIHW already reads contiguously along o); grouped, depthwise and 1x1."""
    arrays = [rand(*sx), rand(*sw)] + ([rand(sw[0])] if bias else [])
    ins = [("x", sx, "f32"), ("w", sw, "f32")] + ([("b", (sw[0],), "f32")] if bias else [])
    m = one_op("graph.conv2d", ins, out, f'{{{attrs}, layout = "nhwc"}}')
    lower_and_check(m, arrays, tol=1e-4)
    relayout = sw[1] * sw[2] * sw[3] > 1
    assert ("_weight_hwio" in str(m)) == relayout


@pytest.mark.parametrize("op", ["graph.max_pool2d", "graph.avg_pool2d"])
@pytest.mark.parametrize(
    "attrs,out",
    [
        ("kernel = array<i64: 3, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 1, 1>", (1, 3, 3, 3)),
        ("kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = true", (1, 3, 3, 3)),
    ],
    ids=["padded", "ceil"],
)  # fmt: skip
def test_nhwc_pools(op, attrs, out):
    x = rand(1, 5, 6, 3)
    m = one_op(op, [("x", (1, 5, 6, 3), "f32")], out, f'{{{attrs}, layout = "nhwc"}}')
    lower_and_check(m, [x])


def test_nhwc_avg_pool_counting_its_padding():
    x = rand(1, 5, 6, 3)
    m = one_op(
        "graph.avg_pool2d", [("x", (1, 5, 6, 3), "f32")], (1, 3, 3, 3),
        '{kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, '
        'count_include_pad = true, layout = "nhwc"}',
    )  # fmt: skip
    lower_and_check(m, [x])


def test_nhwc_global_avg_pool_and_batch_norm():
    x = rand(2, 3, 4, 5)
    m = one_op("graph.global_avg_pool", [("x", (2, 3, 4, 5), "f32")], (2, 1, 1, 5),
               '{layout = "nhwc"}')  # fmt: skip
    lower_and_check(m, [x])
    p = [rand(5), rand(5), rand(5), np.abs(rand(5)) + 0.5]
    ins = [("x", (2, 3, 4, 5), "f32")] + [(n, (5,), "f32") for n in "sbmv"]
    m = one_op("graph.batch_norm", ins, (2, 3, 4, 5), '{epsilon = 0.01 : f64, layout = "nhwc"}')
    lower_and_check(m, [x, *p])


# ------------------------------------------------------------------ avg pools


@pytest.mark.parametrize(
    "attrs,out",
    [
        # every window inside [0, h): a constant divisor
        ("kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>", (1, 2, 3, 3)),
        # padding counted: every window inside [-p, h + p)
        ("kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = true", (1, 2, 6, 7)),
        # padding counted, but ceil mode's last window runs past the padding
        ("kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 0, 0>, "
         "count_include_pad = true, ceil_mode = true", (1, 2, 4, 4)),
        # only the right pad: the last window of a row is short
        ("kernel = array<i64: 2, 3>, strides = array<i64: 1, 2>, pads = array<i64: 0, 0, 0, 2>", (1, 2, 5, 4)),
    ],
    ids=["inside", "counted", "ceil-past-pad", "right-pad"],
)  # fmt: skip
def test_avg_pool_divisors(attrs, out):
    """Where every window counts k_h * k_w cells (inside the input, or inside the counted
    padding) the divisor is that constant, decided from the first and last window; else
    each window's count is computed (min/max of its bounds) in the epilogue."""
    x = rand(1, 2, 6, 7)
    m = one_op("graph.avg_pool2d", [("x", (1, 2, 6, 7), "f32")], out, f"{{{attrs}}}")
    lower_and_check(m, [x])
    counted = "arith.minsi" in body_names(m)
    assert counted == (out in ((1, 2, 4, 4), (1, 2, 5, 4))), (out, counted)


# ----------------------------------------------------------------- elementwise


@pytest.mark.parametrize("n", [1.0, 2.0, 3.0, 4.0, 5.0, 2.5, -2.0])
def test_pow_by_a_small_integer_constant_is_products(n):
    """x ** n for n in 1..4 is a product chain (a vectorised powf goes scalar for negative
    bases); any other exponent keeps powf. Both agree with numpy on negative bases."""
    x = np.array([-2.0, -1.5, -0.5, 0.0, 0.5, 1.5, 3.0], np.float32)
    m = parse_module(f"""
func.func @main(%x: tensor<7xf32>) -> tensor<7xf32> {{
  %e = graph.constant dense<{n}> : tensor<f32>
  %y = graph.pow %x, %e : (tensor<7xf32>, tensor<f32>) -> tensor<7xf32>
  func.return %y : tensor<7xf32>
}}""")
    lower_and_check(m, [x], tol=1e-5)
    assert ("math.powf" in body_names(m)) == (n not in (1.0, 2.0, 3.0, 4.0))
    if n in (1.0, 2.0, 3.0, 4.0):  # n - 1 products (n = 4: a square squared, two)
        assert body_names(m).count("arith.mulf") == {1.0: 0, 2.0: 1, 3.0: 2, 4.0: 2}[n]


@pytest.mark.parametrize(
    "shape,values", [((2,), "[2.0, 2.0]"), ((2,), "[2.0, 3.0]"), ((1,), "[3.0]")]
)
def test_pow_by_a_constant_of_several_elements(shape, values):
    """An exponent of one element may be products; one of several (even all equal) is
    broadcast elementwise by powf."""
    x = np.array([[-2.0, 1.5], [0.5, -3.0]], np.float32)
    m = parse_module(f"""
func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {{
  %e = graph.constant dense<{values}> : {ty(shape)}
  %y = graph.pow %x, %e : (tensor<2x2xf32>, {ty(shape)}) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}}""")
    lower_and_check(m, [x], tol=1e-5)
    assert ("math.powf" in body_names(m)) == (shape != (1,))


def test_clip_with_one_bound():
    x = rand(9) * 3
    for attrs in ("{max = 0.5 : f64}", "{min = -0.5 : f64}"):
        m = one_op("graph.clip", [("x", (9,), "f32")], (9,), attrs)
        lower_and_check(m, [x])


# --------------------------------------------------------------- data movement


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_of_three_pieces_of_different_sizes(axis):
    shapes = [(2, 3), (2, 3), (2, 3)]
    shapes = [
        tuple(d + k if i == axis % 2 else d for i, d in enumerate(s)) for k, s in enumerate(shapes)
    ]
    out = list(shapes[0])
    out[axis % 2] = sum(s[axis % 2] for s in shapes)
    arrays = [rand(*s) for s in shapes]
    m = one_op("graph.concat", [(f"a{k}", s, "f32") for k, s in enumerate(shapes)], tuple(out),
               f"{{axis = {axis} : i64}}")  # fmt: skip
    lower_and_check(m, arrays)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_of_negative_and_out_of_range_indices(axis):
    """A negative index counts from the end; one out of range is clamped (never read out
    of bounds), as the reference does."""
    x = rand(4, 5)
    idx = np.array([[0, -1, 3], [-4, 2, 1]], np.int64)
    out = (2, 3, 5) if axis == 0 else (4, 2, 3)
    m = one_op("graph.gather", [("x", (4, 5), "f32"), ("i", (2, 3), "i64")], out,
               f"{{axis = {axis} : i64}}")  # fmt: skip
    lower_and_check(m, [x, idx])


@pytest.mark.parametrize("keep", ["true", "false"])
def test_reduce_mean_over_two_axes_divides_by_their_product(keep):
    x = rand(2, 3, 4)
    out = (2, 1, 1) if keep == "true" else (2,)
    m = one_op("graph.reduce_mean", [("x", (2, 3, 4), "f32")], out,
               f"{{axes = array<i64: 1, 2>, keepdims = {keep}}}")  # fmt: skip
    lower_and_check(m, [x])


@pytest.mark.parametrize("axis", [1, -1])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm_over_the_tail(axis, bias):
    x = rand(2, 3, 4)
    tail = (2, 3, 4)[axis:] if axis < 0 else (2, 3, 4)[axis:]
    ins = [("x", (2, 3, 4), "f32"), ("s", tail, "f32")] + ([("b", tail, "f32")] if bias else [])
    arrays = [x, rand(*tail)] + ([rand(*tail)] if bias else [])
    m = one_op("graph.layer_norm", ins, (2, 3, 4), f"{{axis = {axis} : i64, epsilon = 0.01 : f64}}")
    lower_and_check(m, arrays, tol=1e-4)


@pytest.mark.parametrize("starts", [[1, 2], [-2, -1], [7, -9], [0, 0]])
def test_dynamic_slice_counts_negative_starts_from_the_end_and_clamps(starts):
    """graph.dynamic_slice reads `sizes` elements from each run-time start: a negative
    start counts from the end, then the start is clamped to [0, dim - size] (the reads
    stay in bounds whatever the offset); a 2-axis slice of a 4x6 tensor."""
    x = rand(4, 6)
    s = np.array(starts, np.int64)
    m = one_op(
        "graph.dynamic_slice", [("x", (4, 6), "f32"), ("s", (2,), "i64")], (2, 3),
        "{axes = array<i64: 0, -1>, sizes = array<i64: 2, 3>}",
    )  # fmt: skip
    lower_and_check(m, [x, s])
    a = [v + d if v < 0 else v for v, d in zip(starts, (4, 6))]
    a = [min(max(v, 0), d - n) for v, d, n in zip(a, (4, 6), (2, 3))]
    from dlpc.reference.graph import run_reference

    (ref,) = run_reference(
        one_op("graph.dynamic_slice", [("x", (4, 6), "f32"), ("s", (2,), "i64")], (2, 3),
               "{axes = array<i64: 0, -1>, sizes = array<i64: 2, 3>}"), [x, s], {})  # fmt: skip
    np.testing.assert_array_equal(ref, x[a[0] : a[0] + 2, a[1] : a[1] + 3])


SYMBOLIC_RELU = """
func.func @{name}(%x: tensor<?x4xf32, ["{dim}"]>) -> tensor<?x4xf32, ["{dim}"]> {{
  %y = graph.relu %x : (tensor<?x4xf32, ["{dim}"]>) -> tensor<?x4xf32, ["{dim}"]>
  func.return %y : tensor<?x4xf32, ["{dim}"]>
}}"""


def test_symbolic_dims_lower_in_one_function_only_and_leave_no_hook():
    """The dims' values come in one dlpc_dims argument, so one function per module may
    have symbols (two are refused in one line); the body builder's hook for reading them
    is gone after the pass, whether it succeeded or not, so a static module lowered next
    reads no dims."""
    from xdsl.context import Context
    from xdsl.utils.exceptions import DiagnosticException

    from dlpc.dialects.te import BodyBuilder
    from dlpc.passes.lower.graph_to_te import GraphToTe

    two = parse_module(
        SYMBOLIC_RELU.format(name="main", dim="n") + SYMBOLIC_RELU.format(name="f", dim="m")
    )
    with pytest.raises(DiagnosticException, match="symbolic dims in more than one function"):
        GraphToTe().apply(Context(), two)
    assert BodyBuilder.symbolic is None
    one = parse_module(SYMBOLIC_RELU.format(name="main", dim="n"))
    GraphToTe().apply(Context(), one)
    assert "dlpc_dims" in str(one) and BodyBuilder.symbolic is None
    x = rand(3, 4)
    m = one_op("graph.relu", [("x", (3, 4), "f32")], (3, 4))
    lower_and_check(m, [x])
    assert "dlpc_dims" not in str(m)


def test_a_fused_nhwc_conv_keeps_its_weight_relayout_as_its_own_kernel():
    """Inside graph.fused the NHWC conv's (kh, kw, c, o) weight compute is hoisted, not
    inlined into the reduction (it would be recomputed per output element): two te ops,
    the fused one named after the graph.fused, equal to the reference."""
    m = parse_module("""
func.func @main(%x: tensor<1x6x6x3xf32>, %w: tensor<4x3x3x3xf32>, %c: tensor<1x1x1x4xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.fused "conv_bias_relu" %x, %w, %c : (tensor<1x6x6x3xf32>, tensor<4x3x3x3xf32>, tensor<1x1x1x4xf32>) -> tensor<1x4x4x4xf32> {
  ^bb0(%a: tensor<1x6x6x3xf32>, %k: tensor<4x3x3x3xf32>, %cc: tensor<1x1x1x4xf32>):
    %0 = graph.conv2d %a, %k {layout = "nhwc"} : (tensor<1x6x6x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
    %1 = graph.add %0, %cc : (tensor<1x4x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x4x4x4xf32>
    %2 = graph.relu %1 : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
    graph.yield %2 : tensor<1x4x4x4xf32>
  }
  func.return %y : tensor<1x4x4x4xf32>
}""")  # noqa: E501
    lower_and_check(m, [rand(1, 6, 6, 3), rand(4, 3, 3, 3), rand(1, 1, 1, 4)], tol=1e-4)
    assert [str(op.compute_name) for op in te_ops(m)] == ["conv2d_0_weight_hwio", "conv_bias_relu"]
    # every kernel names the graph op it came from: the fused op's body, in order
    origins = {str(op.attributes["origin"]) for op in te_ops(m)}
    assert origins == {'"graph.fused(graph.conv2d, graph.add, graph.relu)"'}, origins


@pytest.mark.parametrize(
    "sin,sout,shape,read",
    [
        ("?x4x6", "?x4x2x3", "-1, 4, 2, 3", "%x[%i0, %i1, %2]"),  # [n, 4] kept, 6 = 2 x 3
        ("4x?x6", "4x?x2x3", "4, -1, 2, 3", "%x[%i0, %i1, %2]"),  # the symbol second
        ("?x4x1", "?x4x1x1", "-1, 4, 1, 1", "%x[%i0, %i1, %0]"),  # nothing left but 1s
    ],
)
def test_a_symbolic_reshape_indexes_its_kept_leading_dims_directly(sin, sout, shape, read):
    """Over symbolic dims the leading dims a reshape keeps (all but the last common one)
    are read at the output's own indices: no division or modulo by a dim of the call,
    so the index map stays static and the kernel schedulable; the rest is the row-major
    flat index as for static shapes (here i2 * 3 + i3, or the 0 of a unit dim)."""
    from xdsl.context import Context

    from dlpc.passes.lower.graph_to_te import GraphToTe

    m = parse_module(f"""
func.func @main(%x: tensor<{sin}xf32, ["n"]>) -> tensor<{sout}xf32, ["n"]> {{
  %y = graph.reshape %x {{shape = array<i64: {shape}>}} : (tensor<{sin}xf32, ["n"]>) -> tensor<{sout}xf32, ["n"]>
  func.return %y : tensor<{sout}xf32, ["n"]>
}}""")  # noqa: E501
    GraphToTe().apply(Context(), m)
    names = body_names(m)
    assert "arith.divsi" not in names and "arith.remsi" not in names
    assert f"te.read {read}" in str(m)


@pytest.mark.parametrize("bias", [(), (1, 4), (4,)])
def test_linear_bias_of_every_accepted_shape(bias):
    """The bias is [c], [1, c] or a scalar: read at the output channel, at [0, c], or at []."""
    x, w, b = rand(3, 6), rand(4, 6), rand(*bias)
    ins = [("x", (3, 6), "f32"), ("w", (4, 6), "f32"), ("b", bias, "f32")]
    m = one_op("graph.linear", ins, (3, 4))
    lower_and_check(m, [x, w, b], tol=1e-4)
    assert [str(op.attributes["origin"]) for op in te_ops(m)] == ['"graph.linear"']


MATH = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
        "floor", "ceil", "round"]  # fmt: skip


@pytest.mark.parametrize("op", MATH)
def test_math_functions_lower_to_their_math_op(op):
    """Each float math function is one math-dialect op (round: roundeven, halves to even),
    equal to the reference inside its domain."""
    x = np.array([-2.5, -0.5, -0.25, 0.0, 0.3, 0.5, 1.5, 2.5], np.float32)
    if op in ("asin", "acos", "atanh"):
        x = np.clip(x, -0.9, 0.9)
    if op == "acosh":
        x = np.abs(x) + 1
    m = one_op(f"graph.{op}", [("x", (8,), "f32")], (8,))
    lower_and_check(m, [x])
    assert f"math.{'roundeven' if op == 'round' else op}" in body_names(m)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_a_depthwise_conv_with_a_channel_multiplier_reads_channel_oc_over_2(layout):
    """groups = channels with two outputs per channel (o = 2c, c/g = 1, o/g = 2): output
    channel oc reads input channel oc // 2, not oc (that is only depthwise with one
    output per channel) (lowering seed 42 survivor graph_to_te.py:332 og == 1 -> og >= 1)."""
    nchw = layout == "nchw"
    sx, out = ((1, 3, 5, 5), (1, 6, 3, 3)) if nchw else ((1, 5, 5, 3), (1, 3, 3, 6))
    m = one_op(
        "graph.conv2d", [("x", sx, "f32"), ("w", (6, 1, 3, 3), "f32")], out,
        f'{{groups = 3 : i64, layout = "{layout}"}}',
    )  # fmt: skip
    lower_and_check(m, [rand(*sx), rand(6, 1, 3, 3)], tol=1e-4)
