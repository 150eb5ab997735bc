"""Tests for the dialects' survivors of seed 49 that its 120 s timeout had scored as killed
(issue 35, eighth round, bench/mutation.py --area dialects --retime 900): defaults of
leaky_relu and winograd_input_transform against numpy, a 1-row winograd output, a batched
rhs's zero point, a ceil-mode pool whose last window starts past the input, dlp.conv2d's
weight size."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_te import lower_and_check
from xdsl.utils.exceptions import VerifyException

from dlpc.dialects import graph as g
from dlpc.passes.pipeline import parse_module
from dlpc.reference.graph import run_reference


def verdict(text: str) -> str:
    """'OK' or the first line of the verifier's message for the module `text`."""
    try:
        parse_module(text).verify()
    except VerifyException as e:
        return str(e).splitlines()[0]
    return "OK"


def one_op(op: str, operands: list[str], result: str, props: str = "") -> str:
    """@main(%a0: operands[0], ...) returning `%0 = op %a0, ... props` of type `result`."""
    args = ", ".join(f"%a{n}: {t}" for n, t in enumerate(operands))
    names = ", ".join(f"%a{n}" for n in range(len(operands)))
    return (
        f"func.func @main({args}) -> {result} {{\n"
        f"  %0 = {op} {names}{props} : ({', '.join(operands)}) -> {result}\n"
        f"  func.return %0 : {result}\n}}"
    )


def test_leaky_relu_default_alpha_is_one_hundredth():
    text = one_op("graph.leaky_relu", ["tensor<2x3xf32>"], "tensor<2x3xf32>")
    module = parse_module(text)
    op = next(o for o in module.walk() if isinstance(o, g.LeakyReluOp))
    assert op.alpha == pytest.approx(0.01)
    x = np.array([[-3.0, -1.0, 0.0], [0.5, 2.0, -100.0]], np.float32)
    (got,) = run_reference(module, [x], {})
    np.testing.assert_allclose(got, np.where(x > 0, x, np.float32(0.01) * x), rtol=1e-6)
    lower_and_check(parse_module(text), [x])


# F(2x2, 3x3): V = B^T d B per 4x4 tile d, point (i, j) at index 4 i + j
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)


def test_winograd_input_transform_default_pads_are_zero():
    # a 4x4 input without pads is one 4x4 tile (a 2x2 output of the 3x3 conv)
    text = one_op(
        "graph.winograd_input_transform", ["tensor<1x2x4x4xf32>"], "tensor<16x1x2x1x1xf32>"
    )
    module = parse_module(text)
    op = next(o for o in module.walk() if isinstance(o, g.WinogradInputTransformOp))
    assert op.pads == (0, 0, 0, 0)
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4) * 0.25 - 3.0
    (got,) = run_reference(module, [x], {})
    want = np.stack([BT @ x[0, c] @ BT.T for c in range(2)])  # [C, 4, 4]
    np.testing.assert_allclose(got.reshape(4, 4, 2), want.transpose(1, 2, 0), rtol=1e-6)
    lower_and_check(parse_module(text), [x])


def test_winograd_output_transform_of_one_row():
    # an output 1 row high is one tile row (the tile's second row cropped)
    text = one_op(
        "graph.winograd_output_transform",
        ["tensor<16x1x2x1x1xf32>"],
        "tensor<1x2x1x2xf32>",
        " {output = array<i64: 1, 2>}",
    )
    assert verdict(text) == "OK"
    m = np.linspace(-1, 1, 32, dtype=np.float32).reshape(16, 1, 2, 1, 1)
    lower_and_check(parse_module(text), [m])


def test_winograd_output_transform_of_no_row_is_refused():
    text = one_op(
        "graph.winograd_output_transform",
        ["tensor<16x1x2x1x1xf32>"],
        "tensor<1x2x0x2xf32>",
        " {output = array<i64: 0, 2>}",
    )
    assert verdict(text) == "graph.winograd_output_transform output 0x2 needs 1x1 tiles, got 1x1"


MM = "graph.matmul_integer"
# a batched rhs [2, K=8, N=16]: its zero point is one per column N, not per entry of axis 1
MM_OPERANDS = ["tensor<4x8xui8>", "tensor<2x8x16xi8>", "tensor<ui8>"]


def test_matmul_integer_zero_point_per_column_of_a_batched_rhs():
    text = one_op(MM, [*MM_OPERANDS, "tensor<16xi8>"], "tensor<2x4x16xi32>")
    assert verdict(text) == "OK"
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (4, 8)).astype(np.uint8)
    b = rng.integers(-128, 128, (2, 8, 16)).astype(np.int8)
    za = np.array(3, np.uint8)
    zb = rng.integers(-128, 128, (16,)).astype(np.int8)
    (got,) = run_reference(parse_module(text), [a, b, za, zb], {})
    want = (a.astype(np.int32) - 3) @ (b.astype(np.int32) - zb.astype(np.int32))
    np.testing.assert_array_equal(got, want)


def test_matmul_integer_zero_point_per_entry_of_rhs_axis_1_is_refused():
    text = one_op(MM, [*MM_OPERANDS, "tensor<8xi8>"], "tensor<2x4x16xi32>")
    assert verdict(text) == (
        "graph.matmul_integer zero points scalar, 8 must be one value or one per row of "
        "lhs (4) / column of rhs (16)"
    )


def test_ceil_mode_pool_drops_a_window_starting_past_the_input():
    # 3x3, kernel 2, stride 3: ceil((3 - 2) / 3) + 1 = 2 windows, but the second would start
    # at 3, past the input: one window
    assert g.window_out(3, 2, 3, 0, ceil_mode=True) == 1
    assert g.window_out(5, 1, 3, 0, ceil_mode=True) == 2
    text = one_op(
        "graph.max_pool2d",
        ["tensor<1x1x3x3xf32>"],
        "tensor<1x1x1x1xf32>",
        " {kernel = array<i64: 2, 2>, strides = array<i64: 3, 3>, ceil_mode = true}",
    )
    assert verdict(text) == "OK"
    x = np.array([[[[1, 7, 9], [3, -2, 8], [9, 9, 9]]]], np.float32)
    (got,) = run_reference(parse_module(text), [x], {})
    np.testing.assert_array_equal(got, [[[[7.0]]]])


CONV = (
    "func.func @f() {{\n"
    "  %c0 = arith.constant 0 : index\n"
    "  %c1 = arith.constant 1 : index\n"
    "  %d = memref.alloc() : memref<36xf32, #dlp.space<nram>>\n"
    "  %s = memref.alloc() : memref<128xf32, #dlp.space<nram>>\n"
    "  %w = memref.alloc() : memref<{w}xf32, #dlp.space<wram>>\n"
    "  dlp.conv2d %d[%c0], %s[%c0], %w[%c0], %c1 {{channels_in = 2 : i64, height = 8 : i64, "
    "width = 8 : i64, kernel_h = 3 : i64, kernel_w = 3 : i64, stride_h = 1 : i64, "
    "stride_w = 1 : i64, pad_top = 0 : i64, pad_left = 0 : i64, pad_bottom = 0 : i64, "
    "pad_right = 0 : i64}} : memref<36xf32, #dlp.space<nram>>, "
    "memref<128xf32, #dlp.space<nram>>, memref<{w}xf32, #dlp.space<wram>>\n"
    "  func.return\n}}"
)


@pytest.mark.parametrize(
    ("w", "expected"),
    [
        (18, "OK"),  # 1 output channel x 2 input channels x 3 x 3 taps
        (17, "dlp.conv2d operand 'weight' holds 17 elements, needs 18"),
        (10, "dlp.conv2d operand 'weight' holds 10 elements, needs 18"),
    ],
)
def test_dlp_conv2d_weight_holds_every_tap(w, expected):
    assert verdict(CONV.format(w=w)) == expected


# ---- seed 50's killable survivors (tests written after the sample was scored)


def test_ceil_mode_pool_with_pads_drops_a_window_starting_in_the_right_pad():
    # 5x5 padded by 1 on each side, kernel 2, stride 2: ceil(5 / 2) + 1 = 4 windows, but the
    # fourth would start at 6 = in the right pad: 3
    assert g.window_out(5, 2, 2, 2, ceil_mode=True) == 3
    text = one_op(
        "graph.max_pool2d",
        ["tensor<1x1x5x5xf32>"],
        "tensor<1x1x3x3xf32>",
        " {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,"
        " ceil_mode = true}",
    )
    assert verdict(text) == "OK"


@pytest.mark.parametrize(
    ("source", "target", "result", "expected"),
    [
        ("2x3", "-1", "6xf32", "OK"),
        ("2x3", "1, -1", "1x6xf32", "OK"),
        # 0 copies the input's dim: with an empty input the other dims leave -1 unknowable
        ("0x3", "0, -1", "0x1xf32", "graph.reshape cannot reshape 0x3 into [0, -1]"),
    ],
)
def test_reshape_with_minus_one(source, target, result, expected):
    text = one_op(
        "graph.reshape",
        [f"tensor<{source}xf32>"],
        f"tensor<{result}>",
        f" {{shape = array<i64: {target}>}}",
    )
    assert verdict(text) == expected


def test_linear_refuses_a_weight_of_rank_3():
    text = one_op("graph.linear", ["tensor<1x3xf32>", "tensor<4x3x2xf32>"], "tensor<1x4xf32>")
    assert verdict(text) == (
        "graph.linear expects weight [out, in] and input [..., in], got 4x3x2 and 1x3"
    )


def test_kernel_loop_by_name_is_the_loop_of_that_name():
    module = parse_module(
        'loop.kernel "k" {\n'
        '  loop.for %j = 0 to 4 step 1 {name = "j"} {\n  }\n'
        '  loop.for %i = 0 to 8 step 1 {name = "i"} {\n  }\n'
        "}"
    )
    kernel = next(o for o in module.walk() if o.name == "loop.kernel")
    assert kernel.loop("i").loop_name == "i"
    assert kernel.loop("j").loop_name == "j"
    with pytest.raises(KeyError, match="kernel 'k' has no loop named 'h'"):
        kernel.loop("h")


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        (128, "OK"),  # 2 channels x 8 x 8
        (127, "dlp.conv2d operand 'src' holds 127 elements, needs 128"),
        (20, "dlp.conv2d operand 'src' holds 20 elements, needs 128"),
    ],
)
def test_dlp_conv2d_src_holds_every_channel(s, expected):
    text = CONV.format(w=18).replace("memref<128xf32", f"memref<{s}xf32")
    assert verdict(text) == expected


POOL = (
    "func.func @f() {{\n"
    "  %c0 = arith.constant 0 : index\n"
    "  %c2 = arith.constant 2 : index\n"
    "  %s = memref.alloc() : memref<32xf32, #dlp.space<nram>>\n"
    "  %d = memref.alloc() : memref<{d}xf32, #dlp.space<nram>>\n"
    '  dlp.pool "max" %d[%c0], %s[%c0], %c2 {{height = 4 : i64, width = 4 : i64, '
    "kernel_h = 2 : i64, kernel_w = 2 : i64, stride_h = 2 : i64, stride_w = 2 : i64, "
    "pad_top = 0 : i64, pad_left = 0 : i64, out_h = 2 : i64, out_w = 2 : i64}} : "
    "memref<{d}xf32, #dlp.space<nram>>, memref<32xf32, #dlp.space<nram>>\n"
    "  func.return\n}}"
)


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (8, "OK"),  # 2 channels x 2 x 2
        (7, "dlp.pool operand 'dst' holds 7 elements, needs 8"),
        (1, "dlp.pool operand 'dst' holds 1 elements, needs 8"),
    ],
)
def test_dlp_pool_dst_holds_every_channel(d, expected):
    assert verdict(POOL.format(d=d)) == expected


# ---- loop.py's kernel helpers (low branch coverage under the area's pytest files)

NESTED = (
    'loop.kernel "k" {\n'
    '  loop.for %i = 0 to 4 step 1 {name = "i"} {\n'
    '    loop.for %j = 0 to 8 step 1 {name = "j"} {\n    }\n'
    '    loop.for %j_1 = 0 to 8 step 1 {name = "j.1"} {\n    }\n'
    "  }\n"
    '  loop.for %t = 0 to 2 step 1 {name = "t"} {\n  }\n'
    "}"
)


def _kernel(text: str):
    module = parse_module(text)
    return module, next(o for o in module.walk() if o.name == "loop.kernel")


def test_kernel_loops_are_outermost_first_in_pre_order():
    _, kernel = _kernel(NESTED)
    assert [op.loop_name for op in kernel.loops()] == ["i", "j", "j.1", "t"]


@pytest.mark.parametrize(
    ("base", "fresh"), [("u", "u"), ("i", "i.1"), ("j", "j.2"), ("t.1", "t.1")]
)
def test_fresh_loop_name_is_base_or_its_first_free_suffix(base, fresh):
    _, kernel = _kernel(NESTED)
    assert kernel.fresh_loop_name(base) == fresh


def test_kernel_prints_and_parses_back():
    module, _ = _kernel(NESTED)
    text = str(module)
    assert 'loop.kernel "k" {' in text
    assert str(parse_module(text)) == text


@pytest.mark.parametrize(
    ("lb", "ub", "step", "trips"), [(0, 10, 3, 4), (0, 9, 3, 3), (2, 9, 1, 7), (4, 4, 1, 0)]
)
def test_loop_trip_count_rounds_up(lb, ub, step, trips):
    _, kernel = _kernel(
        f'loop.kernel "k" {{\n  loop.for %i = {lb} to {ub} step {step} {{name = "i"}} {{\n  }}\n}}'
    )
    loop = kernel.loop("i")
    assert loop.trip_count == trips
    assert loop.kernel() is kernel


def test_loop_annotate_sets_and_clears_each_kind():
    _, kernel = _kernel(NESTED)
    loop = kernel.loop("t")
    loop.annotate("parallel")
    loop.annotate("unroll", 4)
    loop.annotate("x.note", "tile")
    assert loop.parallel is not None and loop.unroll_factor == 4
    assert str(loop).startswith(
        'loop.for %t = 0 to 2 step 1 {name = "t", parallel, unroll = 4, x.note = "tile"}'
    )
    loop.annotate("parallel", False)
    loop.annotate("unroll", False)
    assert loop.parallel is None and loop.unroll_factor == 1
